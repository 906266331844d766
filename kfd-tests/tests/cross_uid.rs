//! Issue 13, item 2, through the kernel: two client processes of different uids (65534 and
//! 65533) each hold buffers, a queue and events; the second cannot open, stat, list or map
//! anything of the first's, and every ioctl naming the first's handles or ids is refused with
//! amdkfd's errno. The first's objects are unchanged and still work afterwards. The embedded tier
//! has the same checks in cuse-kfd/tests/cross_uid.rs.

use kfd_tests::device::{tier, Client, Daemon};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use thunk::memory::{open_backing, Kind, Space};
use thunk::queue::AqlQueue;
use thunk::{Errno, Kfd};
use uapi::ioctl::AMDKFD_IOC_DESTROY_QUEUE;
use uapi::kfd::{DestroyQueueArgs, KFD_IOC_EVENT_SIGNAL, KFD_IOC_WAIT_RESULT_FAIL};

const UID_A: u32 = 65534;
const UID_B: u32 = 65533;
/// What the owner writes into its buffer, to find unchanged afterwards.
const MARK: &[u8] = b"the owner's bytes";

/// This test binary in a role, as `uid`.
fn role(role: &str, node: &Path, uid: u32, facts: &str) -> Client {
    Client::spawn(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "cross_uid_role", "--ignored", "--nocapture", "--test-threads=1"])
            .env("CROSS_UID_ROLE", role)
            .env("CROSS_UID_FACTS", facts)
            .env("CUSE_KFD_DEVICE", node)
            .uid(uid)
            .gid(uid),
    )
}

/// How long a role may take to say its next line.
const LINE_WITHIN: Duration = Duration::from_secs(120);

/// Every file below `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
#[ignore = "device tier"]
fn cross_uid() {
    let bin = tier();
    let d = Daemon::start(&bin, "kfd-t-xuid");
    let mut owner = role("owner", &d.node, UID_A, "");
    let facts = owner.line(LINE_WITHIN);
    let pid: u32 = facts.split_whitespace().next().unwrap().parse().unwrap();
    // The owner's files, as root sees them: every one is the intruder's target.
    let targets = files(&d.runtime_dir.join(pid.to_string()));
    assert!(targets.len() >= 4, "buffer, ring, pointers, doorbells, events: {targets:?}");
    let paths: Vec<String> = targets.iter().map(|p| p.display().to_string()).collect();
    let mut intruder = role("intruder", &d.node, UID_B, &format!("{facts} {}", paths.join(" ")));
    let verdict = intruder.line(LINE_WITHIN);
    println!("intruder: {verdict}");
    assert_eq!(verdict, "refused everything");
    owner.send("check");
    assert_eq!(owner.line(LINE_WITHIN), "intact");
    drop(intruder);
    drop(owner);
}

/// The two clients of `cross_uid`.
#[test]
#[ignore = "a client role of cross_uid, run in a child process"]
fn cross_uid_role() {
    let Ok(role) = std::env::var("CROSS_UID_ROLE") else { return };
    let node = PathBuf::from(std::env::var_os("CUSE_KFD_DEVICE").unwrap());
    let kfd = Kfd::open_node(&node).expect("open the node");
    let gpu = kfd.gpu_ids().unwrap()[0];
    match role.as_str() {
        "owner" => owner(&kfd, gpu),
        "intruder" => intruder(&kfd, gpu, &node, &std::env::var("CROSS_UID_FACTS").unwrap()),
        other => panic!("unknown role {other}"),
    }
}

fn owner(kfd: &Kfd, gpu: u32) {
    let mem = kfd.alloc(gpu, 4096, Kind::Gtt).unwrap();
    mem.write(0, MARK);
    let vram = kfd.alloc(gpu, 8192, Kind::Vram).unwrap();
    let q = AqlQueue::new(kfd, gpu, 64).unwrap();
    let ev = kfd.create_event(gpu, KFD_IOC_EVENT_SIGNAL, false).unwrap().event_id;
    println!("@@ {} {:x} {:x} {} {}", kfd.pid(), mem.handle(), vram.handle(), q.id, ev);
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let mut seen = vec![0u8; MARK.len()];
    mem.read(0, &mut seen);
    let intact = seen == MARK
        && kfd.set_event(ev).is_ok()
        && kfd.wait_events(&[ev], false, 1000).result.is_ok()
        && kfd.map_to_gpu(vram.handle(), &[gpu]).is_ok()
        && kfd.unmap_from_gpu(vram.handle(), &[gpu]).is_ok()
        && q.update(100, q.ring.va(), q.ring.size() as u32).is_ok();
    println!("@@ {}", if intact { "intact" } else { "damaged" });
    std::io::stdin().read_line(&mut line).unwrap();
}

/// Notes in `wrong` what was not refused with `want`.
fn refused(wrong: &mut Vec<String>, what: String, got: Result<(), Errno>, want: Errno) {
    if got != Err(want) {
        wrong.push(format!("{what}: {got:?}, not {want:?}"));
    }
}

/// Tries everything against the owner's objects; prints `@@ refused everything` or what got
/// through.
fn intruder(kfd: &Kfd, gpu: u32, node: &Path, facts: &str) {
    let f: Vec<&str> = facts.split_whitespace().collect();
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    let (pid, handles, qid, ev) = (f[0], [hex(f[1]), hex(f[2])], f[3].parse::<u32>().unwrap(), f[4].parse().unwrap());
    let paths: Vec<PathBuf> = f[5..].iter().map(PathBuf::from).collect();
    let mut wrong = Vec::new();
    let mut expect = |what: String, got: Result<(), Errno>, want: Errno| refused(&mut wrong, what, got, want);
    let errno = |e: std::io::Error| Errno::from_raw(e.raw_os_error().unwrap_or(0));
    let rt = paths[0].ancestors().nth(3).unwrap().to_path_buf();
    let theirs = rt.join(pid);
    // The owner's directory: neither listed nor passed through.
    expect(format!("list {}", theirs.display()), std::fs::read_dir(&theirs).map(drop).map_err(errno), Errno::EACCES);
    for sub in ["render", "kfd"] {
        let p = theirs.join(sub);
        expect(format!("list {}", p.display()), std::fs::read_dir(&p).map(drop).map_err(errno), Errno::EACCES);
    }
    let node_file = std::fs::OpenOptions::new().read(true).write(true).open(node).unwrap();
    for p in &paths {
        expect(format!("stat {}", p.display()), std::fs::metadata(p).map(drop).map_err(errno), Errno::EACCES);
        let opened = std::fs::OpenOptions::new().read(true).write(true).open(p).map(drop).map_err(errno);
        expect(format!("open {}", p.display()), opened, Errno::EACCES);
        let opened = std::fs::File::open(p).map(drop).map_err(errno);
        expect(format!("open read-only {}", p.display()), opened, Errno::EACCES);
        let offset = u64::from_str_radix(&p.file_name().unwrap().to_string_lossy(), 16).unwrap();
        // Its offset on this client's own node: a CUSE node has no mmap (ENODEV) ...
        // SAFETY: a new mapping the kernel places; unmapped at once if it were made.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                node_file.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        let mapped = if at == libc::MAP_FAILED {
            Err(Errno::last())
        } else {
            // SAFETY: the mapping just made, referenced by nothing.
            unsafe { libc::munmap(at, 4096) };
            Ok(())
        };
        expect(format!("mmap {offset:#x} on the node"), mapped, Errno::ENODEV);
        // ... and this client's own backing file of that offset does not exist.
        let space = if p.parent().unwrap().ends_with("render") { Space::Render } else { Space::Kfd };
        expect(format!("own backing file {offset:#x}"), open_backing(kfd, space, offset).map(drop), Errno::ENOENT);
    }
    // ioctls naming the owner's handles and ids, before this client has any of its own: amdkfd
    // answers FREE of an unknown handle EINVAL, MAP/UNMAP ENOMEM, DESTROY_QUEUE and every event
    // ioctl EINVAL.
    for h in handles {
        expect(format!("FREE {h:#x}"), kfd.free_memory(h), Errno::EINVAL);
        expect(format!("MAP {h:#x}"), kfd.map_to_gpu(h, &[gpu]), Errno::ENOMEM);
        expect(format!("UNMAP {h:#x}"), kfd.unmap_from_gpu(h, &[gpu]), Errno::ENOMEM);
    }
    let mut dq = DestroyQueueArgs { queue_id: qid, pad: 0 };
    // SAFETY: DESTROY_QUEUE's argument holds no pointer.
    expect(format!("DESTROY_QUEUE {qid}"), unsafe { kfd.call(AMDKFD_IOC_DESTROY_QUEUE, &mut dq) }, Errno::EINVAL);
    expect(format!("SET_EVENT {ev}"), kfd.set_event(ev), Errno::EINVAL);
    expect(format!("RESET_EVENT {ev}"), kfd.reset_event(ev), Errno::EINVAL);
    expect(format!("DESTROY_EVENT {ev}"), kfd.destroy_event(ev), Errno::EINVAL);
    let w = kfd.wait_events(&[ev], false, 0);
    if (w.result, w.wait_result) != (Err(Errno::EINVAL), KFD_IOC_WAIT_RESULT_FAIL) {
        wrong.push(format!("WAIT_EVENTS {ev}: {:?} {}", w.result, w.wait_result));
    }
    // This client's own objects work, whatever ids they get.
    let mine = kfd.alloc(gpu, 4096, Kind::Gtt).unwrap();
    mine.write(0, b"intruder");
    let own_q = AqlQueue::new(kfd, gpu, 64).unwrap();
    let own_ev = kfd.create_event(gpu, KFD_IOC_EVENT_SIGNAL, false).unwrap().event_id;
    kfd.set_event(own_ev).unwrap();
    assert!(kfd.wait_events(&[own_ev], false, 1000).result.is_ok());
    drop(own_q);
    if wrong.is_empty() {
        println!("@@ refused everything");
    } else {
        println!("@@ got through: {}", wrong.join("; "));
    }
}
