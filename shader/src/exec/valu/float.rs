//! VALU floating-point operations (f16, f32, f64) of VOP1, VOP2 and VOP3.
//!
//! Every operation reads its sources through [`Env::get`] (denormal inputs flushed as MODE says)
//! and writes its result through [`Env::put`], the one place the output modifiers (omod, clamp)
//! and denormal output flushing happen. Values are computed in f64 and rounded once to the
//! destination format wherever that is exact (sums, products and quotients of f16/f32 values,
//! rounding to integers); fused multiply-adds use the native fused operation of the format.
//!
//! The hardware's f32 transcendentals (v_exp, v_log, v_rcp, v_rsq, v_sqrt, v_sin, v_cos) are
//! approximations good to about 1 ulp, its f64 v_rcp/v_rsq/v_sqrt to 2^29 ulp (the seed of a
//! Newton-Raphson step); here all are computed in f64 and rounded once, so a result may differ
//! from the hardware's in the last bits (more accurate, never less).

use super::{active, fetch, mask_dst, read_operand, width_mask, write_vdst, Handler, Lanes};
use crate::exec::operand::Ty::{self, B16, B32, F64};
use crate::exec::{Cx, ExecError, ExecResult, Flow};
use crate::fp::{self, Prec, Prec::D, Prec::H, Prec::S};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op};
use crate::wave::{Wave, LANES};

/// MODE fields (LLVM 15 SIDefines.h: FP_ROUND bits 3:0, FP_DENORM bits 7:4 with 2-bit values
/// FLUSH_IN_FLUSH_OUT 0, FLUSH_OUT 1, FLUSH_IN 2, FLUSH_NONE 3, f32 in the low pair and f64/f16
/// in the high pair; DX10_CLAMP bit 8, IEEE bit 9) and the instruction's output modifiers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Env {
    mode: u32,
    clamp: bool,
    omod: u8,
}

impl Env {
    /// The environment of `inst` computing in formats `precs` with a result of format `out`
    /// (`None`: an integer result). Only round-to-nearest-even is implemented.
    pub(super) fn new(w: &Wave, inst: &Instruction, precs: &[Prec], out: Option<Prec>) -> ExecResult<Env> {
        let e = Env { mode: w.mode, clamp: inst.mods.clamp, omod: inst.mods.omod };
        for &p in precs.iter().chain(out.iter()) {
            let round = match p {
                S => e.mode & 3,
                H | D => (e.mode >> 2) & 3,
            };
            if round != 0 {
                return Err(ExecError::Unimplemented(format!("rounding mode {round} for {p:?}")));
            }
        }
        if e.omod != 0 {
            match out {
                None => return Err(ExecError::Unimplemented("omod on an integer result".into())),
                // LLVM 15 SIFoldOperands: "omod is ignored by hardware if IEEE bit is enabled",
                // and it never folds omod where output denormals are enabled: neither case is
                // modelled.
                Some(_) if e.ieee() => return Err(ExecError::Unimplemented("omod in IEEE mode".into())),
                Some(p) if e.keeps_out(p) => {
                    return Err(ExecError::Unimplemented("omod with output denormals enabled".into()))
                }
                Some(_) => {}
            }
        }
        Ok(e)
    }

    fn denorm(&self, p: Prec) -> u32 {
        match p {
            S => (self.mode >> 4) & 3,
            H | D => (self.mode >> 6) & 3,
        }
    }

    /// Denormal inputs of `p` are kept (FLUSH_OUT or FLUSH_NONE).
    fn keeps_in(&self, p: Prec) -> bool {
        self.denorm(p) & 1 != 0
    }

    /// Denormal results of `p` are kept (FLUSH_IN or FLUSH_NONE).
    fn keeps_out(&self, p: Prec) -> bool {
        self.denorm(p) & 2 != 0
    }

    pub(super) fn ieee(&self) -> bool {
        self.mode & (1 << 9) != 0
    }

    fn dx10_clamp(&self) -> bool {
        self.mode & (1 << 8) != 0
    }

    /// Source bits `b` of format `p`, a denormal flushed if the mode flushes inputs.
    pub(super) fn input(&self, b: u64, p: Prec) -> u64 {
        if self.keeps_in(p) {
            b
        } else {
            p.flush(b)
        }
    }

    /// The value of source bits `b` of format `p`.
    pub(super) fn get(&self, b: u64, p: Prec) -> f64 {
        p.decode(self.input(b, p))
    }

    /// The output modifiers on an unrounded result: omod (*2, *4, /2; exact in f64 but for
    /// f64 denormals) then clamp to [0, 1], where NaN clamps to 0 with DX10_CLAMP.
    fn modify(&self, x: f64) -> f64 {
        let x = match self.omod {
            1 => x * 2.0,
            2 => x * 4.0,
            3 => x * 0.5,
            _ => x,
        };
        if !self.clamp {
            x
        } else if x.is_nan() {
            if self.dx10_clamp() {
                0.0
            } else {
                x
            }
        } else if x <= 0.0 {
            0.0 // -0 clamps to +0, as med3(x, 0, 1) with -0 < +0
        } else {
            x.min(1.0)
        }
    }

    /// Result bits `b` of format `p`, a denormal flushed if the mode flushes outputs.
    fn output(&self, b: u64, p: Prec) -> u64 {
        if self.keeps_out(p) {
            b
        } else {
            p.flush(b)
        }
    }

    /// The result `x` rounded to `p` with the output modifiers and denormal flushing.
    pub(super) fn put(&self, x: f64, p: Prec) -> u64 {
        self.output(p.encode(self.modify(x)), p)
    }

    /// A result already in format `p` (min, max, a selected operand) through the same modifiers;
    /// without modifiers the bits (a NaN's payload) are kept.
    pub(super) fn put_bits(&self, b: u64, p: Prec) -> u64 {
        if self.omod == 0 && !self.clamp {
            self.output(b, p)
        } else {
            self.put(p.decode(b), p)
        }
    }
}

/// The register type of format `p`.
pub(super) fn ty(p: Prec) -> Ty {
    match p {
        H => B16,
        S => B32,
        D => F64,
    }
}

/// Fetches sources 0..N of `inst` with their modifiers.
pub(super) fn sources<const N: usize>(w: &Wave, inst: &Instruction, cx: &Cx, tys: [Ty; N]) -> ExecResult<[Lanes; N]> {
    let mut s = [[0u64; LANES]; N];
    for (i, t) in tys.into_iter().enumerate() {
        s[i] = fetch(w, inst, i, t, cx)?;
    }
    Ok(s)
}

/// Runs `f` on the lanes EXEC enables and writes the vector destination as `dst`.
pub(super) fn apply<const N: usize>(
    w: &mut Wave,
    inst: &Instruction,
    s: &[Lanes; N],
    dst: Ty,
    f: impl Fn([u64; N]) -> u64,
) -> ExecResult {
    let mask = active(w, inst);
    let mut out = [0u64; LANES];
    for l in Wave::lanes(mask) {
        out[l] = f(std::array::from_fn(|i| s[i][l])) & width_mask(dst);
    }
    write_vdst(w, inst, &out, dst, mask)?;
    Ok(Flow::Next)
}

/// What an operation writes.
#[derive(Clone, Copy)]
enum Out {
    /// A float of this format.
    F(Prec),
    /// An integer (or packed bits) of this type.
    Int(Ty),
}

/// The general form: sources of types `tys`, formats `precs` for the rounding-mode check, the
/// result `out`.
fn run<const N: usize>(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    tys: [Ty; N],
    precs: &[Prec],
    out: Out,
    f: impl Fn(&Env, [u64; N]) -> u64,
) -> ExecResult {
    let (out, dst) = match out {
        Out::F(p) => (Some(p), ty(p)),
        Out::Int(t) => (None, t),
    };
    let e = Env::new(w, inst, precs, out)?;
    let s = sources(w, inst, cx, tys)?;
    apply(w, inst, &s, dst, |a| f(&e, a))
}

/// A one-source operation of format `p` computed on values.
fn un(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec, f: fn(f64) -> f64) -> ExecResult {
    run(w, inst, cx, [ty(p)], &[p], Out::F(p), |e, [a]| e.put(f(e.get(a, p)), p))
}

/// A two-source operation of format `p` computed on values.
fn bin(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec, f: fn(f64, f64) -> f64) -> ExecResult {
    run(w, inst, cx, [ty(p); 2], &[p], Out::F(p), |e, [a, b]| e.put(f(e.get(a, p), e.get(b, p)), p))
}

/// A three-source operation of format `p` computed on values (`p` passed on for the fused
/// and rounded forms).
fn tri(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec, f: fn(Prec, f64, f64, f64) -> f64) -> ExecResult {
    run(w, inst, cx, [ty(p); 3], &[p], Out::F(p), |e, [a, b, c]| e.put(f(p, e.get(a, p), e.get(b, p), e.get(c, p)), p))
}

/// A fused multiply-add of format `p`, rounded once: f32 uses f32's fused operation; f64 is
/// native; an f16 product plus an f16 addend is exact in f64 whenever the sum is finite in
/// f16 (it spans at most 2^16 down to 2^-48), so f64's fma then one rounding is exact.
pub(super) fn fma(p: Prec, a: f64, b: f64, c: f64) -> f64 {
    match p {
        S => f64::from((a as f32).mul_add(b as f32, c as f32)),
        H | D => a.mul_add(b, c),
    }
}

/// An unfused multiply-add: the product rounded to `p`, then the sum (gfx9 v_mad_f32, v_mac_f32
/// and v_mad_f16 are not fused).
pub(super) fn mad(p: Prec, a: f64, b: f64, c: f64) -> f64 {
    p.decode(p.encode(a * b)) + c
}

/// v_mad/v_mac/v_madmk/v_madak: not fused, and flushing denormals whatever MODE says: LLVM 15
/// selects them for llvm.amdgcn.fmad.ftz (a multiply-add that flushes) even with denormals
/// enabled (its tests llvm.amdgcn.fmad.ftz.ll and .f16.ll), and for plain fmad only where they
/// are off. `form` says where the third operand comes from.
fn mad_op(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec, form: MadForm) -> ExecResult {
    let e = Env::new(w, inst, &[p], Some(p))?;
    let flushed = Env { mode: e.mode & !(0xf0), ..e };
    let t = ty(p);
    let (s, third) = match form {
        MadForm::Three => {
            let s = sources(w, inst, cx, [t; 3])?;
            (s, None)
        }
        MadForm::Acc => {
            let [a, b] = sources(w, inst, cx, [t; 2])?;
            let d = inst.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
            let c = read_operand(w, d, t, cx)?;
            ([a, b, c], None)
        }
        MadForm::Mk | MadForm::Ak => {
            let [a, b] = sources(w, inst, cx, [t; 2])?;
            let k = literal_k(inst)? & width_mask(t);
            ([a, b, [0; LANES]], Some(k))
        }
    };
    apply(w, inst, &s, t, |[a, b, c]| {
        let v = |x| flushed.get(x, p);
        let r = match (form, third) {
            (MadForm::Mk, Some(k)) => mad(p, v(a), v(k), v(b)),
            (MadForm::Ak, Some(k)) => mad(p, v(a), v(b), v(k)),
            _ => mad(p, v(a), v(b), v(c)),
        };
        flushed.put(r, p)
    })
}

#[derive(Clone, Copy)]
enum MadForm {
    /// v_mad: three sources.
    Three,
    /// v_mac: the destination is the addend.
    Acc,
    /// v_madmk: S0 * K + S1.
    Mk,
    /// v_madak: S0 * S1 + K.
    Ak,
}

/// The K literal of v_madmk/v_madak.
fn literal_k(inst: &Instruction) -> ExecResult<u64> {
    match inst.operand(Field::K) {
        Some(crate::isa::Operand::Literal(k)) => Ok(u64::from(k)),
        k => Err(ExecError::Invalid(format!("{k:?} is not a literal K operand"))),
    }
}

/// v_fmac: fused, the destination as addend.
fn fmac(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec) -> ExecResult {
    let e = Env::new(w, inst, &[p], Some(p))?;
    let t = ty(p);
    let [a, b] = sources(w, inst, cx, [t; 2])?;
    let d = inst.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
    let c = read_operand(w, d, t, cx)?;
    apply(w, inst, &[a, b, c], t, |[a, b, c]| e.put(fma(p, e.get(a, p), e.get(b, p), e.get(c, p)), p))
}

/// v_fmamk (S0 * K + S1) and v_fmaak (S0 * S1 + K): fused, MODE's denormal handling.
fn fma_k(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec, form: MadForm) -> ExecResult {
    let e = Env::new(w, inst, &[p], Some(p))?;
    let t = ty(p);
    let [a, b] = sources(w, inst, cx, [t; 2])?;
    let k = literal_k(inst)? & width_mask(t);
    apply(w, inst, &[a, b], t, |[a, b]| {
        let (a, b, k) = (e.get(a, p), e.get(b, p), e.get(k, p));
        let r = match form {
            MadForm::Mk => fma(p, a, k, b),
            _ => fma(p, a, b, k),
        };
        e.put(r, p)
    })
}

/// v_min/v_max (and the three-operand forms) on bits.
fn minmax(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec, n: usize, max: bool) -> ExecResult {
    let e = Env::new(w, inst, &[p], Some(p))?;
    let t = ty(p);
    let ieee = e.ieee();
    let m = move |a, b| fp::minmax(p, a, b, ieee, max);
    if n == 2 {
        let s = sources(w, inst, cx, [t; 2])?;
        apply(w, inst, &s, t, |[a, b]| e.put_bits(m(e.input(a, p), e.input(b, p)), p))
    } else {
        let s = sources(w, inst, cx, [t; 3])?;
        apply(w, inst, &s, t, |[a, b, c]| e.put_bits(m(m(e.input(a, p), e.input(b, p)), e.input(c, p)), p))
    }
}

/// v_med3 (CDNA2 ISA guide pseudocode): with a NaN operand, min3; otherwise the max of the two
/// operands that are not the max3.
fn med3(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec) -> ExecResult {
    let e = Env::new(w, inst, &[p], Some(p))?;
    let t = ty(p);
    let ieee = e.ieee();
    let s = sources(w, inst, cx, [t; 3])?;
    apply(w, inst, &s, t, |[a, b, c]| {
        let (a, b, c) = (e.input(a, p), e.input(b, p), e.input(c, p));
        let mx = |x, y| fp::minmax(p, x, y, ieee, true);
        let mn = |x, y| fp::minmax(p, x, y, ieee, false);
        let r = if p.is_nan(a) || p.is_nan(b) || p.is_nan(c) {
            mn(mn(a, b), c)
        } else {
            let top = p.decode(mx(mx(a, b), c));
            if top == p.decode(a) {
                mx(b, c)
            } else if top == p.decode(b) {
                mx(a, c)
            } else {
                mx(a, b)
            }
        };
        e.put_bits(r, p)
    })
}

/// v_mul_legacy_f32: 0 times anything (infinity and NaN included) is +0.
fn mul_legacy(a: f64, b: f64) -> f64 {
    if a == 0.0 || b == 0.0 {
        0.0
    } else {
        a * b
    }
}

/// v_fract: x - floor(x), clamped below 1.0 (CDNA2 ISA guide: "result clamped to 0x3f7fffff",
/// the largest value below 1 of each format). Exact in f64 for f16/f32; rounded once for f64.
fn fract(p: Prec, x: f64) -> f64 {
    let below_one = match p {
        H => f64::from(fp::f16_to_f32(0x3bff)),
        S => f64::from(f32::from_bits(0x3f7f_ffff)),
        D => f64::from_bits(0x3fef_ffff_ffff_ffff),
    };
    if !x.is_finite() {
        return f64::NAN;
    }
    (x - x.floor()).min(below_one)
}

/// sin(2*pi*x) with x reduced to [-0.5, 0.5] first (exact), as v_sin takes revolutions.
fn sin_rev(x: f64) -> f64 {
    let r = x - x.round_ties_even();
    if r == 0.0 {
        // sin(-0) = -0, but a whole number of turns is +0 (the manuals' example:
        // V_SIN_F32(-MaxFloat) = 0x00000000).
        return if x == 0.0 { x } else { 0.0 };
    }
    (r * std::f64::consts::TAU).sin()
}

fn cos_rev(x: f64) -> f64 {
    let r = x - x.round_ties_even();
    (r * std::f64::consts::TAU).cos()
}

/// f32 transcendentals flush denormal inputs and results whatever MODE says (the manuals:
/// "denormals are flushed" for V_EXP/LOG/RCP/RSQ/SQRT_F32).
fn trans32(w: &mut Wave, inst: &Instruction, cx: &mut Cx, f: fn(f64) -> f64) -> ExecResult {
    let e = Env::new(w, inst, &[S], Some(S))?;
    let flushed = Env { mode: e.mode & !0x30, ..e };
    let s = sources(w, inst, cx, [B32])?;
    apply(w, inst, &s, B32, |[a]| flushed.put(f(flushed.get(a, S)), S))
}

/// Float to integer, truncating, NaN to 0, saturating (Rust's `as` does exactly this).
fn to_int(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec, dst: Ty, f: fn(f64) -> u64) -> ExecResult {
    run(w, inst, cx, [ty(p)], &[p], Out::Int(dst), |e, [a]| f(e.get(a, p)))
}

/// Integer (already widened to f64 by `f`) to float, rounded once.
fn from_int(w: &mut Wave, inst: &Instruction, cx: &mut Cx, src: Ty, p: Prec, f: fn(u64) -> f64) -> ExecResult {
    run(w, inst, cx, [src], &[], Out::F(p), |e, [a]| e.put(f(a), p))
}

/// Float of format `from` to float of format `to`.
fn convert(w: &mut Wave, inst: &Instruction, cx: &mut Cx, from: Prec, to: Prec) -> ExecResult {
    run(w, inst, cx, [ty(from)], &[from], Out::F(to), |e, [a]| e.put(e.get(a, from), to))
}

/// v_frexp_mant: the significand in [0.5, 1); infinity and NaN pass through.
fn frexp_mant(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec) -> ExecResult {
    run(w, inst, cx, [ty(p)], &[p], Out::F(p), |e, [a]| {
        let x = e.get(a, p);
        if x.is_nan() {
            e.put_bits(p.quiet(a), p)
        } else {
            e.put(fp::frexp(x).0, p)
        }
    })
}

/// v_frexp_exp: the exponent as an integer of type `dst`; 0 for infinity and NaN.
fn frexp_exp(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec, dst: Ty) -> ExecResult {
    run(w, inst, cx, [ty(p)], &[p], Out::Int(dst), |e, [a]| fp::frexp(e.get(a, p)).1 as i64 as u64)
}

/// v_ldexp: S0 * 2^S1 with S1 a signed integer (16-bit for f16, 32-bit otherwise).
fn ldexp(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec) -> ExecResult {
    let int = if p == H { B16 } else { B32 };
    run(w, inst, cx, [ty(p), int], &[p], Out::F(p), |e, [a, n]| {
        let n = if p == H { i64::from(n as u16 as i16) } else { i64::from(n as u32 as i32) };
        // For f16/f32 values the exponent stays inside f64's normal range after clamping n, so
        // the only rounding is to `p`.
        let n = if p == D { n } else { n.clamp(-400, 400) };
        e.put(fp::ldexp(e.get(a, p), n), p)
    })
}

/// v_div_scale (VOP3b): scales the numerator or denominator of a division away from the
/// denormal and overflow ranges and sets VCC (the scalar destination) where v_div_fmas must
/// scale the quotient back (CDNA2 ISA guide V_DIV_SCALE_F32/F64 pseudocode; `exponent()` is the
/// biased exponent field).
fn div_scale(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec) -> ExecResult {
    let e = Env::new(w, inst, &[p], Some(p))?;
    let t = ty(p);
    let s = sources(w, inst, cx, [t; 3])?;
    let sd = mask_dst(inst)?;
    let mask = active(w, inst);
    let mut out = [0u64; LANES];
    let mut vcc = 0u64;
    for l in Wave::lanes(mask) {
        let (r, flag) = div_scale_lane(p, e.get(s[0][l], p), e.get(s[1][l], p), e.get(s[2][l], p), s[2][l]);
        out[l] = e.put(r, p);
        vcc |= u64::from(flag) << l;
    }
    write_vdst(w, inst, &out, t, mask)?;
    w.set_lane_mask_reg(sd, vcc);
    Ok(Flow::Next)
}

/// One lane of v_div_scale: S0 the value to scale, S1 the denominator, S2 the numerator
/// (`n_bits` its bits, for the exponent field).
fn div_scale_lane(p: Prec, s0: f64, den: f64, num: f64, n_bits: u64) -> (f64, bool) {
    let (gap, scale, tiny_exp, min_normal) = match p {
        S => (96, 64, 23, f64::from(f32::MIN_POSITIVE)),
        _ => (768, 128, 53, f64::MIN_POSITIVE),
    };
    let exp = |x: f64| p.exponent(p.encode(x));
    let denorm = |x: f64| x != 0.0 && x.abs() < min_normal;
    if num == 0.0 || den == 0.0 {
        return (f64::NAN, false);
    }
    let up = fp::ldexp(s0, scale);
    if exp(num) - exp(den) >= gap {
        // N/D near the largest value: scale only the denominator.
        return (if s0 == den { up } else { s0 }, true);
    }
    if denorm(den) {
        return (up, false);
    }
    let q = num / den;
    if denorm(1.0 / den) && denorm(q) {
        return (if s0 == den { up } else { s0 }, true);
    }
    if denorm(1.0 / den) {
        return (fp::ldexp(s0, -scale), false);
    }
    if denorm(q) {
        return (if s0 == num { up } else { s0 }, true);
    }
    if p.exponent(n_bits) <= tiny_exp {
        // A tiny numerator.
        return (up, false);
    }
    (s0, false)
}

/// v_div_fmas: fma(S0, S1, S2), scaled where VCC is set by 2^64 (f32) or 2^128 (f64) up when
/// S2's exponent is at least the bias (the quotient of a scaled-down denominator), down
/// otherwise (the quotient of a scaled-up numerator): the inverse of v_div_scale, so the
/// division sequence clang emits gives the correctly rounded quotient at the range's edges.
/// Input denormals are not flushed (the manuals' note).
fn div_fmas(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec) -> ExecResult {
    let e = Env::new(w, inst, &[p], Some(p))?;
    let kept = Env { mode: e.mode | if p == S { 0x10 } else { 0x40 }, ..e };
    let vcc = w.vcc();
    let t = ty(p);
    let s = sources(w, inst, cx, [t; 3])?;
    let (scale, bias) = if p == S { (64, 127) } else { (128, 1023) };
    let mask = active(w, inst);
    let mut out = [0u64; LANES];
    for l in Wave::lanes(mask) {
        let (a, b, c) = (kept.get(s[0][l], p), kept.get(s[1][l], p), kept.get(s[2][l], p));
        let mut r = fma(p, a, b, c);
        if vcc >> l & 1 != 0 {
            let up = p.exponent(s[2][l]) >= bias;
            // The fma is rounded to `p` first; scaling the rounded value by a power of two is
            // exact unless it lands in the denormal range.
            r = fp::ldexp(p.decode(p.encode(r)), if up { scale } else { -scale });
        }
        out[l] = e.put(r, p);
    }
    write_vdst(w, inst, &out, t, mask)?;
    Ok(Flow::Next)
}

/// v_div_fixup (CDNA2 ISA guide pseudocode): S0 the quotient, S1 the denominator, S2 the
/// numerator; the special cases of division, else the quotient with the right sign.
fn div_fixup(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec) -> ExecResult {
    run(w, inst, cx, [ty(p); 3], &[p], Out::F(p), |e, [q, d, n]| {
        let (qb, db, nb) = (e.input(q, p), e.input(d, p), e.input(n, p));
        let (x, den, num) = (p.decode(qb), p.decode(db), p.decode(nb));
        let neg = (db ^ nb) & p.sign() != 0;
        let signed = |v: f64| if neg { -v } else { v };
        // Below this exponent difference the quotient underflows to zero (no such case for f16).
        let gap = match p {
            H => None,
            S => Some(150),
            D => Some(1075),
        };
        if p.is_nan(nb) {
            return e.put_bits(p.quiet(nb), p);
        }
        if p.is_nan(db) {
            return e.put_bits(p.quiet(db), p);
        }
        let r = if (den == 0.0 && num == 0.0) || (den.is_infinite() && num.is_infinite()) {
            return e.put_bits(default_nan(p), p);
        } else if den == 0.0 || num.is_infinite() {
            signed(f64::INFINITY)
        } else if den.is_infinite() || num == 0.0 || gap.is_some_and(|g| p.exponent(nb) - p.exponent(db) < -g) {
            signed(0.0)
        } else if gap.is_some() && p.is_nan(qb) | x.is_infinite() {
            // The manuals' overflow clause tests "exponent(S1) == 255", which the cases above
            // already exclude; read as the quotient's exponent, it makes an overflowed quotient
            // (infinite, or NaN from inf - inf in the Newton steps) a signed infinity.
            signed(f64::INFINITY)
        } else {
            signed(x.abs())
        };
        e.put(r, p)
    })
}

/// The NaN the hardware makes of invalid operations: negative, quiet, no payload (0xffc00000
/// for f32).
fn default_nan(p: Prec) -> u64 {
    match p {
        H => 0xfe00,
        S => 0xffc0_0000,
        D => 0xfff8_0000_0000_0000,
    }
}

/// v_trig_preop_f64 (CDNA2 ISA guide pseudocode): 53 bits of 2/pi starting `shift` bits into
/// the fraction, where shift = 53 * S1 bits 4:0, plus exponent(S0) - 1077 for large S0, scaled to
/// their place (and up by 2^128 when exponent(S0) >= 1968, to stay in range). The manual's
/// "(2/PI << shift) & 0x1fffffffffffff" is read as those 53 bits; bits past the 1201 the table
/// holds are zero.
fn trig_preop(x_bits: u64, sel: u64) -> f64 {
    let exp = D.exponent(x_bits) as usize;
    let shift = (sel as usize & 31) * 53 + exp.saturating_sub(1077);
    let bits = fp::two_over_pi::bits();
    let m = (shift..shift + 53).fold(0u64, |m, i| m << 1 | u64::from(bits.get(i).copied().unwrap_or(false)));
    let scale = -53 - shift as i64 + if exp >= 1968 { 128 } else { 0 };
    fp::ldexp(m as f64, scale)
}

/// Round-to-zero f16 bits of `x` (v_cvt_pkrtz_f16_f32).
fn f16_rtz(x: f64) -> u16 {
    let h = fp::f64_to_f16(x);
    if x.is_nan() || x.is_infinite() {
        return h;
    }
    let r = f64::from(fp::f16_to_f32(h));
    if r.abs() > x.abs() {
        // Rounded away from zero: the magnitude just below (inf steps down to the largest).
        h - 1
    } else {
        h
    }
}

/// v_cvt_pkrtz_f16_f32: two f32 to f16 with round toward zero, S0 in the low half.
fn pkrtz(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    run(w, inst, cx, [B32, B32], &[S, H], Out::Int(B32), |e, [a, b]| {
        let half = |x: u64| e.output(u64::from(f16_rtz(e.modify(e.get(x, S)))), H);
        half(a) | half(b) << 16
    })
}

/// Float to a normalized 16-bit integer: clamp to [-1, 1] ([0, 1] unsigned), scale by 32767
/// (65535) and round to nearest even; NaN is 0.
fn norm16(x: f64, signed: bool) -> u64 {
    if x.is_nan() {
        return 0;
    }
    if signed {
        u64::from((x.clamp(-1.0, 1.0) * 32767.0).round_ties_even() as i16 as u16)
    } else {
        (x.clamp(0.0, 1.0) * 65535.0).round_ties_even() as u64
    }
}

/// v_cvt_pknorm_{i16,u16}_{f32,f16}: two normalized conversions, S0 in the low half.
fn pknorm(w: &mut Wave, inst: &Instruction, cx: &mut Cx, p: Prec, signed: bool) -> ExecResult {
    run(w, inst, cx, [ty(p); 2], &[p], Out::Int(B32), |e, [a, b]| {
        norm16(e.get(a, p), signed) | norm16(e.get(b, p), signed) << 16
    })
}

/// v_pack_b32_f16: two f16 sources (op_sel, abs and neg applied by the fetch) into one dword,
/// S0 in the low half; the bits move unchanged.
fn pack_b32_f16(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    Env::new(w, inst, &[H], None)?;
    let s = sources(w, inst, cx, [B16; 2])?;
    apply(w, inst, &s, B32, |[a, b]| a | b << 16)
}

/// v_cvt_off_f32_i4: the signed 4-bit value of S0 bits 3:0 times 1/16 (the manual's table).
fn off_i4(b: u64) -> f64 {
    f64::from(((b as u8) << 4) as i8 >> 4) / 16.0
}

/// Runs `op`, an f16 operation, for an opcode that keeps the other half of its destination.
///
/// Most gfx9 16-bit results zero the destination's high half, which [`write_vdst`] does; the
/// gfx9 additions with op_sel (v_mad/fma/div_fixup/min3/max3/med3_f16) and v_mac/madak/madmk_f16
/// keep it (LLVM 15 GCNSubtarget::zeroesHigh16BitsOfDest, "derived from experimentation": false
/// for these on gfx9; their VI forms, gfx9's v_*_legacy_f16, zero it). With op_sel bit 3 the result
/// goes to the high half and write_vdst keeps the low half already.
fn keep_high(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    op: fn(&mut Wave, &Instruction, &mut Cx) -> ExecResult,
) -> ExecResult {
    let index = match inst.operand(Field::D) {
        Some(crate::isa::Operand::Vgpr { index, .. }) => usize::from(index),
        d => return Err(ExecError::Invalid(format!("{d:?} is not a VGPR destination"))),
    };
    let d = inst.operand(Field::D).expect("checked above");
    let old = read_operand(w, d, B32, cx)?;
    let mask = active(w, inst);
    let flow = op(w, inst, cx)?;
    if inst.mods.op_sel & (1 << 3) == 0 {
        for l in Wave::lanes(mask) {
            w.v[index][l] = (w.v[index][l] & 0xffff) | (old[l] as u32 & 0xffff_0000);
        }
    }
    Ok(flow)
}

/// The handler of `op`, if this family implements it.
pub(super) fn handler(op: Op) -> Option<Handler> {
    use Op::*;
    Some(match op {
        // Arithmetic.
        VAddF32 => |w, i, cx| fast::bin(w, i, cx, |a, b| a + b, |a, b| a + b),
        VSubF32 => |w, i, cx| fast::bin(w, i, cx, |a, b| a - b, |a, b| a - b),
        VSubrevF32 => |w, i, cx| fast::bin(w, i, cx, |a, b| b - a, |a, b| b - a),
        VMulF32 => |w, i, cx| fast::bin(w, i, cx, |a, b| a * b, |a, b| a * b),
        VMulLegacyF32 => |w, i, cx| bin(w, i, cx, S, mul_legacy),
        VAddF16 => |w, i, cx| bin(w, i, cx, H, |a, b| a + b),
        VSubF16 => |w, i, cx| bin(w, i, cx, H, |a, b| a - b),
        VSubrevF16 => |w, i, cx| bin(w, i, cx, H, |a, b| b - a),
        VMulF16 => |w, i, cx| bin(w, i, cx, H, |a, b| a * b),
        VAddF64 => |w, i, cx| bin(w, i, cx, D, |a, b| a + b),
        VMulF64 => |w, i, cx| bin(w, i, cx, D, |a, b| a * b),
        VFmaF32 => fast::fma3,
        VFmaF64 => |w, i, cx| tri(w, i, cx, D, fma),
        VFmaF16 => |w, i, cx| keep_high(w, i, cx, |w, i, cx| tri(w, i, cx, H, fma)),
        VFmaLegacyF16 => |w, i, cx| tri(w, i, cx, H, fma),
        VFmacF32 => fast::fmac,
        VFmacF64 => |w, i, cx| fmac(w, i, cx, D),
        VFmacF16 => |w, i, cx| fmac(w, i, cx, H),
        // gfx10's fused v_fmamk/v_fmaak (S0 * K + S1, S0 * S1 + K), unlike the gfx9 mad forms.
        VFmamkF32 => |w, i, cx| fast::fma_k(w, i, cx, MadForm::Mk),
        VFmaakF32 => |w, i, cx| fast::fma_k(w, i, cx, MadForm::Ak),
        VFmamkF16 => |w, i, cx| fma_k(w, i, cx, H, MadForm::Mk),
        VFmaakF16 => |w, i, cx| fma_k(w, i, cx, H, MadForm::Ak),
        VMadF32 => |w, i, cx| mad_op(w, i, cx, S, MadForm::Three),
        VMadF16 => |w, i, cx| keep_high(w, i, cx, |w, i, cx| mad_op(w, i, cx, H, MadForm::Three)),
        VMadLegacyF16 => |w, i, cx| mad_op(w, i, cx, H, MadForm::Three),
        VMacF32 => |w, i, cx| mad_op(w, i, cx, S, MadForm::Acc),
        VMacF16 => |w, i, cx| keep_high(w, i, cx, |w, i, cx| mad_op(w, i, cx, H, MadForm::Acc)),
        VMadmkF32 => |w, i, cx| mad_op(w, i, cx, S, MadForm::Mk),
        VMadakF32 => |w, i, cx| mad_op(w, i, cx, S, MadForm::Ak),
        VMadmkF16 => |w, i, cx| keep_high(w, i, cx, |w, i, cx| mad_op(w, i, cx, H, MadForm::Mk)),
        VMadakF16 => |w, i, cx| keep_high(w, i, cx, |w, i, cx| mad_op(w, i, cx, H, MadForm::Ak)),
        VMadLegacyF32 => |w, i, cx| tri(w, i, cx, S, |p, a, b, c| mad(p, mul_legacy(a, b), 1.0, c)),
        // Minimum, maximum, median.
        VMinF32 => |w, i, cx| minmax(w, i, cx, S, 2, false),
        VMaxF32 => |w, i, cx| minmax(w, i, cx, S, 2, true),
        VMinF16 => |w, i, cx| minmax(w, i, cx, H, 2, false),
        VMaxF16 => |w, i, cx| minmax(w, i, cx, H, 2, true),
        VMinF64 => |w, i, cx| minmax(w, i, cx, D, 2, false),
        VMaxF64 => |w, i, cx| minmax(w, i, cx, D, 2, true),
        VMin3F32 => |w, i, cx| minmax(w, i, cx, S, 3, false),
        VMax3F32 => |w, i, cx| minmax(w, i, cx, S, 3, true),
        VMin3F16 => |w, i, cx| keep_high(w, i, cx, |w, i, cx| minmax(w, i, cx, H, 3, false)),
        VMax3F16 => |w, i, cx| keep_high(w, i, cx, |w, i, cx| minmax(w, i, cx, H, 3, true)),
        VMed3F32 => |w, i, cx| med3(w, i, cx, S),
        VMed3F16 => |w, i, cx| keep_high(w, i, cx, |w, i, cx| med3(w, i, cx, H)),
        // Conversions.
        VCvtF32I32 => |w, i, cx| from_int(w, i, cx, B32, S, |a| f64::from(a as u32 as i32)),
        VCvtF32U32 => |w, i, cx| from_int(w, i, cx, B32, S, |a| a as u32 as f64),
        VCvtF64I32 => |w, i, cx| from_int(w, i, cx, B32, D, |a| f64::from(a as u32 as i32)),
        VCvtF64U32 => |w, i, cx| from_int(w, i, cx, B32, D, |a| a as u32 as f64),
        VCvtF16I16 => |w, i, cx| from_int(w, i, cx, B16, H, |a| f64::from(a as u16 as i16)),
        VCvtF16U16 => |w, i, cx| from_int(w, i, cx, B16, H, |a| a as u16 as f64),
        VCvtF32Ubyte0 => |w, i, cx| from_int(w, i, cx, B32, S, |a| (a & 0xff) as f64),
        VCvtF32Ubyte1 => |w, i, cx| from_int(w, i, cx, B32, S, |a| (a >> 8 & 0xff) as f64),
        VCvtF32Ubyte2 => |w, i, cx| from_int(w, i, cx, B32, S, |a| (a >> 16 & 0xff) as f64),
        VCvtF32Ubyte3 => |w, i, cx| from_int(w, i, cx, B32, S, |a| (a >> 24 & 0xff) as f64),
        VCvtOffF32I4 => |w, i, cx| from_int(w, i, cx, B32, S, off_i4),
        VCvtI32F32 => |w, i, cx| to_int(w, i, cx, S, B32, |x| x as i32 as u32 as u64),
        VCvtU32F32 => |w, i, cx| to_int(w, i, cx, S, B32, |x| x as u32 as u64),
        VCvtI32F64 => |w, i, cx| to_int(w, i, cx, D, B32, |x| x as i32 as u32 as u64),
        VCvtU32F64 => |w, i, cx| to_int(w, i, cx, D, B32, |x| x as u32 as u64),
        VCvtI16F16 => |w, i, cx| to_int(w, i, cx, H, B16, |x| x as i16 as u16 as u64),
        VCvtU16F16 => |w, i, cx| to_int(w, i, cx, H, B16, |x| x as u16 as u64),
        VCvtRpiI32F32 => |w, i, cx| to_int(w, i, cx, S, B32, |x| (x + 0.5).floor() as i32 as u32 as u64),
        VCvtFlrI32F32 => |w, i, cx| to_int(w, i, cx, S, B32, |x| x.floor() as i32 as u32 as u64),
        VCvtNormI16F16 => |w, i, cx| to_int(w, i, cx, H, B16, |x| norm16(x, true)),
        VCvtNormU16F16 => |w, i, cx| to_int(w, i, cx, H, B16, |x| norm16(x, false)),
        VCvtF32F64 => |w, i, cx| convert(w, i, cx, D, S),
        VCvtF64F32 => |w, i, cx| convert(w, i, cx, S, D),
        VCvtF16F32 => |w, i, cx| convert(w, i, cx, S, H),
        VCvtF32F16 => |w, i, cx| convert(w, i, cx, H, S),
        VCvtPkrtzF16F32 => pkrtz,
        VPackB32F16 => pack_b32_f16,
        VCvtPknormI16F32 => |w, i, cx| pknorm(w, i, cx, S, true),
        VCvtPknormU16F32 => |w, i, cx| pknorm(w, i, cx, S, false),
        VCvtPknormI16F16 => |w, i, cx| pknorm(w, i, cx, H, true),
        VCvtPknormU16F16 => |w, i, cx| pknorm(w, i, cx, H, false),
        // Rounding.
        VTruncF32 => |w, i, cx| un(w, i, cx, S, f64::trunc),
        VCeilF32 => |w, i, cx| un(w, i, cx, S, f64::ceil),
        VFloorF32 => |w, i, cx| un(w, i, cx, S, f64::floor),
        VRndneF32 => |w, i, cx| un(w, i, cx, S, f64::round_ties_even),
        VFractF32 => |w, i, cx| un(w, i, cx, S, |x| fract(S, x)),
        VTruncF16 => |w, i, cx| un(w, i, cx, H, f64::trunc),
        VCeilF16 => |w, i, cx| un(w, i, cx, H, f64::ceil),
        VFloorF16 => |w, i, cx| un(w, i, cx, H, f64::floor),
        VRndneF16 => |w, i, cx| un(w, i, cx, H, f64::round_ties_even),
        VFractF16 => |w, i, cx| un(w, i, cx, H, |x| fract(H, x)),
        VTruncF64 => |w, i, cx| un(w, i, cx, D, f64::trunc),
        VCeilF64 => |w, i, cx| un(w, i, cx, D, f64::ceil),
        VFloorF64 => |w, i, cx| un(w, i, cx, D, f64::floor),
        VRndneF64 => |w, i, cx| un(w, i, cx, D, f64::round_ties_even),
        VFractF64 => |w, i, cx| un(w, i, cx, D, |x| fract(D, x)),
        // Transcendentals.
        VRcpF32 | VRcpIflagF32 => |w, i, cx| trans32(w, i, cx, |x| 1.0 / x),
        VRsqF32 => |w, i, cx| trans32(w, i, cx, |x| 1.0 / x.sqrt()),
        VSqrtF32 => |w, i, cx| trans32(w, i, cx, f64::sqrt),
        VExpF32 => |w, i, cx| trans32(w, i, cx, f64::exp2),
        VLogF32 => |w, i, cx| trans32(w, i, cx, f64::log2),
        VSinF32 => |w, i, cx| un(w, i, cx, S, sin_rev),
        VCosF32 => |w, i, cx| un(w, i, cx, S, cos_rev),
        VRcpF16 => |w, i, cx| un(w, i, cx, H, |x| 1.0 / x),
        VRsqF16 => |w, i, cx| un(w, i, cx, H, |x| 1.0 / x.sqrt()),
        VSqrtF16 => |w, i, cx| un(w, i, cx, H, f64::sqrt),
        VExpF16 => |w, i, cx| un(w, i, cx, H, f64::exp2),
        VLogF16 => |w, i, cx| un(w, i, cx, H, f64::log2),
        VSinF16 => |w, i, cx| un(w, i, cx, H, sin_rev),
        VCosF16 => |w, i, cx| un(w, i, cx, H, cos_rev),
        VRcpF64 => |w, i, cx| un(w, i, cx, D, |x| 1.0 / x),
        VRsqF64 => |w, i, cx| un(w, i, cx, D, |x| 1.0 / x.sqrt()),
        VSqrtF64 => |w, i, cx| un(w, i, cx, D, f64::sqrt),
        // Exponent and significand.
        VFrexpMantF32 => |w, i, cx| frexp_mant(w, i, cx, S),
        VFrexpMantF16 => |w, i, cx| frexp_mant(w, i, cx, H),
        VFrexpMantF64 => |w, i, cx| frexp_mant(w, i, cx, D),
        VFrexpExpI32F32 => |w, i, cx| frexp_exp(w, i, cx, S, B32),
        VFrexpExpI16F16 => |w, i, cx| frexp_exp(w, i, cx, H, B16),
        VFrexpExpI32F64 => |w, i, cx| frexp_exp(w, i, cx, D, B32),
        VLdexpF32 => |w, i, cx| ldexp(w, i, cx, S),
        VLdexpF16 => |w, i, cx| ldexp(w, i, cx, H),
        VLdexpF64 => |w, i, cx| ldexp(w, i, cx, D),
        // Division.
        VDivScaleF32 => |w, i, cx| div_scale(w, i, cx, S),
        VDivScaleF64 => |w, i, cx| div_scale(w, i, cx, D),
        VDivFmasF32 => |w, i, cx| div_fmas(w, i, cx, S),
        VDivFmasF64 => |w, i, cx| div_fmas(w, i, cx, D),
        VDivFixupF32 => |w, i, cx| div_fixup(w, i, cx, S),
        VDivFixupF64 => |w, i, cx| div_fixup(w, i, cx, D),
        VDivFixupF16 => |w, i, cx| keep_high(w, i, cx, |w, i, cx| div_fixup(w, i, cx, H)),
        VDivFixupLegacyF16 => |w, i, cx| div_fixup(w, i, cx, H),
        VTrigPreopF64 => |w, i, cx| {
            run(w, i, cx, [F64, B32], &[D], Out::F(D), |e, [x, sel]| e.put(trig_preop(e.input(x, D), sel), D))
        },
        _ => return None,
    })
}

mod fast;

#[cfg(test)]
mod tests;
