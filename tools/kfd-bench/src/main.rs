//! `cargo xtask bench`: the device's figures, each printed as `BENCH <name> <value> <unit>`
//! and, where there is a baseline measured in this same run, `RATIO <name> <ours/baseline>`.
//! Machines here are noisy: latencies are medians (p50) and p99 over many round trips.

mod baseline;
mod codeobj;
mod cuse;
mod engine;
mod fairness;
mod kfd;
mod scaling;
mod shader;
mod signals;
mod stats;

use std::process::ExitCode;

fn main() -> ExitCode {
    let only: Vec<String> = std::env::args().skip(1).collect();
    if only.iter().any(|a| a == "-h" || a == "--help") {
        println!(
            "usage: kfd-bench [GROUP...]\n\ngroups:\n  engine  doorbell and dispatch latency, barrier throughput, idle CPU, fairness (embedded)\n  cuse    GET_VERSION and WAIT_EVENTS round trips against a libfuse3 CUSE device\n          (needs /dev/cuse, root, CUSE_KFD_BIN and KFD_BENCH_CUSE_REF)\n  signals the rocr-shim's signal batches and wake-up latency (embedded)
  kfd     SDMA copy bandwidth, PM4 packets, queue create/destroy, event round trips, USERPTR
          registration (embedded)
  shader  the soft shader core on gfx90a kernels built with LLVM 15 against plain Rust\nPrints BENCH and RATIO lines; with no group, runs engine."
        );
        return ExitCode::SUCCESS;
    }
    let run = |g: &str| (only.is_empty() && g == "engine") || only.iter().any(|a| a == g);
    if run("engine") {
        engine::run();
    }
    run("signals").then(signals::run); // rocr-shim: batch vs single creates, wake-up latency
    run("kfd").then(kfd::run); // issue 15's throughput figures of the KFD interface
    if run("shader") {
        if let Err(e) = shader::run() {
            eprintln!("kfd-bench shader: {e}");
            return ExitCode::FAILURE;
        }
    }
    if run("cuse") {
        if let Err(e) = cuse::run() {
            eprintln!("kfd-bench cuse: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
