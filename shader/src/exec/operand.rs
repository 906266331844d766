//! Reading scalar operands and constants, and the apertures that give FLAT addresses meaning.

use super::{ExecError, ExecResult};
use crate::isa::{InlineFloat, Operand, Special};
use crate::wave::Wave;

/// Where the LDS and private (scratch) apertures sit in the flat address space, as the device's
/// GET_PROCESS_APERTURES reports them. An aperture whose limit is not above its base is absent.
///
/// A private address (a FLAT address in the private aperture, a SCRATCH offset) is an offset
/// into the lane's private segment; the wave's scratch backing is at its FLAT_SCRATCH register
/// (s[102:103]), which the kernel prologue sets from the flat scratch init and scratch wave
/// offset SGPRs the launcher provides (LLVM AMDGPUUsage "Flat Scratch", GFX9), and its lanes
/// interleave by dword. The wave's share is the per-lane private size times the wave size; like
/// the hardware, the core does not bound private accesses by it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Apertures {
    pub shared_base: u64,
    pub shared_limit: u64,
    pub private_base: u64,
    pub private_limit: u64,
    /// The device runs with SRAM ECC on (target id `gfx90a:sramecc+`): a d16 load then writes
    /// the whole register, zeroing the half it does not load, instead of keeping it (LLVM
    /// GCNSubtarget `d16PreservesUnusedBits` is false with SRAM ECC; the CDNA ISA manuals: on
    /// chips with ECC, D16 and D16_HI loads fill the unused half with zero).
    pub sramecc: bool,
}

/// How a constant operand is read: its width and whether it is floating point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// 16-bit (integer or f16): inline floats are f16 bits, a literal its low half.
    B16,
    /// 32-bit (integer or f32): inline floats are f32 bits.
    B32,
    /// 64-bit integer: a literal is zero-extended.
    I64,
    /// 64-bit float: inline floats are f64 bits, a literal is the high half.
    F64,
}

/// The value of an inline or literal constant as an operand of type `ty`, `None` for operands
/// that are not constants.
pub fn constant(op: Operand, ty: Ty) -> Option<u64> {
    Some(match op {
        Operand::Int(i) => match ty {
            Ty::B16 => u64::from(i as i16 as u16),
            Ty::B32 => u64::from(i as i32 as u32),
            Ty::I64 | Ty::F64 => i as i64 as u64,
        },
        Operand::Float(f) => float_bits(f, ty),
        Operand::Literal(l) => match ty {
            Ty::B16 => u64::from(l & 0xffff),
            Ty::B32 | Ty::I64 => u64::from(l),
            Ty::F64 => u64::from(l) << 32,
        },
        Operand::Imm(v) => u64::from(v),
        _ => return None,
    })
}

/// The bits of inline constant `f` as `ty`. 1/(2*pi) has fixed encodings per width (the ISA
/// manuals list them), the others are exact in every width.
fn float_bits(f: InlineFloat, ty: Ty) -> u64 {
    match (f, ty) {
        (InlineFloat::InvTwoPi, Ty::B16) => 0x3118,
        (InlineFloat::InvTwoPi, Ty::B32) => 0x3e22_f983,
        (InlineFloat::InvTwoPi, Ty::I64 | Ty::F64) => 0x3fc4_5f30_6dc9_c882,
        (_, Ty::B16) => u64::from(crate::fp::f32_to_f16(f.value() as f32)),
        (_, Ty::B32) => u64::from((f.value() as f32).to_bits()),
        (_, Ty::I64 | Ty::F64) => f.value().to_bits(),
    }
}

/// Reads a machine-state source.
pub fn special(w: &Wave, s: Special, ap: &Apertures) -> ExecResult<u64> {
    Ok(match s {
        // The aperture sources give the high half of the 64-bit base/limit (the low half of a
        // flat aperture address is the offset).
        Special::SharedBase => ap.shared_base >> 32,
        Special::SharedLimit => ap.shared_limit >> 32,
        Special::PrivateBase => ap.private_base >> 32,
        Special::PrivateLimit => ap.private_limit >> 32,
        Special::Vccz => u64::from(w.vcc() == 0),
        Special::Execz => u64::from(w.exec() == 0),
        Special::Scc => u64::from(w.scc),
        Special::PopsExitingWaveId | Special::LdsDirect => {
            return Err(ExecError::Unimplemented(format!("source {s:?}")));
        }
    })
}

/// Reads a 32-bit scalar source (an SGPR, a constant, a special source).
pub fn read_s32(w: &Wave, op: Operand, ty: Ty, ap: &Apertures) -> ExecResult<u32> {
    match op {
        Operand::Sgpr { index, .. } => Ok(w.sreg(index)),
        Operand::Special(s) => special(w, s, ap).map(|v| v as u32),
        Operand::Vgpr { .. } | Operand::Agpr { .. } | Operand::None | Operand::Off => {
            Err(ExecError::Invalid(format!("{op:?} is not a scalar source")))
        }
        c => Ok(constant(c, ty).expect("a constant") as u32),
    }
}

/// Reads a 64-bit scalar source.
pub fn read_s64(w: &Wave, op: Operand, ty: Ty, ap: &Apertures) -> ExecResult<u64> {
    match op {
        Operand::Sgpr { index, .. } => Ok(w.sreg64(index)),
        Operand::Special(s) => special(w, s, ap),
        Operand::Vgpr { .. } | Operand::Agpr { .. } | Operand::None | Operand::Off => {
            Err(ExecError::Invalid(format!("{op:?} is not a scalar source")))
        }
        c => Ok(constant(c, ty).expect("a constant")),
    }
}

/// The first register of a scalar destination.
pub fn sdst(op: Operand) -> ExecResult<u8> {
    match op {
        Operand::Sgpr { index, .. } => Ok(index),
        _ => Err(ExecError::Invalid(format!("{op:?} is not a scalar destination"))),
    }
}

/// Checks that vector registers `index..index+count` exist in `file` (the wave's VGPRs or
/// AGPRs) and returns the first index.
pub fn vreg_range(file_len: usize, index: u8, count: u8, what: &str) -> ExecResult<usize> {
    let end = usize::from(index) + usize::from(count.max(1));
    if end > file_len {
        return Err(ExecError::Invalid(format!(
            "{what}{index} (+{}) is past the {file_len} registers the kernel allocated",
            count.max(1) - 1
        )));
    }
    Ok(usize::from(index))
}
