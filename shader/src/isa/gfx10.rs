//! The gfx10 decoder (RDNA2 as gfx1030 uses it): field layouts from AMD's "RDNA 2 Instruction
//! Set Architecture Reference Guide", chapter "Microcode Formats"; opcodes from the generated
//! tables ([`super::gfx1030`]). The scalar ALU formats are gfx9's ([`super::gfx9`] decodes them);
//! SMEM, VOP3, VOP3P, DS, FLAT and MUBUF moved fields, VOP3 and VOP3P take a literal, DPP gained
//! DPP8 and fetch-inactive, and lane masks (VCC, carries, compare results) are one SGPR in wave32.

use super::gfx1030 as t;
use super::gfx9::{
    bits, lookup, scalar, scalar_dst, sdwa, sdwa_scalar, sop1, sop2, sopc, sopk, sopp, src, vgpr, Words,
};
use super::inst::{Dpp, Encoding, Instruction};
use super::operand::Operand;
use super::table::{Field, OpInfo, Slot, F_DPP, F_OFFSET2, F_SDWA_OMOD, F_VSRC0};
use super::{DecodeError, Result, Target};

/// SGPR_NULL: reads 0, discards writes; gfx10's "no register" in SMEM soffset and FLAT saddr.
const NULL: u32 = 125;

/// The opcode table of `encoding`, `None` where gfx10 lacks it.
pub(super) fn table(encoding: Encoding) -> Option<&'static [Option<OpInfo>]> {
    Some(match encoding {
        Encoding::Sop1 => &t::SOP1,
        Encoding::Sop2 => &t::SOP2,
        Encoding::Sopk => &t::SOPK,
        Encoding::Sopc => &t::SOPC,
        Encoding::Sopp => &t::SOPP,
        Encoding::Smem => &t::SMEM,
        Encoding::Vop1 => &t::VOP1,
        Encoding::Vop2 => &t::VOP2,
        Encoding::Vopc => &t::VOPC,
        Encoding::Vop3 => &t::VOP3,
        Encoding::Vop3p => &t::VOP3P,
        Encoding::Ds => &t::DS,
        Encoding::Flat => &t::FLAT,
        Encoding::Global => &t::GLOBAL,
        Encoding::Scratch => &t::SCRATCH,
        Encoding::Mubuf => &t::MUBUF,
        _ => return None,
    })
}

/// Decodes the instruction at `offset` of `bytes` for `target` (its wave size sizes lane masks).
pub(super) fn decode(bytes: &[u8], offset: usize, target: Target) -> Result<Instruction> {
    let w = Words { bytes, offset };
    let w0 = w.get(0)?;
    let unsupported = |encoding| Err(DecodeError::UnsupportedEncoding { encoding, word: w0 });
    let mut inst = match w0 >> 23 {
        0x17d => sop1(&t::SOP1, &w, w0),
        0x17e => sopc(&t::SOPC, &w, w0),
        0x17f => sopp(&t::SOPP, w0),
        _ => match w0 >> 28 {
            0xb => sopk(&t::SOPK, &w, w0),
            0x8..=0xa => sop2(&t::SOP2, &w, w0),
            _ => match w0 >> 25 {
                0x3e => vopc(&w, w0, target),
                0x3f => vop1(&w, w0, target),
                0..=0x3d => vop2(&w, w0, target),
                _ => match w0 >> 26 {
                    0x3d => smem(&w, w0),
                    0x35 => vop3(&w, w0, target),
                    0x33 if w0 >> 24 == 0xcc => vop3p(&w, w0),
                    0x36 => ds(&w, w0),
                    0x37 => flat(&w, w0),
                    0x38 => mubuf(&w, w0),
                    0x3a => unsupported(Encoding::Mtbuf),
                    0x3c => unsupported(Encoding::Mimg),
                    0x3e => unsupported(Encoding::Exp),
                    0x32 => unsupported(Encoding::Vintrp),
                    _ => Err(DecodeError::UnknownEncoding { word: w0 }),
                },
            },
        },
    }?;
    inst.target = target;
    // gfx10's s102-s105 are plain SGPRs: a tuple there aligns like any other (gfx9 names them
    // flat_scratch and xnack_mask, which operand::source leaves as named).
    for op in &mut inst.operands {
        if let Operand::Sgpr { index: index @ 102..=105, count } = *op {
            *op = Operand::Sgpr {
                index: if count >= 4 {
                    index & !3
                } else if count == 2 {
                    index & !1
                } else {
                    index
                },
                count,
            };
        }
    }
    Ok(inst)
}

/// A slot as `target` sizes it: a lane mask is a pair in wave64.
fn sized(slot: Slot, target: Target) -> Slot {
    if slot.lane && target.wave_size() == 64 {
        Slot { width: 2, ..slot }
    } else {
        slot
    }
}

/// VCC as a lane mask of `width` dwords (wave32 prints `vcc_lo`).
fn vcc(width: u8) -> Operand {
    Operand::Sgpr { index: 106, count: width }
}

fn smem(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::SMEM, Encoding::Smem, bits(w0, 25, 18), w0)?;
    let mut inst = Instruction::new(Encoding::Smem, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    inst.mods.glc = bits(w0, 16, 16) != 0;
    inst.mods.dlc = bits(w0, 14, 14) != 0;
    // The address is base + soffset + a 21-bit signed byte offset; soffset null adds nothing.
    let off = ((bits(w1, 20, 0) << 11) as i32) >> 11;
    let soffset = bits(w1, 31, 25);
    for &slot in info.slots {
        let op = match slot.field {
            Field::D => scalar(&mut inst, w, bits(w0, 12, 6), slot.width, w0)?,
            Field::Imm => Operand::Imm(bits(w0, 12, 6)),
            Field::Base => {
                let index = super::operand::align_sgpr((bits(w0, 5, 0) * 2) as u8, slot.width);
                Operand::Sgpr { index, count: slot.width }
            }
            // LLVM prints the offset alone when soffset is null, the SGPR alone when the offset
            // is 0 (null included), and both otherwise.
            _ if soffset == NULL && off != 0 => {
                inst.mods.offset = off;
                Operand::Imm(off as u32)
            }
            _ => {
                if off != 0 {
                    inst.mods.offset = off;
                    inst.mods.imm_offset = true;
                }
                scalar(&mut inst, w, soffset, 1, w0)?
            }
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

/// The SDWA, DPP16 or DPP8 dword of a VOP1/VOP2/VOPC instruction whose src0 is 249, 250 or
/// 233/234: returns src0 as the extension names it.
fn vop_ext(inst: &mut Instruction, w: &Words, src0: u32, width: u8, w0: u32) -> Result<Option<Operand>> {
    let flags = inst.info.flags;
    let name = inst.info.name;
    match src0 {
        249 => {
            let op = sdwa(inst, w, width, w0)?;
            // gfx10 takes an SDWA output modifier only where the operation has one.
            if inst.mods.omod != 0 && flags & F_SDWA_OMOD == 0 {
                return Err(DecodeError::Reserved { what: "SDWA omod", value: inst.mods.omod.into(), word: w0 });
            }
            Ok(Some(op))
        }
        250 => {
            if flags & F_DPP == 0 {
                return Err(DecodeError::NoSuchForm { form: "DPP", name, word: w0 });
            }
            let d = w.get(1)?;
            inst.size = 8;
            let ctrl = bits(d, 16, 8);
            // gfx10 dropped the wave shifts and row broadcasts; 0x150-0x16f are row_share and
            // row_xmask.
            let valid = matches!(ctrl, 0..=0xff | 0x101..=0x10f | 0x111..=0x11f | 0x121..=0x12f | 0x140 | 0x141 | 0x150..=0x16f);
            if !valid {
                return Err(DecodeError::Reserved { what: "gfx10 DPP control", value: ctrl, word: w0 });
            }
            inst.mods.neg = (bits(d, 20, 20) | bits(d, 22, 22) << 1) as u8;
            inst.mods.abs = (bits(d, 21, 21) | bits(d, 23, 23) << 1) as u8;
            inst.mods.fi = bits(d, 18, 18) != 0;
            inst.dpp = Some(Dpp {
                ctrl: ctrl as u16,
                bound_ctrl: bits(d, 19, 19) != 0,
                bank_mask: bits(d, 27, 24) as u8,
                row_mask: bits(d, 31, 28) as u8,
            });
            Ok(Some(Operand::Vgpr { index: bits(d, 7, 0) as u8, count: width }))
        }
        // DPP8: 233, or 234 with fetch-inactive.
        233 | 234 => {
            if flags & F_DPP == 0 {
                return Err(DecodeError::NoSuchForm { form: "DPP8", name, word: w0 });
            }
            let d = w.get(1)?;
            inst.size = 8;
            inst.mods.fi = src0 == 234;
            let mut sel = [0u8; 8];
            for (i, s) in sel.iter_mut().enumerate() {
                *s = bits(d, 10 + 3 * i as u32, 8 + 3 * i as u32) as u8;
            }
            inst.dpp8 = Some(sel);
            Ok(Some(Operand::Vgpr { index: bits(d, 7, 0) as u8, count: width }))
        }
        _ => Ok(None),
    }
}

fn vop_src0(inst: &mut Instruction, w: &Words, v: u32, width: u8, w0: u32) -> Result<Operand> {
    if inst.info.flags & F_VSRC0 != 0 {
        return Ok(Operand::Vgpr { index: v as u8, count: width });
    }
    match vop_ext(inst, w, v, width, w0)? {
        Some(op) => Ok(op),
        None => src(inst, w, v, width, 1, w0),
    }
}

/// An SDWA VOP2/VOPC src1: its S1 bit makes the 8-bit field a scalar source.
fn vop_src1(inst: &Instruction, w: &Words, slot: Slot, w0: u32) -> Result<Operand> {
    match inst.sdwa {
        Some(_) if bits(w.get(1)?, 31, 31) != 0 => sdwa_scalar(inst, bits(w0, 16, 9), slot.width, w0),
        _ => Ok(vgpr(bits(w0, 16, 9), slot, false)),
    }
}

fn vop2(w: &Words, w0: u32, target: Target) -> Result<Instruction> {
    let info = lookup(&t::VOP2, Encoding::Vop2, bits(w0, 30, 25), w0)?;
    let mut inst = Instruction::new(Encoding::Vop2, info);
    for &slot in info.slots {
        let slot = sized(slot, target);
        let op = match slot.field {
            Field::D => vgpr(bits(w0, 24, 17), slot, false),
            Field::S0 => vop_src0(&mut inst, w, bits(w0, 8, 0), slot.width, w0)?,
            Field::S1 => vop_src1(&inst, w, slot, w0)?,
            // v_fmamk/v_fmaak: the constant is the dword after the instruction.
            Field::K => {
                inst.size = 8;
                Operand::Literal(w.get(1)?)
            }
            _ => vcc(slot.width),
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

fn vop1(w: &Words, w0: u32, target: Target) -> Result<Instruction> {
    let info = lookup(&t::VOP1, Encoding::Vop1, bits(w0, 16, 9), w0)?;
    let mut inst = Instruction::new(Encoding::Vop1, info);
    for &slot in info.slots {
        let slot = sized(slot, target);
        let op = match slot.field {
            Field::D => vgpr(bits(w0, 24, 17), slot, false),
            Field::Ds => scalar_dst(&inst, bits(w0, 24, 17), slot.width, w0)?,
            _ => vop_src0(&mut inst, w, bits(w0, 8, 0), slot.width, w0)?,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

fn vopc(w: &Words, w0: u32, target: Target) -> Result<Instruction> {
    let info = lookup(&t::VOPC, Encoding::Vopc, bits(w0, 24, 17), w0)?;
    let mut inst = Instruction::new(Encoding::Vopc, info);
    let mut lane = 1;
    for &slot in info.slots {
        let slot = sized(slot, target);
        let op = match slot.field {
            Field::S0 => vop_src0(&mut inst, w, bits(w0, 8, 0), slot.width, w0)?,
            Field::S1 => vop_src1(&inst, w, slot, w0)?,
            // The implicit VCC (printed first) may be replaced by SDWA's sdst below.
            _ => {
                lane = slot.width;
                vcc(slot.width)
            }
        };
        inst.push(slot, op);
    }
    if inst.sdwa.is_some() {
        // SDWA VOPC: bit 15 (SD) of the SDWA dword selects sdst [14:8] instead of VCC; bits
        // 15:14 are not an output modifier here.
        let d = w.get(1)?;
        let has_vcc = info.slots.first().is_some_and(|s| s.field == Field::Vcc);
        if bits(d, 15, 15) != 0 && has_vcc {
            inst.operands[0] = scalar_dst(&inst, bits(d, 14, 8), lane, w0)?;
        }
    }
    Ok(inst)
}

/// A VOP3/VOP3P source: 255 is a literal in the dword after the two instruction dwords.
fn vop3_src(inst: &mut Instruction, w: &Words, v: u32, width: u8, w0: u32) -> Result<Operand> {
    src(inst, w, v, width, 2, w0)
}

fn vop3(w: &Words, w0: u32, target: Target) -> Result<Instruction> {
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
        let slot = sized(slot, target);
        let op = match slot.field {
            Field::D => vgpr(bits(w0, 7, 0), slot, false),
            Field::Ds => scalar_dst(&inst, bits(w0, 7, 0), slot.width, w0)?,
            Field::Sd => scalar_dst(&inst, bits(w0, 14, 8), slot.width, w0)?,
            Field::S0 => vop3_src(&mut inst, w, bits(w1, 8, 0), slot.width, w0)?,
            Field::S1 => vop3_src(&mut inst, w, bits(w1, 17, 9), slot.width, w0)?,
            _ => vop3_src(&mut inst, w, bits(w1, 26, 18), slot.width, w0)?,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

fn vop3p(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::VOP3P, Encoding::Vop3p, bits(w0, 22, 16), w0)?;
    let mut inst = Instruction::new(Encoding::Vop3p, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    let m = &mut inst.mods;
    m.clamp = bits(w0, 15, 15) != 0;
    m.op_sel = bits(w0, 13, 11) as u8;
    m.op_sel_hi = (bits(w1, 28, 27) | bits(w0, 14, 14) << 2) as u8;
    m.neg_hi = bits(w0, 10, 8) as u8;
    m.neg = bits(w1, 31, 29) as u8;
    for &slot in info.slots {
        let op = match slot.field {
            Field::D => vgpr(bits(w0, 7, 0), slot, false),
            Field::S0 => vop3_src(&mut inst, w, bits(w1, 8, 0), slot.width, w0)?,
            Field::S1 => vop3_src(&mut inst, w, bits(w1, 17, 9), slot.width, w0)?,
            _ => vop3_src(&mut inst, w, bits(w1, 26, 18), slot.width, w0)?,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}

fn ds(w: &Words, w0: u32) -> Result<Instruction> {
    let info = lookup(&t::DS, Encoding::Ds, bits(w0, 25, 18), w0)?;
    let mut inst = Instruction::new(Encoding::Ds, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    let m = &mut inst.mods;
    m.gds = bits(w0, 17, 17) != 0;
    if info.flags & F_OFFSET2 != 0 {
        m.offset = bits(w0, 7, 0) as i32;
        m.offset1 = bits(w0, 15, 8) as u8;
    } else {
        m.offset = bits(w0, 15, 0) as i32;
    }
    for &slot in info.slots {
        let op = match slot.field {
            Field::D => vgpr(bits(w1, 31, 24), slot, false),
            Field::Addr => vgpr(bits(w1, 7, 0), slot, false),
            Field::Data0 => vgpr(bits(w1, 15, 8), slot, false),
            _ => vgpr(bits(w1, 23, 16), slot, false),
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
    m.lds = bits(w0, 13, 13) != 0;
    m.glc = bits(w0, 16, 16) != 0;
    m.slc = bits(w0, 17, 17) != 0;
    m.dlc = bits(w0, 12, 12) != 0;
    // A 12-bit offset: unsigned for FLAT, signed for GLOBAL and SCRATCH.
    m.offset = if enc == Encoding::Flat { bits(w0, 11, 0) as i32 } else { ((bits(w0, 11, 0) << 20) as i32) >> 20 };
    let saddr = bits(w1, 22, 16);
    let has_saddr = enc != Encoding::Flat && saddr != NULL;
    // An atomic that returns (glc) prints its destination first.
    if info.name.contains("_atomic_") && inst.mods.glc {
        let data = info.slots.iter().find(|s| s.field == Field::Data0).map_or(1, |s| s.width);
        let width = if info.name.contains("cmpswap") { data / 2 } else { data };
        let slot = super::table::s(Field::D, width);
        inst.push(slot, vgpr(bits(w1, 31, 24), slot, false));
    }
    let lds = inst.mods.lds;
    for &slot in info.slots {
        if lds && slot.field == Field::D {
            // A load to LDS has no destination VGPR.
            continue;
        }
        let op = match slot.field {
            Field::D => vgpr(bits(w1, 31, 24), slot, false),
            Field::Addr if has_saddr && enc == Encoding::Scratch => Operand::Off,
            Field::Addr if has_saddr => Operand::Vgpr { index: bits(w1, 7, 0) as u8, count: 1 },
            Field::Addr => vgpr(bits(w1, 7, 0), slot, false),
            Field::Data0 => vgpr(bits(w1, 15, 8), slot, false),
            // SCRATCH saddr 0x7f (gfx9's "off"): LLVM prints no address at all.
            _ if enc == Encoding::Scratch && saddr == 0x7f => Operand::Off,
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
    // Bit 25 is the opcode's bit 7.
    let opcode = bits(w0, 24, 18) | bits(w0, 25, 25) << 7;
    let info = lookup(&t::MUBUF, Encoding::Mubuf, opcode, w0)?;
    let mut inst = Instruction::new(Encoding::Mubuf, info);
    let w1 = w.get(1)?;
    inst.size = 8;
    let m = &mut inst.mods;
    // LLVM 15 prints tfe on loads and stores, not atomics.
    m.tfe = bits(w1, 23, 23) != 0 && !info.name.contains("_atomic_");
    m.offset = bits(w0, 11, 0) as i32;
    m.offen = bits(w0, 12, 12) != 0;
    m.idxen = bits(w0, 13, 13) != 0;
    m.glc = bits(w0, 14, 14) != 0;
    m.dlc = bits(w0, 15, 15) != 0;
    m.lds = bits(w0, 16, 16) != 0;
    m.slc = bits(w1, 22, 22) != 0;
    let (offen, idxen, lds) = (m.offen, m.idxen, m.lds);
    for &slot in info.slots {
        if lds && slot.field == Field::D {
            // A load to LDS has no destination VGPR.
            continue;
        }
        let op = match slot.field {
            Field::D => vgpr(bits(w1, 15, 8), slot, false),
            Field::Addr if !offen && !idxen => Operand::Off,
            Field::Addr => Operand::Vgpr { index: bits(w1, 7, 0) as u8, count: if offen && idxen { 2 } else { 1 } },
            Field::Rsrc => Operand::Sgpr { index: (bits(w1, 20, 16) * 4) as u8, count: 4 },
            // soffset may be a literal, after the two instruction dwords.
            _ => src(&mut inst, w, bits(w1, 31, 24), 1, 2, w0)?,
        };
        inst.push(slot, op);
    }
    Ok(inst)
}
