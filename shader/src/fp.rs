//! Floating-point helpers the hardware defines and Rust's std lacks: f16 conversion and
//! arithmetic, the min/max NaN rules of IEEE mode, and one view of the three formats ([`Prec`])
//! for NaN quieting, denormal flushing and rounding from f64.

pub mod two_over_pi;

/// The f16 bits nearest `x` (round to nearest even; overflow to infinity; NaN stays quiet NaN).
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 | (man >> 13) as u16 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Subnormal f16 (or zero): shift the full significand into place, rounding to even.
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
        r += 1; // may carry into the exponent, up to infinity: both are right
    }
    sign | r as u16
}

/// The f32 value of f16 bits `h` (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise.
            let lead = m.leading_zeros() - 22; // zeros above bit 9 of the 10-bit field
            let m = (m << (lead + 1)) & 0x3ff;
            sign | ((127 - 15 - lead) << 23) | (m << 13)
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7fc0_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// f16 addition, rounded once (an f16 sum is exact in f32, so one rounding to f16 is right).
pub fn f16_add(a: u16, b: u16) -> u16 {
    f32_to_f16(f16_to_f32(a) + f16_to_f32(b))
}

/// IEEE-mode minimum: a NaN operand yields the other (minNum); -0 < +0.
pub fn min_f64(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        return if a.is_sign_negative() { a } else { b };
    }
    a.min(b)
}

/// IEEE-mode maximum: a NaN operand yields the other (maxNum); +0 > -0.
pub fn max_f64(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        return if a.is_sign_negative() { b } else { a };
    }
    a.max(b)
}

/// The f16 bits nearest `x`, rounded once from f64 (round to nearest even; overflow to
/// infinity). Rounding through f32 first could round twice.
pub fn f64_to_f16(x: f64) -> u16 {
    if x.is_nan() {
        let b = x.to_bits();
        return (((b >> 48) & 0x8000) as u16) | 0x7e00 | ((b >> 42) & 0x1ff) as u16;
    }
    let a = x.abs();
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    if a.is_infinite() {
        return sign | 0x7c00;
    }
    // The f16 ulp at |x|: 2^(e-10) for normal exponents e >= -14, 2^-24 below. Scaling by a
    // power of two is exact, so one round_ties_even is the only rounding.
    let e = if a == 0.0 { -14 } else { (((a.to_bits() >> 52) as i32) - 1023).max(-14) };
    let ulp = f64::from_bits(((e - 10 + 1023) as u64) << 52);
    let r = (a / ulp).round_ties_even() * ulp;
    if r >= 65520.0 {
        return sign | 0x7c00;
    }
    // r is an f16 value, so exact in f32.
    sign | f32_to_f16(r as f32)
}

/// The three floating-point formats of the VALU, as raw bits in a `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prec {
    H,
    S,
    D,
}

impl Prec {
    /// The sign bit.
    pub fn sign(self) -> u64 {
        match self {
            Prec::H => 1 << 15,
            Prec::S => 1 << 31,
            Prec::D => 1 << 63,
        }
    }

    /// The exponent field's mask (in place) and the explicit mantissa bits.
    fn fields(self) -> (u64, u64) {
        match self {
            Prec::H => (0x7c00, 0x3ff),
            Prec::S => (0x7f80_0000, 0x7f_ffff),
            Prec::D => (0x7ff0_0000_0000_0000, 0xf_ffff_ffff_ffff),
        }
    }

    /// The biased exponent field of `b`.
    pub fn exponent(self, b: u64) -> i32 {
        let (e, m) = self.fields();
        ((b & e) >> m.count_ones()) as i32
    }

    pub fn is_nan(self, b: u64) -> bool {
        let (e, m) = self.fields();
        b & e == e && b & m != 0
    }

    /// A signaling NaN: the mantissa's top bit clear.
    pub fn is_snan(self, b: u64) -> bool {
        let (_, m) = self.fields();
        self.is_nan(b) && b & (m + 1) >> 1 == 0
    }

    /// `b` with the quiet bit set if it is a NaN.
    pub fn quiet(self, b: u64) -> u64 {
        let (_, m) = self.fields();
        if self.is_nan(b) {
            b | (m + 1) >> 1
        } else {
            b
        }
    }

    /// A nonzero value below the smallest normal.
    pub fn is_denormal(self, b: u64) -> bool {
        let (e, m) = self.fields();
        b & e == 0 && b & m != 0
    }

    /// `b`, a denormal replaced by zero of its sign.
    pub fn flush(self, b: u64) -> u64 {
        if self.is_denormal(b) {
            b & self.sign()
        } else {
            b
        }
    }

    /// The value of bits `b` (exact).
    pub fn decode(self, b: u64) -> f64 {
        match self {
            Prec::H => f64::from(f16_to_f32(b as u16)),
            Prec::S => f64::from(f32::from_bits(b as u32)),
            Prec::D => f64::from_bits(b),
        }
    }

    /// The bits of `x` rounded to this format (to nearest even), NaNs quiet.
    pub fn encode(self, x: f64) -> u64 {
        let b = match self {
            Prec::H => u64::from(f64_to_f16(x)),
            Prec::S => u64::from((x as f32).to_bits()),
            Prec::D => x.to_bits(),
        };
        self.quiet(b)
    }
}

/// 2^n as an f64, for -1022 <= n <= 1023.
pub fn pow2(n: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&n));
    f64::from_bits(((n + 1023) as u64) << 52)
}

/// `x` = m * 2^e with 0.5 <= |m| < 1 (C's frexp); zero, infinity and NaN give (x, 0).
pub fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    // Denormals: scale into the normal range first (exact).
    let (x, bias) = if x.abs() < f64::MIN_POSITIVE { (x * pow2(64), -64) } else { (x, 0) };
    let b = x.to_bits();
    let e = ((b >> 52) & 0x7ff) as i32 - 1022;
    let m = f64::from_bits((b & !(0x7ff << 52)) | (1022 << 52));
    (m, e + bias)
}

/// x * 2^n rounded once to f64 (to nearest even), for any `n`.
pub fn ldexp(x: f64, n: i64) -> f64 {
    let (m, e) = frexp(x);
    if m == 0.0 || !m.is_finite() {
        return x;
    }
    let e = i64::from(e).saturating_add(n);
    if e > 1024 {
        return f64::INFINITY.copysign(x);
    }
    if e < -1100 {
        // Below half the smallest denormal: rounds to zero.
        return 0.0f64.copysign(x);
    }
    let e = e as i32;
    if e >= -1021 {
        // m * 2^e is normal: split the power so each factor is a normal f64 (exact).
        m * pow2(e / 2) * pow2(e - e / 2)
    } else {
        // A denormal result: the only rounding is the last multiplication.
        (m * pow2(e + 200)) * pow2(-200)
    }
}

/// The VALU's v_min/v_max on bits of format `p`: in IEEE mode a signaling NaN operand gives
/// itself quieted; otherwise a NaN operand gives the other operand; -0 < +0. (CDNA2 ISA guide,
/// V_MIN_F32 / V_MAX_F32 pseudocode.)
pub fn minmax(p: Prec, a: u64, b: u64, ieee: bool, max: bool) -> u64 {
    if ieee && p.is_snan(a) {
        return p.quiet(a);
    }
    if ieee && p.is_snan(b) {
        return p.quiet(b);
    }
    if p.is_nan(a) {
        return b;
    }
    if p.is_nan(b) {
        return a;
    }
    let (x, y) = (p.decode(a), p.decode(b));
    let a_first = if x == y {
        // Equal values differ only in the sign of zero: min takes the negative one.
        (a & p.sign() != 0) != max
    } else {
        (x < y) != max
    };
    if a_first {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trips_every_value() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#06x} -> {f}");
            }
        }
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00); // halfway, even below
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02); // halfway, even above
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // rounds up to infinity
        assert_eq!(f32_to_f16(5.960_464_5e-8), 0x0001); // smallest subnormal
        assert_eq!(f32_to_f16(2.980_232_2e-8), 0x0000); // half of it: ties to even zero
    }

    #[test]
    fn f64_to_f16_rounds_once() {
        // Every f16 value, and the midpoints between neighbours, against the f32 path (which is
        // exact for these, as midpoints of f16 are f32 values).
        for h in 0..0x7c00u16 {
            let x = f64::from(f16_to_f32(h));
            assert_eq!(f64_to_f16(x), h);
            assert_eq!(f64_to_f16(-x), h | 0x8000);
            let next = f64::from(f16_to_f32(h + 1));
            let mid = (x + next) / 2.0;
            assert_eq!(f64_to_f16(mid), f32_to_f16(mid as f32), "{h:#x}");
        }
        // Just above a midpoint: rounding to f32 first would land on the midpoint and round
        // to even (down); one rounding goes up.
        let x = 1.0 + 1.0 / 2048.0 + 1e-12;
        assert_eq!(f32_to_f16(x as f32), 0x3c00);
        assert_eq!(f64_to_f16(x), 0x3c01);
        assert_eq!(f64_to_f16(1e6), 0x7c00);
        assert_eq!(f64_to_f16(65519.0), 0x7bff);
        assert_eq!(f64_to_f16(-1e-10), 0x8000);
        assert_eq!(f64_to_f16(f64::NAN) & 0x7e00, 0x7e00);
    }

    #[test]
    fn prec_classifies_and_quiets() {
        assert!(Prec::S.is_snan(0x7f80_0001));
        assert!(!Prec::S.is_snan(0x7fc0_0000));
        assert_eq!(Prec::S.quiet(0x7f80_0001), 0x7fc0_0001);
        assert_eq!(Prec::H.quiet(0x7c01), 0x7e01);
        assert!(Prec::D.is_denormal(1));
        assert_eq!(Prec::S.flush(0x8000_0001), 0x8000_0000);
        assert_eq!(Prec::H.exponent(0x3c00), 15);
        assert_eq!(Prec::S.exponent(0x3f80_0000), 127);
        assert_eq!(Prec::D.exponent(1.0f64.to_bits()), 1023);
        assert_eq!(Prec::H.encode(Prec::H.decode(0x0001)), 0x0001);
    }

    #[test]
    fn frexp_and_ldexp_match_the_definitions() {
        assert_eq!(frexp(8.0), (0.5, 4));
        assert_eq!(frexp(-0.75), (-0.75, 0));
        assert_eq!(frexp(f64::from_bits(1)), (0.5, -1073));
        assert_eq!(ldexp(0.5, -1073), f64::from_bits(1));
        assert_eq!(ldexp(1.0, 1024), f64::INFINITY);
        assert_eq!(ldexp(-3.0, -5000), -0.0);
        assert_eq!(ldexp(1.5, 10), 1536.0);
        // 3 * 2^-1076 = 0.75 of the smallest denormal: rounds up to it, once.
        assert_eq!(ldexp(3.0, -1076), f64::from_bits(1));
        // 2^-1075 is half the smallest denormal: ties to even zero.
        assert_eq!(ldexp(1.0, -1075), 0.0);
    }

    #[test]
    fn valu_minmax_follows_ieee_mode() {
        let s = Prec::S;
        let snan = 0x7f80_0001;
        let one = 1.0f32.to_bits() as u64;
        assert_eq!(minmax(s, snan, one, true, false), 0x7fc0_0001);
        assert_eq!(minmax(s, snan, one, false, false), one);
        assert_eq!(minmax(s, 0x7fc0_0000, one, true, true), one);
        assert_eq!(minmax(s, 0x8000_0000, 0, true, false), 0x8000_0000);
        assert_eq!(minmax(s, 0x8000_0000, 0, true, true), 0);
        assert_eq!(minmax(s, one, 2.0f32.to_bits() as u64, true, true), 2.0f32.to_bits() as u64);
    }

    #[test]
    fn min_max_take_the_number_over_nan_and_order_zeros() {
        assert_eq!(min_f64(f64::NAN, 1.0), 1.0);
        assert_eq!(max_f64(2.0, f64::NAN), 2.0);
        assert!(min_f64(0.0, -0.0).is_sign_negative());
        assert!(max_f64(-0.0, 0.0).is_sign_positive());
    }
}
