//! MUBUF: buffer loads, stores and atomics through a buffer resource (V#), including the swizzled private segment of -O0 code.

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
