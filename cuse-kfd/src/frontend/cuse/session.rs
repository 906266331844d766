//! The CUSE server's logic, without I/O: one frame in, reply frames out through a
//! [`FrameSink`], now or later (parked waits answer from whichever thread completes them).
//!
//! Unrestricted ioctls carry no data in their first round. The session answers RETRY with the
//! iovecs the ioctl needs (its argument struct, then every range its pointers name, from the
//! ioctl table's `user_ranges`), and runs the ioctl once a round brings all of them. Ranges the
//! ioctl writes are fetched too, so bytes it does not write go back to the caller unchanged.
//!
//! Where the callers' memory can be reached ([`Callers::read_blocked`]; `serve --direct-copies`)
//! the first round does it all: the caller's thread is blocked in the request until it is
//! answered, so its memory stays its own, and the session reads the struct and the ranges from
//! it directly, runs the ioctl, and writes back what the ioctl wrote before answering. Where that
//! cannot be done exactly as the kernel's copies would (a caller this daemon may not reach, a
//! range it cannot read whole, a caller in this very process) it falls back to the rounds.

use super::frame::{self, Op, Request};
use super::interrupts::{Interrupts, Verdict};
use crate::client::{Caller, FileId};
use crate::device::Device;
use crate::ioctl::{self, Direction, UserMemory, UserRange};
use crate::memory::PAGE_SIZE;
use crate::reply::{Reply, Responder, UserWrite};
use nix::errno::Errno;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use uapi::fuse::*;
use uapi::ioctl::{ioc_dir, ioc_size, AMDKFD_IOC_WAIT_EVENTS, IOC_READ, IOC_WRITE};
use uapi::FromBytes;

/// Largest transfer in each direction (CUSE negotiates no max_pages: 32 pages).
pub const MAX_TRANSFER: u32 = 128 * 1024;

/// WAIT_EVENTS calls of one file between their first and last round that the session notes
/// the entry of (one per thread; see [`Entered`]). Beyond it a call waits as if it entered with
/// its last round.
const MAX_ENTERED_PER_FILE: usize = 1024;

/// Where reply frames go: the /dev/cuse fd, or a test's capture.
pub trait FrameSink: Send + Sync {
    fn send(&self, frame: Vec<u8>);
}

/// What the session learns about the threads that call it: their process (from /proc), and
/// their memory while they are blocked in a request (faked in frame tests).
pub trait Callers: Send + Sync {
    /// The thread group (process) of thread `tid`.
    fn tgid(&self, tid: u32) -> Option<u32>;
    /// Whether thread `tid` belongs to process `pid`.
    fn is_thread_of(&self, pid: u32, tid: u32) -> bool;
    /// Whether process `pid` can read `len` bytes at `addr`: a pointer hop the kernel could
    /// not copy is left out of the RETRY, so that the handler fails it the way amdkfd does
    /// (EFAULT with the argument struct still copied back). Fakes may say yes to everything.
    fn readable(&self, _pid: u32, _addr: u64, _len: u64) -> bool {
        true
    }
    /// Whether the callers' memory may be reached at all ([`Callers::read_blocked`]); when not,
    /// the session asks with RETRY rounds without trying.
    fn reaches_memory(&self) -> bool {
        false
    }
    /// Reads every `(addr, buf)` from the memory of thread `tid`, which is blocked in a request
    /// the session has not answered; any error (the default: not available) makes the session
    /// fall back to RETRY rounds.
    ///
    /// # Safety
    ///
    /// `tid` is not a thread of this process (whose memory these calls would reach at any
    /// address).
    unsafe fn read_blocked(&self, _tid: u32, _parts: &mut [(u64, &mut [u8])]) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    /// Writes every `(addr, data)`, in order, to the memory of thread `tid`, blocked as for
    /// [`Callers::read_blocked`] (which must have succeeded for the same request); EFAULT if
    /// any byte could not be written.
    ///
    /// # Safety
    ///
    /// As for [`Callers::read_blocked`].
    unsafe fn write_blocked(&self, _tid: u32, _parts: &[(u64, &[u8])]) -> Result<(), Errno> {
        Err(Errno::EFAULT)
    }
}

/// The real /proc, and the callers' memory through process_vm_readv/writev.
pub struct SystemCallers {
    /// Whether the callers' memory is reached directly (otherwise every ioctl's data moves in
    /// RETRY rounds).
    pub direct: bool,
}

impl Callers for SystemCallers {
    fn reaches_memory(&self) -> bool {
        self.direct
    }

    fn tgid(&self, tid: u32) -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
        status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
    }

    fn is_thread_of(&self, pid: u32, tid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists()
    }

    /// One byte of each page the range touches, read with process_vm_readv. This process's own
    /// memory is not probed (that would be a read of it at any address): the kernel's copy for
    /// the RETRY decides, as a fake may.
    fn readable(&self, pid: u32, addr: u64, len: u64) -> bool {
        if pid == std::process::id() {
            return true;
        }
        let Some(end) = addr.checked_add(len) else { return false };
        let mut byte = [0u8; 1];
        let mut at = addr;
        while at < end {
            // SAFETY: `pid` is another process (checked above): no requirement.
            if unsafe { crate::memory::remote::read(pid, at, &mut byte) }.is_err() {
                return false;
            }
            at = (at | (PAGE_SIZE - 1)) + 1;
        }
        true
    }

    /// A thread blocked in a FUSE request the server has read cannot exit until it is answered
    /// (fs/fuse/dev.c at v6.1, request_wait_answer: once the request left the pending list it
    /// waits in `wait_event`, uninterruptibly), so `tid` is certainly the caller's and its
    /// memory is the caller's.
    unsafe fn read_blocked(&self, tid: u32, parts: &mut [(u64, &mut [u8])]) -> Result<(), Errno> {
        if !self.direct {
            return Err(Errno::ENOSYS);
        }
        // SAFETY: `tid` is not a thread of this process (this function's contract), so neither
        // is the process it reaches.
        unsafe { crate::memory::remote::read_each(tid, parts) }
    }

    unsafe fn write_blocked(&self, tid: u32, parts: &[(u64, &[u8])]) -> Result<(), Errno> {
        // SAFETY: as in `read_blocked`.
        unsafe { crate::memory::remote::write_each(tid, parts) }
    }
}

/// Caller memory fetched by RETRY rounds.
struct Staged<'a> {
    ranges: Vec<(u64, &'a [u8])>,
}

impl UserMemory for Staged<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let end = addr.checked_add(buf.len() as u64).ok_or(Errno::EFAULT)?;
        for (base, data) in &self.ranges {
            if *base <= addr && end <= base + data.len() as u64 {
                let off = (addr - base) as usize;
                buf.copy_from_slice(&data[off..off + buf.len()]);
                return Ok(());
            }
        }
        Err(Errno::EFAULT)
    }
}

/// The session's sink: every reply passes here, so the interrupt bookkeeping learns when a
/// request leaves the daemon, whichever thread answers it.
struct Tracked {
    inner: Arc<dyn FrameSink>,
    interrupts: Arc<Interrupts>,
}

impl FrameSink for Tracked {
    fn send(&self, frame: Vec<u8>) {
        if let Ok((head, _)) = FuseOutHeader::read_from_prefix(&frame) {
            self.interrupts.answered(head.unique);
        }
        self.inner.send(frame);
    }
}

/// Where each WAIT_EVENTS in its RETRY rounds entered: fh -> calling thread -> (arg, where the
/// first round entered). A thread has one ioctl at a time and every call starts with a round
/// without data, which replaces its thread's entry, so an entry left by a call that failed
/// between rounds is never used.
type Entered = HashMap<u64, HashMap<u32, (u64, ioctl::Entry)>>;

/// One ioctl call, as the rounds that carry it name it.
struct Call {
    fh: u64,
    tid: u32,
    unique: u64,
    arg: u64,
    caller: Caller,
    cmd: u32,
    waits: bool,
}

pub struct Session {
    device: Arc<Device>,
    sink: Arc<dyn FrameSink>,
    callers: Arc<dyn Callers>,
    devname: String,
    initialized: AtomicBool,
    /// Open files: fh -> the process that opened it.
    files: Mutex<HashMap<u64, Opener>>,
    interrupts: Arc<Interrupts>,
    entered: Mutex<Entered>,
}

/// The process that opened a file.
#[derive(Debug, Clone, Copy)]
struct Opener {
    pid: u32,
    /// Whether /proc named `pid` as the opening thread's process (not a guess from its tid), so
    /// that its threads are known not to be this daemon's.
    known: bool,
}

fn iov(base: u64, len: u64) -> FuseIoctlIovec {
    FuseIoctlIovec { base, len }
}

impl Session {
    pub fn new(device: Arc<Device>, sink: Arc<dyn FrameSink>, callers: Box<dyn Callers>, devname: &str) -> Session {
        Session::with_interrupts(device, sink, callers, devname, Interrupts::default())
    }

    fn with_interrupts(
        device: Arc<Device>,
        sink: Arc<dyn FrameSink>,
        callers: Box<dyn Callers>,
        devname: &str,
        interrupts: Interrupts,
    ) -> Session {
        let interrupts = Arc::new(interrupts);
        let sink = Arc::new(Tracked { inner: sink, interrupts: interrupts.clone() });
        Session {
            device,
            sink,
            callers: Arc::from(callers),
            devname: devname.to_string(),
            initialized: AtomicBool::new(false),
            files: Mutex::new(HashMap::new()),
            interrupts,
            entered: Mutex::new(HashMap::new()),
        }
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    /// Handles one frame read from the channel.
    pub fn handle(&self, frame: &[u8]) {
        let req = match frame::decode(frame) {
            Ok(r) => r,
            Err(e) => {
                log::warn!("malformed CUSE frame: {e}");
                if let Some(unique) = frame::FrameError::answerable(frame) {
                    self.sink.send(frame::reply_err(unique, Errno::EIO));
                }
                return;
            }
        };
        // Registered before anything else happens to it: an interrupt for it from now on is
        // recognised, and one that raced ahead is claimed.
        if !matches!(req.op, Op::Interrupt(_)) {
            let (_, expired) = self.interrupts.register(req.header.unique, self.process_of(&req), Instant::now());
            self.requeue(expired);
        }
        self.request(&req);
    }

    /// The process a request is from: its file's owner, or for a request without an open file
    /// (OPEN, INIT, a stranger's fh) the calling thread.
    fn process_of(&self, req: &Request) -> u32 {
        let fh = match &req.op {
            Op::Ioctl(io, _) => io.fh,
            Op::Release(r) => r.fh,
            Op::Read(r) => r.fh,
            Op::Write(w, _) => w.fh,
            Op::Poll(p) => p.fh,
            _ => return req.header.pid,
        };
        self.files.lock().get(&fh).map_or(req.header.pid, |o| o.pid)
    }

    /// Hands interrupts the session does not keep back to the kernel, which sends each again
    /// while its request lives (see [`super::interrupts`]).
    fn requeue(&self, frames: Vec<u64>) {
        for f in frames {
            self.sink.send(frame::reply_err(f, Errno::EAGAIN));
        }
    }

    /// Interrupts waiting for their request (see [`super::interrupts`]).
    pub fn pending_interrupts(&self) -> usize {
        self.interrupts.pending()
    }

    fn request(&self, req: &Request) {
        let h = &req.header;
        let unique = h.unique;
        match &req.op {
            Op::Init(init) => self.init(unique, init),
            Op::Open(_) => self.open(req),
            Op::Release(r) => {
                if let Some(_owner) = self.files.lock().remove(&r.fh) {
                    self.entered.lock().remove(&r.fh);
                    self.device.release(FileId(r.fh));
                }
                self.sink.send(frame::reply(unique, 0, &[]));
            }
            Op::Ioctl(io, data) => self.ioctl(req, io, data),
            // No reply to an interrupt: the interrupted request answers EINTR.
            Op::Interrupt(i) => self.interrupt(i.unique, unique),
            // Reading the node reads nothing: all state is behind ioctls and backing files.
            Op::Read(_) => self.sink.send(frame::reply(unique, 0, &[])),
            // A write is the cooperative wake path: "a doorbell was rung".
            Op::Write(w, _) => {
                self.device.kick();
                self.sink.send(frame::reply_struct(unique, &FuseWriteOut { size: w.size, padding: 0 }));
            }
            Op::Poll(_) => {
                let out = FusePollOut { revents: (libc::POLLOUT | libc::POLLWRNORM) as u32, padding: 0 };
                self.sink.send(frame::reply_struct(unique, &out));
            }
            Op::Flush => self.sink.send(frame::reply(unique, 0, &[])),
            Op::Unknown(op) => {
                log::debug!("unsupported CUSE opcode {op}");
                self.sink.send(frame::reply_err(unique, Errno::ENOSYS));
            }
        }
    }

    fn init(&self, unique: u64, init: &CuseInitIn) {
        if init.major != FUSE_KERNEL_VERSION || init.minor < FUSE_KERNEL_MINOR_VERSION_MIN_CUSE {
            log::error!("kernel CUSE protocol {}.{} is not supported (need 7.16+)", init.major, init.minor);
            self.sink.send(frame::reply_err(unique, Errno::EPROTO));
            return;
        }
        let out = CuseInitOut {
            major: FUSE_KERNEL_VERSION,
            minor: init.minor.min(38),
            flags: CUSE_UNRESTRICTED_IOCTL,
            max_read: MAX_TRANSFER,
            max_write: MAX_TRANSFER,
            ..Default::default()
        };
        self.initialized.store(true, Ordering::Release);
        self.sink.send(frame::reply_init(unique, &out, &self.devname));
    }

    fn open(&self, req: &Request) {
        let h = &req.header;
        let tgid = self.callers.tgid(h.pid);
        let pid = tgid.unwrap_or(h.pid);
        let caller = Caller { pid, tid: h.pid, uid: h.uid, gid: h.gid };
        // Refused (a pid-0 caller from another pid namespace, a caller gone meanwhile): open(2)
        // fails with the device's errno.
        let file = match self.device.open(caller) {
            Ok(file) => file,
            Err(e) => {
                self.sink.send(frame::reply_err(h.unique, e));
                return;
            }
        };
        self.files.lock().insert(file.0, Opener { pid, known: tgid.is_some() });
        let out = FuseOpenOut { fh: file.0, open_flags: FOPEN_DIRECT_IO | FOPEN_NONSEEKABLE, padding: 0 };
        self.sink.send(frame::reply_struct(h.unique, &out));
    }

    fn interrupt(&self, unique: u64, frame: u64) {
        let (verdict, requeue) = self.interrupts.interrupt(unique, frame, Instant::now());
        match verdict {
            // Marked first, then ended: a request that parks meanwhile looks at the mark after
            // parking (see `ioctl`), so one of the two ends its wait.
            Verdict::Deliver => {
                self.device.interrupt(unique);
            }
            Verdict::Stale { pid } => log::debug!("interrupt for request {unique} of process {pid}, already answered"),
            Verdict::Pending => {}
        }
        self.requeue(requeue);
    }

    fn ioctl(&self, req: &Request, io: &FuseIoctlIn, data: &[u8]) {
        let h = &req.header;
        let unique = h.unique;
        if io.flags & (FUSE_IOCTL_COMPAT | FUSE_IOCTL_32BIT | FUSE_IOCTL_COMPAT_X32) != 0 {
            // amdkfd has no compat ioctls either.
            self.sink.send(frame::reply_ioctl(unique, -(Errno::ENOTTY as i32), &[]));
            return;
        }
        let Some(owner) = self.files.lock().get(&io.fh).copied() else {
            self.sink.send(frame::reply_err(unique, Errno::EBADF));
            return;
        };
        let (pid, known) = if h.pid == owner.pid || self.callers.is_thread_of(owner.pid, h.pid) {
            (owner.pid, owner.known)
        } else {
            match self.callers.tgid(h.pid) {
                Some(pid) => (pid, true),
                None => (h.pid, false),
            }
        };
        let caller = Caller { pid, tid: h.pid, uid: h.uid, gid: h.gid };
        let Some(desc) = ioctl::lookup(io.cmd) else {
            self.sink.send(frame::reply_ioctl(unique, -(Errno::ENOTTY as i32), &[]));
            return;
        };
        // amdkfd registers a WAIT_EVENTS' waiter on entry; ours registers when the event array
        // arrives, two rounds later. The set count at entry lets the wait count the sets made
        // in between (another thread's SET_EVENT consumed by a third thread's wait, say).
        let waits = desc.cmd == AMDKFD_IOC_WAIT_EVENTS;
        if waits && data.is_empty() {
            self.note_entry(io.fh, pid, h.pid, io.arg, unique);
        }
        let size = ioc_size(io.cmd) as u64;
        let kdir = ioc_dir(desc.cmd);
        let args_in = if kdir & IOC_WRITE != 0 { size } else { 0 };
        let args_out = if kdir & IOC_READ != 0 { size } else { 0 };
        // A first round that would be answered RETRY: done on the caller's memory instead, when
        // the caller is another process this daemon can reach.
        let round_one = data.is_empty() && io.in_size == 0 && io.out_size == 0 && args_in + args_out > 0;
        if round_one && known && h.pid != 0 && pid != std::process::id() && self.callers.reaches_memory() {
            let call = Call { fh: io.fh, tid: h.pid, unique, arg: io.arg, caller, cmd: io.cmd, waits };
            // SAFETY: /proc named `pid` as the process of thread `h.pid` (`known`), and it is
            // not this one.
            if unsafe { self.ioctl_direct(&call, desc, args_in, args_out) } {
                return;
            }
        }
        let mut kargs = vec![0u8; (size as usize).max(ioc_size(desc.cmd))];
        let have = (data.len() as u64).min(args_in) as usize;
        kargs[..have].copy_from_slice(&data[..have]);
        // Only ranges named by the real arguments count: before they arrive there are none.
        let mut ranges = if (data.len() as u64) < args_in { Vec::new() } else { (desc.user_ranges)(&kargs) };
        // Ranges the caller cannot read would fail the kernel's copy with EFAULT and nothing
        // copied back; left out, the handler meets them missing and fails as amdkfd does. Only
        // probed while they are still to be asked for: data that arrived was readable.
        let arrived = args_in + ranges.iter().map(|r| r.len).sum::<u64>();
        if data.len() as u64 != arrived {
            ranges.retain(|r| r.dir == Direction::Out || self.callers.readable(pid, r.addr, r.len));
        }
        let mut ins = Vec::new();
        let mut outs = Vec::new();
        if args_in > 0 {
            ins.push(iov(io.arg, args_in));
        }
        if args_out > 0 {
            outs.push(iov(io.arg, args_out));
        }
        for r in &ranges {
            ins.push(iov(r.addr, r.len));
            if r.dir != Direction::In {
                outs.push(iov(r.addr, r.len));
            }
        }
        let total_in: u64 = ins.iter().map(|v| v.len).sum();
        let total_out: u64 = outs.iter().map(|v| v.len).sum();
        if total_in > u64::from(MAX_TRANSFER)
            || total_out > u64::from(MAX_TRANSFER)
            || ins.len() + outs.len() > FUSE_IOCTL_MAX_IOV as usize
        {
            self.sink.send(frame::reply_ioctl(unique, -(Errno::ENOMEM as i32), &[]));
            return;
        }
        // Not exactly what the ranges need (they changed since the last RETRY): ask again.
        if data.len() as u64 != total_in || u64::from(io.out_size) < total_out {
            self.sink.send(frame::reply_ioctl_retry(unique, &ins, &outs));
            return;
        }
        // All data is here: [args][range 0][range 1]...
        let mut staged = Staged { ranges: Vec::with_capacity(ranges.len()) };
        let mut at = args_in as usize;
        let mut out_ranges = Vec::new();
        for r in &ranges {
            let bytes = &data[at..at + r.len as usize];
            staged.ranges.push((r.addr, bytes));
            if r.dir != Direction::In {
                out_ranges.push((*r, bytes.to_vec()));
            }
            at += r.len as usize;
        }
        let sink = self.sink.clone();
        let responder = move || {
            Responder::new(unique, move |reply: Reply| {
                sink.send(final_reply(unique, reply, args_out as usize, out_ranges));
            })
        };
        let call = Call { fh: io.fh, tid: h.pid, unique, arg: io.arg, caller, cmd: io.cmd, waits };
        self.run(&call, &data[..args_in as usize], &staged, responder);
    }

    /// Runs `call` in its first round on the caller's memory: reads the argument struct and
    /// every range its pointers name in one process_vm_readv, and answers after writing back
    /// the struct and what the ioctl wrote in one process_vm_writev. False, with nothing
    /// answered or run, where that would not do what the kernel's copies in RETRY rounds do:
    /// the caller cannot be reached, a range cannot be read whole (the RETRY rounds leave it
    /// out or fail the copy, as the kernel would), or a transfer is past CUSE's limits.
    ///
    /// # Safety
    ///
    /// `call.tid` is not a thread of this process.
    unsafe fn ioctl_direct(&self, call: &Call, desc: &ioctl::IoctlDesc, args_in: u64, args_out: u64) -> bool {
        // The struct as the handler takes it: what the caller has if the ioctl reads it, zeros
        // if it only writes it (read here all the same, to learn that the copy back can work).
        let size = args_in.max(args_out) as usize;
        let mut args = vec![0u8; size.max(ioc_size(desc.cmd))];
        let mut probe = vec![0u8; if args_in == 0 { size } else { 0 }];
        let first = if args_in > 0 { &mut args[..size] } else { &mut probe[..] };
        // SAFETY: `call.tid` is not a thread of this process (this function's contract).
        if unsafe { self.callers.read_blocked(call.tid, &mut [(call.arg, first)]) }.is_err() {
            return false;
        }
        let ranges = (desc.user_ranges)(&args);
        // What the RETRY rounds would move: past CUSE's limits they answer ENOMEM.
        let written = ranges.iter().filter(|r| r.dir != Direction::In);
        let total_in = args_in + ranges.iter().map(|r| r.len).sum::<u64>();
        let total_out = args_out + written.clone().map(|r| r.len).sum::<u64>();
        let iovs = usize::from(args_in > 0) + ranges.len() + usize::from(args_out > 0) + written.count();
        if total_in > u64::from(MAX_TRANSFER)
            || total_out > u64::from(MAX_TRANSFER)
            || iovs > FUSE_IOCTL_MAX_IOV as usize
        {
            return false;
        }
        let mut bytes: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0u8; r.len as usize]).collect();
        let mut parts: Vec<(u64, &mut [u8])> =
            ranges.iter().zip(bytes.iter_mut()).map(|(r, b)| (r.addr, b.as_mut_slice())).collect();
        // SAFETY: as above.
        if !parts.is_empty() && unsafe { self.callers.read_blocked(call.tid, &mut parts) }.is_err() {
            return false;
        }
        let staged = Staged { ranges: ranges.iter().zip(&bytes).map(|(r, b)| (r.addr, b.as_slice())).collect() };
        let written: Vec<UserRange> = ranges.iter().filter(|r| r.dir != Direction::In).copied().collect();
        let (callers, sink) = (self.callers.clone(), self.sink.clone());
        let (tid, unique, arg, args_out) = (call.tid, call.unique, call.arg, args_out as usize);
        let responder = move || {
            Responder::new(unique, move |reply: Reply| {
                let mut result = reply.result;
                let mut args = reply.data;
                args.resize(args_out, 0);
                let mut parts: Vec<(u64, &[u8])> = Vec::with_capacity(1 + reply.user_writes.len());
                if args_out > 0 {
                    parts.push((arg, &args));
                }
                for w in &reply.user_writes {
                    if written.iter().any(|r| r.contains(w.addr, w.data.len() as u64)) {
                        parts.push((w.addr, &w.data));
                    } else {
                        log::error!("ioctl wrote {} bytes at {:#x} outside its declared ranges", w.data.len(), w.addr);
                        result = -(Errno::EFAULT as i32);
                    }
                }
                // As the kernel's copy back, whatever the ioctl returned: EFAULT if it fails.
                // SAFETY: `tid` is `call.tid`, not a thread of this process (as above).
                if unsafe { callers.write_blocked(tid, &parts) }.is_err() {
                    result = -(Errno::EFAULT as i32);
                }
                sink.send(frame::reply_ioctl(unique, result, &[]));
            })
        };
        self.run(call, &args[..args_in as usize], &staged, responder);
        true
    }

    /// Runs an ioctl whose data is all here, answering through the responder `respond` makes,
    /// now or when a parked wait ends (an interrupted call is answered EINTR without one).
    fn run(&self, call: &Call, args: &[u8], staged: &Staged, respond: impl FnOnce() -> Responder) {
        let unique = call.unique;
        if self.interrupts.is_interrupted(unique) {
            self.sink.send(frame::reply_ioctl(unique, -(Errno::EINTR as i32), &[]));
            return;
        }
        let entered = if call.waits { self.take_entry(call.fh, call.tid, call.arg) } else { None };
        let request = ioctl::Request {
            caller: call.caller,
            cmd: call.cmd,
            data: args,
            tag: unique,
            entered,
            // The kernel numbers requests from one counter as each caller's thread queues its
            // own (fs/fuse/dev.c at v6.1, __fuse_request_send: fuse_get_unique under the input
            // queue's lock), so uniques order calls by when they entered, whatever order the
            // readers take them in.
            queued: Some(unique),
        };
        // SAFETY: the caller is the process the kernel names for this ioctl(2), and the file's
        // context is bound (`Device::open`) to the process that opened it, which alone may use
        // it (EBADF otherwise). Another process's memory is no soundness concern; if it is this
        // daemon itself, its ioctl(2) call, an unsafe call, carries the contract for its
        // pointers and USERPTR ranges.
        unsafe { self.device.ioctl(FileId(call.fh), &request, staged, respond()) };
        // An interrupt that came while the request was between the check above and parking
        // found nothing to end and only marked it: end the parked wait now (a no-op if it
        // finished; the mark is gone with the reply).
        if self.interrupts.is_interrupted(unique) {
            self.device.interrupt(unique);
        }
    }

    fn note_entry(&self, fh: u64, pid: u32, tid: u32, arg: u64, unique: u64) {
        let Some(set_count) = self.device.event_set_count(FileId(fh), pid) else { return };
        let mut entered = self.entered.lock();
        let calls = entered.entry(fh).or_default();
        if calls.len() < MAX_ENTERED_PER_FILE || calls.contains_key(&tid) {
            calls.insert(tid, (arg, ioctl::Entry { set_count, queued: unique }));
        }
    }

    /// Where thread `tid`'s WAIT_EVENTS on `arg` entered, noted at its first round.
    fn take_entry(&self, fh: u64, tid: u32, arg: u64) -> Option<ioctl::Entry> {
        let mut entered = self.entered.lock();
        let calls = entered.get_mut(&fh)?;
        let (at, entry) = calls.remove(&tid)?;
        (at == arg).then_some(entry)
    }

    /// Answers every parked request with its failure and forgets all files (shutdown).
    pub fn shutdown(&self) {
        self.files.lock().clear();
        self.entered.lock().clear();
        self.device.shutdown();
    }
}

/// The final ioctl reply: the argument struct, then each written range with the device's
/// writes applied over what the caller had.
fn final_reply(unique: u64, reply: Reply, args_out: usize, mut ranges: Vec<(UserRange, Vec<u8>)>) -> Vec<u8> {
    let mut result = reply.result;
    for w in &reply.user_writes {
        if !apply(&mut ranges, w) {
            log::error!("ioctl wrote {} bytes at {:#x} outside its declared ranges", w.data.len(), w.addr);
            result = -(Errno::EFAULT as i32);
        }
    }
    let mut out = Vec::with_capacity(args_out + ranges.iter().map(|r| r.1.len()).sum::<usize>());
    if args_out > 0 {
        let mut args = reply.data;
        args.resize(args_out, 0);
        out.extend_from_slice(&args);
    }
    for (_, bytes) in ranges {
        out.extend_from_slice(&bytes);
    }
    frame::reply_ioctl(unique, result, &out)
}

fn apply(ranges: &mut [(UserRange, Vec<u8>)], w: &UserWrite) -> bool {
    let Some(end) = w.addr.checked_add(w.data.len() as u64) else { return false };
    for (r, bytes) in ranges.iter_mut() {
        if r.addr <= w.addr && end <= r.addr + r.len {
            let off = (w.addr - r.addr) as usize;
            bytes[off..off + w.data.len()].copy_from_slice(&w.data);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    //! How `Session::ioctl` builds RETRY replies: which iovecs it asks for, in which round.

    use super::*;
    use crate::device::DeviceConfig;
    use uapi::ioctl::{
        AMDKFD_IOC_CREATE_EVENT, AMDKFD_IOC_DESTROY_EVENT, AMDKFD_IOC_GET_VERSION, AMDKFD_IOC_SET_EVENT,
        AMDKFD_IOC_WAIT_EVENTS,
    };
    use uapi::kfd::{
        CreateEventArgs, EventData, SetEventArgs, WaitEventsArgs, KFD_IOC_EVENT_SIGNAL, KFD_IOC_WAIT_RESULT_COMPLETE,
    };
    use uapi::IntoBytes;

    const ARG: u64 = 0x7000_0000;
    const EVENTS: u64 = 0x7100_0000;

    #[derive(Default)]
    struct Capture(Mutex<Vec<Vec<u8>>>);

    impl FrameSink for Capture {
        fn send(&self, frame: Vec<u8>) {
            self.0.lock().push(frame);
        }
    }

    /// Each thread its own process; memory at `unreadable` is mapped nowhere. With `memory`,
    /// the callers' memory can be reached directly and is those regions.
    #[derive(Default)]
    struct Fake {
        unreadable: Option<u64>,
        memory: Option<Arc<Memory>>,
    }

    /// A caller's memory: regions of bytes, some read-only; counts the direct calls.
    #[derive(Default)]
    struct Memory {
        regions: Mutex<Vec<(u64, Vec<u8>, bool)>>,
        reads: std::sync::atomic::AtomicUsize,
        writes: std::sync::atomic::AtomicUsize,
    }

    impl Memory {
        /// Maps `bytes` at `addr`, in place of a region there.
        fn map(&self, addr: u64, bytes: &[u8], writable: bool) {
            let mut regions = self.regions.lock();
            regions.retain(|(base, _, _)| *base != addr);
            regions.push((addr, bytes.to_vec(), writable));
        }

        fn counts(&self) -> (usize, usize) {
            (self.reads.load(Ordering::Relaxed), self.writes.load(Ordering::Relaxed))
        }

        fn at(&self, addr: u64, len: usize) -> Vec<u8> {
            let regions = self.regions.lock();
            let (base, bytes, _) =
                regions.iter().find(|(b, v, _)| *b <= addr && addr + len as u64 <= b + v.len() as u64).unwrap();
            bytes[(addr - base) as usize..][..len].to_vec()
        }
    }

    impl Callers for Fake {
        fn tgid(&self, tid: u32) -> Option<u32> {
            Some(tid)
        }
        fn is_thread_of(&self, pid: u32, tid: u32) -> bool {
            pid == tid
        }
        fn readable(&self, _pid: u32, addr: u64, len: u64) -> bool {
            self.unreadable.is_none_or(|bad| bad < addr || bad >= addr + len)
        }
        fn reaches_memory(&self) -> bool {
            self.memory.is_some()
        }
        unsafe fn read_blocked(&self, _tid: u32, parts: &mut [(u64, &mut [u8])]) -> Result<(), Errno> {
            let memory = self.memory.as_ref().ok_or(Errno::EPERM)?;
            memory.reads.fetch_add(1, Ordering::Relaxed);
            let regions = memory.regions.lock();
            for (addr, buf) in parts.iter_mut() {
                let end = *addr + buf.len() as u64;
                if !self.readable(0, *addr, buf.len() as u64) {
                    return Err(Errno::EFAULT);
                }
                let (base, bytes, _) =
                    regions.iter().find(|(b, v, _)| b <= addr && end <= b + v.len() as u64).ok_or(Errno::EFAULT)?;
                buf.copy_from_slice(&bytes[(*addr - base) as usize..][..buf.len()]);
            }
            Ok(())
        }
        unsafe fn write_blocked(&self, _tid: u32, parts: &[(u64, &[u8])]) -> Result<(), Errno> {
            let memory = self.memory.as_ref().ok_or(Errno::EPERM)?;
            memory.writes.fetch_add(1, Ordering::Relaxed);
            let mut regions = memory.regions.lock();
            for (addr, data) in parts {
                let end = addr + data.len() as u64;
                let (base, bytes, _) = regions
                    .iter_mut()
                    .find(|(b, v, w)| *w && b <= addr && end <= *b + v.len() as u64)
                    .ok_or(Errno::EFAULT)?;
                bytes[(addr - *base) as usize..][..data.len()].copy_from_slice(data);
            }
            Ok(())
        }
    }

    struct Rig {
        session: Session,
        sink: Arc<Capture>,
        fh: u64,
    }

    /// The caller: this process (the device binds a context to a live process).
    fn frame(opcode: u32, unique: u64, parts: &[&[u8]]) -> Vec<u8> {
        frame_from(std::process::id(), opcode, unique, parts)
    }

    fn frame_from(pid: u32, opcode: u32, unique: u64, parts: &[&[u8]]) -> Vec<u8> {
        let len = std::mem::size_of::<FuseInHeader>() + parts.iter().map(|p| p.len()).sum::<usize>();
        let h = FuseInHeader { len: len as u32, opcode, unique, pid, uid: 1000, gid: 1000, ..Default::default() };
        let mut v = h.as_bytes().to_vec();
        parts.iter().for_each(|p| v.extend_from_slice(p));
        v
    }

    impl Rig {
        fn new(unreadable: Option<u64>) -> Rig {
            let device = Device::new(&DeviceConfig::default()).unwrap();
            let sink = Arc::new(Capture::default());
            // Expiry is the unit tests' (explicit instants): here a loaded machine must not expire
            // an interrupt a test counts on.
            let interrupts = Interrupts::with_expiry(std::time::Duration::from_secs(3600));
            let session = Session::with_interrupts(
                device,
                sink.clone(),
                Box::new(Fake { unreadable, memory: None }),
                "kfd",
                interrupts,
            );
            session.handle(&frame(FUSE_OPEN, 2, &[FuseOpenIn { flags: 2, open_flags: 0 }.as_bytes()]));
            let opened = sink.0.lock().pop().unwrap();
            let fh = FuseOpenOut::read_from_bytes(&opened[16..]).unwrap().fh;
            Rig { session, sink, fh }
        }

        /// Sends one ioctl round of this process as request 4 and returns the reply frame.
        fn round(&self, cmd: u32, flags: u32, data: &[u8], out_size: u32) -> Vec<u8> {
            let conn = Conn { session: &self.session, sink: &self.sink, fh: self.fh };
            conn.round_flags(std::process::id(), 4, cmd, flags, data, out_size)
        }
    }

    /// Iovecs as (base, len).
    type Iovecs = Vec<(u64, u64)>;

    /// The iovecs a RETRY reply asks for, in and out; None for a final reply.
    fn retry(reply: &[u8]) -> Option<(Iovecs, Iovecs)> {
        let (head, rest) = FuseOutHeader::read_from_prefix(reply).unwrap();
        assert_eq!((head.len as usize, head.error, head.unique), (reply.len(), 0, 4));
        let (out, iovs) = FuseIoctlOut::read_from_prefix(rest).unwrap();
        if out.flags & FUSE_IOCTL_RETRY == 0 {
            return None;
        }
        assert_eq!(out.result, 0);
        let iovs = <[FuseIoctlIovec]>::ref_from_bytes(iovs).unwrap();
        assert_eq!(iovs.len(), (out.in_iovs + out.out_iovs) as usize, "nothing after the iovecs");
        let pairs = |v: &[FuseIoctlIovec]| v.iter().map(|i| (i.base, i.len)).collect::<Vec<_>>();
        let (ins, outs) = iovs.split_at(out.in_iovs as usize);
        Some((pairs(ins), pairs(outs)))
    }

    fn wait_args(n: u32) -> Vec<u8> {
        WaitEventsArgs { events_ptr: EVENTS, num_events: n, timeout: 0, ..Default::default() }.as_bytes().to_vec()
    }

    /// M7: a caller FUSE cannot name in the daemon's pid namespace arrives as pid 0; its open
    /// is refused with EPERM and makes no file and no context.
    #[test]
    fn m7_a_pid_0_caller_is_refused() {
        let rig = Rig::new(None);
        rig.session.handle(&frame_from(0, FUSE_OPEN, 9, &[FuseOpenIn { flags: 2, open_flags: 0 }.as_bytes()]));
        let reply = rig.sink.0.lock().pop().unwrap();
        let head = FuseOutHeader::read_from_prefix(&reply).unwrap().0;
        assert_eq!((head.unique, head.error), (9, -(Errno::EPERM as i32)));
        assert_eq!((rig.session.device().stats().files, rig.session.device().stats().processes), (1, 1));
    }

    #[test]
    fn the_first_round_asks_for_the_argument_struct_by_the_tables_direction() {
        let rig = Rig::new(None);
        let r = rig.round(AMDKFD_IOC_GET_VERSION, FUSE_IOCTL_UNRESTRICTED, &[], 0);
        assert_eq!(retry(&r), Some((vec![], vec![(ARG, 8)])), "IOR: out only");
        let r = rig.round(AMDKFD_IOC_DESTROY_EVENT, FUSE_IOCTL_UNRESTRICTED, &[], 0);
        assert_eq!(retry(&r), Some((vec![(ARG, 8)], vec![])), "IOW: in only");
        let r = rig.round(AMDKFD_IOC_WAIT_EVENTS, FUSE_IOCTL_UNRESTRICTED, &[], 0);
        assert_eq!(retry(&r), Some((vec![(ARG, 24)], vec![(ARG, 24)])), "IOWR, its pointers not known yet");
    }

    #[test]
    fn the_next_round_adds_the_ranges_the_arguments_name() {
        let rig = Rig::new(None);
        let events = (ARG, 24);
        let array = (EVENTS, 2 * std::mem::size_of::<EventData>() as u64);
        let r = rig.round(AMDKFD_IOC_WAIT_EVENTS, FUSE_IOCTL_UNRESTRICTED, &wait_args(2), 24);
        assert_eq!(retry(&r), Some((vec![events, array], vec![events, array])));
        // All in data but too little out space: asked again, the same.
        let mut data = wait_args(2);
        data.extend_from_slice(&[0u8; 96]);
        let r = rig.round(AMDKFD_IOC_WAIT_EVENTS, FUSE_IOCTL_UNRESTRICTED, &data, 24);
        assert_eq!(retry(&r), Some((vec![events, array], vec![events, array])));
        // A round whose arguments name another range is asked again for that one.
        let mut moved = wait_args(1);
        moved.extend_from_slice(&[0u8; 96]);
        let r = rig.round(AMDKFD_IOC_WAIT_EVENTS, FUSE_IOCTL_UNRESTRICTED, &moved, 24 + 96);
        assert_eq!(retry(&r), Some((vec![events, (EVENTS, 48)], vec![events, (EVENTS, 48)])));
        // Everything there: the ioctl runs (event id 0 does not exist: EINVAL).
        let r = rig.round(AMDKFD_IOC_WAIT_EVENTS, FUSE_IOCTL_UNRESTRICTED, &data, 24 + 96);
        assert_eq!(retry(&r), None);
        let out = FuseIoctlOut::read_from_prefix(&r[16..]).unwrap().0;
        assert_eq!(out.result, -(Errno::EINVAL as i32));
    }

    #[test]
    fn a_range_the_caller_cannot_read_is_left_out_of_the_retry() {
        let rig = Rig::new(Some(EVENTS + 8));
        let r = rig.round(AMDKFD_IOC_WAIT_EVENTS, FUSE_IOCTL_UNRESTRICTED, &wait_args(2), 0);
        assert_eq!(retry(&r), Some((vec![(ARG, 24)], vec![(ARG, 24)])), "the array is not asked for");
        // With the struct alone the ioctl runs and fails reading the array, as amdkfd does.
        let r = rig.round(AMDKFD_IOC_WAIT_EVENTS, FUSE_IOCTL_UNRESTRICTED, &wait_args(2), 24);
        assert_eq!(retry(&r), None);
        let out = FuseIoctlOut::read_from_prefix(&r[16..]).unwrap().0;
        assert_eq!(out.result, -(Errno::EFAULT as i32));
    }

    #[test]
    fn compat_ioctls_and_oversized_rounds_are_answered_not_retried() {
        let rig = Rig::new(None);
        let r = rig.round(AMDKFD_IOC_GET_VERSION, FUSE_IOCTL_UNRESTRICTED | FUSE_IOCTL_COMPAT, &[], 0);
        assert_eq!(retry(&r), None);
        assert_eq!(FuseIoctlOut::read_from_prefix(&r[16..]).unwrap().0.result, -(Errno::ENOTTY as i32));
        // More events than one transfer holds: ENOMEM rather than a RETRY the kernel refuses.
        let n = MAX_TRANSFER / std::mem::size_of::<EventData>() as u32 + 1;
        let r = rig.round(AMDKFD_IOC_WAIT_EVENTS, FUSE_IOCTL_UNRESTRICTED, &wait_args(n), 24);
        assert_eq!(retry(&r), None);
        assert_eq!(FuseIoctlOut::read_from_prefix(&r[16..]).unwrap().0.result, -(Errno::ENOMEM as i32));
    }

    /// A FUSE_INTERRUPT as `fuse_read_interrupt` (fs/fuse/dev.c, v6.6) writes it: the header's
    /// unique is the request's with FUSE_INT_REQ_BIT set, and it names no process.
    fn interrupt_frame(unique: u64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&48u32.to_le_bytes()); // len: header 40 + fuse_interrupt_in 8
        v.extend_from_slice(&36u32.to_le_bytes()); // opcode: FUSE_INTERRUPT
        v.extend_from_slice(&(unique | 1).to_le_bytes()); // unique | FUSE_INT_REQ_BIT
        v.extend_from_slice(&[0; 8]); // nodeid
        v.extend_from_slice(&[0; 12]); // uid, gid, pid: none
        v.extend_from_slice(&[0; 4]); // total_extlen, padding
        v.extend_from_slice(&unique.to_le_bytes()); // fuse_interrupt_in.unique
        v
    }

    /// A request counts against its caller's uid's share of the readers; an interrupt against
    /// none (it must reach its request at once), nor does a frame too short for a header.
    #[test]
    fn requests_share_readers_by_uid_and_interrupts_by_nothing() {
        let open = frame(FUSE_OPEN, 2, &[FuseOpenIn { flags: 2, open_flags: 0 }.as_bytes()]);
        assert_eq!(frame::share_key(&open), Some(1000));
        assert_eq!(frame::share_key(&interrupt_frame(8)), None);
        assert_eq!(frame::share_key(&open[..20]), None);
    }

    /// The reply that hands interrupt frame `frame` back to the kernel: a bare header, -EAGAIN.
    fn requeue_frame(frame: u64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&16u32.to_le_bytes()); // len
        v.extend_from_slice(&(-11i32).to_le_bytes()); // error: -EAGAIN
        v.extend_from_slice(&frame.to_le_bytes()); // the interrupt frame's unique
        v
    }

    /// GET_VERSION with its out space: runs in one round.
    fn get_version(pid: u32, fh: u64, unique: u64) -> Vec<u8> {
        let io = FuseIoctlIn {
            fh,
            flags: FUSE_IOCTL_UNRESTRICTED,
            cmd: AMDKFD_IOC_GET_VERSION,
            arg: ARG,
            in_size: 0,
            out_size: 8,
        };
        frame_from(pid, FUSE_IOCTL, unique, &[io.as_bytes()])
    }

    /// The ioctl result in a final reply to `unique`.
    fn ioctl_result(reply: &[u8], unique: u64) -> i32 {
        let (head, rest) = FuseOutHeader::read_from_prefix(reply).unwrap();
        assert_eq!((head.unique, head.error), (unique, 0));
        let out = FuseIoctlOut::read_from_prefix(rest).unwrap().0;
        assert_eq!(out.flags & FUSE_IOCTL_RETRY, 0);
        out.result
    }

    /// Client B: another live process (the device binds contexts to live processes).
    struct ClientB {
        child: std::process::Child,
        fh: u64,
    }

    impl ClientB {
        fn open(rig: &Rig) -> ClientB {
            let child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
            let open = FuseOpenIn { flags: 2, open_flags: 0 };
            rig.session.handle(&frame_from(child.id(), FUSE_OPEN, 6, &[open.as_bytes()]));
            let opened = rig.sink.0.lock().pop().unwrap();
            ClientB { fh: FuseOpenOut::read_from_bytes(&opened[16..]).unwrap().fh, child }
        }

        fn pid(&self) -> u32 {
            self.child.id()
        }
    }

    impl Drop for ClientB {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// L2: client B's interrupt races ahead of its request (another reader has read the request
    /// and not registered it yet); then client A sends 1100 requests, each followed by an
    /// interrupt read before its reply and handled after (stale), more than the old global
    /// FIFO of 1024 held. B's request, when it is registered, is still interrupted; A's stale
    /// interrupts are dropped without a reply and the pending set holds B's alone.
    #[test]
    fn l2_stale_interrupts_of_one_client_do_not_evict_anothers() {
        let rig = Rig::new(None);
        let b = ClientB::open(&rig);
        let a = std::process::id();
        rig.session.handle(&interrupt_frame(1000));
        for n in 0..1100u64 {
            let u = 2000 + 2 * n;
            rig.session.handle(&get_version(a, rig.fh, u));
            rig.session.handle(&interrupt_frame(u));
        }
        let sent = std::mem::take(&mut *rig.sink.0.lock());
        assert_eq!(sent.len(), 1100, "one reply per request of A, none for its stale interrupts");
        for (n, reply) in sent.iter().enumerate() {
            assert_eq!(ioctl_result(reply, 2000 + 2 * n as u64), 0);
        }
        assert_eq!(rig.session.pending_interrupts(), 1);
        rig.session.handle(&get_version(b.pid(), b.fh, 1000));
        let reply = rig.sink.0.lock().pop().unwrap();
        assert_eq!(ioctl_result(&reply, 1000), -(Errno::EINTR as i32), "B's interrupt was kept");
        assert_eq!(rig.session.pending_interrupts(), 0);
    }

    /// L2: interrupts for uniques the session never saw (stale beyond what it remembers) stay
    /// bounded: those pushed out are handed back to the kernel (-EAGAIN, byte-exact), oldest
    /// first, never dropped. B's racing interrupt is pushed out by the flood, sent again by the
    /// kernel (its request lives), and still ends B's request.
    #[test]
    fn l2_unknown_interrupts_stay_bounded_and_go_back_to_the_kernel() {
        let rig = Rig::new(None);
        let b = ClientB::open(&rig);
        rig.session.handle(&interrupt_frame(1000));
        let flood = 2000u64;
        for n in 0..flood {
            rig.session.handle(&interrupt_frame(100_000 + 2 * n));
            assert!(rig.session.pending_interrupts() <= super::super::interrupts::MAX_PENDING);
        }
        let sent = std::mem::take(&mut *rig.sink.0.lock());
        let kept = super::super::interrupts::MAX_PENDING as u64;
        let expected: Vec<Vec<u8>> = std::iter::once(1001)
            .chain((0..flood + 1 - kept - 1).map(|n| (100_000 + 2 * n) | 1))
            .map(requeue_frame)
            .collect();
        assert_eq!(sent, expected);
        // The kernel queues B's again (its request is still in the daemon) and a reader reads it.
        rig.session.handle(&interrupt_frame(1000));
        rig.session.handle(&get_version(b.pid(), b.fh, 1000));
        let sent = std::mem::take(&mut *rig.sink.0.lock());
        let reply = sent.last().unwrap();
        assert_eq!(ioctl_result(reply, 1000), -(Errno::EINTR as i32));
        assert!(rig.session.pending_interrupts() <= super::super::interrupts::MAX_PENDING);
    }

    /// Every tid is a thread of this process (two threads of one client).
    struct Threads;

    impl Callers for Threads {
        fn tgid(&self, _tid: u32) -> Option<u32> {
            Some(std::process::id())
        }
        fn is_thread_of(&self, pid: u32, _tid: u32) -> bool {
            pid == std::process::id()
        }
        fn readable(&self, _pid: u32, _addr: u64, _len: u64) -> bool {
            true
        }
    }

    /// A client's open file on a session.
    struct Conn<'a> {
        session: &'a Session,
        sink: &'a Capture,
        fh: u64,
    }

    impl Conn<'_> {
        /// One unrestricted ioctl round of thread `tid` as request `unique`, with `data` in and
        /// `out` bytes of out space; returns the reply (a RETRY or the final one).
        fn round(&self, tid: u32, unique: u64, cmd: u32, data: &[u8], out: u32) -> Vec<u8> {
            self.round_flags(tid, unique, cmd, FUSE_IOCTL_UNRESTRICTED, data, out)
        }

        /// [`Conn::round`] with the ioctl's `flags`.
        fn round_flags(&self, tid: u32, unique: u64, cmd: u32, flags: u32, data: &[u8], out: u32) -> Vec<u8> {
            let io = FuseIoctlIn { fh: self.fh, flags, cmd, arg: ARG, in_size: data.len() as u32, out_size: out };
            self.session.handle(&frame_from(tid, FUSE_IOCTL, unique, &[io.as_bytes(), data]));
            let mut sent = std::mem::take(&mut *self.sink.0.lock());
            assert_eq!(sent.len(), 1, "one reply per round");
            let reply = sent.remove(0);
            assert_eq!(FuseOutHeader::read_from_prefix(&reply).unwrap().0.unique, unique);
            reply
        }
    }

    /// The data of a final ioctl reply (its result must be 0).
    fn final_data(reply: &[u8]) -> Vec<u8> {
        let rest = &reply[std::mem::size_of::<FuseOutHeader>()..];
        let (out, data) = FuseIoctlOut::read_from_prefix(rest).unwrap();
        assert_eq!((out.flags & FUSE_IOCTL_RETRY, out.result), (0, 0));
        data.to_vec()
    }

    /// ROCr's queue destructor over CUSE (see event/tests.rs, which has the table's side): the
    /// async thread's WAIT_EVENTS entered first (unique 100), then the destructor set the event
    /// (110) and waited on it itself (120). Another reader took the async thread's first round
    /// late, after the device had run both of the destructor's requests and the set was
    /// consumed. The async thread's wait still completes: by the kernel's order the set came
    /// after it entered. A wait that entered after the set (130) does not.
    #[test]
    fn a_wait_whose_first_round_is_taken_late_is_woken_by_a_set_queued_after_it() {
        use uapi::ioctl::{AMDKFD_IOC_CREATE_EVENT, AMDKFD_IOC_SET_EVENT};
        use uapi::kfd::{
            CreateEventArgs, SetEventArgs, KFD_IOC_EVENT_SIGNAL, KFD_IOC_WAIT_RESULT_COMPLETE,
            KFD_IOC_WAIT_RESULT_TIMEOUT,
        };
        let device = Device::new(&DeviceConfig::default()).unwrap();
        let sink = Arc::new(Capture::default());
        let session = Session::new(device, sink.clone(), Box::new(Threads), "kfd");
        let me = std::process::id();
        session.handle(&frame(FUSE_OPEN, 2, &[FuseOpenIn { flags: 2, open_flags: 0 }.as_bytes()]));
        let fh = FuseOpenOut::read_from_bytes(&sink.0.lock().pop().unwrap()[16..]).unwrap().fh;
        let conn = Conn { session: &session, sink: &sink, fh };
        let create = CreateEventArgs { event_type: KFD_IOC_EVENT_SIGNAL, auto_reset: 1, ..Default::default() };
        let r = conn.round(me, 10, AMDKFD_IOC_CREATE_EVENT, create.as_bytes(), 32);
        let event_id = CreateEventArgs::read_from_prefix(&final_data(&r)).unwrap().0.event_id;
        let (destroyer, async_thread) = (me, me + 1);
        // A whole WAIT_EVENTS round on the event, timeout 0: its wait_result.
        let wait = |tid: u32, unique: u64| {
            let args = WaitEventsArgs { events_ptr: EVENTS, num_events: 1, timeout: 0, ..Default::default() };
            let mut data = args.as_bytes().to_vec();
            data.extend_from_slice(EventData { event_id, ..Default::default() }.as_bytes());
            let n = data.len() as u32;
            let r = conn.round(tid, unique, AMDKFD_IOC_WAIT_EVENTS, &data, n);
            WaitEventsArgs::read_from_prefix(&final_data(&r)).unwrap().0.wait_result
        };
        let set = SetEventArgs { event_id, pad: 0 };
        final_data(&conn.round(destroyer, 110, AMDKFD_IOC_SET_EVENT, set.as_bytes(), 0));
        assert_eq!(wait(destroyer, 120), KFD_IOC_WAIT_RESULT_COMPLETE, "the destructor's wait consumes the set");
        // The async thread's first round, queued at 100, read only now.
        let first = conn.round(async_thread, 100, AMDKFD_IOC_WAIT_EVENTS, &[], 0);
        assert_ne!(FuseIoctlOut::read_from_prefix(&first[16..]).unwrap().0.flags & FUSE_IOCTL_RETRY, 0);
        assert_eq!(wait(async_thread, 102), KFD_IOC_WAIT_RESULT_COMPLETE, "the set was queued after this wait entered");
        // A wait that entered after the set sleeps (here: times out at once).
        conn.round(async_thread, 130, AMDKFD_IOC_WAIT_EVENTS, &[], 0);
        assert_eq!(wait(async_thread, 132), KFD_IOC_WAIT_RESULT_TIMEOUT);
    }

    /// A caller in another process, whose memory the session reaches directly. A child stands
    /// for it (the device binds a context to a live process); its memory is a [`Memory`].
    struct Remote {
        session: Session,
        sink: Arc<Capture>,
        fh: u64,
        memory: Arc<Memory>,
        child: std::process::Child,
    }

    impl Remote {
        fn new(unreadable: Option<u64>) -> Remote {
            let child = std::process::Command::new("sleep").arg("600").spawn().unwrap();
            let memory = Arc::new(Memory::default());
            let device = Device::new(&DeviceConfig::default()).unwrap();
            let sink = Arc::new(Capture::default());
            let callers = Fake { unreadable, memory: Some(memory.clone()) };
            let session = Session::new(device, sink.clone(), Box::new(callers), "kfd");
            let open = FuseOpenIn { flags: 2, open_flags: 0 };
            session.handle(&frame_from(child.id(), FUSE_OPEN, 2, &[open.as_bytes()]));
            let opened = sink.0.lock().pop().unwrap();
            let fh = FuseOpenOut::read_from_bytes(&opened[16..]).unwrap().fh;
            Remote { session, sink, fh, memory, child }
        }

        /// Sends the first round of `cmd` on `arg` as the kernel does (no data, no out space)
        /// as request `unique`; returns the replies sent meanwhile.
        fn first_round(&self, unique: u64, cmd: u32, arg: u64) -> Vec<Vec<u8>> {
            let io = FuseIoctlIn { fh: self.fh, flags: FUSE_IOCTL_UNRESTRICTED, cmd, arg, in_size: 0, out_size: 0 };
            self.session.handle(&frame_from(self.child.id(), FUSE_IOCTL, unique, &[io.as_bytes()]));
            std::mem::take(&mut *self.sink.0.lock())
        }

        /// An auto-reset signal event made through CREATE_EVENT in its first round (the struct
        /// in and back at ARG); its id.
        fn create_signal_event(&self) -> u32 {
            let create = CreateEventArgs { event_type: KFD_IOC_EVENT_SIGNAL, auto_reset: 1, ..Default::default() };
            self.memory.map(ARG, create.as_bytes(), true);
            assert_eq!(self.call(AMDKFD_IOC_CREATE_EVENT, ARG), 0);
            CreateEventArgs::read_from_bytes(&self.memory.at(ARG, 32)).unwrap().event_id
        }

        /// [`Remote::first_round`] answered at once: the reply's result (its RETRY flag must
        /// be clear and it must carry no data).
        fn call(&self, cmd: u32, arg: u64) -> i32 {
            let mut sent = self.first_round(4, cmd, arg);
            assert_eq!(sent.len(), 1, "one reply");
            dataless_result(&sent.remove(0))
        }
    }

    impl Drop for Remote {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The result of a final ioctl reply that carries no data.
    fn dataless_result(reply: &[u8]) -> i32 {
        let (head, rest) = FuseOutHeader::read_from_prefix(reply).unwrap();
        let (out, data) = FuseIoctlOut::read_from_prefix(rest).unwrap();
        assert_eq!((head.error, out.flags & FUSE_IOCTL_RETRY, data.len()), (0, 0, 0), "a final reply without data");
        out.result
    }

    /// The first round of another process's ioctl runs at once on its memory: one read of it,
    /// one write back, and what reaches the caller is what the RETRY rounds give.
    #[test]
    fn another_processs_ioctl_runs_in_its_first_round_on_its_memory() {
        let remote = Remote::new(None);
        remote.memory.map(ARG, &[0xAA; 8], true);
        assert_eq!(remote.call(AMDKFD_IOC_GET_VERSION, ARG), 0);
        assert_eq!(remote.memory.counts(), (1, 1));
        let rig = Rig::new(None);
        let retried = rig.round(AMDKFD_IOC_GET_VERSION, FUSE_IOCTL_UNRESTRICTED, &[], 8);
        assert_eq!(remote.memory.at(ARG, 8), final_data(&retried), "the same bytes as through RETRY");
    }

    /// Pointer ranges: CREATE_EVENT's struct goes in and back, SET_EVENT's only in, and
    /// WAIT_EVENTS reads its event array (a second read) and writes its result, all in the
    /// first round.
    #[test]
    fn an_ioctls_pointer_ranges_are_read_and_written_in_its_first_round() {
        let remote = Remote::new(None);
        let event = remote.create_signal_event();
        let set = 0x7200_0000;
        remote.memory.map(set, SetEventArgs { event_id: event, pad: 0 }.as_bytes(), false);
        assert_eq!(remote.call(AMDKFD_IOC_SET_EVENT, set), 0, "IOW: nothing to write back");
        let mut wait = WaitEventsArgs::read_from_bytes(&wait_args(1)).unwrap();
        wait.wait_result = 0xFF;
        remote.memory.map(ARG, wait.as_bytes(), true);
        remote.memory.map(EVENTS, EventData { event_id: event, ..Default::default() }.as_bytes(), true);
        let before = remote.memory.counts();
        assert_eq!(remote.call(AMDKFD_IOC_WAIT_EVENTS, ARG), 0);
        let after = remote.memory.counts();
        assert_eq!((after.0 - before.0, after.1 - before.1), (2, 1), "the struct, then the array; one write");
        let done = WaitEventsArgs::read_from_bytes(&remote.memory.at(ARG, 24)).unwrap();
        assert_eq!(done.wait_result, KFD_IOC_WAIT_RESULT_COMPLETE);
    }

    /// A wait that parks in its first round writes its result when it ends, before its reply.
    #[test]
    fn a_parked_first_round_writes_back_when_it_is_woken() {
        let remote = Remote::new(None);
        let event = remote.create_signal_event();
        let mut wait = WaitEventsArgs::read_from_bytes(&wait_args(1)).unwrap();
        (wait.timeout, wait.wait_result) = (u32::MAX, 0xFF);
        remote.memory.map(ARG, wait.as_bytes(), true);
        remote.memory.map(EVENTS, EventData { event_id: event, ..Default::default() }.as_bytes(), true);
        assert!(remote.first_round(10, AMDKFD_IOC_WAIT_EVENTS, ARG).is_empty(), "parked");
        assert_eq!(WaitEventsArgs::read_from_bytes(&remote.memory.at(ARG, 24)).unwrap().wait_result, 0xFF);
        let set = 0x7200_0000;
        remote.memory.map(set, SetEventArgs { event_id: event, pad: 0 }.as_bytes(), false);
        let sent = remote.first_round(12, AMDKFD_IOC_SET_EVENT, set);
        let uniques: Vec<u64> = sent.iter().map(|f| FuseOutHeader::read_from_prefix(f).unwrap().0.unique).collect();
        assert_eq!(uniques, [10, 12], "the woken wait answers before the set that woke it");
        assert_eq!(dataless_result(&sent[0]), 0);
        assert_eq!(
            WaitEventsArgs::read_from_bytes(&remote.memory.at(ARG, 24)).unwrap().wait_result,
            KFD_IOC_WAIT_RESULT_COMPLETE
        );
    }

    /// Where the direct round could not do exactly what the kernel's copies do, the first round
    /// is answered RETRY as before and nothing runs: a range that cannot be read whole (the
    /// RETRY rounds leave it out), or a caller in this very process.
    #[test]
    fn a_first_round_falls_back_to_retry_where_direct_access_would_differ() {
        let remote = Remote::new(Some(EVENTS + 8));
        remote.memory.map(ARG, &wait_args(2), true);
        remote.memory.map(EVENTS, &[0u8; 48], true);
        let mut sent = remote.first_round(4, AMDKFD_IOC_WAIT_EVENTS, ARG);
        assert_eq!(retry(&sent.remove(0)), Some((vec![(ARG, 24)], vec![(ARG, 24)])));
        assert_eq!(remote.memory.counts(), (2, 0), "read, refused, nothing written");

        let memory = Arc::new(Memory::default());
        memory.map(ARG, &[0u8; 8], true);
        let device = Device::new(&DeviceConfig::default()).unwrap();
        let sink = Arc::new(Capture::default());
        let callers = Fake { unreadable: None, memory: Some(memory.clone()) };
        let session = Session::new(device, sink.clone(), Box::new(callers), "kfd");
        session.handle(&frame(FUSE_OPEN, 2, &[FuseOpenIn { flags: 2, open_flags: 0 }.as_bytes()]));
        let fh = FuseOpenOut::read_from_bytes(&sink.0.lock().pop().unwrap()[16..]).unwrap().fh;
        let conn = Conn { session: &session, sink: &sink, fh };
        let r = conn.round(std::process::id(), 4, AMDKFD_IOC_GET_VERSION, &[], 0);
        assert_eq!(retry(&r), Some((vec![], vec![(ARG, 8)])));
        assert_eq!(memory.counts(), (0, 0), "this process's memory is never reached directly");
    }

    /// The copy back failing (a read-only struct) is EFAULT, as the kernel's copy to user.
    #[test]
    fn a_struct_the_caller_cannot_write_fails_with_efault() {
        let remote = Remote::new(None);
        remote.memory.map(ARG, &[0u8; 8], false);
        assert_eq!(remote.call(AMDKFD_IOC_GET_VERSION, ARG), -(Errno::EFAULT as i32));
        assert_eq!(remote.memory.at(ARG, 8), [0u8; 8]);
    }
}
