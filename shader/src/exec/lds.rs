//! DS: LDS loads, stores, atomics and the cross-lane DS operations (ds_bpermute, ds_swizzle).

use super::{unimplemented, Cx, ExecResult};
use crate::isa::{Instruction, Op};
use crate::wave::Wave;

/// Whether this module runs `op`.
pub fn implements(op: Op) -> bool {
    let _ = op;
    false
}

pub fn exec(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let _ = (w, cx);
    Err(match inst.op {
        _ => unimplemented(),
    })
}
