//! AMD's out-of-tree IPC requests, IPC_EXPORT_HANDLE and IPC_IMPORT_HANDLE (ROCm's DKMS amdkfd,
//! kfd_chardev.c and kfd_ipc.c): a buffer shared between processes by a 128-bit handle (see
//! [`crate::memory::ipc`]).

use super::Ctx;
use crate::memory::ipc::IpcObject;
use crate::memory::vm::{GpuVa, RegionBacking};
use crate::memory::{handle_gpu_id, make_handle, Buffer, BufferKind};
use crate::quota::Charge;
use nix::errno::Errno;
use std::sync::{Arc, Weak};
use uapi::kfd::*;

/// Gives the caller's buffer `handle` on `gpu_id` a share handle; the same one again for a
/// buffer already exported or imported (amdkfd kfd_ipc_export_as_handle returns the BO's
/// `kfd_ipc_obj`, with the flags given the first time). Only VRAM and GTT can be shared: amdkfd exports the BO as a dma-buf, which
/// userptr, doorbell and MMIO BOs refuse; here, EINVAL.
pub fn export(ctx: &Ctx, a: &mut IpcExportHandleArgs) -> Result<(), Errno> {
    if !ctx.gpu_exists(a.gpu_id) || handle_gpu_id(a.handle) != a.gpu_id {
        return Err(Errno::EINVAL);
    }
    let mut inner = ctx.process.inner();
    let b = inner.buffers.get_mut(&a.handle).ok_or(Errno::EINVAL)?;
    if let Some(obj) = &b.ipc {
        a.share_handle = obj.share_handle;
        return Ok(());
    }
    if !matches!(b.kind, BufferKind::Vram | BufferKind::Gtt) {
        log::debug!("pid {}: a {} buffer cannot be exported", ctx.process.pid, b.kind.name());
        return Err(Errno::EINVAL);
    }
    let file = b.file().ok_or(Errno::EINVAL)?;
    let ipc = ctx.device.ipc();
    let share_handle = ipc.new_handle().map_err(|_| Errno::EIO)?;
    let name = crate::memory::ipc::file_name(&share_handle, b.flags, a.flags);
    let shared = ctx.device.backing().share(file, &name).map_err(|e| {
        log::warn!("pid {}: cannot share a buffer: {e}", ctx.process.pid);
        Errno::ENOMEM
    })?;
    let obj = Arc::new(IpcObject {
        share_handle,
        kind: b.kind,
        size: b.size,
        alloc_flags: b.flags,
        flags: a.flags,
        file: shared,
    });
    ipc.insert(&obj);
    b.ipc = Some(obj);
    a.share_handle = share_handle;
    Ok(())
}

/// Makes a buffer of the caller at `va_addr` on `gpu_id` over the memory `share_handle` names,
/// charged to the caller (amdkfd kfd_ipc_import_handle: any process holding the handle may; an
/// unknown handle is EINVAL). Its `mmap_offset` reaches the same pages through the caller's own
/// backing path; `flags` are those the exporter gave. An embedded device also finds handles that
/// another process of the same user exported on its own embedded device.
pub fn import(ctx: &Ctx, a: &mut IpcImportHandleArgs) -> Result<(), Errno> {
    if !ctx.gpu_exists(a.gpu_id) {
        return Err(Errno::EINVAL);
    }
    let obj = ctx.device.ipc().get_or_adopt(&a.share_handle, ctx.device.backing()).ok_or(Errno::EINVAL)?;
    let (size, gpu) = (obj.size, a.gpu_id);
    let va = GpuVa(a.va_addr);
    let mut inner = ctx.process.inner();
    super::memory::check_free_range(&inner, va, size)?;
    let index = inner.next_buffer_index;
    let next_index = index.checked_add(1).ok_or(Errno::ENOMEM)?;
    let charge = Charge::buffer(obj.kind, gpu, size);
    ctx.device.ledger().charge(ctx.process.account, &charge)?;
    let release = || ctx.device.ledger().release(ctx.process.account, &charge);
    let Some(offset) = inner.render_offsets.alloc(size) else {
        release();
        return Err(Errno::ENOMEM);
    };
    let file = match ctx.device.backing().import(&obj.file, ctx.process.backing, ctx.process.owner, offset) {
        Ok(file) => file,
        Err(e) => {
            log::warn!("pid {}: cannot import a shared buffer: {e}", ctx.process.pid);
            inner.render_offsets.free(offset, size, Weak::new());
            release();
            // No ACL for an importer of another uid: refused, never shared wider than asked.
            let denied = matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES | libc::EOPNOTSUPP));
            return Err(if denied { Errno::EPERM } else { Errno::ENOMEM });
        }
    };
    inner.next_buffer_index = next_index;
    let handle = make_handle(gpu, index);
    let backing = RegionBacking::File { file, offset: 0 };
    let mut buffer = Buffer::new(handle, gpu, obj.kind, va, size, obj.alloc_flags, offset, backing);
    a.flags = obj.flags;
    buffer.ipc = Some(obj);
    inner.buffers.insert(handle, buffer);
    a.handle = handle;
    a.mmap_offset = offset;
    Ok(())
}
