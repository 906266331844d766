//! The shader core's worker pool on the embedded device: the workgroups of one dispatch are
//! resident together on the workers and take turns a slice of instructions at a time (so
//! workgroups that wait for each other through memory make progress, whatever the threads'
//! timing), `shader_workers: 0` keeps them on the engine thread one after the other, and a
//! dispatch of many workgroups leaves the engine free for other queues.
//!
//! Without llvm-mc-15 / ld.lld-15 the tests say so and pass, except under CI.

mod support;

use cuse_kfd::engine::EngineConfig;
use std::sync::atomic::Ordering;
use support::client::*;
use support::code_object;
use thunk::memory::Kind;
use thunk::queue::packet;
use thunk::signal::Signals;
use uapi::soft::SOFT_KERNEL_NOP;

/// Each work-group (one work-item) adds 1 to the counter at kernarg[0], then polls it until it
/// reaches 2 (another work-group is running at the same time) or 20,000 polls (160,000
/// instructions, more than a worker's slice) have passed, in which case it adds 1 to the count
/// of timeouts at kernarg[4].
const RENDEZVOUS: &str = r#"
.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"
.text
.globl k
.p2align 8
.type k,@function
k:
  v_mov_b32 v0, 0
  v_mov_b32 v1, 1
  global_atomic_add v0, v1, s[4:5]
  s_mov_b32 s8, 0
poll:
  global_load_dword v2, v0, s[4:5] glc
  s_waitcnt vmcnt(0)
  v_readfirstlane_b32 s9, v2
  s_cmp_ge_u32 s9, 2
  s_cbranch_scc1 met
  s_add_u32 s8, s8, 1
  s_cmp_lt_u32 s8, 20000
  s_cbranch_scc1 poll
  global_atomic_add v0, v1, s[4:5] offset:4
met:
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_private_segment_buffer 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr 4
  .amdhsa_next_free_sgpr 10
  .amdhsa_accum_offset 4
.end_amdhsa_kernel
"#;

/// Runs RENDEZVOUS over two work-groups on a device with `workers` shader workers; returns
/// the counter and the timeouts.
fn rendezvous(workers: usize) -> Option<(u32, u32)> {
    let co = code_object::assemble(&format!("rendezvous{workers}"), RENDEZVOUS)?;
    let rig = Rig::with_engine(EngineConfig { shader_workers: workers, ..EngineConfig::default() });
    let code = co.load(&rig.kfd, rig.gpu);
    let args = rig.alloc(4096, Kind::Gtt);
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    s.value(0).store(1, Ordering::Release);
    let kd = code.mem.addr(co.symbol("k.kd"));
    submit(&q, &packet::dispatch(kd, args.addr(0), [2, 1, 1], [1, 1, 1], s.handle(0), false));
    if let Err(v) = s.wait(0, TIMEOUT, |v| v == 0) {
        panic!("the dispatch did not complete: signal {v}");
    }
    assert!(rig.status(q.id).error.is_none());
    Some((args.u32_at(0).load(Ordering::Acquire), args.u32_at(4).load(Ordering::Acquire)))
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
    let src = RENDEZVOUS.replace("k:\n", "k:\nspin:\n  s_sleep 1\n  s_branch spin\n");
    let Some(co) = code_object::assemble("endless-many", &src) else { return };
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
    let src = RENDEZVOUS.replace(
        "k:\n",
        "k:\n  s_mov_b32 s8, 0\ncount:\n  s_add_u32 s8, s8, 1\n  s_cmp_lt_u32 s8, 25000\n  s_cbranch_scc1 count\n  v_mov_b32 v0, 0\n  v_mov_b32 v1, 1\n  global_atomic_add v0, v1, s[4:5]\n  s_endpgm\n",
    );
    let Some(co) = code_object::assemble("long-groups", &src) else { return };
    let rig = Rig::with_engine(EngineConfig { shader_workers: 2, ..EngineConfig::default() });
    let code = co.load(&rig.kfd, rig.gpu);
    let args = rig.alloc(4096, Kind::Gtt);
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    s.value(0).store(1, Ordering::Release);
    let kd = code.mem.addr(co.symbol("k.kd"));
    submit(&q, &packet::dispatch(kd, args.addr(0), [8, 1, 1], [1, 1, 1], s.handle(0), false));
    if let Err(v) = s.wait(0, TIMEOUT, |v| v == 0) {
        panic!("the dispatch did not complete: signal {v}, counter {}", args.u32_at(0).load(Ordering::Acquire));
    }
    assert_eq!(args.u32_at(0).load(Ordering::Acquire), 8, "every work-group ended once");
}
