//! Per-instruction tests of the integer VALU operations: each table row is one lane, with its
//! sources in v0, v1, v2 and the expected result in v3.

use crate::testing::run;
use crate::wave::{Wave, LANES, VCC};

/// Runs `src` with row `l` of `rows` in v0..v2 of lane `l` and v3 = 0xdead_beef, returning
/// the wave (`None` without llvm-mc-15).
fn lanes(src: &str, rows: &[[u32; 3]], setup: impl FnOnce(&mut Wave)) -> Option<Wave> {
    assert!(rows.len() <= LANES);
    let (w, _) = run(src, |w, _| {
        for (l, r) in rows.iter().enumerate() {
            for (k, v) in r.iter().enumerate() {
                w.v[k][l] = *v;
            }
            w.v[3][l] = 0xdead_beef;
        }
        setup(w);
    })?;
    Some(w)
}

/// Checks `src` (writing v3 from v0..v2) against `cases`: (src0, src1, src2, expected v3).
fn table(src: &str, cases: &[(u32, u32, u32, u32)]) {
    let rows: Vec<[u32; 3]> = cases.iter().map(|c| [c.0, c.1, c.2]).collect();
    let Some(w) = lanes(src, &rows, |_| {}) else { return };
    for (l, c) in cases.iter().enumerate() {
        assert_eq!(w.v[3][l], c.3, "`{src}` lane {l}: sources {:#x} {:#x} {:#x}", c.0, c.1, c.2);
    }
}

#[test]
fn add_sub_u32_wrap_and_clamp_saturates() {
    let m = u32::MAX;
    table("v_add_u32 v3, v0, v1", &[(1, 2, 0, 3), (m, 1, 0, 0), (m, m, 0, m - 1)]);
    table("v_add_u32_e64 v3, v0, v1 clamp", &[(1, 2, 0, 3), (m, 1, 0, m), (0x8000_0000, 0x8000_0000, 0, m)]);
    table("v_sub_u32 v3, v0, v1", &[(5, 3, 0, 2), (3, 5, 0, m - 1)]);
    table("v_sub_u32_e64 v3, v0, v1 clamp", &[(5, 3, 0, 2), (3, 5, 0, 0)]);
    table("v_subrev_u32 v3, v0, v1", &[(5, 3, 0, m - 1), (3, 5, 0, 2)]);
}

#[test]
fn add_sub_i32_clamp_saturates_signed() {
    let (max, min) = (i32::MAX as u32, i32::MIN as u32);
    table("v_add_i32 v3, v0, v1", &[(max, 1, 0, min), (-5i32 as u32, 3, 0, -2i32 as u32)]);
    table(
        "v_add_i32 v3, v0, v1 clamp",
        &[(max, 1, 0, max), (min, -1i32 as u32, 0, min), (7, -9i32 as u32, 0, -2i32 as u32)],
    );
    table("v_sub_i32 v3, v0, v1 clamp", &[(min, 1, 0, min), (max, -1i32 as u32, 0, max), (1, 2, 0, u32::MAX)]);
}

#[test]
fn add_co_writes_carry_and_zero_for_disabled_lanes() {
    let m = u32::MAX;
    let rows = [[m, 1, 0], [1, 2, 0], [m, m, 0], [0x8000_0000, 0x8000_0000, 0]];
    // Lane 3 would carry but is disabled: its carry bit is 0 and v3 keeps its value.
    let Some(w) = lanes("v_add_co_u32 v3, vcc, v0, v1", &rows, |w| {
        w.set_exec(0b0111);
        w.set_vcc(u64::MAX);
    }) else {
        return;
    };
    assert_eq!(w.vcc(), 0b101);
    assert_eq!(&w.v[3][..4], &[0, 3, m - 1, 0xdead_beef]);

    let Some(w) = lanes("v_sub_co_u32_e64 v3, s[4:5], v0, v1", &rows, |w| w.set_sreg64(4, u64::MAX)) else {
        return;
    };
    // Borrow where src1 > src0: lane 1 only.
    assert_eq!(w.sreg64(4), 0b0010);
    assert_eq!(&w.v[3][..4], &[m - 1, m, 0, 0]);

    let Some(w) = lanes("v_subrev_co_u32 v3, vcc, v0, v1", &rows, |_| {}) else { return };
    assert_eq!(w.vcc() & 0xf, 0b0001);
    assert_eq!(&w.v[3][..4], &[2, 1, 0, 0]);
}

#[test]
fn addc_subb_use_the_carry_in() {
    let m = u32::MAX;
    let rows = [[m, 0, 0], [m, 0, 0], [0, 0, 0], [0, 0, 0], [5, 5, 0]];
    let Some(w) = lanes("v_addc_co_u32 v3, vcc, v0, v1, vcc", &rows, |w| w.set_vcc(0b10110)) else {
        return;
    };
    assert_eq!(&w.v[3][..5], &[m, 0, 1, 0, 11]);
    assert_eq!(w.vcc() & 0x1f, 0b00010);

    // VOP3: carry-in from s[6:7], carry-out to s[8:9].
    let Some(w) = lanes("v_subb_co_u32_e64 v3, s[8:9], v0, v1, s[6:7]", &rows, |w| w.set_sreg64(6, 0b10110)) else {
        return;
    };
    assert_eq!(&w.v[3][..5], &[m, m - 1, m, 0, m]);
    assert_eq!(w.sreg64(8) & 0x1f, 0b10100);

    let Some(w) = lanes("v_subbrev_co_u32 v3, vcc, v0, v1, vcc", &rows, |w| w.set_vcc(0b00001)) else {
        return;
    };
    // 0 - 0xffffffff - 1 = 0 with a borrow.
    assert_eq!(&w.v[3][..5], &[0, 1, 0, 0, 0]);
    assert_eq!(w.vcc() & 0x1f, 0b00011);
}

#[test]
fn multiplies() {
    let m = u32::MAX;
    table("v_mul_lo_u32 v3, v0, v1", &[(0x1_0001, 0x1_0001, 0, 0x2_0001), (m, m, 0, 1)]);
    table("v_mul_hi_u32 v3, v0, v1", &[(m, m, 0, m - 1), (0x1_0000, 0x1_0000, 0, 1)]);
    table("v_mul_hi_i32 v3, v0, v1", &[(m, m, 0, 0), (m, 2, 0, m), (0x8000_0000, 0x8000_0000, 0, 0x4000_0000)]);
    // 24-bit: the high byte is ignored; i24 sign-extends bit 23.
    table("v_mul_u32_u24 v3, v0, v1", &[(0xff00_0002, 3, 0, 6), (0xff_ffff, 0xff_ffff, 0, 0xfe00_0001)]);
    table("v_mul_hi_u32_u24 v3, v0, v1", &[(0xff_ffff, 0xff_ffff, 0, 0xffff), (0x100_0000, 0x100_0000, 0, 0)]);
    table("v_mul_i32_i24 v3, v0, v1", &[(0xff_ffff, 5, 0, -5i32 as u32), (0x80_0000, 0x80_0000, 0, 0)]);
    table("v_mul_hi_i32_i24 v3, v0, v1", &[(0xff_ffff, 5, 0, m), (0x80_0000, 0x80_0000, 0, 0x4000)]);
    table("v_mad_u32_u24 v3, v0, v1, v2", &[(0x0100_0003, 4, 5, 17)]);
    table("v_mad_i32_i24 v3, v0, v1, v2", &[(0xff_fffe, 4, 5, -3i32 as u32)]);
}

#[test]
fn mad_u64_u32_carries_out() {
    let m = u32::MAX;
    // (src0, src1, src2 lo, src2 hi) -> result, carry.
    let cases: [(u32, u32, u64, u64, bool); 4] = [
        (2, 3, 4, 10, false),
        (m, m, u64::MAX, (u64::from(m) * u64::from(m)).wrapping_sub(1), true),
        (0, 0, u64::MAX, u64::MAX, false),
        (1, 1, u64::MAX, 0, true),
    ];
    let rows: Vec<[u32; 3]> = cases.iter().map(|c| [c.0, c.1, 0]).collect();
    let Some(w) = lanes("v_mad_u64_u32 v[4:5], s[10:11], v0, v1, v[6:7]", &rows, |w| {
        for (l, c) in cases.iter().enumerate() {
            w.v[6][l] = c.2 as u32;
            w.v[7][l] = (c.2 >> 32) as u32;
        }
    }) else {
        return;
    };
    for (l, c) in cases.iter().enumerate() {
        let got = u64::from(w.v[4][l]) | u64::from(w.v[5][l]) << 32;
        assert_eq!(got, c.3, "lane {l}");
        assert_eq!(w.sreg64(10) >> l & 1 != 0, c.4, "carry of lane {l}");
    }

    // Signed: -1 * 1 + 0 = -1, carry (bit 64 of the exact sum) set; 2 * 3 + 0 clear.
    let Some(w) = lanes("v_mad_i64_i32 v[4:5], vcc, v0, v1, 0", &[[m, 1, 0], [2, 3, 0]], |_| {}) else { return };
    assert_eq!((w.v[4][0], w.v[5][0], w.v[4][1], w.v[5][1]), (m, m, 6, 0));
    assert_eq!(w.vcc() & 3, 0b01);
}

#[test]
fn shifts_use_the_low_bits_of_the_amount() {
    table("v_lshlrev_b32 v3, v0, v1", &[(4, 1, 0, 16), (32, 1, 0, 1), (33, 1, 0, 2), (31, 3, 0, 0x8000_0000)]);
    table("v_lshrrev_b32 v3, v0, v1", &[(4, 0x80, 0, 8), (36, 0x80, 0, 8), (31, 0x8000_0000, 0, 1)]);
    table(
        "v_ashrrev_i32 v3, v0, v1",
        &[(4, 0x8000_0000, 0, 0xf800_0000), (32, 0x8000_0000, 0, 0x8000_0000), (31, 0x4000_0000, 0, 0)],
    );
    table("v_lshlrev_b16 v3, v0, v1", &[(4, 0x1234_0001, 0, 0x10), (16, 3, 0, 3), (15, 3, 0, 0x8000)]);
    table("v_lshrrev_b16 v3, v0, v1", &[(4, 0xffff_8000, 0, 0x800), (17, 0x8000, 0, 0x4000)]);
    table("v_ashrrev_i16 v3, v0, v1", &[(4, 0x8000, 0, 0xf800), (16, 0x8000, 0, 0x8000)]);
    table("v_lshl_add_u32 v3, v0, v1, v2", &[(1, 4, 3, 19), (1, 33, 3, 5), (0x8000_0000, 1, 7, 7)]);
    table("v_add_lshl_u32 v3, v0, v1, v2", &[(1, 2, 4, 48), (u32::MAX, 1, 4, 0)]);
    table("v_lshl_or_b32 v3, v0, v1, v2", &[(1, 8, 1, 0x101)]);
}

#[test]
fn shifts_64() {
    let cases: [(u32, u64, u64); 4] = [(4, 1, 16), (63, 1, 1 << 63), (64, 5, 5), (32, 0x1_0000_0001, 0x1_0000_0000)];
    let rows: Vec<[u32; 3]> = cases.iter().map(|c| [c.0, 0, 0]).collect();
    let Some(w) = lanes("v_lshlrev_b64 v[4:5], v0, v[6:7]", &rows, |w| {
        for (l, c) in cases.iter().enumerate() {
            w.v[6][l] = c.1 as u32;
            w.v[7][l] = (c.1 >> 32) as u32;
        }
    }) else {
        return;
    };
    for (l, c) in cases.iter().enumerate() {
        assert_eq!(u64::from(w.v[4][l]) | u64::from(w.v[5][l]) << 32, c.2, "lane {l}");
    }
    let src = "v_ashrrev_i64 v[4:5], v0, v[6:7]\nv_lshrrev_b64 v[8:9], v0, v[6:7]";
    let Some(w) = lanes(src, &[[4, 0, 0]], |w| w.v[7][0] = 0x8000_0000) else { return };
    assert_eq!((w.v[4][0], w.v[5][0]), (0, 0xf800_0000));
    assert_eq!((w.v[8][0], w.v[9][0]), (0, 0x0800_0000));
}

#[test]
fn bitwise_and_three_input_logic() {
    table("v_and_b32 v3, v0, v1", &[(0xf0f0, 0xff00, 0, 0xf000)]);
    table("v_or_b32 v3, v0, v1", &[(0xf0f0, 0xff00, 0, 0xfff0)]);
    table("v_xor_b32 v3, v0, v1", &[(0xf0f0, 0xff00, 0, 0x0ff0)]);
    table("v_xnor_b32 v3, v0, v1", &[(0xf0f0, 0xff00, 0, !0x0ff0)]);
    table("v_not_b32 v3, v0", &[(0xf0f0, 0, 0, !0xf0f0)]);
    table("v_and_or_b32 v3, v0, v1, v2", &[(0xf0, 0x30, 0x100, 0x130)]);
    table("v_or3_b32 v3, v0, v1, v2", &[(1, 2, 4, 7)]);
    table("v_xad_u32 v3, v0, v1, v2", &[(0xff, 0x0f, 1, 0xf1)]);
    table("v_add3_u32 v3, v0, v1, v2", &[(u32::MAX, 1, 5, 5)]);
}

#[test]
fn bit_fields() {
    table(
        "v_bfe_u32 v3, v0, v1, v2",
        &[(0xabcd, 4, 8, 0xbc), (0xabcd, 4, 0, 0), (0xf000_0000, 28, 8, 0xf), (0xabcd, 36, 40, 0xbc)],
    );
    table(
        "v_bfe_i32 v3, v0, v1, v2",
        &[(0x0f80, 4, 8, 0xffff_fff8), (0x0780, 4, 8, 0x78), (0x8000_0000, 28, 8, 0xffff_fff8), (1, 0, 0, 0)],
    );
    table("v_bfi_b32 v3, v0, v1, v2", &[(0xff00, 0x1234, 0xabcd, 0x12cd)]);
    table("v_bfm_b32 v3, v0, v1", &[(4, 8, 0, 0xf00), (0, 3, 0, 0), (31, 1, 0, 0xffff_fffe)]);
    table("v_alignbit_b32 v3, v0, v1, v2", &[(0x1234_5678, 0x9abc_def0, 8, 0x789a_bcde), (1, 2, 0, 2), (1, 2, 32, 2)]);
    table(
        "v_alignbyte_b32 v3, v0, v1, v2",
        &[(0x1234_5678, 0x9abc_def0, 1, 0x789a_bcde), (0x1234_5678, 0x9abc_def0, 7, 0x3456_789a)],
    );
    table("v_bfrev_b32 v3, v0", &[(1, 0, 0, 0x8000_0000), (0x8000_000f, 0, 0, 0xf000_0001)]);
    table("v_bcnt_u32_b32 v3, v0, v1", &[(0xff, 1, 0, 9), (u32::MAX, 0, 0, 32)]);
    table(
        "v_perm_b32 v3, v0, v1, v2",
        &[
            (0x0706_0504, 0x0302_0100, 0x0704_0100, 0x0704_0100),
            (0x0080_0000, 0x0000_8000, 0x0c0d_0a08, 0x00ff_00ff),
            (0, 0x0000_0080, 0x0809_0b0a, 0),
        ],
    );
}

#[test]
fn find_first_bit() {
    let m = u32::MAX;
    table("v_ffbh_u32 v3, v0", &[(0, 0, 0, m), (1, 0, 0, 31), (0x8000_0000, 0, 0, 0)]);
    table("v_ffbl_b32 v3, v0", &[(0, 0, 0, m), (0x8000_0000, 0, 0, 31), (6, 0, 0, 1)]);
    table(
        "v_ffbh_i32 v3, v0",
        &[
            (0, 0, 0, m),
            (m, 0, 0, m),
            (0x4000_0000, 0, 0, 1),
            (0xbfff_ffff, 0, 0, 1),
            (1, 0, 0, 31),
            (0xffff_fffe, 0, 0, 31),
        ],
    );
}

#[test]
fn min_max_med3() {
    let n1 = -1i32 as u32;
    table("v_min_u32 v3, v0, v1", &[(n1, 1, 0, 1)]);
    table("v_max_u32 v3, v0, v1", &[(n1, 1, 0, n1)]);
    table("v_min_i32 v3, v0, v1", &[(n1, 1, 0, n1)]);
    table("v_max_i32 v3, v0, v1", &[(n1, 1, 0, 1)]);
    table("v_min3_i32 v3, v0, v1, v2", &[(3, n1, 2, n1)]);
    table("v_max3_u32 v3, v0, v1, v2", &[(3, n1, 2, n1)]);
    table("v_med3_i32 v3, v0, v1, v2", &[(3, n1, 2, 2), (n1, 5, 9, 5), (9, 9, 1, 9)]);
    table("v_med3_u32 v3, v0, v1, v2", &[(3, n1, 2, 3)]);
    table("v_min_i16 v3, v0, v1", &[(0xffff, 1, 0, 0xffff)]);
    table("v_max_u16 v3, v0, v1", &[(0xffff, 1, 0, 0xffff), (0x1_0000, 1, 0, 1)]);
    table("v_med3_i16 v3, v0, v1, v2", &[(0x8000, 0x7fff, 0xffff, 0xffff)]);
    table("v_min3_u16 v3, v0, v1, v2", &[(0x8000, 0x7fff, 0xffff, 0x7fff)]);
}

#[test]
fn sixteen_bit_arithmetic() {
    table("v_add_u16 v3, v0, v1", &[(0xffff, 2, 0, 1), (0x1_0001, 0x2_0002, 0, 3)]);
    table("v_add_u16_e64 v3, v0, v1 clamp", &[(0xffff, 2, 0, 0xffff)]);
    table("v_sub_u16_e64 v3, v0, v1 clamp", &[(1, 2, 0, 0)]);
    table("v_subrev_u16 v3, v0, v1", &[(1, 2, 0, 1)]);
    table("v_add_i16 v3, v0, v1 clamp", &[(0x7fff, 1, 0, 0x7fff), (0x8000, 0xffff, 0, 0x8000)]);
    table("v_sub_i16 v3, v0, v1", &[(0x8000, 1, 0, 0x7fff)]);
    table("v_mul_lo_u16 v3, v0, v1", &[(0x101, 0x101, 0, 0x201), (0xffff, 0xffff, 0, 1)]);
    table("v_mad_u32_u16 v3, v0, v1, v2", &[(0xffff, 0xffff, 1, 0xfffe_0002)]);
    table("v_mad_i32_i16 v3, v0, v1, v2", &[(0xffff, 3, 1, -2i32 as u32)]);
    // op_sel reads the high halves of the sources.
    table("v_mad_u32_u16 v3, v0, v1, v2 op_sel:[1,1,0,0]", &[(0x0002_0000, 0x0003_0000, 1, 7)]);
}

#[test]
fn mad_u16_keeps_the_other_half() {
    // gfx9's v_mad_u16 writes one half; op_sel[3] the high one.
    table("v_mad_u16 v3, v0, v1, v2", &[(3, 4, 5, 0xdead_0011), (0xffff, 2, 0, 0xdead_fffe)]);
    table("v_mad_u16 v3, v0, v1, v2 op_sel:[0,0,0,1]", &[(3, 4, 5, 0x0011_beef)]);
    table("v_mad_u16 v3, v0, v1, v2 op_sel:[1,0,1,0]", &[(0x0003_0009, 4, 0x0005_0000, 0xdead_0011)]);
    table("v_mad_u16 v3, v0, v1, v2 clamp", &[(0xffff, 2, 0, 0xdead_ffff)]);
    table("v_mad_i16 v3, v0, v1, v2 clamp", &[(0x7fff, 2, 0, 0xdead_7fff), (0xffff, 3, 0, 0xdead_fffd)]);
    table("v_mad_legacy_u16 v3, v0, v1, v2", &[(3, 4, 5, 0x11)]);
}

#[test]
fn sad_lerp_and_packs() {
    table("v_sad_u8 v3, v0, v1, v2", &[(0x0102_0304, 0x0401_0300, 10, 18)]);
    table("v_sad_hi_u8 v3, v0, v1, v2", &[(0x0102_0304, 0x0401_0300, 10, (8 << 16) + 10)]);
    table("v_sad_u16 v3, v0, v1, v2", &[(0x0001_ffff, 0x0003_0000, 1, 2 + 0xffff + 1)]);
    table("v_sad_u32 v3, v0, v1, v2", &[(1, 5, 1, 5), (5, 1, 0, 4)]);
    // Byte 0 (reference 0) and byte 2 (reference 0) are masked out: |1 - 4| + |3 - 1| + 10.
    table("v_msad_u8 v3, v0, v1, v2", &[(0x0102_0304, 0x0400_0100, 10, 15)]);
    table("v_lerp_u8 v3, v0, v1, v2", &[(0x0102_ff00, 0x0102_ff01, 0x0001_0101, 0x0102_ff01)]);
    table("v_cvt_pk_u16_u32 v3, v0, v1", &[(0x1_0000, 5, 0, 0x0005_ffff)]);
    table(
        "v_cvt_pk_i16_i32 v3, v0, v1",
        &[(0x1_0000, -0x1_0000i32 as u32, 0, 0x8000_7fff), (-2i32 as u32, 3, 0, 0x0003_fffe)],
    );
    table("v_sat_pk_u8_i16 v3, v0", &[(0xffff_0100, 0, 0, 0x00ff), (0x0080_0005, 0, 0, 0x8005)]);
}

#[test]
fn mbcnt_counts_the_lanes_below() {
    let src = "v_mbcnt_lo_u32_b32 v3, -1, 0\nv_mbcnt_hi_u32_b32 v3, -1, v3\nv_mbcnt_lo_u32_b32 v4, s4, 0";
    let Some(w) = lanes(src, &[], |w| w.set_sreg(4, 0b1010)) else { return };
    for l in 0..LANES {
        assert_eq!(w.v[3][l], l as u32, "lane {l}");
        let below = (0b1010u32 & ((1u64 << l.min(32)) - 1) as u32).count_ones();
        assert_eq!(w.v[4][l], below, "lane {l}");
    }
}

#[test]
fn cndmask_selects_and_leaves_disabled_lanes() {
    let rows = [[1, 2, 0], [1, 2, 0], [1, 2, 0], [1, 2, 0]];
    let Some(w) = lanes("v_cndmask_b32 v3, v0, v1, vcc", &rows, |w| {
        w.set_vcc(0b0110);
        w.set_exec(0b0011);
    }) else {
        return;
    };
    assert_eq!(&w.v[3][..4], &[1, 2, 0xdead_beef, 0xdead_beef]);
    let Some(w) = lanes("v_cndmask_b32_e64 v3, v0, -v1, s[2:3]", &rows, |w| w.set_sreg64(2, 0b1001)) else {
        return;
    };
    assert_eq!(&w.v[3][..4], &[0x8000_0002, 1, 1, 0x8000_0002]);
}

#[test]
fn readlane_writelane_readfirstlane() {
    let src = "
        v_readlane_b32 s10, v0, 5
        v_readlane_b32 s11, v0, s20
        v_readfirstlane_b32 s12, v0
        v_writelane_b32 v3, s21, 2
        v_writelane_b32 v3, s20, s20
    ";
    let Some(w) = lanes(src, &[], |w| {
        for l in 0..LANES {
            w.v[0][l] = 100 + l as u32;
            w.v[3][l] = 0;
        }
        // The lane select wraps at the wave size: 70 is lane 6.
        w.s[20] = 70;
        w.s[21] = 0xabc;
        // writelane ignores EXEC; readfirstlane starts at the first enabled lane.
        w.set_exec(0b1000_1000);
    }) else {
        return;
    };
    assert_eq!((w.s[10], w.s[11], w.s[12]), (105, 106, 103));
    assert_eq!((w.v[3][2], w.v[3][6], w.v[3][3]), (0xabc, 70, 0));

    let Some(w) = lanes("v_readfirstlane_b32 s12, v0", &[], |w| {
        w.v[0][0] = 42;
        w.v[0][1] = 43;
        w.set_exec(0);
    }) else {
        return;
    };
    assert_eq!(w.s[12], 42);
}

#[test]
fn swap_and_agpr_moves() {
    let src = "
        v_swap_b32 v0, v1
        v_accvgpr_write_b32 a5, v0
        v_accvgpr_mov_b32 a6, a5
        v_accvgpr_read_b32 v3, a6
        v_accvgpr_write_b32 a7, 9
    ";
    let Some(w) = lanes(src, &[[1, 2, 0], [3, 4, 0]], |w| w.set_exec(1)) else { return };
    assert_eq!((w.v[0][0], w.v[1][0], w.v[3][0], w.a[7][0]), (2, 1, 2, 9));
    assert_eq!((w.v[0][1], w.v[1][1], w.v[3][1], w.a[6][1]), (3, 4, 0xdead_beef, 0));
}

#[test]
fn vop2_carry_out_goes_to_vcc_register_pair() {
    // VCC is s[106:107]: a VOP3 carry-out to vcc lands in the same pair.
    let Some(w) = lanes("v_add_co_u32_e64 v3, vcc, v0, v1", &[[u32::MAX, 1, 0]], |w| w.set_exec(1)) else {
        return;
    };
    assert_eq!(w.sreg64(VCC), 1);
}

#[test]
fn integer_dot_products_accumulate_into_vdst() {
    // v3 starts at 0xdeadbeef: 10 is loaded first as the accumulator.
    let src = "v_mov_b32 v3, v2\nv_dot2c_i32_i16 v3, v0, v1";
    let Some(w) = lanes(src, &[[0xffff_0003, 0x0002_0005, 10]], |w| w.set_exec(1)) else { return };
    assert_eq!(w.v[3][0] as i32, 3 * 5 - 2 + 10);
    let src = "v_mov_b32 v3, v2\nv_dot4c_i32_i8 v3, v0, v1";
    let Some(w) = lanes(src, &[[0x80ff_0102, 0x0102_0304, 0]], |w| w.set_exec(1)) else { return };
    assert_eq!(w.v[3][0] as i32, 2 * 4 + 3 - 2 - 128);
    let src = "v_mov_b32 v3, v2\nv_dot8c_i32_i4 v3, v0, v1";
    let Some(w) = lanes(src, &[[0x8000_000f, 0x1000_0003, u32::MAX]], |w| w.set_exec(1)) else { return };
    assert_eq!(w.v[3][0] as i32, -3 - 8 - 1);
}

#[test]
fn carry_ops_saturate_with_clamp_and_still_carry() {
    let m = u32::MAX;
    let rows = [[m, 2, 0], [1, 2, 0]];
    let Some(w) = lanes("v_add_co_u32_e64 v3, s[4:5], v0, v1 clamp", &rows, |w| w.set_exec(0b11)) else { return };
    assert_eq!((w.v[3][0], w.v[3][1], w.sreg64(4)), (m, 3, 0b01));
    let Some(w) = lanes("v_sub_co_u32_e64 v3, s[4:5], v0, v1 clamp", &rows, |w| w.set_exec(0b11)) else { return };
    assert_eq!((w.v[3][0], w.v[3][1], w.sreg64(4)), (m - 2, 0, 0b10));
}

#[test]
fn clamp_without_a_defined_meaning_is_refused() {
    // v_mul_lo_u32 v0, v1, v2 with the clamp bit (LLVM's assembler rejects the syntax).
    let Some(f) = crate::testing::run_fault(".long 0xd3858000, 0x00020501", |_, _| {}) else { return };
    assert!(matches!(f, crate::exec::Fault::Unimplemented { .. }) && f.to_string().contains("clamp"), "{f}");
    let Some(f) = crate::testing::run_fault("v_mad_u64_u32 v[0:1], s[0:1], v1, v2, v[2:3] clamp", |_, _| {}) else {
        return;
    };
    assert!(f.to_string().contains("clamp"), "{f}");
}

#[test]
fn scalar_and_constant_sources_and_masked_lanes() {
    // SGPR and inline constant operands broadcast; disabled lanes keep v3 (16-bit ops too).
    let src = "v_add_u32_e64 v3, s4, -1\nv_mad_u32_u24 v4, s4, 3, v0\nv_add_u16 v5, 0x1234, v0";
    let Some(w) = lanes(src, &[[1, 0, 0], [2, 0, 0], [3, 0, 0]], |w| {
        w.s[4] = 10;
        w.v[5][1] = 0xdead_beef;
        w.set_exec(0b101);
    }) else {
        return;
    };
    assert_eq!(&w.v[3][..3], &[9, 0xdead_beef, 9]);
    assert_eq!((w.v[4][0], w.v[4][2]), (31, 33));
    assert_eq!(&w.v[5][..3], &[0x1235, 0xdead_beef, 0x1237]);
}

/// A deterministic stream of test values, biased to edges (0, all ones, sign bits, small).
fn values(seed: u64, n: usize) -> Vec<u32> {
    let mut x = seed;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match i % 8 {
                0 => (x % 40) as u32,
                1 => [0, u32::MAX, 0x8000_0000, 0x7fff_ffff][(x % 4) as usize],
                _ => x as u32,
            }
        })
        .collect()
}

/// LLVM 15's constant folding of `call` (an AMDGPU intrinsic, declared by `decl`) on each row
/// of `args`, through `opt-15 -passes=instcombine`; `None` when opt-15 is missing.
fn llvm_fold(decl: &str, call: &str, args: &[[u32; 3]]) -> Option<Vec<u32>> {
    use std::process::Command;
    let mut ir = format!("{decl}\ndefine void @f(ptr %p) {{\n");
    for (k, a) in args.iter().enumerate() {
        let c = call.replace("$0", &a[0].to_string()).replace("$1", &a[1].to_string()).replace("$2", &a[2].to_string());
        ir += &format!("  %r{k} = {c}\n  store volatile i32 %r{k}, ptr %p\n");
    }
    ir += "  ret void\n}\n";
    let dir = std::env::temp_dir().join(format!("shader-opt-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("f.ll");
    std::fs::write(&path, &ir).ok()?;
    let out = Command::new("opt-15")
        .args(["-mtriple=amdgcn", "-mcpu=gfx90a", "-passes=instcombine", "-S"])
        .arg(&path)
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let Ok(out) = out else {
        super::super::llvm_tests::missing("opt-15");
        return None;
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let folded: Vec<u32> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("store volatile i32 "))
        .map(|l| l.split(',').next().unwrap().parse::<i64>().expect("every call folds to a constant") as u32)
        .collect();
    assert_eq!(folded.len(), args.len());
    Some(folded)
}

/// Compares `src` (v3 from v0..v2) with LLVM's folding of the intrinsic on 64 rows.
fn against_llvm(src: &str, decl: &str, call: &str, seed: u64, mask: [u32; 3]) {
    let v = values(seed, 3 * LANES);
    let rows: Vec<[u32; 3]> =
        (0..LANES).map(|l| [v[3 * l] & mask[0], v[3 * l + 1] & mask[1], v[3 * l + 2] & mask[2]]).collect();
    let Some(want) = llvm_fold(decl, call, &rows) else { return };
    let Some(w) = lanes(src, &rows, |_| {}) else { return };
    for (l, r) in rows.iter().enumerate() {
        assert_eq!(w.v[3][l], want[l], "`{src}` on {:#x} {:#x} {:#x}", r[0], r[1], r[2]);
    }
}

#[test]
fn bit_field_and_perm_agree_with_llvm_constant_folding() {
    let m = u32::MAX;
    against_llvm(
        "v_bfe_u32 v3, v0, v1, v2",
        "declare i32 @llvm.amdgcn.ubfe.i32(i32, i32, i32)",
        "call i32 @llvm.amdgcn.ubfe.i32(i32 $0, i32 $1, i32 $2)",
        1,
        [m, 63, 63],
    );
    against_llvm(
        "v_bfe_i32 v3, v0, v1, v2",
        "declare i32 @llvm.amdgcn.sbfe.i32(i32, i32, i32)",
        "call i32 @llvm.amdgcn.sbfe.i32(i32 $0, i32 $1, i32 $2)",
        2,
        [m, 63, 63],
    );
    // Selectors: each byte 0-15 and, in a quarter of the bytes, any value.
    against_llvm(
        "v_perm_b32 v3, v0, v1, v2",
        "declare i32 @llvm.amdgcn.perm(i32, i32, i32)",
        "call i32 @llvm.amdgcn.perm(i32 $0, i32 $1, i32 $2)",
        3,
        [m, m, 0xff0f_0f0f],
    );
    against_llvm(
        "v_alignbit_b32 v3, v0, v1, v2",
        "declare i32 @llvm.fshr.i32(i32, i32, i32)",
        "call i32 @llvm.fshr.i32(i32 $0, i32 $1, i32 $2)",
        4,
        [m, m, m],
    );
}
