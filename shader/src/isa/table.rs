//! The shape of the generated opcode tables (`gfx90a.rs`, `gfx1030.rs`): per encoding, a dense array indexed
//! by the opcode field, `None` where LLVM knows no instruction.

use super::op::Op;

/// Which field of the encoding a printed operand comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The destination: vdst (VOP*), sdst (SOP*), sdata (SMEM), vdst/vdata (DS, FLAT, MUBUF).
    D,
    /// A VOP destination field that names an SGPR (v_readlane_b32, VOP3 compares).
    Ds,
    /// The VOP3b scalar destination (carry-out, v_div_scale).
    Sd,
    /// Source operands 0, 1, 2 (`ssrc0`/`src0`, `ssrc1`/`vsrc1`/`src1`, `src2`).
    S0,
    S1,
    S2,
    /// The implicit VCC operand VOP2/VOPC print.
    Vcc,
    /// A 32-bit literal constant that is part of the instruction (v_madmk_f32, s_setreg_imm32).
    K,
    /// A 16-bit immediate (SOPK, SOPP), s_atc_probe's 3-bit code, or SOPC's gpr_idx mask.
    Imm,
    /// SMEM base address (SGPR pair or quad).
    Base,
    /// SMEM offset (immediate or SGPR).
    Off,
    /// Memory address VGPR(s) (DS addr, FLAT addr, MUBUF vaddr).
    Addr,
    /// Data VGPR(s) (DS data0, FLAT data).
    Data0,
    /// DS data1.
    Data1,
    /// FLAT/GLOBAL/SCRATCH saddr (`off` when 0x7f).
    Saddr,
    /// MUBUF resource descriptor (SGPR quad).
    Rsrc,
    /// MUBUF soffset.
    Soff,
}

/// A printed operand: the field it comes from, its width in dwords, and whether the field always
/// names an accumulation register (v_accvgpr_*, MFMA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub field: Field,
    pub width: u8,
    pub agpr: bool,
    /// gfx10: a lane mask (VCC, a carry, a compare result): one SGPR in wave32 (`width` 1), a
    /// pair in wave64 (the decoder widens it).
    pub lane: bool,
}

/// Builds a [`Slot`] (keeps the generated tables short).
pub const fn s(field: Field, width: u8) -> Slot {
    Slot { field, width, agpr: false, lane: false }
}

/// Builds a [`Slot`] of an AGPR operand.
pub const fn a(field: Field, width: u8) -> Slot {
    Slot { field, width, agpr: true, lane: false }
}

/// Builds a lane-mask [`Slot`] (as wave32 has it).
pub const fn l(field: Field) -> Slot {
    Slot { field, width: 1, agpr: false, lane: true }
}

/// How a 16-bit immediate prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImmFmt {
    /// No immediate operand.
    None,
    Dec,
    SignedDec,
    Hex,
    /// Decimal up to 64, hex above.
    DecSmall,
    /// `vmcnt(n) expcnt(n) lgkmcnt(n)`.
    Waitcnt,
    /// `sendmsg(MSG_..)`.
    Sendmsg,
    /// `hwreg(HW_REG_.., offset, size)`.
    Hwreg,
    /// `gpr_idx(SRC0,..)`.
    GprIdx,
    /// gfx10 `s_waitcnt`: lgkmcnt is 6 bits (13:8).
    WaitcntGfx10,
    /// gfx10 hardware register names.
    HwregGfx10,
    /// gfx10 message names.
    SendmsgGfx10,
    /// gfx10 `s_waitcnt_depctr`'s fields.
    DepCtr,
}

/// The instruction has an SDWA form (VOP1/VOP2/VOPC).
pub const F_SDWA: u16 = 1 << 0;
/// The instruction has a DPP form (VOP1/VOP2/VOPC).
pub const F_DPP: u16 = 1 << 1;
/// DS: two 8-bit offsets (offset0/offset1) instead of one 16-bit offset.
pub const F_OFFSET2: u16 = 1 << 2;
/// DS: the offset is a swizzle pattern (ds_swizzle_b32).
pub const F_SWIZZLE: u16 = 1 << 3;
/// DS: always prints `gds` (the GWS instructions).
pub const F_GDS: u16 = 1 << 4;
/// The immediate is omitted when zero (s_endpgm).
pub const F_IMM_OMIT_ZERO: u16 = 1 << 5;
/// VOP3P: a matrix (MFMA) instruction with cbsz/abid/blgp.
pub const F_MAI: u16 = 1 << 6;

/// VOP3: op_sel applies (the 16-bit operations).
pub const F_OPSEL: u16 = 1 << 7;
/// VOP3: the output modifier (mul:2, mul:4, div:2) applies.
pub const F_OMOD: u16 = 1 << 8;
/// VOP1: src0 names only VGPRs (v_swap_b32).
pub const F_VSRC0: u16 = 1 << 9;

/// SMEM: the instruction has a glc bit.
pub const F_GLC: u16 = 1 << 10;

/// src0 (`<< 1`: src1, `<< 2`: src2) is a 16-bit integer operand: LLVM prints an inline float
/// constant there as its f16 bits and a literal as its low 16 bits.
pub const F_I16_SRC0: u16 = 1 << 11;
pub const F_I16_SRC1: u16 = 1 << 12;
pub const F_I16_SRC2: u16 = 1 << 13;

/// VOP1/VOP2/VOPC (gfx10: also VOP3): src0 is a 16-bit operand (a literal prints as its low
/// half).
pub const F_LIT16: u16 = 1 << 14;
/// gfx10 VOP3: src1 (src2) is a 16-bit operand. VOP3 only: these share their bits with DS's
/// [`F_OFFSET2`] and [`F_SWIZZLE`] (the flags are full).
pub const F_LIT16_SRC1: u16 = 1 << 2;
pub const F_LIT16_SRC2: u16 = 1 << 3;

/// gfx10 SDWA (VOP1/VOP2): the output modifier applies (gfx10 rejects it elsewhere).
pub const F_SDWA_OMOD: u16 = 1 << 15;

/// Which source modifiers an operand takes (and LLVM prints).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrcMods {
    /// None.
    None,
    /// Floating point: negate and absolute value (`-|x|`).
    Fp,
    /// Integer (SDWA, some VOP3): sign extension (`sext(x)`).
    Int,
}

/// Short names for the generated tables.
pub const MN: SrcMods = SrcMods::None;
pub const MF: SrcMods = SrcMods::Fp;
pub const MI: SrcMods = SrcMods::Int;

/// One opcode of one encoding.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo {
    /// The operation.
    pub op: Op,
    /// The mnemonic LLVM prints for this encoding (`v_add_f32_e32`).
    pub name: &'static str,
    /// The printed operands, in order.
    pub slots: &'static [Slot],
    /// How the 16-bit immediate prints.
    pub imm: ImmFmt,
    /// `F_*` bits.
    pub flags: u16,
    /// The modifiers src0..2 take: of the VOP3/VOP3P form in those tables, of the SDWA form in
    /// the VOP1/VOP2/VOPC tables.
    pub mods: [SrcMods; 3],
    /// The modifiers src0..1 take in the DPP form (VOP1/VOP2/VOPC).
    pub dpp_mods: [SrcMods; 3],
}
