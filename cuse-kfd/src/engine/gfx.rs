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
use super::kernels::Geometry;
use super::mem::Mem;
use super::runner::Interrupt;
use crate::memory::vm::{GpuVa, VmFault};
use shader::exec::{Apertures, Code, Fault};
use shader::group::{Progress, Workgroup};
use shader::isa::Target;
use shader::launch::{Dispatch, KernelCode, LaunchError, AMD_KERNEL_CODE_SIZE, KERNEL_DESCRIPTOR_SIZE};
use shader::mem::{AtomicOp, MemFault, Memory};
use std::time::Instant;
use uapi::aql::KernelDispatchPacket;
use uapi::queue::{AmdQueue, AMD_QUEUE_READ_DISPATCH_ID_OFFSET};
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
    pub slot: u64,
    pub index: u64,
    pub read_ptr: u64,
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
}

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
fn launch_fault(kernel_object: u64, e: LaunchError) -> QueueFault {
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
) -> Result<Work, QueueFault> {
    let g = Geometry::of(p)?;
    let ko = p.kernel_object;
    let target = target(mem.gpu_id)?;
    let code = if KernelCode::is_amd_kernel_code(raw) {
        let mut full = [0u8; AMD_KERNEL_CODE_SIZE];
        mem.read(ko, &mut full)?;
        KernelCode::parse(target, &full)
    } else {
        KernelCode::parse(target, raw)
    }
    .map_err(|e| launch_fault(ko, e))?;
    // The queue's amd_queue_t holds the read pointer; its scratch fields give the private
    // segment buffer V# and backing memory (ROCr fills them; a client without an amd_queue_t,
    // the thunk alone, has no scratch).
    let queue = at.read_ptr.wrapping_sub(AMD_QUEUE_READ_DISPATCH_ID_OFFSET as u64);
    let mut q = [0u8; std::mem::size_of::<AmdQueue>()];
    let q = mem.read(queue, &mut q).ok().map(|()| AmdQueue::read_from_bytes(&q).expect("sized"));
    let dispatch = Dispatch {
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
        scratch_resource: q.map_or([0; 4], |q| q.scratch_resource_descriptor),
        scratch_base: q.map_or(0, |q| q.scratch_backing_memory_location),
        scratch_size: q.map_or(0, |q| q.scratch_backing_memory_byte_size),
        apertures: apertures(mem.gpu_id),
        user_data: None,
    };
    Work::new(dispatch)
}

/// The shader core target of the GPU `gpu_id`, from its profile's gfx_target_version (for
/// gfx10 the wave size is the kernel's: [`KernelCode::parse`] or DISPATCH_INITIATOR picks it).
pub fn target(gpu_id: u32) -> Result<Target, QueueFault> {
    let p = crate::topology::profile_of_gpu_id(gpu_id);
    match p.map(|p| p.gfx_target_version) {
        Some(90010) => Ok(Target::Gfx90a),
        Some(100300) => Ok(Target::Gfx1030W64),
        _ => Err(QueueFault::invalid(
            ERROR_INVALID_CODE_OBJECT,
            format!("gpu {gpu_id:#x} ({}) has no shader core target", p.map_or("no known profile", |p| p.name)),
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

impl Work {
    /// The work of `dispatch`, checked as a whole before any workgroup runs.
    pub fn new(dispatch: Dispatch) -> Result<Work, QueueFault> {
        dispatch.check().map_err(|e| launch_fault(dispatch.kernel_object, e))?;
        let total = dispatch.workgroups();
        let code = Code::new(dispatch.code.target);
        Ok(Work { dispatch, code, next: 0, total, group: None })
    }

    /// Runs workgroups until all have ended (`Ok(true)`) or `deadline` has passed (`Ok(false)`;
    /// some instructions ran). MSG_INTERRUPT payloads are appended to `interrupts`.
    pub fn resume(
        &mut self,
        mem: &mut Mem,
        deadline: Instant,
        interrupts: &mut Vec<Interrupt>,
    ) -> Result<bool, QueueFault> {
        let mut payloads = Vec::new();
        loop {
            if self.group.is_none() {
                if self.next >= self.total {
                    return Ok(true);
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
            interrupts.extend(
                payloads.iter().map(|&p| Interrupt {
                    context_id: p & ((1 << SQ_INTERRUPT_BITS) - 1),
                    valid_bits: SQ_INTERRUPT_BITS,
                }),
            );
            match r {
                Ok(Progress::Finished) => {
                    self.group = None;
                    self.next += 1;
                    if self.next >= self.total {
                        return Ok(true);
                    }
                }
                Ok(Progress::Paused) => {}
                Err(f) => return Err(self.fault(f, vm)),
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }

    /// The queue fault of a wave's fault, logged with where it happened.
    fn fault(&self, f: Fault, vm: Option<VmFault>) -> QueueFault {
        let d = &self.dispatch;
        let id = d.workgroup_id(self.next);
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
}
