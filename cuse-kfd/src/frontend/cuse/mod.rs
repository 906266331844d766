//! The CUSE front end: /dev/kfd as a real character device (linux/fuse.h, CUSE protocol;
//! fuser cannot do CUSE, see BRIEF.md fact 4).
//!
//! * [`frame`]: decoding requests and encoding replies, byte-exact;
//! * [`session`]: the protocol logic over the device (INIT, OPEN/RELEASE, ioctl RETRY rounds,
//!   INTERRUPT, parked waits answered later by request id);
//! * [`channel`]: the /dev/cuse file descriptor and its reader threads.

pub mod channel;
pub mod frame;
pub mod session;
