//! Where the fuzzer's host pointers point: an arena of scratch memory the device may read and
//! write, followed by a hole that is reserved but never mapped. Every pointer the fuzzer passes
//! is null, below mmap_min_addr, in the arena, in the hole or above user space, so whatever the
//! device (or the kernel, with a device node) writes through it lands in the arena or faults:
//! never in the fuzzer's own data.

use crate::ops::Ptr;
use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
use std::num::NonZeroUsize;
use std::sync::OnceLock;

/// Bytes of scratch memory.
pub const ARENA_SIZE: u64 = 1 << 20;
/// Bytes of the arena [`Ptr::Data`] placements use (the rest is for [`Ptr::Arena`] offsets).
pub const DATA_SIZE: u64 = 1 << 19;
/// Bytes of the never-mapped hole right after the arena.
pub const HOLE_SIZE: u64 = 1 << 26;
/// Highest user address + 1 on x86-64.
pub const USER_END: u64 = 1 << 47;

pub struct Arena {
    base: u64,
}

static ARENA: OnceLock<Arena> = OnceLock::new();

impl Arena {
    /// The process's arena, created on first use.
    pub fn get() -> &'static Arena {
        ARENA.get_or_init(|| {
            let len = NonZeroUsize::new((ARENA_SIZE + HOLE_SIZE) as usize).expect("non-zero");
            // SAFETY: a fresh anonymous mapping at an address the kernel picks aliases nothing;
            // it is never unmapped, and only reached through process_vm_writev/readv and the
            // device, never through Rust references.
            let p = unsafe {
                mmap_anonymous(None, len, ProtFlags::PROT_NONE, MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE)
            }
            .expect("reserving the fuzzer's arena");
            let base = p.as_ptr() as u64;
            // SAFETY: the first ARENA_SIZE bytes of the reservation above become read-write; the
            // hole after them stays PROT_NONE.
            unsafe { nix::sys::mman::mprotect(p, ARENA_SIZE as usize, ProtFlags::PROT_READ | ProtFlags::PROT_WRITE) }
                .expect("making the arena writable");
            Arena { base }
        })
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    /// Whether `[addr, addr + len)` lies in the writable arena.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.base && addr.checked_add(len).is_some_and(|e| e <= self.base + ARENA_SIZE)
    }

    /// Writes `data` at `addr` if the range is in the arena; false otherwise (nothing written).
    pub fn write(&self, addr: u64, data: &[u8]) -> bool {
        if !self.contains(addr, data.len() as u64) {
            return false;
        }
        // SAFETY: the range is in the arena (checked above), which no Rust reference reaches.
        unsafe { cuse_kfd::memory::remote::write(std::process::id(), addr, data) }.is_ok()
    }

    /// The address `ptr` stands for; [`Ptr::Data`] is copied to `*bump` in the data area.
    pub fn resolve(&self, ptr: &Ptr, bump: &mut u64) -> u64 {
        match ptr {
            Ptr::Null => 0,
            Ptr::Low(v) => v % 0x1_0000,
            Ptr::Arena(off) => self.base + u64::from(*off) % ARENA_SIZE,
            Ptr::Hole(off) => self.base + ARENA_SIZE + off % HOLE_SIZE,
            Ptr::High(v) => USER_END | v,
            Ptr::Data(bytes) => {
                let len = (bytes.len() as u64).next_multiple_of(64);
                if *bump + len > DATA_SIZE {
                    *bump = 0;
                }
                let addr = self.base + (*bump).min(DATA_SIZE);
                if len <= DATA_SIZE {
                    self.write(addr, bytes);
                    *bump += len;
                }
                addr
            }
        }
    }

    /// Whether the device may write at `addr` without harm: the arena or the hole, or an
    /// address no user mapping can have.
    pub fn is_safe(&self, addr: u64) -> bool {
        !(0x1_0000..USER_END).contains(&addr) || (self.base..self.base + ARENA_SIZE + HOLE_SIZE).contains(&addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_lands_in_the_arena_and_the_hole_faults() {
        let a = Arena::get();
        let mut bump = 0;
        let addr = a.resolve(&Ptr::Data(vec![1, 2, 3, 4]), &mut bump);
        let mut back = [0u8; 4];
        // SAFETY: an arena address, which nothing else writes during the test.
        unsafe { cuse_kfd::memory::remote::read(std::process::id(), addr, &mut back) }.unwrap();
        assert_eq!(back, [1, 2, 3, 4]);
        let hole = a.resolve(&Ptr::Hole(8), &mut bump);
        // SAFETY: the hole is never mapped: the read faults.
        assert!(unsafe { cuse_kfd::memory::remote::read(std::process::id(), hole, &mut back) }.is_err());
        assert!(a.is_safe(hole) && a.is_safe(0) && a.is_safe(1 << 50));
        assert!(!a.write(hole, &[1]));
    }
}
