//! GPU memory mapped into this process at its GPU virtual address.

use crate::kfd::Inner;
use crate::vm;
use crate::Kfd;
use nix::errno::Errno;
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64};
use std::sync::Weak;

/// Backing file placement (see cuse_kfd::memory::backing): mmap offsets on the render node.
const RENDER_DIR: &str = "render";
const KFD_DIR: &str = "kfd";

/// Which mmap name space an offset belongs to.
#[derive(Debug, Clone, Copy)]
pub enum Space {
    Kfd,
    Render,
}

/// Opens the backing file of `offset` in `space` for this client.
pub fn open_backing(kfd: &Kfd, space: Space, offset: u64) -> Result<File, Errno> {
    let dir = match space {
        Space::Kfd => KFD_DIR,
        Space::Render => RENDER_DIR,
    };
    let path = kfd.runtime_dir().join(kfd.pid().to_string()).join(dir).join(format!("{offset:016x}"));
    // The directories are the device's; O_NOFOLLOW refuses a symlink put in the file's place.
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options.open(&path).map_err(|e| {
        log::warn!("cannot open backing file {}: {e}", path.display());
        Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
    })
}

/// A host mapping of a backing file (doorbells, event pages) not tied to a GPU address.
#[derive(Debug)]
pub struct HostMapping {
    addr: u64,
    len: usize,
}

impl HostMapping {
    pub fn map(file: &File, len: usize) -> Result<HostMapping, Errno> {
        let addr = vm::reserve(len)?;
        // SAFETY: the fresh reservation made just above; nothing else knows its address.
        if let Err(e) = unsafe { vm::map_file_at(addr, len, file) } {
            // SAFETY: the same reservation, unused.
            unsafe { vm::release(addr, len) };
            return Err(e);
        }
        Ok(HostMapping { addr, len })
    }

    pub fn addr(&self) -> u64 {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for HostMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping `self` made and owns; its fields are private and `addr()` gives
        // out an address, never a reference, so nothing refers to it once `self` goes.
        unsafe { vm::release(self.addr, self.len) };
    }
}

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Vram,
    Gtt,
}

/// One allocation, mapped to its GPU and into this process at the same address.
pub struct GpuMemory {
    kfd: Weak<Inner>,
    // Private: `read`, `write` and the atomics trust `va` and `size`, and drop unmaps them.
    va: u64,
    size: u64,
    handle: u64,
    gpu_id: u32,
}

impl GpuMemory {
    /// A buffer over the address range `[va, va + size)`, which it owns from now on.
    ///
    /// # Safety
    ///
    /// The range is a reservation made by [`vm::reserve`] that the caller hands over: nothing
    /// else uses or releases it, and it is mapped read-write before the buffer is accessed.
    pub(crate) unsafe fn new(kfd: Weak<Inner>, va: u64, size: u64, handle: u64, gpu_id: u32) -> GpuMemory {
        GpuMemory { kfd, va, size, handle, gpu_id }
    }

    fn check(&self, off: u64, len: u64) {
        assert!(
            off.checked_add(len).is_some_and(|e| e <= self.size),
            "access {off:#x}+{len} outside a {}-byte buffer",
            self.size
        );
    }

    /// The buffer's GPU virtual address (== its host address).
    pub fn va(&self) -> u64 {
        self.va
    }

    /// Bytes of the buffer (whole pages).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The device's handle of the allocation.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// The GPU the buffer is allocated on and mapped to.
    pub fn gpu_id(&self) -> u32 {
        self.gpu_id
    }

    /// Faults in every page of the buffer's CPU mapping now, so first stores to it take no
    /// page fault (memory that is created ahead of its use and then written at once).
    pub fn populate(&self) -> Result<(), Errno> {
        vm::populate(self.va, self.size as usize)
    }

    /// The address of byte `off` (GPU VA == host address).
    pub fn addr(&self, off: u64) -> u64 {
        self.check(off, 0);
        self.va + off
    }

    pub fn read(&self, off: u64, buf: &mut [u8]) {
        self.check(off, buf.len() as u64);
        // SAFETY: in bounds of a live shared mapping owned by `self`; the device may write it
        // concurrently, which is what reading GPU-visible memory means.
        unsafe { std::ptr::copy_nonoverlapping((self.va + off) as *const u8, buf.as_mut_ptr(), buf.len()) }
    }

    pub fn write(&self, off: u64, data: &[u8]) {
        self.check(off, data.len() as u64);
        // SAFETY: as in `read`; `data` cannot overlap the mapping (no references into it exist).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (self.va + off) as *mut u8, data.len()) }
    }

    pub fn fill(&self, off: u64, len: u64, byte: u8) {
        self.check(off, len);
        // SAFETY: in bounds of a live mapping owned by `self`.
        unsafe { std::ptr::write_bytes((self.va + off) as *mut u8, byte, len as usize) }
    }

    pub fn u64_at(&self, off: u64) -> &AtomicU64 {
        self.check(off, 8);
        assert!((self.va + off).is_multiple_of(8), "misaligned atomic");
        // SAFETY: aligned, in bounds, and the mapping lives as long as `self`.
        unsafe { AtomicU64::from_ptr((self.va + off) as *mut u64) }
    }

    pub fn i64_at(&self, off: u64) -> &AtomicI64 {
        self.check(off, 8);
        assert!((self.va + off).is_multiple_of(8), "misaligned atomic");
        // SAFETY: as in `u64_at`.
        unsafe { AtomicI64::from_ptr((self.va + off) as *mut i64) }
    }

    pub fn u32_at(&self, off: u64) -> &AtomicU32 {
        self.check(off, 4);
        assert!((self.va + off).is_multiple_of(4), "misaligned atomic");
        // SAFETY: as in `u64_at`.
        unsafe { AtomicU32::from_ptr((self.va + off) as *mut u32) }
    }
}

impl std::fmt::Debug for GpuMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMemory")
            .field("va", &self.va)
            .field("size", &self.size)
            .field("handle", &self.handle)
            .finish()
    }
}

impl Drop for GpuMemory {
    fn drop(&mut self) {
        // A closed device has freed everything already.
        if let Some(kfd) = Kfd::upgrade(&self.kfd) {
            if let Err(e) = kfd.unmap_from_gpu(self.handle, &[self.gpu_id]) {
                log::warn!("unmapping buffer {:#x}: {e}", self.handle);
            }
            if let Err(e) = kfd.free_memory(self.handle) {
                log::warn!("freeing buffer {:#x}: {e}", self.handle);
            }
        }
        // SAFETY: the range `self` owns (its fields are private); the references its accessors
        // lend borrow `self`, so none outlives this drop.
        unsafe { vm::release(self.va, self.size as usize) };
    }
}
