//! Shared virtual memory: the per-process table of SVM ranges and their attributes
//! (amdkfd kfd_svm.c, linux v6.1 and later: `svm_range_set_attr`, `svm_range_get_attr`).
//!
//! Pure data: page-granular ranges `[start, last]` (page numbers, inclusive, as amdkfd's
//! `svm_range`), each with a preferred and a prefetch location, per-GPU ACCESS and
//! ACCESS_IN_PLACE bitmaps (a GPU in neither has NO_ACCESS), flags and a granularity. GPUs are
//! bits by their index in the process's GPU list (amdkfd's gpuidx).
//!
//! SET_ATTR splits the ranges it partly covers at its boundaries, applies the attributes to every
//! range inside, and fills the holes with new ranges of default attributes before applying them
//! (svm_range_add). amdkfd never merges ranges again; this table merges neighbours whose
//! attributes are equal, which no request can observe: GET_ATTR combines the ranges it covers by
//! equality, AND, OR and minimum, all of which agree on a merged and an unmerged pair.
//!
//! What the memory *is*: the client's own pages, wherever the attributes say they should live.
//! The soft GPU's VRAM and system memory are both host RAM, so a location (preferred or prefetch)
//! is recorded and reported and moves no bytes (see [`crate::ioctl`]'s SVM handler and the
//! README).

use std::collections::BTreeMap;
use uapi::kfd::*;

/// amdkfd's default granularity: 2^9 pages (2 MiB) (svm_range_set_default_attributes).
pub const DEFAULT_GRANULARITY: u8 = 9;

/// The attributes of one range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    pub preferred_loc: u32,
    pub prefetch_loc: u32,
    /// GPUs (by index) with ACCESS.
    pub access: u64,
    /// GPUs (by index) with ACCESS_IN_PLACE.
    pub access_in_place: u64,
    pub flags: u32,
    pub granularity: u8,
}

impl Attrs {
    /// A new range's attributes (svm_range_new): locations undefined, host access and coherent,
    /// and with XNACK on every supported GPU has access (it would map on fault), none without.
    pub fn new_range(xnack: bool, supported: u64) -> Attrs {
        Attrs {
            preferred_loc: KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            prefetch_loc: KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            access: if xnack { supported } else { 0 },
            access_in_place: 0,
            flags: KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_COHERENT,
            granularity: DEFAULT_GRANULARITY,
        }
    }

    /// Whether GPU `idx` may access the range (ACCESS or ACCESS_IN_PLACE).
    pub fn accessible_by(&self, idx: usize) -> bool {
        (self.access | self.access_in_place) & bit(idx) != 0
    }

    fn apply(&mut self, attr: Attr) {
        match attr {
            Attr::PreferredLoc(v) => self.preferred_loc = v,
            Attr::PrefetchLoc(v) => self.prefetch_loc = v,
            Attr::Access(i) => {
                self.access |= bit(i);
                self.access_in_place &= !bit(i);
            }
            Attr::AccessInPlace(i) => {
                self.access &= !bit(i);
                self.access_in_place |= bit(i);
            }
            Attr::NoAccess(i) => {
                self.access &= !bit(i);
                self.access_in_place &= !bit(i);
            }
            Attr::SetFlags(f) => self.flags |= f,
            Attr::ClrFlags(f) => self.flags &= !f,
            // Kept in a byte, as linux v6.1's svm_range_apply_attrs stores it (AMD's 5.2.3
            // kfdtest sets 0xFF and reads 0xFF back; later kernels clamp to 0x3F).
            Attr::Granularity(g) => self.granularity = g as u8,
        }
    }
}

fn bit(idx: usize) -> u64 {
    1u64.checked_shl(idx as u32).unwrap_or(0)
}

/// One checked SET_ATTR attribute; GPUs already turned into indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attr {
    PreferredLoc(u32),
    PrefetchLoc(u32),
    Access(usize),
    AccessInPlace(usize),
    NoAccess(usize),
    SetFlags(u32),
    ClrFlags(u32),
    Granularity(u32),
}

/// One range: pages `[start, last]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SvmRange {
    pub start: u64,
    pub last: u64,
    pub attrs: Attrs,
}

/// What GET_ATTR answers for a span (svm_range_get_attr): a location is UNDEFINED unless every
/// range covered agrees, the access bitmaps are the intersection, `flags_and`/`flags_or` combine
/// the flags (SET_FLAGS answers the AND, CLR_FLAGS the complement of the OR), the granularity
/// is the smallest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub preferred_loc: u32,
    pub prefetch_loc: u32,
    pub access: u64,
    pub access_in_place: u64,
    pub flags_and: u32,
    pub flags_or: u32,
    pub granularity: u8,
}

/// The SVM ranges of one process, keyed by first page.
#[derive(Debug, Default, Clone)]
pub struct SvmRanges {
    ranges: BTreeMap<u64, SvmRange>,
}

impl SvmRanges {
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &SvmRange> {
        self.ranges.values()
    }

    /// The range holding page `page`.
    pub fn find(&self, page: u64) -> Option<&SvmRange> {
        let (_, r) = self.ranges.range(..=page).next_back()?;
        (page <= r.last).then_some(r)
    }

    /// The last range ending before page `page`, and the first starting after it.
    pub fn neighbours(&self, page: u64) -> (Option<&SvmRange>, Option<&SvmRange>) {
        let before = self.ranges.range(..page).next_back().map(|(_, r)| r).filter(|r| r.last < page);
        let after = page.checked_add(1).and_then(|p| self.ranges.range(p..).next()).map(|(_, r)| r);
        (before, after)
    }

    /// Whether any range has a page in `[start, last]`.
    pub fn overlaps(&self, start: u64, last: u64) -> bool {
        self.covered(start, last).next().is_some()
    }

    /// The ranges with a page in `[start, last]`, in address order.
    fn covered(&self, start: u64, last: u64) -> impl Iterator<Item = &SvmRange> {
        let first = self.find(start).map_or(start, |r| r.start);
        self.ranges.range(first..=last).map(|(_, r)| r)
    }

    /// Splits the range holding `page` so that one starts at `page`.
    fn split_at(&mut self, page: u64) {
        let Some(r) = self.find(page).copied() else { return };
        if r.start == page {
            return;
        }
        self.ranges.insert(r.start, SvmRange { last: page - 1, ..r });
        self.ranges.insert(page, SvmRange { start: page, ..r });
    }

    /// SET_ATTR over pages `[start, last]`: splits at the ends, gives the holes ranges with
    /// `new_range` attributes, applies `attrs` in order to every range inside, then merges
    /// equal neighbours.
    pub fn set_attr(&mut self, start: u64, last: u64, attrs: &[Attr], new_range: Attrs) {
        assert!(start <= last, "an SVM span has at least one page");
        self.split_at(start);
        if let Some(after) = last.checked_add(1) {
            self.split_at(after);
        }
        // Holes first, then every range of the span gets the attributes.
        // `cur`: the first page not yet looked at (none once the span's end is reached).
        let mut cur = Some(start);
        let mut holes = Vec::new();
        for r in self.covered(start, last) {
            if let Some(c) = cur.filter(|&c| r.start > c) {
                holes.push((c, r.start - 1));
            }
            cur = r.last.checked_add(1);
        }
        if let Some(c) = cur.filter(|&c| c <= last) {
            holes.push((c, last));
        }
        for (s, l) in holes {
            self.ranges.insert(s, SvmRange { start: s, last: l, attrs: new_range });
        }
        for (_, r) in self.ranges.range_mut(start..=last) {
            for a in attrs {
                r.attrs.apply(*a);
            }
        }
        self.merge_around(start, last);
    }

    /// Merges equal neighbours from the range before `start` to the one after `last`.
    fn merge_around(&mut self, start: u64, last: u64) {
        let from = start.checked_sub(1).and_then(|p| self.find(p)).map_or(start, |r| r.start);
        let to = last.saturating_add(1);
        let keys: Vec<u64> = self.ranges.range(from..=to).map(|(k, _)| *k).collect();
        let mut prev: Option<u64> = None;
        for k in keys {
            let r = self.ranges[&k];
            if let Some(p) = prev {
                let pr = self.ranges[&p];
                if pr.last.checked_add(1) == Some(r.start) && pr.attrs == r.attrs {
                    self.ranges.remove(&k);
                    self.ranges.get_mut(&p).expect("kept").last = r.last;
                    continue;
                }
            }
            prev = Some(k);
        }
    }

    /// GET_ATTR over pages `[start, last]`; with no range there, a new range's attributes (with
    /// no ACCESS_IN_PLACE), as svm_range_get_attr.
    pub fn get_attr(&self, start: u64, last: u64, xnack: bool, supported: u64) -> Summary {
        let mut covered = self.covered(start, last).peekable();
        if covered.peek().is_none() {
            let d = Attrs::new_range(xnack, supported);
            return Summary {
                preferred_loc: d.preferred_loc,
                prefetch_loc: d.prefetch_loc,
                access: d.access,
                access_in_place: 0,
                flags_and: d.flags,
                flags_or: d.flags,
                granularity: d.granularity,
            };
        }
        let mut s = Summary {
            preferred_loc: KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            prefetch_loc: KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            access: supported,
            access_in_place: supported,
            flags_and: u32::MAX,
            flags_or: 0,
            granularity: u8::MAX,
        };
        // A location stays undefined once one range has none or two disagree.
        let (mut pref_open, mut prefetch_open) = (true, true);
        for r in covered {
            let a = &r.attrs;
            combine_location(&mut s.preferred_loc, &mut pref_open, a.preferred_loc);
            combine_location(&mut s.prefetch_loc, &mut prefetch_open, a.prefetch_loc);
            s.access &= a.access;
            s.access_in_place &= a.access_in_place;
            s.flags_and &= a.flags;
            s.flags_or |= a.flags;
            s.granularity = s.granularity.min(a.granularity);
        }
        s
    }

    /// Drops pages `[start, last]` from every range.
    pub fn remove(&mut self, start: u64, last: u64) -> bool {
        let mut keep = Vec::new();
        if start > 0 {
            keep.push((0, start));
        }
        if let Some(after) = last.checked_add(1) {
            keep.push((after, u64::MAX));
        }
        self.retain_mapped(&keep)
    }

    /// Keeps only the pages inside `mapped` (sorted, disjoint `[start, end)` page intervals):
    /// a range whose memory was unmapped loses those pages, as amdkfd's munmap notifier
    /// (svm_range_unmap_from_cpu) removes them. Returns whether anything changed.
    pub fn retain_mapped(&mut self, mapped: &[(u64, u64)]) -> bool {
        let old = std::mem::take(&mut self.ranges);
        let mut changed = false;
        for r in old.into_values() {
            let mut kept = 0;
            for &(s, e) in mapped {
                let (lo, hi) = (r.start.max(s), r.last.min(e.saturating_sub(1)));
                if s < e && lo <= hi {
                    self.ranges.insert(lo, SvmRange { start: lo, last: hi, attrs: r.attrs });
                    kept += hi - lo + 1;
                }
            }
            changed |= kept != r.last - r.start + 1;
        }
        changed
    }
}

fn combine_location(acc: &mut u32, open: &mut bool, loc: u32) {
    if !*open {
        return;
    }
    if loc == KFD_IOCTL_SVM_LOCATION_UNDEFINED || (*acc != KFD_IOCTL_SVM_LOCATION_UNDEFINED && *acc != loc) {
        *acc = KFD_IOCTL_SVM_LOCATION_UNDEFINED;
        *open = false;
    } else {
        *acc = loc;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU0: usize = 0;
    const GPU1: usize = 1;
    const BOTH: u64 = 0b11;

    fn off() -> Attrs {
        Attrs::new_range(false, BOTH)
    }

    fn spans(t: &SvmRanges) -> Vec<(u64, u64)> {
        t.iter().map(|r| (r.start, r.last)).collect()
    }

    #[test]
    fn a_new_range_has_amdkfds_defaults() {
        let mut t = SvmRanges::default();
        t.set_attr(0x100, 0x1ff, &[], off());
        assert_eq!(spans(&t), [(0x100, 0x1ff)]);
        let a = t.find(0x180).unwrap().attrs;
        assert_eq!(a.preferred_loc, KFD_IOCTL_SVM_LOCATION_UNDEFINED);
        assert_eq!(a.prefetch_loc, KFD_IOCTL_SVM_LOCATION_UNDEFINED);
        assert_eq!(a.flags, KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_COHERENT);
        assert_eq!(a.granularity, 9);
        assert_eq!((a.access, a.access_in_place), (0, 0));
        assert_eq!(Attrs::new_range(true, BOTH).access, BOTH, "XNACK on: every GPU may fault it in");
        assert!(t.find(0xff).is_none() && t.find(0x200).is_none());
    }

    #[test]
    fn setting_the_middle_splits_into_three() {
        let mut t = SvmRanges::default();
        t.set_attr(0x100, 0x1ff, &[Attr::Access(GPU0)], off());
        t.set_attr(0x140, 0x17f, &[Attr::PreferredLoc(7)], off());
        assert_eq!(spans(&t), [(0x100, 0x13f), (0x140, 0x17f), (0x180, 0x1ff)]);
        assert_eq!(t.find(0x140).unwrap().attrs.preferred_loc, 7);
        assert!(t.find(0x140).unwrap().attrs.accessible_by(GPU0), "the split keeps the old attributes");
        assert_eq!(t.find(0x13f).unwrap().attrs.preferred_loc, KFD_IOCTL_SVM_LOCATION_UNDEFINED);
        assert_eq!(t.find(0x180).unwrap().attrs.preferred_loc, KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    }

    #[test]
    fn setting_back_merges_equal_neighbours() {
        let mut t = SvmRanges::default();
        t.set_attr(0x100, 0x1ff, &[], off());
        t.set_attr(0x140, 0x17f, &[Attr::SetFlags(KFD_IOCTL_SVM_FLAG_GPU_RO)], off());
        assert_eq!(t.len(), 3);
        t.set_attr(0x140, 0x17f, &[Attr::ClrFlags(KFD_IOCTL_SVM_FLAG_GPU_RO)], off());
        assert_eq!(spans(&t), [(0x100, 0x1ff)]);
    }

    #[test]
    fn a_span_over_ranges_and_holes_fills_the_holes_with_new_ranges() {
        let mut t = SvmRanges::default();
        t.set_attr(0x10, 0x1f, &[Attr::Access(GPU1)], off());
        t.set_attr(0x30, 0x3f, &[Attr::AccessInPlace(GPU1)], off());
        t.set_attr(0x08, 0x47, &[Attr::PrefetchLoc(5)], off());
        // The holes get defaults (no access), the old ranges keep theirs: nothing merges.
        assert_eq!(spans(&t), [(0x08, 0x0f), (0x10, 0x1f), (0x20, 0x2f), (0x30, 0x3f), (0x40, 0x47)]);
        assert!(t.iter().all(|r| r.attrs.prefetch_loc == 5));
        assert!(!t.find(0x08).unwrap().attrs.accessible_by(GPU1));
        assert!(t.find(0x10).unwrap().attrs.accessible_by(GPU1));
        assert!(!t.find(0x20).unwrap().attrs.accessible_by(GPU1));
        assert_eq!(t.find(0x30).unwrap().attrs.access_in_place, 1 << GPU1);
    }

    #[test]
    fn access_modes_replace_each_other_per_gpu() {
        let mut a = off();
        a.apply(Attr::Access(GPU0));
        a.apply(Attr::AccessInPlace(GPU1));
        assert_eq!((a.access, a.access_in_place), (0b01, 0b10));
        a.apply(Attr::AccessInPlace(GPU0));
        assert_eq!((a.access, a.access_in_place), (0b00, 0b11));
        a.apply(Attr::NoAccess(GPU1));
        assert_eq!((a.access, a.access_in_place), (0b00, 0b01));
        assert!(a.accessible_by(GPU0) && !a.accessible_by(GPU1));
        a.apply(Attr::Granularity(0x1ff));
        assert_eq!(a.granularity, 0xff, "the low byte");
    }

    #[test]
    fn get_over_disagreeing_ranges_combines_as_amdkfd() {
        let mut t = SvmRanges::default();
        t.set_attr(
            0x10,
            0x1f,
            &[Attr::PreferredLoc(3), Attr::Access(GPU0), Attr::Access(GPU1), Attr::Granularity(4)],
            off(),
        );
        t.set_attr(
            0x20,
            0x2f,
            &[Attr::PreferredLoc(3), Attr::Access(GPU0), Attr::SetFlags(KFD_IOCTL_SVM_FLAG_GPU_RO)],
            off(),
        );
        let s = t.get_attr(0x10, 0x2f, false, BOTH);
        assert_eq!(s.preferred_loc, 3, "both ranges agree");
        assert_eq!(s.prefetch_loc, KFD_IOCTL_SVM_LOCATION_UNDEFINED);
        assert_eq!(s.access, 1 << GPU0, "the intersection");
        assert_eq!(s.access_in_place, 0);
        let base = KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_COHERENT;
        assert_eq!(s.flags_and, base);
        assert_eq!(s.flags_or, base | KFD_IOCTL_SVM_FLAG_GPU_RO);
        assert_eq!(s.granularity, 4, "the smallest");

        t.set_attr(0x20, 0x2f, &[Attr::PreferredLoc(KFD_IOCTL_SVM_LOCATION_SYSMEM)], off());
        assert_eq!(t.get_attr(0x10, 0x2f, false, BOTH).preferred_loc, KFD_IOCTL_SVM_LOCATION_UNDEFINED, "they differ");
        assert_eq!(t.get_attr(0x20, 0x20, false, BOTH).preferred_loc, KFD_IOCTL_SVM_LOCATION_SYSMEM);
        // Once undefined, a later range cannot define it again.
        t.set_attr(0x30, 0x3f, &[Attr::PreferredLoc(3)], off());
        t.set_attr(0x20, 0x2f, &[Attr::PreferredLoc(KFD_IOCTL_SVM_LOCATION_UNDEFINED)], off());
        assert_eq!(t.get_attr(0x10, 0x3f, false, BOTH).preferred_loc, KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    }

    #[test]
    fn get_ignores_holes_but_answers_defaults_with_no_range_at_all() {
        let mut t = SvmRanges::default();
        t.set_attr(0x10, 0x1f, &[Attr::Access(GPU0), Attr::PreferredLoc(2)], off());
        let s = t.get_attr(0x00, 0xff, false, BOTH);
        assert_eq!((s.preferred_loc, s.access), (2, 1 << GPU0), "only the range counts");
        let none = t.get_attr(0x100, 0x1ff, false, BOTH);
        assert_eq!(none.preferred_loc, KFD_IOCTL_SVM_LOCATION_UNDEFINED);
        assert_eq!((none.access, none.access_in_place), (0, 0));
        assert_eq!(none.granularity, 9);
        assert_eq!(none.flags_and, none.flags_or);
        assert_eq!(t.get_attr(0x100, 0x1ff, true, BOTH).access, BOTH, "XNACK on: every GPU");
    }

    #[test]
    fn unmapped_pages_leave_the_table() {
        let mut t = SvmRanges::default();
        t.set_attr(0x10, 0x1f, &[Attr::Access(GPU0)], off());
        t.set_attr(0x40, 0x4f, &[Attr::Access(GPU1)], off());
        assert!(!t.retain_mapped(&[(0x00, 0x100)]), "all still mapped");
        // The middle of the first range and all of the second are unmapped.
        assert!(t.retain_mapped(&[(0x00, 0x14), (0x18, 0x40)]));
        assert_eq!(spans(&t), [(0x10, 0x13), (0x18, 0x1f)]);
        assert!(t.find(0x18).unwrap().attrs.accessible_by(GPU0));
        assert!(t.remove(0x19, 0x1a));
        assert_eq!(spans(&t), [(0x10, 0x13), (0x18, 0x18), (0x1b, 0x1f)]);
        assert!(!t.remove(0, 0x0f));
        assert!(t.retain_mapped(&[]));
        assert!(t.is_empty());
    }

    #[test]
    fn overlaps_and_find_at_the_edges() {
        let mut t = SvmRanges::default();
        t.set_attr(0x10, 0x1f, &[], off());
        assert!(t.overlaps(0x1f, 0x30) && t.overlaps(0x00, 0x10) && t.overlaps(0x12, 0x13));
        assert!(!t.overlaps(0x20, 0x30) && !t.overlaps(0x00, 0x0f));
        t.set_attr(0, u64::MAX >> 12, &[], off());
        assert_eq!(spans(&t), [(0, u64::MAX >> 12)], "the whole space, merged");
    }
}
