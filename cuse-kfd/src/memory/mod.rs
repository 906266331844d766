//! GPU memory of a process: buffer objects, the shared files behind them, and the GPU VM.

pub mod backing;
pub mod ipc;
pub mod offsets;
pub mod remote;
pub mod shm;
pub mod sigbus;
pub mod svm;
pub mod vm;

use backing::BackingFile;
use std::collections::BTreeSet;
use std::sync::Arc;
use uapi::kfd::*;
use vm::{GpuVa, Region, RegionBacking};

pub use uapi::kfd::PAGE_SIZE;

/// What kind of memory a buffer object is (one of the KFD_IOC_ALLOC_MEM_FLAGS_* domain bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferKind {
    Vram,
    Gtt,
    Userptr,
    Doorbell,
    MmioRemap,
}

impl BufferKind {
    /// The kind named by allocation flags; exactly one domain bit must be set.
    pub fn from_flags(flags: u32) -> Option<BufferKind> {
        const DOMAINS: u32 = KFD_IOC_ALLOC_MEM_FLAGS_VRAM
            | KFD_IOC_ALLOC_MEM_FLAGS_GTT
            | KFD_IOC_ALLOC_MEM_FLAGS_USERPTR
            | KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL
            | KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP;
        match flags & DOMAINS {
            KFD_IOC_ALLOC_MEM_FLAGS_VRAM => Some(BufferKind::Vram),
            KFD_IOC_ALLOC_MEM_FLAGS_GTT => Some(BufferKind::Gtt),
            KFD_IOC_ALLOC_MEM_FLAGS_USERPTR => Some(BufferKind::Userptr),
            KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL => Some(BufferKind::Doorbell),
            KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP => Some(BufferKind::MmioRemap),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BufferKind::Vram => "vram",
            BufferKind::Gtt => "gtt",
            BufferKind::Userptr => "userptr",
            BufferKind::Doorbell => "doorbell",
            BufferKind::MmioRemap => "mmio",
        }
    }
}

/// Handles are `gpu_id << 32 | index`, as amdkfd's MAKE_HANDLE.
pub fn make_handle(gpu_id: u32, index: u32) -> u64 {
    (u64::from(gpu_id) << 32) | u64::from(index)
}

/// The gpu_id part of a handle (amdkfd's GET_GPU_ID).
pub fn handle_gpu_id(handle: u64) -> u32 {
    (handle >> 32) as u32
}

/// One allocation (amdkfd's kgd_mem).
#[derive(Debug)]
pub struct Buffer {
    pub handle: u64,
    pub gpu_id: u32,
    pub kind: BufferKind,
    pub va: GpuVa,
    pub size: u64,
    pub flags: u32,
    pub mmap_offset: u64,
    /// The backing: a shared file, or the client's own pages for USERPTR.
    pub backing: RegionBacking,
    /// GPUs whose VM maps this buffer.
    pub mapped_on: BTreeSet<u32>,
    /// The region entered into each mapping GPU's VM.
    pub region: Arc<Region>,
    /// The share handle this buffer was exported under or imported from (IPC).
    pub ipc: Option<Arc<ipc::IpcObject>>,
}

impl Buffer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        handle: u64,
        gpu_id: u32,
        kind: BufferKind,
        va: GpuVa,
        size: u64,
        flags: u32,
        mmap_offset: u64,
        backing: RegionBacking,
    ) -> Buffer {
        let region = Arc::new(Region {
            start: va,
            len: size,
            backing: backing.clone(),
            writable: flags & KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE != 0,
            handle,
        });
        Buffer {
            handle,
            gpu_id,
            kind,
            va,
            size,
            flags,
            mmap_offset,
            backing,
            mapped_on: BTreeSet::new(),
            region,
            ipc: None,
        }
    }

    pub fn end(&self) -> u64 {
        self.va.0 + self.size
    }

    /// The shared file behind this buffer, if it has one.
    pub fn file(&self) -> Option<&Arc<BackingFile>> {
        match &self.backing {
            RegionBacking::File { file, .. } => Some(file),
            RegionBacking::Userptr(_) => None,
        }
    }
}
