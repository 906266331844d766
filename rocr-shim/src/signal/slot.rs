//! One signal's memory: a 128-byte slot whose first 64 bytes are the `amd_signal_t` the device
//! reads and writes (the `hsa_signal_t` handle is its address), followed by the shim's own
//! host-side words. Slots live in arenas of GPU-visible memory (see [`super::arena`]).
//!
//! ```text
//!   0 kind i64            8 value i64 (doorbell: hardware doorbell address)
//!  16 event_mailbox_ptr  24 event_id u32   32 start_ts   40 end_ts   48 queue_ptr
//!  64 tag: the live signal's generation, 0 when the slot is free
//!  72 flags u32          76 sleepers u32 (waiters in, or entering, WAIT_EVENTS)
//!  80 event age last seen by a waiter (KFD 1.14 event age; starts at 1)
//! ```
//!
//! Every access is atomic: the device and other threads touch the slot concurrently.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use uapi::signal::*;

pub const SLOT_BYTES: u64 = 128;

const KIND: u64 = 0;
const VALUE: u64 = AMD_SIGNAL_VALUE_OFFSET as u64;
const MAILBOX: u64 = AMD_SIGNAL_EVENT_MAILBOX_PTR_OFFSET as u64;
const EVENT_ID: u64 = AMD_SIGNAL_EVENT_ID_OFFSET as u64;
const START_TS: u64 = AMD_SIGNAL_START_TS_OFFSET as u64;
const END_TS: u64 = AMD_SIGNAL_END_TS_OFFSET as u64;
const QUEUE_PTR: u64 = 48;
const TAG: u64 = 64;
const FLAGS: u64 = 72;
const SLEEPERS: u64 = 76;

/// Flag: the slot is in device memory.
pub const FLAG_DEVICE_MEMORY: u32 = 1 << 0;
/// Flag: one of a batch (its event is the batch's).
pub const FLAG_BATCH_MEMBER: u32 = 1 << 1;
/// Flag: a queue's doorbell or inactive signal, destroyed with the queue only.
pub const FLAG_INTERNAL: u32 = 1 << 2;

/// What a new slot holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlotInit {
    pub kind: i64,
    pub value: i64,
    /// Event-page slot address and event id of an interrupt signal (0, 0 for a polled one).
    pub mailbox: u64,
    pub event_id: u32,
    pub queue_ptr: u64,
    pub flags: u32,
}

/// A view of one signal slot. Its methods are safe because constructing one is not: the
/// constructor's caller promises the memory stays mapped while the view is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot(u64);

impl Slot {
    /// # Safety
    /// `handle` must be the 64-byte-aligned address of a 128-byte signal slot that stays
    /// mapped for as long as the returned view (or a copy of it) is used: an arena slot of this
    /// runtime, or a live `hsa_signal_t` the caller passes in (HSA's precondition).
    pub unsafe fn new(handle: u64) -> Slot {
        debug_assert!(handle != 0 && handle.is_multiple_of(64), "bad signal handle {handle:#x}");
        Slot(handle)
    }

    pub fn handle(&self) -> u64 {
        self.0
    }

    fn u64_at(&self, off: u64) -> &AtomicU64 {
        // SAFETY: the constructor's contract: an aligned, mapped 128-byte slot; `off` is an
        // 8-aligned offset inside it.
        unsafe { AtomicU64::from_ptr((self.0 + off) as *mut u64) }
    }

    fn u32_at(&self, off: u64) -> &AtomicU32 {
        // SAFETY: as in `u64_at`, with a 4-aligned offset.
        unsafe { AtomicU32::from_ptr((self.0 + off) as *mut u32) }
    }

    pub fn value(&self) -> &AtomicI64 {
        // SAFETY: as in `u64_at`; the value word is 8-aligned.
        unsafe { AtomicI64::from_ptr((self.0 + VALUE) as *mut i64) }
    }

    pub fn kind(&self) -> i64 {
        self.u64_at(KIND).load(Ordering::Relaxed) as i64
    }

    pub fn is_doorbell(&self) -> bool {
        let k = self.kind();
        k == AMD_SIGNAL_KIND_DOORBELL || k == AMD_SIGNAL_KIND_LEGACY_DOORBELL
    }

    /// The hardware doorbell address of a doorbell signal (the value word's other meaning).
    pub fn doorbell_ptr(&self) -> u64 {
        self.u64_at(VALUE).load(Ordering::Relaxed)
    }

    pub fn mailbox(&self) -> u64 {
        self.u64_at(MAILBOX).load(Ordering::Acquire)
    }

    pub fn event_id(&self) -> u32 {
        self.u64_at(EVENT_ID).load(Ordering::Relaxed) as u32
    }

    /// The interrupt event of this signal, if it has one.
    pub fn event(&self) -> Option<u32> {
        (self.mailbox() != 0).then(|| self.event_id())
    }

    pub fn start_ts(&self) -> u64 {
        self.u64_at(START_TS).load(Ordering::Acquire)
    }

    pub fn end_ts(&self) -> u64 {
        self.u64_at(END_TS).load(Ordering::Acquire)
    }

    pub fn tag(&self) -> u64 {
        self.u64_at(TAG).load(Ordering::Acquire)
    }

    /// Marks the slot free; returns the tag it had (0: it was free already).
    pub fn retire(&self) -> u64 {
        self.u64_at(TAG).swap(0, Ordering::AcqRel)
    }

    pub fn flags(&self) -> u32 {
        self.u32_at(FLAGS).load(Ordering::Relaxed)
    }

    pub fn sleepers(&self) -> &AtomicU32 {
        self.u32_at(SLEEPERS)
    }

    /// Fills a free slot and publishes it under `tag` (non-zero) last.
    pub fn init(&self, s: &SlotInit, tag: u64) {
        debug_assert!(tag != 0);
        self.u64_at(KIND).store(s.kind as u64, Ordering::Relaxed);
        self.value().store(s.value, Ordering::Relaxed);
        self.u64_at(MAILBOX).store(s.mailbox, Ordering::Relaxed);
        self.u64_at(EVENT_ID).store(u64::from(s.event_id), Ordering::Relaxed);
        self.u64_at(START_TS).store(0, Ordering::Relaxed);
        self.u64_at(END_TS).store(0, Ordering::Relaxed);
        self.u64_at(QUEUE_PTR).store(s.queue_ptr, Ordering::Relaxed);
        self.u32_at(FLAGS).store(s.flags, Ordering::Relaxed);
        self.u64_at(TAG).store(tag, Ordering::Release);
    }
}
