//! The node target: real child processes against a cuse-kfd device node, so the kernel's CUSE
//! path (RETRY rounds, interrupts, a killed client's release) is in the loop.
//!
//! The parent starts rounds of children (this binary with `--node-child SEED`; as root, every
//! other one as `--child-uid`, 65534 by default), SIGKILLs some of them at random moments, and
//! checks, every 250 ms and after each round, that the daemon is the same live process
//! (`--daemon-pid`), that its own well-behaved witness client's GET_VERSION + ALLOC + FREE round
//! trip keeps succeeding within the timeout, and that a root-owned canary directory outside the
//! runtime directory is unchanged; after each round also that a fresh open answers and that no
//! client directory is left. Each child opens the node, runs a generated sequence of raw
//! requests (with helper threads parked in WAIT_EVENTS) and, one operation in 30, a hostile
//! operation ([`crate::hostile`]: truncation and hole punching of its backing files, symlink
//! swaps, fd passing, exec, a pid namespace), and checks the errno table and its model itself;
//! it exits 1 on a failure, 3 on a hang. Object counts are not observable through a node: that
//! oracle is the embedded target's. A failing child is rerun up to its failing operation and
//! saved as a [`NodeReplay`] (`kfd-fuzz --replay FILE --device PATH` runs it again).

use crate::arena::{Arena, ARENA_SIZE};
use crate::errnos;
use crate::gen::{Gen, Grade};
use crate::hostile::{self, Hostile};
use crate::model::{BufferModel, EventModel, Model, QueueModel};
use crate::node_oracle;
use crate::ops::{self, Expect};
use crate::rng::Rng;
use crate::stats::Stats;
use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::{FromBytes, IntoBytes};

/// Children per round.
const CHILDREN: usize = 3;
/// One operation in this many of a child is a hostile one ([`crate::hostile`]).
const HOSTILE_ONE_IN: u64 = 30;
/// A child reports its progress every this many operations.
const PROGRESS_EVERY: usize = 25;

/// ioctl(2) on `fd` with the argument at `addr`.
///
/// # Safety
///
/// `addr` is a buffer of at least `_IOC_SIZE(cmd)` writable bytes the caller owns, or lies in
/// the fuzzer's arena (so the bytes past a short buffer are the arena or its never-mapped hole);
/// every pointer inside the argument is null, in the arena, or a buffer the caller owns that is
/// valid for what `cmd` reads and writes through it (see crate::arena).
unsafe fn raw_ioctl(fd: &File, cmd: u32, addr: u64) -> Result<(), Errno> {
    // SAFETY: the caller's contract above; the kernel copies through `addr` and the pointers in
    // it with copy_{from,to}_user, which faults cleanly on the hole.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as libc::c_ulong, addr as *mut libc::c_void) };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// The device's runtime directory, asked through the node.
fn runtime_dir(device: &Path) -> Result<PathBuf, String> {
    let kfd = thunk::Kfd::open_node(device).map_err(|e| format!("cannot open {}: {e}", device.display()))?;
    Ok(kfd.runtime_dir().to_path_buf())
}

/// GET_VERSION on a fresh open, within `timeout`.
fn device_answers(device: &Path, timeout: Duration) -> Result<(), String> {
    let d = device.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = thunk::Kfd::open_node(&d).and_then(|k| k.version());
        let _ = tx.send(r);
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok((1, _))) => Ok(()),
        Ok(Ok(v)) => Err(format!("GET_VERSION answered {v:?}")),
        Ok(Err(e)) => Err(format!("the device no longer answers: {e}")),
        Err(_) => Err(format!("the device did not answer GET_VERSION within {timeout:?}")),
    }
}

/// Client directories (named by pid) left in the runtime directory, but ours (the witness
/// client's).
fn client_dirs(dir: &Path) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.parse::<u32>().is_ok() && *n != me)
                .collect()
        })
        .unwrap_or_default()
}

/// What a child's output says: its `ANSWER name answer count` lines (ioctls and hostile
/// operations by answer), `KIND kind count` lines (operations by kind, at its end) and `DONE n`
/// lines (progress, for a child killed before its end). Returns the operations it ran.
fn add_child_output(total: &mut Stats, out: &str) -> u64 {
    let names: Vec<&'static str> = ops::all_requests().iter().map(|(n, _)| *n).chain(Hostile::NAMES).collect();
    let kinds: Vec<&'static str> = ["ioctl", "ioctl(2)", "wait", "setup"].into_iter().chain(Hostile::NAMES).collect();
    let (mut done, mut ran) = (0u64, 0u64);
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["ANSWER", name, answer, n] => {
                let name = names.iter().copied().find(|x| *x == name).unwrap_or("UNKNOWN");
                let n: u64 = n.parse().unwrap_or(0);
                if !Hostile::NAMES.contains(&name) {
                    total.ioctls += n;
                }
                *total.answers.entry(name).or_default().entry(answer.to_string()).or_insert(0) += n;
            }
            ["KIND", kind, n] => {
                let n: u64 = n.parse().unwrap_or(0);
                *total.kinds.entry(kinds.iter().copied().find(|k| *k == kind).unwrap_or("other")).or_insert(0) += n;
                ran += n;
            }
            ["DONE", n] => done += n.parse::<u64>().unwrap_or(0),
            ["KTIME", kind, us] => {
                let us: u64 = us.parse().unwrap_or(0);
                *total.time_us.entry(kinds.iter().copied().find(|k| *k == kind).unwrap_or("other")).or_insert(0) += us;
            }
            _ => {}
        }
    }
    if ran > 0 {
        ran
    } else {
        // Killed: its kinds are lost, its progress is not.
        *total.kinds.entry("killed-uncounted").or_insert(0) += done;
        done
    }
}

/// How the parent runs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub device: PathBuf,
    pub seed: u64,
    /// Operations to run (counted as the children report them).
    pub iterations: u64,
    pub case_len: usize,
    pub timeout: Duration,
    pub progress_secs: u64,
    /// The daemon's pid: it must stay the same live process.
    pub daemon_pid: Option<u32>,
    /// Every other child runs as this uid and gid (when the parent is root).
    pub child_uid: Option<u32>,
    /// Where replay files of failing children go.
    pub out: PathBuf,
}

/// A failing child, for its replay file.
struct ChildFailure {
    child_seed: u64,
    uid: Option<u32>,
    what: String,
}

/// The parent: rounds of children until `iterations` operations ran.
pub fn run(cfg: &NodeConfig) -> ExitCode {
    crate::exec::install_panic_hook();
    let (device, timeout) = (cfg.device.as_path(), cfg.timeout);
    let set_up = (|| {
        let dir = runtime_dir(device)?;
        let exe = std::env::current_exe().map_err(|e| format!("cannot find my own binary: {e}"))?;
        let daemon = cfg.daemon_pid.map(node_oracle::Daemon::watch).transpose()?;
        let canary = node_oracle::Canary::create()?;
        let witness = node_oracle::Witness::start(device)?;
        Ok::<_, String>((dir, exe, daemon, canary, witness))
    })();
    let (dir, exe, daemon, canary, witness) = match set_up {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kfd-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    let uid = cfg.child_uid.filter(|_| nix::unistd::geteuid().is_root());
    println!(
        "kfd-fuzz: node {} (runtime directory {}), seed {}, {} operations, daemon pid {:?}, every other child as uid {uid:?}, canary {}",
        device.display(),
        dir.display(),
        cfg.seed,
        cfg.iterations,
        cfg.daemon_pid,
        canary.dir.display()
    );
    let mut rng = Rng::new(cfg.seed);
    let mut total = Stats::default();
    let (start, mut last) = (Instant::now(), Instant::now());
    let (mut done, mut children, mut killed) = (0u64, 0u64, 0u64);
    let mut failures = Vec::<String>::new();
    let mut failed_children = Vec::<ChildFailure>::new();
    let mut last_check = Instant::now();
    let mut child_wall = Duration::ZERO;
    // The parent's own checks, between and during rounds.
    let oracles = |failures: &mut Vec<String>| {
        let checks =
            [daemon.as_ref().map_or(Ok(()), |d| d.check()), witness.check(timeout * WITNESS_BOUND), canary.check()];
        for e in checks.into_iter().filter_map(Result::err) {
            if !failures.contains(&e) {
                fail(failures, e);
            }
        }
    };
    while done < cfg.iterations && failures.len() < 5 {
        let mut round: Vec<(u64, Option<u32>, Child, Option<Instant>)> = Vec::new();
        let round_start = Instant::now();
        let left = (cfg.iterations - done).div_ceil(CHILDREN as u64) as usize;
        let len = cfg.case_len.min(left).max(1);
        for k in 0..CHILDREN {
            let child_seed = rng.next_u64();
            let as_uid = uid.filter(|_| k % 2 == 1);
            let mut cmd = Command::new(&exe);
            cmd.args(["--target", "node", "--device"])
                .arg(device)
                .args(["--node-child", &child_seed.to_string(), "--case-len", &len.to_string()])
                .args(["--timeout-ms", &timeout.as_millis().to_string()])
                .arg("--canary")
                .arg(&canary.dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            if let Some(u) = as_uid {
                use std::os::unix::process::CommandExt;
                cmd.uid(u).gid(u);
            }
            match cmd.spawn() {
                Ok(c) => {
                    // Some children are killed at a random moment of their run.
                    let kill_at =
                        rng.chance(1, 4).then(|| Instant::now() + Duration::from_millis(rng.range(1, KILL_WITHIN_MS)));
                    round.push((child_seed, as_uid, c, kill_at));
                }
                Err(e) => fail(&mut failures, format!("cannot start a child: {e}")),
            }
            children += 1;
        }
        // The children's own watchdogs catch a request that hangs; this catches the rest,
        // allowing for emulation at a few operations per second per child.
        let deadline = Instant::now() + timeout * 4 + Duration::from_secs(10) + Duration::from_millis(50) * len as u32;
        while !round.is_empty() {
            let mut i = 0;
            while i < round.len() {
                let (child_seed, as_uid, c, kill_at) = &mut round[i];
                if kill_at.is_some_and(|t| Instant::now() >= t) {
                    let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGKILL);
                    *kill_at = None;
                    killed += 1;
                }
                match c.try_wait() {
                    Ok(Some(status)) => {
                        use std::os::unix::process::ExitStatusExt;
                        let sig = status.signal();
                        let mut out = String::new();
                        if let Some(mut so) = c.stdout.take() {
                            let _ = std::io::Read::read_to_string(&mut so, &mut out);
                        }
                        done += add_child_output(&mut total, &out);
                        child_wall += round_start.elapsed();
                        if !status.success() && sig != Some(libc::SIGKILL) {
                            let said: String = out.lines().filter(|l| !is_report(l)).collect::<Vec<_>>().join("\n");
                            let what = format!("child {child_seed} ended with {status}: {}", said.trim());
                            fail(
                                &mut failures,
                                format!("{what}\n  rerun: {}", rerun(device, *child_seed, cfg.case_len, *as_uid)),
                            );
                            failed_children.push(ChildFailure { child_seed: *child_seed, uid: *as_uid, what });
                        }
                        round.remove(i);
                    }
                    Ok(None) if Instant::now() > deadline => {
                        let _ = c.kill();
                        let _ = c.wait();
                        fail(&mut failures, format!("hang: child {child_seed} did not finish in time"));
                        round.remove(i);
                    }
                    _ => i += 1,
                }
            }
            if last_check.elapsed() >= CHECK_EVERY {
                last_check = Instant::now();
                oracles(&mut failures);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Err(e) = device_answers(device, timeout) {
            fail(&mut failures, format!("hang: {e}"));
            break;
        }
        // Every client of the round has exited: its directory must go (the release of a killed
        // client's files can take a moment to reach the daemon).
        let t0 = Instant::now();
        let mut left = client_dirs(&dir);
        while !left.is_empty() && t0.elapsed() < timeout {
            std::thread::sleep(Duration::from_millis(20));
            left = client_dirs(&dir);
        }
        if !left.is_empty() {
            fail(&mut failures, format!("leak: client directories {left:?} are left after their processes exited"));
        }
        oracles(&mut failures);
        if last.elapsed() >= Duration::from_secs(cfg.progress_secs) {
            last = Instant::now();
            println!(
                "kfd-fuzz: {done} operations, {children} children ({killed} killed), {} failures, {:.0} s",
                failures.len(),
                start.elapsed().as_secs_f64()
            );
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let (rounds, max_us) = witness.numbers();
    drop(witness);
    println!("kfd-fuzz: {children} children ({killed} SIGKILLed), {done} operations ran");
    println!(
        "kfd-fuzz: the children's lives summed {:.1} s (in 'time by operation': setup is opening the node and reading the topology; the rest of a life is exec, start-up, exit and waiting in its round)",
        child_wall.as_secs_f64()
    );
    println!(
        "kfd-fuzz: witness client: {rounds} round trips (GET_VERSION + ALLOC + FREE), the longest {:.1} ms",
        max_us as f64 / 1000.0
    );
    for f in &failed_children {
        save_child_failure(cfg, &exe, f);
    }
    total.ops = done;
    total.cases = children;
    for f in &failures {
        *total.failures.entry(failure_kind(f).to_string()).or_insert(0) += 1;
    }
    print!("{}", total.summary(secs, &ops::all_requests()));
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Adds a failure to the run's list, and says so at once.
fn fail(failures: &mut Vec<String>, f: String) {
    println!("kfd-fuzz: FAILURE: {f}");
    failures.push(f);
}

/// The witness's round trip (three requests and a mapping) must end within this many request
/// timeouts: under TCG on a loaded host one took 4.6 s while the children ran.
const WITNESS_BOUND: u32 = 2;

/// How often the parent's own checks run while children run.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// Children killed at random are killed within this many ms of their start.
const KILL_WITHIN_MS: u64 = 3000;

fn rerun(device: &Path, child_seed: u64, case_len: usize, uid: Option<u32>) -> String {
    let who = uid.map_or(String::new(), |u| format!("setpriv --reuid {u} --regid {u} --clear-groups "));
    format!("{who}kfd-fuzz --target node --device {} --node-child {child_seed} --case-len {case_len}", device.display())
}

/// A failing child, saved: the shortest prefix of its operations that still fails the same way
/// (its operations come from its seed, so a prefix is a shorter run of the same child), found
/// by rerunning it up to the operation that failed.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct NodeReplay {
    pub version: u32,
    pub target: String,
    pub child_seed: u64,
    pub case_len: usize,
    pub uid: Option<u32>,
    pub failure: String,
}

/// Reruns a child (as `uid`) against `device`: its exit code and output.
fn run_child(
    exe: &Path,
    device: &Path,
    child_seed: u64,
    len: usize,
    uid: Option<u32>,
    timeout: Duration,
    canary: &Path,
) -> (Option<i32>, String) {
    let mut cmd = Command::new(exe);
    cmd.args(["--target", "node", "--device"])
        .arg(device)
        .args(["--node-child", &child_seed.to_string(), "--case-len", &len.to_string()])
        .args(["--timeout-ms", &timeout.as_millis().to_string()])
        .arg("--canary")
        .arg(canary)
        .stderr(Stdio::inherit());
    if let Some(u) = uid {
        use std::os::unix::process::CommandExt;
        cmd.uid(u).gid(u);
    }
    match cmd.output() {
        Ok(o) => (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned()),
        Err(e) => (None, e.to_string()),
    }
}

/// The argument as the device reads it: the caller's bytes for the size its request number
/// says, zero-filled up to the size of the device's own struct (amdkfd's kfd_ioctl does the
/// same). A 2-byte DESTROY_QUEUE names the queue whose id is those 2 bytes.
fn as_seen(cmd: u32, mut asked: Vec<u8>) -> Vec<u8> {
    let ksize = cuse_kfd::ioctl::lookup(cmd).map_or(0, |d| ioc_size(d.cmd));
    if asked.len() < ksize {
        asked.resize(ksize, 0);
    }
    asked
}

/// Keeps the last 40 lines of what a child did, for a model failure's message.
fn remember(recent: &mut Vec<String>, line: String) {
    if recent.len() >= 40 {
        recent.remove(0);
    }
    recent.push(line);
}

/// A line of a child's report to the parent (its counts), not of what it said.
fn is_report(line: &str) -> bool {
    ["ANSWER ", "DONE ", "KIND ", "KTIME "].iter().any(|p| line.starts_with(p))
}

/// The failure line of a child's output and the operation it failed at.
fn child_failure(out: &str) -> Option<(String, usize)> {
    let line = out.lines().find(|l| !is_report(l) && !l.starts_with("ok: "))?;
    let at = out.lines().find_map(|l| l.trim().strip_prefix("at operation ")).and_then(|n| n.parse().ok())?;
    Some((line.to_string(), at))
}

fn save_child_failure(cfg: &NodeConfig, exe: &Path, f: &ChildFailure) {
    let Ok(canary) = node_oracle::Canary::create() else { return };
    let (code, out) = run_child(exe, &cfg.device, f.child_seed, cfg.case_len, f.uid, cfg.timeout, &canary.dir);
    let mut case_len = cfg.case_len;
    let mut failure = f.what.clone();
    match (code, child_failure(&out)) {
        (Some(c), Some((line, at))) if c != 0 => {
            failure = line.clone();
            // The same failure with the operations after it left out.
            let (c2, out2) = run_child(exe, &cfg.device, f.child_seed, at + 1, f.uid, cfg.timeout, &canary.dir);
            let same = child_failure(&out2)
                .is_some_and(|(l, _)| crate::minimise::signature(&l) == crate::minimise::signature(&line));
            if c2 == Some(c) && same {
                case_len = at + 1;
                println!("kfd-fuzz: child {} minimised to its first {case_len} operations: {line}", f.child_seed);
            }
        }
        _ => println!("kfd-fuzz: child {} does not fail again on a rerun (timing?); saving it whole", f.child_seed),
    }
    let replay =
        NodeReplay { version: 1, target: "node".into(), child_seed: f.child_seed, case_len, uid: f.uid, failure };
    let kind = failure_kind(&format!("child 0 ended with exit status: 1: {}", replay.failure));
    let path = cfg.out.join(format!("node-{kind}-{}-{}.json", cfg.seed, f.child_seed));
    let saved = std::fs::create_dir_all(&cfg.out)
        .and_then(|()| std::fs::write(&path, serde_json::to_string_pretty(&replay).unwrap_or_default() + "\n"));
    match saved {
        Ok(()) => println!(
            "kfd-fuzz: saved {}; run it with kfd-fuzz --replay {} --device {}",
            path.display(),
            path.display(),
            cfg.device.display()
        ),
        Err(e) => eprintln!("kfd-fuzz: cannot save {}: {e}", path.display()),
    }
}

/// Runs a saved node failure again: Ok if it passes now.
pub fn replay(r: &NodeReplay, device: &Path, timeout: Duration) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let canary = node_oracle::Canary::create()?;
    let (code, out) = run_child(&exe, device, r.child_seed, r.case_len, r.uid, timeout, &canary.dir);
    canary.check()?;
    match code {
        Some(0) => Ok(()),
        c => Err(format!("exit code {c:?}: {}", child_failure(&out).map_or(out.clone(), |(l, _)| l))),
    }
}

/// The summary's name for a failure of the parent's list: the parent's own checks start with
/// their kind ("hang: ...", "leak: ..."); a child's failure is named by how it ended: exit 3 is
/// its watchdog (a hang), a signal other than the parent's SIGKILL or a panic (exit 101) a
/// crash, exit 1 the oracle that caught it (its first output line, "isolation: ...",
/// "errno: ...", "model: ...").
fn failure_kind(f: &str) -> &'static str {
    if let Some(k) = ["hang", "leak", "crash", "escape"].into_iter().find(|k| f.starts_with(&format!("{k}: "))) {
        return k;
    }
    let Some(rest) = f.strip_prefix("child ") else { return "child" };
    let Some((_, ended)) = rest.split_once(" ended with ") else { return "child" };
    if ended.starts_with("exit status: 3:") {
        "hang"
    } else if ended.starts_with("signal: ") || ended.starts_with("exit status: 101:") {
        "crash"
    } else {
        let said = ended.strip_prefix("exit status: 1: ").unwrap_or_default();
        ["isolation", "errno", "model", "escape", "hang", "crash"]
            .into_iter()
            .find(|k| said.starts_with(&format!("{k}: ")))
            .unwrap_or("child")
    }
}

/// One child: a sequence of raw requests and hostile operations on the node, checked as it
/// goes. Symlinks it plants point at `canary`.
pub fn child(device: &Path, seed: u64, len: usize, timeout: Duration, canary: &Path) -> ExitCode {
    let heartbeat = Arc::new(AtomicU64::new(0));
    let hb = heartbeat.clone();
    let doing = Arc::new(parking_lot::Mutex::new(String::new()));
    let what = doing.clone();
    std::thread::spawn(move || {
        let mut last = (u64::MAX, Instant::now());
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let b = hb.load(Ordering::Relaxed);
            if b != last.0 {
                last = (b, Instant::now());
            } else if last.1.elapsed() > timeout {
                println!("hang: request {b} not answered within {timeout:?} ({})", what.lock());
                std::process::exit(3);
            }
        }
    });
    let mut stats = Stats::default();
    let at = std::cell::Cell::new(0);
    let place = Place { at, doing };
    let r = child_run(device, seed, len, canary, &heartbeat, &mut stats, &place);
    *place.doing.lock() = "done: reporting and exiting".into();
    let at = place.at;
    // The parent adds these up for its summary.
    for (name, h) in &stats.answers {
        for (answer, n) in h {
            println!("ANSWER {name} {answer} {n}");
        }
    }
    for (kind, n) in &stats.kinds {
        println!("KIND {kind} {n}");
    }
    for (kind, us) in &stats.time_us {
        println!("KTIME {kind} {us}");
    }
    match r {
        Ok(n) => {
            println!("ok: {n} requests");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{e}\n  at operation {}", at.get());
            ExitCode::FAILURE
        }
    }
}

/// Where a child is: the operation's index (for its failure message) and what it is (for its
/// watchdog's).
struct Place {
    at: std::cell::Cell<usize>,
    doing: Arc<parking_lot::Mutex<String>>,
}

fn child_run(
    device: &Path,
    seed: u64,
    len: usize,
    canary: &Path,
    heartbeat: &AtomicU64,
    stats: &mut Stats,
    place: &Place,
) -> Result<u64, String> {
    let (at, doing) = (&place.at, &*place.doing);
    let t_setup = Instant::now();
    let fd = File::options()
        .read(true)
        .write(true)
        .open(device)
        .map_err(|e| format!("cannot open {}: {e}", device.display()))?;
    let kfd = thunk::Kfd::open_node(device).map_err(|e| format!("cannot open {}: {e}", device.display()))?;
    let gpus = kfd.gpu_ids().map_err(|e| format!("no GPU ids: {e}"))?;
    let (runtime_dir, pid) = (kfd.runtime_dir().to_path_buf(), kfd.pid());
    drop(kfd);
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my own binary: {e}"))?;
    // The event pages the device made for this client (CREATE_EVENT answers their offsets).
    let mut event_pages: Vec<u64> = Vec::new();
    let arena = Arena::get();
    let mut gen = Gen::new(seed);
    let mut model = Model::new();
    // The model is exact while every object-creating success was learned from its reply.
    let mut exact = true;
    let mut helpers = Vec::new();
    let mut sent = 0u64;
    let mut broken = false;
    // The last successful queue requests, shown with a model failure.
    let mut recent: Vec<String> = Vec::new();
    *stats.time_us.entry("setup").or_insert(0) += t_setup.elapsed().as_micros() as u64;
    // Each operation's time goes to its kind when the next one starts.
    let mut timing: Option<(&'static str, Instant)> = None;
    for i in 0..len {
        if let Some((kind, t)) = timing.take() {
            *stats.time_us.entry(kind).or_insert(0) += t.elapsed().as_micros() as u64;
        }
        at.set(i);
        heartbeat.fetch_add(1, Ordering::Relaxed);
        if i % PROGRESS_EVERY == 0 && i > 0 {
            // What a SIGKILLed child did is counted too.
            println!("DONE {PROGRESS_EVERY}");
        }
        if gen.rng.chance(1, HOSTILE_ONE_IN) {
            let op = Hostile::generate(&mut gen.rng, &model, &event_pages);
            timing = Some((op.name(), Instant::now()));
            *doing.lock() = format!("operation {i}: {op:?}");
            let client = hostile::Client {
                fd: &fd,
                device,
                runtime_dir: &runtime_dir,
                pid,
                gpu: gpus[0],
                canary,
                exe: &exe,
                model: &model,
                heartbeat,
            };
            let outcome = client.run(&op).map_err(|f| format!("{f}\n  operation: {op:?}"))?;
            remember(&mut recent, format!("op {i}: {op:?} -> {outcome}"));
            stats.record_outcome(op.name(), outcome);
            *stats.kinds.entry(op.name()).or_insert(0) += 1;
            if let Hostile::Truncate { .. } | Hostile::PunchHole { .. } = op {
                // The client broke its own memory: what its requests answer now is the
                // device's choice (a VM fault, a queue error), not the model's.
                broken = true;
            }
            continue;
        }
        let grade =
            *gen.rng.pick(&[Grade::Valid, Grade::Valid, Grade::Valid, Grade::Almost, Grade::Mutated, Grade::Random]);
        if gen.rng.chance(1, 30) && !model.events.is_empty() {
            let t_wait = Instant::now();
            // A helper thread parked in WAIT_EVENTS, forever or briefly, while we go on.
            let ids: Vec<u32> = model.events.keys().copied().collect();
            let id = *gen.rng.pick(&ids);
            let t = if gen.rng.chance(1, 2) { KFD_EVENT_TIMEOUT_INFINITE } else { gen.rng.range(1, 50) as u32 };
            *doing.lock() = format!("operation {i}: starting a helper thread to wait on event {id} (timeout {t})");
            let fd2 = fd.try_clone().map_err(|e| e.to_string())?;
            helpers.push(std::thread::spawn(move || {
                let mut data = [EventData { event_id: id, ..Default::default() }];
                let mut a = WaitEventsArgs {
                    events_ptr: data.as_mut_ptr() as u64,
                    num_events: 1,
                    wait_for_all: 0,
                    timeout: t,
                    wait_result: 0,
                };
                // SAFETY: `a` is a whole WaitEventsArgs owned here, and its events_ptr points at
                // `data`, one writable EventData that lives past the call.
                let r = unsafe { raw_ioctl(&fd2, AMDKFD_IOC_WAIT_EVENTS, a.as_mut_bytes().as_mut_ptr() as u64) };
                std::hint::black_box(&mut data);
                r.err()
            }));
            *stats.kinds.entry("wait").or_insert(0) += 1;
            timing = Some(("wait", t_wait));
            continue;
        }
        *stats.kinds.entry("ioctl").or_insert(0) += 1;
        timing = Some(("ioctl", Instant::now()));
        let call = gen.call(&gpus, &model, grade);
        let mut data = call.data.clone();
        data.resize(ioc_size(call.cmd), 0);
        let mut bump = 0;
        for (off, p) in &call.ptrs {
            let off = usize::from(*off);
            if off + 8 <= data.len() {
                let v = arena.resolve(p, &mut bump);
                data[off..off + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        crate::exec::sanitize(call.cmd, &mut data);
        // The timeout is bytes 16..20: a short request (20 to 23 bytes) carries it too, and the
        // device honours it as amdkfd does (the missing tail reads as zeros).
        if cuse_kfd::ioctl::lookup(call.cmd).is_some_and(|d| ioc_nr(d.cmd) == 0x0C) && data.len() >= 20 {
            // This thread must not block for long: helpers do the long waits.
            let t = u32::from_le_bytes(data[16..20].try_into().expect("4 bytes")).min(100);
            data[16..20].copy_from_slice(&t.to_le_bytes());
        }
        // The argument struct lives at the end of the arena's pointer area, so the bytes past a
        // short buffer are the never-mapped hole.
        let n = call.short.map_or(data.len(), usize::from).min(data.len());
        let at = arena.base() + ARENA_SIZE - n as u64;
        let addr = if call.short.is_some() {
            arena.write(at, &data[..n]);
            at
        } else {
            data.as_mut_ptr() as u64
        };
        // What was asked (the kernel copies the reply over `data`).
        let asked = data.clone();
        *doing.lock() = format!("operation {i}: {} cmd {:#x}, {n} bytes", ops::name_of(call.cmd), call.cmd);
        let t_call = Instant::now();
        // SAFETY: `addr` is `data` (resized to the request's size above) or its copy at the end
        // of the arena's pointer area; every pointer in it was resolved by the arena, so it is
        // null, in the arena or its hole, or outside user space.
        let result = unsafe { raw_ioctl(&fd, call.cmd, addr) };
        *stats.time_us.entry("ioctl(2)").or_insert(0) += t_call.elapsed().as_micros() as u64;
        sent += 1;
        let name = ops::name_of(call.cmd);
        stats.record(name, result);
        if let Err(e) = result {
            if e == Errno::EINTR {
                continue;
            }
            errnos::is_allowed(call.cmd, n, e).map_err(|w| format!("errno: {w}"))?;
        }
        let nr = cuse_kfd::ioctl::lookup(call.cmd).map_or(0, |d| ioc_nr(d.cmd));
        let named = crate::exec::named_object(nr, &as_seen(call.cmd, asked));
        let owned = named.as_ref().map(|o| match o {
            crate::exec::Named::Buffer(h) => model.buffers.contains_key(h),
            crate::exec::Named::Queue(q) => model.queues.contains_key(q),
            crate::exec::Named::Event(e) => model.events.contains_key(e),
        });
        if call.expect == Expect::Ok && result.is_err() && !broken {
            return Err(format!("model: well-formed {name} failed with {result:?}"));
        }
        if result.is_err() {
            continue;
        }
        if exact && owned == Some(false) {
            return Err(format!("isolation: {name} succeeded on {named:?}, which this process does not own"));
        }
        if matches!(nr, 0x02 | 0x03) {
            // What a model failure about queue ids needs to be understood.
            let said = if nr == 0x02 && data.len() >= 56 {
                format!(" -> id {}", u32::from_le_bytes(data[52..56].try_into().expect("4 bytes")))
            } else {
                String::new()
            };
            remember(&mut recent, format!("op {i}: {name} cmd {:#x} sent {n} bytes, named {named:?}{said}", call.cmd));
        }
        let full = call.short.is_none()
            && ioc_size(call.cmd) == cuse_kfd::ioctl::lookup(call.cmd).map_or(0, |d| ioc_size(d.cmd));
        let out = |off: usize| u32::from_le_bytes(data[off..off + 4].try_into().expect("4 bytes"));
        match nr {
            0x16 if full => {
                let a = AllocMemoryOfGpuArgs::read_from_prefix(&data).map(|(a, _)| a).unwrap_or_default();
                if model
                    .buffers
                    .insert(
                        a.handle,
                        BufferModel {
                            va: a.va_addr,
                            size: a.size,
                            gpu: a.gpu_id,
                            flags: a.flags,
                            mmap_offset: a.mmap_offset,
                            mapped: BTreeSet::new(),
                        },
                    )
                    .is_some()
                {
                    return Err(format!("model: ALLOC handed out handle {:#x}, which is live already", a.handle));
                }
            }
            0x02 if full => {
                let doorbell_offset = u64::from_le_bytes(data[24..32].try_into().expect("8 bytes"));
                let dup = model.queues.insert(out(52), QueueModel { gpu: out(36), doorbell_offset }).is_some();
                if dup {
                    return Err(format!(
                        "model: CREATE_QUEUE handed out id {}, which is live already\n  {}",
                        out(52),
                        recent.join("\n  ")
                    ));
                }
            }
            0x08 if full => {
                let page = u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
                if page != 0 && !event_pages.contains(&page) {
                    event_pages.push(page);
                }
                let dup = model.events.insert(out(24), EventModel { event_type: out(12) }).is_some();
                if dup {
                    return Err(format!("model: CREATE_EVENT handed out id {}, which is live already", out(24)));
                }
            }
            0x16 | 0x02 | 0x08 => exact = false,
            0x17 => {
                if let Some(crate::exec::Named::Buffer(h)) = named {
                    model.buffers.remove(&h);
                }
            }
            0x18 if full => {
                // Mapped: rings and pointers of new queues go there (see Gen::create_queue).
                let h = u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
                if let Some(b) = model.buffers.get_mut(&h) {
                    b.mapped.insert(b.gpu);
                }
            }
            0x03 => {
                if let Some(crate::exec::Named::Queue(q)) = named {
                    model.queues.remove(&q);
                }
            }
            0x09 => {
                if let Some(crate::exec::Named::Event(e)) = named {
                    model.events.remove(&e);
                }
            }
            _ => {}
        }
    }
    if let Some((kind, t)) = timing.take() {
        *stats.time_us.entry(kind).or_insert(0) += t.elapsed().as_micros() as u64;
    }
    at.set(len);
    *doing.lock() = format!("after its {len} operations: setting {} events to wake the helpers", model.events.len());
    // Wake every helper: set the events they wait on; infinite waits on destroyed events were
    // failed by the device. Whatever is still parked goes with the process.
    for id in model.events.keys() {
        let mut a = SetEventArgs { event_id: *id, pad: 0 };
        // SAFETY: `a` is a whole SetEventArgs owned here, with no pointers in it.
        let _ = unsafe { raw_ioctl(&fd, AMDKFD_IOC_SET_EVENT, a.as_mut_bytes().as_mut_ptr() as u64) };
    }
    *doing.lock() = format!("after its {len} operations: joining {} helpers", helpers.len());
    let t0 = Instant::now();
    for h in helpers {
        while !h.is_finished() && t0.elapsed() < Duration::from_millis(200) {
            std::thread::sleep(Duration::from_millis(1));
        }
        if h.is_finished() {
            if let Ok(Some(e)) = h.join() {
                if e != Errno::EINTR {
                    errnos::is_allowed(AMDKFD_IOC_WAIT_EVENTS, 24, e).map_err(|w| format!("errno: {w}"))?;
                }
            }
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::{add_child_output, failure_kind};
    use crate::stats::Stats;

    #[test]
    fn a_child_s_operations_are_counted_by_kind_or_by_progress_when_killed() {
        let mut total = Stats::default();
        let done = "DONE 25\nDONE 25\nANSWER GET_VERSION ok 7\nANSWER TRUNCATE ENOENT 1\nKIND ioctl 60\nKIND TRUNCATE 1\nKTIME ioctl 900\nok: 60 requests\n";
        assert_eq!(add_child_output(&mut total, done), 61);
        assert_eq!((total.ioctls, total.kinds["TRUNCATE"], total.time_us["ioctl"]), (7, 1, 900));
        assert_eq!(total.answers["TRUNCATE"]["ENOENT"], 1);
        // SIGKILLed: only its progress lines made it out.
        assert_eq!(add_child_output(&mut total, "DONE 25\nDONE 25\n"), 50);
        assert_eq!(total.kinds["killed-uncounted"], 50);
    }

    #[test]
    fn a_short_request_names_what_the_device_reads() {
        use uapi::ioctl::*;
        // DESTROY_QUEUE with a 2-byte argument: the device reads queue id 4.
        let cmd = ioc(ioc_dir(AMDKFD_IOC_DESTROY_QUEUE), AMDKFD_IOCTL_BASE, 0x03, 2);
        let seen = super::as_seen(cmd, vec![4, 0]);
        assert_eq!(crate::exec::named_object(0x03, &seen), Some(crate::exec::Named::Queue(4)));
    }

    #[test]
    fn a_failing_child_s_line_and_operation_are_read() {
        let out = "DONE 25\nescape: a client of uid 65534 renamed /run/x\n  operation: SymlinkSwap\n  at operation 31\nANSWER GET_VERSION ok 3\n";
        let (line, at) = super::child_failure(out).unwrap();
        assert_eq!((line.as_str(), at), ("escape: a client of uid 65534 renamed /run/x", 31));
        assert!(super::child_failure("ok: 12 requests\nKIND ioctl 12\n").is_none());
    }

    #[test]
    fn failures_are_named_by_how_the_child_ended() {
        let child = |ended: &str| format!("child 7 ended with {ended}\n  rerun: kfd-fuzz --target node --node-child 7");
        assert_eq!(failure_kind("hang: child 7 did not finish in time"), "hang");
        assert_eq!(failure_kind("leak: client directories [\"12\"] are left"), "leak");
        assert_eq!(failure_kind(&child("exit status: 3: hang: request 9 not answered within 5s")), "hang");
        assert_eq!(failure_kind(&child("signal: 11 (SIGSEGV) (core dumped): ")), "crash");
        assert_eq!(failure_kind(&child("exit status: 101: thread 'main' panicked")), "crash");
        assert_eq!(failure_kind(&child("exit status: 1: isolation: FREE succeeded on Buffer(3)")), "isolation");
        assert_eq!(failure_kind(&child("exit status: 1: errno: SET_EVENT answered EIO")), "errno");
        assert_eq!(failure_kind(&child("exit status: 1: model: well-formed ALLOC failed")), "model");
        assert_eq!(failure_kind(&child("exit status: 1: escape: a client of uid 65534 renamed x")), "escape");
        assert_eq!(failure_kind("escape: the canary directory outside the runtime directory changed"), "escape");
        assert_eq!(failure_kind("crash: the daemon (pid 9) has gone"), "crash");
        assert_eq!(failure_kind(&child("exit status: 1: cannot open /dev/kfd: ENOENT")), "child");
        assert_eq!(failure_kind("cannot start a child: EAGAIN"), "child");
    }
}
