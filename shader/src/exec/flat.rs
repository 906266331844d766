//! FLAT, GLOBAL and SCRATCH: per-lane memory accesses by 64-bit address. FLAT addresses are
//! checked against the LDS and private apertures first; GLOBAL ones go to memory.

use super::operand::vreg_range;
use super::{unimplemented, Cx, ExecError, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op, Operand};
use crate::wave::Wave;

/// Runs one memory instruction.
type Handler = fn(&mut Wave, &Instruction, &mut Cx) -> ExecResult;

fn handler(op: Op) -> Option<Handler> {
    Some(match op {
        Op::GlobalStoreDword => |w, i, cx| {
            let addrs = global_addresses(w, i)?;
            let Some(Operand::Vgpr { index, .. }) = i.operand(Field::Data0) else {
                return Err(ExecError::Invalid("no data register".into()));
            };
            let r = vreg_range(w.v.len(), index, 1, "v")?;
            for l in Wave::lanes(w.exec()) {
                cx.mem.write(addrs[l], &w.v[r][l].to_le_bytes())?;
            }
            Ok(Flow::Next)
        },
        _ => return None,
    })
}

/// Every lane's address of a GLOBAL instruction: saddr (an SGPR pair) + the lane's 32-bit
/// offset VGPR, or the lane's 64-bit address VGPR pair when saddr is off; plus the offset.
fn global_addresses(w: &Wave, inst: &Instruction) -> Result<[u64; 64], ExecError> {
    let mut out = [0u64; 64];
    let off = i64::from(inst.mods.offset);
    let Some(Operand::Vgpr { index, .. }) = inst.operand(Field::Addr) else {
        return Err(ExecError::Invalid("no address register".into()));
    };
    match inst.operand(Field::Saddr) {
        Some(Operand::Sgpr { index: s, .. }) => {
            let base = w.sreg64(s);
            let r = vreg_range(w.v.len(), index, 1, "v")?;
            for (l, o) in out.iter_mut().enumerate() {
                *o = base.wrapping_add(u64::from(w.v[r][l])).wrapping_add_signed(off);
            }
        }
        _ => {
            let r = vreg_range(w.v.len(), index, 2, "v")?;
            for (l, o) in out.iter_mut().enumerate() {
                *o = (u64::from(w.v[r][l]) | u64::from(w.v[r + 1][l]) << 32).wrapping_add_signed(off);
            }
        }
    }
    Ok(out)
}

/// Whether this module runs `op`.
pub fn implements(op: Op) -> bool {
    handler(op).is_some()
}

pub fn exec(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let h = handler(inst.op).ok_or_else(unimplemented)?;
    h(w, inst, cx)
}
