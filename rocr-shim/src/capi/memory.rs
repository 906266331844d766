//! Memory: region and pool allocation, hsa_memory_copy on the device's COPY_BYTES kernel.

use super::{out, runtime, status, HsaStatus};
use crate::agent::Pool;
use crate::status::{Error, Status};
use std::ffi::c_void;

/// hsa_memory_allocate: `*ptr` receives `size` bytes of `region`.
///
/// # Safety
/// `ptr` is null or valid for writing a `void *`.
#[no_mangle]
pub unsafe extern "C" fn hsa_memory_allocate(region: Pool, size: usize, ptr: *mut *mut c_void) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        if ptr.is_null() {
            return Err(Error::invalid_argument("ptr is NULL"));
        }
        let desc = rt.pool_desc(region).map_err(|e| Error::new(Status::INVALID_REGION, e.reason))?;
        let p = rt.allocate(desc.handle, size as u64)?;
        // SAFETY: the caller's contract.
        unsafe { out(ptr, p as *mut c_void, "ptr") }
    });
    status(r)
}

/// hsa_memory_free (NULL is a no-op).
#[no_mangle]
pub extern "C" fn hsa_memory_free(ptr: *mut c_void) -> HsaStatus {
    let r = runtime().and_then(|rt| if ptr.is_null() { Ok(()) } else { rt.free(ptr as u64) });
    status(r)
}

/// hsa_amd_memory_pool_allocate: `*ptr` receives `size` bytes of `pool`.
///
/// # Safety
/// `ptr` is null or valid for writing a `void *`.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_memory_pool_allocate(
    pool: Pool,
    size: usize,
    flags: u32,
    ptr: *mut *mut c_void,
) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        if ptr.is_null() {
            return Err(Error::invalid_argument("ptr is NULL"));
        }
        if flags != 0 {
            return Err(Error::invalid_argument(format!(
                "memory pool allocation flags {flags:#x}: only 0 is supported"
            )));
        }
        let desc = rt.pool_desc(pool)?;
        if !desc.is_pool {
            return Err(Error::new(Status::INVALID_MEMORY_POOL, "the kernarg region is not a memory pool"));
        }
        let p = rt.allocate(pool, size as u64)?;
        // SAFETY: the caller's contract.
        unsafe { out(ptr, p as *mut c_void, "ptr") }
    });
    status(r)
}

#[no_mangle]
pub extern "C" fn hsa_amd_memory_pool_free(ptr: *mut c_void) -> HsaStatus {
    hsa_memory_free(ptr)
}

/// Between allocations of this runtime the device copies (Runtime::copy). Memory the runtime did
/// not allocate is taken for host memory, as ROCr takes it, and copied by the CPU: the device
/// cannot reach it, the CPU can (every allocation of this runtime, VRAM included, is mapped in
/// the process too). A range that starts inside an allocation must end inside it.
///
/// # Safety
/// `dst` and `src` are null or valid for writing and reading `size` bytes (they may overlap).
/// The runtime checks ranges inside its own allocations; it cannot check the caller's memory.
#[no_mangle]
pub unsafe extern "C" fn hsa_memory_copy(dst: *mut c_void, src: *const c_void, size: usize) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        if dst.is_null() || src.is_null() {
            return Err(Error::invalid_argument("hsa_memory_copy: NULL pointer"));
        }
        let foreign = |p: u64| size > 0 && rt.allocation(p, 1).is_none();
        if !foreign(dst as u64) && !foreign(src as u64) {
            return rt.copy(dst as u64, src as u64, size as u64);
        }
        for (p, what) in [(dst as u64, "destination"), (src as u64, "source")] {
            if !foreign(p) && rt.allocation(p, size as u64).is_none() {
                return Err(Error::invalid_argument(format!(
                    "hsa_memory_copy: the {what} {p:#x}+{size} runs past the end of its allocation"
                )));
            }
        }
        // SAFETY: the caller's contract: both non-null ranges are valid for `size` bytes;
        // `copy` allows overlap.
        unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), size) };
        Ok(())
    });
    status(r)
}

/// A performance hint that the HSA specification makes a no-op in the base profile (the only
/// profile here), as ROCr does on a discrete GPU: it does not make the memory visible to the
/// device (packets cannot use it; hsa_memory_copy copies it with the CPU). Arguments are checked
/// as ROCr checks them.
#[no_mangle]
pub extern "C" fn hsa_memory_register(ptr: *mut c_void, size: usize) -> HsaStatus {
    let r = runtime().and_then(|_| {
        if size == 0 && !ptr.is_null() {
            return Err(Error::invalid_argument(format!("hsa_memory_register({ptr:p}, 0): size 0")));
        }
        Ok(())
    });
    status(r)
}

/// The counterpart of hsa_memory_register: a no-op.
#[no_mangle]
pub extern "C" fn hsa_memory_deregister(_ptr: *mut c_void, _size: usize) -> HsaStatus {
    status(runtime().map(|_| ()))
}
