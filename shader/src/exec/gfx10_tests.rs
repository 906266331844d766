//! gfx1030 (RDNA2) execution in wave32 and wave64: lane masks in one SGPR, the gfx10 opcodes,
//! v_cmpx writing EXEC only, DPP16's row_share/row_xmask and DPP8, 16-bit results keeping the
//! high half, the VOP3 literal, and the gfx10 SOPP/SOPK hints.

use crate::exec::Fault;
use crate::isa::Target;
use crate::testing::{run_fault_on, run_on};
use crate::wave::{Wave, EXEC, VCC};

const W32: Target = Target::Gfx1030;
const W64: Target = Target::Gfx1030W64;

/// Sets v`r` to `f(lane)` in every lane.
fn fill(w: &mut Wave, r: usize, f: impl Fn(usize) -> u32) {
    for l in 0..64 {
        w.v[r][l] = f(l);
    }
}

fn lanes(w: &Wave, r: usize, n: usize) -> Vec<u32> {
    w.v[r][..n].to_vec()
}

#[test]
fn nc_adds_wrap_without_a_carry_out() {
    let src = "
        v_add_nc_u32 v2, v0, v1
        v_sub_nc_u32 v3, v0, v1
        v_subrev_nc_u32 v4, v0, v1
    ";
    let Some((w, _)) = run_on(W32, src, |w, _| {
        w.set_sreg(VCC, 0x5a5a);
        fill(w, 0, |l| if l == 0 { u32::MAX } else { l as u32 });
        fill(w, 1, |l| if l == 0 { 2 } else { 3 });
    }) else {
        return;
    };
    assert_eq!(lanes(&w, 2, 3), [1, 4, 5]);
    assert_eq!(lanes(&w, 3, 3), [u32::MAX - 2, u32::MAX - 1, u32::MAX]);
    assert_eq!(lanes(&w, 4, 3), [3, 2, 1]);
    assert_eq!(w.sreg(VCC), 0x5a5a, "no carry-out");
}

#[test]
fn wave32_carries_live_in_vcc_lo() {
    // A 64-bit add: the low halves' carries in vcc_lo feed v_add_co_ci_u32; vcc_hi is no lane
    // mask in wave32 and stays as it was.
    let src = "
        v_add_co_u32 v4, vcc_lo, v0, v2
        s_mov_b32 s13, vcc_lo
        v_add_co_ci_u32_e32 v5, vcc_lo, v1, v3, vcc_lo
        v_sub_co_u32 v6, s10, v0, v2
        v_sub_co_ci_u32_e64 v7, s11, v1, v3, s10
        v_subrev_co_ci_u32_e64 v8, s12, v1, v3, s10
    ";
    let Some((w, _)) = run_on(W32, src, |w, _| {
        w.set_sreg(VCC + 1, 0xdead);
        fill(w, 0, |l| if l % 2 == 0 { u32::MAX } else { 1 });
        fill(w, 1, |l| l as u32);
        fill(w, 2, |_| 2);
        fill(w, 3, |_| 10);
    }) else {
        return;
    };
    let even: u32 = 0x5555_5555;
    assert_eq!(w.sreg(13), even, "carry out of the even lanes");
    assert_eq!(w.sreg(VCC), 0, "no carry out of the high halves");
    assert_eq!(w.sreg(VCC + 1), 0xdead);
    assert_eq!(lanes(&w, 4, 2), [1, 3]);
    assert_eq!(lanes(&w, 5, 4), [11, 11, 13, 13]);
    // 1 - 2 borrows in the odd lanes.
    assert_eq!(w.sreg(10), !even);
    assert_eq!(lanes(&w, 7, 2), [0u32.wrapping_sub(10), 1u32.wrapping_sub(11)]);
    assert_eq!(w.sreg(11), 0x3ff, "lane - 10 - borrow borrows below lane 10");
    // v_subrev: src1 - src0 - borrow.
    assert_eq!(lanes(&w, 8, 3), [10, 8, 8]);
}

#[test]
fn wave32_compares_and_cndmask_use_one_sgpr() {
    let src = "
        v_cmp_gt_u32_e32 vcc_lo, v0, v1
        v_cndmask_b32_e32 v2, 100, v0, vcc_lo
        v_cmp_eq_u32_e64 s20, 3, v0
        v_cndmask_b32_e64 v3, 0, 1, s20
    ";
    let Some((w, _)) = run_on(W32, src, |w, _| {
        w.set_sreg(VCC + 1, 7);
        w.set_sreg(21, 9);
        w.set_sreg(EXEC, 0x7fff_ffff);
        fill(w, 0, |l| l as u32);
        fill(w, 1, |_| 29);
        fill(w, 2, |_| 0xeeee);
    }) else {
        return;
    };
    assert_eq!(w.sreg(VCC), 1 << 30, "lane 31 is disabled");
    assert_eq!(w.sreg(VCC + 1), 7);
    assert_eq!(w.sreg(20), 1 << 3);
    assert_eq!(w.sreg(21), 9, "s21 is no part of a wave32 mask");
    assert_eq!(w.v[2][29], 100);
    assert_eq!(w.v[2][30], 30);
    assert_eq!(w.v[2][31], 0xeeee, "disabled lane unchanged");
    assert_eq!(lanes(&w, 3, 5), [0, 0, 0, 1, 0]);
}

#[test]
fn gfx10_cmpx_writes_exec_only() {
    let src = "
        v_cmpx_lt_u32_e32 v0, v1
        v_mov_b32 v2, 1
        v_cmpx_ne_u32_e64 v0, 2
        v_mov_b32 v3, 1
    ";
    for target in [W32, W64] {
        let Some((w, _)) = run_on(target, src, |w, _| {
            w.set_sreg64(VCC, 0x1234_5678_9abc_def0);
            fill(w, 0, |l| l as u32);
            fill(w, 1, |_| 4);
        }) else {
            return;
        };
        assert_eq!(w.exec(), 0b1011, "{target:?}");
        assert_eq!(w.sreg64(VCC), 0x1234_5678_9abc_def0, "{target:?}: VCC untouched");
        assert_eq!(lanes(&w, 2, 6), [1, 1, 1, 1, 0, 0]);
        assert_eq!(lanes(&w, 3, 6), [1, 1, 0, 1, 0, 0]);
    }
}

#[test]
fn b32_saveexec_works_on_exec_lo() {
    let src = "
        s_and_saveexec_b32 s0, s10
        s_cselect_b32 s5, 1, 0
        s_or_saveexec_b32 s1, s11
        s_andn2_saveexec_b32 s2, s12
        v_mov_b32 v1, 5
    ";
    let Some((w, _)) = run_on(W32, src, |w, _| {
        w.set_exec(0xffff);
        w.set_sreg(10, 0xff0f);
        w.set_sreg(11, 0x30);
        w.set_sreg(12, 0xf0);
    }) else {
        return;
    };
    assert_eq!(w.sreg(0), 0xffff);
    assert_eq!(w.sreg(5), 1, "SCC: EXEC is not zero");
    assert_eq!(w.sreg(1), 0xff0f);
    assert_eq!(w.sreg(2), 0xff3f);
    // andn2: s12 & !exec = 0xf0 & !0xff3f = 0xc0.
    assert_eq!(w.exec(), 0xc0);
    assert_eq!(lanes(&w, 1, 8), [0, 0, 0, 0, 0, 0, 5, 5]);
    // Wave64 runs the _b32 forms on exec_lo and leaves exec_hi alone.
    let Some((w, _)) = run_on(W64, "s_and_saveexec_b32 s0, s10", |w, _| {
        w.set_exec(u64::MAX);
        w.set_sreg(10, 0);
    }) else {
        return;
    };
    assert_eq!(w.exec(), 0xffff_ffff_0000_0000);
    assert_eq!(w.sreg(0), u32::MAX);
}

#[test]
fn wave64_lane_masks_are_pairs() {
    let src = "
        v_cmp_lt_u32_e32 vcc, v0, v1
        s_and_saveexec_b64 s[2:3], vcc
        v_add_co_u32 v2, s[4:5], v0, v3
        v_add_co_ci_u32_e64 v4, s[6:7], 0, v5, s[4:5]
        s_mov_b64 exec, s[2:3]
    ";
    let Some((w, _)) = run_on(W64, src, |w, _| {
        fill(w, 0, |l| l as u32);
        fill(w, 1, |_| 40);
        fill(w, 3, |l| if l >= 36 { u32::MAX } else { 0 });
        fill(w, 5, |_| 7);
    }) else {
        return;
    };
    let below40 = (1u64 << 40) - 1;
    assert_eq!(w.sreg64(2), u64::MAX);
    assert_eq!(w.exec(), u64::MAX);
    assert_eq!(w.sreg64(4), below40 & !((1 << 36) - 1), "lanes 36-39 carry");
    assert_eq!(w.sreg64(6), 0);
    assert_eq!(w.v[4][39], 8);
    assert_eq!(w.v[4][33], 7);
    assert_eq!(w.v[4][41], 0, "disabled then");
}

#[test]
fn mbcnt_and_readfirstlane_in_wave32() {
    let src = "
        v_mbcnt_lo_u32_b32 v1, -1, 0
        v_mbcnt_lo_u32_b32 v2, exec_lo, 0
        v_readfirstlane_b32 s0, v0
    ";
    let Some((w, _)) = run_on(W32, src, |w, _| {
        w.set_exec(0xffff_fff0);
        fill(w, 0, |l| 100 + l as u32);
    }) else {
        return;
    };
    assert_eq!(w.v[1][4], 4);
    assert_eq!(w.v[1][31], 31);
    assert_eq!(w.v[2][4], 0);
    assert_eq!(w.v[2][31], 27);
    assert_eq!(w.v[1][3], 0, "disabled");
    assert_eq!(w.sreg(0), 104);
}

#[test]
fn fmaak_and_fmamk_are_fused() {
    // (1 + 2^-23) * (1 - 2^-23) - 1 = -2^-46 exactly; an unfused multiply rounds the product to 1.
    let a = 1.0f32 + f32::EPSILON;
    let b = 1.0f32 - f32::EPSILON;
    let src = format!(
        "
        v_fmaak_f32 v2, v0, v1, {m1:#x}
        v_fmamk_f32 v3, v0, {b:#x}, v4
        v_fmac_f32 v5, v0, v1
    ",
        m1 = (-1.0f32).to_bits(),
        b = b.to_bits()
    );
    let Some((w, _)) = run_on(W32, &src, |w, _| {
        fill(w, 0, |_| a.to_bits());
        fill(w, 1, |_| b.to_bits());
        fill(w, 4, |_| (-1.0f32).to_bits());
        fill(w, 5, |_| (-1.0f32).to_bits());
    }) else {
        return;
    };
    let want = -(2f32.powi(-46));
    assert_eq!(f32::from_bits(w.v[2][0]), want);
    assert_eq!(f32::from_bits(w.v[3][0]), want);
    assert_eq!(f32::from_bits(w.v[5][0]), want);
}

#[test]
fn gfx10_16bit_results_keep_the_high_half() {
    let src = "
        v_add_nc_u16 v2, v0, v1
        v_sub_nc_u16 v3, v0, v1
        v_fmac_f16 v4, v0, v1
        v_add_f16 v5, v0, v1
    ";
    let Some((w, _)) = run_on(W32, src, |w, _| {
        fill(w, 0, |_| 0xaaaa_3c00); // f16 1.0
        fill(w, 1, |_| 0xbbbb_4000); // f16 2.0
        fill(w, 2, |_| 0x1111_0000);
        fill(w, 3, |_| 0x2222_0000);
        fill(w, 4, |_| 0x3333_3c00);
        fill(w, 5, |_| 0x4444_0000);
    }) else {
        return;
    };
    assert_eq!(w.v[2][0], 0x1111_7c00);
    assert_eq!(w.v[3][0], 0x2222_fc00);
    // 1 * 2 + 1 = 3.0 = 0x4200.
    assert_eq!(w.v[4][0], 0x3333_4200);
    assert_eq!(w.v[5][0], 0x4444_4200);
}

#[test]
fn xor3_and_the_vop3_literal() {
    let src = "
        v_xor3_b32 v2, v0, v1, 0x12345678
        v_add3_u32 v3, v0, 0xabcd0000, v1
    ";
    let Some((w, _)) = run_on(W32, src, |w, _| {
        fill(w, 0, |l| l as u32);
        fill(w, 1, |_| 0xff00);
    }) else {
        return;
    };
    assert_eq!(w.v[2][5], 5 ^ 0xff00 ^ 0x1234_5678);
    assert_eq!(w.v[3][5], 5 + 0xff00 + 0xabcd_0000);
}

#[test]
fn dpp16_row_share_and_row_xmask() {
    let src = "
        v_mov_b32_dpp v1, v0 row_share:3 row_mask:0xf bank_mask:0xf
        v_mov_b32_dpp v2, v0 row_xmask:5 row_mask:0xf bank_mask:0xf
        v_mov_b32_dpp v3, v0 row_xmask:1 row_mask:0xf bank_mask:0xf fi:1
        v_mov_b32_dpp v4, v0 row_xmask:1 row_mask:0xf bank_mask:0xf
    ";
    let Some((w, _)) = run_on(W32, src, |w, _| {
        // Lane 0 is disabled: lane 1 reads it only with fi:1.
        w.set_exec(0xffff_fffe);
        fill(w, 0, |l| 100 + l as u32);
        fill(w, 3, |_| 7);
        fill(w, 4, |_| 7);
    }) else {
        return;
    };
    let exp1: Vec<u32> = (0..32).map(|l| if l == 0 { 0 } else { 100 + (l & !15) as u32 + 3 }).collect();
    assert_eq!(lanes(&w, 1, 32), exp1);
    let exp2: Vec<u32> = (0..32)
        .map(|l: usize| {
            if l == 0 || l ^ 5 == 0 {
                if l == 0 {
                    0
                } else {
                    7
                }
            } else {
                100 + (l ^ 5) as u32
            }
        })
        .collect();
    // Lane 5 reads the disabled lane 0 (no bound_ctrl): it keeps its old value, 0.
    let mut exp2 = exp2;
    exp2[5] = 0;
    assert_eq!(lanes(&w, 2, 32), exp2);
    assert_eq!(w.v[3][1], 100, "fi fetches the disabled lane");
    assert_eq!(w.v[4][1], 7, "without fi lane 1 does not write");
    assert_eq!(w.v[3][0], 7, "lane 0 is disabled");
}

#[test]
fn dpp8_selects_within_groups_of_eight() {
    let src = "
        v_mov_b32_dpp v1, v0 dpp8:[7,6,5,4,3,2,1,0]
        v_add_nc_u32_dpp v2, v0, v3 dpp8:[1,1,1,1,1,1,1,1] fi:1
        v_add_nc_u32_dpp v4, v0, v3 dpp8:[1,1,1,1,1,1,1,1]
    ";
    for target in [W32, W64] {
        let n = target.wave_size() as usize;
        let Some((w, _)) = run_on(target, src, |w, _| {
            // Lane 9 is disabled.
            w.set_exec(w.lane_mask() & !(1 << 9));
            fill(w, 0, |l| 100 + l as u32);
            fill(w, 3, |_| 1000);
        }) else {
            return;
        };
        let exp: Vec<u32> =
            (0..n).map(|l| if l == 9 || l == 14 { 0 } else { 100 + ((l & !7) + 7 - (l & 7)) as u32 }).collect();
        // Lane 9 is disabled and lane 14 reads it: 0 without fi.
        assert_eq!(lanes(&w, 1, n), exp, "{target:?}");
        assert_eq!(w.v[2][8], 1109, "{target:?}: fi reads disabled lane 9");
        assert_eq!(w.v[4][8], 1000, "{target:?}: a disabled source reads 0");
        assert_eq!(w.v[4][0], 1101, "{target:?}");
        assert_eq!(w.v[4][n - 1], 1100 + n as u32 - 7, "{target:?}");
    }
}

#[test]
fn gfx10_hints_run_and_s_code_end_faults() {
    let src = "
        s_clause 0x1
        s_inst_prefetch 0x1
        s_waitcnt_vscnt null, 0x0
        s_waitcnt_depctr 0xffe3
        s_round_mode 0x3
        s_denorm_mode 0xf
        buffer_gl0_inv
        buffer_gl1_inv
        v_mov_b32 v0, 9
    ";
    let Some((w, _)) = run_on(W32, src, |_, _| {}) else { return };
    assert_eq!(w.v[0][31], 9);
    assert_eq!(w.mode & 0xff, 0xf3);
    let Some(f) = run_fault_on(W32, "s_code_end", |_, _| {}) else { return };
    assert!(matches!(&f, Fault::Invalid { why, .. } if why.contains("past its program")), "{f}");
}

#[test]
fn gfx10_getreg_ids() {
    let Some((w, _)) = run_on(W32, "s_getreg_b32 s0, hwreg(HW_REG_HW_ID1, 0, 5)", |w, _| w.id_in_group = 3) else {
        return;
    };
    assert_eq!(w.sreg(0), 3);
    // HW_REG_HW_ID (4) is gfx9's; llvm-mc does not name it for gfx1030.
    let Some(f) = run_fault_on(W32, "s_getreg_b32 s0, hwreg(4)", |_, _| {}) else { return };
    assert!(matches!(&f, Fault::Invalid { why, .. } if why.contains("HW_ID1")), "{f}");
}

/// ROCr's gfx10 scratch V# (AqlQueue::FillBufRsrcWord3_Gfx10: dst_sel XYZW, FORMAT 32_UINT,
/// ADD_TID_ENABLE, RESOURCE_LEVEL, OOB_SELECT 2, swizzled) with the INDEX_STRIDE the command
/// processor fills in (2: 32 lanes, 3: 64).
fn gfx10_scratch_rsrc(base: u64, size: u32, index_stride: u32) -> [u32; 4] {
    let dst_sel = 4 | 5 << 3 | 6 << 6 | 7 << 9;
    [
        base as u32,
        (base >> 32) as u32 | 1 << 31,
        size,
        dst_sel | 20 << 12 | index_stride << 21 | 1 << 23 | 1 << 24 | 2 << 28,
    ]
}

#[test]
fn gfx10_scratch_buffers_swizzle_dwords_by_lane() {
    use crate::testing::DATA;
    let src = "
        buffer_store_dword v1, off, s[0:3], s4 offset:8
        buffer_store_dword v1, v3, s[0:3], 0 offen
        buffer_load_dword v2, off, s[0:3], s4 offset:8
    ";
    for (target, stride) in [(W32, 2), (W64, 3)] {
        let n = target.wave_size() as u64;
        let Some((w, ram)) = run_on(target, src, |w, _| {
            let r = gfx10_scratch_rsrc(DATA, 0x10000, stride);
            for (k, v) in r.into_iter().enumerate() {
                w.set_sreg(k as u8, v);
            }
            w.set_sreg(4, 0x1000);
            fill(w, 1, |l| 100 + l as u32);
            fill(w, 3, |_| 4);
        }) else {
            return;
        };
        for l in 0..n {
            // Dword 2 of each lane: element 2 of a stride of n lanes, 4 bytes each.
            assert_eq!(ram.u32_at(DATA + 0x1000 + 2 * 4 * n + 4 * l), 100 + l as u32, "{target:?} lane {l}");
            assert_eq!(ram.u32_at(DATA + 4 * n + 4 * l), 100 + l as u32, "{target:?} offen lane {l}");
            assert_eq!(w.v[2][l as usize], 100 + l as u32);
        }
    }
}

#[test]
fn gfx10_flat_scratch_is_set_through_hwregs() {
    use crate::wave::FLAT_SCRATCH;
    // The gfx10 kernel prologue (AMDGPUUsage "Flat Scratch"): base + wave offset into
    // FLAT_SCR_LO/HI.
    let src = "
        s_add_u32 s0, s0, s4
        s_addc_u32 s1, s1, 0
        s_setreg_b32 hwreg(HW_REG_FLAT_SCR_LO), s0
        s_setreg_b32 hwreg(HW_REG_FLAT_SCR_HI), s1
        s_getreg_b32 s6, hwreg(HW_REG_FLAT_SCR_HI, 0, 16)
        scratch_store_dword v2, v1, off offset:4
    ";
    let base = crate::testing::DATA;
    let Some((w, ram)) = run_on(W32, src, |w, _| {
        w.set_sreg(0, base as u32);
        w.set_sreg(1, (base >> 32) as u32);
        w.set_sreg(4, 0x400);
        fill(w, 1, |l| 7 * l as u32);
    }) else {
        return;
    };
    assert_eq!(w.sreg64(FLAT_SCRATCH), base + 0x400);
    assert_eq!(w.sreg(6), (base >> 32) as u32 & 0xffff);
    // Scratch interleaves dwords by lane (wave32: 32 lanes per dword row).
    assert_eq!(ram.u32_at(base + 0x400 + 4 * 32 + 4 * 3), 21);
}

#[test]
fn wave32_bpermute_wraps_at_32_lanes() {
    let src = "ds_bpermute_b32 v2, v0, v1";
    let Some((w, _)) = run_on(W32, src, |w, _| {
        // Lane i reads lane i + 33 = i + 1 (mod 32).
        fill(w, 0, |l| 4 * (l as u32 + 33));
        fill(w, 1, |l| 100 + l as u32);
    }) else {
        return;
    };
    assert_eq!(w.v[2][0], 101);
    assert_eq!(w.v[2][31], 100);
}

#[test]
fn mubuf_tfe_is_refused() {
    // buffer_load_dword v[1:2], off, s[0:3], 0 tfe (llvm-mc-15 does not assemble it): TFE is
    // bit 55; then s_endpgm.
    let code = [0x00, 0x00, 0x30, 0xe0, 0x00, 0x01, 0x80, 0x80, 0x00, 0x00, 0x81, 0xbf];
    let mut w = crate::testing::wave_for(W32);
    let mut ram = crate::testing::ram(&code);
    let mut lds = vec![0u8; 1024];
    let f = crate::testing::run_wave_for(W32, &mut w, &mut ram, &mut lds).expect_err("tfe must fault");
    assert!(matches!(&f, Fault::Unimplemented { what, .. } if what == "tfe"), "{f}");
}
