//! Shared memory regions: a file mapped `MAP_SHARED` into the device.
//!
//! The same file is mapped by the client process, which may write to it at any time. The device
//! therefore never forms `&[u8]`/`&mut [u8]` over the mapping: it copies bytes in and out through
//! raw pointers and touches words through atomics, always with bounds checks against the mapping.

use memmap2::MmapRaw;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicU16, AtomicU32, AtomicU64};

/// A bounds-checked shared mapping of a backing file.
#[derive(Debug)]
pub struct SharedRegion {
    map: MmapRaw,
    len: usize,
}

/// An access past the end of a region, or a misaligned atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfBounds;

impl SharedRegion {
    /// Maps the first `len` bytes of `file` (which must be at least that long) shared.
    pub fn map(file: &File, len: usize) -> io::Result<SharedRegion> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty region cannot be mapped"));
        }
        let map = memmap2::MmapOptions::new().len(len).map_raw(file)?;
        Ok(SharedRegion { map, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), OutOfBounds> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(OutOfBounds),
        }
    }

    /// Copies `buf.len()` bytes at `offset` out of the region.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<(), OutOfBounds> {
        self.check(offset, buf.len())?;
        // SAFETY: the range was checked to lie inside the live mapping; `buf` is a distinct Rust
        // allocation, so the ranges do not overlap. A concurrent client write may tear the copy,
        // which is what a GPU reading host memory sees too.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(offset), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Copies `data` into the region at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), OutOfBounds> {
        self.check(offset, data.len())?;
        // SAFETY: as in `read`: the range is inside the mapping and `data` cannot overlap it
        // (it is never a reference into a shared mapping: this module hands none out).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.as_mut_ptr().add(offset), data.len()) };
        Ok(())
    }

    /// Fills `len` bytes at `offset` with `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<(), OutOfBounds> {
        self.check(offset, len)?;
        // SAFETY: the range is inside the mapping.
        unsafe { std::ptr::write_bytes(self.map.as_mut_ptr().add(offset), byte, len) };
        Ok(())
    }

    fn atomic_ptr<T>(&self, offset: usize) -> Result<*mut T, OutOfBounds> {
        let size = std::mem::size_of::<T>();
        self.check(offset, size)?;
        let ptr = self.map.as_mut_ptr().wrapping_add(offset);
        if !(ptr as usize).is_multiple_of(size) {
            return Err(OutOfBounds);
        }
        Ok(ptr.cast())
    }

    /// The 64-bit word at `offset` as an atomic (8-byte aligned).
    pub fn atomic_u64(&self, offset: usize) -> Result<&AtomicU64, OutOfBounds> {
        let ptr = self.atomic_ptr::<u64>(offset)?;
        // SAFETY: `ptr` is in bounds, aligned, and valid for the lifetime of `self` (the mapping
        // lives as long as the region); all accesses to shared words go through atomics.
        Ok(unsafe { AtomicU64::from_ptr(ptr) })
    }

    /// The signed 64-bit word at `offset` as an atomic (8-byte aligned).
    pub fn atomic_i64(&self, offset: usize) -> Result<&AtomicI64, OutOfBounds> {
        let ptr = self.atomic_ptr::<i64>(offset)?;
        // SAFETY: as in `atomic_u64`.
        Ok(unsafe { AtomicI64::from_ptr(ptr) })
    }

    /// The 32-bit word at `offset` as an atomic (4-byte aligned).
    pub fn atomic_u32(&self, offset: usize) -> Result<&AtomicU32, OutOfBounds> {
        let ptr = self.atomic_ptr::<u32>(offset)?;
        // SAFETY: as in `atomic_u64`.
        Ok(unsafe { AtomicU32::from_ptr(ptr) })
    }

    /// The 16-bit word at `offset` as an atomic (2-byte aligned).
    pub fn atomic_u16(&self, offset: usize) -> Result<&AtomicU16, OutOfBounds> {
        let ptr = self.atomic_ptr::<u16>(offset)?;
        // SAFETY: as in `atomic_u64`.
        Ok(unsafe { AtomicU16::from_ptr(ptr) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn region(len: usize) -> SharedRegion {
        let file = temp_file(len);
        SharedRegion::map(&file, len).unwrap()
    }

    /// An unnamed temporary file of `len` bytes, this caller's alone.
    fn temp_file(len: usize) -> File {
        let file = tempfile::tempfile().unwrap();
        file.set_len(len as u64).unwrap();
        file
    }

    #[test]
    fn bounds_are_checked() {
        let r = region(4096);
        let mut buf = [0u8; 8];
        assert!(r.read(4088, &mut buf).is_ok());
        assert_eq!(r.read(4089, &mut buf), Err(OutOfBounds));
        assert_eq!(r.write(usize::MAX, &buf), Err(OutOfBounds));
        assert!(r.atomic_u64(4).is_err());
        assert!(r.atomic_u64(4096).is_err());
    }

    #[test]
    fn writes_and_atomics_see_each_other() {
        let r = region(4096);
        r.write(16, &7u64.to_ne_bytes()).unwrap();
        assert_eq!(r.atomic_u64(16).unwrap().fetch_add(1, Ordering::SeqCst), 7);
        let mut buf = [0u8; 8];
        r.read(16, &mut buf).unwrap();
        assert_eq!(u64::from_ne_bytes(buf), 8);
        r.fill(0, 8, 0xff).unwrap();
        assert_eq!(r.atomic_u64(0).unwrap().load(Ordering::Relaxed), u64::MAX);
    }

    /// Tests run in parallel threads of one process: each needs a backing file of its own (a
    /// name made of the pid and the length let one test remove or truncate another's file).
    #[test]
    fn parallel_tests_get_their_own_temp_files() {
        let threads: Vec<_> = (0..8u8)
            .map(|t| {
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let r = region(4096);
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
