//! Helpers of the real-device tier: the daemon under test, client processes, signals.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The daemon binary, in the real-device tier; announces that the calling test really runs.
///
/// A device-tier test is `#[ignore = "device tier"]` and calls this first: a plain `cargo test`
/// lists it as ignored, and `cargo xtask test device` runs exactly those tests (by name, with
/// `--ignored --exact`) with CUSE_KFD_DEVICE_TIER set. Run anywhere else (`--include-ignored`,
/// or a device test that lacks the attribute) it fails: it did not pass.
pub fn tier() -> PathBuf {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    assert!(std::env::var_os("CUSE_KFD_DEVICE_TIER").is_some(), "{}", outside_the_tier(&test));
    let bin = std::env::var_os("CUSE_KFD_BIN").map(PathBuf::from).expect("CUSE_KFD_BIN names the cuse-kfd binary");
    assert!(bin.is_file(), "{} is not a file", bin.display());
    announce(&test);
    bin
}

/// [`tier`] for a test that needs no daemon: fails outside the tier, announces that `test`
/// really runs.
pub fn tier_without_daemon(test: &str) {
    assert!(std::env::var_os("CUSE_KFD_DEVICE_TIER").is_some(), "{}", outside_the_tier(test));
    announce(test);
}

/// Prints [`RAN_MARKER`] and `test` straight to stdout, past libtest's capture: the tier counts
/// these lines and fails when a test it ran did not really run.
fn announce(test: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{RAN_MARKER} {test}").and_then(|()| out.flush()).expect("write to stdout");
}

/// Why a device-tier test fails outside the tier.
pub fn outside_the_tier(test: &str) -> String {
    format!(
        "{test} is a device-tier test: it runs in `cargo xtask test device`, which sets \
         CUSE_KFD_DEVICE_TIER; elsewhere it must be #[ignore = \"device tier\"] (so that a plain \
         cargo test lists it as ignored) and not be run"
    )
}

/// The line a device test prints when it really runs (see tools/xtask/src/device.rs).
pub const RAN_MARKER: &str = "CUSE_KFD_DEVICE_TEST_RAN";

/// A `cuse-kfd serve` child and its node.
pub struct Daemon {
    child: Child,
    pub node: PathBuf,
    pub runtime_dir: PathBuf,
    /// Where its stderr (its log) goes, when not to the test's.
    log: Option<PathBuf>,
}

impl Daemon {
    pub fn start(bin: &Path, name: &str) -> Daemon {
        Daemon::start_with(bin, name, &[])
    }

    /// With extra `serve` options.
    pub fn start_with(bin: &Path, name: &str, extra: &[&str]) -> Daemon {
        Daemon::start_inner(bin, name, extra, None)
    }

    /// With its log (stderr) in a file, which [`Daemon::log`] reads: for tests that show it
    /// with a failure rather than interleaved with every test's output.
    pub fn start_logged(bin: &Path, name: &str) -> Daemon {
        let log = std::env::temp_dir().join(format!("cuse-kfd-tier-{name}.log"));
        Daemon::start_inner(bin, name, &[], Some(log))
    }

    fn start_inner(bin: &Path, name: &str, extra: &[&str], log: Option<PathBuf>) -> Daemon {
        let node = Path::new("/dev").join(name);
        let runtime_dir = std::env::temp_dir().join(format!("cuse-kfd-tier-{name}"));
        let mut cmd = Command::new(bin);
        cmd.args(["serve", "--name", name, "--mode", "0666", "--runtime-dir"])
            .arg(&runtime_dir)
            .args(extra)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()));
        if let Some(path) = &log {
            let file = std::fs::File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            cmd.stderr(file);
        }
        let child = cmd.spawn().expect("start cuse-kfd serve");
        let mut d = Daemon { child, node, runtime_dir, log };
        let t0 = Instant::now();
        while !d.ready() {
            if let Some(status) = d.child.try_wait().unwrap() {
                panic!("cuse-kfd serve exited with {status} before {} appeared", d.node.display());
            }
            if t0.elapsed() > Duration::from_secs(90) {
                panic!("{} did not appear within 90 s:\n{}", d.node.display(), d.why_not_ready());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    /// What the daemon logged so far, when started by [`Daemon::start_logged`].
    pub fn log(&self) -> String {
        match &self.log {
            Some(path) => std::fs::read_to_string(path).unwrap_or_else(|e| format!("{}: {e}", path.display())),
            None => "(the daemon logs to the test's stderr)".into(),
        }
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its status report (the control socket's `status` command: processes, queues, events,
    /// parked waits, the wait timer), or why there is none.
    pub fn status(&self) -> String {
        cuse_kfd::frontend::control::request(&self.runtime_dir, "status").unwrap_or_else(|e| format!("no status: {e}"))
    }

    /// Its object counts (the control socket's `stats` command).
    pub fn stats(&self) -> cuse_kfd::DeviceStats {
        let text = cuse_kfd::frontend::control::request(&self.runtime_dir, "stats").expect("stats");
        cuse_kfd::frontend::control::parse_stats(&text).expect("a stats answer")
    }

    /// The node exists with the requested mode (set after devtmpfs creates it 0600).
    fn ready(&self) -> bool {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(&self.node).is_ok_and(|m| m.permissions().mode() & 0o777 == 0o666)
    }

    /// What a daemon that did not come up is doing: the node's state and, for each of its
    /// threads, where it waits in the kernel (wchan, and the kernel stack when readable).
    fn why_not_ready(&self) -> String {
        use std::os::unix::fs::PermissionsExt;
        let mut out = match std::fs::metadata(&self.node) {
            Ok(m) => format!("node: mode {:o}\n", m.permissions().mode() & 0o7777),
            Err(e) => format!("node: {e}\n"),
        };
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default().trim().to_owned();
        let proc_dir = PathBuf::from(format!("/proc/{}", self.child.id()));
        for task in std::fs::read_dir(proc_dir.join("task")).into_iter().flatten().flatten() {
            let p = task.path();
            out += &format!(
                "thread {} {}: state {} wchan {}\n{}\n",
                task.file_name().to_string_lossy(),
                read(p.join("comm")),
                read(p.join("stat")).rsplit_once(") ").map_or(String::new(), |(_, r)| r[..1].to_owned()),
                read(p.join("wchan")),
                read(p.join("stack")),
            );
        }
        out
    }

    /// SIGTERM (a clean shutdown), then its exit status if it exited within `within`.
    pub fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM the daemon");
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if t0.elapsed() > within {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL: the daemon dies without cleaning up.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let t0 = Instant::now();
            while self.child.try_wait().ok().flatten().is_none() {
                if t0.elapsed() > Duration::from_secs(5) {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
        if let Some(log) = &self.log {
            let _ = std::fs::remove_file(log);
        }
    }
}

/// A client process (usually this test binary run again in a role, see [`client`]), its stdout
/// lines collected by a thread so reads can time out. Killed when dropped.
pub struct Client {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Client {
    /// Starts `cmd` with its stdin and stdout piped.
    pub fn spawn(cmd: &mut Command) -> Client {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start a client process {cmd:?}: {e}"));
        let out = child.stdout.take().expect("piped stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Client { child, lines }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line the client printed with the `@@` marker (libtest prints its own lines too).
    pub fn line(&mut self, timeout: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let left = timeout.checked_sub(t0.elapsed()).unwrap_or_default();
            match self.lines.recv_timeout(left) {
                // libtest's "test client_role ... " may precede the marker on its line.
                Ok(l) => {
                    if let Some(at) = l.find("@@ ") {
                        return l[at + 3..].trim().to_string();
                    }
                }
                Err(e) => panic!("no line from client {} within {timeout:?} ({e})", self.child.id()),
            }
        }
    }

    pub fn send(&mut self, s: &str) {
        writeln!(self.child.stdin.as_mut().expect("piped stdin"), "{s}").unwrap();
    }

    /// Whether it has not exited yet.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait on a client").is_none()
    }

    /// SIGKILL, then whether it was reaped within `within` (a client stuck in D state is not).
    pub fn kill_and_reap(&mut self, within: Duration) -> bool {
        let _ = self.child.kill();
        self.reaped_within(within)
    }

    /// Whether it exited (and was reaped) within `within`.
    pub fn reaped_within(&mut self, within: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < within {
            if self.child.try_wait().ok().flatten().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts this test binary again as a client process in `role` against `node`.
pub fn client(role: &str, node: &Path) -> Client {
    Client::spawn(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "client_role", "--ignored", "--nocapture", "--test-threads=1"])
            .env("CUSE_KFD_CLIENT_ROLE", role)
            .env("CUSE_KFD_DEVICE", node),
    )
}

/// Whether the daemon at `runtime_dir` reports a parked wait of process `pid` (from its status
/// report over the control socket).
pub fn has_parked_wait(runtime_dir: &Path, pid: u32) -> bool {
    let Ok(text) = cuse_kfd::frontend::control::request(runtime_dir, "status") else { return false };
    let mut mine = false;
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("process ") {
            mine = rest.split_whitespace().next() == Some(&pid.to_string());
        } else if mine && l.trim_start().starts_with("event ") && !l.ends_with("waiters 0") {
            return true;
        }
    }
    false
}

extern "C" fn noop(_: libc::c_int) {}

/// A SIGUSR1 handler that does nothing, installed without SA_RESTART so blocked calls see EINTR.
pub fn install_noop_sigusr1() {
    let sa = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(noop),
        nix::sys::signal::SaFlags::empty(),
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler does nothing, so it is async-signal-safe.
    unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGUSR1, &sa) }.expect("sigaction");
}

pub fn gettid() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// tgkill(2): a signal to one thread of this process.
pub fn signal_thread(tid: i32, sig: libc::c_int) {
    // SAFETY: a plain syscall with integer arguments.
    let r = unsafe {
        libc::syscall(libc::SYS_tgkill, std::process::id() as libc::c_long, tid as libc::c_long, sig as libc::c_long)
    };
    assert_eq!(r, 0, "tgkill");
}

/// The body of the `client_role` test, as the parent test asked through the environment.
pub fn run_client_role() {
    use thunk::memory::Kind;
    let Ok(role) = std::env::var("CUSE_KFD_CLIENT_ROLE") else { return };
    let kfd = thunk::Kfd::open_default().expect("open the node");
    let gpu = kfd.gpu_ids().unwrap()[0];
    match role.as_str() {
        "wait_forever" => {
            let _mem = kfd.alloc(gpu, 4096, Kind::Gtt).unwrap();
            let ev = kfd.create_event(gpu, uapi::kfd::KFD_IOC_EVENT_SIGNAL, false).unwrap().event_id;
            let w = kfd.wait_events(&[ev], false, uapi::kfd::KFD_EVENT_TIMEOUT_INFINITE);
            panic!("the wait returned: {w:?}");
        }
        // Like wait_forever, but says how the wait ended: `@@ error ERRNO`, `@@ fail`, or
        // `@@ result N` for any other wait result.
        "wait_and_report" => {
            let _mem = kfd.alloc(gpu, 4096, Kind::Gtt).unwrap();
            let ev = kfd.create_event(gpu, uapi::kfd::KFD_IOC_EVENT_SIGNAL, false).unwrap().event_id;
            let w = kfd.wait_events(&[ev], false, uapi::kfd::KFD_EVENT_TIMEOUT_INFINITE);
            match (w.result, w.wait_result) {
                (Err(e), _) => println!("@@ error {e:?}"),
                (Ok(()), uapi::kfd::KFD_IOC_WAIT_RESULT_FAIL) => println!("@@ fail"),
                (Ok(()), r) => println!("@@ result {r}"),
            }
        }
        "hold_objects" => {
            let mem = kfd.alloc(gpu, 4096, Kind::Gtt).unwrap();
            let ev = kfd.create_event(gpu, uapi::kfd::KFD_IOC_EVENT_SIGNAL, false).unwrap().event_id;
            let q = thunk::queue::AqlQueue::new(&kfd, gpu, 64).unwrap();
            println!("@@ {ev:x} {:x} {:x}", mem.handle(), q.id);
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            let intact = kfd.set_event(ev).is_ok() && kfd.map_to_gpu(mem.handle(), &[gpu]).is_ok();
            println!("@@ {}", if intact { "intact" } else { "damaged" });
            std::io::stdin().read_line(&mut line).unwrap();
            drop(q);
        }
        other => panic!("unknown client role {other}"),
    }
}
