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

/// Maps `len` bytes of `file` shared, read-write, exactly at `addr`.
///
/// # Safety
///
/// `[addr, addr + len)` must be a range the caller owns, reserved by [`reserve`] or
/// [`reserve_aligned`] (or mapped over by this module since), with no Rust reference or other
/// live object pointing into it: MAP_FIXED replaces whatever is mapped there.
pub unsafe fn map_file_at(addr: u64, len: usize, file: &File) -> Result<(), Errno> {
    let l = NonZeroUsize::new(len).ok_or(Errno::EINVAL)?;
    let a = NonZeroUsize::new(addr as usize).ok_or(Errno::EINVAL)?;
    // SAFETY: the caller owns the range and nothing points into it (this function's contract),
    // so replacing its pages with the file's aliases no Rust object.
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
        // SAFETY: the unaligned head of the reservation made just above; nothing refers to it.
        unsafe { release(start, (aligned - start) as usize) };
    }
    let padded_end = start + padded as u64;
    if padded_end > end {
        // SAFETY: the tail past `end` of the same fresh reservation; nothing refers to it.
        unsafe { release(end, (padded_end - end) as usize) };
    }
    Ok(aligned)
}

/// Maps fresh zeroed anonymous read-write memory exactly at `addr`: paged system memory that
/// the device reaches as a user pointer.
///
/// # Safety
///
/// As for [`map_file_at`]: the caller owns `[addr, addr + len)`, a reservation of this module,
/// and nothing points into it.
pub unsafe fn map_anonymous_at(addr: u64, len: usize) -> Result<(), Errno> {
    // SAFETY: this function's contract is `anonymous_at`'s.
    unsafe { anonymous_at(addr, len, ProtFlags::PROT_READ | ProtFlags::PROT_WRITE, MapFlags::empty()) }
}

/// Fresh private anonymous memory of `prot` exactly at `[addr, addr + len)`, replacing whatever
/// is mapped there.
///
/// # Safety
///
/// The caller owns the range and nothing points into it: no Rust object can be aliased.
unsafe fn anonymous_at(addr: u64, len: usize, prot: ProtFlags, flags: MapFlags) -> Result<(), Errno> {
    let l = NonZeroUsize::new(len).ok_or(Errno::EINVAL)?;
    let a = NonZeroUsize::new(addr as usize).ok_or(Errno::EINVAL)?;
    // SAFETY: the caller owns the range and nothing points into it (this function's contract).
    unsafe { mmap_anonymous(Some(a), l, prot, MapFlags::MAP_PRIVATE | MapFlags::MAP_FIXED | flags)? };
    Ok(())
}

/// Faults in every page of the mapping at `[addr, addr + len)` for writing now
/// (MADV_POPULATE_WRITE, Linux 5.14), so that first stores to it take no page fault. The
/// contents do not change. A kernel without it (EINVAL) just leaves the faults for later.
pub fn populate(addr: u64, len: usize) -> Result<(), Errno> {
    // SAFETY: MADV_POPULATE_WRITE only faults pages in (as a write would, without writing): it
    // changes no byte of memory, whoever owns the range; a range not mapped is ENOMEM.
    let r = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
    match r {
        0 => Ok(()),
        _ => match Errno::last() {
            Errno::EINVAL => Ok(()),
            e => Err(e),
        },
    }
}

/// Gives `[addr, addr + len)` back to the system.
///
/// # Safety
///
/// The range must be one the caller owns, reserved by [`reserve`] or [`reserve_aligned`] and
/// possibly mapped over by this module, that nothing (no Rust reference, no other owner)
/// uses any more: its pages go away, and the kernel may hand the addresses out again.
pub unsafe fn release(addr: u64, len: usize) {
    if let Some(p) = NonNull::new(addr as *mut libc::c_void) {
        // SAFETY: the caller owns the range and nothing uses it (this function's contract).
        if let Err(e) = unsafe { munmap(p, len) } {
            log::warn!("munmap({addr:#x}, {len}) failed: {e}");
        }
    }
}

/// Makes `[addr, addr + len)` a plain reservation again (no access, no memory), whatever is
/// mapped there: its pages go, the addresses stay this process's.
///
/// # Safety
///
/// As for [`release`]: the caller owns the range and nothing uses it any more.
pub unsafe fn reset(addr: u64, len: usize) -> Result<(), Errno> {
    // SAFETY: the caller owns the range and nothing uses it (this function's contract).
    unsafe { anonymous_at(addr, len, ProtFlags::PROT_NONE, MapFlags::MAP_NORESERVE) }
}
