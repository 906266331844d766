// Every encoding and modifier kind the gfx90a decoder handles, for tests/llvm_diff.rs (assembled
// with llvm-mc-15 -mcpu=gfx90a, then disassembled with llvm-objdump-15).
.text
v_mov_b32_sdwa v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_2
v_add_f32_sdwa v1, -v2, |v3| dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:WORD_0
v_add_f32_sdwa v1, v2, v3 clamp mul:2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD
v_cmp_eq_u32_sdwa vcc, v1, v2 src0_sel:WORD_1 src1_sel:DWORD
v_cmp_eq_u32_sdwa s[4:5], sext(v1), s2 src0_sel:WORD_1 src1_sel:DWORD
v_mov_b32_dpp v0, v1 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v0, v1 row_shr:1 row_mask:0xa bank_mask:0x5 bound_ctrl:0
v_add_f32_dpp v0, -v1, |v2| row_bcast:15 row_mask:0xf bank_mask:0xf
v_add_f32_dpp v0, v1, v2 wave_shl:1 row_mask:0xf bank_mask:0xf
v_add_f64 v[0:1], -|v[2:3]|, v[4:5] clamp mul:4
v_fma_f16 v0, v1, v2, v3 op_sel:[0,1,0,1]
v_pk_fma_f16 v0, v1, v2, v3 op_sel:[1,0,0] op_sel_hi:[0,1,1] neg_lo:[1,0,0] neg_hi:[0,0,1] clamp
v_pk_add_f16 v0, v1, v2
v_add_co_u32_e64 v0, s[4:5], v1, v2 clamp
v_mov_b32_e32 v0, 0.15915494
v_mov_b32_e32 v0, 0x3e22f983
v_add_f64 v[0:1], 0.15915494309189532, v[2:3]
v_add_f16_e32 v0, 0.15915494, v2
v_add_f16_e32 v0, 0x1234, v2
v_add_f64 v[0:1], 0.5, v[2:3]
s_mov_b64 s[0:1], 0.5
s_mov_b64 s[0:1], 0x12345678
v_mov_b32_e32 v0, -16
s_mov_b32 s0, -1
s_mov_b32 s0, 0xffffffef
s_mov_b32 s0, shared_base
s_mov_b32 s0, vccz
v_mov_b32_e32 v0, scc
s_mov_b32 s0, ttmp5
s_mov_b64 s[0:1], ttmp[4:5]
s_mov_b64 s[0:1], xnack_mask
s_mov_b64 s[0:1], flat_scratch
s_mov_b32 m0, s0
s_getreg_b32 s0, hwreg(HW_REG_MODE, 0, 4)
s_setreg_b32 hwreg(HW_REG_TRAPSTS), s0
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0x5
s_sendmsg sendmsg(MSG_INTERRUPT)
s_sendmsg sendmsg(MSG_GS, GS_OP_EMIT, 1)
s_waitcnt vmcnt(1) expcnt(2) lgkmcnt(3)
s_waitcnt 0
s_sleep 2
s_trap 2
s_setprio 3
s_nop 7
s_branch 5
s_cbranch_scc0 -3
s_movk_i32 s0, 0xfff0
s_cmpk_eq_u32 s0, 0x10
s_call_b64 s[0:1], 4
s_set_gpr_idx_on s0, gpr_idx(SRC0,DST)
s_set_gpr_idx_mode gpr_idx(SRC1)
s_load_dwordx2 s[0:1], s[4:5], 0x10 glc
s_load_dword s0, s[4:5], s6
s_buffer_load_dword s0, s[4:7], 0x10
s_store_dword s0, s[4:5], 0x10
s_memtime s[0:1]
s_dcache_wb
s_atc_probe 7, s[4:5], 0x10
s_load_dword s0, s[4:5], -0x10
ds_read2_b32 v[0:1], v2 offset0:1 offset1:2
ds_write_b32 v2, v3 offset:100 gds
ds_add_u32 v2, v3
ds_read_b32 a0, v2
ds_swizzle_b32 v0, v1 offset:swizzle(SWAP,16)
ds_bpermute_b32 v0, v1, v2 offset:4
global_load_dword v0, v[2:3], off offset:-16 glc slc
global_load_dword v0, v2, s[4:5] offset:16
global_atomic_add v0, v[2:3], v4, off glc
global_atomic_add v[2:3], v4, off
global_store_dword v[2:3], a4, off
scratch_load_dword v0, v2, off offset:4
scratch_load_dword v0, off, s5 offset:4
scratch_store_dword off, v0, s5
flat_atomic_cmpswap_x2 v[0:1], v[2:3], v[4:7] glc
buffer_load_dword v0, off, s[0:3], s4 offset:12
buffer_wbinvl1
buffer_atomic_add v0, v1, s[0:3], s4 offen glc
v_readlane_b32 s0, v1, s2
v_writelane_b32 v1, s0, 3
v_cndmask_b32_e64 v0, v1, v2, s[4:5]
v_cmp_eq_u32_e64 s[0:1], v1, v2
v_cmpx_eq_u32_e32 vcc, v1, v2
v_cmp_class_f32_e64 s[0:1], -v1, v2
v_mfma_f32_32x32x1f32 a[0:31], v1, v2, a[0:31] cbsz:1 abid:2 blgp:3
v_accvgpr_read_b32 v0, a1
v_accvgpr_write_b32 a0, v1
v_madmk_f32 v0, v1, 0x41200000, v2
v_pk_mov_b32 v[0:1], v[2:3], v[4:5] op_sel:[0,1]
v_lshlrev_b16_e32 v0, 0x1234, v1
v_mul_lo_u16_sdwa v0, v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:WORD_0
s_endpgm
buffer_load_dword v0, v[2:3], s[0:3], s4 idxen offen
buffer_store_dword v0, v1, s[0:3], 0 idxen offset:4095 glc slc
v_mov_b32_e32 v0, 0.5
v_mov_b32_e32 v0, 64
v_add_u32_e32 v0, 0xfffffff0, v1
v_add_co_u32_e32 v0, vcc, -1, v1
v_addc_co_u32_e32 v1, vcc, 0, v2, vcc
v_cndmask_b32_e32 v0, v1, v2, vcc
v_mad_u64_u32 v[0:1], s[2:3], v2, v3, v[4:5]
v_div_scale_f32 v0, vcc, v1, v2, v1
v_fma_f32 v0, -v1, |v2|, -|v3| mul:2
v_med3_f32 v0, v1, v2, v3 div:2
v_max_f32_e64 v0, v1, v2 clamp
v_cvt_f32_f16_sdwa v0, v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1
v_mov_b32_dpp v0, v1 row_mirror row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v0, v1 row_half_mirror row_mask:0x3 bank_mask:0xc
v_add_u32_dpp v0, v1, v2 row_ror:7 row_mask:0xf bank_mask:0xf bound_ctrl:0
s_lshl_b64 s[0:1], s[2:3], 5
s_and_saveexec_b64 s[4:5], vcc
s_andn2_b64 exec, exec, s[4:5]
s_cmp_eq_u64 s[0:1], 0
s_bitcmp1_b32 s0, 3
s_cselect_b64 s[0:1], -1, 0
s_add_u32 s0, s1, 0x12345
s_setpc_b64 s[30:31]
s_swappc_b64 s[30:31], s[4:5]
s_cbranch_execz 3
s_cbranch_vccnz -7
s_barrier
s_dcache_inv
v_pk_add_u16 v0, v1, v2 op_sel_hi:[0,0]
v_pk_mul_f32 v[0:1], v[2:3], v[4:5]
v_cmp_lt_f64_e64 s[0:1], |v[0:1]|, 1.0
v_cmp_class_f32_e32 vcc, 0x3ff, v0
v_cmpx_gt_u32_e64 s[0:1], v1, 64
v_lshlrev_b64 v[0:1], 2, v[2:3]
v_bfe_u32 v0, v1, 8, 4
v_perm_b32 v0, v1, v2, s4
v_mbcnt_hi_u32_b32 v0, -1, v1
v_accvgpr_mov_b32 a0, a1
ds_write2st64_b64 v0, v[2:3], v[4:5] offset0:1 offset1:255
ds_read_u8 v0, v1 offset:65535
ds_cmpst_rtn_b32 v0, v1, v2, v3
global_atomic_cmpswap_x2 v[0:1], v2, v[4:7], s[0:1] offset:-4096 glc
global_load_dwordx4 v[0:3], v[4:5], off offset:4095 slc
global_store_dwordx4 v[0:1], a[4:7], off
scratch_store_dwordx2 v1, v[2:3], off offset:-8
s_getreg_b32 s0, hwreg(HW_REG_HW_ID)
s_waitcnt vmcnt(63) expcnt(7) lgkmcnt(15)
s_waitcnt vmcnt(0)
s_endpgm
