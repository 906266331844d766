//! Issue 13, item 2: two clients of different uids cannot reach each other's objects by id, and,
//! with the device running as root (as the daemon does), cannot open, stat or list each other's
//! backing files. The device tier runs the same with two real processes
//! (kfd-tests/tests/cross_uid.rs).

mod support;

use cuse_kfd::memory::backing::MmapSpace;
use nix::errno::Errno;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::raw::*;
use uapi::kfd::*;

const A: u32 = FAKE_PID;
const B: u32 = FAKE_PID + 1;
const UID_A: u32 = 65534;
const UID_B: u32 = 65533;

#[test]
fn cross_uid_objects_cannot_be_reached_by_id() {
    let rig = Rig::new();
    let a = rig.open_as_uid(A, UID_A);
    let b = rig.open_as_uid(B, UID_B);
    let gpu = rig.gpu();
    let buf = a.alloc_mapped(Mem::Gtt, 2 * PAGE_SIZE);
    let q = a.create_queue();
    let e = a.signal_event(false);
    // amdkfd's errnos for ids the caller's process does not have (see isolation.rs).
    assert_eq!(b.free(buf.handle), Err(Errno::EINVAL));
    assert_eq!(b.map(buf.handle, &[gpu]), Err(Errno::ENOMEM));
    assert_eq!(b.unmap(buf.handle, &[gpu]), Err(Errno::ENOMEM));
    assert_eq!(b.destroy_queue(q.id), Err(Errno::EINVAL));
    assert_eq!(b.set_event(e), Err(Errno::EINVAL));
    assert_eq!(b.reset_event(e), Err(Errno::EINVAL));
    assert_eq!(b.destroy_event(e), Err(Errno::EINVAL));
    let w = b.wait(&[e], false, 0);
    assert_eq!((w.result, w.wait_result), (Err(Errno::EINVAL), KFD_IOC_WAIT_RESULT_FAIL));
    // A's objects are untouched: still its own and working.
    a.set_event(e).unwrap();
    assert_eq!(a.wait(&[e], false, 0).result, Ok(()));
    a.unmap(buf.handle, &[gpu]).unwrap();
    a.free(buf.handle).unwrap();
    a.destroy_queue(q.id).unwrap();
    a.destroy_event(e).unwrap();
}

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

/// `stat` of `paths` as `uid`: the paths it could not stat, with why.
fn stat_as(uid: u32, paths: &[PathBuf]) -> Vec<String> {
    let out = Command::new("stat").arg("--").args(paths).uid(uid).gid(uid).output().expect("run stat");
    String::from_utf8_lossy(&out.stderr).lines().map(str::to_owned).collect()
}

#[test]
fn cross_uid_backing_files_are_their_clients_alone() {
    let rig = Rig::new();
    let a = rig.open_as_uid(A, UID_A);
    let b = rig.open_as_uid(B, UID_B);
    let buf = a.alloc_mapped(Mem::Gtt, PAGE_SIZE);
    let _q = a.create_queue();
    let _e = a.signal_event(false);
    let _own = b.alloc_mapped(Mem::Gtt, PAGE_SIZE);
    if !nix::unistd::geteuid().is_root() {
        // Not root, the device cannot give files away: every file is this user's.
        println!("not root: the files are this user's own; the uid checks need root (the device tier has them)");
        return;
    }
    // The embedded device's runtime directory is private (0700); the daemon's is shared (0755).
    std::fs::set_permissions(&rig.root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mine = files(&rig.client_dir(A));
    assert!(mine.contains(&rig.backing(A, MmapSpace::Render, buf.mmap_offset)), "{mine:?}");
    assert!(mine.contains(&rig.backing(A, MmapSpace::Kfd, KFD_MMAP_TYPE_EVENTS)), "{mine:?}");
    assert!(mine.len() >= 4, "buffer, ring, pointers, doorbells, events: {mine:?}");
    for f in &mine {
        let m = std::fs::metadata(f).unwrap();
        assert_eq!(
            (std::os::unix::fs::MetadataExt::uid(&m), std::os::unix::fs::MetadataExt::mode(&m) & 0o777),
            (UID_A, 0o600)
        );
    }
    // A reaches its files; B can stat none of them, nor list A's directory.
    assert_eq!(stat_as(UID_A, &mine), Vec::<String>::new());
    let refused = stat_as(UID_B, &mine);
    assert_eq!(refused.len(), mine.len(), "{refused:?}");
    assert!(refused.iter().all(|l| l.contains("Permission denied")), "{refused:?}");
    let listing = Command::new("ls").arg(rig.client_dir(A)).uid(UID_B).gid(UID_B).output().unwrap();
    assert!(!listing.status.success(), "B listed A's directory");
    // And B's own buffer is B's.
    let theirs = files(&rig.client_dir(B));
    assert_eq!(stat_as(UID_B, &theirs), Vec::<String>::new());
    assert_eq!(stat_as(UID_A, &theirs).len(), theirs.len());
}
