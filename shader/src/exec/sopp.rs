//! SOPP: program control (branches, barriers, waits, messages, end of program).

use super::{unimplemented, ExecError, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op, Operand};
use crate::wave::{Wave, M0};

/// The 16-bit immediate.
fn simm16(inst: &Instruction) -> u16 {
    match inst.operand(Field::Imm) {
        Some(Operand::Imm(v)) => v as u16,
        _ => 0,
    }
}

/// The SOPP operations this module runs.
fn flow_of(op: Op) -> Option<fn(&mut Wave, u16, u64) -> ExecResult> {
    Some(match op {
        Op::SEndpgm => |w, _, _| {
            w.done = true;
            Ok(Flow::End)
        },
        // Waits and hints: memory is complete when an instruction returns, and one instruction
        // runs at a time.
        Op::SNop
        | Op::SWaitcnt
        | Op::SSetprio
        | Op::SIcacheInv
        | Op::SIncperflevel
        | Op::SDecperflevel
        | Op::STtracedata
        // gfx10: s_clause groups the next memory instructions, s_inst_prefetch and
        // s_waitcnt_depctr tune the instruction and dependency pipelines: hints only.
        | Op::SClause
        | Op::SInstPrefetch
        | Op::SWaitcntDepctr => |_, _, _| Ok(Flow::Next),
        // gfx10 MODE writes (RDNA2 ISA guide, S_ROUND_MODE / S_DENORM_MODE): SIMM16[3:0] is
        // MODE.FP_ROUND [3:0] or MODE.FP_DENORM [7:4].
        Op::SRoundMode => |w, imm, _| {
            w.mode = (w.mode & !0xf) | u32::from(imm & 0xf);
            Ok(Flow::Next)
        },
        Op::SDenormMode => |w, imm, _| {
            w.mode = (w.mode & !0xf0) | u32::from(imm & 0xf) << 4;
            Ok(Flow::Next)
        },
        // LLVM pads the code after the last kernel with s_code_end (AMDGPUAsmPrinter
        // emitEndOfAsmFile): a wave reaching it ran past the end of its program.
        Op::SCodeEnd => |_, _, _| {
            Err(ExecError::Invalid("s_code_end is the padding after the last kernel: the wave ran past its program".into()))
        },
        Op::SBarrier => |_, _, _| Ok(Flow::Barrier),
        Op::SSleep => |_, imm, _| Ok(Flow::Sleep(u32::from(imm & 0x7f))),
        // SIMM16[7:0] is the trap id.
        Op::STrap => |w, imm, pc| {
            let status = super::salu::hwreg::status(w);
            super::trap::enter(w, imm as u8, pc, status)
        },
        Op::SSendmsg => |w, imm, _| sendmsg(w, imm),
        Op::SBranch => |w, imm, pc| branch(w, true, imm, pc),
        Op::SCbranchScc0 => |w, imm, pc| branch(w, !w.scc, imm, pc),
        Op::SCbranchScc1 => |w, imm, pc| branch(w, w.scc, imm, pc),
        Op::SCbranchVccz => |w, imm, pc| branch(w, w.vcc() == 0, imm, pc),
        Op::SCbranchVccnz => |w, imm, pc| branch(w, w.vcc() != 0, imm, pc),
        Op::SCbranchExecz => |w, imm, pc| branch(w, w.exec() == 0, imm, pc),
        Op::SCbranchExecnz => |w, imm, pc| branch(w, w.exec() != 0, imm, pc),
        // No debugger is attached: the debug branches are never taken.
        Op::SCbranchCdbgsys | Op::SCbranchCdbguser | Op::SCbranchCdbgsysOrUser | Op::SCbranchCdbgsysAndUser => {
            |_, _, _| Ok(Flow::Next)
        }
        _ => return None,
    })
}

/// A relative branch: the target is the next instruction plus `simm16` dwords.
fn branch(w: &mut Wave, taken: bool, imm: u16, pc: u64) -> ExecResult {
    if taken {
        w.pc = pc.wrapping_add(4).wrapping_add_signed(i64::from(imm as i16) * 4);
    }
    Ok(Flow::Next)
}

/// s_sendmsg: the message id is bits 3:0 (LLVM AMDGPUUsage / SIDefines.h: MSG_INTERRUPT = 1,
/// MSG_GS = 2, MSG_GS_DONE = 3, MSG_SYSMSG = 15).
fn sendmsg(w: &mut Wave, imm: u16) -> ExecResult {
    match imm & 0xf {
        1 => Ok(Flow::Interrupt(w.sreg(M0))),
        id => Err(ExecError::Unimplemented(format!("message id {id}"))),
    }
}

/// Whether this module runs `op`.
pub fn implements(op: Op) -> bool {
    flow_of(op).is_some()
}

/// Runs one SOPP instruction at `pc`.
pub fn exec(w: &mut Wave, inst: &Instruction, pc: u64) -> ExecResult {
    let f = flow_of(inst.op).ok_or_else(unimplemented)?;
    f(w, simm16(inst), pc)
}
