//! Table-driven tests of the scalar ALU: each case runs one program on a fresh wave with the
//! given scalar registers and SCC, then checks registers and SCC.

use crate::exec::Fault;
use crate::testing::{assemble, ram, run_fault, run_wave, wave, CODE};
use crate::wave::{Wave, EXEC, M0};

/// One program and what it must leave behind.
struct Case {
    src: &'static str,
    /// Scalar registers set before the program runs (by hardware number).
    init: &'static [(u8, u32)],
    scc_in: bool,
    /// Scalar registers after it.
    expect: &'static [(u8, u32)],
    /// SCC after it (`None`: SCC must be unchanged).
    scc: Option<bool>,
}

const fn c(src: &'static str, init: &'static [(u8, u32)], expect: &'static [(u8, u32)], scc: Option<bool>) -> Case {
    Case { src, init, scc_in: false, expect, scc }
}

/// The same with SCC set on entry.
const fn c1(src: &'static str, init: &'static [(u8, u32)], expect: &'static [(u8, u32)], scc: Option<bool>) -> Case {
    Case { src, init, scc_in: true, expect, scc }
}

const T: Option<bool> = Some(true);
const F: Option<bool> = Some(false);
const U: Option<bool> = None;

const EXEC_LO: u8 = EXEC;
const EXEC_HI: u8 = EXEC + 1;

/// Runs every case on a fresh wave after `prepare` and checks it. The cases are assembled in
/// one llvm-mc run, each at its own 256-byte slot.
fn check(cases: &[Case], prepare: fn(&mut Wave)) {
    const SLOT: usize = 256;
    let src: String = cases.iter().map(|c| format!(".p2align 8\n{}\ns_endpgm\n", c.src)).collect();
    let Some(code) = assemble(&src) else {
        return;
    };
    // Each slot starts at SLOT * k only if no case overflowed its slot.
    assert!(code.len() <= SLOT * cases.len(), "a case is longer than {SLOT} bytes");
    for (k, case) in cases.iter().enumerate() {
        let mut w = wave();
        w.pc = CODE + (SLOT * k) as u64;
        prepare(&mut w);
        for &(r, v) in case.init {
            w.s[usize::from(r)] = v;
        }
        w.scc = case.scc_in;
        let mut lds = vec![0u8; 65536];
        if let Err(f) = run_wave(&mut w, &mut ram(&code), &mut lds) {
            panic!("`{}`: {f}", case.src);
        }
        for &(r, v) in case.expect {
            assert_eq!(w.s[usize::from(r)], v, "`{}`: s{r} is {:#x}, want {v:#x}", case.src, w.s[usize::from(r)]);
        }
        let scc = case.scc.unwrap_or(case.scc_in);
        assert_eq!(w.scc, scc, "`{}`: SCC", case.src);
    }
}

#[test]
fn sop2_arithmetic_sets_carry_and_overflow() {
    check(
        &[
            c("s_add_u32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 1)], &[(10, 0)], T),
            c("s_add_u32 s10, s0, s1", &[(0, 1), (1, 2)], &[(10, 3)], F),
            c("s_sub_u32 s10, s0, s1", &[(0, 0), (1, 1)], &[(10, 0xffff_ffff)], T),
            c("s_sub_u32 s10, s0, s1", &[(0, 5), (1, 3)], &[(10, 2)], F),
            c("s_add_i32 s10, s0, s1", &[(0, 0x7fff_ffff), (1, 1)], &[(10, 0x8000_0000)], T),
            // A carry out of bit 31 is no signed overflow.
            c("s_add_i32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 1)], &[(10, 0)], F),
            c("s_sub_i32 s10, s0, s1", &[(0, 0x8000_0000), (1, 1)], &[(10, 0x7fff_ffff)], T),
            c("s_sub_i32 s10, s0, s1", &[(0, 0), (1, 1)], &[(10, 0xffff_ffff)], F),
            c1("s_addc_u32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 0)], &[(10, 0)], T),
            c1("s_addc_u32 s10, s0, s1", &[(0, 1), (1, 2)], &[(10, 4)], F),
            c("s_addc_u32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 1)], &[(10, 0)], T),
            c1("s_subb_u32 s10, s0, s1", &[(0, 0), (1, 0)], &[(10, 0xffff_ffff)], T),
            c1("s_subb_u32 s10, s0, s1", &[(0, 1), (1, 0)], &[(10, 0)], F),
            c1("s_subb_u32 s10, s0, s1", &[(0, 5), (1, 3)], &[(10, 1)], F),
            // min/max: SCC says S0 was chosen.
            c("s_min_i32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 1)], &[(10, 0xffff_ffff)], T),
            c("s_min_u32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 1)], &[(10, 1)], F),
            c("s_max_i32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 1)], &[(10, 1)], F),
            c("s_max_u32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 1)], &[(10, 0xffff_ffff)], T),
            c("s_mul_i32 s10, s0, s1", &[(0, 0x1_0000), (1, 0x1_0000)], &[(10, 0)], U),
            c("s_mul_i32 s10, s0, -3", &[(0, 5)], &[(10, -15i32 as u32)], U),
            c("s_mul_hi_u32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 0xffff_ffff)], &[(10, 0xffff_fffe)], U),
            c("s_mul_hi_i32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 0xffff_ffff)], &[(10, 0)], U),
            c("s_mul_hi_i32 s10, s0, 2", &[(0, 0x8000_0000)], &[(10, 0xffff_ffff)], U),
            c("s_absdiff_i32 s10, s0, s1", &[(0, 1), (1, 5)], &[(10, 4)], T),
            c("s_absdiff_i32 s10, s0, s1", &[(0, 7), (1, 7)], &[(10, 0)], F),
            c("s_lshl1_add_u32 s10, s0, s1", &[(0, 0x8000_0000), (1, 1)], &[(10, 1)], T),
            c("s_lshl2_add_u32 s10, s0, s1", &[(0, 3), (1, 1)], &[(10, 13)], F),
            c("s_lshl3_add_u32 s10, s0, s1", &[(0, 0x2000_0000), (1, 0)], &[(10, 0)], T),
            c("s_lshl4_add_u32 s10, s0, s1", &[(0, 0x10), (1, 3)], &[(10, 0x103)], F),
            c1("s_cselect_b32 s10, s0, s1", &[(0, 1), (1, 2)], &[(10, 1)], U),
            c("s_cselect_b32 s10, s0, s1", &[(0, 1), (1, 2)], &[(10, 2)], U),
            c1("s_cselect_b64 s[10:11], s[0:1], s[2:3]", &[(0, 1), (1, 2), (2, 3), (3, 4)], &[(10, 1), (11, 2)], U),
            c("s_cselect_b64 s[10:11], s[0:1], s[2:3]", &[(0, 1), (1, 2), (2, 3), (3, 4)], &[(10, 3), (11, 4)], U),
            c("s_pack_ll_b32_b16 s10, s0, s1", &[(0, 0x1111_2222), (1, 0x3333_4444)], &[(10, 0x4444_2222)], U),
            c("s_pack_lh_b32_b16 s10, s0, s1", &[(0, 0x1111_2222), (1, 0x3333_4444)], &[(10, 0x3333_2222)], U),
            c("s_pack_hh_b32_b16 s10, s0, s1", &[(0, 0x1111_2222), (1, 0x3333_4444)], &[(10, 0x3333_1111)], U),
        ],
        |_| {},
    );
}

#[test]
fn sop2_logic_and_shifts_set_scc_to_nonzero() {
    const A: &[(u8, u32)] = &[(0, 0xf0f0_0000), (1, 0x0000_0ff0), (2, 0x0ff0_0000), (3, 0xffff_0000)];
    check(
        &[
            c("s_and_b32 s10, s0, s2", A, &[(10, 0x00f0_0000)], T),
            c("s_and_b32 s10, s0, s1", A, &[(10, 0)], F),
            c("s_and_b64 s[10:11], s[0:1], s[2:3]", A, &[(10, 0x00f0_0000), (11, 0x0000_0000)], T),
            c("s_or_b32 s10, s0, s1", A, &[(10, 0xf0f0_0ff0)], T),
            c("s_or_b64 s[10:11], s[0:1], s[2:3]", A, &[(10, 0xfff0_0000), (11, 0xffff_0ff0)], T),
            c("s_xor_b32 s10, s0, s0", A, &[(10, 0)], F),
            c("s_xor_b64 s[10:11], s[0:1], s[2:3]", A, &[(10, 0xff00_0000), (11, 0xffff_0ff0)], T),
            c("s_andn2_b32 s10, s0, s2", A, &[(10, 0xf000_0000)], T),
            c("s_andn2_b64 s[10:11], s[0:1], s[2:3]", A, &[(10, 0xf000_0000), (11, 0x0000_0ff0)], T),
            c("s_orn2_b32 s10, s0, s3", A, &[(10, 0xf0f0_ffff)], T),
            c("s_orn2_b64 s[10:11], s[0:1], s[0:1]", A, &[(10, 0xffff_ffff), (11, 0xffff_ffff)], T),
            c("s_nand_b32 s10, s3, s3", A, &[(10, 0x0000_ffff)], T),
            c("s_nand_b64 s[10:11], s[0:1], s[0:1]", A, &[(10, 0x0f0f_ffff), (11, 0xffff_f00f)], T),
            c("s_nor_b32 s10, s0, s2", A, &[(10, 0x000f_ffff)], T),
            c("s_nor_b64 s[10:11], -1, 0", A, &[(10, 0), (11, 0)], F),
            c("s_xnor_b32 s10, s0, s0", A, &[(10, 0xffff_ffff)], T),
            c("s_xnor_b64 s[10:11], s[0:1], s[0:1]", A, &[(10, 0xffff_ffff), (11, 0xffff_ffff)], T),
            // The shift amount is S1[4:0] (S1[5:0] for 64 bits): 33 shifts by 1, 64 by 0.
            c("s_lshl_b32 s10, s0, s1", &[(0, 1), (1, 33)], &[(10, 2)], T),
            c("s_lshl_b32 s10, s0, 1", &[(0, 0x8000_0000)], &[(10, 0)], F),
            c("s_lshl_b64 s[10:11], s[0:1], s2", &[(0, 1), (1, 0), (2, 63)], &[(10, 0), (11, 0x8000_0000)], T),
            c("s_lshl_b64 s[10:11], s[0:1], s2", &[(0, 1), (1, 0), (2, 64)], &[(10, 1), (11, 0)], T),
            c("s_lshr_b32 s10, s0, s1", &[(0, 0x8000_0000), (1, 31)], &[(10, 1)], T),
            c("s_lshr_b32 s10, s0, s1", &[(0, 0x8000_0000), (1, 32)], &[(10, 0x8000_0000)], T),
            c(
                "s_lshr_b64 s[10:11], s[0:1], s2",
                &[(0, 0), (1, 0x8000_0000), (2, 32)],
                &[(10, 0x8000_0000), (11, 0)],
                T,
            ),
            c("s_ashr_i32 s10, s0, s1", &[(0, 0x8000_0000), (1, 31)], &[(10, 0xffff_ffff)], T),
            c("s_ashr_i32 s10, s0, s1", &[(0, 0x4000_0000), (1, 31)], &[(10, 0)], F),
            c(
                "s_ashr_i64 s[10:11], s[0:1], s2",
                &[(0, 0), (1, 0x8000_0000), (2, 36)],
                &[(10, 0xf800_0000), (11, 0xffff_ffff)],
                T,
            ),
            c("s_ashr_i64 s[10:11], s[0:1], s2", &[(0, 5), (1, 0), (2, 0x40)], &[(10, 5), (11, 0)], T),
        ],
        |_| {},
    );
}

#[test]
fn sop2_bit_fields() {
    // s_bfe: S1 = width << 16 | offset.
    check(
        &[
            c("s_bfm_b32 s10, s0, s1", &[(0, 4), (1, 8)], &[(10, 0xf00)], U),
            c("s_bfm_b32 s10, s0, s1", &[(0, 32), (1, 8)], &[(10, 0)], U),
            c("s_bfm_b32 s10, s0, s1", &[(0, 31), (1, 4)], &[(10, 0xffff_fff0)], U),
            c("s_bfm_b64 s[10:11], s0, s1", &[(0, 63), (1, 1)], &[(10, 0xffff_fffe), (11, 0xffff_ffff)], U),
            c("s_bfe_u32 s10, s0, s1", &[(0, 0xabcd_1234), (1, 8 << 16 | 4)], &[(10, 0x23)], T),
            c("s_bfe_u32 s10, s0, s1", &[(0, 0xabcd_1234), (1, 4)], &[(10, 0)], F),
            // A field past bit 31 reads zeros; a width past 32 is the whole rest.
            c("s_bfe_u32 s10, s0, s1", &[(0, 0xabcd_1234), (1, 8 << 16 | 28)], &[(10, 0xa)], T),
            c("s_bfe_u32 s10, s0, s1", &[(0, 0xabcd_1234), (1, 40 << 16 | 4)], &[(10, 0x0abc_d123)], T),
            c("s_bfe_i32 s10, s0, s1", &[(0, 0xf0), (1, 4 << 16 | 4)], &[(10, 0xffff_ffff)], T),
            c("s_bfe_i32 s10, s0, s1", &[(0, 0x70), (1, 4 << 16 | 4)], &[(10, 7)], T),
            c("s_bfe_i32 s10, s0, s1", &[(0, 0xabcd_1234), (1, 8 << 16 | 28)], &[(10, 0xffff_fffa)], T),
            c("s_bfe_i32 s10, s0, s1", &[(0, 0xffff_ffff), (1, 3)], &[(10, 0)], F),
            c(
                "s_bfe_u64 s[10:11], s[0:1], s2",
                &[(0, 0x9abc_def0), (1, 0x1234_5678), (2, 16 << 16 | 40)],
                &[(10, 0x3456), (11, 0)],
                T,
            ),
            c(
                "s_bfe_i64 s[10:11], s[0:1], s2",
                &[(0, 0), (1, 0x8000_0000), (2, 8 << 16 | 56)],
                &[(10, 0xffff_ff80), (11, 0xffff_ffff)],
                T,
            ),
            c(
                "s_bfe_i64 s[10:11], s[0:1], s2",
                &[(0, 0), (1, 0x8000_0000), (2, 0x7f << 16 | 62)],
                &[(10, 0xffff_fffe), (11, 0xffff_ffff)],
                T,
            ),
        ],
        |_| {},
    );
}

#[test]
fn sop1_moves_and_bit_operations() {
    check(
        &[
            c("s_mov_b32 s10, -1", &[], &[(10, 0xffff_ffff)], U),
            c("s_mov_b64 s[10:11], -1", &[], &[(10, 0xffff_ffff), (11, 0xffff_ffff)], U),
            c("s_mov_b64 s[10:11], 1.0", &[], &[(10, 0), (11, 0x3ff0_0000)], U),
            c("s_mov_b64 s[10:11], s[0:1]", &[(0, 5), (1, 6)], &[(10, 5), (11, 6)], U),
            c("s_cmov_b32 s10, s0", &[(0, 5), (10, 7)], &[(10, 7)], U),
            c1("s_cmov_b32 s10, s0", &[(0, 5), (10, 7)], &[(10, 5)], U),
            c1("s_cmov_b64 s[10:11], s[0:1]", &[(0, 5), (1, 6)], &[(10, 5), (11, 6)], U),
            c("s_not_b32 s10, s0", &[(0, 0xffff_ffff)], &[(10, 0)], F),
            c("s_not_b64 s[10:11], s[0:1]", &[(0, 0xffff_ffff)], &[(10, 0), (11, 0xffff_ffff)], T),
            c("s_wqm_b32 s10, s0", &[(0, 0x8000_0110)], &[(10, 0xf000_0ff0)], T),
            c("s_wqm_b64 s[10:11], s[0:1]", &[(0, 0), (1, 0x10)], &[(10, 0), (11, 0xf0)], T),
            c("s_wqm_b32 s10, 0", &[], &[(10, 0)], F),
            c("s_brev_b32 s10, 1", &[], &[(10, 0x8000_0000)], U),
            c("s_brev_b64 s[10:11], s[0:1]", &[(0, 1), (1, 0)], &[(10, 0), (11, 0x8000_0000)], U),
            c("s_bcnt0_i32_b32 s10, 0", &[], &[(10, 32)], T),
            c("s_bcnt0_i32_b32 s10, -1", &[], &[(10, 0)], F),
            c("s_bcnt0_i32_b64 s10, s[0:1]", &[(0, 0xffff_ffff), (1, 0xffff_fff0)], &[(10, 4)], T),
            c("s_bcnt1_i32_b32 s10, s0", &[(0, 0xf0f0_0001)], &[(10, 9)], T),
            c("s_bcnt1_i32_b64 s10, -1", &[], &[(10, 64)], T),
            c("s_bcnt1_i32_b64 s10, 0", &[], &[(10, 0)], F),
            c("s_ff0_i32_b32 s10, -1", &[], &[(10, 0xffff_ffff)], U),
            c("s_ff0_i32_b32 s10, s0", &[(0, 0xffff)], &[(10, 16)], U),
            c("s_ff0_i32_b64 s10, s[0:1]", &[(0, 0xffff_ffff), (1, 0xfffe_ffff)], &[(10, 48)], U),
            c("s_ff1_i32_b32 s10, 0", &[], &[(10, 0xffff_ffff)], U),
            c("s_ff1_i32_b32 s10, s0", &[(0, 0x8000_0000)], &[(10, 31)], U),
            c("s_ff1_i32_b64 s10, s[0:1]", &[(0, 0), (1, 0x100)], &[(10, 40)], U),
            c("s_ff1_i32_b64 s10, 0", &[], &[(10, 0xffff_ffff)], U),
            // s_flbit counts from the MSB; -1 when there is no such bit.
            c("s_flbit_i32_b32 s10, 0", &[], &[(10, 0xffff_ffff)], U),
            c("s_flbit_i32_b32 s10, 1", &[], &[(10, 31)], U),
            c("s_flbit_i32_b32 s10, -1", &[], &[(10, 0)], U),
            c("s_flbit_i32_b64 s10, 1", &[], &[(10, 63)], U),
            c("s_flbit_i32_b64 s10, s[0:1]", &[(0, 0), (1, 0x100)], &[(10, 23)], U),
            c("s_flbit_i32 s10, 0", &[], &[(10, 0xffff_ffff)], U),
            c("s_flbit_i32 s10, -1", &[], &[(10, 0xffff_ffff)], U),
            c("s_flbit_i32 s10, 1", &[], &[(10, 31)], U),
            c("s_flbit_i32 s10, s0", &[(0, 0x4000_0000)], &[(10, 1)], U),
            c("s_flbit_i32 s10, s0", &[(0, 0xbfff_ffff)], &[(10, 1)], U),
            c("s_flbit_i32_i64 s10, -2", &[], &[(10, 63)], U),
            c("s_flbit_i32_i64 s10, -1", &[], &[(10, 0xffff_ffff)], U),
            c("s_sext_i32_i8 s10, s0", &[(0, 0x1280)], &[(10, 0xffff_ff80)], U),
            c("s_sext_i32_i16 s10, s0", &[(0, 0x1_7fff)], &[(10, 0x7fff)], U),
            c("s_sext_i32_i16 s10, s0", &[(0, 0x8000)], &[(10, 0xffff_8000)], U),
            // s_bitset: the bit number is S0[4:0] (S0[5:0] for 64 bits).
            c("s_bitset0_b32 s10, s0", &[(0, 33), (10, 0xffff_ffff)], &[(10, 0xffff_fffd)], U),
            c("s_bitset1_b32 s10, 31", &[(10, 1)], &[(10, 0x8000_0001)], U),
            c("s_bitset1_b64 s[10:11], s0", &[(0, 63)], &[(10, 0), (11, 0x8000_0000)], U),
            c("s_bitset0_b64 s[10:11], s0", &[(0, 32), (10, 1), (11, 1)], &[(10, 1), (11, 0)], U),
            c("s_quadmask_b32 s10, s0", &[(0, 0x8000_0f01)], &[(10, 0x85)], T),
            c("s_quadmask_b64 s[10:11], s[0:1]", &[(0, 0), (1, 0x1000_0000)], &[(10, 0x8000), (11, 0)], T),
            c("s_quadmask_b32 s10, 0", &[], &[(10, 0)], F),
            c("s_bitreplicate_b64_b32 s[10:11], s0", &[(0, 0x8000_0005)], &[(10, 0x33), (11, 0xc000_0000)], U),
            c("s_abs_i32 s10, s0", &[(0, -5i32 as u32)], &[(10, 5)], T),
            c("s_abs_i32 s10, s0", &[(0, 0x8000_0000)], &[(10, 0x8000_0000)], T),
            c("s_abs_i32 s10, 0", &[], &[(10, 0)], F),
            // M0-relative moves.
            c("s_movrels_b32 s10, s0", &[(M0, 2), (2, 0x55)], &[(10, 0x55)], U),
            c("s_movrels_b64 s[10:11], s[0:1]", &[(M0, 4), (4, 1), (5, 2)], &[(10, 1), (11, 2)], U),
            c("s_movreld_b32 s0, s1", &[(M0, 5), (1, 0x66)], &[(5, 0x66), (0, 0)], U),
            c("s_movreld_b64 s[0:1], s[2:3]", &[(M0, 6), (2, 7), (3, 8)], &[(6, 7), (7, 8)], U),
            c("s_set_gpr_idx_idx s0", &[(M0, 0x1234_5678), (0, 0x1ab)], &[(M0, 0x1234_56ab)], U),
        ],
        |_| {},
    );
}

#[test]
fn sop1_exec_operations_save_or_write_exec_and_set_scc() {
    const E: &[(u8, u32)] = &[(EXEC_LO, 0xff), (EXEC_HI, 0), (0, 0x0f), (1, 0x1)];
    check(
        &[
            c("s_and_saveexec_b64 s[10:11], s[0:1]", E, &[(10, 0xff), (11, 0), (EXEC_LO, 0x0f), (EXEC_HI, 0)], T),
            c("s_or_saveexec_b64 s[10:11], s[0:1]", E, &[(10, 0xff), (EXEC_LO, 0xff), (EXEC_HI, 1)], T),
            c("s_xor_saveexec_b64 s[10:11], s[0:1]", E, &[(10, 0xff), (EXEC_LO, 0xf0), (EXEC_HI, 1)], T),
            c("s_andn2_saveexec_b64 s[10:11], s[0:1]", E, &[(10, 0xff), (EXEC_LO, 0), (EXEC_HI, 1)], T),
            c("s_orn2_saveexec_b64 s[10:11], s[0:1]", E, &[(EXEC_LO, 0xffff_ff0f), (EXEC_HI, 0xffff_ffff)], T),
            c("s_nand_saveexec_b64 s[10:11], s[0:1]", E, &[(EXEC_LO, 0xffff_fff0), (EXEC_HI, 0xffff_ffff)], T),
            c("s_nor_saveexec_b64 s[10:11], s[0:1]", E, &[(EXEC_LO, 0xffff_ff00), (EXEC_HI, 0xffff_fffe)], T),
            c("s_xnor_saveexec_b64 s[10:11], s[0:1]", E, &[(EXEC_LO, 0xffff_ff0f), (EXEC_HI, 0xffff_fffe)], T),
            c("s_andn1_saveexec_b64 s[10:11], s[0:1]", E, &[(10, 0xff), (EXEC_LO, 0xf0), (EXEC_HI, 0)], T),
            c("s_orn1_saveexec_b64 s[10:11], s[0:1]", E, &[(EXEC_LO, 0xffff_ffff), (EXEC_HI, 0xffff_fffe)], T),
            // wrexec: D receives the new EXEC.
            c("s_andn1_wrexec_b64 s[10:11], s[0:1]", E, &[(10, 0xf0), (11, 0), (EXEC_LO, 0xf0), (EXEC_HI, 0)], T),
            c("s_andn2_wrexec_b64 s[10:11], s[0:1]", E, &[(10, 0), (11, 1), (EXEC_LO, 0), (EXEC_HI, 1)], T),
            // EXEC 0 stays 0 and SCC says so; the saved copy is 0.
            c(
                "s_and_saveexec_b64 s[10:11], s[0:1]",
                &[(EXEC_LO, 0), (EXEC_HI, 0), (0, 0xf), (10, 9), (11, 9)],
                &[(10, 0), (11, 0), (EXEC_LO, 0), (EXEC_HI, 0)],
                F,
            ),
            c1("s_andn2_saveexec_b64 s[10:11], s[0:1]", &[(EXEC_LO, 0xf), (EXEC_HI, 0), (0, 0xf)], &[(EXEC_LO, 0)], F),
        ],
        |_| {},
    );
}

#[test]
fn exec_operations_of_a_wave32_touch_only_its_lanes() {
    // The saveexec family keeps EXEC within the wave's lanes: exec_hi is no lane of a wave32.
    check(
        &[
            c(
                "s_orn2_saveexec_b64 s[10:11], s[0:1]",
                &[(EXEC_LO, 0xff), (EXEC_HI, 0x77), (0, 0)],
                &[(10, 0xff), (11, 0), (EXEC_LO, 0xffff_ff00), (EXEC_HI, 0x77)],
                T,
            ),
            c(
                "s_and_saveexec_b64 s[10:11], s[0:1]",
                &[(EXEC_LO, 0xff), (EXEC_HI, 0x77), (0, 0x100), (1, 1)],
                &[(EXEC_LO, 0), (EXEC_HI, 0x77)],
                F,
            ),
        ],
        |w| w.wave_size = 32,
    );
}

#[test]
fn sopc_compares_set_scc() {
    const A: &[(u8, u32)] = &[(0, 0xffff_ffff), (1, 0), (2, 5), (3, 5), (4, 5), (5, 6)];
    check(
        &[
            c("s_cmp_eq_i32 s2, s3", A, &[], T),
            c1("s_cmp_eq_u32 s0, s1", A, &[], F),
            c("s_cmp_lg_i32 s0, s1", A, &[], T),
            c1("s_cmp_lg_u32 s2, s3", A, &[], F),
            c("s_cmp_lt_i32 s0, s1", A, &[], T),
            c("s_cmp_lt_u32 s0, s1", A, &[], F),
            c("s_cmp_le_i32 s2, s3", A, &[], T),
            c("s_cmp_le_u32 s0, s1", A, &[], F),
            c("s_cmp_gt_i32 s0, s1", A, &[], F),
            c("s_cmp_gt_u32 s0, s1", A, &[], T),
            c("s_cmp_ge_i32 s1, s0", A, &[], T),
            c("s_cmp_ge_u32 s1, s0", A, &[], F),
            c("s_cmp_eq_u64 s[2:3], s[4:5]", A, &[], F),
            c("s_cmp_lg_u64 s[2:3], s[4:5]", A, &[], T),
            // s_bitcmp: the bit number is S1[4:0] (S1[5:0] for 64 bits).
            c("s_bitcmp1_b32 s2, 34", A, &[], T),
            c("s_bitcmp0_b32 s2, 1", A, &[], T),
            c("s_bitcmp1_b64 s[4:5], 33", A, &[], T),
            c("s_bitcmp0_b64 s[4:5], 32", A, &[], T),
        ],
        |_| {},
    );
}

#[test]
fn sopk_immediates_extend_as_the_operation_says() {
    check(
        &[
            c("s_movk_i32 s10, 0x8000", &[], &[(10, 0xffff_8000)], U),
            c("s_movk_i32 s10, 0x7fff", &[], &[(10, 0x7fff)], U),
            c("s_cmovk_i32 s10, 5", &[(10, 9)], &[(10, 9)], U),
            c1("s_cmovk_i32 s10, 5", &[(10, 9)], &[(10, 5)], U),
            // The signed compares sign-extend, the unsigned ones zero-extend.
            c("s_cmpk_eq_i32 s0, 0xffff", &[(0, 0xffff_ffff)], &[], T),
            c("s_cmpk_eq_u32 s0, 0xffff", &[(0, 0xffff_ffff)], &[], F),
            c("s_cmpk_eq_u32 s0, 0xffff", &[(0, 0xffff)], &[], T),
            c("s_cmpk_lg_i32 s0, 0xffff", &[(0, 0xffff)], &[], T),
            c("s_cmpk_lg_u32 s0, 0xffff", &[(0, 0xffff)], &[], F),
            c("s_cmpk_lt_i32 s0, 0x8000", &[(0, 0)], &[], F),
            c("s_cmpk_lt_u32 s0, 0x8000", &[(0, 0)], &[], T),
            c("s_cmpk_gt_i32 s0, 0x8000", &[(0, 0)], &[], T),
            c("s_cmpk_gt_u32 s0, 0x8000", &[(0, 0x8001)], &[], T),
            c("s_cmpk_ge_i32 s0, 0xfffe", &[(0, 0xffff_fffe)], &[], T),
            c("s_cmpk_ge_u32 s0, 0xfffe", &[(0, 0xfffd)], &[], F),
            c("s_cmpk_le_i32 s0, 0", &[(0, 0x8000_0000)], &[], T),
            c("s_cmpk_le_u32 s0, 0", &[(0, 0x8000_0000)], &[], F),
            c("s_addk_i32 s10, 0x1", &[(10, 0x7fff_ffff)], &[(10, 0x8000_0000)], T),
            c("s_addk_i32 s10, 0xffff", &[(10, 0)], &[(10, 0xffff_ffff)], F),
            c("s_addk_i32 s10, 0x8000", &[(10, 0x8000_0000)], &[(10, 0x7fff_8000)], T),
            c("s_mulk_i32 s10, 0xfffe", &[(10, 3)], &[(10, -6i32 as u32)], U),
        ],
        |_| {},
    );
}

/// The address of the first case's slot (the case in slot k starts 0x100 * k later).
const RET: u32 = CODE as u32;

#[test]
fn pc_operations_call_and_return() {
    check(
        &[
            // s_getpc_b64 gives the address of the next instruction.
            c("s_getpc_b64 s[10:11]", &[], &[(10, RET + 4), (11, 0)], U),
            c("s_nop 0\ns_getpc_b64 s[10:11]", &[], &[(10, RET + 0x100 + 8), (11, 0)], U),
            // s_swappc to a function that returns through s_setpc: 4 (getpc) + 8 (add with a
            // literal) + 4 (addc) + 4 (swappc) bytes before the return address.
            c(
                "s_getpc_b64 s[0:1]
                base:
                s_add_u32 s0, s0, func-base
                s_addc_u32 s1, s1, 0
                s_swappc_b64 s[30:31], s[0:1]
                s_mov_b32 s5, 1
                s_endpgm
                func:
                s_mov_b32 s4, 7
                s_setpc_b64 s[30:31]",
                &[],
                &[(4, 7), (5, 1), (30, RET + 0x200 + 20), (31, 0)],
                F,
            ),
            c(
                "s_call_b64 s[30:31], func2
                s_mov_b32 s5, 1
                s_endpgm
                func2:
                s_mov_b32 s4, 7
                s_setpc_b64 s[30:31]",
                &[],
                &[(4, 7), (5, 1), (30, RET + 0x300 + 4), (31, 0)],
                U,
            ),
        ],
        |_| {},
    );
}

#[test]
fn hardware_registers_read_and_write_mode_and_report_state() {
    check(
        &[
            c(
                "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0x13
                s_getreg_b32 s10, hwreg(HW_REG_MODE, 0, 10)",
                &[],
                // 0x13 is cut to the 4-bit field; mode was 0x2f0 (see below).
                &[(10, 0x2f3)],
                U,
            ),
            c(
                "s_setreg_b32 hwreg(HW_REG_MODE, 4, 4), s0
                s_getreg_b32 s10, hwreg(HW_REG_MODE)",
                &[(0, 0x15)],
                &[(10, 0x250)],
                U,
            ),
            c1("s_getreg_b32 s10, hwreg(HW_REG_STATUS, 0, 1)", &[], &[(10, 1)], U),
            c("s_getreg_b32 s10, hwreg(HW_REG_STATUS, 9, 2)", &[(EXEC_LO, 0), (EXEC_HI, 0), (106, 1)], &[(10, 1)], U),
            c("s_getreg_b32 s10, hwreg(HW_REG_STATUS, 16, 1)", &[], &[(10, 1)], U),
            c("s_getreg_b32 s10, hwreg(HW_REG_HW_ID, 0, 4)", &[], &[(10, 3)], U),
            // 256 VGPRs and 256 AGPRs: 64 blocks of 8.
            c("s_getreg_b32 s10, hwreg(HW_REG_GPR_ALLOC, 8, 6)", &[], &[(10, 63)], U),
            // 64 KiB of LDS: 128 blocks of 512 bytes.
            c("s_getreg_b32 s10, hwreg(HW_REG_LDS_ALLOC, 12, 9)", &[], &[(10, 128)], U),
            c("s_getreg_b32 s10, hwreg(HW_REG_IB_STS, 0, 15)", &[(10, 9)], &[(10, 0)], U),
            c("s_getreg_b32 s10, hwreg(HW_REG_TRAPSTS, 10, 2)", &[(10, 9)], &[(10, 0)], U),
        ],
        |w| {
            w.mode = 0x2f0;
            w.id_in_group = 3;
        },
    );
}

#[test]
fn what_the_core_cannot_do_is_a_fault() {
    let cases = [
        // FP exception state is not recorded; exception traps, GPR indexing need support.
        "s_getreg_b32 s10, hwreg(HW_REG_TRAPSTS)",
        "s_getreg_b32 s10, hwreg(HW_REG_GPR_ALLOC, 16, 12)",
        "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 12, 1), 1",
        "s_setreg_imm32_b32 hwreg(HW_REG_STATUS, 0, 1), 1",
        "s_set_gpr_idx_on s0, gpr_idx(SRC0)",
        "s_cbranch_join s0",
        "s_setvskip s0, s1",
    ];
    for src in cases {
        let Some(f) = run_fault(src, |_, _| {}) else {
            return;
        };
        assert!(matches!(f, Fault::Unimplemented { .. }), "`{src}`: {f}");
    }
    // The fault says what is missing.
    let Some(f) = run_fault("s_set_gpr_idx_on s0, gpr_idx(SRC0)", |_, _| {}) else {
        return;
    };
    assert!(f.to_string().contains("GPR indexing mode"), "{f}");
    // An M0-relative register past the file is refused.
    let Some(f) = run_fault("s_movrels_b32 s10, s0", |w, _| w.s[usize::from(M0)] = 200) else {
        return;
    };
    assert!(matches!(f, Fault::Invalid { .. }), "{f}");
}

#[test]
fn the_coverage_table_answers_from_the_dispatch_table() {
    use crate::isa::Op;
    for op in [Op::SMovB64, Op::SAddcU32, Op::SCmpkEqU32, Op::SAndn1WrexecB64, Op::SGetregB32, Op::SCallB64] {
        assert!(super::implements(op), "{op:?}");
    }
    for op in [Op::SSetGprIdxOn, Op::SRfeRestoreB64, Op::SCbranchIFork, Op::SCbranchGFork] {
        assert!(!super::implements(op), "{op:?}");
    }
}

#[test]
fn sh_mem_bases_holds_the_high_bits_of_the_apertures() {
    use crate::exec::{step, Apertures, Code, Cx, Flow};
    use crate::isa::Target;
    use crate::testing::{assemble, ram, wave};
    let Some(code) = assemble("s_getreg_b32 s10, hwreg(HW_REG_SH_MEM_BASES)\ns_endpgm") else {
        return;
    };
    let mut w = wave();
    let mut mem = ram(&code);
    let mut lds = [0u8; 0];
    let apertures = Apertures {
        shared_base: 0x1234_0000_0000_0000,
        shared_limit: 0x1234_ffff_ffff_ffff,
        private_base: 0x5678_0000_0000_0000,
        private_limit: 0x5678_ffff_ffff_ffff,
        sramecc: false,
    };
    let mut cx = Cx { mem: &mut mem, lds: &mut lds, apertures, gws: None };
    let mut code = Code::new(Target::Gfx90a);
    assert_eq!(step(&mut w, &mut code, &mut cx), Ok(Flow::Next));
    // SHARED_BASE [31:16], PRIVATE_BASE [15:0].
    assert_eq!(w.s[10], 0x1234_5678);
}
