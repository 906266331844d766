//! The ioctl dispatcher: (caller, ioctl cmd, argument bytes) -> reply, through one table keyed by
//! the ioctl number (amdkfd kfd_chardev.c's `amdkfd_ioctls`). Both front ends feed it the same
//! bytes.

mod cma;
mod event;
mod ipc;
mod memory;
mod misc;
mod queue;
mod svm;
mod table;
mod unsupported;
mod vendor;

use crate::client::Caller;
use crate::device::Device;
pub use crate::event::wait::Entry;
use crate::process::Process;
use crate::reply::{self, Pending, UserWrite};
pub(crate) use cma::Served;
use nix::errno::Errno;
use std::cell::RefCell;
use std::sync::Arc;
use uapi::{FromBytes, Immutable, IntoBytes, KnownLayout};

pub use table::{lookup, IoctlDesc, TABLE};

/// Reads the caller's memory behind pointers inside argument structs.
pub trait UserMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno>;
}

/// Whether a handler reads or writes a range of the caller's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
    InOut,
}

/// A range of caller memory an ioctl touches, known from its arguments before it runs (what a
/// CUSE front end fetches with RETRY).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRange {
    pub addr: u64,
    pub len: u64,
    pub dir: Direction,
}

impl UserRange {
    /// Whether `len` bytes at `addr` lie inside this range.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr && addr.checked_add(len).is_some_and(|end| end <= self.addr.saturating_add(self.len))
    }
}

/// What a handler did.
#[derive(Debug)]
pub enum Handled {
    Done(Result<(), Errno>),
    /// The handler took the pending reply and will answer later.
    Parked,
}

impl From<Result<(), Errno>> for Handled {
    fn from(r: Result<(), Errno>) -> Handled {
        Handled::Done(r)
    }
}

/// Everything a handler may use.
pub struct Ctx<'a> {
    pub device: &'a Device,
    pub process: &'a Arc<Process>,
    pub caller: Caller,
    pub user: &'a dyn UserMemory,
    /// [`Request::entered`].
    pub entered: Option<Entry>,
    /// [`Request::queued`].
    pub queued: Option<u64>,
    writes: RefCell<Vec<UserWrite>>,
    pending: RefCell<Option<Pending>>,
}

impl Ctx<'_> {
    /// Reads `count` values of `T` from the caller's memory at `addr`.
    pub fn read_user<T: FromBytes + IntoBytes + Clone>(&self, addr: u64, count: usize) -> Result<Vec<T>, Errno> {
        let mut v = vec![T::new_zeroed(); count];
        self.user.read(addr, v.as_mut_bytes())?;
        Ok(v)
    }

    /// Queues bytes for the caller's memory at `addr`, delivered with the reply.
    pub fn write_user(&self, addr: u64, data: &[u8]) {
        if !data.is_empty() {
            self.writes.borrow_mut().push(UserWrite { addr, data: data.to_vec() });
        }
    }

    /// Takes the reply so the handler can answer later (parking).
    pub fn take_pending(&self) -> Option<Pending> {
        self.pending.borrow_mut().take()
    }

    pub fn gpu_exists(&self, gpu_id: u32) -> bool {
        self.device.topology().gpu(gpu_id).is_some()
    }
}

/// Runs a typed handler over the kernel-size argument buffer of request `CMD`, whose size must
/// be the handler's argument type's (checked at compile time).
fn typed<T, const CMD: u32>(ctx: &Ctx, buf: &mut [u8], f: fn(&Ctx, &mut T) -> Handled) -> Handled
where
    T: FromBytes + IntoBytes + KnownLayout + Immutable,
{
    const { assert!(std::mem::size_of::<T>() == uapi::ioctl::ioc_size(CMD), "handler argument type has the request's size") };
    let Ok((mut args, _)) = T::read_from_prefix(buf) else {
        return Handled::Done(Err(Errno::EINVAL));
    };
    let r = f(ctx, &mut args);
    buf[..std::mem::size_of::<T>()].copy_from_slice(args.as_bytes());
    r
}

/// One ioctl request as a front end received it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub caller: Caller,
    pub cmd: u32,
    /// The argument bytes the caller passed: `_IOC_SIZE(cmd)` of them for an IOC_IN ioctl.
    pub data: &'a [u8],
    /// The front end's id for the request (FUSE unique), used to interrupt a parked wait.
    pub tag: u64,
    /// For a WAIT_EVENTS whose arguments came after the call entered (CUSE's RETRY rounds):
    /// where it entered (see [`Entry`]).
    pub entered: Option<Entry>,
    /// The kernel's order of this request among every caller's, where the front end has one
    /// (CUSE: the FUSE unique; see [`Entry::queued`]).
    pub queued: Option<u64>,
}

/// Runs `req` for `process` (the file-to-process check is the device's).
///
/// # Safety
///
/// As for [`Device::ioctl`]: the handlers touch the memory of `process` (USERPTR ranges)
/// relying on it.
pub(crate) unsafe fn dispatch(
    device: &Device,
    process: &Arc<Process>,
    req: &Request,
    user: &dyn UserMemory,
    responder: reply::Responder,
) {
    let Some(desc) = lookup(req.cmd) else {
        log::debug!("pid {}: unknown ioctl {:#x}: ENOTTY", req.caller.pid, req.cmd);
        responder.send(reply::Reply::error(Errno::ENOTTY));
        return;
    };
    // amdkfd takes only nr and size from the caller; direction comes from its own table.
    let usize_ = uapi::ioctl::ioc_size(req.cmd);
    let ksize = uapi::ioctl::ioc_size(desc.cmd);
    let dir = uapi::ioctl::ioc_dir(desc.cmd);
    let mut kdata = vec![0u8; usize_.max(ksize)];
    if dir & uapi::ioctl::IOC_WRITE != 0 {
        if req.data.len() < usize_ {
            responder.send(reply::Reply::error(Errno::EFAULT));
            return;
        }
        kdata[..usize_].copy_from_slice(&req.data[..usize_]);
    }
    let copy_out = dir & uapi::ioctl::IOC_READ != 0;
    let ctx = Ctx {
        device,
        process,
        caller: req.caller,
        user,
        entered: req.entered,
        queued: req.queued,
        writes: RefCell::new(Vec::new()),
        pending: RefCell::new(Some(Pending::new(responder, usize_, copy_out))),
    };
    let faults = device.faults();
    if faults.crash_armed() {
        faults.crash_point(&format!("ioctl:{}", desc.name));
    }
    if let Some(stall) = faults.stall_of(desc.name) {
        // Holding nothing of the device: only this request (and its reader) waits.
        log::debug!("fault injection: {} stalls {stall:?}", desc.name);
        std::thread::sleep(stall);
    }
    let trace = device.trace();
    let start = if trace.enabled() { trace.now_ns() } else { 0 };
    let handled = (desc.handler)(&ctx, &mut kdata);
    if trace.enabled() {
        let errno = match &handled {
            Handled::Done(Err(e)) => *e as i32,
            _ => 0,
        };
        trace.record(req.caller.pid, start, crate::trace::Kind::Ioctl { name: desc.name, errno });
    }
    let pending = ctx.pending.borrow_mut().take();
    match (handled, pending) {
        (Handled::Done(result), Some(pending)) => {
            log::debug!("pid {}: {} -> {:?}", req.caller.pid, desc.name, result.err());
            let writes = if result.is_ok() { ctx.writes.take() } else { Vec::new() };
            pending.complete(result, &kdata, writes);
        }
        (Handled::Parked, None) => log::debug!("pid {}: {} parked", req.caller.pid, desc.name),
        (Handled::Done(_), None) => log::error!("{}: handler took the reply but did not park", desc.name),
        (Handled::Parked, Some(pending)) => {
            log::error!("{}: handler parked without taking the reply", desc.name);
            pending.complete(Err(Errno::EIO), &kdata, Vec::new());
        }
    }
}
