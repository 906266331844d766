//! FLAT, GLOBAL and SCRATCH: per-lane loads, stores and atomics by address.
//!
//! GLOBAL addresses are global. A FLAT address is first checked against the LDS and private
//! apertures ([`Apertures`]): in the LDS aperture it is an offset into the workgroup's LDS, in
//! the private aperture an offset into the lane's private segment, else global. SCRATCH
//! addresses are private offsets. Private offsets map to the wave's scratch through its
//! FLAT_SCRATCH base with the dword interleave of [`memop::private`].

use super::memop::{self, Kind, Place, Regs};
use super::operand::vreg_range;
use super::{unimplemented, Apertures, Cx, ExecError, ExecResult};
use crate::isa::table::Field;
use crate::isa::{Encoding, Instruction, Op, Operand};
use crate::mem::AtomicOp;
use crate::wave::{Wave, FLAT_SCRATCH, LANES};

/// What an instruction does per lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Load(Kind),
    Store(Kind),
    /// The operation and whether it is 64-bit.
    Atomic(AtomicOp, bool),
}

/// The one table of this family: what each opcode does (exec and implements both read it).
fn action(op: Op) -> Option<Action> {
    use Action::{Atomic, Load, Store};
    use AtomicOp as A;
    use Kind::*;
    let d16 = |bytes, signed, hi| D16 { bytes, signed, hi };
    Some(match op {
        Op::FlatLoadUbyte | Op::GlobalLoadUbyte | Op::ScratchLoadUbyte => Load(U8),
        Op::FlatLoadSbyte | Op::GlobalLoadSbyte | Op::ScratchLoadSbyte => Load(I8),
        Op::FlatLoadUshort | Op::GlobalLoadUshort | Op::ScratchLoadUshort => Load(U16),
        Op::FlatLoadSshort | Op::GlobalLoadSshort | Op::ScratchLoadSshort => Load(I16),
        Op::FlatLoadDword | Op::GlobalLoadDword | Op::ScratchLoadDword => Load(Dwords(1)),
        Op::FlatLoadDwordx2 | Op::GlobalLoadDwordx2 | Op::ScratchLoadDwordx2 => Load(Dwords(2)),
        Op::FlatLoadDwordx3 | Op::GlobalLoadDwordx3 | Op::ScratchLoadDwordx3 => Load(Dwords(3)),
        Op::FlatLoadDwordx4 | Op::GlobalLoadDwordx4 | Op::ScratchLoadDwordx4 => Load(Dwords(4)),
        Op::FlatLoadUbyteD16 | Op::GlobalLoadUbyteD16 | Op::ScratchLoadUbyteD16 => Load(d16(1, false, false)),
        Op::FlatLoadUbyteD16Hi | Op::GlobalLoadUbyteD16Hi | Op::ScratchLoadUbyteD16Hi => Load(d16(1, false, true)),
        Op::FlatLoadSbyteD16 | Op::GlobalLoadSbyteD16 | Op::ScratchLoadSbyteD16 => Load(d16(1, true, false)),
        Op::FlatLoadSbyteD16Hi | Op::GlobalLoadSbyteD16Hi | Op::ScratchLoadSbyteD16Hi => Load(d16(1, true, true)),
        Op::FlatLoadShortD16 | Op::GlobalLoadShortD16 | Op::ScratchLoadShortD16 => Load(d16(2, false, false)),
        Op::FlatLoadShortD16Hi | Op::GlobalLoadShortD16Hi | Op::ScratchLoadShortD16Hi => Load(d16(2, false, true)),
        Op::FlatStoreByte | Op::GlobalStoreByte | Op::ScratchStoreByte => Store(U8),
        Op::FlatStoreByteD16Hi | Op::GlobalStoreByteD16Hi | Op::ScratchStoreByteD16Hi => Store(StoreHi { bytes: 1 }),
        Op::FlatStoreShort | Op::GlobalStoreShort | Op::ScratchStoreShort => Store(U16),
        Op::FlatStoreShortD16Hi | Op::GlobalStoreShortD16Hi | Op::ScratchStoreShortD16Hi => Store(StoreHi { bytes: 2 }),
        Op::FlatStoreDword | Op::GlobalStoreDword | Op::ScratchStoreDword => Store(Dwords(1)),
        Op::FlatStoreDwordx2 | Op::GlobalStoreDwordx2 | Op::ScratchStoreDwordx2 => Store(Dwords(2)),
        Op::FlatStoreDwordx3 | Op::GlobalStoreDwordx3 | Op::ScratchStoreDwordx3 => Store(Dwords(3)),
        Op::FlatStoreDwordx4 | Op::GlobalStoreDwordx4 | Op::ScratchStoreDwordx4 => Store(Dwords(4)),
        Op::FlatAtomicSwap | Op::GlobalAtomicSwap => Atomic(A::Swap, false),
        Op::FlatAtomicCmpswap | Op::GlobalAtomicCmpswap => Atomic(A::CmpSwap, false),
        Op::FlatAtomicAdd | Op::GlobalAtomicAdd => Atomic(A::Add, false),
        Op::FlatAtomicSub | Op::GlobalAtomicSub => Atomic(A::Sub, false),
        Op::FlatAtomicSmin | Op::GlobalAtomicSmin => Atomic(A::Smin, false),
        Op::FlatAtomicUmin | Op::GlobalAtomicUmin => Atomic(A::Umin, false),
        Op::FlatAtomicSmax | Op::GlobalAtomicSmax => Atomic(A::Smax, false),
        Op::FlatAtomicUmax | Op::GlobalAtomicUmax => Atomic(A::Umax, false),
        Op::FlatAtomicAnd | Op::GlobalAtomicAnd => Atomic(A::And, false),
        Op::FlatAtomicOr | Op::GlobalAtomicOr => Atomic(A::Or, false),
        Op::FlatAtomicXor | Op::GlobalAtomicXor => Atomic(A::Xor, false),
        Op::FlatAtomicInc | Op::GlobalAtomicInc => Atomic(A::Inc, false),
        Op::FlatAtomicDec | Op::GlobalAtomicDec => Atomic(A::Dec, false),
        Op::GlobalAtomicAddF32 => Atomic(A::AddF32, false),
        Op::GlobalAtomicPkAddF16 => Atomic(A::PkAddF16, false),
        Op::FlatAtomicAddF64 | Op::GlobalAtomicAddF64 => Atomic(A::AddF64, true),
        Op::FlatAtomicMinF64 | Op::GlobalAtomicMinF64 => Atomic(A::MinF64, true),
        Op::FlatAtomicMaxF64 | Op::GlobalAtomicMaxF64 => Atomic(A::MaxF64, true),
        Op::FlatAtomicSwapX2 | Op::GlobalAtomicSwapX2 => Atomic(A::Swap, true),
        Op::FlatAtomicCmpswapX2 | Op::GlobalAtomicCmpswapX2 => Atomic(A::CmpSwap, true),
        Op::FlatAtomicAddX2 | Op::GlobalAtomicAddX2 => Atomic(A::Add, true),
        Op::FlatAtomicSubX2 | Op::GlobalAtomicSubX2 => Atomic(A::Sub, true),
        Op::FlatAtomicSminX2 | Op::GlobalAtomicSminX2 => Atomic(A::Smin, true),
        Op::FlatAtomicUminX2 | Op::GlobalAtomicUminX2 => Atomic(A::Umin, true),
        Op::FlatAtomicSmaxX2 | Op::GlobalAtomicSmaxX2 => Atomic(A::Smax, true),
        Op::FlatAtomicUmaxX2 | Op::GlobalAtomicUmaxX2 => Atomic(A::Umax, true),
        Op::FlatAtomicAndX2 | Op::GlobalAtomicAndX2 => Atomic(A::And, true),
        Op::FlatAtomicOrX2 | Op::GlobalAtomicOrX2 => Atomic(A::Or, true),
        Op::FlatAtomicXorX2 | Op::GlobalAtomicXorX2 => Atomic(A::Xor, true),
        Op::FlatAtomicIncX2 | Op::GlobalAtomicIncX2 => Atomic(A::Inc, true),
        Op::FlatAtomicDecX2 | Op::GlobalAtomicDecX2 => Atomic(A::Dec, true),
        _ => return None,
    })
}

/// Where a lane's access starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Global(u64),
    Lds(u64),
    /// An offset into the lane's private segment.
    Private(u32),
}

/// Whether this module runs `op`.
pub fn implements(op: Op) -> bool {
    action(op).is_some()
}

pub fn exec(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let act = action(inst.op).ok_or_else(unimplemented)?;
    if inst.mods.lds {
        return Err(ExecError::Unimplemented("loads to LDS".into()));
    }
    let at = match inst.encoding {
        Encoding::Global => global_addresses(w, inst)?.map(At::Global),
        Encoding::Scratch => scratch_offsets(w, inst)?.map(At::Private),
        _ => flat_addresses(w, inst, &cx.apertures)?,
    };
    // Flat scratch: FLAT_SCRATCH holds the wave's scratch base, set by the kernel prologue to
    // flat scratch init + the wave's scratch offset (LLVM AMDGPUUsage "Flat Scratch", GFX9).
    let base = w.sreg64(FLAT_SCRATCH);
    let wave_size = w.wave_size;
    let map = |l: usize, off: u32| match at[l] {
        At::Global(a) => (Place::Mem(a.wrapping_add(u64::from(off))), u32::MAX),
        At::Lds(a) => (Place::Lds(a + u64::from(off)), u32::MAX),
        At::Private(pa) => memop::private(base, wave_size, l, pa.wrapping_add(off)),
    };
    match act {
        Action::Load(kind) => {
            let dst = Regs::of(w, inst.operand(Field::D), kind.regs(), "destination")?;
            memop::load(w, cx, kind, dst, &map)
        }
        Action::Store(kind) => {
            let data = Regs::of(w, inst.operand(Field::Data0), kind.regs(), "data")?;
            memop::store(w, cx, kind, data, &map)
        }
        Action::Atomic(op, wide) => {
            let exec = w.exec();
            if Wave::lanes(exec).any(|l| matches!(at[l], At::Private(_))) {
                // The MI200 ISA lists no atomics on flat scratch.
                return Err(ExecError::Unimplemented("an atomic in the private aperture".into()));
            }
            let dwords = if wide { 2 } else { 1 };
            let n = if op == AtomicOp::CmpSwap { 2 * dwords } else { dwords };
            let data = Regs::of(w, inst.operand(Field::Data0), n, "data")?;
            // The decoder gives an atomic a destination only when glc asks for the old value.
            let ret = match inst.operand(Field::D) {
                Some(d) if inst.mods.glc => Some(Regs::of(w, Some(d), dwords, "destination")?),
                _ => None,
            };
            memop::atomic(w, cx, op, wide, data, ret, &map)
        }
    }
}

/// Every lane's address of a GLOBAL instruction: saddr (an SGPR pair) + the lane's 32-bit
/// offset VGPR, or the lane's 64-bit address VGPR pair when saddr is off; plus the offset.
fn global_addresses(w: &Wave, inst: &Instruction) -> Result<[u64; LANES], ExecError> {
    let mut out = [0u64; LANES];
    let off = i64::from(inst.mods.offset);
    let Some(Operand::Vgpr { index, .. }) = inst.operand(Field::Addr) else {
        return Err(ExecError::Invalid("no address register".into()));
    };
    match inst.operand(Field::Saddr) {
        Some(Operand::Sgpr { index: s, .. }) => {
            let base = w.sreg64(s);
            let r = vreg_range(w.v.len(), index, 1, "v")?;
            for (l, o) in out.iter_mut().enumerate() {
                *o = base.wrapping_add(u64::from(w.v[r][l])).wrapping_add_signed(off);
            }
        }
        _ => {
            let r = vreg_range(w.v.len(), index, 2, "v")?;
            for (l, o) in out.iter_mut().enumerate() {
                *o = (u64::from(w.v[r][l]) | u64::from(w.v[r + 1][l]) << 32).wrapping_add_signed(off);
            }
        }
    }
    Ok(out)
}

/// Every lane's private offset of a SCRATCH instruction: the saddr SGPR when it is not off
/// (gfx90a then ignores vaddr), else the lane's VGPR; plus the signed offset.
fn scratch_offsets(w: &Wave, inst: &Instruction) -> Result<[u32; LANES], ExecError> {
    let off = inst.mods.offset as u32;
    let mut out = [0u32; LANES];
    match (inst.operand(Field::Saddr), inst.operand(Field::Addr)) {
        (Some(Operand::Sgpr { index, .. }), _) => out.fill(w.sreg(index).wrapping_add(off)),
        (_, Some(Operand::Vgpr { index, .. })) => {
            let r = vreg_range(w.v.len(), index, 1, "v")?;
            for (l, o) in out.iter_mut().enumerate() {
                *o = w.v[r][l].wrapping_add(off);
            }
        }
        _ => return Err(ExecError::Invalid("no address".into())),
    }
    Ok(out)
}

/// Every lane's address of a FLAT instruction, resolved against the apertures. An aperture
/// whose limit is not above its base is absent.
fn flat_addresses(w: &Wave, inst: &Instruction, ap: &Apertures) -> Result<[At; LANES], ExecError> {
    let Some(Operand::Vgpr { index, .. }) = inst.operand(Field::Addr) else {
        return Err(ExecError::Invalid("no address register".into()));
    };
    let r = vreg_range(w.v.len(), index, 2, "v")?;
    let off = i64::from(inst.mods.offset);
    let within = |a: u64, base: u64, limit: u64| limit > base && (base..=limit).contains(&a);
    let mut out = [At::Global(0); LANES];
    for (l, o) in out.iter_mut().enumerate() {
        let a = (u64::from(w.v[r][l]) | u64::from(w.v[r + 1][l]) << 32).wrapping_add_signed(off);
        *o = if within(a, ap.shared_base, ap.shared_limit) {
            At::Lds(a - ap.shared_base)
        } else if within(a, ap.private_base, ap.private_limit) {
            // The private aperture's low 32 bits are the offset into the private segment.
            At::Private((a - ap.private_base) as u32)
        } else {
            At::Global(a)
        };
    }
    Ok(out)
}

#[cfg(test)]
#[path = "flat_tests.rs"]
mod tests;
