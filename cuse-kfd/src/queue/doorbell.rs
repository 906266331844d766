//! The process doorbell slice of one GPU: 1024 eight-byte doorbells in two pages (SOC15), in a
//! backing file the client maps. Queues get the lowest free doorbell.

use crate::memory::backing::BackingFile;
use std::sync::Arc;
use uapi::kfd::{KFD_DOORBELLS_PER_PROCESS, KFD_DOORBELL_SIZE_SOC15};

/// Bytes in a process doorbell slice.
pub const DOORBELL_SLICE_SIZE: u64 = KFD_DOORBELLS_PER_PROCESS as u64 * KFD_DOORBELL_SIZE_SOC15 as u64;

/// The value of a doorbell no one has rung: ringing index 0 must be a visible change.
pub const UNRUNG: u64 = u64::MAX;

#[derive(Debug)]
pub struct Doorbells {
    pub file: Arc<BackingFile>,
    /// KFD_MMAP_TYPE_DOORBELL | gpu_id: the slice's mmap offset.
    pub mmap_offset: u64,
    used: [u64; KFD_DOORBELLS_PER_PROCESS as usize / 64],
}

impl Doorbells {
    pub fn new(file: Arc<BackingFile>, mmap_offset: u64) -> Doorbells {
        Doorbells { file, mmap_offset, used: [0; KFD_DOORBELLS_PER_PROCESS as usize / 64] }
    }

    /// Takes the lowest free doorbell index; the doorbell reads [`UNRUNG`] until rung.
    pub fn alloc(&mut self) -> Option<u32> {
        for (w, bits) in self.used.iter_mut().enumerate() {
            if *bits != u64::MAX {
                let b = bits.trailing_ones();
                *bits |= 1 << b;
                let index = w as u32 * 64 + b;
                self.reset(index);
                return Some(index);
            }
        }
        None
    }

    pub fn free(&mut self, index: u32) {
        if let Some(bits) = self.used.get_mut(index as usize / 64) {
            *bits &= !(1u64 << (index % 64));
        }
        // A stale value must not look like a ring to the next queue using this doorbell.
        self.reset(index);
    }

    fn reset(&self, index: u32) {
        // A lost slice is reported by the engine, which polls the doorbells.
        let _ = self
            .file
            .region()
            .with_u64(Self::byte_offset(index) as usize, |w| w.store(UNRUNG, std::sync::atomic::Ordering::Release));
    }

    /// Byte offset of doorbell `index` in the slice.
    pub fn byte_offset(index: u32) -> u64 {
        u64::from(index) * u64::from(KFD_DOORBELL_SIZE_SOC15)
    }
}
