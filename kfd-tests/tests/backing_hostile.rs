//! The backing store against hostile clients through the kernel (issue 13 C1, H2): a client of
//! another uid cannot swap its directories for symlinks to reach a root-owned directory, and a
//! runtime directory on a small tmpfs answers ENOMEM at allocation. Device tier only (root, a
//! real node); the embedded tier has the same tests in cuse-kfd/tests/backing_store.rs.

use kfd_tests::device::{tier, Daemon};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use thunk::memory::Kind;
use thunk::queue::AqlQueue;
use thunk::signal::Signals;
use thunk::{Errno, Kfd};

/// The unprivileged client's uid and gid (nobody, nogroup).
const NOBODY: u32 = 65534;

/// The stat and entries of a directory tree, to compare before and after.
fn snapshot(dir: &Path) -> Vec<(PathBuf, u32, u32, u32, u64, i64, i64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let m = fs::symlink_metadata(&d).unwrap();
        out.push((d.clone(), m.uid(), m.gid(), m.mode(), m.len(), m.mtime_nsec(), m.ctime_nsec()));
        if m.is_dir() {
            for e in fs::read_dir(&d).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

#[test]
#[ignore = "device tier"]
fn symlink_swap() {
    let bin = tier();
    // The stand-in for /etc: root-owned, reachable by everyone.
    let target = nix::unistd::mkdtemp(&std::env::temp_dir().join("symlink-swap-XXXXXX")).unwrap();
    fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fs::write(target.join("passwd"), b"root:x:0:0::/root:/bin/sh\n").unwrap();
    fs::create_dir(target.join("render")).unwrap();
    let before = snapshot(&target);
    let d = Daemon::start(&bin, "kfd-t-swap");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "swap_client_role", "--ignored", "--nocapture", "--test-threads=1"])
        .env("CUSE_KFD_DEVICE", &d.node)
        .env("SWAP_TARGET", &target)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("start the client");
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    assert!(out.status.success(), "the client failed: {}", String::from_utf8_lossy(&out.stderr));
    for which in ["<pid>", "render", "kfd"] {
        assert!(text.contains(&format!("swap {which}: refused")), "the client swapped {which}:\n{text}");
    }
    assert_eq!(snapshot(&target), before, "while the client ran");
    drop(d);
    assert_eq!(snapshot(&target), before, "after the daemon's teardown");
    fs::remove_dir_all(&target).unwrap();
}

/// The client of `symlink_swap`, as uid 65534: swaps each of its directories for a symlink to
/// the target (or fails to), then allocates, creates a queue and events.
#[test]
#[ignore = "the client role of symlink_swap, run in a child process"]
fn swap_client_role() {
    let node = std::env::var_os("CUSE_KFD_DEVICE").expect("CUSE_KFD_DEVICE");
    let target = PathBuf::from(std::env::var_os("SWAP_TARGET").expect("SWAP_TARGET"));
    let kfd = Kfd::open_node(Path::new(&node)).expect("open the node");
    let gpu = kfd.gpu_ids().unwrap()[0];
    let _first = kfd.alloc(gpu, 4096, Kind::Gtt).expect("a first buffer");
    let _events = Signals::new(&kfd, gpu, 1).expect("a first event");
    let mine = kfd.runtime_dir().join(kfd.pid().to_string());
    for (which, dir) in [("render", mine.join("render")), ("kfd", mine.join("kfd")), ("<pid>", mine.clone())] {
        let swapped =
            fs::rename(&dir, dir.with_extension("moved")).and_then(|()| std::os::unix::fs::symlink(&target, &dir));
        match swapped {
            Ok(()) => println!("swap {which}: done"),
            Err(e) => println!("swap {which}: refused ({e})"),
        }
    }
    let _ = kfd.alloc(gpu, 8192, Kind::Gtt);
    let _ = kfd.alloc(gpu, 8192, Kind::Vram);
    let _ = AqlQueue::new(&kfd, gpu, 64);
    let _ = Signals::new(&kfd, gpu, 4);
}

#[test]
#[ignore = "device tier"]
fn full_tmpfs() {
    let bin = tier();
    let name = "kfd-t-full";
    // The daemon's runtime directory (see Daemon::start_with) on a 4 MiB tmpfs.
    let rt = std::env::temp_dir().join(format!("cuse-kfd-tier-{name}"));
    fs::create_dir_all(&rt).unwrap();
    nix::mount::mount(Some("tmpfs"), &rt, Some("tmpfs"), nix::mount::MsFlags::empty(), Some("size=4m,mode=0755"))
        .expect("mount a 4 MiB tmpfs");
    let d = Daemon::start(&bin, name);
    let kfd = Kfd::open_node(&d.node).unwrap();
    let gpu = kfd.gpu_ids().unwrap()[0];
    assert_eq!(kfd.alloc(gpu, 8 << 20, Kind::Gtt).err(), Some(Errno::ENOMEM), "8 MiB on a 4 MiB tmpfs");
    // VRAM is sparse (its bank is accounted against the profile, not the file system): it is
    // allocated, and backed as it is touched.
    let vram = kfd.alloc(gpu, 8 << 20, Kind::Vram).expect("sparse VRAM");
    // What fits is allocated, and every byte of it can be stored without killing the daemon.
    let b = kfd.alloc(gpu, 2 << 20, Kind::Gtt).expect("2 MiB fit");
    b.write(0, &vec![0xA5; 2 << 20]);
    assert_eq!(kfd.alloc(gpu, 2 << 20, Kind::Gtt).err(), Some(Errno::ENOMEM), "the tmpfs is full");
    drop(vram);
    let q = AqlQueue::new(&kfd, gpu, 64);
    assert!(q.is_ok() || q.as_ref().err() == Some(&Errno::ENOMEM), "{:?}", q.err());
    drop(q);
    drop(b);
    drop(kfd);
    drop(d);
    nix::mount::umount(&rt).expect("unmount the tmpfs");
    let _ = fs::remove_dir(&rt);
}
