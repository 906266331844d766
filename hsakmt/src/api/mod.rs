//! The exported `hsaKmt*` functions, with the C signatures of `hsakmt.h` (libhsakmt 5.2.3).
//!
//! Each one checks its pointers, turns C values into the thunk's Rust values, calls the process
//! instance of [`thunk::hsakmt`] and writes the results back. A Rust panic never crosses into C:
//! it is logged and answered `HSAKMT_STATUS_ERROR`. Every call is logged at debug level with its
//! status (`HSAKMT_LOG=debug`). They keep the C names; `export` gives them their symbols.

#![allow(non_snake_case)]

pub mod debug;
pub mod events;
pub mod memory;
pub mod profiling;
pub mod queues;
pub mod system;

use crate::types::HSAKMT_STATUS;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use thunk::hsakmt::{Result, Status, Thunk};

/// Runs one API call: its status code, panics turned into `HSAKMT_STATUS_ERROR`.
fn entry(name: &'static str, f: impl FnOnce() -> Result<()>) -> HSAKMT_STATUS {
    let r = std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        log::error!("{name} panicked");
        Err(Status::Error)
    });
    let code = match r {
        Ok(()) => crate::types::HSAKMT_STATUS_SUCCESS,
        Err(s) => s.code(),
    };
    log::debug!("{name} -> {code}");
    code
}

/// The open instance (`HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED` if none).
fn thunk() -> Result<Arc<Thunk>> {
    thunk::hsakmt::current()
}

/// Node ids from a C array of `n` (libhsakmt's validate_nodeid_array: null or empty is
/// `InvalidParameter`).
///
/// # Safety
/// `nodes` is null or points to `n` u32s.
unsafe fn node_array(nodes: *const u32, n: u64) -> Result<Vec<u32>> {
    let n = usize::try_from(n).map_err(|_| Status::InvalidParameter)?;
    if n == 0 {
        return Err(Status::InvalidParameter);
    }
    // SAFETY: the caller's contract.
    unsafe { crate::ptr::read_array(nodes, n) }.ok_or(Status::InvalidParameter)
}
