//! DS: LDS loads, stores and atomics, and the cross-lane DS operations (ds_swizzle,
//! ds_permute, ds_bpermute, ds_append/consume).
//!
//! An address is the lane's ADDR VGPR plus the instruction's offset, a byte offset into the
//! workgroup's LDS. gfx9 does not clamp DS addresses with M0 (LLVM initializes M0 for LDS only
//! before GFX9: `ldsRequiresM0Init`), so the bound is the LDS the workgroup has; an access past
//! it reads 0 and writes nothing ([`Place::Lds`]). Unaligned accesses are allowed (byte access).

use super::memop::{self, Kind, Place, Regs};
use super::operand::vreg_range;
use super::{Cx, ExecError, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op, Operand};
use crate::mem::Word;
use crate::wave::{Wave, LANES, M0};

/// A DS read-modify-write: the new value from the old one and DATA0/DATA1 (the ISA manuals'
/// DATA and DATA2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rmw {
    Add,
    Sub,
    /// DATA - old.
    Rsub,
    /// `old >= DATA ? 0 : old + 1`.
    Inc,
    /// `old == 0 || old > DATA ? DATA : old - 1`.
    Dec,
    MinI,
    MaxI,
    MinU,
    MaxU,
    And,
    Or,
    Xor,
    /// `(old & !DATA) | DATA2`.
    Mskor,
    /// DATA.
    Wrxchg,
    /// `old == DATA ? DATA2 : old`: DS puts the compare value first (unlike FLAT/MUBUF
    /// cmpswap, whose data is {new, compare}).
    Cmpst,
    /// Cmpst comparing as floats (-0 == +0, NaN is unequal).
    CmpstF,
    MinF,
    MaxF,
    AddF,
    /// `old >= DATA ? old - DATA : old + DATA2` (32-bit only).
    Wrap,
}

impl Rmw {
    /// Whether the operation reads DATA1.
    fn two_data(self) -> bool {
        matches!(self, Rmw::Mskor | Rmw::Cmpst | Rmw::CmpstF | Rmw::Wrap)
    }

    /// The new value from `old` and DATA0/DATA1, at either width (Wrap exists at 32 bits only;
    /// the table pairs it with no other).
    #[inline]
    fn apply<W: Word>(self, old: W, d0: W, d1: W) -> W {
        match self {
            Rmw::Add => old.wrapping_add(d0),
            Rmw::Sub => old.wrapping_sub(d0),
            Rmw::Rsub => d0.wrapping_sub(old),
            Rmw::Inc => old.inc(d0),
            Rmw::Dec => old.dec(d0),
            Rmw::MinI => old.min_signed(d0),
            Rmw::MaxI => old.max_signed(d0),
            Rmw::MinU => old.min(d0),
            Rmw::MaxU => old.max(d0),
            Rmw::And => old & d0,
            Rmw::Or => old | d0,
            Rmw::Xor => old ^ d0,
            Rmw::Mskor => (old & !d0) | d1,
            Rmw::Wrxchg => d0,
            Rmw::Cmpst => {
                if old == d0 {
                    d1
                } else {
                    old
                }
            }
            Rmw::CmpstF => {
                if old.eq_float(d0) {
                    d1
                } else {
                    old
                }
            }
            Rmw::MinF => old.min_float(d0),
            Rmw::MaxF => old.max_float(d0),
            Rmw::AddF => old.add_float(d0),
            Rmw::Wrap => {
                if old >= d0 {
                    old.wrapping_sub(d0)
                } else {
                    old.wrapping_add(d1)
                }
            }
        }
    }
}

/// What a DS instruction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Read(Kind),
    Write(Kind),
    /// Two reads or writes at offset0 and offset1 in units of the element (4 or 8 bytes),
    /// times 64 for the st64 forms.
    Read2 {
        wide: bool,
        st64: bool,
    },
    Write2 {
        wide: bool,
        st64: bool,
    },
    /// An atomic; `rtn` returns the old value.
    Atomic {
        rmw: Rmw,
        wide: bool,
        rtn: bool,
    },
    /// Two exchanges at offset0/offset1 returning both old values.
    Wrxchg2 {
        wide: bool,
        st64: bool,
    },
    Swizzle,
    Permute,
    Bpermute,
    /// ds_append (add) / ds_consume (subtract) the number of active lanes at M0 + offset.
    Append {
        add: bool,
    },
    /// ds_read/write_addtid_b32: a dword at M0[15:0] + offset + lane * 4 (AMD "CDNA1" ISA:
    /// ADDR_BASE + OFFSET + M0.OFFSET + TID*4).
    Addtid {
        write: bool,
    },
}

/// The one table of this family (exec and implements both read it).
fn action(op: Op) -> Option<Action> {
    use Action::*;
    use Kind::*;
    let at = |rmw, wide, rtn| Atomic { rmw, wide, rtn };
    let d16 = |bytes, signed, hi| D16 { bytes, signed, hi };
    Some(match op {
        Op::DsReadU8 => Read(U8),
        Op::DsReadI8 => Read(I8),
        Op::DsReadU16 => Read(U16),
        Op::DsReadI16 => Read(I16),
        Op::DsReadB32 => Read(Dwords(1)),
        Op::DsReadB64 => Read(Dwords(2)),
        Op::DsReadB96 => Read(Dwords(3)),
        Op::DsReadB128 => Read(Dwords(4)),
        Op::DsReadU8D16 => Read(d16(1, false, false)),
        Op::DsReadU8D16Hi => Read(d16(1, false, true)),
        Op::DsReadI8D16 => Read(d16(1, true, false)),
        Op::DsReadI8D16Hi => Read(d16(1, true, true)),
        Op::DsReadU16D16 => Read(d16(2, false, false)),
        Op::DsReadU16D16Hi => Read(d16(2, false, true)),
        Op::DsWriteB8 => Write(U8),
        Op::DsWriteB16 => Write(U16),
        Op::DsWriteB8D16Hi => Write(StoreHi { bytes: 1 }),
        Op::DsWriteB16D16Hi => Write(StoreHi { bytes: 2 }),
        Op::DsWriteB32 => Write(Dwords(1)),
        Op::DsWriteB64 => Write(Dwords(2)),
        Op::DsWriteB96 => Write(Dwords(3)),
        Op::DsWriteB128 => Write(Dwords(4)),
        Op::DsRead2B32 => Read2 { wide: false, st64: false },
        Op::DsRead2st64B32 => Read2 { wide: false, st64: true },
        Op::DsRead2B64 => Read2 { wide: true, st64: false },
        Op::DsRead2st64B64 => Read2 { wide: true, st64: true },
        Op::DsWrite2B32 => Write2 { wide: false, st64: false },
        Op::DsWrite2st64B32 => Write2 { wide: false, st64: true },
        Op::DsWrite2B64 => Write2 { wide: true, st64: false },
        Op::DsWrite2st64B64 => Write2 { wide: true, st64: true },
        Op::DsWrxchg2RtnB32 => Wrxchg2 { wide: false, st64: false },
        Op::DsWrxchg2st64RtnB32 => Wrxchg2 { wide: false, st64: true },
        Op::DsWrxchg2RtnB64 => Wrxchg2 { wide: true, st64: false },
        Op::DsWrxchg2st64RtnB64 => Wrxchg2 { wide: true, st64: true },
        Op::DsAddU32 => at(Rmw::Add, false, false),
        Op::DsSubU32 => at(Rmw::Sub, false, false),
        Op::DsRsubU32 => at(Rmw::Rsub, false, false),
        Op::DsIncU32 => at(Rmw::Inc, false, false),
        Op::DsDecU32 => at(Rmw::Dec, false, false),
        Op::DsMinI32 => at(Rmw::MinI, false, false),
        Op::DsMaxI32 => at(Rmw::MaxI, false, false),
        Op::DsMinU32 => at(Rmw::MinU, false, false),
        Op::DsMaxU32 => at(Rmw::MaxU, false, false),
        Op::DsAndB32 => at(Rmw::And, false, false),
        Op::DsOrB32 => at(Rmw::Or, false, false),
        Op::DsXorB32 => at(Rmw::Xor, false, false),
        Op::DsMskorB32 => at(Rmw::Mskor, false, false),
        Op::DsCmpstB32 => at(Rmw::Cmpst, false, false),
        Op::DsCmpstF32 => at(Rmw::CmpstF, false, false),
        Op::DsMinF32 => at(Rmw::MinF, false, false),
        Op::DsMaxF32 => at(Rmw::MaxF, false, false),
        Op::DsAddF32 => at(Rmw::AddF, false, false),
        Op::DsAddRtnU32 => at(Rmw::Add, false, true),
        Op::DsSubRtnU32 => at(Rmw::Sub, false, true),
        Op::DsRsubRtnU32 => at(Rmw::Rsub, false, true),
        Op::DsIncRtnU32 => at(Rmw::Inc, false, true),
        Op::DsDecRtnU32 => at(Rmw::Dec, false, true),
        Op::DsMinRtnI32 => at(Rmw::MinI, false, true),
        Op::DsMaxRtnI32 => at(Rmw::MaxI, false, true),
        Op::DsMinRtnU32 => at(Rmw::MinU, false, true),
        Op::DsMaxRtnU32 => at(Rmw::MaxU, false, true),
        Op::DsAndRtnB32 => at(Rmw::And, false, true),
        Op::DsOrRtnB32 => at(Rmw::Or, false, true),
        Op::DsXorRtnB32 => at(Rmw::Xor, false, true),
        Op::DsMskorRtnB32 => at(Rmw::Mskor, false, true),
        Op::DsWrxchgRtnB32 => at(Rmw::Wrxchg, false, true),
        Op::DsCmpstRtnB32 => at(Rmw::Cmpst, false, true),
        Op::DsCmpstRtnF32 => at(Rmw::CmpstF, false, true),
        Op::DsMinRtnF32 => at(Rmw::MinF, false, true),
        Op::DsMaxRtnF32 => at(Rmw::MaxF, false, true),
        Op::DsWrapRtnB32 => at(Rmw::Wrap, false, true),
        Op::DsAddRtnF32 => at(Rmw::AddF, false, true),
        Op::DsAddU64 => at(Rmw::Add, true, false),
        Op::DsSubU64 => at(Rmw::Sub, true, false),
        Op::DsRsubU64 => at(Rmw::Rsub, true, false),
        Op::DsIncU64 => at(Rmw::Inc, true, false),
        Op::DsDecU64 => at(Rmw::Dec, true, false),
        Op::DsMinI64 => at(Rmw::MinI, true, false),
        Op::DsMaxI64 => at(Rmw::MaxI, true, false),
        Op::DsMinU64 => at(Rmw::MinU, true, false),
        Op::DsMaxU64 => at(Rmw::MaxU, true, false),
        Op::DsAndB64 => at(Rmw::And, true, false),
        Op::DsOrB64 => at(Rmw::Or, true, false),
        Op::DsXorB64 => at(Rmw::Xor, true, false),
        Op::DsMskorB64 => at(Rmw::Mskor, true, false),
        Op::DsCmpstB64 => at(Rmw::Cmpst, true, false),
        Op::DsCmpstF64 => at(Rmw::CmpstF, true, false),
        Op::DsMinF64 => at(Rmw::MinF, true, false),
        Op::DsMaxF64 => at(Rmw::MaxF, true, false),
        Op::DsAddF64 => at(Rmw::AddF, true, false),
        Op::DsAddRtnU64 => at(Rmw::Add, true, true),
        Op::DsSubRtnU64 => at(Rmw::Sub, true, true),
        Op::DsRsubRtnU64 => at(Rmw::Rsub, true, true),
        Op::DsIncRtnU64 => at(Rmw::Inc, true, true),
        Op::DsDecRtnU64 => at(Rmw::Dec, true, true),
        Op::DsMinRtnI64 => at(Rmw::MinI, true, true),
        Op::DsMaxRtnI64 => at(Rmw::MaxI, true, true),
        Op::DsMinRtnU64 => at(Rmw::MinU, true, true),
        Op::DsMaxRtnU64 => at(Rmw::MaxU, true, true),
        Op::DsAndRtnB64 => at(Rmw::And, true, true),
        Op::DsOrRtnB64 => at(Rmw::Or, true, true),
        Op::DsXorRtnB64 => at(Rmw::Xor, true, true),
        Op::DsMskorRtnB64 => at(Rmw::Mskor, true, true),
        Op::DsWrxchgRtnB64 => at(Rmw::Wrxchg, true, true),
        Op::DsCmpstRtnB64 => at(Rmw::Cmpst, true, true),
        Op::DsCmpstRtnF64 => at(Rmw::CmpstF, true, true),
        Op::DsMinRtnF64 => at(Rmw::MinF, true, true),
        Op::DsMaxRtnF64 => at(Rmw::MaxF, true, true),
        Op::DsAddRtnF64 => at(Rmw::AddF, true, true),
        Op::DsSwizzleB32 => Swizzle,
        Op::DsPermuteB32 => Permute,
        Op::DsBpermuteB32 => Bpermute,
        Op::DsAppend => Append { add: true },
        Op::DsConsume => Append { add: false },
        Op::DsReadAddtidB32 => Addtid { write: false },
        Op::DsWriteAddtidB32 => Addtid { write: true },
        _ => return None,
    })
}

/// Whether this module runs `op`.
pub fn implements(op: Op) -> bool {
    action(op).is_some()
}

/// Why the core lacks a DS operation it decodes.
fn missing(op: Op) -> &'static str {
    match op {
        Op::DsOrderedCount => "GDS",
        _ => "",
    }
}

pub fn exec(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let act = action(inst.op).ok_or_else(|| ExecError::Unimplemented(missing(inst.op).into()))?;
    if inst.mods.gds {
        return Err(ExecError::Unimplemented("GDS".into()));
    }
    let offset = inst.mods.offset as u32;
    match act {
        Action::Read(kind) => {
            let at = addresses(w, inst, offset)?;
            let dst = Regs::of(w, inst.operand(Field::D), kind.regs(), "destination")?;
            memop::load(w, cx, kind, dst, &|l, off| (Place::Lds(at[l] + u64::from(off)), u32::MAX))
        }
        Action::Write(kind) => {
            let at = addresses(w, inst, offset)?;
            let data = Regs::of(w, inst.operand(Field::Data0), kind.regs(), "data")?;
            memop::store(w, cx, kind, data, &|l, off| (Place::Lds(at[l] + u64::from(off)), u32::MAX))
        }
        Action::Read2 { wide, st64 } => {
            let (n, [a0, a1]) = pair(w, inst, wide, st64)?;
            let dst = Regs::of(w, inst.operand(Field::D), 2 * n, "destination")?;
            // Both halves are read before either is written (the destination may be the address).
            let mut got = [[0u32; 4]; LANES];
            for l in Wave::lanes(w.exec()) {
                let mut buf = [0u8; 16];
                for (h, at) in [a0, a1].iter().enumerate() {
                    let map = |l: usize, off: u32| (Place::Lds(at[l] + u64::from(off)), u32::MAX);
                    memop::read_lane(cx, &map, l, &mut buf[4 * n * h..4 * n * (h + 1)])?;
                }
                for (k, g) in got[l].iter_mut().enumerate().take(2 * n) {
                    *g = Kind::Dwords(4).loaded(&buf, k, 0);
                }
            }
            for l in Wave::lanes(w.exec()) {
                for (k, &g) in got[l].iter().enumerate().take(2 * n) {
                    dst.set(w, k, l, g);
                }
            }
            Ok(Flow::Next)
        }
        Action::Write2 { wide, st64 } => {
            let (n, [a0, a1]) = pair(w, inst, wide, st64)?;
            let d0 = Regs::of(w, inst.operand(Field::Data0), n, "data0")?;
            let d1 = Regs::of(w, inst.operand(Field::Data1), n, "data1")?;
            let kind = Kind::Dwords(n as u8);
            memop::store(w, cx, kind, d0, &|l, off| (Place::Lds(a0[l] + u64::from(off)), u32::MAX))?;
            // Equal offsets write once, the first data (AMD "CDNA1" ISA, LDS: "only the first
            // data source is used").
            if inst.mods.offset as u32 == u32::from(inst.mods.offset1) {
                return Ok(Flow::Next);
            }
            memop::store(w, cx, kind, d1, &|l, off| (Place::Lds(a1[l] + u64::from(off)), u32::MAX))
        }
        Action::Atomic { rmw, wide, rtn } => {
            let at = addresses(w, inst, offset)?;
            let n = if wide { 2 } else { 1 };
            let d0 = Regs::of(w, inst.operand(Field::Data0), n, "data0")?;
            let d1 = if rmw.two_data() { Some(Regs::of(w, inst.operand(Field::Data1), n, "data1")?) } else { None };
            let ret = if rtn { Some(Regs::of(w, inst.operand(Field::D), n, "destination")?) } else { None };
            let mut old = [0u64; LANES];
            for l in Wave::lanes(w.exec()) {
                let (s0, s1) = if wide {
                    (d0.get64(w, 0, l), d1.map_or(0, |d| d.get64(w, 0, l)))
                } else {
                    (u64::from(d0.get(w, 0, l)), d1.map_or(0, |d| u64::from(d.get(w, 0, l))))
                };
                old[l] = rmw_lds(cx.lds, at[l], rmw, wide, s0, s1);
            }
            if let Some(ret) = ret {
                write_back(w, ret, wide, 0, &old);
            }
            Ok(Flow::Next)
        }
        Action::Wrxchg2 { wide, st64 } => {
            let (n, [a0, a1]) = pair(w, inst, wide, st64)?;
            let d0 = Regs::of(w, inst.operand(Field::Data0), n, "data0")?;
            let d1 = Regs::of(w, inst.operand(Field::Data1), n, "data1")?;
            let ret = Regs::of(w, inst.operand(Field::D), 2 * n, "destination")?;
            let mut old = [[0u64; LANES]; 2];
            for l in Wave::lanes(w.exec()) {
                for (h, (at, d)) in [(a0, d0), (a1, d1)].iter().enumerate() {
                    let v = if wide { d.get64(w, 0, l) } else { u64::from(d.get(w, 0, l)) };
                    old[h][l] = rmw_lds(cx.lds, at[l], Rmw::Wrxchg, wide, v, 0);
                }
            }
            write_back(w, ret, wide, 0, &old[0]);
            write_back(w, ret, wide, n, &old[1]);
            Ok(Flow::Next)
        }
        Action::Swizzle => swizzle(w, inst, offset),
        Action::Permute | Action::Bpermute => permute(w, inst, offset, act == Action::Bpermute),
        Action::Append { add } => {
            // The counter lives at M0 + offset (LLVM selects ds_append/ds_consume with the
            // address in M0); every active lane gets the value before the update.
            let a = u64::from(w.sreg(M0).wrapping_add(offset));
            let exec = w.exec();
            let count = u64::from(exec.count_ones());
            let rmw = if add { Rmw::Add } else { Rmw::Sub };
            let old = rmw_lds(cx.lds, a, rmw, false, count, 0);
            let dst = Regs::of(w, inst.operand(Field::D), 1, "destination")?;
            write_back(w, dst, false, 0, &[old; LANES]);
            Ok(Flow::Next)
        }
        Action::Addtid { write } => {
            let base = u64::from(w.sreg(M0) & 0xffff) + u64::from(offset);
            let map = |l: usize, off: u32| (Place::Lds(base + 4 * l as u64 + u64::from(off)), u32::MAX);
            if write {
                let data = Regs::of(w, inst.operand(Field::Data0), 1, "data")?;
                memop::store(w, cx, Kind::Dwords(1), data, &map)
            } else {
                let dst = Regs::of(w, inst.operand(Field::D), 1, "destination")?;
                memop::load(w, cx, Kind::Dwords(1), dst, &map)
            }
        }
    }
}

/// Every lane's ADDR VGPR plus `offset`.
fn addresses(w: &Wave, inst: &Instruction, offset: u32) -> ExecResult<[u64; LANES]> {
    let Some(Operand::Vgpr { index, .. }) = inst.operand(Field::Addr) else {
        return Err(ExecError::Invalid("no address register".into()));
    };
    let r = vreg_range(w.v.len(), index, 1, "v")?;
    let mut out = [0u64; LANES];
    for (l, o) in out.iter_mut().enumerate() {
        *o = u64::from(w.v[r][l].wrapping_add(offset));
    }
    Ok(out)
}

/// The element size in dwords and both addresses of a read2/write2/wrxchg2: ADDR +
/// offset0/offset1 times the element size (times 64 for st64).
fn pair(w: &Wave, inst: &Instruction, wide: bool, st64: bool) -> ExecResult<(usize, [[u64; LANES]; 2])> {
    let n = if wide { 2 } else { 1 };
    let unit = 4 * n as u32 * if st64 { 64 } else { 1 };
    let a0 = addresses(w, inst, inst.mods.offset as u32 * unit)?;
    let a1 = addresses(w, inst, u32::from(inst.mods.offset1) * unit)?;
    Ok((n, [a0, a1]))
}

/// Applies `rmw` to the LDS element at `a`; returns the old value (0, and nothing written,
/// past the end of the LDS).
fn rmw_lds(lds: &mut [u8], a: u64, rmw: Rmw, wide: bool, d0: u64, d1: u64) -> u64 {
    let size = if wide { 8 } else { 4 };
    let Some(start) = usize::try_from(a).ok().filter(|&s| s.checked_add(size).is_some_and(|e| e <= lds.len())) else {
        return 0;
    };
    let mut b = [0u8; 8];
    b[..size].copy_from_slice(&lds[start..start + size]);
    let old = u64::from_le_bytes(b);
    let new = if wide { rmw.apply(old, d0, d1) } else { u64::from(rmw.apply(old as u32, d0 as u32, d1 as u32)) };
    lds[start..start + size].copy_from_slice(&new.to_le_bytes()[..size]);
    old
}

/// Writes each EXEC lane's value to `regs` from register `from` (two registers when wide).
fn write_back(w: &mut Wave, regs: Regs, wide: bool, from: usize, vals: &[u64; LANES]) {
    for l in Wave::lanes(w.exec()) {
        regs.set(w, from, l, vals[l] as u32);
        if wide {
            regs.set(w, from + 1, l, (vals[l] >> 32) as u32);
        }
    }
}

/// ds_swizzle_b32 (AMD "Vega" ISA, DS_SWIZZLE_B32): with offset[15] set, a full permute within
/// each group of four lanes (lane i of a group takes lane offset[2i+1:2i]); else, within each
/// half of 32 lanes, lane i takes ((i & and_mask) | or_mask) ^ xor_mask with the masks in
/// offset[4:0], [9:5], [14:10]. A lane whose source is inactive gets 0. The rotate and FFT modes
/// (offset >= 0xc000) are not implemented.
fn swizzle(w: &mut Wave, inst: &Instruction, offset: u32) -> ExecResult {
    let offset = offset & 0xffff;
    if offset >= 0xc000 {
        return Err(ExecError::Unimplemented(format!("ds_swizzle rotate/FFT mode {offset:#x}")));
    }
    let Some(Operand::Vgpr { index, .. }) = inst.operand(Field::Addr) else {
        return Err(ExecError::Invalid("no source register".into()));
    };
    let src = w.v[vreg_range(w.v.len(), index, 1, "v")?];
    let dst = Regs::of(w, inst.operand(Field::D), 1, "destination")?;
    let exec = w.exec();
    let source = |i: usize| -> usize {
        if offset & 0x8000 != 0 {
            (i & !3) + ((offset as usize >> (2 * (i & 3))) & 3)
        } else {
            let (and, or, xor) =
                (offset as usize & 0x1f, (offset as usize >> 5) & 0x1f, (offset as usize >> 10) & 0x1f);
            (((i & 0x1f) & and) | or) ^ xor | (i & 0x20)
        }
    };
    for l in Wave::lanes(exec) {
        let j = source(l);
        let v = if exec >> j & 1 != 0 { src[j] } else { 0 };
        dst.set(w, 0, l, v);
    }
    Ok(Flow::Next)
}

/// ds_permute_b32 and ds_bpermute_b32 (AMD "Vega" ISA pseudo-code): the lane is (ADDR + offset)
/// / 4 modulo the wave size. bpermute pulls: lane i gets DATA0 of that lane, 0 when it is
/// inactive. permute pushes: each active lane sends DATA0 to that lane (the highest sender
/// wins), a lane nobody sends to gets 0. Only active lanes are written.
fn permute(w: &mut Wave, inst: &Instruction, offset: u32, backward: bool) -> ExecResult {
    let at = addresses(w, inst, offset)?;
    let data = Regs::of(w, inst.operand(Field::Data0), 1, "data")?;
    let dst = Regs::of(w, inst.operand(Field::D), 1, "destination")?;
    let exec = w.exec();
    let lane = |a: u64| (a / 4 % u64::from(w.wave_size)) as usize;
    let mut tmp = [0u32; LANES];
    if backward {
        for (i, t) in tmp.iter_mut().enumerate().take(w.wave_size as usize) {
            let j = lane(at[i]);
            if exec >> j & 1 != 0 {
                *t = data.get(w, 0, j);
            }
        }
    } else {
        for i in Wave::lanes(exec) {
            tmp[lane(at[i])] = data.get(w, 0, i);
        }
    }
    for l in Wave::lanes(exec) {
        dst.set(w, 0, l, tmp[l]);
    }
    Ok(Flow::Next)
}

#[cfg(test)]
#[path = "lds_tests.rs"]
mod tests;
