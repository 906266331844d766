//! s_getreg_b32 / s_setreg_b32: the hardware registers a wave reads and writes.
//!
//! The SIMM16 operand is `ID [5:0], OFFSET [10:6], WIDTH-1 [15:11]` and the register ids are
//! LLVM's (SIDefines.h, namespace Hwreg). Field layouts are the Vega ISA manual's (the MODE and
//! STATUS register tables, and the hardware register table of S_GETREG_B32); the MODE masks are
//! SIDefines.h's `ModeRegisterMasks`.
//!
//! A read returns only bits the core knows: each register states which of its bits are modelled,
//! and a read that covers any other bit is an error rather than a made-up value.

use super::super::{Cx, ExecError, ExecResult};
use crate::wave::Wave;

const ID_MODE: u16 = 1;
const ID_STATUS: u16 = 2;
const ID_TRAPSTS: u16 = 3;
const ID_HW_ID: u16 = 4;
const ID_GPR_ALLOC: u16 = 5;
const ID_LDS_ALLOC: u16 = 6;
const ID_IB_STS: u16 = 7;
const ID_MEM_BASES: u16 = 15;
/// gfx10 replaces HW_ID with HW_ID1 and HW_ID2 (SIDefines.h ID_HW_ID1 = 23, ID_HW_ID2 = 24).
const ID_HW_ID1: u16 = 23;
const ID_HW_ID2: u16 = 24;
/// gfx10 keeps FLAT_SCRATCH in hardware registers (ID_FLAT_SCR_LO = 20, ID_FLAT_SCR_HI = 21)
/// that the kernel prologue writes with s_setreg (AMDGPUUsage "Flat Scratch", GFX10).
const ID_FLAT_SCR_LO: u16 = 20;
const ID_FLAT_SCR_HI: u16 = 21;

/// MODE.EXCP_EN (bits 18:12): enabling an FP exception trap needs a trap handler.
const MODE_EXCP_EN: u32 = 0x7f << 12;
/// MODE.GPR_IDX_EN and MODE.VSKIP change how every later instruction runs.
const MODE_GPR_IDX_EN: u32 = 1 << 27;
const MODE_VSKIP: u32 = 1 << 28;

/// VGPRs are allocated in blocks of 8 on gfx90a (LLVM AMDGPUBaseInfo getVGPRAllocGranule).
const VGPR_GRANULE: usize = 8;
/// LDS is allocated in blocks of 128 dwords on gfx7 to gfx10 (LLVM AMDGPUUsage,
/// compute_pgm_rsrc2 LDS_SIZE).
const LDS_GRANULE: usize = 512;

/// The register, offset and field mask an SIMM16 names.
struct FieldSel {
    id: u16,
    offset: u32,
    mask: u32,
}

fn decode(simm16: u16) -> FieldSel {
    let id = simm16 & 0x3f;
    let offset = u32::from(simm16 >> 6 & 0x1f);
    let size = u32::from(simm16 >> 11 & 0x1f) + 1;
    let ones = if size == 32 { u32::MAX } else { (1 << size) - 1 };
    // Bits past 31 do not exist.
    FieldSel { id, offset, mask: ones << offset }
}

fn name(id: u16) -> String {
    match id {
        ID_MODE => "HW_REG_MODE".into(),
        ID_STATUS => "HW_REG_STATUS".into(),
        ID_TRAPSTS => "HW_REG_TRAPSTS".into(),
        ID_HW_ID => "HW_REG_HW_ID".into(),
        ID_GPR_ALLOC => "HW_REG_GPR_ALLOC".into(),
        ID_LDS_ALLOC => "HW_REG_LDS_ALLOC".into(),
        ID_IB_STS => "HW_REG_IB_STS".into(),
        ID_MEM_BASES => "HW_REG_SH_MEM_BASES".into(),
        ID_HW_ID1 => "HW_REG_HW_ID1".into(),
        ID_HW_ID2 => "HW_REG_HW_ID2".into(),
        ID_FLAT_SCR_LO => "HW_REG_FLAT_SCR_LO".into(),
        ID_FLAT_SCR_HI => "HW_REG_FLAT_SCR_HI".into(),
        _ => format!("hardware register {id}"),
    }
}

/// The value of register `id` and the mask of its bits the core models.
fn read(w: &Wave, cx: &Cx, id: u16, gfx10: bool) -> ExecResult<(u32, u32)> {
    if gfx10 {
        return read_gfx10(w, cx, id);
    }
    Ok(match id {
        ID_MODE => (w.mode, u32::MAX),
        ID_STATUS => (status(w), 1 | 1 << 5 | 1 << 6 | 1 << 9 | 1 << 10 | 1 << 12 | 1 << 13 | 1 << 14 | 1 << 16),
        // TRAPSTS: EXCP [8:0] and EXCP_HI [14:12] are the FP exceptions raised so far, which
        // the core does not record; SAVECTX [10] and ILLEGAL_INST [11] are never set (no
        // context save, and an illegal instruction is a fault, not a trap).
        ID_TRAPSTS => (0, 1 << 10 | 1 << 11),
        // HW_ID: WAVE_ID [3:0], SIMD_ID [5:4], PIPE_ID [7:6], CU_ID [11:8], SH_ID [12],
        // SE_ID [14:13], TG_ID [19:16], VM_ID [23:20], QUEUE_ID [26:24], STATE_ID [29:27],
        // ME_ID [31:30]. The core runs a workgroup as one CU of one shader engine: a wave's
        // slot is its index in the group; the queue and VMID belong to the device, not the
        // core, so they (and TG_ID, STATE_ID) are not modelled.
        ID_HW_ID => (w.id_in_group & 0xf, 0xf | 0x3 << 4 | 0x3 << 6 | 0xf << 8 | 1 << 12 | 0x3 << 13),
        // GPR_ALLOC: VGPR_BASE [5:0], VGPR_SIZE [13:8] (blocks - 1). The SGPR fields depend on
        // the dispatch's allocation, which the wave does not carry.
        ID_GPR_ALLOC => {
            let vgprs = w.v.len() + w.a.len();
            let blocks = vgprs.div_ceil(VGPR_GRANULE).max(1) - 1;
            ((blocks as u32 & 0x3f) << 8, 0x3f | 0x3f << 8)
        }
        // LDS_ALLOC: LDS_BASE [7:0], LDS_SIZE [20:12] in blocks; the group owns its LDS from 0.
        ID_LDS_ALLOC => {
            let blocks = cx.lds.len().div_ceil(LDS_GRANULE) as u32;
            ((blocks & 0x1ff) << 12, 0xff | 0x1ff << 12)
        }
        // IB_STS: VM_CNT [3:0], EXP_CNT [6:4], LGKM_CNT [11:8], VALU_CNT [14:12] (bit 7 is
        // reserved, reads 0): every instruction completes before the next starts, so nothing
        // is outstanding.
        ID_IB_STS => (0, 0x7fff),
        // SH_MEM_BASES: PRIVATE_BASE [15:0] and SHARED_BASE [31:16], bits 63:48 of the
        // apertures (LLVM reads them so without aperture registers, AMDGPULegalizerInfo
        // getSegmentAperture).
        ID_MEM_BASES => {
            let ap = &cx.apertures;
            ((ap.private_base >> 48) as u32 & 0xffff | ((ap.shared_base >> 48) as u32) << 16, u32::MAX)
        }
        _ => return Err(ExecError::Unimplemented(format!("s_getreg of {}", name(id)))),
    })
}

/// STATUS: SCC [0], PRIV [5] (in the trap handler), TRAP_EN [6] (a trap handler is installed),
/// EXECZ [9], VCCZ [10], IN_BARRIER [12], HALT [13], TRAP [14], VALID [16]. A running wave is
/// valid, not halted and in no barrier.
pub(in crate::exec) fn status(w: &Wave) -> u32 {
    u32::from(w.scc)
        | u32::from(w.in_trap) << 5
        | u32::from(w.trap.is_some()) << 6
        | u32::from(w.exec() == 0) << 9
        | u32::from(w.vcc() == 0) << 10
        | 1 << 16
}

/// The registers of gfx10 (RDNA2 ISA guide, "Hardware Registers"): MODE, STATUS, TRAPSTS,
/// IB_STS and SH_MEM_BASES as on gfx9, HW_ID1 in place of HW_ID; the allocation registers count
/// in other granules, which the core does not model.
fn read_gfx10(w: &Wave, cx: &Cx, id: u16) -> ExecResult<(u32, u32)> {
    match id {
        ID_MODE | ID_STATUS | ID_TRAPSTS | ID_IB_STS | ID_MEM_BASES => read(w, cx, id, false),
        // HW_ID1: WAVE_ID [4:0], SIMD_ID [9:8], WGP_ID [13:10], SA_ID [16], SE_ID [20:18]: the
        // group runs as one WGP of one shader array and engine, a wave's slot is its index.
        ID_HW_ID1 => Ok((w.id_in_group & 0x1f, 0x1f | 0x3 << 8 | 0xf << 10 | 1 << 16 | 0x7 << 18)),
        ID_FLAT_SCR_LO | ID_FLAT_SCR_HI => Ok((w.s[flat_scratch_reg(id)], u32::MAX)),
        ID_HW_ID => Err(ExecError::Invalid("HW_REG_HW_ID does not exist on gfx10 (HW_ID1/HW_ID2 replace it)".into())),
        _ => Err(ExecError::Unimplemented(format!("s_getreg of {} on gfx10", name(id)))),
    }
}

/// s_getreg_b32: the field SIMM16 names, shifted down to bit 0 (`gfx10`: the register ids and
/// layouts of gfx10).
pub fn get(w: &Wave, cx: &Cx, simm16: u16, gfx10: bool) -> ExecResult<u32> {
    let f = decode(simm16);
    let (v, known) = read(w, cx, f.id, gfx10)?;
    if f.mask & !known != 0 {
        return Err(ExecError::Unimplemented(format!(
            "s_getreg of bits {:#x} of {}, which the core does not model",
            f.mask & !known,
            name(f.id)
        )));
    }
    Ok((v & f.mask) >> f.offset)
}

/// s_setreg_b32 / s_setreg_imm32_b32: writes the low bits of `v` into the field SIMM16 names.
/// Only MODE is writable; the other registers are read-only to a shader or hold state the core
/// does not have.
pub fn set(w: &mut Wave, simm16: u16, v: u32, gfx10: bool) -> ExecResult<()> {
    let f = decode(simm16);
    if gfx10 && matches!(f.id, ID_FLAT_SCR_LO | ID_FLAT_SCR_HI) {
        // The wave's FLAT_SCRATCH pair, where flat and scratch instructions find it.
        let r = &mut w.s[flat_scratch_reg(f.id)];
        *r = (*r & !f.mask) | (v << f.offset & f.mask);
        return Ok(());
    }
    if f.id != ID_MODE {
        return Err(ExecError::Unimplemented(format!("s_setreg of {}", name(f.id))));
    }
    let field = v << f.offset & f.mask;
    // Refuse to turn on what the core cannot do (the launch state is the dispatcher's).
    let unsupported = field & (MODE_EXCP_EN | MODE_GPR_IDX_EN | MODE_VSKIP);
    if unsupported != 0 {
        return Err(ExecError::Unimplemented(format!(
            "MODE bits {unsupported:#x} (FP exception traps, GPR indexing, VSKIP)"
        )));
    }
    w.mode = (w.mode & !f.mask) | field;
    Ok(())
}

/// The scalar file index that holds gfx10's FLAT_SCR_LO or FLAT_SCR_HI.
fn flat_scratch_reg(id: u16) -> usize {
    usize::from(crate::wave::FLAT_SCRATCH) + usize::from(id == ID_FLAT_SCR_HI)
}
