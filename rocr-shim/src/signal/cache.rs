//! Memory for batch arenas, so that creating a batch does not wait on fresh shared memory.
//!
//! * Released arenas' memory is kept for the next batches of the same size class and placement
//!   (as ROCr's fragment allocator keeps small blocks). An arena's memory returns here only when
//!   its last user is gone (registry, batch handle, members and waiters), so a recycled slot is
//!   never seen by a stale waiter.
//! * A batch that finds nothing kept takes a piece of a slab: one KFD allocation of
//!   [`SLAB_BYTES`] whose pages were faulted in when it was made, carved into arenas. Fresh
//!   memory costs a KFD allocation (a backing file, its pages, two mappings and an ioctl to map
//!   it) plus a page fault per page: ~120 us for the 128 KiB of 1024 signals here, more than
//!   mapping and touching a plain tmpfs file (the floor kfd-bench measures). A slab pays that
//!   once for many batches (a 2 MiB one for sixteen of 1024 signals), so a fresh batch costs
//!   what a recycled one does, and the batch that finds the slab full pays for the next one. A slab's memory goes when its
//!   last piece has gone and it is no longer the one being carved.

use crate::memory::Allocation;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Arena sizes are rounded up to a power of two of at least this (so one size serves a range).
const MIN_CLASS: u64 = 64 * 1024;
/// Arenas larger than this are not kept.
const MAX_CLASS: u64 = 4 << 20;
/// Bytes kept at most.
const BUDGET: u64 = 16 << 20;
/// Bytes of a slab. Fixed, not grown from small: the page cost is per byte either way, and
/// small first slabs only add allocations (kfd-bench measured the mean of 32 fresh batches of
/// 1024 at 0.8-0.9x the floor with 2 MiB slabs, 1.3-1.5x growing from 256 KiB). The price is
/// 2 MiB committed per placement once any batch is made, given back by `trim`.
pub const SLAB_BYTES: u64 = 2 << 20;

/// Which arenas can stand in for each other: placement (None: host) and size class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub device_gpu: Option<u32>,
    pub bytes: u64,
}

impl Key {
    /// The class of an arena of `bytes`.
    pub fn new(device_gpu: Option<u32>, bytes: u64) -> Key {
        Key { device_gpu, bytes: bytes.max(MIN_CLASS).next_power_of_two() }
    }
}

/// The memory of one arena: an allocation of its own, or a piece of a slab.
pub enum Block {
    Whole(Allocation),
    Piece { slab: Arc<Allocation>, offset: u64 },
}

impl Block {
    pub fn va(&self) -> u64 {
        match self {
            Block::Whole(a) => a.va(),
            Block::Piece { slab, offset } => slab.va() + offset,
        }
    }
}

/// The slab being carved, per placement.
struct Slab {
    mem: Arc<Allocation>,
    /// Bytes handed out so far.
    used: u64,
}

impl Slab {
    fn room(&self) -> u64 {
        self.mem.size() - self.used
    }
}

#[derive(Default)]
pub struct ArenaCache {
    free: Mutex<Vec<(Key, Block)>>,
    bytes: AtomicU64,
    reused: AtomicU64,
    slabs: Mutex<HashMap<Option<u32>, Slab>>,
    slabs_made: AtomicU64,
}

impl ArenaCache {
    /// Arenas whose memory came from here.
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    /// Slabs made so far.
    pub fn slabs_made(&self) -> u64 {
        self.slabs_made.load(Ordering::Relaxed)
    }

    /// Memory for an arena of class `key`: kept memory if there is some, else a piece of the
    /// placement's slab (`make_slab(bytes)` makes a new one, faulted in), else (a class larger
    /// than a quarter of a slab) a fresh allocation from `make`.
    pub fn block<E>(
        &self,
        key: Key,
        make_slab: impl FnOnce(u64) -> Result<Allocation, E>,
        make: impl FnOnce(u64) -> Result<Allocation, E>,
    ) -> Result<Block, E> {
        if let Some(b) = self.take(key) {
            return Ok(b);
        }
        if key.bytes > SLAB_BYTES / 4 {
            return make(key.bytes).map(Block::Whole);
        }
        let mut slabs = self.slabs.lock();
        if slabs.get(&key.device_gpu).is_none_or(|s| s.room() < key.bytes) {
            // Where a slab does not fit (memory is short), the batch may still.
            let Ok(mem) = make_slab(SLAB_BYTES) else { return make(key.bytes).map(Block::Whole) };
            self.slabs_made.fetch_add(1, Ordering::Relaxed);
            slabs.insert(key.device_gpu, Slab { mem: Arc::new(mem), used: 0 });
        }
        let slab = slabs.get_mut(&key.device_gpu).expect("made above");
        let offset = slab.used;
        slab.used += key.bytes;
        Ok(Block::Piece { slab: slab.mem.clone(), offset })
    }

    pub fn take(&self, key: Key) -> Option<Block> {
        let mut free = self.free.lock();
        let i = free.iter().position(|(k, _)| *k == key)?;
        let (_, a) = free.swap_remove(i);
        self.bytes.fetch_sub(key.bytes, Ordering::Relaxed);
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(a)
    }

    /// Keeps `a` if it fits the budget; otherwise it is freed here (a piece: given up, its
    /// slab freed with its last piece).
    fn put(&self, key: Key, a: Block) {
        if key.bytes > MAX_CLASS || self.bytes.load(Ordering::Relaxed) + key.bytes > BUDGET {
            return;
        }
        self.bytes.fetch_add(key.bytes, Ordering::Relaxed);
        self.free.lock().push((key, a));
    }

    /// Frees everything kept, and stops carving the current slabs (memory is short, or the
    /// runtime goes): a slab's memory goes with its last live piece.
    pub fn trim(&self) {
        let drained: Vec<_> = self.free.lock().drain(..).collect();
        self.bytes.store(0, Ordering::Relaxed);
        drop(drained);
        let slabs: Vec<_> = self.slabs.lock().drain().collect();
        drop(slabs);
    }
}

/// An arena's memory: given back to the cache (if any) when dropped.
pub struct ArenaMemory {
    alloc: Option<Block>,
    key: Key,
    cache: Weak<ArenaCache>,
}

impl ArenaMemory {
    pub fn new(alloc: Block, key: Key, cache: Weak<ArenaCache>) -> ArenaMemory {
        ArenaMemory { alloc: Some(alloc), key, cache }
    }

    pub fn va(&self) -> u64 {
        self.alloc.as_ref().expect("present until dropped").va()
    }
}

impl Drop for ArenaMemory {
    fn drop(&mut self) {
        if let (Some(a), Some(cache)) = (self.alloc.take(), self.cache.upgrade()) {
            cache.put(self.key, a);
        }
    }
}
