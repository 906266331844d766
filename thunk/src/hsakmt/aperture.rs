//! The address ranges the memory manager hands out: pieces of one large reservation, as
//! libhsakmt carves its SVM aperture (ROCT-Thunk-Interface rocm-5.2.3, src/fmm.c,
//! `aperture_allocate_area`). A buffer without host access then adds no mapping to the process
//! (its range stays part of the reservation), where a reservation of its own added one: tens
//! of thousands of buffers would reach `vm.max_map_count`. A range given back is made
//! inaccessible again and rejoins its free neighbours.

use std::collections::BTreeMap;

/// First-fit allocation of aligned ranges in `[base, base + size)`; pure bookkeeping, no
/// system calls.
#[derive(Debug)]
pub struct Ranges {
    base: u64,
    size: u64,
    /// Free ranges: start -> length, never adjacent (they are merged).
    free: BTreeMap<u64, u64>,
}

impl Ranges {
    pub fn new(base: u64, size: u64) -> Ranges {
        Ranges { base, size, free: BTreeMap::from([(base, size)]) }
    }

    pub fn contains(&self, start: u64, len: u64) -> bool {
        start >= self.base && len <= self.size && start - self.base <= self.size - len
    }

    /// The lowest free range of `len` bytes aligned to `align` (a power of two), taken.
    pub fn take(&mut self, len: u64, align: u64) -> Option<u64> {
        debug_assert!(align.is_power_of_two() && len > 0);
        let (&start, &flen, at) = self.free.iter().find_map(|(s, l)| {
            let at = s.checked_next_multiple_of(align)?;
            (at.checked_add(len)? <= s + l).then_some((s, l, at))
        })?;
        self.free.remove(&start);
        if at > start {
            self.free.insert(start, at - start);
        }
        let end = at + len;
        if end < start + flen {
            self.free.insert(end, start + flen - end);
        }
        Some(at)
    }

    /// Gives back `[start, start + len)`, which [`Ranges::take`] handed out.
    pub fn give(&mut self, start: u64, len: u64) {
        debug_assert!(self.contains(start, len));
        let (mut s, mut l) = (start, len);
        if let Some((&ps, &pl)) = self.free.range(..start).next_back() {
            debug_assert!(ps + pl <= start, "a range given back twice");
            if ps + pl == start {
                self.free.remove(&ps);
                s = ps;
                l += pl;
            }
        }
        if let Some(nl) = self.free.remove(&(start + len)) {
            l += nl;
        }
        self.free.insert(s, l);
    }

    /// Free bytes in all.
    #[cfg(test)]
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn size(&self) -> u64 {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 4096;

    #[test]
    fn ranges_are_aligned_disjoint_and_merge_when_given_back() {
        let mut r = Ranges::new(0x10_0000, 64 * K);
        let a = r.take(K, K).unwrap();
        let b = r.take(8 * K, 8 * K).unwrap();
        let c = r.take(K, K).unwrap();
        assert_eq!(a, 0x10_0000);
        assert_eq!(b % (8 * K), 0);
        assert!(b >= a + K && (c >= b + 8 * K || c + K <= b), "disjoint: {a:#x} {b:#x} {c:#x}");
        assert_eq!(c, a + K, "the gap the alignment left is used first");
        assert_eq!(r.free_bytes(), 64 * K - 10 * K);
        r.give(b, 8 * K);
        r.give(a, K);
        r.give(c, K);
        assert_eq!(r.free, BTreeMap::from([(0x10_0000, 64 * K)]), "every piece merged back");
    }

    #[test]
    fn a_request_larger_than_any_free_range_is_refused() {
        let mut r = Ranges::new(0, 16 * K);
        let a = r.take(8 * K, K).unwrap();
        assert_eq!(r.take(9 * K, K), None);
        assert_eq!(r.take(8 * K, 16 * K), None, "no 16 KiB-aligned start left for it");
        r.give(a, 8 * K);
        assert_eq!(r.take(16 * K, 16 * K), Some(0));
        assert!(r.contains(0, 16 * K) && !r.contains(K, 16 * K) && !r.contains(u64::MAX, 1));
    }
}
