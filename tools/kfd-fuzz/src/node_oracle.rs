//! The node target's oracles outside the children (issue 13): the daemon is the same process
//! and alive, a well-behaved second client's round trip keeps succeeding within a bound while
//! the children attack, and nothing outside the runtime directory changes (a root-owned canary
//! directory that every planted symlink points at).

use parking_lot::Mutex;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The daemon, named by pid and start time (a pid alone may be reused).
pub struct Daemon {
    pid: u32,
    start_time: u64,
}

/// Field 22 of /proc/<pid>/stat (after the command name, which may hold spaces).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl Daemon {
    pub fn watch(pid: u32) -> Result<Daemon, String> {
        let start_time = start_time(pid).ok_or_else(|| format!("the daemon (pid {pid}) is not running"))?;
        Ok(Daemon { pid, start_time })
    }

    /// Ok while the same process lives (a zombie counts as gone).
    pub fn check(&self) -> Result<(), String> {
        let state = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok();
        let zombie = state.as_deref().and_then(|s| s.rfind(')').and_then(|i| s.get(i + 2..i + 3))) == Some("Z");
        match start_time(self.pid) {
            Some(t) if t == self.start_time && !zombie => Ok(()),
            _ => Err(format!("crash: the daemon (pid {}) has gone", self.pid)),
        }
    }
}

/// A root-owned directory outside the runtime directory, with a file and two directories
/// named as a client's: the target of every symlink the children try to plant.
pub struct Canary {
    pub dir: PathBuf,
    before: Vec<Entry>,
}

type Entry = (PathBuf, u32, u32, u32, u64, i64, i64, i64, i64);

fn snapshot(dir: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&d) else {
            out.push((d, 0, 0, 0, 0, 0, 0, 0, 0));
            continue;
        };
        out.push((
            d.clone(),
            m.uid(),
            m.gid(),
            m.mode(),
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ));
        if m.is_dir() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

impl Canary {
    pub fn create() -> Result<Canary, String> {
        let dir = nix::unistd::mkdtemp(&std::env::temp_dir().join("kfd-fuzz-canary-XXXXXX"))
            .map_err(|e| format!("cannot make the canary directory: {e}"))?;
        let made = (|| {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
            std::fs::write(dir.join("passwd"), b"root:x:0:0::/root:/bin/sh\n")?;
            std::fs::create_dir(dir.join("render"))?;
            std::fs::create_dir(dir.join("kfd"))
        })();
        made.map_err(|e| format!("cannot fill the canary directory {}: {e}", dir.display()))?;
        let before = snapshot(&dir);
        Ok(Canary { dir, before })
    }

    pub fn check(&self) -> Result<(), String> {
        let now = snapshot(&self.dir);
        if now == self.before {
            return Ok(());
        }
        let changed: Vec<String> = now
            .iter()
            .filter(|e| !self.before.contains(e))
            .chain(self.before.iter().filter(|e| !now.contains(e)))
            .map(|e| e.0.display().to_string())
            .collect();
        Err(format!("escape: the canary directory outside the runtime directory changed: {changed:?}"))
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The witness's pause between round trips (each costs the daemon three requests and the
/// thunk a mapping: under emulation, more would slow the run it watches).
const WITNESS_PAUSE: Duration = Duration::from_millis(200);

/// A well-behaved client in its own thread: GET_VERSION, a 4 KiB GTT ALLOC and its FREE, over
/// and over, while the children run.
pub struct Witness {
    state: Arc<WitnessState>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    start: Instant,
}

#[derive(Default)]
struct WitnessState {
    /// When the round trip under way started (ms after `start`, plus one), 0 between them.
    busy_since: AtomicU64,
    rounds: AtomicU64,
    max_us: AtomicU64,
    error: Mutex<Option<String>>,
}

impl Witness {
    pub fn start(device: &Path) -> Result<Witness, String> {
        let kfd = thunk::Kfd::open_node(device).map_err(|e| format!("the witness cannot open the node: {e}"))?;
        let gpu = *kfd.gpu_ids().map_err(|e| format!("the witness has no GPU: {e}"))?.first().ok_or("no GPU")?;
        let state = Arc::new(WitnessState::default());
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let (s, st) = (state.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("kfd-fuzz-witness".into())
            .spawn(move || {
                while !st.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    s.busy_since.store(start.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
                    let r = kfd
                        .version()
                        .and_then(|_| kfd.alloc(gpu, 4096, thunk::memory::Kind::Gtt).map(drop))
                        .map_err(|e| format!("crash: the witness client's GET_VERSION + ALLOC + FREE failed: {e}"));
                    s.busy_since.store(0, Ordering::Relaxed);
                    s.max_us.fetch_max(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
                    s.rounds.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = r {
                        *s.error.lock() = Some(e);
                        return;
                    }
                    std::thread::sleep(WITNESS_PAUSE);
                }
            })
            .map_err(|e| format!("cannot start the witness thread: {e}"))?;
        Ok(Witness { state, stop, thread: Some(thread), start })
    }

    /// Err if a round trip failed or has taken longer than `bound` so far.
    pub fn check(&self, bound: Duration) -> Result<(), String> {
        if let Some(e) = self.state.error.lock().clone() {
            return Err(e);
        }
        let since = self.state.busy_since.load(Ordering::Relaxed);
        if since > 0 {
            let busy = (self.start.elapsed().as_millis() as u64 + 1).saturating_sub(since);
            if busy > bound.as_millis() as u64 {
                return Err(format!("hang: the witness client's round trip has taken {busy} ms (bound {bound:?})"));
            }
        }
        Ok(())
    }

    /// (round trips done, the longest in µs).
    pub fn numbers(&self) -> (u64, u64) {
        (self.state.rounds.load(Ordering::Relaxed), self.state.max_us.load(Ordering::Relaxed))
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // A witness stuck in a request (a hang already reported) is left behind.
        if let Some(t) = self.thread.take() {
            let t0 = Instant::now();
            while !t.is_finished() && t0.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canary_sees_a_new_entry_and_a_touched_file() {
        let c = Canary::create().unwrap();
        assert!(c.check().is_ok());
        std::fs::write(c.dir.join("render/x"), b"").unwrap();
        assert!(c.check().unwrap_err().starts_with("escape: "));
        std::fs::remove_file(c.dir.join("render/x")).unwrap();
        // The directory's mtime moved: still a change.
        assert!(c.check().is_err());
    }

    #[test]
    fn the_daemon_is_this_process_until_it_is_not() {
        let d = Daemon::watch(std::process::id()).unwrap();
        assert!(d.check().is_ok());
        let gone = Daemon { pid: std::process::id(), start_time: d.start_time + 1 };
        assert!(gone.check().unwrap_err().starts_with("crash: "));
    }
}
