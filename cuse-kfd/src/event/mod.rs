//! KFD events of one process (amdkfd kfd_events.c): signal events with event-page slots,
//! exception events, auto and manual reset, event age, and the waiters parked on them.
//!
//! A wait never holds a thread: a WAIT_EVENTS that cannot complete at once becomes a
//! [`wait::Waiter`] stored here with the reply it owes; whoever changes the condition (SET_EVENT,
//! the command processor, a timeout, an interrupt, destruction) completes it. Completions are
//! returned to the caller to be sent after the table's lock is dropped.

pub mod page;
pub mod registry;
#[cfg(test)]
mod tests;
pub mod timer;
pub mod wait;

use nix::errno::Errno;
use page::EventPage;
use std::collections::{BTreeMap, HashMap};
use uapi::kfd::*;
use wait::{Completion, WaitId, WaitOutcome, Waiter};

/// Event ids of non-signal events start here (amdkfd KFD_FIRST_NONSIGNAL_EVENT_ID).
pub const FIRST_NONSIGNAL_EVENT_ID: u32 = KFD_SIGNAL_EVENT_LIMIT;
/// Bound on non-signal events per process, so a client cannot grow the table without limit.
pub const MAX_NONSIGNAL_EVENTS: usize = 4096;

/// One KFD event.
#[derive(Debug)]
pub struct Event {
    pub id: u32,
    pub event_type: u32,
    pub auto_reset: bool,
    pub signaled: bool,
    /// Incremented on each set (KFD 1.14 event age); starts at 1 so that 0 means "not used".
    pub age: u64,
    /// The table's set count at this event's last set (0: never set).
    pub last_set: u64,
    /// The latest kernel order of a SET_EVENT request that set it (0: none; see
    /// [`wait::Entry::queued`]).
    pub last_set_queued: u64,
    /// The latest kernel order (entry) of a wait that took this auto-reset event's signal when
    /// it began (0: none; waits without an entry do not count; see [`wait::Entry::queued`]).
    pub consumed_by_queued: u64,
    /// Waiters parked on this event.
    pub waiters: Vec<WaitId>,
    /// The last memory exception reported through this event (MEMORY events).
    pub memory_exception: HsaMemoryExceptionData,
    /// The last hardware exception reported through this event (HW_EXCEPTION events).
    pub hw_exception: HsaHwExceptionData,
}

impl Event {
    fn uses_slot(&self) -> bool {
        uses_slot(self.event_type)
    }
}

fn uses_slot(event_type: u32) -> bool {
    event_type == KFD_IOC_EVENT_SIGNAL || event_type == KFD_IOC_EVENT_DEBUG_EVENT
}

/// The events of one process.
#[derive(Debug, Default)]
pub struct EventTable {
    events: BTreeMap<u32, Event>,
    page: Option<EventPage>,
    waiters: HashMap<WaitId, Waiter>,
    next_nonsignal: u32,
    /// Every slot below this one is taken: the search for the lowest free slot starts here, so
    /// that filling the page is linear, not quadratic.
    first_maybe_free_slot: u32,
    /// Sets so far, of every event: a wait that entered the device at count N counts the sets
    /// after N (see [`wait::Entry`]).
    set_count: u64,
}

/// What CREATE_EVENT hands back.
#[derive(Debug, Clone, Copy)]
pub struct Created {
    pub event_id: u32,
    pub slot: Option<u32>,
}

impl EventTable {
    pub fn page(&self) -> Option<&EventPage> {
        self.page.as_ref()
    }

    /// Installs the event page; a process has at most one (EINVAL on a second).
    pub fn set_page(&mut self, page: EventPage) -> Result<(), Errno> {
        if self.page.is_some() {
            return Err(Errno::EINVAL);
        }
        page.reset_all();
        self.page = Some(page);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn waiter_count(&self) -> usize {
        self.waiters.len()
    }

    /// Sets so far: what a front end that receives a WAIT_EVENTS in rounds notes when the call
    /// enters (see [`Waiter::entered`]).
    pub fn set_count(&self) -> u64 {
        self.set_count
    }

    pub fn get(&self, id: u32) -> Option<&Event> {
        self.events.get(&id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.events.values()
    }

    /// Creates an event; signal (and debug) events take a slot of the event page, which must
    /// exist already.
    pub fn create(&mut self, event_type: u32, auto_reset: bool) -> Result<Created, Errno> {
        if event_type > KFD_IOC_EVENT_MEMORY {
            return Err(Errno::EINVAL);
        }
        let id = if uses_slot(event_type) {
            let page = self.page.as_ref().ok_or(Errno::ENOMEM)?;
            // Ids of signal events are their slots, the lowest free first from 0 (amdkfd's
            // idr_alloc over the mapped page: 4096 per process).
            let id = (self.first_maybe_free_slot..page.slots())
                .find(|id| !self.events.contains_key(id))
                .ok_or(Errno::ENOSPC)?;
            page.reset_slot(id);
            self.first_maybe_free_slot = id + 1;
            id
        } else {
            let used = self.events.range(FIRST_NONSIGNAL_EVENT_ID..).count();
            if used >= MAX_NONSIGNAL_EVENTS {
                return Err(Errno::ENOSPC);
            }
            let mut id = FIRST_NONSIGNAL_EVENT_ID.max(self.next_nonsignal);
            while self.events.contains_key(&id) {
                id = id.checked_add(1).unwrap_or(FIRST_NONSIGNAL_EVENT_ID);
            }
            self.next_nonsignal = id.checked_add(1).unwrap_or(FIRST_NONSIGNAL_EVENT_ID);
            id
        };
        self.events.insert(
            id,
            Event {
                id,
                event_type,
                auto_reset,
                signaled: false,
                age: 1,
                last_set: 0,
                last_set_queued: 0,
                consumed_by_queued: 0,
                waiters: Vec::new(),
                memory_exception: HsaMemoryExceptionData::default(),
                hw_exception: HsaHwExceptionData::default(),
            },
        );
        Ok(Created { event_id: id, slot: uses_slot(event_type).then_some(id) })
    }

    /// Destroys an event; its waiters complete with FAIL (EIO).
    pub fn destroy(&mut self, id: u32, done: &mut Vec<Completion>) -> Result<(), Errno> {
        let ev = self.events.remove(&id).ok_or(Errno::EINVAL)?;
        if ev.uses_slot() {
            self.first_maybe_free_slot = self.first_maybe_free_slot.min(id);
            if let Some(page) = &self.page {
                page.reset_slot(id);
            }
        }
        for w in ev.waiters {
            if let Some(waiter) = self.waiters.remove(&w) {
                self.detach(&waiter);
                done.push(waiter.finish(WaitOutcome::Destroyed, &self.events));
            }
        }
        Ok(())
    }

    /// Wakes the waiters on event `id` with FAIL and leaves the event as it is: what was to set
    /// it (a packet of a destroyed queue) never will.
    pub fn fail_waiters(&mut self, id: u32, done: &mut Vec<Completion>) {
        let Some(ev) = self.events.get_mut(&id) else { return };
        for w in std::mem::take(&mut ev.waiters) {
            if let Some(waiter) = self.waiters.remove(&w) {
                self.detach(&waiter);
                done.push(waiter.finish(WaitOutcome::Destroyed, &self.events));
            }
        }
    }

    /// SET_EVENT from the host: only signal events may be set this way. `queued` is the
    /// request's kernel order where its front end has one (see [`wait::Entry::queued`]).
    pub fn set_from_host(&mut self, id: u32, queued: Option<u64>, done: &mut Vec<Completion>) -> Result<(), Errno> {
        let ev = self.events.get_mut(&id).ok_or(Errno::EINVAL)?;
        if ev.event_type != KFD_IOC_EVENT_SIGNAL {
            return Err(Errno::EINVAL);
        }
        if let Some(q) = queued {
            ev.last_set_queued = ev.last_set_queued.max(q);
        }
        self.set(id, done);
        Ok(())
    }

    /// RESET_EVENT: only signal events.
    pub fn reset(&mut self, id: u32) -> Result<(), Errno> {
        let ev = self.events.get_mut(&id).ok_or(Errno::EINVAL)?;
        if ev.event_type != KFD_IOC_EVENT_SIGNAL {
            return Err(Errno::EINVAL);
        }
        ev.signaled = false;
        Ok(())
    }

    /// Sets an event (amdkfd set_event): an auto-reset event with waiters wakes that round of
    /// waiters and stays unsignaled; otherwise it stays signaled until consumed or reset.
    pub fn set(&mut self, id: u32, done: &mut Vec<Completion>) {
        let Some(ev) = self.events.get_mut(&id) else { return };
        self.set_count += 1;
        ev.last_set = self.set_count;
        ev.age = ev.age.wrapping_add(1).max(1);
        ev.signaled = !ev.auto_reset || ev.waiters.is_empty();
        let woken: Vec<WaitId> = ev.waiters.clone();
        for w in woken {
            if let Some(waiter) = self.waiters.get_mut(&w) {
                waiter.activate(id);
            }
            self.complete_if_ready(w, done);
        }
    }

    /// The device wrote event `id` into its mailbox and raised an interrupt carrying the whole
    /// id (an AQL completion signal): as [`EventTable::interrupt`], so an event whose slot was
    /// not written is not set.
    pub fn signal_from_device(&mut self, id: u32, done: &mut Vec<Completion>) {
        self.interrupt(id, 32, done);
    }

    /// An end-of-pipe or SDMA trap interrupt whose context id carries `valid_bits` bits of an
    /// event id (amdkfd kfd_signal_event_interrupt): the event with that id is set if its slot
    /// was written; if not, every event whose slot was written is (the exhaustive search amdkfd
    /// falls back to when the id in the payload is wrong or partial).
    pub fn interrupt(&mut self, context_id: u32, valid_bits: u32, done: &mut Vec<Completion>) {
        let Some(page) = &self.page else { return };
        let written = |id: u32| page.read_slot(id).is_some_and(|v| v != UNSIGNALED_EVENT_SLOT);
        let mask = if valid_bits >= 32 { u32::MAX } else { (1u32 << valid_bits) - 1 };
        let partial = context_id & mask;
        let hit = if mask == u32::MAX {
            self.events.get(&partial).filter(|e| e.uses_slot()).map(|e| e.id).filter(|&id| written(id))
        } else {
            self.events
                .values()
                .filter(|e| e.uses_slot() && e.id & mask == partial)
                .map(|e| e.id)
                .find(|&id| written(id))
        };
        let ids: Vec<u32> = match hit {
            Some(id) => vec![id],
            None => self.events.values().filter(|e| e.uses_slot() && written(e.id)).map(|e| e.id).collect(),
        };
        for id in ids {
            if let Some(page) = &self.page {
                page.reset_slot(id);
            }
            self.set(id, done);
        }
    }

    /// Records a GPU VM fault in every MEMORY event and sets them (kfd_signal_vm_fault_event).
    pub fn memory_exception(&mut self, data: HsaMemoryExceptionData, done: &mut Vec<Completion>) {
        let ids: Vec<u32> =
            self.events.values().filter(|e| e.event_type == KFD_IOC_EVENT_MEMORY).map(|e| e.id).collect();
        for id in ids {
            if let Some(ev) = self.events.get_mut(&id) {
                ev.memory_exception = data;
            }
            self.set(id, done);
        }
    }

    /// Records a hardware exception in every HW_EXCEPTION event and sets them; queue events are
    /// set too, as the queue that failed is reported through them.
    pub fn hw_exception(&mut self, data: HsaHwExceptionData, done: &mut Vec<Completion>) {
        let ids: Vec<u32> = self
            .events
            .values()
            .filter(|e| e.event_type == KFD_IOC_EVENT_HW_EXCEPTION || e.event_type == KFD_IOC_EVENT_QUEUE_EVENT)
            .map(|e| e.id)
            .collect();
        for id in ids {
            if let Some(ev) = self.events.get_mut(&id) {
                ev.hw_exception = data;
            }
            self.set(id, done);
        }
    }

    /// Starts a wait (amdkfd kfd_wait_on_events, first half): checks ids, arms the waiter from
    /// current state and returns it complete, timed out (timeout 0), or parked.
    /// Every event id must exist (the caller checked, under this lock).
    pub fn begin_wait(&mut self, mut waiter: Waiter, done: &mut Vec<Completion>) -> Option<WaitId> {
        let entered = waiter.entered;
        // Calls begin in the kernel's order in amdkfd (each runs in its caller's thread); here
        // a call that entered first may begin after one that entered later (other readers took
        // the later one first). What the later one saw, the earlier one would have seen first:
        // a set after this call entered, or an auto-reset signal a later entrant took (amdkfd
        // would have given it to this call; the later one's wake is then a spurious one, which
        // waiters that check their condition again, as ROCr's do, absorb).
        let before_this = |ev: &Event| {
            entered.is_some_and(|e| {
                ev.last_set > e.set_count || ev.last_set_queued > e.queued || ev.consumed_by_queued > e.queued
            })
        };
        for slot in waiter.slots.iter_mut() {
            let Some(ev) = self.events.get_mut(&slot.event_id) else { continue };
            slot.activated = ev.signaled
                || before_this(ev)
                || (ev.event_type == KFD_IOC_EVENT_SIGNAL && slot.last_age != 0 && slot.last_age != ev.age);
            // A waiter consumes an auto-reset event's signal.
            if ev.signaled && ev.auto_reset {
                ev.signaled = false;
                if let Some(e) = entered {
                    ev.consumed_by_queued = ev.consumed_by_queued.max(e.queued);
                }
            }
        }
        if waiter.ready() {
            done.push(waiter.finish(WaitOutcome::Complete, &self.events));
            return None;
        }
        if waiter.timeout_ms == 0 {
            done.push(waiter.finish(WaitOutcome::Timeout, &self.events));
            return None;
        }
        let id = waiter.id;
        for slot in &waiter.slots {
            if let Some(ev) = self.events.get_mut(&slot.event_id) {
                if !ev.waiters.contains(&id) {
                    ev.waiters.push(id);
                }
            }
        }
        self.waiters.insert(id, waiter);
        Some(id)
    }

    fn complete_if_ready(&mut self, id: WaitId, done: &mut Vec<Completion>) {
        if self.waiters.get(&id).is_some_and(Waiter::ready) {
            let waiter = self.waiters.remove(&id).expect("checked above");
            self.detach(&waiter);
            done.push(waiter.finish(WaitOutcome::Complete, &self.events));
        }
    }

    fn detach(&mut self, waiter: &Waiter) {
        for slot in &waiter.slots {
            if let Some(ev) = self.events.get_mut(&slot.event_id) {
                ev.waiters.retain(|w| *w != waiter.id);
            }
        }
    }

    /// Ends a parked wait early (timeout or interrupt); false if it already completed.
    pub fn cancel_wait(&mut self, id: WaitId, outcome: WaitOutcome, done: &mut Vec<Completion>) -> bool {
        match self.waiters.remove(&id) {
            Some(waiter) => {
                self.detach(&waiter);
                done.push(waiter.finish(outcome, &self.events));
                true
            }
            None => false,
        }
    }

    /// Process teardown: every waiter completes with FAIL and every event goes.
    pub fn teardown(&mut self, done: &mut Vec<Completion>) {
        let ids: Vec<WaitId> = self.waiters.keys().copied().collect();
        for id in ids {
            self.cancel_wait(id, WaitOutcome::Destroyed, done);
        }
        self.events.clear();
        self.first_maybe_free_slot = 0;
        self.page = None;
    }
}
