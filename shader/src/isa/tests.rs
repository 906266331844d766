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

/// Prints, per encoding, how many opcodes LLVM 15 knows and the decoder decodes (every table
/// entry is decoded through its encoding's field layout; encodings without a table decode none).
#[test]
fn coverage_table() {
    let encodings = [
        Encoding::Sop1,
        Encoding::Sop2,
        Encoding::Sopk,
        Encoding::Sopc,
        Encoding::Sopp,
        Encoding::Smem,
        Encoding::Vop1,
        Encoding::Vop2,
        Encoding::Vopc,
        Encoding::Vop3,
        Encoding::Vop3p,
        Encoding::Ds,
        Encoding::Flat,
        Encoding::Global,
        Encoding::Scratch,
        Encoding::Mubuf,
        Encoding::Mtbuf,
        Encoding::Mimg,
        Encoding::Exp,
        Encoding::Vintrp,
    ];
    let mut total = 0;
    println!("gfx90a decoder coverage (opcodes decoded / known to LLVM 15.0.6's disassembler):");
    for e in encodings {
        match Target::Gfx90a.table(e) {
            Some(t) => {
                let n = t.iter().flatten().count();
                total += n;
                println!("  {:8} {n:4} / {n:4}", e.name());
            }
            None => println!("  {:8}    0 / not tabulated (decoding it is an UnsupportedEncoding error)", e.name()),
        }
    }
    println!("  total    {total}");
    assert!(total > 1400, "the gfx90a tables shrank to {total} opcodes");
}
