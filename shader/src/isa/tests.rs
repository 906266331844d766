//! Table-driven decoder tests: words (from llvm-objdump-15 output of clang-15 code) and what
//! they decode to.

use super::*;

fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn text(words: &[u32]) -> (String, u8) {
    let inst = decode(Target::Gfx90a, &bytes(words), 0).unwrap_or_else(|e| panic!("{words:x?}: {e}"));
    (inst.to_string(), inst.size)
}

#[test]
fn known_words_decode_to_llvm_text() {
    let cases: &[(&[u32], &str, u8)] = &[
        (&[0x7E50_0300], "v_mov_b32_e32 v40, v0", 4),
        (&[0x2652_50FF, 0x0000_03FF], "v_and_b32_e32 v41, 0x3ff, v40", 8),
        (&[0xBF8C_C07F], "s_waitcnt lgkmcnt(0)", 4),
        (&[0xBF8C_0070], "s_waitcnt vmcnt(0) lgkmcnt(0)", 4),
        (&[0xD1FD_002A, 0x04A5_0C2B], "v_lshl_add_u32 v42, s43, 6, v41", 8),
        (&[0xDC50_8000, 0x007F_0000], "global_load_dword v0, v[0:1], off", 8),
        (&[0x3200_002E], "v_add_co_u32_e32 v0, vcc, s46, v0", 4),
        (&[0xBEAB_000E], "s_mov_b32 s43, s14", 4),
        (&[0xC00A_0B04, 0x0000_0000], "s_load_dwordx4 s[44:47], s[8:9], 0x0", 8),
        (&[0xD1E1_0804, 0x0408_0C06], "v_div_scale_f64 v[4:5], s[8:9], s[6:7], s[6:7], v[2:3]", 8),
        (&[0xD1CC_000C, 0x23CA_0D04], "v_fma_f64 v[12:13], -v[4:5], v[6:7], 1.0", 8),
        (&[0x87FE_047E], "s_or_b64 exec, exec, s[4:5]", 4),
        (&[0xBF88_0038], "s_cbranch_execz 56", 4),
        // LLVM 15 prints a branch offset unsigned.
        (&[0xBF84_FFFD], "s_cbranch_scc0 65533", 4),
        (&[0xD86C_00FC, 0x0400_0004], "ds_read_b32 v4, v4 offset:252", 8),
        (&[0xE070_000C, 0x2100_0000], "buffer_store_dword v0, off, s[0:3], s33 offset:12", 8),
        // Inline constants: 1/(2*pi) (gfx8+), its f64 spelling, -16, 64.
        (&[0x7E00_02F8], "v_mov_b32_e32 v0, 0.15915494", 4),
        (&[0xD280_0000, 0x0002_04F8], "v_add_f64 v[0:1], 0.15915494309189532, v[2:3]", 8),
        (&[0x7E00_02D0], "v_mov_b32_e32 v0, -16", 4),
        (&[0x7E00_02C0], "v_mov_b32_e32 v0, 64", 4),
        // A literal that an inline constant could express prints as that constant.
        (&[0x8010_FF10, 0x0000_0000], "s_add_u32 s16, s16, 0", 8),
        (&[0x7E00_02FF, 0x3F80_0000], "v_mov_b32_e32 v0, 1.0", 8),
        // SDWA and DPP.
        (
            &[0x7E02_02F9, 0x0002_1502],
            "v_mov_b32_sdwa v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_2",
            8,
        ),
        (&[0x7E00_02FA, 0xFF00_B101], "v_mov_b32_dpp v0, v1 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf", 8),
        // VOP3 modifiers.
        (&[0xD280_8100, 0x3002_0902], "v_add_f64 v[0:1], -|v[2:3]|, v[4:5] clamp mul:4", 8),
    ];
    for (words, want, size) in cases {
        assert_eq!(text(words), (want.to_string(), *size), "{words:x?}");
    }
}

#[test]
fn operands_are_resolved() {
    let inst = decode(Target::Gfx90a, &bytes(&[0x7E00_02F8]), 0).unwrap();
    assert_eq!(inst.op, Op::VMovB32);
    assert_eq!(inst.encoding, Encoding::Vop1);
    assert_eq!(inst.operands(), &[Operand::Vgpr { index: 0, count: 1 }, Operand::Float(InlineFloat::InvTwoPi)]);
    let inst = decode(Target::Gfx90a, &bytes(&[0x2652_50FF, 0x0000_03FF]), 0).unwrap();
    assert_eq!(inst.operand(table::Field::S0), Some(Operand::Literal(0x3ff)));
    // The offset argument: the second instruction of a buffer.
    let inst = decode(Target::Gfx90a, &bytes(&[0x7E50_0300, 0xBF81_0000]), 4).unwrap();
    assert_eq!(inst.op, Op::SEndpgm);
}

#[test]
fn invalid_words_are_exact_errors() {
    let cases: &[(&[u32], DecodeError)] = &[
        // A literal source with no literal dword after it.
        (&[0x2652_50FF], DecodeError::Truncated { offset: 0, need: 8 }),
        (&[0xD1FD_002A], DecodeError::Truncated { offset: 0, need: 8 }),
        (&[0xBFFF_0000], DecodeError::UnknownOpcode { encoding: Encoding::Sopp, opcode: 0x7f, word: 0xBFFF_0000 }),
        (&[0xF000_0000, 0], DecodeError::UnsupportedEncoding { encoding: Encoding::Mimg, word: 0xF000_0000 }),
        (&[0xE800_0000, 0], DecodeError::UnsupportedEncoding { encoding: Encoding::Mtbuf, word: 0xE800_0000 }),
        // VOP3 has no literal on gfx9: src0 = 255 is invalid.
        (
            &[0xD280_0000, 0x0002_04FF],
            DecodeError::InvalidOperand { encoding: Encoding::Vop3, value: 255, word: 0xD280_0000 },
        ),
        // s_mov_b32 with src0 = 209 (reserved).
        (&[0xBE80_00D1], DecodeError::InvalidOperand { encoding: Encoding::Sop1, value: 209, word: 0xBE80_00D1 }),
    ];
    for (words, want) in cases {
        assert_eq!(decode(Target::Gfx90a, &bytes(words), 0).unwrap_err(), *want, "{words:x?}");
    }
}

/// Prints, per encoding, how many opcodes LLVM 15 knows and `target`'s decoder decodes (every
/// table entry is decoded through its encoding's field layout, and the tables hold all of LLVM's
/// opcodes; encodings without a table decode none), and checks the total is above `floor`.
fn coverage(target: Target, floor: usize) {
    let encodings = Encoding::ALL;
    let mut total = 0;
    let mcpu = target.mcpu();
    println!("{mcpu} decoder coverage (opcodes decoded / known to LLVM 15.0.6's disassembler):");
    for e in encodings {
        match target.table(e) {
            Some(t) => {
                let n = t.iter().flatten().count();
                total += n;
                println!("  {:8} {n:4} / {n:4}", e.name());
            }
            None => println!("  {:8}    0 / not tabulated (decoding it is an UnsupportedEncoding error)", e.name()),
        }
    }
    println!("  total    {total}");
    assert!(total > floor, "the {mcpu} tables shrank to {total} opcodes");
}

#[test]
fn coverage_table() {
    coverage(Target::Gfx90a, 1400);
}

fn gfx10(target: Target, words: &[u32]) -> Instruction {
    decode(target, &bytes(words), 0).unwrap_or_else(|e| panic!("{words:x?}: {e}"))
}

/// gfx1030 words (from llvm-mc-15 -mcpu=gfx1030 -show-encoding) and their text, in wave32.
#[test]
fn gfx1030_known_words_decode_to_llvm_text() {
    let cases: &[(&[u32], &str, u8)] = &[
        (&[0xD70F_0400, 0x0002_0501], "v_add_co_u32 v0, s4, v1, v2", 8),
        (&[0x5000_0501], "v_add_co_ci_u32_e32 v0, vcc_lo, v1, v2, vcc_lo", 4),
        (&[0xD4D2_0000, 0x0002_0501], "v_cmpx_eq_u32_e64 v1, v2", 8),
        (&[0xD525_0000, 0x0001_FF01, 0x1234_5678], "v_add_nc_u32_e64 v0, v1, 0x12345678", 12),
        (&[0x7E00_02E9, 0x0539_7701], "v_mov_b32_dpp v0, v1 dpp8:[7,6,5,4,3,2,1,0]", 8),
        (&[0x7E00_02EA, 0x0539_7701], "v_mov_b32_dpp v0, v1 dpp8:[7,6,5,4,3,2,1,0] fi:1", 8),
        (&[0x7E00_02FA, 0xFF05_5301], "v_mov_b32_dpp v0, v1 row_share:3 row_mask:0xf bank_mask:0xf fi:1", 8),
        (&[0xF400_0141, 0xFA00_0010], "s_load_dword s5, s[2:3], 0x10", 8),
        (&[0xF400_0141, 0x0E00_0010], "s_load_dword s5, s[2:3], s7 offset:0x10", 8),
        (&[0xDC33_9FF8, 0x017D_0002], "global_load_dword v1, v[2:3], off offset:-8 glc slc dlc", 8),
        (&[0xD834_0004, 0x0000_0201], "ds_write_b32 v1, v2 offset:4", 8),
        (&[0xBBFD_0000], "s_waitcnt_vscnt null, 0x0", 4),
        (&[0xBF8C_E87F], "s_waitcnt lgkmcnt(40)", 4),
        (&[0xBE80_0366], "s_mov_b32 s0, s102", 4),
        (&[0xE1C4_0000, 0x0000_0000], "buffer_gl0_inv", 8),
    ];
    for (words, want, size) in cases {
        let inst = gfx10(Target::Gfx1030, words);
        assert_eq!((inst.to_string(), inst.size), (want.to_string(), *size), "{words:x?}");
    }
}

/// Lane masks follow the wave size; DPP8, fi, dlc and VOP3 literals are in the instruction.
#[test]
fn gfx1030_operands_are_resolved() {
    use table::Field;
    let carry = [0xD70F_0400, 0x0002_0501];
    assert_eq!(gfx10(Target::Gfx1030, &carry).operand(Field::Sd), Some(Operand::Sgpr { index: 4, count: 1 }));
    let wide = gfx10(Target::Gfx1030W64, &carry);
    assert_eq!(wide.operand(Field::Sd), Some(Operand::Sgpr { index: 4, count: 2 }));
    assert_eq!(wide.to_string(), "v_add_co_u32 v0, s[4:5], v1, v2");
    let cmp = [0x7D84_0501];
    assert_eq!(gfx10(Target::Gfx1030, &cmp).operand(Field::Vcc), Some(Operand::Sgpr { index: 106, count: 1 }));
    assert_eq!(gfx10(Target::Gfx1030W64, &cmp).operand(Field::Vcc), Some(Operand::Sgpr { index: 106, count: 2 }));
    let cmpx = gfx10(Target::Gfx1030, &[0xD4D2_0000, 0x0002_0501]);
    assert_eq!(cmpx.op, Op::VCmpxEqU32);
    assert_eq!(cmpx.operand(Field::Ds), None);
    let dpp8 = gfx10(Target::Gfx1030, &[0x7E00_02EA, 0x0539_7701]);
    assert_eq!(dpp8.dpp8, Some([7, 6, 5, 4, 3, 2, 1, 0]));
    assert!(dpp8.mods.fi && dpp8.dpp.is_none());
    assert_eq!(dpp8.operand(Field::S0), Some(Operand::Vgpr { index: 1, count: 1 }));
    let lit = gfx10(Target::Gfx1030, &[0xD525_0000, 0x0001_FF01, 0x1234_5678]);
    assert_eq!(lit.op, Op::VAddNcU32);
    assert_eq!(lit.operand(Field::S1), Some(Operand::Literal(0x1234_5678)));
    let load = gfx10(Target::Gfx1030, &[0xDC33_9FF8, 0x017D_0002]);
    assert!(load.mods.dlc && load.mods.glc && load.mods.slc);
    assert_eq!((load.mods.offset, load.operand(Field::Saddr)), (-8, Some(Operand::Off)));
    assert_eq!(Target::Gfx1030.wave_size(), 32);
}

#[test]
fn gfx1030_invalid_words_are_exact_errors() {
    let cases: &[(&[u32], DecodeError)] = &[
        // A VOP3 literal source with no literal dword.
        (&[0xD525_0000, 0x0001_FF01], DecodeError::Truncated { offset: 0, need: 12 }),
        (&[0xF000_0000, 0], DecodeError::UnsupportedEncoding { encoding: Encoding::Mimg, word: 0xF000_0000 }),
        (&[0xF800_0000, 0], DecodeError::UnsupportedEncoding { encoding: Encoding::Exp, word: 0xF800_0000 }),
        (&[0xE800_0000, 0], DecodeError::UnsupportedEncoding { encoding: Encoding::Mtbuf, word: 0xE800_0000 }),
        // gfx10 dropped wave_shl (DPP control 0x130).
        (
            &[0x7E00_02FA, 0xFF01_3001],
            DecodeError::Reserved { what: "gfx10 DPP control", value: 0x130, word: 0x7E00_02FA },
        ),
        // gfx9's VOP3 encoding is no gfx10 instruction.
        (&[0xD280_0000, 0x0002_0402], DecodeError::UnknownEncoding { word: 0xD280_0000 }),
    ];
    for (words, want) in cases {
        assert_eq!(decode(Target::Gfx1030, &bytes(words), 0).unwrap_err(), *want, "{words:x?}");
    }
}

#[test]
fn gfx1030_coverage_table() {
    coverage(Target::Gfx1030, 1200);
}
