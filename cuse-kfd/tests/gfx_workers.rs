//! The shader core's worker pool on the embedded device: the workgroups of one dispatch are
//! resident together on the workers and take turns a slice of instructions at a time (so
//! workgroups that wait for each other through memory make progress, whatever the threads'
//! timing), `shader_workers: 0` keeps them on the engine thread one after the other, and a
//! dispatch of many workgroups leaves the engine free for other queues. UPDATE_QUEUE to 0
//! percent preempts an AQL queue's dispatch on the workers, 100 percent resumes it.
//!
//! Without llvm-mc-15 / ld.lld-15 the tests say so and pass, except under CI.

mod support;

use cuse_kfd::engine::EngineConfig;
use std::sync::atomic::Ordering;
use support::client::*;
use support::code_object::{self, kernel, CodeObject, Loaded};
use thunk::memory::{GpuMemory, Kind};
use thunk::queue::{packet, AqlQueue};
use thunk::signal::Signals;
use uapi::soft::SOFT_KERNEL_NOP;

/// A dispatch of `co`'s kernel `k` under way, and what it runs with.
struct Dispatch {
    rig: Rig,
    /// Its code object, kept mapped while it runs (destructure it by name, not with `..`).
    _code: Loaded,
    /// Its kernarg: a fresh buffer.
    args: GpuMemory,
    q: AqlQueue,
    /// Its completion signal (1 until it completes).
    s: Signals,
}

/// Submits `co`'s kernel `k` over `groups` work-groups of one work-item, its kernarg a fresh
/// buffer, on a device with `workers` shader workers.
fn dispatch(co: &CodeObject, workers: usize, groups: u32) -> Dispatch {
    let rig = Rig::with_engine(EngineConfig { shader_workers: workers, ..EngineConfig::default() });
    let code = co.load(&rig.kfd, rig.gpu);
    let args = rig.alloc(4096, Kind::Gtt);
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    s.value(0).store(1, Ordering::Release);
    let kd = code.mem.addr(co.symbol("k.kd"));
    submit(&q, &packet::dispatch(kd, args.addr(0), [groups, 1, 1], [1, 1, 1], s.handle(0), false));
    Dispatch { rig, _code: code, args, q, s }
}

/// [`dispatch`], then the kernarg buffer's first two words once the dispatch has completed.
fn run(co: &CodeObject, workers: usize, groups: u32) -> (u32, u32) {
    let Dispatch { rig, _code, args, q, s } = dispatch(co, workers, groups);
    let words = || (args.u32_at(0).load(Ordering::Acquire), args.u32_at(4).load(Ordering::Acquire));
    if let Err(v) = s.wait(0, TIMEOUT, |v| v == 0) {
        panic!("the dispatch did not complete: signal {v}, words {:?}", words());
    }
    assert!(rig.status(q.id).error.is_none());
    words()
}

/// Runs [`code_object::rendezvous`] over two work-groups on a device with `workers` shader
/// workers; returns the count and the timeouts.
fn rendezvous(workers: usize) -> Option<(u32, u32)> {
    let co = code_object::assemble(&format!("rendezvous{workers}"), &kernel(&code_object::rendezvous("s[4:5]")))?;
    Some(run(&co, workers, 2))
}

#[test]
fn workgroups_of_a_dispatch_are_resident_together_on_the_workers() {
    // Even one worker starts the second work-group when the first one's slice ends.
    for workers in [1, 2] {
        let Some((counter, timeouts)) = rendezvous(workers) else { return };
        assert_eq!((counter, timeouts), (2, 0), "{workers} workers: each work-group saw the other one running");
    }
}

#[test]
fn without_workers_workgroups_run_one_after_the_other_on_the_engine() {
    let Some((counter, timeouts)) = rendezvous(0) else { return };
    // The first work-group polls alone until it gives up; the second then finds the count at 2.
    assert_eq!((counter, timeouts), (2, 1));
}

#[test]
fn a_dispatch_of_many_endless_workgroups_leaves_the_engine_to_other_queues_until_its_queue_goes() {
    let Some(co) = code_object::assemble("endless-many", &kernel("spin:\n  s_sleep 1\n  s_branch spin")) else {
        return;
    };
    let rig = Rig::with_engine(EngineConfig { shader_workers: 2, ..EngineConfig::default() });
    let code = co.load(&rig.kfd, rig.gpu);
    let endless = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
    s.value(0).store(1, Ordering::Release);
    let kd = code.mem.addr(co.symbol("k.kd"));
    submit(&endless, &packet::dispatch(kd, 0, [64, 1, 1], [1, 1, 1], s.handle(0), false));
    let q = rig.queue(64);
    for _ in 0..20 {
        s.value(1).store(1, Ordering::Release);
        submit(&q, &packet::dispatch(rig.kernel(SOFT_KERNEL_NOP), 0, [1, 1, 1], [1, 1, 1], s.handle(1), false));
        if let Err(v) = s.wait(1, TIMEOUT, |v| v == 0) {
            panic!("a packet on another queue while 64 endless work-groups run: signal {v}");
        }
    }
    assert_eq!(s.value(0).load(Ordering::Acquire), 1, "the endless dispatch completed");
    let before = rig.stats().queues;
    drop(endless);
    assert_eq!(rig.stats().queues, before - 1, "DESTROY_QUEUE of the queue running the dispatch");
}

#[test]
fn workgroups_longer_than_a_slice_pause_resume_and_all_end() {
    // Each work-group counts to 25,000 (75,000 instructions: more than a slice), then adds 1
    // to the counter at kernarg[0].
    let body = "  s_mov_b32 s8, 0\ncount:\n  s_add_u32 s8, s8, 1\n  s_cmp_lt_u32 s8, 25000\n  s_cbranch_scc1 count\n  \
                v_mov_b32 v0, 0\n  v_mov_b32 v1, 1\n  global_atomic_add v0, v1, s[4:5]";
    let Some(co) = code_object::assemble("long-groups", &kernel(body)) else { return };
    assert_eq!(run(&co, 2, 8).0, 8, "every work-group ended once");
}

#[test]
fn an_aql_dispatch_preempted_by_update_queue_stops_and_resumes_where_it_was() {
    // Each work-group adds 1 to the counter at kernarg + 0 per iteration, counting them in s8,
    // until the word at kernarg + 4 is non-zero; then work-group `wg` stores its count at
    // kernarg + 8 + 4 * wg.
    let body = "  v_mov_b32 v0, 0
  v_mov_b32 v1, 1
  s_mov_b32 s8, 0
spin:
  s_add_u32 s8, s8, 1
  global_atomic_add v0, v1, s[4:5]
  global_load_dword v2, v0, s[4:5] offset:4 glc
  s_waitcnt vmcnt(0)
  v_readfirstlane_b32 s9, v2
  s_cmp_eq_u32 s9, 0
  s_cbranch_scc1 spin
  s_add_u32 s9, s6, 1
  s_lshl_b32 s9, s9, 2
  v_mov_b32 v3, s9
  v_mov_b32 v4, s8
  global_store_dword v3, v4, s[4:5] offset:4";
    let Some(co) = code_object::assemble("aql-spin", &kernel(body)) else { return };
    let Dispatch { rig, _code, args, q, s } = dispatch(&co, 2, 4);
    let counter = || args.u32_at(0).load(Ordering::Acquire);
    let ring_bytes = (q.slots * 64) as u32;
    wait_for(TIMEOUT, "the waves running", || (counter() > 0).then_some(()));
    q.update(0, q.ring.va(), ring_bytes).expect("UPDATE_QUEUE to 0 percent");
    let held = counter();
    stays(std::time::Duration::from_millis(50), "no wave runs while preempted", || counter() == held);
    q.update(100, q.ring.va(), ring_bytes).expect("UPDATE_QUEUE to 100 percent");
    wait_for(TIMEOUT, "the waves resuming", || (counter() > held).then_some(()));
    args.u32_at(4).store(1, Ordering::Release);
    if let Err(v) = s.wait(0, TIMEOUT, |v| v == 0) {
        panic!("the dispatch did not complete after it was resumed and told to stop: signal {v}");
    }
    let counts: Vec<u32> = (0..4).map(|wg| args.u32_at(8 + 4 * wg).load(Ordering::Acquire)).collect();
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    assert_eq!(counts.iter().map(|&c| u64::from(c)).sum::<u64>(), u64::from(counter()), "{counts:?}");
    assert!(rig.status(q.id).error.is_none());
}
