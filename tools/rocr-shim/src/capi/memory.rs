//! Memory: region and pool allocation, hsa_memory_copy on the device's COPY_BYTES kernel.

use super::{fail, out, runtime, status, HsaStatus};
use crate::agent::Pool;
use crate::status::{Error, Status};
use std::ffi::c_void;

#[no_mangle]
pub unsafe extern "C" fn hsa_memory_allocate(region: Pool, size: usize, ptr: *mut *mut c_void) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        if ptr.is_null() {
            return Err(Error::invalid_argument("ptr is NULL"));
        }
        let desc = rt.pool_desc(region).map_err(|e| Error::new(Status::INVALID_REGION, e.reason))?;
        let p = rt.allocate(desc.handle, size as u64)?;
        out(ptr, p as *mut c_void, "ptr")
    });
    status(r)
}

/// hsa_memory_free (NULL is a no-op).
#[no_mangle]
pub extern "C" fn hsa_memory_free(ptr: *mut c_void) -> HsaStatus {
    let r = runtime().and_then(|rt| if ptr.is_null() { Ok(()) } else { rt.free(ptr as u64) });
    status(r)
}

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
        out(ptr, p as *mut c_void, "ptr")
    });
    status(r)
}

#[no_mangle]
pub extern "C" fn hsa_amd_memory_pool_free(ptr: *mut c_void) -> HsaStatus {
    hsa_memory_free(ptr)
}

#[no_mangle]
pub extern "C" fn hsa_memory_copy(dst: *mut c_void, src: *const c_void, size: usize) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        if dst.is_null() || src.is_null() {
            return Err(Error::invalid_argument("hsa_memory_copy: NULL pointer"));
        }
        rt.copy(dst as u64, src as u64, size as u64)
    });
    status(r)
}

/// Host memory the runtime did not allocate cannot be made visible to this device (the shim
/// maps no user pages): an error, not a pretend success.
#[no_mangle]
pub extern "C" fn hsa_memory_register(ptr: *mut c_void, size: usize) -> HsaStatus {
    fail(&Error::new(
        Status::ERROR,
        format!("hsa_memory_register({ptr:p}, {size}): registering host memory is not supported; allocate from a region or pool instead"),
    ))
}

#[no_mangle]
pub extern "C" fn hsa_memory_deregister(ptr: *mut c_void, size: usize) -> HsaStatus {
    fail(&Error::new(
        Status::ERROR,
        format!("hsa_memory_deregister({ptr:p}, {size}): registering host memory is not supported"),
    ))
}
