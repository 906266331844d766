//! The hsaKmt API (libhsakmt 5.2.3's `hsakmt.h`) in safe Rust: every function libhsakmt 5.2.3
//! exports.
//!
//! A [`Thunk`] is one open KFD with everything libhsakmt keeps per process: the interface
//! version, the topology read from the device's sysfs-shaped tree, the memory manager (address
//! space and buffer objects, `fmm`), the event page and the doorbell mappings. It speaks to the
//! device only in ioctl bytes through [`Kfd`], whichever transport that has.
//!
//! libhsakmt's API has no handle: `hsaKmtOpenKFD` opens one process-wide instance, reference
//! counted. [`open_kfd`], [`close_kfd`] and [`current`] are that instance; [`Thunk::open`] makes a
//! private one (tests use it with an embedded device).
//!
//! Return values follow libhsakmt 5.2.3 call by call: a failed ioctl is
//! [`Status::Error`] unless libhsakmt maps its errno to something finer, bad arguments are
//! `InvalidParameter`, unknown nodes `InvalidNodeUnit`. Where the device lacks a feature the
//! answer is what libhsakmt answers on a kernel without it, never a fake success.

mod aperture;
mod debug;
mod events;
mod fmm;
mod memory;
mod misc;
mod profiling;
mod queues;
mod topology;
mod topology_files;
pub mod types;

pub use debug::{WatchPoint, MAX_WATCH_POINTS};
pub use memory::{map_graphic_handle, GraphicsResourceInfo, MemoryRange};
pub use profiling::{
    gfx_blocks, BlockFacts, Counter, CounterBlock, CounterProperties, SpmCopy, TraceRoot, GFX9_BLOCKS,
    MAX_TRACE_COUNTERS,
};
pub use types::*;

use crate::Kfd;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::sync::Arc;
use uapi::ioctl::AMDKFD_IOC_GET_VERSION;
use uapi::kfd::GetVersionArgs;
use uapi::{FromBytes, Immutable, IntoBytes};

/// `HSAKMT_STATUS` without SUCCESS: why a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(u32)]
pub enum Status {
    #[error("the operation failed")]
    Error = 1,
    #[error("the KFD interface version is not supported")]
    DriverMismatch = 2,
    #[error("invalid parameter")]
    InvalidParameter = 3,
    #[error("invalid handle")]
    InvalidHandle = 4,
    #[error("invalid node")]
    InvalidNodeUnit = 5,
    #[error("out of memory")]
    NoMemory = 6,
    #[error("buffer too small")]
    BufferTooSmall = 7,
    #[error("not implemented")]
    NotImplemented = 10,
    #[error("not supported")]
    NotSupported = 11,
    #[error("unavailable")]
    Unavailable = 12,
    #[error("out of resources")]
    OutOfResources = 13,
    #[error("the KFD is not open")]
    KernelIoChannelNotOpened = 20,
    #[error("communication with the KFD failed")]
    KernelCommunicationError = 21,
    #[error("the KFD is already open")]
    KernelAlreadyOpened = 22,
    #[error("no HSA MMU")]
    HsammuUnavailable = 23,
    #[error("the wait failed")]
    WaitFailure = 30,
    #[error("the wait timed out")]
    WaitTimeout = 31,
    #[error("memory already registered")]
    MemoryAlreadyRegistered = 35,
    #[error("memory not registered")]
    MemoryNotRegistered = 36,
    #[error("memory misaligned")]
    MemoryAlignment = 37,
    /// No `HSAKMT_STATUS` value: the -1 that libhsakmt's SPM calls (ROCT-Thunk-Interface
    /// rocm-5.2.3 src/spm.c) return as their status when the request fails, for they return
    /// the ioctl's own result.
    #[error("the request failed (the ioctl's -1, returned as the status)")]
    IoctlFailed = 0xFFFF_FFFF,
}

impl Status {
    /// The `HSAKMT_STATUS` value.
    pub const fn code(self) -> u32 {
        self as u32
    }
}

/// What every hsaKmt call returns.
pub type Result<T> = std::result::Result<T, Status>;

/// The page size libhsakmt works in.
pub use uapi::kfd::PAGE_SIZE;

/// The memory manager's choices that libhsakmt takes from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// Paged system memory is anonymous memory registered as a USERPTR object, as in
    /// libhsakmt (`HSA_USERPTR_FOR_PAGED_MEM=1`). Off by default here: paged memory is then GTT
    /// in a shared file, which the device reaches directly (atomics included) instead of through
    /// a cross-process read per access.
    pub userptr_for_paged_mem: bool,
    /// Every allocation coherent and uncached (`HSA_DISABLE_CACHE=1`).
    pub disable_cache: bool,
}

impl Options {
    /// From `HSA_USERPTR_FOR_PAGED_MEM` and `HSA_DISABLE_CACHE` (set and not "0": on).
    pub fn from_env() -> Options {
        let flag = |name| crate::secure_env::var(name).is_some_and(|v| v != "0");
        Options { userptr_for_paged_mem: flag("HSA_USERPTR_FOR_PAGED_MEM"), disable_cache: flag("HSA_DISABLE_CACHE") }
    }
}

/// What [`open_kfd`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// Opened the device (`HSAKMT_STATUS_SUCCESS`).
    First,
    /// Was open already; one more reference (`HSAKMT_STATUS_KERNEL_ALREADY_OPENED`).
    Again,
}

/// One open KFD and libhsakmt's per-process state over it.
pub struct Thunk {
    kfd: Kfd,
    version: VersionInfo,
    /// The topology as read at open: node ids, gpu ids and the GPU facts the thunk itself needs.
    nodes: Arc<topology::Topology>,
    /// The snapshot of `hsaKmtAcquireSystemProperties`, which the property getters read.
    snapshot: Mutex<Option<Arc<topology::Topology>>>,
    fmm: fmm::Fmm,
    events: events::Events,
    queues: queues::Queues,
    /// The registered PMC traces.
    traces: Mutex<profiling::Traces>,
}

impl std::fmt::Debug for Thunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Thunk").field("kfd", &self.kfd).field("version", &self.version).finish()
    }
}

impl Thunk {
    /// What `hsaKmtOpenKFD` does on first open, over `kfd`: checks the interface version (major
    /// 1), reads the topology tree, sets up the apertures (GET_PROCESS_APERTURES_NEW, the SVM
    /// aperture, SET_MEMORY_POLICY) and maps each GPU's MMIO remap page. Options come from the
    /// environment ([`Options::from_env`]).
    pub fn open(kfd: Kfd) -> Result<Thunk> {
        Thunk::open_with(kfd, Options::from_env())
    }

    /// [`Thunk::open`] with explicit options.
    pub fn open_with(kfd: Kfd, options: Options) -> Result<Thunk> {
        let mut v = GetVersionArgs::default();
        // SAFETY: GET_VERSION's argument holds no pointer.
        unsafe { ioctl(&kfd, AMDKFD_IOC_GET_VERSION, &mut v) }.map_err(|_| Status::Error)?;
        if v.major_version != 1 {
            log::error!("KFD interface {}.{}: only major version 1 is supported", v.major_version, v.minor_version);
            return Err(Status::DriverMismatch);
        }
        let version = VersionInfo { major: v.major_version, minor: v.minor_version };
        let nodes = Arc::new(topology::Topology::read(&kfd.runtime_dir().join("topology"))?);
        let fmm = fmm::Fmm::new(&kfd, &nodes, &options)?;
        let thunk = Thunk {
            kfd,
            version,
            nodes,
            snapshot: Mutex::new(None),
            fmm,
            events: events::Events::default(),
            queues: queues::Queues::default(),
            traces: Mutex::default(),
        };
        thunk.init_mmio()?;
        log::debug!("hsakmt: KFD {}.{} open, {} nodes", version.major, version.minor, thunk.nodes.nodes.len());
        Ok(thunk)
    }

    /// [`Thunk::open`] over the transport the environment names (see [`Kfd::open_default`]).
    pub fn open_default() -> Result<Thunk> {
        let kfd = Kfd::open_default().map_err(|e| {
            log::warn!("cannot open the KFD device: {e}");
            Status::KernelIoChannelNotOpened
        })?;
        Thunk::open(kfd)
    }

    /// The device handle underneath.
    pub fn kfd(&self) -> &Kfd {
        &self.kfd
    }

    /// `hsaKmtGetVersion`.
    pub fn version(&self) -> VersionInfo {
        self.version
    }

    /// A typed ioctl, restarted when interrupted (as libhsakmt's kmtIoctl).
    ///
    /// # Safety
    ///
    /// As for [`Kfd::call`]: the pointers inside `args` are valid for the request.
    unsafe fn ioctl<T: FromBytes + IntoBytes + Immutable>(
        &self,
        cmd: u32,
        args: &mut T,
    ) -> std::result::Result<(), Errno> {
        // SAFETY: this function's contract.
        unsafe { ioctl(&self.kfd, cmd, args) }
    }

    /// The gpu_id of node `node` (0 for a CPU node); `InvalidNodeUnit` if there is no such node
    /// (libhsakmt's validate_nodeid).
    fn gpu_id(&self, node: u32) -> Result<u32> {
        self.nodes.node(node).map(|n| n.gpu_id).ok_or(Status::InvalidNodeUnit)
    }

    /// The node of `gpu_id` (gpuid_to_nodeid).
    fn node_of(&self, gpu_id: u32) -> Result<u32> {
        self.nodes.node_of(gpu_id).ok_or(Status::InvalidNodeUnit)
    }

    /// `validate_nodeid_array`: node ids to gpu ids, every one must name a node.
    fn gpu_ids_of(&self, nodes: &[u32]) -> Result<Vec<u32>> {
        if nodes.is_empty() {
            return Err(Status::InvalidParameter);
        }
        nodes.iter().map(|n| self.gpu_id(*n)).collect()
    }

    /// `CHECK_KFD_MINOR_VERSION`.
    fn need_minor(&self, minor: u32) -> Result<()> {
        if self.version.minor < minor {
            Err(Status::NotSupported)
        } else {
            Ok(())
        }
    }
}

impl Drop for Thunk {
    fn drop(&mut self) {
        // What CloseKFD releases: queues, the event page, doorbells, the MMIO pages and every
        // remaining buffer's address range; closing the device then frees the rest.
        self.queues.destroy_all(&self.kfd);
        self.fmm.destroy_all(&self.kfd);
    }
}

/// A typed ioctl on `kfd`, restarted on EINTR and EAGAIN as libhsakmt's kmtIoctl does.
///
/// # Safety
///
/// As for [`Kfd::call`]: the pointers inside `args` are valid for the request.
unsafe fn ioctl<T: FromBytes + IntoBytes + Immutable>(
    kfd: &Kfd,
    cmd: u32,
    args: &mut T,
) -> std::result::Result<(), Errno> {
    loop {
        // SAFETY: this function's contract.
        match unsafe { kfd.call(cmd, args) } {
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            r => return r,
        }
    }
}

/// The process-wide instance of `hsaKmtOpenKFD`.
struct Global {
    thunk: Option<Arc<Thunk>>,
    count: u32,
    /// The process that opened `thunk`.
    opener: u32,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global { thunk: None, count: 0, opener: 0 });

/// `hsaKmtOpenKFD`: opens the device the environment names (`CUSE_KFD_EMBEDDED=1` for an
/// embedded one, else `CUSE_KFD_DEVICE` or /dev/kfd) on first call; later calls count.
///
/// In a forked child the parent's instance is not the child's (libhsakmt's is_forked_child):
/// its device answers EBADF there, so the child's first call opens its own, leaving the
/// parent's copy untouched (not closed: that would be the parent's device).
pub fn open_kfd() -> Result<Opened> {
    let mut g = GLOBAL.lock();
    let me = std::process::id();
    if g.count > 0 && g.opener == me {
        g.count += 1;
        return Ok(Opened::Again);
    }
    if let Some(inherited) = g.thunk.take() {
        std::mem::forget(inherited);
    }
    g.count = 0;
    g.thunk = Some(Arc::new(Thunk::open_default()?));
    g.count = 1;
    g.opener = me;
    Ok(Opened::First)
}

/// `hsaKmtCloseKFD`: drops one reference; the last closes the device. In a forked child the
/// count is the parent's, and libhsakmt counts it down there too (ROCT rocm-5.2.3
/// src/openclose.c: hsaKmtCloseKFD does not check for a fork); the last one forgets the
/// parent's instance instead of tearing down the parent's device.
pub fn close_kfd() -> Result<()> {
    let gone = {
        let mut g = GLOBAL.lock();
        if g.count == 0 {
            return Err(Status::KernelIoChannelNotOpened);
        }
        g.count -= 1;
        if g.count == 0 {
            let t = g.thunk.take();
            if g.opener != std::process::id() {
                std::mem::forget(t);
                return Ok(());
            }
            t
        } else {
            None
        }
    };
    // Dropped outside the lock: closing waits for the device to let go.
    drop(gone);
    Ok(())
}

/// The instance [`open_kfd`] opened (`CHECK_KFD_OPEN`). A forked child has none until it opens
/// its own: libhsakmt's CHECK_KFD_OPEN answers KERNEL_IO_CHANNEL_NOT_OPENED once the process
/// has forked (ROCT rocm-5.2.3 src/libhsakmt.h, `hsakmt_forked`).
pub fn current() -> Result<Arc<Thunk>> {
    let g = GLOBAL.lock();
    match &g.thunk {
        Some(t) if g.opener == std::process::id() => Ok(t.clone()),
        _ => Err(Status::KernelIoChannelNotOpened),
    }
}
