//! The /dev/cuse channel: one fd, several reader threads, one write() per reply.

use super::session::{FrameSink, MAX_TRANSFER};
use nix::errno::Errno;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

/// Bytes one read() must be able to take: the kernel refuses smaller buffers
/// (max(8192, 80 + max_write)).
pub const READ_BUFFER: usize = 80 + MAX_TRANSFER as usize + 4096;

/// Why the channel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("{0} does not exist: this kernel has no CUSE (load it with `modprobe cuse`)")]
    NoCuse(String),
    #[error("opening {0} needs root (or a node made accessible to you)")]
    Permission(String),
    #[error("cannot open {0}")]
    Open(String, #[source] io::Error),
}

/// The open /dev/cuse.
pub struct Channel {
    file: File,
}

impl Channel {
    pub fn open(path: &Path) -> Result<Channel, ChannelError> {
        let name = path.display().to_string();
        match OpenOptions::new().read(true).write(true).custom_flags(libc::O_CLOEXEC).open(path) {
            Ok(file) => Ok(Channel { file }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ChannelError::NoCuse(name)),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(ChannelError::Permission(name)),
            Err(e) => Err(ChannelError::Open(name, e)),
        }
    }

    /// Reads one request frame into `buf`; `Ok(None)` when the device went away.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match nix::unistd::read(self.file.as_raw_fd(), buf) {
                Ok(n) => return Ok(Some(n)),
                // A request the kernel dropped before we read it.
                Err(Errno::EINTR | Errno::ENOENT | Errno::EAGAIN) => continue,
                Err(Errno::ENODEV) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl FrameSink for Channel {
    fn send(&self, frame: Vec<u8>) {
        match nix::unistd::write(self.file.as_fd(), &frame) {
            Ok(_) => {}
            // The request is gone (its caller was killed or interrupted): nothing to answer.
            Err(Errno::ENOENT) => log::debug!("reply for a request that is gone"),
            Err(e) => log::warn!("writing a reply of {} bytes failed: {e}", frame.len()),
        }
    }
}

/// Serves `session` on `channel` with `threads` readers; returns when the device goes away.
pub fn serve(channel: Arc<Channel>, session: Arc<super::session::Session>, threads: usize) -> io::Result<()> {
    let mut handles = Vec::new();
    for i in 0..threads.max(1) {
        let (c, s) = (channel.clone(), session.clone());
        handles.push(std::thread::Builder::new().name(format!("cuse-reader-{i}")).spawn(
            move || -> io::Result<()> {
                let mut buf = vec![0u8; READ_BUFFER];
                while let Some(n) = c.read(&mut buf)? {
                    // A panic in a handler answers its request EIO (the responder's drop) and
                    // must not take the reader along: with every reader gone, every client
                    // would hang in its ioctl.
                    let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.handle(&buf[..n])));
                    if handled.is_err() {
                        log::error!("a CUSE request handler panicked; the reader goes on");
                    }
                }
                Ok(())
            },
        )?);
    }
    let mut result = Ok(());
    for h in handles {
        match h.join() {
            Ok(Err(e)) if result.is_ok() => result = Err(e),
            Err(_) => log::error!("a CUSE reader thread panicked"),
            _ => {}
        }
    }
    result
}
