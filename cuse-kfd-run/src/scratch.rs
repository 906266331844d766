//! The launcher's one temporary directory: made by mkdtemp (a random name nobody else can have
//! made first, mode 0700), holding the `lsmod` stand-in on the program's PATH, and removed when
//! the program exits.
//!
//! The launcher execs the program, so no destructor of this process runs after the program
//! ends. Removal is the job of a small watcher process instead: forked (twice, so that it is
//! nobody's child the program could wait for, and in a session of its own, so that a ^C or a
//! hang-up of the program's terminal does not end it first), it holds a pidfd of the launcher's
//! process, which the exec keeps (same pid), waits for that process to exit, removes the
//! directory and exits. It holds no other file descriptor of the program's.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What `lsmod` prints: rocminfo looks for amdgpu before it starts.
const LSMOD: &str = "#!/bin/sh\necho 'Module                  Size  Used by'\necho 'amdgpu               9076736  0'\n";

/// A fresh directory under `parent` with an `lsmod` that reports amdgpu; removed once this
/// process (or the program it execs) has exited.
pub fn lsmod_dir(parent: &Path) -> Result<PathBuf, String> {
    let dir = nix::unistd::mkdtemp(&parent.join("cuse-kfd-run-XXXXXX"))
        .map_err(|e| format!("making a temporary directory in {}: {e}", parent.display()))?;
    let script = dir.join("lsmod");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(&script)
        .and_then(|mut f| io::Write::write_all(&mut f, LSMOD.as_bytes()));
    let watched = written.and_then(|()| remove_after_exit(&dir, &script));
    if let Err(e) = watched {
        let _ = std::fs::remove_file(&script);
        let _ = std::fs::remove_dir(&dir);
        return Err(format!("setting up {}: {e}", dir.display()));
    }
    Ok(dir)
}

/// Starts the watcher that removes `file` and then `dir` once this process has exited.
fn remove_after_exit(dir: &Path, file: &Path) -> io::Result<()> {
    let cstr = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (dir, file, null) = (cstr(dir)?, cstr(file)?, CString::new("/dev/null").expect("no NUL"));
    let pidfd = pidfd_of_self()?;
    // SAFETY: the children run only async-signal-safe calls (fork, setsid, open, dup2,
    // close_range, poll, unlink, rmdir, _exit) on memory prepared above, so forking is sound
    // even where other threads exist; neither child returns.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // SAFETY: as for the fork above; the first child only starts the watcher and exits.
            unsafe {
                libc::setsid();
                if libc::fork() == 0 {
                    watch(pidfd.as_raw_fd(), &dir, &file, &null);
                }
                libc::_exit(0)
            }
        }
        child => {
            let mut status = 0;
            // SAFETY: reaps the first child, which exits at once; `status` is a live int.
            unsafe { libc::waitpid(child, &mut status, 0) };
            Ok(())
        }
    }
}

/// The watcher (in a forked child): keeps nothing of the program's open, waits for the
/// process behind `pidfd` to exit, removes `file` and `dir`, and exits.
fn watch(pidfd: RawFd, dir: &CString, file: &CString, null: &CString) -> ! {
    // SAFETY: async-signal-safe syscalls on integers and on the NUL-terminated strings given;
    // the descriptors closed are this child's copies.
    unsafe {
        let devnull = libc::open(null.as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            libc::dup2(devnull, fd);
        }
        // Every other descriptor (the pipes of whoever reads the program's output) but the pidfd.
        libc::syscall(libc::SYS_close_range, 3u32, (pidfd - 1) as u32, 0u32);
        libc::syscall(libc::SYS_close_range, (pidfd + 1) as u32, u32::MAX, 0u32);
        let mut poll = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
        while libc::poll(&mut poll, 1, -1) < 0 && *libc::__errno_location() == libc::EINTR {}
        libc::unlink(file.as_ptr());
        libc::rmdir(dir.as_ptr());
        libc::_exit(0)
    }
}

/// A pidfd of this process (close-on-exec: the program does not get it).
fn pidfd_of_self() -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::time::{Duration, Instant};

    #[test]
    fn h7_the_lsmod_dir_is_fresh_private_and_goes_away_after_exit() {
        let parent = tempfile::tempdir().unwrap();
        // In a child process (the watcher waits for the process that made the directory).
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "scratch::tests::child_makes_an_lsmod_dir", "--nocapture", "--include-ignored"])
            .env("SCRATCH_TEST_PARENT", parent.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        let dir = stdout.lines().find_map(|l| l.strip_prefix("LSMOD_DIR=")).expect("the child printed its dir");
        let dir = Path::new(dir);
        assert!(dir.starts_with(parent.path()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while dir.exists() {
            assert!(Instant::now() < deadline, "{} still there 5 s after its process exited", dir.display());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    #[ignore = "run by h7_the_lsmod_dir_is_fresh_private_and_goes_away_after_exit in a child process"]
    fn child_makes_an_lsmod_dir() {
        let parent = PathBuf::from(std::env::var_os("SCRATCH_TEST_PARENT").unwrap());
        let a = lsmod_dir(&parent).unwrap();
        let b = lsmod_dir(&parent).unwrap();
        assert_ne!(a, b, "each is a new directory");
        for dir in [&a, &b] {
            let meta = std::fs::metadata(dir).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, 0o700);
            assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw());
            let out = std::process::Command::new(dir.join("lsmod")).output().unwrap();
            assert!(String::from_utf8_lossy(&out.stdout).contains("amdgpu"));
        }
        println!("LSMOD_DIR={}", a.display());
    }
}
