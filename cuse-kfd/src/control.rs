//! The daemon's control socket (`<runtime dir>/control.sock`, root only): one command per
//! connection, answered with text. `status` gives [`crate::inspect::status`]; `trace` the Chrome
//! trace JSON; `trace on` / `trace off` switch recording.

use crate::device::Device;
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
        "status" => crate::inspect::status(device),
        "trace" => device.trace().to_chrome_json(),
        "trace on" => {
            device.trace().set_enabled(true);
            "tracing on\n".into()
        }
        "trace off" => {
            device.trace().set_enabled(false);
            "tracing off\n".into()
        }
        other => format!("unknown command {other:?} (status, trace, trace on, trace off)\n"),
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
