//! The HDP flush: on a discrete GPU, host stores to VRAM travel over PCIe through the Host Data
//! Path, and a store to the HDP_MEM_FLUSH_CNTL register makes them visible to the GPU. KFD
//! exposes that register in the MMIO remap page (KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP); ROCr
//! reports it as HSA_AMD_AGENT_INFO_HDP_FLUSH.

use crate::status::{Error, Result};
use memmap2::{MmapMut, MmapOptions, MmapRaw};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use thunk::memory::{open_backing, Space};
use thunk::Kfd;
use uapi::ioctl::AMDKFD_IOC_ALLOC_MEMORY_OF_GPU;
use uapi::kfd::*;

/// The MMIO remap page (one page, as the device maps it).
const PAGE: usize = PAGE_SIZE as usize;

/// HDP flushes this process has issued (a debug counter of the shim's header).
static FLUSHES: AtomicU64 = AtomicU64::new(0);

pub fn flushes() -> u64 {
    FLUSHES.load(Ordering::Relaxed)
}

/// The right to flush one GPU's HDP. Only [`HdpPage::flusher`] makes one, and it keeps the page
/// mapped: the store goes to the page's own HDP_MEM_FLUSH_CNTL, never to an address read from
/// memory the device or the C caller can write.
#[derive(Clone)]
pub struct HdpFlush(Arc<HdpPage>);

// HDP_MEM_FLUSH_CNTL is a 32-bit register inside the page.
const _: () = assert!(
    (KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL as usize) + 4 <= PAGE
        && (KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL as usize).is_multiple_of(4)
);

impl HdpFlush {
    /// Makes the host's earlier stores to the GPU's memory visible to it (HDP_MEM_FLUSH_CNTL).
    pub fn flush(&self) {
        let reg = self.0.map.as_mut_ptr().wrapping_add(KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL as usize).cast::<u32>();
        // SAFETY: the register lies 4-aligned inside the page's PAGE-byte mapping (checked at
        // compile time above; mmap returns page-aligned memory), which `self.0` keeps mapped;
        // every access to it is atomic.
        let r = unsafe { AtomicU32::from_ptr(reg) };
        r.store(1, Ordering::Release);
        FLUSHES.fetch_add(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for HdpFlush {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HdpFlush({:#x})", self.0.mem_flush_cntl())
    }
}

/// The MMIO remap pages of a runtime's GPUs, each mapped on first use.
#[derive(Default)]
pub(crate) struct HdpPages {
    pages: Mutex<HashMap<u32, Arc<HdpPage>>>,
}

impl HdpPages {
    /// `gpu_id`'s page.
    pub fn page(&self, kfd: &Kfd, gpu_id: u32) -> Result<Arc<HdpPage>> {
        let mut pages = self.pages.lock();
        if let Some(p) = pages.get(&gpu_id) {
            return Ok(p.clone());
        }
        let p = Arc::new(HdpPage::new(kfd, gpu_id)?);
        pages.insert(gpu_id, p.clone());
        Ok(p)
    }
}

/// One GPU's MMIO remap page, mapped into this process.
pub struct HdpPage {
    kfd: Kfd,
    handle: u64,
    map: MmapRaw,
    /// Holds the GPU virtual address the page was allocated at.
    _va: MmapMut,
}

impl HdpPage {
    pub fn new(kfd: &Kfd, gpu_id: u32) -> Result<HdpPage> {
        let va = MmapOptions::new()
            .len(PAGE)
            .map_anon()
            .map_err(|e| Error::new(crate::Status::OUT_OF_RESOURCES, format!("reserving an address: {e}")))?;
        let mut a = AllocMemoryOfGpuArgs {
            va_addr: va.as_ptr() as u64,
            size: PAGE as u64,
            gpu_id,
            flags: KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP
                | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
                | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE,
            ..Default::default()
        };
        // SAFETY: an MMIO remap allocation: the argument holds no CPU pointer (`va_addr` is the
        // GPU address, reached through the device's VM).
        unsafe { kfd.call(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a) }
            .map_err(|e| Error::from_errno("allocating the MMIO remap page", e))?;
        let free = |e: Error| {
            let _ = kfd.free_memory(a.handle);
            e
        };
        let file = open_backing(kfd, Space::Kfd, a.mmap_offset)
            .map_err(|e| free(Error::from_errno("opening the MMIO remap page", e)))?;
        let map = MmapOptions::new().len(PAGE).map_raw(&file).map_err(|e| {
            free(Error::new(crate::Status::OUT_OF_RESOURCES, format!("mapping the MMIO remap page: {e}")))
        })?;
        Ok(HdpPage { kfd: kfd.clone(), handle: a.handle, map, _va: va })
    }

    /// The flush capability of this page.
    pub fn flusher(self: &Arc<Self>) -> HdpFlush {
        HdpFlush(self.clone())
    }

    /// Host address of HDP_MEM_FLUSH_CNTL (what HSA_AMD_AGENT_INFO_HDP_FLUSH reports).
    pub fn mem_flush_cntl(&self) -> u64 {
        self.map.as_ptr() as u64 + u64::from(KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL)
    }

    /// Host address of HDP_REG_FLUSH_CNTL (what HSA_AMD_AGENT_INFO_HDP_FLUSH reports).
    pub fn reg_flush_cntl(&self) -> u64 {
        self.map.as_ptr() as u64 + u64::from(KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL)
    }
}

impl Drop for HdpPage {
    fn drop(&mut self) {
        if let Err(e) = self.kfd.free_memory(self.handle) {
            log::warn!("freeing the MMIO remap page: {e}");
        }
    }
}
