//! VALU integer, bit and move operations.

use super::{binary, unary, Handler};
use crate::exec::operand::Ty::B32;
use crate::isa::Op;

/// The handler of `op`, if this family implements it.
pub(super) fn handler(op: Op) -> Option<Handler> {
    Some(match op {
        Op::VMovB32 => |w, i, cx| unary(w, i, cx, B32, B32, |a| a),
        Op::VAddU32 => |w, i, cx| binary(w, i, cx, [B32, B32], B32, |a, b| (a as u32).wrapping_add(b as u32).into()),
        _ => return None,
    })
}
