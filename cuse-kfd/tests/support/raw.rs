//! Shared helpers of the cuse-kfd integration tests: a device with its own runtime directory,
//! typed wrappers for the ioctls the tests repeat (buffers, queues, events, waits), and access
//! to the backing files a client would map.
//!
//! Every helper that expects success panics with the request's name and errno, so a failing
//! setup step points at itself.

use cuse_kfd::frontend::embedded::PendingIoctl;
use cuse_kfd::ioctl::{Request, UserMemory};
use cuse_kfd::memory::backing::{backing_path, MmapSpace};
use cuse_kfd::memory::remote;
use cuse_kfd::reply::{Reply, Responder};
use cuse_kfd::{Caller, DeviceConfig, DeviceStats, Embedded, EmbeddedFile};
use nix::errno::Errno;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::{FromBytes, Immutable, IntoBytes};

/// First GPU VA the helpers hand out (well inside the GPUVM aperture).
pub const FIRST_VA: u64 = 0x1_0000_0000;
/// Pids above the kernel's pid_max limit (2^22): no real process can have them.
pub const FAKE_PID: u32 = 5_000_000;
/// The longest any reply may take before a test calls it a hang.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The device the tests talk to: embedded in this process with a fresh runtime directory
/// (removed at the end), or a `cuse-kfd serve` node reached through the kernel.
pub struct Rig {
    dev: RigDevice,
    /// The device's runtime directory: backing files and the topology tree.
    pub root: PathBuf,
}

enum RigDevice {
    Embedded(Embedded),
    /// The node (/dev/<name>) of a daemon that someone else started and stops.
    Node(PathBuf),
}

impl Rig {
    pub fn new() -> Rig {
        Rig::with_gpus(1)
    }

    pub fn with_gpus(gpus: usize) -> Rig {
        Rig::with_config(&DeviceConfig { gpus, ..DeviceConfig::default() })
    }

    pub fn with_config(config: &DeviceConfig) -> Rig {
        let emb = Embedded::new(config).expect("creating the device");
        let root = emb.device().backing().root().to_owned();
        Rig { dev: RigDevice::Embedded(emb), root }
    }

    /// The node of a running daemon whose runtime directory is `runtime_dir`; stats come from
    /// its control socket (root only). Dropping the rig leaves the daemon and its files alone.
    pub fn node(node: &Path, runtime_dir: &Path) -> Rig {
        Rig { dev: RigDevice::Node(node.to_owned()), root: runtime_dir.to_owned() }
    }

    /// The embedded device (the tests that look inside it run only embedded).
    pub fn emb(&self) -> &Embedded {
        match &self.dev {
            RigDevice::Embedded(emb) => emb,
            RigDevice::Node(node) => panic!("{} is a node, not an embedded device", node.display()),
        }
    }

    /// Opens the device as this (real) process: pointers and USERPTR pages are its own.
    pub fn open(&self) -> Client {
        match &self.dev {
            RigDevice::Embedded(emb) => {
                self.client(ClientFile::Embedded(emb.open().expect("opening the embedded device")))
            }
            RigDevice::Node(node) => {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(node)
                    .unwrap_or_else(|e| panic!("opening {}: {e}", node.display()));
                self.client(ClientFile::Node(f))
            }
        }
    }

    /// Opens the device as another simulated process (`pid` is not a real process; its
    /// pointer arguments still point into this process).
    pub fn open_as(&self, pid: u32) -> Client {
        self.client(ClientFile::Embedded(self.emb().open_as(fake_caller(pid)).expect("opening as a simulated client")))
    }

    /// Opens the device as simulated process `pid` of user and group `uid`.
    pub fn open_as_uid(&self, pid: u32, uid: u32) -> Client {
        let caller = Caller { uid, gid: uid, ..fake_caller(pid) };
        self.client(ClientFile::Embedded(self.emb().open_as(caller).expect("opening as a simulated client")))
    }

    /// Opens the embedded device as the real process `pid` (a child of the test): the context
    /// is bound to that process's life and memory.
    pub fn open_process(&self, pid: u32) -> Client {
        let file = self.emb().open_process(fake_caller(pid)).expect("opening as a real process");
        self.client(ClientFile::Embedded(file))
    }

    /// As [`Rig::open_process`], the requests carrying user and group `uid`.
    pub fn open_process_as_uid(&self, pid: u32, uid: u32) -> Client {
        let caller = Caller { uid, gid: uid, ..fake_caller(pid) };
        self.client(ClientFile::Embedded(self.emb().open_process(caller).expect("opening as a real process")))
    }

    fn client(&self, file: ClientFile) -> Client {
        Client { file, gpu: self.gpu(), next_va: AtomicU64::new(FIRST_VA) }
    }

    pub fn stats(&self) -> DeviceStats {
        match &self.dev {
            RigDevice::Embedded(emb) => emb.device().stats(),
            RigDevice::Node(_) => {
                let text = cuse_kfd::frontend::control::request(&self.root, "stats").expect("the daemon's stats");
                cuse_kfd::frontend::control::parse_stats(&text).unwrap_or_else(|e| panic!("the daemon's stats: {e}"))
            }
        }
    }

    pub fn gpu_ids(&self) -> Vec<u32> {
        match &self.dev {
            RigDevice::Embedded(emb) => emb.device().topology().gpus().iter().map(|g| g.gpu_id).collect(),
            RigDevice::Node(_) => self.tree_gpus().into_iter().map(|(id, _)| id).collect(),
        }
    }

    /// The first GPU's id.
    pub fn gpu(&self) -> u32 {
        self.gpu_ids()[0]
    }

    pub fn vram_size(&self) -> u64 {
        match &self.dev {
            RigDevice::Embedded(emb) => emb.device().topology().gpus()[0].profile.vram_size,
            RigDevice::Node(_) => self.tree_gpus()[0].1,
        }
    }

    /// The GPUs of the daemon's topology tree (`<root>/topology`), by node id: gpu_id and the
    /// size of the first memory bank (VRAM).
    fn tree_gpus(&self) -> Vec<(u32, u64)> {
        let nodes = self.root.join("topology/nodes");
        let read = |p: PathBuf| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let mut ids: Vec<u32> = std::fs::read_dir(&nodes)
            .unwrap_or_else(|e| panic!("{}: {e}", nodes.display()))
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        ids.sort_unstable();
        let mut gpus = Vec::new();
        for n in ids {
            let dir = nodes.join(n.to_string());
            let gpu_id: u32 = read(dir.join("gpu_id")).trim().parse().expect("a gpu_id");
            if gpu_id == 0 {
                continue;
            }
            let bank = cuse_kfd::topology::parse_properties(&read(dir.join("mem_banks/0/properties")))
                .expect("mem bank properties");
            gpus.push((gpu_id, bank.get("size_in_bytes").expect("size_in_bytes")));
        }
        assert!(!gpus.is_empty(), "no GPU in {}", nodes.display());
        gpus
    }

    /// Where a client's backing file for `offset` lives (the scheme of memory/backing.rs).
    pub fn backing(&self, pid: u32, space: MmapSpace, offset: u64) -> PathBuf {
        backing_path(&self.root, pid, space, offset)
    }

    /// The directory of all of a client's backing files.
    pub fn client_dir(&self, pid: u32) -> PathBuf {
        self.root.join(pid.to_string())
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if matches!(self.dev, RigDevice::Embedded(_)) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

pub fn fake_caller(pid: u32) -> Caller {
    let me = Caller::current();
    Caller { pid, tid: pid, uid: me.uid, gid: me.gid }
}

/// Backing files under `dir`, recursively (the device's own topology tree and peer socket do
/// not count).
pub fn count_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name() != "topology" && e.file_name() != cuse_kfd::peer::SOCKET_NAME)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => count_files(&e.path()),
            Ok(_) => 1,
            Err(_) => 0,
        })
        .sum()
}

/// Kinds of memory the helpers allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mem {
    Vram,
    Gtt,
}

impl Mem {
    pub fn flags(self) -> u32 {
        match self {
            Mem::Vram => KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
            Mem::Gtt => KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        }
    }
}

/// An allocated buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buf {
    pub handle: u64,
    pub va: u64,
    pub size: u64,
    pub mmap_offset: u64,
    pub gpu: u32,
}

/// A queue with its ring and pointer buffers.
#[derive(Debug, Clone, Copy)]
pub struct Queue {
    pub id: u32,
    pub doorbell_offset: u64,
    pub ring: Buf,
    pub ptrs: Buf,
}

/// Ring size the helpers use: 64 AQL packets.
pub const RING_SIZE: u32 = 4096;

/// What a WAIT_EVENTS returned.
#[derive(Debug)]
pub struct Waited {
    pub result: Result<(), Errno>,
    pub wait_result: u32,
    pub data: Vec<EventData>,
}

/// A WAIT_EVENTS started with `start`: its argument struct and event array stay alive (at a
/// fixed address) until the reply has been applied.
pub struct Parked {
    pub pending: PendingIoctl,
    args: WaitEventsArgs,
    data: Box<[EventData]>,
}

impl Parked {
    /// Whether the wait is still parked (consumes a reply that has come: call once).
    pub fn still_parked(&self) -> bool {
        self.pending.try_reply().is_none()
    }

    /// Waits for the reply (at most `REPLY_TIMEOUT`) and applies it like ioctl(2) would.
    pub fn finish(self) -> Waited {
        self.finish_within(REPLY_TIMEOUT).expect("a parked wait was never answered")
    }

    pub fn finish_within(mut self, d: Duration) -> Option<Waited> {
        let reply = self.pending.wait_timeout(d)?;
        Some(self.apply(reply))
    }

    fn apply(&mut self, reply: Reply) -> Waited {
        let mut bytes = self.args.as_bytes().to_vec();
        let n = reply.data.len().min(bytes.len());
        bytes[..n].copy_from_slice(&reply.data[..n]);
        for w in &reply.user_writes {
            // SAFETY: WAIT_EVENTS writes only into its events array, `self.data`, which this
            // `Parked` owns and nothing borrows here.
            unsafe { remote::write(std::process::id(), w.addr, &w.data) }.expect("applying a user write");
        }
        let args = WaitEventsArgs::read_from_bytes(&bytes).expect("wait args");
        Waited { result: reply.errno().map_or(Ok(()), Err), wait_result: args.wait_result, data: self.data.to_vec() }
    }
}

/// Reads the caller's memory for raw requests: this process.
struct SelfMemory;

impl UserMemory for SelfMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: an address from a raw request's argument: the tests' rule (see `Client::call`).
        unsafe { remote::read(std::process::id(), addr, buf) }
    }
}

static RAW_TAG: AtomicU64 = AtomicU64::new(1 << 60);

/// One open file of one (real or simulated) process.
pub struct Client {
    pub file: ClientFile,
    pub gpu: u32,
    next_va: AtomicU64,
}

/// How a client reaches the device.
pub enum ClientFile {
    /// The embedded device's file, called in-process.
    Embedded(EmbeddedFile),
    /// The node, opened by this process: every request is a real ioctl(2) through the kernel.
    Node(std::fs::File),
}

/// ioctl(2) on `fd` with `arg` as the argument: the kernel (and through it the daemon) reads
/// and writes at most the size encoded in `cmd`, which callers make `arg` at least as large as.
fn sys_ioctl(fd: &std::fs::File, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
    use std::os::fd::AsRawFd;
    assert!(arg.len() >= ioc_size(cmd), "an ioctl argument shorter than its size");
    // SAFETY: the fd is open for the call; `arg` is valid and writable for the size the
    // request encodes, and pointers inside it are the caller's to keep alive.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as libc::c_ulong, arg.as_mut_ptr()) };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

pub fn bytes_of<T: IntoBytes + Immutable>(t: &T) -> Vec<u8> {
    t.as_bytes().to_vec()
}

impl Client {
    /// The embedded file (the tests that drive it directly run only embedded).
    pub fn emb(&self) -> &EmbeddedFile {
        match &self.file {
            ClientFile::Embedded(f) => f,
            ClientFile::Node(_) => panic!("a node client has no embedded file"),
        }
    }

    pub fn pid(&self) -> u32 {
        match &self.file {
            ClientFile::Embedded(f) => f.caller().pid,
            ClientFile::Node(_) => std::process::id(),
        }
    }

    /// A typed ioctl, embedded or through the kernel.
    ///
    /// The tests' rule, which makes this and [`Client::ioctl`] safe to offer them: a test puts
    /// in an argument only pointers to memory it owns and does not borrow during the call
    /// (locals, vectors), or addresses that are never mapped (null, low pages, holes), whose
    /// accesses fault; and a USERPTR range it registers stays allocated and unborrowed until
    /// the buffer is freed or the file closes.
    pub fn call<T: FromBytes + IntoBytes + Immutable>(&self, cmd: u32, args: &mut T) -> Result<(), Errno> {
        match &self.file {
            // SAFETY: the tests' rule (above).
            ClientFile::Embedded(f) => unsafe { f.call(cmd, args) },
            ClientFile::Node(_) => {
                // As the embedded file does: the argument padded to the size in `cmd`.
                let mut buf = args.as_bytes().to_vec();
                buf.resize(buf.len().max(ioc_size(cmd)), 0);
                let r = self.ioctl(cmd, &mut buf);
                let n = std::mem::size_of::<T>();
                args.as_mut_bytes().copy_from_slice(&buf[..n]);
                r
            }
        }
    }

    /// A raw ioctl, under the tests' rule (see [`Client::call`]).
    pub fn ioctl(&self, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
        match &self.file {
            // SAFETY: the tests' rule (see `Client::call`).
            ClientFile::Embedded(f) => unsafe { f.ioctl(cmd, arg) },
            ClientFile::Node(f) => {
                let size = ioc_size(cmd);
                if arg.len() >= size {
                    sys_ioctl(f, cmd, arg)
                } else {
                    let mut buf = arg.to_vec();
                    buf.resize(size, 0);
                    let r = sys_ioctl(f, cmd, &mut buf);
                    arg.copy_from_slice(&buf[..arg.len()]);
                    r
                }
            }
        }
    }

    /// Sends `data` exactly as given (no padding to the size in `cmd`), as a caller whose
    /// buffer is shorter than the struct it claims. Embedded only: through ioctl(2) a buffer
    /// shorter than the size is only a memory-safety bug of the caller.
    pub fn raw_ioctl(&self, cmd: u32, data: &[u8]) -> Reply {
        let file = self.emb();
        let tag = RAW_TAG.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let responder = Responder::new(tag, move |r| {
            let _ = tx.send(r);
        });
        let req = Request { caller: file.caller(), cmd, data, tag, entered: None, queued: None };
        // SAFETY: the tests' rule (see `Client::call`); the pointers are this process's.
        unsafe { file.device().ioctl(file.file_id(), &req, &SelfMemory, responder) };
        rx.recv_timeout(REPLY_TIMEOUT).expect("raw ioctl reply")
    }

    /// A fresh, unused, 64 KiB-aligned GPU VA range of `size` bytes.
    pub fn next_va(&self, size: u64) -> u64 {
        let span = size.next_multiple_of(0x10000) + 0x10000;
        self.next_va.fetch_add(span, Ordering::Relaxed)
    }

    pub fn try_alloc_at(&self, gpu: u32, va: u64, size: u64, flags: u32, mmap_offset: u64) -> Result<Buf, Errno> {
        let mut a = AllocMemoryOfGpuArgs { va_addr: va, size, handle: 0, mmap_offset, gpu_id: gpu, flags };
        self.call(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a)?;
        Ok(Buf { handle: a.handle, va, size, mmap_offset: a.mmap_offset, gpu })
    }

    pub fn try_alloc(&self, mem: Mem, size: u64) -> Result<Buf, Errno> {
        self.try_alloc_at(self.gpu, self.next_va(size), size, mem.flags(), 0)
    }

    pub fn alloc(&self, mem: Mem, size: u64) -> Buf {
        self.try_alloc(mem, size).unwrap_or_else(|e| panic!("ALLOC {mem:?} {size:#x}: {e}"))
    }

    /// A buffer allocated and mapped on this client's GPU.
    pub fn alloc_mapped(&self, mem: Mem, size: u64) -> Buf {
        let b = self.alloc(mem, size);
        self.map(b.handle, &[self.gpu]).unwrap_or_else(|e| panic!("MAP {mem:?}: {e}"));
        b
    }

    /// MAP_MEMORY_TO_GPU on `gpus`; returns n_success.
    pub fn map(&self, handle: u64, gpus: &[u32]) -> Result<u32, Errno> {
        let mut a = MapMemoryToGpuArgs {
            handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: gpus.len() as u32,
            n_success: 0,
        };
        self.call(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut a).map(|()| a.n_success)
    }

    pub fn unmap(&self, handle: u64, gpus: &[u32]) -> Result<u32, Errno> {
        let mut a = UnmapMemoryFromGpuArgs {
            handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: gpus.len() as u32,
            n_success: 0,
        };
        self.call(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &mut a).map(|()| a.n_success)
    }

    pub fn free(&self, handle: u64) -> Result<(), Errno> {
        self.call(AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut FreeMemoryOfGpuArgs { handle })
    }

    pub fn available(&self) -> u64 {
        let mut a = GetAvailableMemoryArgs { gpu_id: self.gpu, ..Default::default() };
        self.call(AMDKFD_IOC_AVAILABLE_MEMORY, &mut a).expect("AVAILABLE_MEMORY");
        a.available
    }

    /// Ring and pointer buffers for a queue, each mapped and exactly as large as amdkfd's
    /// kfd_queue_buffer_get wants (the ring; one page for the pointers).
    pub fn queue_buffers(&self) -> (Buf, Buf) {
        (self.alloc_mapped(Mem::Gtt, u64::from(RING_SIZE)), self.alloc_mapped(Mem::Gtt, PAGE_SIZE))
    }

    /// CREATE_QUEUE arguments for an AQL queue on `ring` with the write pointer at the start of
    /// `ptrs` and the read pointer 8 bytes in.
    pub fn aql_args(&self, ring: &Buf, ptrs: &Buf) -> CreateQueueArgs {
        CreateQueueArgs {
            ring_base_address: ring.va,
            write_pointer_address: ptrs.va,
            read_pointer_address: ptrs.va + 8,
            ring_size: RING_SIZE,
            gpu_id: self.gpu,
            queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            queue_percentage: 100,
            queue_priority: 7,
            ..Default::default()
        }
    }

    pub fn try_create_queue_on(&self, ring: &Buf, ptrs: &Buf) -> Result<Queue, Errno> {
        let mut a = self.aql_args(ring, ptrs);
        self.call(AMDKFD_IOC_CREATE_QUEUE, &mut a)?;
        Ok(Queue { id: a.queue_id, doorbell_offset: a.doorbell_offset, ring: *ring, ptrs: *ptrs })
    }

    /// An AQL queue whose ring and pointers live in buffers mapped for it.
    pub fn create_queue(&self) -> Queue {
        let (ring, ptrs) = self.queue_buffers();
        self.try_create_queue_on(&ring, &ptrs).unwrap_or_else(|e| panic!("CREATE_QUEUE: {e}"))
    }

    pub fn destroy_queue(&self, id: u32) -> Result<(), Errno> {
        self.call(AMDKFD_IOC_DESTROY_QUEUE, &mut DestroyQueueArgs { queue_id: id, pad: 0 })
    }

    pub fn try_create_event(
        &self,
        event_type: u32,
        auto_reset: bool,
        page_handle: u64,
    ) -> Result<CreateEventArgs, Errno> {
        let mut a = CreateEventArgs {
            event_page_offset: page_handle,
            event_type,
            auto_reset: u32::from(auto_reset),
            ..Default::default()
        };
        self.call(AMDKFD_IOC_CREATE_EVENT, &mut a).map(|()| a)
    }

    /// A signal event; returns its id.
    pub fn signal_event(&self, auto_reset: bool) -> u32 {
        self.try_create_event(KFD_IOC_EVENT_SIGNAL, auto_reset, 0).expect("CREATE_EVENT").event_id
    }

    pub fn set_event(&self, id: u32) -> Result<(), Errno> {
        self.call(AMDKFD_IOC_SET_EVENT, &mut SetEventArgs { event_id: id, pad: 0 })
    }

    pub fn reset_event(&self, id: u32) -> Result<(), Errno> {
        self.call(AMDKFD_IOC_RESET_EVENT, &mut ResetEventArgs { event_id: id, pad: 0 })
    }

    pub fn destroy_event(&self, id: u32) -> Result<(), Errno> {
        self.call(AMDKFD_IOC_DESTROY_EVENT, &mut DestroyEventArgs { event_id: id, pad: 0 })
    }

    fn wait_parts(events: &[(u32, u64)], all: bool, timeout: u32) -> (WaitEventsArgs, Box<[EventData]>) {
        let data: Box<[EventData]> = events
            .iter()
            .map(|&(event_id, age)| EventData { payload: [age, 0, 0, 0], event_id, ..Default::default() })
            .collect();
        let args = WaitEventsArgs {
            events_ptr: data.as_ptr() as u64,
            num_events: events.len() as u32,
            wait_for_all: u32::from(all),
            timeout,
            wait_result: 0,
        };
        (args, data)
    }

    /// WAIT_EVENTS on `(event id, last event age)` pairs, blocking like ioctl(2).
    pub fn wait_aged(&self, events: &[(u32, u64)], all: bool, timeout: u32) -> Waited {
        let (mut args, data) = Self::wait_parts(events, all, timeout);
        let result = self.call(AMDKFD_IOC_WAIT_EVENTS, &mut args);
        Waited { result, wait_result: args.wait_result, data: std::hint::black_box(data).to_vec() }
    }

    pub fn wait(&self, ids: &[u32], all: bool, timeout: u32) -> Waited {
        let aged: Vec<(u32, u64)> = ids.iter().map(|&id| (id, 0)).collect();
        self.wait_aged(&aged, all, timeout)
    }

    /// Starts a WAIT_EVENTS without blocking.
    pub fn start_wait(&self, ids: &[u32], all: bool, timeout: u32) -> Parked {
        let aged: Vec<(u32, u64)> = ids.iter().map(|&id| (id, 0)).collect();
        let (args, data) = Self::wait_parts(&aged, all, timeout);
        // SAFETY: the events pointer is `data`'s heap buffer, which the returned `Parked` owns
        // (moving the vector keeps the buffer in place) until the reply is applied.
        let pending = unsafe { self.emb().start(AMDKFD_IOC_WAIT_EVENTS, args.as_bytes()) };
        Parked { pending, args, data }
    }
}

/// Maps a whole backing file shared, as a client maps the file behind an mmap offset.
pub fn map_file(path: &Path) -> memmap2::MmapMut {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // SAFETY: the file is a device backing file that lives as long as the test needs it; the
    // tests only read and write plain bytes through the mapping.
    unsafe { memmap2::MmapMut::map_mut(&f) }.expect("mapping a backing file")
}

/// The 64-bit word at byte `offset` of a mapping.
pub fn word(map: &[u8], offset: usize) -> u64 {
    u64::from_ne_bytes(map[offset..offset + 8].try_into().expect("8 bytes"))
}

/// A request number with another size (as an older or newer header would encode it).
pub fn with_size(cmd: u32, size: usize) -> u32 {
    ioc(ioc_dir(cmd), ioc_type(cmd), ioc_nr(cmd), size)
}
