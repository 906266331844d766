// Every encoding and modifier kind the gfx1030 decoder handles, for tests/llvm_diff.rs (assembled
// with llvm-mc-15 -mcpu=gfx1030 (wave32: lane masks are vcc_lo or one SGPR), then disassembled
// with llvm-objdump-15).
.text
s_mov_b32 s0, s1
s_mov_b64 s[0:1], s[2:3]
s_mov_b32 s0, null
s_mov_b32 s0, s102
s_mov_b32 s0, s105
s_mov_b32 m0, s0
s_mov_b32 s0, exec_lo
s_mov_b32 s0, vcc_hi
s_mov_b32 s0, ttmp5
s_mov_b32 s0, shared_base
s_mov_b32 s0, 0x12345678
s_add_u32 s0, s1, 64
s_cmp_eq_u32 s0, -16
s_movk_i32 s0, 0xfff0
s_waitcnt_vscnt null, 0x0
s_waitcnt_vmcnt s0, 0x3
s_waitcnt vmcnt(1) expcnt(2) lgkmcnt(40)
s_waitcnt lgkmcnt(0)
s_clause 0x3
s_getreg_b32 s0, hwreg(HW_REG_SHADER_CYCLES)
s_getreg_b32 s0, hwreg(HW_REG_MODE, 0, 4)
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0x5
s_sendmsg sendmsg(MSG_INTERRUPT)
s_sendmsg sendmsg(MSG_GS_ALLOC_REQ)
s_sendmsg sendmsg(MSG_GS, GS_OP_EMIT, 1)
s_branch 5
s_cbranch_scc0 -3
s_nop 7
s_load_dword s5, s[2:3], 0x10
s_load_dword s5, s[2:3], s7
s_load_dwordx2 s[4:5], s[2:3], 0x10 glc dlc
s_load_dwordx4 s[4:7], s[2:3], s7 offset:0x20
s_load_dword s5, s[2:3], -0x8
s_buffer_load_dword s5, s[4:7], 0x10
s_memtime s[0:1]
s_gl1_inv
s_dcache_inv
v_mov_b32_e32 v0, v1
v_mov_b32_e32 v0, 0.15915494
v_mov_b32_e32 v0, 0x3e22f983
v_mov_b32_e32 v0, src_lds_direct
v_mov_b32_e32 v0, -16
v_add_nc_u32_e32 v0, s1, v2
v_add_nc_u32_e64 v0, v1, 0x12345678 clamp
v_add_co_u32 v0, vcc_lo, v1, v2
v_add_co_ci_u32_e32 v0, vcc_lo, v1, v2, vcc_lo
v_add_co_ci_u32_e64 v0, s4, v1, v2, s6
v_cndmask_b32_e32 v0, v1, v2, vcc_lo
v_cndmask_b32_e64 v0, v1, v2, s4
v_cndmask_b32_e64 v0, -v1, |v2|, s4
v_cmp_eq_u32_e32 vcc_lo, v1, v2
v_cmp_eq_u32_e64 s4, v1, 0x12345678
v_cmp_lt_f32_e64 s4, -|v1|, v2
v_cmpx_eq_u32_e32 v1, v2
v_cmpx_eq_u32_e64 v1, s2
v_cmp_class_f32_e64 s4, v1, v2
v_fma_f32 v0, v1, 0x12345678, v3
v_fma_f32 v0, -v1, |v2|, v3 clamp mul:2
v_fma_f16 v0, v1, 0x1234, v3
v_fma_f16 v0, v1, v2, v3 op_sel:[0,1,0,1]
v_add_f64 v[0:1], -|v[2:3]|, v[4:5] clamp mul:4
v_add_f64 v[0:1], 0x3ff00000, v[2:3]
v_add_f64 v[0:1], 0.15915494309189532, v[2:3]
v_mad_u32_u16 v0, v1, v2, v3
v_mad_u64_u32 v[0:1], s4, v1, v2, v[4:5]
v_div_scale_f32 v0, vcc_lo, v1, v2, v3
v_lshlrev_b64 v[0:1], 3, v[2:3]
v_add_f16_e32 v0, 0x1234, v2
v_add_nc_u16 v0, 1.0, v2
v_fmac_f32_e32 v0, v1, v2
v_fmamk_f32 v0, v1, 0x42000000, v2
v_readlane_b32 s0, v1, 3
v_readfirstlane_b32 s0, v1
v_writelane_b32 v0, s1, 5
v_pk_fma_f16 v0, v1, v2, v3 op_sel:[1,0,0] op_sel_hi:[0,1,1] neg_lo:[1,0,0] neg_hi:[0,0,1] clamp
v_pk_add_f16 v0, v1, v2
v_pk_add_u16 v0, v1, 0x12345678
v_fma_mix_f32 v0, v1, v2, v3 op_sel_hi:[1,1,1]
v_mov_b32_sdwa v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_2
v_add_f32_sdwa v1, -v2, |v3| dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:WORD_0
v_add_f32_sdwa v1, v2, v3 clamp dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD
v_add_nc_u32_sdwa v1, sext(v2), v3 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:DWORD
v_cmp_eq_u32_sdwa vcc_lo, v1, v2 src0_sel:WORD_1 src1_sel:DWORD
v_cmp_eq_u32_sdwa s4, sext(v1), s2 src0_sel:WORD_1 src1_sel:DWORD
v_mov_b32_dpp v0, v1 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v0, v1 row_shr:1 row_mask:0xa bank_mask:0x5 bound_ctrl:0
v_mov_b32_dpp v0, v1 row_share:3 row_mask:0xf bank_mask:0xf fi:1
v_mov_b32_dpp v0, v1 row_xmask:7 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v0, v1 row_mirror row_mask:0xf bank_mask:0xf
v_add_f32_dpp v0, -v1, |v2| row_ror:3 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v0, v1 dpp8:[7,6,5,4,3,2,1,0]
v_add_f32_dpp v0, v1, v2 dpp8:[1,0,3,2,5,4,7,6] fi:1
ds_write_b32 v1, v2 offset:4
ds_read_b32 v0, v1 offset:65535
ds_read2_b32 v[0:1], v2 offset0:1 offset1:2
ds_write2st64_b64 v0, v[2:3], v[4:5] offset0:3 offset1:255
ds_add_rtn_u32 v0, v1, v2 gds
ds_swizzle_b32 v0, v1 offset:swizzle(QUAD_PERM,1,0,3,2)
ds_bpermute_b32 v0, v1, v2
flat_load_dword v1, v[2:3] offset:16
flat_load_dword v1, v[2:3] offset:2040 glc slc dlc
flat_store_dwordx2 v[2:3], v[4:5]
flat_atomic_add v1, v[2:3], v4 glc
flat_atomic_cmpswap_x2 v[0:1], v[2:3], v[4:7] glc
global_load_dword v1, v[2:3], off offset:-8 glc slc dlc
global_load_dword v1, v2, s[4:5] offset:16
global_store_dword v2, v3, s[4:5] offset:-2048
global_atomic_add v1, v2, v3, s[4:5] glc
scratch_load_dword v1, off, s4 offset:16
scratch_load_dword v1, v2, off offset:-4
scratch_store_dword off, v1, s4
buffer_load_dword v1, v2, s[4:7], s8 offen offset:4 glc slc dlc
buffer_load_dword v1, off, s[4:7], s8 offset:4
buffer_store_dword v1, v[2:3], s[4:7], 0 idxen offen
buffer_load_dword off, s[4:7], s8 offset:16 lds
buffer_gl0_inv
buffer_gl1_inv
v_sub_co_ci_u32_dpp v0, vcc_lo, v1, v2, vcc_lo quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
v_cndmask_b32_dpp v0, v1, v2, vcc_lo dpp8:[1,0,3,2,5,4,7,6]
s_and_saveexec_b32 s4, vcc_lo
s_mov_b32 exec_lo, s4
v_permlane16_b32 v0, v1, s2, s3 op_sel:[1,0]
v_fma_mix_f32 v0, 0x1234, v2, v3
v_med3_f16 v0, v1, v2, -|0x1234|
v_max3_u16 v0, v1, v2, 0.5
v_mov_b32_sdwa v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_SEXT src0_sel:BYTE_2
v_sin_f32_sdwa v1, v2 mul:2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD
s_waitcnt_depctr depctr_va_vdst(0)
s_waitcnt_depctr 0xffe3
s_sendmsg sendmsg(MSG_GS_DONE, GS_OP_NOP)
s_sendmsg sendmsg(MSG_SYSMSG, SYSMSG_OP_REG_RD)
s_getreg_b32 s0, hwreg(HW_REG_HW_ID1)
s_getreg_b32 s0, hwreg(4)
buffer_load_dword v1, v2, s[4:7], s8 offen tfe
buffer_atomic_add v1, v2, s[4:7], s8 offen glc
global_load_ubyte v2, s[4:5] lds
s_endpgm
