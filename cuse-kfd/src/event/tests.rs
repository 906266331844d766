//! EventTable: auto and manual reset, event age, and the interrupt path with its fallback.

use super::page::{EventPage, EVENT_PAGE_SIZE};
use super::wait::{Completion, Entry, WaitOutcome, WaitSlot, Waiter};
use super::EventTable;
use crate::memory::backing::{BackingStore, MmapSpace, Owner};
use crate::reply::{Pending, Responder};
use uapi::kfd::*;

/// A table with an event page over a fresh backing file.
struct Fixture {
    table: EventTable,
    _store: BackingStore,
    next_wait: u64,
}

impl Fixture {
    fn new() -> Fixture {
        let store = BackingStore::private().unwrap();
        let owner = Owner { uid: nix::unistd::getuid().as_raw(), gid: nix::unistd::getgid().as_raw() };
        let file = store.create(store.client(1), owner, MmapSpace::Kfd, 0, EVENT_PAGE_SIZE).unwrap();
        let mut table = EventTable::default();
        table.set_page(EventPage::new(file, 0).unwrap()).unwrap();
        Fixture { table, _store: store, next_wait: 1 }
    }

    fn signal_event(&mut self, auto_reset: bool) -> u32 {
        self.table.create(KFD_IOC_EVENT_SIGNAL, auto_reset).unwrap().event_id
    }

    /// Starts a wait on `ids` (any of them) with the ages the caller last saw (0: none);
    /// returns whether it parked and what completed at once.
    fn wait(&mut self, ids: &[(u32, u64)]) -> (bool, Vec<Completion>) {
        self.wait_entered(ids, None)
    }

    /// [`Fixture::wait`] for a call that entered the device at `entered`.
    fn wait_entered(&mut self, ids: &[(u32, u64)], entered: Option<Entry>) -> (bool, Vec<Completion>) {
        let id = self.next_wait;
        self.next_wait += 1;
        let data: Vec<EventData> = ids
            .iter()
            .map(|&(event_id, age)| EventData { event_id, payload: [age, 0, 0, 0], ..EventData::default() })
            .collect();
        let waiter = Waiter {
            id,
            slots: ids.iter().map(|&(event_id, last_age)| WaitSlot { event_id, activated: false, last_age }).collect(),
            wait_for_all: false,
            timeout_ms: KFD_EVENT_TIMEOUT_INFINITE,
            entered,
            args: WaitEventsArgs { events_ptr: 0x1000, num_events: ids.len() as u32, ..WaitEventsArgs::default() },
            data,
            reply: Pending::new(Responder::new(id, |_| {}), std::mem::size_of::<WaitEventsArgs>(), true),
        };
        let mut done = Vec::new();
        let parked = self.table.begin_wait(waiter, &mut done).is_some();
        (parked, done)
    }

    fn page(&self) -> &EventPage {
        self.table.page().unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.table.teardown(&mut Vec::new());
    }
}

fn completed(done: &[Completion]) -> Vec<u32> {
    done.iter().map(|c| c.args.wait_result).collect()
}

/// The event data a completed wait copies back to the caller.
fn written_data(c: &Completion) -> Vec<EventData> {
    let bytes = &c.writes.first().expect("a completed wait writes its event data").data;
    bytes.chunks_exact(48).map(|b| uapi::FromBytes::read_from_bytes(b).unwrap()).collect()
}

#[test]
fn an_auto_reset_event_is_consumed_by_the_waiter_it_wakes() {
    let mut f = Fixture::new();
    let auto = f.signal_event(true);
    let manual = f.signal_event(false);
    let mut done = Vec::new();

    // Set with nobody waiting: both stay signaled until consumed or reset.
    f.table.set(auto, &mut done);
    f.table.set(manual, &mut done);
    assert!(done.is_empty());
    assert!(f.table.get(auto).unwrap().signaled && f.table.get(manual).unwrap().signaled);
    // A waiter completes at once on each; it consumes the auto-reset signal only.
    let (parked, done) = f.wait(&[(auto, 0)]);
    assert!(!parked);
    assert_eq!(completed(&done), [KFD_IOC_WAIT_RESULT_COMPLETE]);
    assert!(!f.table.get(auto).unwrap().signaled, "the waiter consumed the auto-reset signal");
    let (parked, _) = f.wait(&[(manual, 0)]);
    assert!(!parked);
    assert!(f.table.get(manual).unwrap().signaled, "a manual-reset event stays signaled");
    let (parked, _) = f.wait(&[(auto, 0)]);
    assert!(parked, "a consumed auto-reset event parks the next waiter");

    // Set with a waiter: the auto-reset event wakes it and stays unsignaled.
    let mut done = Vec::new();
    f.table.set(auto, &mut done);
    assert_eq!(completed(&done), [KFD_IOC_WAIT_RESULT_COMPLETE]);
    assert!(!f.table.get(auto).unwrap().signaled);
    assert_eq!(f.table.waiter_count(), 0);
    // A manual-reset event woken with a waiter stays signaled.
    f.table.reset(manual).unwrap();
    let (parked, _) = f.wait(&[(manual, 0)]);
    assert!(parked);
    let mut done = Vec::new();
    f.table.set(manual, &mut done);
    assert_eq!(completed(&done), [KFD_IOC_WAIT_RESULT_COMPLETE]);
    assert!(f.table.get(manual).unwrap().signaled);
}

/// ROCr's queue destructor sets an auto-reset event and then waits on it itself, for the async
/// thread's answer. A wait of the async thread that entered before the set (its arguments still
/// in CUSE's RETRY rounds) must be woken by it, as amdkfd's waiter registered at entry is, even
/// though the destroyer's own wait consumed the signal first. A set before entry does not count.
#[test]
fn a_set_after_a_wait_entered_wakes_it_though_another_wait_consumed_the_signal() {
    let mut f = Fixture::new();
    let shared = f.signal_event(true);
    let before = f.signal_event(true);
    let mut done = Vec::new();
    f.table.set(before, &mut done);
    let (parked, _) = f.wait(&[(before, 0)]);
    assert!(!parked);
    // By the set count alone: queued last of all requests, no set is after it in their order.
    let entered = Entry { set_count: f.table.set_count(), queued: u64::MAX };
    f.table.set(shared, &mut done);
    assert!(done.is_empty());
    let (parked, done) = f.wait(&[(shared, 0)]);
    assert!(!parked && completed(&done) == [KFD_IOC_WAIT_RESULT_COMPLETE], "the destroyer's wait consumes the set");
    assert!(!f.table.get(shared).unwrap().signaled);

    let (parked, _) = f.wait_entered(&[(before, 0)], Some(entered));
    assert!(parked, "a set before entry, consumed, does not wake a wait that entered after it");
    let (parked, done) = f.wait_entered(&[(shared, 0)], Some(entered));
    assert!(!parked, "the set came after this wait entered");
    assert_eq!(completed(&done), [KFD_IOC_WAIT_RESULT_COMPLETE]);
    let (parked, _) = f.wait(&[(shared, 0)]);
    assert!(parked, "without an entry count a consumed auto-reset event parks the waiter");
}

/// The same race when the device takes the async thread's first round late: the destroyer's
/// SET_EVENT, queued after that round, runs first (another reader took it), so by the set count
/// the set came before the entry. The kernel's order of the requests says otherwise, and wakes
/// the wait; a set queued before the entry still does not.
#[test]
fn a_set_queued_after_a_wait_entered_wakes_it_though_the_device_ran_the_set_first() {
    let mut f = Fixture::new();
    let shared = f.signal_event(true);
    let before = f.signal_event(true);
    let mut done = Vec::new();
    // Request order: the set of `before` (10), the async thread's first round (20), the set of
    // `shared` (30). Device order: both sets, the destroyer's consuming waits, then the round.
    f.table.set_from_host(before, Some(10), &mut done).unwrap();
    f.table.set_from_host(shared, Some(30), &mut done).unwrap();
    assert!(done.is_empty());
    for id in [before, shared] {
        let (parked, done) = f.wait(&[(id, 0)]);
        assert!(!parked && completed(&done) == [KFD_IOC_WAIT_RESULT_COMPLETE], "a wait consumes the set");
    }
    let entered = Entry { set_count: f.table.set_count(), queued: 20 };
    let (parked, _) = f.wait_entered(&[(before, 0)], Some(entered));
    assert!(parked, "a set queued before the entry, consumed, does not wake the wait");
    let (parked, done) = f.wait_entered(&[(shared, 0)], Some(entered));
    assert!(!parked, "the set was queued after this wait entered");
    assert_eq!(completed(&done), [KFD_IOC_WAIT_RESULT_COMPLETE]);
    let later = Entry { set_count: f.table.set_count(), queued: 40 };
    let (parked, _) = f.wait_entered(&[(shared, 0)], Some(later));
    assert!(parked, "a wait that entered after every set sleeps");
}

/// Another reader can take a call that entered later first. ROCr's destroyer sets the queue's
/// auto-reset event and then waits on it itself; the async thread's wait entered before that
/// wait (here at 20 and 30), after the set (10), but begins last: the destroyer's wait took the
/// signal that amdkfd, beginning calls in their order, would have given the async thread. It is
/// woken all the same. A call that entered after the taker still parks, and so does one with
/// no entry (the embedded device, which runs calls in their order).
#[test]
fn a_signal_taken_by_a_later_entrant_wakes_a_wait_that_entered_before_it() {
    let mut f = Fixture::new();
    let ev = f.signal_event(true);
    let mut done = Vec::new();
    f.table.set_from_host(ev, Some(10), &mut done).unwrap();
    let destroyer = Entry { set_count: f.table.set_count(), queued: 30 };
    let (parked, done) = f.wait_entered(&[(ev, 0)], Some(destroyer));
    assert!(!parked && completed(&done) == [KFD_IOC_WAIT_RESULT_COMPLETE], "the later entrant takes the signal");
    let async_thread = Entry { set_count: f.table.set_count(), queued: 20 };
    let (parked, done) = f.wait_entered(&[(ev, 0)], Some(async_thread));
    assert!(!parked, "it entered before the wait that took the signal");
    assert_eq!(completed(&done), [KFD_IOC_WAIT_RESULT_COMPLETE]);
    let later = Entry { set_count: f.table.set_count(), queued: 40 };
    let (parked, _) = f.wait_entered(&[(ev, 0)], Some(later));
    assert!(parked, "one that entered after the taker parks");
    let (parked, _) = f.wait(&[(ev, 0)]);
    assert!(parked, "and so does one without an entry");
}

#[test]
fn a_waiter_that_saw_an_older_age_completes_at_once_and_reads_the_new_age() {
    let mut f = Fixture::new();
    let ev = f.signal_event(true);
    assert_eq!(f.table.get(ev).unwrap().age, 1, "ages start at 1");
    let mut done = Vec::new();
    f.table.set(ev, &mut done);
    f.table.set(ev, &mut done);
    assert_eq!(f.table.get(ev).unwrap().age, 3, "each set ages the event");
    f.table.reset(ev).unwrap();

    // Unsignaled, but the caller last saw age 1: the event was set since.
    let (parked, done) = f.wait(&[(ev, 1)]);
    assert!(!parked);
    assert_eq!(completed(&done), [KFD_IOC_WAIT_RESULT_COMPLETE]);
    assert_eq!(written_data(&done[0])[0].payload[0], 3, "the caller gets the current age");
    // A caller that saw the current age waits; the next set completes it with the next age.
    let (parked, _) = f.wait(&[(ev, 3)]);
    assert!(parked);
    let mut done = Vec::new();
    f.table.set(ev, &mut done);
    assert_eq!(completed(&done), [KFD_IOC_WAIT_RESULT_COMPLETE]);
    assert_eq!(written_data(&done[0])[0].payload[0], 4);
    // Age 0 means "not used": an unsignaled event parks its waiter whatever its age.
    let (parked, _) = f.wait(&[(ev, 0)]);
    assert!(parked);
}

#[test]
fn an_interrupt_sets_the_event_it_names_or_else_every_written_one() {
    let mut f = Fixture::new();
    let a = f.signal_event(false);
    let b = f.signal_event(false);
    let c = f.signal_event(false);
    let mut done = Vec::new();

    // The named event is set only if its slot was written.
    f.table.interrupt(a, 32, &mut done);
    assert!(!f.table.get(a).unwrap().signaled, "an unwritten slot is not set");
    f.page().write_slot(a, u64::from(a));
    f.page().write_slot(b, u64::from(b));
    f.table.interrupt(a, 32, &mut done);
    assert!(f.table.get(a).unwrap().signaled);
    assert!(!f.table.get(b).unwrap().signaled, "a named hit sets that event alone");
    assert_eq!(f.page().read_slot(a), Some(UNSIGNALED_EVENT_SLOT), "its slot is reset");
    assert_ne!(f.page().read_slot(b), Some(UNSIGNALED_EVENT_SLOT));

    // A partial id that matches a written slot sets that event.
    f.table.reset(a).unwrap();
    f.page().write_slot(c, u64::from(c));
    f.table.interrupt(0x1000 | c, 4, &mut done);
    assert!(f.table.get(c).unwrap().signaled && !f.table.get(b).unwrap().signaled);

    // An id that names no written slot falls back to every written slot.
    f.table.reset(c).unwrap();
    f.page().write_slot(c, u64::from(c));
    f.table.interrupt(0xFFF, 32, &mut done);
    assert!(!f.table.get(a).unwrap().signaled, "a has no written slot");
    assert!(f.table.get(b).unwrap().signaled && f.table.get(c).unwrap().signaled);
    assert_eq!(f.page().read_slot(b), Some(UNSIGNALED_EVENT_SLOT));
    assert_eq!(f.page().read_slot(c), Some(UNSIGNALED_EVENT_SLOT));
    assert!(done.is_empty(), "nobody was waiting");
}

#[test]
fn a_cancelled_wait_answers_with_its_outcome() {
    let mut f = Fixture::new();
    let ev = f.signal_event(false);
    let (parked, _) = f.wait(&[(ev, 0)]);
    assert!(parked);
    let mut done = Vec::new();
    assert!(f.table.cancel_wait(1, WaitOutcome::Interrupted, &mut done));
    assert_eq!(completed(&done), [KFD_IOC_WAIT_RESULT_FAIL]);
    assert_eq!(done[0].result, Err(nix::errno::Errno::EINTR));
    assert!(!f.table.cancel_wait(1, WaitOutcome::Timeout, &mut Vec::new()), "a wait ends once");
    assert!(f.table.get(ev).unwrap().waiters.is_empty());
}
