//! `cargo xtask bench`: the device's figures, each printed as `BENCH <name> <value> <unit>`
//! and, where there is a baseline measured in this same run, `RATIO <name> <ours/baseline>`.
//! Machines here are noisy: latencies are medians (p50) and p99 over many round trips.

mod baseline;
mod engine;
mod stats;

fn main() {
    let only: Vec<String> = std::env::args().skip(1).collect();
    if only.iter().any(|a| a == "-h" || a == "--help") {
        println!("usage: kfd-bench [GROUP...]\n\ngroups: engine (doorbell latency, dispatch latency, barrier throughput, idle CPU)\nPrints BENCH and RATIO lines; with no group, runs all.");
        return;
    }
    let run = |g: &str| only.is_empty() || only.iter().any(|a| a == g);
    if run("engine") {
        engine::run();
    }
}
