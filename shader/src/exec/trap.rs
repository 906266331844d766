//! Trap entry (s_trap) and return (s_rfe_b64).
//!
//! The hardware, on s_trap (Vega and MI200 ISA manuals, S_TRAP; RDNA2 ISA guide, the same):
//! saves the PC of the s_trap itself, not of the next instruction, in ttmp0 (PC[31:0]) and
//! ttmp1 (PC[47:32] in 15:0, the trap id in 23:16, HostTrap in 24, PCRewind above: 0 for an
//! s_trap), sets STATUS.PRIV and jumps to TBA. On amdkfd the hardware's TBA is amdkfd's own
//! first-level (CWSR) handler, which passes a trap on to the handler the process installed
//! with AMDKFD_IOC_SET_TRAP_HANDLER with ttmp12 = STATUS and ttmp14:15 = TMA (linux v6.1
//! drivers/gpu/drm/amd/amdkfd/cwsr_trap_handler_gfx9.asm and _gfx10.asm, L_FETCH_2ND_TRAP; the
//! same "ABI between first and second level trap handler" is written down in ROCR-Runtime
//! rocm-5.2.3 src/core/inc/amd_gpu_shaders.h, above its trap handlers). The device has no first
//! level of its own, so a wave enters the process's handler directly, in the state that
//! handler is written for. The SPI-initialised debug ttmps (ttmp6-11) stay as they were: no
//! debugger is attached.

use super::{ExecError, ExecResult, Flow};
use crate::wave::{Wave, TTMP0};

/// ttmp registers by number.
const TTMP1: u8 = TTMP0 + 1;
const TTMP12: u8 = TTMP0 + 12;
const TTMP14: u8 = TTMP0 + 14;

/// PCs are 48 bits: s_rfe_b64 ignores the bits above (ROCr's handler returns with the trap id
/// still in ttmp1[23:16]).
const PC_MASK: u64 = 0xffff_ffff_ffff;

/// s_trap `id` at `pc`: enters the wave's trap handler, or without one is the queue error the
/// caller reports ([`ExecError::Trap`]).
pub fn enter(w: &mut Wave, id: u8, pc: u64, status: u32) -> ExecResult {
    let Some(h) = w.trap else {
        return Err(ExecError::Trap(id));
    };
    if w.in_trap {
        return Err(ExecError::Invalid(format!("s_trap {id} inside the trap handler: the core does not nest traps")));
    }
    w.set_sreg(TTMP0, pc as u32);
    w.set_sreg(TTMP1, (pc >> 32) as u32 & 0xffff | u32::from(id) << 16);
    w.set_sreg(TTMP12, status);
    w.set_sreg64(TTMP14, h.tma);
    w.in_trap = true;
    w.pc = h.tba;
    Ok(Flow::Next)
}

/// s_rfe_b64: leaves the trap handler for `to` (STATUS.PRIV = 0, PC = S0).
pub fn ret(w: &mut Wave, to: u64) -> ExecResult {
    if !w.in_trap {
        return Err(ExecError::Invalid("s_rfe_b64 outside a trap handler".into()));
    }
    w.in_trap = false;
    w.pc = to & PC_MASK;
    Ok(Flow::Next)
}
