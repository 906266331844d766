//! Memory the runtime hands out: KFD allocations mapped at their GPU address in this process,
//! mapped to every GPU that may touch them, and the table that finds one by address.

use crate::agent::{Pool, PoolKind};
use crate::status::{Error, Result, Status};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use thunk::memory::{GpuMemory, Kind};
use thunk::{Errno, Kfd};

/// Allocation granule and alignment of every pool.
pub const GRANULE: u64 = uapi::kfd::PAGE_SIZE;

/// One KFD allocation: a buffer on `gpu_id`, also mapped to `extra` GPUs.
pub struct Allocation {
    // Field order: the extra mappings go (Drop) before the buffer itself.
    mem: GpuMemory,
    kfd: Kfd,
    extra: Vec<u32>,
    pub pool: Option<Pool>,
    /// Bytes the caller asked for.
    pub requested: u64,
}

impl Allocation {
    /// `size` bytes of `kind` on `gpu_id`, mapped to every GPU in `gpus`.
    pub fn new(kfd: &Kfd, gpu_id: u32, size: u64, kind: Kind, gpus: &[u32]) -> std::result::Result<Allocation, Errno> {
        let mem = kfd.alloc(gpu_id, size, kind)?;
        let extra: Vec<u32> = gpus.iter().copied().filter(|g| *g != gpu_id).collect();
        if !extra.is_empty() {
            kfd.map_to_gpu(mem.handle(), &extra)?;
        }
        Ok(Allocation { mem, kfd: kfd.clone(), extra, pool: None, requested: size })
    }

    pub fn va(&self) -> u64 {
        self.mem.va()
    }

    /// Bytes mapped (the request rounded up to the granule).
    pub fn size(&self) -> u64 {
        self.mem.size()
    }

    pub fn gpu_id(&self) -> u32 {
        self.mem.gpu_id()
    }

    pub fn mem(&self) -> &GpuMemory {
        &self.mem
    }

    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.mem.va() && addr.checked_add(len).is_some_and(|end| end <= self.mem.va() + self.mem.size())
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if !self.extra.is_empty() {
            if let Err(e) = self.kfd.unmap_from_gpu(self.mem.handle(), &self.extra) {
                log::warn!("unmapping buffer {:#x} from other GPUs: {e}", self.mem.va());
            }
        }
    }
}

impl std::fmt::Debug for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocation")
            .field("va", &self.mem.va())
            .field("size", &self.mem.size())
            .field("pool", &self.pool)
            .finish()
    }
}

/// The KFD memory kind behind a pool.
pub fn kind_of(pool: PoolKind) -> Kind {
    match pool {
        PoolKind::Vram => Kind::Vram,
        PoolKind::System | PoolKind::Kernarg => Kind::Gtt,
    }
}

/// Allocations by address.
#[derive(Default)]
pub struct MemoryTable {
    allocs: Mutex<BTreeMap<u64, Arc<Allocation>>>,
}

impl MemoryTable {
    pub fn insert(&self, a: Allocation) -> Arc<Allocation> {
        let a = Arc::new(a);
        self.allocs.lock().insert(a.va(), a.clone());
        a
    }

    /// Removes the allocation that starts at `ptr`.
    pub fn remove(&self, ptr: u64) -> Result<Arc<Allocation>> {
        // INVALID_ALLOCATION, as ROCr answers for a pointer it has no allocation at.
        self.allocs.lock().remove(&ptr).ok_or_else(|| {
            Error::new(
                Status::INVALID_ALLOCATION,
                format!("{ptr:#x} is not the start of memory this runtime allocated"),
            )
        })
    }

    /// The allocation holding all of `[addr, addr + len)`.
    pub fn find(&self, addr: u64, len: u64) -> Option<Arc<Allocation>> {
        let map = self.allocs.lock();
        let (_, a) = map.range(..=addr).next_back()?;
        a.contains(addr, len.max(1)).then(|| a.clone())
    }

    pub fn len(&self) -> usize {
        self.allocs.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&self) {
        self.allocs.lock().clear();
    }
}

/// Checks an allocation request against a pool's limits.
pub fn check_request(size: u64, pool_size: u64) -> Result<()> {
    if size == 0 {
        return Err(Error::invalid_argument("cannot allocate 0 bytes"));
    }
    if size > pool_size {
        return Err(Error::new(
            Status::INVALID_ALLOCATION,
            format!("{size} bytes exceed the pool's largest allocation ({pool_size} bytes)"),
        ));
    }
    Ok(())
}

/// An owned allocation of the runtime (freed on drop), for Rust callers.
pub struct Buffer {
    pub(crate) rt: crate::Runtime,
    pub(crate) alloc: Arc<Allocation>,
}

impl Buffer {
    /// Its address (GPU virtual address and host address alike).
    pub fn addr(&self) -> u64 {
        self.alloc.va()
    }

    /// The bytes asked for.
    pub fn len(&self) -> u64 {
        self.alloc.requested
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The mapping, for reads, writes and atomics at byte offsets.
    pub fn mem(&self) -> &GpuMemory {
        self.alloc.mem()
    }

    pub fn read(&self, off: u64, buf: &mut [u8]) {
        self.mem().read(off, buf);
    }

    pub fn write(&self, off: u64, data: &[u8]) {
        self.mem().write(off, data);
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({:#x}, {} bytes)", self.addr(), self.len())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Err(e) = self.rt.free(self.addr()) {
            log::warn!("freeing {self:?}: {e}");
        }
    }
}
