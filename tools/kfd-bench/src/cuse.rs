//! CUSE round trips: GET_VERSION and WAIT_EVENTS (timeout 0, one event) through our daemon, as
//! it serves by default (RETRY rounds) and with `--direct-copies` (one round trip), against the
//! same ioctls on a minimal libfuse3 CUSE device (cuse-ref/cuse_ref.c), the reference CUSE
//! server. Needs /dev/cuse and root: `cargo xtask bench` runs it in the
//! device tier's VM, with CUSE_KFD_BIN and KFD_BENCH_CUSE_REF naming the two servers.

use crate::stats::{bench, ns, percentile, ratio};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::IntoBytes;

/// Calls per round (KFD_BENCH_CUSE_CALLS overrides, for a quick look).
fn calls() -> usize {
    std::env::var("KFD_BENCH_CUSE_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000)
}
const ROUNDS: usize = 4;

struct Server {
    child: Child,
    node: PathBuf,
}

impl Server {
    fn start(cmd: &mut Command, node: &str) -> Result<Server, String> {
        let child = cmd.spawn().map_err(|e| format!("starting {cmd:?}: {e}"))?;
        let mut s = Server { child, node: Path::new("/dev").join(node) };
        let t0 = Instant::now();
        while std::fs::OpenOptions::new().read(true).write(true).open(&s.node).is_err() {
            if let Ok(Some(st)) = s.child.try_wait() {
                return Err(format!("{cmd:?} exited with {st}"));
            }
            if t0.elapsed() > Duration::from_secs(20) {
                return Err(format!("{} did not appear", s.node.display()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(s)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Times `CALLS` ioctls of `cmd` on `fd`, restoring `args` before each call.
///
/// # Safety
///
/// `args` holds at least `_IOC_SIZE(cmd)` bytes, and every pointer inside it is valid for what
/// `cmd` reads and writes through it until the call returns.
unsafe fn time_ioctl(fd: &std::fs::File, cmd: u32, args: &[u8]) -> Result<Vec<Duration>, String> {
    use std::os::fd::AsRawFd;
    let mut buf = args.to_vec();
    let mut out = Vec::with_capacity(calls());
    for _ in 0..calls() {
        buf.copy_from_slice(args);
        let t0 = Instant::now();
        // SAFETY: `buf` is a writable copy of `args`, so `_IOC_SIZE(cmd)` bytes; the pointers
        // inside it are valid (this function's contract).
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as libc::c_ulong, buf.as_mut_ptr()) };
        out.push(t0.elapsed());
        if r < 0 {
            return Err(format!("ioctl {cmd:#x}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(out)
}

pub fn run() -> Result<(), String> {
    let ours = std::env::var_os("CUSE_KFD_BIN").map(PathBuf::from).ok_or("CUSE_KFD_BIN is not set")?;
    let reference = std::env::var_os("KFD_BENCH_CUSE_REF").map(PathBuf::from).ok_or("KFD_BENCH_CUSE_REF is not set")?;
    if !Path::new("/dev/cuse").exists() {
        return Err("no /dev/cuse here (run through cargo xtask bench, which uses the device tier's VM)".into());
    }
    // The device tier's runner counts this line as "ran for real" (tools/xtask/src/device.rs).
    println!("CUSE_KFD_DEVICE_TEST_RAN kfd-bench-cuse");
    let runtime = std::env::temp_dir().join("kfd-bench-cuse");
    let _ours = Server::start(
        Command::new(&ours)
            .args(["serve", "--name", "kfd-bench", "--mode", "0666", "--runtime-dir"])
            .arg(&runtime)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into())),
        "kfd-bench",
    )?;
    let direct_runtime = std::env::temp_dir().join("kfd-bench-cuse-direct");
    let _direct = Server::start(
        Command::new(&ours)
            .args(["serve", "--name", "kfd-bench-direct", "--direct-copies", "--mode", "0666", "--runtime-dir"])
            .arg(&direct_runtime)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into())),
        "kfd-bench-direct",
    )?;
    let _reference = Server::start(Command::new(&reference).arg("kfd-ref"), "kfd-ref")?;
    let open = |n: &str| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(Path::new("/dev").join(n))
            .map_err(|e| format!("{n}: {e}"))
    };
    let (our_fd, direct_fd, ref_fd) = (open("kfd-bench")?, open("kfd-bench-direct")?, open("kfd-ref")?);

    // One unsignaled event on each of our devices for the wait (the reference treats any id as
    // one); both daemons number a process's first event alike.
    let mut events = Vec::new();
    let mut nodes = Vec::new();
    for node in ["/dev/kfd-bench", "/dev/kfd-bench-direct"] {
        let kfd = thunk::Kfd::open_node(Path::new(node)).map_err(|e| format!("opening {node}: {e}"))?;
        let gpu = kfd.gpu_ids().map_err(|e| e.to_string())?[0];
        events.push(kfd.create_event(gpu, KFD_IOC_EVENT_SIGNAL, false).map_err(|e| e.to_string())?.event_id);
        nodes.push(kfd);
    }
    if events[0] != events[1] {
        return Err(format!("the two daemons gave the first event ids {} and {}", events[0], events[1]));
    }
    let event = events[0];
    // Writable: WAIT_EVENTS may copy event data back through events_ptr.
    let mut data = [EventData { event_id: event, ..Default::default() }];
    let wait = WaitEventsArgs {
        events_ptr: data.as_mut_ptr() as u64,
        num_events: 1,
        wait_for_all: 0,
        timeout: 0,
        wait_result: 0,
    };
    let version = GetVersionArgs::default();

    for (name, cmd, args) in [
        ("get_version", AMDKFD_IOC_GET_VERSION, version.as_bytes()),
        ("wait_events_t0", AMDKFD_IOC_WAIT_EVENTS, wait.as_bytes()),
    ] {
        // Alternate the servers so drift on a noisy machine hits all alike.
        let (mut a, mut d, mut b) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            // SAFETY: `args` is a whole argument struct of `cmd`; the only pointer among them,
            // WAIT_EVENTS' events_ptr, points at `data`, one writable EventData alive until the
            // loop ends.
            a.extend(unsafe { time_ioctl(&our_fd, cmd, args) }?);
            // SAFETY: as above.
            d.extend(unsafe { time_ioctl(&direct_fd, cmd, args) }?);
            // SAFETY: as above.
            b.extend(unsafe { time_ioctl(&ref_fd, cmd, args) }?);
        }
        let (pa, pd, pb) = (percentile(&mut a, 50), percentile(&mut d, 50), percentile(&mut b, 50));
        bench(&format!("cuse_{name}_p50_ours"), ns(pa) / 1000.0, "us");
        bench(&format!("cuse_{name}_p50_ours_direct"), ns(pd) / 1000.0, "us");
        bench(&format!("cuse_{name}_p50_libfuse"), ns(pb) / 1000.0, "us");
        bench(&format!("cuse_{name}_p99_ours"), ns(percentile(&mut a, 99)) / 1000.0, "us");
        bench(&format!("cuse_{name}_p99_ours_direct"), ns(percentile(&mut d, 99)) / 1000.0, "us");
        let label = if cmd == AMDKFD_IOC_GET_VERSION { "cuse_ioctl".to_string() } else { format!("cuse_{name}") };
        ratio(&format!("{label}_vs_libfuse"), ns(pa), ns(pb));
        ratio(&format!("{label}_direct_copies_vs_libfuse"), ns(pd), ns(pb));
    }
    drop(nodes);
    let _ = std::fs::remove_dir_all(&runtime);
    let _ = std::fs::remove_dir_all(&direct_runtime);
    Ok(())
}
