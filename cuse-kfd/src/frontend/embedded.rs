//! The embedded front end: the same dispatcher, in-process, for clients that cannot or need not
//! use CUSE (no root). An [`EmbeddedFile`] is an open /dev/kfd: `ioctl` takes the caller's
//! argument bytes and blocks until the reply, exactly as ioctl(2) on the real node.
//!
//! After fork(2) the child has a copy of the device but none of its threads (engine, timer,
//! owner watch), and locks other threads held stay held. So, as amdkfd does with a KFD fd
//! inherited by a child, a file used in a process other than the one that opened it answers
//! EBADF without touching the device, closing it there does nothing, and dropping the last
//! handle on the device there leaks the copy instead of joining threads that do not exist. A
//! child that wants the device makes its own [`Embedded`].

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
pub struct Embedded {
    device: Arc<Device>,
    /// The process that made the device: only there may its last handle drop.
    creator: u32,
}

impl Clone for Embedded {
    fn clone(&self) -> Embedded {
        Embedded { device: self.device.clone(), creator: self.creator }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        leak_in_child(&self.device, self.creator);
    }
}

/// In a forked child, a handle on the parent's device must never be the last one dropped
/// (dropping the device joins threads the child does not have): leak one reference.
fn leak_in_child(device: &Arc<Device>, creator: u32) {
    if std::process::id() != creator {
        std::mem::forget(Arc::clone(device));
    }
}

impl Embedded {
    pub fn new(config: &DeviceConfig) -> Result<Embedded, DeviceError> {
        Ok(Embedded { device: Device::new(config)?, creator: std::process::id() })
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// Opens the device as this process. ENODEV in a forked child of the process that made
    /// the device (its threads are not there): the child makes its own [`Embedded`].
    pub fn open(&self) -> Result<EmbeddedFile, Errno> {
        self.open_as(Caller::current())
    }

    /// Opens the device as another (simulated) client process. Pointers in its requests still
    /// point into this process's memory, and its context is bound to this process's life.
    pub fn open_as(&self, caller: Caller) -> Result<EmbeddedFile, Errno> {
        self.open_bound(caller, std::process::id())
    }

    /// Opens the device as the real process `caller.pid` (a test's child, say): its exit or
    /// exec ends the context and USERPTR memory is its own. This process makes the requests on
    /// its behalf, so pointers in them still point into this process's memory.
    pub fn open_process(&self, caller: Caller) -> Result<EmbeddedFile, Errno> {
        self.open_bound(caller, caller.pid)
    }

    fn open_bound(&self, caller: Caller, owner_pid: u32) -> Result<EmbeddedFile, Errno> {
        let me = std::process::id();
        if me != self.creator {
            return Err(Errno::ENODEV);
        }
        let file = self.device.open_bound(caller, owner_pid)?;
        Ok(EmbeddedFile { device: self.device.clone(), file, caller, memory_pid: me, creator: self.creator })
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
    creator: u32,
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
        if std::process::id() != self.creator {
            // An inherited file in a forked child (amdkfd: "Using KFD FD in child process not
            // allowed"): answered here, the device's threads and locks are the parent's.
            let _ = tx.send(Reply::error(Errno::EBADF));
            return PendingIoctl { tag, rx, memory_pid: self.memory_pid };
        }
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
        std::process::id() == self.creator && self.device.interrupt(pending.tag)
    }
}

impl Drop for EmbeddedFile {
    fn drop(&mut self) {
        // In a forked child the file is the parent's: closing it there changes nothing.
        if std::process::id() == self.creator {
            self.device.release(self.file);
        }
        leak_in_child(&self.device, self.creator);
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
