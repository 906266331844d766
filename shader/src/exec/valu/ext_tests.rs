//! Tests of the VOP1/VOP2 extensions: DPP lane moves (each dpp_ctrl, row and bank masks,
//! bound_ctrl, disabled source lanes) and SDWA selects and destination modes.

use crate::testing::run;
use crate::wave::{Wave, LANES};

/// v0 = lane id, v1 = 1000 + lane (the "old" value a lane keeps when it does not write).
fn lane_ids(w: &mut Wave) {
    for l in 0..LANES {
        w.v[0][l] = l as u32;
        w.v[1][l] = 1000 + l as u32;
    }
}

/// Runs `v_mov_b32_dpp v1, v0 <ctrl>` with all rows and banks and returns v1.
fn dpp(ctrl: &str, exec: u64) -> Option<Vec<u32>> {
    // bound_ctrl follows the masks in LLVM's syntax.
    let (ctrl, bound) = match ctrl.strip_suffix(" bound_ctrl:0") {
        Some(c) => (c, " bound_ctrl:0"),
        None => (ctrl, ""),
    };
    let src = format!("v_mov_b32_dpp v1, v0 {ctrl} row_mask:0xf bank_mask:0xf{bound}");
    let (w, _) = run(&src, |w, _| {
        lane_ids(w);
        w.set_exec(exec);
    })?;
    Some(w.v[1].to_vec())
}

/// Expected v1 when lane `l` reads `src(l)`: that lane's id, or the old value when there is
/// no source.
fn expect(src: impl Fn(usize) -> Option<usize>) -> Vec<u32> {
    (0..LANES).map(|l| src(l).map_or(1000 + l as u32, |s| s as u32)).collect()
}

#[test]
fn quad_perm() {
    let Some(got) = dpp("quad_perm:[3,2,1,0]", u64::MAX) else { return };
    assert_eq!(&got[..8], &[3, 2, 1, 0, 7, 6, 5, 4]);
    assert_eq!(got, expect(|l| Some(l / 4 * 4 + 3 - l % 4)));
    let Some(got) = dpp("quad_perm:[1,1,0,2]", u64::MAX) else { return };
    assert_eq!(&got[60..], &[61, 61, 60, 62]);
}

#[test]
fn row_shifts_and_rotates() {
    let Some(got) = dpp("row_shl:1", u64::MAX) else { return };
    assert_eq!(&got[14..18], &[15, 1015, 17, 18]);
    assert_eq!(got, expect(|l| (l % 16 + 1 < 16).then_some(l + 1)));
    let Some(got) = dpp("row_shr:3", u64::MAX) else { return };
    assert_eq!(&got[16..20], &[1016, 1017, 1018, 16]);
    assert_eq!(got, expect(|l| (l % 16 >= 3).then(|| l - 3)));
    let Some(got) = dpp("row_shl:15", u64::MAX) else { return };
    assert_eq!(got, expect(|l| (l % 16 == 0).then_some(l + 15)));
    let Some(got) = dpp("row_ror:4", u64::MAX) else { return };
    assert_eq!(&got[16..21], &[28, 29, 30, 31, 16]);
    assert_eq!(got, expect(|l| Some(l / 16 * 16 + (l % 16 + 12) % 16)));
}

#[test]
fn wave_shifts_and_rotates() {
    let Some(got) = dpp("wave_shl:1", u64::MAX) else { return };
    assert_eq!(got, expect(|l| (l < 63).then_some(l + 1)));
    let Some(got) = dpp("wave_shr:1", u64::MAX) else { return };
    assert_eq!(got, expect(|l| l.checked_sub(1)));
    let Some(got) = dpp("wave_rol:1", u64::MAX) else { return };
    assert_eq!((got[0], got[63]), (1, 0));
    let Some(got) = dpp("wave_ror:1", u64::MAX) else { return };
    assert_eq!((got[0], got[1], got[63]), (63, 0, 62));
}

#[test]
fn mirrors_and_broadcasts() {
    let Some(got) = dpp("row_mirror", u64::MAX) else { return };
    assert_eq!(&got[16..19], &[31, 30, 29]);
    let Some(got) = dpp("row_half_mirror", u64::MAX) else { return };
    assert_eq!(&got[..9], &[7, 6, 5, 4, 3, 2, 1, 0, 15]);
    // row_bcast:15: row r reads lane 15 of row r - 1; row 0 has no source.
    let Some(got) = dpp("row_bcast:15", u64::MAX) else { return };
    assert_eq!((got[0], got[16], got[31], got[32], got[63]), (1000, 15, 15, 31, 47));
    // row_bcast:31: rows 2 and 3 read lane 31.
    let Some(got) = dpp("row_bcast:31", u64::MAX) else { return };
    assert_eq!((got[16], got[31], got[32], got[63]), (1016, 1031, 31, 31));
    // gfx90a row_newbcast:n: lane n of the lane's own row.
    let Some(got) = dpp("row_newbcast:3", u64::MAX) else { return };
    assert_eq!((got[0], got[15], got[16], got[47]), (3, 3, 19, 35));
}

#[test]
fn row_and_bank_masks_select_the_written_lanes() {
    let src = "v_mov_b32_dpp v1, v0 quad_perm:[0,0,0,0] row_mask:0x5 bank_mask:0x2";
    let Some((w, _)) = run(src, |w, _| lane_ids(w)) else { return };
    // Rows 0 and 2, lanes 4-7 of each row.
    let written = |l: usize| (l / 16 == 0 || l / 16 == 2) && (l % 16) / 4 == 1;
    assert_eq!(w.v[1].to_vec(), expect(|l| written(l).then_some(l & !3)));
}

#[test]
fn disabled_source_lanes_and_bound_ctrl() {
    // Lane 1 is disabled: lane 0 (reading lane 1) does not write, or reads 0 with bound_ctrl;
    // lane 15 (no source in row_shl:1) likewise.
    let exec = !0b10u64;
    let Some(got) = dpp("quad_perm:[1,0,3,2]", exec) else { return };
    assert_eq!(&got[..4], &[1000, 1001, 3, 2]);
    let Some(got) = dpp("quad_perm:[1,0,3,2] bound_ctrl:0", exec) else { return };
    assert_eq!(&got[..4], &[0, 1001, 3, 2]);
    let Some(got) = dpp("row_shl:1 bound_ctrl:0", u64::MAX) else { return };
    assert_eq!(&got[14..17], &[15, 0, 17]);
}

#[test]
fn dpp_on_a_vop2_source() {
    // src0 moves; src1 is the lane's own.
    let Some((w, _)) =
        run("v_add_u32_dpp v1, v0, v0 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:0", |w, _| lane_ids(w))
    else {
        return;
    };
    let want: Vec<u32> = (0..LANES as u32).map(|l| if l % 16 == 0 { l } else { 2 * l - 1 }).collect();
    assert_eq!(w.v[1].to_vec(), want);
}

/// Runs one SDWA instruction with v0 = `a`, v1 = `b`, v2 = `old` in lane 0 and returns v2.
fn sdwa(src: &str, a: u32, b: u32, old: u32) -> Option<u32> {
    let (w, _) = run(src, |w, _| {
        w.v[0][0] = a;
        w.v[1][0] = b;
        w.v[2][0] = old;
        w.set_exec(1);
    })?;
    Some(w.v[2][0])
}

#[test]
fn sdwa_source_selects_and_sign_extension() {
    let cases = [
        ("v_mov_b32_sdwa v2, v0 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_0", 0x8182_8384, 0x84),
        ("v_mov_b32_sdwa v2, v0 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_2", 0x8182_8384, 0x82),
        ("v_mov_b32_sdwa v2, sext(v0) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_3", 0x8182_8384, 0xffff_ff81),
        ("v_mov_b32_sdwa v2, sext(v0) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_1", 0x8182_7384, 0x73),
        ("v_mov_b32_sdwa v2, v0 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1", 0x8182_8384, 0x8182),
        ("v_mov_b32_sdwa v2, sext(v0) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1", 0x8182_8384, 0xffff_8182),
    ];
    for (src, a, want) in cases {
        let Some(got) = sdwa(src, a, 0, 0) else { return };
        assert_eq!(got, want, "{src}");
    }
    // Both sources of a VOP2 select: byte 1 of v0 + word 1 of v1.
    let src = "v_add_u32_sdwa v2, v0, v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_1 src1_sel:WORD_1";
    let Some(got) = sdwa(src, 0x0000_0500, 0x0007_0000, 0) else { return };
    assert_eq!(got, 12);
}

#[test]
fn sdwa_destination_modes() {
    let old = 0x1122_3344;
    let cases = [
        ("dst_sel:BYTE_1 dst_unused:UNUSED_PAD", 0x0000_8500),
        ("dst_sel:BYTE_1 dst_unused:UNUSED_SEXT", 0xffff_8500),
        ("dst_sel:BYTE_1 dst_unused:UNUSED_PRESERVE", 0x1122_8544),
        ("dst_sel:WORD_1 dst_unused:UNUSED_PAD", 0xa985_0000),
        ("dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE", 0xa985_3344),
        ("dst_sel:WORD_0 dst_unused:UNUSED_SEXT", 0xffff_a985),
        ("dst_sel:BYTE_3 dst_unused:UNUSED_PRESERVE", 0x8522_3344),
        ("dst_sel:DWORD dst_unused:UNUSED_PAD", 0x0000_a985),
    ];
    for (dst, want) in cases {
        let src = format!("v_mov_b32_sdwa v2, v0 {dst} src0_sel:WORD_0");
        let Some(got) = sdwa(&src, 0x7777_a985, 0, old) else { return };
        assert_eq!(got, want, "{dst}");
    }
    // A 16-bit operation writing word 1 and keeping word 0.
    let src = "v_add_u16_sdwa v2, v0, v1 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_0 src1_sel:WORD_1";
    let Some(got) = sdwa(src, 0x0000_fffe, 0x0003_0000, old) else { return };
    assert_eq!(got, 0x0001_3344);
}

#[test]
fn sdwa_vop2_carry_out_goes_to_vcc() {
    let src = "v_add_co_u32_sdwa v2, vcc, v0, v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:BYTE_0";
    let Some((w, _)) = run(src, |w, _| {
        w.v[0][0] = u32::MAX;
        w.v[1][0] = 0x0102;
        w.set_exec(1);
    }) else {
        return;
    };
    assert_eq!((w.v[2][0], w.vcc()), (1, 1));
}

#[test]
fn a_reserved_dpp_control_faults() {
    // v_mov_b32_dpp v1, v0 with dpp_ctrl 0x100 (reserved; no assembler syntax names it).
    let Some(f) = crate::testing::run_fault(".long 0x7e0202fa, 0xff010000", |_, _| {}) else { return };
    assert!(f.to_string().contains("0x100"), "{f}");
}

#[test]
fn gfx9_wave_prefix_sum_by_dpp() {
    // The inclusive scan LLVM 15's AMDGPUAtomicOptimizer builds for gfx9 (row_shr 1, 2, 4, 8,
    // then row_bcast:15 into rows 1 and 3 and row_bcast:31 into rows 2 and 3), with update_dpp's
    // old value 0.
    let mut src = String::new();
    for (ctrl, row_mask) in [
        ("row_shr:1", 0xf),
        ("row_shr:2", 0xf),
        ("row_shr:4", 0xf),
        ("row_shr:8", 0xf),
        ("row_bcast:15", 0xa),
        ("row_bcast:31", 0xc),
    ] {
        src += &format!(
            "v_mov_b32 v2, 0\nv_mov_b32_dpp v2, v1 {ctrl} row_mask:{row_mask:#x} bank_mask:0xf\nv_add_u32 v1, v1, v2\n"
        );
    }
    let x = |l: usize| (l * 7 + 3) as u32 % 11;
    let Some((w, _)) = run(&src, |w, _| {
        for l in 0..LANES {
            w.v[1][l] = x(l);
        }
    }) else {
        return;
    };
    let want: Vec<u32> = (0..LANES).map(|l| (0..=l).map(x).sum()).collect();
    assert_eq!(w.v[1].to_vec(), want);
}

#[test]
fn sdwa_scalar_sources_and_disabled_lanes() {
    // gfx9 SDWA takes an SGPR in either source; the selects apply to it too.
    let src = "v_add_u32_sdwa v2, s4, v1 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_2 src1_sel:BYTE_0";
    let Some((w, _)) = run(src, |w, _| {
        w.s[4] = 0x0012_0000;
        for l in 0..2 {
            w.v[1][l] = 0xff03;
            w.v[2][l] = 0xaaaa_bbbb;
        }
        w.set_exec(0b01);
    }) else {
        return;
    };
    assert_eq!((w.v[2][0], w.v[2][1]), (0x0015_bbbb, 0xaaaa_bbbb));
}
