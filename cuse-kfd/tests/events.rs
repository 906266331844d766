//! Events and waits (create and destroy up to the event page's limit, set, reset, auto-reset,
//! event age, WAIT_EVENTS any and all with every timeout, waiters failed by a destroy, and
//! interrupted waits), against amdkfd's kfd_events.c semantics.

mod support;

use cuse_kfd::memory::backing::MmapSpace;
use nix::errno::Errno;
use std::time::{Duration, Instant};
use support::raw::*;
use uapi::ioctl::*;
use uapi::kfd::*;

const NEVER: u32 = KFD_EVENT_TIMEOUT_INFINITE;

fn complete(w: &Waited) {
    assert_eq!((w.result, w.wait_result), (Ok(()), KFD_IOC_WAIT_RESULT_COMPLETE), "{w:?}");
}

fn timed_out(w: &Waited) {
    assert_eq!((w.result, w.wait_result), (Ok(()), KFD_IOC_WAIT_RESULT_TIMEOUT), "{w:?}");
}

fn failed(w: &Waited, errno: Errno) {
    assert_eq!((w.result, w.wait_result), (Err(errno), KFD_IOC_WAIT_RESULT_FAIL), "{w:?}");
}

#[test]
fn create_and_destroy() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.try_create_event(KFD_IOC_EVENT_SIGNAL, true, 0).unwrap();
    assert_eq!(e.event_id, 0, "the first signal event takes slot 0, as in amdkfd");
    assert_eq!((e.event_slot_index, e.event_trigger_data), (0, 0));
    assert_eq!(e.event_page_offset, KFD_MMAP_TYPE_EVENTS);
    assert_eq!(rig.stats().events, 1);
    c.destroy_event(e.event_id).unwrap();
    assert_eq!(rig.stats().events, 0);
    assert_eq!(c.destroy_event(e.event_id), Err(Errno::EINVAL));
    assert_eq!(c.set_event(e.event_id), Err(Errno::EINVAL));
}

#[test]
fn event_page_holds_4096_signal_events_then_enospc() {
    let rig = Rig::new();
    let c = rig.open();
    // amdkfd: slots 0..4095 of the page, lowest free first.
    let ids: Vec<u32> = (0..KFD_SIGNAL_EVENT_LIMIT).map(|_| c.signal_event(false)).collect();
    assert_eq!(ids, (0..KFD_SIGNAL_EVENT_LIMIT).collect::<Vec<_>>());
    assert_eq!(c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, 0).unwrap_err(), Errno::ENOSPC);
    assert_eq!(
        c.try_create_event(KFD_IOC_EVENT_DEBUG_EVENT, false, 0).unwrap_err(),
        Errno::ENOSPC,
        "debug events use slots too"
    );
    // Non-signal events do not need a slot.
    let mem = c.try_create_event(KFD_IOC_EVENT_MEMORY, false, 0).unwrap();
    assert!(mem.event_id >= KFD_SIGNAL_EVENT_LIMIT);
    assert_eq!(rig.stats().events, KFD_SIGNAL_EVENT_LIMIT as usize + 1);
    // A freed slot is handed out again (the lowest free, as idr_alloc).
    c.destroy_event(100).unwrap();
    assert_eq!(c.signal_event(false), 100);
    assert_eq!(c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, 0).unwrap_err(), Errno::ENOSPC);
    // Freed in any order, handed out lowest first.
    for id in [3000, 7, 0] {
        c.destroy_event(id).unwrap();
    }
    assert_eq!([c.signal_event(false), c.signal_event(false), c.signal_event(false)], [0, 7, 3000]);
    assert_eq!(c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, 0).unwrap_err(), Errno::ENOSPC);
}

#[test]
fn manual_reset_stays_set_until_reset() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(false);
    timed_out(&c.wait(&[e], false, 0));
    c.set_event(e).unwrap();
    complete(&c.wait(&[e], false, 0));
    complete(&c.wait(&[e], false, 0));
    c.reset_event(e).unwrap();
    timed_out(&c.wait(&[e], false, 0));
    // Setting twice is still one set state; one reset clears it.
    c.set_event(e).unwrap();
    c.set_event(e).unwrap();
    c.reset_event(e).unwrap();
    timed_out(&c.wait(&[e], false, 0));
}

#[test]
fn auto_reset_is_consumed_by_one_wait() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(true);
    // Set with nobody waiting: it stays signaled until a wait consumes it.
    c.set_event(e).unwrap();
    complete(&c.wait(&[e], false, 0));
    timed_out(&c.wait(&[e], false, 0));
    // Set with a waiter: the waiter is woken and the event returns to unsignaled.
    let parked = c.start_wait(&[e], false, NEVER);
    assert!(parked.still_parked());
    c.set_event(e).unwrap();
    complete(&parked.finish());
    timed_out(&c.wait(&[e], false, 0));
    // Reset clears a pending auto-reset signal too.
    c.set_event(e).unwrap();
    c.reset_event(e).unwrap();
    timed_out(&c.wait(&[e], false, 0));
}

#[test]
fn event_age_catches_a_missed_signal() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(false);
    // Age starts at 1: a waiter that saw age 1 waits.
    let w = c.wait_aged(&[(e, 1)], false, 0);
    timed_out(&w);
    // A signal happens and is reset before the waiter comes back: without the age the wait
    // misses it, with the age it sees it and learns the new age.
    c.set_event(e).unwrap();
    c.reset_event(e).unwrap();
    timed_out(&c.wait_aged(&[(e, 0)], false, 0));
    let w = c.wait_aged(&[(e, 1)], false, 0);
    complete(&w);
    assert_eq!(w.data[0].payload[0], 2, "the current age is returned");
    // Waiting with the age just learnt blocks again.
    let w2 = c.wait_aged(&[(e, 2)], false, 0);
    timed_out(&w2);
    // A parked waiter with an age is woken by the next set and told the age.
    let data = [(e, 2u64)];
    let handle = std::thread::scope(|s| {
        let t = s.spawn(|| c.wait_aged(&data, false, NEVER));
        wait_until(|| rig.stats().waiters == 1);
        c.set_event(e).unwrap();
        t.join().unwrap()
    });
    complete(&handle);
    assert_eq!(handle.data[0].payload[0], 3);
}

#[test]
fn wait_any_and_wait_all() {
    let rig = Rig::new();
    let c = rig.open();
    let a = c.signal_event(false);
    let b = c.signal_event(false);
    c.set_event(a).unwrap();
    complete(&c.wait(&[a, b], false, 0));
    timed_out(&c.wait(&[a, b], true, 0));
    c.set_event(b).unwrap();
    complete(&c.wait(&[a, b], true, 0));
    // Parked wait-all: one set is not enough, the second completes it.
    c.reset_event(a).unwrap();
    c.reset_event(b).unwrap();
    let all = c.start_wait(&[a, b], true, NEVER);
    let any = c.start_wait(&[a, b], false, NEVER);
    c.set_event(b).unwrap();
    complete(&any.finish());
    assert!(all.still_parked(), "wait-all still waits for a");
    assert_eq!(rig.stats().waiters, 1);
    c.set_event(a).unwrap();
    complete(&all.finish());
    assert_eq!(rig.stats().waiters, 0);
    // No events at all: complete at once.
    complete(&c.wait(&[], true, NEVER));
}

#[test]
fn timeout_zero_polls_without_waiting() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(false);
    let t0 = Instant::now();
    timed_out(&c.wait(&[e], false, 0));
    assert!(t0.elapsed() < Duration::from_millis(500), "a poll returned after {:?}", t0.elapsed());
    assert_eq!(rig.stats().waiters, 0, "a poll leaves no waiter");
}

#[test]
fn finite_timeout_times_out_after_about_that_long() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(false);
    let t0 = Instant::now();
    let w = c.wait(&[e], false, 200);
    let took = t0.elapsed();
    timed_out(&w);
    assert!(took >= Duration::from_millis(200), "timed out early, after {took:?}");
    assert!(took < Duration::from_secs(5), "timed out late, after {took:?}");
    assert_eq!(rig.stats().waiters, 0);
    // A finite wait that is signaled first completes before its timeout.
    let parked = c.start_wait(&[e], false, 10_000);
    c.set_event(e).unwrap();
    let t0 = Instant::now();
    complete(&parked.finish());
    assert!(t0.elapsed() < Duration::from_secs(5));
}

/// Polls `cond` for up to the reply timeout.
fn wait_until(cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < REPLY_TIMEOUT, "condition never became true");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn infinite_wait_is_woken_from_another_thread() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(true);
    let w = std::thread::scope(|s| {
        let waiter = s.spawn(|| c.wait(&[e], false, NEVER));
        wait_until(|| rig.stats().waiters == 1);
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "an infinite wait returned on its own");
        c.set_event(e).unwrap();
        waiter.join().unwrap()
    });
    complete(&w);
    assert_eq!(rig.stats().waiters, 0);
}

#[test]
fn a_hundred_parked_waits_hold_no_thread() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(false);
    let parked: Vec<Parked> = (0..100).map(|_| c.start_wait(&[e], false, NEVER)).collect();
    // Every start returned (on this one thread), and every wait is parked at once.
    assert_eq!(rig.stats().waiters, 100);
    for p in &parked {
        assert!(p.still_parked());
    }
    c.set_event(e).unwrap();
    for p in parked {
        complete(&p.finish());
    }
    assert_eq!(rig.stats().waiters, 0);
}

#[test]
fn destroying_an_event_fails_its_waiters_with_eio() {
    let rig = Rig::new();
    let c = rig.open();
    let a = c.signal_event(false);
    let b = c.signal_event(false);
    let on_a = c.start_wait(&[a], false, NEVER);
    let on_both = c.start_wait(&[a, b], true, NEVER);
    let on_b = c.start_wait(&[b], false, NEVER);
    c.destroy_event(a).unwrap();
    failed(&on_a.finish(), Errno::EIO);
    failed(&on_both.finish(), Errno::EIO);
    assert!(on_b.still_parked(), "a waiter on another event is untouched");
    assert_eq!(rig.stats().waiters, 1);
    c.set_event(b).unwrap();
    assert_eq!(rig.stats().waiters, 0);
}

#[test]
fn process_teardown_fails_its_waiters() {
    let rig = Rig::new();
    let c = rig.open_as(FAKE_PID);
    let e = c.signal_event(false);
    let parked = c.start_wait(&[e], false, NEVER);
    let timed = c.start_wait(&[e], false, 60_000);
    assert_eq!(rig.stats().waiters, 2);
    drop(c);
    failed(&parked.finish(), Errno::EIO);
    failed(&timed.finish(), Errno::EIO);
    assert_eq!(rig.stats(), Default::default());
}

#[test]
fn interrupted_wait_answers_eintr_and_can_wait_again() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(true);
    let parked = c.start_wait(&[e], false, NEVER);
    assert!(c.emb().interrupt(&parked.pending));
    // The reply is EINTR; the caller's wait_result says FAIL.
    let tag_gone = !c.emb().interrupt(&parked.pending);
    failed(&parked.finish(), Errno::EINTR);
    assert!(tag_gone, "an interrupted wait is no longer parked");
    assert_eq!(rig.stats().waiters, 0);
    // The event was not consumed or broken: the caller restarts the wait and it completes.
    let again = c.start_wait(&[e], false, NEVER);
    assert!(again.still_parked());
    c.set_event(e).unwrap();
    complete(&again.finish());
    // Interrupting a finished wait finds nothing.
    let done = c.start_wait(&[e], false, 0);
    let t = c.emb().interrupt(&done.pending);
    timed_out(&done.finish());
    assert!(!t);
}

#[test]
fn interrupted_timed_wait_does_not_fire_later() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(false);
    let parked = c.start_wait(&[e], false, 100);
    assert!(c.emb().interrupt(&parked.pending));
    failed(&parked.finish(), Errno::EINTR);
    // The old timer expiring must not touch a new wait.
    let next = c.start_wait(&[e], false, NEVER);
    std::thread::sleep(Duration::from_millis(250));
    assert!(next.still_parked());
    c.set_event(e).unwrap();
    assert_eq!(rig.stats().waiters, 0);
}

#[test]
fn device_made_event_page_reads_all_ones() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, 0).unwrap();
    let path = rig.backing(c.pid(), MmapSpace::Kfd, e.event_page_offset);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8);
    let page = map_file(&path);
    assert!((0..KFD_SIGNAL_EVENT_LIMIT as usize).all(|s| word(&page, s * 8) == UNSIGNALED_EVENT_SLOT));
}

#[test]
fn client_gtt_buffer_becomes_the_event_page() {
    let rig = Rig::new();
    let c = rig.open();
    let size = u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8;
    let buf = c.alloc_mapped(Mem::Gtt, size);
    let path = rig.backing(c.pid(), MmapSpace::Render, buf.mmap_offset);
    let mut page = map_file(&path);
    assert_eq!(word(&page, 8), 0, "a fresh GTT buffer is zero");
    // The first CREATE_EVENT names the buffer by its handle.
    let e = c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, buf.handle).unwrap();
    assert_eq!(e.event_id, 0);
    assert_eq!(e.event_page_offset, KFD_MMAP_TYPE_EVENTS);
    let slots = KFD_SIGNAL_EVENT_LIMIT as usize;
    assert!((0..slots).all(|s| word(&page, s * 8) == UNSIGNALED_EVENT_SLOT), "every slot reads all ones");
    // No second page, whether named again or another buffer (amdkfd: EINVAL).
    let other = c.alloc_mapped(Mem::Gtt, size);
    assert_eq!(c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, other.handle).unwrap_err(), Errno::EINVAL);
    assert_eq!(c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, buf.handle).unwrap_err(), Errno::EINVAL);
    // The page cannot be freed under the events (amdkfd: EPERM), mapped or not.
    c.unmap(buf.handle, &[rig.gpu()]).unwrap();
    assert_eq!(c.free(buf.handle), Err(Errno::EPERM));
    // The GPU signals: it writes the event id into the slot, then interrupts. The slot holds
    // the id until the device acknowledges it, then reads all ones again.
    let at = e.event_slot_index as usize * 8;
    page[at..at + 8].copy_from_slice(&u64::from(e.event_id).to_ne_bytes());
    let p = rig.emb().device().process(c.pid()).unwrap();
    assert_eq!(p.events().page().unwrap().read_slot(e.event_id), Some(u64::from(e.event_id)));
    timed_out(&c.wait(&[e.event_id], false, 0));
    let mut done = Vec::new();
    p.events().signal_from_device(e.event_id, &mut done);
    assert!(done.is_empty(), "no waiter was parked");
    assert_eq!(word(&page, at), UNSIGNALED_EVENT_SLOT, "acknowledged");
    complete(&c.wait(&[e.event_id], false, 0));
    // Destroying an event leaves its slot unsignaled.
    page[at..at + 8].copy_from_slice(&7u64.to_ne_bytes());
    c.destroy_event(e.event_id).unwrap();
    assert_eq!(word(&page, at), UNSIGNALED_EVENT_SLOT);
}

#[test]
fn an_event_page_must_be_a_large_enough_gtt_buffer() {
    let rig = Rig::new();
    let c = rig.open();
    let small = c.alloc_mapped(Mem::Gtt, PAGE_SIZE);
    assert_eq!(c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, small.handle).unwrap_err(), Errno::EINVAL);
    assert_eq!(c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, small.handle + 1000).unwrap_err(), Errno::EINVAL);
    assert_eq!(rig.stats().events, 0);
    // Nothing was installed: a proper buffer still works.
    let good = c.alloc_mapped(Mem::Gtt, u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8);
    c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, good.handle).unwrap();
}

#[test]
fn set_and_reset_only_signal_events() {
    let rig = Rig::new();
    let c = rig.open();
    for t in [KFD_IOC_EVENT_MEMORY, KFD_IOC_EVENT_HW_EXCEPTION, KFD_IOC_EVENT_DEBUG_EVENT] {
        let e = c.try_create_event(t, false, 0).unwrap();
        assert_eq!(c.set_event(e.event_id), Err(Errno::EINVAL), "set type {t}");
        assert_eq!(c.reset_event(e.event_id), Err(Errno::EINVAL), "reset type {t}");
        timed_out(&c.wait(&[e.event_id], false, 0));
    }
}

#[test]
fn wait_with_an_unknown_event_fails_whole() {
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(false);
    c.set_event(e).unwrap();
    let w = c.wait(&[e, 77], false, NEVER);
    failed(&w, Errno::EINVAL);
    assert_eq!(rig.stats().waiters, 0);
    // The set state survived the failed wait.
    complete(&c.wait(&[e], false, 0));
    let _ = AMDKFD_IOC_WAIT_EVENTS;
}

#[test]
fn concurrent_first_signal_events_all_succeed() {
    // The first signal event makes the event page; threads racing to make it must all get
    // an event, not a spurious error from the loser.
    for _ in 0..20 {
        let rig = Rig::new();
        let c = rig.open();
        let barrier = std::sync::Barrier::new(8);
        let results: Vec<Result<CreateEventArgs, Errno>> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, 0)
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut ids: Vec<u32> = results.iter().map(|r| r.expect("CREATE_EVENT").event_id).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
    }
}
