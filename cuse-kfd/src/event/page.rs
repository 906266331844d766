//! The event page: one 8-byte mailbox per signal event (amdkfd's signal page). The device
//! writes an event's id into its slot before raising the interrupt; an unsignaled slot holds
//! all ones. The page is either a GTT buffer the client allocated and handed to CREATE_EVENT (the
//! dGPU path libhsakmt takes) or one the device made (mmap offset KFD_MMAP_TYPE_EVENTS).

use crate::memory::backing::BackingFile;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use uapi::kfd::{KFD_SIGNAL_EVENT_LIMIT, UNSIGNALED_EVENT_SLOT};

/// Bytes the event page must hold.
pub const EVENT_PAGE_SIZE: usize = KFD_SIGNAL_EVENT_LIMIT as usize * 8;

#[derive(Debug)]
pub struct EventPage {
    file: Arc<BackingFile>,
    offset: usize,
}

impl EventPage {
    /// The page at byte `offset` of `file`; `None` if the file cannot hold all slots there.
    pub fn new(file: Arc<BackingFile>, offset: usize) -> Option<EventPage> {
        let fits = offset.checked_add(EVENT_PAGE_SIZE).is_some_and(|end| end <= file.region().len());
        (fits && offset.is_multiple_of(8)).then_some(EventPage { file, offset })
    }

    pub fn file(&self) -> &Arc<BackingFile> {
        &self.file
    }

    /// Whether the client truncated the page's file: its slots then read as never written.
    pub fn is_lost(&self) -> bool {
        self.file.region().is_lost()
    }

    pub fn slots(&self) -> u32 {
        KFD_SIGNAL_EVENT_LIMIT
    }

    pub fn reset_all(&self) {
        // In bounds by construction.
        let _ = self.file.region().fill(self.offset, EVENT_PAGE_SIZE, 0xff);
    }

    pub fn reset_slot(&self, slot: u32) {
        self.write_slot(slot, UNSIGNALED_EVENT_SLOT);
    }

    pub fn write_slot(&self, slot: u32, value: u64) {
        if slot < KFD_SIGNAL_EVENT_LIMIT {
            // A lost page is reported by the engine (see `is_lost`).
            let _ = self.file.region().with_u64(self.offset + slot as usize * 8, |w| w.store(value, Ordering::Release));
        }
    }

    pub fn read_slot(&self, slot: u32) -> Option<u64> {
        if slot >= KFD_SIGNAL_EVENT_LIMIT {
            return None;
        }
        self.file.region().with_u64(self.offset + slot as usize * 8, |w| w.load(Ordering::Acquire)).ok()
    }
}
