//! `kfd-fuzz`: the structure-aware ioctl fuzzer (see the crate documentation).

use clap::{Parser, ValueEnum};
use kfd_fuzz::exec::Config;
use kfd_fuzz::stats::Stats;
use kfd_fuzz::{minimise, ops, ReplayFile};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Target {
    /// An embedded device in this process, simulated processes, full oracles.
    Embedded,
    /// A cuse-kfd device node, real child processes (SIGKILLed at random).
    Node,
}

/// Structure-aware ioctl fuzzer for cuse-kfd.
#[derive(Debug, Parser)]
#[command(name = "kfd-fuzz", version)]
struct Args {
    #[arg(long, value_enum, default_value = "embedded")]
    target: Target,
    /// The device node (with --target node).
    #[arg(long, default_value = "/dev/kfd")]
    device: PathBuf,
    /// Seed of the run (default: from the clock; printed at the start).
    #[arg(long)]
    seed: Option<u64>,
    /// Operations to run in all.
    #[arg(long, default_value_t = 100_000)]
    iterations: u64,
    /// Operations per case (each case gets a fresh device).
    #[arg(long, default_value_t = 300)]
    case_len: usize,
    /// Simulated processes per case (at least 2; every third one, from the second, is driven
    /// through the thunk's AQL queues and signals).
    #[arg(long, default_value_t = 4)]
    procs: u8,
    #[arg(long, default_value_t = 1)]
    gpus: usize,
    #[arg(long, default_value = cuse_kfd::topology::DEFAULT_PROFILE)]
    profile: String,
    /// A reply later than this (ms) is a hang.
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
    /// Where replay files of failing cases go.
    #[arg(long, default_value = "kfd-fuzz-failures")]
    out: PathBuf,
    /// Stop after this many failing cases.
    #[arg(long, default_value_t = 5)]
    max_failures: u64,
    /// Save failing cases as they are, without minimising.
    #[arg(long)]
    no_minimise: bool,
    /// Seconds between progress lines.
    #[arg(long, default_value_t = 5)]
    progress_secs: u64,
    /// Run this replay file (exit status 1 if it still fails).
    #[arg(long)]
    replay: Option<PathBuf>,
    /// How many times --replay runs the case (a failure in any run counts).
    #[arg(long, default_value_t = 1)]
    replay_runs: usize,
    /// Internal: run as one child of --target node.
    #[arg(long, hide = true)]
    node_child: Option<u64>,
    /// Internal: the root-owned directory a node child's planted symlinks point at.
    #[arg(long, hide = true, default_value = "/")]
    canary: PathBuf,
    /// Internal: the image a node child's exec operation runs (crate::hostile).
    #[arg(long, hide = true)]
    node_exec_probe: bool,
    /// The daemon's pid (with --target node): it must stay the same live process.
    #[arg(long)]
    daemon_pid: Option<u32>,
    /// With --target node as root: every other child runs as this uid and gid.
    #[arg(long, default_value_t = 65534)]
    child_uid: u32,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.node_exec_probe {
        return ExitCode::from(kfd_fuzz::hostile::exec_probe(&args.device) as u8);
    }
    if let Some(path) = &args.replay {
        return replay(path, args.replay_runs, &args);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    if let Some(child_seed) = args.node_child {
        return kfd_fuzz::node::child(
            &args.device,
            child_seed,
            args.case_len,
            Duration::from_millis(args.timeout_ms),
            &args.canary,
        );
    }
    if args.procs < 2 {
        eprintln!("kfd-fuzz: --procs must be at least 2 (isolation needs two processes)");
        return ExitCode::from(2);
    }
    match args.target {
        Target::Embedded => embedded(&args, seed),
        Target::Node => kfd_fuzz::node::run(&kfd_fuzz::node::NodeConfig {
            device: args.device.clone(),
            seed,
            iterations: args.iterations,
            case_len: args.case_len,
            timeout: Duration::from_millis(args.timeout_ms),
            progress_secs: args.progress_secs,
            daemon_pid: args.daemon_pid,
            child_uid: Some(args.child_uid),
            out: args.out.clone(),
        }),
    }
}

fn replay(path: &std::path::Path, runs: usize, args: &Args) -> ExitCode {
    // A node child's failure (kfd_fuzz::node::NodeReplay) runs against --device.
    let node = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<kfd_fuzz::node::NodeReplay>(&t).ok())
        .filter(|r| r.target == "node");
    if let Some(r) = node {
        println!(
            "kfd-fuzz: replaying node child {} ({} operations) on {}",
            r.child_seed,
            r.case_len,
            args.device.display()
        );
        let failed = (0..runs.max(1))
            .find_map(|_| kfd_fuzz::node::replay(&r, &args.device, Duration::from_millis(args.timeout_ms)).err());
        return replay_verdict(failed);
    }
    let file = match ReplayFile::load(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("kfd-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    println!("kfd-fuzz: replaying {} ({} operations, {runs} run(s))", path.display(), file.ops.len());
    replay_verdict(kfd_fuzz::replay(&file, runs))
}

/// A replay's outcome, said and as the exit status: 1 while it still fails.
fn replay_verdict(failed: Option<impl std::fmt::Display>) -> ExitCode {
    match failed {
        Some(f) => {
            println!("kfd-fuzz: still fails: {f}");
            ExitCode::FAILURE
        }
        None => {
            println!("kfd-fuzz: passes");
            ExitCode::SUCCESS
        }
    }
}

fn embedded(args: &Args, seed: u64) -> ExitCode {
    let config = Config {
        profile: args.profile.clone(),
        gpus: args.gpus,
        procs: args.procs,
        op_timeout: Duration::from_millis(args.timeout_ms),
        ..Config::default()
    };
    println!(
        "kfd-fuzz: seed {seed}, {} operations in cases of {}, {} simulated processes, profile {} x{}",
        args.iterations, args.case_len, args.procs, args.profile, args.gpus
    );
    let start = Instant::now();
    let mut total = Stats::default();
    let mut last_progress = Instant::now();
    let mut case = 0u64;
    let mut failures = 0u64;
    let baseline = kfd_fuzz::threads_and_fds();
    while total.ops < args.iterations && failures < args.max_failures {
        let len = args.case_len.min((args.iterations - total.ops) as usize).max(1);
        let r = kfd_fuzz::fuzz_case(&config, seed, case, len);
        total.merge(&r.stats);
        total.ops += if r.failure.is_some() { r.ops.len() as u64 - r.stats.ops.min(r.ops.len() as u64) } else { 0 };
        if let Some(f) = r.failure {
            failures += 1;
            total.cases += 1;
            *total.failures.entry(f.kind.name().to_string()).or_insert(0) += 1;
            println!("kfd-fuzz: FAILURE in case {case}: {f}");
            save_failure(args, &config, seed, case, &r.ops, &f);
        }
        case += 1;
        // Every case's device is gone by now: threads and fds must not pile up (a hang leaves
        // its stuck thread behind, so only while nothing failed).
        let (threads, fds) = kfd_fuzz::threads_and_fds();
        if failures == 0 && (threads > baseline.0 + 32 || fds > baseline.1 + 64) {
            failures += 1;
            *total.failures.entry("leak".to_string()).or_insert(0) += 1;
            println!(
                "kfd-fuzz: FAILURE after case {case}: {threads} threads and {fds} fds, {} and {} at the start: devices leave them behind\n  {}",
                baseline.0,
                baseline.1,
                kfd_fuzz::threads_and_fds_by_name()
            );
        }
        if last_progress.elapsed() >= Duration::from_secs(args.progress_secs) {
            last_progress = Instant::now();
            let secs = start.elapsed().as_secs_f64();
            let ioctls = kfd_fuzz::IOCTLS.load(Ordering::Relaxed);
            println!(
                "kfd-fuzz: {:>9} operations, {case} cases, {:>10} ioctls, {:.0} ioctls/s, {} failures, {:.0} s",
                total.ops,
                ioctls,
                ioctls as f64 / secs,
                total.failure_count(),
                secs
            );
        }
    }
    let secs = start.elapsed().as_secs_f64();
    print!("{}", total.summary(secs, &ops::all_requests()));
    if total.failure_count() > 0 {
        println!("kfd-fuzz: replay files are in {}", args.out.display());
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn save_failure(args: &Args, config: &Config, seed: u64, case: u64, ops: &[ops::Op], f: &kfd_fuzz::exec::Failure) {
    let (ops, f) = if args.no_minimise {
        (ops.to_vec(), f.clone())
    } else {
        println!("kfd-fuzz: minimising {} operations...", ops.len());
        minimise::minimise(config, ops, f, Duration::from_secs(300), &mut |m| println!("kfd-fuzz: {m}"))
    };
    let file = ReplayFile {
        version: ReplayFile::VERSION,
        seed,
        case,
        profile: config.profile.clone(),
        gpus: config.gpus,
        procs: config.procs,
        failure: Some(f.clone()),
        ops,
    };
    if let Err(e) = std::fs::create_dir_all(&args.out) {
        eprintln!("kfd-fuzz: cannot create {}: {e}", args.out.display());
        return;
    }
    let path = args.out.join(format!("{}-{seed}-{case}.json", f.kind.name()));
    match file.save(&path) {
        Ok(()) => println!(
            "kfd-fuzz: {f}\nkfd-fuzz: saved {} ({} operations); run it with kfd-fuzz --replay {}",
            path.display(),
            file.ops.len(),
            path.display()
        ),
        Err(e) => eprintln!("kfd-fuzz: {e}"),
    }
}
