//! CUSE frame tests against a fake kernel: byte-exact requests in, byte-exact replies out, no
//! /dev/cuse needed.

use cuse_kfd::frontend::cuse::session::{Callers, FrameSink, Session};
use cuse_kfd::{Device, DeviceConfig};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uapi::fuse::*;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::{FromBytes, IntoBytes};

#[derive(Default)]
struct Capture(Mutex<Vec<Vec<u8>>>);

impl FrameSink for Capture {
    fn send(&self, frame: Vec<u8>) {
        self.0.lock().unwrap().push(frame);
    }
}

impl Capture {
    fn take(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// Waits for exactly one more frame (replies of parked waits come from other threads).
    fn one(&self) -> Vec<u8> {
        let t0 = Instant::now();
        loop {
            let mut f = self.take();
            if !f.is_empty() {
                assert_eq!(f.len(), 1, "expected one reply, got {}", f.len());
                return f.remove(0);
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "no reply within 5 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Every thread is its own process in this fake kernel, but for the made-up tids from
/// [`FAKE_THREADS`] on, which are threads of this test process; memory at `unreadable` (if any)
/// is not mapped in any of them.
struct FakeCallers {
    unreadable: Option<u64>,
}

/// Made-up tids of further threads of this test process (above any real pid_max).
const FAKE_THREADS: u32 = 0x4000_0000;

impl Callers for FakeCallers {
    fn tgid(&self, tid: u32) -> Option<u32> {
        Some(if tid >= FAKE_THREADS { pid() } else { tid })
    }
    fn is_thread_of(&self, pid: u32, tid: u32) -> bool {
        pid == tid || (tid >= FAKE_THREADS && pid == self::pid())
    }
    fn readable(&self, _pid: u32, addr: u64, len: u64) -> bool {
        self.unreadable.is_none_or(|bad| bad < addr || bad >= addr + len)
    }
}

struct Kernel {
    session: Session,
    sink: Arc<Capture>,
    next_unique: u64,
}

/// The caller: this test process (the device binds each context to a live process).
fn pid() -> u32 {
    std::process::id()
}

fn header(len: usize, opcode: u32, unique: u64, pid: u32) -> FuseInHeader {
    FuseInHeader { len: len as u32, opcode, unique, nodeid: 0, uid: 1000, gid: 1000, pid, total_extlen: 0, padding: 0 }
}

fn frame(opcode: u32, unique: u64, pid: u32, parts: &[&[u8]]) -> Vec<u8> {
    let len = 40 + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut v = header(len, opcode, unique, pid).as_bytes().to_vec();
    for p in parts {
        v.extend_from_slice(p);
    }
    v
}

impl Kernel {
    fn new() -> Kernel {
        Kernel::with_unreadable(None)
    }

    /// A kernel whose processes cannot read memory at `unreadable`.
    fn with_unreadable(unreadable: Option<u64>) -> Kernel {
        let device = Device::new(&DeviceConfig::default()).unwrap();
        let sink = Arc::new(Capture::default());
        let session = Session::new(device, sink.clone(), Box::new(FakeCallers { unreadable }), "kfd");
        Kernel { session, sink, next_unique: 2 }
    }

    fn unique(&mut self) -> u64 {
        self.next_unique += 2;
        self.next_unique
    }

    fn init(&mut self) {
        let f = frame(CUSE_INIT, 1, 0, &[CuseInitIn { major: 7, minor: 38, unused: 0, flags: 1 }.as_bytes()]);
        self.session.handle(&f);
        self.sink.take();
    }

    fn open(&mut self, pid: u32) -> u64 {
        let u = self.unique();
        self.session.handle(&frame(FUSE_OPEN, u, pid, &[FuseOpenIn { flags: 2, open_flags: 0 }.as_bytes()]));
        let r = self.sink.one();
        FuseOpenOut::read_from_bytes(&r[16..]).unwrap().fh
    }

    #[allow(clippy::too_many_arguments)]
    fn ioctl_frame(&self, unique: u64, pid: u32, fh: u64, cmd: u32, arg: u64, data: &[u8], out_size: u32) -> Vec<u8> {
        let io = FuseIoctlIn { fh, flags: FUSE_IOCTL_UNRESTRICTED, cmd, arg, in_size: data.len() as u32, out_size };
        frame(FUSE_IOCTL, unique, pid, &[io.as_bytes(), data])
    }

    /// Plays the kernel's side of the RETRY protocol: fetches the requested in iovecs from
    /// `mem` (address -> bytes) and returns the final reply frame.
    fn ioctl(&mut self, pid: u32, fh: u64, cmd: u32, arg: u64, mem: &Mem) -> Vec<u8> {
        let mut data = Vec::new();
        let mut out_size = 0;
        for _round in 0..4 {
            let u = self.unique();
            let f = self.ioctl_frame(u, pid, fh, cmd, arg, &data, out_size);
            self.session.handle(&f);
            let r = self.sink.one();
            let Ok((out, _)) = FuseIoctlOut::read_from_prefix(&r[16..]) else {
                return r; // an error reply: header only
            };
            if out.flags & FUSE_IOCTL_RETRY == 0 {
                return r;
            }
            let iovs = <[FuseIoctlIovec]>::ref_from_bytes(&r[32..]).unwrap();
            let (ins, outs) = iovs.split_at(out.in_iovs as usize);
            data = ins.iter().flat_map(|v| mem.read(v.base, v.len as usize)).collect();
            out_size = outs.iter().map(|v| v.len as u32).sum();
        }
        panic!("more than 4 rounds");
    }
}

/// The fake caller's memory.
#[derive(Default)]
struct Mem(Vec<(u64, Vec<u8>)>);

impl Mem {
    fn with(mut self, addr: u64, bytes: &[u8]) -> Mem {
        self.0.push((addr, bytes.to_vec()));
        self
    }
    fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        for (a, b) in &self.0 {
            if *a <= addr && addr + len as u64 <= a + b.len() as u64 {
                let o = (addr - a) as usize;
                return b[o..o + len].to_vec();
            }
        }
        panic!("the fake caller has no memory at {addr:#x}+{len}");
    }
}

fn ioctl_result(r: &[u8]) -> (i32, &[u8]) {
    let hdr = FuseOutHeader::read_from_prefix(r).unwrap().0;
    assert_eq!(hdr.len as usize, r.len());
    assert_eq!(hdr.error, 0);
    let out = FuseIoctlOut::read_from_prefix(&r[16..]).unwrap().0;
    assert_eq!(out.flags, 0, "a final reply");
    (out.result, &r[32..])
}

#[test]
fn init_reply_is_byte_exact() {
    let k = Kernel::new();
    #[rustfmt::skip]
    let request: [u8; 56] = [
        56, 0, 0, 0,             // len
        0x00, 0x10, 0, 0,        // opcode CUSE_INIT (4096)
        1, 0, 0, 0, 0, 0, 0, 0,  // unique 1
        0, 0, 0, 0, 0, 0, 0, 0,  // nodeid
        0, 0, 0, 0, 0, 0, 0, 0,  // uid, gid
        0, 0, 0, 0,              // pid
        0, 0, 0, 0,              // total_extlen, padding
        7, 0, 0, 0,              // major 7
        31, 0, 0, 0,             // minor 31
        0, 0, 0, 0,              // unused
        1, 0, 0, 0,              // flags: CUSE_UNRESTRICTED_IOCTL
    ];
    k.session.handle(&request);
    let mut expected = vec![
        100, 0, 0, 0, // len 16 + 72 + 12
        0, 0, 0, 0, // error
        1, 0, 0, 0, 0, 0, 0, 0, // unique
        7, 0, 0, 0, // major
        31, 0, 0, 0, // minor: the kernel's
        0, 0, 0, 0, // unused
        1, 0, 0, 0, // flags: unrestricted ioctls
        0, 0, 2, 0, // max_read 131072
        0, 0, 2, 0, // max_write 131072
        0, 0, 0, 0, // dev_major: dynamic
        0, 0, 0, 0, // dev_minor
    ];
    expected.extend_from_slice(&[0; 40]); // spare
    expected.extend_from_slice(b"DEVNAME=kfd\0");
    assert_eq!(k.sink.take(), vec![expected]);
    assert!(k.session.is_initialized());
}

#[test]
fn init_with_an_old_protocol_is_refused() {
    let k = Kernel::new();
    k.session.handle(&frame(CUSE_INIT, 1, 0, &[CuseInitIn { major: 7, minor: 12, unused: 0, flags: 1 }.as_bytes()]));
    let r = k.sink.take();
    assert_eq!(
        r,
        vec![[16u32.to_le_bytes(), (-(libc::EPROTO)).to_le_bytes(), [1, 0, 0, 0]]
            .concat()
            .into_iter()
            .chain([0; 4])
            .collect::<Vec<u8>>()]
    );
}

#[test]
fn get_version_takes_one_retry_for_its_out_struct() {
    let mut k = Kernel::new();
    k.init();
    let fh = k.open(pid());
    let arg = 0x7000_0000;
    // Round 1: no data; the reply asks for an out iovec of 8 bytes at arg and no in iovec.
    let f = k.ioctl_frame(10, pid(), fh, AMDKFD_IOC_GET_VERSION, arg, &[], 0);
    k.session.handle(&f);
    let r = k.sink.one();
    let mut expected = FuseOutHeader { len: 48, error: 0, unique: 10 }.as_bytes().to_vec();
    expected.extend_from_slice(FuseIoctlOut { result: 0, flags: FUSE_IOCTL_RETRY, in_iovs: 0, out_iovs: 1 }.as_bytes());
    expected.extend_from_slice(FuseIoctlIovec { base: arg, len: 8 }.as_bytes());
    assert_eq!(r, expected);
    // Round 2 with the out space: the answer, 1.18.
    let f = k.ioctl_frame(12, pid(), fh, AMDKFD_IOC_GET_VERSION, arg, &[], 8);
    k.session.handle(&f);
    let r = k.sink.one();
    let mut expected = FuseOutHeader { len: 40, error: 0, unique: 12 }.as_bytes().to_vec();
    expected.extend_from_slice(FuseIoctlOut::default().as_bytes());
    expected.extend_from_slice(&[1, 0, 0, 0, 18, 0, 0, 0]);
    assert_eq!(r, expected);
}

fn create_signal_event(k: &mut Kernel, fh: u64, auto_reset: bool) -> u32 {
    let arg = 0x5000;
    let args =
        CreateEventArgs { event_type: KFD_IOC_EVENT_SIGNAL, auto_reset: u32::from(auto_reset), ..Default::default() };
    let r = k.ioctl(pid(), fh, AMDKFD_IOC_CREATE_EVENT, arg, &Mem::default().with(arg, args.as_bytes()));
    let (res, data) = ioctl_result(&r);
    assert_eq!(res, 0);
    CreateEventArgs::read_from_bytes(data).unwrap().event_id
}

fn wait_args(ptr: u64, n: u32, timeout: u32) -> WaitEventsArgs {
    WaitEventsArgs { events_ptr: ptr, num_events: n, wait_for_all: 0, timeout, wait_result: 0 }
}

/// An events array the caller cannot read is not asked for (the kernel's copy would fail with
/// EFAULT and copy nothing back): the handler meets it missing and answers as amdkfd does,
/// EFAULT with wait_result FAIL copied back into the argument struct.
#[test]
fn wait_events_on_an_unreadable_array_is_efault_with_fail_copied_back() {
    let ptr = 0x2000u64;
    let mut k = Kernel::with_unreadable(Some(ptr + 8));
    k.init();
    let fh = k.open(pid());
    let _ = create_signal_event(&mut k, fh, false);
    let arg = 0x1000u64;
    let mem = Mem::default().with(arg, wait_args(ptr, 1, 0).as_bytes());
    let f = k.ioctl_frame(20, pid(), fh, AMDKFD_IOC_WAIT_EVENTS, arg, &[], 0);
    k.session.handle(&f);
    let _retry_for_the_struct = k.sink.one();
    let f = k.ioctl_frame(22, pid(), fh, AMDKFD_IOC_WAIT_EVENTS, arg, &mem.read(arg, 24), 24);
    k.session.handle(&f);
    let reply = k.sink.one();
    let (res, out) = ioctl_result(&reply);
    assert_eq!(res, -libc::EFAULT, "no second hop: a final EFAULT");
    assert_eq!(out.len(), 24, "only the argument struct goes back");
    assert_eq!(WaitEventsArgs::read_from_bytes(out).unwrap().wait_result, KFD_IOC_WAIT_RESULT_FAIL);
}

#[test]
fn wait_events_takes_two_hops_and_copies_event_data_back() {
    let mut k = Kernel::new();
    k.init();
    let fh = k.open(pid());
    let id = create_signal_event(&mut k, fh, false);
    let (arg, ptr) = (0x1000u64, 0x2000u64);
    let ev = EventData { event_id: id, payload: [1, 0, 0, 0], ..Default::default() };
    let mem = Mem::default().with(arg, wait_args(ptr, 1, 0).as_bytes()).with(ptr, ev.as_bytes());
    // Round 1: the argument struct in and out.
    let f = k.ioctl_frame(20, pid(), fh, AMDKFD_IOC_WAIT_EVENTS, arg, &[], 0);
    k.session.handle(&f);
    let r = k.sink.one();
    let mut expected = FuseOutHeader { len: 64, error: 0, unique: 20 }.as_bytes().to_vec();
    expected.extend_from_slice(FuseIoctlOut { result: 0, flags: FUSE_IOCTL_RETRY, in_iovs: 1, out_iovs: 1 }.as_bytes());
    expected.extend_from_slice(FuseIoctlIovec { base: arg, len: 24 }.as_bytes());
    expected.extend_from_slice(FuseIoctlIovec { base: arg, len: 24 }.as_bytes());
    assert_eq!(r, expected);
    // Round 2: with the struct, the events array it points at (48 bytes each), both ways.
    let f = k.ioctl_frame(22, pid(), fh, AMDKFD_IOC_WAIT_EVENTS, arg, &mem.read(arg, 24), 24);
    k.session.handle(&f);
    let r = k.sink.one();
    let mut expected = FuseOutHeader { len: 96, error: 0, unique: 22 }.as_bytes().to_vec();
    expected.extend_from_slice(FuseIoctlOut { result: 0, flags: FUSE_IOCTL_RETRY, in_iovs: 2, out_iovs: 2 }.as_bytes());
    for v in [(arg, 24), (ptr, 48), (arg, 24), (ptr, 48)] {
        expected.extend_from_slice(FuseIoctlIovec { base: v.0, len: v.1 }.as_bytes());
    }
    assert_eq!(r, expected);
    // Round 3: everything; an unsignaled event with timeout 0 is a TIMEOUT, data untouched.
    let data = [mem.read(arg, 24), mem.read(ptr, 48)].concat();
    let f = k.ioctl_frame(24, pid(), fh, AMDKFD_IOC_WAIT_EVENTS, arg, &data, 72);
    k.session.handle(&f);
    let reply = k.sink.one();
    let (res, out) = ioctl_result(&reply);
    assert_eq!(res, 0);
    assert_eq!(WaitEventsArgs::read_from_bytes(&out[..24]).unwrap().wait_result, KFD_IOC_WAIT_RESULT_TIMEOUT);
    assert_eq!(&out[24..], ev.as_bytes(), "bytes the device did not write go back as they were");
    // Signaled: COMPLETE, and the event age the caller missed comes back in the payload.
    let set_arg = 0x3000;
    let r = k.ioctl(
        pid(),
        fh,
        AMDKFD_IOC_SET_EVENT,
        set_arg,
        &Mem::default().with(set_arg, SetEventArgs { event_id: id, pad: 0 }.as_bytes()),
    );
    assert_eq!(ioctl_result(&r).0, 0);
    let r = k.ioctl(pid(), fh, AMDKFD_IOC_WAIT_EVENTS, arg, &mem);
    let (res, out) = ioctl_result(&r);
    assert_eq!(res, 0);
    assert_eq!(WaitEventsArgs::read_from_bytes(&out[..24]).unwrap().wait_result, KFD_IOC_WAIT_RESULT_COMPLETE);
    let back = EventData::read_from_bytes(&out[24..]).unwrap();
    assert_eq!(back.event_id, id);
    assert_eq!(back.payload[0], 2, "event age after one set");
}

/// ROCr's AQL queue destructor sets the queue_inactive_signal's auto-reset event and then
/// waits on it itself for the async-events thread's answer. If the async thread's WAIT_EVENTS
/// entered the kernel before that set but its rounds brought the event array only after the
/// destroyer's own wait had consumed the signal, the set must still wake it, as amdkfd's waiter
/// registered on entry is woken: otherwise both threads sleep on the event for ever.
#[test]
fn a_set_between_the_rounds_of_a_wait_wakes_it_though_another_thread_consumed_it() {
    let mut k = Kernel::new();
    k.init();
    let fh = k.open(pid());
    let id = create_signal_event(&mut k, fh, true);
    let async_thread = FAKE_THREADS + 1;
    let (arg, ptr) = (0x1000u64, 0x2000u64);
    let ev = EventData { event_id: id, ..Default::default() };
    // Timeout 0: a wait the set does not reach answers TIMEOUT instead of parking.
    let mem = Mem::default().with(arg, wait_args(ptr, 1, 0).as_bytes()).with(ptr, ev.as_bytes());
    let all = [mem.read(arg, 24), mem.read(ptr, 48)].concat();
    let round = |k: &mut Kernel, data: &[u8], out_size| {
        let u = k.unique();
        k.session.handle(&k.ioctl_frame(u, async_thread, fh, AMDKFD_IOC_WAIT_EVENTS, arg, data, out_size));
        k.sink.one()
    };

    // The async thread's wait enters: round 1 asks for the argument struct.
    let r = round(&mut k, &[], 0);
    assert_ne!(FuseIoctlOut::read_from_prefix(&r[16..]).unwrap().0.flags & FUSE_IOCTL_RETRY, 0);
    // The destroyer sets the event and its own wait consumes the signal.
    let set_arg = 0x3000;
    let set = Mem::default().with(set_arg, SetEventArgs { event_id: id, pad: 0 }.as_bytes());
    assert_eq!(ioctl_result(&k.ioctl(pid(), fh, AMDKFD_IOC_SET_EVENT, set_arg, &set)).0, 0);
    let r = k.ioctl(pid(), fh, AMDKFD_IOC_WAIT_EVENTS, arg, &mem);
    let (res, out) = ioctl_result(&r);
    assert_eq!(res, 0);
    assert_eq!(WaitEventsArgs::read_from_bytes(&out[..24]).unwrap().wait_result, KFD_IOC_WAIT_RESULT_COMPLETE);
    // The async thread's next rounds: the struct, then the array; the set it entered before
    // completes it.
    let r = round(&mut k, &mem.read(arg, 24), 24);
    assert_ne!(FuseIoctlOut::read_from_prefix(&r[16..]).unwrap().0.flags & FUSE_IOCTL_RETRY, 0);
    let r = round(&mut k, &all, 72);
    let (res, out) = ioctl_result(&r);
    assert_eq!(res, 0);
    assert_eq!(
        WaitEventsArgs::read_from_bytes(&out[..24]).unwrap().wait_result,
        KFD_IOC_WAIT_RESULT_COMPLETE,
        "the set made between its rounds wakes the async thread's wait"
    );
    // Its next wait enters after the set: nothing wakes it.
    for (data, out_size) in [(&[][..], 0), (&mem.read(arg, 24)[..], 24)] {
        round(&mut k, data, out_size);
    }
    let r = round(&mut k, &all, 72);
    let (res, out) = ioctl_result(&r);
    assert_eq!(res, 0);
    assert_eq!(WaitEventsArgs::read_from_bytes(&out[..24]).unwrap().wait_result, KFD_IOC_WAIT_RESULT_TIMEOUT);
}

/// Starts an infinite wait on `id` and returns the unique of its last (parked) round.
fn park_wait(k: &mut Kernel, fh: u64, id: u32) -> (u64, Vec<u8>) {
    let (arg, ptr) = (0x1000u64, 0x2000u64);
    let ev = EventData { event_id: id, ..Default::default() };
    let data = [wait_args(ptr, 1, KFD_EVENT_TIMEOUT_INFINITE).as_bytes(), ev.as_bytes()].concat();
    let u = k.unique();
    k.session.handle(&k.ioctl_frame(u, pid(), fh, AMDKFD_IOC_WAIT_EVENTS, arg, &data, 72));
    (u, data)
}

#[test]
fn interrupt_after_the_request_answers_eintr() {
    let mut k = Kernel::new();
    k.init();
    let fh = k.open(pid());
    let id = create_signal_event(&mut k, fh, false);
    let (u, _) = park_wait(&mut k, fh, id);
    std::thread::sleep(Duration::from_millis(20));
    assert!(k.sink.take().is_empty(), "a parked wait does not answer");
    assert_eq!(k.session.device().stats().waiters, 1);
    // FUSE_INTERRUPT has its own unique (U | 1) and names the interrupted request.
    k.session.handle(&frame(FUSE_INTERRUPT, u | 1, 0, &[FuseInterruptIn { unique: u }.as_bytes()]));
    let r = k.sink.one();
    assert_eq!(FuseOutHeader::read_from_prefix(&r).unwrap().0.unique, u, "the reply goes to the interrupted request");
    let (res, out) = ioctl_result(&r);
    assert_eq!(res, -libc::EINTR);
    assert_eq!(WaitEventsArgs::read_from_bytes(&out[..24]).unwrap().wait_result, KFD_IOC_WAIT_RESULT_FAIL);
    assert_eq!(k.session.device().stats().waiters, 0);
    // The caller waits again, and this time it is set.
    let (u2, _) = park_wait(&mut k, fh, id);
    let set_arg = 0x3000;
    let f = {
        let args = SetEventArgs { event_id: id, pad: 0 };
        let u = k.unique();
        k.ioctl_frame(u, pid(), fh, AMDKFD_IOC_SET_EVENT, set_arg, args.as_bytes(), 0)
    };
    k.session.handle(&f);
    let replies = {
        let t0 = Instant::now();
        let mut all = Vec::new();
        while all.len() < 2 && t0.elapsed() < Duration::from_secs(5) {
            all.extend(k.sink.take());
        }
        all
    };
    assert_eq!(replies.len(), 2, "SET_EVENT and the woken wait both answer");
    let woken =
        replies.iter().find(|r| FuseOutHeader::read_from_prefix(r).unwrap().0.unique == u2).expect("wait reply");
    let (res, out) = ioctl_result(woken);
    assert_eq!(res, 0);
    assert_eq!(WaitEventsArgs::read_from_bytes(&out[..24]).unwrap().wait_result, KFD_IOC_WAIT_RESULT_COMPLETE);
}

#[test]
fn interrupt_before_the_request_is_kept_pending() {
    let mut k = Kernel::new();
    k.init();
    let fh = k.open(pid());
    let id = create_signal_event(&mut k, fh, false);
    let u = k.unique();
    k.session.handle(&frame(FUSE_INTERRUPT, u | 1, 0, &[FuseInterruptIn { unique: u }.as_bytes()]));
    assert!(k.sink.take().is_empty(), "an interrupt itself is never answered (never ENOSYS)");
    let (arg, ptr) = (0x1000u64, 0x2000u64);
    let data = [
        wait_args(ptr, 1, KFD_EVENT_TIMEOUT_INFINITE).as_bytes(),
        EventData { event_id: id, ..Default::default() }.as_bytes(),
    ]
    .concat();
    k.session.handle(&k.ioctl_frame(u, pid(), fh, AMDKFD_IOC_WAIT_EVENTS, arg, &data, 72));
    let r = k.sink.one();
    assert_eq!(FuseOutHeader::read_from_prefix(&r).unwrap().0.unique, u);
    assert_eq!(ioctl_result(&r).0, -libc::EINTR);
    assert_eq!(k.session.device().stats().waiters, 0, "it never parked");
}

#[test]
fn release_tears_the_context_down_and_fails_its_waits() {
    let mut k = Kernel::new();
    k.init();
    let fh = k.open(pid());
    let id = create_signal_event(&mut k, fh, false);
    let (u, _) = park_wait(&mut k, fh, id);
    assert_eq!(k.session.device().stats().processes, 1);
    let ru = k.unique();
    k.session.handle(&frame(
        FUSE_RELEASE,
        ru,
        0,
        &[FuseReleaseIn { fh, flags: 2, release_flags: 0, lock_owner: 0 }.as_bytes()],
    ));
    let replies = k.sink.take();
    assert_eq!(replies.len(), 2);
    let wait =
        replies.iter().find(|r| FuseOutHeader::read_from_prefix(r).unwrap().0.unique == u).expect("wait answered");
    let (res, out) = ioctl_result(wait);
    assert_eq!(res, -libc::EIO);
    assert_eq!(WaitEventsArgs::read_from_bytes(&out[..24]).unwrap().wait_result, KFD_IOC_WAIT_RESULT_FAIL);
    let rel =
        replies.iter().find(|r| FuseOutHeader::read_from_prefix(r).unwrap().0.unique == ru).expect("release answered");
    assert_eq!(rel, &FuseOutHeader { len: 16, error: 0, unique: ru }.as_bytes().to_vec());
    assert_eq!(k.session.device().stats(), cuse_kfd::DeviceStats::default());
}

#[test]
fn a_file_used_by_another_process_is_ebadf() {
    let mut k = Kernel::new();
    k.init();
    let fh = k.open(pid());
    let arg = 0x7000;
    let r = k.ioctl(pid() + 1, fh, AMDKFD_IOC_GET_VERSION, arg, &Mem::default());
    assert_eq!(ioctl_result(&r).0, -libc::EBADF);
    let r = k.ioctl(pid(), fh + 100, AMDKFD_IOC_GET_VERSION, arg, &Mem::default());
    let hdr = FuseOutHeader::read_from_prefix(&r).unwrap().0;
    assert_eq!(hdr.error, -libc::EBADF, "an unknown fh");
}

fn error_reply(unique: u64, errno: i32) -> Vec<u8> {
    FuseOutHeader { len: 16, error: -errno, unique }.as_bytes().to_vec()
}

#[test]
fn truncated_and_oversized_frames_are_answered_eio() {
    let k = Kernel::new();
    // The header says 80 bytes, 60 arrived.
    let mut f = frame(FUSE_IOCTL, 30, pid(), &[&[0; 20]]);
    f[0] = 80;
    k.session.handle(&f);
    assert_eq!(k.sink.take(), vec![error_reply(30, libc::EIO)]);
    // The header says 60, 70 arrived.
    let mut f = frame(FUSE_IOCTL, 32, pid(), &[&[0; 30]]);
    f[0] = 60;
    k.session.handle(&f);
    assert_eq!(k.sink.take(), vec![error_reply(32, libc::EIO)]);
    // Consistent length, but an ioctl body shorter than fuse_ioctl_in.
    k.session.handle(&frame(FUSE_IOCTL, 34, pid(), &[&[0; 16]]));
    assert_eq!(k.sink.take(), vec![error_reply(34, libc::EIO)]);
    // in_size says 24 bytes of data, 8 follow.
    let io = FuseIoctlIn {
        fh: 1,
        flags: FUSE_IOCTL_UNRESTRICTED,
        cmd: AMDKFD_IOC_WAIT_EVENTS,
        arg: 0,
        in_size: 24,
        out_size: 0,
    };
    k.session.handle(&frame(FUSE_IOCTL, 36, pid(), &[io.as_bytes(), &[0; 8]]));
    assert_eq!(k.sink.take(), vec![error_reply(36, libc::EIO)]);
    // Too short to even hold a header: nothing to answer.
    k.session.handle(&[1, 2, 3]);
    assert!(k.sink.take().is_empty());
}

#[test]
fn unknown_opcodes_are_enosys_and_unknown_ioctls_enotty() {
    let mut k = Kernel::new();
    k.init();
    // FUSE_LOOKUP (1) never comes for a CUSE device; answer ENOSYS, not silence.
    k.session.handle(&frame(1, 40, pid(), &[b"name\0"]));
    assert_eq!(k.sink.take(), vec![error_reply(40, libc::ENOSYS)]);
    let fh = k.open(pid());
    let f = k.ioctl_frame(42, pid(), fh, ioc(IOC_READ, AMDKFD_IOCTL_BASE, 0x70, 8), 0x1000, &[], 0);
    k.session.handle(&f);
    let reply = k.sink.one();
    let (res, data) = ioctl_result(&reply);
    assert_eq!(res, -libc::ENOTTY);
    assert!(data.is_empty());
    // 32-bit callers: amdkfd has no compat ioctls.
    let io = FuseIoctlIn {
        fh,
        flags: FUSE_IOCTL_UNRESTRICTED | FUSE_IOCTL_COMPAT,
        cmd: AMDKFD_IOC_GET_VERSION,
        arg: 0,
        in_size: 0,
        out_size: 0,
    };
    k.session.handle(&frame(FUSE_IOCTL, 44, pid(), &[io.as_bytes()]));
    assert_eq!(ioctl_result(&k.sink.one()).0, -libc::ENOTTY);
}

#[test]
fn oversized_pointer_ranges_are_refused_not_retried() {
    let mut k = Kernel::new();
    k.init();
    let fh = k.open(pid());
    // 4000 events of 48 bytes exceed the 128 KiB a CUSE ioctl can move.
    let data = wait_args(0x2000, 4000, 0);
    let f = k.ioctl_frame(50, pid(), fh, AMDKFD_IOC_WAIT_EVENTS, 0x1000, data.as_bytes(), 24);
    k.session.handle(&f);
    assert_eq!(ioctl_result(&k.sink.one()).0, -libc::ENOMEM);
}
