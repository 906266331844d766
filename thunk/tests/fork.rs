//! Fork with the embedded device, through hsaKmtOpenKFD (issue 13): as with libhsakmt on
//! amdkfd, a forked child's inherited instance answers EBADF and the child's own
//! hsaKmtOpenKFD opens a device of its own, which works; until it does, every call answers
//! KERNEL_IO_CHANNEL_NOT_OPENED, as libhsakmt's CHECK_KFD_OPEN does once the process forked.
//! Alone in its binary: the test forks and sets the process-wide environment.

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thunk::hsakmt::{close_kfd, current, open_kfd, Opened, Status};

fn version(t: &thunk::hsakmt::Thunk) -> Result<(), Errno> {
    t.kfd().version().map(drop)
}

/// The child's checks; its exit status is the number of the first that failed.
fn child(inherited: &Arc<thunk::hsakmt::Thunk>) -> i32 {
    if version(inherited) != Err(Errno::EBADF) {
        return 1;
    }
    // libhsakmt's CHECK_KFD_OPEN in a forked child: not opened, until the child opens.
    if current().err() != Some(Status::KernelIoChannelNotOpened) {
        return 6;
    }
    if open_kfd() != Ok(Opened::First) {
        return 2;
    }
    let Ok(own) = current() else { return 3 };
    if Arc::ptr_eq(&own, inherited) || version(&own).is_err() {
        return 4;
    }
    drop(own);
    if close_kfd().is_err() {
        return 5;
    }
    0
}

#[test]
fn fork_with_the_embedded_device_through_hsakmt() {
    std::env::set_var("CUSE_KFD_EMBEDDED", "1");
    assert_eq!(open_kfd(), Ok(Opened::First));
    let parent = current().unwrap();
    version(&parent).unwrap();
    // SAFETY: the child runs `child` (allocation and the thunk's own state, whose locks no
    // thread of the child can hold, since it has none) and leaves with _exit.
    match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| child(&parent))).unwrap_or(100);
            // SAFETY: _exit ends the child at once, running nothing of the parent's.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            let start = Instant::now();
            let status = loop {
                match waitpid(child, Some(WaitPidFlag::WNOHANG)).unwrap() {
                    WaitStatus::StillAlive if start.elapsed() < Duration::from_secs(20) => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    WaitStatus::StillAlive => {
                        nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL).unwrap();
                        panic!("the child hung: {:?}", waitpid(child, None));
                    }
                    s => break s,
                }
            };
            assert_eq!(status, WaitStatus::Exited(child, 0), "the child failed (its status names the check)");
        }
    }
    version(&parent).expect("the parent's device is untouched");
    drop(parent);
    close_kfd().unwrap();
}
