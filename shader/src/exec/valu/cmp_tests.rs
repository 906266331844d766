//! Tests of the VALU compares: every condition of every type, NaN/inf/-0, the class bits,
//! v_cmpx's EXEC write, destinations and disabled lanes.

use crate::testing::run;
use crate::wave::{Wave, LANES};

/// Runs `src` after `setup` and returns the wave (`None` without llvm-mc-15).
fn go(src: &str, setup: impl FnOnce(&mut Wave)) -> Option<Wave> {
    run(src, |w, _| setup(w)).map(|(w, _)| w)
}

/// The float conditions in opcode order. The low four bits of a VOPC float opcode are the
/// outcomes it accepts (MI200 ISA guide, VOPC opcode table): bit 0 less, 1 equal, 2 greater, 3
/// unordered; the tests take their expectations from that encoding.
const FLOAT_CONDS: [&str; 16] =
    ["f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "tru"];

/// Outcome of a pair: 0 less, 1 equal, 2 greater, 3 unordered.
fn float_pairs(ty: &str) -> Vec<(u64, u64, u32)> {
    let (one, two, nzero, inf, ninf, nan, snan) = match ty {
        "f16" => (0x3c00, 0x4000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01),
        "f32" => (0x3f80_0000, 0x4000_0000, 0x8000_0000, 0x7f80_0000, 0xff80_0000, 0x7fc0_0000, 0x7f80_0001),
        _ => (
            0x3ff0_0000_0000_0000,
            0x4000_0000_0000_0000,
            0x8000_0000_0000_0000,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x7ff8_0000_0000_0000,
            0x7ff0_0000_0000_0001,
        ),
    };
    vec![
        (one, two, 0),
        (two, two, 1),
        (two, one, 2),
        (nzero, 0, 1),
        (0, nzero, 1),
        (inf, two, 2),
        (ninf, inf, 0),
        (inf, inf, 1),
        (nan, one, 3),
        (one, nan, 3),
        (nan, nan, 3),
        (snan, snan, 3),
        (ninf, nzero, 0),
    ]
}

/// Runs `v_cmp_{c}_{ty}_e64 s[10+2k:11+2k]` for every condition `c` of `conds` (k its index),
/// lane `l` comparing `pairs[l]`, and checks every lane the pairs fill: condition k accepts
/// outcome o when bit o of k is set. Returns the wave (`None` without llvm-mc-15).
fn conditions(ty: &str, conds: &[&str], pairs: &[(u64, u64, u32)]) -> Option<Wave> {
    let (a, b) = if ty.ends_with("64") { ("v[0:1]", "v[2:3]") } else { ("v0", "v2") };
    let src: String = conds
        .iter()
        .enumerate()
        .map(|(k, c)| format!("v_cmp_{c}_{ty}_e64 s[{}:{}], {a}, {b}\n", 10 + 2 * k, 11 + 2 * k))
        .collect();
    let w = go(&src, |w| {
        for (l, p) in pairs.iter().enumerate() {
            w.v[0][l] = p.0 as u32;
            w.v[1][l] = (p.0 >> 32) as u32;
            w.v[2][l] = p.1 as u32;
            w.v[3][l] = (p.1 >> 32) as u32;
        }
    })?;
    for (k, c) in conds.iter().enumerate() {
        let got = w.sreg64(10 + 2 * k as u8);
        for (l, p) in pairs.iter().enumerate() {
            assert_eq!(got >> l & 1 != 0, k >> p.2 & 1 != 0, "v_cmp_{c}_{ty} {:#x} {:#x}", p.0, p.1);
        }
    }
    Some(w)
}

fn float_conditions(ty: &str) {
    let Some(w) = conditions(ty, &FLOAT_CONDS, &float_pairs(ty)) else {
        return;
    };
    // Lanes past the table compare zero with zero: equal.
    for (k, c) in FLOAT_CONDS.iter().enumerate() {
        assert_eq!(w.sreg64(10 + 2 * k as u8) >> 63 & 1 != 0, k & 2 != 0, "v_cmp_{c}_{ty} 0 0");
    }
}

#[test]
fn float_compares_f16() {
    float_conditions("f16");
}

#[test]
fn float_compares_f32() {
    float_conditions("f32");
}

#[test]
fn float_compares_f64() {
    float_conditions("f64");
}

#[test]
fn float_compare_source_modifiers() {
    // |-2| > 1 and -(1) < 0.
    let Some(w) = go("v_cmp_gt_f32_e64 s[4:5], |v0|, v1\nv_cmp_lt_f32_e64 s[6:7], -v1, 0", |w| {
        w.v[0][0] = (-2.0f32).to_bits();
        w.v[1][0] = 1.0f32.to_bits();
        w.set_exec(1);
    }) else {
        return;
    };
    assert_eq!((w.sreg64(4), w.sreg64(6)), (1, 1));
}

/// The integer conditions in opcode order (F, LT, EQ, LE, GT, NE, GE, T): like the float ones,
/// bit 0 less, 1 equal, 2 greater.
const INT_CONDS: [&str; 8] = ["f", "lt", "eq", "le", "gt", "ne", "ge", "t"];

fn int_conditions(ty: &str, pairs: &[(u64, u64, u32)]) {
    conditions(ty, &INT_CONDS, pairs);
}

#[test]
fn integer_compares_of_every_width_and_sign() {
    // The high half of a 16-bit source is ignored.
    int_conditions("u16", &[(1, 2, 0), (0xffff, 1, 2), (0x1_0005, 5, 1), (0x8000, 0x7fff, 2)]);
    int_conditions("i16", &[(1, 2, 0), (0xffff, 1, 0), (0x1_0005, 5, 1), (0x8000, 0x7fff, 0)]);
    int_conditions("u32", &[(1, 2, 0), (u32::MAX.into(), 1, 2), (7, 7, 1), (0x8000_0000, 0x7fff_ffff, 2)]);
    int_conditions("i32", &[(1, 2, 0), (u32::MAX.into(), 1, 0), (7, 7, 1), (0x8000_0000, 0x7fff_ffff, 0)]);
    let big = 1u64 << 63;
    int_conditions("u64", &[(1 << 32, 1, 2), (u64::MAX, 0, 2), (big, big, 1), (5, 1 << 40, 0)]);
    int_conditions("i64", &[(1 << 32, 1, 2), (u64::MAX, 0, 0), (big, big, 1), (big, big - 1, 0)]);
}

#[test]
fn e32_writes_vcc_and_disabled_lanes_write_zero() {
    let Some(w) = go("v_cmp_lt_u32 vcc, v0, v1", |w| {
        for l in 0..LANES {
            w.v[0][l] = l as u32;
            w.v[1][l] = 10;
        }
        w.set_vcc(u64::MAX);
        w.set_exec(0xffff_0000_0000_00f0);
    }) else {
        return;
    };
    assert_eq!(w.vcc(), 0xf0);
}

#[test]
fn inline_constant_sources() {
    // src0 may be a constant; a 64-bit compare sign-extends an inline integer.
    let Some(w) = go("v_cmp_eq_u64 vcc, -1, v[0:1]\nv_cmp_gt_i32_e64 s[4:5], 5, v2", |w| {
        w.v[0][0] = u32::MAX;
        w.v[1][0] = u32::MAX;
        w.v[0][1] = u32::MAX;
        w.v[2][0] = 4;
        w.v[2][1] = 5;
        w.set_exec(0b11);
    }) else {
        return;
    };
    assert_eq!((w.vcc(), w.sreg64(4)), (0b01, 0b01));
}

#[test]
fn cmpx_writes_exec_and_the_mask_destination() {
    let src = "
        v_cmpx_gt_u32 vcc, v0, 3
        v_mov_b32 v5, 1
        v_cmpx_ne_u32_e64 s[4:5], v0, 6
        v_mov_b32 v6, 1
    ";
    let Some(w) = go(src, |w| {
        for l in 0..LANES {
            w.v[0][l] = l as u32;
        }
        w.set_exec(0xff);
    }) else {
        return;
    };
    assert_eq!(w.vcc(), 0xf0);
    assert_eq!(w.sreg64(4), 0xb0);
    assert_eq!(w.exec(), 0xb0);
    let v5: Vec<u32> = w.v[5][..8].to_vec();
    let v6: Vec<u32> = w.v[6][..8].to_vec();
    assert_eq!(v5, [0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(v6, [0, 0, 0, 0, 1, 1, 0, 1]);
}

#[test]
fn cmpx_class_and_float() {
    let Some(w) = go("v_cmpx_u_f32 vcc, v0, v0", |w| {
        w.v[0][1] = 0x7fc0_0000;
        w.v[0][2] = 0xff80_0001;
        w.set_exec(0b0111);
    }) else {
        return;
    };
    assert_eq!((w.exec(), w.vcc()), (0b110, 0b110));
}

/// Values of each class (the bit v_cmp_class tests), as (bits, class).
fn class_values(ty: &str) -> Vec<(u64, u32)> {
    match ty {
        "f16" => vec![
            (0x7c01, 0),
            (0xfdff, 0),
            (0x7e00, 1),
            (0xfe00, 1),
            (0xfc00, 2),
            (0xbc00, 3),
            (0x8400, 3),
            (0x8001, 4),
            (0x83ff, 4),
            (0x8000, 5),
            (0x0000, 6),
            (0x0001, 7),
            (0x3c00, 8),
            (0x7bff, 8),
            (0x7c00, 9),
        ],
        "f32" => vec![
            (0x7f80_0001, 0),
            (0xffbf_ffff, 0),
            (0x7fc0_0000, 1),
            (0xffc0_0001, 1),
            (0xff80_0000, 2),
            (0xbf80_0000, 3),
            (0x8080_0000, 3),
            (0x8000_0001, 4),
            (0x807f_ffff, 4),
            (0x8000_0000, 5),
            (0, 6),
            (0x007f_ffff, 7),
            (0x0080_0000, 8),
            (0x7f7f_ffff, 8),
            (0x7f80_0000, 9),
        ],
        _ => vec![
            (0x7ff0_0000_0000_0001, 0),
            (0x7ff8_0000_0000_0000, 1),
            (0xfff0_0000_0000_0000, 2),
            (0xbff0_0000_0000_0000, 3),
            (0x8000_0000_0000_0001, 4),
            (0x8000_0000_0000_0000, 5),
            (0, 6),
            (0x000f_ffff_ffff_ffff, 7),
            (0x0010_0000_0000_0000, 8),
            (0x7ff0_0000_0000_0000, 9),
        ],
    }
}

fn class_bits(ty: &str) {
    let vals = class_values(ty);
    let a = if ty == "f64" { "v[0:1]" } else { "v0" };
    let src = format!("v_cmp_class_{ty}_e64 s[10:11], {a}, v2\nv_cmp_class_{ty}_e64 s[12:13], {a}, v3");
    let Some(w) = go(&src, |w| {
        for (l, (v, c)) in vals.iter().enumerate() {
            w.v[0][l] = *v as u32;
            w.v[1][l] = (*v >> 32) as u32;
            w.v[2][l] = 1 << c;
            w.v[3][l] = 0x3ff & !(1 << c);
        }
        w.set_exec((1 << vals.len()) - 1);
    }) else {
        return;
    };
    let all = (1u64 << vals.len()) - 1;
    assert_eq!(w.sreg64(10), all, "{ty}: each value is in its class");
    assert_eq!(w.sreg64(12), 0, "{ty}: and in no other");
}

#[test]
fn class_f16() {
    class_bits("f16");
}

#[test]
fn class_f32() {
    class_bits("f32");
}

#[test]
fn class_f64() {
    class_bits("f64");
}

#[test]
fn sdwa_compare_with_a_scalar_destination_and_selects() {
    // Bytes 1 of v0 against the low words of v1, sign-extended: -1 == -1 in lane 0.
    let src = "v_cmp_eq_i32_sdwa s[4:5], sext(v0), sext(v1) src0_sel:BYTE_1 src1_sel:WORD_0";
    let Some(w) = go(src, |w| {
        w.v[0][0] = 0x0000_ff00;
        w.v[1][0] = 0x1234_ffff;
        w.v[0][1] = 0x0000_0100;
        w.v[1][1] = 0x0000_0001;
        w.v[0][2] = 0x0000_ff00;
        w.v[1][2] = 0x0000_00ff;
        w.set_vcc(0);
        w.set_exec(0b111);
    }) else {
        return;
    };
    assert_eq!(w.sreg64(4), 0b011);
    assert_eq!(w.vcc(), 0, "the SDWA sdst replaces VCC");
}
