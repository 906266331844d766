//! The checks on one reply, the pointer safety net, and the crash oracle.

use super::{Check, Kind};
use crate::arena::Arena;
use crate::errnos;
use crate::model::Model;
use crate::ops::{self, Ptr};
use cuse_kfd::ioctl::{Direction, Request, UserMemory, UserRange};
use cuse_kfd::reply::{Reply, Responder};
use cuse_kfd::{Caller, Device, FileId};
use nix::errno::Errno;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use uapi::ioctl::*;
use uapi::{FromBytes, IntoBytes};

pub(super) fn fail<T>(kind: Kind, what: impl Into<String>) -> Result<T, (Kind, String)> {
    Err((kind, what.into()))
}

// ---------------------------------------------------------------------------------------------
// Panics anywhere in the process are failures.

static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
pub(super) static PANIC_COUNT: AtomicU64 = AtomicU64::new(0);

/// Records every panic (any thread, the device's included) for the crash oracle.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let thread = std::thread::current().name().unwrap_or("?").to_string();
            let msg = format!("panic in thread {thread}: {info}");
            eprintln!("kfd-fuzz: {msg}");
            PANICS.lock().push(msg);
            PANIC_COUNT.fetch_add(1, Ordering::SeqCst);
        }));
    });
}

/// Panics recorded so far.
pub fn panic_count() -> u64 {
    PANIC_COUNT.load(Ordering::SeqCst)
}

/// The last panic message recorded.
pub fn last_panic() -> Option<String> {
    PANICS.lock().last().cloned()
}

pub(super) fn panics_since(count: u64) -> Option<String> {
    if PANIC_COUNT.load(Ordering::SeqCst) == count {
        return None;
    }
    let p = PANICS.lock();
    Some(p.last().cloned().unwrap_or_else(|| "a panic".into()))
}

// ---------------------------------------------------------------------------------------------
// Caller memory as the device sees it.

/// The fuzzer's own memory, readable only inside the ranges the request's table row declares:
/// what the CUSE front end would have fetched. A read elsewhere is recorded.
pub(super) struct CheckedMemory {
    pub(super) declared: Vec<UserRange>,
    pub(super) undeclared: Mutex<Vec<(u64, usize)>>,
}

impl UserMemory for CheckedMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        if !buf.is_empty() && !covered(&self.declared, addr, buf.len() as u64, false) {
            self.undeclared.lock().push((addr, buf.len()));
        }
        // SAFETY: an address from a request `send` passed on; the fuzzer builds requests with only
        // pointers that are null, low, in the arena, in its hole or above user space (arena.rs):
        // the device's reads and writes land in the arena, which no Rust reference reaches, or
        // fault.
        unsafe { cuse_kfd::memory::remote::read(std::process::id(), addr, buf) }
    }
}

/// Whether `[addr, addr + len)` lies in one declared range (one the device writes, if `write`).
pub(super) fn covered(ranges: &[UserRange], addr: u64, len: u64, write: bool) -> bool {
    // In u128: a declared range may run past the end of the address space (it faults).
    let end = u128::from(addr) + u128::from(len);
    ranges
        .iter()
        .any(|r| (!write || r.dir != Direction::In) && r.addr <= addr && end <= u128::from(r.addr) + u128::from(r.len))
}

static NEXT_TAG: AtomicU64 = AtomicU64::new(1 << 40);

/// What sending a request gave.
pub(super) enum Sent {
    Replied(Reply),
    /// Parked: the reply comes later on this channel.
    Parked(u64, Receiver<Reply>),
}

/// Sends one request through the device's dispatcher exactly as a front end does.
pub(super) fn send(device: &Device, file: FileId, caller: Caller, cmd: u32, data: &[u8], mem: &CheckedMemory) -> Sent {
    let tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel();
    let responder = Responder::new(tag, move |r| {
        let _ = tx.send(r);
    });
    // SAFETY: the fuzzer passes only pointers that are null, low, in the arena, in its hole or
    // above user space (arena.rs): the device's reads and writes land in the arena, which no Rust
    // reference reaches, or fault. The same holds for USERPTR addresses, which the fuzzer draws
    // from the same pointers.
    unsafe { device.ioctl(file, &Request { caller, cmd, data, tag, entered: None, queued: None }, mem, responder) };
    match rx.try_recv() {
        Ok(r) => Sent::Replied(r),
        Err(_) => Sent::Parked(tag, rx),
    }
}

/// The ranges a request declares, computed as the CUSE session does.
pub(super) fn declared_ranges(cmd: u32, data: &[u8]) -> Vec<UserRange> {
    let Some(desc) = cuse_kfd::ioctl::lookup(cmd) else { return Vec::new() };
    let size = ioc_size(cmd);
    let args_in = if ioc_dir(desc.cmd) & IOC_WRITE != 0 { size } else { 0 };
    if data.len() < args_in {
        return Vec::new();
    }
    let mut kargs = vec![0u8; size.max(ioc_size(desc.cmd))];
    let n = data.len().min(args_in);
    kargs[..n].copy_from_slice(&data[..n]);
    (desc.user_ranges)(&kargs)
}

/// Checks the framing of a reply: errno allowed, struct copied back at the caller's size,
/// writes only inside declared ranges; applies the writes that land in the arena.
pub(super) fn check_reply(cmd: u32, sent: usize, reply: &Reply, declared: &[UserRange]) -> Check {
    let name = ops::name_of(cmd);
    if let Some(e) = reply.errno() {
        if let Err(why) = errnos::is_allowed(cmd, sent, e) {
            return fail(Kind::Errno, why);
        }
    } else if reply.result != 0 {
        return fail(Kind::Errno, format!("{name} answered {} (ioctl(2) returns 0 or -errno here)", reply.result));
    }
    if let Some(desc) = cuse_kfd::ioctl::lookup(cmd) {
        let want = if ioc_dir(desc.cmd) & IOC_READ != 0 { ioc_size(cmd) } else { 0 };
        if !reply.data.is_empty() && reply.data.len() != want {
            return fail(
                Kind::Errno,
                format!("{name} copied back {} bytes, the caller's struct has {want}", reply.data.len()),
            );
        }
    } else if !reply.data.is_empty() {
        return fail(Kind::Errno, format!("unknown request {cmd:#x} copied back {} bytes", reply.data.len()));
    }
    let arena = Arena::get();
    for w in &reply.user_writes {
        if !covered(declared, w.addr, w.data.len() as u64, true) {
            return fail(
                Kind::Errno,
                format!(
                    "{name} wrote {} bytes at {:#x}, outside the ranges its table row declares",
                    w.data.len(),
                    w.addr
                ),
            );
        }
        arena.write(w.addr, &w.data);
    }
    Ok(())
}

/// The object a request names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    Buffer(u64),
    Queue(u32),
    Event(u32),
}

impl Named {
    pub(crate) fn owned_by(&self, m: &Model) -> bool {
        match self {
            Named::Buffer(h) => m.buffers.contains_key(h),
            Named::Queue(q) => m.queues.contains_key(q),
            Named::Event(e) => m.events.contains_key(e),
        }
    }
}

/// The argument struct as the handler saw it: the sent bytes, zero-extended.
pub(super) fn parse<T: FromBytes + IntoBytes>(d: &[u8]) -> T {
    let mut t = T::new_zeroed();
    let b = t.as_mut_bytes();
    let n = b.len().min(d.len());
    b[..n].copy_from_slice(&d[..n]);
    t
}

fn u64_at(d: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(d.get(off..off + 8)?.try_into().ok()?))
}

fn u32_at(d: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(off..off + 4)?.try_into().ok()?))
}

/// The object request `nr` names in its (sent) arguments.
pub fn named_object(nr: u32, d: &[u8]) -> Option<Named> {
    match nr {
        0x17 | 0x18 | 0x19 | 0x24 => u64_at(d, 0).map(Named::Buffer),
        0x08 => u64_at(d, 0).filter(|h| *h != 0).map(Named::Buffer),
        0x03 | 0x1A | 0x1E => u32_at(d, 0).map(Named::Queue),
        0x07 => u32_at(d, 8).map(Named::Queue),
        0x1B => u32_at(d, 16).map(Named::Queue),
        0x09..=0x0B => u32_at(d, 0).map(Named::Event),
        _ => None,
    }
}

/// Makes every host pointer field of the row `cmd` reaches safe (see [`Arena::is_safe`]):
/// whatever the bytes say, the device can then only write into the arena.
pub fn sanitize(cmd: u32, data: &mut [u8]) {
    let Some(desc) = cuse_kfd::ioctl::lookup(cmd) else { return };
    let nr = ioc_nr(desc.cmd);
    let arena = Arena::get();
    for off in ops::host_ptrs(nr).iter().chain(ops::extra_host_ptrs(nr)) {
        let off = usize::from(*off);
        if let Some(v) = u64_at(data, off) {
            if !arena.is_safe(v) {
                let safe = arena.resolve(&Ptr::Hole(v), &mut 0);
                data[off..off + 8].copy_from_slice(&safe.to_le_bytes());
            }
        }
    }
}
