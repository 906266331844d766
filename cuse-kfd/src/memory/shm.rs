//! Shared memory regions: a file mapped `MAP_SHARED` into the device.
//!
//! The same file is mapped by the client process, which may write to it at any time. The device
//! therefore never forms `&[u8]`/`&mut [u8]` over the mapping: it copies bytes in and out through
//! raw pointers and touches words through atomics, always with bounds checks against the mapping.
//!
//! The client may also shrink the file under the mapping. Every region is under the SIGBUS guard
//! ([`super::sigbus`]): an access to a page the file no longer has completes on zero pages, and
//! the access (and every later one) answers [`ShmError::Lost`], which the device reports as a
//! fault of that client.

use super::sigbus;
use memmap2::MmapRaw;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicU16, AtomicU32, AtomicU64};

/// A bounds-checked shared mapping of a backing file.
#[derive(Debug)]
pub struct SharedRegion {
    // Declared before `map`: the guard is dropped (unregistered) before the munmap.
    guard: sigbus::Guard,
    map: MmapRaw,
    len: usize,
}

/// Why an access to a region failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ShmError {
    #[error("the access lies outside the region")]
    OutOfBounds,
    #[error("the atomic access is not naturally aligned")]
    Misaligned,
    /// The client shrank or punched the file under the mapping; its contents are gone.
    #[error("the file behind the region was truncated")]
    Lost,
}

impl SharedRegion {
    /// Maps the first `len` bytes of `file` (which must be at least that long) shared.
    pub fn map(file: &File, len: usize) -> io::Result<SharedRegion> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty region cannot be mapped"));
        }
        let map = memmap2::MmapOptions::new().len(len).map_raw(file)?;
        // Out of children of this process (amdkfd's VM_DONTCOPY): a child of an embedding
        // program has no device, and must not keep a client's memory mapped.
        map.advise(memmap2::Advice::DontFork)?;
        let guard = sigbus::Guard::register(map.as_mut_ptr(), len)
            .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e))?;
        Ok(SharedRegion { guard, map, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the client shrank the file: the region then holds private zeros, not the file.
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), ShmError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => self.intact(),
            _ => Err(ShmError::OutOfBounds),
        }
    }

    /// `Lost` once the guard replaced the mapping (checked before and after every access).
    fn intact(&self) -> Result<(), ShmError> {
        if self.is_lost() {
            Err(ShmError::Lost)
        } else {
            Ok(())
        }
    }

    /// Copies `buf.len()` bytes at `offset` out of the region.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<(), ShmError> {
        self.check(offset, buf.len())?;
        // SAFETY: the range was checked to lie inside the live mapping; `buf` is a distinct Rust
        // allocation, so the ranges do not overlap. A concurrent client write may tear the copy,
        // which is what a GPU reading host memory sees too; a truncation completes it on zeros.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(offset), buf.as_mut_ptr(), buf.len()) };
        self.intact()
    }

    /// Copies `data` into the region at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), ShmError> {
        self.check(offset, data.len())?;
        // SAFETY: as in `read`: the range is inside the mapping and `data` cannot overlap it
        // (it is never a reference into a shared mapping: this module hands none out).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.as_mut_ptr().add(offset), data.len()) };
        self.intact()
    }

    /// Fills `len` bytes at `offset` with `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<(), ShmError> {
        self.check(offset, len)?;
        // SAFETY: the range is inside the mapping.
        unsafe { std::ptr::write_bytes(self.map.as_mut_ptr().add(offset), byte, len) };
        self.intact()
    }

    fn atomic_ptr<T>(&self, offset: usize) -> Result<*mut T, ShmError> {
        let size = std::mem::size_of::<T>();
        self.check(offset, size)?;
        let ptr = self.map.as_mut_ptr().wrapping_add(offset);
        if !(ptr as usize).is_multiple_of(size) {
            return Err(ShmError::Misaligned);
        }
        Ok(ptr.cast())
    }

    /// Applies `f` to the 64-bit word at `offset` (8-byte aligned) as an atomic. The word is
    /// lent to `f` only, so that a truncation during `f` is seen before its result is used.
    pub fn with_u64<R>(&self, offset: usize, f: impl FnOnce(&AtomicU64) -> R) -> Result<R, ShmError> {
        let ptr = self.atomic_ptr::<u64>(offset)?;
        // SAFETY: `ptr` is in bounds, aligned, and valid while `self` lives (the guard keeps it
        // mapped even after a truncation); all accesses to shared words go through atomics.
        let r = f(unsafe { AtomicU64::from_ptr(ptr) });
        self.intact().map(|()| r)
    }

    /// [`SharedRegion::with_u64`] for a signed 64-bit word.
    pub fn with_i64<R>(&self, offset: usize, f: impl FnOnce(&AtomicI64) -> R) -> Result<R, ShmError> {
        let ptr = self.atomic_ptr::<i64>(offset)?;
        // SAFETY: as in `with_u64`.
        let r = f(unsafe { AtomicI64::from_ptr(ptr) });
        self.intact().map(|()| r)
    }

    /// [`SharedRegion::with_u64`] for a 32-bit word (4-byte aligned).
    pub fn with_u32<R>(&self, offset: usize, f: impl FnOnce(&AtomicU32) -> R) -> Result<R, ShmError> {
        let ptr = self.atomic_ptr::<u32>(offset)?;
        // SAFETY: as in `with_u64`.
        let r = f(unsafe { AtomicU32::from_ptr(ptr) });
        self.intact().map(|()| r)
    }

    /// [`SharedRegion::with_u64`] for a 16-bit word (2-byte aligned).
    pub fn with_u16<R>(&self, offset: usize, f: impl FnOnce(&AtomicU16) -> R) -> Result<R, ShmError> {
        let ptr = self.atomic_ptr::<u16>(offset)?;
        // SAFETY: as in `with_u64`.
        let r = f(unsafe { AtomicU16::from_ptr(ptr) });
        self.intact().map(|()| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn region(len: usize) -> (File, SharedRegion) {
        // An unnamed file of its own per test: tests run in parallel threads.
        let file = tempfile::tempfile().unwrap();
        file.set_len(len as u64).unwrap();
        let region = SharedRegion::map(&file, len).unwrap();
        (file, region)
    }

    #[test]
    fn bounds_are_checked() {
        let (_file, r) = region(4096);
        let mut buf = [0u8; 8];
        assert!(r.read(4088, &mut buf).is_ok());
        assert_eq!(r.read(4089, &mut buf), Err(ShmError::OutOfBounds));
        assert_eq!(r.write(usize::MAX, &buf), Err(ShmError::OutOfBounds));
        assert_eq!(r.with_u64(4, |_| ()), Err(ShmError::Misaligned));
        assert_eq!(r.with_u64(4096, |_| ()), Err(ShmError::OutOfBounds));
    }

    #[test]
    fn writes_and_atomics_see_each_other() {
        let (_file, r) = region(4096);
        r.write(16, &7u64.to_ne_bytes()).unwrap();
        assert_eq!(r.with_u64(16, |w| w.fetch_add(1, Ordering::SeqCst)), Ok(7));
        let mut buf = [0u8; 8];
        r.read(16, &mut buf).unwrap();
        assert_eq!(u64::from_ne_bytes(buf), 8);
        r.fill(0, 8, 0xff).unwrap();
        assert_eq!(r.with_u64(0, |w| w.load(Ordering::Relaxed)), Ok(u64::MAX));
    }

    /// H1 at the lowest level: every kind of access to a truncated file answers `Lost`, and the
    /// test process (the device) lives on.
    #[test]
    fn truncation_is_lost_not_sigbus() {
        let (file, r) = region(3 * 4096);
        r.write(4096, &[1; 8]).unwrap();
        file.set_len(0).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(r.read(4096, &mut buf), Err(ShmError::Lost));
        assert!(r.is_lost());
        assert_eq!(r.write(0, &buf), Err(ShmError::Lost));
        assert_eq!(r.fill(0, 8, 0), Err(ShmError::Lost));
        assert_eq!(r.with_u64(8, |w| w.load(Ordering::Relaxed)), Err(ShmError::Lost));
        assert_eq!(r.with_u32(8, |w| w.swap(1, Ordering::Relaxed)), Err(ShmError::Lost));
        // A region mapped after the loss is intact.
        let (_f, other) = region(4096);
        assert!(!other.is_lost());
        assert_eq!(other.with_u64(8, |w| w.load(Ordering::Relaxed)), Ok(0));
    }

    /// An atomic that faults midway is seen as lost too, before its result is used.
    #[test]
    fn an_atomic_on_a_truncated_word_is_lost() {
        let (file, r) = region(2 * 4096);
        file.set_len(4096).unwrap();
        assert_eq!(r.with_u64(8, |w| w.load(Ordering::Relaxed)), Ok(0), "the first page is still there");
        assert_eq!(r.with_i64(4096, |w| w.fetch_add(1, Ordering::SeqCst)), Err(ShmError::Lost));
    }

    /// Tests run in parallel threads of one process: each needs a backing file of its own (a
    /// name made of the pid and the length let one test remove or truncate another's file).
    #[test]
    fn parallel_tests_get_their_own_temp_files() {
        let threads: Vec<_> = (0..8u8)
            .map(|t| {
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let (_file, r) = region(4096);
                        r.fill(0, 4096, t).unwrap();
                        let mut buf = [0u8; 4096];
                        r.read(0, &mut buf).unwrap();
                        assert!(buf.iter().all(|b| *b == t), "another test's file");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
