//! Dispatches of GFX machine code: the soft shader core ([`shader`]) runs the kernel one
//! workgroup at a time on the engine thread, sliced by the pass's deadline like the soft kernels.
//!
//! The shader core reaches memory through [`GpuMemory`] (the process GPU VM, with real atomics
//! on shared words); a memory fault stops the queue as the device's VM faults do (MEMORY
//! events), any other fault (an instruction the core lacks, s_trap, ...) is a queue error naming
//! the instruction, its encoding, PC and kernel object.

use super::fault::{
    QueueFault, ERROR_ILLEGAL_INSTRUCTION, ERROR_INVALID_ARGUMENT, ERROR_INVALID_CODE_OBJECT,
    ERROR_INVALID_PACKET_FORMAT, ERROR_TRAP,
};
use super::grid::{Grid, Offload};
use super::kernels::Geometry;
use super::mem::Mem;
use super::runner::Interrupt;
use super::signal;
use crate::engine::runner::Deadline;
use crate::memory::vm::{GpuVa, VmFault};
use shader::exec::{Apertures, Code, Fault};
use shader::group::{self, Workgroup};
use shader::isa::Target;
use shader::launch::{Dispatch, KernelCode, LaunchError, AMD_KERNEL_CODE_SIZE, KERNEL_DESCRIPTOR_SIZE};
use shader::mem::{AtomicOp, MemFault, Memory};
use shader::wave::TrapHandler;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use uapi::aql::KernelDispatchPacket;
use uapi::queue::{
    AmdQueue, AMD_QUEUE_INACTIVE_SIGNAL_OFFSET, AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE,
    AMD_QUEUE_READ_DISPATCH_ID_OFFSET,
};
use uapi::FromBytes;

/// Instructions a workgroup runs between two looks at the clock.
const STEP_BUDGET: u64 = 4096;

/// The payload bits of an SQ interrupt message that reach amdkfd (kfd_int_process_v9.c hands
/// `sq_int_data`, 24 bits of M0, to kfd_signal_event_interrupt).
const SQ_INTERRUPT_BITS: u32 = 24;

/// Where the dispatch packet sits: its address, its index in the ring, and the queue's read
/// pointer (inside its amd_queue_t).
#[derive(Debug, Clone, Copy)]
pub struct PacketAt {
    /// The queue's id: its GWS, if it holds them, are its dispatches'.
    pub queue_id: u32,
    pub slot: u64,
    pub index: u64,
    pub read_ptr: u64,
    /// The GPU's gfx_target_version.
    pub target: u32,
}

/// The shader core's view of the process GPU VM. Keeps the VM fault behind the last failed
/// access, so the queue reports the fault the VM gave (unmapped, read-only, ...).
pub struct GpuMemory<'m, 'a> {
    mem: &'m mut Mem<'a>,
    fault: Option<VmFault>,
}

impl<'m, 'a> GpuMemory<'m, 'a> {
    pub fn new(mem: &'m mut Mem<'a>) -> Self {
        GpuMemory { mem, fault: None }
    }

    /// The VM fault behind the last failed access, if any.
    pub fn take_fault(&mut self) -> Option<VmFault> {
        self.fault.take()
    }

    fn fail(&mut self, e: VmFault, va: u64, len: u64, write: bool) -> MemFault {
        let f = MemFault { va, len, write, reason: e.to_string() };
        self.fault = Some(e);
        f
    }
}

impl Memory for GpuMemory<'_, '_> {
    fn read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        self.mem.read(va, buf).map_err(|e| self.fail(e, va, buf.len() as u64, false))
    }

    fn write(&mut self, va: u64, data: &[u8]) -> Result<(), MemFault> {
        self.mem.write(va, data).map_err(|e| self.fail(e, va, data.len() as u64, true))
    }

    fn atomic32(&mut self, va: u64, op: AtomicOp, src: u32, cmp: u32) -> Result<u32, MemFault> {
        self.mem.update_u32(va, |old| op.apply32(old, src, cmp)).map_err(|e| self.fail(e, va, 4, true))
    }

    fn atomic64(&mut self, va: u64, op: AtomicOp, src: u64, cmp: u64) -> Result<u64, MemFault> {
        self.mem.update_u64(va, |old| op.apply64(old, src, cmp)).map_err(|e| self.fail(e, va, 8, true))
    }
}

/// A dispatch of GFX code part way through: workgroups `next..` are still to run, the one at
/// `next` perhaps started.
pub struct Work {
    dispatch: Dispatch,
    code: Code,
    next: u64,
    total: u64,
    group: Option<Workgroup>,
    /// The workgroups from `next` on, once handed to the worker pool.
    grid: Option<Arc<Grid>>,
    /// The queue_inactive_signal through which more scratch was asked for, until the runtime
    /// answers.
    scratch_request: Option<u64>,
    /// The queue_inactive_signal value through which single-use scratch is being given back
    /// after the dispatch ended, until the runtime answers.
    scratch_return: Option<u64>,
}

/// How far [`Work::resume`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Finished,
    /// Out of time: goes on in the next pass.
    Paused,
    /// Waiting for the runtime to allocate scratch.
    Blocked,
}

/// The queue error that asks the runtime for scratch: ROCr's DynamicScratchHandler reads bit 0
/// ("insufficient scratch", wave64; 0x400 for wave32) from queue_inactive_signal, allocates
/// scratch for the packet at read_dispatch_id, rewrites amd_queue_t's scratch fields and stores
/// 0 to restart the queue (ROCR-Runtime rocm-5.2.3 amd_aql_queue.cpp).
const ERROR_SCRATCH_WAVE64: i64 = 1;
const ERROR_SCRATCH_WAVE32: i64 = 0x400;

/// The queue error that gives single-use scratch back: a large allocation (one the runtime marks
/// AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE in amd_queue_t) serves one dispatch, after which the CP
/// raises 512 ("large scratch reclaim") and waits; ROCr's DynamicScratchHandler releases the
/// scratch, zeroes the queue's scratch fields, stores 0 to the signal and clears the property
/// (ROCR-Runtime rocm-5.2.3 amd_aql_queue.cpp). Until it is released no other queue can have
/// that memory, and ROCr 5.2.3 cannot wait for it (its AddScratchNotifier refuses every real
/// signal, amd_gpu_agent.h), so a second queue's request fails with OUT_OF_RESOURCES.
const ERROR_SCRATCH_RECLAIM: u64 = 512;

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("gfx::Work")
            .field("kernel_object", &format_args!("{:#x}", self.dispatch.kernel_object))
            .field("next", &self.next)
            .field("total", &self.total)
            .finish()
    }
}

/// The queue error of a kernel object or dispatch the shader core cannot launch.
pub(super) fn launch_fault(kernel_object: u64, e: LaunchError) -> QueueFault {
    let code = match e {
        LaunchError::Geometry(_) => ERROR_INVALID_PACKET_FORMAT,
        LaunchError::Lds { .. } | LaunchError::Scratch { .. } => ERROR_INVALID_ARGUMENT,
        _ => ERROR_INVALID_CODE_OBJECT,
    };
    QueueFault::invalid(code, format!("kernel object at {kernel_object:#x}: {e}"))
}

/// Starts the dispatch `p` of the GFX kernel whose first 64 bytes are `raw`.
pub fn start(
    mem: &mut Mem,
    p: &KernelDispatchPacket,
    at: PacketAt,
    raw: &[u8; KERNEL_DESCRIPTOR_SIZE],
    interrupts: &mut Vec<Interrupt>,
) -> Result<Work, QueueFault> {
    let g = Geometry::of(p)?;
    let ko = p.kernel_object;
    let target = target(at.target)?;
    let code = if KernelCode::is_amd_kernel_code(raw) {
        let mut full = [0u8; AMD_KERNEL_CODE_SIZE];
        mem.read(ko, &mut full)?;
        KernelCode::parse(target, &full)
    } else {
        KernelCode::parse(target, raw)
    }
    .map_err(|e| launch_fault(ko, e))?;
    let queue = at.read_ptr.wrapping_sub(AMD_QUEUE_READ_DISPATCH_ID_OFFSET as u64);
    let mut dispatch = Dispatch {
        code,
        kernel_object: ko,
        grid: g.grid.map(|v| v as u32),
        workgroup_size: g.workgroup.map(|v| v as u32),
        kernarg: p.kernarg_address,
        packet: at.slot,
        queue,
        dispatch_id: at.index,
        group_segment_size: p.group_segment_size,
        private_segment_size: p.private_segment_size,
        scratch_resource: [0; 4],
        scratch_base: 0,
        scratch_size: 0,
        apertures: apertures(mem.gpu_id),
        user_data: None,
        // The CP sets TRAP_PRESENT for an AQL dispatch when the runtime installed a handler
        // (AMDGPUUsage, compute_pgm_rsrc2 ENABLE_TRAP_HANDLER). Ours does not yet: ROCr 5.2.3
        // always installs its own (ROCR-Runtime rocm-5.2.3 amd_gpu_agent.cpp BindTrapHandler),
        // whose s_trap path needs what the core lacks (s_sendmsg MSG_GET_DOORBELL, s_setreg of
        // IB_STS, halted waves). So s_trap stays ERROR_TRAP, which ROCr reports as
        // HSA_STATUS_ERROR_EXCEPTION, as it reports the real handler's outcome.
        trap_handler: None,
        gws: mem.process.gws(mem.gpu_id, at.queue_id),
    };
    read_scratch(mem, &mut dispatch);
    match dispatch.check() {
        Ok(()) => Ok(Work::unchecked(dispatch)),
        Err(LaunchError::Scratch { .. }) => {
            let mut work = Work::unchecked(dispatch);
            work.ask_for_scratch(mem, interrupts)?;
            Ok(work)
        }
        Err(e) => Err(launch_fault(ko, e)),
    }
}

/// The shader core target of a GPU of `gfx_target_version` (amdkfd kfd_device.c: 90010 gfx90a,
/// 100300 gfx1030; for gfx10 the wave size is the kernel's: [`KernelCode::parse`] or
/// DISPATCH_INITIATOR picks it).
pub fn target(gfx_target_version: u32) -> Result<Target, QueueFault> {
    match gfx_target_version {
        90010 => Ok(Target::Gfx90a),
        100300 => Ok(Target::Gfx1030W64),
        v => Err(QueueFault::invalid(
            ERROR_INVALID_CODE_OBJECT,
            format!("this GPU (gfx_target_version {v}) runs machine code the shader core has no target for"),
        )),
    }
}

/// The device's apertures as the shader core resolves FLAT addresses against them.
pub fn apertures(gpu_id: u32) -> Apertures {
    let ap = crate::process::apertures(gpu_id);
    Apertures {
        shared_base: ap.lds_base,
        shared_limit: ap.lds_limit,
        private_base: ap.scratch_base,
        private_limit: ap.scratch_limit,
        // The topology advertises no SRAM ECC (HSA_CAP_SRAM_EDCSUPPORTED), so ROCr's ISA is
        // sramecc-: d16 loads keep the other half of their register.
        sramecc: false,
    }
}

/// The queue's scratch, from its amd_queue_t (which holds the read pointer): the private segment
/// buffer V# and the backing memory's size. Its 64-bit base (AMDGPUUsage "Flat Scratch": the
/// address of the queue's scratch backing memory) is SH_HIDDEN_PRIVATE_BASE plus
/// scratch_backing_memory_location, which is where ROCr points the V# (InitScratchSRD: the
/// queue's scratch base); the engine takes it from the V#'s 48-bit base address (word 0, word 1
/// bits 15:0) rather than the process lock. A client without an amd_queue_t (the thunk alone)
/// has no scratch.
fn read_scratch(mem: &mut Mem, d: &mut Dispatch) {
    let mut q = [0u8; std::mem::size_of::<AmdQueue>()];
    let Ok(()) = mem.read(d.queue, &mut q) else { return };
    let q = AmdQueue::read_from_bytes(&q).expect("sized");
    let v = q.scratch_resource_descriptor;
    d.scratch_resource = v;
    d.scratch_base = u64::from(v[0]) | u64::from(v[1] & 0xffff) << 32;
    d.scratch_size = q.scratch_backing_memory_byte_size;
}

/// COMPUTE_PGM_RSRC2.TRAP_PRESENT (AMDGPUUsage, compute_pgm_rsrc2 bit 6 ENABLE_TRAP_HANDLER).
const RSRC2_TRAP_PRESENT: u32 = 1 << 6;

impl Work {
    /// The work of a PM4 dispatch, checked as a whole before any workgroup runs (its scratch is
    /// what the registers say). With COMPUTE_PGM_RSRC2.TRAP_PRESENT set by the client its waves
    /// get the trap handler the process installed for the GPU with SET_TRAP_HANDLER, if any.
    /// The waves of a dispatch on queue `queue_id` reach its GWS, if it holds them.
    pub fn new(mem: &Mem, mut dispatch: Dispatch, queue_id: u32) -> Result<Work, QueueFault> {
        dispatch.check().map_err(|e| launch_fault(dispatch.kernel_object, e))?;
        dispatch.gws = mem.process.gws(mem.gpu_id, queue_id);
        if dispatch.code.rsrc2 & RSRC2_TRAP_PRESENT != 0 {
            dispatch.trap_handler = mem.process.trap_handler(mem.gpu_id).map(|(tba, tma)| TrapHandler { tba, tma });
        }
        Ok(Work::unchecked(dispatch))
    }

    fn unchecked(dispatch: Dispatch) -> Work {
        let total = dispatch.workgroups();
        let code = Code::new(dispatch.code.target);
        Work { dispatch, code, next: 0, total, group: None, grid: None, scratch_request: None, scratch_return: None }
    }

    /// Asks the runtime for scratch through the queue's queue_inactive_signal, as the CP does:
    /// the error code, then the signal's event.
    fn ask_for_scratch(&mut self, mem: &mut Mem, interrupts: &mut Vec<Interrupt>) -> Result<(), QueueFault> {
        let ko = self.dispatch.kernel_object;
        let no_scratch = |d: &Dispatch| launch_fault(ko, d.check().expect_err("scratch is short"));
        let field = self.dispatch.queue.checked_add(AMD_QUEUE_INACTIVE_SIGNAL_OFFSET as u64);
        let signal = field.and_then(|f| mem.load_u64(f, Ordering::Acquire).ok()).unwrap_or(0);
        let value = signal.checked_add(uapi::signal::AMD_SIGNAL_VALUE_OFFSET as u64);
        let Some(value) = value.filter(|_| signal != 0) else {
            return Err(no_scratch(&self.dispatch));
        };
        let request = self.scratch_error() as u64;
        if mem.update_u64(value, |old| if old == 0 { request } else { old })? != 0 {
            // The runtime has not answered an earlier error: no one will allocate.
            return Err(no_scratch(&self.dispatch));
        }
        if let Some(ev) = signal::notify(mem, signal)? {
            interrupts.push(Interrupt { context_id: ev, valid_bits: 32 });
        }
        log::debug!("kernel object at {ko:#x}: asked the runtime for scratch");
        self.scratch_request = Some(value);
        Ok(())
    }

    /// The queue error that asks for scratch for this dispatch's wave size.
    fn scratch_error(&self) -> i64 {
        if self.dispatch.code.wave_size == 32 {
            ERROR_SCRATCH_WAVE32
        } else {
            ERROR_SCRATCH_WAVE64
        }
    }

    /// Whether the runtime answered the scratch request: 0 restarts the queue with new scratch
    /// fields; anything else is its error.
    fn scratch_answered(&mut self, mem: &mut Mem, value: u64) -> Result<bool, QueueFault> {
        let v = mem.load_u64(value, Ordering::Acquire)? as i64;
        if v == self.scratch_error() {
            return Ok(false);
        }
        self.scratch_request = None;
        read_scratch(mem, &mut self.dispatch);
        let ko = self.dispatch.kernel_object;
        match self.dispatch.check() {
            Ok(()) if v == 0 => Ok(true),
            Ok(()) => Err(QueueFault::invalid(
                ERROR_INVALID_ARGUMENT,
                format!("kernel object at {ko:#x}: the runtime answered the scratch request with {v}"),
            )),
            Err(e) => Err(launch_fault(ko, e)),
        }
    }

    /// Runs workgroups until all have ended, `deadline` has passed (some instructions ran) or
    /// the dispatch waits for scratch. MSG_INTERRUPT payloads are appended to `interrupts`.
    ///
    /// With `offload`, a dispatch of more than one workgroup runs on the worker pool: the queue
    /// waits (`Blocked`) until the workers are done, and is woken when they have news.
    ///
    /// A dispatch that ran on single-use scratch gives it back before it is finished.
    pub fn resume(
        &mut self,
        mem: &mut Mem,
        deadline: Deadline,
        interrupts: &mut Vec<Interrupt>,
        offload: Option<Offload>,
    ) -> Result<Progress, QueueFault> {
        if let Some(value) = self.scratch_return {
            // Any other value than the request is the runtime's answer (0, or -1 when the
            // queue is being torn down).
            if mem.load_u64(value, Ordering::Acquire)? == ERROR_SCRATCH_RECLAIM {
                return Ok(Progress::Blocked);
            }
            self.scratch_return = None;
            return Ok(Progress::Finished);
        }
        match self.run(mem, deadline, interrupts, offload)? {
            Progress::Finished => self.give_back_scratch(mem, interrupts),
            p => Ok(p),
        }
    }

    /// After the last workgroup: if the queue's scratch is single use, raises 512 through the
    /// queue_inactive_signal and waits for the runtime to release it ([`ERROR_SCRATCH_RECLAIM`]).
    fn give_back_scratch(&mut self, mem: &mut Mem, interrupts: &mut Vec<Interrupt>) -> Result<Progress, QueueFault> {
        let mut q = [0u8; std::mem::size_of::<AmdQueue>()];
        if self.dispatch.queue == 0 || mem.read(self.dispatch.queue, &mut q).is_err() {
            return Ok(Progress::Finished);
        }
        let q = AmdQueue::read_from_bytes(&q).expect("sized");
        let (properties, signal) = (q.queue_properties, q.queue_inactive_signal);
        if properties & AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE == 0 || signal == 0 {
            return Ok(Progress::Finished);
        }
        let value = signal.wrapping_add(uapi::signal::AMD_SIGNAL_VALUE_OFFSET as u64);
        if mem.update_u64(value, |old| if old == 0 { ERROR_SCRATCH_RECLAIM } else { old })? != 0 {
            // An earlier error is still unanswered: the runtime reclaims nothing now.
            return Ok(Progress::Finished);
        }
        if let Some(ev) = signal::notify(mem, signal)? {
            interrupts.push(Interrupt { context_id: ev, valid_bits: 32 });
        }
        log::debug!("kernel object at {:#x}: gave single-use scratch back", self.dispatch.kernel_object);
        self.scratch_return = Some(value);
        Ok(Progress::Blocked)
    }

    /// [`Work::resume`] up to the end of the last workgroup.
    fn run(
        &mut self,
        mem: &mut Mem,
        deadline: Deadline,
        interrupts: &mut Vec<Interrupt>,
        offload: Option<Offload>,
    ) -> Result<Progress, QueueFault> {
        if let Some(value) = self.scratch_request {
            if !self.scratch_answered(mem, value)? {
                return Ok(Progress::Blocked);
            }
        }
        if let Some(grid) = &self.grid {
            return grid.poll(interrupts);
        }
        if let Some(o) = offload.filter(|_| self.group.is_none() && self.total - self.next > 1) {
            let code = std::mem::replace(&mut self.code, Code::new(self.dispatch.code.target));
            let grid = Grid::submit(self.dispatch.clone(), self.next, code, o, mem.gpu_id);
            let progress = grid.poll(interrupts);
            self.grid = Some(grid);
            return progress;
        }
        let mut payloads = Vec::new();
        loop {
            if self.group.is_none() {
                if self.next >= self.total {
                    return Ok(Progress::Finished);
                }
                let id = self.dispatch.workgroup_id(self.next);
                let g = self.dispatch.workgroup(id).map_err(|e| launch_fault(self.dispatch.kernel_object, e))?;
                self.group = Some(g);
            }
            let group = self.group.as_mut().expect("set above");
            let mut gm = GpuMemory::new(mem);
            payloads.clear();
            let r = group.run(&mut self.code, &mut gm, self.dispatch.apertures, STEP_BUDGET, &mut payloads);
            let vm = gm.fault.take();
            interrupts.extend(payloads.iter().map(|&p| sq_interrupt(p)));
            match r {
                Ok(group::Progress::Finished) => {
                    self.group = None;
                    self.next += 1;
                    if self.next >= self.total {
                        return Ok(Progress::Finished);
                    }
                }
                Ok(group::Progress::Paused) => {}
                Err(f) => return Err(self.fault(f, vm)),
            }
            if deadline.passed() {
                return Ok(Progress::Paused);
            }
        }
    }

    fn fault(&self, f: Fault, vm: Option<VmFault>) -> QueueFault {
        fault(&self.dispatch, self.next, f, vm)
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        // A queue that stops or goes away takes its dispatch off the workers.
        if let Some(g) = &self.grid {
            g.cancel();
        }
    }
}

/// The interrupt of an SQ message with `payload` (M0).
pub(super) fn sq_interrupt(payload: u32) -> Interrupt {
    Interrupt { context_id: payload & ((1 << SQ_INTERRUPT_BITS) - 1), valid_bits: SQ_INTERRUPT_BITS }
}

/// The queue fault of a wave's fault in workgroup `index` of `d`, logged with where it happened.
pub(super) fn fault(d: &Dispatch, index: u64, f: Fault, vm: Option<VmFault>) -> QueueFault {
    let id = d.workgroup_id(index);
    let entry = d.code.entry(d.kernel_object).unwrap_or(0);
    let text = format!("kernel object at {:#x} (entry {entry:#x}), workgroup {id:?}: {f}", d.kernel_object);
    log::error!("{text}");
    match (f, vm) {
        (Fault::Memory { .. }, Some(vm)) => QueueFault::Vm(vm),
        // A fault the core found itself (an address outside the private aperture, ...).
        (Fault::Memory { fault, .. }, None) => QueueFault::Vm(VmFault::Unmapped { va: GpuVa(fault.va) }),
        (Fault::Trap { .. }, _) => QueueFault::invalid(ERROR_TRAP, text),
        _ => QueueFault::invalid(ERROR_ILLEGAL_INSTRUCTION, text),
    }
}
