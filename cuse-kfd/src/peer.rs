//! Cross-memory copies between embedded devices.
//!
//! The embedded device is one per process, so a CROSS_MEMORY_COPY naming another process finds
//! no context for it in the caller's device: the other process's GPU memory is known only to
//! the device living in that process. Each embedded device therefore serves its own processes'
//! GPU memory on a socket in its private store (`peer.sock`, in a 0700 directory: only the
//! user's own processes reach it), and the caller's device copies through it, a chunk per
//! request. The serving device applies the rule the copy is under (the caller may ptrace the
//! target, [`crate::attach`]) to the credentials the kernel gives for the connection, and
//! reaches memory exactly as a copy within one device does ([`crate::ioctl::cma`]).
//!
//! A daemon serves every process from one device and has no peer socket.
//!
//! Connections are served one at a time, by one thread: a copy holds its connection for its own
//! length, and one that stalls holds the socket no longer than [`IO_TIMEOUT`].
//!
//! The protocol, little-endian: a request is a [`HEADER`]-byte header (magic, op, pid, 0, va,
//! len) followed, for [`Op::Write`], by `len` bytes; the answer is an errno (0: done) and 4 zero
//! bytes, followed, for a successful [`Op::Read`], by `len` bytes. A read or write moves at most
//! [`CHUNK`] bytes; a check names a whole range, of any length.

use crate::attach::Requester;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

pub const SOCKET_NAME: &str = "peer.sock";

/// Most bytes one request moves.
pub const CHUNK: u64 = 256 << 10;

const MAGIC: u32 = u32::from_le_bytes(*b"KFDP");
const HEADER: usize = 32;

/// How long either side waits for the other's next bytes before giving up on the connection
/// (the caller's copy then fails with EFAULT, as a copy that cannot reach its memory).
const IO_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Op {
    /// Whether `[va, va + len)` lies whole in one VRAM, GTT or USERPTR buffer of the process,
    /// mapped on some GPU (what a copy checks of each range as it reaches it).
    Check = 1,
    Read = 2,
    Write = 3,
}

impl Op {
    fn from_u32(v: u32) -> Option<Op> {
        [Op::Check, Op::Read, Op::Write].into_iter().find(|op| *op as u32 == v)
    }
}

/// What the serving device does with a request: [`crate::ioctl::cma`]'s access to one of its
/// processes, `pid`, on behalf of `caller`.
pub trait Memory {
    fn check(&self, pid: u32, caller: Requester, va: u64, len: u64) -> Result<(), Errno>;
    fn read(&self, pid: u32, caller: Requester, va: u64, buf: &mut [u8]) -> Result<(), Errno>;
    fn write(&self, pid: u32, caller: Requester, va: u64, buf: &[u8]) -> Result<(), Errno>;
}

/// The server: a thread that answers one connection at a time until dropped.
pub struct PeerServer {
    /// Written on drop: wakes the thread wherever it waits. (Closing it would not do: a child
    /// forked meanwhile holds a copy of it.)
    stop: Option<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeerServer {
    /// Listens on `<store>/peer.sock` and serves requests through `serve`, which gives `None`
    /// once the device is gone or going.
    pub fn spawn<F>(store: &Path, serve: F) -> std::io::Result<PeerServer>
    where
        F: Fn(&mut dyn FnMut(&dyn Memory)) -> Option<()> + Send + 'static,
    {
        let path = store.join(SOCKET_NAME);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let (stop_rx, stop_tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let thread =
            std::thread::Builder::new().name("kfd-peer".into()).spawn(move || run(&listener, &stop_rx, &serve))?;
        Ok(PeerServer { stop: Some(stop_tx), thread: Some(thread) })
    }
}

impl Drop for PeerServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            if let Err(e) = nix::unistd::write(&stop, &[1]) {
                // The thread is not joined: it would never wake.
                log::warn!("cannot stop the peer socket's thread: {e}");
                std::mem::forget(self.thread.take());
                return;
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits until `fd` is readable; false once `stop` is signalled (or the wait times out or
/// fails).
fn wait_readable(fd: &impl AsFd, stop: &OwnedFd, timeout: Option<Duration>) -> bool {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN), PollFd::new(stop.as_fd(), PollFlags::POLLIN)];
    let timeout = match timeout {
        Some(t) => PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX),
        None => PollTimeout::NONE,
    };
    loop {
        match nix::poll::poll(&mut fds, timeout) {
            Ok(0) => return false,
            Ok(_) => {
                let stopped = fds[1].revents().is_some_and(|r| !r.is_empty());
                return !stopped;
            }
            Err(Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

fn run<F>(listener: &UnixListener, stop: &OwnedFd, serve: &F)
where
    F: Fn(&mut dyn FnMut(&dyn Memory)) -> Option<()>,
{
    while wait_readable(listener, stop, None) {
        let conn = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) => {
                log::debug!("peer socket: {e}");
                continue;
            }
        };
        let creds = match nix::sys::socket::getsockopt(&conn, nix::sys::socket::sockopt::PeerCredentials) {
            Ok(c) => c,
            Err(e) => {
                log::debug!("peer socket: no credentials: {e}");
                continue;
            }
        };
        let caller = Requester { pid: creds.pid() as u32, uid: creds.uid(), gid: creds.gid() };
        if let Err(e) = serve_connection(conn, caller, stop, serve) {
            log::debug!("peer connection of pid {}: {e}", caller.pid);
        }
    }
}

/// Answers the requests of one connection until it closes, stalls or the server stops.
fn serve_connection<F>(mut conn: UnixStream, caller: Requester, stop: &OwnedFd, serve: &F) -> std::io::Result<()>
where
    F: Fn(&mut dyn FnMut(&dyn Memory)) -> Option<()>,
{
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = vec![0u8; CHUNK as usize];
    while wait_readable(&conn, stop, Some(IO_TIMEOUT)) {
        let mut h = [0u8; HEADER];
        match conn.read_exact(&mut h) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            r => r?,
        }
        let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let long = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let (op, pid, va, len) = (Op::from_u32(word(4)), word(8), long(16), long(24));
        // A check names a whole range; only the bytes of a read or write are bounded.
        let moved = |op: Op| if op == Op::Check { 0 } else { len };
        let Some(op) = op.filter(|op| word(0) == MAGIC && word(12) == 0 && moved(*op) <= CHUNK) else {
            // Not a request of ours: the stream cannot be trusted past it.
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not a peer request"));
        };
        let data = &mut buf[..moved(op) as usize];
        if op == Op::Write {
            conn.read_exact(data)?;
        }
        let mut result = Err(Errno::EINVAL);
        let served = serve(&mut |m: &dyn Memory| {
            result = match op {
                Op::Check => m.check(pid, caller, va, len),
                Op::Read => m.read(pid, caller, va, data),
                Op::Write => m.write(pid, caller, va, data),
            }
        });
        if served.is_none() {
            return Ok(());
        }
        let errno = match result {
            Ok(()) => 0,
            Err(e) => e as i32,
        };
        let mut answer = Vec::with_capacity(8 + if errno == 0 && op == Op::Read { data.len() } else { 0 });
        answer.extend_from_slice(&errno.to_le_bytes());
        answer.extend_from_slice(&[0; 4]);
        if errno == 0 && op == Op::Read {
            answer.extend_from_slice(data);
        }
        conn.write_all(&answer)?;
    }
    Ok(())
}

/// A connection to the device serving process `pid`, for one copy.
pub struct Peer {
    pid: u32,
    conn: UnixStream,
}

impl Peer {
    /// Connects to the peer socket at `path`, whose device serves `pid`.
    pub fn connect(path: &Path, pid: u32) -> Result<Peer, Errno> {
        let conn = UnixStream::connect(path).map_err(|e| {
            log::debug!("cannot reach the device of pid {pid} at {}: {e}", path.display());
            Errno::EINVAL
        })?;
        conn.set_read_timeout(Some(IO_TIMEOUT)).map_err(|_| Errno::EIO)?;
        conn.set_write_timeout(Some(IO_TIMEOUT)).map_err(|_| Errno::EIO)?;
        Ok(Peer { pid, conn })
    }

    pub fn check(&self, va: u64, len: u64) -> Result<(), Errno> {
        self.call(Op::Check, va, len, &[], &mut [])
    }

    pub fn read(&self, va: u64, buf: &mut [u8]) -> Result<(), Errno> {
        self.call(Op::Read, va, buf.len() as u64, &[], buf)
    }

    pub fn write(&self, va: u64, buf: &[u8]) -> Result<(), Errno> {
        self.call(Op::Write, va, buf.len() as u64, buf, &mut [])
    }

    /// One request: `payload` goes with it (a write's bytes) and `out` takes the answer's (a
    /// read's). A connection that breaks, stalls or answers out of protocol fails the copy
    /// with EFAULT.
    fn call(&self, op: Op, va: u64, len: u64, payload: &[u8], out: &mut [u8]) -> Result<(), Errno> {
        if op != Op::Check && len > CHUNK {
            return Err(Errno::EINVAL);
        }
        let broken = |e: std::io::Error| {
            log::debug!("the device of pid {} stopped answering: {e}", self.pid);
            Errno::EFAULT
        };
        let mut request = Vec::with_capacity(HEADER + payload.len());
        for w in [MAGIC, op as u32, self.pid, 0] {
            request.extend_from_slice(&w.to_le_bytes());
        }
        request.extend_from_slice(&va.to_le_bytes());
        request.extend_from_slice(&len.to_le_bytes());
        request.extend_from_slice(payload);
        let mut conn = &self.conn;
        conn.write_all(&request).map_err(broken)?;
        let mut answer = [0u8; 8];
        conn.read_exact(&mut answer).map_err(broken)?;
        let errno = i32::from_le_bytes(answer[..4].try_into().expect("4 bytes"));
        if errno != 0 {
            return Err(Errno::from_raw(errno));
        }
        conn.read_exact(out).map_err(broken)
    }
}
