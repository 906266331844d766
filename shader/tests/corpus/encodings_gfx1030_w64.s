// The gfx1030 instructions whose operands follow the wave size, in wave64 syntax (lane masks are
// SGPR pairs and vcc), for tests/llvm_diff.rs (llvm-mc-15 -mcpu=gfx1030 -mattr=+wavefrontsize64).
.text
v_add_co_u32 v0, vcc, v1, v2
v_add_co_u32 v0, s[4:5], v1, v2 clamp
v_add_co_ci_u32_e32 v0, vcc, v1, v2, vcc
v_add_co_ci_u32_e64 v0, s[4:5], v1, v2, s[6:7]
v_sub_co_ci_u32_dpp v0, vcc, v1, v2, vcc quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
v_add_co_ci_u32_sdwa v0, vcc, v1, v2, vcc dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_1 src1_sel:DWORD
v_cndmask_b32_e32 v0, v1, v2, vcc
v_cndmask_b32_e64 v0, -v1, |v2|, s[4:5]
v_cndmask_b32_dpp v0, v1, v2, vcc dpp8:[1,0,3,2,5,4,7,6]
v_cmp_eq_u32_e32 vcc, v1, v2
v_cmp_eq_u32_e64 s[4:5], v1, 0x12345678
v_cmp_lt_f32_e64 s[4:5], -|v1|, v2
v_cmp_class_f32_e64 s[4:5], v1, v2
v_cmp_eq_u32_sdwa vcc, v1, v2 src0_sel:WORD_1 src1_sel:DWORD
v_cmp_eq_u32_sdwa s[4:5], sext(v1), s2 src0_sel:WORD_1 src1_sel:DWORD
v_cmpx_eq_u32_e64 v1, s2
v_mad_u64_u32 v[0:1], s[4:5], v1, v2, v[4:5]
v_div_scale_f32 v0, vcc, v1, v2, v3
v_div_fmas_f32 v0, v1, v2, v3
s_and_saveexec_b64 s[4:5], vcc
s_mov_b64 exec, s[4:5]
s_cbranch_vccz 4
s_endpgm
