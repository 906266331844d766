//! SMEM: scalar memory loads (s_load, s_buffer_load), stores, atomics, cache and time operations.
//!
//! Addressing (Vega ISA manual, "Scalar Memory Operations"): the address is the base (an SGPR
//! pair, or the base of the buffer resource in an SGPR quad) plus the immediate offset (21-bit
//! signed on gfx9, as the decoder gives it) plus the SGPR offset; the low two bits are ignored.
//! Scalar buffer accesses use only the resource's base, stride and num_records: stride only
//! bounds the buffer (num_records * stride bytes, or num_records bytes when stride is 0), and a
//! dword outside it reads 0 and is not written.

use super::operand::sdst;
use super::{unimplemented, Cx, ExecError, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op, Operand};
use crate::mem::AtomicOp;
use crate::wave::Wave;
use std::sync::OnceLock;
use std::time::Instant;

/// The rate of s_memtime's counter (the shader clock): nanoseconds since the core first read
/// the time.
pub const MEMTIME_HZ: u64 = 1_000_000_000;
/// The rate of s_memrealtime's counter (the constant "REFCLK"). Kernels convert it with the
/// device's reported timestamp frequency (HIP's wall clock rate is ROCr's
/// HSA_AMD_AGENT_INFO_TIMESTAMP_FREQUENCY), so the device must report this rate.
pub const MEMREALTIME_HZ: u64 = 100_000_000;

/// What an SMEM opcode does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Loads `dwords` dwords (from a buffer resource if `buffer`).
    Load {
        dwords: u8,
        buffer: bool,
    },
    Store {
        dwords: u8,
        buffer: bool,
    },
    /// An atomic on a dword (`x2`: a qword).
    Atomic {
        op: AtomicOp,
        x2: bool,
        buffer: bool,
    },
    /// s_memtime, s_memrealtime: a 64-bit counter at `hz`.
    Time {
        hz: u64,
    },
    /// Cache maintenance and the ATC probe: the core reads and writes [`crate::mem::Memory`]
    /// directly; it has no scalar cache that could hold stale or dirty lines, and no TLB to
    /// probe.
    NoOp,
}

fn kind(op: Op) -> Option<Kind> {
    use AtomicOp as A;
    let load = |dwords, buffer| Kind::Load { dwords, buffer };
    let store = |dwords, buffer| Kind::Store { dwords, buffer };
    let atomic = |op, x2, buffer| Kind::Atomic { op, x2, buffer };
    Some(match op {
        Op::SLoadDword => load(1, false),
        Op::SLoadDwordx2 => load(2, false),
        Op::SLoadDwordx4 => load(4, false),
        Op::SLoadDwordx8 => load(8, false),
        Op::SLoadDwordx16 => load(16, false),
        Op::SBufferLoadDword => load(1, true),
        Op::SBufferLoadDwordx2 => load(2, true),
        Op::SBufferLoadDwordx4 => load(4, true),
        Op::SBufferLoadDwordx8 => load(8, true),
        Op::SBufferLoadDwordx16 => load(16, true),
        Op::SStoreDword => store(1, false),
        Op::SStoreDwordx2 => store(2, false),
        Op::SStoreDwordx4 => store(4, false),
        Op::SBufferStoreDword => store(1, true),
        Op::SBufferStoreDwordx2 => store(2, true),
        Op::SBufferStoreDwordx4 => store(4, true),
        Op::SMemtime => Kind::Time { hz: MEMTIME_HZ },
        Op::SMemrealtime => Kind::Time { hz: MEMREALTIME_HZ },
        Op::SDcacheInv
        | Op::SDcacheWb
        | Op::SDcacheInvVol
        | Op::SDcacheWbVol
        | Op::SDcacheDiscard
        | Op::SDcacheDiscardX2
        | Op::SAtcProbe
        | Op::SAtcProbeBuffer => Kind::NoOp,
        Op::SAtomicSwap => atomic(A::Swap, false, false),
        Op::SAtomicCmpswap => atomic(A::CmpSwap, false, false),
        Op::SAtomicAdd => atomic(A::Add, false, false),
        Op::SAtomicSub => atomic(A::Sub, false, false),
        Op::SAtomicSmin => atomic(A::Smin, false, false),
        Op::SAtomicUmin => atomic(A::Umin, false, false),
        Op::SAtomicSmax => atomic(A::Smax, false, false),
        Op::SAtomicUmax => atomic(A::Umax, false, false),
        Op::SAtomicAnd => atomic(A::And, false, false),
        Op::SAtomicOr => atomic(A::Or, false, false),
        Op::SAtomicXor => atomic(A::Xor, false, false),
        Op::SAtomicInc => atomic(A::Inc, false, false),
        Op::SAtomicDec => atomic(A::Dec, false, false),
        Op::SAtomicSwapX2 => atomic(A::Swap, true, false),
        Op::SAtomicCmpswapX2 => atomic(A::CmpSwap, true, false),
        Op::SAtomicAddX2 => atomic(A::Add, true, false),
        Op::SAtomicSubX2 => atomic(A::Sub, true, false),
        Op::SAtomicSminX2 => atomic(A::Smin, true, false),
        Op::SAtomicUminX2 => atomic(A::Umin, true, false),
        Op::SAtomicSmaxX2 => atomic(A::Smax, true, false),
        Op::SAtomicUmaxX2 => atomic(A::Umax, true, false),
        Op::SAtomicAndX2 => atomic(A::And, true, false),
        Op::SAtomicOrX2 => atomic(A::Or, true, false),
        Op::SAtomicXorX2 => atomic(A::Xor, true, false),
        Op::SAtomicIncX2 => atomic(A::Inc, true, false),
        Op::SAtomicDecX2 => atomic(A::Dec, true, false),
        Op::SBufferAtomicSwap => atomic(A::Swap, false, true),
        Op::SBufferAtomicCmpswap => atomic(A::CmpSwap, false, true),
        Op::SBufferAtomicAdd => atomic(A::Add, false, true),
        Op::SBufferAtomicSub => atomic(A::Sub, false, true),
        Op::SBufferAtomicSmin => atomic(A::Smin, false, true),
        Op::SBufferAtomicUmin => atomic(A::Umin, false, true),
        Op::SBufferAtomicSmax => atomic(A::Smax, false, true),
        Op::SBufferAtomicUmax => atomic(A::Umax, false, true),
        Op::SBufferAtomicAnd => atomic(A::And, false, true),
        Op::SBufferAtomicOr => atomic(A::Or, false, true),
        Op::SBufferAtomicXor => atomic(A::Xor, false, true),
        Op::SBufferAtomicInc => atomic(A::Inc, false, true),
        Op::SBufferAtomicDec => atomic(A::Dec, false, true),
        Op::SBufferAtomicSwapX2 => atomic(A::Swap, true, true),
        Op::SBufferAtomicCmpswapX2 => atomic(A::CmpSwap, true, true),
        Op::SBufferAtomicAddX2 => atomic(A::Add, true, true),
        Op::SBufferAtomicSubX2 => atomic(A::Sub, true, true),
        Op::SBufferAtomicSminX2 => atomic(A::Smin, true, true),
        Op::SBufferAtomicUminX2 => atomic(A::Umin, true, true),
        Op::SBufferAtomicSmaxX2 => atomic(A::Smax, true, true),
        Op::SBufferAtomicUmaxX2 => atomic(A::Umax, true, true),
        Op::SBufferAtomicAndX2 => atomic(A::And, true, true),
        Op::SBufferAtomicOrX2 => atomic(A::Or, true, true),
        Op::SBufferAtomicXorX2 => atomic(A::Xor, true, true),
        Op::SBufferAtomicIncX2 => atomic(A::Inc, true, true),
        Op::SBufferAtomicDecX2 => atomic(A::Dec, true, true),
        // Not implemented: s_scratch_load/store (scratch through the scalar cache; LLVM never
        // emits them for gfx90a).
        _ => return None,
    })
}

/// Whether this module runs `op`.
pub fn implements(op: Op) -> bool {
    kind(op).is_some()
}

pub fn exec(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let what = || match inst.op {
        Op::SScratchLoadDword
        | Op::SScratchLoadDwordx2
        | Op::SScratchLoadDwordx4
        | Op::SScratchStoreDword
        | Op::SScratchStoreDwordx2
        | Op::SScratchStoreDwordx4 => ExecError::Unimplemented("scalar scratch access".into()),
        _ => unimplemented(),
    };
    match kind(inst.op).ok_or_else(what)? {
        Kind::Load { dwords, buffer } => load(w, inst, cx, dwords, buffer),
        Kind::Store { dwords, buffer } => store(w, inst, cx, dwords, buffer),
        Kind::Atomic { op, x2, buffer } => atomic(w, inst, cx, op, x2, buffer),
        Kind::Time { hz } => {
            let d = sdst(operand(inst, Field::D)?)?;
            w.set_sreg64(d, ticks(hz));
            Ok(Flow::Next)
        }
        Kind::NoOp => Ok(Flow::Next),
    }
}

/// A monotonic counter at `hz`, from the first time the core read it.
fn ticks(hz: u64) -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let ns = START.get_or_init(Instant::now).elapsed().as_nanos();
    (ns * u128::from(hz) / 1_000_000_000) as u64
}

fn operand(i: &Instruction, field: Field) -> ExecResult<Operand> {
    i.operand(field).ok_or_else(|| ExecError::Invalid(format!("no {field:?} operand")))
}

/// Where an access goes: the first byte and, for a buffer, how many bytes from there lie inside
/// the buffer.
struct Target {
    va: u64,
    /// Bytes from `va` to the end of the buffer (`u64::MAX` for a plain address).
    in_range: u64,
}

impl Target {
    /// Whether the dword at byte `at` from the start is inside the buffer.
    fn has(&self, at: u64) -> bool {
        at + 4 <= self.in_range
    }
}

/// The instruction's offset: the immediate plus the SGPR offset, as a 64-bit byte offset.
fn offset(w: &Wave, i: &Instruction) -> ExecResult<u64> {
    let imm = i64::from(i.mods.offset) as u64;
    Ok(match operand(i, Field::Off)? {
        Operand::Sgpr { index, .. } => imm.wrapping_add(u64::from(w.sreg(index))),
        Operand::Imm(_) => imm,
        op => return Err(ExecError::Invalid(format!("{op:?} is not an SMEM offset"))),
    })
}

/// The address of the access (Vega ISA, "Scalar Memory Operations": base + offset, the two low
/// bits ignored).
fn target(w: &Wave, i: &Instruction, buffer: bool) -> ExecResult<Target> {
    let base = sdst(operand(i, Field::Base)?)?;
    let off = offset(w, i)?;
    if !buffer {
        // An SGPR pair holds a 48-bit virtual address.
        let va = (w.sreg64(base) & ((1 << 48) - 1)).wrapping_add(off) & !3;
        return Ok(Target { va, in_range: u64::MAX });
    }
    // The buffer resource (V#): base [47:0], stride [61:48], num_records [95:64].
    let v0 = w.sreg64(base);
    let num_records = u64::from(w.sreg(base.wrapping_add(2) & 127));
    let stride = v0 >> 48 & 0x3fff;
    let size = if stride == 0 { num_records } else { num_records * stride };
    // The offset into the buffer is unsigned and 32-bit.
    let off = off & 0xffff_fffc;
    Ok(Target { va: (v0 & ((1 << 48) - 1)).wrapping_add(off), in_range: size.saturating_sub(off) })
}

fn load(w: &mut Wave, i: &Instruction, cx: &mut Cx, dwords: u8, buffer: bool) -> ExecResult {
    let t = target(w, i, buffer)?;
    let d = sdst(operand(i, Field::D)?)?;
    let n = u64::from(dwords);
    let mut data = vec![0u8; 4 * dwords as usize];
    // The dwords inside the buffer are a prefix: read them at once.
    let inside = (0..n).take_while(|k| t.has(4 * k)).count();
    if inside > 0 {
        cx.mem.read(t.va, &mut data[..4 * inside])?;
    }
    for (k, b) in data.chunks_exact(4).enumerate() {
        w.set_sreg(d.wrapping_add(k as u8) & 127, u32::from_le_bytes(b.try_into().expect("4 bytes")));
    }
    Ok(Flow::Next)
}

fn store(w: &mut Wave, i: &Instruction, cx: &mut Cx, dwords: u8, buffer: bool) -> ExecResult {
    let t = target(w, i, buffer)?;
    let d = sdst(operand(i, Field::D)?)?;
    let inside = (0..u64::from(dwords)).take_while(|k| t.has(4 * k)).count();
    let data: Vec<u8> = (0..inside).flat_map(|k| w.sreg(d.wrapping_add(k as u8) & 127).to_le_bytes()).collect();
    if !data.is_empty() {
        cx.mem.write(t.va, &data)?;
    }
    Ok(Flow::Next)
}

/// An atomic: DATA holds the operand (and, for cmpswap, the compare value after it); with glc
/// the old value is returned in DATA's first dword(s).
fn atomic(w: &mut Wave, i: &Instruction, cx: &mut Cx, op: AtomicOp, x2: bool, buffer: bool) -> ExecResult {
    let t = target(w, i, buffer)?;
    let d = sdst(operand(i, Field::D)?)?;
    let old = if x2 {
        if t.va % 8 != 0 {
            return Err(ExecError::Invalid(format!("64-bit atomic at {:#x}, not 8-byte aligned", t.va)));
        }
        let (src, cmp) = (w.sreg64(d), w.sreg64(d.wrapping_add(2) & 127));
        if t.has(0) && t.has(4) {
            cx.mem.atomic64(t.va, op, src, cmp)?
        } else {
            0
        }
    } else {
        let (src, cmp) = (w.sreg(d), w.sreg(d.wrapping_add(1) & 127));
        if t.has(0) {
            u64::from(cx.mem.atomic32(t.va, op, src, cmp)?)
        } else {
            0
        }
    };
    if i.mods.glc {
        if x2 {
            w.set_sreg64(d, old);
        } else {
            w.set_sreg(d, old as u32);
        }
    }
    Ok(Flow::Next)
}

#[cfg(test)]
mod tests;
