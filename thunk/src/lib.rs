//! The libhsakmt role (hsaKmt* in Rust and as libhsakmt.so.1).
//!
//! Not built yet: the thunk is the subject of its own issue and speaks to the device only
//! through ioctl bytes. Until then this crate holds nothing; the device is driven directly through
//! `cuse_kfd::embedded`.
