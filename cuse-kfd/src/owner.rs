//! The process a KFD context belongs to, held by identity rather than by pid number.
//!
//! amdkfd binds a kfd_process to the client's mm: a reused pid is a different process, and the
//! context goes when the mm goes (exit, or exec, which replaces the mm). A pid number alone
//! cannot say either, so an [`OwnerProcess`] holds two handles taken while the caller is blocked
//! in open(2) (so the pid is certainly the caller's):
//!
//! - a pidfd, readable once the process has exited (pidfd_open(2)): the [`OwnerWatch`] thread
//!   polls all of them and the device ends a context as soon as its owner exits, whoever still
//!   holds a dup of the file;
//! - an open `/proc/<pid>/mem`, which the kernel binds to the mm it had at open time
//!   (proc_mem_open): USERPTR memory is read and written through it, so after exec or exit an
//!   access finds the old mm gone and is a VM fault, never an access to the new image or to a
//!   process that got the pid later. A one-byte read at address 0 tells the two apart without
//!   touching any memory: EIO while the mm lives (page 0 is unmapped), 0 bytes once it has
//!   gone. The watch uses this to end a context at
//!   exec, as amdkfd's mmu-notifier release does.
//!
//! The start time (field 22 of /proc/<pid>/stat) names the process for comparison: a new open
//! by a process whose pid equals a context's but whose start time differs gets a fresh context.
//!
//! A side effect of /proc/<pid>/mem: the kernel may write through a read-only private mapping
//! of the owner (FOLL_FORCE, as a debugger does), copying the page on write in the owner's own
//! mm. It never reaches another process or a file the owner cannot write.

use nix::errno::Errno;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the watch sleeps between checks for exec (exits wake it at once).
pub const WATCH_INTERVAL: Duration = Duration::from_millis(20);

/// One client process, bound by identity (see the module documentation).
#[derive(Debug)]
pub struct OwnerProcess {
    pid: u32,
    start_time: u64,
    pidfd: OwnedFd,
    mem: File,
}

impl OwnerProcess {
    /// Binds to the live process `pid`. ESRCH if it has gone; the error of opening its memory
    /// (EACCES without ptrace rights over it) otherwise.
    pub fn open(pid: u32) -> Result<OwnerProcess, Errno> {
        if pid == 0 || pid > i32::MAX as u32 {
            return Err(Errno::ESRCH);
        }
        // The pidfd first: it names this process whatever happens to the number later, so
        // once it shows the process still alive after the rest is open, the rest is its too.
        let pidfd = pidfd_open(pid)?;
        let mem = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(format!("/proc/{pid}/mem"))
            .map_err(io_errno)?;
        let start_time = start_time(pid).map_err(io_errno)?;
        let owner = OwnerProcess { pid, start_time, pidfd, mem };
        if owner.has_exited() {
            return Err(Errno::ESRCH);
        }
        Ok(owner)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When the process started (clock ticks after boot): with the pid, its name.
    pub fn start_time(&self) -> u64 {
        self.start_time
    }

    /// Whether `other` is the same process (same pid and start time).
    pub fn same_as(&self, other: &OwnerProcess) -> bool {
        self.pid == other.pid && self.start_time == other.start_time
    }

    /// The process has exited (its pidfd is readable).
    pub fn has_exited(&self) -> bool {
        let mut fds = [nix::poll::PollFd::new(self.pidfd.as_fd(), nix::poll::PollFlags::POLLIN)];
        matches!(nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO), Ok(n) if n > 0)
    }

    /// The memory this owner had when bound is gone: it exited or called exec.
    pub fn mm_gone(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.mem.read_at(&mut probe, 0), Ok(0))
    }

    /// Exited, exec'd, or both: the context bound to it has ended.
    pub fn is_gone(&self) -> bool {
        self.has_exited() || self.mm_gone()
    }

    /// Reads `buf.len()` bytes at `addr` of the owner's memory; EFAULT if any is not there or
    /// the memory is gone.
    ///
    /// # Safety
    ///
    /// If the owner is this process (the embedded device's clients), nothing writes `[addr,
    /// addr + buf.len())` during the call except through atomics (the bytes are copied as by a
    /// volatile read; an unmapped page is EFAULT). For any other process there is no
    /// requirement: its memory is not ours (a forked child's copy of an owner handle names the
    /// parent, never the child).
    pub unsafe fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        if buf.is_empty() {
            return Ok(());
        }
        check_range(addr, buf.len())?;
        match self.mem.read_at(buf, addr) {
            Ok(n) if n == buf.len() => Ok(()),
            _ => Err(Errno::EFAULT),
        }
    }

    /// Writes `data` at `addr` of the owner's memory; EFAULT as `read`.
    ///
    /// # Safety
    ///
    /// If the owner is this process, `[addr, addr + data.len())` is memory the caller may write
    /// (not the inside of a live Rust value it does not own) and no Rust reference to it is alive
    /// during the call. For any other process there is no requirement.
    pub unsafe fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        if data.is_empty() {
            return Ok(());
        }
        check_range(addr, data.len())?;
        match self.mem.write_at(data, addr) {
            Ok(n) if n == data.len() => Ok(()),
            _ => Err(Errno::EFAULT),
        }
    }
}

impl OwnerProcess {
    /// The owner's mappings now (its VMAs, from /proc/<pid>/maps), sorted, touching ones of the
    /// same writability merged. ESRCH once the owner has gone: the maps read may then have been
    /// of another process or image, so they are only trusted if the owner is still there after.
    pub fn mappings(&self) -> Result<Vec<Mapping>, Errno> {
        let text = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).map_err(io_errno)?;
        if self.is_gone() {
            return Err(Errno::ESRCH);
        }
        Ok(parse_maps(&text))
    }
}

/// One run of mapped memory `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// The CPU may write it (the `w` of its permissions).
    pub writable: bool,
    /// The CPU may do nothing with it (`---`: PROT_NONE, as an address space reservation).
    pub inaccessible: bool,
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
        let Some((s, e)) = range.split_once('-') else { continue };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else { continue };
        let writable = perms.as_bytes().get(1) == Some(&b'w');
        let inaccessible = perms.starts_with("---");
        match out.last_mut() {
            Some(last) if last.end == start && (last.writable, last.inaccessible) == (writable, inaccessible) => {
                last.end = end
            }
            _ => out.push(Mapping { start, end, writable, inaccessible }),
        }
    }
    out.sort_unstable_by_key(|m| m.start);
    out
}

/// File offsets are signed: an address past i64::MAX (or a wrapping range) is no user address.
fn check_range(addr: u64, len: usize) -> Result<(), Errno> {
    match addr.checked_add(len as u64) {
        Some(end) if end <= i64::MAX as u64 => Ok(()),
        _ => Err(Errno::EFAULT),
    }
}

fn io_errno(e: std::io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
}

/// Field 22 (starttime) of /proc/<pid>/stat. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last ')'.
pub fn start_time(pid: u32) -> std::io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_start_time(&stat).ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))
}

fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state is field 3, so starttime (field 22) is the 20th.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

fn pidfd_open(pid: u32) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open takes a pid and flags (0) and touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0 as libc::c_uint) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A thread that ends contexts whose owner has gone: `owners` lists the live owners,
/// `reap` is called after any of them exits and at least every [`WATCH_INTERVAL`].
pub struct OwnerWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

type Owners = Box<dyn Fn() -> Vec<Arc<OwnerProcess>> + Send>;
type Reap = Box<dyn Fn() + Send>;

impl OwnerWatch {
    pub fn new(owners: Owners, reap: Reap) -> OwnerWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        crate::fork::install();
        let thread = std::thread::Builder::new()
            .name("kfd-owners".into())
            .spawn(move || {
                // Listing owners and reaping are device work (see crate::fork); the poll and the
                // sleeps are not.
                while !s.load(Ordering::Acquire) {
                    let live = {
                        let _busy = crate::fork::busy();
                        owners()
                    };
                    let mut fds: Vec<_> = live
                        .iter()
                        .map(|o| nix::poll::PollFd::new(o.pidfd.as_fd(), nix::poll::PollFlags::POLLIN))
                        .collect();
                    let timeout =
                        nix::poll::PollTimeout::try_from(WATCH_INTERVAL).unwrap_or(nix::poll::PollTimeout::ZERO);
                    if fds.is_empty() {
                        std::thread::sleep(WATCH_INTERVAL);
                    } else if let Err(e) = nix::poll::poll(&mut fds, timeout) {
                        if e != Errno::EINTR {
                            log::warn!("polling the clients' pidfds: {e}");
                            std::thread::sleep(WATCH_INTERVAL);
                        }
                    }
                    drop(fds);
                    drop(live);
                    let _busy = crate::fork::busy();
                    reap();
                }
            })
            .expect("spawning the owner watch thread");
        OwnerWatch { stop, thread: Some(thread) }
    }
}

impl Drop for OwnerWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            crate::fork::join_device_thread(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_become_merged_intervals() {
        let maps = "\
55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /usr/bin/x
55d0c0001000-55d0c0003000 r-xp 00001000 08:01 123 /usr/bin/x
7f0000000000-7f0000021000 rw-p 00000000 00:00 0
7f0000021000-7f0000022000 r--p 00000000 00:00 0
7fff00000000-7fff00001000 ---p 00000000 00:00 0    [stack guard] (deleted)
garbage
";
        let m = |start, end, writable| Mapping { start, end, writable, inaccessible: false };
        assert_eq!(
            parse_maps(maps),
            [
                m(0x55d0_c000_0000, 0x55d0_c000_3000, false),
                m(0x7f00_0000_0000, 0x7f00_0002_1000, true),
                m(0x7f00_0002_1000, 0x7f00_0002_2000, false),
                Mapping { start: 0x7fff_0000_0000, end: 0x7fff_0000_1000, writable: false, inaccessible: true }
            ]
        );
        assert!(parse_maps("").is_empty());
    }

    #[test]
    fn own_mappings_hold_a_stack_variable() {
        let owner = OwnerProcess::open(std::process::id()).unwrap();
        let x = 5u64;
        let at = &x as *const u64 as u64;
        assert!(owner.mappings().unwrap().iter().any(|m| m.start <= at && at < m.end && m.writable));
    }

    #[test]
    fn start_time_is_counted_after_the_last_parenthesis() {
        let stat = "42 (a) b) c) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("42 (x"), None);
        assert!(start_time(std::process::id()).unwrap() > 0);
    }

    #[test]
    fn own_memory_round_trips_and_the_owner_is_alive() {
        let me = OwnerProcess::open(std::process::id()).unwrap();
        let src = [1u8, 2, 3, 4];
        let mut dst = [0u8; 4];
        // SAFETY: `src` is a live local nothing writes.
        unsafe { me.read(src.as_ptr() as u64, &mut dst) }.unwrap();
        assert_eq!(dst, src);
        let mut target = [0u8; 4];
        let at = target.as_mut_ptr() as u64;
        // SAFETY: `target` is a live local, not borrowed during the call.
        unsafe { me.write(at, &[9, 9, 9, 9]) }.unwrap();
        assert_eq!(std::hint::black_box(target), [9, 9, 9, 9]);
        // SAFETY: the null page and the top of the address space are never mapped: both fault.
        unsafe {
            assert_eq!(me.read(8, &mut dst), Err(Errno::EFAULT));
            assert_eq!(me.read(u64::MAX - 1, &mut dst), Err(Errno::EFAULT));
        }
        assert!(!me.is_gone());
        assert!(me.same_as(&OwnerProcess::open(std::process::id()).unwrap()));
        assert_eq!(OwnerProcess::open(0).unwrap_err(), Errno::ESRCH);
    }

    #[test]
    fn an_exited_owner_is_gone() {
        let mut child = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let owner = OwnerProcess::open(child.id()).unwrap();
        assert!(!owner.is_gone());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(owner.has_exited());
        assert!(owner.mm_gone());
        // SAFETY: another process's memory (a child's), and gone besides.
        assert_eq!(unsafe { owner.read(0x1000, &mut [0u8; 1]) }, Err(Errno::EFAULT));
        assert_eq!(OwnerProcess::open(child.id()).unwrap_err(), Errno::ESRCH);
    }
}
