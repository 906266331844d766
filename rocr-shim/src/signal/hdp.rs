//! The HDP flush: on a discrete GPU, host stores to VRAM travel over PCIe through the Host Data
//! Path, and a store to the HDP_MEM_FLUSH_CNTL register makes them visible to the GPU. KFD
//! exposes that register in the MMIO remap page (KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP); ROCr
//! reports it as HSA_AMD_AGENT_INFO_HDP_FLUSH.

use crate::status::{Error, Result};
use memmap2::{MmapMut, MmapOptions, MmapRaw};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use thunk::memory::{open_backing, Space};
use thunk::Kfd;
use uapi::ioctl::AMDKFD_IOC_ALLOC_MEMORY_OF_GPU;
use uapi::kfd::*;

const PAGE: usize = 4096;

/// HDP flushes this process has issued (a debug counter of the shim's header).
static FLUSHES: AtomicU64 = AtomicU64::new(0);

pub fn flushes() -> u64 {
    FLUSHES.load(Ordering::Relaxed)
}

/// Flushes the HDP through the register at host address `reg` (HDP_MEM_FLUSH_CNTL).
pub fn flush(reg: u64) {
    // SAFETY: `reg` comes from a slot's HDP word, which holds the address of the register in an
    // `HdpPage` mapping that the slot's arena keeps alive.
    let r = unsafe { AtomicU32::from_ptr(reg as *mut u32) };
    r.store(1, Ordering::Release);
    FLUSHES.fetch_add(1, Ordering::Relaxed);
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
        kfd.call(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a)
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

    /// Host address of HDP_MEM_FLUSH_CNTL.
    pub fn mem_flush_cntl(&self) -> u64 {
        self.map.as_ptr() as u64 + u64::from(KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL)
    }

    /// Host address of HDP_REG_FLUSH_CNTL.
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
