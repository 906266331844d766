//! Per-instruction tests of the float VALU: tables of inputs per lane, checked against values
//! worked out by hand from the manual or computed on the host with std.

use crate::exec::Fault;
use crate::testing::{run, run_fault};

/// MODE as a HIP kernel starts (rsrc1 0x00af0040 on gfx90a): round to nearest even, f32 and
/// f16/f64 denormals kept, DX10_CLAMP, IEEE.
const HIP: u32 = 0x3f0;
/// Denormals flushed in and out for every format, DX10_CLAMP and IEEE.
const FLUSH: u32 = 0x300;
/// Denormals flushed, IEEE off (where omod applies).
const NO_IEEE: u32 = 0x100;

const NAN: u32 = 0x7fc0_0000;
const SNAN: u32 = 0x7f80_0001;
const INF: u32 = 0x7f80_0000;
const NEG_INF: u32 = 0xff80_0000;
const DENORM: u32 = 0x0000_0001;
const NEG_ZERO: u32 = 0x8000_0000;

fn f(x: f32) -> u32 {
    x.to_bits()
}

/// Runs `src` with lane l's v1, v2, v3 from `rows[l]` (and v0 = 0xdead) and returns v0 of
/// those lanes; `None` without llvm-mc.
fn run32(src: &str, mode: u32, rows: &[[u32; 3]]) -> Option<Vec<u32>> {
    let (w, _) = run(src, |w, _| {
        w.mode = mode;
        for (l, r) in rows.iter().enumerate() {
            w.v[0][l] = 0xdead;
            w.v[1][l] = r[0];
            w.v[2][l] = r[1];
            w.v[3][l] = r[2];
        }
    })?;
    Some((0..rows.len()).map(|l| w.v[0][l]).collect())
}

/// Checks `src` against `(inputs, expected v0)` rows: a NaN expectation accepts any quiet NaN.
fn check32(src: &str, mode: u32, cases: &[([u32; 3], u32)]) {
    let rows: Vec<[u32; 3]> = cases.iter().map(|c| c.0).collect();
    let Some(got) = run32(src, mode, &rows) else {
        return;
    };
    for ((ins, want), got) in cases.iter().zip(got) {
        let nan = |b: u32| b & 0x7f80_0000 == 0x7f80_0000 && b & 0x7f_ffff != 0;
        if nan(*want) && src.contains("_f32") {
            assert!(nan(got) && got & 0x40_0000 != 0, "{src} {ins:x?}: got {got:#x}, want a quiet NaN");
        } else {
            assert_eq!(got, *want, "{src} {ins:x?}: got {got:#x} want {want:#x}");
        }
    }
}

/// Like [`run32`] for f64 operands: v[2:3], v[4:5], v[6:7] in, v[0:1] out.
fn run64(src: &str, mode: u32, rows: &[[f64; 3]]) -> Option<Vec<u64>> {
    let (w, _) = run(src, |w, _| {
        w.mode = mode;
        for (l, r) in rows.iter().enumerate() {
            for (i, x) in r.iter().enumerate() {
                w.v[2 + 2 * i][l] = x.to_bits() as u32;
                w.v[3 + 2 * i][l] = (x.to_bits() >> 32) as u32;
            }
        }
    })?;
    Some((0..rows.len()).map(|l| u64::from(w.v[0][l]) | u64::from(w.v[1][l]) << 32).collect())
}

/// Values whose sums and products exercise rounding, signed zeros, infinities and denormals.
const OPERANDS: [u32; 12] = [
    0x3f80_0000,
    0x3f80_0001,
    0x4b80_0000,
    0xbf00_0000,
    0,
    NEG_ZERO,
    INF,
    NEG_INF,
    DENORM,
    0x0080_0000,
    0x7f7f_ffff,
    0x3eaa_aaab,
];

#[test]
fn f32_arithmetic_matches_the_host() {
    // The host's IEEE f32 operations round to nearest even with denormals: HIP's mode.
    type Op = fn(f32, f32, f32) -> f32;
    let ops: [(&str, Op); 6] = [
        ("v_add_f32 v0, v1, v2", |a, b, _| a + b),
        ("v_sub_f32 v0, v1, v2", |a, b, _| a - b),
        ("v_subrev_f32 v0, v1, v2", |a, b, _| b - a),
        ("v_mul_f32 v0, v1, v2", |a, b, _| a * b),
        ("v_fma_f32 v0, v1, v2, v3", |a, b, c| a.mul_add(b, c)),
        ("v_fma_f32 v0, -v1, |v2|, -v3", |a, b, c| (-a).mul_add(b.abs(), -c)),
    ];
    for (src, op) in ops {
        let mut cases = Vec::new();
        for (i, &a) in OPERANDS.iter().enumerate() {
            for &b in &OPERANDS[i..] {
                let c = OPERANDS[(i * 5 + 3) % OPERANDS.len()];
                let want = op(f32::from_bits(a), f32::from_bits(b), f32::from_bits(c)).to_bits();
                cases.push(([a, b, c], want));
            }
        }
        for chunk in cases.chunks(64) {
            check32(src, HIP, chunk);
        }
    }
}

#[test]
fn f32_nan_operands_give_quiet_nans() {
    let one = f(1.0);
    check32("v_add_f32 v0, v1, v2", HIP, &[([SNAN, one, 0], NAN), ([one, NAN, 0], NAN), ([INF, NEG_INF, 0], NAN)]);
    check32("v_mul_f32 v0, v1, v2", HIP, &[([0, INF, 0], NAN), ([SNAN, 0, 0], NAN)]);
}

#[test]
fn mul_legacy_makes_zero_of_zero_times_anything() {
    check32(
        "v_mul_legacy_f32 v0, v1, v2",
        HIP,
        &[([0, INF, 0], 0), ([NAN, NEG_ZERO, 0], 0), ([f(3.0), f(-2.0), 0], f(-6.0)), ([INF, f(2.0), 0], INF)],
    );
}

#[test]
fn fma_rounds_once_and_mad_twice() {
    // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: rounded to f32 the 2^-24 is a tie that goes to even
    // (away), so mad gives 2^-11 and fma 2^-11 + 2^-24.
    let a = f(1.0 + 1.0 / 4096.0);
    let fused = f(1.0 / 2048.0 + 1.0 / 16_777_216.0);
    let unfused = f(1.0 / 2048.0);
    assert_eq!(f32::from_bits(a).mul_add(f32::from_bits(a), -1.0).to_bits(), fused);
    assert_eq!((f32::from_bits(a) * f32::from_bits(a) - 1.0).to_bits(), unfused);
    check32("v_fma_f32 v0, v1, v2, v3", HIP, &[([a, a, f(-1.0)], fused)]);
    check32("v_mad_f32 v0, v1, v2, v3", HIP, &[([a, a, f(-1.0)], unfused)]);
    check32("v_mac_f32 v0, v1, v2", HIP, &[([a, a, 0], f(f32::from_bits(a) * f32::from_bits(a) + 0.0))]);
    // v_fmac: the destination is the addend (v0 = 0xdead, a denormal, is tiny next to 2).
    check32("v_fmac_f32 v0, v1, v2", HIP, &[([f(2.0), f(3.0), 0], f(6.0))]);
    let Some((w, _)) = run("v_fmac_f32 v0, v1, v2", |w, _| {
        w.mode = HIP;
        w.v[0][0] = f(1.0);
        w.v[1][0] = a;
        w.v[2][0] = a;
    }) else {
        return;
    };
    assert_eq!(w.v[0][0], f(f32::from_bits(a).mul_add(f32::from_bits(a), 1.0)));
}

#[test]
fn madmk_and_madak_take_the_literal() {
    check32("v_madmk_f32 v0, v1, 0x40400000, v2", HIP, &[([f(2.0), f(1.0), 0], f(7.0))]);
    check32("v_madak_f32 v0, v1, v2, 0x40400000", HIP, &[([f(2.0), f(5.0), 0], f(13.0))]);
}

#[test]
fn denormals_follow_the_mode() {
    let tiny = 0x0000_0100; // a denormal
                            // Kept: a denormal sum.
    check32("v_add_f32 v0, v1, v2", HIP, &[([tiny, tiny, 0], 0x200)]);
    // Flushed in: the operands are zeros.
    check32("v_add_f32 v0, v1, v2", FLUSH, &[([tiny, tiny, 0], 0), ([0x8000_0100, 0, 0], 0)]);
    // FLUSH_OUT (f32 field 1): inputs kept, the denormal product flushed to a signed zero.
    check32("v_mul_f32 v0, v1, v2", 0x310, &[([0x0080_0000, f(-0.5), 0], NEG_ZERO)]);
    // FLUSH_IN (2): the input is flushed, but a denormal result is kept.
    check32("v_mul_f32 v0, v1, v2", 0x320, &[([tiny, f(1.0), 0], 0), ([0x0080_0000, f(0.5), 0], 0x0040_0000)]);
    // v_mad_f32 flushes whatever the mode.
    check32("v_mad_f32 v0, v1, v2, v3", HIP, &[([tiny, f(1.0), 0], 0)]);
    // f64 and f16 take the high pair: f32 kept, f16 flushed.
    let Some(got) = run32("v_add_f16 v0, v1, v2", 0x330, &[[0x0001, 0x0001, 0]]) else {
        return;
    };
    assert_eq!(got, [0]);
}

#[test]
fn clamp_and_omod_modify_results() {
    check32(
        "v_add_f32 v0, v1, v2 clamp",
        HIP,
        &[([f(0.75), f(0.5), 0], f(1.0)), ([f(-3.0), 0, 0], 0), ([NAN, 0, 0], 0), ([f(0.25), 0, 0], f(0.25))],
    );
    // Without DX10_CLAMP a NaN passes the clamp.
    check32("v_add_f32 v0, v1, v2 clamp", 0x200 | 0xf0, &[([NAN, 0, 0], NAN)]);
    check32("v_add_f32 v0, v1, v2 mul:2", NO_IEEE, &[([f(1.5), f(1.0), 0], f(5.0))]);
    check32("v_mul_f32 v0, v1, v2 mul:4", NO_IEEE, &[([f(1.5), f(1.0), 0], f(6.0))]);
    check32("v_add_f32 v0, v1, v2 div:2", NO_IEEE, &[([f(1.5), f(1.0), 0], f(1.25))]);
    check32("v_add_f32 v0, v1, v2 clamp mul:2", NO_IEEE, &[([f(0.25), f(0.25), 0], f(1.0))]);
    let Some(got) = run64("v_add_f64 v[0:1], v[2:3], v[4:5] clamp", HIP, &[[2.0, 1.0, 0.0], [-0.5, 0.25, 0.0]]) else {
        return;
    };
    assert_eq!(got, [1.0f64.to_bits(), 0]);
}

#[test]
fn unmodelled_modes_are_unimplemented() {
    for (src, mode, what) in [
        ("v_add_f32 v0, v1, v2", HIP | 1, "rounding mode"),
        ("v_add_f64 v[0:1], v[2:3], v[4:5]", HIP | 4, "rounding mode"),
        ("v_add_f32 v0, v1, v2 mul:2", HIP, "omod in IEEE mode"),
        ("v_add_f32 v0, v1, v2 mul:2", 0x1f0, "omod with output denormals"),
    ] {
        let Some(fault) = run_fault(src, |w, _| w.mode = mode) else {
            return;
        };
        assert!(matches!(fault, Fault::Unimplemented { .. }), "{fault}");
        assert!(fault.to_string().contains(what), "{fault}");
    }
}

#[test]
fn min_max_follow_ieee_mode_nan_rules() {
    let one = f(1.0);
    let two = f(2.0);
    check32(
        "v_max_f32 v0, v1, v2",
        HIP,
        &[([one, two, 0], two), ([SNAN, one, 0], 0x7fc0_0001), ([NAN, one, 0], one), ([0, NEG_ZERO, 0], 0)],
    );
    check32("v_max_f32 v0, v1, v2", NO_IEEE, &[([SNAN, one, 0], one)]);
    check32(
        "v_min_f32 v0, v1, v2",
        HIP,
        &[([0, NEG_ZERO, 0], NEG_ZERO), ([one, NAN, 0], one), ([NEG_INF, one, 0], NEG_INF)],
    );
    check32("v_min3_f32 v0, v1, v2, v3", HIP, &[([f(3.0), one, two], one)]);
    check32("v_max3_f32 v0, v1, v2, v3", HIP, &[([f(3.0), one, NAN], f(3.0))]);
    check32(
        "v_med3_f32 v0, v1, v2, v3",
        HIP,
        &[
            ([f(3.0), one, two], two),
            ([one, f(3.0), two], two),
            ([f(-1.0), f(0.5), f(9.0)], f(0.5)),
            ([NAN, one, two], one),
        ],
    );
}

#[test]
fn conversions_saturate_and_make_nan_zero() {
    let i = |x: i32| x as u32;
    check32(
        "v_cvt_i32_f32 v0, v1",
        HIP,
        &[
            ([f(-1.5), 0, 0], i(-1)),
            ([f(2.99), 0, 0], 2),
            ([f(3e9), 0, 0], i(i32::MAX)),
            ([f(-3e9), 0, 0], i(i32::MIN)),
            ([NAN, 0, 0], 0),
            ([NEG_INF, 0, 0], i(i32::MIN)),
        ],
    );
    check32("v_cvt_u32_f32 v0, v1", HIP, &[([f(-1.0), 0, 0], 0), ([f(5e9), 0, 0], u32::MAX), ([f(7.9), 0, 0], 7)]);
    // 2^24 + 1 is not an f32: ties to even.
    check32("v_cvt_f32_i32 v0, v1", HIP, &[([16_777_217, 0, 0], f(16_777_216.0)), ([i(-7), 0, 0], f(-7.0))]);
    check32("v_cvt_f32_u32 v0, v1", HIP, &[([u32::MAX, 0, 0], f(4_294_967_296.0))]);
    check32("v_cvt_rpi_i32_f32 v0, v1", HIP, &[([f(2.5), 0, 0], 3), ([f(-2.5), 0, 0], i(-2)), ([NAN, 0, 0], 0)]);
    check32("v_cvt_flr_i32_f32 v0, v1", HIP, &[([f(-2.5), 0, 0], i(-3)), ([f(2.5), 0, 0], 2)]);
    check32("v_cvt_f32_ubyte2 v0, v1", HIP, &[([0x00ab_0000, 0, 0], f(171.0))]);
    check32(
        "v_cvt_off_f32_i4 v0, v1",
        HIP,
        &[([0x8, 0, 0], f(-0.5)), ([0x7, 0, 0], f(0.4375)), ([0xf3, 0, 0], f(0.1875))],
    );
}

#[test]
fn f16_conversions_round_trip_and_round_to_even() {
    check32(
        "v_cvt_f16_f32 v0, v1",
        HIP,
        &[
            ([f(1.0), 0, 0], 0x3c00),
            ([f(1.0 + 1.0 / 2048.0), 0, 0], 0x3c00), // halfway: to even
            ([f(1.0 + 3.0 / 2048.0), 0, 0], 0x3c02),
            ([f(65520.0), 0, 0], 0x7c00),
            ([f(-5.960_464_5e-8), 0, 0], 0x8001),
            ([NAN, 0, 0], 0x7e00),
        ],
    );
    check32(
        "v_cvt_f32_f16 v0, v1",
        HIP,
        &[([0x0001, 0, 0], f(5.960_464_5e-8)), ([0xfc00, 0, 0], NEG_INF), ([0xc500, 0, 0], f(-5.0))],
    );
    // Flushed f16 denormals (the f64/f16 field).
    check32("v_cvt_f32_f16 v0, v1", 0x330, &[([0x0001, 0, 0], 0)]);
    // A round trip of every 16th f16 value through f32.
    let rows: Vec<[u32; 3]> = (0..64).map(|l| [l * 1024 + 7, 0, 0]).collect();
    let Some(wide) = run32("v_cvt_f32_f16 v0, v1", HIP, &rows) else {
        return;
    };
    let back: Vec<[u32; 3]> = wide.iter().map(|&x| [x, 0, 0]).collect();
    let narrow = run32("v_cvt_f16_f32 v0, v1", HIP, &back).expect("assembled once");
    for (r, n) in rows.iter().zip(&narrow) {
        let nan = r[0] & 0x7c00 == 0x7c00 && r[0] & 0x3ff != 0;
        assert_eq!(*n, if nan { r[0] | 0x200 } else { r[0] }, "{:#x}", r[0]);
    }
    check32("v_cvt_i16_f16 v0, v1", HIP, &[([0xc500, 0, 0], 0xfffb), ([0x7c00, 0, 0], 0x7fff), ([0x7e00, 0, 0], 0)]);
    check32("v_cvt_f16_i16 v0, v1", HIP, &[([0xfffb, 0, 0], 0xc500)]);
}

#[test]
fn packed_conversions() {
    // Round toward zero: 1 + 3/2048 would round up to 0x3c02 but truncates to 0x3c01; 65520
    // truncates to the largest f16.
    check32(
        "v_cvt_pkrtz_f16_f32 v0, v1, v2",
        HIP,
        &[([f(1.0 + 3.0 / 2048.0), f(-65520.0), 0], 0xfbff_3c01), ([f(1.0), INF, 0], 0x7c00_3c00)],
    );
    check32(
        "v_cvt_pknorm_i16_f32 v0, v1, v2",
        HIP,
        &[([f(1.0), f(-2.0), 0], 0x8001_7fff), ([f(0.5), NAN, 0], 0x0000_4000)],
    );
    check32(
        "v_cvt_pknorm_u16_f32 v0, v1, v2",
        HIP,
        &[([f(1.0), f(-2.0), 0], 0x0000_ffff), ([f(0.5), 0, 0], 0x0000_8000)],
    );
}

#[test]
fn packs() {
    check32("v_pack_b32_f16 v0, v1, v2", HIP, &[([0xffff_3c00, 0x1234_4000, 0], 0x4000_3c00)]);
    check32("v_pack_b32_f16 v0, -v1, v2 op_sel:[1,1]", HIP, &[([0x3c00_0000, 0x4000_0000, 0], 0x4000_bc00)]);
}

#[test]
fn rounding_to_integers() {
    check32("v_trunc_f32 v0, v1", HIP, &[([f(-2.7), 0, 0], f(-2.0)), ([f(-0.5), 0, 0], NEG_ZERO)]);
    check32("v_ceil_f32 v0, v1", HIP, &[([f(2.1), 0, 0], f(3.0)), ([f(-0.5), 0, 0], NEG_ZERO)]);
    check32("v_floor_f32 v0, v1", HIP, &[([f(-2.1), 0, 0], f(-3.0)), ([INF, 0, 0], INF)]);
    check32(
        "v_rndne_f32 v0, v1",
        HIP,
        &[([f(2.5), 0, 0], f(2.0)), ([f(3.5), 0, 0], f(4.0)), ([f(-0.5), 0, 0], NEG_ZERO), ([f(1e30), 0, 0], f(1e30))],
    );
    // fract(-1e-30) = 1 - 1e-30 rounds to 1.0: clamped to the value below 1.
    check32(
        "v_fract_f32 v0, v1",
        HIP,
        &[
            ([f(-1.25), 0, 0], f(0.75)),
            ([f(-1e-30), 0, 0], 0x3f7f_ffff),
            ([f(5.0), 0, 0], 0),
            ([INF, 0, 0], NAN),
            ([NAN, 0, 0], NAN),
        ],
    );
}

#[test]
fn transcendentals() {
    check32(
        "v_rcp_f32 v0, v1",
        HIP,
        &[
            ([f(-2.0), 0, 0], f(-0.5)),
            ([0, 0, 0], INF),
            ([NEG_ZERO, 0, 0], NEG_INF),
            ([INF, 0, 0], 0),
            ([DENORM, 0, 0], INF),
        ],
    );
    check32("v_rsq_f32 v0, v1", HIP, &[([f(4.0), 0, 0], f(0.5)), ([NEG_ZERO, 0, 0], NEG_INF), ([f(-1.0), 0, 0], NAN)]);
    // sqrt(2) correctly rounded, as the host computes it.
    check32(
        "v_sqrt_f32 v0, v1",
        HIP,
        &[([f(2.0), 0, 0], f(2.0f32.sqrt())), ([NEG_ZERO, 0, 0], NEG_ZERO), ([f(-4.0), 0, 0], NAN)],
    );
    check32(
        "v_exp_f32 v0, v1",
        HIP,
        &[([f(3.0), 0, 0], f(8.0)), ([NEG_INF, 0, 0], 0), ([f(-0.0), 0, 0], f(1.0)), ([f(-130.0), 0, 0], 0)],
    );
    check32(
        "v_log_f32 v0, v1",
        HIP,
        &[([f(8.0), 0, 0], f(3.0)), ([0, 0, 0], NEG_INF), ([f(-1.0), 0, 0], NAN), ([INF, 0, 0], INF)],
    );
    // Revolutions: sin(2*pi*x).
    check32(
        "v_sin_f32 v0, v1",
        HIP,
        &[
            ([f(0.25), 0, 0], f(1.0)),
            ([f(-0.25), 0, 0], f(-1.0)),
            ([f(3.0), 0, 0], 0),
            ([INF, 0, 0], NAN),
            ([NEG_ZERO, 0, 0], NEG_ZERO),
            ([0xff7f_ffff, 0, 0], 0),
        ],
    );
    check32(
        "v_cos_f32 v0, v1",
        HIP,
        &[
            ([f(0.5), 0, 0], f(-1.0)),
            ([NEG_ZERO, 0, 0], f(1.0)),
            ([f(1.0), 0, 0], f(1.0)),
            ([0xff7f_ffff, 0, 0], f(1.0)),
        ],
    );
    check32("v_rcp_f16 v0, v1", HIP, &[([0xc000, 0, 0], 0xb800), ([0x7c00, 0, 0], 0)]);
    check32("v_sqrt_f16 v0, v1", HIP, &[([0x4400, 0, 0], 0x4000)]);
}

#[test]
fn frexp_and_ldexp() {
    check32(
        "v_frexp_mant_f32 v0, v1",
        HIP,
        &[([f(-12.0), 0, 0], f(-0.75)), ([INF, 0, 0], INF), ([DENORM, 0, 0], f(0.5))],
    );
    check32(
        "v_frexp_exp_i32_f32 v0, v1",
        HIP,
        &[([f(-12.0), 0, 0], 4), ([DENORM, 0, 0], -148i32 as u32), ([NAN, 0, 0], 0)],
    );
    check32(
        "v_ldexp_f32 v0, v1, v2",
        HIP,
        &[
            ([f(1.5), 3, 0], f(12.0)),
            ([f(1.0), -149i32 as u32, 0], DENORM),
            ([f(1.0), 128, 0], INF),
            ([f(3.0), -1000i32 as u32, 0], 0),
        ],
    );
}

/// The f32 division sequence clang-15 emits at -O2 for `a / b` on gfx90a (HIP's mode).
const DIV32: &str = "
    v_div_scale_f32 v4, s[4:5], v2, v2, v1
    v_rcp_f32_e32 v5, v4
    v_div_scale_f32 v6, vcc, v1, v2, v1
    v_fma_f32 v7, -v4, v5, 1.0
    v_fmac_f32_e32 v5, v7, v5
    v_mul_f32_e32 v7, v6, v5
    v_fma_f32 v8, -v4, v7, v6
    v_fmac_f32_e32 v7, v8, v5
    v_fma_f32 v4, -v4, v7, v6
    v_div_fmas_f32 v4, v4, v5, v7
    v_div_fixup_f32 v0, v4, v2, v1
";

#[test]
fn the_f32_division_sequence_divides_correctly() {
    let pairs: [(f32, f32); 16] = [
        (1.0, 3.0),
        (2.0, 7.0),
        (-10.0, 4.0),
        (1e-38, 3.0),  // a denormal quotient
        (1e-30, 1e10), // a quotient below the normal range
        (3e38, 1e-5),  // overflows to infinity
        (3e38, 3e-38), // overflows beyond what the scaling covers
        (1e30, 1e-10), // the exponent gap of 96
        (5.0, 1e-39),  // a denormal denominator
        (1.0, 0.0),
        (0.0, 0.0),
        (f32::INFINITY, 2.0),
        (7.0, f32::INFINITY),
        (f32::NAN, 1.0),
        (1.1754942e-38, 0.99),
        (123456.79, 0.001),
    ];
    let rows: Vec<[u32; 3]> = pairs.iter().map(|&(a, b)| [f(a), f(b), 0]).collect();
    let Some(got) = run32(DIV32, HIP, &rows) else {
        return;
    };
    for (&(a, b), g) in pairs.iter().zip(got) {
        let want = a / b;
        if want.is_nan() {
            assert!(f32::from_bits(g).is_nan(), "{a} / {b}: got {g:#x}");
        } else {
            assert_eq!(g, f(want), "{a} / {b}: got {} ({g:#x}) want {want}", f32::from_bits(g));
        }
    }
}

/// The f64 division sequence clang-15 emits at -O2.
const DIV64: &str = "
    v_div_scale_f64 v[8:9], s[6:7], v[4:5], v[4:5], v[2:3]
    v_rcp_f64_e32 v[10:11], v[8:9]
    v_div_scale_f64 v[12:13], vcc, v[2:3], v[4:5], v[2:3]
    v_fma_f64 v[14:15], -v[8:9], v[10:11], 1.0
    v_fmac_f64_e32 v[10:11], v[10:11], v[14:15]
    v_fma_f64 v[14:15], -v[8:9], v[10:11], 1.0
    v_fmac_f64_e32 v[10:11], v[10:11], v[14:15]
    v_mul_f64 v[14:15], v[12:13], v[10:11]
    v_fma_f64 v[8:9], -v[8:9], v[14:15], v[12:13]
    v_div_fmas_f64 v[8:9], v[8:9], v[10:11], v[14:15]
    v_div_fixup_f64 v[0:1], v[8:9], v[4:5], v[2:3]
";

#[test]
fn the_f64_division_sequence_divides_correctly() {
    let pairs: [(f64, f64); 11] = [
        (1.0, 3.0),
        (-22.0, 7.0),
        (1e-300, 1e10),
        (1e300, 1e-10),
        (4e-320, 3.0),
        (1.0, 0.0),
        (0.0, 0.0),
        (f64::INFINITY, 1.0),
        (1e308, 1e-5), // overflows to infinity
        (1e308, 1e-300),
        (0.1, 0.3),
    ];
    let rows: Vec<[f64; 3]> = pairs.iter().map(|&(a, b)| [a, b, 0.0]).collect();
    let Some(got) = run64(DIV64, HIP, &rows) else {
        return;
    };
    for (&(a, b), g) in pairs.iter().zip(got) {
        let want = a / b;
        if want.is_nan() {
            assert!(f64::from_bits(g).is_nan(), "{a} / {b}");
        } else {
            assert_eq!(g, want.to_bits(), "{a} / {b}: got {} want {want}", f64::from_bits(g));
        }
    }
}

#[test]
fn div_scale_sets_vcc_per_lane() {
    // Lane 0: ordinary; lane 1: a denormal quotient (numerator scaled, VCC set); lane 2: 0/x
    // gives NaN.
    let rows = [[f(1.0), f(3.0), 0], [f(1e-38), f(3.0), 0], [0, f(1.0), 0]];
    let Some((w, _)) = run("v_div_scale_f32 v0, vcc, v1, v2, v1", |w, _| {
        w.mode = HIP;
        for (l, r) in rows.iter().enumerate() {
            w.v[1][l] = r[0];
            w.v[2][l] = r[1];
        }
    }) else {
        return;
    };
    assert_eq!(w.vcc(), 0b010);
    assert_eq!(w.v[0][0], f(1.0));
    assert_eq!(w.v[0][1], f(1e-38 * 2f32.powi(64)));
    assert!(f32::from_bits(w.v[0][2]).is_nan());
}

#[test]
fn trig_preop_gives_2_over_pi_in_53_bit_pieces() {
    // The three pieces for a small argument sum to 2/pi; for a large one the pieces start
    // further into 2/pi.
    let Some((w, _)) = run(
        "v_trig_preop_f64 v[0:1], v[2:3], 0
         v_trig_preop_f64 v[4:5], v[2:3], 1
         v_trig_preop_f64 v[6:7], v[2:3], 2
         v_trig_preop_f64 v[8:9], v[10:11], 0",
        |w, _| {
            w.mode = HIP;
            let one = 1.0f64.to_bits();
            w.v[2][0] = one as u32;
            w.v[3][0] = (one >> 32) as u32;
            let big = 1e300f64.to_bits();
            w.v[10][0] = big as u32;
            w.v[11][0] = (big >> 32) as u32;
        },
    ) else {
        return;
    };
    let get = |r: usize| f64::from_bits(u64::from(w.v[r][0]) | u64::from(w.v[r + 1][0]) << 32);
    let (a, b, c) = (get(0), get(4), get(6));
    // The first 53 bits of 2/pi, truncated: f64's 2/pi (0x3fe45f306dc9c883) is them rounded up.
    assert_eq!(a.to_bits(), 0x3fe4_5f30_6dc9_c882);
    assert!(b < a * 2f64.powi(-52) && c < b * 2f64.powi(-52), "{a} {b} {c}");
    assert_eq!(a + b, std::f64::consts::FRAC_2_PI);
    // 1e300 has exponent 2019: 53 bits from 942 bits in, each weighing 2^-(bit+1) * 2^128.
    let d = get(8);
    assert_eq!(d, super::trig_preop(1e300f64.to_bits(), 0));
    assert!(d < 2f64.powi(-942 + 128) && d > 2f64.powi(-942 + 128 - 8), "{d}");
}

#[test]
fn f64_arithmetic_matches_the_host() {
    let vals = [1.0, 1.0 + f64::EPSILON, -0.0, 3.5e-310, f64::INFINITY, -2.5, 1e308, 0.1];
    let mut rows = Vec::new();
    for &a in &vals {
        for &b in &vals {
            rows.push([a, b, 0.3]);
        }
    }
    for (src, op) in [
        ("v_add_f64 v[0:1], v[2:3], v[4:5]", (|a, b, _| a + b) as fn(f64, f64, f64) -> f64),
        ("v_mul_f64 v[0:1], v[2:3], v[4:5]", |a, b, _| a * b),
        ("v_fma_f64 v[0:1], v[2:3], v[4:5], v[6:7]", |a, b, c| a.mul_add(b, c)),
        ("v_max_f64 v[0:1], v[2:3], v[4:5]", |a, b, _| {
            if a == b && a == 0.0 {
                if a.is_sign_positive() {
                    a
                } else {
                    b
                }
            } else {
                a.max(b)
            }
        }),
    ] {
        let Some(got) = run64(src, HIP, &rows) else {
            return;
        };
        for (r, g) in rows.iter().zip(got) {
            let want = op(r[0], r[1], r[2]);
            if want.is_nan() {
                assert!(f64::from_bits(g).is_nan(), "{src} {r:?}");
            } else {
                assert_eq!(g, want.to_bits(), "{src} {r:?}: got {}", f64::from_bits(g));
            }
        }
    }
    // Flushed f64 denormals (high pair 0).
    let Some(got) = run64("v_add_f64 v[0:1], v[2:3], v[4:5]", 0x330, &[[3.5e-310, 0.0, 0.0]]) else {
        return;
    };
    assert_eq!(got, [0]);
}

#[test]
fn f64_unary_operations() {
    let tiny = f64::from_bits(1);
    let rows = [
        [2.5, 0.0, 0.0],
        [-2.5, 0.0, 0.0],
        [-1e-300, 0.0, 0.0],
        [tiny, 0.0, 0.0],
        [f64::INFINITY, 0.0, 0.0],
        [-0.0, 0.0, 0.0],
    ];
    type Op = fn(f64) -> f64;
    let ops: [(&str, Op); 8] = [
        ("v_trunc_f64 v[0:1], v[2:3]", f64::trunc),
        ("v_ceil_f64 v[0:1], v[2:3]", f64::ceil),
        ("v_floor_f64 v[0:1], v[2:3]", f64::floor),
        ("v_rndne_f64 v[0:1], v[2:3]", f64::round_ties_even),
        // -1e-300 - floor = 1 - 1e-300 rounds to 1: clamped below it.
        ("v_fract_f64 v[0:1], v[2:3]", |x| {
            if x.is_infinite() {
                f64::NAN
            } else {
                (x - x.floor()).min(1.0 - f64::EPSILON / 2.0)
            }
        }),
        ("v_sqrt_f64 v[0:1], v[2:3]", f64::sqrt),
        ("v_rcp_f64 v[0:1], v[2:3]", |x| 1.0 / x),
        ("v_frexp_mant_f64 v[0:1], v[2:3]", |x| {
            if x.is_infinite() || x == 0.0 {
                return x;
            }
            let e = x.abs().log2().floor() as i32 + 1;
            x * 2f64.powi(-e / 2) * 2f64.powi(e / 2 - e)
        }),
    ];
    for (src, op) in ops {
        let Some(got) = run64(src, HIP, &rows) else {
            return;
        };
        for (r, g) in rows.iter().zip(got) {
            let want = op(r[0]);
            assert!(
                g == want.to_bits() || want.is_nan() && f64::from_bits(g).is_nan(),
                "{src} {:e}: got {:e} want {want:e}",
                r[0],
                f64::from_bits(g)
            );
        }
    }
    let Some((w, _)) = run("v_frexp_exp_i32_f64 v0, v[2:3]\nv_ldexp_f64 v[4:5], v[2:3], v6", |w, _| {
        w.mode = HIP;
        w.v[6][0] = -1075i32 as u32;
        let x = 12.0f64.to_bits();
        w.v[2][0] = x as u32;
        w.v[3][0] = (x >> 32) as u32;
    }) else {
        return;
    };
    assert_eq!(w.v[0][0], 4);
    // 12 * 2^-1075 = 1.5 * 2^-1072: 3 * 2^-1073, a denormal of exact value 6 ulps.
    assert_eq!(u64::from(w.v[4][0]) | u64::from(w.v[5][0]) << 32, 6);
}

#[test]
fn f16_unary_operations() {
    let h = |x: f32| u32::from(crate::fp::f32_to_f16(x));
    check32("v_fract_f16 v0, v1", HIP, &[([h(-1.25), 0, 0], h(0.75)), ([0x8001, 0, 0], 0x3bff)]);
    check32("v_rndne_f16 v0, v1", HIP, &[([h(2.5), 0, 0], h(2.0)), ([h(-3.5), 0, 0], h(-4.0))]);
    check32("v_exp_f16 v0, v1", HIP, &[([h(-2.0), 0, 0], h(0.25)), ([h(16.0), 0, 0], 0x7c00)]);
    check32("v_log_f16 v0, v1", HIP, &[([h(0.125), 0, 0], h(-3.0)), ([0, 0, 0], 0xfc00)]);
    check32("v_sin_f16 v0, v1", HIP, &[([h(0.75), 0, 0], h(-1.0))]);
    check32("v_rsq_f16 v0, v1", HIP, &[([h(4.0), 0, 0], h(0.5)), ([0x8000, 0, 0], 0xfc00)]);
    check32("v_frexp_mant_f16 v0, v1", HIP, &[([h(-12.0), 0, 0], h(-0.75))]);
    // A denormal's exponent is its true one (2^-24 = 0.5 * 2^-23), as C's frexp gives.
    check32("v_frexp_exp_i16_f16 v0, v1", HIP, &[([h(-12.0), 0, 0], 4), ([0x0001, 0, 0], 0xffe9)]);
    // -0.5 * 32767 = -16383.5: ties to even.
    check32("v_cvt_norm_i16_f16 v0, v1", HIP, &[([h(-0.5), 0, 0], 0xc000), ([0x7e00, 0, 0], 0)]);
    check32("v_cvt_norm_u16_f16 v0, v1", HIP, &[([h(0.5), 0, 0], 0x8000), ([h(-1.0), 0, 0], 0)]);
    check32("v_cvt_pknorm_u16_f16 v0, v1, v2", HIP, &[([h(1.0), h(0.25), 0], 0x4000_ffff)]);
    check32("v_cvt_f16_u16 v0, v1", HIP, &[([65535, 0, 0], 0x7c00), ([2049, 0, 0], h(2048.0))]);
    check32("v_cvt_u16_f16 v0, v1", HIP, &[([h(-3.0), 0, 0], 0), ([h(65504.0), 0, 0], 65504)]);
}

#[test]
fn f64_conversions() {
    let Some(got) = run64("v_cvt_f64_f32 v[0:1], v2", HIP, &[[f64::from_bits(u64::from(DENORM)), 0.0, 0.0]]) else {
        return;
    };
    assert_eq!(got, [f64::from(f32::from_bits(DENORM)).to_bits()]);
    let Some((w, _)) = run("v_cvt_f32_f64 v0, v[2:3]\nv_cvt_i32_f64 v1, v[4:5]\nv_cvt_u32_f64 v6, v[4:5]", |w, _| {
        w.mode = HIP;
        let (a, b) = ((1.0f64 + 2f64.powi(-24)).to_bits(), (-1e10f64).to_bits());
        w.v[2][0] = a as u32;
        w.v[3][0] = (a >> 32) as u32;
        w.v[4][0] = b as u32;
        w.v[5][0] = (b >> 32) as u32;
    }) else {
        return;
    };
    assert_eq!(w.v[0][0], f(1.0)); // a tie, to even
    assert_eq!(w.v[1][0], i32::MIN as u32);
    assert_eq!(w.v[6][0], 0);
}

#[test]
fn f16_arithmetic_rounds_once_to_f16() {
    let h = |x: f32| u32::from(crate::fp::f32_to_f16(x));
    // The sum 1 + 2^-11 is a tie: to even 1.0; 2049 * 2049 overflows 11 bits.
    check32("v_add_f16 v0, v1, v2", HIP, &[([0x3c00, 0x1000, 0], 0x3c00), ([0x7bff, 0x7bff, 0], 0x7c00)]);
    check32("v_mul_f16 v0, v1, v2", HIP, &[([h(3.0), h(-0.5), 0], h(-1.5)), ([0x0001, h(0.5), 0], 0)]);
    // fma vs mad in f16: (1 + 2^-10)^2 - 1 = 2^-9 + 2^-20, mad rounds the product first.
    let a = 0x3c01;
    check32("v_fma_f16 v0, v1, v2, v3", HIP, &[([a, a, h(-1.0)], h(1.0 / 512.0 + 1.0 / 1_048_576.0))]);
    check32("v_mad_f16 v0, v1, v2, v3", HIP, &[([a, a, h(-1.0)], h(1.0 / 512.0))]);
    // op_sel: the high halves in, the result to the high half (the low half kept).
    let Some((w, _)) = run("v_fma_f16 v0, v1, v2, v3 op_sel:[1,1,0,1]", |w, _| {
        w.mode = HIP;
        w.v[0][0] = 0x1234;
        w.v[1][0] = h(2.0) << 16;
        w.v[2][0] = h(3.0) << 16;
        w.v[3][0] = h(1.0);
    }) else {
        return;
    };
    assert_eq!(w.v[0][0], h(7.0) << 16 | 0x1234);
    // Which 16-bit results keep the destination's high half on gfx9 (v0 = 0xdead0000 first):
    // the op_sel additions and v_mac/madak keep it, the VI forms and VOP1/VOP2 arithmetic
    // zero it.
    for (src, want) in [
        ("v_fma_f16 v0, v1, v2, v3", 0xdead_0000 | h(7.0)),
        ("v_mad_f16 v0, v1, v2, v3", 0xdead_0000 | h(7.0)),
        ("v_fma_legacy_f16 v0, v1, v2, v3", h(7.0)),
        ("v_mad_legacy_f16 v0, v1, v2, v3", h(7.0)),
        ("v_max3_f16 v0, v1, v2, v3", 0xdead_0000 | h(3.0)),
        ("v_madak_f16 v0, v1, v2, 0x3c00", 0xdead_0000 | h(7.0)),
        ("v_div_fixup_legacy_f16 v0, v3, v2, v1", h(1.0)), // the quotient v3 with its sign
        ("v_add_f16 v0, v1, v2", h(5.0)),
    ] {
        let Some((w, _)) = run(src, |w, _| {
            w.mode = HIP;
            w.v[0][0] = 0xdead_0000;
            w.v[1][0] = h(2.0);
            w.v[2][0] = h(3.0);
            w.v[3][0] = h(1.0);
        }) else {
            return;
        };
        assert_eq!(w.v[0][0], want, "{src}: got {:#x}", w.v[0][0]);
    }
    check32("v_max_f16 v0, v1, v2", HIP, &[([0x7d00, h(1.0), 0], 0x7f00), ([0x7e00, h(1.0), 0], h(1.0))]);
    check32("v_med3_f16 v0, v1, v2, v3", HIP, &[([h(5.0), h(-1.0), h(2.0)], h(2.0))]);
    check32("v_ldexp_f16 v0, v1, v2", HIP, &[([h(1.5), 0xfffe, 0], h(0.375))]);
    check32(
        "v_div_fixup_f16 v0, v1, v2, v3",
        HIP,
        &[([h(0.5), 0, h(1.0)], 0x7c00), ([h(0.5), h(-2.0), h(1.0)], h(-0.5))],
    );
}

#[test]
fn exec_masked_lanes_keep_their_values() {
    let Some((w, _)) = run(
        "v_add_f32 v0, v1, v2\nv_fma_f64 v[4:5], v[6:7], v[6:7], v[6:7]\nv_div_scale_f32 v8, vcc, v1, v1, v1",
        |w, _| {
            w.mode = HIP;
            w.set_exec(0b0101);
            for l in 0..4 {
                w.v[0][l] = 0xdead;
                w.v[1][l] = f(1.0);
                w.v[2][l] = f(2.0);
                w.v[4][l] = 0xbeef;
                w.v[5][l] = 0xbeef;
                w.v[8][l] = 0xf00d;
            }
        },
    ) else {
        return;
    };
    assert_eq!(&w.v[0][..4], &[f(3.0), 0xdead, f(3.0), 0xdead]);
    assert_eq!(&w.v[4][..4], &[0, 0xbeef, 0, 0xbeef]);
    assert_eq!(&w.v[5][..4], &[0, 0xbeef, 0, 0xbeef]);
    assert_eq!(&w.v[8][..4], &[f(1.0), 0xf00d, f(1.0), 0xf00d]);
}

/// xorshift64: deterministic operands for the randomized comparisons.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

#[test]
fn division_sequences_match_the_host_on_random_operands() {
    let mut next = rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..4 {
        let pairs: Vec<(f32, f32)> = (0..64)
            .map(|_| {
                let r = next();
                // Exponents spread over the whole range, denormals and zeros included.
                (f32::from_bits(r as u32 & 0x7fff_ffff ^ (r as u32 & 0x8000_0000)), f32::from_bits((r >> 32) as u32))
            })
            .filter(|(a, b)| !a.is_nan() && !b.is_nan())
            .collect();
        let rows: Vec<[u32; 3]> = pairs.iter().map(|&(a, b)| [f(a), f(b), 0]).collect();
        let Some(got) = run32(DIV32, HIP, &rows) else {
            return;
        };
        for (&(a, b), g) in pairs.iter().zip(got) {
            let want = a / b;
            assert!(
                g == f(want) || want.is_nan() && f32::from_bits(g).is_nan(),
                "{a:e} / {b:e}: got {:e}",
                f32::from_bits(g)
            );
        }
    }
    for _ in 0..2 {
        let pairs: Vec<[f64; 3]> = (0..64)
            .map(|_| [f64::from_bits(next()), f64::from_bits(next()), 0.0])
            .filter(|r| !r[0].is_nan() && !r[1].is_nan())
            .collect();
        let Some(got) = run64(DIV64, HIP, &pairs) else {
            return;
        };
        for (r, g) in pairs.iter().zip(got) {
            let want = r[0] / r[1];
            assert!(
                g == want.to_bits() || want.is_nan() && f64::from_bits(g).is_nan(),
                "{:e} / {:e}: got {:e}",
                r[0],
                r[1],
                f64::from_bits(g)
            );
        }
    }
}

#[test]
fn f16_arithmetic_matches_rounding_through_f32() {
    // Sums and products of f16 values rounded through f32 then to f16 are correctly rounded
    // (f32 has more than twice f16's precision): an independent path to the same bits.
    let mut next = rng(0x2545_f491_4f6c_dd1d);
    let h = |x: u32| crate::fp::f16_to_f32(x as u16);
    let to = |x: f32| u32::from(crate::fp::f32_to_f16(x));
    let nan = |x: u32| x & 0x7c00 == 0x7c00 && x & 0x3ff != 0;
    for (src, op) in [
        ("v_add_f16 v0, v1, v2", (|a, b| a + b) as fn(f32, f32) -> f32),
        ("v_mul_f16 v0, v1, v2", |a, b| a * b),
        ("v_sub_f16 v0, v1, v2", |a, b| a - b),
    ] {
        let rows: Vec<[u32; 3]> = (0..64)
            .map(|_| {
                let r = next();
                [r as u32 & 0xffff, (r >> 16) as u32 & 0xffff, 0]
            })
            .filter(|r| !nan(r[0]) && !nan(r[1]))
            .collect();
        let Some(got) = run32(src, HIP, &rows) else {
            return;
        };
        for (r, g) in rows.iter().zip(got) {
            let want = to(op(h(r[0]), h(r[1])));
            assert!(g == want || nan(want) && nan(g), "{src} {:#x} {:#x}: got {g:#x} want {want:#x}", r[0], r[1]);
        }
    }
}

#[test]
fn dpp_moves_src0_of_float_ops() {
    // quad_perm [1,0,3,2] swaps neighbours: lane l adds lane l^1's v1 to its own v2, as wave
    // reductions do.
    let rows: Vec<[u32; 3]> = (0..8).map(|l| [f(l as f32), f(100.0), 0]).collect();
    let Some(got) = run32("v_add_f32_dpp v0, v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf", HIP, &rows) else {
        return;
    };
    let want: Vec<u32> = (0..8).map(|l| f(100.0 + (l ^ 1) as f32)).collect();
    assert_eq!(got, want);
}

/// An f32 operand of any class: NaNs (quiet and signalling, payloads, either sign),
/// infinities, zeros, denormals, the extremes, and random bits.
fn any_f32(r: u64) -> u32 {
    const SPECIAL: [u32; 14] = [
        NAN,
        SNAN,
        0xffc0_0000,
        0xff80_0001,
        0x7fa5_5a5a,
        0xffff_ffff,
        INF,
        NEG_INF,
        0,
        NEG_ZERO,
        DENORM,
        0x807f_ffff,
        0x7f7f_ffff,
        0x0080_0000,
    ];
    let hi = (r >> 32) as u32;
    match r % 5 {
        0 => SPECIAL[(r >> 8) as usize % SPECIAL.len()],
        1 => hi & 0x807f_ffff,
        // Near 1 in magnitude, where sums cancel and round.
        2 => (hi & 0x81ff_ffff) | 0x3e00_0000,
        _ => hi,
    }
}

/// The f32 fast path (float/fast.rs) gives the slow path's bits (any quiet NaN where both give
/// a NaN): every fast-path instruction,
/// with source modifiers, SGPR, constant and DPP sources, on random operands of every class
/// under random EXEC masks, in every f32 denormal mode.
#[test]
fn the_f32_fast_path_gives_the_slow_paths_bits() {
    use super::fast::SLOW_ONLY;
    use crate::isa::Target::{self, Gfx1030W64, Gfx90a};
    use crate::testing::{assemble_for, ram, run_wave_for, wave_for};
    let programs: [(Target, &str); 14] = [
        (Gfx90a, "v_add_f32 v0, v1, v2"),
        (Gfx90a, "v_sub_f32 v0, v1, v2"),
        (Gfx90a, "v_subrev_f32 v0, v1, v2"),
        (Gfx90a, "v_mul_f32 v0, v1, v2"),
        (Gfx90a, "v_fma_f32 v0, v1, v2, v3"),
        (Gfx90a, "v_fmac_f32 v0, v1, v2"),
        (Gfx90a, "v_add_f32_e64 v0, -v1, |v2|"),
        (Gfx90a, "v_fma_f32 v0, -|v1|, s0, -v3"),
        (Gfx90a, "v_mul_f32 v0, 0.5, v1"),
        (Gfx90a, "v_add_f32_dpp v0, v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf"),
        (Gfx90a, "v_mul_f32_e64 v0, v1, v2 clamp"),
        (Gfx90a, "v_fmac_f32_e64 v0, v1, -v2"),
        (Gfx1030W64, "v_fmamk_f32 v0, v1, 0xc0490fdb, v2"),
        (Gfx1030W64, "v_fmaak_f32 v0, v1, v2, 0x00400001"),
    ];
    let mut next = rng(0x2545_f491_4f6c_dd1d);
    for (target, src) in programs {
        let Some(code) = assemble_for(target, &format!("{src}\ns_endpgm\n")) else {
            return;
        };
        for round in 0..300 {
            // HIP's mode and others: f32 denormals kept, flushed in and out, in only, out only.
            let mode = [HIP, 0x030, 0x1b0, 0x3c0, FLUSH, 0x310, 0x320][round % 7];
            let mut w = wave_for(target);
            w.mode = mode;
            let exec = next();
            w.set_exec(if round % 5 == 0 { u64::MAX } else { exec });
            w.s[0] = any_f32(next());
            for l in 0..64 {
                for r in 0..4 {
                    w.v[r][l] = any_f32(next());
                }
            }
            let run = |slow: bool| {
                let mut w = w.clone();
                let mut ram = ram(&code);
                SLOW_ONLY.set(slow);
                let r = run_wave_for(target, &mut w, &mut ram, &mut []);
                SLOW_ONLY.set(false);
                r.unwrap_or_else(|e| panic!("{src}: {e}"));
                w.v[0]
            };
            let (fast, slow) = (run(false), run(true));
            // Which input NaN's payload a NaN result carries is the host's choice (Rust leaves it
            // to the compiler, and it differs between builds of the slow path itself; the
            // hardware's rule is not modelled): NaN results must both be quiet NaNs.
            let nan = |b: u32| b & 0x7fff_ffff > 0x7f80_0000;
            for l in 0..64 {
                if fast[l] != slow[l] && nan(fast[l]) && nan(slow[l]) {
                    assert!(fast[l] & slow[l] & 0x40_0000 != 0, "{src}: {:#x} {:#x} not quiet", fast[l], slow[l]);
                    continue;
                }
                assert_eq!(
                    fast[l], slow[l],
                    "{src} mode {mode:#x} lane {l}: v1 {:#x} v2 {:#x} v3 {:#x} s0 {:#x} v0 was {:#x}",
                    w.v[1][l], w.v[2][l], w.v[3][l], w.s[0], w.v[0][l]
                );
            }
        }
    }
}
