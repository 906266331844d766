//! `cargo xtask demo`: the stack end to end on the embedded device, no root, through the HSA
//! runtime's Rust API (rocr-shim, where ROCr sits): agents and memory pools, a queue with ROCr's
//! size rules, soft kernels that move data, a graph of barrier packets, interrupt-signal waits,
//! a signal batch, and what it all cost. Every `ok:` line is a check; the first that fails ends
//! the demo with the reason and a non-zero exit.
//!
//! Usage: `kfd-demo [PROFILE]` (a topology profile: gfx90a by default, or gfx1030).

mod agents;
mod batch;
mod data;
mod graph;
mod report;
mod waits;

use report::{Context, Result, Summary};
use rocr_shim::{Agent, Queue, Runtime};
use std::process::ExitCode;
use thunk::transport::EmbeddedTransport;

/// Longest a wait for something that must happen may take (ns, the runtime's timeout unit).
pub const WAIT_NS: u64 = 10_000_000_000;

/// What the steps share: the runtime, its agents, the queue of step 2, and the measurements.
pub struct Demo {
    pub rt: Runtime,
    pub cpu: Agent,
    pub gpu: Agent,
    pub queue: Queue,
    pub summary: Summary,
}

impl Demo {
    /// WAIT_EVENTS calls parked in the embedded device right now (threads asleep in the
    /// kernel's place): how the demo tells a sleeping waiter from a spinning one.
    pub fn parked_waits(&self) -> Result<usize> {
        let embedded = self.rt.kfd().transport().as_any().downcast_ref::<EmbeddedTransport>();
        let t = embedded.ok_or("the runtime is not on the embedded device")?;
        Ok(t.embedded().device().stats().waiters)
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let profile = match args.as_slice() {
        [] => cuse_kfd::topology::DEFAULT_PROFILE.to_string(),
        [p] if p == "-h" || p == "--help" => {
            println!("usage: kfd-demo [PROFILE]   (topology profile, default {})", cuse_kfd::topology::DEFAULT_PROFILE);
            return ExitCode::SUCCESS;
        }
        [p] => p.clone(),
        _ => {
            eprintln!("usage: kfd-demo [PROFILE]");
            return ExitCode::from(2);
        }
    };
    match run(&profile) {
        Ok(()) => {
            println!("\ndemo: all steps passed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("\ndemo FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the header of step `n`, runs it, and names the step in its error.
fn step<T>(n: u32, title: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    println!("\n== {n}. {title}");
    f().map_err(|e| format!("step {n} ({title}): {e}"))
}

fn run(profile: &str) -> Result {
    let config = cuse_kfd::DeviceConfig { profile: profile.to_string(), gpus: 1, ..Default::default() };
    let kfd = thunk::Kfd::embedded(&config).context("creating the embedded device")?;
    println!("cuse-kfd demo: HSA runtime (rocr-shim) on the embedded device, profile {profile}");
    println!("runtime dir {}", kfd.runtime_dir().display());

    let (rt, cpu, gpu) = step(1, "hsa_init: agents and memory pools", || agents::init(kfd))?;
    let queue = step(2, "a queue on the GPU agent (ROCr's size rules)", || agents::queue(&rt, cpu, gpu))?;
    let mut d = Demo { rt, cpu, gpu, queue, summary: Summary::default() };
    step(3, "soft kernels move data", || data::run(&mut d))?;
    step(4, "a dependency graph of barrier-AND and barrier-OR packets", || graph::run(&mut d))?;
    step(5, "interrupt-signal waits: BLOCKED and ACTIVE", || waits::run(&mut d))?;
    step(6, "a signal batch (hsa_amd_signal_batch_create)", || batch::run(&mut d))?;
    step(7, "summary: latencies measured in this run (embedded device)", || {
        d.summary.print();
        report::note(
            "(spinning threads, the engine's and ACTIVE waiters', share the cores: a loaded machine shows more)",
        );
        let c = d.rt.counters();
        report::note(format!(
            "runtime at the end: {} live signals, {} queues, {} allocations, {} KFD events created",
            c.live_signals, c.live_queues, c.live_allocations, c.events_created
        ));
        report::check_eq(c.arena_double_frees, 0, "no signal arena was freed twice")
    })
}
