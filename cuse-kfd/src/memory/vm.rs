//! The per-process GPU virtual address space: which backing each GPU VA of each GPU reaches.
//!
//! Like vm-memory's GuestMemory: regions are looked up by address, accesses are bounds-checked,
//! may span adjacent regions, and fail with a structured fault carrying the address. The soft
//! command processor reaches client memory only through here.
//!
//! An address with no buffer region falls back to the process's SVM ranges ([`SvmSpace`]): a
//! GPU with ACCESS or ACCESS_IN_PLACE on the range reaches the owner's memory there as a USERPTR
//! region does. With XNACK on, a new range gives every GPU access, and an address in no range
//! is reached as amdkfd maps it on a GPU fault (svm_range_restore_pages creating a range of
//! default attributes; a page the owner has not mapped faults then, as a failed fault-in does),
//! but only in another process: an owner that is this very process (the embedded device) would
//! hand the GPU all of the device's own memory unasked, so there only named ranges are reached.

use super::backing::BackingFile;
use super::remote::ClientAddr;
use super::shm::ShmError;
use super::svm::SvmRanges;
use crate::owner::OwnerProcess;
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
    /// The buffer handle this region belongs to ([`SVM_HANDLE`] for SVM memory).
    pub handle: u64,
}

/// The handle of the regions [`GpuVm::region`] makes for SVM memory: no buffer has it (buffer
/// handles carry an index from 1).
pub const SVM_HANDLE: u64 = 0;

/// The SVM side of a process's VMs: its ranges, and what reaching them needs.
#[derive(Debug, Default)]
pub struct SvmSpace {
    pub ranges: SvmRanges,
    /// The process's GPUs, in amdkfd's gpuidx order (the bits of the ranges' bitmaps).
    pub gpu_ids: Vec<u32>,
    /// The process's XNACK mode (a copy of `ProcessInner::xnack_enabled`, kept by SET_XNACK_MODE).
    pub xnack: bool,
    /// Whose memory SVM addresses are; with none, no address reaches SVM memory.
    pub owner: Option<Arc<OwnerProcess>>,
    /// The owner's pages the CPU may not write, as sorted `[start, end)` page intervals, as last
    /// read from its mappings (at an SVM request): amdkfd maps such pages read-only for the GPU
    /// too (the owner's memory file would write through them, as a debugger does).
    pub read_only: Vec<(u64, u64)>,
}

impl SvmSpace {
    /// The gpuidx of `gpu_id`.
    pub fn index(&self, gpu_id: u32) -> Option<usize> {
        self.gpu_ids.iter().position(|&g| g == gpu_id)
    }

    /// Whether page `page` is read-only for the CPU, and the pages `[lo, hi)` around it that
    /// are the same.
    fn protection(&self, page: u64) -> (bool, u64, u64) {
        let i = self.read_only.partition_point(|&(_, e)| e <= page);
        match self.read_only.get(i) {
            Some(&(s, e)) if s <= page => (true, s, e),
            next => {
                let lo = i.checked_sub(1).map_or(0, |j| self.read_only[j].1);
                (false, lo, next.map_or(u64::MAX, |&(s, _)| s))
            }
        }
    }

    /// Every GPU of the process (amdkfd's bitmap_supported: all of them support SVM here).
    pub fn supported(&self) -> u64 {
        if self.gpu_ids.len() >= 64 {
            u64::MAX
        } else {
            (1u64 << self.gpu_ids.len()) - 1
        }
    }
}

/// The page size SVM ranges count in.
const PAGE_SHIFT: u32 = 12;

impl Region {
    fn end(&self) -> u64 {
        self.start.0 + self.len
    }
}

/// The GPU VMs of one process: one address space per GPU, as amdgpu has one VM per device.
#[derive(Debug, Default)]
pub struct GpuVm {
    gpus: HashMap<u32, BTreeMap<u64, Arc<Region>>>,
    pub svm: SvmSpace,
}

impl GpuVm {
    /// An empty VM whose SVM ranges (none yet) are `owner`'s memory, for GPUs `gpu_ids`.
    pub fn with_svm(gpu_ids: Vec<u32>, owner: Arc<OwnerProcess>) -> GpuVm {
        GpuVm { gpus: HashMap::new(), svm: SvmSpace { gpu_ids, owner: Some(owner), ..SvmSpace::default() } }
    }

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

    /// The buffer region containing `va` on `gpu_id`.
    fn buffer_region(&self, gpu_id: u32, va: GpuVa) -> Option<&Arc<Region>> {
        let (_, r) = self.gpus.get(&gpu_id)?.range(..=va.0).next_back()?;
        (va.0 < r.end()).then_some(r)
    }

    /// Whether a buffer is mapped on any GPU in `[va, end)` (amdkfd svm_range_check_vm).
    pub fn any_buffer_in(&self, va: u64, end: u64) -> bool {
        self.gpus.values().any(|m| m.range(..end).next_back().is_some_and(|(_, r)| r.end() > va))
    }

    /// The region containing `va` on `gpu_id`: a mapped buffer's, else the SVM memory there
    /// that `gpu_id` may reach (see the module documentation).
    pub fn region(&self, gpu_id: u32, va: GpuVa) -> Option<Arc<Region>> {
        if let Some(r) = self.buffer_region(gpu_id, va) {
            return Some(r.clone());
        }
        self.svm_region(gpu_id, va)
    }

    fn svm_region(&self, gpu_id: u32, va: GpuVa) -> Option<Arc<Region>> {
        let svm = &self.svm;
        let owner = svm.owner.as_ref()?;
        let idx = svm.index(gpu_id)?;
        let page = va.0 >> PAGE_SHIFT;
        let (start, end, writable) = match svm.ranges.find(page) {
            Some(r) => {
                if !r.attrs.accessible_by(idx) {
                    return None;
                }
                let writable = r.attrs.flags & uapi::kfd::KFD_IOCTL_SVM_FLAG_GPU_RO == 0;
                (r.start << PAGE_SHIFT, (r.last + 1) << PAGE_SHIFT, writable)
            }
            None if svm.xnack && owner.pid() != std::process::id() => {
                // The granularity block around `va` (amdkfd faults in 2^9 pages by default),
                // cut short at any buffer or range, so the region shadows nothing else.
                let block = 1u64 << (super::svm::DEFAULT_GRANULARITY as u32 + PAGE_SHIFT);
                let mut lo = va.0 & !(block - 1);
                let mut hi = lo.checked_add(block)?;
                let map = self.gpus.get(&gpu_id);
                if let Some((_, r)) = map.and_then(|m| m.range(..=va.0).next_back()) {
                    lo = lo.max(r.end());
                }
                if let Some((&s, _)) = map.and_then(|m| m.range(va.0..).next()) {
                    hi = hi.min(s);
                }
                let (before, after) = svm.ranges.neighbours(page);
                if let Some(r) = before {
                    lo = lo.max((r.last + 1) << PAGE_SHIFT);
                }
                if let Some(r) = after {
                    hi = hi.min(r.start << PAGE_SHIFT);
                }
                (lo, hi, true)
            }
            None => return None,
        };
        // Cut at the CPU's read-only pages, which the GPU may not write either.
        let (read_only, lo, hi) = svm.protection(page);
        let start = start.max(lo.saturating_mul(1 << PAGE_SHIFT));
        let end = end.min(hi.saturating_mul(1 << PAGE_SHIFT));
        let writable = writable && !read_only;
        // SAFETY: SVM memory of the context's owner: a range SET_ATTR registered, which the
        // contract of `Device::ioctl` makes valid for the device when the owner is this process
        // (XNACK's unnamed memory is only reached in another process, no soundness concern). The region lives only while this VM says the GPU may reach it (the TLB
        // empties whenever the VM changes).
        let client = unsafe { super::remote::ClientAddr::new(owner.clone(), start) };
        Some(Arc::new(Region {
            start: GpuVa(start),
            len: end - start,
            backing: RegionBacking::Userptr(client),
            writable,
            handle: SVM_HANDLE,
        }))
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
            f(&r, cur - r.start.0, chunk)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::svm::{Attr, Attrs};

    const GPU: u32 = 0x1234;
    const MIB2: u64 = 2 << 20;

    fn vm(owner: Arc<OwnerProcess>, xnack: bool) -> GpuVm {
        let mut vm = GpuVm::with_svm(vec![GPU, 0x5678], owner);
        vm.svm.xnack = xnack;
        vm
    }

    fn set(vm: &mut GpuVm, start: u64, pages: u64, attrs: &[Attr]) {
        let new = Attrs::new_range(vm.svm.xnack, vm.svm.supported());
        vm.svm.ranges.set_attr(start >> PAGE_SHIFT, (start >> PAGE_SHIFT) + pages - 1, attrs, new);
    }

    fn span(r: &Region) -> (u64, u64, bool) {
        (r.start.0, r.start.0 + r.len, r.writable)
    }

    /// Regions are only made here, never accessed: the owner is a child (another process), so
    /// XNACK's map-on-fault applies.
    #[test]
    fn svm_regions_follow_access_flags_protection_and_xnack() {
        let mut child = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let owner = Arc::new(OwnerProcess::open(child.id()).unwrap());
        let base = 0x7f00_0000_0000;
        let mut v = vm(owner.clone(), false);
        set(&mut v, base, 4, &[Attr::Access(0)]);
        set(&mut v, base + 0x4000, 2, &[Attr::Access(1), Attr::SetFlags(uapi::kfd::KFD_IOCTL_SVM_FLAG_GPU_RO)]);
        assert_eq!(span(&v.region(GPU, GpuVa(base + 0x1010)).unwrap()), (base, base + 0x4000, true));
        assert!(v.region(GPU, GpuVa(base + 0x4000)).is_none(), "the second range is GPU 1's only");
        assert_eq!(
            span(&v.region(0x5678, GpuVa(base + 0x5000)).unwrap()),
            (base + 0x4000, base + 0x6000, false),
            "GPU_RO"
        );
        assert!(v.region(GPU, GpuVa(base + 0x6000)).is_none(), "no range, XNACK off");
        assert!(v.region(0x9999, GpuVa(base)).is_none(), "not the process's GPU");
        // A CPU read-only page cuts the range and is read-only.
        v.svm.read_only = vec![((base >> PAGE_SHIFT) + 1, (base >> PAGE_SHIFT) + 2)];
        assert_eq!(span(&v.region(GPU, GpuVa(base)).unwrap()), (base, base + 0x1000, true));
        assert_eq!(span(&v.region(GPU, GpuVa(base + 0x1800)).unwrap()), (base + 0x1000, base + 0x2000, false));
        assert_eq!(span(&v.region(GPU, GpuVa(base + 0x3000)).unwrap()), (base + 0x2000, base + 0x4000, true));
        v.svm.read_only.clear();

        // XNACK on: memory in no range is reached in its 2 MiB block, cut at ranges.
        v.svm.xnack = true;
        assert_eq!(span(&v.region(GPU, GpuVa(base + 0x6000)).unwrap()), (base + 0x6000, base + MIB2, true));
        assert_eq!(span(&v.region(GPU, GpuVa(base + MIB2 + 8)).unwrap()), (base + MIB2, base + 2 * MIB2, true));
        assert!(v.region(GPU, GpuVa(base + 0x4000)).is_none(), "a range without access still refuses");
        // The same table with this process as the owner: only named ranges.
        let mut own = vm(Arc::new(OwnerProcess::open(std::process::id()).unwrap()), true);
        set(&mut own, base, 1, &[]);
        assert!(own.region(GPU, GpuVa(base)).is_some(), "a new range has access with XNACK on");
        assert!(own.region(GPU, GpuVa(base + 0x1000)).is_none(), "embedded: no map-on-fault");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
