//! The gfx9 decoder (GCN5 and CDNA2 as gfx90a uses them): field layouts from AMD's "Instinct
//! MI200 (CDNA2) ISA Reference Guide", chapter "Microcode Formats"; opcodes from the generated
//! tables ([`super::gfx90a`]).

use super::gfx90a as t;
use super::inst::{Dpp, Encoding, Instruction, Sdwa};
use super::operand::{source, Operand};
use super::table::{Field, OpInfo, Slot};
use super::{DecodeError, Result};

/// The bits `lo..=hi` of `w`.
pub(super) fn bits(w: u32, hi: u32, lo: u32) -> u32 {
    (w >> lo) & ((1u32 << (hi - lo + 1)) - 1)
}

/// A source of `words`: the dwords from the instruction's start.
pub(super) struct Words<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) offset: usize,
}

impl Words<'_> {
    pub(super) fn get(&self, i: usize) -> Result<u32> {
        let at = self.offset + 4 * i;
        match self.bytes.get(at..at + 4) {
            Some(b) => Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            None => Err(DecodeError::Truncated { offset: self.offset, need: 4 * (i + 1) }),
        }
    }
}

pub(super) fn lookup(
    table: &'static [Option<OpInfo>],
    enc: Encoding,
    opcode: u32,
    word: u32,
) -> Result<&'static OpInfo> {
    table.get(opcode as usize).and_then(Option::as_ref).ok_or(DecodeError::UnknownOpcode {
        encoding: enc,
        opcode,
        word,
    })
}

/// Decodes the instruction at `offset` of `bytes`.
pub(super) fn decode(bytes: &[u8], offset: usize) -> Result<Instruction> {
    let w = Words { bytes, offset };
    let w0 = w.get(0)?;
    match w0 >> 23 {
        0x17d => sop1(&t::SOP1, &w, w0),
        0x17e => sopc(&t::SOPC, &w, w0),
        0x17f => sopp(&t::SOPP, w0),
        _ => match w0 >> 28 {
            0xb => sopk(&t::SOPK, &w, w0),
            0x8..=0xa => sop2(&t::SOP2, &w, w0),
            _ => match w0 >> 25 {
                0x3e => vopc(&w, w0),
                0x3f => vop1(&w, w0),
                0..=0x3d => vop2(&w, w0),
                _ => match w0 >> 26 {
                    0x30 => smem(&w, w0),
                    0x34 if bits(w0, 25, 23) == 0x7 => vop3p(&w, w0),
                    0x34 => vop3(&w, w0),
                    0x36 => ds(&w, w0),
                    0x37 => flat(&w, w0),
                    0x38 => mubuf(&w, w0),
                    0x3a => Err(DecodeError::UnsupportedEncoding { encoding: Encoding::Mtbuf, word: w0 }),
                    0x3c => Err(DecodeError::UnsupportedEncoding { encoding: Encoding::Mimg, word: w0 }),
                    0x31 => Err(DecodeError::UnsupportedEncoding { encoding: Encoding::Exp, word: w0 }),
                    0x35 => Err(DecodeError::UnsupportedEncoding { encoding: Encoding::Vintrp, word: w0 }),
                    _ => Err(DecodeError::UnknownEncoding { word: w0 }),
                },
            },
        },
    }
}

/// Resolves a source field, reading the literal dword at `lit_at` when the field is 255.
pub(super) fn src(
    inst: &mut Instruction,
    w: &Words,
    value: u32,
    count: u8,
    lit_at: usize,
    word: u32,
) -> Result<Operand> {
    let literal = if value == 255 {
        inst.size = (4 * lit_at + 4) as u8;
        Some(w.get(lit_at)?)
    } else {
        None
    };
    source(value as u16, count, literal).ok_or(DecodeError::InvalidOperand { encoding: inst.encoding, value, word })
}

pub(super) fn scalar(inst: &mut Instruction, w: &Words, value: u32, count: u8, word: u32) -> Result<Operand> {
    src(inst, w, value, count, 1, word)
}

pub(super) fn vgpr(index: u32, slot: Slot, acc: bool) -> Operand {
    if slot.agpr || acc {
        Operand::Agpr { index: index as u8, count: slot.width }
    } else {
        Operand::Vgpr { index: index as u8, count: slot.width }
    }
}

pub(super) fn sop2(table: &'static [Option<OpInfo>], w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(table, Encoding::Sop2, bits(w0, 29, 23), w0)?;
    let mut inst = Instruction::new(Encoding::Sop2, info);
    for &slot in info.slots {
        let v = match slot.field {
            Field::D => bits(w0, 22, 16),
            Field::S0 => bits(w0, 7, 0),
            _ => bits(w0, 15, 8),
        };
        let op = scalar(&mut inst, w, v, slot.width, w0)?;
        inst.push(slot, op);
    }
    Ok(inst)
}

pub(super) fn sop1(table: &'static [Option<OpInfo>], w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(table, Encoding::Sop1, bits(w0, 15, 8), w0)?;
    let mut inst = Instruction::new(Encoding::Sop1, info);
    for &slot in info.slots {
        let v = if slot.field == Field::D { bits(w0, 22, 16) } else { bits(w0, 7, 0) };
        let op = scalar(&mut inst, w, v, slot.width, w0)?;
        inst.push(slot, op);
    }
    Ok(inst)
}

pub(super) fn sopc(table: &'static [Option<OpInfo>], w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(table, Encoding::Sopc, bits(w0, 22, 16), w0)?;
    let mut inst = Instruction::new(Encoding::Sopc, info);
    for &slot in info.slots {
        let op = match slot.field {
            Field::S0 => scalar(&mut inst, w, bits(w0, 7, 0), slot.width, w0)?,
            Field::Imm => Operand::Imm(bits(w0, 15, 8)),
            _ => scalar(&mut inst, w, bits(w0, 15, 8), slot.width, w0)?,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

pub(super) fn sopk(table: &'static [Option<OpInfo>], w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(table, Encoding::Sopk, bits(w0, 27, 23), w0)?;
    let mut inst = Instruction::new(Encoding::Sopk, info);
    for &slot in info.slots {
        let op = match slot.field {
            Field::D => scalar(&mut inst, w, bits(w0, 22, 16), slot.width, w0)?,
            Field::K => {
                inst.size = 8;
                Operand::Literal(w.get(1)?)
            }
            _ => Operand::Imm(bits(w0, 15, 0)),
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

pub(super) fn sopp(table: &'static [Option<OpInfo>], w0: u32) -> Result<Instruction> {
    let info = lookup(table, Encoding::Sopp, bits(w0, 22, 16), w0)?;
    let mut inst = Instruction::new(Encoding::Sopp, info);
    for &slot in info.slots {
        let v = bits(w0, 15, 0);
        if v == 0 && info.flags & super::table::F_IMM_OMIT_ZERO != 0 {
            continue;
        }
        inst.push(slot, Operand::Imm(v));
    }
    Ok(inst)
}

fn smem(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::SMEM, Encoding::Smem, bits(w0, 25, 18), w0)?;
    let mut inst = Instruction::new(Encoding::Smem, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    inst.mods.glc = bits(w0, 16, 16) != 0;
    let imm = bits(w0, 17, 17) != 0;
    // SOE: the SGPR offset is in soffset [63:57]; with IMM also an immediate offset.
    let soe = bits(w0, 14, 14) != 0;
    // A 21-bit signed byte offset.
    let off = ((bits(w1, 20, 0) << 11) as i32) >> 11;
    for &slot in info.slots {
        let op = match slot.field {
            Field::D => scalar(&mut inst, w, bits(w0, 12, 6), slot.width, w0)?,
            Field::Imm => Operand::Imm(bits(w0, 12, 6)),
            Field::Base => {
                let index = super::operand::align_sgpr((bits(w0, 5, 0) * 2) as u8, slot.width);
                Operand::Sgpr { index, count: slot.width }
            }
            _ if soe => {
                if imm {
                    inst.mods.offset = off;
                    inst.mods.imm_offset = true;
                }
                scalar(&mut inst, w, bits(w1, 31, 25), 1, w0)?
            }
            _ if imm => {
                inst.mods.offset = off;
                Operand::Imm(off as u32)
            }
            _ => scalar(&mut inst, w, bits(w1, 6, 0), 1, w0)?,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

/// The SDWA dword of a VOP1/VOP2/VOPC instruction whose src0 is 249 (the same on gfx9 and
/// gfx10): sets the modifiers and selects, returns src0 as the SDWA dword names it. VOPC's
/// bits 15:8 are its sdst, read by the caller; elsewhere bits 15:14 are the output modifier.
pub(super) fn sdwa(inst: &mut Instruction, w: &Words, width: u8, w0: u32) -> Result<Operand> {
    if inst.info.flags & super::table::F_SDWA == 0 {
        return Err(DecodeError::NoSuchForm { form: "SDWA", name: inst.info.name, word: w0 });
    }
    let d = w.get(1)?;
    inst.size = 8;
    let vopc = inst.encoding == Encoding::Vopc;
    let m = &mut inst.mods;
    m.clamp = !vopc && bits(d, 13, 13) != 0;
    m.omod = if vopc { 0 } else { bits(d, 15, 14) as u8 };
    m.sext = (bits(d, 19, 19) | bits(d, 27, 27) << 1) as u8;
    m.neg = (bits(d, 20, 20) | bits(d, 28, 28) << 1) as u8;
    m.abs = (bits(d, 21, 21) | bits(d, 29, 29) << 1) as u8;
    // The selects this encoding has: VOPC's dst bits are its sdst, VOP1 has no src1.
    let sels: &[u32] = match inst.encoding {
        Encoding::Vopc => &[16, 24],
        Encoding::Vop1 => &[8, 16],
        _ => &[8, 16, 24],
    };
    for &at in sels {
        if bits(d, at + 2, at) == 7 {
            return Err(DecodeError::Reserved { what: "SDWA select", value: 7, word: w0 });
        }
    }
    inst.sdwa = Some(Sdwa {
        dst_sel: bits(d, 10, 8) as u8,
        dst_unused: bits(d, 12, 11) as u8,
        src0_sel: bits(d, 18, 16) as u8,
        src1_sel: bits(d, 26, 24) as u8,
    });
    let s0 = bits(d, 7, 0) + if bits(d, 23, 23) != 0 { 0 } else { 256 };
    source(s0 as u16, width, None).ok_or(DecodeError::InvalidOperand { encoding: inst.encoding, value: s0, word: w0 })
}

/// The SDWA or DPP dword of a VOP1/VOP2/VOPC instruction whose src0 is 249 or 250: returns
/// src0 as the extension names it.
fn vop_ext(inst: &mut Instruction, w: &Words, src0: u32, width: u8, w0: u32) -> Result<Option<Operand>> {
    let flags = inst.info.flags;
    match src0 {
        249 => sdwa(inst, w, width, w0).map(Some),
        250 => {
            if flags & super::table::F_DPP == 0 {
                return Err(DecodeError::NoSuchForm { form: "DPP", name: inst.info.name, word: w0 });
            }
            let d = w.get(1)?;
            inst.size = 8;
            inst.mods.neg = (bits(d, 20, 20) | bits(d, 22, 22) << 1) as u8;
            inst.mods.abs = (bits(d, 21, 21) | bits(d, 23, 23) << 1) as u8;
            inst.dpp = Some(Dpp {
                ctrl: bits(d, 16, 8) as u16,
                bound_ctrl: bits(d, 19, 19) != 0,
                bank_mask: bits(d, 27, 24) as u8,
                row_mask: bits(d, 31, 28) as u8,
            });
            Ok(Some(Operand::Vgpr { index: bits(d, 7, 0) as u8, count: width }))
        }
        _ => Ok(None),
    }
}

fn vop_src0(inst: &mut Instruction, w: &Words, v: u32, width: u8, w0: u32) -> Result<Operand> {
    if inst.info.flags & super::table::F_VSRC0 != 0 {
        return Ok(Operand::Vgpr { index: v as u8, count: width });
    }
    // An AGPR-only src0 (v_accvgpr_mov_b32): bit 8 is ignored.
    if inst.info.slots.iter().any(|s| s.field == Field::S0 && s.agpr) {
        return Ok(Operand::Agpr { index: (v & 0xff) as u8, count: width });
    }
    match vop_ext(inst, w, v, width, w0)? {
        Some(op) => Ok(op),
        None => src(inst, w, v, width, 1, w0),
    }
}

/// A VOP destination field that names a scalar register (v_readfirstlane_b32, VOP3 compares).
pub(super) fn scalar_dst(inst: &Instruction, v: u32, width: u8, w0: u32) -> Result<Operand> {
    source(v as u16, width, None).ok_or(DecodeError::InvalidOperand { encoding: inst.encoding, value: v, word: w0 })
}

/// An SDWA src1 whose S1 bit makes its 8-bit field a scalar source (SGPR or constant).
pub(super) fn sdwa_scalar(inst: &Instruction, v: u32, width: u8, w0: u32) -> Result<Operand> {
    source(v as u16, width, None).ok_or(DecodeError::InvalidOperand { encoding: inst.encoding, value: v, word: w0 })
}

fn vop2(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::VOP2, Encoding::Vop2, bits(w0, 30, 25), w0)?;
    let mut inst = Instruction::new(Encoding::Vop2, info);
    for &slot in info.slots {
        let op = match slot.field {
            Field::D => vgpr(bits(w0, 24, 17), slot, false),
            Field::S0 => vop_src0(&mut inst, w, bits(w0, 8, 0), slot.width, w0)?,
            Field::S1 => {
                let s1 = vgpr(bits(w0, 16, 9), slot, false);
                match inst.sdwa {
                    // SDWA's S1 bit: vsrc1 names an SGPR.
                    Some(_) if bits(w.get(1)?, 31, 31) != 0 => sdwa_scalar(&inst, bits(w0, 16, 9), slot.width, w0)?,
                    _ => s1,
                }
            }
            Field::K => {
                inst.size = 8;
                Operand::Literal(w.get(1)?)
            }
            _ => Operand::Sgpr { index: 106, count: 2 },
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

fn vop1(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::VOP1, Encoding::Vop1, bits(w0, 16, 9), w0)?;
    let mut inst = Instruction::new(Encoding::Vop1, info);
    for &slot in info.slots {
        let op = match slot.field {
            Field::D => vgpr(bits(w0, 24, 17), slot, false),
            Field::Ds => scalar_dst(&inst, bits(w0, 24, 17), slot.width, w0)?,
            _ => vop_src0(&mut inst, w, bits(w0, 8, 0), slot.width, w0)?,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

fn vopc(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::VOPC, Encoding::Vopc, bits(w0, 24, 17), w0)?;
    let mut inst = Instruction::new(Encoding::Vopc, info);
    for &slot in info.slots {
        let op = match slot.field {
            Field::S0 => vop_src0(&mut inst, w, bits(w0, 8, 0), slot.width, w0)?,
            Field::S1 => match inst.sdwa {
                Some(_) if bits(w.get(1)?, 31, 31) != 0 => sdwa_scalar(&inst, bits(w0, 16, 9), slot.width, w0)?,
                _ => vgpr(bits(w0, 16, 9), slot, false),
            },
            // The implicit VCC (printed first) is read after src0 decides SDWA; fixed below.
            _ => Operand::Sgpr { index: 106, count: 2 },
        };
        inst.push(slot, op);
    }
    if inst.sdwa.is_some() {
        // SDWA VOPC: bit 15 (SD) of the SDWA dword selects sdst [14:8] instead of VCC.
        let d = w.get(1)?;
        if bits(d, 15, 15) != 0 {
            inst.operands[0] = scalar_dst(&inst, bits(d, 14, 8), 2, w0)?;
        }
    }
    Ok(inst)
}

fn vop3(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::VOP3, Encoding::Vop3, bits(w0, 25, 16), w0)?;
    let mut inst = Instruction::new(Encoding::Vop3, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    let vop3b = info.slots.iter().any(|s| s.field == Field::Sd);
    let m = &mut inst.mods;
    m.clamp = bits(w0, 15, 15) != 0;
    if !vop3b {
        m.abs = bits(w0, 10, 8) as u8;
        m.op_sel = bits(w0, 14, 11) as u8;
    }
    m.neg = bits(w1, 31, 29) as u8;
    m.omod = bits(w1, 28, 27) as u8;
    for &slot in info.slots {
        let op = match slot.field {
            Field::D => vgpr(bits(w0, 7, 0), slot, false),
            Field::Ds => scalar_dst(&inst, bits(w0, 7, 0), slot.width, w0)?,
            Field::Sd => src(&mut inst, w, bits(w0, 14, 8), slot.width, 2, w0)?,
            Field::S0 => vop3_src(&mut inst, w, bits(w1, 8, 0), slot, w0)?,
            Field::S1 => vop3_src(&mut inst, w, bits(w1, 17, 9), slot, w0)?,
            _ => vop3_src(&mut inst, w, bits(w1, 26, 18), slot, w0)?,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

/// A VOP3/VOP3P source: no literal on gfx9 (255 is an error), AGPRs where the slot says so.
fn vop3_src(inst: &mut Instruction, _w: &Words, v: u32, slot: Slot, w0: u32) -> Result<Operand> {
    if slot.agpr && v >= 256 {
        return Ok(Operand::Agpr { index: (v - 256) as u8, count: slot.width });
    }
    source(v as u16, slot.width, None).ok_or(DecodeError::InvalidOperand {
        encoding: inst.encoding,
        value: v,
        word: w0,
    })
}

fn vop3p(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::VOP3P, Encoding::Vop3p, bits(w0, 22, 16), w0)?;
    let mut inst = Instruction::new(Encoding::Vop3p, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    let mai = info.flags & super::table::F_MAI != 0;
    let m = &mut inst.mods;
    if mai {
        m.acc = bits(w0, 15, 15) != 0;
        m.abid = bits(w0, 14, 11) as u8;
        m.cbsz = bits(w0, 10, 8) as u8;
        m.blgp = bits(w1, 31, 29) as u8;
    } else {
        m.clamp = bits(w0, 15, 15) != 0;
        m.op_sel = bits(w0, 13, 11) as u8;
        m.op_sel_hi = (bits(w1, 28, 27) | bits(w0, 14, 14) << 2) as u8;
        m.neg_hi = bits(w0, 10, 8) as u8;
        m.neg = bits(w1, 31, 29) as u8;
    }
    let acc = inst.mods.acc;
    for &slot in info.slots {
        // MFMA: A and B are AGPRs when their acc bits (op_sel_hi's place) say so.
        let slot = match slot.field {
            Field::S0 if mai => Slot { agpr: bits(w1, 27, 27) != 0, ..slot },
            Field::S1 if mai => Slot { agpr: bits(w1, 28, 28) != 0, ..slot },
            _ => slot,
        };
        let op = match slot.field {
            Field::D => vgpr(bits(w0, 7, 0), slot, acc),
            Field::S0 => vop3_src(&mut inst, w, bits(w1, 8, 0), slot, w0)?,
            Field::S1 => vop3_src(&mut inst, w, bits(w1, 17, 9), slot, w0)?,
            _ => {
                let v = bits(w1, 26, 18);
                let slot = Slot { agpr: slot.agpr || (acc && v >= 256), ..slot };
                vop3_src(&mut inst, w, v, slot, w0)?
            }
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

fn ds(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::DS, Encoding::Ds, bits(w0, 24, 17), w0)?;
    let mut inst = Instruction::new(Encoding::Ds, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    let m = &mut inst.mods;
    m.gds = bits(w0, 16, 16) != 0;
    m.acc = bits(w0, 25, 25) != 0;
    if info.flags & super::table::F_OFFSET2 != 0 {
        m.offset = bits(w0, 7, 0) as i32;
        m.offset1 = bits(w0, 15, 8) as u8;
    } else {
        m.offset = bits(w0, 15, 0) as i32;
    }
    let acc = m.acc;
    for &slot in info.slots {
        let op = match slot.field {
            Field::D => vgpr(bits(w1, 31, 24), slot, acc),
            Field::Addr => vgpr(bits(w1, 7, 0), slot, false),
            Field::Data0 => vgpr(bits(w1, 15, 8), slot, acc),
            _ => vgpr(bits(w1, 23, 16), slot, acc),
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

fn flat(w: &Words, w0: u32) -> Result<Instruction> {
    let opcode = bits(w0, 24, 18);
    let (table, enc): (&'static [Option<OpInfo>], _) = match bits(w0, 15, 14) {
        0 => (&t::FLAT, Encoding::Flat),
        1 => (&t::SCRATCH, Encoding::Scratch),
        2 => (&t::GLOBAL, Encoding::Global),
        _ => return Err(DecodeError::UnknownEncoding { word: w0 }),
    };
    let info = lookup(table, enc, opcode, w0)?;
    let mut inst = Instruction::new(enc, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    let m = &mut inst.mods;
    m.glc = bits(w0, 16, 16) != 0;
    m.slc = bits(w0, 17, 17) != 0;
    m.lds = bits(w0, 13, 13) != 0;
    m.acc = bits(w1, 23, 23) != 0;
    m.scc = bits(w0, 25, 25) != 0;
    // FLAT: a 13-bit unsigned offset (gfx90a); GLOBAL and SCRATCH: 13-bit signed.
    m.offset = if enc == Encoding::Flat { bits(w0, 12, 0) as i32 } else { ((bits(w0, 12, 0) << 19) as i32) >> 19 };
    let acc = m.acc;
    let saddr = bits(w1, 22, 16);
    let has_saddr = enc != Encoding::Flat && saddr != 0x7f;
    // An atomic that returns (glc) prints its destination first.
    let atomic = info.name.contains("_atomic_");
    if atomic && inst.mods.glc {
        let data = info.slots.iter().find(|s| s.field == Field::Data0).map_or(1, |s| s.width);
        let width = if info.name.contains("cmpswap") { data / 2 } else { data };
        inst.push(super::table::s(Field::D, width), vgpr(bits(w1, 31, 24), super::table::s(Field::D, width), acc));
    }
    let lds = inst.mods.lds;
    for &slot in info.slots {
        if lds && slot.field == Field::D {
            // A load to LDS has no destination VGPR.
            continue;
        }
        let op = match slot.field {
            Field::D => vgpr(bits(w1, 31, 24), slot, acc),
            Field::Addr if has_saddr && enc == Encoding::Scratch => Operand::Off,
            Field::Addr if has_saddr => Operand::Vgpr { index: bits(w1, 7, 0) as u8, count: 1 },
            Field::Addr => vgpr(bits(w1, 7, 0), slot, false),
            Field::Data0 => vgpr(bits(w1, 15, 8), slot, acc),
            _ if has_saddr => {
                let width = if enc == Encoding::Global { 2 } else { 1 };
                scalar(&mut inst, w, saddr, width, w0)?
            }
            _ => Operand::Off,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

fn mubuf(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::MUBUF, Encoding::Mubuf, bits(w0, 24, 18), w0)?;
    let mut inst = Instruction::new(Encoding::Mubuf, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    let m = &mut inst.mods;
    m.offset = bits(w0, 11, 0) as i32;
    m.offen = bits(w0, 12, 12) != 0;
    m.idxen = bits(w0, 13, 13) != 0;
    m.glc = bits(w0, 14, 14) != 0;
    m.lds = bits(w0, 16, 16) != 0;
    m.slc = bits(w0, 17, 17) != 0;
    m.scc = bits(w0, 15, 15) != 0;
    m.acc = bits(w1, 23, 23) != 0;
    let (acc, offen, idxen, lds) = (m.acc, m.offen, m.idxen, m.lds);
    for &slot in info.slots {
        if lds && slot.field == Field::D {
            // A load to LDS has no destination VGPR.
            continue;
        }
        let op = match slot.field {
            Field::D => vgpr(bits(w1, 15, 8), slot, acc),
            Field::Addr if !offen && !idxen => Operand::Off,
            Field::Addr => Operand::Vgpr { index: bits(w1, 7, 0) as u8, count: if offen && idxen { 2 } else { 1 } },
            Field::Rsrc => Operand::Sgpr { index: (bits(w1, 20, 16) * 4) as u8, count: 4 },
            _ => scalar(&mut inst, w, bits(w1, 31, 24), 1, w0)?,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}
