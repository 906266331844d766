//! Quotas (issue 13 item 8, M5 and M6): per-process and per-uid limits on buffers, memory,
//! queues, events and parked waits; the timer holding no deadline of a finished wait.

mod support;

use cuse_kfd::quota::{Amounts, Overrides, QuotaConfig, Resource};
use cuse_kfd::DeviceConfig;
use nix::errno::Errno;
use support::raw::*;
use uapi::kfd::*;

const MIB: u64 = 1 << 20;
const UID_A: u32 = 60001;
const UID_B: u32 = 60002;

fn rig(process: Overrides, uid: Overrides) -> Rig {
    Rig::with_config(&DeviceConfig {
        quotas: QuotaConfig { process, uid, ..QuotaConfig::default() },
        ..DeviceConfig::default()
    })
}

/// The device's buffer budget (one mapping of its process per buffer) holds across uids: the
/// uid that fills it cannot be given more, nor can another uid under its own quota, and no
/// backing file is left of a refused buffer; a free makes room for the other uid.
#[test]
fn quota_the_device_buffer_budget_holds_across_uids() {
    let quotas = QuotaConfig { device_buffers: Some(6), ..QuotaConfig::default() };
    let rig = Rig::with_config(&DeviceConfig { quotas, ..DeviceConfig::default() });
    let (a, b) = (rig.open_as_uid(7301, UID_A), rig.open_as_uid(7302, UID_B));
    // The event page and whatever else a fresh context holds count too.
    let base = rig.emb().device().ledger().report().processes.iter().map(|p| p.2.get(Resource::Buffers)).sum::<u64>();
    let mut held = Vec::new();
    while let Ok(buf) = a.try_alloc(Mem::Vram, 4096) {
        held.push(buf);
        assert!(held.len() <= 6, "the budget of 6 was passed");
    }
    assert_eq!(held.len() as u64, 6 - base);
    let files = count_files(&rig.client_dir(b.pid()));
    assert_eq!(b.try_alloc(Mem::Gtt, 4096).err(), Some(Errno::ENOMEM), "uid B, far under its quota");
    assert_eq!(count_files(&rig.client_dir(b.pid())), files, "no backing file of the refused buffer");
    a.free(held.pop().unwrap().handle).unwrap();
    b.alloc(Mem::Gtt, 4096);
    assert_eq!(a.try_alloc(Mem::Vram, 4096).err(), Some(Errno::ENOMEM));
}

#[test]
fn quota_uid_b_allocates_after_uid_a_hits_its_limit() {
    let rig =
        rig(Overrides::default(), Overrides::default().with(Resource::Vram, 8 * MIB).with(Resource::Gtt, 8 * MIB));
    let ledger = rig.emb().device().ledger();
    // Two processes of uid A share its limit.
    let (a1, a2) = (rig.open_as_uid(7001, UID_A), rig.open_as_uid(7002, UID_A));
    let held = [a1.alloc(Mem::Vram, 4 * MIB), a2.alloc(Mem::Vram, 4 * MIB)];
    assert_eq!(a1.try_alloc(Mem::Vram, 4096).err(), Some(Errno::ENOMEM), "uid A is at its VRAM limit");
    assert_eq!(a2.try_alloc(Mem::Vram, 4096).err(), Some(Errno::ENOMEM));
    assert_eq!(a1.available(), 0, "AVAILABLE_MEMORY tells uid A what it can still get");
    a1.alloc(Mem::Gtt, 8 * MIB);
    assert_eq!(a2.try_alloc(Mem::Gtt, 4096).err(), Some(Errno::ENOMEM), "and at its GTT limit");
    // Uid B is untouched by A's usage.
    let b = rig.open_as_uid(7003, UID_B);
    assert_eq!(b.available(), 8 * MIB);
    b.alloc(Mem::Vram, 8 * MIB);
    b.alloc(Mem::Gtt, 8 * MIB);
    // A freed buffer and an ended process give back exactly what they held.
    a2.free(held[1].handle).unwrap();
    a1.alloc(Mem::Vram, 4 * MIB);
    drop(a1);
    assert_eq!(ledger.uid_usage(UID_A), Amounts::default(), "a2 freed its buffer, a1 ended");
    a2.alloc(Mem::Vram, 8 * MIB);
    drop(a2);
    drop(b);
    assert!(ledger.report().uids.is_empty(), "{:?}", ledger.report());
}

#[test]
fn quota_process_limit_refuses_with_amdkfds_errno_and_leaves_nothing() {
    let process = Overrides::parse("buffers=4,queues=1,events=1,waits=1").unwrap();
    let rig = rig(process, Overrides::default());
    let c = rig.open_as_uid(7101, UID_A);
    let (ring, ptrs) = c.queue_buffers();
    let q = c.try_create_queue_on(&ring, &ptrs).expect("the first queue");
    let ev = c.signal_event(true);
    let before = rig.stats();
    let files = count_files(&rig.client_dir(c.pid()));
    let usage = rig.emb().device().ledger().report().processes;

    c.alloc(Mem::Gtt, 4096);
    c.alloc(Mem::Vram, 4096);
    assert_eq!(c.try_alloc(Mem::Vram, 4096).err(), Some(Errno::ENOMEM), "the fifth buffer");
    assert_eq!(c.try_alloc(Mem::Gtt, 4096).err(), Some(Errno::ENOMEM));
    assert_eq!(c.try_create_queue_on(&ring, &ptrs).err(), Some(Errno::ENOSPC), "the second queue");
    assert_eq!(c.try_create_event(KFD_IOC_EVENT_SIGNAL, true, 0).err(), Some(Errno::ENOSPC), "the second event");
    let parked = c.start_wait(&[ev], false, KFD_EVENT_TIMEOUT_INFINITE);
    assert!(parked.still_parked());
    let refused = c.wait(&[ev], false, KFD_EVENT_TIMEOUT_INFINITE);
    assert_eq!(refused.result, Err(Errno::ENOMEM), "the second parked wait");

    let after = rig.stats();
    assert_eq!((after.buffers, after.queues, after.events), (before.buffers + 2, before.queues, before.events));
    assert_eq!(after.waiters, 1);
    assert_eq!(count_files(&rig.client_dir(c.pid())), files + 2, "no backing file of a refused buffer");
    // The limits hold what was made, no more: one free, one destroy, one wait ended, and each
    // can be made again.
    c.set_event(ev).unwrap();
    assert_eq!(parked.finish().wait_result, KFD_IOC_WAIT_RESULT_COMPLETE);
    c.set_event(ev).unwrap();
    assert_eq!(c.wait(&[ev], false, 1000).wait_result, KFD_IOC_WAIT_RESULT_COMPLETE, "an unparked wait is free");
    c.destroy_queue(q.id).unwrap();
    c.try_create_queue_on(&ring, &ptrs).expect("a queue after the first went");
    c.destroy_event(ev).unwrap();
    c.signal_event(false);
    let usage_now = rig.emb().device().ledger().report().processes;
    assert_eq!(usage_now.len(), 1);
    let used = usage_now[0].2;
    assert_eq!((used.get(Resource::Buffers), used.get(Resource::Queues), used.get(Resource::Events)), (4, 1, 1));
    assert_eq!(used.get(Resource::Waits), 0);
    assert_eq!(used.get(Resource::Vram), 4096);
    assert_eq!(usage[0].2.get(Resource::Buffers), 2, "the queue's ring and pointers");
}

#[test]
fn quota_limits_and_usage_are_shown_in_status() {
    let rig = rig(Overrides::parse("vram=1G,queues=3").unwrap(), Overrides::parse("waits=unlimited").unwrap());
    let c = rig.open_as_uid(7201, UID_B);
    c.alloc(Mem::Vram, 2 * MIB);
    let text = cuse_kfd::frontend::inspect::status(rig.emb().device());
    let line = |prefix: &str| {
        text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix:?} line in\n{text}"))
    };
    let process = line("limits per process: ");
    assert!(process.contains("vram=1073741824") && process.contains(" queues=3 "), "{process}");
    assert!(process.contains("buffers=32768"), "the default stays: {process}");
    assert!(line("limits per uid: ").contains("waits=unlimited"), "{text}");
    let budget = cuse_kfd::quota::device_buffer_budget();
    assert_eq!(line("limit of the device: "), format!("limit of the device: buffers={budget}"));
    let mut lines = text.lines().skip_while(|l| *l != format!("process 7201 uid {UID_B}"));
    assert_eq!(
        lines.nth(1).map(str::trim),
        Some("usage buffers=1 vram=2097152 gtt=0 queues=0 events=0 waits=0"),
        "{text}"
    );
    assert_eq!(
        line(&format!("uid {UID_B} ")),
        format!("uid {UID_B} usage buffers=1 vram=2097152 gtt=0 queues=0 events=0 waits=0")
    );
    assert_eq!(line("wait timeouts armed: "), "wait timeouts armed: 0");
}

/// `cycles` timed WAIT_EVENTS (an hour's timeout) each completed by SET_EVENT: the timer must
/// then hold no more deadlines than there are parked waits.
fn timed_waits_completed_early(cycles: u32) {
    let rig = Rig::new();
    let c = rig.open();
    let ev = c.signal_event(true);
    let device = rig.emb().device().clone();
    let start = std::time::Instant::now();
    for i in 0..cycles {
        let parked = c.start_wait(&[ev], false, 3_600_000);
        if i == 0 {
            assert_eq!(device.armed_timeouts(), 1, "a parked timed wait has its deadline");
        }
        c.set_event(ev).unwrap();
        let w = parked.finish();
        assert_eq!(w.wait_result, KFD_IOC_WAIT_RESULT_COMPLETE);
    }
    let parked = rig.stats().waiters;
    println!("{cycles} timed waits completed by SET_EVENT in {:?}", start.elapsed());
    assert!(device.armed_timeouts() <= parked, "{} deadlines armed, {parked} waits parked", device.armed_timeouts());
    assert_eq!(device.armed_timeouts(), 0);
}

#[test]
fn quota_timer_holds_no_deadline_of_a_completed_wait() {
    timed_waits_completed_early(100_000);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "10^6 cycles take a minute in debug: run in release")]
fn quota_timer_holds_no_deadline_of_a_million_completed_waits() {
    timed_waits_completed_early(1_000_000);
}

#[test]
fn quota_a_refused_first_event_makes_no_event_page() {
    let rig = rig(Overrides::default().with(Resource::Events, 0), Overrides::default());
    let c = rig.open_as_uid(7301, UID_A);
    let files = count_files(&rig.client_dir(c.pid()));
    assert_eq!(c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, 0).err(), Some(Errno::ENOSPC));
    assert_eq!(count_files(&rig.client_dir(c.pid())), files, "the event page of a refused event");
    assert_eq!(rig.stats().events, 0);
    assert_eq!(rig.emb().device().ledger().uid_usage(UID_A), Amounts::default());
}

#[test]
fn quota_an_exiting_process_gives_back_everything_it_held() {
    let rig = Rig::new();
    let device = rig.emb().device().clone();
    let mut owner = std::process::Command::new("sleep").arg("30").spawn().expect("spawning sleep");
    let pid = owner.id();
    let c = rig.open_process(pid);
    let uid = cuse_kfd::Caller::current().uid;
    c.alloc(Mem::Vram, MIB);
    c.alloc(Mem::Gtt, MIB);
    c.create_queue();
    let ev = c.signal_event(false);
    let parked = c.start_wait(&[ev], false, 3_600_000);
    let held = device.ledger().uid_usage(uid);
    let counts = |r: Resource| held.get(r);
    assert_eq!(
        Resource::ALL.map(counts),
        [4, MIB, MIB + u64::from(RING_SIZE) + 4096, 1, 1, 1],
        "buffers (two of them the queue's), vram, gtt, queues, events, waits"
    );
    assert_eq!(device.armed_timeouts(), 1);
    owner.kill().unwrap();
    owner.wait().unwrap();
    // The account closes as the teardown ends (after the context is unlisted and its waits
    // answered).
    let since = std::time::Instant::now();
    while !device.ledger().report().processes.is_empty() {
        assert!(since.elapsed() < std::time::Duration::from_secs(5), "the context of {pid} never ended");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(device.process(pid).is_none());
    assert_eq!(parked.finish().wait_result, KFD_IOC_WAIT_RESULT_FAIL, "the wait ended with its process");
    assert_eq!(device.ledger().uid_usage(uid), Amounts::default());
    assert_eq!(device.armed_timeouts(), 0);
    assert_eq!(device.vram_available(rig.gpu()), Some(rig.vram_size()));
}
