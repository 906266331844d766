//! cuse-kfd: a software amdkfd.
//!
//! * [`device`]: the device, its client files and processes;
//! * [`ioctl`]: the one ioctl table and its handlers, reached through [`device::Device::ioctl`];
//! * [`process`], [`memory`], [`queue`], [`event`]: the per-process KFD model;
//! * [`engine`]: the soft command processor (AQL packets, soft kernels, signals);
//! * [`topology`]: device profiles and the sysfs-shaped topology tree;
//! * [`sysfs`]: that tree as a read-only FUSE filesystem, to mount over /sys/devices/virtual/kfd/kfd;
//! * [`embedded`]: the in-process front end.

pub mod clock;
#[cfg(feature = "cuse")]
pub mod control;
#[cfg(feature = "cuse")]
pub mod cuse;
pub mod device;
pub mod embedded;
pub mod engine;
pub mod event;
pub mod faults;
pub mod inspect;
pub mod ioctl;
pub mod memory;
pub mod process;
pub mod queue;
#[cfg(feature = "sysfs-fuse")]
pub mod sysfs;
pub mod topology;
pub mod trace;

pub use device::{Caller, Device, DeviceConfig, DeviceStats, FileId};
pub use embedded::{Embedded, EmbeddedFile};
