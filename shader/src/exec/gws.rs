//! The `ds_gws_*` instructions on the queue's [`Gws`](crate::gws::Gws): semaphores and barriers
//! across workgroups. A wave that must wait stays at its instruction ([`Flow::Wait`]) and tries
//! again when its turn comes, so the other waves, of its group and of others, go on meanwhile.
//!
//! The value an instruction takes (the init value, a bulk release's count, a barrier's members
//! minus one) is its data VGPR in the first active lane, as LLVM's `llvm.amdgcn.ds.gws.*`
//! intrinsics assume of a uniform operand; lane 0 when no lane is active.

use super::operand::vreg_range;
use super::{Cx, ExecError, ExecResult, Flow};
use crate::gws::{Gate, RESOURCES};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op, Operand};
use crate::wave::{Wave, M0};

/// Whether `op` is a GWS instruction, and which of them the core runs.
pub fn implements(op: Op) -> bool {
    matches!(op, Op::DsGwsInit | Op::DsGwsSemaV | Op::DsGwsSemaBr | Op::DsGwsSemaP | Op::DsGwsBarrier)
}

fn is_gws(op: Op) -> bool {
    implements(op) || op == Op::DsGwsSemaReleaseAll
}

/// Runs `inst` if it is a GWS instruction.
pub fn exec(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> Option<ExecResult> {
    is_gws(inst.op).then(|| run(w, inst, cx))
}

fn run(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    if inst.op == Op::DsGwsSemaReleaseAll {
        // It wakes every wave waiting on the semaphore without taking a count, which needs the
        // waiters' identities; no ROCm library or kfdtest shader uses it.
        return Err(ExecError::Unimplemented("GWS sema_release_all".into()));
    }
    let Some(gws) = cx.gws else {
        return Err(ExecError::Invalid(
            "a GWS instruction on a queue that holds no GWS (AMDKFD_IOC_ALLOC_QUEUE_GWS gives them)".into(),
        ));
    };
    let id = ((w.sreg(M0) >> 16) & 63).wrapping_add(inst.mods.offset as u32) as usize % RESOURCES;
    let flow = |gate| match gate {
        Gate::Pass => Flow::Next,
        Gate::Wait(_) => Flow::Wait,
    };
    Ok(match inst.op {
        Op::DsGwsInit => {
            gws.init(id, data(w, inst)?);
            Flow::Next
        }
        Op::DsGwsSemaV => {
            gws.release(id, 1);
            Flow::Next
        }
        Op::DsGwsSemaBr => {
            gws.release(id, data(w, inst)?);
            Flow::Next
        }
        Op::DsGwsSemaP => flow(gws.acquire(id)),
        Op::DsGwsBarrier => {
            let gate = gws.barrier(id, data(w, inst)?, w.gws_round);
            w.gws_round = match gate {
                Gate::Wait(round) => round,
                Gate::Pass => None,
            };
            flow(gate)
        }
        _ => unreachable!("is_gws"),
    })
}

/// The instruction's data VGPR in the first active lane (lane 0 when none is).
fn data(w: &Wave, inst: &Instruction) -> ExecResult<u32> {
    let Some(Operand::Vgpr { index, .. }) = inst.operand(Field::Addr) else {
        return Err(ExecError::Invalid("no data register".into()));
    };
    let r = vreg_range(w.v.len(), index, 1, "v")?;
    let lane = w.exec().trailing_zeros() as usize % 64;
    Ok(w.v[r][lane])
}

#[cfg(test)]
#[path = "gws_tests.rs"]
mod tests;
