//! The decoded instruction.

use super::op::{Op, OP_NAMES};
use super::operand::Operand;
use super::table::{Field, OpInfo, Slot};
use super::Target;

/// Most operands an instruction prints (VOP3b: vdst, sdst, src0, src1, src2).
pub const MAX_OPERANDS: usize = 6;

/// The microcode format an instruction was decoded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    Sop1,
    Sop2,
    Sopk,
    Sopc,
    Sopp,
    Smem,
    Vop1,
    Vop2,
    Vopc,
    /// VOP3 (VOP3a, and VOP3b with a scalar destination), including the VOP3 forms of
    /// VOP1/VOP2/VOPC.
    Vop3,
    Vop3p,
    Ds,
    Flat,
    Global,
    Scratch,
    Mubuf,
    Mtbuf,
    Mimg,
    Exp,
    Vintrp,
}

impl Encoding {
    /// Every encoding, in the manual's order.
    pub const ALL: [Encoding; 20] = [
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

    /// The manual's name of the format.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Sop1 => "SOP1",
            Encoding::Sop2 => "SOP2",
            Encoding::Sopk => "SOPK",
            Encoding::Sopc => "SOPC",
            Encoding::Sopp => "SOPP",
            Encoding::Smem => "SMEM",
            Encoding::Vop1 => "VOP1",
            Encoding::Vop2 => "VOP2",
            Encoding::Vopc => "VOPC",
            Encoding::Vop3 => "VOP3",
            Encoding::Vop3p => "VOP3P",
            Encoding::Ds => "DS",
            Encoding::Flat => "FLAT",
            Encoding::Global => "GLOBAL",
            Encoding::Scratch => "SCRATCH",
            Encoding::Mubuf => "MUBUF",
            Encoding::Mtbuf => "MTBUF",
            Encoding::Mimg => "MIMG",
            Encoding::Exp => "EXP",
            Encoding::Vintrp => "VINTRP",
        }
    }
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Op {
    /// The base mnemonic (`v_add_f32` for `v_add_f32_e32`).
    pub fn mnemonic(self) -> &'static str {
        OP_NAMES[self as usize]
    }
}

/// Source and result modifiers, and the cache and offset bits of memory instructions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modifiers {
    /// Per source (bit 0 = src0): absolute value (VOP3, SDWA, DPP).
    pub abs: u8,
    /// Per source: negate (VOP3, SDWA, DPP); VOP3P: neg_lo.
    pub neg: u8,
    /// VOP3P: negate the high half.
    pub neg_hi: u8,
    /// SDWA: sign-extend the selected part.
    pub sext: u8,
    /// VOP3/VOP3P op_sel (VOP3: bit 3 = destination).
    pub op_sel: u8,
    /// VOP3P op_sel_hi.
    pub op_sel_hi: u8,
    pub clamp: bool,
    /// Output modifier: 0 none, 1 *2, 2 *4, 3 /2.
    pub omod: u8,
    /// Memory offset in bytes (DS: offset, or offset0 with [`Modifiers::offset1`]).
    pub offset: i32,
    /// SMEM: an immediate offset besides the SGPR offset (SOE and IMM both set).
    pub imm_offset: bool,
    /// DS read2/write2: the second 8-bit offset.
    pub offset1: u8,
    pub glc: bool,
    pub slc: bool,
    pub lds: bool,
    /// gfx90a FLAT/MUBUF: system coherence (sc1 on later targets).
    pub scc: bool,
    pub offen: bool,
    pub idxen: bool,
    pub gds: bool,
    /// gfx90a: data and destination of a memory instruction (or MFMA's C/D) are AGPRs.
    pub acc: bool,
    /// MFMA broadcast controls.
    pub cbsz: u8,
    pub abid: u8,
    pub blgp: u8,
    /// gfx10 SMEM/FLAT/MUBUF: device level coherent (bypass the L1 cache).
    pub dlc: bool,
    /// gfx10 DPP16/DPP8: fetch inactive lanes (FI): a source lane that is disabled by EXEC
    /// still supplies its value instead of 0/the old value.
    pub fi: bool,
    /// gfx10 MUBUF: texture fail enable (a load also writes a status dword).
    pub tfe: bool,
}

/// SDWA (sub-dword addressing) selects: 0-3 BYTE_0..3, 4-5 WORD_0..1, 6 DWORD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sdwa {
    pub dst_sel: u8,
    /// 0 UNUSED_PAD, 1 UNUSED_SEXT, 2 UNUSED_PRESERVE.
    pub dst_unused: u8,
    pub src0_sel: u8,
    pub src1_sel: u8,
}

/// DPP (data-parallel primitives) controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dpp {
    /// dpp_ctrl: quad_perm, row shifts, wave shifts, broadcasts.
    pub ctrl: u16,
    pub row_mask: u8,
    pub bank_mask: u8,
    pub bound_ctrl: bool,
}

/// One decoded instruction.
#[derive(Clone, Copy, Debug)]
pub struct Instruction {
    pub encoding: Encoding,
    /// The operation: execution dispatches on it.
    pub op: Op,
    /// The table entry (printed mnemonic, operand slots).
    pub info: &'static OpInfo,
    /// Size in bytes, literal included.
    pub size: u8,
    pub(crate) operands: [Operand; MAX_OPERANDS],
    pub(crate) slots: [Option<Slot>; MAX_OPERANDS],
    pub(crate) count: u8,
    pub mods: Modifiers,
    pub sdwa: Option<Sdwa>,
    pub dpp: Option<Dpp>,
    /// gfx10 DPP8: for each lane of a group of 8, the lane (0-7) of the group it reads src0 from.
    pub dpp8: Option<[u8; 8]>,
    /// The target it was decoded for (its wave size; gfx10 prints some registers differently).
    pub target: Target,
}

impl Instruction {
    pub(crate) fn new(encoding: Encoding, info: &'static OpInfo) -> Self {
        Instruction {
            encoding,
            op: info.op,
            info,
            size: 4,
            operands: [Operand::None; MAX_OPERANDS],
            slots: [None; MAX_OPERANDS],
            count: 0,
            mods: Modifiers::default(),
            sdwa: None,
            dpp: None,
            dpp8: None,
            target: Target::Gfx90a,
        }
    }

    pub(crate) fn push(&mut self, slot: Slot, op: Operand) {
        let i = usize::from(self.count);
        self.operands[i] = op;
        self.slots[i] = Some(slot);
        self.count += 1;
    }

    /// The operands in the order LLVM prints them.
    pub fn operands(&self) -> &[Operand] {
        &self.operands[..usize::from(self.count)]
    }

    /// The operand that came from `field`, if the instruction has one.
    pub fn operand(&self, field: Field) -> Option<Operand> {
        (0..usize::from(self.count))
            .find(|&i| self.slots[i].is_some_and(|s| s.field == field))
            .map(|i| self.operands[i])
    }

    /// The mnemonic LLVM prints (`v_add_f32_e32`, `v_add_f32_sdwa`, ...).
    pub fn mnemonic(&self) -> std::borrow::Cow<'static, str> {
        let base = self.op.mnemonic();
        if self.sdwa.is_some() {
            format!("{base}_sdwa").into()
        } else if self.dpp.is_some() || self.dpp8.is_some() {
            format!("{base}_dpp").into()
        } else {
            self.info.name.into()
        }
    }
}
