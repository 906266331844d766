//! Cross-process GPU memory copies (AMD's out-of-tree CROSS_MEMORY_COPY, which Debian's
//! libhsakmt 5.2.3 sends for hsaKmtProcessVMRead/Write): both directions, lists of ranges, a
//! copy cut short by either list or by a bad range, and the ptrace-style permission check.

mod support;

use cuse_kfd::memory::vm::GpuVa;
use nix::errno::Errno;
use support::raw::*;
use uapi::ioctl::*;
use uapi::kfd::*;

const LOCAL: u32 = FAKE_PID;
const REMOTE: u32 = FAKE_PID + 1;

fn r(va: u64, size: u64) -> MemoryRange {
    MemoryRange { va_addr: va, size }
}

/// CROSS_MEMORY_COPY by `c` with process `pid`: `write` copies `local` into the remote's
/// `remote`, otherwise the other way. Returns the result and `bytes_copied`.
fn cma(c: &Client, pid: u32, local: &[MemoryRange], remote: &[MemoryRange], write: bool) -> (Result<(), Errno>, u64) {
    let (src, dst) = if write { (local, remote) } else { (remote, local) };
    let mut a = CrossMemoryCopyArgs {
        pid,
        flags: if write { KFD_CROSS_MEMORY_RW_BIT } else { 0 },
        src_mem_range_array: src.as_ptr() as u64,
        src_mem_array_size: src.len() as u64,
        dst_mem_range_array: dst.as_ptr() as u64,
        dst_mem_array_size: dst.len() as u64,
        bytes_copied: 0xdead,
    };
    let res = c.call(AMDKFD_IOC_CROSS_MEMORY_COPY, &mut a);
    (res, a.bytes_copied)
}

fn put(rig: &Rig, pid: u32, va: u64, data: &[u8]) {
    let p = rig.emb().device().process(pid).expect("the process");
    p.vm().write(rig.gpu(), GpuVa(va), data).expect("a GPU write");
}

fn get(rig: &Rig, pid: u32, va: u64, len: usize) -> Vec<u8> {
    let p = rig.emb().device().process(pid).expect("the process");
    let mut v = vec![0; len];
    p.vm().read(rig.gpu(), GpuVa(va), &mut v).expect("a GPU read");
    v
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn reads_and_writes_reach_the_other_processs_gpu_memory() {
    let rig = Rig::new();
    let a = rig.open_as(LOCAL);
    let b = rig.open_as(REMOTE);
    let mine = a.alloc_mapped(Mem::Vram, 2 * PAGE_SIZE);
    let theirs = b.alloc_mapped(Mem::Gtt, 2 * PAGE_SIZE);
    let data = pattern(2 * PAGE_SIZE as usize, 7);
    put(&rig, REMOTE, theirs.va, &data);

    // A read: remote to local, the whole buffer.
    let (res, n) = cma(&a, REMOTE, &[r(mine.va, 2 * PAGE_SIZE)], &[r(theirs.va, 2 * PAGE_SIZE)], false);
    assert_eq!((res, n), (Ok(()), 2 * PAGE_SIZE));
    assert_eq!(get(&rig, LOCAL, mine.va, data.len()), data);

    // A write: local to remote, at an unaligned place inside the buffer.
    put(&rig, LOCAL, mine.va, b"written by the local process");
    let (res, n) = cma(&a, REMOTE, &[r(mine.va, 28)], &[r(theirs.va + 4099, 28)], true);
    assert_eq!((res, n), (Ok(()), 28));
    assert_eq!(get(&rig, REMOTE, theirs.va + 4099, 28), b"written by the local process");
    assert_eq!(get(&rig, REMOTE, theirs.va + 4098, 1), &data[4098..4099], "nothing before the range moved");

    // A process copying within itself (kfdtest CMABasicTest's getpid() case).
    let (res, n) = cma(&a, LOCAL, &[r(mine.va + PAGE_SIZE, 16)], &[r(mine.va, 16)], false);
    assert_eq!((res, n), (Ok(()), 16));
    assert_eq!(get(&rig, LOCAL, mine.va + PAGE_SIZE, 16), b"written by the l");
}

#[test]
fn ranges_form_one_stream_cut_short_by_the_shorter_list() {
    let rig = Rig::new();
    let a = rig.open_as(LOCAL);
    let b = rig.open_as(REMOTE);
    let x = a.alloc_mapped(Mem::Vram, PAGE_SIZE);
    let y = a.alloc_mapped(Mem::Vram, PAGE_SIZE);
    let theirs = b.alloc_mapped(Mem::Vram, 4 * PAGE_SIZE);
    put(&rig, LOCAL, x.va, &pattern(PAGE_SIZE as usize, 1));
    put(&rig, LOCAL, y.va, &pattern(PAGE_SIZE as usize, 2));

    // Two local sources (one with an empty range between them) into three remote ranges of
    // other sizes: 100 + 200 bytes fill 50 + 150 + 100 bytes in order.
    let local = [r(x.va, 100), r(x.va + 8, 0), r(y.va, 200)];
    let remote = [r(theirs.va, 50), r(theirs.va + 1000, 150), r(theirs.va + 2000, 100)];
    let (res, n) = cma(&a, REMOTE, &local, &remote, true);
    assert_eq!((res, n), (Ok(()), 300));
    let mut stream = pattern(PAGE_SIZE as usize, 1)[..100].to_vec();
    stream.extend_from_slice(&pattern(PAGE_SIZE as usize, 2)[..200]);
    assert_eq!(get(&rig, REMOTE, theirs.va, 50), &stream[..50]);
    assert_eq!(get(&rig, REMOTE, theirs.va + 1000, 150), &stream[50..200]);
    assert_eq!(get(&rig, REMOTE, theirs.va + 2000, 100), &stream[200..]);

    // A shorter destination ends the copy without error (kfdtest's unaligned case).
    let (res, n) = cma(&a, REMOTE, &[r(x.va, PAGE_SIZE)], &[r(theirs.va + 3 * PAGE_SIZE, 1001)], true);
    assert_eq!((res, n), (Ok(()), 1001));
    // So does a shorter source.
    let (res, n) = cma(&a, REMOTE, &[r(y.va, 10)], &[r(theirs.va, PAGE_SIZE)], true);
    assert_eq!((res, n), (Ok(()), 10));
    // Empty ranges only: nothing to copy, and no error.
    let (res, n) = cma(&a, REMOTE, &[r(x.va, 0)], &[r(0, 0)], true);
    assert_eq!((res, n), (Ok(()), 0));
}

#[test]
fn a_bad_range_fails_with_efault_after_the_bytes_before_it() {
    let rig = Rig::new();
    let a = rig.open_as(LOCAL);
    let b = rig.open_as(REMOTE);
    let mine = a.alloc_mapped(Mem::Vram, 2 * PAGE_SIZE);
    let theirs = b.alloc_mapped(Mem::Vram, PAGE_SIZE);
    let unmapped = b.alloc(Mem::Vram, PAGE_SIZE);
    put(&rig, REMOTE, theirs.va, &pattern(PAGE_SIZE as usize, 3));

    // A range running past its buffer is refused before anything moves (kfdtest's overflow
    // case: VA + 4 with the buffer's size).
    let (res, n) = cma(&a, REMOTE, &[r(mine.va, PAGE_SIZE)], &[r(theirs.va + 4, PAGE_SIZE)], false);
    assert_eq!((res, n), (Err(Errno::EFAULT), 0));
    // A second source range outside any buffer: the first one's bytes are copied and counted.
    let remote = [r(theirs.va, PAGE_SIZE), r(0x7000_0000_0000, 16)];
    let (res, n) = cma(&a, REMOTE, &[r(mine.va, 2 * PAGE_SIZE)], &remote, false);
    assert_eq!((res, n), (Err(Errno::EFAULT), PAGE_SIZE));
    assert_eq!(get(&rig, LOCAL, mine.va, PAGE_SIZE as usize), pattern(PAGE_SIZE as usize, 3));
    // A buffer mapped on no GPU is out of the device's reach.
    let (res, n) = cma(&a, REMOTE, &[r(mine.va, 16)], &[r(unmapped.va, 16)], false);
    assert_eq!((res, n), (Err(Errno::EFAULT), 0));
    // A local range is checked as the remote's is.
    let (res, n) = cma(&a, REMOTE, &[r(mine.va + PAGE_SIZE, 2 * PAGE_SIZE)], &[r(theirs.va, 16)], true);
    assert_eq!((res, n), (Err(Errno::EFAULT), 0));
    // The doorbell slice is not memory to copy.
    let db_flags = KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let slice = KFD_DOORBELLS_PER_PROCESS as u64 * KFD_DOORBELL_SIZE_SOC15 as u64;
    let va = b.next_va(slice);
    let db = b.try_alloc_at(rig.gpu(), va, slice, db_flags, 0).unwrap();
    b.map(db.handle, &[rig.gpu()]).unwrap();
    let (res, n) = cma(&a, REMOTE, &[r(mine.va, 8)], &[r(db.va, 8)], true);
    assert_eq!((res, n), (Err(Errno::EFAULT), 0));
}

#[test]
fn the_arrays_and_the_process_are_checked_in_amdkfds_order() {
    let rig = Rig::new();
    let a = rig.open_as(LOCAL);
    let mine = a.alloc_mapped(Mem::Vram, PAGE_SIZE);
    let one = [r(mine.va, 8)];
    let args = |pid: u32, src: u64, nsrc: u64, dst: u64, ndst: u64| CrossMemoryCopyArgs {
        pid,
        flags: 0,
        src_mem_range_array: src,
        src_mem_array_size: nsrc,
        dst_mem_range_array: dst,
        dst_mem_array_size: ndst,
        bytes_copied: 77,
    };
    let p = one.as_ptr() as u64;
    let call = |mut x: CrossMemoryCopyArgs| (a.call(AMDKFD_IOC_CROSS_MEMORY_COPY, &mut x), x.bytes_copied);
    // Missing arrays: EINVAL before bytes_copied is touched.
    assert_eq!(call(args(LOCAL, 0, 1, p, 1)), (Err(Errno::EINVAL), 77));
    assert_eq!(call(args(LOCAL, p, 1, p, 0)), (Err(Errno::EINVAL), 77));
    // Too many ranges to copy in: ENOMEM; an unreadable array: EFAULT.
    assert_eq!(call(args(LOCAL, p, u64::MAX, p, 1)), (Err(Errno::ENOMEM), 0));
    assert_eq!(call(args(LOCAL, 8, 1, p, 1)), (Err(Errno::EFAULT), 0));
    // No such process: ESRCH. A live process without the device open: EINVAL (amdkfd's
    // "invalid kfd process"), this test's own child.
    assert_eq!(call(args(0x7fff_fff0, p, 1, p, 1)).0, Err(Errno::ESRCH));
    let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("spawn sleep");
    assert_eq!(call(args(child.id(), p, 1, p, 1)).0, Err(Errno::EINVAL));
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A child running `sleep` as `uid`.
fn sleeper(uid: u32) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    std::process::Command::new("sleep").arg("30").uid(uid).gid(uid).spawn().expect("spawn sleep")
}

#[test]
fn another_users_process_is_out_of_reach() {
    if !nix::unistd::geteuid().is_root() {
        println!("not root: cannot start processes of other users");
        return;
    }
    const UID_A: u32 = 65534;
    const UID_B: u32 = 65533;
    let rig = Rig::new();
    let (mut pa, mut pa2, mut pb) = (sleeper(UID_A), sleeper(UID_A), sleeper(UID_B));
    let a = rig.open_process_as_uid(pa.id(), UID_A);
    let a2 = rig.open_process_as_uid(pa2.id(), UID_A);
    let b = rig.open_process_as_uid(pb.id(), UID_B);
    let root = rig.open();
    let mine = a.alloc_mapped(Mem::Vram, PAGE_SIZE);
    let same_user = a2.alloc_mapped(Mem::Vram, PAGE_SIZE);
    let theirs = b.alloc_mapped(Mem::Vram, PAGE_SIZE);
    let roots = root.alloc_mapped(Mem::Vram, PAGE_SIZE);
    put(&rig, pb.id(), theirs.va, b"secret of B");

    // Another uid, no CAP_SYS_PTRACE: EPERM both ways, nothing copied.
    for write in [false, true] {
        let (res, n) = cma(&a, pb.id(), &[r(mine.va, 11)], &[r(theirs.va, 11)], write);
        assert_eq!((res, n), (Err(Errno::EPERM), 0), "write {write}");
    }
    assert_ne!(get(&rig, pa.id(), mine.va, 11), b"secret of B");
    // The same uid (a sibling; no Yama here, or scope 0) may.
    if !std::path::Path::new("/proc/sys/kernel/yama/ptrace_scope").exists() {
        let (res, n) = cma(&a, pa2.id(), &[r(mine.va, 8)], &[r(same_user.va, 8)], true);
        assert_eq!((res, n), (Ok(()), 8));
    }
    // Root, with CAP_SYS_PTRACE, reaches B.
    let (res, n) = cma(&root, pb.id(), &[r(roots.va, 11)], &[r(theirs.va, 11)], false);
    assert_eq!((res, n), (Ok(()), 11));
    assert_eq!(get(&rig, std::process::id(), roots.va, 11), b"secret of B");
    // A live process of another user without the device open: EPERM comes first.
    let mut other = sleeper(UID_B);
    let (res, _) = cma(&a, other.id(), &[r(mine.va, 8)], &[r(mine.va, 8)], false);
    assert_eq!(res, Err(Errno::EPERM));
    for c in [&mut pa, &mut pa2, &mut pb, &mut other] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn two_processes_copying_from_each_other_at_once_do_not_deadlock() {
    let rig = Rig::new();
    let a = rig.open_as(LOCAL);
    let b = rig.open_as(REMOTE);
    let x = a.alloc_mapped(Mem::Vram, 4 << 20);
    let y = b.alloc_mapped(Mem::Vram, 4 << 20);
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..20 {
                assert_eq!(cma(&a, REMOTE, &[r(x.va, 4 << 20)], &[r(y.va, 4 << 20)], false), (Ok(()), 4 << 20));
            }
        });
        s.spawn(|| {
            for _ in 0..20 {
                assert_eq!(cma(&b, LOCAL, &[r(y.va, 4 << 20)], &[r(x.va, 4 << 20)], false), (Ok(()), 4 << 20));
            }
        });
    });
}

/// An embedded device serves its processes' GPU memory on its peer socket (its private store's
/// `peer.sock`) to the embedded device of another process, which runs a CROSS_MEMORY_COPY naming
/// a process it has no context for: a range check, reads and writes, each with the answers a
/// copy within one device gives. (The whole path, two processes each with its device, is
/// kfd-tests' `cma` program on the embedded device.)
#[test]
fn the_peer_socket_serves_the_devices_processes_memory() {
    use cuse_kfd::peer::{Peer, CHUNK, SOCKET_NAME};
    let rig = Rig::new();
    let b = rig.open_as(REMOTE);
    let theirs = b.alloc_mapped(Mem::Vram, 2 * PAGE_SIZE);
    let large = b.alloc_mapped(Mem::Gtt, 4 * CHUNK);
    let unmapped = b.alloc(Mem::Vram, PAGE_SIZE);
    let unmapped_gtt = b.alloc(Mem::Gtt, PAGE_SIZE);
    put(&rig, REMOTE, theirs.va, &pattern(PAGE_SIZE as usize, 3));

    let peer = Peer::connect(&rig.root.join(SOCKET_NAME), REMOTE).expect("the peer socket");
    assert_eq!(peer.check(theirs.va, 2 * PAGE_SIZE), Ok(()));
    // A check names a whole range: longer than a chunk is fine (a copy checks each range whole).
    assert_eq!(peer.check(large.va, 4 * CHUNK), Ok(()));
    assert_eq!(peer.check(large.va, 4 * CHUNK + PAGE_SIZE), Err(Errno::EFAULT));
    assert_eq!(peer.check(theirs.va + PAGE_SIZE, 2 * PAGE_SIZE), Err(Errno::EFAULT), "past the buffer");
    assert_eq!(peer.check(unmapped.va, PAGE_SIZE), Err(Errno::EFAULT), "VRAM mapped on no GPU");
    assert_eq!(peer.check(unmapped_gtt.va, PAGE_SIZE), Err(Errno::EFAULT), "GTT mapped on no GPU");
    let mut got = vec![0; PAGE_SIZE as usize];
    peer.read(theirs.va, &mut got).unwrap();
    assert_eq!(got, pattern(PAGE_SIZE as usize, 3));
    peer.write(theirs.va + PAGE_SIZE + 16, b"through the peer").unwrap();
    assert_eq!(get(&rig, REMOTE, theirs.va + PAGE_SIZE + 16, 16), b"through the peer");
    // A chunk is the most one request moves; the connection stays usable after a refusal.
    let mut big = vec![0; CHUNK as usize + 1];
    assert_eq!(peer.read(theirs.va, &mut big), Err(Errno::EINVAL));
    assert_eq!(peer.read(unmapped.va, &mut got), Err(Errno::EFAULT));
    peer.read(theirs.va, &mut got).unwrap();
    // Connections are served one at a time (a copy holds one for its length).
    drop(peer);

    // A process the device has no context for is not there (amdkfd's invalid kfd process).
    let nobody = Peer::connect(&rig.root.join(SOCKET_NAME), REMOTE + 100).unwrap();
    assert_eq!(nobody.check(theirs.va, PAGE_SIZE), Err(Errno::EINVAL));
    drop(nobody);

    // Bytes that are not a request end the connection, and the server goes on with the next.
    {
        use std::io::{Read, Write};
        let mut raw = std::os::unix::net::UnixStream::connect(rig.root.join(SOCKET_NAME)).unwrap();
        raw.write_all(&[0x55; 64]).unwrap();
        let mut answer = Vec::new();
        // Closed with bytes unread: a reset, or an end of stream.
        match raw.read_to_end(&mut answer) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("an answer to garbage: {other:?}, {answer:?}"),
        }
    }
    let again = Peer::connect(&rig.root.join(SOCKET_NAME), REMOTE).unwrap();
    assert_eq!(again.check(theirs.va, PAGE_SIZE), Ok(()));
}

/// A daemon's device (a runtime directory of its own, serving every process itself) has no peer
/// socket.
#[test]
fn a_daemons_device_has_no_peer_socket() {
    let dir = std::env::temp_dir().join(format!("cuse-kfd-peer-test-{}", std::process::id()));
    let daemon =
        Rig::with_config(&cuse_kfd::device::DeviceConfig { runtime_dir: Some(dir.clone()), ..Default::default() });
    assert!(!daemon.root.join(cuse_kfd::peer::SOCKET_NAME).exists());
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(Rig::new().root.join(cuse_kfd::peer::SOCKET_NAME).exists(), "an embedded device's store has one");
}
