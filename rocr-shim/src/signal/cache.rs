//! Memory of released batch arenas, kept for the next batches (as ROCr's fragment allocator
//! keeps small blocks): fresh shared memory costs a KFD allocation and mapping plus a page
//! fault per page, tens of microseconds each on these machines. An arena's memory returns here
//! only when its last user is gone (registry, batch handle, members and waiters), so a
//! recycled slot is never seen by a stale waiter.

use crate::memory::Allocation;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Weak;

/// Arena sizes are rounded up to a power of two of at least this (so one size serves a range).
const MIN_CLASS: u64 = 64 * 1024;
/// Arenas larger than this are not kept.
const MAX_CLASS: u64 = 4 << 20;
/// Bytes kept at most.
const BUDGET: u64 = 16 << 20;

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

#[derive(Default)]
pub struct ArenaCache {
    free: Mutex<Vec<(Key, Allocation)>>,
    bytes: AtomicU64,
    reused: AtomicU64,
}

impl ArenaCache {
    /// Arenas whose memory came from here.
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    pub fn take(&self, key: Key) -> Option<Allocation> {
        let mut free = self.free.lock();
        let i = free.iter().position(|(k, _)| *k == key)?;
        let (_, a) = free.swap_remove(i);
        self.bytes.fetch_sub(key.bytes, Ordering::Relaxed);
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(a)
    }

    /// Keeps `a` if it fits the budget; otherwise it is freed here.
    fn put(&self, key: Key, a: Allocation) {
        if key.bytes > MAX_CLASS || self.bytes.load(Ordering::Relaxed) + key.bytes > BUDGET {
            return;
        }
        self.bytes.fetch_add(key.bytes, Ordering::Relaxed);
        self.free.lock().push((key, a));
    }

    /// Frees everything kept (memory is short, or the runtime goes).
    pub fn trim(&self) {
        let drained: Vec<_> = self.free.lock().drain(..).collect();
        self.bytes.store(0, Ordering::Relaxed);
        drop(drained);
    }
}

/// An arena's memory: given back to the cache (if any) when dropped.
pub struct ArenaMemory {
    alloc: Option<Allocation>,
    key: Key,
    cache: Weak<ArenaCache>,
}

impl ArenaMemory {
    pub fn new(alloc: Allocation, key: Key, cache: Weak<ArenaCache>) -> ArenaMemory {
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
