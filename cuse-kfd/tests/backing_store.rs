//! The backing store against hostile clients: directories swapped for symlinks (C1), a
//! descriptor per buffer (H5), space reserved at allocation (H2).

mod support;

use cuse_kfd::memory::backing::MmapSpace;
use parking_lot::Mutex;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use support::raw::*;
use uapi::kfd::*;

/// The fds test counts this process's descriptors: the tests of this file run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The stat and entries of a directory tree, to compare before and after.
fn snapshot(dir: &Path) -> Vec<(PathBuf, u32, u32, u64, i64, i64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let m = fs::symlink_metadata(&d).unwrap();
        out.push((d.clone(), m.uid(), m.mode(), m.len(), m.mtime_nsec(), m.ctime_nsec()));
        if m.is_dir() {
            for e in fs::read_dir(&d).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

/// ALLOC (both kinds), CREATE_QUEUE and CREATE_EVENT, each allowed to fail.
fn make_everything(c: &Client) {
    let _ = c.try_alloc(Mem::Gtt, PAGE_SIZE);
    let _ = c.try_alloc(Mem::Vram, 2 * PAGE_SIZE);
    if let (Ok(ring), Ok(ptrs)) = (c.try_alloc(Mem::Gtt, u64::from(RING_SIZE)), c.try_alloc(Mem::Gtt, PAGE_SIZE)) {
        let gpu = [c.gpu];
        if c.map(ring.handle, &gpu).is_ok() && c.map(ptrs.handle, &gpu).is_ok() {
            let _ = c.try_create_queue_on(&ring, &ptrs);
        }
    }
    let _ = c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, 0);
}

#[test]
fn symlink_swap() {
    let _serial = SERIAL.lock();
    let rig = Rig::new();
    // The stand-in for /etc: a directory outside the runtime directory.
    let target = nix::unistd::mkdtemp(&std::env::temp_dir().join("symlink-swap-XXXXXX")).unwrap();
    fs::write(target.join("passwd"), b"root:x:0:0::/root:/bin/sh\n").unwrap();
    fs::create_dir(target.join("render")).unwrap();
    fs::create_dir(target.join("kfd")).unwrap();
    let before = snapshot(&target);

    for (i, swapped) in ["", "render", "kfd"].into_iter().enumerate() {
        let pid = FAKE_PID + i as u32;
        let client = rig.open_as(pid);
        // The client's directories exist once it has a buffer and an event page.
        client.alloc(Mem::Gtt, PAGE_SIZE);
        client.signal_event(false);
        let dir = if swapped.is_empty() { rig.client_dir(pid) } else { rig.client_dir(pid).join(swapped) };
        fs::rename(&dir, dir.with_extension("moved")).unwrap();
        std::os::unix::fs::symlink(&target, &dir).unwrap();
        make_everything(&client);
        assert_eq!(snapshot(&target), before, "after swapping {} for a symlink", dir.display());
        drop(client);
        assert_eq!(snapshot(&target), before, "after the teardown of a client that swapped {}", dir.display());
    }
    // A symlink planted where a client's directory will be made.
    let pid = FAKE_PID + 10;
    std::os::unix::fs::symlink(&target, rig.client_dir(pid)).unwrap();
    let client = rig.open_as(pid);
    make_everything(&client);
    drop(client);
    assert_eq!(snapshot(&target), before, "after a client whose directory was a planted symlink");
    fs::remove_dir_all(&target).unwrap();
}

/// This process's open descriptors.
fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn fds() {
    let _serial = SERIAL.lock();
    let rig = Rig::new();
    let before = open_fds();
    let greedy = rig.open_as(FAKE_PID);
    let bufs: Vec<Buf> = (0..10_000).map(|_| greedy.alloc(Mem::Gtt, PAGE_SIZE)).collect();
    let after = open_fds();
    assert!(after < before + 64, "10,000 buffers hold {} descriptors ({before} before)", after - before);
    // Every buffer is still there for the client to map.
    let last = bufs.last().unwrap();
    assert!(fs::metadata(rig.backing(FAKE_PID, MmapSpace::Render, last.mmap_offset)).is_ok());
    let other = rig.open_as(FAKE_PID + 1);
    other.alloc(Mem::Gtt, PAGE_SIZE);
    other.signal_event(false);
    drop(greedy);
    assert!(open_fds() < before + 64);
}

#[test]
fn full_tmpfs_space_is_reserved_at_allocation() {
    let _serial = SERIAL.lock();
    let rig = Rig::new();
    let c = rig.open_as(FAKE_PID);
    let b = c.alloc(Mem::Gtt, 8 << 20);
    let m = fs::metadata(rig.backing(FAKE_PID, MmapSpace::Render, b.mmap_offset)).unwrap();
    assert_eq!(m.len(), 8 << 20);
    // st_blocks counts 512-byte units: a sparse file would have none.
    assert!(m.blocks() * 512 >= 8 << 20, "an 8 MiB buffer has {} bytes of space", m.blocks() * 512);
}
