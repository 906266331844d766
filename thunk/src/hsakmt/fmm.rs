//! The memory manager (libhsakmt's fmm.c): the SVM aperture, buffer objects and their GPU
//! mappings, the scratch backing, the MMIO remap pages.
//!
//! Every KFD GPU here maps the whole 47-bit user address space (GET_PROCESS_APERTURES_NEW
//! gives gpuvm_base..gpuvm_limit = 2 MiB..2^47), so, as libhsakmt does for such GPUs, one SVM
//! aperture holds every buffer and a buffer's GPU address is its CPU address: the thunk
//! reserves address space with mmap (PROT_NONE), allocates the buffer object at that address
//! and, for host-accessible memory, maps the object's backing file there (MAP_FIXED). Big
//! buffers are aligned to a power of two up to 2 MiB, as libhsakmt aligns them.
//!
//! Objects are found by their start address, registered user memory also by its CPU address;
//! `query` finds the object containing an address.

use super::aperture::Ranges;
use super::types::*;
use super::{Result, Status, PAGE_SIZE};
use crate::memory::{open_backing, Space};
use crate::{vm, Kfd};
use nix::errno::Errno;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use uapi::ioctl::*;
use uapi::kfd::*;

/// libhsakmt's default maximum VA alignment (PAGE_SIZE << 9).
const MAX_VA_ALIGN: u64 = 2 << 20;
/// Scratch backing is 64 KiB aligned (SH_HIDDEN_PRIVATE_BASE holds va >> 16).
const SCRATCH_ALIGN: u64 = 0x10000;
/// The SVM aperture is aligned to GPU huge pages.
const GPU_HUGE_PAGE_SIZE: u64 = 2 << 20;

/// What kind of object an address range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// hsaKmtAllocMemory (VRAM, GTT or paged system memory).
    Allocated,
    /// Host memory registered with hsaKmtRegisterMemory*: a USERPTR object at its own GPU
    /// address over the caller's pages.
    Userptr { cpu: u64, cpu_size: u64, registrations: u32 },
    /// An IPC import.
    Imported,
    /// The thunk's own mappings of device pages (doorbell slice, MMIO remap page).
    Internal,
}

#[derive(Debug)]
pub(super) struct Object {
    pub start: u64,
    pub size: u64,
    pub handle: u64,
    pub node_id: u32,
    pub flags: MemFlags,
    pub kind: Kind,
    /// gpu ids the object is registered to (empty: all GPUs).
    registered: Vec<u32>,
    registered_nodes: Arc<[u32]>,
    /// gpu ids it is mapped on.
    mapped: Vec<u32>,
    mapped_nodes: Arc<[u32]>,
    /// How many maps a user pointer has taken (it is mapped once).
    mapping_count: u32,
    user_data: u64,
}

impl Object {
    fn new(start: u64, size: u64, handle: u64, node_id: u32, flags: MemFlags, kind: Kind) -> Object {
        Object {
            start,
            size,
            handle,
            node_id,
            flags,
            kind,
            registered: Vec::new(),
            registered_nodes: Arc::from([]),
            mapped: Vec::new(),
            mapped_nodes: Arc::from([]),
            mapping_count: 0,
            user_data: 0,
        }
    }

    fn end(&self) -> u64 {
        self.start + self.size
    }
}

/// A buffer IPC_IMPORT_HANDLE made, for [`Fmm::add_imported`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Import {
    pub va: u64,
    pub size: u64,
    pub handle: u64,
    pub node_id: u32,
    pub flags: MemFlags,
}

/// The scratch backing of one GPU: a reservation and the VRAM objects mapped into it.
#[derive(Debug, Default)]
struct Scratch {
    base: u64,
    size: u64,
    /// start -> (handle, size).
    pieces: BTreeMap<u64, (u64, u64)>,
}

#[derive(Debug, Default)]
struct State {
    objects: BTreeMap<u64, Object>,
    /// CPU address of registered user memory -> object start.
    userptrs: BTreeMap<u64, u64>,
    /// gpu_id -> scratch backing.
    scratch: HashMap<u32, Scratch>,
    /// gpu_id -> address of its MMIO remap page.
    mmio: HashMap<u32, u64>,
}

/// One GPU the process has apertures on.
#[derive(Debug, Clone, Copy)]
pub(super) struct GpuMem {
    pub gpu_id: u32,
    pub node_id: u32,
    pub apertures: ProcessDeviceApertures,
}

/// The memory manager of one open thunk.
#[derive(Debug)]
pub(super) struct Fmm {
    gpus: Vec<GpuMem>,
    all_gpu_ids: Vec<u32>,
    svm_base: u64,
    svm_limit: u64,
    /// Paged system memory as USERPTR over anonymous pages (HSA_USERPTR_FOR_PAGED_MEM=1) rather
    /// than as GTT in a shared file.
    userptr_for_paged: bool,
    /// HSA_DISABLE_CACHE: every allocation coherent and uncached.
    disable_cache: bool,
    state: Mutex<State>,
    /// The one reservation buffers' ranges are carved from (see [`super::aperture`]); `None` if the
    /// system would not give it, and then each range is a reservation of its own.
    space: Option<Mutex<Ranges>>,
}

/// HsaMemFlags for what the device was asked (fmm_translate_ioc_to_hsa_flags).
fn ioc_to_hsa_flags(ioc: u32) -> MemFlags {
    MemFlags(0)
        .with_read_only(u32::from(ioc & KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE == 0))
        .with_coarse_grain(u32::from(ioc & KFD_IOC_ALLOC_MEM_FLAGS_COHERENT == 0))
        .with_host_access(u32::from(ioc & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC != 0))
}

/// KFD allocation attributes for HsaMemFlags (fmm_translate_hsa_to_ioc_flags): AQL queue
/// memory is uncached, everything executable (ROCr cannot ask for execute permission).
fn hsa_to_ioc_flags(f: MemFlags) -> u32 {
    let mut ioc = KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
    if f.aql_queue_memory() != 0 {
        ioc |= KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM | KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;
    }
    if f.read_only() == 0 {
        ioc |= KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    }
    ioc
}

/// # Safety
///
/// As for [`Kfd::call`]: the pointers inside `a` are valid for the request.
unsafe fn ioctl<T: uapi::FromBytes + uapi::IntoBytes + uapi::Immutable>(
    kfd: &Kfd,
    cmd: u32,
    a: &mut T,
) -> std::result::Result<(), Errno> {
    // SAFETY: this function's contract.
    unsafe { super::ioctl(kfd, cmd, a) }
}

fn free_bo(kfd: &Kfd, handle: u64) -> std::result::Result<(), Errno> {
    // SAFETY: FREE_MEMORY_OF_GPU's argument holds no pointer.
    unsafe { ioctl(kfd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut FreeMemoryOfGpuArgs { handle }) }
}

/// The alignment libhsakmt gives a buffer of `size` bytes: pages doubled while the buffer is at
/// least twice as big, up to 2 MiB.
fn va_align(size: u64) -> u64 {
    let mut align = PAGE_SIZE;
    while align < MAX_VA_ALIGN && size >= align << 1 {
        align <<= 1;
    }
    align
}

/// Address space reserved for buffers at once: 1 TiB (of 128 TiB of user space), or less if
/// the system will not give that much in the SVM aperture; it costs no memory.
const SPACE_BYTES: [u64; 4] = [1 << 40, 1 << 38, 1 << 36, 1 << 34];

/// Reserves the largest of [`SPACE_BYTES`] the system gives inside `[base, limit]`.
fn reserve_space(base: u64, limit: u64) -> Option<Ranges> {
    for size in SPACE_BYTES {
        let Ok(va) = vm::reserve_aligned(size as usize, GPU_HUGE_PAGE_SIZE as usize) else { continue };
        if va >= base && va + (size - 1) <= limit {
            return Some(Ranges::new(va, size));
        }
        // SAFETY: the reservation made just above, which nothing else knows of.
        unsafe { vm::release(va, size as usize) };
    }
    log::warn!("no SVM reservation: every buffer gets a reservation of its own");
    None
}

impl Drop for Fmm {
    fn drop(&mut self) {
        if let Some(space) = &self.space {
            let space = space.lock();
            // SAFETY: the manager's own reservation; the thunk closes (destroy_all) before it
            // drops this, so no object lives in it, and the thunk hands out addresses only.
            unsafe { vm::release(space.base(), space.size() as usize) };
        }
    }
}

impl Fmm {
    /// Sets up the apertures of every GPU node (fmm_init_process_apertures).
    pub fn new(kfd: &Kfd, topo: &super::topology::Topology, options: &super::Options) -> Result<Fmm> {
        let mut a = GetProcessAperturesNewArgs::default();
        // SAFETY: a null array pointer: the device only counts the nodes.
        unsafe { ioctl(kfd, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut a) }.map_err(|_| Status::Error)?;
        let mut aps = vec![ProcessDeviceApertures::default(); a.num_of_nodes as usize];
        if !aps.is_empty() {
            a.kfd_process_device_apertures_ptr = aps.as_mut_ptr() as u64;
            // SAFETY: the pointer is `aps`'s, `num_of_nodes` entries long, owned here and not
            // borrowed during the call.
            unsafe { ioctl(kfd, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut a) }.map_err(|_| Status::Error)?;
            aps.truncate(a.num_of_nodes as usize);
        }
        let mut gpus = Vec::new();
        for ap in &aps {
            match topo.node_of(ap.gpu_id) {
                Some(node_id) => gpus.push(GpuMem { gpu_id: ap.gpu_id, node_id, apertures: *ap }),
                None => log::warn!("the device has apertures for gpu {:#x}, which the topology lacks", ap.gpu_id),
            }
        }
        // One SVM aperture for all GPUs: the intersection of their GPUVM apertures, aligned to
        // huge pages.
        let base = gpus.iter().map(|g| g.apertures.gpuvm_base).max().unwrap_or(0).next_multiple_of(GPU_HUGE_PAGE_SIZE);
        let limit = gpus.iter().map(|g| g.apertures.gpuvm_limit).min().unwrap_or((1 << 47) - 1);
        let limit = ((limit + 1) & !(GPU_HUGE_PAGE_SIZE - 1)) - 1;
        let fmm = Fmm {
            all_gpu_ids: gpus.iter().map(|g| g.gpu_id).collect(),
            gpus,
            svm_base: base.max(GPU_HUGE_PAGE_SIZE),
            svm_limit: limit,
            userptr_for_paged: options.userptr_for_paged_mem,
            disable_cache: options.disable_cache,
            state: Mutex::new(State::default()),
            space: reserve_space(base.max(GPU_HUGE_PAGE_SIZE), limit).map(Mutex::new),
        };
        // The whole SVM aperture is the coherent alternate aperture, as libhsakmt sets it for
        // GPUs that address all of user space.
        for g in &fmm.gpus {
            let mut p = SetMemoryPolicyArgs {
                alternate_aperture_base: fmm.svm_base,
                alternate_aperture_size: fmm.svm_limit - fmm.svm_base + 1,
                gpu_id: g.gpu_id,
                default_policy: if fmm.disable_cache {
                    KFD_IOC_CACHE_POLICY_COHERENT
                } else {
                    KFD_IOC_CACHE_POLICY_NONCOHERENT
                },
                alternate_policy: KFD_IOC_CACHE_POLICY_COHERENT,
                pad: 0,
            };
            // SAFETY: SET_MEMORY_POLICY's argument holds no pointer.
            unsafe { ioctl(kfd, AMDKFD_IOC_SET_MEMORY_POLICY, &mut p) }.map_err(|e| {
                log::error!("cannot set the memory policy of gpu {:#x}: {e}", g.gpu_id);
                Status::Error
            })?;
        }
        Ok(fmm)
    }

    /// The apertures of `gpu_id`.
    pub fn apertures(&self, gpu_id: u32) -> Option<ProcessDeviceApertures> {
        self.gpus.iter().find(|g| g.gpu_id == gpu_id).map(|g| g.apertures)
    }

    /// The SVM aperture as (base, limit).
    pub fn svm_aperture(&self) -> (u64, u64) {
        (self.svm_base, self.svm_limit)
    }

    /// The first GPU: the one host memory objects are created on.
    fn first_gpu(&self) -> Result<&GpuMem> {
        self.gpus.first().ok_or(Status::Error)
    }

    /// The address of `gpu_id`'s MMIO remap page, if mapped.
    pub fn mmio_page(&self, gpu_id: u32) -> Option<u64> {
        self.state.lock().mmio.get(&gpu_id).copied()
    }

    /// Reserves `size` bytes in the SVM aperture aligned to `align` (at least [`va_align`]).
    fn reserve(&self, size: u64, align: u64) -> Option<u64> {
        let align = align.max(va_align(size));
        if let Some(space) = &self.space {
            // Whole pages, as the kernel maps them; [`Fmm::unreserve`] rounds alike.
            if let Some(va) = space.lock().take(size.next_multiple_of(PAGE_SIZE), align) {
                return Some(va);
            }
            log::debug!(
                "no {size:#x} bytes aligned to {align:#x} left in the SVM reservation: a reservation of its own"
            );
        }
        let va = vm::reserve_aligned(usize::try_from(size).ok()?, usize::try_from(align).ok()?).ok()?;
        if va < self.svm_base || va + (size - 1) > self.svm_limit {
            log::error!("mmap returned {va:#x}, outside the SVM aperture {:#x}-{:#x}", self.svm_base, self.svm_limit);
            // SAFETY: the reservation made just above, which nothing else knows of.
            unsafe { vm::release(va, size as usize) };
            return None;
        }
        Some(va)
    }

    /// Gives back a range [`Fmm::reserve`] handed out: a piece of the SVM reservation becomes
    /// inaccessible again and free; a reservation of its own goes back to the system.
    ///
    /// # Safety
    ///
    /// As for [`vm::release`]: the range is out of every table here and nothing uses it.
    pub(super) unsafe fn unreserve(&self, va: u64, size: u64) {
        if let Some(space) = &self.space {
            let mut space = space.lock();
            let size = size.next_multiple_of(PAGE_SIZE);
            if space.contains(va, size) {
                // SAFETY: the caller's range, out of use (this function's contract).
                match unsafe { vm::reset(va, size as usize) } {
                    Ok(()) => space.give(va, size),
                    Err(e) => {
                        log::warn!("cannot make {va:#x}+{size:#x} a reservation again ({e}): it stays out of use")
                    }
                }
                return;
            }
        }
        // SAFETY: as above; a reservation of its own.
        unsafe { vm::release(va, size as usize) };
    }

    /// ALLOC_MEMORY_OF_GPU of `size` bytes at `va` (NO_SUBSTITUTE always, as libhsakmt);
    /// returns (handle, mmap offset).
    ///
    /// # Safety
    ///
    /// If `ioc` has USERPTR, `[userptr, userptr + size)` is valid for the device's reads and
    /// writes until the buffer is freed, and no Rust reference aliases it meanwhile.
    unsafe fn alloc_bo(kfd: &Kfd, gpu_id: u32, va: u64, size: u64, ioc: u32, userptr: u64) -> Option<(u64, u64)> {
        let mut a = AllocMemoryOfGpuArgs {
            va_addr: va,
            size,
            gpu_id,
            flags: ioc | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE,
            mmap_offset: userptr,
            ..Default::default()
        };
        // SAFETY: the only pointer is the USERPTR address, valid by this function's contract.
        match unsafe { ioctl(kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a) } {
            Ok(()) => Some((a.handle, a.mmap_offset)),
            Err(e) => {
                log::debug!("ALLOC_MEMORY_OF_GPU {size:#x} bytes at {va:#x} flags {ioc:#x} on gpu {gpu_id:#x}: {e}");
                None
            }
        }
    }

    /// Maps the backing file of `offset` in `space` over `[va, va + size)`.
    ///
    /// # Safety
    ///
    /// As for [`vm::map_file_at`]: `[va, va + size)` is a reservation of the caller's that
    /// nothing points into.
    unsafe fn map_backing(kfd: &Kfd, space: Space, offset: u64, va: u64, size: u64) -> bool {
        // SAFETY: the caller's reservation, unused (this function's contract).
        match open_backing(kfd, space, offset).and_then(|f| unsafe { vm::map_file_at(va, size as usize, &f) }) {
            Ok(()) => true,
            Err(e) => {
                log::error!("cannot map the backing file of offset {offset:#x} at {va:#x}: {e}");
                false
            }
        }
    }

    /// Reserves, allocates and (for host access) maps one object; records it.
    #[allow(clippy::too_many_arguments)]
    fn allocate(
        &self,
        kfd: &Kfd,
        gpu_id: u32,
        node_id: u32,
        size: u64,
        ioc: u32,
        host_map: Option<Space>,
        flags: MemFlags,
        kind: Kind,
    ) -> Option<u64> {
        let va = self.reserve(size, PAGE_SIZE)?;
        // SAFETY: no USERPTR address (0): the callers pass VRAM, GTT and MMIO flags.
        let Some((handle, offset)) = (unsafe { Fmm::alloc_bo(kfd, gpu_id, va, size, ioc, 0) }) else {
            // SAFETY: the reservation made above; no object was recorded for it.
            unsafe { self.unreserve(va, size) };
            return None;
        };
        if let Some(space) = host_map {
            // SAFETY: the fresh reservation made above; its address has not left this function.
            if !unsafe { Fmm::map_backing(kfd, space, offset, va, size) } {
                let _ = free_bo(kfd, handle);
                // SAFETY: as above: unrecorded, unused, and the buffer behind it is freed.
                unsafe { self.unreserve(va, size) };
                return None;
            }
        }
        self.state.lock().objects.insert(va, Object::new(va, size, handle, node_id, flags, kind));
        Some(va)
    }

    /// VRAM on `gpu_id` (fmm_allocate_device): public (host-mapped) with HostAccess.
    pub fn allocate_device(&self, kfd: &Kfd, gpu_id: u32, node_id: u32, size: u64, flags: MemFlags) -> Option<u64> {
        let mut ioc = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | hsa_to_ioc_flags(flags);
        let host = flags.host_access() != 0;
        if host {
            ioc |= KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
        }
        if flags.coarse_grain() == 0 || self.disable_cache {
            ioc |= KFD_IOC_ALLOC_MEM_FLAGS_COHERENT;
        }
        if flags.uncached() != 0 || self.disable_cache {
            ioc |= KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;
        }
        self.allocate(kfd, gpu_id, node_id, size, ioc, host.then_some(Space::Render), flags, Kind::Allocated)
    }

    /// System memory (fmm_allocate_host_gpu), made on the first GPU: non-paged memory is GTT;
    /// paged memory is GTT too unless HSA_USERPTR_FOR_PAGED_MEM=1 makes it anonymous pages
    /// registered as USERPTR. (libhsakmt defaults to USERPTR; here the device reaches a shared
    /// file directly, atomics included, where a user pointer costs a process_vm_readv per access.)
    pub fn allocate_host(&self, kfd: &Kfd, node_id: u32, size: u64, flags: MemFlags) -> Option<u64> {
        let gpu_id = self.first_gpu().ok()?.gpu_id;
        let mut ioc = hsa_to_ioc_flags(flags);
        if flags.coarse_grain() == 0 || self.disable_cache {
            ioc |= KFD_IOC_ALLOC_MEM_FLAGS_COHERENT;
        }
        if flags.uncached() != 0 || self.disable_cache {
            ioc |= KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;
        }
        if flags.non_paged() == 0 && self.userptr_for_paged {
            let va = self.reserve(size, PAGE_SIZE)?;
            // SAFETY: the fresh reservation made just above; its address has not left this
            // function.
            let made = unsafe { vm::map_anonymous_at(va, size as usize) }.ok().and_then(|()| {
                // SAFETY: the anonymous mapping made just above, which only its address (no
                // reference) reaches; the object recorded below owns it, and `release_object`
                // frees the buffer before it unmaps the memory.
                unsafe { Fmm::alloc_bo(kfd, gpu_id, va, size, ioc | KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, va) }
            });
            let Some((handle, _)) = made else {
                // SAFETY: the same reservation; no object was recorded for it.
                unsafe { self.unreserve(va, size) };
                return None;
            };
            self.state.lock().objects.insert(va, Object::new(va, size, handle, node_id, flags, Kind::Allocated));
            return Some(va);
        }
        let host = (flags.host_access() != 0).then_some(Space::Render);
        self.allocate(kfd, gpu_id, node_id, size, ioc | KFD_IOC_ALLOC_MEM_FLAGS_GTT, host, flags, Kind::Allocated)
    }

    /// The process doorbell slice of `gpu_id` mapped in the SVM aperture and on the GPU
    /// (fmm_allocate_doorbell): `offset` is the slice's mmap offset.
    pub fn allocate_doorbell(&self, kfd: &Kfd, gpu_id: u32, node_id: u32, size: u64, offset: u64) -> Option<u64> {
        let ioc =
            KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT;
        let flags = MemFlags(0).with_non_paged(1).with_host_access(1).with_reserved(0xBE1);
        let va = self.reserve(size, PAGE_SIZE)?;
        // SAFETY: a doorbell buffer: no USERPTR address.
        let Some((handle, _)) = (unsafe { Fmm::alloc_bo(kfd, gpu_id, va, size, ioc, 0) }) else {
            // SAFETY: the reservation made above; no object was recorded for it.
            unsafe { self.unreserve(va, size) };
            return None;
        };
        // SAFETY: the fresh reservation made above; its address has not left this function.
        if !unsafe { Fmm::map_backing(kfd, Space::Kfd, offset, va, size) } {
            let _ = free_bo(kfd, handle);
            // SAFETY: as above: unrecorded, unused, and the buffer behind it is freed.
            unsafe { self.unreserve(va, size) };
            return None;
        }
        self.state.lock().objects.insert(va, Object::new(va, size, handle, node_id, flags, Kind::Internal));
        if self.map(kfd, va, size).is_err() {
            let _ = self.release(kfd, va);
            return None;
        }
        Some(va)
    }

    /// Maps `gpu_id`'s MMIO remap page (HDP flush registers) into the SVM aperture, for CPU and
    /// GPU (map_mmio).
    pub fn map_mmio(&self, kfd: &Kfd, gpu_id: u32, node_id: u32) -> Option<u64> {
        let ioc =
            KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT;
        let flags = MemFlags(0).with_non_paged(1).with_host_access(1);
        let va = self.allocate(kfd, gpu_id, node_id, PAGE_SIZE, ioc, Some(Space::Kfd), flags, Kind::Internal)?;
        if self.map(kfd, va, PAGE_SIZE).is_err() {
            let _ = self.release(kfd, va);
            return None;
        }
        self.state.lock().mmio.insert(gpu_id, va);
        Some(va)
    }

    /// The handle of the object starting at `va` (fmm_get_handle).
    pub fn handle(&self, va: u64) -> Option<u64> {
        self.state.lock().objects.get(&va).map(|o| o.handle)
    }

    /// Registers `[addr, addr + size)` of this process's memory as a USERPTR object at a GPU
    /// address of its own (fmm_register_user_memory); a second registration of the same range
    /// counts.
    ///
    /// # Safety
    ///
    /// As for [`super::Thunk::register_memory_with_flags`]: the pages `[addr, addr + size)`
    /// touches are valid for the device's reads and writes while registered.
    pub unsafe fn register_user(&self, kfd: &Kfd, addr: u64, size: u64, coarse: bool) -> Result<()> {
        let gpu = *self.first_gpu()?;
        {
            let mut st = self.state.lock();
            if let Some(start) = find_userptr(&st, addr, size) {
                if let Some(Kind::Userptr { registrations, .. }) = st.objects.get_mut(&start).map(|o| &mut o.kind) {
                    *registrations += 1;
                }
                return Ok(());
            }
        }
        let offset = addr & (PAGE_SIZE - 1);
        let aligned = addr - offset;
        let aligned_size = (offset + size).next_multiple_of(PAGE_SIZE);
        let ioc = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR
            | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
            | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
            | if coarse { 0 } else { KFD_IOC_ALLOC_MEM_FLAGS_COHERENT };
        let va = self.reserve(aligned_size, PAGE_SIZE).ok_or(Status::Error)?;
        // SAFETY: the caller's range, valid for the device while registered by this function's
        // contract; the pages around it up to page bounds are the caller's too (its contract
        // covers the page-rounded range, as the kernel's USERPTR pins whole pages).
        let Some((handle, _)) = (unsafe { Fmm::alloc_bo(kfd, gpu.gpu_id, va, aligned_size, ioc, aligned) }) else {
            // SAFETY: the GPU-address reservation made above (not the caller's pages); no object
            // was recorded for it.
            unsafe { self.unreserve(va, aligned_size) };
            return Err(Status::Error);
        };
        let mut st = self.state.lock();
        // Another thread may have registered the same range while the lock was dropped: it
        // counts once more there and this buffer goes, as in libhsakmt's
        // fmm_register_user_memory (ROCT rocm-5.2.3 src/fmm.c), so every caller gets one GPU
        // address (kfdtest MultiThreadRegisterUserptrTest).
        if let Some(start) = find_userptr(&st, addr, size) {
            if let Some(Kind::Userptr { registrations, .. }) = st.objects.get_mut(&start).map(|o| &mut o.kind) {
                *registrations += 1;
            }
            drop(st);
            let _ = free_bo(kfd, handle);
            // SAFETY: the GPU-address reservation made above, never recorded or handed out.
            unsafe { self.unreserve(va, aligned_size) };
            return Ok(());
        }
        let kind = Kind::Userptr { cpu: addr, cpu_size: size, registrations: 1 };
        let obj = Object::new(va, aligned_size, handle, gpu.node_id, ioc_to_hsa_flags(ioc), kind);
        st.objects.insert(va, obj);
        st.userptrs.insert(addr, va);
        Ok(())
    }

    /// Records the gpu ids `gpus` as the ones `addr`'s object is registered to
    /// (fmm_register_memory with nodes). Returns whether `addr` names an object.
    pub fn set_registered(&self, addr: u64, size: u64, gpus: &[u32], node_of: impl Fn(u32) -> u32) -> Result<bool> {
        let mut st = self.state.lock();
        let Some(start) = find_exact(&st, addr, size) else { return Ok(false) };
        let o = st.objects.get_mut(&start).expect("found above");
        if !o.registered.is_empty() {
            // Registering again is fine, with other nodes it is not.
            return if o.registered == gpus { Ok(true) } else { Err(Status::MemoryAlreadyRegistered) };
        }
        if !gpus.is_empty() {
            o.registered = gpus.to_vec();
            o.registered_nodes = gpus.iter().map(|g| node_of(*g)).collect();
        }
        Ok(true)
    }

    /// Whether `addr` names an object (a registration of memory the thunk allocated counts it
    /// again for a user pointer and is otherwise a no-op).
    pub fn register_existing(&self, addr: u64, size: u64) -> bool {
        let mut st = self.state.lock();
        let Some(start) = find_exact(&st, addr, size) else { return false };
        if let Some(Kind::Userptr { registrations, .. }) = st.objects.get_mut(&start).map(|o| &mut o.kind) {
            *registrations += 1;
        }
        true
    }

    /// Maps the object at `addr` on `gpus` (all registered GPUs, or all GPUs, when `None`).
    /// Returns the GPU address to use for user pointers (their own GPU VA plus the page
    /// offset), 0 otherwise (fmm_map_to_gpu).
    pub fn map(&self, kfd: &Kfd, addr: u64, size: u64) -> Result<u64> {
        let mut st = self.state.lock();
        let start = find_exact(&st, addr, size).ok_or(Status::Error)?;
        let o = st.objects.get_mut(&start).expect("found above");
        let alt = match o.kind {
            Kind::Userptr { cpu, .. } => o.start + (cpu & (PAGE_SIZE - 1)),
            _ => 0,
        };
        if matches!(o.kind, Kind::Userptr { .. }) && o.mapping_count > 0 {
            o.mapping_count += 1;
            return Ok(alt);
        }
        let gpus = if o.registered.is_empty() { self.all_gpu_ids.clone() } else { o.registered.clone() };
        self.map_object(kfd, o, &gpus)?;
        o.mapping_count = 1;
        Ok(alt)
    }

    /// MAP_MEMORY_TO_GPU of `o` on `gpus`; records the GPUs it succeeded on.
    fn map_object(&self, kfd: &Kfd, o: &mut Object, gpus: &[u32]) -> Result<()> {
        let mut a = MapMemoryToGpuArgs {
            handle: o.handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: gpus.len() as u32,
            n_success: 0,
        };
        // SAFETY: the device reads `n_devices` ids from `gpus`, borrowed for the call.
        let r = unsafe { ioctl(kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut a) };
        let done = &gpus[..(a.n_success as usize).min(gpus.len())];
        o.mapped.retain(|g| !done.contains(g));
        o.mapped.extend_from_slice(done);
        o.mapped_nodes = o.mapped.iter().map(|g| self.node_of(*g)).collect();
        r.map_err(|e| {
            log::warn!("mapping {:#x}+{:#x} on {gpus:?}: {e}", o.start, o.size);
            Status::Error
        })
    }

    /// UNMAP_MEMORY_FROM_GPU of `o` from `gpus`; forgets the GPUs it succeeded on.
    fn unmap_object(&self, kfd: &Kfd, o: &mut Object, gpus: &[u32]) -> Result<()> {
        let mut a = UnmapMemoryFromGpuArgs {
            handle: o.handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: gpus.len() as u32,
            n_success: 0,
        };
        // SAFETY: the device reads `n_devices` ids from `gpus`, borrowed for the call.
        let r = unsafe { ioctl(kfd, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &mut a) };
        let done = &gpus[..(a.n_success as usize).min(gpus.len())];
        o.mapped.retain(|g| !done.contains(g));
        o.mapped_nodes = o.mapped.iter().map(|g| self.node_of(*g)).collect();
        o.mapping_count = 0;
        r.map_err(|e| {
            log::warn!("unmapping {:#x}+{:#x} from {gpus:?}: {e}", o.start, o.size);
            Status::Error
        })
    }

    fn node_of(&self, gpu_id: u32) -> u32 {
        self.gpus.iter().find(|g| g.gpu_id == gpu_id).map_or(INVALID_NODEID, |g| g.node_id)
    }

    /// Maps the object at `addr` on exactly `gpus` (fmm_map_to_gpu_nodes): GPUs it is mapped on
    /// and `gpus` lacks are unmapped first; every one of `gpus` must be registered.
    pub fn map_nodes(&self, kfd: &Kfd, addr: u64, size: u64, gpus: &[u32]) -> Result<u64> {
        let mut st = self.state.lock();
        let start = find_exact(&st, addr, size).ok_or(Status::Error)?;
        let o = st.objects.get_mut(&start).expect("found above");
        if matches!(o.kind, Kind::Userptr { .. }) {
            // A user pointer is mapped on all its registered GPUs, whatever the list says.
            drop(st);
            return self.map(kfd, addr, size);
        }
        let allowed = if o.registered.is_empty() { &self.all_gpu_ids } else { &o.registered };
        if !gpus.iter().all(|g| allowed.contains(g)) {
            return Err(Status::Error);
        }
        let stale: Vec<u32> = o.mapped.iter().copied().filter(|g| !gpus.contains(g)).collect();
        if !stale.is_empty() {
            self.unmap_object(kfd, o, &stale)?;
        }
        let new: Vec<u32> = gpus.iter().copied().filter(|g| !o.mapped.contains(g)).collect();
        if !new.is_empty() {
            self.map_object(kfd, o, &new)?;
            o.mapping_count = 1;
        }
        Ok(0)
    }

    /// Unmaps the object at `addr` from every GPU it is on (fmm_unmap_from_gpu).
    pub fn unmap(&self, kfd: &Kfd, addr: u64) -> Result<()> {
        let mut st = self.state.lock();
        let start = find_exact(&st, addr, 0).ok_or(Status::Error)?;
        let o = st.objects.get_mut(&start).expect("found above");
        if matches!(o.kind, Kind::Userptr { .. }) && o.mapping_count > 1 {
            o.mapping_count -= 1;
            return Ok(());
        }
        if o.mapped.is_empty() {
            // libhsakmt lets unmapping an unmapped buffer succeed.
            return Ok(());
        }
        let gpus = o.mapped.clone();
        self.unmap_object(kfd, o, &gpus)
    }

    /// Frees the object at `addr` (fmm_release): a user pointer only when its last
    /// registration goes. The address range goes back to the system.
    pub fn release(&self, kfd: &Kfd, addr: u64) -> Result<()> {
        let st = self.state.lock();
        let start = find_exact(&st, addr, 0).ok_or(Status::MemoryNotRegistered)?;
        self.release_object(kfd, st, start)
    }

    /// Frees the object starting at `start` (found under `st`).
    fn release_object(&self, kfd: &Kfd, mut st: parking_lot::MutexGuard<'_, State>, start: u64) -> Result<()> {
        let o = st.objects.get_mut(&start).expect("found by the caller");
        if let Kind::Userptr { registrations, .. } = &mut o.kind {
            *registrations = registrations.saturating_sub(1);
            if *registrations > 0 {
                return Ok(());
            }
        }
        free_bo(kfd, o.handle).map_err(|e| {
            log::warn!("freeing {:#x}+{:#x}: {e}", o.start, o.size);
            Status::Error
        })?;
        let o = st.objects.remove(&start).expect("found above");
        if let Kind::Userptr { cpu, .. } = o.kind {
            st.userptrs.remove(&cpu);
        }
        st.mmio.retain(|_, va| *va != o.start);
        // SAFETY: the object's range was reserved by this manager and is now out of its table,
        // so nothing here refers to it; the thunk hands out its address, never a reference.
        unsafe { self.unreserve(o.start, o.size) };
        Ok(())
    }

    /// Drops the registration of memory the caller allocated (fmm_deregister_memory): a user
    /// pointer or import is released, an allocation forgets its registered nodes.
    pub fn deregister(&self, kfd: &Kfd, addr: u64) -> Result<()> {
        let mut st = self.state.lock();
        let start = find_exact(&st, addr, 0).ok_or(Status::MemoryNotRegistered)?;
        let o = st.objects.get_mut(&start).expect("found above");
        if matches!(o.kind, Kind::Userptr { .. } | Kind::Imported) {
            return self.release_object(kfd, st, start);
        }
        if o.registered.is_empty() {
            return Err(Status::MemoryNotRegistered);
        }
        o.registered.clear();
        o.registered_nodes = Arc::from([]);
        Ok(())
    }

    /// What `hsaKmtQueryPointerInfo` reports of the object containing `addr`.
    pub fn query(&self, addr: u64) -> Option<PointerInfo> {
        let st = self.state.lock();
        let o = st.objects.get(&find_containing(&st, addr)?)?;
        let mut info = PointerInfo {
            pointer_type: match o.kind {
                Kind::Imported => PointerType::REGISTERED_SHARED,
                Kind::Userptr { .. } => PointerType::REGISTERED_USER,
                _ => PointerType::ALLOCATED,
            },
            node: o.node_id,
            mem_flags: o.flags,
            cpu_address: o.start,
            gpu_address: o.start,
            size_in_bytes: o.size,
            registered_nodes: o.registered_nodes.clone(),
            mapped_nodes: o.mapped_nodes.clone(),
            user_data: o.user_data,
        };
        match o.kind {
            Kind::Userptr { cpu, cpu_size, .. } => {
                info.cpu_address = cpu;
                info.size_in_bytes = cpu_size;
                info.gpu_address += cpu & (PAGE_SIZE - 1);
            }
            Kind::Imported => info.cpu_address = 0,
            _ => {}
        }
        Some(info)
    }

    /// Attaches `data` to the object at `addr` (fmm_set_mem_user_data).
    pub fn set_user_data(&self, addr: u64, data: u64) -> Result<()> {
        let mut st = self.state.lock();
        let start = find_exact(&st, addr, 0).ok_or(Status::Error)?;
        st.objects.get_mut(&start).expect("found above").user_data = data;
        Ok(())
    }

    /// The object starting at `addr`: (handle, node, flags) for sharing.
    pub fn object_at(&self, addr: u64) -> Option<(u64, u32, MemFlags)> {
        let st = self.state.lock();
        st.objects.get(&addr).map(|o| (o.handle, o.node_id, o.flags))
    }

    /// Records an imported buffer at `import.va` (the reservation made by
    /// [`Fmm::reserve_area`]) and, when the device gave an mmap offset, maps its memory there
    /// (fmm_register_shared_memory); on failure frees the buffer and the reservation.
    pub fn add_imported(&self, kfd: &Kfd, import: Import, mmap_offset: u64, gpus: &[u32]) -> Result<()> {
        let Import { va, size, handle, node_id, flags } = import;
        // SAFETY: the caller's fresh reservation at `va` (from `reserve_area`), not yet recorded
        // and so unknown to anything else.
        if mmap_offset != 0 && !unsafe { Fmm::map_backing(kfd, Space::Render, mmap_offset, va, size) } {
            let _ = free_bo(kfd, handle);
            // SAFETY: the same reservation, unrecorded; the buffer behind it is freed.
            unsafe { self.unreserve(va, size.max(PAGE_SIZE)) };
            return Err(Status::Error);
        }
        let mut o = Object::new(va, size, handle, node_id, flags, Kind::Imported);
        o.registered = gpus.to_vec();
        o.registered_nodes = gpus.iter().map(|g| self.node_of(*g)).collect();
        self.state.lock().objects.insert(va, o);
        Ok(())
    }

    /// Reserves an address range in the SVM aperture (for imports).
    pub fn reserve_area(&self, size: u64) -> Option<u64> {
        self.reserve(size, PAGE_SIZE)
    }

    /// Reserves the scratch backing of `gpu_id`, 64 KiB aligned, and programs its base
    /// (fmm_allocate_scratch). One per GPU.
    pub fn allocate_scratch(&self, kfd: &Kfd, gpu_id: u32, size: u64) -> Option<u64> {
        let size = size.next_multiple_of(SCRATCH_ALIGN);
        if self.state.lock().scratch.contains_key(&gpu_id) {
            return None;
        }
        let va = self.reserve(size, SCRATCH_ALIGN)?;
        let mut a = SetScratchBackingVaArgs { va_addr: va >> 16, gpu_id, pad: 0 };
        // SAFETY: SET_SCRATCH_BACKING_VA's argument holds no pointer.
        if let Err(e) = unsafe { ioctl(kfd, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &mut a) } {
            log::warn!("SET_SCRATCH_BACKING_VA on gpu {gpu_id:#x}: {e}");
            // SAFETY: the reservation made above; it was not recorded.
            unsafe { self.unreserve(va, size) };
            return None;
        }
        self.state.lock().scratch.insert(gpu_id, Scratch { base: va, size, pieces: BTreeMap::new() });
        Some(va)
    }

    /// The GPU whose scratch backing contains `addr`.
    pub fn scratch_gpu(&self, addr: u64) -> Option<u32> {
        let st = self.state.lock();
        st.scratch.iter().find(|(_, s)| addr >= s.base && addr < s.base + s.size).map(|(g, _)| *g)
    }

    /// Backs `[addr, addr + size)` of a scratch reservation with VRAM mapped on its GPU
    /// (_fmm_map_to_gpu_scratch).
    pub fn map_scratch(&self, kfd: &Kfd, gpu_id: u32, addr: u64, size: u64) -> Result<()> {
        let mut st = self.state.lock();
        let s = st.scratch.get_mut(&gpu_id).ok_or(Status::Error)?;
        let end = addr.checked_add(size).ok_or(Status::Error)?;
        if size == 0 || addr < s.base || end > s.base + s.size || s.pieces.range(..end).any(|(a, (_, l))| a + l > addr)
        {
            return Err(Status::Error);
        }
        let ioc = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
        // SAFETY: VRAM: no USERPTR address.
        let (handle, _) = unsafe { Fmm::alloc_bo(kfd, gpu_id, addr, size, ioc, 0) }.ok_or(Status::Error)?;
        let gpus = [gpu_id];
        let mut m =
            MapMemoryToGpuArgs { handle, device_ids_array_ptr: gpus.as_ptr() as u64, n_devices: 1, n_success: 0 };
        // SAFETY: the device reads one id from `gpus`, a local.
        if let Err(e) = unsafe { ioctl(kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut m) } {
            log::warn!("mapping scratch {addr:#x}+{size:#x}: {e}");
            let _ = free_bo(kfd, handle);
            return Err(Status::Error);
        }
        s.pieces.insert(addr, (handle, size));
        Ok(())
    }

    /// Unmaps and frees the scratch piece starting at `addr` (_fmm_unmap_from_gpu_scratch).
    pub fn unmap_scratch(&self, kfd: &Kfd, gpu_id: u32, addr: u64) -> Result<()> {
        let mut st = self.state.lock();
        let s = st.scratch.get_mut(&gpu_id).ok_or(Status::Error)?;
        let Some((handle, _)) = s.pieces.remove(&addr) else {
            // libhsakmt: an unmapped scratch address unmaps fine.
            return Ok(());
        };
        Fmm::free_scratch_piece(kfd, gpu_id, handle)
    }

    fn free_scratch_piece(kfd: &Kfd, gpu_id: u32, handle: u64) -> Result<()> {
        let gpus = [gpu_id];
        let mut u =
            UnmapMemoryFromGpuArgs { handle, device_ids_array_ptr: gpus.as_ptr() as u64, n_devices: 1, n_success: 0 };
        // SAFETY: the device reads one id from `gpus`, a local.
        let unmapped = unsafe { ioctl(kfd, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &mut u) };
        let freed = free_bo(kfd, handle);
        unmapped.and(freed).map_err(|e| {
            log::warn!("releasing a scratch piece of gpu {gpu_id:#x}: {e}");
            Status::Error
        })
    }

    /// Releases the whole scratch backing of `gpu_id` (fmm_release_scratch).
    pub fn release_scratch(&self, kfd: &Kfd, gpu_id: u32) {
        let Some(s) = self.state.lock().scratch.remove(&gpu_id) else { return };
        for (handle, _) in s.pieces.values() {
            let _ = Fmm::free_scratch_piece(kfd, gpu_id, *handle);
        }
        // SAFETY: the scratch reservation of this manager, just taken out of its table.
        unsafe { self.unreserve(s.base, s.size) };
    }

    /// Unmaps and frees every object and gives every range back (CloseKFD).
    pub fn destroy_all(&self, kfd: &Kfd) {
        let gpus: Vec<u32> = self.state.lock().scratch.keys().copied().collect();
        for g in gpus {
            self.release_scratch(kfd, g);
        }
        let objects = std::mem::take(&mut self.state.lock().objects);
        for (_, mut o) in objects {
            if !o.mapped.is_empty() {
                let gpus = o.mapped.clone();
                let _ = self.unmap_object(kfd, &mut o, &gpus);
            }
            if let Err(e) = free_bo(kfd, o.handle) {
                log::debug!("freeing {:#x} at close: {e}", o.start);
            }
            // SAFETY: a range this manager reserved, taken out of its table above.
            unsafe { self.unreserve(o.start, o.size) };
        }
        let mut st = self.state.lock();
        st.userptrs.clear();
        st.mmio.clear();
    }
}

/// The registered user pointer starting at CPU address `addr` (of `size` bytes unless 0).
fn find_userptr(st: &State, addr: u64, size: u64) -> Option<u64> {
    let start = *st.userptrs.get(&addr)?;
    match st.objects.get(&start)?.kind {
        Kind::Userptr { cpu_size, .. } if size == 0 || size == cpu_size => Some(start),
        _ => None,
    }
}

/// The object `addr` names (vm_find_object): a user pointer by its CPU address, else the
/// object starting at `addr`'s page (for a user pointer, its page offset and size must match).
fn find_exact(st: &State, addr: u64, size: u64) -> Option<u64> {
    if let Some(start) = find_userptr(st, addr, size) {
        return Some(start);
    }
    let offset = addr & (PAGE_SIZE - 1);
    let o = st.objects.get(&(addr - offset))?;
    match o.kind {
        Kind::Userptr { cpu, cpu_size, .. } => {
            (cpu & (PAGE_SIZE - 1) == offset && (size == 0 || size == cpu_size)).then_some(o.start)
        }
        _ => (offset == 0).then_some(o.start),
    }
}

/// The object containing `addr`: user pointers by their CPU range first, then objects by
/// their GPU range.
fn find_containing(st: &State, addr: u64) -> Option<u64> {
    let user = st.userptrs.range(..=addr).next_back().and_then(|(cpu, start)| match st.objects.get(start)?.kind {
        Kind::Userptr { cpu_size, .. } if addr < cpu + cpu_size.max(1) => Some(*start),
        _ => None,
    });
    user.or_else(|| {
        let (_, o) = st.objects.range(..=addr).next_back()?;
        (addr < o.end()).then_some(o.start)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_grows_with_size_up_to_2mib() {
        assert_eq!(va_align(4096), 4096);
        assert_eq!(va_align(8192), 8192);
        assert_eq!(va_align(12288), 8192);
        assert_eq!(va_align(1 << 30), 2 << 20);
    }

    #[test]
    fn flag_translations() {
        let f = MemFlags(0).with_aql_queue_memory(1);
        let ioc = hsa_to_ioc_flags(f);
        assert_eq!(
            ioc,
            KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
                | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
                | KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM
                | KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED
        );
        assert_eq!(hsa_to_ioc_flags(MemFlags(0).with_read_only(1)) & KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, 0);
        let back = ioc_to_hsa_flags(KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC);
        assert_eq!((back.read_only(), back.coarse_grain(), back.host_access()), (1, 1, 1));
    }

    #[test]
    fn lookups() {
        let mut st = State::default();
        st.objects.insert(0x10000, Object::new(0x10000, 0x2000, 1, 0, MemFlags(0), Kind::Allocated));
        let kind = Kind::Userptr { cpu: 0x50010, cpu_size: 0x100, registrations: 1 };
        st.objects.insert(0x20000, Object::new(0x20000, 0x1000, 2, 0, MemFlags(0), kind));
        st.userptrs.insert(0x50010, 0x20000);
        assert_eq!(find_exact(&st, 0x10000, 0), Some(0x10000));
        assert_eq!(find_exact(&st, 0x10008, 0), None);
        assert_eq!(find_exact(&st, 0x50010, 0x100), Some(0x20000));
        assert_eq!(find_exact(&st, 0x50010, 0x200), None);
        assert_eq!(find_exact(&st, 0x20010, 0), Some(0x20000));
        assert_eq!(find_containing(&st, 0x11fff), Some(0x10000));
        assert_eq!(find_containing(&st, 0x12000), None);
        assert_eq!(find_containing(&st, 0x500ff), Some(0x20000));
        assert_eq!(find_containing(&st, 0x50110), None);
    }
}
