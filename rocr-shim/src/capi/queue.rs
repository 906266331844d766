//! Queues: create/destroy/inactivate and the index operations on the amd_queue_t's
//! write_dispatch_id and read_dispatch_id, in every memory order hsa.h declares.

use super::{out, runtime, status, HsaStatus};
use crate::agent::Agent;
use crate::queue::QueueCallback;
use crate::status::Status;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use uapi::queue::{AMD_QUEUE_READ_DISPATCH_ID_OFFSET, AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET};

type ErrorCallback = Option<extern "C" fn(HsaStatus, *mut c_void, *mut c_void)>;

#[no_mangle]
pub unsafe extern "C" fn hsa_queue_create(
    agent: Agent,
    size: u32,
    queue_type: u32,
    callback: ErrorCallback,
    data: *mut c_void,
    private_segment_size: u32,
    group_segment_size: u32,
    queue: *mut *mut c_void,
) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        if queue.is_null() {
            return Err(crate::Error::invalid_argument("queue is NULL"));
        }
        // Soft kernels use no private or group segment: any size (UINT32_MAX: the default) fits.
        log::debug!("queue private segment {private_segment_size}, group segment {group_segment_size}");
        let data = data as usize;
        let cb: Option<QueueCallback> = callback.map(|f| -> QueueCallback {
            Box::new(move |s: Status, q: u64| f(s.0, q as *mut c_void, data as *mut c_void))
        });
        let q = rt.create_queue_raw(agent, size, queue_type, cb)?;
        out(queue, q.address() as *mut c_void, "queue")
    });
    status(r)
}

#[no_mangle]
pub extern "C" fn hsa_queue_destroy(queue: *mut c_void) -> HsaStatus {
    status(runtime().and_then(|rt| rt.destroy_queue_raw(queue as u64)))
}

#[no_mangle]
pub extern "C" fn hsa_queue_inactivate(queue: *mut c_void) -> HsaStatus {
    status(runtime().and_then(|rt| rt.inactivate_queue(queue as u64)))
}

/// A dispatch id word of the caller's queue.
unsafe fn word<'a>(queue: *const c_void, offset: usize) -> &'a AtomicU64 {
    // SAFETY: hsa.h's precondition: `queue` is a live hsa_queue_t of this runtime, the first
    // member of a 64-byte-aligned amd_queue_t whose dispatch ids are 8-byte aligned words.
    unsafe { AtomicU64::from_ptr(queue.cast::<u8>().add(offset).cast_mut().cast::<u64>()) }
}

const WRITE: usize = AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET;
const READ: usize = AMD_QUEUE_READ_DISPATCH_ID_OFFSET;

macro_rules! index_loads {
    ($($name:ident => $off:expr, $order:expr;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const c_void) -> u64 {
            word(queue, $off).load($order)
        }
    )*};
}

index_loads! {
    hsa_queue_load_read_index_relaxed => READ, Ordering::Relaxed;
    hsa_queue_load_read_index_scacquire => READ, Ordering::Acquire;
    hsa_queue_load_read_index_acquire => READ, Ordering::Acquire;
    hsa_queue_load_write_index_relaxed => WRITE, Ordering::Relaxed;
    hsa_queue_load_write_index_scacquire => WRITE, Ordering::Acquire;
    hsa_queue_load_write_index_acquire => WRITE, Ordering::Acquire;
}

macro_rules! write_index_stores {
    ($($name:ident => $order:expr;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const c_void, value: u64) {
            word(queue, WRITE).store(value, $order);
        }
    )*};
}

write_index_stores! {
    hsa_queue_store_write_index_relaxed => Ordering::Relaxed;
    hsa_queue_store_write_index_screlease => Ordering::Release;
    hsa_queue_store_write_index_release => Ordering::Release;
}

macro_rules! read_index_stores {
    ($($name:ident;)*) => {$(
        /// The packet processor owns the read index of a kernel-dispatch queue (ROCr refuses
        /// these stores too): logged and ignored.
        #[no_mangle]
        pub extern "C" fn $name(queue: *const c_void, value: u64) {
            log::warn!(concat!(stringify!($name), "({:p}, {}): the device owns the read index; ignored"), queue, value);
        }
    )*};
}

read_index_stores! {
    hsa_queue_store_read_index_relaxed;
    hsa_queue_store_read_index_screlease;
    hsa_queue_store_read_index_release;
}

macro_rules! write_index_cas {
    ($($name:ident => $ok:expr, $fail:expr;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const c_void, expected: u64, value: u64) -> u64 {
            match word(queue, WRITE).compare_exchange(expected, value, $ok, $fail) {
                Ok(v) | Err(v) => v,
            }
        }
    )*};
}

write_index_cas! {
    hsa_queue_cas_write_index_relaxed => Ordering::Relaxed, Ordering::Relaxed;
    hsa_queue_cas_write_index_scacquire => Ordering::Acquire, Ordering::Acquire;
    hsa_queue_cas_write_index_screlease => Ordering::Release, Ordering::Relaxed;
    hsa_queue_cas_write_index_scacq_screl => Ordering::AcqRel, Ordering::Acquire;
    hsa_queue_cas_write_index_acquire => Ordering::Acquire, Ordering::Acquire;
    hsa_queue_cas_write_index_release => Ordering::Release, Ordering::Relaxed;
    hsa_queue_cas_write_index_acq_rel => Ordering::AcqRel, Ordering::Acquire;
}

macro_rules! write_index_adds {
    ($($name:ident => $order:expr;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const c_void, value: u64) -> u64 {
            word(queue, WRITE).fetch_add(value, $order)
        }
    )*};
}

write_index_adds! {
    hsa_queue_add_write_index_relaxed => Ordering::Relaxed;
    hsa_queue_add_write_index_scacquire => Ordering::Acquire;
    hsa_queue_add_write_index_screlease => Ordering::Release;
    hsa_queue_add_write_index_scacq_screl => Ordering::AcqRel;
    hsa_queue_add_write_index_acquire => Ordering::Acquire;
    hsa_queue_add_write_index_release => Ordering::Release;
    hsa_queue_add_write_index_acq_rel => Ordering::AcqRel;
}
