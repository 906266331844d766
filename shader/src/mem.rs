//! The seam between the shader core and the memory it runs against.
//!
//! The core never owns global memory: every access of every lane goes through a [`Memory`]
//! (the device implements it over the process GPU VM). LDS and scratch are apertures the core
//! resolves first ([`crate::exec::Apertures`]); what reaches [`Memory`] is a GPU virtual address.

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
    pub fn apply32(self, old: u32, src: u32, cmp: u32) -> u32 {
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
            AtomicOp::Smin => (old as i32).min(src as i32) as u32,
            AtomicOp::Umin => old.min(src),
            AtomicOp::Smax => (old as i32).max(src as i32) as u32,
            AtomicOp::Umax => old.max(src),
            AtomicOp::And => old & src,
            AtomicOp::Or => old | src,
            AtomicOp::Xor => old ^ src,
            AtomicOp::Inc => {
                if old >= src {
                    0
                } else {
                    old + 1
                }
            }
            AtomicOp::Dec => {
                if old == 0 || old > src {
                    src
                } else {
                    old - 1
                }
            }
            AtomicOp::AddF32 => (f32::from_bits(old) + f32::from_bits(src)).to_bits(),
            AtomicOp::PkAddF16 => {
                let lo = crate::fp::f16_add(old as u16, src as u16);
                let hi = crate::fp::f16_add((old >> 16) as u16, (src >> 16) as u16);
                u32::from(lo) | u32::from(hi) << 16
            }
            // 64-bit operations on a 32-bit word do not exist; the decoder never pairs them.
            AtomicOp::AddF64 | AtomicOp::MinF64 | AtomicOp::MaxF64 => old,
        }
    }

    /// The new 64-bit value.
    pub fn apply64(self, old: u64, src: u64, cmp: u64) -> u64 {
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
            AtomicOp::Smin => (old as i64).min(src as i64) as u64,
            AtomicOp::Umin => old.min(src),
            AtomicOp::Smax => (old as i64).max(src as i64) as u64,
            AtomicOp::Umax => old.max(src),
            AtomicOp::And => old & src,
            AtomicOp::Or => old | src,
            AtomicOp::Xor => old ^ src,
            AtomicOp::Inc => {
                if old >= src {
                    0
                } else {
                    old + 1
                }
            }
            AtomicOp::Dec => {
                if old == 0 || old > src {
                    src
                } else {
                    old - 1
                }
            }
            AtomicOp::AddF64 => (f64::from_bits(old) + f64::from_bits(src)).to_bits(),
            AtomicOp::MinF64 => crate::fp::min_f64(f64::from_bits(old), f64::from_bits(src)).to_bits(),
            AtomicOp::MaxF64 => crate::fp::max_f64(f64::from_bits(old), f64::from_bits(src)).to_bits(),
            AtomicOp::AddF32 | AtomicOp::PkAddF16 => old,
        }
    }
}

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
