//! VALU: the vector ALU encodings (VOP1, VOP2, VOPC, VOP3, VOP3P), with their source modifiers
//! (VOP3 abs/neg/op_sel, SDWA selects, DPP lane moves) and destinations.
//!
//! The families ([`int`], [`float`], [`cmp`], [`packed`]) map each [`Op`] to a handler; most
//! handlers are one call of [`unary`], [`binary`] or [`ternary`] with a per-lane function, which
//! fetch the sources with their modifiers for every lane, run the function on the lanes EXEC
//! enables, and write the destination.

mod cmp;
mod float;
mod int;
mod packed;

use super::operand::{constant, special, vreg_range, Ty};
use super::{Cx, ExecError, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::{Encoding, Instruction, Op, Operand};
use crate::wave::{Wave, LANES, VCC};

/// Runs one VALU instruction of the wave.
pub type Handler = fn(&mut Wave, &Instruction, &mut Cx) -> ExecResult;

/// Whether `encoding` is a VALU encoding (whose instructions [`handler`] runs).
pub fn encodes(encoding: Encoding) -> bool {
    matches!(encoding, Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc | Encoding::Vop3 | Encoding::Vop3p)
}

/// The handler of `op`, from the family that implements it ([`super::Code`] looks it up once
/// per decoded instruction).
pub fn handler(op: Op) -> Option<Handler> {
    int::handler(op).or_else(|| float::handler(op)).or_else(|| cmp::handler(op)).or_else(|| packed::handler(op))
}

/// Whether the VALU runs `op`.
pub fn implements(op: Op) -> bool {
    handler(op).is_some()
}

/// One value per lane (64-bit wide so one type serves every operand width).
pub type Lanes = [u64; LANES];

/// The source operand field of source `i` (0, 1, 2).
pub fn src_field(i: usize) -> Field {
    [Field::S0, Field::S1, Field::S2][i]
}

/// The width mask of `ty`.
pub fn width_mask(ty: Ty) -> u64 {
    match ty {
        Ty::B16 => 0xffff,
        Ty::B32 => 0xffff_ffff,
        Ty::I64 | Ty::F64 => u64::MAX,
    }
}

fn sign_bit(ty: Ty) -> u64 {
    match ty {
        Ty::B16 => 1 << 15,
        Ty::B32 => 1 << 31,
        Ty::I64 | Ty::F64 => 1 << 63,
    }
}

/// Reads operand `op` as `ty` for every lane (no modifiers).
pub fn read_operand(w: &Wave, op: Operand, ty: Ty, cx: &Cx) -> ExecResult<Lanes> {
    let wide = matches!(ty, Ty::I64 | Ty::F64);
    let mut out = [0u64; LANES];
    match op {
        Operand::Vgpr { index, .. } | Operand::Agpr { index, .. } => {
            let (file, prefix) = match op {
                Operand::Vgpr { .. } => (&w.v, "v"),
                _ => (&w.a, "a"),
            };
            let r = vreg_range(file.len(), index, if wide { 2 } else { 1 }, prefix)?;
            for (l, o) in out.iter_mut().enumerate() {
                *o = u64::from(file[r][l]);
                if wide {
                    *o |= u64::from(file[r + 1][l]) << 32;
                }
            }
        }
        Operand::Sgpr { index, .. } => {
            let v = if wide { w.sreg64(index) } else { u64::from(w.sreg(index)) };
            out = [v & width_mask(ty); LANES];
        }
        Operand::Special(s) => out = [special(w, s, &cx.apertures)? & width_mask(ty); LANES],
        Operand::None | Operand::Off => return Err(ExecError::Invalid("missing source operand".into())),
        c => out = [constant(c, ty).expect("a constant") & width_mask(ty); LANES],
    }
    if !wide {
        let m = width_mask(ty);
        if m != 0xffff_ffff {
            out.iter_mut().for_each(|v| *v &= m);
        }
    }
    Ok(out)
}

/// Reads source `i` of `inst` as `ty` for every lane, with the instruction's modifiers: VOP3
/// op_sel (the high half of a 16-bit source), SDWA selects and sign extension, DPP lane moves
/// (src0), and abs/neg on the sign bit of floating-point sources.
pub fn fetch(w: &Wave, inst: &Instruction, i: usize, ty: Ty, cx: &Cx) -> ExecResult<Lanes> {
    let op = inst.operand(src_field(i)).ok_or_else(|| ExecError::Invalid(format!("no source {i}")))?;
    let raw_ty = if ty == Ty::B16 && (inst.sdwa.is_some() || inst.mods.op_sel & (1 << i) != 0) {
        // The selected half is read from the whole dword.
        Ty::B32
    } else {
        ty
    };
    let mut v = read_operand(w, op, raw_ty, cx)?;
    let wide = matches!(ty, Ty::I64 | Ty::F64);
    if let (0, Some(dpp)) = (i, inst.dpp) {
        // gfx90a moves 64-bit operands by row_newbcast only (LLVM 15 AMDGPUBaseInfo
        // isLegal64BitDPPControl); gfx10 has no 64-bit DPP (hasDPALU_DPP is gfx90a's).
        if wide && (inst.target.is_gfx10() || !(0x150..=0x15f).contains(&dpp.ctrl)) {
            return Err(ExecError::Unimplemented(format!("64-bit DPP with dpp_ctrl {:#x}", dpp.ctrl)));
        }
        v = dpp_move(w, inst, dpp, &v)?;
    }
    if let (0, Some(sel)) = (i, inst.dpp8) {
        if wide {
            return Err(ExecError::Unimplemented("64-bit DPP8".into()));
        }
        v = dpp8_move(w, inst, sel, &v);
    }
    if let Some(sdwa) = inst.sdwa {
        let sel = match i {
            0 => sdwa.src0_sel,
            1 => sdwa.src1_sel,
            _ => 6,
        };
        let sext = inst.mods.sext & (1 << i) != 0;
        v.iter_mut().for_each(|x| *x = sdwa_select(*x as u32, sel, sext));
    } else if inst.mods.op_sel & (1 << i) != 0 && ty == Ty::B16 {
        v.iter_mut().for_each(|x| *x = (*x >> 16) & 0xffff);
    }
    if ty == Ty::B16 && raw_ty == Ty::B32 {
        v.iter_mut().for_each(|x| *x &= 0xffff);
    }
    let (abs, neg) = (inst.mods.abs & (1 << i) != 0, inst.mods.neg & (1 << i) != 0);
    if abs || neg {
        let s = sign_bit(ty);
        for x in v.iter_mut() {
            if abs {
                *x &= !s;
            }
            if neg {
                *x ^= s;
            }
        }
    }
    Ok(v)
}

/// The SDWA source select: 0-3 BYTE_0..3, 4-5 WORD_0..1, 6 DWORD; `sext` sign-extends the part.
pub fn sdwa_select(x: u32, sel: u8, sext: bool) -> u64 {
    let (shift, bits) = match sel {
        0..=3 => (8 * u32::from(sel), 8),
        4 | 5 => (16 * u32::from(sel - 4), 16),
        _ => (0, 32),
    };
    let part = if bits == 32 { x } else { (x >> shift) & ((1 << bits) - 1) };
    let v = if sext && bits < 32 {
        let s = 32 - bits;
        (((part << s) as i32) >> s) as u32
    } else {
        part
    };
    u64::from(v)
}

/// The lanes the instruction writes: EXEC and, with DPP, the row and bank masks and the lanes
/// whose source lane is valid (or all of them with bound_ctrl, which reads 0 instead). DPP8 has
/// no masks: every enabled lane writes.
pub fn active(w: &Wave, inst: &Instruction) -> u64 {
    let exec = w.exec();
    let Some(dpp) = inst.dpp else { return exec };
    let mut m = 0;
    for l in Wave::lanes(exec) {
        // Rows are 16 lanes, banks 4 lanes of a row ("DPP" in the MI200 ISA guide, VOP_DPP fields).
        let written = dpp.row_mask & (1 << (l / 16)) != 0 && dpp.bank_mask & (1 << ((l / 4) % 4)) != 0;
        if written && (dpp.bound_ctrl || dpp_valid_source(w, inst, dpp.ctrl, l).is_some()) {
            m |= 1 << l;
        }
    }
    m
}

/// The lane `lane` reads with dpp_ctrl `ctrl` (DppCtrl, LLVM 15 SIDefines.h), `None` when that
/// lane is outside the row or wave, or `ctrl` is reserved on the target: gfx9 has the wave
/// shifts and row broadcasts, gfx10 row_share and row_xmask in their place (0x150-0x16f).
pub fn dpp_source(ctrl: u16, lane: usize, wave_size: usize, gfx10: bool) -> Option<usize> {
    let row = lane & !15;
    let i = lane & 15;
    let n = usize::from(ctrl & 15);
    let src = match ctrl {
        // quad_perm: two bits per lane of the quad.
        0x00..=0xff => (lane & !3) | (usize::from(ctrl) >> (2 * (lane & 3))) & 3,
        // row_shl: lane i reads i + n of its row; row_shr: i - n; row_ror: rotates right.
        0x101..=0x10f => row + i.checked_add(n).filter(|&j| j < 16)?,
        0x111..=0x11f => row + i.checked_sub(n)?,
        0x121..=0x12f => row + (i + 16 - n) % 16,
        // row_mirror, row_half_mirror.
        0x140 => row + 15 - i,
        0x141 => (lane & !7) + 7 - (lane & 7),
        // gfx90a row_newbcast:n and gfx10 row_share:n: lane n of the same row.
        0x150..=0x15f => row + n,
        // gfx10 row_xmask:n: lane i ^ n of the same row.
        0x160..=0x16f if gfx10 => row + (i ^ n),
        _ if gfx10 => return None,
        // wave_shl1/wave_rol1 read lane + 1, wave_shr1/wave_ror1 lane - 1.
        0x130 => lane + 1,
        0x134 => (lane + 1) % wave_size,
        0x138 => lane.checked_sub(1)?,
        0x13c => (lane + wave_size - 1) % wave_size,
        // row_bcast15: lane 15 of the previous row; row_bcast31: lane 31, to rows 2 and 3.
        0x142 => row.checked_sub(1)?,
        0x143 if lane >= 32 => 31,
        _ => return None,
    };
    (src < wave_size).then_some(src)
}

/// Whether `ctrl` names a dpp_ctrl this core moves lanes by on the target.
fn dpp_ctrl_valid(ctrl: u16, gfx10: bool) -> bool {
    match ctrl {
        0x00..=0xff | 0x101..=0x10f | 0x111..=0x11f | 0x121..=0x12f | 0x140 | 0x141 | 0x150..=0x15f => true,
        0x160..=0x16f => gfx10,
        0x130 | 0x134 | 0x138 | 0x13c | 0x142 | 0x143 => !gfx10,
        _ => false,
    }
}

/// The source lane of `lane` if the DPP source is valid: in range and enabled in EXEC (a
/// disabled lane's value is not read; MI200 ISA guide, DPP: "BOUND_CTRL"), or, with gfx10's FI
/// (fetch inactive), whatever EXEC says (RDNA2 ISA guide, DPP16 "FI").
fn dpp_valid_source(w: &Wave, inst: &Instruction, ctrl: u16, lane: usize) -> Option<usize> {
    let fi = inst.mods.fi;
    dpp_source(ctrl, lane, w.wave_size as usize, inst.target.is_gfx10()).filter(|&s| fi || w.exec() & (1 << s) != 0)
}

/// src0 moved across lanes by DPP: an invalid source reads 0 (with bound_ctrl; without it the
/// lane does not write, see [`active`]).
fn dpp_move(w: &Wave, inst: &Instruction, dpp: crate::isa::Dpp, v: &Lanes) -> ExecResult<Lanes> {
    if !dpp_ctrl_valid(dpp.ctrl, inst.target.is_gfx10()) {
        return Err(ExecError::Unimplemented(format!("dpp_ctrl {:#x} on {:?}", dpp.ctrl, inst.target)));
    }
    let mut out = [0u64; LANES];
    for (l, o) in out.iter_mut().enumerate().take(w.wave_size as usize) {
        *o = dpp_valid_source(w, inst, dpp.ctrl, l).map_or(0, |s| v[s]);
    }
    Ok(out)
}

/// src0 moved by gfx10 DPP8: lane `8g + i` reads lane `8g + sel[i]`; a source lane EXEC
/// disables reads 0 unless FI is set (RDNA2 ISA guide, DPP8: "FI").
fn dpp8_move(w: &Wave, inst: &Instruction, sel: [u8; 8], v: &Lanes) -> Lanes {
    let mut out = [0u64; LANES];
    for (l, o) in out.iter_mut().enumerate().take(w.wave_size as usize) {
        let s = (l & !7) + usize::from(sel[l & 7] & 7);
        if inst.mods.fi || w.exec() & (1 << s) != 0 {
            *o = v[s];
        }
    }
    out
}

/// Writes `vals` (as `ty`) to the vector destination of `inst` in the lanes of `mask`, with VOP3
/// op_sel (16-bit result to the high half) and SDWA destination selects.
pub fn write_vdst(w: &mut Wave, inst: &Instruction, vals: &Lanes, ty: Ty, mask: u64) -> ExecResult<()> {
    let op = inst.operand(Field::D).ok_or_else(|| ExecError::Invalid("no vector destination".into()))?;
    write_vector(w, op, inst, vals, ty, mask)
}

/// Writes `vals` to vector register operand `op` (a VGPR or AGPR) in the lanes of `mask`.
pub fn write_vector(w: &mut Wave, op: Operand, inst: &Instruction, vals: &Lanes, ty: Ty, mask: u64) -> ExecResult<()> {
    let (file, index, prefix) = match op {
        Operand::Vgpr { index, .. } => (&mut w.v, index, "v"),
        Operand::Agpr { index, .. } => (&mut w.a, index, "a"),
        _ => return Err(ExecError::Invalid(format!("{op:?} is not a vector destination"))),
    };
    let wide = matches!(ty, Ty::I64 | Ty::F64);
    let r = vreg_range(file.len(), index, if wide { 2 } else { 1 }, prefix)?;
    let hi16 = ty == Ty::B16 && inst.mods.op_sel & (1 << 3) != 0;
    // One loop per form, the form chosen once per instruction.
    if wide {
        for l in Wave::lanes(mask) {
            file[r][l] = vals[l] as u32;
            file[r + 1][l] = (vals[l] >> 32) as u32;
        }
        return Ok(());
    }
    let reg = &mut file[r];
    if let Some(sdwa) = inst.sdwa {
        Wave::lanes(mask).for_each(|l| reg[l] = sdwa_dst(reg[l], vals[l] as u32, sdwa.dst_sel, sdwa.dst_unused));
    } else if hi16 {
        Wave::lanes(mask).for_each(|l| reg[l] = (reg[l] & 0xffff) | (vals[l] as u32) << 16);
    } else if ty == Ty::B16 && inst.target.is_gfx10() {
        // gfx10 16-bit VALU results keep the high half (LLVM 15
        // GCNSubtarget::zeroesHigh16BitsOfDest: "On gfx10, all 16-bit instructions preserve
        // the high bits").
        Wave::lanes(mask).for_each(|l| reg[l] = (reg[l] & 0xffff_0000) | (vals[l] as u32 & 0xffff));
    } else if ty == Ty::B16 {
        // gfx9 16-bit VALU results zero the high half (LLVM 15 GCNSubtarget::zeroesHigh16BitsOfDest).
        Wave::lanes(mask).for_each(|l| reg[l] = vals[l] as u32 & 0xffff);
    } else if mask == u64::MAX {
        reg.iter_mut().zip(vals).for_each(|(d, v)| *d = *v as u32);
    } else {
        Wave::lanes(mask).for_each(|l| reg[l] = vals[l] as u32);
    }
    Ok(())
}

/// The SDWA destination: the result's low bits placed at `sel`, the rest padded with zeros
/// (0), sign-extended (1) or preserved (2).
pub fn sdwa_dst(old: u32, v: u32, sel: u8, unused: u8) -> u32 {
    let (shift, bits) = match sel {
        0..=3 => (8 * u32::from(sel), 8),
        4 | 5 => (16 * u32::from(sel - 4), 16),
        _ => return v,
    };
    let field = ((1u32 << bits) - 1) << shift;
    let placed = (v << shift) & field;
    match unused {
        2 => (old & !field) | placed,
        1 => {
            let s = 32 - bits;
            let sext = (((v << s) as i32) >> s) as u32;
            let above = if shift + bits < 32 { sext.wrapping_shl(shift) & !(field | ((1 << shift) - 1)) } else { 0 };
            placed | above
        }
        _ => placed,
    }
}

/// The scalar register a lane-mask result goes to: the VOP3 scalar destination, or VCC for the
/// 32-bit encodings.
pub fn mask_dst(inst: &Instruction) -> ExecResult<u8> {
    // SDWA VOPC puts its sdst in the slot of the implicit VCC.
    for f in [Field::Sd, Field::Ds, Field::Vcc] {
        if let Some(op) = inst.operand(f) {
            return super::operand::sdst(op);
        }
    }
    Ok(VCC)
}

/// Reads a lane mask source (VOP2 carry-in is VCC; VOP3 names an SGPR pair).
pub fn mask_src(w: &Wave, op: Operand) -> ExecResult<u64> {
    match op {
        Operand::Sgpr { index, .. } => Ok(w.lane_mask_reg(index) & w.lane_mask()),
        Operand::Int(i) => Ok(i as i64 as u64 & w.lane_mask()),
        _ => Err(ExecError::Invalid(format!("{op:?} is not a lane mask"))),
    }
}

/// Writes a lane mask result to [`mask_dst`]: the bits of `bits` in the lanes of `mask`, zero
/// elsewhere (a disabled lane writes 0 to a VOPC or carry-out mask).
pub fn write_mask_dst(w: &mut Wave, inst: &Instruction, bits: u64, mask: u64) -> ExecResult<()> {
    let d = mask_dst(inst)?;
    w.set_lane_mask_reg(d, bits & mask);
    Ok(())
}

/// Fetches the `N` sources of `inst`.
pub fn fetch_all<const N: usize>(w: &Wave, inst: &Instruction, cx: &Cx, src: [Ty; N]) -> ExecResult<[Lanes; N]> {
    let mut s = [[0u64; LANES]; N];
    for (i, ty) in src.iter().enumerate() {
        s[i] = fetch(w, inst, i, *ty, cx)?;
    }
    Ok(s)
}

/// Where the lane values of a source are: the common sources are read in place, not copied
/// into [`Lanes`] first (the per-instruction cost that dominates the interpreter).
#[derive(Clone, Copy)]
enum View<'a> {
    /// A 32-bit vector register, read as is.
    Reg(&'a [u32; LANES]),
    /// One value for every lane (an SGPR, a constant, a special register).
    Splat(u64),
    /// Values fetched with their modifiers.
    Fetched(&'a Lanes),
}

impl View<'_> {
    #[inline]
    fn at(self, lane: usize) -> u64 {
        match self {
            View::Reg(r) => u64::from(r[lane]),
            View::Splat(v) => v,
            View::Fetched(v) => v[lane],
        }
    }
}

/// Source `i` in place when it is a 32-bit operand without modifiers (no DPP or DPP8, SDWA,
/// op_sel, abs or neg), whose value [`fetch`] would copy unchanged; `None` otherwise. Errors are
/// [`fetch`]'s.
fn plain<'a>(w: &'a Wave, inst: &Instruction, i: usize, ty: Ty, cx: &Cx) -> ExecResult<Option<View<'a>>> {
    let bit = 1 << i;
    let m = &inst.mods;
    let lane_move = i == 0 && (inst.dpp.is_some() || inst.dpp8.is_some());
    if ty != Ty::B32 || inst.sdwa.is_some() || lane_move || (m.op_sel | m.abs | m.neg) & bit != 0 {
        return Ok(None);
    }
    let op = inst.operand(src_field(i)).ok_or_else(|| ExecError::Invalid(format!("no source {i}")))?;
    let mask = width_mask(ty);
    Ok(Some(match op {
        Operand::Vgpr { index, .. } => View::Reg(&w.v[vreg_range(w.v.len(), index, 1, "v")?]),
        Operand::Agpr { index, .. } => View::Reg(&w.a[vreg_range(w.a.len(), index, 1, "a")?]),
        Operand::Sgpr { index, .. } => View::Splat(u64::from(w.sreg(index)) & mask),
        Operand::Special(s) => View::Splat(special(w, s, &cx.apertures)? & mask),
        Operand::None | Operand::Off => return Err(ExecError::Invalid("missing source operand".into())),
        c => View::Splat(constant(c, ty).expect("a constant") & mask),
    }))
}

/// The `N` sources of `inst` as 32-bit values per lane when every one is a VGPR, AGPR or one
/// value for all lanes without modifiers ([`plain`]): registers in place, the others filled
/// into `store`, for loops that vectorize; `None` otherwise. Errors are [`fetch`]'s.
pub fn plain32<'a, const N: usize>(
    w: &'a Wave,
    inst: &Instruction,
    cx: &Cx,
    store: &'a mut [[u32; LANES]; N],
) -> ExecResult<Option<[&'a [u32; LANES]; N]>> {
    let mut regs = [None; N];
    for (i, (r, st)) in regs.iter_mut().zip(store.iter_mut()).enumerate() {
        match plain(w, inst, i, Ty::B32, cx)? {
            Some(View::Reg(v)) => *r = Some(v),
            Some(View::Splat(v)) => *st = [v as u32; LANES],
            _ => return Ok(None),
        }
    }
    let store: &'a [[u32; LANES]; N] = store;
    Ok(Some(std::array::from_fn(|i| regs[i].unwrap_or(&store[i]))))
}

/// The VGPR or AGPR a 32-bit result of `inst` without SDWA goes to, as a register index into
/// `w.v` (`false`) or `w.a` (`true`); errors as [`write_vdst`]'s.
pub fn vdst32(w: &Wave, inst: &Instruction) -> ExecResult<(bool, usize)> {
    match inst.operand(Field::D) {
        Some(Operand::Vgpr { index, .. }) => Ok((false, vreg_range(w.v.len(), index, 1, "v")?)),
        Some(Operand::Agpr { index, .. }) => Ok((true, vreg_range(w.a.len(), index, 1, "a")?)),
        Some(op) => Err(ExecError::Invalid(format!("{op:?} is not a vector destination"))),
        None => Err(ExecError::Invalid("no vector destination".into())),
    }
}

/// The `N` sources of `inst`, each in place ([`plain`]) or fetched into `store`, in source order
/// (so the first failing source is the error, as with [`fetch_all`]).
fn sources<'a, const N: usize>(
    w: &'a Wave,
    inst: &Instruction,
    cx: &Cx,
    src: [Ty; N],
    store: &'a mut [Lanes; N],
) -> ExecResult<[View<'a>; N]> {
    let mut inplace = [None; N];
    for (i, &ty) in src.iter().enumerate() {
        inplace[i] = plain(w, inst, i, ty, cx)?;
        if inplace[i].is_none() {
            store[i] = fetch(w, inst, i, ty, cx)?;
        }
    }
    let store: &'a [Lanes; N] = store;
    Ok(std::array::from_fn(|i| inplace[i].unwrap_or(View::Fetched(&store[i]))))
}

/// Like [`lanes`], for operations that also produce a bit per lane (a carry-out): `f` returns
/// the value and the bit; the bits go to [`mask_dst`], zero for inactive lanes.
pub fn lanes_mask<const N: usize>(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    src: [Ty; N],
    dst: Ty,
    f: impl Fn(usize, [u64; N]) -> (u64, bool),
) -> ExecResult {
    let mut store = [[0u64; LANES]; N];
    let s = sources(w, inst, cx, src, &mut store)?;
    let mask = active(w, inst);
    let mut out = [0u64; LANES];
    let mut bits = 0u64;
    for l in Wave::lanes(mask) {
        let (v, b) = f(l, std::array::from_fn(|i| s[i].at(l)));
        out[l] = v & width_mask(dst);
        bits |= u64::from(b) << l;
    }
    write_vdst(w, inst, &out, dst, mask)?;
    write_mask_dst(w, inst, bits, mask)?;
    Ok(Flow::Next)
}

/// Fetches `N` sources, runs `f` per active lane and writes the vector destination.
#[inline(always)]
pub fn lanes<const N: usize>(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    src: [Ty; N],
    dst: Ty,
    f: impl Fn([u64; N]) -> u64,
) -> ExecResult {
    lanes_at(w, inst, cx, src, dst, |_, s| f(s))
}

/// Like [`lanes`], `f` also given the lane's index (for an operand read outside the sources,
/// such as the addend of v_fmac).
#[inline(always)]
pub fn lanes_at<const N: usize>(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    src: [Ty; N],
    dst: Ty,
    f: impl Fn(usize, [u64; N]) -> u64,
) -> ExecResult {
    let mut store = [[0u64; LANES]; N];
    let s = sources(w, inst, cx, src, &mut store)?;
    let mask = active(w, inst);
    let mut out = [0u64; LANES];
    for l in Wave::lanes(mask) {
        out[l] = f(l, std::array::from_fn(|i| s[i].at(l))) & width_mask(dst);
    }
    write_vdst(w, inst, &out, dst, mask)?;
    Ok(Flow::Next)
}

/// A one-source operation.
pub fn unary(w: &mut Wave, inst: &Instruction, cx: &mut Cx, src: Ty, dst: Ty, f: impl Fn(u64) -> u64) -> ExecResult {
    lanes(w, inst, cx, [src], dst, |[a]| f(a))
}

/// A two-source operation.
pub fn binary(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    src: [Ty; 2],
    dst: Ty,
    f: impl Fn(u64, u64) -> u64,
) -> ExecResult {
    lanes(w, inst, cx, src, dst, |[a, b]| f(a, b))
}

/// A three-source operation.
pub fn ternary(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    src: [Ty; 3],
    dst: Ty,
    f: impl Fn(u64, u64, u64) -> u64,
) -> ExecResult {
    lanes(w, inst, cx, src, dst, |[a, b, c]| f(a, b, c))
}

#[cfg(test)]
mod ext_tests;

#[cfg(test)]
mod llvm_tests;
