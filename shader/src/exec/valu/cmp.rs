//! VALU compares (VOPC and their VOP3 forms): a bit per lane, set iff the condition holds, zero
//! in lanes EXEC disables. The e32 forms write VCC, e64 (and SDWA with sdst) their scalar
//! destination; gfx9's v_cmpx_* also write EXEC (MI200 ISA guide, "VOPC Instructions": "V_CMPX:
//! write VCC and EXEC"); gfx10's write EXEC only.

use super::{active, fetch_all, write_mask_dst, Handler};
use crate::exec::operand::{Ty, Ty::B16, Ty::B32, Ty::F64, Ty::I64};
use crate::exec::{Cx, ExecError, ExecResult, Flow};
use crate::fp::f16_to_f32;
use crate::isa::{Instruction, Op};
use crate::wave::Wave;

/// The handler of `op`, if this family implements it.
pub(super) fn handler(op: Op) -> Option<Handler> {
    int_cmp(op).or_else(|| float_cmp(op)).or_else(|| class_cmp(op))
}

/// The eight integer conditions, in opcode order: F, LT, EQ, LE, GT, NE, GE, T.
#[derive(Clone, Copy)]
enum ICond {
    F,
    Lt,
    Eq,
    Le,
    Gt,
    Ne,
    Ge,
    T,
}

impl ICond {
    fn test<T: Ord>(self, a: T, b: T) -> bool {
        match self {
            ICond::F => false,
            ICond::Lt => a < b,
            ICond::Eq => a == b,
            ICond::Le => a <= b,
            ICond::Gt => a > b,
            ICond::Ne => a != b,
            ICond::Ge => a >= b,
            ICond::T => true,
        }
    }
}

/// The sixteen float conditions: F, LT, EQ, LE, GT, LG, GE, O, U, NGE, NLG, NGT, NLE, NEQ,
/// NLT, TRU. The N forms are the negations of the ordered ones, so they hold for NaN; LG is
/// ordered (false for NaN), NEQ unordered.
#[derive(Clone, Copy)]
enum FCond {
    F,
    Lt,
    Eq,
    Le,
    Gt,
    Lg,
    Ge,
    O,
    U,
    Nge,
    Nlg,
    Ngt,
    Nle,
    Neq,
    Nlt,
    Tru,
}

impl FCond {
    fn test(self, a: f64, b: f64) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        // `None` when either is NaN (unordered).
        let o = a.partial_cmp(&b);
        let lt = o == Some(Less);
        let eq = o == Some(Equal);
        let gt = o == Some(Greater);
        match self {
            FCond::F => false,
            FCond::Lt => lt,
            FCond::Eq => eq,
            FCond::Le => lt || eq,
            FCond::Gt => gt,
            FCond::Lg => lt || gt,
            FCond::Ge => gt || eq,
            FCond::O => o.is_some(),
            FCond::U => o.is_none(),
            FCond::Nge => !(gt || eq),
            FCond::Nlg => !(lt || gt),
            FCond::Ngt => !gt,
            FCond::Nle => !(lt || eq),
            FCond::Neq => !eq,
            FCond::Nlt => !lt,
            FCond::Tru => true,
        }
    }
}

/// Runs a compare: `f` gives the lane's bit from its two sources.
fn compare(
    w: &mut Wave,
    inst: &Instruction,
    cx: &mut Cx,
    ty: [Ty; 2],
    x: bool,
    f: impl Fn(u64, u64) -> bool,
) -> ExecResult {
    if inst.mods.clamp || inst.mods.omod != 0 {
        return Err(ExecError::Unimplemented("clamp/omod on a compare".into()));
    }
    let [a, b] = fetch_all(w, inst, cx, ty)?;
    let mask = active(w, inst);
    let bits = Wave::lanes(mask).filter(|&l| f(a[l], b[l])).fold(0u64, |m, l| m | 1 << l);
    if x && inst.target.is_gfx10() {
        // gfx10's v_cmpx write EXEC only (RDNA2 ISA guide, VOPC: "V_CMPX ... write EXEC"; LLVM
        // 15 VOPCX on GFX10 has no sdst).
        w.set_exec(bits & mask);
        return Ok(Flow::Next);
    }
    write_mask_dst(w, inst, bits, mask)?;
    if x {
        w.set_exec(bits & mask);
    }
    Ok(Flow::Next)
}

/// Integer compares refuse float modifiers (only SDWA sext applies).
fn int_compare(w: &mut Wave, inst: &Instruction, cx: &mut Cx, ty: Ty, signed: bool, c: ICond, x: bool) -> ExecResult {
    if inst.mods.abs != 0 || inst.mods.neg != 0 {
        return Err(ExecError::Unimplemented("abs/neg on an integer compare".into()));
    }
    let bits = match ty {
        B16 => 16,
        B32 => 32,
        _ => 64,
    };
    let s = 64 - bits;
    compare(w, inst, cx, [ty, ty], x, move |a, b| {
        if signed {
            c.test(((a << s) as i64) >> s, ((b << s) as i64) >> s)
        } else {
            c.test(a, b)
        }
    })
}

/// The value of `x` (of float type `ty`) as an f64, exactly.
fn float(x: u64, ty: Ty) -> f64 {
    match ty {
        B16 => f64::from(f16_to_f32(x as u16)),
        B32 => f64::from(f32::from_bits(x as u32)),
        _ => f64::from_bits(x),
    }
}

fn float_compare(w: &mut Wave, inst: &Instruction, cx: &mut Cx, ty: Ty, c: FCond, x: bool) -> ExecResult {
    compare(w, inst, cx, [ty, ty], x, move |a, b| c.test(float(a, ty), float(b, ty)))
}

/// The class bits of v_cmp_class (MI200 ISA guide, V_CMP_CLASS_F32): 0 signaling NaN, 1 quiet
/// NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf.
fn class_of(x: u64, ty: Ty) -> u32 {
    let (exp_bits, man_bits, bits) = match ty {
        B16 => (5, 10, 16),
        B32 => (8, 23, 32),
        _ => (11, 52, 64),
    };
    let neg = (x >> (bits - 1)) & 1 != 0;
    let exp = (x >> man_bits) & ((1 << exp_bits) - 1);
    let man = x & ((1 << man_bits) - 1);
    let side = |n: u32, p: u32| if neg { n } else { p };
    if exp == (1 << exp_bits) - 1 {
        if man == 0 {
            side(2, 9)
        } else if man >> (man_bits - 1) != 0 {
            1
        } else {
            0
        }
    } else if exp == 0 {
        if man == 0 {
            side(5, 6)
        } else {
            side(4, 7)
        }
    } else {
        side(3, 8)
    }
}

fn class_compare(w: &mut Wave, inst: &Instruction, cx: &mut Cx, ty: Ty, x: bool) -> ExecResult {
    // src1 is the 10-bit class mask (a 32-bit integer for every width).
    compare(w, inst, cx, [ty, B32], x, move |a, m| m & (1 << class_of(a, ty)) != 0)
}

macro_rules! int_table {
    ($op:ident; $($name:ident => $ty:ident, $signed:expr, $cond:ident, $x:expr;)*) => {
        match $op {
            $(Op::$name => |w, i, cx| int_compare(w, i, cx, $ty, $signed, ICond::$cond, $x),)*
            _ => return None,
        }
    };
}

macro_rules! float_table {
    ($op:ident; $($name:ident => $ty:ident, $cond:ident, $x:expr;)*) => {
        match $op {
            $(Op::$name => |w, i, cx| float_compare(w, i, cx, $ty, FCond::$cond, $x),)*
            _ => return None,
        }
    };
}

/// Generates the table rows of the integer types: per type, its signedness, the op names for
/// F..T and the cmpx names for F..T.
macro_rules! int_rows {
    ($op:ident; $($ty:ident, $signed:expr,
     [$f:ident $lt:ident $eq:ident $le:ident $gt:ident $ne:ident $ge:ident $t:ident],
     [$xf:ident $xlt:ident $xeq:ident $xle:ident $xgt:ident $xne:ident $xge:ident $xt:ident];)*) => {
        int_table!($op; $(
            $f => $ty, $signed, F, false; $lt => $ty, $signed, Lt, false; $eq => $ty, $signed, Eq, false;
            $le => $ty, $signed, Le, false; $gt => $ty, $signed, Gt, false; $ne => $ty, $signed, Ne, false;
            $ge => $ty, $signed, Ge, false; $t => $ty, $signed, T, false;
            $xf => $ty, $signed, F, true; $xlt => $ty, $signed, Lt, true; $xeq => $ty, $signed, Eq, true;
            $xle => $ty, $signed, Le, true; $xgt => $ty, $signed, Gt, true; $xne => $ty, $signed, Ne, true;
            $xge => $ty, $signed, Ge, true; $xt => $ty, $signed, T, true;
        )*)
    };
}

fn int_cmp(op: Op) -> Option<Handler> {
    Some(int_rows!(op;
        B16, true,
        [VCmpFI16 VCmpLtI16 VCmpEqI16 VCmpLeI16 VCmpGtI16 VCmpNeI16 VCmpGeI16 VCmpTI16],
        [VCmpxFI16 VCmpxLtI16 VCmpxEqI16 VCmpxLeI16 VCmpxGtI16 VCmpxNeI16 VCmpxGeI16 VCmpxTI16];
        B16, false,
        [VCmpFU16 VCmpLtU16 VCmpEqU16 VCmpLeU16 VCmpGtU16 VCmpNeU16 VCmpGeU16 VCmpTU16],
        [VCmpxFU16 VCmpxLtU16 VCmpxEqU16 VCmpxLeU16 VCmpxGtU16 VCmpxNeU16 VCmpxGeU16 VCmpxTU16];
        B32, true,
        [VCmpFI32 VCmpLtI32 VCmpEqI32 VCmpLeI32 VCmpGtI32 VCmpNeI32 VCmpGeI32 VCmpTI32],
        [VCmpxFI32 VCmpxLtI32 VCmpxEqI32 VCmpxLeI32 VCmpxGtI32 VCmpxNeI32 VCmpxGeI32 VCmpxTI32];
        B32, false,
        [VCmpFU32 VCmpLtU32 VCmpEqU32 VCmpLeU32 VCmpGtU32 VCmpNeU32 VCmpGeU32 VCmpTU32],
        [VCmpxFU32 VCmpxLtU32 VCmpxEqU32 VCmpxLeU32 VCmpxGtU32 VCmpxNeU32 VCmpxGeU32 VCmpxTU32];
        I64, true,
        [VCmpFI64 VCmpLtI64 VCmpEqI64 VCmpLeI64 VCmpGtI64 VCmpNeI64 VCmpGeI64 VCmpTI64],
        [VCmpxFI64 VCmpxLtI64 VCmpxEqI64 VCmpxLeI64 VCmpxGtI64 VCmpxNeI64 VCmpxGeI64 VCmpxTI64];
        I64, false,
        [VCmpFU64 VCmpLtU64 VCmpEqU64 VCmpLeU64 VCmpGtU64 VCmpNeU64 VCmpGeU64 VCmpTU64],
        [VCmpxFU64 VCmpxLtU64 VCmpxEqU64 VCmpxLeU64 VCmpxGtU64 VCmpxNeU64 VCmpxGeU64 VCmpxTU64];
    ))
}

/// Generates the table rows of the float types: per type, (condition, op name, cmpx name).
macro_rules! float_rows {
    ($op:ident; $($ty:ident: [$($c:ident $n:ident $xn:ident),*];)*) => {
        float_table!($op; $($($n => $ty, $c, false; $xn => $ty, $c, true;)*)*)
    };
}

fn float_cmp(op: Op) -> Option<Handler> {
    Some(float_rows!(op;
        B16: [
        F VCmpFF16 VCmpxFF16, Lt VCmpLtF16 VCmpxLtF16, Eq VCmpEqF16 VCmpxEqF16, Le VCmpLeF16 VCmpxLeF16,
        Gt VCmpGtF16 VCmpxGtF16, Lg VCmpLgF16 VCmpxLgF16, Ge VCmpGeF16 VCmpxGeF16, O VCmpOF16 VCmpxOF16,
        U VCmpUF16 VCmpxUF16, Nge VCmpNgeF16 VCmpxNgeF16, Nlg VCmpNlgF16 VCmpxNlgF16, Ngt VCmpNgtF16 VCmpxNgtF16,
        Nle VCmpNleF16 VCmpxNleF16, Neq VCmpNeqF16 VCmpxNeqF16, Nlt VCmpNltF16 VCmpxNltF16, Tru VCmpTruF16 VCmpxTruF16];
        B32: [
        F VCmpFF32 VCmpxFF32, Lt VCmpLtF32 VCmpxLtF32, Eq VCmpEqF32 VCmpxEqF32, Le VCmpLeF32 VCmpxLeF32,
        Gt VCmpGtF32 VCmpxGtF32, Lg VCmpLgF32 VCmpxLgF32, Ge VCmpGeF32 VCmpxGeF32, O VCmpOF32 VCmpxOF32,
        U VCmpUF32 VCmpxUF32, Nge VCmpNgeF32 VCmpxNgeF32, Nlg VCmpNlgF32 VCmpxNlgF32, Ngt VCmpNgtF32 VCmpxNgtF32,
        Nle VCmpNleF32 VCmpxNleF32, Neq VCmpNeqF32 VCmpxNeqF32, Nlt VCmpNltF32 VCmpxNltF32, Tru VCmpTruF32 VCmpxTruF32];
        F64: [
        F VCmpFF64 VCmpxFF64, Lt VCmpLtF64 VCmpxLtF64, Eq VCmpEqF64 VCmpxEqF64, Le VCmpLeF64 VCmpxLeF64,
        Gt VCmpGtF64 VCmpxGtF64, Lg VCmpLgF64 VCmpxLgF64, Ge VCmpGeF64 VCmpxGeF64, O VCmpOF64 VCmpxOF64,
        U VCmpUF64 VCmpxUF64, Nge VCmpNgeF64 VCmpxNgeF64, Nlg VCmpNlgF64 VCmpxNlgF64, Ngt VCmpNgtF64 VCmpxNgtF64,
        Nle VCmpNleF64 VCmpxNleF64, Neq VCmpNeqF64 VCmpxNeqF64, Nlt VCmpNltF64 VCmpxNltF64, Tru VCmpTruF64 VCmpxTruF64];
    ))
}

fn class_cmp(op: Op) -> Option<Handler> {
    Some(match op {
        Op::VCmpClassF16 => |w, i, cx| class_compare(w, i, cx, B16, false),
        Op::VCmpClassF32 => |w, i, cx| class_compare(w, i, cx, B32, false),
        Op::VCmpClassF64 => |w, i, cx| class_compare(w, i, cx, F64, false),
        Op::VCmpxClassF16 => |w, i, cx| class_compare(w, i, cx, B16, true),
        Op::VCmpxClassF32 => |w, i, cx| class_compare(w, i, cx, B32, true),
        Op::VCmpxClassF64 => |w, i, cx| class_compare(w, i, cx, F64, true),
        _ => return None,
    })
}

#[cfg(test)]
#[path = "cmp_tests.rs"]
mod tests;
