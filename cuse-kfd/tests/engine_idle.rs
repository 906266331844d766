//! An idle device does not burn a core: with queues created and nothing rung, the
//! command processor's threads back off to sleeping, so each polls a few dozen times a second
//! and together they use well under a twentieth of a CPU. Alone in its test binary, so that its
//! engine's threads are the only `kfd-engine` ones in the process.

mod support;

use std::time::{Duration, Instant};
use support::client::Rig;

/// CPU time of this process's `kfd-engine` threads, `lanes` of them (the first field of each
/// one's schedstat).
fn engine_cpu(lanes: usize) -> Duration {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let engines: Vec<_> = tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim().starts_with("kfd-engine")))
        .collect();
    assert_eq!(engines.len(), lanes, "the engine's threads, and no other kfd-engine, in this test process");
    let run_ns = |t: &std::fs::DirEntry| -> u64 {
        let stat = std::fs::read_to_string(t.path().join("schedstat")).expect("an engine thread's schedstat");
        stat.split_whitespace().next().and_then(|n| n.parse().ok()).expect("schedstat: run time in ns")
    };
    Duration::from_nanos(engines.iter().map(run_ns).sum())
}

#[test]
fn an_idle_device_with_queues_sleeps() {
    let rig = Rig::new();
    let queues: Vec<_> = (0..16).map(|_| rig.queue(64)).collect();
    let engine = rig.emb.device().engine();
    let lanes = engine.threads();
    // The spin and yield phases after the last activity (queue creation) end within a few ms.
    std::thread::sleep(Duration::from_millis(300));
    let (cpu0, polls0, t0) = (engine_cpu(lanes), engine.polls(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let (cpu, polls, wall) = (engine_cpu(lanes) - cpu0, engine.polls() - polls0, t0.elapsed());
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    println!(
        "idle, 16 queues: {polls} polls and {:.2} ms of CPU in {wall:?} ({:.3}% of a core)",
        cpu.as_secs_f64() * 1e3,
        share * 100.0
    );
    // Sleeping up to 16 ms between polls gives about 60 polls a second per lane.
    assert!(
        polls < 200 * lanes as u64,
        "{polls} polls of {lanes} lanes in {wall:?}: the idle engine does not back off"
    );
    assert!(share < 0.05, "the idle engine used {:.1}% of a core", share * 100.0);
    drop(queues);
}
