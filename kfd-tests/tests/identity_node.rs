//! Identity through the real node (issue 13, H3/H4), in the device tier: a context ends within
//! 100 ms of its owner's exit while a child still holds the owner's fd, and the child's
//! ioctls on that fd answer EBADF, as amdkfd's. (The embedded tier tests the same and more,
//! in cuse-kfd/tests/identity.rs; the pid-0 refusal is a CUSE session unit test.)

use kfd_tests::device::{tier, Daemon};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, pipe, ForkResult, Pid};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use uapi::ioctl::AMDKFD_IOC_GET_VERSION;
use uapi::kfd::GetVersionArgs;

const END_WITHIN: Duration = Duration::from_millis(100);

/// GET_VERSION on `fd` through ioctl(2): the errno, or 0.
fn version(fd: &File) -> i32 {
    let mut v = GetVersionArgs::default();
    // SAFETY: GET_VERSION writes its 8-byte struct, which `v` is.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), AMDKFD_IOC_GET_VERSION as _, &mut v as *mut GetVersionArgs) };
    if r == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    }
}

/// The daemon's object counts (the `stats` command: cheaper than `status`).
fn stats(d: &Daemon) -> cuse_kfd::DeviceStats {
    let text = cuse_kfd::frontend::control::request(&d.runtime_dir, "stats").expect("stats");
    cuse_kfd::frontend::control::parse_stats(&text).expect("a stats answer")
}

/// Waits for `pid` to exit within `within`; its exit code.
fn reap(pid: Pid, within: Duration) -> i32 {
    let t0 = Instant::now();
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)).unwrap() {
            WaitStatus::Exited(_, code) => return code,
            WaitStatus::StillAlive if t0.elapsed() < within => std::thread::sleep(Duration::from_millis(1)),
            other => {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                panic!("process {pid} did not exit cleanly within {within:?}: {other:?}");
            }
        }
    }
}

#[test]
#[ignore = "device tier"]
fn h3_h4_context_ends_within_100ms_of_owner_exit_while_a_child_holds_the_fd() {
    let bin = tier();
    let d = Daemon::start(&bin, "kfd-t-identity");
    // The owner tells the test its child (the holder) exists; the test tells the child when to try its fd.
    let (owner_r, owner_w) = pipe().unwrap();
    let (go_r, go_w) = pipe().unwrap();
    let (res_r, res_w) = pipe().unwrap();
    // SAFETY: the child (and its child) only open, ioctl, fork, read/write pipes and _exit.
    let owner = match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            let kfd = std::fs::OpenOptions::new().read(true).write(true).open(&d.node).unwrap();
            let mut code = if version(&kfd) == 0 { 0 } else { 10 };
            // SAFETY: as above.
            match unsafe { fork() } {
                Ok(ForkResult::Child) => {
                    // The holder: waits until the owner has gone and its context ended.
                    let mut b = [0u8; 1];
                    let _ = File::from(go_r).read_exact(&mut b);
                    let got = version(&kfd);
                    drop(kfd);
                    let _ = File::from(res_w).write_all(&got.to_ne_bytes());
                }
                Ok(ForkResult::Parent { child }) => {
                    let _ = File::from(owner_w).write_all(&child.as_raw().to_ne_bytes());
                }
                Err(_) => code = 30,
            }
            // SAFETY: ends this process at once.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => child,
    };
    drop(owner_w);
    drop(go_r);
    drop(res_w);
    let mut b = [0u8; 4];
    // The holder exists (its pid arrives) before the owner exits.
    File::from(owner_r).read_exact(&mut b).expect("the holder's pid");
    assert!(i32::from_ne_bytes(b) > 0);
    assert_eq!(reap(owner, Duration::from_secs(10)), 0, "the owner's own ioctl failed");
    // The only context is the owner's: it ended when the daemon counts no process. The bound
    // is the end of the request that saw it gone; that request's own time is printed too.
    let exited = Instant::now();
    let mut polls = 0;
    let seen = loop {
        let asked = Instant::now();
        let s = stats(&d);
        polls += 1;
        if s.processes == 0 {
            assert_eq!(s.files, 1, "the holder's file is still open");
            break asked.elapsed();
        }
        assert!(exited.elapsed() < Duration::from_secs(5), "the owner's context never ended");
    };
    let took = exited.elapsed();
    println!(
        "the context ended at most {took:?} after the owner was reaped ({polls} stats requests, the last {seen:?})"
    );
    assert!(took < END_WITHIN, "the context ended {took:?} after its owner's exit");
    // The holder, the owner's child, still has the fd open: its ioctl is EBADF.
    File::from(go_w).write_all(b"g").unwrap();
    let mut got = [0u8; 4];
    File::from(res_r).read_exact(&mut got).expect("the holder's result");
    assert_eq!(i32::from_ne_bytes(got), libc::EBADF, "the holder's GET_VERSION on the owner's fd");
    assert_eq!(stats(&d).processes, 0, "the holder's ioctl made no context of its own");
}
