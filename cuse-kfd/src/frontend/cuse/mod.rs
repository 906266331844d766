//! The CUSE front end: /dev/kfd as a real character device (linux/fuse.h, CUSE protocol),
//! written on libc/nix because fuser (0.18) cannot do CUSE: it answers CUSE_INIT with ENOSYS,
//! has no ioctl RETRY and keeps its wire types private.
//!
//! * [`frame`]: decoding requests and encoding replies, byte-exact;
//! * [`session`]: the protocol logic over the device (INIT, OPEN/RELEASE, ioctl RETRY rounds,
//!   INTERRUPT, parked waits answered later by request id);
//! * [`interrupts`]: which request a FUSE_INTERRUPT is for, bounded per process;
//! * [`channel`]: the /dev/cuse file descriptor and its reader threads.

pub mod channel;
pub mod frame;
pub mod interrupts;
pub mod session;
