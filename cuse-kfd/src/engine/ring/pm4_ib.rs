//! The PM4 program of an AQL vendor packet of format `AMD_AQL_FORMAT_PM4_IB`: how ROCr runs PM4
//! on an AQL queue of a gfx9 or later GPU.
//!
//! ROCR-Runtime (tag rocm-5.2.3) sends it from `AqlQueue::ExecutePM4`
//! (src/core/runtime/amd_aql_queue.cpp), which `GpuAgent::InvalidateCodeCaches`
//! (src/core/runtime/amd_gpu_agent.cpp) calls on its utility queue once the loader has copied a
//! code object to the GPU (src/core/runtime/amd_loader_context.cpp): the IB holds one
//! ACQUIRE_MEM invalidating the instruction, scalar and L2 caches (7 dwords on gfx9, 8 on
//! gfx10). The slot carries the INDIRECT_BUFFER command itself, built with
//! src/core/inc/amd_gpu_pm4.h: `PM4_HDR(INDIRECT_BUFFER, 4)`, IB_BASE_LO (address bits 31:2,
//! bits 1:0 zero), IB_BASE_HI (address bits 47:32) and IB_SIZE in dwords with IB_VALID; then
//! `dw_cnt_remain = 0xA`, eight zeroed reserved dwords and the completion signal. ROCr 5.2.3
//! leaves the completion signal null and spins until the read index passes the packet.
//!
//! Every field is checked before anything runs: the command is a 4-dword type-3
//! INDIRECT_BUFFER with IB_VALID and no other bit outside IB_SIZE (a chain from an AQL slot has
//! nothing to return to); the IB is dword aligned, non-empty, inside the 48-bit address space
//! and mapped in the process GPU VM at its first and its last dword; `dw_cnt_remain` is 10 and
//! the reserved dwords are zero. The IB then runs through the PM4 subset of [`super::pm4`],
//! nested IBs included, exactly as an IB called from a PM4 ring; a packet outside the subset
//! is a queue error naming its opcode.

use super::{step, Frame, Kind, Position, Stepped};
use crate::engine::fault::{QueueFault, ERROR_INVALID_PACKET_FORMAT};
use crate::engine::grid::Offload;
use crate::engine::mem::Mem;
use crate::engine::runner::Deadline;
use crate::engine::runner::Interrupt;
use std::sync::atomic::Ordering;
use uapi::aql::{AmdAqlPm4IbPacket, AMD_AQL_PM4_IB_DW_CNT_REMAIN};

/// The header of ROCr's jump command: type 3, count 2 (four dwords), opcode INDIRECT_BUFFER.
/// Bit 1 (compute shader type) may be either: ROCr sets it on gfx7 only.
const JUMP_HEADER: u32 = 3 << 30 | 2 << 16 | (super::pm4::INDIRECT_BUFFER as u32) << 8;
const SHADER_TYPE: u32 = 1 << 1;
const IB_SIZE_MASK: u32 = 0xF_FFFF;
const IB_VALID: u32 = 1 << 23;
/// IB_BASE_HI is 16 bits: GPU virtual addresses are 48 bits.
const IB_BASE_HI_MASK: u32 = 0xFFFF;

/// How far a PM4_IB program got in one call of [`IbRun::resume`].
#[derive(Debug, PartialEq, Eq)]
pub enum IbProgress {
    /// Every packet of the IB (and the IBs it called) ran.
    Finished,
    /// The time slice ended with packets left: go on in the next pass.
    Paused,
    /// A WAIT_REG_MEM is not true yet: poll it again later (the packets before it ran once).
    Blocked,
}

/// A PM4_IB packet's indirect buffer part way through: the IB stack, as on a PM4 ring.
#[derive(Debug)]
pub struct IbRun {
    base: u64,
    ibs: Vec<Frame>,
    /// The ring position the ring runner's step keeps; an AQL slot has none, so it stays 0.
    rptr: u64,
    ib_return: u64,
    resume: u64,
    /// The shader registers and dispatch of a SET_SH_REG/DISPATCH_DIRECT inside the IB.
    compute: super::compute::Compute,
}

fn bad(reason: String) -> QueueFault {
    QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, format!("PM4_IB packet: {reason}"))
}

/// Checks the packet `p` and returns its indirect buffer, ready to run.
pub fn start(
    mem: &mut Mem,
    p: &AmdAqlPm4IbPacket,
    gfx_target_version: u32,
    queue_id: u32,
) -> Result<IbRun, QueueFault> {
    if p.header.reserved != 0 {
        return Err(bad(format!("vendor header byte 3 is {:#04x}, not 0", p.header.reserved)));
    }
    let [head, lo, hi, ctl] = p.ib_jump_cmd;
    if head & !SHADER_TYPE != JUMP_HEADER {
        return Err(bad(format!(
            "its command {head:#010x} is not a 4-dword INDIRECT_BUFFER (header {JUMP_HEADER:#010x})"
        )));
    }
    if ctl & IB_VALID == 0 {
        return Err(bad("INDIRECT_BUFFER without its IB_VALID bit".into()));
    }
    let extra = ctl & !(IB_SIZE_MASK | IB_VALID);
    if extra != 0 {
        return Err(bad(format!(
            "INDIRECT_BUFFER control {ctl:#010x} sets bits {extra:#010x} (CHAIN, VMID or cache policy) ROCr never sets"
        )));
    }
    if lo & 3 != 0 {
        return Err(bad(format!("IB_BASE_LO {lo:#010x} is not dword aligned")));
    }
    if hi & !IB_BASE_HI_MASK != 0 {
        return Err(bad(format!("IB_BASE_HI {hi:#010x} is wider than 16 bits (GPU addresses are 48 bits)")));
    }
    let dwords = u64::from(ctl & IB_SIZE_MASK);
    if dwords == 0 {
        return Err(bad("an empty indirect buffer (IB_SIZE 0)".into()));
    }
    if p.dw_cnt_remain != AMD_AQL_PM4_IB_DW_CNT_REMAIN {
        return Err(bad(format!(
            "dw_cnt_remain is {}, ROCr's layout has {AMD_AQL_PM4_IB_DW_CNT_REMAIN}",
            p.dw_cnt_remain
        )));
    }
    if let Some(i) = p.reserved.iter().position(|r| *r != 0) {
        return Err(bad(format!("reserved dword {i} is {:#010x}, not 0", p.reserved[i])));
    }
    let base = u64::from(lo) | u64::from(hi) << 32;
    let last = base + (dwords - 1) * 4;
    for at in [base, last] {
        if let Err(e) = mem.load_u32(at, Ordering::Acquire) {
            return Err(bad(format!("its indirect buffer of {dwords} dwords at {base:#x} is not readable: {e}")));
        }
    }
    log::debug!("PM4_IB packet: an indirect buffer of {dwords} dwords at {base:#x}");
    Ok(IbRun {
        base,
        ibs: vec![Frame { base, dwords, pos: 0 }],
        rptr: 0,
        ib_return: 0,
        resume: 0,
        compute: super::compute::Compute::new(gfx_target_version, queue_id),
    })
}

impl IbRun {
    /// Runs packets of the IB until it ends, a poll blocks, a dispatch waits for the shader
    /// workers (`offload`) or `deadline` passes (after at least one packet). Interrupts that
    /// RELEASE_MEM packets and dispatches raise are appended to `interrupts`.
    pub fn resume(
        &mut self,
        mem: &mut Mem,
        deadline: Deadline,
        interrupts: &mut Vec<Interrupt>,
        offload: Option<Offload>,
    ) -> Result<IbProgress, QueueFault> {
        let base = self.base;
        let context = |f: QueueFault| match f {
            QueueFault::Invalid { code, reason } => {
                QueueFault::invalid(code, format!("in the indirect buffer of a PM4_IB packet at {base:#x}: {reason}"))
            }
            vm => vm,
        };
        let mut ran = false;
        while !self.ibs.is_empty() {
            if ran && deadline.passed() {
                return Ok(IbProgress::Paused);
            }
            let at = Position { ibs: &mut self.ibs, rptr: &mut self.rptr, ib_return: &mut self.ib_return };
            // With an IB on the stack, step reads only IBs: the ring arguments are unused.
            let stepped = step(Kind::Pm4, at, (&mut self.resume, &mut self.compute, offload), deadline, 0, mem, 0, 0);
            interrupts.append(&mut self.compute.interrupts);
            match stepped.map_err(context)? {
                Stepped::Ran(int) => interrupts.extend(int),
                Stepped::Blocked => return Ok(IbProgress::Blocked),
                // A dispatch that goes on in the next pass.
                Stepped::Sliced => return Ok(IbProgress::Paused),
                Stepped::Idle => return Err(bad("the IB stack ended without returning".into())),
            }
            ran = true;
        }
        Ok(IbProgress::Finished)
    }
}
