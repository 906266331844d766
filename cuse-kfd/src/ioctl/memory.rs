//! GPU memory: ACQUIRE_VM, ALLOC/FREE/MAP/UNMAP_MEMORY_OF_GPU, AVAILABLE_MEMORY.

use super::Ctx;
use crate::memory::backing::{BackingFile, MmapSpace};
use crate::memory::vm::{GpuVa, RegionBacking};
use crate::memory::{handle_gpu_id, make_handle, remote, Buffer, BufferKind, PAGE_SIZE};
use crate::process::{ProcessInner, GPUVM_BASE, GPUVM_LIMIT};
use crate::queue::doorbell::{Doorbells, DOORBELL_SLICE_SIZE};
use crate::quota::Charge;
use nix::errno::Errno;
use std::sync::{Arc, Weak};
use uapi::kfd::*;

/// Device ids one MAP/UNMAP call may name.
pub const MAX_DEVICES_PER_CALL: u32 = 64;

pub fn acquire_vm(ctx: &Ctx, a: &mut AcquireVmArgs) -> Result<(), Errno> {
    if !ctx.gpu_exists(a.gpu_id) {
        return Err(Errno::EINVAL);
    }
    // The fd number lives in the caller's fd table; identify the open file by what it refers to.
    let path = format!("/proc/{}/fd/{}", ctx.caller.pid, a.drm_fd as i32);
    let st = nix::sys::stat::stat(path.as_str()).map_err(|_| Errno::EINVAL)?;
    let id = (st.st_dev, st.st_ino);
    let mut inner = ctx.process.inner();
    let dev = inner.devices.get_mut(&a.gpu_id).ok_or(Errno::EINVAL)?;
    match dev.drm_file {
        Some(bound) if bound == id => Ok(()),
        Some(_) => Err(Errno::EBUSY),
        None => {
            dev.drm_file = Some(id);
            Ok(())
        }
    }
}

/// The process doorbell slice of `gpu_id`, created on first use.
pub(super) fn doorbells<'a>(ctx: &Ctx, inner: &'a mut ProcessInner, gpu_id: u32) -> Result<&'a mut Doorbells, Errno> {
    let dev = inner.devices.get_mut(&gpu_id).ok_or(Errno::EINVAL)?;
    if dev.doorbells.is_none() {
        let offset = KFD_MMAP_TYPE_DOORBELL | (u64::from(gpu_id) << KFD_MMAP_GPU_ID_SHIFT);
        let file = create_file(ctx, MmapSpace::Kfd, offset, DOORBELL_SLICE_SIZE)?;
        dev.doorbells = Some(Doorbells::new(file, offset));
    }
    Ok(dev.doorbells.as_mut().expect("created above"))
}

/// A backing file with its space reserved now (a full file system is ENOMEM here).
pub(super) fn create_file(ctx: &Ctx, space: MmapSpace, offset: u64, len: u64) -> Result<Arc<BackingFile>, Errno> {
    make_file(ctx, space, offset, len, false)
}

/// A backing file, sparse when `sparse` (VRAM: see [`BackingStore::create_sparse`]).
///
/// [`BackingStore::create_sparse`]: crate::memory::backing::BackingStore::create_sparse
fn make_file(ctx: &Ctx, space: MmapSpace, offset: u64, len: u64, sparse: bool) -> Result<Arc<BackingFile>, Errno> {
    let len = usize::try_from(len).map_err(|_| Errno::ENOMEM)?;
    let (client, owner) = (ctx.process.backing, ctx.process.owner);
    let made = if sparse {
        ctx.device.backing().create_sparse(client, owner, space, offset, len)
    } else {
        ctx.device.backing().create(client, owner, space, offset, len)
    };
    made.map_err(|e| {
        log::warn!("pid {}: cannot create a backing file: {e}", ctx.process.pid);
        Errno::ENOMEM
    })
}

/// A new buffer's place: page-aligned, inside the GPU VM aperture, and overlapping none of the
/// process's buffers (EINVAL otherwise, as amdkfd's ALLOC; an IPC import is placed the same).
pub(super) fn check_free_range(inner: &ProcessInner, va: GpuVa, size: u64) -> Result<(), Errno> {
    let end = va.0.checked_add(size).ok_or(Errno::EINVAL)?;
    if !va.0.is_multiple_of(PAGE_SIZE) || va.0 < GPUVM_BASE || end - 1 > GPUVM_LIMIT {
        return Err(Errno::EINVAL);
    }
    if inner.buffers.values().any(|b| b.va.0 < end && va.0 < b.end()) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

pub fn alloc(ctx: &Ctx, a: &mut AllocMemoryOfGpuArgs) -> Result<(), Errno> {
    if !ctx.gpu_exists(a.gpu_id) || a.size == 0 {
        return Err(Errno::EINVAL);
    }
    let kind = BufferKind::from_flags(a.flags).ok_or(Errno::EINVAL)?;
    let size = a.size.checked_next_multiple_of(PAGE_SIZE).ok_or(Errno::EINVAL)?;
    let va = GpuVa(a.va_addr);
    let mut inner = ctx.process.inner();
    check_free_range(&inner, va, size)?;
    // kfd_ioctl_alloc_memory_of_gpu: memory SVM ranges already hold is EADDRINUSE.
    if super::svm::holds(ctx, va.0 / PAGE_SIZE, (va.0 + size) / PAGE_SIZE - 1) {
        return Err(Errno::EADDRINUSE);
    }
    let gpu = a.gpu_id;
    let index = inner.next_buffer_index;
    let next_index = index.checked_add(1).ok_or(Errno::ENOMEM)?;
    // Charged first and given back if the backing cannot be made: a refused ALLOC leaves nothing.
    let charge = Charge::buffer(kind, gpu, size);
    ctx.device.ledger().charge(ctx.process.account, &charge)?;
    let (backing, mmap_offset) = make_backing(ctx, &mut inner, kind, gpu, size, a.size, a.mmap_offset)
        .inspect_err(|_| ctx.device.ledger().release(ctx.process.account, &charge))?;
    inner.next_buffer_index = next_index;
    let handle = make_handle(gpu, index);
    inner.buffers.insert(handle, Buffer::new(handle, gpu, kind, va, size, a.flags, mmap_offset, backing));
    a.handle = handle;
    a.mmap_offset = mmap_offset;
    Ok(())
}

/// The backing of a new buffer of `kind` and (page-rounded) `size` on `gpu`, and its mmap
/// offset; `asked` is the size the caller gave, `cpu` its mmap_offset argument (for USERPTR,
/// the CPU address of its pages).
fn make_backing(
    ctx: &Ctx,
    inner: &mut ProcessInner,
    kind: BufferKind,
    gpu: u32,
    size: u64,
    asked: u64,
    cpu: u64,
) -> Result<(RegionBacking, u64), Errno> {
    Ok(match kind {
        BufferKind::Doorbell => {
            if asked != DOORBELL_SLICE_SIZE {
                return Err(Errno::EINVAL);
            }
            let db = doorbells(ctx, inner, gpu)?;
            (RegionBacking::File { file: db.file.clone(), offset: 0 }, db.mmap_offset)
        }
        BufferKind::MmioRemap => {
            if asked != PAGE_SIZE {
                return Err(Errno::EINVAL);
            }
            let offset = KFD_MMAP_TYPE_MMIO | (u64::from(gpu) << KFD_MMAP_GPU_ID_SHIFT);
            let dev = inner.devices.get_mut(&gpu).ok_or(Errno::EINVAL)?;
            if dev.mmio_page.is_none() {
                dev.mmio_page = Some(create_file(ctx, MmapSpace::Kfd, offset, PAGE_SIZE)?);
            }
            (RegionBacking::File { file: dev.mmio_page.clone().expect("created above"), offset: 0 }, offset)
        }
        BufferKind::Userptr => {
            if !cpu.is_multiple_of(PAGE_SIZE) || cpu.checked_add(size).is_none() {
                return Err(Errno::EINVAL);
            }
            let mut probe = [0u8; 1];
            let owner = &ctx.process.memory;
            // SAFETY: the range this request registers, in the memory of the context's owner,
            // which the contract of `Device::ioctl` (under which every handler runs) makes valid
            // for the device when the owner is this process; another process is no soundness
            // concern.
            unsafe {
                owner.read(cpu, &mut probe)?;
                owner.read(cpu + size - 1, &mut probe)?;
            }
            // SAFETY: as for the probe: the range this request registers, valid for the device
            // while registered by the contract of `Device::ioctl`; the region backed by it is
            // `size` bytes long and unmapped when the buffer is freed.
            (RegionBacking::Userptr(unsafe { remote::ClientAddr::new(owner.clone(), cpu) }), cpu)
        }
        BufferKind::Vram | BufferKind::Gtt => {
            let offset = inner.render_offsets.alloc(size).ok_or(Errno::ENOMEM)?;
            match make_file(ctx, MmapSpace::Render, offset, size, kind == BufferKind::Vram) {
                Ok(file) => (RegionBacking::File { file, offset: 0 }, offset),
                Err(e) => {
                    inner.render_offsets.free(offset, size, Weak::new());
                    return Err(e);
                }
            }
        }
    })
}

pub fn free(ctx: &Ctx, a: &mut FreeMemoryOfGpuArgs) -> Result<(), Errno> {
    let mut inner = ctx.process.inner();
    let b = inner.buffers.get(&a.handle).ok_or(Errno::EINVAL)?;
    if inner.event_page_handle == Some(a.handle) {
        return Err(Errno::EPERM);
    }
    if !b.mapped_on.is_empty() {
        return Err(Errno::EBUSY);
    }
    let b = inner.buffers.remove(&a.handle).expect("looked up above");
    ctx.device.ledger().release(ctx.process.account, &Charge::buffer(b.kind, b.gpu_id, b.size));
    Ok(())
}

/// The device ids of a MAP/UNMAP call, checked in amdkfd's order: counts (EINVAL), the copy
/// of the id array (EFAULT), then the GPU the handle names (EINVAL).
fn device_ids(ctx: &Ctx, handle: u64, ptr: u64, n_devices: u32, n_success: u32) -> Result<Vec<u32>, Errno> {
    if n_devices == 0 || n_success > n_devices || n_devices > MAX_DEVICES_PER_CALL {
        return Err(Errno::EINVAL);
    }
    let ids = ctx.read_user::<u32>(ptr, n_devices as usize)?;
    if !ctx.gpu_exists(handle_gpu_id(handle)) {
        return Err(Errno::EINVAL);
    }
    Ok(ids)
}

/// amdkfd's MAP/UNMAP answer ENOMEM for a handle its GPU does not know
/// (kfd_process_device_translate_handle failing), unlike FREE's EINVAL.
const UNKNOWN_HANDLE: Errno = Errno::ENOMEM;

pub fn map(ctx: &Ctx, a: &mut MapMemoryToGpuArgs) -> Result<(), Errno> {
    let ids = device_ids(ctx, a.handle, a.device_ids_array_ptr, a.n_devices, a.n_success)?;
    let mut inner = ctx.process.inner();
    let b = inner.buffers.get_mut(&a.handle).ok_or(UNKNOWN_HANDLE)?;
    let mut vm = ctx.process.vm_mut();
    for (i, gpu) in ids.iter().enumerate().skip(a.n_success as usize) {
        if ctx.device.topology().gpu(*gpu).is_none() {
            return Err(Errno::EINVAL);
        }
        if !b.mapped_on.contains(gpu) {
            if !vm.map(*gpu, b.region.clone()) {
                return Err(Errno::EINVAL);
            }
            b.mapped_on.insert(*gpu);
        }
        a.n_success = i as u32 + 1;
    }
    Ok(())
}

/// Whether a queue on `gpu` has its ring, read or write pointer in `[start, end)`.
fn used_by_queue(inner: &ProcessInner, gpu: u32, start: u64, end: u64) -> bool {
    let overlaps = |va: u64, len: u64| va < end && va.saturating_add(len) > start;
    inner.queues.values().filter(|q| q.gpu_id == gpu).any(|q| {
        let p = q.props();
        overlaps(q.read_ptr.0, 8)
            || overlaps(q.write_ptr.0, 8)
            || (p.ring_base.0 != 0 && overlaps(p.ring_base.0, p.ring_size))
    })
}

pub fn unmap(ctx: &Ctx, a: &mut UnmapMemoryFromGpuArgs) -> Result<(), Errno> {
    let ids = device_ids(ctx, a.handle, a.device_ids_array_ptr, a.n_devices, a.n_success)?;
    let mut inner = ctx.process.inner();
    let b = inner.buffers.get(&a.handle).ok_or(UNKNOWN_HANDLE)?;
    // amdkfd (unmap_bo_from_gpuvm): a mapping a live queue uses stays until the queue goes (or
    // UPDATE_QUEUE moves its ring): EBUSY.
    let (start, end) = (b.va.0, b.end());
    let busy: Vec<u32> = ids.iter().copied().filter(|g| used_by_queue(&inner, *g, start, end)).collect();
    let b = inner.buffers.get_mut(&a.handle).expect("looked up above");
    let mut vm = ctx.process.vm_mut();
    for (i, gpu) in ids.iter().enumerate().skip(a.n_success as usize) {
        if ctx.device.topology().gpu(*gpu).is_none() {
            return Err(Errno::EINVAL);
        }
        if b.mapped_on.contains(gpu) && busy.contains(gpu) {
            return Err(Errno::EBUSY);
        }
        // Unmapping where it is not mapped is a no-op in amdgpu.
        if b.mapped_on.remove(gpu) {
            vm.unmap(*gpu, b.va);
        }
        a.n_success = i as u32 + 1;
    }
    Ok(())
}

pub fn available(ctx: &Ctx, a: &mut GetAvailableMemoryArgs) -> Result<(), Errno> {
    // The device's free VRAM, bounded by what this process's and its uid's quotas still allow.
    a.available = ctx.device.ledger().vram_available(Some(ctx.process.account), a.gpu_id).ok_or(Errno::EINVAL)?;
    Ok(())
}
