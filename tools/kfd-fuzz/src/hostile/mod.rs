//! Hostile operations of the node target (issue 13): what a client can do to the root daemon
//! with the files and processes it owns, besides ioctls. Each is a real operation on the real
//! node, run by a node child between its requests:
//!
//! - `ftruncate` (shrink to nothing, to one page, to half; grow to double) and
//!   `fallocate(PUNCH_HOLE | KEEP_SIZE)` of the client's own backing files, every kind it has
//!   (VRAM and GTT buffers, doorbell and MMIO-remap allocations, a queue's doorbell slice, the
//!   device-made event page), found by the path scheme the client sees
//!   (`<runtime dir>/<pid>/{kfd,render}/<offset>`, cuse_kfd::memory::backing), then a kick so the
//!   daemon touches its mappings of them. The daemon must outlive it; the client may get errors.
//! - a swap of a client-visible directory or file for a symlink to the canary directory, or a
//!   symlink planted where the daemon makes its next file. The daemon owns every directory it
//!   walks, so for a client of another uid each attempt must fail; one that succeeds is an
//!   escape. (Root can rename anything: a root child skips these.)
//! - fd passing: a helper process opens the node and passes its fd over SCM_RIGHTS, and gets
//!   ours; a request on a file of another process answers EBADF (amdkfd's rule, see
//!   cuse_kfd::owner), before and after that process exits.
//! - exec: a helper opens the node, registers USERPTR memory as a queue's read and write
//!   pointers, and execs `kfd-fuzz --node-exec-probe` keeping the fd. The new image maps a
//!   canary page at the old USERPTR address: the daemon must never write it, the old fd must
//!   answer EBADF once the daemon sees the exec, and a new open gets a fresh context.
//! - a client in a new pid namespace (`unshare(CLONE_NEWPID)` and fork): its open is refused
//!   (EPERM) or gives it a context of its own, never the forking client's.

pub mod sys;

use crate::model::Model;
use crate::rng::Rng;
use nix::errno::Errno;
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use uapi::kfd::*;

/// One hostile operation (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Hostile {
    /// `ftruncate` of `target`'s backing file.
    Truncate { target: Backing, to: Length },
    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)` of `pages` pages from page `page` (modulo the file).
    PunchHole { target: Backing, page: u32, pages: u32 },
    /// A client-visible path swapped for a symlink, or a symlink planted.
    SymlinkSwap { which: Swap },
    /// Descriptors passed both ways over SCM_RIGHTS with a helper process, and used.
    FdPass,
    /// A helper with USERPTR memory under a queue execs, keeping its fd.
    Exec,
    /// A client in a new pid namespace.
    PidNs,
}

/// A backing file of the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backing {
    /// The buffer with this handle.
    Buffer(u64),
    /// The doorbell slice of the queue with this id.
    Doorbell(u32),
    /// The event page the device made (its mmap offset).
    EventPage(u64),
}

/// The new length of a truncated file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Length {
    Zero,
    OnePage,
    Half,
    Double,
}

/// What a symlink swap attacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Swap {
    /// `<runtime dir>/<pid>`.
    ClientDir,
    /// `<runtime dir>/<pid>/render`.
    Render,
    /// `<runtime dir>/<pid>/kfd`.
    Kfd,
    /// The backing file of a buffer.
    File(Backing),
    /// A symlink in `<pid>/render` named as the file of an offset the daemon may hand out next.
    Plant(u64),
}

impl Hostile {
    /// The name of the operation in the summary.
    pub fn name(&self) -> &'static str {
        match self {
            Hostile::Truncate { .. } => "TRUNCATE",
            Hostile::PunchHole { .. } => "PUNCH_HOLE",
            Hostile::SymlinkSwap { .. } => "SYMLINK_SWAP",
            Hostile::FdPass => "FD_PASS",
            Hostile::Exec => "EXEC",
            Hostile::PidNs => "PID_NS",
        }
    }

    /// Every name [`Hostile::name`] gives.
    pub const NAMES: [&'static str; 6] = ["TRUNCATE", "PUNCH_HOLE", "SYMLINK_SWAP", "FD_PASS", "EXEC", "PID_NS"];

    /// Forks a helper process (the expensive ones under emulation).
    pub fn forks(&self) -> bool {
        matches!(self, Hostile::FdPass | Hostile::Exec | Hostile::PidNs)
    }

    /// A hostile operation for a client whose model is `m` and whose device-made event pages
    /// are at `event_pages`. Forking operations are rarer: each costs a fork (and exec) of a
    /// large binary, the slowest thing there is under TCG.
    pub fn generate(rng: &mut Rng, m: &Model, event_pages: &[u64]) -> Hostile {
        let target = backing_target(rng, m, event_pages);
        match (rng.weighted(&WEIGHTS), target) {
            (0, Some(target)) => {
                let to = *rng.pick(&[Length::Zero, Length::OnePage, Length::Half, Length::Double]);
                Hostile::Truncate { target, to }
            }
            (1, Some(target)) => {
                Hostile::PunchHole { target, page: rng.below(64) as u32, pages: rng.range(1, 4) as u32 }
            }
            (3, _) => Hostile::FdPass,
            (4, _) => Hostile::Exec,
            (5, _) => Hostile::PidNs,
            (_, target) => {
                let which = match rng.below(5) {
                    0 => Swap::ClientDir,
                    1 => Swap::Render,
                    2 => Swap::Kfd,
                    3 if target.is_some() => Swap::File(target.expect("checked")),
                    _ => Swap::Plant(rng.below(1 << 20) * PAGE_SIZE),
                };
                Hostile::SymlinkSwap { which }
            }
        }
    }
}

/// Relative weights of truncate, hole punch, symlink swap, fd passing, exec and pid namespace.
/// Measured under TCG (debug build, 2 vCPUs): an exec of the helper and the probe about 2 s, an
/// fd pass about 0.2 s, a pid-namespace client about 0.3 s, the others about 15 ms (an ioctl
/// about 15 ms too, with three children at once). With one operation in 30 hostile, these give
/// per 100,000 operations about 20 execs, 85 fd passes and 65 pid-namespace clients: some
/// 15 s of a run of several minutes.
const WEIGHTS: [u32; 6] = [300, 250, 200, 20, 5, 15];

fn backing_target(rng: &mut Rng, m: &Model, event_pages: &[u64]) -> Option<Backing> {
    let mut all: Vec<Backing> = m
        .buffers
        .iter()
        .filter(|(_, b)| b.flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR == 0)
        .map(|(h, _)| Backing::Buffer(*h))
        .collect();
    all.extend(m.queues.keys().map(|q| Backing::Doorbell(*q)));
    all.extend(event_pages.iter().map(|o| Backing::EventPage(*o)));
    (!all.is_empty()).then(|| *rng.pick(&all))
}

/// What a hostile operation needs of the client running it.
pub struct Client<'a> {
    /// The client's open node.
    pub fd: &'a File,
    pub device: &'a Path,
    pub runtime_dir: &'a Path,
    pub pid: u32,
    pub gpu: u32,
    /// The root-owned directory symlinks point at (the parent watches it).
    pub canary: &'a Path,
    /// This binary (for the exec probe).
    pub exe: &'a Path,
    pub model: &'a Model,
    /// Bumped while waiting for helpers, so the child's watchdog sees progress.
    pub heartbeat: &'a AtomicU64,
}

/// What an operation gave, for the summary ("ok", an errno's name, "skipped-...").
pub type Outcome = String;

/// The failure line of an operation: starts with its kind ("escape: ", "isolation: ",
/// "hang: ", "errno: ").
pub type Failure = String;

fn errno_name(e: i32) -> String {
    format!("{:?}", Errno::from_raw(e))
}

fn io_name(e: &std::io::Error) -> String {
    errno_name(e.raw_os_error().unwrap_or(0))
}

impl Client<'_> {
    /// Runs `op`.
    pub fn run(&self, op: &Hostile) -> Result<Outcome, Failure> {
        match op {
            Hostile::Truncate { target, to } => self.truncate(*target, *to),
            Hostile::PunchHole { target, page, pages } => self.punch(*target, *page, *pages),
            Hostile::SymlinkSwap { which } => self.swap(*which),
            Hostile::FdPass => self.fd_pass(),
            Hostile::Exec => self.exec(),
            Hostile::PidNs => self.pid_ns(),
        }
    }

    fn mine(&self) -> PathBuf {
        self.runtime_dir.join(self.pid.to_string())
    }

    /// The backing file of `b` as the client names it, if the model knows it.
    fn path(&self, b: Backing) -> Option<PathBuf> {
        use cuse_kfd::memory::backing::{backing_path, doorbell_slice_offset, MmapSpace};
        use cuse_kfd::queue::doorbell::DOORBELL_SLICE_SIZE;
        let (space, offset) = match b {
            Backing::Buffer(h) => {
                let buf = self.model.buffers.get(&h)?;
                let kfd = KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP;
                let space = if buf.flags & kfd != 0 { MmapSpace::Kfd } else { MmapSpace::Render };
                (space, buf.mmap_offset)
            }
            Backing::Doorbell(q) => {
                let off = self.model.queues.get(&q)?.doorbell_offset;
                (MmapSpace::Kfd, doorbell_slice_offset(off, DOORBELL_SLICE_SIZE))
            }
            Backing::EventPage(off) => (MmapSpace::Kfd, off),
        };
        Some(backing_path(self.runtime_dir, self.pid, space, offset))
    }

    /// What kind of file `b` is, for the summary.
    fn kind_of(&self, b: Backing) -> &'static str {
        match b {
            Backing::Doorbell(_) => "queue-doorbell",
            Backing::EventPage(_) => "event-page",
            Backing::Buffer(h) => match self.model.buffers.get(&h).map_or(0, |b| b.flags) {
                f if f & KFD_IOC_ALLOC_MEM_FLAGS_VRAM != 0 => "vram",
                f if f & KFD_IOC_ALLOC_MEM_FLAGS_GTT != 0 => "gtt",
                f if f & KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL != 0 => "doorbell",
                f if f & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP != 0 => "mmio",
                _ => "buffer",
            },
        }
    }

    fn open_backing(&self, b: Backing) -> Result<File, Outcome> {
        let path = self.path(b).ok_or_else(|| "no-file".to_string())?;
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| io_name(&e))
    }

    /// Makes the daemon look at its mappings (queues' doorbells and pointers, event pages).
    fn poke(&self) {
        sys::kick(self.fd.as_raw_fd());
    }

    fn truncate(&self, b: Backing, to: Length) -> Result<Outcome, Failure> {
        let file = match self.open_backing(b) {
            Ok(f) => f,
            Err(o) => return Ok(format!("{}:{o}", self.kind_of(b))),
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let new = match to {
            Length::Zero => 0,
            Length::OnePage => PAGE_SIZE.min(len),
            Length::Half => len / 2,
            Length::Double => len.saturating_mul(2).max(PAGE_SIZE),
        };
        let r = file.set_len(new).map_or_else(|e| io_name(&e), |()| "ok".into());
        self.poke();
        Ok(format!("{}:{r}", self.kind_of(b)))
    }

    fn punch(&self, b: Backing, page: u32, pages: u32) -> Result<Outcome, Failure> {
        let file = match self.open_backing(b) {
            Ok(f) => f,
            Err(o) => return Ok(format!("{}:{o}", self.kind_of(b))),
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let npages = (len / PAGE_SIZE).max(1);
        let off = (u64::from(page) % npages) * PAGE_SIZE;
        let flags = nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE;
        let r = nix::fcntl::fallocate(file.as_raw_fd(), flags, off as i64, (u64::from(pages) * PAGE_SIZE) as i64)
            .map_or_else(|e| format!("{e:?}"), |()| "ok".into());
        self.poke();
        Ok(format!("{}:{r}", self.kind_of(b)))
    }

    fn swap(&self, which: Swap) -> Result<Outcome, Failure> {
        if nix::unistd::geteuid().is_root() {
            // Root may rename anything: the attempt says nothing about the daemon.
            return Ok("skipped-root".into());
        }
        let mine = self.mine();
        let (path, plant) = match which {
            Swap::ClientDir => (mine, false),
            Swap::Render => (mine.join("render"), false),
            Swap::Kfd => (mine.join("kfd"), false),
            Swap::File(b) => match self.path(b) {
                Some(p) => (p, false),
                None => return Ok("no-file".into()),
            },
            Swap::Plant(off) => (mine.join("render").join(format!("{off:016x}")), true),
        };
        if plant {
            return match std::os::unix::fs::symlink(self.canary, &path) {
                Ok(()) => Err(format!(
                    "escape: a client of uid {} planted a symlink {} in a directory the daemon owns",
                    nix::unistd::geteuid(),
                    path.display()
                )),
                Err(e) => Ok(io_name(&e)),
            };
        }
        let moved = path.with_extension("moved");
        match std::fs::rename(&path, &moved) {
            Ok(()) => {
                let linked = std::os::unix::fs::symlink(self.canary, &path).is_ok();
                Err(format!(
                    "escape: a client of uid {} renamed {} (a path the daemon owns){}",
                    nix::unistd::geteuid(),
                    path.display(),
                    if linked { " and put a symlink to the canary in its place" } else { "" }
                ))
            }
            Err(e) => {
                self.poke();
                Ok(io_name(&e))
            }
        }
    }

    fn device_c(&self) -> CString {
        CString::new(self.device.as_os_str().as_bytes()).expect("a device path has no NUL")
    }

    fn tick(&self) {
        self.heartbeat.fetch_add(1, Ordering::Relaxed);
    }

    /// A helper opens the node and passes us its fd; we pass it ours. Each uses the other's
    /// (EBADF), we use the helper's again after it exited (EBADF) and close it (the last file of
    /// a context whose owner has gone, released by a process that never owned it).
    fn fd_pass(&self) -> Result<Outcome, Failure> {
        let dev = self.device_c();
        let (mine, theirs) = sys::socketpair().map_err(|e| format!("errno: socketpair: {}", errno_name(e)))?;
        let (a, b) = (mine.as_raw_fd(), theirs.as_raw_fd());
        let handle = self.model.buffers.keys().next().copied().unwrap_or(1);
        // SAFETY: the child below uses only the async-signal-safe calls of `sys`.
        let pid = unsafe { sys::fork() }.map_err(|e| format!("errno: fork: {}", errno_name(e)))?;
        if pid == 0 {
            sys::close(a);
            let code = (|| {
                let Ok(fd) = sys::open_rw(&dev, true) else { return 10 };
                if sys::version(fd) != 0 {
                    return 11;
                }
                if sys::send_fd(b, fd) != 0 {
                    return 12;
                }
                let Ok(theirs) = sys::recv_fd(b) else { return 13 };
                // The passing process owns that file: to us it is EBADF, whatever it names.
                if sys::version(theirs) != libc::EBADF || sys::free(theirs, handle) != libc::EBADF {
                    return 14;
                }
                let _ = sys::read_byte(b);
                0
            })();
            sys::exit(code);
        }
        drop(theirs);
        let result = (|| {
            let got = sys::recv_fd(a).map_err(|e| format!("errno: receiving the helper's fd: {}", errno_name(e)))?;
            // SAFETY: recv_fd made `got`, a descriptor nothing else owns.
            let got = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(got) };
            if sys::send_fd(a, self.fd.as_raw_fd()) != 0 {
                return Err("errno: cannot send our fd to the helper".to_string());
            }
            let g = got.as_raw_fd();
            let (v, f) = (sys::version(g), sys::free(g, handle));
            if v != libc::EBADF || f != libc::EBADF {
                return Err(format!(
                    "isolation: a file another (live) process opened answered GET_VERSION {} and FREE {} here (amdkfd: EBADF)",
                    errno_name(v),
                    errno_name(f)
                ));
            }
            sys::write_all(a, &[1]);
            Ok(got)
        })();
        // Whatever happened, the helper's last read ends now.
        drop(mine);
        let code = sys::wait_for(pid, Duration::from_secs(4), &|| self.tick());
        let got = result?;
        match code {
            Some(0) => {}
            Some(14) => {
                return Err(
                    "isolation: the helper's request on our passed fd did not answer EBADF (amdkfd: EBADF)".into()
                )
            }
            Some(c) => return Ok(format!("helper-exit-{c}")),
            None => return Err("hang: the fd-passing helper did not finish within 4 s".into()),
        }
        // The helper has gone: its context ends; its file, held here, still answers EBADF.
        let v = sys::version(got.as_raw_fd());
        if v != libc::EBADF {
            return Err(format!(
                "isolation: the file of an exited process answered GET_VERSION {} in the process it was passed to",
                errno_name(v)
            ));
        }
        drop(got);
        Ok("ok".into())
    }

    /// The exec probe: see the module documentation and [`exec_probe`].
    fn exec(&self) -> Result<Outcome, Failure> {
        let dev = self.device_c();
        let exe = CString::new(self.exe.as_os_str().as_bytes()).expect("no NUL");
        let args: Vec<CString> = ["kfd-fuzz", "--device"]
            .iter()
            .map(|s| CString::new(*s).expect("no NUL"))
            .chain([dev.clone(), CString::new("--node-exec-probe").expect("no NUL")])
            .collect();
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // The USERPTR page: ours, inherited by the helper (its copy is the helper's memory).
        // SAFETY: a fresh private anonymous mapping of one page, unmapped below.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE_SIZE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Ok("skipped-mmap".into());
        }
        let addr = page as u64;
        let gpu = self.gpu;
        // SAFETY: the child below uses only the async-signal-safe calls of `sys` and execv.
        let pid = unsafe { sys::fork() };
        let pid = match pid {
            Ok(p) => p,
            Err(e) => {
                unmap(page);
                return Err(format!("errno: fork: {}", errno_name(e)));
            }
        };
        if pid == 0 {
            let code = (|| {
                let Ok(fd) = sys::open_rw(&dev, false) else { return 40 };
                let ring_va = RAW_RING_VA;
                // SAFETY: `addr` is this process's page (the copy of the parent's mapping), which
                // the device may read and write until it goes (at the exec below).
                let Ok(user) = (unsafe {
                    sys::alloc(
                        fd,
                        gpu,
                        addr,
                        PAGE_SIZE,
                        KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
                        addr,
                    )
                }) else {
                    return 41;
                };
                let vram = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
                // SAFETY: not USERPTR: no host memory is registered.
                let Ok(ring) = (unsafe { sys::alloc(fd, gpu, ring_va, PAGE_SIZE, vram, 0) }) else { return 42 };
                if sys::map(fd, user, gpu) != 0 || sys::map(fd, ring, gpu) != 0 {
                    return 43;
                }
                let mut q = CreateQueueArgs {
                    ring_base_address: ring_va,
                    write_pointer_address: addr,
                    read_pointer_address: addr + 8,
                    ring_size: 1024,
                    gpu_id: gpu,
                    queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
                    queue_percentage: 100,
                    ..Default::default()
                };
                // SAFETY: CREATE_QUEUE reads and writes its struct, which `q` is; the addresses
                // in it are GPU virtual addresses the device resolves through its own buffers.
                if unsafe {
                    sys::ioctl(fd, uapi::ioctl::AMDKFD_IOC_CREATE_QUEUE, uapi::IntoBytes::as_mut_bytes(&mut q))
                } != 0
                {
                    return 44;
                }
                // A write index past the read index: the engine has work to look at.
                // SAFETY: `addr` is this process's page, 16 bytes in.
                unsafe { std::ptr::write_volatile(page.cast::<u64>(), 1) };
                sys::kick(fd);
                let info = ExecInfo { addr, user_handle: user };
                let mut pipe = [0; 2];
                // SAFETY: pipe(2) writes two descriptors into `pipe`.
                if unsafe { libc::pipe(pipe.as_mut_ptr()) } != 0 {
                    return 45;
                }
                sys::write_all(pipe[1], &info.to_bytes());
                sys::close(pipe[1]);
                // SAFETY: dup2 on descriptors of this process.
                unsafe {
                    libc::dup2(fd, PROBE_KFD_FD);
                    libc::dup2(pipe[0], PROBE_INFO_FD);
                }
                // SAFETY: `exe` and `argv` (NUL-terminated strings, null-terminated array) were
                // built before the fork; execv only returns on failure.
                unsafe { libc::execv(exe.as_ptr(), argv.as_ptr()) };
                46
            })();
            sys::exit(code);
        }
        let code = sys::wait_for(pid, Duration::from_secs(6), &|| self.tick());
        unmap(page);
        match code {
            Some(0) => Ok("ok".into()),
            Some(c @ 40..=46) => Ok(format!("setup-failed-{c}")),
            Some(30) => Ok("skipped-address-taken".into()),
            Some(20) => Err(format!(
                "escape: the daemon wrote into the exec'd image's page at the old USERPTR address {addr:#x}"
            )),
            Some(21) => Err("isolation: the fd of an exec'd owner still answered a second after the exec".into()),
            Some(22) => Err("errno: a new open by the exec'd image was refused".into()),
            Some(23) => Err("isolation: the exec'd image's fresh context freed the old image's buffer".into()),
            Some(c) => Err(format!("crash: the exec probe ended with code {c}")),
            None => Err("hang: the exec probe did not finish within 6 s".into()),
        }
    }

    /// A client in a new pid namespace (root: CLONE_NEWPID; others with a user namespace).
    fn pid_ns(&self) -> Result<Outcome, Failure> {
        let dev = self.device_c();
        let handle = self.model.buffers.keys().next().copied().unwrap_or(1 << 32 | 1);
        let gpu = self.gpu;
        // SAFETY: the child below uses only async-signal-safe calls.
        let pid = unsafe { sys::fork() }.map_err(|e| format!("errno: fork: {}", errno_name(e)))?;
        if pid == 0 {
            // SAFETY: unshare(2) of this single-threaded process's pid namespace (for its
            // children).
            let shared = unsafe {
                libc::unshare(libc::CLONE_NEWPID) == 0 || libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) == 0
            };
            if !shared {
                sys::exit(50);
            }
            // SAFETY: the grandchild uses only async-signal-safe calls.
            match unsafe { sys::fork() } {
                Ok(0) => {
                    let code = (|| {
                        let fd = match sys::open_rw(&dev, true) {
                            Ok(fd) => fd,
                            Err(libc::EPERM) => return 51,
                            Err(_) => return 52,
                        };
                        if sys::version(fd) != 0 {
                            return 53;
                        }
                        // Its own context: nothing of the forking client's is there.
                        if sys::free(fd, handle) != libc::EINVAL {
                            return 54;
                        }
                        let gtt = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
                        // SAFETY: not USERPTR: no host memory is registered.
                        match unsafe { sys::alloc(fd, gpu, RAW_RING_VA, PAGE_SIZE, gtt, 0) } {
                            Ok(h) if sys::free(fd, h) == 0 => 0,
                            Ok(_) => 55,
                            Err(libc::ENOMEM) => 0,
                            Err(_) => 56,
                        }
                    })();
                    sys::exit(code)
                }
                Ok(child) => {
                    let mut status = 0;
                    // SAFETY: waitpid writes `status`.
                    unsafe { libc::waitpid(child, &mut status, 0) };
                    sys::exit(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 57 })
                }
                Err(_) => sys::exit(58),
            }
        }
        match sys::wait_for(pid, Duration::from_secs(4), &|| self.tick()) {
            Some(0) => Ok("ok".into()),
            Some(50) => Ok("skipped-no-namespace".into()),
            Some(51) => Ok("refused".into()),
            Some(53) => Err("errno: GET_VERSION failed for a client in a new pid namespace".into()),
            Some(54) => Err(format!(
                "isolation: a client in a new pid namespace freed handle {handle:#x} of its parent (or did not answer EINVAL)"
            )),
            Some(55 | 56) => Err("errno: ALLOC/FREE of a client in a new pid namespace failed".into()),
            Some(c) => Err(format!("crash: the pid-namespace client ended with code {c}")),
            None => Err("hang: the pid-namespace client did not finish within 4 s".into()),
        }
    }
}

fn unmap(page: *mut libc::c_void) {
    // SAFETY: unmaps the one-page mapping `exec` made.
    unsafe { libc::munmap(page, PAGE_SIZE as usize) };
}

/// A GPU VA for helper buffers, far from the generator's.
const RAW_RING_VA: u64 = 0x7_0000_0000;
/// Where the exec probe finds its old kfd fd and what its predecessor registered.
pub const PROBE_KFD_FD: RawFd = 100;
pub const PROBE_INFO_FD: RawFd = 101;

/// What the exec'd image learns from its predecessor.
#[derive(Debug, Clone, Copy)]
struct ExecInfo {
    addr: u64,
    user_handle: u64,
}

impl ExecInfo {
    fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..].copy_from_slice(&self.user_handle.to_le_bytes());
        b
    }

    fn from_bytes(b: &[u8; 16]) -> ExecInfo {
        ExecInfo {
            addr: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            user_handle: u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
        }
    }
}

/// The canary byte the exec'd image fills the old USERPTR page with.
const CANARY: u8 = 0x5A;

/// `kfd-fuzz --node-exec-probe`: the image exec'd by [`Client::exec`]'s helper, with the old
/// kfd fd at [`PROBE_KFD_FD`] and [`ExecInfo`] readable at [`PROBE_INFO_FD`]. Its exit code is
/// the verdict `exec` reads.
pub fn exec_probe(device: &Path) -> i32 {
    // SAFETY: the predecessor left these two descriptors for us; nothing else owns them.
    let (old, info) = unsafe {
        (
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(PROBE_KFD_FD),
            <File as std::os::fd::FromRawFd>::from_raw_fd(PROBE_INFO_FD),
        )
    };
    let mut b = [0u8; 16];
    if std::io::Read::read_exact(&mut &info, &mut b).is_err() {
        return 47;
    }
    let info = ExecInfo::from_bytes(&b);
    // The old USERPTR address, now ours: filled with the canary.
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; it fails instead.
    let p = unsafe {
        libc::mmap(
            info.addr as *mut libc::c_void,
            PAGE_SIZE as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED || p as u64 != info.addr {
        return 30;
    }
    // SAFETY: `p` is our fresh page of PAGE_SIZE bytes; no reference to it exists.
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), CANARY, PAGE_SIZE as usize) };
    // Whatever the old context still does meanwhile: kick it through the old fd (it may still
    // answer until the daemon sees the exec) and through a new open (a fresh context).
    sys::kick(old.as_raw_fd());
    let Ok(new) = std::fs::OpenOptions::new().read(true).write(true).open(device) else { return 22 };
    sys::kick(new.as_raw_fd());
    if sys::free(new.as_raw_fd(), info.user_handle) != libc::EINVAL {
        return 23;
    }
    let t0 = std::time::Instant::now();
    while sys::version(old.as_raw_fd()) != libc::EBADF {
        if t0.elapsed() > Duration::from_secs(1) {
            return 21;
        }
        sys::kick(old.as_raw_fd());
        std::thread::sleep(Duration::from_millis(2));
    }
    sys::kick(new.as_raw_fd());
    std::thread::sleep(Duration::from_millis(20));
    // SAFETY: reads our own page (nothing else in this process writes it).
    let intact = (0..PAGE_SIZE as usize).all(|i| unsafe { std::ptr::read_volatile(p.cast::<u8>().add(i)) } == CANARY);
    if intact {
        0
    } else {
        20
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BufferModel, QueueModel};
    use std::collections::BTreeSet;

    fn model() -> Model {
        let mut m = Model::new();
        let buffer =
            |flags, mmap_offset| BufferModel { va: 0, size: 8192, gpu: 1, flags, mmap_offset, mapped: BTreeSet::new() };
        m.buffers.insert(1, buffer(KFD_IOC_ALLOC_MEM_FLAGS_VRAM, 0x10_0000));
        m.buffers.insert(2, buffer(KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, 0x7f00_0000_0000));
        m.buffers.insert(3, buffer(KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP, 0x4000_0000_0000));
        m.queues.insert(5, QueueModel { gpu: 1, doorbell_offset: 0x8_0000_0000_0000 + 3 * 8 });
        m
    }

    #[test]
    fn every_operation_is_generated_and_only_files_are_targets() {
        let (m, mut rng) = (model(), Rng::new(3));
        let mut names = BTreeSet::new();
        for _ in 0..5000 {
            let op = Hostile::generate(&mut rng, &m, &[0x9_0000]);
            names.insert(op.name());
            let target = match op {
                Hostile::Truncate { target, .. } | Hostile::PunchHole { target, .. } => Some(target),
                Hostile::SymlinkSwap { which: Swap::File(target) } => Some(target),
                _ => None,
            };
            assert_ne!(target, Some(Backing::Buffer(2)), "a USERPTR buffer has no backing file");
        }
        assert_eq!(names, Hostile::NAMES.into_iter().collect());
    }

    #[test]
    fn backing_files_are_named_as_the_daemon_names_them() {
        let (m, fd) = (model(), File::open("/dev/null").unwrap());
        let hb = AtomicU64::new(0);
        let c = Client {
            fd: &fd,
            device: Path::new("/dev/kfd"),
            runtime_dir: Path::new("/run/cuse-kfd"),
            pid: 42,
            gpu: 1,
            canary: Path::new("/"),
            exe: Path::new("/bin/true"),
            model: &m,
            heartbeat: &hb,
        };
        let p = |b| c.path(b).map(|p| p.display().to_string());
        assert_eq!(p(Backing::Buffer(1)).unwrap(), "/run/cuse-kfd/42/render/0000000000100000");
        assert_eq!(p(Backing::Buffer(3)).unwrap(), "/run/cuse-kfd/42/kfd/0000400000000000");
        // A queue's doorbell lives in its process's doorbell slice.
        assert_eq!(p(Backing::Doorbell(5)).unwrap(), "/run/cuse-kfd/42/kfd/0008000000000000");
        assert_eq!(p(Backing::EventPage(0x9_0000)).unwrap(), "/run/cuse-kfd/42/kfd/0000000000090000");
        assert_eq!(p(Backing::Buffer(99)), None);
    }
}
