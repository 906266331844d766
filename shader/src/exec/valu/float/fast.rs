//! The f32 fast path of the common arithmetic (v_add, v_sub, v_subrev, v_mul, v_fma, v_fmac,
//! v_fmamk, v_fmaak), the inner loop of HIP kernels.
//!
//! It runs when MODE keeps f32 denormals in and out (FP_DENORM f32 = FLUSH_NONE, as HIP kernels
//! start on gfx90a) and rounds to nearest even, and the instruction has no omod or clamp. Then
//! the host's f32 operation gives the slow path's bits for every result that is not a NaN:
//! IEEE-754 add, subtract and multiply rounded once to nearest even (what the slow path's exact
//! f64 result rounded once to f32 is) and the fused multiply-add (the slow path's own
//! operation). A NaN's payload and sign are the host's choice, so a lane whose result is a NaN
//! is recomputed by the slow path, which stays the reference (the differential test in
//! float/tests.rs compares the two on random operands). Source modifiers (abs, neg, SDWA, DPP)
//! are applied by [`super::super::lanes`] as for every VALU operation.

use super::super::{lanes, lanes_at, read_operand, Lanes};
use super::{fma, literal_k, Env, MadForm, S};
use crate::exec::operand::Ty::B32;
use crate::exec::{Cx, ExecError, ExecResult};
use crate::isa::table::Field;
use crate::isa::Instruction;
use crate::wave::Wave;

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
    Ok((e.keeps_in(S) && e.keeps_out(S) && e.omod == 0 && !e.clamp).then_some(e))
}

/// The result bits of host result `r`, or the slow path's where `r` is a NaN.
#[inline(always)]
fn bits(r: f32, slow: impl FnOnce() -> u64) -> u64 {
    if r.is_nan() {
        slow()
    } else {
        u64::from(r.to_bits())
    }
}

#[inline(always)]
fn f(b: u64) -> f32 {
    f32::from_bits(b as u32)
}

/// A two-source f32 operation: `host` on f32, `slow` the reference on values.
pub(super) fn bin(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    host: fn(f32, f32) -> f32,
    slow: fn(f64, f64) -> f64,
) -> ExecResult {
    let Some(e) = fast_env(w, inst)? else {
        return super::bin(w, inst, cx, S, slow);
    };
    lanes(w, inst, cx, [B32; 2], B32, |[a, b]| bits(host(f(a), f(b)), || e.put(slow(e.get(a, S), e.get(b, S)), S)))
}

/// v_fma_f32.
pub(super) fn fma3(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let Some(e) = fast_env(w, inst)? else {
        return super::tri(w, inst, cx, S, fma);
    };
    lanes(w, inst, cx, [B32; 3], B32, |[a, b, c]| {
        bits(f(a).mul_add(f(b), f(c)), || e.put(fma(S, e.get(a, S), e.get(b, S), e.get(c, S)), S))
    })
}

/// v_fmac_f32: the destination is the addend.
pub(super) fn fmac(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let Some(e) = fast_env(w, inst)? else {
        return super::fmac(w, inst, cx, S);
    };
    let d = inst.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
    let acc: Lanes = read_operand(w, d, B32, cx)?;
    lanes_at(w, inst, cx, [B32; 2], B32, |l, [a, b]| {
        let c = acc[l];
        bits(f(a).mul_add(f(b), f(c)), || e.put(fma(S, e.get(a, S), e.get(b, S), e.get(c, S)), S))
    })
}

/// v_fmamk_f32 (S0 * K + S1) and v_fmaak_f32 (S0 * S1 + K).
pub(super) fn fma_k(w: &mut Wave, inst: &Instruction, cx: &mut Cx, form: MadForm) -> ExecResult {
    let Some(e) = fast_env(w, inst)? else {
        return super::fma_k(w, inst, cx, S, form);
    };
    let k = literal_k(inst)? & 0xffff_ffff;
    let mk = matches!(form, MadForm::Mk);
    lanes(w, inst, cx, [B32; 2], B32, |[a, b]| {
        let (m, c) = if mk { (k, b) } else { (b, k) };
        bits(f(a).mul_add(f(m), f(c)), || e.put(fma(S, e.get(a, S), e.get(m, S), e.get(c, S)), S))
    })
}
