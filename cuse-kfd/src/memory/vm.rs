//! The per-process GPU virtual address space: which backing each GPU VA of each GPU reaches.
//!
//! Like vm-memory's GuestMemory: regions are looked up by address, accesses are bounds-checked,
//! may span adjacent regions, and fail with a structured fault carrying the address. The soft
//! command processor reaches client memory only through here.

use super::backing::BackingFile;
use crate::owner::OwnerProcess;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A GPU virtual address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuVa(pub u64);

impl GpuVa {
    pub fn raw(self) -> u64 {
        self.0
    }

    pub fn checked_add(self, n: u64) -> Option<GpuVa> {
        self.0.checked_add(n).map(GpuVa)
    }
}

impl fmt::Display for GpuVa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Why an access through the GPU VM failed; `va` is the first faulting address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VmFault {
    #[error("no mapping at GPU address {va}")]
    Unmapped { va: GpuVa },
    #[error("write to read-only mapping at GPU address {va}")]
    ReadOnly { va: GpuVa },
    #[error("address range at {va} wraps around")]
    Overflow { va: GpuVa },
    #[error("misaligned atomic at GPU address {va}")]
    Misaligned { va: GpuVa },
    #[error("client memory at GPU address {va} is not accessible")]
    Userptr { va: GpuVa },
}

impl VmFault {
    pub fn va(&self) -> GpuVa {
        match *self {
            VmFault::Unmapped { va }
            | VmFault::ReadOnly { va }
            | VmFault::Overflow { va }
            | VmFault::Misaligned { va }
            | VmFault::Userptr { va } => va,
        }
    }
}

/// What a region's addresses reach.
#[derive(Debug, Clone)]
pub enum RegionBacking {
    /// A shared backing file, from byte `offset`.
    File { file: Arc<BackingFile>, offset: usize },
    /// The client's own memory at `addr` (USERPTR), reached through the owner's bound memory:
    /// a fault once it has exited or exec'd.
    Userptr { memory: Arc<OwnerProcess>, addr: u64 },
}

/// One mapped buffer: `[start, start + len)`.
#[derive(Debug)]
pub struct Region {
    pub start: GpuVa,
    pub len: u64,
    pub backing: RegionBacking,
    pub writable: bool,
    /// The buffer handle this region belongs to.
    pub handle: u64,
}

impl Region {
    fn end(&self) -> u64 {
        self.start.0 + self.len
    }
}

/// The GPU VMs of one process: one address space per GPU, as amdgpu has one VM per device.
#[derive(Debug, Default)]
pub struct GpuVm {
    gpus: HashMap<u32, BTreeMap<u64, Arc<Region>>>,
}

impl GpuVm {
    /// Maps `region` on `gpu_id`. Returns false if it overlaps a mapping already there.
    pub fn map(&mut self, gpu_id: u32, region: Arc<Region>) -> bool {
        let map = self.gpus.entry(gpu_id).or_default();
        let end = region.end();
        let before = map.range(..end).next_back();
        if let Some((_, r)) = before {
            if r.end() > region.start.0 {
                return r.handle == region.handle;
            }
        }
        map.insert(region.start.0, region);
        true
    }

    /// Unmaps the region starting at `start` on `gpu_id`; returns whether one was there.
    pub fn unmap(&mut self, gpu_id: u32, start: GpuVa) -> bool {
        self.gpus.get_mut(&gpu_id).is_some_and(|m| m.remove(&start.0).is_some())
    }

    /// Whether `[va, va + len)` is entirely mapped on `gpu_id` (possibly over several regions).
    pub fn is_mapped(&self, gpu_id: u32, va: GpuVa, len: u64) -> bool {
        self.walk(gpu_id, va, len, |_, _, _| Ok(())).is_ok()
    }

    /// The region containing `va` on `gpu_id`.
    pub fn region(&self, gpu_id: u32, va: GpuVa) -> Option<&Arc<Region>> {
        let (_, r) = self.gpus.get(&gpu_id)?.range(..=va.0).next_back()?;
        (va.0 < r.end()).then_some(r)
    }

    /// Number of mappings over all GPUs.
    pub fn mapping_count(&self) -> usize {
        self.gpus.values().map(BTreeMap::len).sum()
    }

    /// Calls `f(region, offset in region, chunk len)` for each piece of `[va, va + len)`.
    fn walk(
        &self,
        gpu_id: u32,
        va: GpuVa,
        len: u64,
        mut f: impl FnMut(&Region, u64, usize) -> Result<(), VmFault>,
    ) -> Result<(), VmFault> {
        va.checked_add(len).ok_or(VmFault::Overflow { va })?;
        let mut cur = va.0;
        let end = va.0 + len;
        while cur < end {
            let r = self.region(gpu_id, GpuVa(cur)).ok_or(VmFault::Unmapped { va: GpuVa(cur) })?;
            let chunk = (r.end().min(end) - cur) as usize;
            f(r, cur - r.start.0, chunk)?;
            cur += chunk as u64;
        }
        Ok(())
    }

    /// Copies `buf.len()` bytes at `va` out of GPU memory.
    pub fn read(&self, gpu_id: u32, va: GpuVa, buf: &mut [u8]) -> Result<(), VmFault> {
        let mut done = 0usize;
        self.walk(gpu_id, va, buf.len() as u64, |r, off, n| {
            let dst = &mut buf[done..done + n];
            let at = GpuVa(r.start.0 + off);
            match &r.backing {
                RegionBacking::File { file, offset } => {
                    file.region().read(offset + off as usize, dst).map_err(|_| VmFault::Unmapped { va: at })?
                }
                RegionBacking::Userptr { memory, addr } => {
                    memory.read(addr + off, dst).map_err(|_| VmFault::Userptr { va: at })?
                }
            }
            done += n;
            Ok(())
        })
    }

    /// Copies `data` into GPU memory at `va`.
    pub fn write(&self, gpu_id: u32, va: GpuVa, data: &[u8]) -> Result<(), VmFault> {
        let mut done = 0usize;
        self.walk(gpu_id, va, data.len() as u64, |r, off, n| {
            let src = &data[done..done + n];
            let at = GpuVa(r.start.0 + off);
            if !r.writable {
                return Err(VmFault::ReadOnly { va: at });
            }
            match &r.backing {
                RegionBacking::File { file, offset } => {
                    file.region().write(offset + off as usize, src).map_err(|_| VmFault::Unmapped { va: at })?
                }
                RegionBacking::Userptr { memory, addr } => {
                    memory.write(addr + off, src).map_err(|_| VmFault::Userptr { va: at })?
                }
            }
            done += n;
            Ok(())
        })
    }

    /// The naturally aligned 64-bit word at `va`, for atomic access.
    pub fn word(&self, gpu_id: u32, va: GpuVa) -> Result<Word, VmFault> {
        if !va.0.is_multiple_of(8) {
            return Err(VmFault::Misaligned { va });
        }
        let r = self.region(gpu_id, va).ok_or(VmFault::Unmapped { va })?;
        if r.end() - va.0 < 8 {
            return Err(VmFault::Unmapped { va: GpuVa(r.end()) });
        }
        let off = va.0 - r.start.0;
        Ok(Word {
            va,
            writable: r.writable,
            target: match &r.backing {
                RegionBacking::File { file, offset } => {
                    WordTarget::File { file: file.clone(), offset: offset + off as usize }
                }
                RegionBacking::Userptr { memory, addr } => {
                    WordTarget::Userptr { memory: memory.clone(), addr: addr + off }
                }
            },
        })
    }
}

/// A 64-bit word of GPU memory that outlives the VM lock (it holds its backing file).
#[derive(Debug, Clone)]
pub struct Word {
    va: GpuVa,
    writable: bool,
    target: WordTarget,
}

#[derive(Debug, Clone)]
enum WordTarget {
    File {
        file: Arc<BackingFile>,
        offset: usize,
    },
    /// USERPTR words are read and written through the owner's memory file: not atomic against
    /// the client.
    Userptr {
        memory: Arc<OwnerProcess>,
        addr: u64,
    },
}

impl Word {
    pub fn va(&self) -> GpuVa {
        self.va
    }

    pub fn load(&self, order: Ordering) -> Result<u64, VmFault> {
        match &self.target {
            WordTarget::File { file, offset } => {
                Ok(file.region().atomic_u64(*offset).map_err(|_| VmFault::Misaligned { va: self.va })?.load(order))
            }
            WordTarget::Userptr { memory, addr } => {
                let mut b = [0u8; 8];
                memory.read(*addr, &mut b).map_err(|_| VmFault::Userptr { va: self.va })?;
                Ok(u64::from_ne_bytes(b))
            }
        }
    }

    pub fn store(&self, value: u64, order: Ordering) -> Result<(), VmFault> {
        if !self.writable {
            return Err(VmFault::ReadOnly { va: self.va });
        }
        match &self.target {
            WordTarget::File { file, offset } => {
                file.region().atomic_u64(*offset).map_err(|_| VmFault::Misaligned { va: self.va })?.store(value, order);
                Ok(())
            }
            WordTarget::Userptr { memory, addr } => {
                memory.write(*addr, &value.to_ne_bytes()).map_err(|_| VmFault::Userptr { va: self.va })
            }
        }
    }

    /// Atomically adds `delta` (wrapping) and returns the previous value.
    pub fn fetch_add(&self, delta: u64, order: Ordering) -> Result<u64, VmFault> {
        if !self.writable {
            return Err(VmFault::ReadOnly { va: self.va });
        }
        match &self.target {
            WordTarget::File { file, offset } => Ok(file
                .region()
                .atomic_u64(*offset)
                .map_err(|_| VmFault::Misaligned { va: self.va })?
                .fetch_add(delta, order)),
            WordTarget::Userptr { .. } => {
                let old = self.load(order)?;
                self.store(old.wrapping_add(delta), order)?;
                Ok(old)
            }
        }
    }
}
