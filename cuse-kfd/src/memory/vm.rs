//! The per-process GPU virtual address space: which backing each GPU VA of each GPU reaches.
//!
//! Like vm-memory's GuestMemory: regions are looked up by address, accesses are bounds-checked,
//! may span adjacent regions, and fail with a structured fault carrying the address. The soft
//! command processor reaches client memory only through here.

use super::backing::BackingFile;
use super::remote::ClientAddr;
use super::shm::ShmError;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
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
    /// The client truncated (or punched) the backing file of the memory at `va`.
    #[error("the memory at GPU address {va} is gone: its owner truncated or punched the file")]
    Lost { va: GpuVa },
}

impl VmFault {
    pub fn va(&self) -> GpuVa {
        match *self {
            VmFault::Unmapped { va }
            | VmFault::ReadOnly { va }
            | VmFault::Overflow { va }
            | VmFault::Misaligned { va }
            | VmFault::Userptr { va }
            | VmFault::Lost { va } => va,
        }
    }

    /// The fault of a failed access to a shared region at `va`.
    pub fn from_shm(e: ShmError, va: GpuVa) -> VmFault {
        match e {
            ShmError::OutOfBounds => VmFault::Unmapped { va },
            ShmError::Misaligned => VmFault::Misaligned { va },
            ShmError::Lost => VmFault::Lost { va },
        }
    }
}

/// What a region's addresses reach.
#[derive(Debug, Clone)]
pub enum RegionBacking {
    /// A shared backing file, from byte `offset`.
    File { file: Arc<BackingFile>, offset: usize },
    /// The client's own memory (USERPTR), reached through its owner's bound memory: a fault
    /// once the owner has exited or exec'd.
    Userptr(ClientAddr),
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
                    file.region().read(offset + off as usize, dst).map_err(|e| VmFault::from_shm(e, at))?
                }
                RegionBacking::Userptr(client) => {
                    // SAFETY: inside a USERPTR region, whose `ClientAddr` contract keeps it valid for the
                    // device while the region is mapped (this region, just looked up in the VM, is mapped).
                    unsafe { client.owner().read(client.addr() + off, dst) }.map_err(|_| VmFault::Userptr { va: at })?
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
                    file.region().write(offset + off as usize, src).map_err(|e| VmFault::from_shm(e, at))?
                }
                RegionBacking::Userptr(client) => {
                    // SAFETY: inside a USERPTR region, whose `ClientAddr` contract keeps it valid for the
                    // device while the region is mapped (this region, just looked up in the VM, is mapped).
                    unsafe { client.owner().write(client.addr() + off, src) }
                        .map_err(|_| VmFault::Userptr { va: at })?
                }
            }
            done += n;
            Ok(())
        })
    }
}
