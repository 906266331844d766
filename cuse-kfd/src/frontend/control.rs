//! The daemon's control socket (`<runtime dir>/control.sock`, root only): one command per
//! connection, answered with text. `status` gives [`crate::frontend::inspect::status`]; `stats` the
//! device's object counts ([`DeviceStats`], one `name value` line per field, read back with
//! [`parse_stats`]); `trace` the Chrome trace JSON; `trace on` / `trace off` switch recording.

use crate::device::{Device, DeviceStats};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Weak;
use std::time::Duration;

pub const SOCKET_NAME: &str = "control.sock";

/// How long one connection may take to send its command, and to take its answer: connections
/// are served one at a time, so a client that stalls holds up the next one no longer than this.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest command line read (the longest command is a dozen bytes).
const MAX_COMMAND: u64 = 256;

/// How long accept waits after running out of fds or memory before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The control socket of the daemon whose runtime directory is `runtime_dir`.
pub fn socket_path(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join(SOCKET_NAME)
}

/// Serves the control socket on a thread of its own until the device goes away.
pub fn spawn(device: Weak<Device>, runtime_dir: &Path) -> std::io::Result<()> {
    let listener = bind(runtime_dir)?;
    std::thread::Builder::new().name("kfd-control".into()).spawn(move || {
        for conn in listener.incoming() {
            let Some(dev) = device.upgrade() else { return };
            match conn {
                Ok(c) => {
                    if let Err(e) = handle(&c, IO_TIMEOUT, |cmd| answer(&dev, cmd)) {
                        log::debug!("control connection: {e}");
                    }
                }
                Err(e) => {
                    log::warn!("control socket: {e}");
                    if let Some(pause) = accept_backoff(&e) {
                        std::thread::sleep(pause);
                    }
                }
            }
        }
    })?;
    Ok(())
}

/// Binds the socket root-only from the first moment: in a private directory (0700) of the
/// runtime directory, made 0600 there, then renamed into place, so no one ever finds it at its
/// name with the mode bind gave it (0777 less the umask).
fn bind(runtime_dir: &Path) -> std::io::Result<UnixListener> {
    let path = socket_path(runtime_dir);
    let private = runtime_dir.join(format!(".control-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let staged = private.join(SOCKET_NAME);
    let bound = UnixListener::bind(&staged).and_then(|l| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&staged, &path)?;
        Ok(l)
    });
    let _ = std::fs::remove_dir_all(&private);
    bound
}

/// How long to wait before the next accept after `e`: running out of fds (EMFILE, ENFILE) or
/// memory does not go away at once, and accept would fail again at once, in a busy loop.
fn accept_backoff(e: &std::io::Error) -> Option<Duration> {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
        .then_some(ACCEPT_BACKOFF)
}

/// Reads one command line (at most [`MAX_COMMAND`] bytes) from `conn` and writes `reply`'s
/// answer, each within `timeout`.
fn handle(conn: &UnixStream, timeout: Duration, reply: impl FnOnce(&str) -> String) -> std::io::Result<()> {
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    let mut line = String::new();
    BufReader::new(conn.take(MAX_COMMAND)).read_line(&mut line)?;
    let mut out = conn;
    out.write_all(reply(line.trim()).as_bytes())
}

fn answer(device: &Device, command: &str) -> String {
    match command {
        "status" => crate::frontend::inspect::status(device),
        "stats" => format_stats(&device.stats()),
        "trace" => device.trace().to_chrome_json(),
        "trace on" => {
            device.trace().set_enabled(true);
            "tracing on\n".into()
        }
        "trace off" => {
            device.trace().set_enabled(false);
            "tracing off\n".into()
        }
        other => format!("unknown command {other:?} (status, stats, trace, trace on, trace off)\n"),
    }
}

/// Sends one command to the daemon at `runtime_dir` and returns its answer.
pub fn request(runtime_dir: &Path, command: &str) -> std::io::Result<String> {
    let path = socket_path(runtime_dir);
    let mut c = UnixStream::connect(&path).map_err(|e| {
        std::io::Error::new(e.kind(), format!("connecting to {}: {e} (is the daemon running?)", path.display()))
    })?;
    writeln!(c, "{command}")?;
    c.shutdown(std::net::Shutdown::Write)?;
    let mut out = String::new();
    std::io::Read::read_to_string(&mut c, &mut out)?;
    Ok(out)
}

/// The `stats` answer: each field of `stats` as a `name value` line.
pub fn format_stats(stats: &DeviceStats) -> String {
    let DeviceStats { files, processes, buffers, queues, events, waiters } = *stats;
    format!(
        "files {files}\nprocesses {processes}\nbuffers {buffers}\nqueues {queues}\nevents {events}\nwaiters {waiters}\n"
    )
}

/// Reads a `stats` answer back: every field exactly once, nothing else.
pub fn parse_stats(text: &str) -> Result<DeviceStats, String> {
    let mut fields: [Option<usize>; 6] = [None; 6];
    const NAMES: [&str; 6] = ["files", "processes", "buffers", "queues", "events", "waiters"];
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (name, value) = line.trim().split_once(' ').ok_or_else(|| format!("stats line {line:?}: no value"))?;
        let i = NAMES.iter().position(|n| *n == name).ok_or_else(|| format!("stats line {line:?}: unknown field"))?;
        let v = value.trim().parse().map_err(|e| format!("stats line {line:?}: {e}"))?;
        if fields[i].replace(v).is_some() {
            return Err(format!("stats: {name} given twice"));
        }
    }
    let get = |i: usize| fields[i].ok_or_else(|| format!("stats: no {} line in {text:?}", NAMES[i]));
    Ok(DeviceStats {
        files: get(0)?,
        processes: get(1)?,
        buffers: get(2)?,
        queues: get(3)?,
        events: get(4)?,
        waiters: get(5)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cuse-kfd-control-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn l4_the_socket_never_appears_with_a_wider_mode_than_0600() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = scratch("mode");
        let path = socket_path(&dir);
        let done = Arc::new(AtomicBool::new(false));
        // A watcher that stats the name as fast as it can while the socket is bound again and
        // again: with bind-then-chmod it sees the umask's mode in between.
        let watcher = {
            let (path, done) = (path.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = std::collections::BTreeSet::new();
                while !done.load(Ordering::Relaxed) {
                    if let Ok(m) = std::fs::symlink_metadata(&path) {
                        seen.insert(m.permissions().mode() & 0o777);
                    }
                }
                seen
            })
        };
        for _ in 0..500 {
            let _ = std::fs::remove_file(&path);
            drop(bind(&dir).unwrap());
        }
        done.store(true, Ordering::Relaxed);
        let seen = watcher.join().unwrap();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![0o600], "modes seen at {}", path.display());
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from(SOCKET_NAME)], "only the socket is left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn l4_a_client_that_never_reads_its_answer_is_dropped() {
        let (server, client) = UnixStream::pair().unwrap();
        (&client).write_all(b"trace\n").unwrap();
        let t0 = std::time::Instant::now();
        // An answer far larger than the socket buffers, to a client that never reads it.
        let r = handle(&server, Duration::from_millis(200), |cmd| {
            assert_eq!(cmd, "trace");
            "x".repeat(64 << 20)
        });
        assert!(r.is_err(), "the write finished though nobody read it");
        assert!(t0.elapsed() < Duration::from_secs(5), "the write gave up after {:?}", t0.elapsed());
        drop(client);
    }

    #[test]
    fn l4_a_client_that_sends_no_newline_gets_a_bounded_read() {
        let (server, client) = UnixStream::pair().unwrap();
        (&client).write_all(&[b'a'; 4096]).unwrap();
        let mut got = 0;
        handle(&server, Duration::from_millis(200), |cmd| {
            got = cmd.len();
            String::new()
        })
        .unwrap();
        assert_eq!(got as u64, MAX_COMMAND);
    }

    #[test]
    fn l4_accept_backs_off_when_out_of_fds() {
        for errno in [libc::EMFILE, libc::ENFILE] {
            assert_eq!(accept_backoff(&std::io::Error::from_raw_os_error(errno)), Some(ACCEPT_BACKOFF));
        }
        assert_eq!(accept_backoff(&std::io::Error::from_raw_os_error(libc::ECONNABORTED)), None);
    }

    #[test]
    fn stats_round_trip() {
        let s = DeviceStats { files: 1, processes: 2, buffers: 30, queues: 4, events: 4096, waiters: 6 };
        let text = format_stats(&s);
        assert_eq!(text, "files 1\nprocesses 2\nbuffers 30\nqueues 4\nevents 4096\nwaiters 6\n");
        assert_eq!(parse_stats(&text), Ok(s));
        assert_eq!(parse_stats(&format_stats(&DeviceStats::default())), Ok(DeviceStats::default()));
    }

    #[test]
    fn stats_parse_refuses_what_it_cannot_read() {
        let good = format_stats(&DeviceStats::default());
        assert!(parse_stats(&good.replace("waiters 0\n", "")).is_err(), "a missing field");
        assert!(parse_stats(&format!("{good}files 0\n")).is_err(), "a field twice");
        assert!(parse_stats(&format!("{good}threads 3\n")).is_err(), "an unknown field");
        assert!(parse_stats(&good.replace("queues 0", "queues x")).is_err(), "a bad number");
        assert!(parse_stats("unknown command \"stats\"\n").is_err(), "an older daemon's answer");
    }
}
