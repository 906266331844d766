//! VALU packed math: VOP3P operations on two 16-bit halves of a dword (f16, i16/u16), on two
//! f32 dwords of a register pair (gfx90a's v_pk_*_f32), the mixed-precision FMAs and the dot
//! products, and the VOP2 packed accumulators (v_pk_fmac_f16, v_dot2c_f32_f16; the integer
//! v_dot*c are int.rs's).
//!
//! Source selects (CDNA2 ISA guide, VOP3P): the low result half reads the half (or dword) of
//! source i that op_sel bit i names, the high result half the one op_sel_hi bit i names; neg_lo
//! and neg_hi negate the float halves. An inline constant of a 16-bit packed operation is the
//! 16-bit value in both halves (LLVM 15 AMDGPUBaseInfo isInlinableLiteralV216 inlines a packed
//! constant only when both halves are that value).
//!
//! MFMA (v_mfma_*) is not here: the matrix core is not implemented, so those opcodes stay out of
//! the handler table and fault as unimplemented.

use super::float::{apply, fma, sources, Env};
use super::{read_operand, Handler, Lanes};
use crate::exec::operand::{constant, Ty};
use crate::exec::{Cx, ExecError, ExecResult};
use crate::fp::{self, Prec};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op, Operand};
use crate::wave::{Wave, LANES};

/// Source `i` of a packed operation, unmodified: a dword per lane (`wide`: a register pair).
fn raw(w: &Wave, inst: &Instruction, cx: &Cx, i: usize, wide: bool) -> ExecResult<Lanes> {
    let op = inst.operand(super::src_field(i)).ok_or_else(|| ExecError::Invalid(format!("no source {i}")))?;
    match op {
        Operand::Vgpr { .. } | Operand::Agpr { .. } | Operand::Sgpr { .. } | Operand::Special(_) => {
            read_operand(w, op, if wide { Ty::I64 } else { Ty::B32 }, cx)
        }
        Operand::None | Operand::Off => Err(ExecError::Invalid("missing source operand".into())),
        c if wide => match constant(c, Ty::B32) {
            Some(0) => Ok([0; LANES]),
            _ => Err(ExecError::Unimplemented("a nonzero constant operand of a packed f32 operation".into())),
        },
        c => {
            let v = constant(c, Ty::B16).expect("a constant") & 0xffff;
            Ok([v | v << 16; LANES])
        }
    }
}

/// The (low, high) halves of source `i` for one lane's dword `x`, selected by op_sel and
/// op_sel_hi, with neg_lo/neg_hi on the sign bits when `float`.
fn halves(inst: &Instruction, i: usize, x: u64, float: bool) -> (u64, u64) {
    let m = &inst.mods;
    let pick = |hi: bool| if hi { (x >> 16) & 0xffff } else { x & 0xffff };
    let mut lo = pick(m.op_sel & (1 << i) != 0);
    let mut hi = pick(m.op_sel_hi & (1 << i) != 0);
    if float {
        lo ^= u64::from(m.neg >> i & 1) << 15;
        hi ^= u64::from(m.neg_hi >> i & 1) << 15;
    }
    (lo, hi)
}

/// The (low, high) dwords of source `i` of a packed f32 operation for one lane's pair `x`.
fn dwords(inst: &Instruction, i: usize, x: u64, float: bool) -> (u64, u64) {
    let m = &inst.mods;
    let pick = |hi: bool| if hi { x >> 32 } else { x & 0xffff_ffff };
    let mut lo = pick(m.op_sel & (1 << i) != 0);
    let mut hi = pick(m.op_sel_hi & (1 << i) != 0);
    if float {
        lo ^= u64::from(m.neg >> i & 1) << 31;
        hi ^= u64::from(m.neg_hi >> i & 1) << 31;
    }
    (lo, hi)
}

/// A 16-bit packed operation: `f` maps the N low halves, then the N high halves, to a half.
fn pk16<const N: usize>(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    float: bool,
    f: impl Fn([u64; N]) -> u64,
) -> ExecResult {
    let s = raws::<N>(w, inst, cx, false)?;
    apply(w, inst, &s, Ty::B32, |x| {
        let hs: [(u64, u64); N] = std::array::from_fn(|i| halves(inst, i, x[i], float));
        let lo = f(hs.map(|h| h.0)) & 0xffff;
        let hi = f(hs.map(|h| h.1)) & 0xffff;
        lo | hi << 16
    })
}

/// Sources 0..N, unmodified.
fn raws<const N: usize>(w: &Wave, inst: &Instruction, cx: &Cx, wide: bool) -> ExecResult<[Lanes; N]> {
    let mut out = [[0u64; LANES]; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = raw(w, inst, cx, i, wide)?;
    }
    Ok(out)
}

/// A packed f16 operation on values, rounded once per half.
fn pk_f16<const N: usize>(w: &mut Wave, inst: &Instruction, cx: &mut Cx, f: fn([f64; N]) -> f64) -> ExecResult {
    let e = Env::new(w, inst, &[Prec::H], Some(Prec::H))?;
    pk16(w, inst, cx, true, |h: [u64; N]| e.put(f(h.map(|b| e.get(b, Prec::H))), Prec::H))
}

/// v_pk_min/max_f16 on bits, with the IEEE-mode NaN rules.
fn pk_minmax_f16(w: &mut Wave, inst: &Instruction, cx: &mut Cx, max: bool) -> ExecResult {
    let e = Env::new(w, inst, &[Prec::H], Some(Prec::H))?;
    let p = Prec::H;
    let ieee = e.ieee();
    pk16(w, inst, cx, true, |[a, b]| e.put_bits(fp::minmax(p, e.input(a, p), e.input(b, p), ieee, max), p))
}

/// A packed 16-bit integer operation (clamp, which saturates, is not implemented).
fn pk_int<const N: usize>(w: &mut Wave, inst: &Instruction, cx: &mut Cx, f: fn([u64; N]) -> u64) -> ExecResult {
    if inst.mods.clamp {
        return Err(ExecError::Unimplemented("clamp (saturation) of a packed integer operation".into()));
    }
    pk16(w, inst, cx, false, f)
}

/// A packed f32 operation on register pairs (gfx90a): each dword is an f32 lane of its own.
fn pk_f32<const N: usize>(w: &mut Wave, inst: &Instruction, cx: &mut Cx, f: fn([f64; N]) -> f64) -> ExecResult {
    let e = Env::new(w, inst, &[Prec::S], Some(Prec::S))?;
    let s = raws::<N>(w, inst, cx, true)?;
    apply(w, inst, &s, Ty::F64, |x| {
        let ds: [(u64, u64); N] = std::array::from_fn(|i| dwords(inst, i, x[i], true));
        let lo = e.put(f(ds.map(|d| e.get(d.0, Prec::S))), Prec::S);
        let hi = e.put(f(ds.map(|d| e.get(d.1, Prec::S))), Prec::S);
        lo | hi << 32
    })
}

/// v_pk_mov_b32: the low dword from src0's dword op_sel bit 0, the high from src1's op_sel bit 1.
fn pk_mov(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let s = raws::<2>(w, inst, cx, true)?;
    let sel = inst.mods.op_sel;
    apply(w, inst, &s, Ty::F64, |[a, b]| {
        let lo = if sel & 1 != 0 { a >> 32 } else { a & 0xffff_ffff };
        let hi = if sel & 2 != 0 { b >> 32 } else { b & 0xffff_ffff };
        lo | hi << 32
    })
}

/// v_fma_mix*: per source, op_sel_hi bit i set means an f16 (the half op_sel bit i names),
/// clear an f32; neg_lo negates and neg_hi takes the absolute value. The fma is computed in
/// f64 (exact products; the sum rounded to f64 first, so the f16 results of mixlo/mixhi may
/// round twice where the exact sum needs more than 53 bits). `out`: 0 f32, 1 f16 to the low
/// half, 2 f16 to the high half (the other half kept).
fn fma_mix(w: &mut Wave, inst: &Instruction, cx: &mut Cx, out: u8) -> ExecResult {
    let rp = if out == 0 { Prec::S } else { Prec::H };
    let e = Env::new(w, inst, &[Prec::S, Prec::H], Some(rp))?;
    let m = inst.mods;
    let mut s = [[0u64; LANES]; 3];
    for (i, l) in s.iter_mut().enumerate() {
        let op = inst.operand(super::src_field(i)).ok_or_else(|| ExecError::Invalid(format!("no source {i}")))?;
        let half = m.op_sel_hi & (1 << i) != 0;
        *l = match op {
            Operand::Vgpr { .. } | Operand::Agpr { .. } | Operand::Sgpr { .. } | Operand::Special(_) => {
                read_operand(w, op, Ty::B32, cx)?
            }
            c => {
                let v = constant(c, if half { Ty::B16 } else { Ty::B32 })
                    .ok_or_else(|| ExecError::Invalid("missing source operand".into()))?;
                [if half { v | v << 16 } else { v }; LANES]
            }
        };
    }
    let d = inst.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
    let old = read_operand(w, d, Ty::B32, cx)?;
    let s = [s[0], s[1], s[2], old];
    apply(w, inst, &s, Ty::B32, |[a, b, c, old]| {
        let val = |i: usize, x: u64| {
            let v = if m.op_sel_hi & (1 << i) != 0 {
                let h = if m.op_sel & (1 << i) != 0 { x >> 16 } else { x } & 0xffff;
                e.get(h, Prec::H)
            } else {
                e.get(x, Prec::S)
            };
            let v = if m.neg_hi & (1 << i) != 0 { v.abs() } else { v };
            if m.neg & (1 << i) != 0 {
                -v
            } else {
                v
            }
        };
        let (x, y, z) = (val(0, a), val(1, b), val(2, c));
        match out {
            0 => e.put(fma(Prec::S, x, y, z), rp),
            1 => (old & 0xffff_0000) | e.put(x.mul_add(y, z), rp),
            _ => (old & 0xffff) | e.put(x.mul_add(y, z), rp) << 16,
        }
    })
}

/// v_dot2_f32_f16: S0.lo * S1.lo + S0.hi * S1.hi + S2.f32, the halves selected as for packed
/// operations; computed in f64 (the f16 products are exact) and rounded once to f32.
fn dot2_f32_f16(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let e = Env::new(w, inst, &[Prec::S, Prec::H], Some(Prec::S))?;
    let s = raws::<2>(w, inst, cx, false)?;
    let op2 = inst.operand(Field::S2).ok_or_else(|| ExecError::Invalid("no source 2".into()))?;
    let c = match op2 {
        Operand::Vgpr { .. } | Operand::Agpr { .. } | Operand::Sgpr { .. } | Operand::Special(_) => {
            read_operand(w, op2, Ty::B32, cx)?
        }
        k => [constant(k, Ty::B32).ok_or_else(|| ExecError::Invalid("missing source 2".into()))?; LANES],
    };
    let neg2 = inst.mods.neg & 4 != 0;
    apply(w, inst, &[s[0], s[1], c], Ty::B32, |[a, b, c]| {
        let (a0, a1) = halves(inst, 0, a, true);
        let (b0, b1) = halves(inst, 1, b, true);
        let h = |x| e.get(x, Prec::H);
        let acc = e.get(c, Prec::S);
        let acc = if neg2 { -acc } else { acc };
        e.put(h(a0) * h(b0) + h(a1) * h(b1) + acc, Prec::S)
    })
}

/// VOP3P integer dot products: the `bits`-bit parts of S0 and S1 (signed or not), their products
/// summed onto S2, wrapping (clamp, which saturates, is not implemented). The VOP2 v_dot*c
/// forms are int.rs's.
fn dot_int(w: &mut Wave, inst: &Instruction, cx: &mut Cx, bits: u32, signed: bool) -> ExecResult {
    if inst.mods.clamp {
        return Err(ExecError::Unimplemented("clamp (saturation) of an integer dot product".into()));
    }
    let m = inst.mods;
    if m.op_sel & 3 != 0 || (bits == 16 && m.op_sel_hi & 3 != 3) {
        return Err(ExecError::Unimplemented("op_sel of an integer dot product".into()));
    }
    let s = sources(w, inst, cx, [Ty::B32; 3])?;
    apply(w, inst, &s, Ty::B32, |[a, b, c]| {
        let part = |x: u64, i: u32| {
            let v = (x >> (i * bits)) & ((1 << bits) - 1);
            if signed {
                ((v << (64 - bits)) as i64) >> (64 - bits)
            } else {
                v as i64
            }
        };
        let sum = (0..32 / bits).fold(c as u32 as i32 as i64, |s, i| s.wrapping_add(part(a, i) * part(b, i)));
        sum as u64 & 0xffff_ffff
    })
}

/// v_pk_fmac_f16 (VOP2): both halves fma(S0, S1, D).
fn pk_fmac_f16(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let e = Env::new(w, inst, &[Prec::H], Some(Prec::H))?;
    let [a, b] = sources(w, inst, cx, [Ty::B32; 2])?;
    let d = inst.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
    let c = read_operand(w, d, Ty::B32, cx)?;
    apply(w, inst, &[a, b, c], Ty::B32, |[a, b, c]| {
        let half = |sh: u32| {
            let g = |x: u64| e.get((x >> sh) & 0xffff, Prec::H);
            e.put(fma(Prec::H, g(a), g(b), g(c)), Prec::H)
        };
        half(0) | half(16) << 16
    })
}

/// v_dot2c_f32_f16 (VOP2): D.f32 += S0.lo * S1.lo + S0.hi * S1.hi.
fn dot2c_f32_f16(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let e = Env::new(w, inst, &[Prec::S, Prec::H], Some(Prec::S))?;
    let [a, b] = sources(w, inst, cx, [Ty::B32; 2])?;
    let d = inst.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
    let c = read_operand(w, d, Ty::B32, cx)?;
    apply(w, inst, &[a, b, c], Ty::B32, |[a, b, c]| {
        let h = |x: u64, sh: u32| e.get((x >> sh) & 0xffff, Prec::H);
        e.put(h(a, 0) * h(b, 0) + h(a, 16) * h(b, 16) + e.get(c, Prec::S), Prec::S)
    })
}

fn sext16(x: u64) -> i64 {
    i64::from(x as u16 as i16)
}

/// The handler of `op`, if this family implements it.
pub(super) fn handler(op: Op) -> Option<Handler> {
    use Op::*;
    Some(match op {
        VPkAddF16 => |w, i, cx| pk_f16(w, i, cx, |[a, b]| a + b),
        VPkMulF16 => |w, i, cx| pk_f16(w, i, cx, |[a, b]| a * b),
        VPkFmaF16 => |w, i, cx| pk_f16(w, i, cx, |[a, b, c]| fma(Prec::H, a, b, c)),
        VPkMinF16 => |w, i, cx| pk_minmax_f16(w, i, cx, false),
        VPkMaxF16 => |w, i, cx| pk_minmax_f16(w, i, cx, true),
        VPkAddU16 | VPkAddI16 => |w, i, cx| pk_int(w, i, cx, |[a, b]| a.wrapping_add(b)),
        VPkSubU16 | VPkSubI16 => |w, i, cx| pk_int(w, i, cx, |[a, b]| a.wrapping_sub(b)),
        VPkMulLoU16 => |w, i, cx| pk_int(w, i, cx, |[a, b]| a.wrapping_mul(b)),
        VPkMadU16 => |w, i, cx| pk_int(w, i, cx, |[a, b, c]| a.wrapping_mul(b).wrapping_add(c)),
        VPkMadI16 => |w, i, cx| pk_int(w, i, cx, |[a, b, c]| a.wrapping_mul(b).wrapping_add(c)),
        VPkMinU16 => |w, i, cx| pk_int(w, i, cx, |[a, b]| a.min(b)),
        VPkMaxU16 => |w, i, cx| pk_int(w, i, cx, |[a, b]| a.max(b)),
        VPkMinI16 => |w, i, cx| pk_int(w, i, cx, |[a, b]| sext16(a).min(sext16(b)) as u64),
        VPkMaxI16 => |w, i, cx| pk_int(w, i, cx, |[a, b]| sext16(a).max(sext16(b)) as u64),
        // The shifts take the count from src0 (its low 4 bits) and shift src1.
        VPkLshlrevB16 => |w, i, cx| pk_int(w, i, cx, |[s, x]| x << (s & 15)),
        VPkLshrrevB16 => |w, i, cx| pk_int(w, i, cx, |[s, x]| x >> (s & 15)),
        VPkAshrrevI16 => |w, i, cx| pk_int(w, i, cx, |[s, x]| (sext16(x) >> (s & 15)) as u64),
        VPkFmaF32 => |w, i, cx| pk_f32(w, i, cx, |[a, b, c]| fma(Prec::S, a, b, c)),
        VPkMulF32 => |w, i, cx| pk_f32(w, i, cx, |[a, b]| a * b),
        VPkAddF32 => |w, i, cx| pk_f32(w, i, cx, |[a, b]| a + b),
        VPkMovB32 => pk_mov,
        VFmaMixF32 => |w, i, cx| fma_mix(w, i, cx, 0),
        VFmaMixloF16 => |w, i, cx| fma_mix(w, i, cx, 1),
        VFmaMixhiF16 => |w, i, cx| fma_mix(w, i, cx, 2),
        VDot2F32F16 => dot2_f32_f16,
        VDot2I32I16 => |w, i, cx| dot_int(w, i, cx, 16, true),
        VDot2U32U16 => |w, i, cx| dot_int(w, i, cx, 16, false),
        VDot4I32I8 => |w, i, cx| dot_int(w, i, cx, 8, true),
        VDot4U32U8 => |w, i, cx| dot_int(w, i, cx, 8, false),
        VDot8I32I4 => |w, i, cx| dot_int(w, i, cx, 4, true),
        VDot8U32U4 => |w, i, cx| dot_int(w, i, cx, 4, false),
        VDot2cF32F16 => dot2c_f32_f16,
        VPkFmacF16 => pk_fmac_f16,
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
