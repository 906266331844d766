//! The embedded front end: the same dispatcher, in-process, for clients that cannot or need not
//! use CUSE (no root). An [`EmbeddedFile`] is an open /dev/kfd: `ioctl` takes the caller's
//! argument bytes and blocks until the reply, exactly as ioctl(2) on the real node.

use crate::client::{Caller, FileId};
use crate::device::{Device, DeviceConfig, DeviceError};
use crate::ioctl::{Request, UserMemory};
use crate::memory::remote;
use crate::reply::{Reply, Responder};
use nix::errno::Errno;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use uapi::{FromBytes, Immutable, IntoBytes};

static NEXT_TAG: AtomicU64 = AtomicU64::new(1);

/// Pointer arguments are read from the memory of a real process (this one, when embedded).
struct ProcessMemory(u32);

impl UserMemory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        remote::read(self.0, addr, buf)
    }
}

/// A device living in this process.
#[derive(Clone)]
pub struct Embedded {
    device: Arc<Device>,
}

impl Embedded {
    pub fn new(config: &DeviceConfig) -> Result<Embedded, DeviceError> {
        Ok(Embedded { device: Device::new(config)? })
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// Opens the device as this process.
    pub fn open(&self) -> EmbeddedFile {
        self.open_as(Caller::current())
    }

    /// Opens the device as another (simulated) client process. Pointers in its requests still
    /// point into this process's memory.
    pub fn open_as(&self, caller: Caller) -> EmbeddedFile {
        let file = self.device.open(caller);
        EmbeddedFile { device: self.device.clone(), file, caller, memory_pid: std::process::id() }
    }
}

/// A parked or finished reply of an asynchronous ioctl.
pub struct PendingIoctl {
    pub tag: u64,
    rx: mpsc::Receiver<Reply>,
    memory_pid: u32,
}

impl PendingIoctl {
    /// The reply, if it has come.
    pub fn try_reply(&self) -> Option<Reply> {
        self.rx.try_recv().ok()
    }

    /// Blocks for the reply and applies it to `arg` like `EmbeddedFile::ioctl`.
    pub fn wait(self, arg: &mut [u8]) -> Result<(), Errno> {
        let reply = self.rx.recv().map_err(|_| Errno::EIO)?;
        apply(reply, arg, self.memory_pid)
    }

    pub fn wait_timeout(&self, d: std::time::Duration) -> Option<Reply> {
        self.rx.recv_timeout(d).ok()
    }
}

/// One open file of the embedded device.
pub struct EmbeddedFile {
    device: Arc<Device>,
    file: FileId,
    caller: Caller,
    memory_pid: u32,
}

impl EmbeddedFile {
    pub fn caller(&self) -> Caller {
        self.caller
    }

    pub fn file_id(&self) -> FileId {
        self.file
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// ioctl(2): `arg` holds the caller's struct (`_IOC_SIZE(cmd)` bytes) and receives the reply.
    pub fn ioctl(&self, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
        self.ioctl_as(self.caller, cmd, arg)
    }

    /// ioctl(2) on this file by another caller (to test the cross-process check).
    pub fn ioctl_as(&self, caller: Caller, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
        self.start_as(caller, cmd, arg).wait(arg)
    }

    /// A typed ioctl: `args` is sent and overwritten with the reply.
    pub fn call<T: FromBytes + IntoBytes + Immutable>(&self, cmd: u32, args: &mut T) -> Result<(), Errno> {
        self.ioctl(cmd, args.as_mut_bytes())
    }

    /// Starts an ioctl without waiting (a parked WAIT_EVENTS, say).
    pub fn start(&self, cmd: u32, arg: &[u8]) -> PendingIoctl {
        self.start_as(self.caller, cmd, arg)
    }

    fn start_as(&self, caller: Caller, cmd: u32, arg: &[u8]) -> PendingIoctl {
        let tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let responder = Responder::new(tag, move |r| {
            let _ = tx.send(r);
        });
        let size = uapi::ioctl::ioc_size(cmd);
        let mut data = arg.to_vec();
        data.resize(size, 0);
        let req = Request { caller, cmd, data: &data, tag };
        self.device.ioctl(self.file, &req, &ProcessMemory(self.memory_pid), responder);
        PendingIoctl { tag, rx, memory_pid: self.memory_pid }
    }

    /// Interrupts a started ioctl (as a signal to the caller would).
    pub fn interrupt(&self, pending: &PendingIoctl) -> bool {
        self.device.interrupt(pending.tag)
    }
}

impl Drop for EmbeddedFile {
    fn drop(&mut self) {
        self.device.release(self.file);
    }
}

/// Copies a reply into the caller's struct and memory; a failed copy is EFAULT, as the kernel's
/// copy_to_user.
fn apply(reply: Reply, arg: &mut [u8], memory_pid: u32) -> Result<(), Errno> {
    let n = reply.data.len().min(arg.len());
    arg[..n].copy_from_slice(&reply.data[..n]);
    for w in &reply.user_writes {
        remote::write(memory_pid, w.addr, &w.data)?;
    }
    match reply.errno() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
