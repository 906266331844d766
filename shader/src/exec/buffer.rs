//! MUBUF: buffer loads, stores and atomics through a buffer resource (V#), including the
//! swizzled private segment buffer of -O0 code.
//!
//! Address (AMD "Vega"/"MI200" ISA manuals, "Buffer Addressing"): index = (idxen ? the index
//! VGPR : 0) + (add_tid_enable ? lane : 0), offset = (offen ? the offset VGPR : 0) + the
//! instruction offset; linear buffer_offset = index * stride + offset, or swizzled:
//! (index / index_stride * stride + offset / element_size * element_size) * index_stride +
//! index % index_stride * element_size + offset % element_size; the address is base + soffset
//! + buffer_offset.
//!
//! Range checking (same manuals, and LLVM's "on GFX9 IDXEN matters for interpretation of buffer
//! sizes"): a raw buffer (stride 0, or neither idxen nor add_tid_enable) is out of range where
//! buffer_offset >= num_records - soffset (num_records in bytes); a structured one where
//! index >= num_records or offset >= stride (num_records in records). Out-of-range loads read
//! 0, stores are dropped; dword loads and stores check each dword, format accesses and atomics
//! the whole access.
//!
//! Format accesses convert only the 32-bit data formats (32 to 32_32_32_32, UINT/SINT/FLOAT):
//! a load applies the V#'s dst_sel, a store needs it to be the identity; other formats, the d16
//! format forms and loads to LDS are Unimplemented.

use super::memop::{self, Kind, Place, Regs};
use super::operand::{read_s32, vreg_range, Ty};
use super::{unimplemented, Cx, ExecError, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op, Operand};
use crate::mem::AtomicOp;
use crate::wave::{Wave, LANES};

/// What an instruction does per lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Load(Kind),
    Store(Kind),
    Atomic(AtomicOp, bool),
    /// buffer_load/store_format_x..xyzw: `n` components in the V#'s format.
    Format {
        load: bool,
        n: u8,
    },
    /// Cache write-back/invalidate: nothing to do, the core has no caches (every access goes
    /// straight to Memory, so memory is always coherent).
    Cache,
}

/// The one table of this family (exec and implements both read it).
fn action(op: Op) -> Option<Action> {
    use Action::{Atomic, Cache, Format, Load, Store};
    use AtomicOp as A;
    use Kind::*;
    let d16 = |bytes, signed, hi| D16 { bytes, signed, hi };
    Some(match op {
        Op::BufferLoadUbyte => Load(U8),
        Op::BufferLoadSbyte => Load(I8),
        Op::BufferLoadUshort => Load(U16),
        Op::BufferLoadSshort => Load(I16),
        Op::BufferLoadDword => Load(Dwords(1)),
        Op::BufferLoadDwordx2 => Load(Dwords(2)),
        Op::BufferLoadDwordx3 => Load(Dwords(3)),
        Op::BufferLoadDwordx4 => Load(Dwords(4)),
        Op::BufferLoadUbyteD16 => Load(d16(1, false, false)),
        Op::BufferLoadUbyteD16Hi => Load(d16(1, false, true)),
        Op::BufferLoadSbyteD16 => Load(d16(1, true, false)),
        Op::BufferLoadSbyteD16Hi => Load(d16(1, true, true)),
        Op::BufferLoadShortD16 => Load(d16(2, false, false)),
        Op::BufferLoadShortD16Hi => Load(d16(2, false, true)),
        Op::BufferStoreByte => Store(U8),
        Op::BufferStoreByteD16Hi => Store(StoreHi { bytes: 1 }),
        Op::BufferStoreShort => Store(U16),
        Op::BufferStoreShortD16Hi => Store(StoreHi { bytes: 2 }),
        Op::BufferStoreDword => Store(Dwords(1)),
        Op::BufferStoreDwordx2 => Store(Dwords(2)),
        Op::BufferStoreDwordx3 => Store(Dwords(3)),
        Op::BufferStoreDwordx4 => Store(Dwords(4)),
        Op::BufferAtomicSwap => Atomic(A::Swap, false),
        Op::BufferAtomicCmpswap => Atomic(A::CmpSwap, false),
        Op::BufferAtomicAdd => Atomic(A::Add, false),
        Op::BufferAtomicSub => Atomic(A::Sub, false),
        Op::BufferAtomicSmin => Atomic(A::Smin, false),
        Op::BufferAtomicUmin => Atomic(A::Umin, false),
        Op::BufferAtomicSmax => Atomic(A::Smax, false),
        Op::BufferAtomicUmax => Atomic(A::Umax, false),
        Op::BufferAtomicAnd => Atomic(A::And, false),
        Op::BufferAtomicOr => Atomic(A::Or, false),
        Op::BufferAtomicXor => Atomic(A::Xor, false),
        Op::BufferAtomicInc => Atomic(A::Inc, false),
        Op::BufferAtomicDec => Atomic(A::Dec, false),
        Op::BufferAtomicAddF32 => Atomic(A::AddF32, false),
        Op::BufferAtomicPkAddF16 => Atomic(A::PkAddF16, false),
        Op::BufferAtomicAddF64 => Atomic(A::AddF64, true),
        Op::BufferAtomicMinF64 => Atomic(A::MinF64, true),
        Op::BufferAtomicMaxF64 => Atomic(A::MaxF64, true),
        Op::BufferAtomicSwapX2 => Atomic(A::Swap, true),
        Op::BufferAtomicCmpswapX2 => Atomic(A::CmpSwap, true),
        Op::BufferAtomicAddX2 => Atomic(A::Add, true),
        Op::BufferAtomicSubX2 => Atomic(A::Sub, true),
        Op::BufferAtomicSminX2 => Atomic(A::Smin, true),
        Op::BufferAtomicUminX2 => Atomic(A::Umin, true),
        Op::BufferAtomicSmaxX2 => Atomic(A::Smax, true),
        Op::BufferAtomicUmaxX2 => Atomic(A::Umax, true),
        Op::BufferAtomicAndX2 => Atomic(A::And, true),
        Op::BufferAtomicOrX2 => Atomic(A::Or, true),
        Op::BufferAtomicXorX2 => Atomic(A::Xor, true),
        Op::BufferAtomicIncX2 => Atomic(A::Inc, true),
        Op::BufferAtomicDecX2 => Atomic(A::Dec, true),
        Op::BufferLoadFormatX => Format { load: true, n: 1 },
        Op::BufferLoadFormatXy => Format { load: true, n: 2 },
        Op::BufferLoadFormatXyz => Format { load: true, n: 3 },
        Op::BufferLoadFormatXyzw => Format { load: true, n: 4 },
        Op::BufferStoreFormatX => Format { load: false, n: 1 },
        Op::BufferStoreFormatXy => Format { load: false, n: 2 },
        Op::BufferStoreFormatXyz => Format { load: false, n: 3 },
        Op::BufferStoreFormatXyzw => Format { load: false, n: 4 },
        Op::BufferWbinvl1 | Op::BufferWbinvl1Vol | Op::BufferWbl2 | Op::BufferInvl2 => Cache,
        // gfx10's L0 and L1 invalidates.
        Op::BufferGl0Inv | Op::BufferGl1Inv => Cache,
        _ => return None,
    })
}

/// The fields of a gfx9 buffer resource the address and range check use (LLVM SIInstrInfo.h
/// RSRC_* and ROCr's SQ_BUF_RSRC_WORD1/3: word1 base[47:32] in 15:0, stride 29:16, swizzle
/// enable 31; word2 num_records; word3 data format 18:15, element size 20:19, index stride
/// 22:21, add_tid_enable 23).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub base: u64,
    /// In bytes; with add_tid_enable the data format field gives bits 17:14 (gfx9).
    pub stride: u64,
    pub num_records: u32,
    pub swizzle: bool,
    /// Swizzle element size in bytes: 2, 4, 8, 16.
    pub element_size: u64,
    /// Swizzle index stride in records: 8, 16, 32, 64.
    pub index_stride: u64,
    pub add_tid: bool,
    /// Word 3: dst_sel x/y/z/w (bits 11:0), num_format (14:12), data_format (18:15).
    pub word3: u32,
    /// A gfx10 resource: word 3 has one FORMAT field (18:12) instead, and no element size.
    pub gfx10: bool,
}

impl Resource {
    pub fn from_words(w: [u32; 4]) -> Resource {
        let bits = |v: u32, hi: u32, lo: u32| (v >> lo) & ((1 << (hi - lo + 1)) - 1);
        let add_tid = bits(w[3], 23, 23) != 0;
        let data_format = if add_tid { u64::from(bits(w[3], 18, 15)) } else { 0 };
        Resource {
            base: u64::from(w[0]) | u64::from(bits(w[1], 15, 0)) << 32,
            stride: u64::from(bits(w[1], 29, 16)) | data_format << 14,
            num_records: w[2],
            swizzle: bits(w[1], 31, 31) != 0,
            element_size: 2 << bits(w[3], 20, 19),
            index_stride: 8 << bits(w[3], 22, 21),
            add_tid,
            word3: w[3],
            gfx10: false,
        }
    }

    /// A gfx10 resource (RDNA2 ISA guide, "Buffer Resource"; ROCr's SQ_BUF_RSRC_WORD3_GFX10):
    /// word1 as gfx9, word3 FORMAT 18:12, INDEX_STRIDE 22:21, ADD_TID_ENABLE 23. Swizzled
    /// elements are 4 bytes (the field is gone), and the format does not extend the stride.
    pub fn from_words_gfx10(w: [u32; 4]) -> Resource {
        let r = Resource::from_words(w);
        Resource { stride: u64::from((w[1] >> 16) & 0x3fff), element_size: 4, gfx10: true, ..r }
    }

    /// Components of 32 bits the data format holds (32, 32_32, 32_32_32, 32_32_32_32), `None`
    /// for the formats the core does not convert (and when add_tid_enable makes the field
    /// stride bits).
    fn dwords_per_element(&self) -> Option<u32> {
        // gfx10's unified FORMAT values are not decoded.
        if self.gfx10 {
            return None;
        }
        let number_ok = matches!((self.word3 >> 12) & 7, 4 | 5 | 7); // UINT, SINT, FLOAT
        let n = match (self.word3 >> 15) & 0xf {
            4 => 1,
            11 => 2,
            13 => 3,
            14 => 4,
            _ => return None,
        };
        (number_ok && !self.add_tid).then_some(n)
    }

    /// The value a load_format writes to register `k`: dst_sel 0 and 1 give constants (1.0
    /// for a float format), X..W the element's components.
    fn select(&self, k: usize, comps: &[u32; 4], have: u32) -> Option<u32> {
        let one = if (self.word3 >> 12) & 7 == 7 { 1.0f32.to_bits() } else { 1 };
        match (self.word3 >> (3 * k)) & 7 {
            0 => Some(0),
            1 => Some(one),
            c @ 4..=7 if c - 4 < have => Some(comps[c as usize - 4]),
            _ => None,
        }
    }

    /// The address of byte `offset` of record `index`, `None` when out of range.
    pub fn address(&self, index: u32, offset: u32, soffset: u32, idxen: bool) -> Option<u64> {
        let (index, offset) = (u64::from(index), u64::from(offset));
        let structured = self.stride != 0 && (idxen || self.add_tid);
        let buffer_offset = if self.swizzle {
            let (es, is) = (self.element_size, self.index_stride);
            (index / is * self.stride + offset / es * es) * is + index % is * es + offset % es
        } else {
            index * self.stride + offset
        };
        let in_range = if structured {
            index < u64::from(self.num_records) && offset < self.stride
        } else {
            buffer_offset < u64::from(self.num_records.saturating_sub(soffset))
        };
        in_range.then(|| self.base.wrapping_add(u64::from(soffset)).wrapping_add(buffer_offset))
    }
}

/// Whether this module runs `op`.
pub fn implements(op: Op) -> bool {
    action(op).is_some()
}

pub fn exec(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let act = action(inst.op).ok_or_else(unimplemented)?;
    if act == Action::Cache {
        return Ok(Flow::Next);
    }
    if inst.mods.lds {
        return Err(ExecError::Unimplemented("loads to LDS".into()));
    }
    // gfx10 tfe: a load also writes a status dword after its data.
    if inst.mods.tfe {
        return Err(ExecError::Unimplemented("tfe".into()));
    }
    let rsrc = match inst.operand(Field::Rsrc) {
        Some(Operand::Sgpr { index, .. }) => {
            let words = std::array::from_fn(|k| w.sreg(index.wrapping_add(k as u8) & 127));
            if inst.target.is_gfx10() {
                Resource::from_words_gfx10(words)
            } else {
                Resource::from_words(words)
            }
        }
        _ => return Err(ExecError::Invalid("no buffer resource".into())),
    };
    let soffset = match inst.operand(Field::Soff) {
        Some(op) => read_s32(w, op, Ty::B32, &cx.apertures)?,
        None => 0,
    };
    let (mut index, offset) = lane_index_offset(w, inst)?;
    if rsrc.add_tid {
        for (l, i) in index.iter_mut().enumerate() {
            *i = i.wrapping_add(l as u32);
        }
    }
    let idxen = inst.mods.idxen;
    // Byte `off` of the access: dwords are range checked and (swizzled) placed one by one;
    // the run never crosses a dword or a swizzle element.
    let map = |l: usize, off: u32| {
        let o = offset[l].wrapping_add(off);
        let run = (4 - o % 4).min((rsrc.element_size - u64::from(o) % rsrc.element_size) as u32);
        match rsrc.address(index[l], o, soffset, idxen) {
            Some(va) => (Place::Mem(va), if rsrc.swizzle { run } else { 4 - off % 4 }),
            None => (Place::Void, 4 - off % 4),
        }
    };
    match act {
        Action::Load(kind) => {
            let dst = Regs::of(w, inst.operand(Field::D), kind.regs(), "destination")?;
            memop::load(w, cx, kind, dst, &map)
        }
        Action::Store(kind) => {
            let data = Regs::of(w, inst.operand(Field::D), kind.regs(), "data")?;
            memop::store(w, cx, kind, data, &map)
        }
        Action::Atomic(op, wide) => {
            let dwords = if wide { 2 } else { 1 };
            let n = if op == AtomicOp::CmpSwap { 2 * dwords } else { dwords };
            // vdata holds the operand and, with glc, receives the old value.
            let data = Regs::of(w, inst.operand(Field::D), n, "data")?;
            let ret = inst.mods.glc.then_some(Regs { count: dwords, ..data });
            // All or nothing: the atomic's first byte decides.
            let whole = |l: usize, _off: u32| match rsrc.address(index[l], offset[l], soffset, idxen) {
                Some(va) => (Place::Mem(va), u32::MAX),
                None => (Place::Void, u32::MAX),
            };
            memop::atomic(w, cx, op, wide, data, ret, &whole)
        }
        Action::Format { load, n } => {
            let (n, have) = (
                usize::from(n),
                rsrc.dwords_per_element().ok_or_else(|| {
                    ExecError::Unimplemented(format!("buffer format conversion (V# word3 {:#x})", rsrc.word3))
                })?,
            );
            let regs = Regs::of(w, inst.operand(Field::D), n, "data")?;
            let identity = (0..n).all(|k| (rsrc.word3 >> (3 * k)) & 7 == 4 + k as u32);
            if !load && !identity {
                return Err(ExecError::Unimplemented("a format store with swizzled dst_sel".into()));
            }
            // Format accesses are range checked all or nothing, by their first byte.
            let exec = w.exec();
            let mut got = [[0u32; 4]; LANES];
            for l in Wave::lanes(exec) {
                let va = rsrc.address(index[l], offset[l], soffset, idxen);
                let count = have.min(n as u32) as usize;
                if load {
                    let mut comps = [0u32; 4];
                    if let Some(va) = va {
                        let mut b = [0u8; 16];
                        cx.mem.read(va, &mut b[..4 * have as usize])?;
                        for (c, v) in comps.iter_mut().enumerate() {
                            *v = u32::from_le_bytes(b[4 * c..4 * c + 4].try_into().expect("4 bytes"));
                        }
                    }
                    for (k, g) in got[l].iter_mut().enumerate().take(n) {
                        // Out of range, every component reads 0 but SEL_1 still gives 1.
                        let have = if va.is_some() { have } else { 4 };
                        *g = rsrc.select(k, &comps, have).ok_or_else(|| {
                            ExecError::Unimplemented(format!("dst_sel of component {k} past the format"))
                        })?;
                    }
                } else if let Some(va) = va {
                    let mut b = [0u8; 16];
                    for k in 0..count {
                        b[4 * k..4 * k + 4].copy_from_slice(&regs.get(w, k, l).to_le_bytes());
                    }
                    cx.mem.write(va, &b[..4 * count])?;
                }
            }
            if load {
                for l in Wave::lanes(exec) {
                    for (k, &g) in got[l].iter().enumerate().take(n) {
                        regs.set(w, k, l, g);
                    }
                }
            }
            Ok(Flow::Next)
        }
        Action::Cache => Ok(Flow::Next),
    }
}

/// Every lane's index and offset from vaddr: the index VGPR first when idxen, then the offset
/// VGPR when offen (LLVM AMDGPU syntax, "vaddr" of MUBUF), plus the instruction offset.
fn lane_index_offset(w: &Wave, inst: &Instruction) -> ExecResult<([u32; LANES], [u32; LANES])> {
    let (idxen, offen) = (inst.mods.idxen, inst.mods.offen);
    let mut index = [0u32; LANES];
    let mut offset = [inst.mods.offset as u32; LANES];
    if idxen || offen {
        let Some(Operand::Vgpr { index: v, .. }) = inst.operand(Field::Addr) else {
            return Err(ExecError::Invalid("no vaddr register".into()));
        };
        let n = u8::from(idxen) + u8::from(offen);
        let r = vreg_range(w.v.len(), v, n, "v")?;
        if idxen {
            index = w.v[r];
        }
        if offen {
            let vo = w.v[r + usize::from(idxen)];
            for (o, v) in offset.iter_mut().zip(vo) {
                *o = o.wrapping_add(v);
            }
        }
    }
    Ok((index, offset))
}

#[cfg(test)]
#[path = "buffer_tests.rs"]
mod tests;
