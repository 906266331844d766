//! The operation sequences the cargo-fuzz targets run, shared by the targets and the corpus
//! seeder, so that the tests' scenarios seed the corpus: [`DispatchOp`] for `dispatcher` (the ioctl dispatcher through
//! `Device::ioctl`, with caller memory that serves fuzzer bytes) and [`FrameOp`] for
//! `cuse_frames` (the CUSE frame decoder and a session after a valid INIT).
//!
//! Inputs are decoded with `arbitrary` (derived); [`Encode`] is its exact inverse for these
//! types, so seeds written from the test scenarios ([`seeds`]) decode to those scenarios (a test
//! checks the round trip). Both runners end every input by releasing every file and check that
//! the device is empty again: a leak is a crash, as is any panic.

use arbitrary::{Arbitrary, Unstructured};
use cuse_kfd::frontend::cuse::session::{FrameSink, Callers, Session};
use cuse_kfd::ioctl::{Request, UserMemory};
use cuse_kfd::reply::Responder;
use cuse_kfd::{Caller, Device, DeviceConfig, DeviceStats, FileId};
use nix::errno::Errno;
use nix::libc;
use parking_lot::Mutex;
use std::os::fd::AsRawFd;
use std::sync::{Arc, OnceLock};
use uapi::fuse::*;
use uapi::IntoBytes;

/// Operations one input runs at most (longer inputs are cut: keeps each run fast).
pub const MAX_OPS: usize = 64;
/// How many client processes the inputs choose from.
const CLIENTS: usize = 4;

/// The client processes of the inputs: children of this process that only wait for it to end.
/// A context is bound to the process that opens it (its pidfd and its memory), so the clients
/// must be live processes; and they must not be this one, whose memory USERPTR addresses and
/// pointers drawn from the input would then reach. They reach a stand-in's copy of ours instead.
fn stand_ins() -> &'static [u32; CLIENTS] {
    static PIDS: OnceLock<[u32; CLIENTS]> = OnceLock::new();
    PIDS.get_or_init(|| {
        // The stand-ins read the pipe until this process, the only holder of its write end,
        // ends (CLOEXEC: programs this process runs do not keep it open).
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("a pipe for the stand-ins");
        let pids = std::array::from_fn(|_| {
            // SAFETY: the child calls only async-signal-safe functions (close, read, _exit) on
            // descriptors it owns and a byte of its own stack, so the locks other threads of
            // this process held at the fork do not matter.
            match unsafe { nix::unistd::fork() }.expect("forking a stand-in client") {
                nix::unistd::ForkResult::Child => {
                    let mut byte = 0u8;
                    // SAFETY: as above: raw close, read into `byte` (until EOF or an error) and _exit, so the child never
                    // returns into the code of the process it was forked from.
                    unsafe {
                        libc::close(w.as_raw_fd());
                        while libc::read(r.as_raw_fd(), (&raw mut byte).cast(), 1) > 0 {}
                        libc::_exit(0)
                    }
                }
                nix::unistd::ForkResult::Parent { child } => child.as_raw() as u32,
            }
        });
        // Held open for the life of this process.
        std::mem::forget(w);
        pids
    })
}

/// The `n`th client process of an input (`n` modulo [`CLIENTS`]).
fn client_pid(n: u8) -> u32 {
    stand_ins()[usize::from(n) % CLIENTS]
}

/// A request number: a row of the device's table at its own size or another, or any number.
#[derive(Arbitrary, Debug, Clone, PartialEq, Eq)]
pub enum Cmd {
    Row { index: u8, size: Option<u16> },
    Raw(u32),
}

impl Cmd {
    pub fn value(&self) -> u32 {
        use uapi::ioctl::*;
        match self {
            Cmd::Row { index, size } => {
                let rows = cuse_kfd::ioctl::TABLE.len() + 2;
                let i = usize::from(*index) % rows;
                let cmd = match i.checked_sub(cuse_kfd::ioctl::TABLE.len()) {
                    None => cuse_kfd::ioctl::TABLE[i].cmd,
                    Some(0) => uapi::vendor::CUSE_KFD_IOC_GET_RUNTIME_INFO,
                    Some(_) => uapi::vendor::CUSE_KFD_IOC_KICK,
                };
                match size {
                    Some(s) => ioc(ioc_dir(cmd), ioc_type(cmd), ioc_nr(cmd), usize::from(*s) & 0x3FFF),
                    None => cmd,
                }
            }
            Cmd::Raw(v) => *v,
        }
    }
}

/// One step of the `dispatcher` target.
#[derive(Arbitrary, Debug, Clone, PartialEq, Eq)]
pub enum DispatchOp {
    /// Opens a file as simulated process `pid` (modulo 4).
    Open { pid: u8 },
    /// Closes file `file` (modulo the open files).
    Close { file: u8 },
    /// An ioctl on `file`, by its own process or by `as_pid` (an fd passed to another process).
    Ioctl { file: u8, as_pid: Option<u8>, cmd: Cmd, data: Vec<u8> },
    /// Interrupts the `back`-th most recent request.
    Interrupt { back: u8 },
    /// Caller memory behind pointers now serves these bytes (empty: every pointer faults).
    Memory { bytes: Vec<u8> },
}

/// One frame of the `cuse_frames` target.
#[derive(Arbitrary, Debug, Clone, PartialEq, Eq)]
pub enum FrameOp {
    Open {
        pid: u8,
    },
    Release {
        file: u8,
    },
    /// FUSE_IOCTL: `data` is what the kernel fetched; `out_size` what it reserved.
    Ioctl {
        pid: u8,
        file: u8,
        flags: u32,
        cmd: Cmd,
        arg: u64,
        data: Vec<u8>,
        out_size: u16,
    },
    /// FUSE_INTERRUPT of the `back`-th most recent request.
    Interrupt {
        back: u8,
    },
    Read {
        file: u8,
        size: u32,
    },
    Write {
        file: u8,
        data: Vec<u8>,
    },
    Poll {
        file: u8,
    },
    Flush {
        file: u8,
    },
    Init {
        major: u32,
        minor: u32,
        flags: u32,
    },
    /// Any opcode with any body.
    Other {
        opcode: u32,
        body: Vec<u8>,
    },
    /// A frame as bytes: its header may lie about its length.
    Raw {
        bytes: Vec<u8>,
    },
}

/// Decodes an input into at most [`MAX_OPS`] operations (what the targets run).
pub fn decode<'a, T: Arbitrary<'a>>(data: &'a [u8]) -> Vec<T> {
    let u = Unstructured::new(data);
    let mut v: Vec<T> = Vec::new();
    if let Ok(iter) = u.arbitrary_take_rest_iter::<T>() {
        for op in iter {
            match op {
                Ok(op) if v.len() < MAX_OPS => v.push(op),
                _ => break,
            }
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// The inverse of the derived Arbitrary impls, for seeds.

/// Writes a value so that `arbitrary` reads it back.
pub trait Encode {
    fn encode(&self, out: &mut Vec<u8>);
}

macro_rules! encode_int {
    ($($t:ty),*) => {$(
        impl Encode for $t {
            fn encode(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
encode_int!(u8, u16, u32, u64);

impl<T: Encode> Encode for Option<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                v.encode(out);
            }
        }
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        for v in self {
            out.push(1);
            v.encode(out);
        }
        out.push(0);
    }
}

/// The u32 that derived `Arbitrary` maps to variant `index` of `count`.
fn variant(index: u64, count: u64, out: &mut Vec<u8>) {
    let v = (index << 32).div_ceil(count);
    (v as u32).encode(out);
}

impl Encode for Cmd {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Cmd::Row { index, size } => {
                variant(0, 2, out);
                index.encode(out);
                size.encode(out);
            }
            Cmd::Raw(v) => {
                variant(1, 2, out);
                v.encode(out);
            }
        }
    }
}

impl Encode for DispatchOp {
    fn encode(&self, out: &mut Vec<u8>) {
        const N: u64 = 5;
        match self {
            DispatchOp::Open { pid } => {
                variant(0, N, out);
                pid.encode(out);
            }
            DispatchOp::Close { file } => {
                variant(1, N, out);
                file.encode(out);
            }
            DispatchOp::Ioctl { file, as_pid, cmd, data } => {
                variant(2, N, out);
                file.encode(out);
                as_pid.encode(out);
                cmd.encode(out);
                data.encode(out);
            }
            DispatchOp::Interrupt { back } => {
                variant(3, N, out);
                back.encode(out);
            }
            DispatchOp::Memory { bytes } => {
                variant(4, N, out);
                bytes.encode(out);
            }
        }
    }
}

impl Encode for FrameOp {
    fn encode(&self, out: &mut Vec<u8>) {
        const N: u64 = 11;
        match self {
            FrameOp::Open { pid } => {
                variant(0, N, out);
                pid.encode(out);
            }
            FrameOp::Release { file } => {
                variant(1, N, out);
                file.encode(out);
            }
            FrameOp::Ioctl { pid, file, flags, cmd, arg, data, out_size } => {
                variant(2, N, out);
                pid.encode(out);
                file.encode(out);
                flags.encode(out);
                cmd.encode(out);
                arg.encode(out);
                data.encode(out);
                out_size.encode(out);
            }
            FrameOp::Interrupt { back } => {
                variant(3, N, out);
                back.encode(out);
            }
            FrameOp::Read { file, size } => {
                variant(4, N, out);
                file.encode(out);
                size.encode(out);
            }
            FrameOp::Write { file, data } => {
                variant(5, N, out);
                file.encode(out);
                data.encode(out);
            }
            FrameOp::Poll { file } => {
                variant(6, N, out);
                file.encode(out);
            }
            FrameOp::Flush { file } => {
                variant(7, N, out);
                file.encode(out);
            }
            FrameOp::Init { major, minor, flags } => {
                variant(8, N, out);
                major.encode(out);
                minor.encode(out);
                flags.encode(out);
            }
            FrameOp::Other { opcode, body } => {
                variant(9, N, out);
                opcode.encode(out);
                body.encode(out);
            }
            FrameOp::Raw { bytes } => {
                variant(10, N, out);
                bytes.encode(out);
            }
        }
    }
}

/// The bytes that decode to `ops`.
pub fn encode<T: Encode>(ops: &[T]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        out.push(1);
        op.encode(&mut out);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The device both targets drive.

/// One device for the whole fuzzing process (creating one per input would dominate the run);
/// every input leaves it empty, which the runners check.
pub fn device() -> &'static Arc<Device> {
    static DEVICE: OnceLock<Arc<Device>> = OnceLock::new();
    DEVICE.get_or_init(|| Device::new(&DeviceConfig::default()).expect("creating the device"))
}

/// One input at a time on the shared device (tests run on several threads).
static RUN: Mutex<()> = Mutex::new(());

fn assert_empty(device: &Device) {
    let s = device.stats();
    assert_eq!(s, DeviceStats::default(), "every file is closed but the device still holds objects");
}

/// Caller memory that serves the input's bytes at every address but null (a fault).
struct FuzzMemory(Vec<u8>);

impl UserMemory for FuzzMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        if addr == 0 || self.0.is_empty() || addr.checked_add(buf.len() as u64).is_none() {
            return Err(Errno::EFAULT);
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.0[(addr as usize).wrapping_add(i) % self.0.len()];
        }
        Ok(())
    }
}

fn caller(pid: u8) -> Caller {
    let pid = client_pid(pid);
    Caller { pid, tid: pid, uid: 0, gid: 0 }
}

/// Runs `ops` through `Device::ioctl`, then releases everything and checks nothing is left.
pub fn run_dispatch(ops: &[DispatchOp]) {
    let _one = RUN.lock();
    let device = device();
    let mut files: Vec<(FileId, Caller)> = Vec::new();
    let mut tags: Vec<u64> = Vec::new();
    let mut memory = FuzzMemory(vec![0x5A; 64]);
    for (n, op) in ops.iter().enumerate() {
        match op {
            DispatchOp::Open { pid } => {
                let c = caller(*pid);
                files.push((device.open(c).expect("opening as a stand-in client"), c));
            }
            DispatchOp::Close { file } if !files.is_empty() => {
                let (f, _) = files.remove(usize::from(*file) % files.len());
                device.release(f);
            }
            DispatchOp::Ioctl { file, as_pid, cmd, data } if !files.is_empty() => {
                let (f, owner) = files[usize::from(*file) % files.len()];
                let c = as_pid.map_or(owner, caller);
                let tag = 1_000_000 + n as u64;
                tags.push(tag);
                // Replies (parked ones later, from other threads) are dropped: a reply that is
                // never sent would answer EIO and log, which is all a front end could notice.
                let responder = Responder::new(tag, |_| {});
                // SAFETY: every context is bound to a stand-in (`Device::open` binds it to the
                // caller's pid), never this process: the device reads argument pointers only
                // through `memory` (a copy), and the USERPTR ranges it touches are in that other
                // process's memory, no soundness concern.
                unsafe { device.ioctl(f, &Request { caller: c, cmd: cmd.value(), data, tag, entered: None, queued: None }, &memory, responder) };
            }
            DispatchOp::Interrupt { back } if !tags.is_empty() => {
                let i = tags.len() - 1 - usize::from(*back) % tags.len();
                device.interrupt(tags[i]);
            }
            DispatchOp::Memory { bytes } => memory = FuzzMemory(bytes.clone()),
            _ => {}
        }
    }
    for (f, _) in files {
        device.release(f);
    }
    assert_empty(device);
}

/// Reply frames, checked for shape as they come (out header length = frame length).
#[derive(Default)]
pub struct Capture(pub Mutex<Vec<Vec<u8>>>);

impl FrameSink for Capture {
    fn send(&self, frame: Vec<u8>) {
        assert!(frame.len() >= 16, "a reply frame shorter than its header");
        let len = u32::from_le_bytes(frame[..4].try_into().expect("4 bytes"));
        assert_eq!(len as usize, frame.len(), "a reply frame whose header says {len} bytes");
        self.0.lock().push(frame);
    }
}

/// Every thread is its own process.
struct FakeCallers;

impl Callers for FakeCallers {
    fn tgid(&self, tid: u32) -> Option<u32> {
        Some(tid)
    }
    fn is_thread_of(&self, pid: u32, tid: u32) -> bool {
        pid == tid
    }
}

fn frame(opcode: u32, unique: u64, pid: u32, parts: &[&[u8]]) -> Vec<u8> {
    let len = std::mem::size_of::<FuseInHeader>() + parts.iter().map(|p| p.len()).sum::<usize>();
    let h =
        FuseInHeader { len: len as u32, opcode, unique, nodeid: 0, uid: 0, gid: 0, pid, total_extlen: 0, padding: 0 };
    let mut v = h.as_bytes().to_vec();
    for p in parts {
        v.extend_from_slice(p);
    }
    v
}

/// Feeds `ops` as frames to a session (after a valid INIT), with every frame also decoded on
/// its own; then releases every file and checks nothing is left.
pub fn run_frames(ops: &[FrameOp]) {
    let _one = RUN.lock();
    let device = device();
    let sink = Arc::new(Capture::default());
    let session = Session::new(device.clone(), sink.clone(), Box::new(FakeCallers), "kfd-fuzz");
    let init = CuseInitIn { major: FUSE_KERNEL_VERSION, minor: 38, unused: 0, flags: 1 };
    session.handle(&frame(CUSE_INIT, 1, 0, &[init.as_bytes()]));
    let mut unique = 2u64;
    let mut files: Vec<u64> = Vec::new();
    let fh = |files: &[u64], i: u8| if files.is_empty() { u64::from(i) } else { files[usize::from(i) % files.len()] };
    for op in ops {
        unique += 2;
        let pid = client_pid;
        let f = match op {
            FrameOp::Open { pid: p } => {
                frame(FUSE_OPEN, unique, pid(*p), &[FuseOpenIn { flags: 2, open_flags: 0 }.as_bytes()])
            }
            FrameOp::Release { file } => {
                let r = FuseReleaseIn { fh: fh(&files, *file), ..Default::default() };
                files.retain(|x| *x != r.fh);
                frame(FUSE_RELEASE, unique, 0, &[r.as_bytes()])
            }
            FrameOp::Ioctl { pid: p, file, flags, cmd, arg, data, out_size } => {
                let io = FuseIoctlIn {
                    fh: fh(&files, *file),
                    flags: *flags,
                    cmd: cmd.value(),
                    arg: *arg,
                    in_size: data.len() as u32,
                    out_size: u32::from(*out_size),
                };
                frame(FUSE_IOCTL, unique, pid(*p), &[io.as_bytes(), data])
            }
            FrameOp::Interrupt { back } => {
                let target = unique.saturating_sub(2 * (1 + u64::from(*back)));
                frame(FUSE_INTERRUPT, unique, 0, &[FuseInterruptIn { unique: target }.as_bytes()])
            }
            FrameOp::Read { file, size } => {
                let r = FuseReadIn { fh: fh(&files, *file), size: *size, ..Default::default() };
                frame(FUSE_READ, unique, 0, &[r.as_bytes()])
            }
            FrameOp::Write { file, data } => {
                let w = FuseWriteIn { fh: fh(&files, *file), size: data.len() as u32, ..Default::default() };
                frame(FUSE_WRITE, unique, 0, &[w.as_bytes(), data])
            }
            FrameOp::Poll { file } => {
                frame(FUSE_POLL, unique, 0, &[FusePollIn { fh: fh(&files, *file), ..Default::default() }.as_bytes()])
            }
            FrameOp::Flush { file } => frame(FUSE_FLUSH, unique, 0, &[&fh(&files, *file).to_le_bytes(), &[0u8; 16]]),
            FrameOp::Init { major, minor, flags } => frame(
                CUSE_INIT,
                unique,
                0,
                &[CuseInitIn { major: *major, minor: *minor, unused: 0, flags: *flags }.as_bytes()],
            ),
            FrameOp::Other { opcode, body } => frame(*opcode, unique, 0, &[body]),
            FrameOp::Raw { bytes } => bytes.clone(),
        };
        let _ = cuse_kfd::frontend::cuse::frame::decode(&f);
        session.handle(&f);
        if let FrameOp::Open { .. } = op {
            let replies = sink.0.lock();
            if let Some(r) = replies.last().filter(|r| r.len() >= 24) {
                files.push(u64::from_le_bytes(r[16..24].try_into().expect("8 bytes")));
            }
        }
    }
    for fh in files {
        unique += 2;
        session.handle(&frame(FUSE_RELEASE, unique, 0, &[FuseReleaseIn { fh, ..Default::default() }.as_bytes()]));
    }
    // A frame may have opened files behind the fuzzer's back (a Raw OPEN): shut the session
    // down, which releases them, then check.
    session.shutdown();
    assert_empty(device);
}

/// Seeds from the test scenarios (cuse-kfd/tests: ioctls, isolation, events, cuse_frames):
/// (target, name, input bytes).
pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    use uapi::ioctl::*;
    use uapi::kfd::*;
    let row = |cmd: u32| Cmd::Row { index: (ioc_nr(cmd) - 1) as u8, size: None };
    let ioctl = |file: u8, cmd: u32, data: Vec<u8>| DispatchOp::Ioctl { file, as_pid: None, cmd: row(cmd), data };
    let gpu = device().topology().gpus()[0].gpu_id;
    let va = 0x10_0000_0000u64;
    let alloc = |flags: u32, va: u64| {
        AllocMemoryOfGpuArgs { va_addr: va, size: 0x2000, handle: 0, mmap_offset: 0, gpu_id: gpu, flags }
            .as_bytes()
            .to_vec()
    };
    let handle = u64::from(gpu) << 32 | 1;
    let ids = gpu.to_le_bytes().to_vec();
    let map =
        MapMemoryToGpuArgs { handle, device_ids_array_ptr: 0x1000, n_devices: 1, n_success: 0 }.as_bytes().to_vec();
    let queue = CreateQueueArgs {
        ring_base_address: va,
        write_pointer_address: va + 0x1000,
        read_pointer_address: va + 0x1008,
        ring_size: 4096,
        gpu_id: gpu,
        queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    };
    let event = CreateEventArgs { event_type: KFD_IOC_EVENT_SIGNAL, auto_reset: 1, ..Default::default() };
    let wait = WaitEventsArgs { events_ptr: 0x2000, num_events: 1, wait_for_all: 0, timeout: 10, wait_result: 0 };
    let ev_data = EventData { event_id: 1, ..Default::default() };
    let lifecycle = vec![
        DispatchOp::Open { pid: 0 },
        ioctl(0, AMDKFD_IOC_GET_VERSION, vec![0; 8]),
        ioctl(
            0,
            AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
            alloc(KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, va),
        ),
        DispatchOp::Memory { bytes: ids.clone() },
        ioctl(0, AMDKFD_IOC_MAP_MEMORY_TO_GPU, map.clone()),
        ioctl(0, AMDKFD_IOC_CREATE_QUEUE, queue.as_bytes().to_vec()),
        ioctl(0, AMDKFD_IOC_CREATE_EVENT, event.as_bytes().to_vec()),
        DispatchOp::Memory { bytes: ev_data.as_bytes().to_vec() },
        ioctl(0, AMDKFD_IOC_WAIT_EVENTS, wait.as_bytes().to_vec()),
        ioctl(0, AMDKFD_IOC_SET_EVENT, SetEventArgs { event_id: 1, pad: 0 }.as_bytes().to_vec()),
        ioctl(0, AMDKFD_IOC_DESTROY_QUEUE, DestroyQueueArgs { queue_id: 0, pad: 0 }.as_bytes().to_vec()),
        DispatchOp::Memory { bytes: ids.clone() },
        ioctl(0, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, map.clone()),
        ioctl(0, AMDKFD_IOC_FREE_MEMORY_OF_GPU, FreeMemoryOfGpuArgs { handle }.as_bytes().to_vec()),
        DispatchOp::Close { file: 0 },
    ];
    let isolation = vec![
        DispatchOp::Open { pid: 0 },
        DispatchOp::Open { pid: 1 },
        ioctl(0, AMDKFD_IOC_CREATE_EVENT, event.as_bytes().to_vec()),
        DispatchOp::Memory { bytes: ev_data.as_bytes().to_vec() },
        DispatchOp::Ioctl {
            file: 0,
            as_pid: None,
            cmd: row(AMDKFD_IOC_WAIT_EVENTS),
            data: WaitEventsArgs { timeout: KFD_EVENT_TIMEOUT_INFINITE, ..wait }.as_bytes().to_vec(),
        },
        ioctl(1, AMDKFD_IOC_SET_EVENT, SetEventArgs { event_id: 1, pad: 0 }.as_bytes().to_vec()),
        DispatchOp::Ioctl { file: 0, as_pid: Some(1), cmd: row(AMDKFD_IOC_GET_VERSION), data: vec![0; 8] },
        DispatchOp::Interrupt { back: 2 },
        DispatchOp::Close { file: 0 },
    ];
    let every_row: Vec<DispatchOp> = std::iter::once(DispatchOp::Open { pid: 2 })
        .chain(ALL.iter().map(|d| ioctl(0, d.cmd, vec![0; ioc_size(d.cmd)])))
        .collect();
    let mut out = vec![
        ("dispatcher", "lifecycle".to_string(), encode(&lifecycle)),
        ("dispatcher", "isolation".to_string(), encode(&isolation)),
        ("dispatcher", "every-row".to_string(), encode(&every_row)),
    ];
    // CUSE: open, an ioctl in its RETRY rounds (none, then with the struct), interrupt, release.
    let version_round = |data: Vec<u8>, out_size: u16| FrameOp::Ioctl {
        pid: 0,
        file: 0,
        flags: FUSE_IOCTL_UNRESTRICTED,
        cmd: row(AMDKFD_IOC_GET_VERSION),
        arg: 0x7000,
        data,
        out_size,
    };
    let wait_round = FrameOp::Ioctl {
        pid: 0,
        file: 0,
        flags: FUSE_IOCTL_UNRESTRICTED,
        cmd: row(AMDKFD_IOC_WAIT_EVENTS),
        arg: 0x7000,
        data: [wait.as_bytes(), ev_data.as_bytes()].concat(),
        out_size: 72,
    };
    let frames = vec![
        FrameOp::Open { pid: 0 },
        version_round(Vec::new(), 0),
        version_round(Vec::new(), 8),
        FrameOp::Ioctl {
            pid: 0,
            file: 0,
            flags: FUSE_IOCTL_UNRESTRICTED,
            cmd: row(AMDKFD_IOC_CREATE_EVENT),
            arg: 0x7000,
            data: event.as_bytes().to_vec(),
            out_size: 32,
        },
        wait_round,
        FrameOp::Interrupt { back: 0 },
        FrameOp::Write { file: 0, data: vec![1; 8] },
        FrameOp::Poll { file: 0 },
        FrameOp::Read { file: 0, size: 4096 },
        FrameOp::Flush { file: 0 },
        FrameOp::Release { file: 0 },
    ];
    out.push(("cuse_frames", "session".to_string(), encode(&frames)));
    let odd = vec![
        FrameOp::Init { major: 7, minor: 1, flags: 0 },
        FrameOp::Other { opcode: 9999, body: vec![0; 8] },
        FrameOp::Raw { bytes: vec![0xFF; 40] },
        FrameOp::Open { pid: 1 },
        FrameOp::Ioctl {
            pid: 2,
            file: 0,
            flags: FUSE_IOCTL_COMPAT,
            cmd: Cmd::Raw(0),
            arg: 0,
            data: Vec::new(),
            out_size: 0,
        },
    ];
    out.push(("cuse_frames", "odd-frames".to_string(), encode(&odd)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_decode_to_their_scenarios_and_run_clean() {
        for (target, name, bytes) in seeds() {
            match target {
                "dispatcher" => {
                    let ops: Vec<DispatchOp> = decode(&bytes);
                    assert!(!ops.is_empty(), "{name}");
                    assert_eq!(encode(&ops), bytes, "{name} round trip");
                    run_dispatch(&ops);
                }
                _ => {
                    let ops: Vec<FrameOp> = decode(&bytes);
                    assert!(!ops.is_empty(), "{name}");
                    assert_eq!(encode(&ops), bytes, "{name} round trip");
                    run_frames(&ops);
                }
            }
        }
    }

    #[test]
    fn garbage_inputs_run_clean() {
        for seed in 0..200u64 {
            let bytes: Vec<u8> =
                (0..512u64).map(|i| (seed.wrapping_mul(0x9E37_79B9).wrapping_add(i * 31) >> 3) as u8).collect();
            run_dispatch(&decode::<DispatchOp>(&bytes));
            run_frames(&decode::<FrameOp>(&bytes));
        }
    }
}
