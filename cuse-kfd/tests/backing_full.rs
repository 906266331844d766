//! H2: a full runtime file system answers ENOMEM at allocation and leaves nothing behind. An
//! unprivileged test cannot mount a small tmpfs, so the file size limit stands in for it (the
//! device tier runs the same on a 4 MiB tmpfs). Its own test binary: the limit is per process.

mod support;

use cuse_kfd::memory::backing::MmapSpace;
use nix::errno::Errno;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use support::raw::*;
use uapi::kfd::PAGE_SIZE;

#[test]
fn full_tmpfs() {
    let rig = Rig::new();
    let c = rig.open_as(FAKE_PID);
    // Touch the client's directories while there is room.
    c.alloc(Mem::Gtt, PAGE_SIZE);
    // SAFETY: ignoring SIGXFSZ (a write past the limit then fails with EFBIG instead of killing
    // the process) installs no handler; no other test runs in this binary.
    unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGXFSZ, nix::sys::signal::SigHandler::SigIgn) }
        .unwrap();
    let (_, hard) = getrlimit(Resource::RLIMIT_FSIZE).unwrap();
    setrlimit(Resource::RLIMIT_FSIZE, 4 << 20, hard).unwrap();
    let render = rig.client_dir(FAKE_PID).join("render");
    let files = || std::fs::read_dir(&render).unwrap().count();
    let before = files();
    assert_eq!(c.try_alloc(Mem::Gtt, 8 << 20).err(), Some(Errno::ENOMEM));
    assert_eq!(c.try_alloc(Mem::Vram, 8 << 20).err(), Some(Errno::ENOMEM));
    assert_eq!(files(), before, "a failed ALLOC left a file");
    // What fits still allocates, and the failed ones reserved nothing.
    let b = c.alloc(Mem::Gtt, 2 << 20);
    assert!(rig.backing(FAKE_PID, MmapSpace::Render, b.mmap_offset).exists());
    setrlimit(Resource::RLIMIT_FSIZE, hard, hard).unwrap();
    c.alloc(Mem::Gtt, 8 << 20);
}
