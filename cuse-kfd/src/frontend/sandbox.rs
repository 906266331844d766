//! The daemon's confinement (`cuse-kfd serve`, the `cli` feature only): it checks the
//! directories it is given, drops the capabilities it does not need before it starts any thread,
//! and, once every set-up thread runs, turns on no_new_privs and a seccomp allow-list for all
//! its threads (TSYNC; threads started later inherit it).
//!
//! An unlisted system call fails with EPERM rather than killing the daemon: a path this list
//! missed costs one request an error, not every client its device. execve, execveat, fork,
//! vfork, socket, connect, bind, listen, ptrace, mount, setuid, capset, unshare, setns, bpf and
//! the rest of what a confined device has no use for are not listed.

use caps::{CapSet, Capability, CapsHashSet};
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// What an unlisted system call returns.
pub const DENIED_ERRNO: i32 = libc::EPERM;

/// Every system call the running daemon makes, with why. The device tier (`negative`,
/// `cuse_device`, `fuzz_node`, `confinement`) runs every path under this list.
pub const ALLOWED: &[(libc::c_long, &str)] = &[
    // I/O on the CUSE and FUSE channels, backing files, /proc, the control socket, logs.
    (libc::SYS_read, "CUSE/FUSE requests, /proc files, control commands"),
    (libc::SYS_write, "replies, log lines on stderr"),
    (libc::SYS_readv, "std's vectored reads"),
    (libc::SYS_writev, "CUSE/FUSE replies (header and body)"),
    (libc::SYS_pread64, "backing files at an offset; USERPTR memory through /proc/<pid>/mem"),
    (libc::SYS_pwrite64, "backing files at an offset; USERPTR memory through /proc/<pid>/mem"),
    (libc::SYS_lseek, "std's file reads"),
    (libc::SYS_openat, "backing files, /proc/<pid>/{status,stat,mem} of a client, the topology tree"),
    (libc::SYS_openat2, "backing files beneath the runtime directory (RESOLVE_BENEATH)"),
    (libc::SYS_close, "every fd"),
    (libc::SYS_close_range, "std and glibc close fds in ranges"),
    (libc::SYS_dup, "duplicated fds of backing files"),
    (libc::SYS_dup3, "duplicated fds of backing files"),
    (libc::SYS_fcntl, "fd flags (CLOEXEC, nonblocking), file seals"),
    (libc::SYS_ioctl, "FIONBIO and the FUSE device's ioctls"),
    (libc::SYS_fstat, "file sizes"),
    (libc::SYS_newfstatat, "stat and lstat through glibc"),
    (libc::SYS_statx, "std's metadata"),
    (libc::SYS_fstatfs, "free space of the runtime filesystem"),
    (libc::SYS_statfs, "free space of the runtime filesystem"),
    (libc::SYS_getdents64, "listing /proc/<pid>/task and the runtime directory"),
    (libc::SYS_readlinkat, "/proc/<pid>/fd/<n> of a client (the render fd of ACQUIRE_VM)"),
    (libc::SYS_ftruncate, "sizing backing files"),
    (libc::SYS_fallocate, "reserving backing-file space"),
    (libc::SYS_fsync, "flushing the trace file"),
    (libc::SYS_fdatasync, "flushing the trace file"),
    (libc::SYS_mkdirat, "per-client directories"),
    (libc::SYS_unlinkat, "removing backing files, client directories, the topology tree"),
    (libc::SYS_linkat, "IPC: a shared buffer's backing file under its share handle, and in each importer's directory"),
    (libc::SYS_renameat, "replacing files atomically"),
    (libc::SYS_renameat2, "replacing files atomically; moving an older context's backing directory aside"),
    (libc::SYS_fchown, "giving a backing file to its client"),
    (libc::SYS_fchownat, "giving a backing file or directory to its client"),
    (libc::SYS_fchmod, "backing file modes"),
    (libc::SYS_fchmodat, "backing file and directory modes"),
    (libc::SYS_fsetxattr, "the ACL that lets a client's uid, and no other, search its directory"),
    (libc::SYS_memfd_create, "anonymous backing memory"),
    (libc::SYS_flock, "advisory locks on backing files"),
    // Memory: the allocator and the shared mappings of backing files.
    (libc::SYS_mmap, "the allocator, backing-file mappings"),
    (libc::SYS_munmap, "the allocator, backing-file mappings"),
    (libc::SYS_mremap, "the allocator"),
    (libc::SYS_mprotect, "the allocator, thread stack guards"),
    (libc::SYS_madvise, "the allocator, MADV_DONTFORK on shared mappings"),
    (libc::SYS_brk, "the allocator"),
    (libc::SYS_process_vm_readv, "ioctl pointer arguments of a client"),
    (libc::SYS_process_vm_writev, "ioctl replies through a client's pointers"),
    // Threads, time, signals.
    (libc::SYS_clone, "threads (std falls back to clone when clone3 is refused)"),
    (libc::SYS_clone3, "threads (the engine may start more after set-up)"),
    (libc::SYS_set_robust_list, "new threads"),
    (libc::SYS_rseq, "new threads (glibc)"),
    (libc::SYS_sigaltstack, "std's stack-overflow handler on new threads"),
    (libc::SYS_exit, "a thread ends"),
    (libc::SYS_exit_group, "the daemon ends"),
    (libc::SYS_futex, "locks, condition variables, thread joins"),
    (libc::SYS_sched_yield, "spin locks"),
    (libc::SYS_sched_getaffinity, "available_parallelism"),
    (libc::SYS_nanosleep, "polling loops"),
    (libc::SYS_clock_nanosleep, "polling loops"),
    (libc::SYS_clock_gettime, "timestamps (usually the vDSO)"),
    (libc::SYS_gettimeofday, "timestamps (usually the vDSO)"),
    (libc::SYS_rt_sigprocmask, "the blocked SIGINT/SIGTERM, new threads"),
    (libc::SYS_rt_sigaction, "std's handlers"),
    (libc::SYS_rt_sigreturn, "returning from a handler"),
    (libc::SYS_rt_sigtimedwait, "the main thread waits for SIGINT/SIGTERM"),
    (libc::SYS_restart_syscall, "a syscall restarted after a signal"),
    (libc::SYS_kill, "the server wakes the main thread (SIGTERM to itself)"),
    (libc::SYS_tgkill, "abort on panic, thread-directed signals"),
    (libc::SYS_getpid, "the server's own pid"),
    (libc::SYS_gettid, "thread ids"),
    (libc::SYS_getuid, "identity checks"),
    (libc::SYS_geteuid, "identity checks"),
    (libc::SYS_getgid, "identity checks"),
    (libc::SYS_getegid, "identity checks"),
    (libc::SYS_getrandom, "HashMap seeds"),
    (libc::SYS_prctl, "thread names (PR_SET_NAME)"),
    (libc::SYS_capget, "reading its own capabilities"),
    // Waiting and waking.
    (libc::SYS_ppoll, "waits on fds; the owner watch polls the clients' pidfds"),
    (libc::SYS_pselect6, "waits on fds"),
    (libc::SYS_epoll_create1, "waits on fds"),
    (libc::SYS_epoll_ctl, "waits on fds"),
    (libc::SYS_epoll_pwait, "waits on fds"),
    (libc::SYS_eventfd2, "wake-ups between threads"),
    (libc::SYS_pipe2, "wake-ups between threads"),
    (libc::SYS_pidfd_open, "a client's exit, watched through its pidfd"),
    (libc::SYS_waitid, "a client's exit, through its pidfd"),
    // The control socket (bound before the filter; connections afterwards).
    (libc::SYS_accept4, "control connections"),
    (libc::SYS_recvfrom, "control commands"),
    (libc::SYS_recvmsg, "control commands"),
    (libc::SYS_sendto, "control answers"),
    (libc::SYS_sendmsg, "control answers"),
    (libc::SYS_shutdown, "control connections"),
    (libc::SYS_setsockopt, "control connections' timeouts"),
    (libc::SYS_getsockopt, "control connections' timeouts"),
    // Teardown.
    (libc::SYS_umount2, "unmounting the --sysfs-mount tree at shutdown"),
];

/// The system calls of x86_64 that other architectures only have as the *at forms.
#[cfg(target_arch = "x86_64")]
const ALLOWED_LEGACY: &[(libc::c_long, &str)] = &[
    (libc::SYS_open, "older code paths of glibc"),
    (libc::SYS_stat, "older code paths of glibc"),
    (libc::SYS_lstat, "older code paths of glibc"),
    (libc::SYS_poll, "waits on fds; the owner watch polls the clients' pidfds"),
    (libc::SYS_select, "waits on fds"),
    (libc::SYS_epoll_wait, "waits on fds"),
    (libc::SYS_mkdir, "per-client directories"),
    (libc::SYS_rmdir, "removing client directories, the topology tree"),
    (libc::SYS_unlink, "removing backing files"),
    (libc::SYS_rename, "replacing files atomically"),
    (libc::SYS_chown, "giving a backing file or directory to its client"),
    (libc::SYS_lchown, "giving a backing file or directory to its client"),
    (libc::SYS_chmod, "backing file and directory modes"),
    (libc::SYS_readlink, "/proc/<pid>/fd/<n> of a client"),
    (libc::SYS_pipe, "wake-ups between threads"),
    (libc::SYS_dup2, "duplicated fds"),
    (libc::SYS_accept, "control connections"),
];
#[cfg(not(target_arch = "x86_64"))]
const ALLOWED_LEGACY: &[(libc::c_long, &str)] = &[];

/// Every allowed system call (both tables).
pub fn allowed() -> impl Iterator<Item = (libc::c_long, &'static str)> {
    ALLOWED.iter().chain(ALLOWED_LEGACY).copied()
}

/// The errors of confinement: each says which step failed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("building the seccomp filter: {0}")]
    Filter(#[from] seccompiler::BackendError),
    #[error("installing the seccomp filter: {0}")]
    Install(#[from] seccompiler::Error),
    #[error("setting no_new_privs: {0}")]
    NoNewPrivs(nix::Error),
    #[error("dropping capabilities: {0}")]
    Caps(#[from] caps::errors::CapsError),
    #[error("{0}")]
    Untrusted(String),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

pub type Result<T> = std::result::Result<T, SandboxError>;

/// The allow-list as a BPF program for this machine's architecture: listed calls are allowed
/// with any arguments, the rest fail with [`DENIED_ERRNO`].
pub fn filter() -> Result<BpfProgram> {
    let rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = allowed().map(|(nr, _)| (nr, Vec::new())).collect();
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let filter = SeccompFilter::new(rules, SeccompAction::Errno(DENIED_ERRNO as u32), SeccompAction::Allow, arch)?;
    Ok(filter.try_into()?)
}

/// Installs the allow-list on every thread of the process (SECCOMP_FILTER_FLAG_TSYNC) after
/// setting no_new_privs. Call it once every thread set-up needs has started.
pub fn restrict_syscalls() -> Result<()> {
    nix::sys::prctl::set_no_new_privs().map_err(SandboxError::NoNewPrivs)?;
    let program = filter()?;
    seccompiler::apply_filter_all_threads(&program)?;
    Ok(())
}

/// The capabilities the running daemon keeps, and why:
/// * CAP_CHOWN: backing files are given to their client (`fchown`), the node to its group;
/// * CAP_DAC_OVERRIDE: not for the backing store (its directories are the daemon's, and it works
///   on its files through descriptors it holds), but for /proc of a client of another uid:
///   opening `/proc/<pid>/mem` read-write (`owner.rs`; the file is 0600 and owned by the
///   client's uid, and the VFS permission check comes before the ptrace check, so
///   CAP_SYS_PTRACE alone gets EACCES), and walking the client's `/proc/<pid>/fd/` (0500) to
///   readlink a drm fd (`ioctl/memory.rs`). Without it every open of the node by another uid
///   fails with EACCES (the device tier's backing_hostile and confinement show it);
/// * CAP_SYS_PTRACE: process_vm_readv/writev on a client of another uid (ioctl pointers),
///   opening its /proc/<pid>/mem (USERPTR memory, see `owner.rs`) and readlink of its
///   /proc/<pid>/fd entries;
/// * CAP_SYS_ADMIN, only with `--sysfs-mount`: mounting the topology tree, and unmounting it at
///   shutdown.
///
/// Everything else (CAP_SETUID, CAP_NET_*, CAP_SYS_MODULE, CAP_MKNOD, ...) is dropped from
/// every set, the bounding set included, so no exec could get it back either.
pub fn kept_caps(sysfs_mount: bool) -> CapsHashSet {
    let mut keep: CapsHashSet =
        [Capability::CAP_CHOWN, Capability::CAP_DAC_OVERRIDE, Capability::CAP_SYS_PTRACE].into_iter().collect();
    if sysfs_mount {
        keep.insert(Capability::CAP_SYS_ADMIN);
    }
    keep
}

/// Drops every capability outside `keep` from the calling thread's bounding, effective,
/// permitted, inheritable and ambient sets. Call it before any thread starts: threads inherit
/// the sets of the thread that creates them, and capset changes only the calling thread.
pub fn drop_caps(keep: &CapsHashSet) -> Result<()> {
    // Each set is written only if it holds more than it should: under the shipped unit the
    // bounding set is already `keep` and capset is filtered out (SystemCallFilter).
    if !caps::read(None, CapSet::Ambient)?.is_empty() {
        caps::clear(None, CapSet::Ambient)?;
    }
    if !caps::read(None, CapSet::Inheritable)?.is_empty() {
        caps::clear(None, CapSet::Inheritable)?;
    }
    // The bounding set first: dropping from it needs CAP_SETPCAP, which goes next.
    for cap in caps::read(None, CapSet::Bounding)? {
        if !keep.contains(&cap) {
            caps::drop(None, CapSet::Bounding, cap)?;
        }
    }
    // Effective before permitted: effective must stay a subset of permitted.
    let effective = caps::read(None, CapSet::Effective)?;
    let kept: CapsHashSet = effective.intersection(keep).copied().collect();
    if effective != kept {
        caps::set(None, CapSet::Effective, &kept)?;
    }
    if caps::read(None, CapSet::Permitted)? != kept {
        caps::set(None, CapSet::Permitted, &kept)?;
    }
    Ok(())
}

/// The mask of [`kept_caps`] as /proc/<pid>/status prints it (CapEff).
pub fn cap_mask(set: &CapsHashSet) -> u64 {
    set.iter().fold(0, |m, c| m | c.bitmask())
}

/// Whether `meta` (from lstat) is a directory no one but root can change: owned by root, not a
/// symlink, not writable by group or others.
fn root_only(meta: &std::fs::Metadata) -> bool {
    meta.file_type().is_dir() && meta.uid() == 0 && meta.permissions().mode() & 0o022 == 0
}

/// Checks that no one but root can replace `dir` or any directory above it: from `/` down,
/// every directory is owned by root and is not writable by group or others, except that a
/// root-owned sticky directory (such as /tmp, 1777) may be writable by all: there only an
/// entry's owner can rename or remove it, and the entry below it must itself be root's. `dir`
/// itself must be root-only, never sticky-writable. A symlink on the way must be root's (only
/// root can change where it points); its target is checked the same way. Returns the resolved
/// path: the caller uses that one.
pub fn trusted_dir(dir: &Path) -> Result<PathBuf> {
    resolve(dir, false)
}

/// [`trusted_dir`], where `dir` itself may also be a root-owned sticky directory when
/// `sticky_last` (the parent of a directory the daemon creates).
fn resolve(dir: &Path, sticky_last: bool) -> Result<PathBuf> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SandboxError::Io { path, source }
    };
    let given = std::path::absolute(dir).map_err(io(dir))?;
    if given.components().any(|c| c == Component::ParentDir) {
        return Err(SandboxError::Untrusted(format!("{} has a `..` component", dir.display())));
    }
    check_walk(&given, sticky_last)?;
    let real = given.canonicalize().map_err(io(&given))?;
    check_walk(&real, sticky_last)?;
    Ok(real)
}

/// The walk of [`trusted_dir`] along one absolute path, as written.
fn check_walk(path: &Path, sticky_last: bool) -> Result<()> {
    let parts: Vec<Component> = path.components().filter(|c| matches!(c, Component::Normal(_))).collect();
    let mut at = PathBuf::from("/");
    for i in 0..=parts.len() {
        if i > 0 {
            at.push(parts[i - 1]);
        }
        let meta = std::fs::symlink_metadata(&at).map_err(|source| SandboxError::Io { path: at.clone(), source })?;
        let mode = meta.permissions().mode() & 0o7777;
        let ok = if meta.file_type().is_symlink() {
            meta.uid() == 0
        } else {
            let sticky_root = meta.uid() == 0 && meta.file_type().is_dir() && mode & 0o1000 != 0;
            root_only(&meta) || ((i < parts.len() || sticky_last) && sticky_root)
        };
        if !ok {
            return Err(SandboxError::Untrusted(format!(
                "{} is owned by uid {} with mode {mode:o}: a directory the daemon uses, and each one above \
                 it, must be root's and not writable by others (a root-owned sticky directory such as /tmp \
                 may be above it)",
                at.display(),
                meta.uid(),
            )));
        }
    }
    Ok(())
}

/// The runtime directory, made safe to use: its parent must pass [`trusted_dir`] or be a
/// root-owned sticky directory (/tmp) above trusted ones; the directory is created (0755) if
/// missing and must then pass [`trusted_dir`] itself, so one that someone else made first in a
/// sticky parent is refused. Returns its resolved path.
pub fn runtime_dir(dir: &Path) -> Result<PathBuf> {
    let name =
        dir.file_name().ok_or_else(|| SandboxError::Untrusted(format!("{} has no final component", dir.display())))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let parent = resolve(parent, true)?;
    let dir = parent.join(name);
    match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => return Err(SandboxError::Io { path: dir, source }),
    }
    trusted_dir(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn m2_the_allow_list_builds_and_leaves_out_exec_and_sockets() {
        let program = filter().expect("the allow-list compiles for this architecture");
        assert!(!program.is_empty());
        let listed: HashSet<libc::c_long> = allowed().map(|(nr, _)| nr).collect();
        assert_eq!(listed.len(), allowed().count(), "a system call listed twice");
        for (nr, name) in [
            (libc::SYS_execve, "execve"),
            (libc::SYS_execveat, "execveat"),
            (libc::SYS_socket, "socket"),
            (libc::SYS_connect, "connect"),
            (libc::SYS_bind, "bind"),
            (libc::SYS_ptrace, "ptrace"),
            (libc::SYS_mount, "mount"),
            (libc::SYS_setuid, "setuid"),
            (libc::SYS_capset, "capset"),
            (libc::SYS_unshare, "unshare"),
            (libc::SYS_setns, "setns"),
            (libc::SYS_bpf, "bpf"),
        ] {
            assert!(!listed.contains(&nr), "{name} is allowed");
        }
        for (nr, why) in allowed() {
            assert!(!why.is_empty(), "system call {nr} has no reason");
        }
    }

    #[test]
    fn m2_under_the_filter_execve_and_inet_sockets_fail_and_threads_files_work() {
        // On one thread of the test process only (no TSYNC): the rest of the harness runs on.
        let r = std::thread::spawn(|| {
            nix::sys::prctl::set_no_new_privs().unwrap();
            seccompiler::apply_filter(&filter().unwrap()).unwrap();
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").map(drop).map_err(|e| e.raw_os_error());
            let exec = nix::unistd::execv(c"/bin/true", &[c"true"]).map(drop);
            // What the daemon does keeps working: files, mappings, a new thread, /proc.
            let file = std::fs::read_to_string("/proc/thread-self/status").map(|s| s.contains("Seccomp:\t2"));
            let thread = std::thread::spawn(|| std::fs::metadata("/").is_ok()).join();
            // Binding a client (owner.rs): pidfd_open, /proc/<pid>/{mem,stat}, poll, pread64.
            let owner = crate::owner::OwnerProcess::open(std::process::id()).map(|o| !o.is_gone());
            (sock, exec, file.ok(), thread.ok(), owner)
        })
        .join()
        .unwrap();
        assert_eq!(r.0, Err(Some(DENIED_ERRNO)), "socket(AF_INET)");
        assert_eq!(r.1, Err(nix::errno::Errno::EPERM), "execve");
        assert_eq!(r.2, Some(true), "/proc/thread-self/status of the filtered thread shows Seccomp 2");
        assert_eq!(r.3, Some(true), "a thread started under the filter");
        assert_eq!(r.4, Ok(true), "a client bound by its pidfd and memory, alive");
    }

    #[test]
    fn m2_the_kept_capabilities_are_the_documented_ones() {
        let base = kept_caps(false);
        // CAP_CHOWN 0, CAP_DAC_OVERRIDE 1, CAP_SYS_PTRACE 19; CAP_SYS_ADMIN 21 with a sysfs mount.
        assert_eq!(cap_mask(&base), 0x8_0003);
        assert_eq!(cap_mask(&kept_caps(true)), 0x28_0003);
    }

    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cuse-kfd-sandbox-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn l8_a_world_writable_dir_is_not_trusted() {
        assert_eq!(trusted_dir(Path::new("/")).unwrap(), PathBuf::from("/"));
        // A directory anyone can write to, without the sticky bit, is no place for the daemon,
        // and neither is anything below it.
        let open = scratch("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let below = open.join("rt");
        std::fs::create_dir(&below).unwrap();
        let e = trusted_dir(&open).unwrap_err().to_string();
        assert!(e.contains("must be root's"), "{e}");
        assert!(trusted_dir(&below).is_err(), "below a world-writable directory");
        assert!(runtime_dir(&open.join("new")).is_err(), "a runtime directory below it");
        // Sticky but the directory itself: never trusted as the daemon's own directory.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(trusted_dir(&open).is_err(), "a sticky world-writable directory as the runtime directory");
        std::fs::remove_dir_all(&open).unwrap();
    }

    #[test]
    fn l8_a_runtime_dir_is_created_or_refused_by_owner() {
        let me = nix::unistd::geteuid();
        let dir = scratch("rt");
        let parent_ok = resolve(&std::env::temp_dir(), true).is_ok();
        let r = runtime_dir(&dir);
        if me.is_root() && std::env::temp_dir() == Path::new("/tmp") {
            assert!(parent_ok, "/tmp (root's, sticky) as the parent of a runtime directory");
        }
        if me.is_root() && parent_ok {
            let real = r.expect("root's new runtime directory in a trusted place");
            assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o755);
            // Someone else's directory (made first, as in a sticky /tmp) is refused.
            nix::unistd::chown(&real, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
            let e = runtime_dir(&dir).unwrap_err().to_string();
            assert!(e.contains("uid 65534"), "{e}");
            // Root's symlink to a trusted directory resolves to that directory; someone else's
            // (planted in a sticky /tmp, pointing at /etc) is refused.
            std::fs::remove_dir(&real).unwrap();
            std::os::unix::fs::symlink("/", &dir).unwrap();
            assert_eq!(runtime_dir(&dir).unwrap(), PathBuf::from("/"));
            nix::unistd::fchownat(
                None,
                &dir,
                Some(nix::unistd::Uid::from_raw(65534)),
                None,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .unwrap();
            let e = runtime_dir(&dir).unwrap_err().to_string();
            assert!(e.contains("uid 65534"), "{e}");
            std::fs::remove_file(&dir).unwrap();
        } else {
            // Not root: whatever this user creates is not root's.
            assert!(r.is_err(), "a runtime directory not owned by root");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
