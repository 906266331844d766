//! kfd-fuzz: a structure-aware ioctl fuzzer for cuse-kfd.
//!
//! A run is a sequence of cases; a case is a sequence of [`ops::Op`]s generated one at a time
//! from the run's seed and what the model knows ([`gen`]), each run at once against a fresh
//! embedded device with two or more simulated processes ([`exec`]) and checked by the oracles
//! there. A failing case is minimised ([`minimise`]) and saved as a replay file
//! ([`ReplayFile`]) that `kfd-fuzz --replay FILE` runs again. [`node`] drives a device node
//! with real child processes instead, with [`hostile`] operations among their requests and
//! [`node_oracle`]'s checks around them.

pub mod arena;
pub mod errnos;
pub mod exec;
pub mod gen;
pub mod hostile;
pub mod minimise;
pub mod model;
pub mod node;
pub mod node_oracle;
pub mod ops;
pub mod rng;
pub mod stats;

use exec::{Config, Failure, Harness, Kind};
use ops::Op;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use stats::Stats;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// A saved case: everything needed to run it again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplayFile {
    pub version: u32,
    /// The run's seed and the case's number in it (informational: the operations are all here).
    pub seed: u64,
    pub case: u64,
    pub profile: String,
    pub gpus: usize,
    pub procs: u8,
    /// What the case did when it was saved.
    pub failure: Option<Failure>,
    pub ops: Vec<Op>,
}

impl ReplayFile {
    pub const VERSION: u32 = 1;

    pub fn config(&self) -> Config {
        Config { profile: self.profile.clone(), gpus: self.gpus, procs: self.procs, ..Config::default() }
    }

    pub fn load(path: &Path) -> Result<ReplayFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{} is not a kfd-fuzz replay file: {e}", path.display()))
    }

    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// The per-case seed of case `case` of a run seeded with `seed`.
pub fn case_seed(seed: u64, case: u64) -> u64 {
    rng::mix(seed ^ rng::mix(case))
}

/// What running one case gave.
pub struct CaseResult {
    /// The operations that ran (for a generated case: as many as were generated).
    pub ops: Vec<Op>,
    pub stats: Stats,
    pub failure: Option<Failure>,
}

/// How the case's operations come.
enum Source {
    Generate { seed: u64, len: usize },
    Fixed(Vec<Op>),
}

fn run_in_place(config: &Config, source: &Source, heartbeat: Arc<AtomicU64>, journal: &Mutex<Vec<Op>>) -> CaseResult {
    let mut h = match Harness::new(config.clone(), heartbeat) {
        Ok(h) => h,
        Err(what) => {
            let failure = Some(Failure { kind: Kind::Crash, at: 0, what });
            return CaseResult { ops: Vec::new(), stats: Stats::default(), failure };
        }
    };
    let mut ops = Vec::new();
    let (mut gen, fixed, len) = match source {
        Source::Generate { seed, len } => (Some(gen::Gen::new(*seed)), &[][..], *len),
        Source::Fixed(v) => (None, &v[..], v.len()),
    };
    for i in 0..len {
        let op = match (gen.as_mut(), fixed.get(i)) {
            (Some(g), _) => g.next(&h),
            (None, Some(op)) => op.clone(),
            (None, None) => break,
        };
        journal.lock().push(op.clone());
        ops.push(op.clone());
        if let Err((kind, what)) = h.step(&op) {
            let failure = Some(Failure { kind, at: i, what: format!("{what}\n  operation: {op:?}") });
            let stats = std::mem::take(&mut h.stats);
            // Whatever the failure, let the device go (it may hang: the guard deals with that).
            drop(h);
            return CaseResult { ops, stats, failure };
        }
    }
    let mut failure = h.finish().err().map(|(kind, what)| Failure { kind, at: len, what });
    let mut stats = std::mem::take(&mut h.stats);
    stats.cases = 1;
    let root = h.root().to_path_buf();
    drop(h);
    if failure.is_none() && root.exists() {
        let what = format!("the device is gone but its runtime directory {} is still there", root.display());
        failure = Some(Failure { kind: Kind::Leak, at: len, what });
    }
    CaseResult { ops, stats, failure }
}

/// Runs a case on its own thread with a watchdog: an operation that makes no progress for
/// `config.op_timeout` plus the wait slack is a hang (the stuck thread is left behind).
fn run_guarded(config: &Config, source: Source) -> CaseResult {
    let heartbeat = Arc::new(AtomicU64::new(0));
    let journal = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let (c, hb, j) = (config.clone(), heartbeat.clone(), journal.clone());
    let spawned = std::thread::Builder::new().name("kfd-fuzz-case".into()).spawn(move || {
        let r = run_in_place(&c, &source, hb, &j);
        let _ = tx.send(r);
    });
    if let Err(e) = spawned {
        let failure = Some(Failure { kind: Kind::Crash, at: 0, what: format!("cannot spawn a case thread: {e}") });
        return CaseResult { ops: Vec::new(), stats: Stats::default(), failure };
    }
    let limit = config.op_timeout + config.wait_slack * 2;
    let mut last = (heartbeat.load(Ordering::Relaxed), Instant::now());
    exec::install_panic_hook();
    let panics = exec::panic_count();
    let mut panicked: Option<Instant> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(r) => return r,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let ops = journal.lock().clone();
                let at = ops.len().saturating_sub(1);
                let what = exec::last_panic().unwrap_or_else(|| "the case thread died".into());
                return CaseResult {
                    ops,
                    stats: Stats::default(),
                    failure: Some(Failure { kind: Kind::Crash, at, what }),
                };
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // A panic elsewhere (the engine thread) may leave the case blocked on it: give
                // the case a moment to report it, then report it here.
                if exec::panic_count() != panics {
                    let since = *panicked.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_millis(500) {
                        let ops = journal.lock().clone();
                        let at = ops.len().saturating_sub(1);
                        let what = exec::last_panic().unwrap_or_else(|| "a panic".into());
                        let failure = Some(Failure { kind: Kind::Crash, at, what });
                        return CaseResult { ops, stats: Stats::default(), failure };
                    }
                }
                let beat = heartbeat.load(Ordering::Relaxed);
                if beat != last.0 {
                    last = (beat, Instant::now());
                } else if last.1.elapsed() > limit {
                    let ops = journal.lock().clone();
                    let at = ops.len().saturating_sub(1);
                    let what = match ops.last() {
                        Some(op) => format!("no progress for {limit:?} in operation {op:?} (or the final checks)"),
                        None => format!("no progress for {limit:?} creating the device"),
                    };
                    return CaseResult {
                        ops,
                        stats: Stats::default(),
                        failure: Some(Failure { kind: Kind::Hang, at, what }),
                    };
                }
            }
        }
    }
}

/// Generates and runs case `case` of the run seeded `seed`, guarded.
pub fn fuzz_case(config: &Config, seed: u64, case: u64, len: usize) -> CaseResult {
    run_guarded(config, Source::Generate { seed: case_seed(seed, case), len })
}

/// Runs fixed operations, guarded.
pub fn run_ops(config: &Config, ops: &[Op]) -> CaseResult {
    run_guarded(config, Source::Fixed(ops.to_vec()))
}

/// Runs a replay file `runs` times; the first failure, if any.
pub fn replay(file: &ReplayFile, runs: usize) -> Option<Failure> {
    let config = file.config();
    (0..runs.max(1)).find_map(|_| run_ops(&config, &file.ops).failure)
}

/// Threads and open file descriptors of this process: devices that are gone must not leave
/// either behind.
pub fn threads_and_fds() -> (usize, usize) {
    let count = |d: &str| std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0);
    (count("/proc/self/task"), count("/proc/self/fd"))
}

/// This process's threads by name and its fds by what they point to, most first: what a leak
/// report shows so that the leaking part of the device is named.
pub fn threads_and_fds_by_name() -> String {
    use std::collections::BTreeMap;
    let mut threads: BTreeMap<String, usize> = BTreeMap::new();
    for t in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        *threads.entry(name.trim().to_string()).or_default() += 1;
    }
    let mut fds: BTreeMap<String, usize> = BTreeMap::new();
    for f in std::fs::read_dir("/proc/self/fd").into_iter().flatten().flatten() {
        let target = std::fs::read_link(f.path()).map(|p| p.display().to_string()).unwrap_or_default();
        // A memfd or a backing file names its object; the kind is what tells a leak apart.
        let kind = target.split(['/', ':']).filter(|s| !s.is_empty()).take(2).collect::<Vec<_>>().join("/");
        *fds.entry(kind).or_default() += 1;
    }
    let top = |m: BTreeMap<String, usize>| {
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.iter().take(8).map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")
    };
    format!("threads: {}; fds: {}", top(threads), top(fds))
}

/// Counts every request sent, for the progress line.
pub static IOCTLS: AtomicU64 = AtomicU64::new(0);
