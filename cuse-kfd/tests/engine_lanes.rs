//! The engine's lanes (its threads): a new queue goes to the lane serving the fewest, every
//! lane runs its own queues' packets, and a lane that lost queues gets the next ones. Alone in
//! its test binary, so that the `kfd-engine` threads counted are this device's.

mod support;

use cuse_kfd::engine::EngineConfig;
use support::client::{submit, wait_for, Rig, TIMEOUT};
use thunk::queue::packet;

/// This process's threads whose name starts with `kfd-engine`.
fn engine_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("kfd-engine")))
        .count()
}

#[test]
fn queues_spread_over_the_lanes_and_every_lane_runs_its_own() {
    let rig = Rig::with_engine(EngineConfig { threads: 3, ..EngineConfig::default() });
    let engine = rig.emb.device().engine();
    assert_eq!(engine.threads(), 3);
    // A thread names itself once it runs.
    wait_for(TIMEOUT, "three kfd-engine threads", || (engine_threads() == 3).then_some(()));
    // Lanes 0, 1, 2, 0, 1, 2, 0.
    let mut queues: Vec<_> = (0..7).map(|_| rig.queue(64)).collect();
    assert_eq!(engine.queues_per_thread(), [3, 2, 2]);
    // Every queue, whichever lane serves it, runs its packets (more than its ring holds).
    let barrier = packet::barrier_and([0; 5], 0, false);
    for _ in 0..200 {
        for q in &queues {
            submit(q, &barrier);
        }
    }
    for q in &queues {
        wait_for(TIMEOUT, &format!("queue {} to run its 200 barriers", q.id), || (q.read_index() == 200).then_some(()));
    }
    // Queues 0 and 3 were lane 0's: the next two go there.
    queues.remove(3);
    queues.remove(0);
    assert_eq!(engine.queues_per_thread(), [1, 2, 2]);
    queues.push(rig.queue(64));
    assert_eq!(engine.queues_per_thread(), [2, 2, 2]);
    let q = queues.last().unwrap();
    submit(q, &barrier);
    wait_for(TIMEOUT, "the newest queue to run its barrier", || (q.read_index() == 1).then_some(()));
    drop(queues);
    assert_eq!(engine.queues_per_thread(), [0, 0, 0]);
}
