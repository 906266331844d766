//! The kernel and runtime ABI that cuse-kfd speaks, as `#[repr(C)]` types and constants.
//!
//! * [`kfd`]: `linux/kfd_ioctl.h` at interface version 1.18 (argument structs, flags, limits,
//!   the mmap offset encoding);
//! * [`ioctl`]: every `AMDKFD_IOC_*` request number, built with the kernel's `_IOC` formula;
//! * [`aql`]: AQL packet layouts and header bits (`hsa.h`, `hsa_ext_amd.h`);
//! * [`queue`]: `hsa_queue_t` and `amd_queue_t` (`amd_hsa_queue.h`);
//! * [`signal`]: `amd_signal_t` (`amd_hsa_signal.h`);
//! * [`soft`]: the soft code-object format of cuse-kfd's built-in kernels;
//! * [`fuse`]: the CUSE subset of `linux/fuse.h`;
//! * [`vendor`]: cuse-kfd's own ioctls (runtime directory, engine kick).
//!
//! No logic lives here. Every struct derives zerocopy's traits so that callers parse wire bytes
//! without `unsafe`, and carries a compile-time size assertion; `tests/abi.rs` compares sizes,
//! field offsets and request numbers with the system's C headers.
#![no_std]
#![forbid(unsafe_code)]

pub mod aql;
pub mod fuse;
pub mod ioctl;
pub mod kfd;
pub mod queue;
pub mod signal;
pub mod soft;
pub mod vendor;

pub use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};
