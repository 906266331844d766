//! A child forked from a process with an embedded device inherits copies of the device's file
//! descriptors (its peer socket's among them). The parent's device must still go away at once
//! when the parent lets go of it while the child lives on. Alone in its binary: the test forks.

use cuse_kfd::{DeviceConfig, Embedded};
use nix::sys::wait::waitpid;
use nix::unistd::{fork, ForkResult};
use std::time::{Duration, Instant};

#[test]
fn a_live_child_does_not_hold_up_the_parents_device_going_away() {
    let emb = Embedded::new(&DeviceConfig::default()).unwrap();
    let file = emb.open().unwrap();
    // SAFETY: the child only sleeps and leaves with _exit, touching nothing of the parent's.
    let child = match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            std::thread::sleep(Duration::from_secs(30));
            // SAFETY: _exit ends the child at once, running nothing of the parent's.
            unsafe { libc::_exit(0) }
        }
        ForkResult::Parent { child } => child,
    };
    let (done, gone) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        drop(file);
        drop(emb);
        let _ = done.send(());
    });
    let dropped = gone.recv_timeout(Duration::from_secs(10));
    nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL).unwrap();
    let _ = waitpid(child, None);
    assert!(dropped.is_ok(), "the device was still going away after {:?}, with the child alive", t0.elapsed());
}
