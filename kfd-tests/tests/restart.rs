//! A daemon that dies or is stopped under busy clients (issue 13, M3 and H6), in the device tier:
//!
//! - `restart`: SIGKILL with three clients that hold buffers and queues and are blocked in
//!   WAIT_EVENTS (one through the thunk's `hsaKmtWaitOnEvent` path): each blocked wait and each
//!   client's next ioctl fail within 1 s. A daemon started again on the same runtime directory
//!   and node name leaves there exactly what a fresh daemon makes, and a client that got a dead
//!   client's pid (through `ns_last_pid`), with a client-owned directory planted under that pid,
//!   allocates, creates a queue and runs a packet.
//! - `a_reused_pid_gets_a_fresh_context`: a client's pid, taken by a new process while a child of
//!   the dead client still holds its fd, opens a fresh context: the old buffer and event are not
//!   its own, and it allocates.
//! - `sigterm_exits_within_5s_under_busy_clients`: SIGTERM while one client keeps a queue full of
//!   the most expensive packets, one is blocked in a wait and one issues ioctls without pause:
//!   `serve` exits 0 within 5 s and its node is gone.
//!
//! The times are measured on CLOCK_MONOTONIC, which the test and its client processes share.

use kfd_tests::device::{client, has_parked_wait, tier, Client, Daemon};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use thunk::hsakmt::{EventDescriptor, EventType, Thunk, EVENT_TIMEOUT_INFINITE};
use thunk::memory::{GpuMemory, Kind};
use thunk::queue::{packet, AqlQueue};
use thunk::signal::Signals;
use thunk::Kfd;
use uapi::kfd::{KFD_EVENT_TIMEOUT_INFINITE, KFD_IOC_EVENT_SIGNAL};
use uapi::soft::*;
use uapi::IntoBytes;

/// How soon a client of a killed daemon must see an error (issue 13, item 10).
const ERROR_WITHIN: Duration = Duration::from_secs(1);
/// How soon SIGTERM must end `serve` (issue 13, item 7).
const EXIT_WITHIN: Duration = Duration::from_secs(5);
/// How long the test waits for a client's line before calling it a hang.
const HANG: Duration = Duration::from_secs(30);
/// The uid and gid of the planted leftover's owner (nobody, nogroup).
const NOBODY: u32 = 65534;

/// CLOCK_MONOTONIC in nanoseconds: one clock for the test and its clients.
fn mono_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// One entry of a runtime directory listing: path below the directory, type, mode, uid, gid.
type Entry = (PathBuf, char, u32, u32, u32);

/// Everything below `root` (not the contents of files: the topology's values are the same
/// anyway, and inode numbers and times are not).
fn listing(root: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let t = m.file_type();
            let kind = match () {
                _ if t.is_dir() => 'd',
                _ if t.is_symlink() => 'l',
                _ if t.is_socket() => 's',
                _ if t.is_file() => 'f',
                _ => '?',
            };
            if t.is_dir() {
                dirs.push(p.clone());
            }
            out.push((p.strip_prefix(root).unwrap().to_path_buf(), kind, m.mode() & 0o7777, m.uid(), m.gid()));
        }
    }
    out.sort();
    out
}

/// Waits until the daemon answers on its control socket (it is up beyond its node).
fn wait_for_control(d: &Daemon) {
    let t0 = Instant::now();
    while cuse_kfd::frontend::control::request(&d.runtime_dir, "stats").is_err() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the control socket never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `c` (process `pid`) has a wait parked in the daemon.
fn wait_parked(d: &Daemon, pid: u32) {
    let t0 = Instant::now();
    while !has_parked_wait(&d.runtime_dir, pid) {
        assert!(t0.elapsed() < Duration::from_secs(60), "client {pid} never parked a wait");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The client's `@@ <what> <outcome> <monotonic ns>` line: the outcome and its time.
fn outcome(c: &mut Client, what: &str) -> (String, u64) {
    let line = c.line(HANG);
    let mut f = line.split_whitespace();
    assert_eq!(f.next(), Some(what), "client {}: {line}", c.pid());
    let outcome = f.next().unwrap_or_else(|| panic!("{line}")).to_string();
    let at = f.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line}"));
    (outcome, at)
}

/// Waits until `path` is gone; how long that took.
fn gone_within(path: &Path, within: Duration) -> Duration {
    let t0 = Instant::now();
    while path.exists() {
        assert!(t0.elapsed() < within, "{} still exists {within:?} later", path.display());
        std::thread::sleep(Duration::from_millis(2));
    }
    t0.elapsed()
}

#[test]
#[ignore = "device tier"]
fn restart() {
    let bin = tier();
    let name = "kfd-t-restart";
    let mut d = Daemon::start(&bin, name);
    wait_for_control(&d);
    let fresh = listing(&d.runtime_dir);
    assert!(fresh.iter().any(|e| e.0 == Path::new("topology")), "a fresh daemon writes its topology: {fresh:?}");

    let mut clients: Vec<Client> =
        ["victim", "victim", "thunk_victim"].into_iter().map(|role| client(role, &d.node)).collect();
    for c in &mut clients {
        assert_eq!(c.line(Duration::from_secs(60)), "ready", "client {}", c.pid());
        wait_parked(&d, c.pid());
        assert!(d.runtime_dir.join(c.pid().to_string()).is_dir(), "client {} has backing files", c.pid());
    }

    let killed = mono_ns();
    d.kill_hard();
    let mut slowest = Duration::ZERO;
    for c in &mut clients {
        let pid = c.pid();
        for what in ["wait", "next"] {
            let (how, at) = outcome(c, what);
            let after = Duration::from_nanos(at.saturating_sub(killed));
            println!("client {pid}: {what} ended {how} {after:?} after the SIGKILL");
            assert!(how.starts_with("Err("), "client {pid}: the {what} ended {how}, not with an error");
            assert!(after < ERROR_WITHIN, "client {pid}: the {what} failed only {after:?} after the SIGKILL");
            slowest = slowest.max(after);
        }
    }
    println!("every blocked wait and next ioctl failed within {slowest:?} of the SIGKILL");
    let node_gone = gone_within(&d.node, Duration::from_secs(10));
    println!("the node was gone {node_gone:?} after the clients' errors");
    let killed_listing = listing(&d.runtime_dir);
    for c in &clients {
        let dir = PathBuf::from(c.pid().to_string());
        assert!(killed_listing.iter().any(|e| e.0 == dir), "the killed daemon left {} behind", dir.display());
    }
    // Its Drop would remove the runtime directory the next daemon uses; it is reaped already.
    std::mem::forget(d);

    // The same node name and runtime directory: what the dead daemon left is gone.
    let d = Daemon::start(&bin, name);
    wait_for_control(&d);
    let restarted = listing(&d.runtime_dir);
    let extra: Vec<&Entry> = restarted.iter().filter(|e| !fresh.contains(e)).collect();
    let missing: Vec<&Entry> = fresh.iter().filter(|e| !restarted.contains(e)).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "the restarted daemon's runtime directory against a fresh one's: more {extra:?}, less {missing:?}"
    );
    println!("after the restart the runtime directory holds what a fresh daemon makes ({} entries)", fresh.len());

    // A dead client's pid, to a new client, with a leftover of the old layout (a client-owned
    // directory tree, as a daemon before issue 13 made) planted under it.
    let mut first = clients.remove(0);
    let recycled = first.pid();
    assert!(first.kill_and_reap(Duration::from_secs(10)), "client {recycled} did not exit");
    let planted = d.runtime_dir.join(recycled.to_string());
    for dir in ["render", "kfd"] {
        fs::create_dir_all(planted.join(dir)).unwrap();
    }
    fs::write(planted.join("render/0000000100000000"), b"left over").unwrap();
    for p in [planted.clone(), planted.join("render"), planted.join("kfd"), planted.join("render/0000000100000000")] {
        std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let (mut next, attempts) = client_with_pid("recycled", &d.node, recycled);
    println!("a new client got the dead client's pid {recycled} (attempt {attempts})");
    assert_eq!(next.line(Duration::from_secs(60)), format!("ok {recycled}"), "the client with the recycled pid");
    let m = fs::symlink_metadata(&planted).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o711), "the planted directory was replaced by the daemon's");
    assert!(!planted.join("render/0000000100000000").exists(), "the planted file is gone");
    next.send("exit");
}

/// A client in `role` whose pid is `pid` (free now): `ns_last_pid` set to the pid before it,
/// then a spawn, until the spawned client gets it. The client and the attempt.
fn client_with_pid(role: &str, node: &Path, pid: u32) -> (Client, u32) {
    for attempt in 1..=50 {
        // Another process may take the pid between the write and the spawn: then try again.
        fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).expect("write ns_last_pid");
        let c = client(role, node);
        if c.pid() == pid {
            return (c, attempt);
        }
    }
    panic!("no client got pid {pid} in 50 attempts");
}

#[test]
#[ignore = "device tier"]
fn a_reused_pid_gets_a_fresh_context() {
    let bin = tier();
    let d = Daemon::start(&bin, "kfd-t-reuse");
    let mut owner = client("owner_with_holder", &d.node);
    let objects = owner.line(Duration::from_secs(60));
    let pid = owner.pid();
    assert!(owner.kill_and_reap(Duration::from_secs(10)), "the owner did not exit");
    // Its child still holds the fd: the context ends with its owner all the same.
    let t0 = Instant::now();
    while d.stats().processes != 0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "the dead owner's context never ended");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(d.stats().files, 1, "the holder's fd is still open");
    let (mut next, attempts) = client_with_pid("fresh", &d.node, pid);
    println!("a new process got the dead owner's pid {pid} (attempt {attempts}) while its child held the fd");
    next.send(&objects);
    assert_eq!(next.line(Duration::from_secs(60)), "fresh", "the process with the reused pid");
    let s = d.stats();
    assert_eq!((s.processes, s.buffers), (1, 1), "one context, with the new process's one buffer: {s:?}");
    next.send("exit");
}

#[test]
#[ignore = "device tier"]
fn sigterm_exits_within_5s_under_busy_clients() {
    let bin = tier();
    let mut d = Daemon::start(&bin, "kfd-t-term-busy");
    let mut busy = client("busy", &d.node);
    assert_eq!(busy.line(Duration::from_secs(60)), "busy");
    let mut waiter = client("victim", &d.node);
    assert_eq!(waiter.line(Duration::from_secs(60)), "ready");
    wait_parked(&d, waiter.pid());
    let mut hammer = client("hammer", &d.node);
    assert_eq!(hammer.line(Duration::from_secs(60)), "hammering");
    // Into the thick of it: the hammering client's rounds take some milliseconds each.
    std::thread::sleep(Duration::from_millis(300));

    let t0 = Instant::now();
    let status = d.terminate(EXIT_WITHIN);
    let took = t0.elapsed();
    let status = status.unwrap_or_else(|| panic!("cuse-kfd serve did not exit within {EXIT_WITHIN:?} of SIGTERM"));
    println!("cuse-kfd serve exited ({status}) {took:?} after SIGTERM under three busy clients");
    assert!(status.success(), "SIGTERM is a clean shutdown, exit 0: {status}");
    let node_gone = gone_within(&d.node, Duration::from_secs(1));
    println!("the node was gone {node_gone:?} after the daemon was reaped");

    // No client hangs: the parked wait and the ioctls in flight all end.
    let (how, _) = outcome(&mut waiter, "wait");
    assert!(how.starts_with("Err(") || how == "fail", "the parked wait ended {how}");
    let (how, _) = outcome(&mut waiter, "next");
    assert!(how.starts_with("Err("), "the waiter's next ioctl ended {how}");
    let line = hammer.line(HANG);
    assert!(line.starts_with("stopped "), "the hammering client: {line}");
    println!("the hammering client {line}");
    assert!(busy.kill_and_reap(Duration::from_secs(10)), "the busy client is stuck");
}

/// The client roles the tests above start as separate processes.
#[test]
#[ignore = "a client role run by other tests in a child process"]
fn client_role() {
    let Ok(role) = std::env::var("CUSE_KFD_CLIENT_ROLE") else { return };
    let kfd = Kfd::open_default().expect("open the node");
    let gpu = kfd.gpu_ids().unwrap()[0];
    match role.as_str() {
        "victim" => victim(&kfd, gpu),
        "thunk_victim" => thunk_victim(&kfd, gpu),
        "recycled" => recycled(&kfd, gpu),
        "owner_with_holder" => owner_with_holder(&kfd, gpu),
        "fresh" => fresh(&kfd, gpu),
        "busy" => busy(&kfd, gpu),
        "hammer" => hammer(&kfd, gpu),
        other => panic!("unknown client role {other}"),
    }
}

/// Waits for a line on stdin (the test's go-ahead, or its end).
fn stdin_line() {
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// What a client holds while it waits: buffers in both heaps and a queue.
fn hold(kfd: &Kfd, gpu: u32) -> (GpuMemory, GpuMemory, AqlQueue) {
    let gtt = kfd.alloc(gpu, 1 << 20, Kind::Gtt).expect("GTT");
    let vram = kfd.alloc(gpu, 1 << 20, Kind::Vram).expect("VRAM");
    let q = AqlQueue::new(kfd, gpu, 64).expect("a queue");
    (gtt, vram, q)
}

/// Blocks in WAIT_EVENTS (infinite) and reports how and when it ended, then how and when the
/// next ioctl ended.
fn victim(kfd: &Kfd, gpu: u32) {
    let _held = hold(kfd, gpu);
    let ev = kfd.create_event(gpu, KFD_IOC_EVENT_SIGNAL, false).expect("an event").event_id;
    println!("@@ ready");
    let w = kfd.wait_events(&[ev], false, KFD_EVENT_TIMEOUT_INFINITE);
    let waited = mono_ns();
    let next = kfd.version();
    let nexted = mono_ns();
    match w.result {
        Err(e) => println!("@@ wait Err({e:?}) {waited}"),
        Ok(()) if w.wait_result == uapi::kfd::KFD_IOC_WAIT_RESULT_FAIL => println!("@@ wait fail {waited}"),
        Ok(()) => println!("@@ wait result={} {waited}", w.wait_result),
    }
    println!("@@ next {} {nexted}", compact(&next.map(|_| ())));
    stdin_line();
}

/// [`victim`] through the thunk's hsaKmt layer: hsaKmtWaitOnEvent, then hsaKmtSetEvent.
fn thunk_victim(kfd: &Kfd, gpu: u32) {
    let _held = hold(kfd, gpu);
    let t = Thunk::open(kfd.clone()).expect("hsaKmtOpenKFD");
    let desc = EventDescriptor { event_type: EventType::SIGNAL, node_id: 1, ..Default::default() };
    let mut e = t.create_event(&desc, false, false).expect("hsaKmtCreateEvent");
    println!("@@ ready");
    let w = t.wait_on_event(&mut e, EVENT_TIMEOUT_INFINITE);
    let waited = mono_ns();
    let next = t.set_event(&e);
    let nexted = mono_ns();
    println!("@@ wait {} {waited}", compact(&w));
    println!("@@ next {} {nexted}", compact(&next));
    stdin_line();
    // The thunk's teardown talks to a dead device: it must not hang either.
    drop(t);
}

/// A result as one word.
fn compact<E: std::fmt::Debug>(r: &Result<(), E>) -> String {
    format!("{r:?}").replace(' ', "")
}

/// Allocates, creates a queue and runs a barrier packet on it; says `ok <pid>` or what failed.
fn recycled(kfd: &Kfd, gpu: u32) {
    let me = std::process::id();
    assert_eq!(kfd.pid(), me, "the daemon sees this process's pid");
    let result = (|| {
        let _gtt = kfd.alloc(gpu, 1 << 20, Kind::Gtt).map_err(|e| format!("ALLOC: {e}"))?;
        let q = AqlQueue::new(kfd, gpu, 64).map_err(|e| format!("CREATE_QUEUE: {e}"))?;
        let sig = Signals::new(kfd, gpu, 1).map_err(|e| format!("a signal: {e}"))?;
        sig.value(0).store(1, Ordering::Release);
        q.submit(&packet::barrier_and([0; 5], sig.handle(0), false));
        sig.wait(0, Duration::from_secs(10), |v| v == 0).map_err(|v| format!("the barrier: signal {v:?}"))?;
        Ok::<(), String>(())
    })();
    match result {
        Ok(()) => println!("@@ ok {me}"),
        Err(e) => println!("@@ failed {e}"),
    }
    stdin_line();
}

/// Allocates a buffer and an event, forks a child that holds the fd until stdin closes, and
/// says `<buffer handle> <event id>`.
fn owner_with_holder(kfd: &Kfd, gpu: u32) {
    let buffer = kfd.alloc(gpu, 4096, Kind::Gtt).expect("a buffer");
    let event = kfd.create_event(gpu, KFD_IOC_EVENT_SIGNAL, false).expect("an event").event_id;
    // SAFETY: the child only reads stdin with read(2) and _exits.
    if let nix::unistd::ForkResult::Child = unsafe { nix::unistd::fork() }.expect("fork") {
        let mut b = [0u8; 64];
        // SAFETY: reads into `b`, which is 64 bytes long.
        while unsafe { libc::read(0, b.as_mut_ptr().cast(), b.len()) } > 0 {}
        // SAFETY: ends the child at once, holding the fd to the end.
        unsafe { libc::_exit(0) }
    }
    println!("@@ {:x} {event}", buffer.handle());
    stdin_line();
}

/// Reads the old owner's `<buffer handle> <event id>`: neither is this context's; then
/// allocates. Says `fresh` or what was wrong.
fn fresh(kfd: &Kfd, gpu: u32) {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let mut f = line.split_whitespace();
    let handle = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
    let event: u32 = f.next().unwrap().parse().unwrap();
    let got = (kfd.free_memory(handle), kfd.set_event(event), kfd.alloc(gpu, 4096, Kind::Gtt).map(|_b| ()));
    // The buffer handle and the event id of a context this one is not.
    let fresh_answers = (Err(thunk::Errno::EINVAL), Err(thunk::Errno::EINVAL), Ok(()));
    if got == fresh_answers {
        // Keep one buffer for the test to count.
        let _b = kfd.alloc(gpu, 4096, Kind::Gtt).expect("a buffer");
        println!("@@ fresh");
        stdin_line();
    } else {
        println!("@@ stale {got:?}");
    }
}

/// A soft kernel descriptor of `builtin` in a fresh code buffer.
fn kernel(kfd: &Kfd, gpu: u32, builtin: u32) -> GpuMemory {
    let code = kfd.alloc(gpu, 4096, Kind::Gtt).expect("code");
    let desc = SoftKernelDescriptor::new(builtin, 16);
    code.write(0, desc.as_bytes());
    code
}

/// The most expensive packet the device takes: 2^28 work-items, each an atomic add.
fn expensive(kfd: &Kfd, gpu: u32) -> (GpuMemory, GpuMemory, GpuMemory) {
    let code = kernel(kfd, gpu, SOFT_KERNEL_ATOMIC_ADD_U64);
    let counter = kfd.alloc(gpu, 4096, Kind::Gtt).expect("counter");
    let args = kfd.alloc(gpu, 4096, Kind::Gtt).expect("kernel arguments");
    args.write(0, AtomicAddArgs { addr: counter.va(), value: 1 }.as_bytes());
    (code, counter, args)
}

fn expensive_packet(code: &GpuMemory, args: &GpuMemory) -> [u8; 64] {
    packet::dispatch(code.va(), args.va(), [1 << 28, 1, 1], [64, 1, 1], 0, false)
}

/// Keeps a queue full of the most expensive packets; says `busy` once they run.
fn busy(kfd: &Kfd, gpu: u32) {
    let (code, counter, args) = expensive(kfd, gpu);
    let q = AqlQueue::new(kfd, gpu, 64).expect("the busy queue");
    for _ in 0..63 {
        q.submit(&expensive_packet(&code, &args));
    }
    while counter.u64_at(0).load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }
    println!("@@ busy");
    stdin_line();
}

/// Issues ioctls without pause (a buffer, a queue given an expensive packet, DESTROY_QUEUE while
/// it runs, FREE, the apertures) until one fails; says `hammering` after a few rounds, and
/// `stopped <rounds> <errno> <longest round>` at the end.
fn hammer(kfd: &Kfd, gpu: u32) {
    let (code, _counter, args) = expensive(kfd, gpu);
    let mut rounds = 0u64;
    let mut longest = Duration::ZERO;
    let stopped = loop {
        let t0 = Instant::now();
        let round = (|| {
            let _b = kfd.alloc(gpu, 64 << 10, Kind::Gtt)?;
            let q = AqlQueue::new(kfd, gpu, 16)?;
            q.submit(&expensive_packet(&code, &args));
            drop(q);
            kfd.apertures().map(|_| ())
        })();
        if let Err(e) = round {
            break e;
        }
        longest = longest.max(t0.elapsed());
        rounds += 1;
        if rounds == 3 {
            println!("@@ hammering");
        }
    };
    println!("@@ stopped {rounds} {stopped:?} {longest:?}");
    stdin_line();
}
