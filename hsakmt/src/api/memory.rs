//! Memory: allocation, GPU mapping, registration, pointer queries, IPC and interop.

use super::{entry, node_array, thunk};
use crate::ptr;
use crate::types::*;
use std::ffi::c_void;
use thunk::hsakmt::{MemoryRange, SharedMemoryHandle, Status};

/// `hsaKmtAllocMemory`: `*memory_address` receives the buffer (with `FixedAddress` it names
/// the wanted address on entry).
///
/// # Safety
/// `memory_address` is null or points to a readable and writable pointer.
pub unsafe extern "C" fn hsaKmtAllocMemory(
    preferred_node: u32,
    size: u64,
    flags: HsaMemFlags,
    memory_address: *mut *mut c_void,
) -> HSAKMT_STATUS {
    entry("hsaKmtAllocMemory", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let wanted = unsafe { ptr::read(memory_address) }.ok_or(Status::InvalidParameter)?;
        let addr = t.alloc_memory(preferred_node, size, flags, Some(wanted as u64).filter(|a| *a != 0))?;
        // SAFETY: as above.
        unsafe { ptr::write(memory_address, addr as *mut c_void) }
    })
}

/// `hsaKmtFreeMemory`.
pub extern "C" fn hsaKmtFreeMemory(memory_address: *mut c_void, size: u64) -> HSAKMT_STATUS {
    entry("hsaKmtFreeMemory", || thunk()?.free_memory(memory_address as u64, size))
}

/// `hsaKmtMapMemoryToGPU`: `*alternate_va` (if given) receives the GPU address to use when it
/// differs from the CPU address (registered user memory), else 0.
///
/// # Safety
/// `alternate_va` is null or points to a writable `HSAuint64`.
pub unsafe extern "C" fn hsaKmtMapMemoryToGPU(
    memory_address: *mut c_void,
    size: u64,
    alternate_va: *mut u64,
) -> HSAKMT_STATUS {
    entry("hsaKmtMapMemoryToGPU", || {
        let t = thunk()?;
        if !alternate_va.is_null() {
            // SAFETY: the caller's contract.
            unsafe { ptr::write(alternate_va, 0) }?;
        }
        let alt = t.map_memory_to_gpu(memory_address as u64, size)?;
        if !alternate_va.is_null() {
            // SAFETY: as above.
            unsafe { ptr::write(alternate_va, alt) }?;
        }
        Ok(())
    })
}

/// `hsaKmtMapMemoryToGPUNodes`.
///
/// # Safety
/// `alternate_va` is null or writable; `nodes` is null or points to `num_nodes` u32s.
pub unsafe extern "C" fn hsaKmtMapMemoryToGPUNodes(
    memory_address: *mut c_void,
    size: u64,
    alternate_va: *mut u64,
    flags: HsaMemMapFlags,
    num_nodes: u64,
    nodes: *mut u32,
) -> HSAKMT_STATUS {
    entry("hsaKmtMapMemoryToGPUNodes", || {
        let t = thunk()?;
        if memory_address.is_null() {
            return Err(Status::Error);
        }
        // SAFETY: the caller's contract.
        let nodes = unsafe { node_array(nodes, num_nodes) }?;
        let alt = t.map_memory_to_gpu_nodes(memory_address as u64, size, flags, &nodes)?;
        if !alternate_va.is_null() {
            // SAFETY: the caller's contract.
            unsafe { ptr::write(alternate_va, alt) }?;
        }
        Ok(())
    })
}

/// `hsaKmtUnmapMemoryToGPU`.
pub extern "C" fn hsaKmtUnmapMemoryToGPU(memory_address: *mut c_void) -> HSAKMT_STATUS {
    entry("hsaKmtUnmapMemoryToGPU", || thunk()?.unmap_memory_to_gpu(memory_address as u64))
}

/// `hsaKmtRegisterMemoryWithFlags`: the GPU may then read and write the memory.
///
/// # Safety
/// The pages `[memory_address, memory_address + size)` touches stay valid for the GPU's reads
/// and writes until `hsaKmtDeregisterMemory` (or `hsaKmtCloseKFD`), as libhsakmt requires.
pub unsafe extern "C" fn hsaKmtRegisterMemoryWithFlags(
    memory_address: *mut c_void,
    size: u64,
    flags: HsaMemFlags,
) -> HSAKMT_STATUS {
    entry("hsaKmtRegisterMemoryWithFlags", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        unsafe { t.register_memory_with_flags(memory_address as u64, size, flags) }
    })
}

/// `hsaKmtDeregisterMemory`.
pub extern "C" fn hsaKmtDeregisterMemory(memory_address: *mut c_void) -> HSAKMT_STATUS {
    entry("hsaKmtDeregisterMemory", || thunk()?.deregister_memory(memory_address as u64))
}

/// `hsaKmtQueryPointerInfo`: an unknown pointer leaves `HSA_POINTER_UNKNOWN` and answers
/// `HSAKMT_STATUS_ERROR`. The node arrays it points to belong to the thunk and stay valid until
/// the memory's mapping or registration changes.
///
/// # Safety
/// `info` is null or points to a writable `HsaPointerInfo`.
pub unsafe extern "C" fn hsaKmtQueryPointerInfo(pointer: *const c_void, info: *mut HsaPointerInfo) -> HSAKMT_STATUS {
    entry("hsaKmtQueryPointerInfo", || {
        // SAFETY: the caller's contract.
        unsafe { ptr::write(info, HsaPointerInfo::UNKNOWN) }?;
        let p = thunk()?.query_pointer_info(pointer as u64)?;
        // SAFETY: as above.
        unsafe { ptr::write(info, HsaPointerInfo::from(&p)) }
    })
}

/// `hsaKmtSetMemoryUserData`.
pub extern "C" fn hsaKmtSetMemoryUserData(pointer: *const c_void, user_data: *mut c_void) -> HSAKMT_STATUS {
    entry("hsaKmtSetMemoryUserData", || thunk()?.set_memory_user_data(pointer as u64, user_data as u64))
}

/// `hsaKmtShareMemory`: an IPC handle for the buffer at `memory_address`.
///
/// # Safety
/// `handle` is null or points to a writable `HsaSharedMemoryHandle`.
pub unsafe extern "C" fn hsaKmtShareMemory(
    memory_address: *mut c_void,
    size: u64,
    handle: *mut HsaSharedMemoryHandle,
) -> HSAKMT_STATUS {
    entry("hsaKmtShareMemory", || {
        let t = thunk()?;
        if handle.is_null() {
            return Err(Status::InvalidParameter);
        }
        let h = t.share_memory(memory_address as u64, size)?;
        // SAFETY: the caller's contract.
        unsafe { ptr::write(handle, h.0) }
    })
}

/// The common body of the two RegisterSharedHandle calls.
///
/// # Safety
/// As [`hsaKmtRegisterSharedHandleToNodes`].
unsafe fn register_shared(
    handle: *const HsaSharedMemoryHandle,
    memory_address: *mut *mut c_void,
    size: *mut u64,
    nodes: Option<Vec<u32>>,
) -> thunk::hsakmt::Result<()> {
    let t = thunk()?;
    // SAFETY: the caller's contract.
    let h = unsafe { ptr::read(handle) }.ok_or(Status::InvalidParameter)?;
    if memory_address.is_null() || size.is_null() {
        return Err(Status::InvalidParameter);
    }
    let (addr, len) = t.register_shared_handle(&SharedMemoryHandle(h), nodes.as_deref().unwrap_or(&[]))?;
    // SAFETY: both checked non-null; writable by the caller's contract.
    unsafe { ptr::write(memory_address, addr as *mut c_void) }?;
    // SAFETY: as above.
    unsafe { ptr::write(size, len) }
}

/// `hsaKmtRegisterSharedHandle`: maps the buffer an IPC handle names.
///
/// # Safety
/// `handle` is null or readable; `memory_address` and `size` null or writable.
pub unsafe extern "C" fn hsaKmtRegisterSharedHandle(
    handle: *const HsaSharedMemoryHandle,
    memory_address: *mut *mut c_void,
    size: *mut u64,
) -> HSAKMT_STATUS {
    // SAFETY: the caller's contract.
    entry("hsaKmtRegisterSharedHandle", || unsafe { register_shared(handle, memory_address, size, None) })
}

/// `hsaKmtRegisterSharedHandleToNodes`: as RegisterSharedHandle, for `nodes`.
///
/// # Safety
/// As [`hsaKmtRegisterSharedHandle`]; `nodes` null or pointing to `num_nodes` u32s.
pub unsafe extern "C" fn hsaKmtRegisterSharedHandleToNodes(
    handle: *const HsaSharedMemoryHandle,
    memory_address: *mut *mut c_void,
    size: *mut u64,
    num_nodes: u64,
    nodes: *mut u32,
) -> HSAKMT_STATUS {
    entry("hsaKmtRegisterSharedHandleToNodes", || {
        let nodes = if nodes.is_null() {
            None
        } else {
            // SAFETY: the caller's contract.
            Some(unsafe { node_array(nodes, num_nodes) }?)
        };
        // SAFETY: the caller's contract.
        unsafe { register_shared(handle, memory_address, size, nodes) }
    })
}

/// `hsaKmtRegisterGraphicsHandleToNodes`: `HSAKMT_STATUS_ERROR`, as libhsakmt gives when the
/// driver's GET_DMABUF_INFO fails (no dma-buf file descriptor can reach the device).
///
/// # Safety
/// `info` is null or writable; `nodes` null or pointing to `num_nodes` u32s.
pub unsafe extern "C" fn hsaKmtRegisterGraphicsHandleToNodes(
    graphics_resource_handle: u64,
    info: *mut HsaGraphicsResourceInfo,
    num_nodes: u64,
    nodes: *mut u32,
) -> HSAKMT_STATUS {
    entry("hsaKmtRegisterGraphicsHandleToNodes", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let nodes = unsafe { node_array(nodes, num_nodes) }?;
        let r = t.register_graphics_handle_to_nodes(graphics_resource_handle, &nodes)?;
        // The thunk never imports one (see above); were it to, the metadata would have to live
        // as long as the buffer, which this layer does not arrange.
        let c = HsaGraphicsResourceInfo {
            MemoryAddress: r.memory_address,
            SizeInBytes: r.size_in_bytes,
            Metadata: 0,
            MetadataSizeInBytes: 0,
            Reserved: 0,
        };
        // SAFETY: the caller's contract.
        unsafe { ptr::write(info, c) }
    })
}

/// `hsaKmtRegisterMemory`: as `hsaKmtRegisterMemoryWithFlags` with coarse-grained host
/// memory, on every GPU the memory is later mapped on.
///
/// # Safety
/// As [`hsaKmtRegisterMemoryWithFlags`].
pub unsafe extern "C" fn hsaKmtRegisterMemory(memory_address: *mut c_void, size: u64) -> HSAKMT_STATUS {
    entry("hsaKmtRegisterMemory", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        unsafe { t.register_memory(memory_address as u64, size) }
    })
}

/// `hsaKmtRegisterMemoryToNodes`: as `hsaKmtRegisterMemory`, for the GPUs of `nodes` only.
///
/// # Safety
/// As [`hsaKmtRegisterMemoryWithFlags`]; `nodes` null or pointing to `num_nodes` u32s.
pub unsafe extern "C" fn hsaKmtRegisterMemoryToNodes(
    memory_address: *mut c_void,
    size: u64,
    num_nodes: u64,
    nodes: *mut u32,
) -> HSAKMT_STATUS {
    entry("hsaKmtRegisterMemoryToNodes", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let nodes = unsafe { node_array(nodes, num_nodes) }?;
        // SAFETY: the caller's contract.
        unsafe { t.register_memory_to_nodes(memory_address as u64, size, &nodes) }
    })
}

/// The body of ProcessVMRead and ProcessVMWrite, over ROCm's out-of-tree CROSS_MEMORY_COPY
/// (see `thunk`'s `process_vm_copy`). libhsakmt asks no open KFD first; neither does this: with
/// none, its request fails on fd -1, so the answer is `ERROR` with 0 bytes copied.
///
/// # Safety
/// As [`hsaKmtProcessVMRead`].
unsafe fn process_vm(
    pid: u32,
    local: *const HsaMemoryRange,
    nlocal: u64,
    remote: *const HsaMemoryRange,
    nremote: u64,
    copied: *mut u64,
    write: bool,
) -> thunk::hsakmt::Result<()> {
    let ranges = |p: *const HsaMemoryRange, n: u64| -> Option<Vec<MemoryRange>> {
        let n = usize::try_from(n).ok().filter(|n| *n > 0)?;
        // SAFETY: the caller's contract.
        let c = unsafe { ptr::read_array(p, n) }?;
        Some(c.iter().map(|r| MemoryRange { address: r.MemoryAddress, size: r.SizeInBytes }).collect())
    };
    if write && !copied.is_null() {
        // SAFETY: the caller's contract.
        unsafe { ptr::write(copied, 0) }?;
    }
    let (Some(local), Some(remote)) = (ranges(local, nlocal), ranges(remote, nremote)) else {
        return Err(Status::Error);
    };
    let (r, n) = match thunk() {
        // SAFETY: the caller's contract: the local ranges are valid for the copy.
        Ok(t) => unsafe { t.process_vm_copy(pid, &local, &remote, write) },
        Err(_) => (Err(Status::Error), 0),
    };
    if !copied.is_null() {
        // SAFETY: the caller's contract.
        unsafe { ptr::write(copied, n) }?;
    }
    r
}

/// `hsaKmtProcessVMRead`: copies from process `pid`'s GPU memory (`remote`) into this one's
/// (`local`); `HSAKMT_STATUS_ERROR` if the device refuses or cuts the copy short (no right to
/// reach `pid`, a range outside mapped memory), as libhsakmt 5.2.3 answers any failed request.
/// `*size_copied` (if given) receives the bytes copied, on failure too.
///
/// # Safety
/// `local` and `remote` are null or point to their counts of `HsaMemoryRange`s; the local
/// ranges are valid GPU memory of this process for the copy; `size_copied` is null or writable.
pub unsafe extern "C" fn hsaKmtProcessVMRead(
    pid: u32,
    local: *mut HsaMemoryRange,
    local_count: u64,
    remote: *mut HsaMemoryRange,
    remote_count: u64,
    size_copied: *mut u64,
) -> HSAKMT_STATUS {
    // SAFETY: the caller's contract.
    entry("hsaKmtProcessVMRead", || unsafe {
        process_vm(pid, local, local_count, remote, remote_count, size_copied, false)
    })
}

/// `hsaKmtProcessVMWrite`: as `hsaKmtProcessVMRead`, from `local` into process `pid`'s
/// `remote`.
///
/// # Safety
/// As [`hsaKmtProcessVMRead`].
pub unsafe extern "C" fn hsaKmtProcessVMWrite(
    pid: u32,
    local: *mut HsaMemoryRange,
    local_count: u64,
    remote: *mut HsaMemoryRange,
    remote_count: u64,
    size_copied: *mut u64,
) -> HSAKMT_STATUS {
    // SAFETY: the caller's contract.
    entry("hsaKmtProcessVMWrite", || unsafe {
        process_vm(pid, local, local_count, remote, remote_count, size_copied, true)
    })
}

/// `hsaKmtMapGraphicHandle`: `HSAKMT_STATUS_NOT_IMPLEMENTED`, as libhsakmt 5.2.3 always
/// answers (a Kaveri-era call no upstream driver had; `hsaKmtRegisterGraphicsHandleToNodes`
/// replaced it). `*flat_memory_address` is left untouched.
///
/// # Safety
/// `flat_memory_address` is null or writable.
pub unsafe extern "C" fn hsaKmtMapGraphicHandle(
    node_id: u32,
    graphic_device_handle: u64,
    graphic_resource_handle: u64,
    graphic_resource_offset: u64,
    graphic_resource_size: u64,
    flat_memory_address: *mut u64,
) -> HSAKMT_STATUS {
    entry("hsaKmtMapGraphicHandle", || {
        let addr = thunk::hsakmt::map_graphic_handle(
            node_id,
            graphic_device_handle,
            graphic_resource_handle,
            graphic_resource_offset,
            graphic_resource_size,
        )?;
        // SAFETY: the caller's contract.
        unsafe { ptr::write(flat_memory_address, addr) }
    })
}

/// `hsaKmtUnmapGraphicHandle`: unmaps the buffer at `flat_memory_address` from the GPUs, as
/// `hsaKmtUnmapMemoryToGPU` (which libhsakmt 5.2.3 calls for it).
pub extern "C" fn hsaKmtUnmapGraphicHandle(_node_id: u32, flat_memory_address: u64, _size: u64) -> HSAKMT_STATUS {
    entry("hsaKmtUnmapGraphicHandle", || thunk()?.unmap_memory_to_gpu(flat_memory_address))
}
