//! The binary digits of 2/pi that v_trig_preop_f64 reads (1201 bits), computed once from
//! Machin's formula pi = 16 atan(1/5) - 4 atan(1/239) in fixed point, rather than copied from a
//! table.

use std::sync::OnceLock;

/// Fixed-point limbs: limb 0 is the integer part, limb i weighs 2^(-32 i).
const LIMBS: usize = 48;
/// Bits of 2/pi the hardware table holds (CDNA2 ISA guide, V_TRIG_PREOP_F64: 1201'B(2.0 / PI)).
pub const BITS: usize = 1201;

type Fixed = [u64; LIMBS];

fn div_small(a: &Fixed, d: u64) -> Fixed {
    let mut out = [0u64; LIMBS];
    let mut rem = 0u64;
    for (o, &x) in out.iter_mut().zip(a) {
        let cur = rem << 32 | x;
        *o = cur / d;
        rem = cur % d;
    }
    out
}

fn add(a: &Fixed, b: &Fixed) -> Fixed {
    let mut out = [0u64; LIMBS];
    let mut carry = 0u64;
    for i in (0..LIMBS).rev() {
        let s = a[i] + b[i] + carry;
        out[i] = s & 0xffff_ffff;
        carry = s >> 32;
    }
    out
}

fn sub(a: &Fixed, b: &Fixed) -> Fixed {
    let mut out = [0u64; LIMBS];
    let mut borrow = 0u64;
    for i in (0..LIMBS).rev() {
        let (s, b1) = a[i].overflowing_sub(b[i] + borrow);
        out[i] = s & 0xffff_ffff;
        borrow = u64::from(b1);
    }
    out
}

fn mul_small(a: &Fixed, m: u64) -> Fixed {
    let mut out = [0u64; LIMBS];
    let mut carry = 0u64;
    for i in (0..LIMBS).rev() {
        let p = a[i] * m + carry;
        out[i] = p & 0xffff_ffff;
        carry = p >> 32;
    }
    out
}

/// atan(1/x) = sum (-1)^k / ((2k+1) x^(2k+1)).
fn atan_inv(x: u64) -> Fixed {
    let mut one = [0u64; LIMBS];
    one[0] = 1;
    let mut power = div_small(&one, x);
    let mut sum = power;
    let mut k = 1u64;
    loop {
        power = div_small(&power, x * x);
        if power.iter().all(|&l| l == 0) {
            return sum;
        }
        let term = div_small(&power, 2 * k + 1);
        sum = if k % 2 == 1 { sub(&sum, &term) } else { add(&sum, &term) };
        k += 1;
    }
}

/// Bit i (0-based from the first fractional bit, weight 2^-(i+1)) of 2/pi.
pub fn bits() -> &'static [bool] {
    static BITS_OF: OnceLock<Vec<bool>> = OnceLock::new();
    BITS_OF.get_or_init(|| {
        let pi = sub(&mul_small(&atan_inv(5), 16), &mul_small(&atan_inv(239), 4));
        // Long division of 2 by pi, one bit at a time: 2/pi < 1, so the bits are fractional.
        let mut rem = [0u64; LIMBS];
        rem[0] = 2;
        (0..BITS)
            .map(|_| {
                rem = mul_small(&rem, 2);
                let ge = rem.iter().zip(&pi).find(|(a, b)| a != b).is_none_or(|(a, b)| a > b);
                if ge {
                    rem = sub(&rem, &pi);
                }
                ge
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_leading_digits_are_2_over_pi() {
        // 2/pi = 0.A2F9836E4E441529FC2757D1F534DDC0DB629599... (hex), the digits every libm's
        // argument reduction starts from; f64's 2/pi is them rounded.
        let word = |i: usize| super::bits()[i * 24..i * 24 + 24].iter().fold(0u32, |w, &b| w << 1 | u32::from(b));
        let want = [0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62, 0x95993C];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(word(i), *w, "word {i}");
        }
        let m = super::bits()[..60].iter().fold(0u64, |w, &b| w << 1 | u64::from(b));
        assert_eq!(m as f64 / 2f64.powi(60), std::f64::consts::FRAC_2_PI);
    }
}
