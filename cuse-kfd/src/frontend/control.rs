//! The daemon's control socket (`<runtime dir>/control.sock`, root only): one command per
//! connection, answered with text. `status` gives [`crate::frontend::inspect::status`]; `stats` the
//! device's object counts ([`DeviceStats`], one `name value` line per field, read back with
//! [`parse_stats`]); `trace` the Chrome trace JSON; `trace on` / `trace off` switch recording.

use crate::device::{Device, DeviceStats};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Weak;

pub const SOCKET_NAME: &str = "control.sock";

/// The control socket of the daemon whose runtime directory is `runtime_dir`.
pub fn socket_path(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join(SOCKET_NAME)
}

/// Serves the control socket on a thread of its own until the device goes away.
pub fn spawn(device: Weak<Device>, runtime_dir: &Path) -> std::io::Result<()> {
    let path = socket_path(runtime_dir);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new().name("kfd-control".into()).spawn(move || {
        for conn in listener.incoming() {
            let Some(dev) = device.upgrade() else { return };
            match conn {
                Ok(c) => {
                    if let Err(e) = answer(&dev, c) {
                        log::debug!("control connection: {e}");
                    }
                }
                Err(e) => log::warn!("control socket: {e}"),
            }
        }
    })?;
    Ok(())
}

fn answer(device: &Device, conn: UnixStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let reply = match line.trim() {
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
    };
    (&conn).write_all(reply.as_bytes())
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
