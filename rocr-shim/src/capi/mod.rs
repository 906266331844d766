//! The C ABI: hsa.h / hsa_ext_amd.h functions and the shim's own (include/cuse_kfd_shim.h)
//! over one global runtime that hsa_init and hsa_shut_down reference-count.
//!
//! Handles cross the ABI as their C representation: `hsa_agent_t`, `hsa_signal_t`,
//! `hsa_region_t`, ... are structs of one `uint64_t`, passed like a `u64`; `hsa_queue_t *` is
//! an address.
//!
//! Safety: each `unsafe` function states in its `# Safety` section what the C caller must
//! guarantee, which is what hsa.h makes its precondition: a signal or queue argument is a live
//! object of this runtime, pointers are null or valid for what the function reads or writes
//! (the type an attribute names, the number of elements a count gives) for the duration of the
//! call. Every access to the caller's memory goes through [`out`], [`out_info`] and [`slice`]
//! (here) and the signal and queue views of `signal.rs` and `queue.rs`. The shim checks what it
//! can (null pointers, unknown agents, pools, queues and signals where a status can be
//! returned) and reports the rest in the log.

mod memory;
mod queue;
mod shim;
mod signal;
mod system;

use crate::info::Info;
use crate::runtime::{Config, Runtime};
use crate::status::{Error, Result, Status};
use parking_lot::RwLock;
use std::cell::RefCell;
use std::ffi::{c_void, CString};

/// `hsa_status_t`.
pub type HsaStatus = u32;

struct Global {
    rt: Runtime,
    refs: u32,
}

static GLOBAL: RwLock<Option<Global>> = RwLock::new(None);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// The runtime, if hsa_init has been called more often than hsa_shut_down.
pub(crate) fn runtime() -> Result<Runtime> {
    GLOBAL.read().as_ref().map(|g| g.rt.clone()).ok_or_else(|| {
        Error::new(Status::NOT_INITIALIZED, "hsa_init has not been called (or hsa_shut_down has released the runtime)")
    })
}

/// Runs `f` on the runtime without taking a reference (the hot path of signal operations).
pub(crate) fn with_runtime<T>(f: impl FnOnce(&Runtime) -> T) -> Option<T> {
    GLOBAL.read().as_ref().map(|g| f(&g.rt))
}

fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
}

/// A result as a status; an error's reason becomes the thread's last error and a debug log.
pub(crate) fn status(r: Result<()>) -> HsaStatus {
    match r {
        Ok(()) => Status::SUCCESS.0,
        Err(e) => fail(&e),
    }
}

pub(crate) fn fail(e: &Error) -> HsaStatus {
    log::debug!("{e}");
    set_last_error(&e.to_string());
    e.status.0
}

/// The last error reason of this thread (`cuse_kfd_shim_last_error`).
pub(crate) fn last_error_ptr() -> *const std::ffi::c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

fn null_arg(what: &str) -> Error {
    Error::invalid_argument(format!("{what} is NULL"))
}

/// Writes `v` to the caller's `ptr`; INVALID_ARGUMENT naming `what` for a null `ptr`.
///
/// # Safety
/// `ptr` is null or valid for writing a `T` (no alignment needed).
pub(crate) unsafe fn out<T>(ptr: *mut T, v: T, what: &str) -> Result<()> {
    if ptr.is_null() {
        return Err(null_arg(what));
    }
    // SAFETY: non-null, and writable for a `T` by the caller's contract; unaligned writes need
    // no alignment.
    unsafe { ptr.write_unaligned(v) };
    Ok(())
}

/// Writes an info answer to the caller's `value` buffer.
///
/// # Safety
/// `value` is null or valid for writing the type hsa.h gives the attribute asked for (the
/// answer's bytes are exactly that type's size).
pub(crate) unsafe fn out_info(value: *mut c_void, info: Result<Info>) -> HsaStatus {
    let info = match info {
        Ok(i) => i,
        Err(e) => return fail(&e),
    };
    if value.is_null() {
        return fail(&null_arg("value"));
    }
    let bytes = info.to_bytes();
    // SAFETY: the caller's buffer holds the type hsa.h gives this attribute, whose size is
    // `bytes.len()`; the regions cannot overlap (ours is a fresh Vec).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), value.cast::<u8>(), bytes.len()) };
    Status::SUCCESS.0
}

/// The caller's array of `n` elements (empty for n == 0, whatever the pointer);
/// INVALID_ARGUMENT naming `what` for a null `ptr` with `n > 0`.
///
/// # Safety
/// `ptr` is null or points to `n` initialized, aligned `T`s that nobody writes while the
/// returned slice (of the caller's choosing lifetime `'a`, which must not outlive the call
/// into the shim) is in use.
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, n: usize, what: &str) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(null_arg(what));
    }
    // SAFETY: non-null, and `n` valid elements that stay unchanged by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// hsa_init: the first call opens the device (`Config::from_env`), later ones count.
#[no_mangle]
pub extern "C" fn hsa_init() -> HsaStatus {
    let mut logger = env_logger::Builder::new();
    logger.parse_filters(&thunk::secure_env::var("RUST_LOG").unwrap_or_else(|| "warn".into()));
    let _ = logger.try_init();
    let mut g = GLOBAL.write();
    if let Some(g) = g.as_mut() {
        return match g.refs.checked_add(1) {
            Some(r) => {
                g.refs = r;
                Status::SUCCESS.0
            }
            None => {
                fail(&Error::new(Status::REFCOUNT_OVERFLOW, "hsa_init called 2^32 - 1 times without hsa_shut_down"))
            }
        };
    }
    match Runtime::new(Config::from_env()) {
        Ok(rt) => {
            *g = Some(Global { rt, refs: 1 });
            Status::SUCCESS.0
        }
        Err(e) => fail(&Error::new(Status::OUT_OF_RESOURCES, format!("hsa_init: {e}"))),
    }
}

/// hsa_shut_down: the last call releases the runtime and everything it made.
#[no_mangle]
pub extern "C" fn hsa_shut_down() -> HsaStatus {
    let released = {
        let mut g = GLOBAL.write();
        match g.as_mut() {
            None => return fail(&Error::new(Status::NOT_INITIALIZED, "hsa_shut_down without hsa_init")),
            Some(gl) if gl.refs > 1 => {
                gl.refs -= 1;
                None
            }
            Some(_) => g.take(),
        }
    };
    if let Some(g) = released {
        signal::forget_groups();
        // Dropped outside the lock: teardown destroys queues and joins the async thread.
        drop(g);
    }
    Status::SUCCESS.0
}

/// hsa_status_string: `*status_string` receives a static NUL-terminated text.
///
/// # Safety
/// `status_string` is null or valid for writing a `const char *`.
#[no_mangle]
pub unsafe extern "C" fn hsa_status_string(code: HsaStatus, status_string: *mut *const std::ffi::c_char) -> HsaStatus {
    let r = match Status(code).text() {
        // SAFETY: the caller's contract.
        Some(t) => unsafe { out(status_string, t.as_ptr(), "status_string") },
        None => Err(Error::invalid_argument(format!("{code:#x} is not an hsa_status_t"))),
    };
    status(r)
}
