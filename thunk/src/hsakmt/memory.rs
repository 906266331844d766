//! The memory calls (libhsakmt memory.c) over the memory manager.

use super::types::*;
use super::{Result, Status, Thunk};
use uapi::ioctl::{
    AMDKFD_IOC_CROSS_MEMORY_COPY, AMDKFD_IOC_GET_DMABUF_INFO, AMDKFD_IOC_IPC_EXPORT_HANDLE,
    AMDKFD_IOC_IPC_IMPORT_HANDLE,
};
use uapi::kfd::{
    CrossMemoryCopyArgs, GetDmabufInfoArgs, IpcExportHandleArgs, IpcImportHandleArgs, KFD_CROSS_MEMORY_RW_BIT,
};
use uapi::IntoBytes;

/// `HsaMemoryRange` (= `struct kfd_memory_range`, which libhsakmt passes to the driver as it
/// is): a GPU address and a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryRange {
    pub address: u64,
    pub size: u64,
}

/// `hsaKmtMapGraphicHandle`: `NotImplemented`, always, as in libhsakmt (ROCT-Thunk-Interface
/// rocm-5.2.3 src/memory.c): the call was only ever implemented in an out-of-tree KFD for
/// Kaveri, and libhsakmt answers it without asking the driver (even before the KFD is open).
/// `hsaKmtRegisterGraphicsHandleToNodes` replaced it.
pub fn map_graphic_handle(_node: u32, _device: u64, _resource: u64, _offset: u64, _size: u64) -> Result<u64> {
    Err(Status::NotImplemented)
}

/// `HsaGraphicsResourceInfo`, for the graphics interop call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GraphicsResourceInfo {
    pub memory_address: u64,
    pub size_in_bytes: u64,
    pub metadata: Vec<u8>,
}

impl Thunk {
    /// Maps every GPU's MMIO remap page (at open); a GPU without one just reports one memory
    /// bank less, as in libhsakmt.
    pub(super) fn init_mmio(&self) -> Result<()> {
        for (node, n) in self.nodes.gpus() {
            if self.fmm.apertures(n.gpu_id).is_some() && self.fmm.map_mmio(&self.kfd, n.gpu_id, node).is_none() {
                log::error!("cannot map the MMIO remap page of gpu {:#x}", n.gpu_id);
            }
        }
        Ok(())
    }

    /// `hsaKmtAllocMemory`: `size` bytes (a multiple of the flags' page size) for node `node`.
    ///
    /// * `Scratch`: the GPU's scratch backing, an address range whose parts get VRAM when
    ///   mapped (ROCr reserves 4 GiB of it per GPU);
    /// * a CPU node, or `NonPaged` clear: system memory (GTT);
    /// * otherwise VRAM of the node, mapped in the process with `HostAccess`.
    ///
    /// The SVM aperture is managed by mmap, so `FixedAddress` is refused, as libhsakmt
    /// refuses it there.
    pub fn alloc_memory(&self, node: u32, size: u64, flags: MemFlags, address: Option<u64>) -> Result<u64> {
        let gpu_id = self.gpu_id(node)?;
        let page = PageSize(flags.page_size()).bytes();
        if size == 0 || size & (page - 1) != 0 {
            return Err(Status::InvalidParameter);
        }
        let fixed = flags.fixed_address() != 0;
        if fixed && address.unwrap_or(0) == 0 {
            return Err(Status::InvalidParameter);
        }
        if flags.scratch() != 0 {
            let mem = if fixed || gpu_id == 0 { None } else { self.fmm.allocate_scratch(&self.kfd, gpu_id, size) };
            return mem.ok_or(Status::NoMemory);
        }
        if gpu_id == 0 || flags.non_paged() == 0 {
            let mem = if fixed { None } else { self.fmm.allocate_host(&self.kfd, node, size, flags) };
            return mem.ok_or(Status::Error);
        }
        let mem = if fixed { None } else { self.fmm.allocate_device(&self.kfd, gpu_id, node, size, flags) };
        mem.ok_or(Status::NoMemory)
    }

    /// `hsaKmtFreeMemory`. Freeing an address that is not an allocation is
    /// `MemoryNotRegistered`; freeing a mapped buffer fails as in amdkfd (EBUSY).
    pub fn free_memory(&self, addr: u64, _size: u64) -> Result<()> {
        if addr == 0 {
            return Err(Status::Error);
        }
        if let Some(gpu) = self.fmm.scratch_gpu(addr) {
            self.fmm.release_scratch(&self.kfd, gpu);
            return Ok(());
        }
        self.fmm.release(&self.kfd, addr)
    }

    /// fmm_register_memory: registers existing memory (user memory becomes a USERPTR object)
    /// and, with `gpus`, which GPUs it may be mapped on.
    ///
    /// # Safety
    ///
    /// As for [`Thunk::register_memory_with_flags`].
    unsafe fn register(&self, addr: u64, size: u64, gpus: &[u32], coarse: bool) -> Result<()> {
        if !self.fmm.register_existing(addr, size) {
            // SAFETY: this function's contract.
            unsafe { self.fmm.register_user(&self.kfd, addr, size, coarse)? };
            if gpus.is_empty() {
                return Ok(());
            }
        }
        let nodes = &self.nodes;
        self.fmm.set_registered(addr, size, gpus, |g| nodes.node_of(g).unwrap_or(INVALID_NODEID)).map(|_| ())
    }

    /// `hsaKmtRegisterMemoryWithFlags`: ordinary paged host memory (HostAccess set, NonPaged
    /// clear, else `NotSupported`) becomes GPU-accessible; `CoarseGrain` drops coherence.
    ///
    /// The device then reads and writes that memory whenever GPU work touches its GPU address,
    /// in this process (embedded) as in another (CUSE, through the kernel).
    ///
    /// # Safety
    ///
    /// The whole pages `[addr, addr + size)` touches are valid for the device's reads and writes
    /// for as long as the registration lasts (until [`Thunk::deregister_memory`] drops the last
    /// registration of the range, or the thunk closes), and no Rust reference aliases memory the
    /// device writes meanwhile. Memory this thunk allocated is registered already and needs
    /// nothing.
    pub unsafe fn register_memory_with_flags(&self, addr: u64, size: u64, flags: MemFlags) -> Result<()> {
        if flags.host_access() != 1 || flags.non_paged() == 1 {
            return Err(Status::NotSupported);
        }
        // SAFETY: this function's contract.
        unsafe { self.register(addr, size, &[], flags.coarse_grain() != 0) }
    }

    /// Whether a GPU is a discrete one, whose registrations make user-pointer objects
    /// (libhsakmt's is_dgpu; with no GPU at all it is false too).
    fn is_dgpu(&self) -> bool {
        self.nodes.gpus().next().is_some()
    }

    /// `hsaKmtRegisterMemory`: as [`Thunk::register_memory_with_flags`], coarse grained, on no
    /// particular GPU (ROCT-Thunk-Interface rocm-5.2.3 src/memory.c calls fmm_register_memory
    /// so). Without a discrete GPU it is a no-op success, as there.
    ///
    /// # Safety
    ///
    /// As for [`Thunk::register_memory_with_flags`].
    pub unsafe fn register_memory(&self, addr: u64, size: u64) -> Result<()> {
        if !self.is_dgpu() {
            return Ok(());
        }
        // SAFETY: this function's contract.
        unsafe { self.register(addr, size, &[], true) }
    }

    /// `hsaKmtRegisterMemoryToNodes`: as [`Thunk::register_memory_with_flags`] (coarse
    /// grained), limited to `nodes`. Registering again with other nodes is
    /// `MemoryAlreadyRegistered`; without a discrete GPU, `NotSupported` (libhsakmt 5.2.3).
    ///
    /// # Safety
    ///
    /// As for [`Thunk::register_memory_with_flags`].
    pub unsafe fn register_memory_to_nodes(&self, addr: u64, size: u64, nodes: &[u32]) -> Result<()> {
        if !self.is_dgpu() {
            return Err(Status::NotSupported);
        }
        let gpus = self.gpu_ids_of(nodes)?;
        // SAFETY: this function's contract.
        unsafe { self.register(addr, size, &gpus, true) }
    }

    /// `hsaKmtDeregisterMemory`: releases a user-pointer registration or an import; forgets an
    /// allocation's node registration.
    pub fn deregister_memory(&self, addr: u64) -> Result<()> {
        self.fmm.deregister(&self.kfd, addr)
    }

    /// `hsaKmtMapMemoryToGPU`: maps the buffer at `addr` on its registered GPUs (all GPUs if
    /// none). Returns the alternate GPU address: for registered user memory, its GPU address;
    /// 0 where the GPU uses the CPU address.
    pub fn map_memory_to_gpu(&self, addr: u64, size: u64) -> Result<u64> {
        if addr == 0 {
            return Err(Status::Error);
        }
        if let Some(gpu) = self.fmm.scratch_gpu(addr) {
            self.fmm.map_scratch(&self.kfd, gpu, addr, size)?;
            return Ok(0);
        }
        self.fmm.map(&self.kfd, addr, size)
    }

    /// `hsaKmtMapMemoryToGPUNodes`: maps the buffer at `addr` on exactly the GPUs of `nodes`
    /// (each registered for it), unmapping it from the others.
    pub fn map_memory_to_gpu_nodes(&self, addr: u64, size: u64, _flags: MemMapFlags, nodes: &[u32]) -> Result<u64> {
        if addr == 0 {
            return Err(Status::Error);
        }
        let gpus = self.gpu_ids_of(nodes)?;
        self.fmm.map_nodes(&self.kfd, addr, size, &gpus)
    }

    /// `hsaKmtUnmapMemoryToGPU`: unmaps the buffer at `addr` from every GPU (a null address is
    /// accepted, as libhsakmt accepts it).
    pub fn unmap_memory_to_gpu(&self, addr: u64) -> Result<()> {
        if addr == 0 {
            return Ok(());
        }
        if let Some(gpu) = self.fmm.scratch_gpu(addr) {
            return self.fmm.unmap_scratch(&self.kfd, gpu, addr);
        }
        self.fmm.unmap(&self.kfd, addr)
    }

    /// `hsaKmtQueryPointerInfo`: the buffer containing `addr`; `Error` for memory the thunk
    /// does not know (the C layer then reports HSA_POINTER_UNKNOWN).
    pub fn query_pointer_info(&self, addr: u64) -> Result<PointerInfo> {
        self.fmm.query(addr).ok_or(Status::Error)
    }

    /// `hsaKmtSetMemoryUserData`: attaches an opaque value to the buffer at `addr`.
    pub fn set_memory_user_data(&self, addr: u64, data: u64) -> Result<()> {
        self.fmm.set_user_data(addr, data)
    }

    /// `hsaKmtShareMemory`: an IPC handle for the buffer at `addr` (libhsakmt 5.2.3
    /// fmm_share_memory: IPC_EXPORT_HANDLE with the object's handle, its GPU and its
    /// HsaMemFlags; system memory was made on the first GPU). The handle carries the share
    /// handle, the aperture, the size in pages and the exporting GPU.
    pub fn share_memory(&self, addr: u64, size: u64) -> Result<SharedMemoryHandle> {
        if size >= 1u64 << (32 + 12) {
            return Err(Status::InvalidParameter);
        }
        let (handle, node, flags) = self.fmm.object_at(addr).ok_or(Status::InvalidParameter)?;
        let mut gpu_id = self.gpu_id(node)?;
        if gpu_id == 0 {
            gpu_id = self.nodes.gpus().next().map(|(_, n)| n.gpu_id).ok_or(Status::Error)?;
        }
        let mut a = IpcExportHandleArgs { handle, gpu_id, flags: flags.0, ..Default::default() };
        // SAFETY: the IPC export argument holds no pointer (a handle and ids).
        unsafe { self.raw_ioctl(AMDKFD_IOC_IPC_EXPORT_HANDLE, a.as_mut_bytes()) }.map_err(|e| {
            log::debug!("IPC export of {addr:#x}: {e}");
            Status::Error
        })?;
        let mut h = SharedMemoryHandle::default();
        h.0[..4].copy_from_slice(&a.share_handle);
        // HsaApertureInfo of the SVM aperture (HSA_APERTURE_DGPU, index 0), pages, exporting GPU.
        h.0[4] = 1;
        h.0[5] = 0;
        h.0[6] = (size >> 12) as u32;
        h.0[7] = gpu_id;
        Ok(h)
    }

    /// `hsaKmtRegisterSharedHandle(ToNodes)`: imports an IPC handle; returns (address, size).
    /// As libhsakmt 5.2.3 fmm_register_shared_memory: reserves the range, sends
    /// IPC_IMPORT_HANDLE on the exporting GPU, records the object with the flags the import
    /// answers, and maps the memory over the range when the device gives an mmap offset (on
    /// the render node: here, the backing file of that offset).
    pub fn register_shared_handle(&self, handle: &SharedMemoryHandle, nodes: &[u32]) -> Result<(u64, u64)> {
        let gpus = if nodes.is_empty() { Vec::new() } else { self.gpu_ids_of(nodes)? };
        let size = u64::from(handle.0[6]) << 12;
        let va = self.fmm.reserve_area(size.max(super::PAGE_SIZE)).ok_or(Status::NoMemory)?;
        let mut a = IpcImportHandleArgs { va_addr: va, gpu_id: handle.0[7], ..Default::default() };
        a.share_handle.copy_from_slice(&handle.0[..4]);
        // SAFETY: the IPC import argument holds no CPU pointer (`va` is a GPU address reserved
        // above, which the device reaches through its VM).
        if let Err(e) = unsafe { self.raw_ioctl(AMDKFD_IOC_IPC_IMPORT_HANDLE, a.as_mut_bytes()) } {
            log::debug!("IPC import: {e}");
            // SAFETY: the area reserved above for this import, which was not recorded.
            unsafe { self.fmm.unreserve(va, size.max(super::PAGE_SIZE)) };
            return Err(Status::Error);
        }
        let node = self.node_of(a.gpu_id).unwrap_or(0);
        let imported = super::fmm::Import { va, size, handle: a.handle, node_id: node, flags: MemFlags(a.flags) };
        self.fmm.add_imported(&self.kfd, imported, a.mmap_offset, &gpus)?;
        Ok((va, size))
    }

    /// `hsaKmtRegisterGraphicsHandleToNodes`: imports a graphics (dma-buf) buffer. No file
    /// descriptor can reach the device (CUSE passes none): the device is asked (GET_DMABUF_INFO)
    /// and refuses. libhsakmt 5.2.3 (`fmm_register_graphics_handle`) answers that, and every
    /// other failed step of an import, with `Error`; so does this thunk, which cannot import.
    pub fn register_graphics_handle_to_nodes(&self, handle: u64, nodes: &[u32]) -> Result<GraphicsResourceInfo> {
        self.gpu_ids_of(nodes)?;
        let mut metadata = vec![0u8; 64];
        let mut a = GetDmabufInfoArgs {
            metadata_ptr: metadata.as_mut_ptr() as u64,
            metadata_size: metadata.len() as u32,
            dmabuf_fd: handle as u32,
            ..Default::default()
        };
        // SAFETY: the device writes at most `metadata_size` bytes into `metadata`, owned here and
        // not borrowed during the call.
        match unsafe { self.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut a) } {
            Err(e) => log::debug!("GET_DMABUF_INFO of fd {handle}: {e}"),
            Ok(()) => log::warn!("the device described dma-buf {handle}, but this thunk cannot import dma-bufs"),
        }
        Err(Status::Error)
    }

    /// `hsaKmtProcessVMRead` (`write` false: remote to local) and `hsaKmtProcessVMWrite`
    /// (local to remote): copies between this process's GPU memory `local` and that of process
    /// `pid`, through ROCm's out-of-tree CROSS_MEMORY_COPY, which the device serves (upstream
    /// amdkfd refuses it as an unknown request). Empty range lists are `Error`, and so is any
    /// failed request (ROCT-Thunk-Interface rocm-5.2.3 src/memory.c). Returns the status and
    /// the bytes copied, which libhsakmt reports even on failure (a copy cut short).
    ///
    /// # Safety
    ///
    /// Every range of `local` is valid for the device's reads (`write`) or writes (read) for
    /// the call.
    pub unsafe fn process_vm_copy(
        &self,
        pid: u32,
        local: &[MemoryRange],
        remote: &[MemoryRange],
        write: bool,
    ) -> (Result<()>, u64) {
        if local.is_empty() || remote.is_empty() {
            return (Err(Status::Error), 0);
        }
        const _: () = assert!(std::mem::size_of::<MemoryRange>() == std::mem::size_of::<uapi::kfd::MemoryRange>());
        let l = (local.as_ptr() as u64, local.len() as u64);
        let r = (remote.as_ptr() as u64, remote.len() as u64);
        let ((src, nsrc), (dst, ndst)) = if write { (l, r) } else { (r, l) };
        let mut a = CrossMemoryCopyArgs {
            pid,
            flags: if write { KFD_CROSS_MEMORY_RW_BIT } else { 0 },
            src_mem_range_array: src,
            src_mem_array_size: nsrc,
            dst_mem_range_array: dst,
            dst_mem_array_size: ndst,
            bytes_copied: 0,
        };
        // SAFETY: the range arrays are borrowed for the call; the local ranges by this
        // function's contract. Raw, so that `bytes_copied` comes back on failure too.
        let r = unsafe { self.raw_ioctl(AMDKFD_IOC_CROSS_MEMORY_COPY, a.as_mut_bytes()) }.map_err(|e| {
            log::debug!("CROSS_MEMORY_COPY with pid {pid}: {e}");
            Status::Error
        });
        (r, a.bytes_copied)
    }

    /// A raw ioctl, restarted when interrupted.
    ///
    /// # Safety
    ///
    /// As for [`crate::Kfd::ioctl`].
    unsafe fn raw_ioctl(&self, cmd: u32, arg: &mut [u8]) -> std::result::Result<(), nix::errno::Errno> {
        loop {
            // SAFETY: this function's contract.
            match unsafe { self.kfd.ioctl(cmd, arg) } {
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
                r => return r,
            }
        }
    }
}
