//! libhsakmt.so.1: the hsaKmt C ABI of libhsakmt 5.2.3 (`hsakmt.h`) over the thunk.
//!
//! The library exports exactly the 67 `hsaKmt*` functions of Debian's libhsakmt 5.2.3 (the 42
//! ROCr 5.2.3 imports among them), versioned `HSAKMT_1`, under the soname `libhsakmt.so.1` (see
//! `build.rs` and `hsakmt.ver`), so that an unmodified `libhsa-runtime64.so.1`, or any other
//! client of libhsakmt, loads it through `LD_LIBRARY_PATH`. Each function is a thin
//! layer over [`thunk::hsakmt`]: it checks the caller's pointers (`ptr`), converts the packed C
//! structs ([`types`]) and returns the `HSAKMT_STATUS` the thunk decided.
//!
//! The transport is chosen at `hsaKmtOpenKFD`: `CUSE_KFD_EMBEDDED=1` runs the device inside the
//! process; otherwise the cuse-kfd node `CUSE_KFD_DEVICE` (default /dev/kfd) is opened.
//! `HSAKMT_LOG=debug` logs every call and its status to stderr.
//!
//! Cargo builds `target/<profile>/libhsakmt.so`; the loader looks for `libhsakmt.so.1`.
//! `cuse-kfd run` stages it under that name (the `cuse-kfd-run` package's `stage` module), and
//! `cuse-kfd run --print-library-path` prints the directory to put in `LD_LIBRARY_PATH`.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod api;
mod export;
mod ptr;
pub mod types;

/// `hsakmt.ver`, the version script the library is linked with (`build.rs`): the `HSAKMT_1`
/// names it exports, for tests that check the built library against it.
pub const VERSION_SCRIPT: &str = include_str!("../hsakmt.ver");
