//! Identity (issue 13, H3, H4): a context belongs to a process, not to a pid number. It ends
//! within 100 ms of its owner's exit or exec, whoever still holds the file (whose ioctls then
//! answer EBADF, as amdkfd's); a new process with the pid of another gets a fresh context; and
//! USERPTR memory is never reached in an image the owner exec'd into. The M7 case (a pid-0
//! caller) is `m7_a_pid_0_caller_is_refused` in the CUSE session's tests.

mod support;

use cuse_kfd::memory::vm::{GpuVa, RegionBacking};
use nix::errno::Errno;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::raw::*;
use uapi::ioctl::*;
use uapi::kfd::*;

/// How soon a context must end after its owner has gone.
const END_WITHIN: Duration = Duration::from_millis(100);

fn version(c: &Client) -> Result<(), Errno> {
    c.call(AMDKFD_IOC_GET_VERSION, &mut GetVersionArgs::default())
}

/// Polls until the device has no context for `pid`; how long that took after `since`.
fn context_gone(rig: &Rig, pid: u32, since: Instant) -> Duration {
    while rig.emb().device().process(pid).is_some() {
        assert!(since.elapsed() < Duration::from_secs(5), "the context of {pid} never ended");
        std::thread::sleep(Duration::from_millis(1));
    }
    since.elapsed()
}

/// A child that lives until killed.
fn sleeper() -> Child {
    Command::new("sleep").arg("30").spawn().expect("spawning sleep")
}

#[test]
fn h3_h4_a_context_ends_within_100ms_of_its_owner_exit_while_another_holds_the_fd() {
    let rig = Rig::new();
    let mut owner = sleeper();
    let pid = owner.id();
    // The file stands for the owner's fd; after the owner exits it lives on as a child's dup
    // or one passed over SCM_RIGHTS would.
    let file = rig.open_process(pid);
    version(&file).unwrap();
    let event = file.signal_event(false);
    assert_eq!((rig.stats().processes, rig.stats().events), (1, 1));
    // Another process using the file: EBADF, as amdkfd, while the owner lives.
    let holder = fake_caller(pid + 1);
    let mut args = GetVersionArgs::default();
    assert_eq!(
        // SAFETY: GET_VERSION's arguments hold no pointer.
        unsafe { file.emb().ioctl_as(holder, AMDKFD_IOC_GET_VERSION, uapi::IntoBytes::as_mut_bytes(&mut args)) },
        Err(Errno::EBADF)
    );

    owner.kill().unwrap();
    let killed = Instant::now();
    owner.wait().unwrap();
    let took = context_gone(&rig, pid, killed);
    assert!(took < END_WITHIN, "the context ended {took:?} after its owner's exit");
    // The file is still open, on no context: every ioctl is EBADF, the holder's too.
    assert_eq!((rig.stats().files, rig.stats().processes, rig.stats().events), (1, 0, 0));
    assert_eq!(version(&file), Err(Errno::EBADF));
    assert_eq!(file.set_event(event), Err(Errno::EBADF));
    assert_eq!(
        // SAFETY: GET_VERSION's arguments hold no pointer.
        unsafe { file.emb().ioctl_as(holder, AMDKFD_IOC_GET_VERSION, uapi::IntoBytes::as_mut_bytes(&mut args)) },
        Err(Errno::EBADF)
    );
    drop(file);
    assert_eq!(rig.stats(), Default::default());
}

#[test]
fn h4_a_reused_pid_gets_a_fresh_context() {
    let rig = Rig::new();
    let mut first = sleeper();
    let pid = first.id();
    let old = rig.open_process(pid);
    let event = old.signal_event(false);
    // Another process now opens under the same pid number (a simulated client of this test
    // process: a different process by start time, as a process that got the pid after reuse).
    let new = rig.open_as(pid);
    assert_eq!(rig.stats().processes, 1, "one context per pid");
    assert_eq!(new.set_event(event), Err(Errno::EINVAL), "the new process sees nothing of the old context");
    assert_eq!(new.signal_event(false), 0, "ids start again from slot 0");
    assert_eq!(version(&old), Err(Errno::EBADF), "the old process's file is on an ended context");
    drop(old);
    assert_eq!((rig.stats().files, rig.stats().processes, rig.stats().events), (1, 1, 1));
    first.kill().unwrap();
    first.wait().unwrap();
    // The first process's exit is no business of the new context.
    std::thread::sleep(END_WITHIN);
    assert_eq!(rig.stats().processes, 1);
    version(&new).unwrap();
}

/// The last page of the `[stack]` mapping of `pid`.
fn stack_top_page(pid: u32) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let line = maps.lines().find(|l| l.ends_with("[stack]")).expect("a [stack] mapping");
    let end = line.split(['-', ' ']).nth(1).unwrap();
    u64::from_str_radix(end, 16).unwrap() - PAGE_SIZE
}

fn exe(pid: u32) -> std::path::PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default()
}

#[test]
fn h3_userptr_after_exec_is_a_vm_fault() {
    // A shell that waits for a line, then execs another image. Without address randomization
    // (setarch -R, inherited across exec) the old image's stack top page is mapped in the new
    // image too: a read by pid would succeed there.
    let setarch = std::path::Path::new("/usr/bin/setarch").exists();
    let script = "read line; exec sleep 30";
    let mut cmd = if setarch {
        let mut c = Command::new("setarch");
        c.args(["-R", "sh", "-c", script]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    };
    let mut shell = cmd.stdin(Stdio::piped()).spawn().expect("spawning sh");
    let pid = shell.id();
    let start = Instant::now();
    while !exe(pid).to_string_lossy().contains("sh") || exe(pid).to_string_lossy().contains("setarch") {
        assert!(start.elapsed() < Duration::from_secs(5), "sh never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    let before = exe(pid);
    let rig = Rig::new();
    let c = rig.open_process(pid);
    let gpu = rig.gpu();
    let cpu = stack_top_page(pid);
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let b = c.try_alloc_at(gpu, c.next_va(PAGE_SIZE), PAGE_SIZE, flags, cpu).expect("USERPTR on the shell's stack");
    c.map(b.handle, &[gpu]).unwrap();
    // Its region, held as the engine's TLB holds one across packets: its USERPTR backing names
    // the owner's memory.
    let region = rig.emb().device().process(pid).unwrap().vm().region(gpu, GpuVa(b.va)).unwrap().clone();
    let RegionBacking::Userptr(client) = &region.backing else { panic!("a USERPTR region") };
    let at = client.addr() + PAGE_SIZE - 8;
    let mut word = [0u8; 8];
    // SAFETY: the shell's memory, another process's: no requirement.
    unsafe { client.owner().read(at, &mut word) }.expect("the owner's own memory before exec");

    shell.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let start = Instant::now();
    while exe(pid) == before {
        assert!(start.elapsed() < Duration::from_secs(5), "sh never exec'd");
        std::thread::sleep(Duration::from_millis(1));
    }
    let execd = Instant::now();
    // EFAULT, which the VM reports as `VmFault::Userptr`.
    // SAFETY: as above (the shell's memory).
    unsafe {
        assert_eq!(client.owner().read(at, &mut word), Err(Errno::EFAULT), "read the new image");
        assert_eq!(client.owner().write(at, &7u64.to_ne_bytes()), Err(Errno::EFAULT), "wrote the new image");
    }
    let took = context_gone(&rig, pid, execd);
    assert!(took < END_WITHIN, "the context ended {took:?} after its owner's exec");
    assert_eq!(version(&c), Err(Errno::EBADF));
    shell.kill().unwrap();
    shell.wait().unwrap();
}
