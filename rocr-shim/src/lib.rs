//! rocr-shim: an HSA runtime over the thunk, for C programs written against hsa.h (the cdylib,
//! soname libhsa-runtime64.so.1) and for Rust tools (this crate's API).
//!
//! It does what ROCr does on top of libhsakmt, for the subset a soft GPU needs: agents,
//! regions and AMD memory pools from the KFD topology; AQL queues whose `hsa_queue_t` heads
//! the amd_queue_t and whose doorbell signal rings the KFD doorbell; signals as amd_signal_t in
//! GPU-visible memory, woken through KFD events; the batch signal API of ROCr interface 1.36;
//! hsa_memory_copy on the device's soft COPY_BYTES kernel; and dispatches of the other soft
//! kernels. What it does not support answers an HSA error status and says why
//! (`cuse_kfd_shim_last_error`, and the log).
//!
//! * [`Runtime`]: the Rust entry point (`Runtime::new(Config::default())`);
//! * [`capi`]: the `hsa_*` C ABI over one reference-counted global runtime, plus the shim's
//!   own calls declared in `include/cuse_kfd_shim.h`.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod agent;
pub mod capi;
pub mod hsa;
pub mod info;
pub mod kernels;
pub mod memory;
mod monitor;
pub mod queue;
pub mod runtime;
pub mod signal;
pub mod status;
pub mod topology;

pub use agent::{Agent, Pool};
pub use info::Info;
pub use kernels::Builtin;
pub use memory::Buffer;
pub use queue::{Queue, QueueCallback, QueueState};
pub use runtime::{Config, Counters, Runtime};
pub use signal::{Condition, Order, Placement, Rmw, Signal, SignalBatch, SignalInfo, WaitEnd, WaitHint};
pub use status::{Error, Result, Status};
