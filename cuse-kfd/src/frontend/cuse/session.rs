//! The CUSE server's logic, without I/O: one frame in, reply frames out through a
//! [`FrameSink`], now or later (parked waits answer from whichever thread completes them).
//!
//! Unrestricted ioctls carry no data in their first round: the session answers RETRY with the
//! iovecs the ioctl needs (its argument struct, then every range its pointers name, from the
//! ioctl table's `user_ranges`), and runs the ioctl once a round brings all of them. Ranges the
//! ioctl writes are fetched too, so bytes it does not write go back to the caller unchanged.

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

/// Thread-to-process facts from /proc (faked in frame tests).
pub trait Procfs: Send + Sync {
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
}

/// The real /proc.
pub struct SystemProcfs;

impl Procfs for SystemProcfs {
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

pub struct Session {
    device: Arc<Device>,
    sink: Arc<dyn FrameSink>,
    procfs: Box<dyn Procfs>,
    devname: String,
    initialized: AtomicBool,
    /// Open files: fh -> the process that opened it.
    files: Mutex<HashMap<u64, u32>>,
    interrupts: Arc<Interrupts>,
    entered: Mutex<Entered>,
}

fn iov(base: u64, len: u64) -> FuseIoctlIovec {
    FuseIoctlIovec { base, len }
}

impl Session {
    pub fn new(device: Arc<Device>, sink: Arc<dyn FrameSink>, procfs: Box<dyn Procfs>, devname: &str) -> Session {
        Session::with_interrupts(device, sink, procfs, devname, Interrupts::default())
    }

    fn with_interrupts(
        device: Arc<Device>,
        sink: Arc<dyn FrameSink>,
        procfs: Box<dyn Procfs>,
        devname: &str,
        interrupts: Interrupts,
    ) -> Session {
        let interrupts = Arc::new(interrupts);
        let sink = Arc::new(Tracked { inner: sink, interrupts: interrupts.clone() });
        Session {
            device,
            sink,
            procfs,
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
        self.files.lock().get(&fh).copied().unwrap_or(req.header.pid)
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
        let pid = self.procfs.tgid(h.pid).unwrap_or(h.pid);
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
        self.files.lock().insert(file.0, pid);
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
        let pid = if h.pid == owner || self.procfs.is_thread_of(owner, h.pid) {
            owner
        } else {
            self.procfs.tgid(h.pid).unwrap_or(h.pid)
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
            ranges.retain(|r| r.dir == Direction::Out || self.procfs.readable(pid, r.addr, r.len));
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
        if self.interrupts.is_interrupted(unique) {
            self.sink.send(frame::reply_ioctl(unique, -(Errno::EINTR as i32), &[]));
            return;
        }
        let sink = self.sink.clone();
        let responder = Responder::new(unique, move |reply: Reply| {
            sink.send(final_reply(unique, reply, args_out as usize, out_ranges));
        });
        let entered = if waits { self.take_entry(io.fh, h.pid, io.arg) } else { None };
        let request = ioctl::Request {
            caller,
            cmd: io.cmd,
            data: &data[..args_in as usize],
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
        unsafe { self.device.ioctl(FileId(io.fh), &request, &staged, responder) };
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
    use uapi::ioctl::{AMDKFD_IOC_DESTROY_EVENT, AMDKFD_IOC_GET_VERSION, AMDKFD_IOC_WAIT_EVENTS};
    use uapi::kfd::{EventData, WaitEventsArgs};
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

    /// Each thread its own process; memory at `unreadable` is mapped nowhere.
    struct Fake {
        unreadable: Option<u64>,
    }

    impl Procfs for Fake {
        fn tgid(&self, tid: u32) -> Option<u32> {
            Some(tid)
        }
        fn is_thread_of(&self, pid: u32, tid: u32) -> bool {
            pid == tid
        }
        fn readable(&self, _pid: u32, addr: u64, len: u64) -> bool {
            self.unreadable.is_none_or(|bad| bad < addr || bad >= addr + len)
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
            let session =
                Session::with_interrupts(device, sink.clone(), Box::new(Fake { unreadable }), "kfd", interrupts);
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

    impl Procfs for Threads {
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
}
