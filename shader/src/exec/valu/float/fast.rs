//! The f32 fast path of the common arithmetic (v_add, v_sub, v_subrev, v_mul, v_fma, v_fmac,
//! v_fmamk, v_fmaak), the inner loop of HIP kernels.
//!
//! It runs when MODE rounds to nearest even and the instruction has no omod or clamp, whatever
//! MODE's f32 denormal handling (HIP kernels on gfx90a keep them, FLUSH_NONE; assembler and
//! OpenCL defaults may flush): denormal inputs flushed first, denormal results after rounding,
//! as the slow path does. Then the host's f32 operation gives the slow path's bits for every
//! result that is not a NaN:
//! IEEE-754 add, subtract and multiply rounded once to nearest even (what the slow path's exact
//! f64 result rounded once to f32 is) and the fused multiply-add (the slow path's own
//! operation). The slow path stays the reference: a lane whose result is a NaN is recomputed
//! by it, so a NaN result is quiet as the slow path makes it (whose input NaN it carries is the
//! host's choice in both paths: Rust leaves NaN payloads to the compiler). The differential test
//! in float/tests.rs compares the two on random operands. Source modifiers (abs, neg, SDWA, DPP)
//! are applied by [`super::super::lanes`] as for every VALU operation; sources without them
//! (the common case) are copied to arrays and computed on every lane in one loop the compiler
//! vectorizes ([`dense`]).

use super::super::{active, lanes, lanes_at, plain32, read_operand, vdst32, Lanes};
use super::{fma, literal_k, Env, MadForm, S};
use crate::exec::operand::Ty::B32;
use crate::exec::{Cx, ExecError, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::Instruction;
use crate::wave::{Wave, LANES};

#[cfg(test)]
thread_local! {
    /// Tests set this to run the slow path alone (the reference the fast path is compared to).
    pub(super) static SLOW_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The environment of an f32 operation if the fast path may run it.
fn fast_env(w: &Wave, inst: &Instruction) -> ExecResult<Option<Env>> {
    let e = Env::new(w, inst, &[S], Some(S))?;
    #[cfg(test)]
    if SLOW_ONLY.get() {
        return Ok(None);
    }
    Ok((e.omod == 0 && !e.clamp).then_some(e))
}

/// Denormal flushing as MODE says: of the inputs (`0`) and of the rounded result (`1`).
#[derive(Clone, Copy)]
struct Ftz(bool, bool);

impl Ftz {
    fn of(e: &Env) -> Ftz {
        Ftz(!e.keeps_in(S), !e.keeps_out(S))
    }

    /// `b` flushed to a zero of its sign if it is a denormal and `on`.
    #[inline(always)]
    fn flush(on: bool, b: u32) -> u32 {
        if on && b & 0x7f80_0000 == 0 {
            b & 0x8000_0000
        } else {
            b
        }
    }

    /// Source bits `b` as the host's f32.
    #[inline(always)]
    fn input(self, b: u32) -> f32 {
        f32::from_bits(Ftz::flush(self.0, b))
    }

    /// The bits of host result `r`.
    #[inline(always)]
    fn output(self, r: f32) -> u32 {
        Ftz::flush(self.1, r.to_bits())
    }
}

/// The result bits of host result `r`, or the slow path's where `r` is a NaN.
#[inline(always)]
fn bits(z: Ftz, r: f32, slow: impl FnOnce() -> u64) -> u64 {
    if r.is_nan() {
        slow()
    } else {
        u64::from(z.output(r))
    }
}

/// `host` on every lane of plain sources `s` (all lanes, so that the loop vectorizes), the
/// lanes of `mask` whose result is a NaN recomputed with `slow`.
#[inline(always)]
fn dense<const N: usize>(
    z: Ftz,
    s: [&[u32; LANES]; N],
    mask: u64,
    host: impl Fn([f32; N]) -> f32,
    slow: impl Fn([u64; N]) -> u64,
) -> [u32; LANES] {
    // One loop per flushing mode, so that none tests the mode per lane.
    match (z.0, z.1) {
        (false, false) => dense_in::<N, false, false>(s, mask, host, slow),
        (true, true) => dense_in::<N, true, true>(s, mask, host, slow),
        (true, false) => dense_in::<N, true, false>(s, mask, host, slow),
        (false, true) => dense_in::<N, false, true>(s, mask, host, slow),
    }
}

/// [`dense`] flushing denormal inputs if `FI`, results if `FO`.
#[inline(always)]
fn dense_in<const N: usize, const FI: bool, const FO: bool>(
    s: [&[u32; LANES]; N],
    mask: u64,
    host: impl Fn([f32; N]) -> f32,
    slow: impl Fn([u64; N]) -> u64,
) -> [u32; LANES] {
    let z = Ftz(FI, FO);
    let mut out = [0u32; LANES];
    for (l, o) in out.iter_mut().enumerate() {
        *o = z.output(host(std::array::from_fn(|i| z.input(s[i][l]))));
    }
    let is_nan = |o: u32| o & 0x7fff_ffff > 0x7f80_0000;
    if out.iter().fold(false, |any, &o| any | is_nan(o)) {
        for l in Wave::lanes(mask) {
            if is_nan(out[l]) {
                out[l] = slow(std::array::from_fn(|i| u64::from(s[i][l]))) as u32;
            }
        }
    }
    out
}

/// Writes `out` to the lanes of `mask` of the 32-bit destination ([`vdst32`]).
fn write(w: &mut Wave, (agpr, r): (bool, usize), mask: u64, out: &[u32; LANES]) -> ExecResult {
    let reg = if agpr { &mut w.a[r] } else { &mut w.v[r] };
    if mask == u64::MAX {
        *reg = *out;
    } else {
        Wave::lanes(mask).for_each(|l| reg[l] = out[l]);
    }
    Ok(Flow::Next)
}

/// A two-source f32 operation: `host` on f32, `slow` the reference on values.
#[inline(always)]
pub(super) fn bin(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    host: impl Fn(f32, f32) -> f32,
    slow: fn(f64, f64) -> f64,
) -> ExecResult {
    let Some(e) = fast_env(w, inst)? else {
        return super::bin(w, inst, cx, S, slow);
    };
    let z = Ftz::of(&e);
    let reference = |[a, b]: [u64; 2]| e.put(slow(e.get(a, S), e.get(b, S)), S);
    let (dst, mask) = (vdst32(w, inst)?, active(w, inst));
    let mut store = [[0; LANES]; 2];
    if let Some(s) = plain32(w, inst, cx, &mut store)? {
        let out = dense(z, s, mask, |[a, b]| host(a, b), reference);
        return write(w, dst, mask, &out);
    }
    lanes(w, inst, cx, [B32; 2], B32, |[a, b]| {
        bits(z, host(z.input(a as u32), z.input(b as u32)), || reference([a, b]))
    })
}

/// The slow path's fused multiply-add of bits `a * b + c`.
fn fma_ref(e: &Env, [a, b, c]: [u64; 3]) -> u64 {
    e.put(fma(S, e.get(a, S), e.get(b, S), e.get(c, S)), S)
}

/// [`dense`] for a fused multiply-add of `s`.
#[inline(always)]
fn fma_dense(e: &Env, s: [&[u32; LANES]; 3], mask: u64) -> [u32; LANES] {
    dense(Ftz::of(e), s, mask, |[a, b, c]| a.mul_add(b, c), |x| fma_ref(e, x))
}

/// v_fma_f32.
pub(super) fn fma3(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let Some(e) = fast_env(w, inst)? else {
        return super::tri(w, inst, cx, S, fma);
    };
    let z = Ftz::of(&e);
    let (dst, mask) = (vdst32(w, inst)?, active(w, inst));
    let mut store = [[0; LANES]; 3];
    if let Some(s) = plain32(w, inst, cx, &mut store)? {
        let out = fma_dense(&e, s, mask);
        return write(w, dst, mask, &out);
    }
    lanes(w, inst, cx, [B32; 3], B32, |[a, b, c]| {
        bits(z, z.input(a as u32).mul_add(z.input(b as u32), z.input(c as u32)), || fma_ref(&e, [a, b, c]))
    })
}

/// v_fmac_f32: the destination is the addend.
pub(super) fn fmac(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let Some(e) = fast_env(w, inst)? else {
        return super::fmac(w, inst, cx, S);
    };
    let z = Ftz::of(&e);
    let (dst, mask) = (vdst32(w, inst)?, active(w, inst));
    let mut store = [[0; LANES]; 2];
    if let Some([a, b]) = plain32(w, inst, cx, &mut store)? {
        let c = if dst.0 { &w.a[dst.1] } else { &w.v[dst.1] };
        let out = fma_dense(&e, [a, b, c], mask);
        return write(w, dst, mask, &out);
    }
    let d = inst.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
    let acc: Lanes = read_operand(w, d, B32, cx)?;
    lanes_at(w, inst, cx, [B32; 2], B32, |l, [a, b]| {
        let c = acc[l];
        bits(z, z.input(a as u32).mul_add(z.input(b as u32), z.input(c as u32)), || fma_ref(&e, [a, b, c]))
    })
}

/// v_fmamk_f32 (S0 * K + S1) and v_fmaak_f32 (S0 * S1 + K).
pub(super) fn fma_k(w: &mut Wave, inst: &Instruction, cx: &mut Cx, form: MadForm) -> ExecResult {
    let Some(e) = fast_env(w, inst)? else {
        return super::fma_k(w, inst, cx, S, form);
    };
    let z = Ftz::of(&e);
    let k = literal_k(inst)? & 0xffff_ffff;
    let mk = matches!(form, MadForm::Mk);
    let (dst, mask) = (vdst32(w, inst)?, active(w, inst));
    let mut store = [[0; LANES]; 2];
    if let Some([a, b]) = plain32(w, inst, cx, &mut store)? {
        let k = [k as u32; LANES];
        let out = fma_dense(&e, if mk { [a, &k, b] } else { [a, b, &k] }, mask);
        return write(w, dst, mask, &out);
    }
    lanes(w, inst, cx, [B32; 2], B32, |[a, b]| {
        let (m, c) = if mk { (k, b) } else { (b, k) };
        bits(z, z.input(a as u32).mul_add(z.input(m as u32), z.input(c as u32)), || fma_ref(&e, [a, m, c]))
    })
}
