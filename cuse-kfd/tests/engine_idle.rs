//! An idle device does not burn a core: with queues created and nothing rung, the
//! command processor's thread backs off to sleeping, so it polls a few dozen times a second and
//! uses well under a twentieth of a CPU. Alone in its test binary, so that its engine thread is
//! the only `kfd-engine` in the process.

mod support;

use std::time::{Duration, Instant};
use support::client::Rig;

/// CPU time of this process's `kfd-engine` thread (the first field of its schedstat).
fn engine_cpu() -> Duration {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let engines: Vec<_> = tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "kfd-engine"))
        .collect();
    assert_eq!(engines.len(), 1, "one kfd-engine thread in this test process");
    let stat = std::fs::read_to_string(engines[0].path().join("schedstat")).expect("the engine's schedstat");
    let ns = stat.split_whitespace().next().and_then(|n| n.parse().ok()).expect("schedstat: run time in ns");
    Duration::from_nanos(ns)
}

#[test]
fn an_idle_device_with_queues_sleeps() {
    let rig = Rig::new();
    let queues: Vec<_> = (0..16).map(|_| rig.queue(64)).collect();
    let engine = rig.emb.device().engine();
    // The spin and yield phases after the last activity (queue creation) end within a few ms.
    std::thread::sleep(Duration::from_millis(300));
    let (cpu0, polls0, t0) = (engine_cpu(), engine.polls(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let (cpu, polls, wall) = (engine_cpu() - cpu0, engine.polls() - polls0, t0.elapsed());
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    println!(
        "idle, 16 queues: {polls} polls and {:.2} ms of CPU in {wall:?} ({:.3}% of a core)",
        cpu.as_secs_f64() * 1e3,
        share * 100.0
    );
    // Sleeping up to 16 ms between polls gives about 60 polls a second.
    assert!(polls < 200, "{polls} polls in {wall:?}: the idle engine does not back off");
    assert!(share < 0.05, "the idle engine used {:.1}% of a core", share * 100.0);
    drop(queues);
}
