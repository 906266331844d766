//! The charter: queues, doorbells, packet processing and soft kernels through the embedded
//! front end, driven by the thunk exactly as a client drives
//! amdkfd: ioctl bytes, GPU memory mapped at its GPU address, AQL packets published header-last,
//! doorbells rung with plain stores.
//!
//! Every wait is bounded (the helpers panic past their deadline) and every check compares exact
//! values, so a lost, duplicated, reordered or silently completed packet fails a test.

mod support;

use cuse_kfd::clock::gpu_clock_counter;
use cuse_kfd::engine::{
    EngineConfig, ERROR_ILLEGAL_INSTRUCTION, ERROR_INVALID_CODE_OBJECT, ERROR_INVALID_PACKET_FORMAT,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::client::*;
use thunk::memory::{open_backing, HostMapping, Kind, Space};
use thunk::queue::packet::{self, header};
use thunk::queue::AqlQueue;
use thunk::signal::Signals;
use thunk::Errno;
use uapi::aql::*;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::soft::*;
use uapi::{FromBytes, IntoBytes};

const NOP: u32 = SOFT_KERNEL_NOP;

/// A 1-work-item dispatch of soft kernel `builtin` with arguments `args`.
fn dispatch<T: IntoBytes + uapi::Immutable>(
    rig: &Rig,
    builtin: u32,
    args: &T,
    completion: u64,
    barrier: bool,
) -> [u8; 64] {
    packet::dispatch(rig.kernel(builtin), rig.args(args), [1, 1, 1], [1, 1, 1], completion, barrier)
}

fn nop(rig: &Rig, completion: u64, barrier: bool) -> [u8; 64] {
    packet::dispatch(rig.kernel(NOP), 0, [1, 1, 1], [1, 1, 1], completion, barrier)
}

/// Waits until signal `i` reads `v`.
fn wait_value(s: &Signals, i: u64, v: i64, what: &str) {
    if let Err(last) = s.wait(i, TIMEOUT, |x| x == v) {
        panic!("{what}: signal {i} is {last}, expected {v} within {TIMEOUT:?}");
    }
}

/// Asserts that signal `i` keeps value `v` for a while.
fn keeps_value(s: &Signals, i: u64, v: i64, what: &str) {
    stays(QUIET, what, || s.value(i).load(Ordering::Acquire) == v);
}

// ---------------------------------------------------------------------------------------------
// 1, 2: queue creation with caller-supplied memory, and the rejections

/// CREATE_QUEUE arguments for an AQL queue on `ring`, with KFD's read and write pointers at
/// `ptrs + 0x100` and `ptrs + 0x208` (any GPU memory will do, not only an amd_queue_t).
fn aql_args(gpu: u32, ring: u64, ring_size: u32, ptrs: u64) -> CreateQueueArgs {
    CreateQueueArgs {
        ring_base_address: ring,
        write_pointer_address: ptrs + 0x208,
        read_pointer_address: ptrs + 0x100,
        ring_size,
        gpu_id: gpu,
        queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    }
}

#[test]
fn b01_queue_on_caller_supplied_ring_and_pointers_runs_and_is_destroyed() {
    let rig = Rig::new();
    let ring = rig.alloc(4096, Kind::Vram);
    let ptrs = rig.alloc(4096, Kind::Gtt);
    let sig = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    for slot in 0..64 {
        ring.write(slot * 64, &u16::from(HSA_PACKET_TYPE_INVALID).to_le_bytes());
    }
    let before = rig.stats().queues;
    let mut a = aql_args(rig.gpu, ring.va(), 4096, ptrs.va());
    rig.call(AMDKFD_IOC_CREATE_QUEUE, &mut a).expect("CREATE_QUEUE on caller-supplied memory");
    assert_eq!(rig.stats().queues, before + 1);
    assert_eq!(a.ring_size, 4096);
    assert_eq!(a.doorbell_offset >> 62, KFD_MMAP_TYPE_DOORBELL >> 62, "doorbell offset type");
    {
        let process = rig.emb.device().process(rig.kfd.pid()).unwrap();
        let inner = process.inner();
        let q = &inner.queues[&a.queue_id];
        assert_eq!((q.read_ptr.0, q.write_ptr.0), (ptrs.va() + 0x100, ptrs.va() + 0x208));
        let props = q.props();
        assert_eq!((props.ring_base.0, props.ring_size), (ring.va(), 4096));
    }

    // Produce one packet by hand: body, header last, write pointer, doorbell.
    sig.value(0).store(1, Ordering::Release);
    let p = packet::barrier_and([0; 5], sig.handle(0), false);
    ring.write(4, &p[4..]);
    ring.u32_at(0).store(u32::from_le_bytes(p[..4].try_into().unwrap()), Ordering::Release);
    ptrs.u64_at(0x208).store(1, Ordering::Release);
    let slice = a.doorbell_offset & !8191;
    let file = open_backing(&rig.kfd, Space::Kfd, slice).expect("the doorbell slice");
    let doorbells = HostMapping::map(&file, 8192).expect("mapping the doorbell slice");
    let addr = doorbells.addr() + (a.doorbell_offset & 8191);
    // SAFETY: an aligned 8-byte doorbell inside the live 8 KiB mapping `doorbells`.
    let doorbell = unsafe { AtomicU64::from_ptr(addr as *mut u64) };
    doorbell.store(0, Ordering::Release);
    wait_value(&sig, 0, 0, "the packet on the caller's ring");
    wait_for(TIMEOUT, "the read pointer at ptrs + 0x100", || {
        (ptrs.u64_at(0x100).load(Ordering::Acquire) == 1).then_some(())
    });
    assert_eq!(ring.u32_at(0).load(Ordering::Acquire) & 0xFF, u32::from(HSA_PACKET_TYPE_INVALID));
    // The status the engine reports is published after its poll: eventually 1.
    wait_for(TIMEOUT, "the queue status at read index 1", || (rig.status(a.queue_id).read_index == 1).then_some(()));

    rig.call(AMDKFD_IOC_DESTROY_QUEUE, &mut DestroyQueueArgs { queue_id: a.queue_id, pad: 0 }).expect("DESTROY_QUEUE");
    assert_eq!(rig.stats().queues, before);
    assert_eq!(
        rig.call(AMDKFD_IOC_DESTROY_QUEUE, &mut DestroyQueueArgs { queue_id: a.queue_id, pad: 0 }),
        Err(Errno::EINVAL),
        "destroyed twice"
    );
    // The ring is the caller's again: nothing touches it after DESTROY.
    let p2 = packet::barrier_and([0; 5], sig.handle(0), false);
    sig.value(0).store(1, Ordering::Release);
    ring.write(64 + 4, &p2[4..]);
    ring.u32_at(64).store(u32::from_le_bytes(p2[..4].try_into().unwrap()), Ordering::Release);
    doorbell.store(1, Ordering::Release);
    keeps_value(&sig, 0, 1, "a packet rung on a destroyed queue ran");
}

#[test]
fn b02_bad_queue_requests_are_rejected_with_amdkfd_errno_and_create_nothing() {
    let rig = Rig::new();
    let ring = rig.alloc(4096, Kind::Gtt);
    let ptrs = rig.alloc(4096, Kind::Gtt);
    // Inside the GPUVM aperture, never mapped by the thunk (it maps where mmap puts things).
    let unmapped = 0x5_0000_0000u64;
    let good = aql_args(rig.gpu, ring.va(), 4096, ptrs.va());
    type Case = (&'static str, fn(&mut CreateQueueArgs, u64), Errno);
    let cases: [Case; 10] = [
        ("ring outside the VM", |a, u| a.ring_base_address = u, Errno::EINVAL),
        ("ring above user space", |a, _| a.ring_base_address = 1 << 47, Errno::EFAULT),
        ("read pointer outside the VM", |a, u| a.read_pointer_address = u, Errno::EINVAL),
        ("write pointer outside the VM", |a, u| a.write_pointer_address = u, Errno::EINVAL),
        ("read pointer above user space", |a, _| a.read_pointer_address = 1 << 47, Errno::EFAULT),
        ("ring size not a power of two", |a, _| a.ring_size = 3000, Errno::EINVAL),
        ("percentage 101", |a, _| a.queue_percentage = 101, Errno::EINVAL),
        ("priority 16", |a, _| a.queue_priority = 16, Errno::EINVAL),
        ("unknown queue type", |a, _| a.queue_type = 9, Errno::EINVAL),
        ("unknown gpu_id", |a, _| a.gpu_id ^= 0x5a5a, Errno::EINVAL),
    ];
    let before = rig.stats();
    for (what, mutate, errno) in cases {
        let mut a = good;
        mutate(&mut a, unmapped);
        assert_eq!(rig.call(AMDKFD_IOC_CREATE_QUEUE, &mut a), Err(errno), "CREATE_QUEUE with {what}");
        assert_eq!(rig.stats(), before, "CREATE_QUEUE with {what} left something behind");
        assert_eq!(rig.queue_count(), 0, "CREATE_QUEUE with {what} created a queue");
    }
    // The same request with nothing wrong succeeds and gets the first queue id: no rejected
    // request took one.
    let mut a = good;
    rig.call(AMDKFD_IOC_CREATE_QUEUE, &mut a).expect("the valid request");
    assert_eq!(a.queue_id, 0);
    assert_eq!(rig.stats().queues, before.queues + 1);

    // UPDATE_QUEUE validates the same way and changes nothing when it refuses.
    let upd = UpdateQueueArgs {
        ring_base_address: ring.va(),
        queue_id: a.queue_id,
        ring_size: 4096,
        queue_percentage: 100,
        queue_priority: 7,
    };
    type Upd = (&'static str, fn(&mut UpdateQueueArgs, u64), Errno);
    let updates: [Upd; 6] = [
        ("percentage 101", |u, _| u.queue_percentage = 101, Errno::EINVAL),
        ("priority 16", |u, _| u.queue_priority = 16, Errno::EINVAL),
        ("ring size not a power of two", |u, _| u.ring_size = 3000, Errno::EINVAL),
        // pqm_update_queue_properties: EFAULT (CREATE_QUEUE says EINVAL for the same).
        ("ring outside the VM", |u, x| u.ring_base_address = x, Errno::EFAULT),
        ("ring above user space", |u, _| u.ring_base_address = 1 << 47, Errno::EFAULT),
        ("unknown queue id", |u, _| u.queue_id = 77, Errno::EFAULT),
    ];
    for (what, mutate, errno) in updates {
        let mut u = upd;
        mutate(&mut u, unmapped);
        assert_eq!(rig.call(AMDKFD_IOC_UPDATE_QUEUE, &mut u), Err(errno), "UPDATE_QUEUE with {what}");
        let process = rig.emb.device().process(rig.kfd.pid()).unwrap();
        let inner = process.inner();
        let p = inner.queues[&a.queue_id].props();
        assert_eq!(
            (p.ring_base.0, p.ring_size, p.percentage, p.priority),
            (ring.va(), 4096, 100, 7),
            "UPDATE_QUEUE with {what} changed the queue"
        );
    }
    rig.call(AMDKFD_IOC_DESTROY_QUEUE, &mut DestroyQueueArgs { queue_id: a.queue_id, pad: 0 }).expect("DESTROY_QUEUE");
    assert_eq!(rig.stats(), before);
}

// ---------------------------------------------------------------------------------------------
// 3, 4: order across wraps, and exactly-once under many producers

#[test]
fn b03_packets_run_in_order_across_four_ring_wraps() {
    // Pairs [barrier-value waiting for counter == i, ATOMIC_ADD counter += 1]: any reordering
    // leaves a barrier waiting for a value that has passed (the test then times out).
    const PAIRS: u64 = 512;
    let rig = Rig::new();
    let q = rig.queue(256);
    let sig = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
    let counter = sig.handle(0);
    sig.value(0).store(0, Ordering::Release);
    let add = rig.args(&AtomicAddArgs { addr: counter + uapi::signal::AMD_SIGNAL_VALUE_OFFSET as u64, value: 1 });
    let kernel = rig.kernel(SOFT_KERNEL_ATOMIC_ADD_U64);
    for i in 0..PAIRS {
        let a = submit(&q, &packet::barrier_value(counter, HSA_SIGNAL_CONDITION_EQ, i as i64, -1, 0));
        let b = submit(&q, &packet::dispatch(kernel, add, [1, 1, 1], [1, 1, 1], 0, false));
        assert_eq!((a, b), (2 * i, 2 * i + 1));
    }
    assert!(2 * PAIRS >= 4 * q.slots, "the ring wraps at least four times");
    wait_for(TIMEOUT, "all packets consumed", || (q.read_index() == 2 * PAIRS).then_some(()));
    assert_eq!(sig.value(0).load(Ordering::Acquire), PAIRS as i64);
    let st = rig.status(q.id);
    assert_eq!((st.read_index, st.write_index, st.error), (2 * PAIRS, 2 * PAIRS, None));
    // Behind it, the queue still runs.
    sig.value(1).store(1, Ordering::Release);
    submit(&q, &packet::barrier_value(counter, HSA_SIGNAL_CONDITION_EQ, PAIRS as i64, -1, sig.handle(1)));
    wait_value(&sig, 1, 0, "the barrier-value after the wraps");
}

/// Each of `PRODUCERS` threads submits `PER_QUEUE` packets to each of `QUEUES` shared queues of
/// 256 slots: 3.2 M packets, 3 125 wraps of every ring, at full size: about ten seconds in the
/// debug test profile on two cores, so nothing is scaled down.
const PRODUCERS: u64 = 8;
const QUEUES: usize = 4;
const PER_QUEUE: u64 = 100_000;
const STRESS_SLOTS: u64 = 256;

#[test]
fn b04_eight_producers_four_queues_every_packet_consumed_exactly_once() {
    let stall = Duration::from_secs(30);
    // A producer preempted between taking its slot and publishing the packet leaves the write
    // index over an INVALID header for as long as it waits for a CPU (over the default 500 ms
    // on a loaded machine): the grace is b05's subject, here it is the stall limit.
    let rig = Rig::with_engine(EngineConfig { invalid_packet_grace: stall, ..EngineConfig::default() });
    let per_queue = PRODUCERS * PER_QUEUE;
    let total = per_queue * QUEUES as u64;
    // seen[q * per_queue + index] counts how often packet `index` of queue `q` ran.
    let seen = rig.alloc(total * 8, Kind::Gtt);
    let queues: Vec<AqlQueue> = (0..QUEUES).map(|_| rig.queue(STRESS_SLOTS)).collect();
    // Kernel arguments live in a per-queue ring indexed like the packet ring: slot i % 256 is
    // rewritten only once packet i - 256 was consumed (the producer waits for room first).
    let kargs: Vec<_> = (0..QUEUES).map(|_| rig.alloc(STRESS_SLOTS * 16, Kind::Gtt)).collect();
    let kernel = rig.kernel(SOFT_KERNEL_ATOMIC_ADD_U64);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..PRODUCERS {
            s.spawn(|| {
                for _ in 0..PER_QUEUE {
                    for (qi, q) in queues.iter().enumerate() {
                        let index = reserve_bounded(q, stall, || {
                            let st = rig.status(q.id);
                            let slot = |i: u64| q.header(i);
                            format!(
                                "{st:?}, write_dispatch_id {}, headers at read {:#x} next {:#x}",
                                q.write_index().load(Ordering::Acquire),
                                slot(st.read_index),
                                slot(st.read_index + 1)
                            )
                        });
                        let slot = index % STRESS_SLOTS;
                        let target = seen.addr((qi as u64 * per_queue + index) * 8);
                        kargs[qi].write(slot * 16, AtomicAddArgs { addr: target, value: 1 }.as_bytes());
                        q.publish(
                            index,
                            &packet::dispatch(kernel, kargs[qi].addr(slot * 16), [1, 1, 1], [1, 1, 1], 0, false),
                        );
                        q.ring_doorbell(index);
                    }
                }
            });
        }
    });
    // Wait for the tail, failing if a queue stops moving.
    for q in &queues {
        let mut last = q.read_index();
        let mut since = Instant::now();
        while q.read_index() != per_queue {
            let r = q.read_index();
            if r != last {
                (last, since) = (r, Instant::now());
            }
            assert!(since.elapsed() < stall, "queue {} stuck at {r} of {per_queue}: {:?}", q.id, rig.status(q.id));
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let elapsed = start.elapsed();
    eprintln!("b04: {total} packets from {PRODUCERS} producers on {QUEUES} queues in {elapsed:?}");
    for q in &queues {
        let st = rig.status(q.id);
        assert_eq!(st.error, None, "queue {}", q.id);
        assert_eq!((st.read_index, st.write_index, st.packets), (per_queue, per_queue, per_queue), "queue {}", q.id);
        assert_eq!(q.read_index(), per_queue);
        assert_eq!(q.write_index().load(Ordering::Acquire), per_queue);
    }
    let raw = bytes(&seen, 0, (total * 8) as usize);
    let counts: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    let lost = counts.iter().filter(|c| **c == 0).count();
    let dup = counts.iter().filter(|c| **c > 1).count();
    if let Some(i) = counts.iter().position(|c| *c != 1) {
        panic!(
            "{lost} packets lost, {dup} run more than once; first: queue {} packet {} ran {} times",
            i as u64 / per_queue,
            i as u64 % per_queue,
            counts[i]
        );
    }
}

#[test]
fn b04_a_late_smaller_doorbell_store_does_not_strand_published_packets() {
    // Three producers reserved 0, 1, 2 and published; their doorbell stores land in reverse
    // order (plain stores, as ROCr's), so the doorbell ends at 0 and the device may never see 2.
    // Like the CP, it must still run every published packet below the write index.
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 3).unwrap();
    for i in 0..3 {
        s.value(i).store(1, Ordering::Release);
    }
    assert_eq!(q.write_index().fetch_add(3, Ordering::AcqRel), 0);
    for i in 0..3 {
        q.publish(i, &nop(&rig, s.handle(i), false));
    }
    // Not an assertion: an idle engine polls every few ms, so the three stores below land
    // between two polls and only the last one is seen.
    std::thread::sleep(Duration::from_millis(50));
    for i in (0..3).rev() {
        q.ring_doorbell(i);
    }
    for i in 0..3 {
        wait_value(&s, i, 0, &format!("packet {i} after out-of-order doorbells"));
    }
    assert_eq!(q.read_index(), 3);
    let st = rig.status(q.id);
    assert_eq!((st.read_index, st.error), (3, None));
}

// ---------------------------------------------------------------------------------------------
// 5: a doorbell over unpublished packets

#[test]
fn b05_write_index_over_unpublished_packets_is_a_queue_error_after_the_grace() {
    let grace = Duration::from_millis(50);
    let rig = Rig::with_engine(EngineConfig { invalid_packet_grace: grace, ..EngineConfig::default() });
    let q = rig.queue(64);
    let sig = Signals::new(&rig.kfd, rig.gpu, 4).unwrap();
    let inactive = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    inactive.value(0).store(0, Ordering::Release);
    let inactive_ev = inactive.attach_event(&rig.kfd, 0).unwrap();
    q.set_inactive_signal(inactive.handle(0));
    for i in 0..4 {
        sig.value(i).store(1, Ordering::Release);
    }

    // A queue that sits idle for several graces is no error: nothing was rung.
    stays(grace * 4, "an idle queue reported an error", || rig.status(q.id).error.is_none());

    // Reserve 0..3, publish only 0 and 1, ring 3.
    assert_eq!(q.write_index().fetch_add(4, Ordering::AcqRel), 0);
    q.publish(0, &nop(&rig, sig.handle(0), false));
    q.publish(1, &nop(&rig, sig.handle(1), false));
    let rung = Instant::now();
    q.ring_doorbell(3);
    wait_value(&sig, 0, 0, "published packet 0");
    wait_value(&sig, 1, 0, "published packet 1");
    let st = rig.wait_error(q.id);
    assert!(rung.elapsed() >= grace, "error after {:?}, before the {grace:?} grace", rung.elapsed());
    let err = st.error.unwrap();
    assert_eq!(err.code, ERROR_INVALID_PACKET_FORMAT, "{}", err.reason);
    assert_eq!(err.fault_va, None);
    assert_eq!(st.read_index, 2, "the INVALID packet must not be consumed");
    assert_eq!(q.read_index(), 2);
    rig.assert_fires(inactive_ev, "queue_inactive_signal event");
    assert_eq!(inactive.value(0).load(Ordering::Acquire), ERROR_INVALID_PACKET_FORMAT as i64);
    // Publishing late does not revive the queue: no dispatch happens.
    q.publish(2, &nop(&rig, sig.handle(2), false));
    q.publish(3, &nop(&rig, sig.handle(3), false));
    q.ring_doorbell(3);
    keeps_value(&sig, 2, 1, "a packet ran on a failed queue");
    assert_eq!(sig.value(3).load(Ordering::Acquire), 1);
    assert_eq!(q.read_index(), 2);
}

// ---------------------------------------------------------------------------------------------
// 6: UPDATE_QUEUE stalls and resumes

#[test]
fn b06_update_to_zero_percent_or_null_ring_stalls_and_reenabling_resumes() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let ring_size = (q.slots * 64) as u32;
    let sig = Signals::new(&rig.kfd, rig.gpu, 8).unwrap();
    for (round, (pct, base, size)) in [(0, q.ring.va(), ring_size), (100, 0, 0)].into_iter().enumerate() {
        let first = round as u64 * 4;
        let read = q.read_index();
        q.update(pct, base, size).unwrap_or_else(|e| panic!("UPDATE_QUEUE to {pct}% ring {base:#x}: {e}"));
        for i in first..first + 4 {
            sig.value(i).store(1, Ordering::Release);
            submit(&q, &nop(&rig, sig.handle(i), false));
        }
        stays(Duration::from_millis(100), "a stalled queue moved its read pointer", || q.read_index() == read);
        for i in first..first + 4 {
            assert_eq!(sig.value(i).load(Ordering::Acquire), 1, "packet {i} ran on a stalled queue");
        }
        q.update(100, q.ring.va(), ring_size).expect("UPDATE_QUEUE back to 100%");
        for i in first..first + 4 {
            wait_value(&sig, i, 0, "a packet after re-enabling");
        }
        assert_eq!(q.read_index(), read + 4);
    }
    assert_eq!(rig.status(q.id).error, None);
}

// ---------------------------------------------------------------------------------------------
// 7: queue caps

#[test]
fn b07_127_queues_per_gpu_then_enospc_and_the_others_still_work() {
    let rig = Rig::new();
    let queues: Vec<AqlQueue> = (0..KFD_MAX_QUEUES_PER_DEVICE)
        .map(|i| AqlQueue::new(&rig.kfd, rig.gpu, 64).unwrap_or_else(|e| panic!("queue {i}: {e}")))
        .collect();
    let stats = rig.stats();
    assert_eq!(stats.queues, 127);
    match AqlQueue::new(&rig.kfd, rig.gpu, 64) {
        Err(e) => assert_eq!(e, Errno::ENOSPC, "the 128th queue"),
        Ok(q) => panic!("the 128th queue was created (id {})", q.id),
    }
    assert_eq!(rig.stats().queues, 127, "the refused queue left something behind");
    assert_eq!(rig.stats().buffers, stats.buffers, "the refused queue leaked its buffers");
    let sig = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
    for (i, q) in [(0, &queues[0]), (1, &queues[126])] {
        sig.value(i).store(1, Ordering::Release);
        submit(q, &nop(&rig, sig.handle(i), false));
        wait_value(&sig, i, 0, &format!("a packet on queue {}", q.id));
        assert_eq!(rig.status(q.id).error, None);
    }
    // Freeing one makes room for one.
    let mut queues = queues;
    queues.truncate(126);
    let q = AqlQueue::new(&rig.kfd, rig.gpu, 64).expect("a queue after one was destroyed");
    sig.value(0).store(1, Ordering::Release);
    submit(&q, &nop(&rig, sig.handle(0), false));
    wait_value(&sig, 0, 0, "a packet on the replacement queue");
}

// ---------------------------------------------------------------------------------------------
// 8: destroy with pending packets and a parked waiter

#[test]
fn b08_destroy_with_pending_packets_and_a_parked_waiter_is_prompt_and_wakes_it() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let sig = Signals::new(&rig.kfd, rig.gpu, 5).unwrap();
    let (dep, done) = (0, 1);
    for i in 0..5 {
        sig.value(i).store(1, Ordering::Release);
    }
    let ev = sig.attach_event(&rig.kfd, done).unwrap();
    submit(&q, &packet::barrier_and([sig.handle(dep), 0, 0, 0, 0], sig.handle(done), false));
    for i in 2..5 {
        submit(&q, &nop(&rig, sig.handle(i), false));
    }
    keeps_value(&sig, done, 1, "the barrier completed although its dependency did not");

    let waiter = {
        let kfd = rig.kfd.clone();
        spawn(move || kfd.wait_events(&[ev], false, KFD_EVENT_TIMEOUT_INFINITE))
    };
    wait_for(TIMEOUT, "the waiter to park", || (rig.stats().waiters == 1).then_some(()));
    let before = rig.stats().queues;
    let t = Instant::now();
    drop(q);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(1), "DESTROY_QUEUE took {took:?}");
    assert_eq!(rig.stats().queues, before - 1);
    let woke = waiter.recv_timeout(Duration::from_secs(2)).expect("the parked waiter was not woken by the destroy");
    // FAIL (EIO), as amdkfd answers the waiters of a destroyed event; the event stays unset.
    assert_eq!(woke.result, Err(Errno::EIO), "{woke:?}");
    assert_eq!(woke.wait_result, KFD_IOC_WAIT_RESULT_FAIL, "{woke:?}");
    assert_eq!(rig.stats().waiters, 0);
    assert_eq!(
        rig.kfd.wait_events(&[ev], false, 0).wait_result,
        KFD_IOC_WAIT_RESULT_TIMEOUT,
        "the event of a packet that never ran was set"
    );
    for i in [done, 2, 3, 4] {
        assert_eq!(sig.value(i).load(Ordering::Acquire), 1, "signal {i} of a packet that never ran changed");
    }
    // Completing the dependency now changes nothing: the queue is gone.
    sig.value(dep).store(0, Ordering::Release);
    keeps_value(&sig, done, 1, "a destroyed queue's barrier completed");

    // Destroying and recreating works, and the new queue runs.
    let q = rig.queue(64);
    sig.value(2).store(1, Ordering::Release);
    submit(&q, &nop(&rig, sig.handle(2), false));
    wait_value(&sig, 2, 0, "a packet on the recreated queue");
}

// ---------------------------------------------------------------------------------------------
// 9: barrier truth tables

/// Submits `p` (completion signal `c` at 1). If `fires`, it must complete; otherwise it must
/// stay blocked (the queue does not move) until `unblock` runs, and then complete.
fn barrier_case(q: &AqlQueue, s: &Signals, c: u64, p: [u8; 64], fires: bool, what: &str, unblock: impl FnOnce()) {
    s.value(c).store(1, Ordering::Release);
    let index = submit(q, &p);
    if !fires {
        keeps_value(s, c, 1, &format!("{what}: fired"));
        assert_eq!(q.read_index(), index, "{what}: consumed while blocked");
        unblock();
    }
    wait_value(s, c, 0, &format!("{what}: did not fire"));
    assert_eq!(q.read_index(), index + 1, "{what}");
    assert_eq!(s.value(c).load(Ordering::Acquire), 0, "{what}: decremented more than once");
}

#[test]
fn b09_barrier_and_holds_until_every_dependency_is_zero_nulls_satisfied() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 6).unwrap();
    let c = 5;
    for n in 0..=5usize {
        for at_end in [false, true] {
            // n dependencies, at the front or at the back of dep_signal; the rest null.
            let pos: Vec<usize> = if at_end { (5 - n..5).collect() } else { (0..n).collect() };
            let deps = |set: &dyn Fn(usize) -> i64| {
                let mut d = [0u64; 5];
                for (k, p) in pos.iter().enumerate() {
                    s.value(k as u64).store(set(k), Ordering::Release);
                    d[*p] = s.handle(k as u64);
                }
                d
            };
            let d = deps(&|_| 0);
            barrier_case(
                &q,
                &s,
                c,
                packet::barrier_and(d, s.handle(c), false),
                true,
                &format!("AND {n} deps all 0 {pos:?}"),
                || {},
            );
            for blocker in 0..n {
                let d = deps(&|k| i64::from(k == blocker) * 7);
                let what = format!("AND {n} deps {pos:?}, dep {blocker} at 7");
                barrier_case(&q, &s, c, packet::barrier_and(d, s.handle(c), false), false, &what, || {
                    s.value(blocker as u64).store(0, Ordering::Release);
                });
            }
        }
    }
    // Negative values are not zero either.
    s.value(0).store(-1, Ordering::Release);
    barrier_case(
        &q,
        &s,
        c,
        packet::barrier_and([s.handle(0), 0, 0, 0, 0], s.handle(c), false),
        false,
        "AND dep at -1",
        || {
            s.value(0).store(0, Ordering::Release);
        },
    );
    assert_eq!(rig.status(q.id).error, None);
}

#[test]
fn b09_barrier_or_fires_on_any_zero_dependency_nulls_not_satisfied() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 6).unwrap();
    let c = 5;
    for n in 1..=5usize {
        let set = |zero: Option<usize>| {
            let mut d = [0u64; 5];
            for k in 0..n {
                s.value(k as u64).store(if Some(k) == zero { 0 } else { 3 }, Ordering::Release);
                // Spread the real dependencies over the slots, nulls between them.
                d[(k * 2) % 5] = s.handle(k as u64);
            }
            d
        };
        for zero in 0..n {
            barrier_case(
                &q,
                &s,
                c,
                packet::barrier_or(set(Some(zero)), s.handle(c), false),
                true,
                &format!("OR {n} deps, dep {zero} at 0"),
                || {},
            );
        }
        barrier_case(
            &q,
            &s,
            c,
            packet::barrier_or(set(None), s.handle(c), false),
            false,
            &format!("OR {n} deps none at 0"),
            || {
                s.value(n as u64 - 1).store(0, Ordering::Release);
            },
        );
    }
    assert_eq!(rig.status(q.id).error, None);
    // Only nulls: nothing can satisfy it.
    let q2 = rig.queue(64);
    s.value(c).store(1, Ordering::Release);
    submit(&q2, &packet::barrier_or([0; 5], s.handle(c), false));
    keeps_value(&s, c, 1, "OR of five nulls fired");
    assert_eq!(q2.read_index(), 0);
}

#[test]
fn b09_barrier_value_honours_condition_and_mask() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
    let (v, c) = (0, 1);
    // (signal value, condition, compare value, mask, fires, value that unblocks it)
    let table: &[(i64, u32, i64, i64, bool, i64)] = &[
        (0x1234, HSA_SIGNAL_CONDITION_EQ, 0x1234, -1, true, 0),
        (0x1234, HSA_SIGNAL_CONDITION_EQ, 0x34, 0xFF, true, 0),
        (0x1234, HSA_SIGNAL_CONDITION_EQ, 0x34, -1, false, 0x34),
        (0x1235, HSA_SIGNAL_CONDITION_EQ, 0x34, 0xFF, false, 0x5534),
        (0x100, HSA_SIGNAL_CONDITION_NE, 0, -1, true, 0),
        (0x100, HSA_SIGNAL_CONDITION_NE, 0, 0xFF, false, 0x101),
        (5, HSA_SIGNAL_CONDITION_NE, 5, -1, false, 6),
        (5, HSA_SIGNAL_CONDITION_LT, 6, -1, true, 0),
        (6, HSA_SIGNAL_CONDITION_LT, 6, -1, false, 5),
        (0x105, HSA_SIGNAL_CONDITION_LT, 6, 0xFF, true, 0),
        (0x105, HSA_SIGNAL_CONDITION_LT, 6, -1, false, 3),
        (-1, HSA_SIGNAL_CONDITION_LT, 0, -1, true, 0),
        (6, HSA_SIGNAL_CONDITION_GTE, 6, -1, true, 0),
        (5, HSA_SIGNAL_CONDITION_GTE, 6, -1, false, 6),
        (-1, HSA_SIGNAL_CONDITION_GTE, 0, -1, false, 0),
        (-1, HSA_SIGNAL_CONDITION_GTE, 0x80, 0xFF, true, 0),
        (0x7F, HSA_SIGNAL_CONDITION_GTE, 0x80, 0xFF, false, 0x180),
    ];
    let names = ["EQ", "NE", "LT", "GTE"];
    for &(value, cond, compare, mask, fires, unblock) in table {
        let what = format!("({value:#x} & {mask:#x}) {} {compare:#x}", names[cond as usize]);
        s.value(v).store(value, Ordering::Release);
        barrier_case(
            &q,
            &s,
            c,
            packet::barrier_value(s.handle(v), cond, compare, mask, s.handle(c)),
            fires,
            &what,
            || {
                s.value(v).store(unblock, Ordering::Release);
            },
        );
    }
    assert_eq!(rig.status(q.id).error, None);
}

// ---------------------------------------------------------------------------------------------
// 10: the barrier bit

#[test]
fn b10_barrier_bit_starts_a_packet_only_after_earlier_ones_completed() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 4).unwrap();
    for i in 0..4 {
        s.value(i).store(1, Ordering::Release);
    }
    let sleep = SleepArgs { nanoseconds: 200_000_000 };
    let t = Instant::now();
    submit(&q, &dispatch(&rig, SOFT_KERNEL_SLEEP, &sleep, s.handle(0), false));
    submit(&q, &nop(&rig, s.handle(1), true));
    wait_value(&s, 1, 0, "the packet behind the barrier bit");
    assert!(t.elapsed() >= Duration::from_millis(200), "the barrier packet completed after {:?}", t.elapsed());
    assert_eq!(s.value(0).load(Ordering::Acquire), 0, "the sleep had not completed");
    assert!(
        s.start_ts(1) >= s.end_ts(0),
        "barrier packet started at {} before the sleep ended at {}",
        s.start_ts(1),
        s.end_ts(0)
    );

    // Without the barrier bit the next packet does not wait for the sleep.
    submit(&q, &dispatch(&rig, SOFT_KERNEL_SLEEP, &sleep, s.handle(2), false));
    submit(&q, &nop(&rig, s.handle(3), false));
    wait_value(&s, 3, 0, "the packet without the barrier bit");
    assert_eq!(s.value(2).load(Ordering::Acquire), 1, "the sleep ended before the packet behind it");
    wait_value(&s, 2, 0, "the second sleep");
    assert!(s.end_ts(3) < s.end_ts(2), "no-barrier packet ended at {}, the sleep at {}", s.end_ts(3), s.end_ts(2));
    assert!(
        s.end_ts(2) - s.start_ts(2) >= 200 * (cuse_kfd::clock::GPU_CLOCK_HZ / 1000),
        "the sleep was shorter than 200 ms"
    );
}

// ---------------------------------------------------------------------------------------------
// 11, 12: completion signals, events, timestamps; the consumed slot

#[test]
fn b11_completion_signal_decremented_once_after_effects_with_event_and_timestamps() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 3).unwrap();
    let dst = rig.alloc(16384, Kind::Vram);
    s.value(0).store(5, Ordering::Release);
    let t0 = gpu_clock_counter();
    let fill = rig.args(&FillArgs { dst: dst.va(), value: 0x600D_F00D, reserved: 0 });
    submit(
        &q,
        &packet::dispatch(rig.kernel(SOFT_KERNEL_FILL_U32), fill, [4096, 1, 1], [256, 1, 1], s.handle(0), false),
    );
    let seen = s.wait(0, TIMEOUT, |v| v != 5).expect("the completion signal was not decremented");
    // Acquire-loaded the decrement: the fill must be visible now.
    let out = bytes(&dst, 0, 16384);
    assert!(out.chunks_exact(4).all(|w| w == 0x600D_F00Du32.to_le_bytes()), "fill not visible when the signal moved");
    assert_eq!(seen, 4, "decremented by {}", 5 - seen);
    // A later packet completing proves the engine is past this one: still exactly 4.
    s.value(1).store(1, Ordering::Release);
    submit(&q, &packet::barrier_and([0; 5], s.handle(1), false));
    wait_value(&s, 1, 0, "the barrier after the fill");
    let t1 = gpu_clock_counter();
    assert_eq!(s.value(0).load(Ordering::Acquire), 4);
    let (start, end) = (s.start_ts(0), s.end_ts(0));
    assert!(start != 0 && end != 0, "timestamps not written: start {start} end {end}");
    assert!(t0 <= start && start <= end && end <= t1, "timestamps out of order: {t0} <= {start} <= {end} <= {t1}");

    // An interrupt signal: the event fires and a waiter on it completes.
    let ev = s.attach_event(&rig.kfd, 2).unwrap();
    rig.assert_quiet(ev, "fresh signal event");
    s.value(2).store(1, Ordering::Release);
    submit(&q, &nop(&rig, s.handle(2), false));
    let r = rig.assert_fires(ev, "the completion signal's event");
    assert_eq!(r.data[0].event_id, ev);
    assert_eq!(s.value(2).load(Ordering::Acquire), 0);
    assert!(s.start_ts(2) != 0 && s.start_ts(2) <= s.end_ts(2));
}

#[test]
fn b12_a_consumed_slot_reads_invalid_before_the_read_index_passes_it() {
    const N: u64 = 200;
    let rig = Rig::new();
    let q = rig.queue(256);
    // On a queue never rung, a published packet waits for its doorbell; it reads as published.
    let first = q.reserve();
    q.publish(first, &nop(&rig, 0, false));
    stays(QUIET, "a packet was consumed before any doorbell", || q.read_index() == 0);
    assert_eq!(q.header(first) & 0xFF, u16::from(HSA_PACKET_TYPE_KERNEL_DISPATCH));
    q.ring_doorbell(first);
    wait_for(TIMEOUT, "the rung packet consumed", || (q.read_index() == 1).then_some(()));
    assert_eq!(q.header(first) & 0xFF, u16::from(HSA_PACKET_TYPE_INVALID));
    assert_eq!(q.header(first) >> HSA_PACKET_HEADER_BARRIER & 1, 1, "INVALID is stored with the barrier bit set");

    // Watch the queue while it runs: every slot below the read index must read INVALID.
    let checked = std::thread::scope(|sc| {
        let watcher = sc.spawn(|| {
            let mut checked = 1u64;
            let start = Instant::now();
            while checked < N + 1 {
                let r = q.read_index();
                for i in checked..r {
                    let h = q.header(i);
                    assert_eq!(
                        h & 0xFF,
                        u16::from(HSA_PACKET_TYPE_INVALID),
                        "slot {i} reads {h:#x} with the read index at {r}"
                    );
                }
                checked = checked.max(r);
                assert!(start.elapsed() < TIMEOUT, "read index stuck at {r}");
                std::hint::spin_loop();
            }
            checked
        });
        for i in 1..=N {
            let index = submit(&q, &nop(&rig, 0, false));
            assert_eq!(index, i);
        }
        watcher.join().expect("watcher")
    });
    assert_eq!(checked, N + 1);
    assert_eq!(q.read_index(), N + 1);
    for i in 0..=N {
        assert_eq!(q.header(i) & 0xFF, u16::from(HSA_PACKET_TYPE_INVALID), "slot {i}");
    }
    assert_eq!(rig.status(q.id).read_index, N + 1);
}

// ---------------------------------------------------------------------------------------------
// 13: queue errors

/// A packet that must be refused with `code`.
struct Bad {
    what: &'static str,
    packet: [u8; 64],
    code: u64,
}

fn bad_packets(rig: &Rig, completion: u64) -> Vec<Bad> {
    let mut type7 = packet::barrier_and([0; 5], completion, false);
    type7[0] = 7;
    let mut zero_dims = nop(rig, completion, false);
    zero_dims[2..4].copy_from_slice(&0u16.to_le_bytes());
    let mut unused_dim = nop(rig, completion, false);
    unused_dim[16..20].copy_from_slice(&4u32.to_le_bytes()); // grid_size_y 4 in a 1-D dispatch
    let big_group = packet::dispatch(rig.kernel(NOP), 0, [64, 32, 1], [64, 32, 1], completion, false);
    let zero_grid = packet::dispatch(rig.kernel(NOP), 0, [0, 1, 1], [1, 1, 1], completion, false);
    let agent = packet::to_bytes(&AgentDispatchPacket {
        header: header(HSA_PACKET_TYPE_AGENT_DISPATCH, false),
        type_: 0x8000,
        return_address: 0,
        arg: [1, 2, 3, 4],
        completion_signal: completion,
        ..Default::default()
    });
    let gfx = packet::dispatch(rig.gfx_kernel(), rig.args(&[0u64; 2]), [64, 1, 1], [64, 1, 1], completion, false);
    let unknown =
        packet::dispatch(rig.unknown_builtin_kernel(), rig.args(&[0u64; 2]), [64, 1, 1], [64, 1, 1], completion, false);
    let mut cond = packet::barrier_value(completion, HSA_SIGNAL_CONDITION_EQ, 1, -1, completion);
    cond[32..36].copy_from_slice(&9u32.to_le_bytes());
    vec![
        Bad { what: "header type 7", packet: type7, code: ERROR_INVALID_PACKET_FORMAT },
        Bad { what: "dispatch with 0 dimensions", packet: zero_dims, code: ERROR_INVALID_PACKET_FORMAT },
        Bad { what: "1-D dispatch with grid y 4", packet: unused_dim, code: ERROR_INVALID_PACKET_FORMAT },
        Bad { what: "workgroup of 2048 work-items", packet: big_group, code: ERROR_INVALID_PACKET_FORMAT },
        Bad { what: "grid of 0 work-items", packet: zero_grid, code: ERROR_INVALID_PACKET_FORMAT },
        Bad { what: "agent dispatch", packet: agent, code: ERROR_INVALID_PACKET_FORMAT },
        Bad { what: "GFX code the shader core cannot run", packet: gfx, code: ERROR_ILLEGAL_INSTRUCTION },
        Bad { what: "soft descriptor of builtin 99", packet: unknown, code: ERROR_INVALID_CODE_OBJECT },
        Bad { what: "barrier-value condition 9", packet: cond, code: ERROR_INVALID_PACKET_FORMAT },
    ]
}

#[test]
fn b13_invalid_packets_are_queue_errors_never_silent_completions() {
    let rig = Rig::new();
    let s = Signals::new(&rig.kfd, rig.gpu, 3).unwrap();
    let (done, after, inactive) = (0, 1, 2);
    let cases = bad_packets(&rig, s.handle(done));
    for case in cases {
        let what = case.what;
        let q = rig.queue(64);
        s.value(done).store(1, Ordering::Release);
        s.value(after).store(1, Ordering::Release);
        s.value(inactive).store(0, Ordering::Release);
        let inactive_ev = s.attach_event(&rig.kfd, inactive).unwrap();
        q.set_inactive_signal(s.handle(inactive));
        let hw_ev = rig.event(KFD_IOC_EVENT_HW_EXCEPTION, false);
        rig.assert_quiet(hw_ev, what);

        submit(&q, &case.packet);
        submit(&q, &packet::barrier_and([0; 5], s.handle(after), false));
        let st = rig.wait_error(q.id);
        let err = st.error.clone().unwrap();
        assert_eq!(err.code, case.code, "{what}: {}", err.reason);
        assert_eq!(err.fault_va, None, "{what}");
        assert!(!err.reason.is_empty(), "{what}: no reason");
        rig.assert_fires(inactive_ev, &format!("{what}: queue_inactive_signal event"));
        assert_eq!(s.value(inactive).load(Ordering::Acquire), case.code as i64, "{what}: queue_inactive_signal value");
        let r = rig.assert_fires(hw_ev, &format!("{what}: HW exception event"));
        let hw = HsaHwExceptionData::read_from_bytes(&r.data[0].payload.as_bytes()[..16]).unwrap();
        assert_eq!(hw.gpu_id, rig.gpu, "{what}: HW exception gpu_id");
        assert_eq!(s.value(done).load(Ordering::Acquire), 1, "{what}: completion signal touched");
        keeps_value(&s, after, 1, &format!("{what}: the packet behind the bad one ran"));
        assert_eq!((q.read_index(), st.read_index), (0, 0), "{what}: the bad packet was consumed");
        assert_eq!(q.header(0), u16::from_le_bytes([case.packet[0], case.packet[1]]), "{what}: slot rewritten");
        rig.kfd.destroy_event(hw_ev).unwrap();
        rig.kfd.destroy_event(inactive_ev).unwrap();
        drop(q);
    }
    assert_eq!(rig.queue_count(), 0);
}

#[test]
fn b13_vm_fault_reports_the_address_through_a_memory_event_and_stops_the_queue() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 3).unwrap();
    let dst = rig.alloc(16384, Kind::Gtt);
    dst.fill(0, 16384, 0xAA);
    let (done, after, inactive) = (0, 1, 2);
    s.value(done).store(1, Ordering::Release);
    s.value(after).store(1, Ordering::Release);
    s.value(inactive).store(0, Ordering::Release);
    q.set_inactive_signal(s.handle(inactive));
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, false);
    rig.assert_quiet(mem_ev, "fresh memory event");
    let unmapped = 0x5_0000_0080u64;
    let copy = rig.args(&CopyArgs { dst: dst.va(), src: unmapped });
    submit(
        &q,
        &packet::dispatch(rig.kernel(SOFT_KERNEL_COPY_BYTES), copy, [12345, 1, 1], [256, 1, 1], s.handle(done), false),
    );
    submit(&q, &packet::barrier_and([0; 5], s.handle(after), false));

    let r = rig.assert_fires(mem_ev, "the memory exception event");
    assert_eq!(r.data[0].event_id, mem_ev);
    let m = HsaMemoryExceptionData::read_from_bytes(r.data[0].payload.as_bytes()).unwrap();
    assert_eq!(m.va, unmapped & !0xfff, "the faulting page (amdkfd reports page_addr << PAGE_SHIFT)");
    assert_eq!(m.gpu_id, rig.gpu);
    assert_eq!(m.failure.not_present, 1);
    assert_eq!(m.failure.read_only, 0);
    let st = rig.wait_error(q.id);
    assert_eq!(st.error.as_ref().unwrap().fault_va, Some(unmapped), "{:?}", st.error);
    assert_eq!(s.value(done).load(Ordering::Acquire), 1, "completion signal of the faulting packet touched");
    keeps_value(&s, after, 1, "a packet behind the fault ran");
    assert_eq!(q.read_index(), 0);
    assert!(bytes(&dst, 0, 16384).iter().all(|b| *b == 0xAA), "the faulting copy wrote something");
    let before = rig.stats().queues;
    drop(q);
    assert_eq!(rig.stats().queues, before - 1, "DESTROY_QUEUE of the faulted queue");
    // The device keeps working for this process.
    let q = rig.queue(64);
    submit(&q, &nop(&rig, s.handle(after), false));
    wait_value(&s, after, 0, "a packet on a new queue after the fault");
}

// ---------------------------------------------------------------------------------------------
// 14: soft kernels move data

#[test]
fn b14_fill_copy_and_atomic_add_results_byte_by_byte() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 3).unwrap();
    for i in 0..3 {
        s.value(i).store(1, Ordering::Release);
    }

    // FILL_U32: 1000 work-items in groups of 64 (the last one partial).
    let fill = rig.alloc(8192, Kind::Vram);
    fill.fill(0, 8192, 0x55);
    let a = rig.args(&FillArgs { dst: fill.va(), value: 0xDEAD_BEEF, reserved: 0 });
    submit(&q, &packet::dispatch(rig.kernel(SOFT_KERNEL_FILL_U32), a, [1000, 1, 1], [64, 1, 1], s.handle(0), false));

    // COPY_BYTES: 12345 bytes, VRAM to GTT, both ends unaligned.
    let src = rig.alloc(16384, Kind::Vram);
    let pattern: Vec<u8> = (0..16384u32).map(|i| (i.wrapping_mul(131) ^ (i >> 7)) as u8).collect();
    src.write(0, &pattern);
    let dst = rig.alloc(16384, Kind::Gtt);
    dst.fill(0, 16384, 0xAA);
    let a = rig.args(&CopyArgs { dst: dst.va() + 5, src: src.va() + 3 });
    submit(
        &q,
        &packet::dispatch(rig.kernel(SOFT_KERNEL_COPY_BYTES), a, [12345, 1, 1], [256, 1, 1], s.handle(1), false),
    );

    // ATOMIC_ADD_U64: 1000 work-items each add 3.
    let cell = rig.alloc(4096, Kind::Gtt);
    cell.u64_at(8).store(7, Ordering::Release);
    let a = rig.args(&AtomicAddArgs { addr: cell.va() + 8, value: 3 });
    submit(
        &q,
        &packet::dispatch(rig.kernel(SOFT_KERNEL_ATOMIC_ADD_U64), a, [1000, 1, 1], [100, 1, 1], s.handle(2), false),
    );

    wait_value(&s, 0, 0, "FILL_U32");
    let out = bytes(&fill, 0, 8192);
    for (i, w) in out[..4000].chunks_exact(4).enumerate() {
        assert_eq!(w, 0xDEAD_BEEFu32.to_le_bytes(), "fill word {i}");
    }
    assert!(out[4000..].iter().all(|b| *b == 0x55), "fill wrote past work-item 999");

    wait_value(&s, 1, 0, "COPY_BYTES");
    let out = bytes(&dst, 0, 16384);
    assert!(out[..5].iter().all(|b| *b == 0xAA), "copy wrote before its destination");
    if let Some(i) = (0..12345).find(|&i| out[5 + i] != pattern[3 + i]) {
        panic!("copy byte {i}: {:#x}, expected {:#x}", out[5 + i], pattern[3 + i]);
    }
    assert!(out[5 + 12345..].iter().all(|b| *b == 0xAA), "copy wrote past byte 12344");

    wait_value(&s, 2, 0, "ATOMIC_ADD_U64");
    assert_eq!(cell.u64_at(8).load(Ordering::Acquire), 7 + 1000 * 3);
    assert_eq!((cell.u64_at(0).load(Ordering::Acquire), cell.u64_at(16).load(Ordering::Acquire)), (0, 0), "neighbours");
    assert_eq!(rig.status(q.id).error, None);
}

#[test]
fn b14_write_flat_id_covers_2d_and_3d_grids_with_partial_workgroups() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    let ids = rig.alloc(4096, Kind::Vram);
    let wgs = rig.alloc(4096, Kind::Gtt);
    for (grid, wg) in
        [([10u32, 3, 2], [4u16, 2, 1]), ([7, 5, 1], [3, 2, 1]), ([13, 1, 1], [5, 1, 1]), ([5, 4, 3], [2, 3, 2])]
    {
        let what = format!("grid {grid:?} workgroup {wg:?}");
        ids.fill(0, 4096, 0xFF);
        wgs.fill(0, 4096, 0xFF);
        s.value(0).store(1, Ordering::Release);
        let a = rig.args(&FlatIdArgs { dst: ids.va(), wg_dst: wgs.va() });
        submit(&q, &packet::dispatch(rig.kernel(SOFT_KERNEL_WRITE_FLAT_ID), a, grid, wg, s.handle(0), false));
        wait_value(&s, 0, 0, &what);
        let [gx, gy, gz] = grid.map(u64::from);
        let [wx, wy, wz] = wg.map(u64::from);
        let (nx, ny) = (gx.div_ceil(wx), gy.div_ceil(wy));
        for z in 0..gz {
            for y in 0..gy {
                for x in 0..gx {
                    let f = x + y * gx + z * gx * gy;
                    let group = x / wx + (y / wy) * nx + (z / wz) * nx * ny;
                    assert_eq!(word(&ids, f), f as u32, "{what}: flat id of ({x},{y},{z})");
                    assert_eq!(word(&wgs, f), group as u32, "{what}: flat workgroup id of ({x},{y},{z})");
                }
            }
        }
        let n = gx * gy * gz;
        for f in n..1024 {
            assert_eq!((word(&ids, f), word(&wgs, f)), (u32::MAX, u32::MAX), "{what}: word {f} past the grid written");
        }
    }
    assert_eq!(rig.status(q.id).error, None);
}

#[test]
fn b14_signal_store_kernel_wakes_a_waiter_on_the_stored_signal() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 3).unwrap();
    let (gate, target, done) = (0, 1, 2);
    s.value(gate).store(1, Ordering::Release);
    s.value(target).store(0, Ordering::Release);
    s.value(done).store(1, Ordering::Release);
    let ev = s.attach_event(&rig.kfd, target).unwrap();
    // The store waits behind a gate so that the waiter is parked before it happens.
    submit(&q, &packet::barrier_and([s.handle(gate), 0, 0, 0, 0], 0, false));
    submit(
        &q,
        &dispatch(
            &rig,
            SOFT_KERNEL_SIGNAL_STORE,
            &SignalStoreArgs { signal: s.handle(target), value: 42 },
            s.handle(done),
            false,
        ),
    );
    let waiter = {
        let kfd = rig.kfd.clone();
        spawn(move || kfd.wait_events(&[ev], false, WAIT_MS))
    };
    wait_for(TIMEOUT, "the waiter to park", || (rig.stats().waiters == 1).then_some(()));
    assert_eq!(s.value(target).load(Ordering::Acquire), 0);
    s.value(gate).store(0, Ordering::Release);
    let r = waiter.recv_timeout(TIMEOUT).expect("the waiter never returned");
    assert_eq!(r.result, Ok(()), "{r:?}");
    assert_eq!(r.wait_result, KFD_IOC_WAIT_RESULT_COMPLETE, "{r:?}");
    assert_eq!(s.value(target).load(Ordering::Acquire), 42);
    wait_value(&s, done, 0, "the signal-store dispatch");
}
