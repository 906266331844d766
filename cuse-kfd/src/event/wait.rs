//! A parked WAIT_EVENTS: what it waits for and the reply it owes.

use super::Event;
use crate::reply::{Pending, UserWrite};
use nix::errno::Errno;
use std::collections::BTreeMap;
use uapi::kfd::*;
use uapi::IntoBytes;

/// Device-wide unique id of a wait.
pub type WaitId = u64;

/// Where a WAIT_EVENTS call entered the device, by two clocks. A set counts as after the entry
/// if either says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The process's event set count when the device took the call's first round.
    pub set_count: u64,
    /// The kernel's order of the call's first round among every caller's requests (CUSE: the
    /// FUSE unique, given when the caller's thread queued it). A device thread may take the
    /// round late (it reads while others run the requests queued after it), and a SET_EVENT
    /// queued after it may run first: by the set count alone that set would be before the
    /// entry.
    pub queued: u64,
}

/// One event a waiter waits on.
#[derive(Debug, Clone)]
pub struct WaitSlot {
    pub event_id: u32,
    pub activated: bool,
    /// The event age the caller last saw (0: not used).
    pub last_age: u64,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    Complete,
    Timeout,
    /// An event waited on, or the process, went away.
    Destroyed,
    /// The caller was interrupted by a signal (FUSE_INTERRUPT).
    Interrupted,
}

#[derive(Debug)]
pub struct Waiter {
    pub id: WaitId,
    pub slots: Vec<WaitSlot>,
    pub wait_for_all: bool,
    pub timeout_ms: u32,
    /// When the call entered the device, if its front end took it before the arguments
    /// arrived (CUSE: the first of the RETRY rounds). Events set since then activate the wait,
    /// as they would a waiter amdkfd registers on entry to kfd_wait_on_events: without it, a
    /// set between the rounds would be consumed by another thread's wait and this one would
    /// sleep through it.
    pub entered: Option<Entry>,
    /// The caller's arguments, returned with `wait_result` filled in.
    pub args: WaitEventsArgs,
    /// The caller's event data array as read at the start.
    pub data: Vec<EventData>,
    pub reply: Pending,
}

impl Waiter {
    pub fn activate(&mut self, event_id: u32) {
        for s in self.slots.iter_mut().filter(|s| s.event_id == event_id) {
            s.activated = true;
        }
    }

    /// amdkfd test_event_condition: all activated, or any.
    pub fn ready(&self) -> bool {
        if self.slots.is_empty() {
            return true;
        }
        if self.wait_for_all {
            self.slots.iter().all(|s| s.activated)
        } else {
            self.slots.iter().any(|s| s.activated)
        }
    }

    /// Builds the reply: wait_result, and for a completed wait the data of the signaled events
    /// copied back to the caller's array (memory exception data, event age).
    pub fn finish(mut self, outcome: WaitOutcome, events: &BTreeMap<u32, Event>) -> Completion {
        let (result, wait_result) = match outcome {
            WaitOutcome::Complete => (Ok(()), KFD_IOC_WAIT_RESULT_COMPLETE),
            WaitOutcome::Timeout => (Ok(()), KFD_IOC_WAIT_RESULT_TIMEOUT),
            WaitOutcome::Destroyed => (Err(Errno::EIO), KFD_IOC_WAIT_RESULT_FAIL),
            WaitOutcome::Interrupted => (Err(Errno::EINTR), KFD_IOC_WAIT_RESULT_FAIL),
        };
        self.args.wait_result = wait_result;
        let mut writes = Vec::new();
        if outcome == WaitOutcome::Complete && !self.data.is_empty() {
            for (slot, data) in self.slots.iter().zip(self.data.iter_mut()) {
                let Some(ev) = events.get(&slot.event_id).filter(|_| slot.activated) else { continue };
                match ev.event_type {
                    KFD_IOC_EVENT_MEMORY => uapi::FromBytes::read_from_bytes(ev.memory_exception.as_bytes())
                        .map(|p: [u64; 4]| data.payload = p)
                        .unwrap_or(()),
                    KFD_IOC_EVENT_HW_EXCEPTION | KFD_IOC_EVENT_QUEUE_EVENT => {
                        let mut p = [0u64; 4];
                        p.as_mut_bytes()[..16].copy_from_slice(ev.hw_exception.as_bytes());
                        data.payload = p;
                    }
                    KFD_IOC_EVENT_SIGNAL if slot.last_age != 0 => data.payload[0] = ev.age,
                    _ => {}
                }
            }
            writes.push(UserWrite { addr: self.args.events_ptr, data: self.data.as_bytes().to_vec() });
        }
        Completion { reply: self.reply, result, args: self.args, writes }
    }
}

/// A finished wait whose reply is still to be sent (after the event lock is dropped).
#[derive(Debug)]
pub struct Completion {
    pub reply: Pending,
    pub result: Result<(), Errno>,
    pub args: WaitEventsArgs,
    pub writes: Vec<UserWrite>,
}

impl Completion {
    pub fn tag(&self) -> u64 {
        self.reply.tag()
    }

    pub fn send(self) {
        self.reply.complete(self.result, self.args.as_bytes(), self.writes);
    }
}
