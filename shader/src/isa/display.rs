//! Instructions printed in LLVM's assembler syntax, as `llvm-objdump-15 -d` prints them (the
//! differential test compares the two).

use std::fmt::{self, Display, Formatter, Write as _};

use super::inst::{Encoding, Instruction};
use super::operand::{fmt_operand, Operand};
use super::table::{Field, ImmFmt, F_GDS, F_MAI, F_OFFSET2, F_SWIZZLE};

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

fn waitcnt(f: &mut Formatter<'_>, v: u32) -> fmt::Result {
    let vm = (v & 0xf) | ((v >> 14) & 0x3) << 4;
    let exp = (v >> 4) & 0x7;
    let lgkm = (v >> 8) & 0xf;
    let mut parts = Vec::new();
    if vm != 63 {
        parts.push(format!("vmcnt({vm})"));
    }
    if exp != 7 {
        parts.push(format!("expcnt({exp})"));
    }
    if lgkm != 15 {
        parts.push(format!("lgkmcnt({lgkm})"));
    }
    if parts.is_empty() {
        parts = vec![format!("vmcnt({vm})"), format!("expcnt({exp})"), format!("lgkmcnt({lgkm})")];
    }
    f.write_str(&parts.join(" "))
}

fn hwreg(f: &mut Formatter<'_>, v: u32) -> fmt::Result {
    let id = v & 0x3f;
    let offset = (v >> 6) & 0x1f;
    let size = ((v >> 11) & 0x1f) + 1;
    let name = match id {
        1 => Some("HW_REG_MODE"),
        2 => Some("HW_REG_STATUS"),
        3 => Some("HW_REG_TRAPSTS"),
        4 => Some("HW_REG_HW_ID"),
        5 => Some("HW_REG_GPR_ALLOC"),
        6 => Some("HW_REG_LDS_ALLOC"),
        7 => Some("HW_REG_IB_STS"),
        15 => Some("HW_REG_SH_MEM_BASES"),
        _ => None,
    };
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

fn sendmsg(f: &mut Formatter<'_>, v: u32) -> fmt::Result {
    let id = v & 0xf;
    let op = (v >> 4) & 0x7;
    let stream = (v >> 8) & 0x3;
    match id {
        1 if v >> 4 == 0 => f.write_str("sendmsg(MSG_INTERRUPT)"),
        15 if v >> 4 == 0 => f.write_str("sendmsg(MSG_SYSMSG)"),
        2 | 3 if v >> 10 == 0 => {
            let msg = if id == 2 { "MSG_GS" } else { "MSG_GS_DONE" };
            let ops = ["GS_OP_NOP", "GS_OP_CUT", "GS_OP_EMIT", "GS_OP_EMIT_CUT"];
            match ops.get(op as usize) {
                Some(o) if op != 0 => write!(f, "sendmsg({msg}, {o}, {stream})"),
                Some(o) => write!(f, "sendmsg({msg}, {o})"),
                None => write!(f, "sendmsg({id}, {op}, {stream})"),
            }
        }
        _ => write!(f, "sendmsg({id}, {op}, {stream})"),
    }
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

fn dpp_ctrl(out: &mut String, c: u16) {
    let _ = match c {
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
        let vop3 = self.encoding == Encoding::Vop3;
        let mut first = true;
        let mut sources = 0;
        for i in 0..usize::from(self.count) {
            let (Some(slot), op) = (self.slots[i], self.operands[i]) else { continue };
            f.write_str(if first { " " } else { ", " })?;
            first = false;
            if slot.field == Field::Imm {
                if let Operand::Imm(v) = op {
                    match self.info.imm {
                        ImmFmt::Waitcnt => waitcnt(f, v)?,
                        ImmFmt::Hwreg => hwreg(f, v)?,
                        ImmFmt::Sendmsg => sendmsg(f, v)?,
                        ImmFmt::GprIdx => gpr_idx(f, v)?,
                        ImmFmt::Hex => write!(f, "0x{v:x}")?,
                        ImmFmt::SignedDec => write!(f, "{}", v as u16 as i16)?,
                        _ => write!(f, "{v}")?,
                    }
                    continue;
                }
            }
            if self.encoding == Encoding::Smem && slot.field == Field::Off {
                if let Operand::Imm(v) = op {
                    let v = v as i32;
                    if v < 0 {
                        write!(f, "-0x{:x}", -(v as i64))?;
                    } else {
                        write!(f, "0x{v:x}")?;
                    }
                    continue;
                }
            }
            let src = source_index(slot.field).filter(|_| vop3 || ext);
            let (neg, abs, sext) = match src {
                Some(s) => {
                    sources = sources.max(s + 1);
                    (m.neg >> s & 1 != 0, m.abs >> s & 1 != 0, m.sext >> s & 1 != 0)
                }
                None => (false, false, false),
            };
            if neg {
                f.write_str("-")?;
            }
            if abs {
                f.write_str("|")?;
            }
            if sext {
                f.write_str("sext(")?;
            }
            fmt_operand(f, &op, slot.width)?;
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
                if m.op_sel != 0 {
                    let bits = (m.op_sel & ((1 << n) - 1)) | ((m.op_sel >> 3) & 1) << n;
                    let _ = write!(tail, " op_sel:{}", bool_list(bits, n + 1));
                }
                vop3_tail(&mut tail, m.clamp, m.omod);
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
                if m.op_sel_hi & full != full {
                    let _ = write!(tail, " op_sel_hi:{}", bool_list(m.op_sel_hi, n));
                }
                if m.neg & full != 0 {
                    let _ = write!(tail, " neg_lo:{}", bool_list(m.neg, n));
                }
                if m.neg_hi & full != 0 {
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
                            UNUSED[usize::from(s.dst_unused)]
                        );
                    }
                    let _ = write!(tail, " src0_sel:{}", SEL[usize::from(s.src0_sel)]);
                    if self.encoding != Encoding::Vop1 {
                        let _ = write!(tail, " src1_sel:{}", SEL[usize::from(s.src1_sel)]);
                    }
                }
                if let Some(d) = self.dpp {
                    dpp_ctrl(&mut tail, d.ctrl);
                    let _ = write!(tail, " row_mask:0x{:x} bank_mask:0x{:x}", d.row_mask, d.bank_mask);
                    if d.bound_ctrl {
                        tail.push_str(" bound_ctrl:1");
                    }
                }
            }
            Encoding::Sopp | Encoding::Sopk => {}
            Encoding::Smem if m.glc => tail.push_str(" glc"),
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
                mem_bits(&mut tail, m.glc, m.slc, m.lds);
            }
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
                mem_bits(&mut tail, m.glc, m.slc, m.lds);
            }
            _ => {}
        }
        f.write_str(&tail)
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

fn mem_bits(tail: &mut String, glc: bool, slc: bool, lds: bool) {
    if glc {
        tail.push_str(" glc");
    }
    if slc {
        tail.push_str(" slc");
    }
    if lds {
        tail.push_str(" lds");
    }
}
