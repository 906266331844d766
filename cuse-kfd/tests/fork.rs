//! Fork with the embedded device (issue 13): a child of a process that uses the embedded
//! device gets amdkfd's behaviour. Its inherited file answers EBADF, closing it (and dropping
//! the inherited device) does nothing to the parent's device and does not abort, and a new
//! device made in the child is the child's own. Alone in its binary: the test forks.

use cuse_kfd::{DeviceConfig, Embedded};
use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult};
use uapi::ioctl::AMDKFD_IOC_GET_VERSION;
use uapi::kfd::GetVersionArgs;

fn config() -> DeviceConfig {
    DeviceConfig::default()
}

/// A typed ioctl on `file`.
fn call<T: uapi::FromBytes + uapi::IntoBytes + uapi::Immutable>(
    file: &cuse_kfd::EmbeddedFile,
    cmd: u32,
    args: &mut T,
) -> Result<(), Errno> {
    // SAFETY: used only with GET_VERSION, CREATE_EVENT and SET_EVENT, whose arguments hold no
    // pointer and register no memory.
    unsafe { file.call(cmd, args) }
}

/// What the child checks; its exit status is the number of the first check that failed.
fn child(emb: Embedded, file: cuse_kfd::EmbeddedFile) -> i32 {
    let mut v = GetVersionArgs::default();
    if call(&file, AMDKFD_IOC_GET_VERSION, &mut v) != Err(Errno::EBADF) {
        return 1;
    }
    if emb.open().err() != Some(Errno::ENODEV) {
        return 2;
    }
    // Closing the inherited file and dropping the inherited device: no abort, no effect.
    drop(file);
    drop(emb);
    let Ok(own) = Embedded::new(&config()) else { return 3 };
    let Ok(file) = own.open() else { return 4 };
    if call(&file, AMDKFD_IOC_GET_VERSION, &mut v).is_err() || v.major_version != 1 {
        return 5;
    }
    if own.device().stats().processes != 1 {
        return 6;
    }
    drop(file);
    drop(own);
    0
}

#[test]
fn fork_with_the_embedded_device() {
    let emb = Embedded::new(&config()).unwrap();
    let file = emb.open().unwrap();
    let mut v = GetVersionArgs::default();
    call(&file, AMDKFD_IOC_GET_VERSION, &mut v).unwrap();
    let event = {
        let mut a = uapi::kfd::CreateEventArgs { event_type: uapi::kfd::KFD_IOC_EVENT_SIGNAL, ..Default::default() };
        call(&file, uapi::ioctl::AMDKFD_IOC_CREATE_EVENT, &mut a).unwrap();
        a.event_id
    };
    // SAFETY: the child only runs `child` (allocation, the device's own locks, which no other
    // thread of the child can hold, since it has none) and leaves with _exit.
    match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| child(emb, file))).unwrap_or(100);
            // SAFETY: _exit ends the child at once, running nothing of the parent's.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            // A child stuck on the parent's device (waiting for an engine it does not have) is a
            // failure too, not a hang of the test.
            let start = std::time::Instant::now();
            let status = loop {
                match waitpid(child, Some(WaitPidFlag::WNOHANG)).unwrap() {
                    WaitStatus::StillAlive if start.elapsed() < std::time::Duration::from_secs(20) => {
                        std::thread::sleep(std::time::Duration::from_millis(10));
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
    // The parent's context is untouched by anything the child did.
    assert_eq!((emb.device().stats().files, emb.device().stats().processes, emb.device().stats().events), (1, 1, 1));
    let mut s = uapi::kfd::SetEventArgs { event_id: event, pad: 0 };
    call(&file, uapi::ioctl::AMDKFD_IOC_SET_EVENT, &mut s).unwrap();
    drop(file);
    assert_eq!(emb.device().stats(), Default::default());
}
