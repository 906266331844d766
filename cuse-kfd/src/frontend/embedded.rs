//! The embedded front end: the same dispatcher, in-process, for clients that cannot or need not
//! use CUSE (no root). An [`EmbeddedFile`] is an open /dev/kfd: `ioctl` takes the caller's
//! argument bytes and blocks until the reply, exactly as ioctl(2) on the real node.
//!
//! The device reads and writes through the pointers inside those bytes in this very process
//! (process_vm_readv/writev on our own pid), and through the USERPTR ranges they register in
//! the memory of the context's owner, which is this process too for [`Embedded::open`] and
//! [`Embedded::open_as`]. So the calls that hand it bytes are `unsafe`, with ioctl(2)'s own
//! contract: see [`EmbeddedFile::ioctl`]. Typed, safe wrappers that build their pointers from
//! references they own live in the thunk.
//!
//! After fork(2) the child has a copy of the device but none of its threads (engine, timer,
//! owner watch), and locks other threads held stay held. So, as amdkfd does with a KFD fd
//! inherited by a child, a handle made before a fork (an earlier [`crate::fork::epoch`]) is the
//! parent's: a file used there answers EBADF without touching the device, closing it does
//! nothing, and dropping the last handle on the device leaks the copy instead of joining threads
//! that do not exist. A child that wants the device makes its own [`Embedded`]; crate::fork
//! keeps the parent's devices out of the state that one inherits (parking_lot's global table).

use crate::client::{Caller, FileId};
use crate::device::{Device, DeviceConfig, DeviceError};
use crate::ioctl::{Request, UserMemory};
use crate::memory::remote;
use crate::reply::{Reply, Responder};
use nix::errno::Errno;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};
use uapi::{FromBytes, Immutable, IntoBytes};

static NEXT_TAG: AtomicU64 = AtomicU64::new(1);

/// Pointer arguments are read from the memory of a real process (this one, when embedded).
/// Made only by [`EmbeddedFile::start_as`], for the length of one `Device::ioctl` call.
struct ProcessMemory(u32);

impl UserMemory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: only read while `start_as` runs the request, whose contract makes the caller's
        // argument pointers valid for the device's reads.
        unsafe { remote::read(self.0, addr, buf) }
    }
}

/// A device living in this process.
#[derive(Clone)]
pub struct Embedded {
    device: OwnerRef,
}

/// Whether handles of fork epoch `epoch` belong to this process (not to a process it was forked
/// from).
fn ours(epoch: u64) -> bool {
    crate::fork::epoch() == epoch
}

/// An owner's reference to the device (an [`Embedded`] handle's or an [`EmbeddedFile`]'s),
/// given back through [`Device::let_go`]. In a forked child, a handle on the parent's device
/// must never be the last one dropped (dropping the device joins threads the child does not
/// have): the reference is leaked there.
struct OwnerRef {
    /// Always there but while dropping.
    device: Option<Arc<Device>>,
    /// The fork epoch of the process that made the device: only there may its last handle drop.
    epoch: u64,
}

impl OwnerRef {
    fn get(&self) -> &Arc<Device> {
        self.device.as_ref().expect("taken only when dropped")
    }
}

impl Clone for OwnerRef {
    fn clone(&self) -> OwnerRef {
        OwnerRef { device: self.device.clone(), epoch: self.epoch }
    }
}

impl Drop for OwnerRef {
    fn drop(&mut self) {
        let Some(device) = self.device.take() else { return };
        if ours(self.epoch) {
            Device::let_go(device);
        } else {
            std::mem::forget(device);
        }
    }
}

impl Embedded {
    pub fn new(config: &DeviceConfig) -> Result<Embedded, DeviceError> {
        crate::fork::install();
        let epoch = crate::fork::epoch();
        Ok(Embedded { device: OwnerRef { device: Some(Device::new(config)?), epoch } })
    }

    pub fn device(&self) -> &Arc<Device> {
        self.device.get()
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
        if !ours(self.device.epoch) {
            return Err(Errno::ENODEV);
        }
        let file = self.device().open_bound(caller, owner_pid)?;
        let memory_pid = std::process::id();
        Ok(EmbeddedFile { device: self.device.clone(), file, caller, memory_pid })
    }
}

/// Where the one reply of a request lands, and the thread to wake when it does.
///
/// A one-shot slot rather than a channel: the reply is handed over with one unpark of the
/// waiting thread (a futex wake only if it sleeps), and a request allocates nothing for it
/// beyond this slot (a std channel allocates its queue's block, ~2 KiB zeroed, on the first
/// send). The waiter's wake is on the critical path of every parked WAIT_EVENTS.
///
/// Its lock is std's and held for a few stores only: no thread ever sleeps in parking_lot's
/// table for it (see crate::fork).
#[derive(Default)]
struct ReplySlot {
    state: Mutex<SlotState>,
}

impl ReplySlot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Default)]
struct SlotState {
    reply: Option<Reply>,
    /// The responder went without answering (it never does: see `Responder`'s Drop).
    closed: bool,
    /// The thread asleep in `PendingIoctl::wait`, to unpark.
    sleeper: Option<Thread>,
}

/// The responder's end: answers once; dropped unanswered, it closes the slot.
struct ReplySender(Option<Arc<ReplySlot>>);

impl ReplySender {
    fn send(mut self, reply: Reply) {
        self.finish(Some(reply));
    }

    fn finish(&mut self, reply: Option<Reply>) {
        let Some(slot) = self.0.take() else { return };
        let sleeper = {
            let mut st = slot.lock();
            match reply {
                Some(r) => st.reply = Some(r),
                None => st.closed = true,
            }
            st.sleeper.take()
        };
        // Unparked after the lock is dropped, so the woken thread never blocks on it.
        if let Some(t) = sleeper {
            t.unpark();
        }
    }
}

impl Drop for ReplySender {
    fn drop(&mut self) {
        self.finish(None);
    }
}

/// A parked or finished reply of an asynchronous ioctl.
pub struct PendingIoctl {
    pub tag: u64,
    slot: Arc<ReplySlot>,
    memory_pid: u32,
}

impl PendingIoctl {
    /// The reply, if it has come.
    pub fn try_reply(&self) -> Option<Reply> {
        self.slot.lock().reply.take()
    }

    /// The reply, sleeping until it comes or `deadline` passes; None if the responder went
    /// unanswered or the deadline passed.
    fn take(&self, deadline: Option<Instant>) -> Option<Reply> {
        loop {
            {
                let mut st = self.slot.lock();
                if let Some(r) = st.reply.take() {
                    return Some(r);
                }
                if st.closed {
                    return None;
                }
                st.sleeper = Some(std::thread::current());
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        let mut st = self.slot.lock();
                        st.sleeper = None;
                        return st.reply.take();
                    }
                    std::thread::park_timeout(d - now);
                }
            }
        }
    }

    /// Blocks for the reply and applies it to `arg` like `EmbeddedFile::ioctl`.
    pub fn wait(self, arg: &mut [u8]) -> Result<(), Errno> {
        let reply = self.take(None).ok_or(Errno::EIO)?;
        // SAFETY: the reply of the request `EmbeddedFile::start` began, whose contract keeps
        // its pointers valid for the device's writes until this wait applies them.
        unsafe { apply(reply, arg, self.memory_pid) }
    }

    pub fn wait_timeout(&self, d: Duration) -> Option<Reply> {
        self.take(Some(Instant::now() + d))
    }
}

/// One open file of the embedded device.
pub struct EmbeddedFile {
    device: OwnerRef,
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
        self.device.get()
    }

    /// ioctl(2): `arg` holds the caller's struct (`_IOC_SIZE(cmd)` bytes) and receives the reply.
    ///
    /// # Safety
    ///
    /// Every pointer in `arg` is valid for what the request reads and writes through it (the
    /// amdkfd ABI of `cmd` says which), for as long as the request lasts; every range the request
    /// registers (a USERPTR allocation's CPU address) is valid for the device's reads and writes
    /// for as long as the registration lasts (until the buffer is freed or the context ends: its
    /// last file closes or its owner exits); and no Rust reference aliases memory the device
    /// writes. The USERPTR ranges of a file opened with [`Embedded::open_process`] are in that
    /// other process's memory: there they carry no requirement.
    pub unsafe fn ioctl(&self, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: this function's contract.
        unsafe { self.ioctl_as(self.caller, cmd, arg) }
    }

    /// ioctl(2) on this file by another caller (to test the cross-process check).
    ///
    /// # Safety
    ///
    /// As for [`EmbeddedFile::ioctl`]: the pointers are this process's, whoever `caller` is, and
    /// so are the USERPTR ranges of the file's context unless it was opened with
    /// [`Embedded::open_process`].
    pub unsafe fn ioctl_as(&self, caller: Caller, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: this function's contract; `wait` applies the reply before the pointers' memory
        // can go.
        unsafe { self.start_as(caller, cmd, arg) }.wait(arg)
    }

    /// A typed ioctl: `args` is sent and overwritten with the reply.
    ///
    /// # Safety
    ///
    /// As for [`EmbeddedFile::ioctl`], for the pointers inside `args`.
    pub unsafe fn call<T: FromBytes + IntoBytes + Immutable>(&self, cmd: u32, args: &mut T) -> Result<(), Errno> {
        // SAFETY: this function's contract.
        unsafe { self.ioctl(cmd, args.as_mut_bytes()) }
    }

    /// Starts an ioctl without waiting (a parked WAIT_EVENTS, say).
    ///
    /// # Safety
    ///
    /// As for [`EmbeddedFile::ioctl`], where the request lasts until [`PendingIoctl::wait`]
    /// returns or the [`PendingIoctl`] is dropped (a reply taken with `try_reply` or
    /// `wait_timeout` is the caller's to apply).
    pub unsafe fn start(&self, cmd: u32, arg: &[u8]) -> PendingIoctl {
        // SAFETY: this function's contract.
        unsafe { self.start_as(self.caller, cmd, arg) }
    }

    /// # Safety
    ///
    /// As for [`EmbeddedFile::start`].
    unsafe fn start_as(&self, caller: Caller, cmd: u32, arg: &[u8]) -> PendingIoctl {
        let tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(ReplySlot::default());
        let tx = ReplySender(Some(slot.clone()));
        if !ours(self.device.epoch) {
            // An inherited file in a forked child (amdkfd: "Using KFD FD in child process not
            // allowed"): answered here, the device's threads and locks are the parent's.
            tx.send(Reply::error(Errno::EBADF));
            return PendingIoctl { tag, slot, memory_pid: self.memory_pid };
        }
        let responder = Responder::new(tag, move |r| tx.send(r));
        let size = uapi::ioctl::ioc_size(cmd);
        let mut data = arg.to_vec();
        data.resize(size, 0);
        let req = Request { caller, cmd, data: &data, tag, entered: None, queued: None };
        // SAFETY: the pointers in `arg` are this process's (`memory_pid`) and this function's
        // contract covers them and the ranges the request registers, which are in the memory of
        // the context's owner: this process (`open`, `open_as`, covered by the contract) or
        // another real process (`open_process`), no soundness concern.
        unsafe { self.device().ioctl(self.file, &req, &ProcessMemory(self.memory_pid), responder) };
        PendingIoctl { tag, slot, memory_pid: self.memory_pid }
    }

    /// Interrupts a started ioctl (as a signal to the caller would).
    pub fn interrupt(&self, pending: &PendingIoctl) -> bool {
        ours(self.device.epoch) && self.device().interrupt(pending.tag)
    }
}

impl Drop for EmbeddedFile {
    fn drop(&mut self) {
        // In a forked child the file is the parent's: closing it there changes nothing.
        if ours(self.device.epoch) {
            self.device().release(self.file);
        }
    }
}

/// Copies a reply into the caller's struct and memory; a failed copy is EFAULT, as the kernel's
/// copy_to_user.
///
/// # Safety
///
/// `reply` answers a request started under [`EmbeddedFile::start`]'s contract, whose pointers
/// are still valid for the device's writes.
unsafe fn apply(reply: Reply, arg: &mut [u8], memory_pid: u32) -> Result<(), Errno> {
    let n = reply.data.len().min(arg.len());
    arg[..n].copy_from_slice(&reply.data[..n]);
    for w in &reply.user_writes {
        // SAFETY: a write the device asked for through a pointer of the request (the dispatcher
        // writes only where the argument points), valid by this function's contract.
        unsafe { remote::write(memory_pid, w.addr, &w.data)? };
    }
    match reply.errno() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> (PendingIoctl, ReplySender) {
        let slot = Arc::new(ReplySlot::default());
        (PendingIoctl { tag: 1, slot: slot.clone(), memory_pid: std::process::id() }, ReplySender(Some(slot)))
    }

    #[test]
    fn a_reply_from_another_thread_wakes_the_sleeper_once() {
        let (p, tx) = pending();
        assert!(p.try_reply().is_none());
        assert!(p.wait_timeout(Duration::from_millis(5)).is_none(), "nothing yet: the deadline ends it");
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(Reply { result: 0, data: vec![7], user_writes: Vec::new() });
        });
        let mut arg = [0u8; 1];
        p.wait(&mut arg).expect("the reply");
        assert_eq!(arg, [7]);
        sender.join().unwrap();
    }

    #[test]
    fn a_sender_dropped_unanswered_is_eio_and_a_sent_reply_stays_readable() {
        let (p, tx) = pending();
        let dropper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(tx);
        });
        assert_eq!(p.wait(&mut []), Err(Errno::EIO));
        dropper.join().unwrap();
        let (p, tx) = pending();
        tx.send(Reply::error(Errno::EBADF));
        let r = p.wait_timeout(Duration::from_secs(10)).expect("sent before the wait");
        assert_eq!(r.errno(), Some(Errno::EBADF));
    }
}
