//! Issue 13, H1 and the store side of H2: a client truncates, or punches holes in (and then
//! fills the file system under), the files behind its doorbells, event page, MMIO page and
//! buffers while its queue runs and its events fire.
//!
//! The device is embedded: it runs in this test process, so a SIGBUS in the device kills the
//! test binary; that is the failure these tests show. What must happen instead: the device
//! lives on, the offending client's queue stops with a VM fault reported through its MEMORY
//! event, and a second client's round trip (a packet, its completion signal, its interrupt
//! event) still succeeds.
//!
//! The client side of these tests never touches the damaged file again: its own mapping of the
//! file is not guarded (a real client would get the SIGBUS itself, which is its own business).

mod support;

use cuse_kfd::{DeviceConfig, Embedded};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use support::client::{wait_for, TIMEOUT, WAIT_MS};
use support::raw::fake_caller;
use thunk::queue::packet;
use thunk::queue::AqlQueue;
use thunk::signal::Signals;
use thunk::transport::EmbeddedTransport;
use thunk::Kfd;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::FromBytes;

const VICTIM: u32 = 5_000_100;
const BYSTANDER: u32 = 5_000_200;

/// What the victim damages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Doorbell,
    EventPage,
    Mmio,
    Gtt,
    Vram,
}

const TARGETS: [Target; 5] = [Target::Doorbell, Target::EventPage, Target::Mmio, Target::Gtt, Target::Vram];

/// How it damages it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    /// ftruncate to 0.
    Truncate,
    /// fallocate(PUNCH_HOLE) over the whole file, then fill the file system.
    PunchAndFill,
}

struct Fx {
    emb: Embedded,
    root: PathBuf,
    gpu: u32,
    victim: Kfd,
    bystander: Kfd,
}

impl Fx {
    /// A device with its runtime directory at `root`, or a private one.
    fn new(root: Option<PathBuf>) -> Fx {
        let config = DeviceConfig { runtime_dir: root, ..DeviceConfig::default() };
        let emb = Embedded::new(&config).expect("creating the device");
        let root = emb.device().backing().root().to_path_buf();
        let client = |pid| {
            let t = EmbeddedTransport::open_as(&emb, fake_caller(pid)).expect("opening as a simulated client");
            Kfd::new(Box::new(t))
        };
        let (victim, bystander) = (client(VICTIM), client(BYSTANDER));
        let gpu = victim.gpu_ids().expect("GET_PROCESS_APERTURES_NEW")[0];
        Fx { emb, root, gpu, victim, bystander }
    }

    fn process(&self, pid: u32) -> std::sync::Arc<cuse_kfd::process::Process> {
        self.emb.device().process(pid).expect("the client's process context")
    }

    /// The backing file of buffer `handle` of the victim.
    fn buffer_file(&self, handle: u64) -> std::sync::Arc<cuse_kfd::memory::backing::BackingFile> {
        let p = self.process(VICTIM);
        let inner = p.inner();
        inner.buffers[&handle].file().expect("a file-backed buffer").clone()
    }
}

/// A packet, its completion signal and that signal's interrupt event, on a fresh queue.
fn round_trip(kfd: &Kfd, gpu: u32, what: &str) {
    let q = AqlQueue::new(kfd, gpu, 64).expect("CREATE_QUEUE");
    let s = Signals::new(kfd, gpu, 1).expect("signal memory");
    let ev = s.attach_event(kfd, 0).expect("an interrupt signal");
    s.value(0).store(1, Ordering::Release);
    q.submit(&packet::barrier_and([0; 5], s.handle(0), false));
    if let Err(v) = s.wait(0, TIMEOUT, |v| v == 0) {
        panic!("{what}: the completion signal is {v}, not 0");
    }
    let r = kfd.wait_events(&[ev], false, WAIT_MS);
    assert_eq!((r.result, r.wait_result), (Ok(()), KFD_IOC_WAIT_RESULT_COMPLETE), "{what}: the interrupt event");
}

/// Allocates a page of MMIO remap memory at a fixed GPU address and maps it to `gpu`.
fn mmio_page(kfd: &Kfd, gpu: u32) -> (u64, u64) {
    let va = 0x7f00_0000_0000u64;
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: va,
        size: PAGE_SIZE,
        gpu_id: gpu,
        flags: KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        ..Default::default()
    };
    // SAFETY: ALLOC carries no pointer.
    unsafe { kfd.call(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a) }.expect("ALLOC_MEMORY_OF_GPU mmio");
    let ids = [gpu];
    let mut m =
        MapMemoryToGpuArgs { handle: a.handle, device_ids_array_ptr: ids.as_ptr() as u64, n_devices: 1, n_success: 0 };
    // SAFETY: the device reads `ids`, alive for the call.
    unsafe { kfd.call(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut m) }.expect("MAP_MEMORY_TO_GPU mmio");
    (a.handle, va)
}

fn damage(path: &Path, how: Damage, filler: &Path) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match how {
        Damage::Truncate => f.set_len(0).expect("ftruncate"),
        Damage::PunchAndFill => {
            let len = f.metadata().unwrap().len() as i64;
            let mode =
                nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE;
            nix::fcntl::fallocate(f.as_raw_fd(), mode, 0, len).expect("fallocate PUNCH_HOLE");
            fill(filler);
        }
    }
}

/// Writes `path` until the file system is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).expect("the filler file");
    let chunk = vec![0x5au8; 4096];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
}

/// The scenario for one target: the victim's queue runs and its events fire; the victim damages
/// the target; the device touches it; the victim gets a VM fault and a stopped queue; the
/// bystander's round trip works.
fn scenario(root: Option<PathBuf>, target: Target, how: Damage) {
    let fx = Fx::new(root);
    let (victim, gpu) = (&fx.victim, fx.gpu);
    let what = format!("{target:?} {how:?}");
    // A running queue, an interrupt signal (so the event page exists) and a MEMORY event.
    let q = AqlQueue::new(victim, gpu, 64).expect("CREATE_QUEUE");
    let s = Signals::new(victim, gpu, 1).expect("signal memory");
    let ev = s.attach_event(victim, 0).expect("an interrupt signal");
    let mem_ev = victim.create_event(gpu, KFD_IOC_EVENT_MEMORY, false).expect("a MEMORY event").event_id;
    s.value(0).store(1, Ordering::Release);
    q.submit(&packet::barrier_and([0; 5], s.handle(0), false));
    assert!(s.wait(0, TIMEOUT, |v| v == 0).is_ok(), "{what}: the warm-up packet");
    let r = victim.wait_events(&[ev], false, WAIT_MS);
    assert_eq!(r.wait_result, KFD_IOC_WAIT_RESULT_COMPLETE, "{what}: the warm-up event");

    // The target, and the completion signal whose use makes the device touch it.
    // Held (never touched again) until the end: dropping it frees the buffer.
    let mut target_mem = None;
    let (file, completion) = match target {
        Target::Doorbell => {
            let p = fx.process(VICTIM);
            let inner = p.inner();
            (inner.devices[&gpu].doorbells.as_ref().expect("a doorbell slice").file.clone(), None)
        }
        Target::EventPage => {
            let handle = fx.process(VICTIM).inner().event_page_handle.expect("an event page");
            // The interrupt signal: completing it writes its event id into the page.
            (fx.buffer_file(handle), Some(s.handle(0)))
        }
        Target::Mmio => {
            let (handle, va) = mmio_page(victim, gpu);
            (fx.buffer_file(handle), Some(va))
        }
        Target::Gtt | Target::Vram => {
            let kind = if target == Target::Gtt { thunk::memory::Kind::Gtt } else { thunk::memory::Kind::Vram };
            // An amd_signal_t at the start of a buffer of that kind.
            let b = victim.alloc(gpu, PAGE_SIZE, kind).expect("target memory");
            b.u64_at(0).store(uapi::signal::AMD_SIGNAL_KIND_USER as u64, Ordering::Relaxed);
            b.i64_at(uapi::signal::AMD_SIGNAL_VALUE_OFFSET as u64).store(1, Ordering::Release);
            let (handle, va) = (b.handle(), b.addr(0));
            target_mem = Some(b);
            (fx.buffer_file(handle), Some(va))
        }
    };
    let filler = fx.root.join("filler");
    damage(file.path(), how, &filler);
    if let Some(sig) = completion {
        // Before the signal's page is damaged only the device touches it from here on.
        if target == Target::EventPage {
            s.value(0).store(1, Ordering::Release);
        }
        q.submit(&packet::barrier_and([0; 5], sig, false));
    }

    let doorbell_hole = target == Target::Doorbell && how == Damage::PunchAndFill;
    if !doorbell_hole {
        let r = victim.wait_events(&[mem_ev], false, WAIT_MS);
        assert_eq!((r.result, r.wait_result), (Ok(()), KFD_IOC_WAIT_RESULT_COMPLETE), "{what}: the MEMORY event");
        let m = HsaMemoryExceptionData::read_from_bytes(uapi::IntoBytes::as_bytes(&r.data[0].payload)).unwrap();
        assert_eq!(m.failure.not_present, 1, "{what}");
        let p = fx.process(VICTIM);
        let queue = p.inner().queues[&q.id].clone();
        let err = wait_for(TIMEOUT, &format!("{what}: the victim's queue error"), || queue.status().error.clone());
        assert!(err.reason.contains("truncated"), "{what}: {err:?}");
        assert!(file.region().is_lost(), "{what}: the device still reaches the file");
    }
    // (A punched doorbell slice is no fault: the engine polls the doorbell, and its first read
    // after the punch takes the page back before the file system fills up; destroying the
    // queue below then writes to a page that is there.)
    drop(q);
    drop(target_mem);
    let _ = std::fs::remove_file(&filler);
    round_trip(&fx.bystander, gpu, &format!("{what}: the bystander"));
    // And the victim itself can still use what it did not damage.
    if target != Target::Doorbell && target != Target::EventPage {
        round_trip(victim, gpu, &format!("{what}: the victim's undamaged memory"));
    }
}

#[test]
fn truncation_of_every_backing_file_faults_only_its_client() {
    for target in TARGETS {
        scenario(None, target, Damage::Truncate);
    }
}

/// A small tmpfs, mounted for the test and detached when dropped.
struct SmallTmpfs(PathBuf);

const TMPFS_PREFIX: &str = "cuse-kfd-truncation-";

impl SmallTmpfs {
    fn mount(bytes: u64) -> Option<SmallTmpfs> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        SmallTmpfs::sweep();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = PathBuf::from("/dev/shm").join(format!("{TMPFS_PREFIX}{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let options = format!("size={bytes},mode=0755");
        match nix::mount::mount(
            Some("tmpfs"),
            &dir,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(options.as_str()),
        ) {
            Ok(()) => Some(SmallTmpfs(dir)),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                eprintln!("cannot mount a tmpfs ({e}): the hole-punch half of the truncation test needs root");
                None
            }
        }
    }

    /// Detaches what a run that died (of the SIGBUS this file tests for) left mounted.
    fn sweep() {
        let Ok(entries) = std::fs::read_dir("/dev/shm") else { return };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix(TMPFS_PREFIX).and_then(|r| r.split('-').next()) else { continue };
            if Path::new("/proc").join(pid).exists() {
                continue;
            }
            let _ = nix::mount::umount2(&e.path(), nix::mount::MntFlags::MNT_DETACH);
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// H2's store side: the device's store into a hole of a full file system is a SIGBUS too.
#[test]
fn truncation_by_hole_punch_in_a_full_filesystem_faults_only_its_client() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root (the device tier runs it)");
        return;
    }
    for target in TARGETS {
        let Some(fs) = SmallTmpfs::mount(4 << 20) else { return };
        scenario(Some(fs.0.join("rt")), target, Damage::PunchAndFill);
    }
}
