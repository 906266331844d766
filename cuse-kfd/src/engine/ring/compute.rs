//! PM4 compute dispatch, as kfdtest dispatches its shaders (ROCT-Thunk-Interface
//! tests/kfdtest/src/Dispatch.cpp): SET_SH_REG (0x76) writes the COMPUTE_* shader registers of
//! the queue's pipe, DISPATCH_DIRECT (0x15) launches the program they describe on the shader
//! core. The dispatch runs to its end before the ring moves on (the packets after it, a
//! RELEASE_MEM fence and interrupt, see its results). With the engine's shader workers its
//! workgroups run on them (as an AQL dispatch's, `engine/grid.rs`) while the ring waits at the
//! packet and the engine thread serves other queues; without, on the engine thread over as
//! many passes as it needs.
//!
//! DISPATCH_INDIRECT (0x16) takes DIM_X/Y/Z, three dwords, from GPU memory when it runs, in
//! either of its two layouts (PAL, GPUOpen-Drivers/pal c5e80007, gfx9CmdUtil.cpp
//! BuildDispatchIndirectMec / BuildDispatchIndirectGfx and the gfx9_plus_merged_f32_{mec,me}
//! packet headers):
//! - the MEC's: [ADDR_LO, ADDR_HI, DISPATCH_INITIATOR], the arguments' own address (PAL and
//!   radv on compute queues);
//! - the ME's: [DATA_OFFSET, DISPATCH_INITIATOR], an offset from the base that SET_BASE (0x11)
//!   set with BASE_INDEX 1, PATCH_TABLE_BASE (PAL PFP_SET_BASE_base_index_enum; Mesa radeonsi
//!   si_compute.c sends this pair with the compute shader type, on compute-only contexts too).
//!
//! The base is state of the queue's pipe, like the registers: it stays until the next SET_BASE.
//! The arguments are read through the process GPU VM when the packet starts (not at SET_BASE),
//! so a dispatch sees what was written before it; an unreadable argument is a VM fault as any
//! other read of the command processor is. A dispatch with a zero DIM launches no workgroups
//! and completes, as the CP does (Vulkan and GL allow zero counts in an indirect dispatch).
//!
//! Register offsets are gfx9's (Linux drivers/gpu/drm/amd/include/asic_reg/gc/gc_9_0_offset.h,
//! v6.1; COMPUTE_PGM_RSRC3 of gfx90a at 0x2e2d as kfdtest writes it for Aldebaran), field
//! layouts those of gc_9_0_sh_mask.h.

use super::Action;
use crate::engine::fault::{QueueFault, ERROR_INVALID_PACKET_FORMAT};
use crate::engine::gfx::{self, Work};
use crate::engine::grid::Offload;
use crate::engine::mem::Mem;
use crate::engine::runner::Deadline;
use crate::engine::runner::Interrupt;
use shader::isa::Target;
use shader::launch::{Dispatch, KernelCode};

// Opcodes: Linux drivers/gpu/drm/amd/amdgpu/soc15d.h (v6.1), the same in nvd.h.
pub const SET_BASE: u8 = 0x11;
pub const DISPATCH_DIRECT: u8 = 0x15;
pub const DISPATCH_INDIRECT: u8 = 0x16;
pub const SET_SH_REG: u8 = 0x76;

/// SET_BASE's BASE_INDEX (body dword 1, bits 3:0; soc15d.h PACKET3_BASE_INDEX) of the base
/// DISPATCH_INDIRECT's DATA_OFFSET counts from: PAL's base_index__pfp_set_base__patch_table_base.
const BASE_INDEX_PATCH_TABLE: u32 = 1;
/// The other indices, named in the refusal: PAL PFP_SET_BASE_base_index_enum, and soc15d.h's
/// CE_PARTITION_BASE (Linux sid.h of gfx6 adds GDS_PARTITION_BASE 2).
fn base_index_name(i: u32) -> Option<&'static str> {
    Some(match i {
        0 => "DISPLAY_LIST_PATCH_TABLE_BASE",
        2 => "GDS_PARTITION_BASE",
        3 => "CE_PARTITION_BASE",
        4 => "LOAD_REG_INDEX_BASE",
        5 => "INDIRECT_DATA_BASE",
        6 => "EXECUTE_INDIRECT_V2",
        _ => return None,
    })
}
/// DISPATCH_INDIRECT's arguments: DIM_X, DIM_Y, DIM_Z.
const INDIRECT_ARGS_BYTES: usize = 12;

/// PACKET3_SET_SH_REG_START (amdgpu soc15d.h): SET_SH_REG's offsets count from here.
const SH_REG_START: u32 = 0x2C00;
/// The compute shader registers: mmCOMPUTE_DISPATCH_INITIATOR (0x2E00) to 0x2E7F.
const COMPUTE_FIRST: u32 = 0x2E00;
const COMPUTE_REGS: usize = 0x80;

const START_X: u32 = 0x2E04;
const NUM_THREAD_X: u32 = 0x2E07;
const PGM_LO: u32 = 0x2E0C;
const PGM_HI: u32 = 0x2E0D;
const DISPATCH_SCRATCH_BASE_LO: u32 = 0x2E10;
const DISPATCH_SCRATCH_BASE_HI: u32 = 0x2E11;
const PGM_RSRC1: u32 = 0x2E12;
const PGM_RSRC2: u32 = 0x2E13;
const TMPRING_SIZE: u32 = 0x2E18;
const PGM_RSRC3: u32 = 0x2E2D;
const USER_DATA_0: u32 = 0x2E40;

// COMPUTE_DISPATCH_INITIATOR bits.
const COMPUTE_SHADER_EN: u32 = 1 << 0;
const ORDERED_APPEND_ENBL: u32 = 1 << 3;
const USE_THREAD_DIMENSIONS: u32 = 1 << 5;
const RESTORE: u32 = 1 << 14;
/// gfx10: CS_W32_EN.
const CS_W32_EN: u32 = 1 << 15;

fn bad(reason: String) -> QueueFault {
    QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason)
}

/// The compute state of one PM4 queue: its shader registers and the dispatch it is running.
#[derive(Debug)]
pub struct Compute {
    /// Boxed (and the dispatch): every PM4_IB packet in flight carries a `Compute` too.
    regs: Box<[u32; COMPUTE_REGS]>,
    running: Option<Box<Work>>,
    /// MSG_INTERRUPTs the running dispatch's waves sent, for the runner to raise.
    pub interrupts: Vec<Interrupt>,
    /// The queue's GPU's gfx_target_version: the machine code its dispatches run.
    gfx_target_version: u32,
    /// The queue's id: its GWS, if it holds them, are its dispatches'.
    queue_id: u32,
    /// The dispatch-indirect base of the last SET_BASE, if any.
    indirect_base: Option<u64>,
}

impl Compute {
    pub fn new(gfx_target_version: u32, queue_id: u32) -> Compute {
        Compute {
            regs: Box::new([0; COMPUTE_REGS]),
            running: None,
            interrupts: Vec::new(),
            gfx_target_version,
            queue_id,
            indirect_base: None,
        }
    }

    fn reg(&self, r: u32) -> u32 {
        self.regs[(r - COMPUTE_FIRST) as usize]
    }

    /// SET_SH_REG: body = [register offset from SH_REG_START, value, value, ...]. Only the
    /// compute registers are the compute pipe's; any other register is refused by name.
    pub fn set_sh_reg(&mut self, p: &[u32]) -> Result<Action, QueueFault> {
        if p.len() < 3 {
            return Err(bad(format!("PM4 SET_SH_REG with {} body dwords, it needs at least 2", p.len() - 1)));
        }
        // Bits 31:28 are SET_SH_REG_INDEX's index field; plain SET_SH_REG sends 0.
        if p[1] >> 16 != 0 {
            return Err(bad(format!("PM4 SET_SH_REG with an index or offset {:#x}: not supported", p[1])));
        }
        let first = SH_REG_START + (p[1] & 0xFFFF);
        let values = &p[2..];
        let end = first + values.len() as u32;
        if first < COMPUTE_FIRST || end > COMPUTE_FIRST + COMPUTE_REGS as u32 {
            return Err(bad(format!(
                "PM4 SET_SH_REG of registers {first:#x}..{end:#x}: only the compute shader registers \
                 {COMPUTE_FIRST:#x}..{:#x} are supported",
                COMPUTE_FIRST + COMPUTE_REGS as u32
            )));
        }
        let at = (first - COMPUTE_FIRST) as usize;
        self.regs[at..at + values.len()].copy_from_slice(values);
        Ok(Action::Done)
    }

    /// SET_BASE: body = [BASE_INDEX, ADDRESS_LO, ADDRESS_HI] (PAL PM4_PFP_SET_BASE: the index in
    /// bits 3:0, the rest reserved; the address 8-byte aligned, ADDRESS_LO's bits 2:0 reserved).
    /// Only the dispatch-indirect base is a compute pipe's; the address is read by the dispatches
    /// that use it, not here.
    pub fn set_base(&mut self, p: &[u32]) -> Result<Action, QueueFault> {
        if p.len() != 4 {
            return Err(bad(format!("PM4 SET_BASE with {} body dwords, it needs 3", p.len() - 1)));
        }
        let index = p[1] & 0xF;
        if p[1] >> 4 != 0 {
            return Err(bad(format!("PM4 SET_BASE dword 1 is {:#x}: bits 31:4 are reserved", p[1])));
        }
        if index != BASE_INDEX_PATCH_TABLE {
            let name = base_index_name(index).map_or_else(|| "reserved".to_string(), |n| format!("the {n}"));
            return Err(bad(format!(
                "PM4 SET_BASE BASE_INDEX {index} ({name}) is not supported: only {BASE_INDEX_PATCH_TABLE}, \
                 the base of DISPATCH_INDIRECT's arguments"
            )));
        }
        let base = u64::from(p[2]) | u64::from(p[3]) << 32;
        if base & 7 != 0 {
            return Err(bad(format!("PM4 SET_BASE address {base:#x} is not 8-byte aligned (bits 2:0 are reserved)")));
        }
        self.indirect_base = Some(base);
        Ok(Action::Done)
    }

    /// DISPATCH_DIRECT: body = [DIM_X, DIM_Y, DIM_Z, DISPATCH_INITIATOR]. Starts the dispatch
    /// the registers describe, or goes on with it (a packet that returned `Sliced` or `Blocked`
    /// runs again); with `offload`, on the shader workers.
    pub fn dispatch_direct(
        &mut self,
        mem: &mut Mem,
        p: &[u32],
        deadline: Deadline,
        offload: Option<Offload>,
    ) -> Result<Action, QueueFault> {
        if self.running.is_none() {
            if p.len() != 5 {
                return Err(bad(format!("PM4 DISPATCH_DIRECT with {} body dwords, it needs 4", p.len() - 1)));
            }
            let Some(dispatch) = self.dispatch("DISPATCH_DIRECT", mem.gpu_id, [p[1], p[2], p[3]], p[4])? else {
                return Ok(Action::Done);
            };
            self.running = Some(Box::new(Work::new(mem, dispatch, self.queue_id)?));
        }
        self.run(mem, deadline, offload)
    }

    /// DISPATCH_INDIRECT: body = [ADDR_LO, ADDR_HI, DISPATCH_INITIATOR] (the MEC's layout) or
    /// [DATA_OFFSET, DISPATCH_INITIATOR] from the SET_BASE base (the ME's); DIM_X/Y/Z are the
    /// three dwords there, read as the packet starts.
    pub fn dispatch_indirect(
        &mut self,
        mem: &mut Mem,
        p: &[u32],
        deadline: Deadline,
        offload: Option<Offload>,
    ) -> Result<Action, QueueFault> {
        if self.running.is_none() {
            let (at, initiator) = match p.len() {
                4 => (u64::from(p[1]) | u64::from(p[2]) << 32, p[3]),
                3 => {
                    let base = self.indirect_base.ok_or_else(|| {
                        bad(format!(
                            "PM4 DISPATCH_INDIRECT at data offset {:#x} without a SET_BASE of BASE_INDEX \
                             {BASE_INDEX_PATCH_TABLE} (the dispatch-indirect base) before it",
                            p[1]
                        ))
                    })?;
                    let at = base.checked_add(u64::from(p[1])).ok_or_else(|| {
                        bad(format!("PM4 DISPATCH_INDIRECT: base {base:#x} + data offset {:#x} wraps around", p[1]))
                    })?;
                    (at, p[2])
                }
                n => {
                    return Err(bad(format!(
                        "PM4 DISPATCH_INDIRECT with {} body dwords: it has 3 (address) or 2 (offset from SET_BASE)",
                        n - 1
                    )))
                }
            };
            if !at.is_multiple_of(4) {
                return Err(bad(format!("PM4 DISPATCH_INDIRECT arguments at {at:#x} are not dword aligned")));
            }
            let mut raw = [0u8; INDIRECT_ARGS_BYTES];
            mem.read(at, &mut raw)?;
            let dims: [u32; 3] =
                std::array::from_fn(|d| u32::from_le_bytes(raw[4 * d..4 * d + 4].try_into().expect("4 bytes")));
            let Some(dispatch) = self.dispatch("DISPATCH_INDIRECT", mem.gpu_id, dims, initiator)? else {
                return Ok(Action::Done);
            };
            self.running = Some(Box::new(Work::new(mem, dispatch, self.queue_id)?));
        }
        self.run(mem, deadline, offload)
    }

    /// Runs the started dispatch until it ends or the slice does, or hands it to the workers
    /// and looks how far they got.
    fn run(&mut self, mem: &mut Mem, deadline: Deadline, offload: Option<Offload>) -> Result<Action, QueueFault> {
        let work = self.running.as_mut().expect("a started dispatch");
        let r = work.resume(mem, deadline, &mut self.interrupts, offload);
        match r {
            Ok(gfx::Progress::Paused) => Ok(Action::Sliced),
            // On the workers (a PM4 dispatch never waits for scratch: Work::new checked it). They
            // wake the engine when it ends or faults.
            Ok(gfx::Progress::Blocked) => Ok(Action::Blocked),
            Ok(gfx::Progress::Finished) => {
                self.running = None;
                Ok(Action::Done)
            }
            Err(f) => {
                self.running = None;
                Err(f)
            }
        }
    }

    /// The queue is going away or has stopped: the running dispatch ends with it (and leaves
    /// the workers).
    pub fn abandon(&mut self) {
        self.running = None;
    }

    /// The dispatch the registers describe, for `dims` and the initiator of packet `op`; None
    /// for a dispatch of no workgroups (a zero DIM: the CP launches no wave, so the program and
    /// its registers are not looked at).
    fn dispatch(&self, op: &str, gpu_id: u32, dims: [u32; 3], initiator: u32) -> Result<Option<Dispatch>, QueueFault> {
        if initiator & COMPUTE_SHADER_EN == 0 {
            return Err(bad(format!("PM4 {op} initiator {initiator:#x} without COMPUTE_SHADER_EN")));
        }
        for (bit, what) in [(ORDERED_APPEND_ENBL, "ORDERED_APPEND_ENBL"), (RESTORE, "RESTORE (a CWSR restore)")] {
            if initiator & bit != 0 {
                return Err(bad(format!("PM4 {op} initiator {initiator:#x}: {what} is not supported")));
            }
        }
        if dims.contains(&0) {
            log::debug!("PM4 {op} of {dims:?}: no workgroups");
            return Ok(None);
        }
        let start = [self.reg(START_X), self.reg(START_X + 1), self.reg(START_X + 2)];
        if start != [0; 3] {
            return Err(bad(format!("PM4 {op} with COMPUTE_START {start:?}: only 0 is supported")));
        }
        // COMPUTE_NUM_THREAD_X/Y/Z: NUM_THREAD_FULL in bits 9:0.
        let wg: [u32; 3] = std::array::from_fn(|d| self.reg(NUM_THREAD_X + d as u32) & 0x3FF);
        // DIM_X/Y/Z count threads with USE_THREAD_DIMENSIONS, workgroups without.
        let grid: [u32; 3] = if initiator & USE_THREAD_DIMENSIONS != 0 {
            dims
        } else {
            let mut g = [0; 3];
            for d in 0..3 {
                g[d] = dims[d]
                    .checked_mul(wg[d])
                    .ok_or_else(|| bad(format!("PM4 {op} of {dims:?} workgroups of {wg:?} threads overflows")))?;
            }
            g
        };
        let pgm = (u64::from(self.reg(PGM_LO)) | u64::from(self.reg(PGM_HI) & 0xFF) << 32) << 8;
        // CS_W32_EN runs gfx10 waves in wave32 (gfx10's DISPATCH_INITIATOR); gfx90a has none.
        let target = match (gfx::target(self.gfx_target_version)?, initiator & CS_W32_EN != 0) {
            (t, true) if t.is_gfx10() => Target::Gfx1030,
            (t, true) => {
                return Err(bad(format!("PM4 {op} initiator {initiator:#x}: CS_W32_EN (wave32) on {}", t.mcpu())))
            }
            (t, false) => t,
        };
        let code = KernelCode::from_registers(target, self.reg(PGM_RSRC1), self.reg(PGM_RSRC2), self.reg(PGM_RSRC3))
            .map_err(|e| bad(format!("PM4 {op} of the program at {pgm:#x}: {e}")))?;
        // COMPUTE_TMPRING_SIZE: WAVES 11:0, WAVESIZE 24:12 in 1 KiB units (kfdtest:
        // `(waveSize << 12) | numWaves`); the scratch base register holds the address >> 8.
        let tmpring = self.reg(TMPRING_SIZE);
        let (waves, wave_bytes) = (u64::from(tmpring & 0xFFF), u64::from((tmpring >> 12) & 0x1FFF) * 1024);
        let scratch_base =
            (u64::from(self.reg(DISPATCH_SCRATCH_BASE_LO)) | u64::from(self.reg(DISPATCH_SCRATCH_BASE_HI)) << 32) << 8;
        let user_data: [u32; 16] = std::array::from_fn(|i| self.reg(USER_DATA_0 + i as u32));
        let wave_size = code.wave_size;
        Ok(Some(Dispatch {
            code,
            kernel_object: pgm,
            grid,
            workgroup_size: wg,
            kernarg: 0,
            packet: 0,
            queue: 0,
            dispatch_id: 0,
            group_segment_size: 0,
            private_segment_size: (wave_bytes / u64::from(wave_size)) as u32,
            scratch_resource: [0; 4],
            scratch_base,
            scratch_size: waves * wave_bytes,
            apertures: gfx::apertures(gpu_id),
            user_data: Some(user_data),
            trap_handler: None,
            gws: None,
        }))
    }
}
