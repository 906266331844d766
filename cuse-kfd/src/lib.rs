//! cuse-kfd: a software amdkfd.
//!
//! * [`device`]: the device, its client files and processes ([`client`]: who calls, on which file);
//! * [`reply`]: the answer owed to every request, sent exactly once;
//! * [`ioctl`]: the one ioctl table and its handlers, reached through [`device::Device::ioctl`];
//! * [`owner`]: the client process a context is bound to (pidfd, its memory, its start time);
//! * [`process`], [`memory`], [`queue`], [`event`]: the per-process KFD model;
//! * [`quota`]: what each process and uid may hold, and what the device holds in all;
//! * [`engine`]: the soft command processor (AQL packets, soft kernels, signals);
//! * [`topology`]: device profiles and the sysfs-shaped topology tree;
//! * [`frontend`]: the ways in: CUSE, embedded, the topology filesystem, the control socket.

pub mod attach;
pub mod client;
pub mod clock;
pub mod device;
pub mod engine;
pub mod event;
pub mod faults;
pub mod fork;
pub mod frontend;
pub mod ioctl;
pub mod memory;
pub mod owner;
pub mod peer;
pub mod process;
pub mod queue;
pub mod quota;
pub mod reply;
pub mod topology;
pub mod trace;

pub use client::{Caller, FileId};
pub use device::{Device, DeviceConfig, DeviceStats};
pub use frontend::embedded::{Embedded, EmbeddedFile};
