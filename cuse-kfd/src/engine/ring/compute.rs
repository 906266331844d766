//! PM4 compute dispatch, as kfdtest dispatches its shaders (ROCT-Thunk-Interface
//! tests/kfdtest/src/Dispatch.cpp): SET_SH_REG (0x76) writes the COMPUTE_* shader registers of
//! the queue's pipe, DISPATCH_DIRECT (0x15) launches the program they describe on the shader
//! core. The dispatch runs to its end before the ring moves on (the packets after it, a
//! RELEASE_MEM fence and interrupt, see its results), over as many passes as it needs.
//!
//! Register offsets are gfx9's (Linux drivers/gpu/drm/amd/include/asic_reg/gc/gc_9_0_offset.h,
//! v6.1; COMPUTE_PGM_RSRC3 of gfx90a at 0x2e2d as kfdtest writes it for Aldebaran), field
//! layouts those of gc_9_0_sh_mask.h.

use super::Action;
use crate::engine::fault::{QueueFault, ERROR_INVALID_PACKET_FORMAT};
use crate::engine::gfx::{self, Work};
use crate::engine::mem::Mem;
use crate::engine::runner::Interrupt;
use shader::isa::Target;
use shader::launch::{Dispatch, KernelCode};
use std::time::Instant;

pub const DISPATCH_DIRECT: u8 = 0x15;
pub const SET_SH_REG: u8 = 0x76;

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
}

impl Compute {
    pub fn new(gfx_target_version: u32) -> Compute {
        Compute { regs: Box::new([0; COMPUTE_REGS]), running: None, interrupts: Vec::new(), gfx_target_version }
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

    /// DISPATCH_DIRECT: body = [DIM_X, DIM_Y, DIM_Z, DISPATCH_INITIATOR]. Starts the dispatch
    /// the registers describe, or goes on with it (a packet that returned `Sliced` runs again).
    pub fn dispatch_direct(&mut self, mem: &mut Mem, p: &[u32], deadline: Instant) -> Result<Action, QueueFault> {
        if self.running.is_none() {
            if p.len() != 5 {
                return Err(bad(format!("PM4 DISPATCH_DIRECT with {} body dwords, it needs 4", p.len() - 1)));
            }
            let dispatch = self.dispatch(mem.gpu_id, [p[1], p[2], p[3]], p[4])?;
            self.running = Some(Box::new(Work::new(dispatch)?));
        }
        let work = self.running.as_mut().expect("started above");
        // PM4 dispatches run on the ring's thread (the pool serves AQL queues).
        let r = work.resume(mem, deadline, &mut self.interrupts, None);
        match r {
            // A PM4 dispatch never waits for scratch (Work::new checked it).
            Ok(gfx::Progress::Paused | gfx::Progress::Blocked) => Ok(Action::Sliced),
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

    /// The queue is going away: the running dispatch ends with it.
    pub fn abandon(&mut self) {
        self.running = None;
    }

    /// The dispatch the registers describe, for `dims` and the initiator.
    fn dispatch(&self, gpu_id: u32, dims: [u32; 3], initiator: u32) -> Result<Dispatch, QueueFault> {
        if initiator & COMPUTE_SHADER_EN == 0 {
            return Err(bad(format!("PM4 DISPATCH_DIRECT initiator {initiator:#x} without COMPUTE_SHADER_EN")));
        }
        for (bit, what) in [(ORDERED_APPEND_ENBL, "ORDERED_APPEND_ENBL"), (RESTORE, "RESTORE (a CWSR restore)")] {
            if initiator & bit != 0 {
                return Err(bad(format!("PM4 DISPATCH_DIRECT initiator {initiator:#x}: {what} is not supported")));
            }
        }
        let start = [self.reg(START_X), self.reg(START_X + 1), self.reg(START_X + 2)];
        if start != [0; 3] {
            return Err(bad(format!("PM4 DISPATCH_DIRECT with COMPUTE_START {start:?}: only 0 is supported")));
        }
        // COMPUTE_NUM_THREAD_X/Y/Z: NUM_THREAD_FULL in bits 9:0.
        let wg: [u32; 3] = std::array::from_fn(|d| self.reg(NUM_THREAD_X + d as u32) & 0x3FF);
        // DIM_X/Y/Z count threads with USE_THREAD_DIMENSIONS, workgroups without.
        let grid: [u32; 3] = if initiator & USE_THREAD_DIMENSIONS != 0 {
            dims
        } else {
            let mut g = [0; 3];
            for d in 0..3 {
                g[d] = dims[d].checked_mul(wg[d]).ok_or_else(|| {
                    bad(format!("PM4 DISPATCH_DIRECT of {dims:?} workgroups of {wg:?} threads overflows"))
                })?;
            }
            g
        };
        let pgm = (u64::from(self.reg(PGM_LO)) | u64::from(self.reg(PGM_HI) & 0xFF) << 32) << 8;
        // CS_W32_EN runs gfx10 waves in wave32 (gfx10's DISPATCH_INITIATOR); gfx90a has none.
        let target = match (gfx::target(self.gfx_target_version)?, initiator & CS_W32_EN != 0) {
            (t, true) if t.is_gfx10() => Target::Gfx1030,
            (t, true) => {
                return Err(bad(format!(
                    "PM4 DISPATCH_DIRECT initiator {initiator:#x}: CS_W32_EN (wave32) on {}",
                    t.mcpu()
                )))
            }
            (t, false) => t,
        };
        let code = KernelCode::from_registers(target, self.reg(PGM_RSRC1), self.reg(PGM_RSRC2), self.reg(PGM_RSRC3))
            .map_err(|e| bad(format!("PM4 DISPATCH_DIRECT of the program at {pgm:#x}: {e}")))?;
        // COMPUTE_TMPRING_SIZE: WAVES 11:0, WAVESIZE 24:12 in 1 KiB units (kfdtest:
        // `(waveSize << 12) | numWaves`); the scratch base register holds the address >> 8.
        let tmpring = self.reg(TMPRING_SIZE);
        let (waves, wave_bytes) = (u64::from(tmpring & 0xFFF), u64::from((tmpring >> 12) & 0x1FFF) * 1024);
        let scratch_base =
            (u64::from(self.reg(DISPATCH_SCRATCH_BASE_LO)) | u64::from(self.reg(DISPATCH_SCRATCH_BASE_HI)) << 32) << 8;
        let user_data: [u32; 16] = std::array::from_fn(|i| self.reg(USER_DATA_0 + i as u32));
        let wave_size = code.wave_size;
        Ok(Dispatch {
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
        })
    }
}
