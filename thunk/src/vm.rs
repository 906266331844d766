//! Address-space operations: reserving GPU virtual addresses in this process and mapping
//! backing files over them. The only unsafe code of the thunk's memory path.

use nix::errno::Errno;
use nix::sys::mman::{mmap, mmap_anonymous, munmap, MapFlags, ProtFlags};
use std::fs::File;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

/// Reserves `len` bytes of address space (no access, no memory) and returns its address, which
/// becomes a GPU virtual address: CPU and GPU share one address space.
pub fn reserve(len: usize) -> Result<u64, Errno> {
    let len = NonZeroUsize::new(len).ok_or(Errno::EINVAL)?;
    // SAFETY: a fresh anonymous PROT_NONE mapping at an address the kernel chooses cannot
    // alias any existing Rust object.
    let p =
        unsafe { mmap_anonymous(None, len, ProtFlags::PROT_NONE, MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE)? };
    Ok(p.as_ptr() as u64)
}

/// Maps `len` bytes of `file` shared, read-write, exactly at `addr` (reserved by [`reserve`]).
pub fn map_file_at(addr: u64, len: usize, file: &File) -> Result<(), Errno> {
    let l = NonZeroUsize::new(len).ok_or(Errno::EINVAL)?;
    let a = NonZeroUsize::new(addr as usize).ok_or(Errno::EINVAL)?;
    // SAFETY: MAP_FIXED replaces only the reservation this thunk made at `addr` for this
    // buffer; no Rust reference points into it.
    unsafe {
        mmap(
            Some(a),
            l,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_SHARED | MapFlags::MAP_FIXED,
            file,
            0,
        )?;
    }
    Ok(())
}

/// Reserves `len` bytes whose start is a multiple of `align` (a power of two, at least a
/// page): reserves `len + align - page` bytes and gives back the unaligned head and the tail.
pub fn reserve_aligned(len: usize, align: usize) -> Result<u64, Errno> {
    const PAGE: usize = uapi::kfd::PAGE_SIZE as usize;
    if len == 0 || !align.is_power_of_two() || align < PAGE {
        return Err(Errno::EINVAL);
    }
    let padded = len.checked_add(align - PAGE).ok_or(Errno::ENOMEM)?;
    let start = reserve(padded)?;
    let aligned = start.next_multiple_of(align as u64);
    let end = aligned + len as u64;
    if aligned > start {
        release(start, (aligned - start) as usize);
    }
    let padded_end = start + padded as u64;
    if padded_end > end {
        release(end, (padded_end - end) as usize);
    }
    Ok(aligned)
}

/// Maps fresh zeroed anonymous read-write memory exactly at `addr` (reserved by [`reserve`]):
/// paged system memory that the device reaches as a user pointer.
pub fn map_anonymous_at(addr: u64, len: usize) -> Result<(), Errno> {
    let l = NonZeroUsize::new(len).ok_or(Errno::EINVAL)?;
    let a = NonZeroUsize::new(addr as usize).ok_or(Errno::EINVAL)?;
    // SAFETY: MAP_FIXED replaces only the reservation this thunk made at `addr`; no Rust
    // reference points into it.
    unsafe {
        mmap_anonymous(
            Some(a),
            l,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_PRIVATE | MapFlags::MAP_FIXED,
        )?;
    }
    Ok(())
}

/// Gives `[addr, addr + len)` back to the system.
pub fn release(addr: u64, len: usize) {
    if let Some(p) = NonNull::new(addr as *mut libc::c_void) {
        // SAFETY: the range was reserved (and possibly mapped over) by this module for a buffer
        // that is being dropped; nothing references it any more.
        if let Err(e) = unsafe { munmap(p, len) } {
            log::warn!("munmap({addr:#x}, {len}) failed: {e}");
        }
    }
}
