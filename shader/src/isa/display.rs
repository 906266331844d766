//! Instructions printed in LLVM's assembler syntax, as `llvm-objdump-15 -d` prints them (the
//! differential test compares the two).

use std::fmt::{self, Display, Formatter, Write as _};

use super::inst::{Encoding, Instruction, Modifiers};
use super::operand::{fmt_operand, fmt_sgprs, InlineFloat, Operand};
use super::table::{
    Field, ImmFmt, SrcMods, F_GDS, F_GLC, F_I16_SRC0, F_LIT16, F_LIT16_SRC1, F_LIT16_SRC2, F_MAI, F_OFFSET2, F_OMOD,
    F_OPSEL, F_SWIZZLE,
};

const SEL: [&str; 8] = ["BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD", "SEL_7"];
const UNUSED: [&str; 4] = ["UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE", "UNUSED_3"];

fn source_index(field: Field) -> Option<u8> {
    match field {
        Field::S0 => Some(0),
        Field::S1 => Some(1),
        Field::S2 => Some(2),
        _ => None,
    }
}

fn waitcnt(f: &mut Formatter<'_>, v: u32, gfx10: bool) -> fmt::Result {
    let vm = (v & 0xf) | ((v >> 14) & 0x3) << 4;
    let exp = (v >> 4) & 0x7;
    // gfx10 widened lgkmcnt to bits 13:8 (RDNA2 ISA, S_WAITCNT).
    let (lgkm, lgkm_max) = if gfx10 { ((v >> 8) & 0x3f, 63) } else { ((v >> 8) & 0xf, 15) };
    let mut parts = Vec::new();
    if vm != 63 {
        parts.push(format!("vmcnt({vm})"));
    }
    if exp != 7 {
        parts.push(format!("expcnt({exp})"));
    }
    if lgkm != lgkm_max {
        parts.push(format!("lgkmcnt({lgkm})"));
    }
    if parts.is_empty() {
        parts = vec![format!("vmcnt({vm})"), format!("expcnt({exp})"), format!("lgkmcnt({lgkm})")];
    }
    f.write_str(&parts.join(" "))
}

/// gfx10's hardware register names (LLVM 15's SIDefines.h / AMDGPUAsmUtils.cpp).
fn hwreg_name_gfx10(id: u32) -> Option<&'static str> {
    Some(match id {
        1 => "HW_REG_MODE",
        2 => "HW_REG_STATUS",
        3 => "HW_REG_TRAPSTS",
        5 => "HW_REG_GPR_ALLOC",
        6 => "HW_REG_LDS_ALLOC",
        7 => "HW_REG_IB_STS",
        15 => "HW_REG_SH_MEM_BASES",
        16 => "HW_REG_TBA_LO",
        17 => "HW_REG_TBA_HI",
        18 => "HW_REG_TMA_LO",
        19 => "HW_REG_TMA_HI",
        20 => "HW_REG_FLAT_SCR_LO",
        21 => "HW_REG_FLAT_SCR_HI",
        23 => "HW_REG_HW_ID1",
        24 => "HW_REG_HW_ID2",
        25 => "HW_REG_POPS_PACKER",
        29 => "HW_REG_SHADER_CYCLES",
        _ => return None,
    })
}

fn hwreg(f: &mut Formatter<'_>, v: u32, gfx10: bool) -> fmt::Result {
    let id = v & 0x3f;
    let offset = (v >> 6) & 0x1f;
    let size = ((v >> 11) & 0x1f) + 1;
    let name = if gfx10 { hwreg_name_gfx10(id) } else { hwreg_name(id) };
    f.write_str("hwreg(")?;
    match name {
        Some(n) => f.write_str(n)?,
        None => write!(f, "{id}")?,
    }
    if offset != 0 || size != 32 {
        write!(f, ", {offset}, {size}")?;
    }
    f.write_str(")")
}

fn hwreg_name(id: u32) -> Option<&'static str> {
    match id {
        1 => Some("HW_REG_MODE"),
        2 => Some("HW_REG_STATUS"),
        3 => Some("HW_REG_TRAPSTS"),
        4 => Some("HW_REG_HW_ID"),
        5 => Some("HW_REG_GPR_ALLOC"),
        6 => Some("HW_REG_LDS_ALLOC"),
        7 => Some("HW_REG_IB_STS"),
        15 => Some("HW_REG_SH_MEM_BASES"),
        16 => Some("HW_REG_TBA_LO"),
        17 => Some("HW_REG_TBA_HI"),
        18 => Some("HW_REG_TMA_LO"),
        19 => Some("HW_REG_TMA_HI"),
        _ => None,
    }
}

/// gfx10 `s_sendmsg`: a known message with valid operation and stream prints by name, other
/// values that fit the fields as `sendmsg(id, op, stream)`, the rest as a number (LLVM 15's
/// AMDGPUInstPrinter::printSendMsg with gfx10's message table).
fn sendmsg_gfx10(f: &mut Formatter<'_>, v: u32) -> fmt::Result {
    // A valid message prints by name whatever bits 15:10 hold; other values print as fields
    // only when those bits are clear.
    let (id, op, stream) = (v & 0xf, (v >> 4) & 0x7, (v >> 8) & 0x3);
    let name = match id {
        1 => "MSG_INTERRUPT",
        2 => "MSG_GS",
        3 => "MSG_GS_DONE",
        4 => "MSG_SAVEWAVE",
        5 => "MSG_STALL_WAVE_GEN",
        6 => "MSG_HALT_WAVES",
        7 => "MSG_ORDERED_PS_DONE",
        8 => "MSG_EARLY_PRIM_DEALLOC",
        9 => "MSG_GS_ALLOC_REQ",
        10 => "MSG_GET_DOORBELL",
        11 => "MSG_GET_DDID",
        15 => "MSG_SYSMSG",
        _ => "",
    };
    let gs_ops = ["GS_OP_NOP", "GS_OP_CUT", "GS_OP_EMIT", "GS_OP_EMIT_CUT"];
    let sys_ops =
        ["", "SYSMSG_OP_ECC_ERR_INTERRUPT", "SYSMSG_OP_REG_RD", "SYSMSG_OP_HOST_TRAP_ACK", "SYSMSG_OP_TTRACE_PC"];
    match id {
        // MSG_GS needs an operation; streams go with operations other than NOP.
        2 | 3 if op <= 3 && !(id == 2 && op == 0) && (op != 0 || stream == 0) => {
            if op == 0 {
                write!(f, "sendmsg({name}, {})", gs_ops[0])
            } else {
                write!(f, "sendmsg({name}, {}, {stream})", gs_ops[op as usize])
            }
        }
        15 if (1..=4).contains(&op) && stream == 0 => write!(f, "sendmsg({name}, {})", sys_ops[op as usize]),
        1 | 4..=11 if op == 0 && stream == 0 => write!(f, "sendmsg({name})"),
        _ if v <= 0x3ff => write!(f, "sendmsg({id}, {op}, {stream})"),
        _ => write!(f, "{v}"),
    }
}

fn sendmsg(f: &mut Formatter<'_>, full: u32) -> fmt::Result {
    // The message is bits 9:0; LLVM names it whatever the bits above hold.
    let v = full & 0x3ff;
    let id = v & 0xf;
    let op = (v >> 4) & 0x7;
    let stream = (v >> 8) & 0x3;
    let gs_ops = ["GS_OP_NOP", "GS_OP_CUT", "GS_OP_EMIT", "GS_OP_EMIT_CUT"];
    let sys_ops =
        ["", "SYSMSG_OP_ECC_ERR_INTERRUPT", "SYSMSG_OP_REG_RD", "SYSMSG_OP_HOST_TRAP_ACK", "SYSMSG_OP_TTRACE_PC"];
    match id {
        1 if v == 1 => f.write_str("sendmsg(MSG_INTERRUPT)"),
        2 | 3 if op != 0 || id == 3 => {
            let msg = if id == 2 { "MSG_GS" } else { "MSG_GS_DONE" };
            match op {
                0 if stream == 0 => write!(f, "sendmsg({msg}, {})", gs_ops[0]),
                1..=3 => write!(f, "sendmsg({msg}, {}, {stream})", gs_ops[op as usize]),
                _ => write!(f, "{full}"),
            }
        }
        15 if (1..=4).contains(&op) && stream == 0 => write!(f, "sendmsg(MSG_SYSMSG, {})", sys_ops[op as usize]),
        _ => write!(f, "{full}"),
    }
}

/// `s_waitcnt_depctr`: the fields that differ from their all-ones default, in LLVM 15's order
/// (AMDGPUAsmUtils.cpp DepCtrInfo): (name, shift, width).
fn depctr(f: &mut Formatter<'_>, v: u32) -> fmt::Result {
    const FIELDS: [(&str, u32, u32); 6] = [
        ("depctr_sa_sdst", 0, 1),
        ("depctr_va_vdst", 12, 4),
        ("depctr_va_sdst", 9, 3),
        ("depctr_va_ssrc", 8, 1),
        ("depctr_va_vcc", 1, 1),
        ("depctr_vm_vsrc", 2, 3),
    ];
    let parts: Vec<String> = FIELDS
        .iter()
        .filter_map(|&(name, at, width)| {
            let x = (v >> at) & ((1 << width) - 1);
            (x != (1 << width) - 1).then(|| format!("{name}({x})"))
        })
        .collect();
    // Bits 7:5 hold no field; LLVM names the fields only when they are 0b100 (as in the
    // all-default encoding) and something differs from the default.
    if parts.is_empty() || (v >> 5) & 7 != 4 {
        return write!(f, "0x{v:x}");
    }
    f.write_str(&parts.join(" "))
}

fn gpr_idx(f: &mut Formatter<'_>, v: u32) -> fmt::Result {
    if v > 0xf {
        return write!(f, "0x{v:x}");
    }
    let names = ["SRC0", "SRC1", "SRC2", "DST"];
    let on: Vec<&str> = (0..4).filter(|i| v & (1 << i) != 0).map(|i| names[i]).collect();
    write!(f, "gpr_idx({})", on.join(","))
}

fn swizzle(f: &mut Formatter<'_>, v: u32) -> fmt::Result {
    if v & 0x8000 != 0 {
        let l = |i: u32| (v >> (2 * i)) & 3;
        return write!(f, "offset:swizzle(QUAD_PERM,{},{},{},{})", l(0), l(1), l(2), l(3));
    }
    let (and, or, xor) = (v & 0x1f, (v >> 5) & 0x1f, (v >> 10) & 0x1f);
    if and == 0x1f && or == 0 && xor.is_power_of_two() {
        return write!(f, "offset:swizzle(SWAP,{xor})");
    }
    if and == 0x1f && or == 0 && xor > 0 && (xor + 1).is_power_of_two() {
        return write!(f, "offset:swizzle(REVERSE,{})", xor + 1);
    }
    let size = 0x20 - and;
    if xor == 0 && size.is_power_of_two() && size > 1 && or < size && and | (size - 1) == 0x1f {
        return write!(f, "offset:swizzle(BROADCAST,{size},{or})");
    }
    let mut mask = String::new();
    for i in (0..5).rev() {
        let bit = |m: u32| (m >> i) & 1 != 0;
        mask.push(match (bit(and), bit(or), bit(xor)) {
            (false, false, _) => '0',
            (false, true, _) => '1',
            (true, _, false) => 'p',
            (true, _, true) => 'i',
        });
    }
    write!(f, "offset:swizzle(BITMASK_PERM,\"{mask}\")")
}

fn dpp_ctrl(out: &mut String, c: u16, gfx10: bool) {
    let _ = match c {
        // gfx10 reuses 0x150-0x15f (gfx90a's row_newbcast) for row_share.
        0x150..=0x15f if gfx10 => write!(out, " row_share:{}", c & 0xf),
        0x160..=0x16f if gfx10 => write!(out, " row_xmask:{}", c & 0xf),
        0x000..=0x0ff => write!(out, " quad_perm:[{},{},{},{}]", c & 3, (c >> 2) & 3, (c >> 4) & 3, (c >> 6) & 3),
        0x101..=0x10f => write!(out, " row_shl:{}", c & 0xf),
        0x111..=0x11f => write!(out, " row_shr:{}", c & 0xf),
        0x121..=0x12f => write!(out, " row_ror:{}", c & 0xf),
        0x130 => write!(out, " wave_shl:1"),
        0x134 => write!(out, " wave_rol:1"),
        0x138 => write!(out, " wave_shr:1"),
        0x13c => write!(out, " wave_ror:1"),
        0x140 => write!(out, " row_mirror"),
        0x141 => write!(out, " row_half_mirror"),
        0x142 => write!(out, " row_bcast:15"),
        0x143 => write!(out, " row_bcast:31"),
        0x150..=0x15f => write!(out, " row_newbcast:{}", c & 0xf),
        _ => write!(out, " dpp_ctrl:0x{c:x}"),
    };
}

fn bool_list(bits: u8, n: usize) -> String {
    let v: Vec<String> = (0..n).map(|i| ((bits >> i) & 1).to_string()).collect();
    format!("[{}]", v.join(","))
}

impl Display for Instruction {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(&self.mnemonic())?;
        let m = &self.mods;
        let ext = self.sdwa.is_some() || self.dpp.is_some();
        let gfx10 = self.target.is_gfx10();
        let vop3 = self.encoding == Encoding::Vop3;
        // VOP3P with floating-point source modifiers (v_fma_mix*): neg_lo negates, neg_hi is abs.
        let mix = self.encoding == Encoding::Vop3p && self.info.mods.contains(&SrcMods::Fp);
        let mut first = true;
        for i in 0..usize::from(self.count) {
            let (Some(slot), op) = (self.slots[i], self.operands[i]) else { continue };
            f.write_str(if first { " " } else { ", " })?;
            first = false;
            if self.encoding == Encoding::Smem && slot.field == Field::Imm {
                if let Operand::Imm(v) = op {
                    // s_atc_probe's code: decimal up to 64, hex above.
                    if v > 64 {
                        write!(f, "0x{v:x}")?;
                    } else {
                        write!(f, "{v}")?;
                    }
                    continue;
                }
            }
            if slot.field == Field::Imm {
                if let Operand::Imm(v) = op {
                    match self.info.imm {
                        ImmFmt::Waitcnt => waitcnt(f, v, false)?,
                        ImmFmt::WaitcntGfx10 => waitcnt(f, v, true)?,
                        ImmFmt::Hwreg => hwreg(f, v, false)?,
                        ImmFmt::HwregGfx10 => hwreg(f, v, true)?,
                        ImmFmt::Sendmsg => sendmsg(f, v)?,
                        ImmFmt::SendmsgGfx10 => sendmsg_gfx10(f, v)?,
                        ImmFmt::DepCtr => depctr(f, v)?,
                        ImmFmt::GprIdx => gpr_idx(f, v)?,
                        ImmFmt::Hex => write!(f, "0x{v:x}")?,
                        ImmFmt::DecSmall if v > 64 => write!(f, "0x{v:x}")?,
                        ImmFmt::SignedDec => write!(f, "{}", v as u16 as i16)?,
                        _ => write!(f, "{v}")?,
                    }
                    continue;
                }
            }
            if self.encoding == Encoding::Smem && slot.field == Field::Off {
                if let Operand::Imm(v) = op {
                    write!(f, "{}", SmemOffset(v as i32))?;
                    continue;
                }
            }
            let src = source_index(slot.field).filter(|_| vop3 || ext || mix);
            let (neg, abs, sext) = match src {
                Some(s) => {
                    let bit = |v: u8| v >> s & 1 != 0;
                    let kind = if self.dpp.is_some() { self.info.dpp_mods } else { self.info.mods };
                    match kind[usize::from(s)] {
                        SrcMods::Fp if mix => (bit(m.neg), bit(m.neg_hi), false),
                        SrcMods::Fp => (bit(m.neg), bit(m.abs), false),
                        // VOP3 integer operands: LLVM reads the neg bit as sext.
                        SrcMods::Int if vop3 => (false, false, bit(m.neg)),
                        SrcMods::Int if self.sdwa.is_some() => (false, false, bit(m.sext)),
                        // DPP integer operands: the neg bit is sext.
                        SrcMods::Int if self.dpp.is_some() => (false, false, bit(m.neg)),
                        _ => (false, false, false),
                    }
                }
                None => (false, false, false),
            };
            // A 16-bit integer operand: float constants as f16 bits, literals as 16 bits.
            if let Some(s) = source_index(slot.field) {
                let int16 = self.info.flags & (F_I16_SRC0 << s) != 0;
                // gfx10 VOP3 marks its other 16-bit sources (the flag bits are VOP3's there).
                let packed = self.encoding == Encoding::Vop3p;
                let lit16_vop3 =
                    (vop3 || packed) && [0, F_LIT16_SRC1, F_LIT16_SRC2][usize::from(s)] & self.info.flags != 0;
                let lit16_vop3 = lit16_vop3 || (packed && s == 0 && self.info.flags & F_LIT16 != 0);
                let lit16 = int16 || (s == 0 && self.info.flags & F_LIT16 != 0) || lit16_vop3;
                let half = match op {
                    Operand::Float(c) if int16 => Some(f16_bits(c)),
                    Operand::Literal(v) if lit16 => Some(v & 0xffff),
                    _ => None,
                };
                if let Some(h) = half {
                    let float = if int16 { None } else { f16_name(h) };
                    let text = if let Some(name) = float {
                        name.to_string()
                    } else if (-16..=64).contains(&(h as i16)) {
                        (h as i16).to_string()
                    } else {
                        format!("0x{h:x}")
                    };
                    // A negated constant without abs prints as neg(c).
                    match (neg, abs) {
                        (true, false) => write!(f, "neg({text})")?,
                        (true, true) => write!(f, "-|{text}|")?,
                        (false, true) => write!(f, "|{text}|")?,
                        _ => f.write_str(&text)?,
                    }
                    continue;
                }
            }
            // A negated constant without abs prints as neg(c) (`-8` would read as the constant -8).
            let constant = matches!(op, Operand::Int(_) | Operand::Float(_) | Operand::Literal(_));
            if neg && !abs && constant {
                f.write_str("neg(")?;
                fmt_operand(f, &op, slot.width)?;
                f.write_str(")")?;
                continue;
            }
            if neg {
                f.write_str("-")?;
            }
            if abs {
                f.write_str("|")?;
            }
            if sext {
                f.write_str("sext(")?;
            }
            // Packed operands hold 32-bit (or 16-bit) elements: a 32-bit constant's spelling.
            let width = if self.encoding == Encoding::Vop3p { 1 } else { slot.width };
            match op {
                // gfx10 has no flat_scratch or xnack_mask operands: 102-105 are plain SGPRs.
                Operand::Sgpr { index: index @ 102..=105, count } if gfx10 => fmt_sgprs(f, index, count)?,
                _ => fmt_operand(f, &op, width)?,
            }
            if sext {
                f.write_str(")")?;
            }
            if abs {
                f.write_str("|")?;
            }
        }
        let mut tail = String::new();
        match self.encoding {
            Encoding::Vop3 => {
                let n = self.slots.iter().flatten().filter(|s| source_index(s.field).is_some()).count();
                // gfx10 v_permlane*: op_sel's two bits are fetch-inactive and bound_ctrl.
                let permlane = gfx10 && self.op.mnemonic().starts_with("v_permlane");
                if permlane && m.op_sel & 3 != 0 {
                    let _ = write!(tail, " op_sel:{}", bool_list(m.op_sel & 3, 2));
                } else if !permlane && m.op_sel != 0 && self.info.flags & F_OPSEL != 0 {
                    let bits = (m.op_sel & ((1 << n) - 1)) | ((m.op_sel >> 3) & 1) << n;
                    let _ = write!(tail, " op_sel:{}", bool_list(bits, n + 1));
                }
                vop3_tail(&mut tail, m.clamp, if self.info.flags & F_OMOD != 0 { m.omod } else { 0 });
            }
            Encoding::Vop3p if self.info.flags & F_MAI != 0 => {
                for (name, v) in [("cbsz", m.cbsz), ("abid", m.abid), ("blgp", m.blgp)] {
                    if v != 0 {
                        let _ = write!(tail, " {name}:{v}");
                    }
                }
            }
            Encoding::Vop3p => {
                let n = self.slots.iter().flatten().filter(|s| source_index(s.field).is_some()).count();
                let full = (1u8 << n) - 1;
                if m.op_sel & full != 0 {
                    let _ = write!(tail, " op_sel:{}", bool_list(m.op_sel, n));
                }
                // op_sel_hi defaults to all ones, and to zeros for the mix instructions.
                let default_hi = if mix { 0 } else { full };
                if m.op_sel_hi & full != default_hi {
                    let _ = write!(tail, " op_sel_hi:{}", bool_list(m.op_sel_hi, n));
                }
                if m.neg & full != 0 && !mix {
                    let _ = write!(tail, " neg_lo:{}", bool_list(m.neg, n));
                }
                if m.neg_hi & full != 0 && !mix {
                    let _ = write!(tail, " neg_hi:{}", bool_list(m.neg_hi, n));
                }
                if m.clamp {
                    tail.push_str(" clamp");
                }
            }
            Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc => {
                if let Some(s) = self.sdwa {
                    vop3_tail(&mut tail, m.clamp, m.omod);
                    if self.encoding != Encoding::Vopc {
                        let _ = write!(
                            tail,
                            " dst_sel:{} dst_unused:{}",
                            SEL[usize::from(s.dst_sel)],
                            // gfx10 LLVM prints the reserved value 3 as UNUSED_PAD.
                            if gfx10 && s.dst_unused == 3 { UNUSED[0] } else { UNUSED[usize::from(s.dst_unused)] }
                        );
                    }
                    let _ = write!(tail, " src0_sel:{}", SEL[usize::from(s.src0_sel)]);
                    if self.encoding != Encoding::Vop1 {
                        let _ = write!(tail, " src1_sel:{}", SEL[usize::from(s.src1_sel)]);
                    }
                }
                if let Some(d) = self.dpp {
                    dpp_ctrl(&mut tail, d.ctrl, gfx10);
                    let _ = write!(tail, " row_mask:0x{:x} bank_mask:0x{:x}", d.row_mask, d.bank_mask);
                    if d.bound_ctrl {
                        tail.push_str(" bound_ctrl:1");
                    }
                }
                if let Some(sel) = self.dpp8 {
                    let sel: Vec<String> = sel.iter().map(u8::to_string).collect();
                    let _ = write!(tail, " dpp8:[{}]", sel.join(","));
                }
                if m.fi {
                    tail.push_str(" fi:1");
                }
            }
            Encoding::Sopp | Encoding::Sopk => {}
            Encoding::Smem => {
                if m.imm_offset {
                    tail.push_str(" offset:");
                    let _ = write!(tail, "{}", SmemOffset(m.offset));
                }
                if m.glc && self.info.flags & F_GLC != 0 {
                    tail.push_str(" glc");
                }
                if m.dlc && self.info.flags & F_GLC != 0 {
                    tail.push_str(" dlc");
                }
            }
            Encoding::Ds => {
                if self.info.flags & F_SWIZZLE != 0 {
                    tail.push(' ');
                    let mut s = String::new();
                    let _ = write!(s, "{}", Swizzle(m.offset as u32));
                    tail.push_str(&s);
                } else if self.info.flags & F_OFFSET2 != 0 {
                    if m.offset != 0 {
                        let _ = write!(tail, " offset0:{}", m.offset);
                    }
                    if m.offset1 != 0 {
                        let _ = write!(tail, " offset1:{}", m.offset1);
                    }
                } else if m.offset != 0 {
                    let _ = write!(tail, " offset:{}", m.offset);
                }
                if m.gds || self.info.flags & F_GDS != 0 {
                    tail.push_str(" gds");
                }
            }
            Encoding::Flat | Encoding::Global | Encoding::Scratch => {
                if m.offset != 0 {
                    let _ = write!(tail, " offset:{}", m.offset);
                }
                mem_bits(&mut tail, m);
            }
            // Cache invalidations (buffer_wbinvl1) print no fields.
            Encoding::Mubuf if self.info.slots.is_empty() => {}
            Encoding::Mubuf => {
                if m.idxen {
                    tail.push_str(" idxen");
                }
                if m.offen {
                    tail.push_str(" offen");
                }
                if m.offset != 0 {
                    let _ = write!(tail, " offset:{}", m.offset);
                }
                mem_bits(&mut tail, m);
            }
            _ => {}
        }
        f.write_str(&tail)
    }
}

/// The f16 encoding of an inline float constant.
fn f16_bits(c: InlineFloat) -> u32 {
    match c {
        InlineFloat::Half => 0x3800,
        InlineFloat::NegHalf => 0xb800,
        InlineFloat::One => 0x3c00,
        InlineFloat::NegOne => 0xbc00,
        InlineFloat::Two => 0x4000,
        InlineFloat::NegTwo => 0xc000,
        InlineFloat::Four => 0x4400,
        InlineFloat::NegFour => 0xc400,
        InlineFloat::InvTwoPi => 0x3118,
    }
}

/// The inline float constant whose f16 encoding is `h`, if any.
fn f16_name(h: u32) -> Option<&'static str> {
    Some(match h {
        0x3800 => "0.5",
        0xb800 => "-0.5",
        0x3c00 => "1.0",
        0xbc00 => "-1.0",
        0x4000 => "2.0",
        0xc000 => "-2.0",
        0x4400 => "4.0",
        0xc400 => "-4.0",
        0x3118 => "0.15915494",
        _ => return None,
    })
}

/// An SMEM byte offset, in signed hex.
struct SmemOffset(i32);

impl Display for SmemOffset {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.0 < 0 {
            write!(f, "-0x{:x}", -i64::from(self.0))
        } else {
            write!(f, "0x{:x}", self.0)
        }
    }
}

/// Wraps a swizzle offset for printing.
struct Swizzle(u32);

impl Display for Swizzle {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        swizzle(f, self.0)
    }
}

fn vop3_tail(tail: &mut String, clamp: bool, omod: u8) {
    if clamp {
        tail.push_str(" clamp");
    }
    match omod {
        1 => tail.push_str(" mul:2"),
        2 => tail.push_str(" mul:4"),
        3 => tail.push_str(" div:2"),
        _ => {}
    }
}

fn mem_bits(tail: &mut String, m: &Modifiers) {
    // LLVM prints tfe only without lds.
    let tfe = m.tfe && !m.lds;
    for (on, name) in
        [(m.glc, " glc"), (m.slc, " slc"), (m.dlc, " dlc"), (m.scc, " scc"), (m.lds, " lds"), (tfe, " tfe")]
    {
        if on {
            tail.push_str(name);
        }
    }
}
