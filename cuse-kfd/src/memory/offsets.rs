//! The render-node mmap offsets of one process (DRM's per-file VMA offset manager): ranges of
//! a bounded offset space, handed out first-fit and taken back when their buffer is gone, so a
//! process that allocates and frees forever never runs out.
//!
//! A freed range is reused only once nothing holds the buffer's backing any more: the backing
//! file is named after its offset and removed by that name when its last holder drops it, so a
//! new buffer at the same offset before then would collide with (and lose its file to) the old.

use std::collections::BTreeMap;
use std::sync::Weak;

/// Offsets `[first, limit)`, handed out in ranges; `T` is what a range stays busy behind after
/// it is freed (the buffer's backing file).
#[derive(Debug)]
pub struct OffsetSpace<T> {
    limit: u64,
    /// Everything at or above it is free.
    top: u64,
    /// Free ranges below `top`, start -> length; never adjacent to each other or to `top`.
    free: BTreeMap<u64, u64>,
    /// Freed ranges whose backing is still held somewhere: free once it is dropped.
    retired: Vec<(u64, u64, Weak<T>)>,
}

impl<T> OffsetSpace<T> {
    /// The space `[first, limit)`.
    pub fn new(first: u64, limit: u64) -> OffsetSpace<T> {
        OffsetSpace { limit, top: first, free: BTreeMap::new(), retired: Vec::new() }
    }

    /// The start of `len` free offsets, or `None` when no free range is that long.
    pub fn alloc(&mut self, len: u64) -> Option<u64> {
        self.reap();
        if let Some((&start, &have)) = self.free.iter().find(|(_, have)| **have >= len) {
            self.free.remove(&start);
            if have > len {
                self.free.insert(start + len, have - len);
            }
            return Some(start);
        }
        let start = self.top;
        self.top = start.checked_add(len).filter(|end| *end <= self.limit)?;
        Some(start)
    }

    /// Gives back `[start, start + len)`, reusable once nothing holds `busy` any more.
    pub fn free(&mut self, start: u64, len: u64, busy: Weak<T>) {
        if busy.strong_count() == 0 {
            self.give_back(start, len);
        } else {
            self.retired.push((start, len, busy));
        }
    }

    /// Frees the retired ranges nothing holds any more.
    fn reap(&mut self) {
        let mut i = 0;
        while i < self.retired.len() {
            if self.retired[i].2.strong_count() == 0 {
                let (start, len, _) = self.retired.swap_remove(i);
                self.give_back(start, len);
            } else {
                i += 1;
            }
        }
    }

    /// Returns a range to the free ranges, merged with its neighbours (and into `top`).
    fn give_back(&mut self, mut start: u64, mut len: u64) {
        if let Some((&prev, &prev_len)) = self.free.range(..start).next_back() {
            if prev + prev_len == start {
                self.free.remove(&prev);
                start = prev;
                len += prev_len;
            }
        }
        if let Some(next_len) = self.free.remove(&(start + len)) {
            len += next_len;
        }
        if start + len == self.top {
            self.top = start;
        } else {
            self.free.insert(start, len);
        }
    }

    /// Free ranges kept below the top (for tests: the bookkeeping stays as small as the live set).
    #[cfg(test)]
    fn fragments(&self) -> usize {
        self.free.len() + self.retired.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const GIB: u64 = 1 << 30;

    /// A backing nobody holds any more.
    fn gone() -> Weak<()> {
        Weak::new()
    }

    #[test]
    fn l7_freed_render_offsets_are_reused_far_beyond_the_space() {
        // 64 GiB of offsets; 100,000 cycles of a 1 GiB and a 3 GiB buffer allocate 400,000 GiB
        // in all, more than 6,000 times the space.
        let mut space = OffsetSpace::<()>::new(1 << 32, (1 << 32) + 64 * GIB);
        let keep = space.alloc(GIB).unwrap();
        for i in 0..100_000u64 {
            let a = space.alloc(GIB).unwrap_or_else(|| panic!("cycle {i}: out of offsets"));
            let b = space.alloc(3 * GIB).unwrap_or_else(|| panic!("cycle {i}: out of offsets"));
            assert!(a >= keep + GIB && b >= keep + GIB && (a + GIB <= b || b + 3 * GIB <= a), "overlap: {a:#x} {b:#x}");
            // Freed in either order: the ranges merge back.
            if i % 2 == 0 {
                space.free(a, GIB, gone());
                space.free(b, 3 * GIB, gone());
            } else {
                space.free(b, 3 * GIB, gone());
                space.free(a, GIB, gone());
            }
        }
        assert_eq!(space.fragments(), 0);
        assert_eq!(space.alloc(GIB), Some(keep + GIB), "everything after the live buffer is free again");
    }

    #[test]
    fn holes_are_filled_first_fit_and_the_limit_holds() {
        let mut space = OffsetSpace::<()>::new(0, 10);
        let (a, b, c) = (space.alloc(2).unwrap(), space.alloc(3).unwrap(), space.alloc(4).unwrap());
        assert_eq!((a, b, c), (0, 2, 5));
        assert_eq!(space.alloc(2), None, "only 1 left");
        space.free(b, 3, gone());
        assert_eq!(space.alloc(4), None, "the hole is 3 long");
        assert_eq!(space.alloc(2), Some(2));
        assert_eq!(space.alloc(1), Some(4));
        assert_eq!(space.alloc(1), Some(9));
        space.free(a, 2, gone());
        space.free(c, 4, gone());
        assert_eq!(space.alloc(2), Some(0));
    }

    #[test]
    fn l7_a_range_whose_backing_is_still_held_is_not_reused() {
        let mut space = OffsetSpace::new(0, 8);
        let held = Arc::new(());
        let a = space.alloc(8).unwrap();
        space.free(a, 8, Arc::downgrade(&held));
        assert_eq!(space.alloc(8), None, "the old backing file still has this offset's name");
        drop(held);
        assert_eq!(space.alloc(8), Some(a));
    }
}
