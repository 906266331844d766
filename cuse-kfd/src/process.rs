//! One client process's KFD context (amdkfd's kfd_process and its per-device data): buffers,
//! GPU VM, queues, events.
//!
//! Lock order: `inner` before `vm` before `events`. Waits are completed outside `events`.

use crate::event::wait::Completion;
use crate::event::EventTable;
use crate::memory::backing::{BackingFile, ClientId, Owner};
use crate::memory::offsets::OffsetSpace;
use crate::memory::vm::GpuVm;
use crate::memory::Buffer;
use crate::owner::OwnerProcess;
use crate::queue::doorbell::Doorbells;
use crate::queue::Queue;
use crate::quota::AccountId;
use crate::topology::Topology;
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use uapi::kfd::*;

/// Start of the GPUVM aperture (below it is reserved, as AMDGPU_VA_RESERVED_BOTTOM).
pub const GPUVM_BASE: u64 = 0x20_0000;
/// End (inclusive) of the GPUVM aperture: 47-bit user addresses, shared with the CPU (SVM).
pub const GPUVM_LIMIT: u64 = (1 << 47) - 1;
/// gfx9 LDS and scratch apertures (kfd_flat_memory.c MAKE_*_APP_BASE_V9), 4 GiB each.
pub const LDS_BASE: u64 = 1 << 48;
pub const SCRATCH_BASE: u64 = 2 << 48;
const APERTURE_LIMIT_MASK: u64 = 0xFFFF_FFFF;

/// The apertures of a process on one GPU.
pub fn apertures(gpu_id: u32) -> ProcessDeviceApertures {
    ProcessDeviceApertures {
        lds_base: LDS_BASE,
        lds_limit: LDS_BASE | APERTURE_LIMIT_MASK,
        scratch_base: SCRATCH_BASE,
        scratch_limit: SCRATCH_BASE | APERTURE_LIMIT_MASK,
        gpuvm_base: GPUVM_BASE,
        gpuvm_limit: GPUVM_LIMIT,
        gpu_id,
        pad: 0,
    }
}

/// Per-GPU state of a process (amdkfd kfd_process_device).
#[derive(Debug)]
pub struct ProcessDevice {
    pub gpu_id: u32,
    /// The render node bound by ACQUIRE_VM, as (st_dev, st_ino).
    pub drm_file: Option<(u64, u64)>,
    pub scratch_backing_va: u64,
    pub default_policy: u32,
    pub alternate_policy: u32,
    pub alternate_aperture: (u64, u64),
    pub doorbells: Option<Doorbells>,
    pub mmio_page: Option<Arc<BackingFile>>,
}

impl ProcessDevice {
    fn new(gpu_id: u32) -> ProcessDevice {
        ProcessDevice {
            gpu_id,
            drm_file: None,
            scratch_backing_va: 0,
            default_policy: KFD_IOC_CACHE_POLICY_COHERENT,
            alternate_policy: KFD_IOC_CACHE_POLICY_COHERENT,
            alternate_aperture: (0, 0),
            doorbells: None,
            mmio_page: None,
        }
    }
}

/// Mutable state guarded by the process lock.
#[derive(Debug)]
pub struct ProcessInner {
    pub devices: BTreeMap<u32, ProcessDevice>,
    pub buffers: BTreeMap<u64, Buffer>,
    pub next_buffer_index: u32,
    /// Render-node mmap offsets (like DRM's per-file VMA offsets), reused once freed.
    pub render_offsets: OffsetSpace<BackingFile>,
    pub queues: BTreeMap<u32, Arc<Queue>>,
    pub xnack_enabled: bool,
    pub runtime_enabled: bool,
    /// The handle of the buffer the client gave as its event page, if any.
    pub event_page_handle: Option<u64>,
}

/// Object counts of one process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessStats {
    pub buffers: usize,
    pub mappings: usize,
    pub queues: usize,
    pub events: usize,
    pub waiters: usize,
}

pub struct Process {
    pub pid: u32,
    pub owner: Owner,
    /// The context's own backing files (a directory no other context of its pid shares).
    pub backing: ClientId,
    /// The process this context is bound to: its life ends the context, and USERPTR memory is
    /// its memory. (A simulated client of the embedded device is bound to the process running it.)
    pub memory: Arc<OwnerProcess>,
    /// What its objects are charged to (see [`crate::quota`]); closed by the device's teardown.
    pub account: AccountId,
    inner: Mutex<ProcessInner>,
    vm: RwLock<GpuVm>,
    /// Bumped whenever the VM may change, so cached translations (the engine's TLBs) refill.
    vm_generation: AtomicU64,
    events: Mutex<EventTable>,
    /// The trap handler (TBA, TMA) installed for each GPU with SET_TRAP_HANDLER. A leaf lock:
    /// the engine reads it when a dispatch starts, without the process lock.
    trap_handlers: Mutex<BTreeMap<u32, (u64, u64)>>,
    /// By GPU: the queue holding the GPU's global wave sync resources (one per process, as in
    /// amdkfd) and their values, which its dispatches' waves reach.
    gws: Mutex<BTreeMap<u32, (u32, Arc<shader::gws::Gws>)>>,
}

/// First render-node mmap offset handed out (leaves low offsets unused, as DRM does).
const FIRST_RENDER_OFFSET: u64 = 1 << 32;

impl Process {
    pub fn new(
        pid: u32,
        owner: Owner,
        backing: ClientId,
        memory: Arc<OwnerProcess>,
        account: AccountId,
        topology: &Topology,
    ) -> Process {
        let devices = topology.gpus().iter().map(|g| (g.gpu_id, ProcessDevice::new(g.gpu_id))).collect();
        let vm = GpuVm::with_svm(topology.gpus().iter().map(|g| g.gpu_id).collect(), memory.clone());
        Process {
            pid,
            owner,
            backing,
            memory,
            account,
            inner: Mutex::new(ProcessInner {
                devices,
                buffers: BTreeMap::new(),
                next_buffer_index: 1,
                render_offsets: OffsetSpace::new(FIRST_RENDER_OFFSET, KFD_MMAP_OFFSET_VALUE_MASK),
                queues: BTreeMap::new(),
                xnack_enabled: false,
                runtime_enabled: false,
                event_page_handle: None,
            }),
            vm: RwLock::new(vm),
            vm_generation: AtomicU64::new(0),
            events: Mutex::new(EventTable::default()),
            trap_handlers: Mutex::new(BTreeMap::new()),
            gws: Mutex::new(BTreeMap::new()),
        }
    }

    /// Installs the trap handler at `tba` with its memory at `tma` for `gpu_id`'s dispatches; a
    /// TBA of 0 removes it (amdkfd kfd_process_set_trap_handler only records the addresses).
    pub fn set_trap_handler(&self, gpu_id: u32, tba: u64, tma: u64) {
        let mut t = self.trap_handlers.lock();
        if tba == 0 {
            t.remove(&gpu_id);
        } else {
            t.insert(gpu_id, (tba, tma));
        }
    }

    /// The queue of `gpu_id` that holds its GWS, if one does.
    pub fn gws_queue(&self, gpu_id: u32) -> Option<u32> {
        self.gws.lock().get(&gpu_id).map(|&(q, _)| q)
    }

    /// Gives `gpu_id`'s GWS to `queue` (fresh: every resource at zero), or takes them back.
    pub fn set_gws_queue(&self, gpu_id: u32, queue: Option<u32>) {
        let mut g = self.gws.lock();
        match queue {
            Some(q) => g.insert(gpu_id, (q, Arc::default())),
            None => g.remove(&gpu_id),
        };
    }

    /// The GWS a dispatch on `queue` of `gpu_id` reaches, if that queue holds them.
    pub fn gws(&self, gpu_id: u32, queue: u32) -> Option<Arc<shader::gws::Gws>> {
        self.gws.lock().get(&gpu_id).filter(|&&(q, _)| q == queue).map(|(_, g)| g.clone())
    }

    /// The (TBA, TMA) of `gpu_id`'s trap handler, if one is installed.
    pub fn trap_handler(&self, gpu_id: u32) -> Option<(u64, u64)> {
        self.trap_handlers.lock().get(&gpu_id).copied()
    }

    pub fn inner(&self) -> MutexGuard<'_, ProcessInner> {
        self.inner.lock()
    }

    pub fn vm(&self) -> RwLockReadGuard<'_, GpuVm> {
        self.vm.read()
    }

    /// The VM for changing; invalidates every cached translation (a TLB shootdown).
    pub fn vm_mut(&self) -> RwLockWriteGuard<'_, GpuVm> {
        let guard = self.vm.write();
        self.vm_generation.fetch_add(1, Ordering::AcqRel);
        guard
    }

    pub fn vm_generation(&self) -> u64 {
        self.vm_generation.load(Ordering::Acquire)
    }

    pub fn events(&self) -> MutexGuard<'_, EventTable> {
        self.events.lock()
    }

    pub fn stats(&self) -> ProcessStats {
        let inner = self.inner();
        let mappings = self.vm().mapping_count();
        let ev = self.events();
        ProcessStats {
            buffers: inner.buffers.len(),
            mappings,
            queues: inner.queues.len(),
            events: ev.len(),
            waiters: ev.waiter_count(),
        }
    }

    /// Frees everything: waiters complete with FAIL, queues and buffers go, the VM empties.
    /// Returns the completions to deliver. (Their charges go when the device closes the
    /// account.)
    pub fn teardown(&self) -> Vec<Completion> {
        let mut inner = self.inner();
        let mut done = Vec::new();
        self.events().teardown(&mut done);
        inner.queues.clear();
        let mut vm = self.vm_mut();
        for (_, b) in std::mem::take(&mut inner.buffers) {
            for gpu in &b.mapped_on {
                vm.unmap(*gpu, b.va);
            }
        }
        *vm = GpuVm::default();
        for d in inner.devices.values_mut() {
            d.doorbells = None;
            d.mmio_page = None;
        }
        done
    }
}
