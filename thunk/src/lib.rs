//! The libhsakmt role: the client side of the KFD ioctl ABI.
//!
//! This is the thunk's lower layer: a [`Kfd`] handle that speaks only ioctl bytes over a
//! [`transport::Transport`], GPU memory mapped into the process at its GPU virtual address
//! ([`memory::GpuMemory`], shared virtual memory as on a real GPU), AQL queues with a producer
//! ([`queue::AqlQueue`]) and signals in GPU memory ([`signal`]). The hsaKmt* API and the C ABI
//! are built on it.

pub mod hsakmt;
pub mod kfd;
pub mod memory;
pub mod node;
pub mod pm4;
pub mod queue;
pub mod sdma;
pub mod secure_env;
pub mod signal;
pub mod stats;
pub mod transport;
mod vm;

pub use kfd::Kfd;
pub use nix::errno::Errno;
