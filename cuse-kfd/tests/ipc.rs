//! IPC share handles (AMD's out-of-tree IPC_EXPORT_HANDLE / IPC_IMPORT_HANDLE, which Debian's
//! libhsakmt 5.2.3 sends): a buffer exported by one process and imported by another is the same
//! memory in both, lives while any of them holds it, and is reached only through its handle.

mod support;

use cuse_kfd::memory::backing::MmapSpace;
use cuse_kfd::memory::vm::GpuVa;
use nix::errno::Errno;
use std::os::unix::fs::FileExt;
use support::raw::*;
use uapi::ioctl::*;
use uapi::kfd::*;

const EXPORTER: u32 = FAKE_PID;
const IMPORTER: u32 = FAKE_PID + 1;
const LATECOMER: u32 = FAKE_PID + 2;

/// The `flags` every export here passes: opaque to the device, handed back by IMPORT.
const EXPORT_FLAGS: u32 = 0x5a5a_0003;

fn export(c: &Client, b: &Buf) -> Result<[u32; 4], Errno> {
    let mut a = IpcExportHandleArgs { handle: b.handle, gpu_id: b.gpu, flags: EXPORT_FLAGS, ..Default::default() };
    c.call(AMDKFD_IOC_IPC_EXPORT_HANDLE, &mut a)?;
    Ok(a.share_handle)
}

fn import(c: &Client, gpu: u32, handle: [u32; 4], size: u64) -> Result<(Buf, u32), Errno> {
    let va = c.next_va(size);
    import_at(c, gpu, handle, va, size)
}

fn import_at(c: &Client, gpu: u32, handle: [u32; 4], va: u64, size: u64) -> Result<(Buf, u32), Errno> {
    let mut a = IpcImportHandleArgs { va_addr: va, share_handle: handle, gpu_id: gpu, ..Default::default() };
    c.call(AMDKFD_IOC_IPC_IMPORT_HANDLE, &mut a)?;
    Ok((Buf { handle: a.handle, va, size, mmap_offset: a.mmap_offset, gpu }, a.flags))
}

/// The bytes of `pid`'s backing file for render offset `offset`, as its mapping would see them.
fn read_file(rig: &Rig, pid: u32, offset: u64, at: u64, len: usize) -> Vec<u8> {
    let f = std::fs::File::open(rig.backing(pid, MmapSpace::Render, offset)).expect("the backing file");
    let mut v = vec![0; len];
    f.read_exact_at(&mut v, at).expect("reading the backing file");
    v
}

fn write_file(rig: &Rig, pid: u32, offset: u64, at: u64, data: &[u8]) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(rig.backing(pid, MmapSpace::Render, offset))
        .expect("the backing file");
    f.write_all_at(data, at).expect("writing the backing file");
}

fn gpu_read(rig: &Rig, pid: u32, gpu: u32, va: u64, len: usize) -> Vec<u8> {
    let p = rig.emb().device().process(pid).expect("the process");
    let mut v = vec![0; len];
    p.vm().read(gpu, GpuVa(va), &mut v).expect("a GPU read");
    v
}

#[test]
fn an_imported_buffer_is_the_exporters_memory() {
    let rig = Rig::new();
    let gpu = rig.gpu();
    let a = rig.open_as(EXPORTER);
    let b = rig.open_as(IMPORTER);
    let mine = a.alloc_mapped(Mem::Vram, 2 * PAGE_SIZE);
    let h = export(&a, &mine).unwrap();
    assert_ne!(h, [0; 4], "a handle is 128 random bits");
    assert_eq!(export(&a, &mine).unwrap(), h, "exporting a buffer again gives its handle again");
    assert_eq!(rig.emb().device().ipc().len(), 1);

    let before = b.available();
    let (theirs, flags) = import(&b, gpu, h, 2 * PAGE_SIZE).unwrap();
    assert_eq!(flags, EXPORT_FLAGS, "IMPORT answers the flags the exporter gave");
    let imported = rig.emb().device().process(IMPORTER).unwrap().inner().buffers[&theirs.handle].flags;
    assert_eq!(imported, Mem::Vram.flags(), "the import is made as the exported buffer was");
    assert_ne!(theirs.mmap_offset, 0, "an offset the importer mmaps on its render node");
    assert_eq!(before - b.available(), 2 * PAGE_SIZE, "the import is charged to the importer");
    assert_eq!(export(&b, &theirs).unwrap(), h, "an imported buffer exports under its handle");

    // The importer writes through its own file (what its render mmap maps): the exporter's
    // file and GPU view see the same bytes, in the second page too.
    write_file(&rig, IMPORTER, theirs.mmap_offset, PAGE_SIZE + 8, b"written by the importer");
    assert_eq!(read_file(&rig, EXPORTER, mine.mmap_offset, PAGE_SIZE + 8, 23), b"written by the importer");
    assert_eq!(gpu_read(&rig, EXPORTER, gpu, mine.va + PAGE_SIZE + 8, 23), b"written by the importer");
    // And the other way, through the importer's GPU VM.
    b.map(theirs.handle, &[gpu]).unwrap();
    let p = rig.emb().device().process(EXPORTER).unwrap();
    p.vm().write(gpu, GpuVa(mine.va), b"from the exporter's GPU").unwrap();
    assert_eq!(gpu_read(&rig, IMPORTER, gpu, theirs.va, 23), b"from the exporter's GPU");
    assert_eq!(read_file(&rig, IMPORTER, theirs.mmap_offset, 0, 23), b"from the exporter's GPU");
}

#[test]
fn the_memory_outlives_the_exporters_buffer_and_process() {
    let rig = Rig::new();
    let gpu = rig.gpu();
    let a = rig.open_as(EXPORTER);
    let b = rig.open_as(IMPORTER);
    let mine = a.alloc(Mem::Gtt, PAGE_SIZE);
    write_file(&rig, EXPORTER, mine.mmap_offset, 0, b"kept");
    let h = export(&a, &mine).unwrap();
    let (theirs, _) = import(&b, gpu, h, PAGE_SIZE).unwrap();
    a.free(mine.handle).unwrap();
    drop(a);
    assert!(rig.emb().device().process(EXPORTER).is_none());
    assert_eq!(read_file(&rig, IMPORTER, theirs.mmap_offset, 0, 4), b"kept", "the importer's view stays");
    // The handle still works while the importer holds the memory.
    let c = rig.open_as(LATECOMER);
    let (late, _) = import(&c, gpu, h, PAGE_SIZE).unwrap();
    write_file(&rig, LATECOMER, late.mmap_offset, 0, b"late");
    assert_eq!(read_file(&rig, IMPORTER, theirs.mmap_offset, 0, 4), b"late");
    // Once every holder freed it, the handle names nothing and the shared link is gone.
    b.free(theirs.handle).unwrap();
    c.free(late.handle).unwrap();
    assert!(rig.emb().device().ipc().is_empty());
    assert_eq!(import(&c, gpu, h, PAGE_SIZE).unwrap_err(), Errno::EINVAL);
    assert_eq!(count_files(&rig.root.join("ipc")), 0, "no shared file is left");
}

#[test]
fn only_the_handle_reaches_the_memory() {
    let rig = Rig::new();
    let gpu = rig.gpu();
    let a = rig.open_as(EXPORTER);
    let b = rig.open_as(IMPORTER);
    let mine = a.alloc(Mem::Vram, PAGE_SIZE);
    let h = export(&a, &mine).unwrap();
    // amdkfd kfd_ipc_import_handle: an unknown handle is EINVAL.
    let mut wrong = h;
    wrong[3] ^= 1;
    assert_eq!(import(&b, gpu, wrong, PAGE_SIZE).unwrap_err(), Errno::EINVAL);
    assert_eq!(import(&b, gpu, [0; 4], PAGE_SIZE).unwrap_err(), Errno::EINVAL);
    // Another process cannot export what it does not own, nor on a GPU the handle is not of.
    assert_eq!(export(&b, &mine).unwrap_err(), Errno::EINVAL);
    assert_eq!(export(&a, &Buf { gpu: gpu + 1, ..mine }).unwrap_err(), Errno::EINVAL);
    // An import on an unknown GPU, or over a VA already in use, is refused as ALLOC is.
    assert_eq!(import(&b, gpu + 1, h, PAGE_SIZE).unwrap_err(), Errno::EINVAL);
    let own = b.alloc(Mem::Gtt, PAGE_SIZE);
    assert_eq!(import_at(&b, gpu, h, own.va, PAGE_SIZE).unwrap_err(), Errno::EINVAL);
    assert_eq!(import_at(&b, gpu, h, own.va + 1, PAGE_SIZE).unwrap_err(), Errno::EINVAL);
    let s = rig.emb().device().process(IMPORTER).unwrap().stats();
    assert_eq!(s.buffers, 1, "refused imports leave nothing");
}

#[test]
fn memory_without_a_shareable_file_is_refused() {
    let rig = Rig::new();
    let c = rig.open();
    let gpu = rig.gpu();
    // USERPTR memory is the process's own pages (amdkfd cannot export it as a dma-buf).
    let layout = std::alloc::Layout::from_size_align(PAGE_SIZE as usize, PAGE_SIZE as usize).unwrap();
    // SAFETY: a non-zero size; freed below with the same layout.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!ptr.is_null());
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let user = c.try_alloc_at(gpu, ptr as u64, PAGE_SIZE, flags, ptr as u64).unwrap();
    assert_eq!(export(&c, &user).unwrap_err(), Errno::EINVAL);
    // Nor the doorbell slice.
    let db_flags = KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let va = c.next_va(DOORBELL_SLICE);
    let db = c.try_alloc_at(gpu, va, DOORBELL_SLICE, db_flags, 0).unwrap();
    assert_eq!(export(&c, &db).unwrap_err(), Errno::EINVAL);
    assert!(rig.emb().device().ipc().is_empty());
    c.free(user.handle).unwrap();
    c.free(db.handle).unwrap();
    // SAFETY: allocated above with this layout; the device no longer registers it.
    unsafe { std::alloc::dealloc(ptr, layout) };
}

/// The process doorbell slice, the only size a DOORBELL allocation may have.
const DOORBELL_SLICE: u64 = KFD_DOORBELLS_PER_PROCESS as u64 * KFD_DOORBELL_SIZE_SOC15 as u64;

/// Runs `script` under `sh` as `uid` with `path` as `$1`; whether it succeeded.
fn sh_as(uid: u32, script: &str, path: &std::path::Path) -> bool {
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(path)
        .uid(uid)
        .gid(uid)
        .output()
        .expect("run sh");
    out.status.success()
}

#[test]
fn an_importer_of_another_uid_reaches_the_memory_through_its_own_file() {
    const UID_A: u32 = 65534;
    const UID_B: u32 = 65533;
    const UID_C: u32 = 65532;
    let rig = Rig::new();
    let gpu = rig.gpu();
    let a = rig.open_as_uid(EXPORTER, UID_A);
    let b = rig.open_as_uid(IMPORTER, UID_B);
    let mine = a.alloc(Mem::Gtt, PAGE_SIZE);
    let h = export(&a, &mine).unwrap();
    let (theirs, _) = import(&b, gpu, h, PAGE_SIZE).unwrap();
    if !nix::unistd::geteuid().is_root() {
        println!("not root: every file is this user's own; the uid checks need root");
        return;
    }
    // The embedded device's runtime directory is private (0700); the daemon's is shared (0755).
    std::fs::set_permissions(&rig.root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = rig.backing(IMPORTER, MmapSpace::Render, theirs.mmap_offset);
    // B writes its own file (in place, as through a mapping): A's buffer has the bytes.
    assert!(sh_as(UID_B, "printf cross-uid | dd of=\"$1\" conv=notrunc status=none", &path), "B cannot write");
    assert_eq!(read_file(&rig, EXPORTER, mine.mmap_offset, 0, 9), b"cross-uid");
    // A third uid reaches neither B's file nor the device's shared link.
    assert!(!sh_as(UID_C, "cat \"$1\" >/dev/null", &path), "another uid read the importer's file");
    let shared: Vec<_> = std::fs::read_dir(rig.root.join("ipc")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(shared.len(), 1);
    assert!(!sh_as(UID_A, "cat \"$1\" >/dev/null", &shared[0]), "a client reached the device's shared link");
    assert!(!sh_as(UID_B, "cat \"$1\" >/dev/null", &shared[0]), "a client reached the device's shared link");
}

#[test]
fn a_real_child_process_writes_the_exporters_memory_through_its_import() {
    use std::io::Write;
    let rig = Rig::new();
    let gpu = rig.gpu();
    let a = rig.open_as(EXPORTER);
    let mine = a.alloc_mapped(Mem::Vram, 2 * PAGE_SIZE);
    let h = export(&a, &mine).unwrap();
    // The child learns its file's path on stdin, then writes it in place.
    let mut child = std::process::Command::new("sh")
        .args(["-c", "read p; printf from-the-child | dd of=\"$p\" bs=1 seek=4100 conv=notrunc status=none"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let b = rig.open_process(child.id());
    let (theirs, _) = import(&b, gpu, h, 2 * PAGE_SIZE).unwrap();
    let path = rig.backing(child.id(), MmapSpace::Render, theirs.mmap_offset);
    writeln!(child.stdin.take().unwrap(), "{}", path.display()).unwrap();
    assert!(child.wait().unwrap().success(), "the child could not write its import");
    assert_eq!(gpu_read(&rig, EXPORTER, gpu, mine.va + 4100, 14), b"from-the-child");
    // The child's exit ends its context; the exporter's buffer and handle live on.
    drop(b);
    wait_gone(&rig, child.id());
    assert_eq!(read_file(&rig, EXPORTER, mine.mmap_offset, 4100, 14), b"from-the-child");
    assert!(rig.emb().device().ipc().get(&h).is_some());
}

fn wait_gone(rig: &Rig, pid: u32) {
    let start = std::time::Instant::now();
    while rig.emb().device().process(pid).is_some() {
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "the child's context outlived it");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The embedded device is one per process (each with a private store): a handle one process
/// exported is found by another process's embedded device of the same user, through the stores.
/// Two rigs here are two such devices. The memory is the same in both, and lives while either
/// holds it, as on one device.
#[test]
fn another_embedded_device_of_the_user_imports_the_handle() {
    let (here, there, third) = (Rig::new(), Rig::new(), Rig::new());
    let a = here.open_as(EXPORTER);
    let mine = a.alloc_mapped(Mem::Vram, 2 * PAGE_SIZE);
    write_file(&here, EXPORTER, mine.mmap_offset, PAGE_SIZE, b"exported here");
    let h = export(&a, &mine).unwrap();

    let b = there.open_as(IMPORTER);
    let (theirs, flags) = import(&b, there.gpu(), h, 2 * PAGE_SIZE).unwrap();
    assert_eq!(flags, EXPORT_FLAGS, "the exporter's flags travel with the handle");
    let made = {
        let p = there.emb().device().process(IMPORTER).unwrap();
        let inner = p.inner();
        (inner.buffers[&theirs.handle].flags, inner.buffers[&theirs.handle].size)
    };
    assert_eq!(made, (Mem::Vram.flags(), 2 * PAGE_SIZE), "made as the export was");
    assert_eq!(read_file(&there, IMPORTER, theirs.mmap_offset, PAGE_SIZE, 13), b"exported here");
    write_file(&there, IMPORTER, theirs.mmap_offset, 8, b"imported there");
    assert_eq!(gpu_read(&here, EXPORTER, here.gpu(), mine.va + 8, 14), b"imported there");
    assert_eq!(export(&b, &theirs).unwrap(), h, "the import exports under the same handle");

    // The exporter's device goes away: the importer's keeps the handle alive for a third.
    drop(a);
    drop(here);
    let c = third.open_as(LATECOMER);
    let (late, _) = import(&c, third.gpu(), h, 2 * PAGE_SIZE).unwrap();
    assert_eq!(read_file(&third, LATECOMER, late.mmap_offset, 8, 14), b"imported there");

    // A forged handle is found nowhere; once every holder let go, neither is the real one.
    let mut forged = h;
    forged[2] ^= 1;
    assert_eq!(import(&c, third.gpu(), forged, PAGE_SIZE).unwrap_err(), Errno::EINVAL);
    b.free(theirs.handle).unwrap();
    c.free(late.handle).unwrap();
    let d = third.open_as(LATECOMER + 1);
    assert_eq!(import(&d, third.gpu(), h, PAGE_SIZE).unwrap_err(), Errno::EINVAL);
    assert_eq!(count_files(&there.root.join("ipc")), 0, "the adopted link went with its last holder");
    assert_eq!(count_files(&third.root.join("ipc")), 0, "the adopted link went with its last holder");
}

/// A daemon's store serves every user: its table is the only place it takes handles from, and a
/// private store's exports stay out of its reach.
#[test]
fn a_daemons_device_does_not_look_in_private_stores() {
    let private = Rig::new();
    let a = private.open_as(EXPORTER);
    let mine = a.alloc(Mem::Gtt, PAGE_SIZE);
    let h = export(&a, &mine).unwrap();
    let dir = std::env::temp_dir().join(format!("cuse-kfd-ipc-test-{}", std::process::id()));
    let daemon =
        Rig::with_config(&cuse_kfd::device::DeviceConfig { runtime_dir: Some(dir.clone()), ..Default::default() });
    let b = daemon.open_as(IMPORTER);
    assert_eq!(import(&b, daemon.gpu(), h, PAGE_SIZE).unwrap_err(), Errno::EINVAL);
    drop(b);
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);
}
