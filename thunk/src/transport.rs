//! How ioctl bytes reach the device.

use cuse_kfd::{DeviceConfig, Embedded, EmbeddedFile};
use nix::errno::Errno;
use std::path::{Path, PathBuf};

/// A channel for ioctl(2) on a KFD device, plus where its backing files live.
pub trait Transport: Send + Sync {
    /// ioctl(2): `arg` holds `_IOC_SIZE(cmd)` bytes and receives the reply.
    ///
    /// # Safety
    ///
    /// ioctl(2)'s contract, whichever process serves the device: every pointer in `arg` is valid
    /// for what the request reads and writes through it, for as long as the request lasts; every
    /// range the request registers (a USERPTR allocation's CPU address) is valid for the
    /// device's reads and writes for as long as the registration lasts; and no Rust reference
    /// aliases memory the device writes. See `cuse_kfd::EmbeddedFile::ioctl`.
    unsafe fn ioctl(&self, cmd: u32, arg: &mut [u8]) -> Result<(), Errno>;
    /// The device's runtime directory (backing files, see cuse_kfd::memory::backing).
    fn runtime_dir(&self) -> &Path;
    /// The pid the device knows this client by.
    fn pid(&self) -> u32;
    /// Tells the command processor a doorbell was rung (optional fast path).
    fn kick(&self) {}
    /// For callers that need the concrete transport (benchmarks, tests).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The device inside this process.
pub struct EmbeddedTransport {
    // Field order matters: the file closes before the device goes.
    file: EmbeddedFile,
    embedded: Embedded,
    runtime_dir: PathBuf,
}

impl EmbeddedTransport {
    pub fn new(config: &DeviceConfig) -> Result<EmbeddedTransport, cuse_kfd::device::DeviceError> {
        let embedded = Embedded::new(config)?;
        let file = embedded.open().map_err(cuse_kfd::device::DeviceError::Open)?;
        Ok(EmbeddedTransport { file, runtime_dir: embedded.device().backing().root().to_owned(), embedded })
    }

    /// Another client of `embedded`'s device, known to it as `caller` (tests and benchmarks
    /// simulate several processes in one; their memory is this process's).
    pub fn open_as(embedded: &Embedded, caller: cuse_kfd::Caller) -> Result<EmbeddedTransport, Errno> {
        let file = embedded.open_as(caller)?;
        let runtime_dir = embedded.device().backing().root().to_owned();
        Ok(EmbeddedTransport { file, runtime_dir, embedded: embedded.clone() })
    }

    pub fn embedded(&self) -> &Embedded {
        &self.embedded
    }

    pub fn file(&self) -> &EmbeddedFile {
        &self.file
    }
}

impl Transport for EmbeddedTransport {
    unsafe fn ioctl(&self, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: the same contract, this method's.
        unsafe { self.file.ioctl(cmd, arg) }
    }

    fn runtime_dir(&self) -> &Path {
        &self.runtime_dir
    }

    fn pid(&self) -> u32 {
        self.file.caller().pid
    }

    fn kick(&self) {
        self.embedded.device().kick();
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
