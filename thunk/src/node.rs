//! The device node transport: ioctl(2) on /dev/kfd (or any cuse-kfd node).

use crate::transport::Transport;
use nix::errno::Errno;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use uapi::vendor::*;
use uapi::IntoBytes;

/// An open cuse-kfd device node.
pub struct NodeTransport {
    file: File,
    runtime_dir: PathBuf,
    pid: u32,
}

/// ioctl(2) on the node.
///
/// # Safety
///
/// As for [`Transport::ioctl`]: the pointers inside `arg` are valid for the request.
unsafe fn raw_ioctl(file: &File, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
    assert!(arg.len() >= uapi::ioctl::ioc_size(cmd), "argument buffer smaller than the ioctl's size");
    // SAFETY: `arg` is a live, writable buffer of at least `_IOC_SIZE(cmd)` bytes, which is
    // all the kernel (and the CUSE daemon behind it) reads or writes at that address; pointers
    // inside the struct are valid by this function's contract.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), cmd as libc::c_ulong, arg.as_mut_ptr()) };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

impl NodeTransport {
    /// Opens `path` and asks the device where its backing files live.
    pub fn open(path: &Path) -> Result<NodeTransport, Errno> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        let mut info = RuntimeInfo::default();
        // SAFETY: the runtime-info argument holds no pointer.
        unsafe { raw_ioctl(&file, CUSE_KFD_IOC_GET_RUNTIME_INFO, info.as_mut_bytes()) }.inspect_err(|e| {
            log::warn!("{} does not answer cuse-kfd's runtime-info ioctl ({e}): not a cuse-kfd device", path.display());
        })?;
        let bytes = info.runtime_dir.as_bytes();
        let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
        let runtime_dir = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes[..end]));
        Ok(NodeTransport { file, runtime_dir, pid: info.pid })
    }
}

impl Transport for NodeTransport {
    unsafe fn ioctl(&self, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: this method's contract: the daemon reaches the pointers in `arg` in this
        // process, through the kernel.
        unsafe { raw_ioctl(&self.file, cmd, arg) }
    }

    fn runtime_dir(&self) -> &Path {
        &self.runtime_dir
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn kick(&self) {
        // SAFETY: KICK has no argument.
        let _ = unsafe { raw_ioctl(&self.file, CUSE_KFD_IOC_KICK, &mut []) };
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
