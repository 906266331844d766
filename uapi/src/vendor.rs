//! cuse-kfd's own ioctls, outside amdkfd's range (amdkfd answers them ENOTTY), for clients that
//! know they talk to cuse-kfd: the thunk and the LD_PRELOAD mmap redirect.

use crate::ioctl::{ioc, AMDKFD_IOCTL_BASE, IOC_READ};
use crate::kfd::abi_struct;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Bytes of the NUL-terminated runtime directory path.
pub const CUSE_KFD_PATH_MAX: usize = 256;
/// Interface version of [`RuntimeInfo`].
pub const CUSE_KFD_RUNTIME_INFO_VERSION: u32 = 1;

abi_struct!(
    /// Where the device keeps its backing files: a client maps KFD mmap offset `off` of its
    /// process as the file `<runtime_dir>/<pid>/{kfd,render}/<off as 16 hex digits>` (see
    /// cuse_kfd::memory::backing), and finds the sysfs-shaped topology under
    /// `<runtime_dir>/topology`.
    RuntimeInfo = 264 { version: u32, pid: u32, runtime_dir: [u64; 32] }
);

/// `_IOR('K', 0x80, RuntimeInfo)`: fills [`RuntimeInfo`] for the calling process.
pub const CUSE_KFD_IOC_GET_RUNTIME_INFO: u32 =
    ioc(IOC_READ, AMDKFD_IOCTL_BASE, 0x80, core::mem::size_of::<RuntimeInfo>());
/// `_IO('K', 0x81)`: wakes the command processor now (the cheap wake path after a doorbell
/// store; optional, doorbells are polled anyway).
pub const CUSE_KFD_IOC_KICK: u32 = ioc(0, AMDKFD_IOCTL_BASE, 0x81, 0);
