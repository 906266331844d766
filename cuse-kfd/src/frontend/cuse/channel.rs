//! The /dev/cuse channel: one fd, a pool of reader threads, one write() per reply.
//!
//! A request holds its reader until its handler returns, and some handlers wait on storage (an
//! ALLOC's backing file on a slow file system takes seconds) or on other processes' locks. With
//! a fixed number of readers, that many such requests from one client would leave every other
//! client's requests unread. So the pool grows by one reader whenever the last idle one takes a
//! request (as libfuse's multi-threaded loop does), up to a cap, and shrinks back once requests
//! stop: an extra reader leaves when enough others are idle. The cap only matters when that many
//! requests are slow at once, and the slow ones are bounded by the quotas.
//!
//! Under the cap, one user could still hold every reader with slow requests. So readers run at
//! most [`Readers::per_key`] requests of one key (the CUSE front end's key is the caller's uid)
//! at once; a reader that reads another request of a key at its share leaves it in that key's
//! backlog and reads on, and the readers that finish the key's running requests take its
//! backlog in order. A key's backlog is bounded; past it, requests run as they come.

use super::session::{FrameSink, MAX_TRANSFER};
use nix::errno::Errno;
use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

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
                // EOF: a channel that is not /dev/cuse (a test's socket) closed.
                Ok(0) => return Ok(None),
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

/// How many reader threads serve the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readers {
    /// Idle readers kept waiting for requests (at least one).
    pub min: usize,
    /// The most readers at once (at least `min`).
    pub max: usize,
    /// The most requests of one key that run at once: a quarter of `max`, at least one.
    pub per_key: usize,
}

/// Requests of one key that wait in its backlog at most (frames of up to 128 KiB each).
const MAX_BACKLOG: usize = 256;

impl Readers {
    pub const DEFAULT: Readers = Readers { min: 4, max: 64, per_key: per_key(64) };

    /// `min` and `max` as given on a command line, checked.
    pub fn new(min: usize, max: usize) -> Result<Readers, String> {
        if min == 0 {
            return Err("at least one reader thread is needed".into());
        }
        if max < min {
            return Err(format!("at most {max} reader threads, fewer than the {min} always kept"));
        }
        Ok(Readers { min, max, per_key: per_key(max) })
    }
}

/// A key's share of `max` readers: a quarter, at least one.
const fn per_key(max: usize) -> usize {
    if max >= 8 {
        max / 4
    } else {
        1
    }
}

/// The requests of one key: how many run, and those waiting for one of them to end.
#[derive(Debug, Default)]
struct Share {
    running: usize,
    backlog: VecDeque<Vec<u8>>,
}

/// Which requests share a key (None: a request no share holds back).
pub type KeyOf = fn(&[u8]) -> Option<u32>;

/// The readers' shared state.
struct Pool<H> {
    channel: Arc<Channel>,
    handle: H,
    key_of: KeyOf,
    readers: Readers,
    /// The running requests and backlogs of the keys that have any.
    shares: Mutex<HashMap<u32, Share>>,
    /// Taken twice per request, never across a read or a handler.
    counts: Mutex<Counts>,
    all_gone: Condvar,
    error: Mutex<Option<io::Error>>,
}

#[derive(Debug, Default)]
struct Counts {
    /// Reader threads alive.
    running: usize,
    /// Of them, those waiting in read() (or about to).
    idle: usize,
    /// The most that were alive at once.
    peak: usize,
    /// Readers started so far (their names).
    started: usize,
    /// When the cap was last reported (at most once a minute: a client can hit it at will).
    capped: Option<std::time::Instant>,
}

/// Serves frames from `channel` with `handle` on a pool of reader threads sized by `readers`,
/// at most `readers.per_key` frames of one `key_of` at once; returns when the device goes away,
/// with the first read error if there was one.
pub fn serve<H>(channel: Arc<Channel>, handle: H, key_of: KeyOf, readers: Readers) -> io::Result<()>
where
    H: Fn(&[u8]) + Send + Sync + 'static,
{
    Pool::new(channel, handle, key_of, readers).serve()
}

impl<H: Fn(&[u8]) + Send + Sync + 'static> Pool<H> {
    fn new(channel: Arc<Channel>, handle: H, key_of: KeyOf, readers: Readers) -> Arc<Self> {
        Arc::new(Pool {
            channel,
            handle,
            key_of,
            readers,
            shares: Mutex::new(HashMap::new()),
            counts: Mutex::new(Counts::default()),
            all_gone: Condvar::new(),
            error: Mutex::new(None),
        })
    }

    /// Starts the readers and waits until the last one is gone.
    fn serve(self: &Arc<Self>) -> io::Result<()> {
        for _ in 0..self.readers.min.max(1) {
            Pool::add_reader(self)?;
        }
        let mut counts = self.lock();
        while counts.running > 0 {
            counts = self.all_gone.wait(counts).unwrap_or_else(PoisonError::into_inner);
        }
        drop(counts);
        match self.error.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts one more reader, counted idle.
    fn add_reader(pool: &Arc<Self>) -> io::Result<()> {
        let name = {
            let mut c = pool.lock();
            c.running += 1;
            c.idle += 1;
            c.peak = c.peak.max(c.running);
            c.started += 1;
            format!("cuse-reader-{}", c.started - 1)
        };
        let p = pool.clone();
        match std::thread::Builder::new().name(name).spawn(move || p.read_loop()) {
            Ok(_) => Ok(()),
            Err(e) => {
                let mut c = pool.lock();
                c.running -= 1;
                c.idle -= 1;
                Err(e)
            }
        }
    }

    fn read_loop(self: Arc<Self>) {
        let mut leave = Leave { pool: &self, idle: true };
        let mut buf = vec![0u8; READ_BUFFER];
        loop {
            let n = match self.channel.read(&mut buf) {
                Ok(Some(n)) => n,
                Ok(None) => return,
                Err(e) => {
                    self.error.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(e);
                    return;
                }
            };
            leave.idle = false;
            self.took_request();
            match (self.key_of)(&buf[..n]) {
                None => self.run(&buf[..n]),
                Some(key) => self.run_shared(key, &buf[..n]),
            }
            if !self.back_to_idle() {
                return;
            }
            leave.idle = true;
        }
    }

    fn run(&self, frame: &[u8]) {
        // A panic in a handler answers its request EIO (the responder's drop) and must not
        // take the reader along: with every reader gone, every client would hang in its ioctl.
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.handle)(frame)));
        if handled.is_err() {
            log::error!("a CUSE request handler panicked; the reader goes on");
        }
    }

    /// Runs `frame` of `key` now if the key is under its share, then the key's backlog while
    /// there is one; at its share, leaves the frame in the backlog (full: runs it anyway).
    fn run_shared(&self, key: u32, frame: &[u8]) {
        {
            let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
            let share = shares.entry(key).or_default();
            if share.running >= self.readers.per_key && share.backlog.len() < MAX_BACKLOG {
                if share.backlog.is_empty() {
                    log::debug!("key {key} has {} requests running: the next ones wait for them", share.running);
                }
                share.backlog.push_back(frame.to_vec());
                return;
            }
            share.running += 1;
        }
        self.run(frame);
        loop {
            let next = {
                let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
                let share = shares.get_mut(&key).expect("a running key has its share");
                match share.backlog.pop_front() {
                    Some(next) => next,
                    None => {
                        share.running -= 1;
                        if share.running == 0 {
                            shares.remove(&key);
                        }
                        return;
                    }
                }
            };
            self.run(&next);
        }
    }

    /// This reader left the idle ones: when it was the last, another one reads meanwhile.
    fn took_request(self: &Arc<Self>) {
        let grow = {
            let mut c = self.lock();
            c.idle -= 1;
            let grow = c.idle == 0 && c.running < self.readers.max;
            let quiet = c.capped.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(60));
            if c.idle == 0 && !grow && !quiet {
                c.capped = Some(std::time::Instant::now());
                log::warn!(
                    "every one of the {} CUSE reader threads is busy (the --max-threads cap): requests wait until one is free",
                    c.running
                );
            }
            grow
        };
        if grow {
            match Pool::add_reader(self) {
                Ok(()) => log::debug!("every CUSE reader is busy: one more started"),
                Err(e) => log::warn!("starting another CUSE reader thread failed: {e}"),
            }
        }
    }

    /// Back from a request: whether this reader reads on (true) or leaves, as an extra one when
    /// enough others are idle (false, already uncounted).
    fn back_to_idle(&self) -> bool {
        let mut c = self.lock();
        if c.idle >= self.readers.min && c.running > self.readers.min {
            c.running -= 1;
            return false;
        }
        c.idle += 1;
        true
    }
}

/// Uncounts a reader thread however it ends (a panic outside a handler included) and wakes
/// [`serve`] when it was the last.
struct Leave<'a, H: Fn(&[u8]) + Send + Sync + 'static> {
    pool: &'a Pool<H>,
    /// Whether the reader is still counted idle.
    idle: bool,
}

impl<H: Fn(&[u8]) + Send + Sync + 'static> Drop for Leave<'_, H> {
    fn drop(&mut self) {
        let mut c = self.pool.lock();
        // A reader that left through back_to_idle was uncounted there.
        if self.idle {
            c.idle -= 1;
            c.running -= 1;
        } else if std::thread::panicking() {
            c.running -= 1;
        }
        if c.running == 0 {
            self.pool.all_gone.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    use std::os::fd::OwnedFd;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A channel over one end of a SOCK_SEQPACKET pair (one frame per read, as /dev/cuse gives,
    /// and EOF when the other end closes), and that other end.
    fn socket_channel() -> (Arc<Channel>, OwnedFd) {
        let (ours, theirs) =
            socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC).unwrap();
        (Arc::new(Channel { file: File::from(ours) }), theirs)
    }

    fn send(fd: &OwnedFd, frame: &[u8]) {
        assert_eq!(nix::unistd::write(fd, frame).unwrap(), frame.len());
    }

    /// A handler whose "slow" frames wait until `release` is sent, and which reports every
    /// frame it finished on `done`.
    fn handler(release: Arc<(Mutex<bool>, Condvar)>, done: mpsc::Sender<Vec<u8>>) -> impl Fn(&[u8]) + Send + Sync {
        let done = Mutex::new(done);
        move |frame: &[u8]| {
            if frame.ends_with(b"slow") {
                let (open, cv) = &*release;
                let mut open = open.lock().unwrap();
                while !*open {
                    open = cv.wait(open).unwrap();
                }
            }
            done.lock().unwrap().send(frame.to_vec()).unwrap();
        }
    }

    /// The release of [`handler`]'s slow frames.
    type Release = Arc<(Mutex<bool>, Condvar)>;

    /// A pool serving a socket channel with [`handler`]: the peer to send from, the release for
    /// slow frames, the frames finished, and the thread serving (it returns once the peer is
    /// dropped).
    struct Served<H> {
        pool: Arc<Pool<H>>,
        peer: OwnedFd,
        release: Release,
        rx: mpsc::Receiver<Vec<u8>>,
        server: std::thread::JoinHandle<io::Result<()>>,
    }

    /// [`Served`] by a pool of `readers`, frames keyed by `key_of`.
    fn serving(key_of: KeyOf, readers: Readers) -> Served<impl Fn(&[u8]) + Send + Sync + 'static> {
        let (channel, peer) = socket_channel();
        let release: Release = Arc::new((Mutex::new(false), Condvar::new()));
        let (tx, rx) = mpsc::channel();
        let pool = Pool::new(channel, handler(release.clone(), tx), key_of, readers);
        let server = std::thread::spawn({
            let pool = pool.clone();
            move || pool.serve()
        });
        Served { pool, peer, release, rx, server }
    }

    fn open(release: &(Mutex<bool>, Condvar)) {
        *release.0.lock().unwrap() = true;
        release.1.notify_all();
    }

    /// How long a frame that should be handled may take before the test calls it stuck.
    const STUCK: Duration = Duration::from_secs(20);

    #[test]
    fn requests_that_hold_every_reader_do_not_hold_the_others_back() {
        let Served { pool, peer, release, rx, server } = serving(|_| None, Readers { min: 2, max: 16, per_key: 16 });
        // More slow requests than the readers always kept: a fixed pool of two would leave the
        // fast one unread until a slow one ends, which here is never before it is answered.
        for _ in 0..5 {
            send(&peer, b"slow");
        }
        send(&peer, b"fast");
        assert_eq!(rx.recv_timeout(STUCK).expect("the fast request was left unread"), b"fast");
        open(&release);
        for _ in 0..5 {
            assert_eq!(rx.recv_timeout(STUCK).unwrap(), b"slow");
        }
        drop(peer);
        server.join().unwrap().unwrap();
        let peak = pool.lock().peak;
        assert!((7..=16).contains(&peak), "5 slow + 1 fast + 1 reading: {peak} readers at most");
    }

    #[test]
    fn the_pool_stops_at_its_cap_and_shrinks_back() {
        let Served { pool, peer, release, rx, server } = serving(|_| None, Readers { min: 1, max: 3, per_key: 3 });
        for _ in 0..3 {
            send(&peer, b"slow");
        }
        send(&peer, b"fast");
        // Three readers hold the three slow frames: the fast one waits for the release.
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "a fourth reader was started");
        open(&release);
        let mut got: Vec<Vec<u8>> = (0..4).map(|_| rx.recv_timeout(STUCK).unwrap()).collect();
        got.sort();
        assert_eq!(got, [b"fast".to_vec(), b"slow".to_vec(), b"slow".to_vec(), b"slow".to_vec()]);
        assert_eq!(pool.lock().peak, 3);
        // Idle again, the extras leave, down to the one always kept.
        let start = std::time::Instant::now();
        while pool.lock().running > 1 {
            assert!(start.elapsed() < STUCK, "the pool kept {:?}", *pool.lock());
            std::thread::sleep(Duration::from_millis(5));
        }
        // And it grows again when needed.
        *release.0.lock().unwrap() = false;
        send(&peer, b"slow");
        send(&peer, b"fast");
        assert_eq!(rx.recv_timeout(STUCK).expect("the fast request was left unread"), b"fast");
        open(&release);
        assert_eq!(rx.recv_timeout(STUCK).unwrap(), b"slow");
        drop(peer);
        server.join().unwrap().unwrap();
        assert_eq!(pool.lock().running, 0);
    }

    #[test]
    fn readers_must_be_at_least_one_and_within_the_cap() {
        assert!(Readers::new(0, 4).is_err());
        assert!(Readers::new(4, 3).is_err());
        assert_eq!(Readers::new(2, 2), Ok(Readers { min: 2, max: 2, per_key: 1 }));
        assert_eq!(Readers::new(4, 64).map(|r| r.per_key), Ok(16));
    }

    /// The key of a test frame: its first byte ("A slow", "B fast").
    fn first_byte(frame: &[u8]) -> Option<u32> {
        frame.first().map(|&b| u32::from(b))
    }

    #[test]
    fn one_key_runs_at_most_its_share_and_the_rest_wait_for_it() {
        let Served { pool, peer, release, rx, server } = serving(first_byte, Readers { min: 1, max: 16, per_key: 2 });
        // A's share is two: its two slow requests run (once both are counted), the rest of A's
        // wait behind them.
        send(&peer, b"A slow");
        send(&peer, b"A slow");
        let start = std::time::Instant::now();
        while pool.shares.lock().unwrap().get(&u32::from(b'A')).map(|s| s.running) != Some(2) {
            assert!(start.elapsed() < STUCK, "A's slow requests did not both start");
            std::thread::sleep(Duration::from_millis(2));
        }
        for frame in [&b"A 1"[..], b"A 2", b"B fast"] {
            send(&peer, frame);
        }
        assert_eq!(rx.recv_timeout(STUCK).expect("B's request waited for A's"), b"B fast");
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "A ran more than its share");
        assert_eq!(pool.shares.lock().unwrap()[&u32::from(b'A')].backlog.len(), 2);
        // The backlog holds no reader: once the readers that queued A's frames are back, only
        // the two slow requests keep one busy.
        let start = std::time::Instant::now();
        loop {
            let busy = {
                let c = pool.lock();
                c.running - c.idle
            };
            if busy == 2 {
                break;
            }
            assert!(start.elapsed() < STUCK, "{busy} readers busy with two requests running");
            std::thread::sleep(Duration::from_millis(2));
        }
        // Released, A's slow ones end and the readers that ran them take its backlog (in order,
        // but two readers may finish them in either).
        open(&release);
        let mut got: Vec<Vec<u8>> = (0..4).map(|_| rx.recv_timeout(STUCK).unwrap()).collect();
        got.sort();
        assert_eq!(got, [b"A 1".to_vec(), b"A 2".to_vec(), b"A slow".to_vec(), b"A slow".to_vec()]);
        drop(peer);
        server.join().unwrap().unwrap();
        assert!(pool.shares.lock().unwrap().is_empty(), "no share is left once its requests ended");
    }

    /// A key's backlog is bounded: with it full, the next request of that key runs at once on
    /// the reader that read it (past the key's share), which then takes the backlog.
    #[test]
    fn a_full_backlog_runs_the_next_request_anyway() {
        let Served { pool, peer, release, rx, server } = serving(first_byte, Readers { min: 1, max: 16, per_key: 1 });
        send(&peer, b"A slow");
        let backlog = |pool: &Pool<_>| pool.shares.lock().unwrap().get(&u32::from(b'A')).map_or(0, |s| s.backlog.len());
        let frames: Vec<Vec<u8>> = (0..MAX_BACKLOG).map(|i| format!("A {i:03}").into_bytes()).collect();
        for f in &frames {
            send(&peer, f);
        }
        let start = std::time::Instant::now();
        while backlog(&pool) < MAX_BACKLOG {
            assert!(start.elapsed() < STUCK, "the backlog holds {}", backlog(&pool));
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "A ran past its share with room in its backlog");
        send(&peer, b"A over");
        assert_eq!(rx.recv_timeout(STUCK).expect("the request past a full backlog waited"), b"A over");
        // That reader goes on with the backlog while the slow one still runs (in the backlog's
        // order, which is the order the readers queued them in, not always the order sent).
        let mut got: Vec<Vec<u8>> = (0..MAX_BACKLOG).map(|_| rx.recv_timeout(STUCK).unwrap()).collect();
        got.sort();
        assert_eq!(got, frames);
        open(&release);
        assert_eq!(rx.recv_timeout(STUCK).unwrap(), b"A slow");
        drop(peer);
        server.join().unwrap().unwrap();
        assert!(pool.shares.lock().unwrap().is_empty());
    }
}
