//! KFD signal events for interrupt signals, pooled (as ROCr's InterruptSignal::EventPool):
//! creating an event is an ioctl, handing a pooled one out is a pop. Each event keeps the last
//! event age a waiter saw (KFD 1.14): a waiter that passes an age older than the event's
//! returns at once, so a SET_EVENT between its value check and its sleep is never lost.

use crate::status::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use thunk::{Errno, Kfd};
use uapi::kfd::{KFD_IOC_EVENT_SIGNAL, KFD_SIGNAL_EVENT_LIMIT};

/// A signal event and its event-page slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub id: u32,
    pub mailbox: u64,
}

pub struct EventPool {
    gpu_id: u32,
    free: Mutex<Vec<Event>>,
    /// Last age seen, per event id (signal event ids are event-page slots, below the limit).
    ages: Box<[AtomicU64]>,
    created: AtomicU64,
    exhausted_logged: std::sync::atomic::AtomicBool,
}

impl EventPool {
    /// Events are created on `gpu_id` (the first one brings the event page).
    pub fn new(gpu_id: u32) -> EventPool {
        EventPool {
            gpu_id,
            free: Mutex::new(Vec::new()),
            ages: (0..KFD_SIGNAL_EVENT_LIMIT).map(|_| AtomicU64::new(1)).collect(),
            created: AtomicU64::new(0),
            exhausted_logged: Default::default(),
        }
    }

    /// An event: pooled, or new (auto-reset, as ROCr's signal events). `None` when the device
    /// has no event slot left: the signal is then polled, which is slower but correct.
    pub fn get(&self, kfd: &Kfd) -> Result<Option<Event>> {
        if let Some(e) = self.free.lock().pop() {
            return Ok(Some(e));
        }
        match kfd.create_event(self.gpu_id, KFD_IOC_EVENT_SIGNAL, true) {
            Ok(a) => {
                let mailbox = kfd.mailbox(a.event_slot_index).ok_or_else(|| {
                    Error::new(crate::Status::ERROR, "the device created a signal event without an event page")
                })?;
                self.created.fetch_add(1, Ordering::Relaxed);
                Ok(Some(Event { id: a.event_id, mailbox }))
            }
            Err(Errno::ENOSPC) => {
                if !self.exhausted_logged.swap(true, Ordering::Relaxed) {
                    log::info!("the event page is full: further signals are polled, not interrupt-driven");
                }
                Ok(None)
            }
            Err(e) => Err(Error::from_errno("creating a signal event", e)),
        }
    }

    pub fn put(&self, e: Event) {
        self.free.lock().push(e);
    }

    /// The age a waiter on `event` should pass to WAIT_EVENTS (read before checking the value).
    pub fn age(&self, event: u32) -> u64 {
        self.ages.get(event as usize).map_or(0, |a| a.load(Ordering::Acquire))
    }

    /// Records the age WAIT_EVENTS returned for `event`.
    pub fn saw_age(&self, event: u32, age: u64) {
        if let Some(a) = self.ages.get(event as usize) {
            a.fetch_max(age, Ordering::AcqRel);
        }
    }

    /// Events this pool created (a debug counter).
    pub fn created(&self) -> u64 {
        self.created.load(Ordering::Relaxed)
    }
}
