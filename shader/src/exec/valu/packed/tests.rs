//! Tests of the packed VALU: both halves, op_sel/op_sel_hi, neg_lo/neg_hi, packed f32 pairs,
//! the mixed FMAs and the dot products.

use crate::exec::Fault;
use crate::fp::{f16_to_f32, f32_to_f16};
use crate::testing::{run, run_fault};

const HIP: u32 = 0x3f0;

fn h(x: f32) -> u32 {
    u32::from(f32_to_f16(x))
}

fn pk(lo: f32, hi: f32) -> u32 {
    h(lo) | h(hi) << 16
}

/// Runs `src` with lane l's v1, v2, v3 from `rows[l]` (v0 = 0xdead0000 first) and returns v0.
fn run_rows(src: &str, rows: &[[u32; 3]]) -> Option<Vec<u32>> {
    let (w, _) = run(src, |w, _| {
        w.mode = HIP;
        for (l, r) in rows.iter().enumerate() {
            w.v[0][l] = 0xdead_0000;
            w.v[1][l] = r[0];
            w.v[2][l] = r[1];
            w.v[3][l] = r[2];
        }
    })?;
    Some((0..rows.len()).map(|l| w.v[0][l]).collect())
}

fn check(src: &str, cases: &[([u32; 3], u32)]) {
    let rows: Vec<[u32; 3]> = cases.iter().map(|c| c.0).collect();
    let Some(got) = run_rows(src, &rows) else {
        return;
    };
    for ((ins, want), got) in cases.iter().zip(got) {
        assert_eq!(got, *want, "{src} {ins:x?}: got {got:#010x} want {want:#010x}");
    }
}

#[test]
fn pk_f16_arithmetic_works_on_both_halves() {
    check("v_pk_add_f16 v0, v1, v2", &[([pk(1.0, 2.0), pk(0.5, -4.0), 0], pk(1.5, -2.0))]);
    check("v_pk_mul_f16 v0, v1, v2", &[([pk(3.0, 0.5), pk(-2.0, 0.5), 0], pk(-6.0, 0.25))]);
    check("v_pk_fma_f16 v0, v1, v2, v3", &[([pk(2.0, 3.0), pk(4.0, 5.0), pk(1.0, -15.0)], pk(9.0, 0.0))]);
    // The low half of a sum that ties rounds to even; the high half overflows.
    check("v_pk_add_f16 v0, v1, v2", &[([0x7bff_3c00, 0x7bff_1000, 0], 0x7c00_3c00)]);
    // A NaN half and a number: IEEE max takes the number, a signaling NaN comes back quiet.
    check("v_pk_max_f16 v0, v1, v2", &[([0x7e00_7d00, pk(1.0, 1.0), 0], h(1.0) << 16 | 0x7f00)]);
    check("v_pk_min_f16 v0, v1, v2", &[([pk(-1.0, 8.0), pk(2.0, 3.0), 0], pk(-1.0, 3.0))]);
    // Inline constants are the f16 value in both halves.
    check("v_pk_add_f16 v0, v1, 1.0", &[([pk(1.0, 2.0), 0, 0], pk(2.0, 3.0))]);
    check("v_pk_mul_f16 v0, v1, v2 clamp", &[([pk(4.0, -1.0), pk(0.125, 1.0), 0], pk(0.5, 0.0))]);
}

#[test]
fn op_sel_and_neg_pick_and_negate_halves() {
    // Low result from src0's high half and src1's low; high result from src0's low half
    // (op_sel_hi clear) and src1's high.
    check(
        "v_pk_add_f16 v0, v1, v2 op_sel:[1,0] op_sel_hi:[0,1]",
        &[([pk(1.0, 10.0), pk(100.0, 1000.0), 0], pk(110.0, 1001.0))],
    );
    check("v_pk_mul_f16 v0, v1, v2 neg_lo:[1,0] neg_hi:[0,1]", &[([pk(2.0, 3.0), pk(5.0, 7.0), 0], pk(-10.0, -21.0))]);
}

#[test]
fn pk_int16_operations() {
    check("v_pk_add_u16 v0, v1, v2", &[([0xffff_0001, 0x0002_0002, 0], 0x0001_0003)]);
    check("v_pk_sub_i16 v0, v1, v2", &[([0x0000_0005, 0x0001_0007, 0], 0xffff_fffe)]);
    check("v_pk_mul_lo_u16 v0, v1, v2", &[([0x0100_0003, 0x0100_0005, 0], 0x0000_000f)]);
    check("v_pk_max_i16 v0, v1, v2", &[([0xffff_0005, 0x0001_8000, 0], 0x0001_0005)]);
    check("v_pk_min_u16 v0, v1, v2", &[([0xffff_0005, 0x0001_8000, 0], 0x0001_0005)]);
    check("v_pk_lshlrev_b16 v0, v1, v2", &[([0x0011_0004, 0x0001_0001, 0], 0x0002_0010)]);
    check("v_pk_ashrrev_i16 v0, v1, v2", &[([0x0004_0001, 0x8000_8000, 0], 0xf800_c000)]);
    check("v_pk_lshrrev_b16 v0, v1, v2", &[([0x0004_0001, 0x8000_8000, 0], 0x0800_4000)]);
    check("v_pk_mad_u16 v0, v1, v2, v3", &[([0x0002_0003, 0x0005_0007, 0x0001_fff0], 0x000b_0005)]);
    check("v_pk_add_u16 v0, v1, 1", &[([0x0004_0005, 0, 0], 0x0005_0006)]);
    let Some(f) = run_fault("v_pk_add_u16 v0, v1, v2 clamp", |_, _| {}) else {
        return;
    };
    assert!(matches!(f, Fault::Unimplemented { .. }), "{f}");
}

#[test]
fn pk_f32_operates_on_register_pairs() {
    let Some((w, _)) = run(
        "v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[6:7]
         v_pk_mul_f32 v[8:9], v[2:3], v[4:5] op_sel:[1,0] op_sel_hi:[0,1]
         v_pk_add_f32 v[10:11], v[2:3], v[4:5] neg_lo:[0,1] neg_hi:[1,0]
         v_pk_mov_b32 v[12:13], v[2:3], v[4:5] op_sel:[1,0]
         v_pk_mov_b32 v[14:15], s[0:1], s[0:1] op_sel:[0,1]",
        |w, _| {
            w.mode = HIP;
            let set = |w: &mut crate::wave::Wave, r: usize, lo: f32, hi: f32| {
                w.v[r][0] = lo.to_bits();
                w.v[r + 1][0] = hi.to_bits();
            };
            set(w, 2, 2.0, 3.0);
            set(w, 4, 5.0, 7.0);
            set(w, 6, 1.0, -1.0);
            w.s[0] = 11;
            w.s[1] = 22;
        },
    ) else {
        return;
    };
    let pair = |r: usize| (f32::from_bits(w.v[r][0]), f32::from_bits(w.v[r + 1][0]));
    assert_eq!(pair(0), (11.0, 20.0));
    assert_eq!(pair(8), (15.0, 14.0)); // lo: 3 * 5, hi: 2 * 7
    assert_eq!(pair(10), (-3.0, 4.0)); // lo: 2 - 5, hi: -3 + 7
    assert_eq!(pair(12), (3.0, 5.0)); // lo: src0's high dword, hi: src1's low dword
    assert_eq!((w.v[14][0], w.v[15][0]), (11, 22));
}

#[test]
fn fma_mix_reads_f16_or_f32_per_source() {
    let f = |x: f32| x.to_bits();
    // src0 f16 (low half), src1 f32, src2 f16 (high half).
    let src = "v_fma_mix_f32 v0, v1, v2, v3 op_sel:[0,0,1] op_sel_hi:[1,0,1]";
    check(src, &[([h(1.5), f(4.0), h(0.5) << 16], f(6.5))]);
    // neg_hi is abs on the mix operations.
    check("v_fma_mix_f32 v0, |v1|, v2, v3 op_sel_hi:[1,0,0]", &[([h(-2.0), f(3.0), f(1.0)], f(7.0))]);
    // mixlo writes the low half and keeps the high; mixhi the reverse.
    check("v_fma_mixlo_f16 v0, v1, v2, v3", &[([f(2.0), f(3.0), f(1.0)], 0xdead_0000 | h(7.0))]);
    check("v_fma_mixhi_f16 v0, v1, v2, v3", &[([f(2.0), f(3.0), f(1.0)], h(7.0) << 16)]);
}

#[test]
fn dot_products() {
    let f = |x: f32| x.to_bits();
    check("v_dot2_f32_f16 v0, v1, v2, v3", &[([pk(1.5, 2.0), pk(2.0, -0.25), f(10.0)], f(12.5))]);
    check("v_dot2_i32_i16 v0, v1, v2, v3", &[([0xffff_0003, 0x0004_0005, 100], 111)]);
    check("v_dot2_u32_u16 v0, v1, v2, v3", &[([0xffff_0003, 0x0002_0005, 1], 0x1_fffe + 16)]);
    check("v_dot4_i32_i8 v0, v1, v2, v3", &[([0xff02_0304, 0x0101_0101, 0], 8)]);
    check("v_dot4_u32_u8 v0, v1, v2, v3", &[([0xff02_0304, 0x0101_0101, 0], 264)]);
    check("v_dot8_i32_i4 v0, v1, v2, v3", &[([0xf000_0001, 0x1000_0003, 5], 5 + 3 - 1)]);
    check("v_dot8_u32_u4 v0, v1, v2, v3", &[([0xf000_0001, 0x1000_0003, 5], 5 + 3 + 15)]);
    // The VOP2 accumulating forms add onto the destination.
    let Some((w, _)) = run("v_dot2c_f32_f16 v0, v1, v2\nv_pk_fmac_f16 v3, v1, v2", |w, _| {
        w.mode = HIP;
        w.v[0][0] = 1.0f32.to_bits();
        w.v[1][0] = pk(2.0, 3.0);
        w.v[2][0] = pk(4.0, 5.0);
        w.v[3][0] = pk(0.5, -1.0);
    }) else {
        return;
    };
    assert_eq!(f32::from_bits(w.v[0][0]), 24.0);
    assert_eq!(w.v[3][0], pk(8.5, 14.0));
    assert_eq!(f16_to_f32(w.v[3][0] as u16), 8.5);
}

#[test]
fn exec_masked_lanes_keep_their_values() {
    let Some((w, _)) = run("v_pk_add_f16 v0, v1, v2\nv_pk_mov_b32 v[4:5], v[6:7], v[6:7] op_sel:[0,1]", |w, _| {
        w.mode = HIP;
        w.set_exec(0b10);
        for l in 0..2 {
            w.v[0][l] = 0xdead;
            w.v[1][l] = pk(1.0, 1.0);
            w.v[2][l] = pk(1.0, 1.0);
            w.v[4][l] = 0xbeef;
            w.v[5][l] = 0xbeef;
            w.v[6][l] = 1;
            w.v[7][l] = 2;
        }
    }) else {
        return;
    };
    assert_eq!(&w.v[0][..2], &[0xdead, pk(2.0, 2.0)]);
    assert_eq!(&w.v[4][..2], &[0xbeef, 1]);
    assert_eq!(&w.v[5][..2], &[0xbeef, 2]);
}

#[test]
fn mfma_is_not_implemented() {
    let Some(f) = run_fault("v_mfma_f32_4x4x1f32 a[0:3], v0, v1, a[0:3]", |_, _| {}) else {
        return;
    };
    assert!(matches!(f, Fault::Unimplemented { .. }), "{f}");
}
