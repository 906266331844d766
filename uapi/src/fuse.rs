//! The parts of `linux/fuse.h` a CUSE server speaks: request and reply headers, CUSE_INIT,
//! OPEN/RELEASE, READ/WRITE, IOCTL with its RETRY iovecs, INTERRUPT and POLL.

use crate::kfd::abi_struct;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

pub const FUSE_KERNEL_VERSION: u32 = 7;
/// CUSE needs 64-bit iovecs in ioctl RETRY replies: protocol 7.16 or later.
pub const FUSE_KERNEL_MINOR_VERSION_MIN_CUSE: u32 = 16;

// enum fuse_opcode (the ones CUSE forwards).
pub const FUSE_OPEN: u32 = 14;
pub const FUSE_READ: u32 = 15;
pub const FUSE_WRITE: u32 = 16;
pub const FUSE_RELEASE: u32 = 18;
pub const FUSE_FLUSH: u32 = 25;
pub const FUSE_INTERRUPT: u32 = 36;
pub const FUSE_IOCTL: u32 = 39;
pub const FUSE_POLL: u32 = 40;
pub const CUSE_INIT: u32 = 4096;

// enum fuse_notify_code
pub const FUSE_NOTIFY_POLL: i32 = 1;

pub const CUSE_UNRESTRICTED_IOCTL: u32 = 1 << 0;
pub const CUSE_INIT_INFO_MAX: usize = 4096;

pub const FOPEN_DIRECT_IO: u32 = 1 << 0;
pub const FOPEN_NONSEEKABLE: u32 = 1 << 2;

pub const FUSE_IOCTL_COMPAT: u32 = 1 << 0;
pub const FUSE_IOCTL_UNRESTRICTED: u32 = 1 << 1;
pub const FUSE_IOCTL_RETRY: u32 = 1 << 2;
pub const FUSE_IOCTL_32BIT: u32 = 1 << 3;
pub const FUSE_IOCTL_DIR: u32 = 1 << 4;
pub const FUSE_IOCTL_COMPAT_X32: u32 = 1 << 5;
pub const FUSE_IOCTL_MAX_IOV: u32 = 256;

pub const FUSE_POLL_SCHEDULE_NOTIFY: u32 = 1 << 0;

abi_struct!(
    /// `struct fuse_in_header`: `pid` is the calling thread's id.
    FuseInHeader = 40 {
        len: u32,
        opcode: u32,
        unique: u64,
        nodeid: u64,
        uid: u32,
        gid: u32,
        pid: u32,
        total_extlen: u16,
        padding: u16,
    }
);
abi_struct!(FuseOutHeader = 16 { len: u32, error: i32, unique: u64 });
abi_struct!(CuseInitIn = 16 { major: u32, minor: u32, unused: u32, flags: u32 });
abi_struct!(CuseInitOut = 72 {
    major: u32,
    minor: u32,
    unused: u32,
    flags: u32,
    max_read: u32,
    max_write: u32,
    dev_major: u32,
    dev_minor: u32,
    spare: [u32; 10],
});
abi_struct!(FuseOpenIn = 8 { flags: u32, open_flags: u32 });
abi_struct!(FuseOpenOut = 16 { fh: u64, open_flags: u32, padding: u32 });
abi_struct!(FuseReleaseIn = 24 { fh: u64, flags: u32, release_flags: u32, lock_owner: u64 });
abi_struct!(FuseReadIn = 40 {
    fh: u64,
    offset: u64,
    size: u32,
    read_flags: u32,
    lock_owner: u64,
    flags: u32,
    padding: u32,
});
abi_struct!(FuseWriteIn = 40 {
    fh: u64,
    offset: u64,
    size: u32,
    write_flags: u32,
    lock_owner: u64,
    flags: u32,
    padding: u32,
});
abi_struct!(FuseWriteOut = 8 { size: u32, padding: u32 });
abi_struct!(FuseInterruptIn = 8 { unique: u64 });
abi_struct!(FuseIoctlIn = 32 { fh: u64, flags: u32, cmd: u32, arg: u64, in_size: u32, out_size: u32 });
abi_struct!(FuseIoctlOut = 16 { result: i32, flags: u32, in_iovs: u32, out_iovs: u32 });
abi_struct!(FuseIoctlIovec = 16 { base: u64, len: u64 });
abi_struct!(FusePollIn = 24 { fh: u64, kh: u64, flags: u32, events: u32 });
abi_struct!(FusePollOut = 8 { revents: u32, padding: u32 });
abi_struct!(FuseNotifyPollWakeupOut = 8 { kh: u64 });
