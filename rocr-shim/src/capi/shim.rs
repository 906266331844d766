//! The calls include/cuse_kfd_shim.h declares: the batch signal API of ROCr interface 1.36,
//! soft-kernel objects and dispatches, and debug introspection.

use super::{last_error_ptr, out, runtime, slice, status, HsaStatus};
use crate::agent::Agent;
use crate::kernels::Builtin;
use crate::runtime::Counters;
use crate::signal::{Placement, SignalInfo};
use crate::status::Error;
use std::ffi::{c_char, c_void};

/// The reason behind the last error status a shim call returned on this thread ("" if none).
#[no_mangle]
pub extern "C" fn cuse_kfd_shim_last_error() -> *const c_char {
    last_error_ptr()
}

/// `*counters` receives the debug counters.
///
/// # Safety
/// `counters` is null or valid for writing a `cuse_kfd_shim_counters_t`.
#[no_mangle]
pub unsafe extern "C" fn cuse_kfd_shim_get_counters(counters: *mut Counters) -> HsaStatus {
    // SAFETY: the caller's contract.
    status(runtime().and_then(|rt| unsafe { out(counters, rt.counters(), "counters") }))
}

/// `*info` receives what the runtime knows of `signal` (any handle: it is looked up).
///
/// # Safety
/// `info` is null or valid for writing a `cuse_kfd_shim_signal_info_t`.
#[no_mangle]
pub unsafe extern "C" fn cuse_kfd_shim_signal_get_info(signal: u64, info: *mut SignalInfo) -> HsaStatus {
    // SAFETY: the caller's contract.
    status(runtime().and_then(|rt| unsafe { out(info, rt.signal_info(signal)?, "info") }))
}

/// hsa_amd_signal_batch_create: `count` signals from one arena. `device.handle` 0 asks for host
/// memory; a GPU agent asks for its signal-capable pool, with host memory as the fallback;
/// `*placement` says where they went.
///
/// # Safety
/// `consumers` is null or points to `num_consumers` agents; `signals` is null or valid for
/// writing `count` `hsa_signal_t`s; `batch` is null or valid for writing an
/// `hsa_amd_signal_batch_t`; `placement` is null or valid for writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_signal_batch_create(
    initial_value: i64,
    count: u32,
    num_consumers: u32,
    consumers: *const Agent,
    attributes: u64,
    device: Agent,
    signals: *mut u64,
    batch: *mut u64,
    placement: *mut u32,
) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        // SAFETY: the caller's contract.
        let consumers = unsafe { slice(consumers, num_consumers as usize, "consumers") }?;
        if signals.is_null() || batch.is_null() {
            return Err(Error::invalid_argument("signals or batch is NULL"));
        }
        let device = (device.0 != 0).then_some(device);
        let b = rt.create_batch_raw(count, initial_value, consumers, attributes, device)?;
        // SAFETY: the caller's `signals` array holds `count` elements (the contract above);
        // `b.handles` has exactly `count`, in memory of ours that cannot overlap it.
        unsafe { std::ptr::copy_nonoverlapping(b.handles.as_ptr(), signals, b.handles.len()) };
        // SAFETY: the caller's contract.
        unsafe { out(batch, b.id, "batch") }?;
        if !placement.is_null() {
            // SAFETY: the caller's contract.
            unsafe { out(placement, u32::from(b.placement == Placement::Device), "placement") }?;
        }
        Ok(())
    });
    status(r)
}

#[no_mangle]
pub extern "C" fn hsa_amd_signal_batch_destroy(batch: u64) -> HsaStatus {
    status(runtime().and_then(|rt| rt.destroy_batch_raw(batch)))
}

/// The `kernel_object` of soft kernel `builtin` on GPU `agent`, and its argument size.
///
/// # Safety
/// `kernel_object` is null or valid for writing a `uint64_t`; `kernarg_size` is null or valid
/// for writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn cuse_kfd_shim_soft_kernel(
    agent: Agent,
    builtin: u32,
    kernel_object: *mut u64,
    kernarg_size: *mut u32,
) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        let b = Builtin::from_id(builtin)
            .ok_or_else(|| Error::invalid_argument(format!("{builtin} is not a soft kernel of this device")))?;
        // SAFETY: the caller's contract.
        unsafe { out(kernel_object, rt.kernel_object(agent, b)?, "kernel_object") }?;
        if !kernarg_size.is_null() {
            // SAFETY: the caller's contract.
            unsafe { out(kernarg_size, b.kernarg_size(), "kernarg_size") }?;
        }
        Ok(())
    });
    status(r)
}

/// Dispatches soft kernel `builtin` on `queue` over `grid_size_x` work-items and waits for it
/// (at most `timeout` ns); a queue error comes back as its status.
///
/// # Safety
/// `args` is null or points to `args_size` readable bytes that do not change during the call.
/// (`queue` is looked up, not dereferenced.)
#[no_mangle]
pub unsafe extern "C" fn cuse_kfd_shim_dispatch_sync(
    queue: *mut c_void,
    builtin: u32,
    args: *const c_void,
    args_size: u32,
    grid_size_x: u32,
    workgroup_size_x: u16,
    timeout: u64,
) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        let q = rt.queue(queue as u64)?;
        let b = Builtin::from_id(builtin)
            .ok_or_else(|| Error::invalid_argument(format!("{builtin} is not a soft kernel of this device")))?;
        // SAFETY: the caller's contract.
        let args = unsafe { slice(args.cast::<u8>(), args_size as usize, "args") }?;
        if grid_size_x == 0 {
            return Err(Error::invalid_argument("an empty grid"));
        }
        rt.dispatch_sync(&q, b, args, grid_size_x, workgroup_size_x, timeout)
    });
    status(r)
}
