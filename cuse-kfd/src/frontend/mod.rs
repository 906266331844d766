//! The front ends: the ways a client or an operator reaches the device.
//!
//! * [`cuse`]: /dev/kfd as a real character device (the CUSE protocol);
//! * [`embedded`]: the same dispatcher in-process, for clients without root;
//! * [`topology_fs`]: the topology tree as a read-only FUSE filesystem, to mount over
//!   /sys/devices/virtual/kfd/kfd;
//! * [`control`]: the daemon's control socket (status, stats, trace);
//! * [`inspect`]: the `status` text, what the device holds per process;
//! * [`sandbox`]: the daemon's confinement (directory checks, capabilities, seccomp).

#[cfg(feature = "cuse")]
pub mod control;
#[cfg(feature = "cuse")]
pub mod cuse;
pub mod embedded;
pub mod inspect;
#[cfg(feature = "cli")]
pub mod sandbox;
#[cfg(feature = "sysfs-fuse")]
pub mod topology_fs;
