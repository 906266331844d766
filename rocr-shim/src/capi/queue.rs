//! Queues: create/destroy/inactivate and the index operations on the amd_queue_t's
//! write_dispatch_id and read_dispatch_id, in every memory order hsa.h declares.

use super::{out, runtime, status, HsaStatus};
use crate::agent::Agent;
use crate::queue::QueueCallback;
use crate::status::Status;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use uapi::queue::{AMD_QUEUE_READ_DISPATCH_ID_OFFSET, AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET};

/// The caller's error callback: a C function, so calling it is the caller's promise.
type ErrorCallback = Option<unsafe extern "C" fn(HsaStatus, *mut c_void, *mut c_void)>;

/// hsa_queue_create: `*queue` receives the new `hsa_queue_t *`. The error callback runs at most
/// once, on the runtime's async-event thread, if the device stops the queue.
///
/// # Safety
/// `queue` is null or valid for writing an `hsa_queue_t *`. `callback`, if given, is a function
/// of that signature that may be called with `data` from another thread until the queue is
/// destroyed (or the runtime shut down).
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
            Box::new(move |s: Status, q: u64| {
                // SAFETY: the caller of hsa_queue_create promised `f` may be called with
                // `data` while the queue lives, which it does when the callback runs.
                unsafe { f(s.0, q as *mut c_void, data as *mut c_void) }
            })
        });
        let q = rt.create_queue_raw(agent, size, queue_type, cb)?;
        // SAFETY: the caller's contract.
        unsafe { out(queue, q.address() as *mut c_void, "queue") }
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
///
/// # Safety
/// `queue` is a live `hsa_queue_t *` of this runtime (the first member of an amd_queue_t), and
/// stays live while the returned reference (of a lifetime `'a` that must not outlive the call
/// into the shim) is used; `offset` is one of the amd_queue_t's dispatch id words.
unsafe fn word<'a>(queue: *const c_void, offset: usize) -> &'a AtomicU64 {
    // SAFETY: by the contract above, a live 64-byte-aligned amd_queue_t whose dispatch ids are
    // 8-byte-aligned words that the device and other threads access only atomically.
    unsafe { AtomicU64::from_ptr(queue.cast::<u8>().add(offset).cast_mut().cast::<u64>()) }
}

const WRITE: usize = AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET;
const READ: usize = AMD_QUEUE_READ_DISPATCH_ID_OFFSET;

macro_rules! index_loads {
    ($($name:ident => $off:expr, $order:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: loads the dispatch id word, in the order its name gives.")]
        ///
        /// # Safety
        /// `queue` is a live `hsa_queue_t *` of this runtime (hsa.h's precondition).
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const c_void) -> u64 {
            // SAFETY: the caller's contract.
            unsafe { word(queue, $off) }.load($order)
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
        #[doc = concat!("`", stringify!($name), "`: stores the write index, in the order its name gives.")]
        ///
        /// # Safety
        /// `queue` is a live `hsa_queue_t *` of this runtime (hsa.h's precondition).
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const c_void, value: u64) {
            // SAFETY: the caller's contract.
            unsafe { word(queue, WRITE) }.store(value, $order);
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
        #[doc = concat!("`", stringify!($name), "`: compares and swaps the write index; returns the value seen.")]
        ///
        /// # Safety
        /// `queue` is a live `hsa_queue_t *` of this runtime (hsa.h's precondition).
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const c_void, expected: u64, value: u64) -> u64 {
            // SAFETY: the caller's contract.
            match unsafe { word(queue, WRITE) }.compare_exchange(expected, value, $ok, $fail) {
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
        #[doc = concat!("`", stringify!($name), "`: adds to the write index; returns the previous value.")]
        ///
        /// # Safety
        /// `queue` is a live `hsa_queue_t *` of this runtime (hsa.h's precondition).
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const c_void, value: u64) -> u64 {
            // SAFETY: the caller's contract.
            unsafe { word(queue, WRITE) }.fetch_add(value, $order)
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
