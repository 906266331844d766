//! VALU packed operations.

use super::Handler;
use crate::isa::Op;

/// The handler of `op`, if this family implements it.
pub(super) fn handler(op: Op) -> Option<Handler> {
    let _ = op;
    None
}
