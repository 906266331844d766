//! The seam between the shader core and the memory it runs against.
//!
//! The core never owns global memory: every access of every lane goes through a [`Memory`]
//! (the device implements it over the process GPU VM). LDS and scratch are apertures the core
//! resolves first ([`crate::exec::Apertures`]); what reaches [`Memory`] is a GPU virtual address.

use std::ops::{BitAnd, BitOr, BitXor, Not};

/// Why an access failed: a GPU memory fault, reported by the device as its VM faults are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} of {len} bytes at {va:#x}: {reason}", if *.write { "write" } else { "read" })]
pub struct MemFault {
    pub va: u64,
    pub len: u64,
    pub write: bool,
    pub reason: String,
}

/// Read-modify-write operations of the memory atomics (global, flat, buffer and LDS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    Swap,
    /// Stores `src` if the old value equals `cmp`.
    CmpSwap,
    Add,
    Sub,
    Smin,
    Umin,
    Smax,
    Umax,
    And,
    Or,
    Xor,
    /// `old >= src ? 0 : old + 1`.
    Inc,
    /// `old == 0 || old > src ? src : old - 1`.
    Dec,
    AddF32,
    AddF64,
    MinF64,
    MaxF64,
    /// Two f16 adds, one per half.
    PkAddF16,
}

impl AtomicOp {
    /// The new 32-bit value from `old`, the operand `src` and (CmpSwap) the compare value.
    #[inline]
    pub fn apply32(self, old: u32, src: u32, cmp: u32) -> u32 {
        if self == AtomicOp::PkAddF16 {
            let lo = crate::fp::f16_add(old as u16, src as u16);
            let hi = crate::fp::f16_add((old >> 16) as u16, (src >> 16) as u16);
            return u32::from(lo) | u32::from(hi) << 16;
        }
        self.apply(old, src, cmp)
    }

    /// The new 64-bit value.
    #[inline]
    pub fn apply64(self, old: u64, src: u64, cmp: u64) -> u64 {
        self.apply(old, src, cmp)
    }

    /// Either width; a float operation reads the word as the float of its width (the decoder
    /// pairs AddF32 and PkAddF16 with 32 bits only, the F64 ones with 64).
    #[inline]
    fn apply<W: Word>(self, old: W, src: W, cmp: W) -> W {
        match self {
            AtomicOp::Swap => src,
            AtomicOp::CmpSwap => {
                if old == cmp {
                    src
                } else {
                    old
                }
            }
            AtomicOp::Add => old.wrapping_add(src),
            AtomicOp::Sub => old.wrapping_sub(src),
            AtomicOp::Smin => old.min_signed(src),
            AtomicOp::Umin => old.min(src),
            AtomicOp::Smax => old.max_signed(src),
            AtomicOp::Umax => old.max(src),
            AtomicOp::And => old & src,
            AtomicOp::Or => old | src,
            AtomicOp::Xor => old ^ src,
            AtomicOp::Inc => old.inc(src),
            AtomicOp::Dec => old.dec(src),
            AtomicOp::AddF32 | AtomicOp::AddF64 => old.add_float(src),
            AtomicOp::MinF64 => old.min_float(src),
            AtomicOp::MaxF64 => old.max_float(src),
            // Two f16 halves: apply32 adds them.
            AtomicOp::PkAddF16 => old,
        }
    }
}

/// A 32- or 64-bit word of an atomic (memory's and LDS's): the integer read-modify-writes are one
/// code at both widths, and the float ones read the word as the float of its width.
pub(crate) trait Word:
    Copy + Ord + BitAnd<Output = Self> + BitOr<Output = Self> + BitXor<Output = Self> + Not<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn wrapping_add(self, o: Self) -> Self;
    fn wrapping_sub(self, o: Self) -> Self;
    fn min_signed(self, o: Self) -> Self;
    fn max_signed(self, o: Self) -> Self;
    fn add_float(self, o: Self) -> Self;
    /// IEEE minNum, as [`crate::fp::min_f64`].
    fn min_float(self, o: Self) -> Self;
    fn max_float(self, o: Self) -> Self;
    /// Float equality: -0 == +0, NaN is unequal.
    fn eq_float(self, o: Self) -> bool;

    /// `old >= src ? 0 : old + 1`.
    #[inline]
    fn inc(self, src: Self) -> Self {
        if self >= src {
            Self::ZERO
        } else {
            self.wrapping_add(Self::ONE)
        }
    }

    /// `old == 0 || old > src ? src : old - 1`.
    #[inline]
    fn dec(self, src: Self) -> Self {
        if self == Self::ZERO || self > src {
            src
        } else {
            self.wrapping_sub(Self::ONE)
        }
    }
}

macro_rules! word {
    ($u:ty, $i:ty, $f:ty) => {
        impl Word for $u {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline]
            fn wrapping_add(self, o: Self) -> Self {
                <$u>::wrapping_add(self, o)
            }
            #[inline]
            fn wrapping_sub(self, o: Self) -> Self {
                <$u>::wrapping_sub(self, o)
            }
            #[inline]
            fn min_signed(self, o: Self) -> Self {
                (self as $i).min(o as $i) as $u
            }
            #[inline]
            fn max_signed(self, o: Self) -> Self {
                (self as $i).max(o as $i) as $u
            }
            #[inline]
            fn add_float(self, o: Self) -> Self {
                (<$f>::from_bits(self) + <$f>::from_bits(o)).to_bits()
            }
            // f32 -> f64 is exact, so the f64 IEEE min/max decides for f32 too.
            #[inline]
            fn min_float(self, o: Self) -> Self {
                let (a, b) = (f64::from(<$f>::from_bits(self)), f64::from(<$f>::from_bits(o)));
                (crate::fp::min_f64(a, b) as $f).to_bits()
            }
            #[inline]
            fn max_float(self, o: Self) -> Self {
                let (a, b) = (f64::from(<$f>::from_bits(self)), f64::from(<$f>::from_bits(o)));
                (crate::fp::max_f64(a, b) as $f).to_bits()
            }
            #[inline]
            fn eq_float(self, o: Self) -> bool {
                <$f>::from_bits(self) == <$f>::from_bits(o)
            }
        }
    };
}

word!(u32, i32, f32);
word!(u64, i64, f64);

/// Global memory as the shader core sees it: GPU virtual addresses of one process's GPU VM.
pub trait Memory {
    /// Copies `buf.len()` bytes at `va` out of memory.
    fn read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), MemFault>;
    /// Copies `data` into memory at `va`.
    fn write(&mut self, va: u64, data: &[u8]) -> Result<(), MemFault>;
    /// An atomic read-modify-write of the naturally aligned dword at `va`; returns the old value.
    fn atomic32(&mut self, va: u64, op: AtomicOp, src: u32, cmp: u32) -> Result<u32, MemFault>;
    /// An atomic read-modify-write of the naturally aligned qword at `va`; returns the old value.
    fn atomic64(&mut self, va: u64, op: AtomicOp, src: u64, cmp: u64) -> Result<u64, MemFault>;
}

/// A flat, growable memory for tests: `[base, base + len)` is mapped, everything else faults.
#[derive(Debug, Clone)]
pub struct Ram {
    pub base: u64,
    pub bytes: Vec<u8>,
}

impl Ram {
    pub fn new(base: u64, len: usize) -> Ram {
        Ram { base, bytes: vec![0; len] }
    }

    fn range(&self, va: u64, len: usize, write: bool) -> Result<std::ops::Range<usize>, MemFault> {
        let fault = || MemFault { va, len: len as u64, write, reason: "not mapped".into() };
        let off = va.checked_sub(self.base).ok_or_else(fault)? as usize;
        let end = off.checked_add(len).ok_or_else(fault)?;
        if end > self.bytes.len() {
            return Err(fault());
        }
        Ok(off..end)
    }

    pub fn u32_at(&self, va: u64) -> u32 {
        let r = self.range(va, 4, false).expect("mapped");
        u32::from_le_bytes(self.bytes[r].try_into().expect("4 bytes"))
    }

    pub fn set_u32(&mut self, va: u64, v: u32) {
        let r = self.range(va, 4, true).expect("mapped");
        self.bytes[r].copy_from_slice(&v.to_le_bytes());
    }
}

impl Memory for Ram {
    fn read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        let r = self.range(va, buf.len(), false)?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, va: u64, data: &[u8]) -> Result<(), MemFault> {
        let r = self.range(va, data.len(), true)?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }

    fn atomic32(&mut self, va: u64, op: AtomicOp, src: u32, cmp: u32) -> Result<u32, MemFault> {
        let r = self.range(va, 4, true)?;
        let old = u32::from_le_bytes(self.bytes[r.clone()].try_into().expect("4 bytes"));
        self.bytes[r].copy_from_slice(&op.apply32(old, src, cmp).to_le_bytes());
        Ok(old)
    }

    fn atomic64(&mut self, va: u64, op: AtomicOp, src: u64, cmp: u64) -> Result<u64, MemFault> {
        let r = self.range(va, 8, true)?;
        let old = u64::from_le_bytes(self.bytes[r.clone()].try_into().expect("8 bytes"));
        self.bytes[r].copy_from_slice(&op.apply64(old, src, cmp).to_le_bytes());
        Ok(old)
    }
}
