//! SALU: SOP1, SOP2, SOPK and SOPC (scalar arithmetic, bit operations, EXEC manipulation,
//! compares into SCC, and the PC operations s_getpc/s_setpc/s_swappc).

use super::operand::{read_s32, sdst, Ty};
use super::{unimplemented, Cx, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op};
use crate::wave::Wave;

/// Runs one scalar ALU instruction.
type Handler = fn(&mut Wave, &Instruction, &mut Cx) -> ExecResult;

fn handler(op: Op) -> Option<Handler> {
    Some(match op {
        Op::SMovB32 => |w, i, cx| {
            let v = read_s32(w, i.operand(Field::S0).expect("s_mov has a source"), Ty::B32, &cx.apertures)?;
            w.set_sreg(sdst(i.operand(Field::D).expect("s_mov has a destination"))?, v);
            Ok(Flow::Next)
        },
        _ => return None,
    })
}

/// Whether this module runs `op`.
pub fn implements(op: Op) -> bool {
    handler(op).is_some()
}

pub fn exec(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let h = handler(inst.op).ok_or_else(unimplemented)?;
    h(w, inst, cx)
}
