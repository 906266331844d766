//! SMEM: scalar memory loads (s_load, s_buffer_load), stores, atomics, cache and time operations.

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
