//! Malformed requests, one table row each: a name, a setup closure, the request, and the errno
//! amdkfd answers (kfd_chardev.c, kfd_events.c, kfd_process_queue_manager.c, kfd_queue.c). Each
//! row runs on a fresh device; after the request the device's object counts and backing files
//! must be what they were before it: a refused request creates nothing, not even half.
//!
//! The same table runs twice: on the embedded device (every row), and in the real-device tier
//! through the kernel on a `cuse-kfd serve` node (every row that ioctl(2) can express).

mod support;

use nix::errno::Errno;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::raw::*;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::{Immutable, IntoBytes};

/// What a row's setup leaves for its request.
struct Fx {
    rig: Rig,
    c: Client,
    gpu: u32,
    /// A mapped GTT buffer.
    buf: Option<Buf>,
    /// A queue (with its mapped ring and pointers).
    queue: Option<Queue>,
    /// A signal event.
    event: Option<u32>,
    /// A page-aligned address of two pages of this process's memory (in `keep`).
    pages: Option<u64>,
    /// Memory and files the request points at, kept alive until it is answered.
    keep: Vec<Box<[u8]>>,
    files: Vec<File>,
}

impl Fx {
    fn new() -> Fx {
        Fx::on(Rig::new())
    }

    fn on(rig: Rig) -> Fx {
        let c = rig.open();
        let gpu = rig.gpu();
        Fx { rig, c, gpu, buf: None, queue: None, event: None, pages: None, keep: Vec::new(), files: Vec::new() }
    }

    fn buf(&self) -> Buf {
        self.buf.expect("the row's setup makes a buffer")
    }

    fn queue(&self) -> Queue {
        self.queue.expect("the row's setup makes a queue")
    }

    fn event(&self) -> u32 {
        self.event.expect("the row's setup makes an event")
    }

    /// A pointer to `bytes` that stays valid for the request.
    fn mem(&mut self, bytes: &[u8]) -> u64 {
        let b: Box<[u8]> = bytes.into();
        let p = b.as_ptr() as u64;
        self.keep.push(b);
        p
    }

    /// A device id array naming this fixture's GPU.
    fn gpu_list(&mut self) -> u64 {
        let gpu = self.gpu;
        self.mem(gpu.as_bytes())
    }

    /// Valid CREATE_QUEUE arguments on fresh mapped buffers.
    fn queue_args(&self) -> CreateQueueArgs {
        let (ring, ptrs) = self.c.queue_buffers();
        self.c.aql_args(&ring, &ptrs)
    }

    fn unknown_handle(&self) -> u64 {
        (u64::from(self.gpu) << 32) | 0x7777
    }
}

/// A request.
enum Req {
    /// Through the embedded file: the argument is padded to the size in `cmd`.
    Ioctl(u32, Vec<u8>),
    /// Straight to the device with exactly these bytes (a caller buffer shorter than the
    /// size it claims). Embedded only: through ioctl(2) the kernel copies the size the request
    /// encodes from wherever the buffer is, so a short buffer is not something a test can send.
    Short(u32, Vec<u8>),
}

fn req<T: IntoBytes + Immutable>(cmd: u32, args: T) -> Req {
    Req::Ioctl(cmd, bytes_of(&args))
}

struct Row {
    name: &'static str,
    setup: fn(&mut Fx),
    request: fn(&mut Fx) -> Req,
    errno: Errno,
}

/// An ALLOC_MEMORY_OF_GPU request (no mmap offset).
fn alloc(gpu_id: u32, va_addr: u64, size: u64, flags: u32) -> Req {
    req(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, AllocMemoryOfGpuArgs { va_addr, size, gpu_id, flags, ..Default::default() })
}

/// A MAP_MEMORY_TO_GPU request of `handle` to the `n_devices` gpu ids at `ids`.
fn map(handle: u64, ids: u64, n_devices: u32, n_success: u32) -> Req {
    let args = MapMemoryToGpuArgs { handle, device_ids_array_ptr: ids, n_devices, n_success };
    req(AMDKFD_IOC_MAP_MEMORY_TO_GPU, args)
}

/// The UNMAP_MEMORY_FROM_GPU request of the same shape.
fn unmap(handle: u64, ids: u64, n_devices: u32, n_success: u32) -> Req {
    let args = UnmapMemoryFromGpuArgs { handle, device_ids_array_ptr: ids, n_devices, n_success };
    req(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, args)
}

/// An SVM request over `[start, start + size)` with `attrs` (type, value) inline.
fn svm(start_addr: u64, size: u64, op: u32, attrs: &[(u32, u32)]) -> Req {
    let mut b = bytes_of(&SvmArgs { start_addr, size, op, nattr: attrs.len() as u32 });
    for &(type_, value) in attrs {
        b.extend(bytes_of(&SvmAttribute { type_, value }));
    }
    Req::Ioctl(with_size(AMDKFD_IOC_SVM, b.len()), b)
}

fn row(name: &'static str, setup: fn(&mut Fx), request: fn(&mut Fx) -> Req, errno: Errno) -> Row {
    Row { name, setup, request, errno }
}

// Setups.

fn nothing(_: &mut Fx) {}

fn with_buf(fx: &mut Fx) {
    fx.buf = Some(fx.c.alloc_mapped(Mem::Gtt, 2 * PAGE_SIZE));
}

fn with_unmapped_buf(fx: &mut Fx) {
    fx.buf = Some(fx.c.alloc(Mem::Gtt, 2 * PAGE_SIZE));
}

fn with_pages(fx: &mut Fx) {
    let p = fx.mem(&[0u8; 3 * PAGE_SIZE as usize]);
    fx.pages = Some(p.next_multiple_of(PAGE_SIZE));
}

fn with_svm_range(fx: &mut Fx) {
    with_pages(fx);
    let Req::Ioctl(cmd, mut b) = svm(fx.pages.unwrap(), 2 * PAGE_SIZE, KFD_IOCTL_SVM_OP_SET_ATTR, &[]) else {
        unreachable!()
    };
    fx.c.ioctl(cmd, &mut b).unwrap();
}

fn with_queue(fx: &mut Fx) {
    fx.queue = Some(fx.c.create_queue());
}

/// An AQL queue with a context save area (as libhsakmt gives every compute queue), preempted
/// with UPDATE_QUEUE to 0 percent.
fn with_preempted_queue(fx: &mut Fx) {
    let (ring, ptrs) = fx.c.queue_buffers();
    let save = fx.c.alloc_mapped(Mem::Gtt, 4 * PAGE_SIZE);
    let mut a = CreateQueueArgs {
        ctx_save_restore_address: save.va,
        ctx_save_restore_size: 3 * PAGE_SIZE as u32,
        ctl_stack_size: PAGE_SIZE as u32,
        ..fx.c.aql_args(&ring, &ptrs)
    };
    fx.c.call(AMDKFD_IOC_CREATE_QUEUE, &mut a).unwrap();
    let mut u = UpdateQueueArgs {
        ring_base_address: ring.va,
        queue_id: a.queue_id,
        ring_size: RING_SIZE,
        queue_percentage: 0,
        queue_priority: 7,
    };
    fx.c.call(AMDKFD_IOC_UPDATE_QUEUE, &mut u).unwrap();
    fx.queue = Some(Queue { id: a.queue_id, doorbell_offset: a.doorbell_offset, ring, ptrs });
    fx.buf = Some(save);
}

fn with_sdma_queue(fx: &mut Fx) {
    let (ring, ptrs) = fx.c.queue_buffers();
    let mut a = CreateQueueArgs { queue_type: KFD_IOC_QUEUE_TYPE_SDMA, ..fx.c.aql_args(&ring, &ptrs) };
    fx.c.call(AMDKFD_IOC_CREATE_QUEUE, &mut a).unwrap();
    fx.queue = Some(Queue { id: a.queue_id, doorbell_offset: a.doorbell_offset, ring, ptrs });
}

fn with_event(fx: &mut Fx) {
    fx.event = Some(fx.c.signal_event(false));
}

fn with_memory_event(fx: &mut Fx) {
    fx.event = Some(fx.c.try_create_event(KFD_IOC_EVENT_MEMORY, false, 0).unwrap().event_id);
}

fn with_127_queues(fx: &mut Fx) {
    let (ring, ptrs) = fx.c.queue_buffers();
    for i in 0..KFD_MAX_QUEUES_PER_DEVICE {
        fx.c.try_create_queue_on(&ring, &ptrs).unwrap_or_else(|e| panic!("queue {i}: {e}"));
    }
    fx.buf = Some(ring);
}

fn with_full_event_page(fx: &mut Fx) {
    for _ in 0..KFD_SIGNAL_EVENT_LIMIT {
        fx.c.signal_event(false);
    }
}

fn with_vram_nearly_full(fx: &mut Fx) {
    // A sparse backing file: nothing is touched.
    fx.c.alloc(Mem::Vram, fx.rig.vram_size() - (1 << 20));
}

fn with_client_event_page(fx: &mut Fx) {
    let page = fx.c.alloc_mapped(Mem::Gtt, u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8);
    fx.event = Some(fx.c.try_create_event(KFD_IOC_EVENT_SIGNAL, false, page.handle).unwrap().event_id);
    fx.buf = Some(page);
}

fn with_small_gtt(fx: &mut Fx) {
    fx.buf = Some(fx.c.alloc_mapped(Mem::Gtt, PAGE_SIZE));
}

fn with_acquired_vm(fx: &mut Fx) {
    let null = File::open("/dev/null").unwrap();
    let mut a = AcquireVmArgs { drm_fd: null.as_raw_fd() as u32, gpu_id: fx.gpu };
    fx.c.call(AMDKFD_IOC_ACQUIRE_VM, &mut a).unwrap();
    fx.files.push(null);
    fx.files.push(File::create(fx.rig.root.join("another-file")).unwrap());
}

fn with_runtime_enabled(fx: &mut Fx) {
    let mut a = RuntimeEnableArgs { mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK, ..Default::default() };
    fx.c.call(AMDKFD_IOC_RUNTIME_ENABLE, &mut a).unwrap();
}

/// An address in the kernel half: access_ok() fails.
const KERNEL: u64 = 0xffff_8880_0000_0000;
/// An address no test maps.
const UNMAPPED_VA: u64 = 0x7_0000_0000;

fn cma_args(pid: u32, src: u64, n_src: u64, dst: u64, n_dst: u64) -> CrossMemoryCopyArgs {
    CrossMemoryCopyArgs {
        pid,
        flags: 0,
        src_mem_range_array: src,
        src_mem_array_size: n_src,
        dst_mem_range_array: dst,
        dst_mem_array_size: n_dst,
        bytes_copied: 0,
    }
}

/// A CROSS_MEMORY_COPY with process `pid`: `n` source ranges read from `src` (`None`: a
/// readable array), one destination range; every range is 8 bytes at UNMAPPED_VA.
fn cma(fx: &mut Fx, pid: u32, src: Option<u64>, n: u64) -> Req {
    let p = fx.mem(MemoryRange { va_addr: UNMAPPED_VA, size: 8 }.as_bytes());
    req(AMDKFD_IOC_CROSS_MEMORY_COPY, cma_args(pid, src.unwrap_or(p), n, p, 1))
}
/// A user address that is not mapped in this process.
const BAD_PTR: u64 = 0x10;

fn rows() -> Vec<Row> {
    use Errno::*;
    vec![
        // --- Requests the table does not know (amdkfd kfd_ioctl).
        row(
            "unknown nr 0x27",
            nothing,
            |_| Req::Ioctl(ioc(IOC_READ | IOC_WRITE, AMDKFD_IOCTL_BASE, 0x27, 8), vec![0; 8]),
            ENOTTY,
        ),
        row("unknown nr 0x00", nothing, |_| Req::Ioctl(ioc(IOC_READ, AMDKFD_IOCTL_BASE, 0, 8), vec![0; 8]), ENOTTY),
        row(
            "unknown nr 0xff",
            nothing,
            |_| Req::Ioctl(ioc(IOC_READ | IOC_WRITE, AMDKFD_IOCTL_BASE, 0xff, 16), vec![0; 16]),
            ENOTTY,
        ),
        row("wrong type byte", nothing, |_| Req::Ioctl(ioc(IOC_READ, b'X' as u32, 1, 8), vec![0; 8]), ENOTTY),
        row(
            "DRM type byte",
            nothing,
            |_| Req::Ioctl(ioc(IOC_READ | IOC_WRITE, b'd' as u32, 0x16, 40), vec![0; 40]),
            ENOTTY,
        ),
        // --- Removed or unavailable features.
        row(
            "DBG_REGISTER deprecated",
            nothing,
            |fx| req(AMDKFD_IOC_DBG_REGISTER_DEPRECATED, DbgRegisterArgs { gpu_id: fx.gpu, pad: 0 }),
            EPERM,
        ),
        row(
            "DBG_UNREGISTER deprecated",
            nothing,
            |fx| req(AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED, DbgUnregisterArgs { gpu_id: fx.gpu, pad: 0 }),
            EPERM,
        ),
        row(
            "DBG_ADDRESS_WATCH deprecated",
            nothing,
            |fx| {
                req(
                    AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED,
                    DbgAddressWatchArgs { gpu_id: fx.gpu, ..Default::default() },
                )
            },
            EPERM,
        ),
        row(
            "DBG_WAVE_CONTROL deprecated",
            nothing,
            |fx| {
                req(AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED, DbgWaveControlArgs { gpu_id: fx.gpu, ..Default::default() })
            },
            EPERM,
        ),
        // --- SVM (kfd_chardev.c kfd_ioctl_svm, kfd_svm.c svm_range_check_attr, svm_range_is_valid).
        row("SVM start 0", nothing, |_| svm(0, PAGE_SIZE, KFD_IOCTL_SVM_OP_SET_ATTR, &[]), EINVAL),
        row("SVM start unaligned", with_pages, |fx| svm(fx.pages.unwrap() + 8, PAGE_SIZE, 0, &[]), EINVAL),
        row("SVM size 0", with_pages, |fx| svm(fx.pages.unwrap(), 0, KFD_IOCTL_SVM_OP_GET_ATTR, &[]), EINVAL),
        row("SVM size unaligned", with_pages, |fx| svm(fx.pages.unwrap(), 100, 0, &[]), EINVAL),
        row("SVM unknown op", with_pages, |fx| svm(fx.pages.unwrap(), PAGE_SIZE, 2, &[]), EINVAL),
        row(
            "SVM nattr beyond the request",
            with_pages,
            |fx| {
                let a = SvmArgs { start_addr: fx.pages.unwrap(), size: PAGE_SIZE, op: 1, nattr: 4 };
                Req::Ioctl(with_size(AMDKFD_IOC_SVM, 24 + 8), [bytes_of(&a), vec![0; 8]].concat())
            },
            EINVAL,
        ),
        row("SVM SET unknown attribute", with_pages, |fx| svm(fx.pages.unwrap(), PAGE_SIZE, 0, &[(8, 0)]), EINVAL),
        row(
            "SVM SET ACCESS of an unknown GPU",
            with_pages,
            |fx| svm(fx.pages.unwrap(), PAGE_SIZE, 0, &[(KFD_IOCTL_SVM_ATTR_ACCESS, 0x7777)]),
            EINVAL,
        ),
        row(
            "SVM SET PREFETCH_LOC undefined",
            with_pages,
            |fx| {
                let undefined = (KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, KFD_IOCTL_SVM_LOCATION_UNDEFINED);
                svm(fx.pages.unwrap(), PAGE_SIZE, 0, &[undefined])
            },
            EINVAL,
        ),
        row(
            "SVM GET NO_ACCESS",
            with_pages,
            |fx| svm(fx.pages.unwrap(), PAGE_SIZE, 1, &[(KFD_IOCTL_SVM_ATTR_NO_ACCESS, fx.gpu)]),
            EINVAL,
        ),
        row(
            "SVM GET ACCESS of an unknown GPU",
            with_pages,
            |fx| svm(fx.pages.unwrap(), PAGE_SIZE, 1, &[(KFD_IOCTL_SVM_ATTR_ACCESS, 0x7777)]),
            EINVAL,
        ),
        // Page 1 is below mmap_min_addr: never mapped.
        row("SVM SET unmapped", nothing, |_| svm(PAGE_SIZE, PAGE_SIZE, 0, &[]), EFAULT),
        row("SVM GET unmapped", nothing, |_| svm(PAGE_SIZE, PAGE_SIZE, 1, &[]), EFAULT),
        row("SVM wrapping", nothing, |_| svm(!(PAGE_SIZE - 1), 2 * PAGE_SIZE, 0, &[]), EOVERFLOW),
        row(
            "ALLOC over an SVM range",
            with_svm_range,
            |fx| alloc(fx.gpu, fx.pages.unwrap(), PAGE_SIZE, KFD_IOC_ALLOC_MEM_FLAGS_GTT),
            EADDRINUSE,
        ),
        // --- Caller buffers shorter than the size they claim: copy_from_user fails.
        row("CREATE_QUEUE short buffer", nothing, |_| Req::Short(AMDKFD_IOC_CREATE_QUEUE, vec![0; 40]), EFAULT),
        row("ALLOC_MEMORY short buffer", nothing, |_| Req::Short(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, vec![0; 39]), EFAULT),
        row("WAIT_EVENTS short buffer", nothing, |_| Req::Short(AMDKFD_IOC_WAIT_EVENTS, vec![]), EFAULT),
        row("SET_EVENT short buffer", with_event, |_| Req::Short(AMDKFD_IOC_SET_EVENT, vec![1, 0, 0, 0]), EFAULT),
        // --- Sizes smaller than the struct: the tail reads as zero (gpu_id 0 is unknown).
        row(
            "CREATE_QUEUE 16-byte size",
            nothing,
            |fx| {
                let a = fx.queue_args();
                Req::Ioctl(with_size(AMDKFD_IOC_CREATE_QUEUE, 16), bytes_of(&a)[..16].to_vec())
            },
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY 16-byte size",
            nothing,
            |fx| {
                let a = AllocMemoryOfGpuArgs {
                    va_addr: FIRST_VA,
                    size: PAGE_SIZE,
                    gpu_id: fx.gpu,
                    flags: Mem::Gtt.flags(),
                    ..Default::default()
                };
                Req::Ioctl(with_size(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, 16), bytes_of(&a)[..16].to_vec())
            },
            EINVAL,
        ),
        row(
            "ACQUIRE_VM 4-byte size",
            nothing,
            |fx| {
                let null = File::open("/dev/null").unwrap();
                let a = AcquireVmArgs { drm_fd: null.as_raw_fd() as u32, gpu_id: fx.gpu };
                fx.files.push(null);
                Req::Ioctl(with_size(AMDKFD_IOC_ACQUIRE_VM, 4), bytes_of(&a)[..4].to_vec())
            },
            EINVAL,
        ),
        row(
            "MAP_MEMORY 8-byte size",
            with_unmapped_buf,
            |fx| Req::Ioctl(with_size(AMDKFD_IOC_MAP_MEMORY_TO_GPU, 8), fx.buf().handle.to_ne_bytes().to_vec()),
            EINVAL,
        ),
        // --- Unknown gpu ids.
        row(
            "SET_MEMORY_POLICY unknown gpu",
            nothing,
            |_| req(AMDKFD_IOC_SET_MEMORY_POLICY, SetMemoryPolicyArgs { gpu_id: 0x1234, ..Default::default() }),
            EINVAL,
        ),
        row(
            "SET_SCRATCH_BACKING_VA unknown gpu",
            nothing,
            |_| {
                req(
                    AMDKFD_IOC_SET_SCRATCH_BACKING_VA,
                    SetScratchBackingVaArgs { va_addr: FIRST_VA, gpu_id: 0x1234, pad: 0 },
                )
            },
            EINVAL,
        ),
        row(
            "SET_TRAP_HANDLER unknown gpu",
            nothing,
            |_| {
                req(
                    AMDKFD_IOC_SET_TRAP_HANDLER,
                    SetTrapHandlerArgs { tba_addr: FIRST_VA, tma_addr: FIRST_VA, gpu_id: 0x1234, pad: 0 },
                )
            },
            EINVAL,
        ),
        row(
            "GET_TILE_CONFIG unknown gpu",
            nothing,
            |_| req(AMDKFD_IOC_GET_TILE_CONFIG, GetTileConfigArgs { gpu_id: 0x1234, ..Default::default() }),
            EINVAL,
        ),
        row(
            "AVAILABLE_MEMORY unknown gpu",
            nothing,
            |_| req(AMDKFD_IOC_AVAILABLE_MEMORY, GetAvailableMemoryArgs { gpu_id: 0x1234, ..Default::default() }),
            EINVAL,
        ),
        row(
            "ACQUIRE_VM unknown gpu",
            nothing,
            |fx| {
                let null = File::open("/dev/null").unwrap();
                let a = AcquireVmArgs { drm_fd: null.as_raw_fd() as u32, gpu_id: 0x1234 };
                fx.files.push(null);
                req(AMDKFD_IOC_ACQUIRE_VM, a)
            },
            EINVAL,
        ),
        row("ALLOC_MEMORY unknown gpu", nothing, |_| alloc(0x1234, FIRST_VA, PAGE_SIZE, Mem::Gtt.flags()), EINVAL),
        row(
            "CREATE_QUEUE unknown gpu",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { gpu_id: 0x1234, ..fx.queue_args() }),
            EINVAL,
        ),
        row(
            // The tests run as root: past amdkfd's capability check (EACCES without it).
            "CRIU_OP unknown op",
            nothing,
            |_| req(AMDKFD_IOC_CRIU_OP, CriuArgs { op: 5, ..Default::default() }),
            EINVAL,
        ),
        row(
            "DBG_TRAP without debugger support",
            nothing,
            |_| req(AMDKFD_IOC_DBG_TRAP, DbgTrapArgs { pid: std::process::id(), op: 0, op_args: [0; 3] }),
            EINVAL,
        ),
        row(
            "SMI_EVENTS unknown gpu",
            nothing,
            |_| req(AMDKFD_IOC_SMI_EVENTS, SmiEventsArgs { gpuid: 0x1234, anon_fd: 0 }),
            EINVAL,
        ),
        row(
            "IMPORT_DMABUF unknown gpu",
            nothing,
            |_| {
                req(
                    AMDKFD_IOC_IMPORT_DMABUF,
                    ImportDmabufArgs { va_addr: FIRST_VA, gpu_id: 0x1234, ..Default::default() },
                )
            },
            EINVAL,
        ),
        row(
            "MAP_MEMORY to an unknown gpu",
            with_unmapped_buf,
            |fx| map(fx.buf().handle, fx.mem(0x1234u32.as_bytes()), 1, 0),
            EINVAL,
        ),
        row(
            "UNMAP_MEMORY from an unknown gpu",
            with_buf,
            |fx| unmap(fx.buf().handle, fx.mem(0x1234u32.as_bytes()), 1, 0),
            EINVAL,
        ),
        // --- Unknown handles, queue ids, event ids.
        row(
            "FREE unknown handle",
            nothing,
            |fx| req(AMDKFD_IOC_FREE_MEMORY_OF_GPU, FreeMemoryOfGpuArgs { handle: fx.unknown_handle() }),
            EINVAL,
        ),
        row(
            "FREE handle of an unknown gpu",
            with_buf,
            |fx| req(AMDKFD_IOC_FREE_MEMORY_OF_GPU, FreeMemoryOfGpuArgs { handle: fx.buf().handle & 0xffff_ffff }),
            EINVAL,
        ),
        row("MAP unknown handle", nothing, |fx| map(fx.unknown_handle(), fx.gpu_list(), 1, 0), ENOMEM),
        row(
            "MAP handle of an unknown gpu",
            with_unmapped_buf,
            |fx| map(fx.buf().handle & 0xffff_ffff, fx.gpu_list(), 1, 0),
            EINVAL,
        ),
        row("UNMAP unknown handle", nothing, |fx| unmap(fx.unknown_handle(), fx.gpu_list(), 1, 0), ENOMEM),
        row(
            "EXPORT_DMABUF unknown handle",
            nothing,
            |fx| req(AMDKFD_IOC_EXPORT_DMABUF, ExportDmabufArgs { handle: fx.unknown_handle(), ..Default::default() }),
            EINVAL,
        ),
        // --- AMD's out-of-tree IPC requests (ROCm's DKMS amdkfd kfd_ipc.c): an unknown buffer,
        // GPU or share handle is EINVAL.
        row(
            "IPC_EXPORT_HANDLE unknown handle",
            nothing,
            |fx| {
                let (handle, gpu_id) = (fx.unknown_handle(), fx.gpu);
                req(AMDKFD_IOC_IPC_EXPORT_HANDLE, IpcExportHandleArgs { handle, gpu_id, ..Default::default() })
            },
            EINVAL,
        ),
        row(
            "IPC_EXPORT_HANDLE unknown gpu",
            with_buf,
            |fx| {
                let handle = fx.buf().handle;
                req(AMDKFD_IOC_IPC_EXPORT_HANDLE, IpcExportHandleArgs { handle, gpu_id: 1, ..Default::default() })
            },
            EINVAL,
        ),
        row(
            "IPC_IMPORT_HANDLE unknown share handle",
            nothing,
            |fx| {
                let args = IpcImportHandleArgs {
                    va_addr: UNMAPPED_VA,
                    share_handle: [1, 2, 3, 4],
                    gpu_id: fx.gpu,
                    ..Default::default()
                };
                req(AMDKFD_IOC_IPC_IMPORT_HANDLE, args)
            },
            EINVAL,
        ),
        row(
            "IPC_IMPORT_HANDLE unknown gpu",
            nothing,
            |_| {
                let args = IpcImportHandleArgs { va_addr: UNMAPPED_VA, gpu_id: 1, ..Default::default() };
                req(AMDKFD_IOC_IPC_IMPORT_HANDLE, args)
            },
            EINVAL,
        ),
        // --- AMD's out-of-tree CROSS_MEMORY_COPY (ROCm's DKMS amdkfd kfd_chardev.c
        // kfd_ioctl_cross_memory_copy): arrays, then the process, then the ranges.
        row("CROSS_MEMORY_COPY no source array", nothing, |fx| cma(fx, 0, Some(0), 1), EINVAL),
        row("CROSS_MEMORY_COPY too many ranges", nothing, |fx| cma(fx, 0, None, 1 << 20), ENOMEM),
        row("CROSS_MEMORY_COPY unreadable array", nothing, |fx| cma(fx, 0, Some(8), 1), EFAULT),
        row("CROSS_MEMORY_COPY no such process", nothing, |fx| cma(fx, 0x7fff_fff0, None, 1), ESRCH),
        row(
            "CROSS_MEMORY_COPY range outside any buffer",
            nothing,
            |fx| {
                let pid = fx.c.pid();
                cma(fx, pid, None, 1)
            },
            EFAULT,
        ),
        row(
            "CROSS_MEMORY_COPY range past its buffer",
            with_buf,
            |fx| {
                let b = fx.buf();
                let ranges = [MemoryRange { va_addr: b.va, size: 8 }, MemoryRange { va_addr: b.va + 8, size: b.size }];
                let (pid, p) = (fx.c.pid(), fx.mem(ranges.as_bytes()));
                req(AMDKFD_IOC_CROSS_MEMORY_COPY, cma_args(pid, p, 1, p + 16, 1))
            },
            EFAULT,
        ),
        row(
            "DESTROY_QUEUE unknown id",
            with_queue,
            |_| req(AMDKFD_IOC_DESTROY_QUEUE, DestroyQueueArgs { queue_id: 5, pad: 0 }),
            EINVAL,
        ),
        row(
            "UPDATE_QUEUE unknown id",
            with_queue,
            |_| {
                req(
                    AMDKFD_IOC_UPDATE_QUEUE,
                    UpdateQueueArgs { queue_id: 5, queue_percentage: 50, ..Default::default() },
                )
            },
            EFAULT,
        ),
        row(
            "SET_CU_MASK unknown queue",
            with_queue,
            |fx| {
                let mask = fx.mem(u32::MAX.as_bytes());
                req(AMDKFD_IOC_SET_CU_MASK, SetCuMaskArgs { queue_id: 5, num_cu_mask: 32, cu_mask_ptr: mask })
            },
            EFAULT,
        ),
        row(
            "GET_QUEUE_WAVE_STATE unknown queue",
            nothing,
            |_| req(AMDKFD_IOC_GET_QUEUE_WAVE_STATE, GetQueueWaveStateArgs { queue_id: 3, ..Default::default() }),
            EFAULT,
        ),
        row(
            "GET_QUEUE_WAVE_STATE of a preempted queue with a save area, without CWSR",
            with_preempted_queue,
            |fx| {
                let ctl_stack_address = fx.buf.as_ref().unwrap().va;
                req(
                    AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
                    GetQueueWaveStateArgs { queue_id: fx.queue().id, ctl_stack_address, ..Default::default() },
                )
            },
            EINVAL,
        ),
        row(
            "GET_QUEUE_WAVE_STATE of an SDMA queue",
            with_sdma_queue,
            |fx| {
                req(
                    AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
                    GetQueueWaveStateArgs { queue_id: fx.queue().id, ..Default::default() },
                )
            },
            EINVAL,
        ),
        row(
            "GET_QUEUE_WAVE_STATE of an active queue",
            with_queue,
            |fx| {
                req(
                    AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
                    GetQueueWaveStateArgs { queue_id: fx.queue().id, ..Default::default() },
                )
            },
            EINVAL,
        ),
        row(
            "ALLOC_QUEUE_GWS unknown queue",
            nothing,
            |_| req(AMDKFD_IOC_ALLOC_QUEUE_GWS, AllocQueueGwsArgs { queue_id: 3, num_gws: 1, ..Default::default() }),
            EINVAL,
        ),
        row(
            "DESTROY_EVENT unknown id",
            with_event,
            |_| req(AMDKFD_IOC_DESTROY_EVENT, DestroyEventArgs { event_id: 99, pad: 0 }),
            EINVAL,
        ),
        row(
            "SET_EVENT unknown id",
            with_event,
            |_| req(AMDKFD_IOC_SET_EVENT, SetEventArgs { event_id: 99, pad: 0 }),
            EINVAL,
        ),
        row(
            "SET_EVENT the free slot next to the one event",
            with_event,
            |_| req(AMDKFD_IOC_SET_EVENT, SetEventArgs { event_id: 1, pad: 0 }),
            EINVAL,
        ),
        row(
            "RESET_EVENT unknown id",
            with_event,
            |_| req(AMDKFD_IOC_RESET_EVENT, ResetEventArgs { event_id: 99, pad: 0 }),
            EINVAL,
        ),
        row(
            "SET_EVENT on a memory event",
            with_memory_event,
            |fx| req(AMDKFD_IOC_SET_EVENT, SetEventArgs { event_id: fx.event(), pad: 0 }),
            EINVAL,
        ),
        row(
            "RESET_EVENT on a memory event",
            with_memory_event,
            |fx| req(AMDKFD_IOC_RESET_EVENT, ResetEventArgs { event_id: fx.event(), pad: 0 }),
            EINVAL,
        ),
        row(
            "WAIT_EVENTS unknown id",
            with_event,
            |fx| {
                let data = [
                    EventData { event_id: fx.event(), ..Default::default() },
                    EventData { event_id: 99, ..Default::default() },
                ];
                let p = fx.mem(data.as_bytes());
                req(
                    AMDKFD_IOC_WAIT_EVENTS,
                    WaitEventsArgs {
                        events_ptr: p,
                        num_events: 2,
                        wait_for_all: 0,
                        timeout: KFD_EVENT_TIMEOUT_INFINITE,
                        wait_result: 0,
                    },
                )
            },
            EINVAL,
        ),
        row(
            "WAIT_EVENTS bad events_ptr",
            with_event,
            |_| {
                req(
                    AMDKFD_IOC_WAIT_EVENTS,
                    WaitEventsArgs { events_ptr: BAD_PTR, num_events: 1, timeout: 0, ..Default::default() },
                )
            },
            EFAULT,
        ),
        row(
            "WAIT_EVENTS kernel events_ptr",
            with_event,
            |_| {
                req(
                    AMDKFD_IOC_WAIT_EVENTS,
                    WaitEventsArgs { events_ptr: KERNEL, num_events: 1, timeout: 0, ..Default::default() },
                )
            },
            EFAULT,
        ),
        // --- Out-of-range fields.
        row(
            "CREATE_QUEUE percentage 101",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { queue_percentage: 101, ..fx.queue_args() }),
            EINVAL,
        ),
        row(
            "CREATE_QUEUE percentage 0xff",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { queue_percentage: 0x1ff, ..fx.queue_args() }),
            EINVAL,
        ),
        row(
            "CREATE_QUEUE priority 16",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { queue_priority: 16, ..fx.queue_args() }),
            EINVAL,
        ),
        row(
            "CREATE_QUEUE ring not a power of two",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { ring_size: 3000, ..fx.queue_args() }),
            EINVAL,
        ),
        row(
            "CREATE_QUEUE SDMA engine out of range",
            nothing,
            |fx| {
                req(
                    AMDKFD_IOC_CREATE_QUEUE,
                    CreateQueueArgs {
                        queue_type: KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID,
                        sdma_engine_id: 99,
                        ..fx.queue_args()
                    },
                )
            },
            EINVAL,
        ),
        row(
            "UPDATE_QUEUE percentage 101",
            with_queue,
            |fx| {
                req(
                    AMDKFD_IOC_UPDATE_QUEUE,
                    UpdateQueueArgs { queue_id: fx.queue().id, queue_percentage: 101, ..Default::default() },
                )
            },
            EINVAL,
        ),
        row(
            "UPDATE_QUEUE priority 16",
            with_queue,
            |fx| {
                req(
                    AMDKFD_IOC_UPDATE_QUEUE,
                    UpdateQueueArgs { queue_id: fx.queue().id, queue_priority: 16, ..Default::default() },
                )
            },
            EINVAL,
        ),
        row(
            "UPDATE_QUEUE ring not a power of two",
            with_queue,
            |fx| {
                let q = fx.queue();
                req(
                    AMDKFD_IOC_UPDATE_QUEUE,
                    UpdateQueueArgs {
                        queue_id: q.id,
                        ring_base_address: q.ring.va,
                        ring_size: 3000,
                        queue_percentage: 100,
                        queue_priority: 0,
                    },
                )
            },
            EINVAL,
        ),
        row(
            "SET_CU_MASK zero bits",
            with_queue,
            |fx| {
                let mask = fx.mem(u32::MAX.as_bytes());
                req(
                    AMDKFD_IOC_SET_CU_MASK,
                    SetCuMaskArgs { queue_id: fx.queue().id, num_cu_mask: 0, cu_mask_ptr: mask },
                )
            },
            EINVAL,
        ),
        row(
            "SET_CU_MASK not a multiple of 32",
            with_queue,
            |fx| {
                let mask = fx.mem(&[0xff; 8]);
                req(
                    AMDKFD_IOC_SET_CU_MASK,
                    SetCuMaskArgs { queue_id: fx.queue().id, num_cu_mask: 33, cu_mask_ptr: mask },
                )
            },
            EINVAL,
        ),
        row(
            "SET_CU_MASK bad pointer",
            with_queue,
            |fx| {
                req(
                    AMDKFD_IOC_SET_CU_MASK,
                    SetCuMaskArgs { queue_id: fx.queue().id, num_cu_mask: 64, cu_mask_ptr: BAD_PTR },
                )
            },
            EFAULT,
        ),
        row(
            "SET_MEMORY_POLICY bad default policy",
            nothing,
            |fx| {
                req(
                    AMDKFD_IOC_SET_MEMORY_POLICY,
                    SetMemoryPolicyArgs { gpu_id: fx.gpu, default_policy: 2, ..Default::default() },
                )
            },
            EINVAL,
        ),
        row(
            "SET_MEMORY_POLICY bad alternate policy",
            nothing,
            |fx| {
                req(
                    AMDKFD_IOC_SET_MEMORY_POLICY,
                    SetMemoryPolicyArgs { gpu_id: fx.gpu, alternate_policy: 7, ..Default::default() },
                )
            },
            EINVAL,
        ),
        row("ALLOC_MEMORY size 0", nothing, |fx| alloc(fx.gpu, FIRST_VA, 0, Mem::Gtt.flags()), EINVAL),
        row(
            "ALLOC_MEMORY no memory domain",
            nothing,
            |fx| {
                let flags = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
                alloc(fx.gpu, FIRST_VA, PAGE_SIZE, flags)
            },
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY misaligned VA",
            nothing,
            |fx| alloc(fx.gpu, FIRST_VA + 8, PAGE_SIZE, Mem::Gtt.flags()),
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY VA below the aperture",
            nothing,
            |fx| alloc(fx.gpu, PAGE_SIZE, PAGE_SIZE, Mem::Gtt.flags()),
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY VA above the aperture",
            nothing,
            |fx| alloc(fx.gpu, 1 << 47, PAGE_SIZE, Mem::Gtt.flags()),
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY VA range crosses the limit",
            nothing,
            |fx| alloc(fx.gpu, (1 << 47) - PAGE_SIZE, 2 * PAGE_SIZE, Mem::Gtt.flags()),
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY VA range wraps",
            nothing,
            |fx| alloc(fx.gpu, !(PAGE_SIZE - 1), 2 * PAGE_SIZE, Mem::Gtt.flags()),
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY overlapping VA",
            with_buf,
            |fx| alloc(fx.gpu, fx.buf().va + PAGE_SIZE, 2 * PAGE_SIZE, Mem::Vram.flags()),
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY overlapping an unmapped buffer's VA",
            with_unmapped_buf,
            |fx| alloc(fx.gpu, fx.buf().va - PAGE_SIZE, 2 * PAGE_SIZE, Mem::Gtt.flags()),
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY doorbell of the wrong size",
            nothing,
            |fx| alloc(fx.gpu, FIRST_VA, PAGE_SIZE, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL),
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY MMIO remap of the wrong size",
            nothing,
            |fx| alloc(fx.gpu, FIRST_VA, 2 * PAGE_SIZE, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP),
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY USERPTR misaligned",
            nothing,
            |fx| {
                let p = fx.mem(&[0; 3 * PAGE_SIZE as usize]);
                let cpu = (p | (PAGE_SIZE - 1)) + 1 + 8;
                req(
                    AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
                    AllocMemoryOfGpuArgs {
                        va_addr: FIRST_VA,
                        size: PAGE_SIZE,
                        mmap_offset: cpu,
                        gpu_id: fx.gpu,
                        flags: KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
                        ..Default::default()
                    },
                )
            },
            EINVAL,
        ),
        row(
            "ALLOC_MEMORY USERPTR not mapped",
            nothing,
            |fx| {
                req(
                    AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
                    AllocMemoryOfGpuArgs {
                        va_addr: FIRST_VA,
                        size: PAGE_SIZE,
                        mmap_offset: PAGE_SIZE,
                        gpu_id: fx.gpu,
                        flags: KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
                        ..Default::default()
                    },
                )
            },
            EFAULT,
        ),
        row("MAP_MEMORY n_devices 0", with_unmapped_buf, |fx| map(fx.buf().handle, fx.gpu_list(), 0, 0), EINVAL),
        row(
            "MAP_MEMORY n_success past n_devices",
            with_unmapped_buf,
            |fx| map(fx.buf().handle, fx.gpu_list(), 1, 2),
            EINVAL,
        ),
        row("MAP_MEMORY bad device id array", with_unmapped_buf, |fx| map(fx.buf().handle, BAD_PTR, 1, 0), EFAULT),
        row("MAP_MEMORY bad array before a bad handle", nothing, |_| map(0x1234 << 32, BAD_PTR, 1, 0), EFAULT),
        row("UNMAP_MEMORY n_devices 0", with_buf, |fx| unmap(fx.buf().handle, fx.gpu_list(), 0, 0), EINVAL),
        row("UNMAP_MEMORY bad device id array", with_buf, |fx| unmap(fx.buf().handle, KERNEL, 1, 0), EFAULT),
        row("UNMAP a live queue's ring", with_queue, |fx| unmap(fx.queue().ring.handle, fx.gpu_list(), 1, 0), EBUSY),
        row(
            "UNMAP a live queue's pointers",
            with_queue,
            |fx| unmap(fx.queue().ptrs.handle, fx.gpu_list(), 1, 0),
            EBUSY,
        ),
        row(
            "FREE a mapped buffer",
            with_buf,
            |fx| req(AMDKFD_IOC_FREE_MEMORY_OF_GPU, FreeMemoryOfGpuArgs { handle: fx.buf().handle }),
            EBUSY,
        ),
        row(
            "FREE the event page",
            with_client_event_page,
            |fx| req(AMDKFD_IOC_FREE_MEMORY_OF_GPU, FreeMemoryOfGpuArgs { handle: fx.buf().handle }),
            EPERM,
        ),
        row(
            "ACQUIRE_VM bad fd",
            nothing,
            |fx| req(AMDKFD_IOC_ACQUIRE_VM, AcquireVmArgs { drm_fd: 0x7fff_fff0, gpu_id: fx.gpu }),
            EINVAL,
        ),
        row(
            "ACQUIRE_VM another file",
            with_acquired_vm,
            |fx| req(AMDKFD_IOC_ACQUIRE_VM, AcquireVmArgs { drm_fd: fx.files[1].as_raw_fd() as u32, gpu_id: fx.gpu }),
            EBUSY,
        ),
        row(
            "GET_TILE_CONFIG bad array",
            nothing,
            |fx| {
                req(
                    AMDKFD_IOC_GET_TILE_CONFIG,
                    GetTileConfigArgs {
                        tile_config_ptr: BAD_PTR,
                        num_tile_configs: 4,
                        gpu_id: fx.gpu,
                        ..Default::default()
                    },
                )
            },
            EFAULT,
        ),
        row(
            "GET_PROCESS_APERTURES_NEW bad array",
            nothing,
            |_| {
                req(
                    AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
                    GetProcessAperturesNewArgs { kfd_process_device_apertures_ptr: BAD_PTR, num_of_nodes: 1, pad: 0 },
                )
            },
            EFAULT,
        ),
        row(
            "GET_DMABUF_INFO on a non-dmabuf fd",
            nothing,
            |fx| {
                let null = File::open("/dev/null").unwrap();
                let a = GetDmabufInfoArgs { dmabuf_fd: null.as_raw_fd() as u32, ..Default::default() };
                fx.files.push(null);
                req(AMDKFD_IOC_GET_DMABUF_INFO, a)
            },
            EINVAL,
        ),
        row(
            "RUNTIME_ENABLE twice",
            with_runtime_enabled,
            |_| {
                req(
                    AMDKFD_IOC_RUNTIME_ENABLE,
                    RuntimeEnableArgs { mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK, ..Default::default() },
                )
            },
            EBUSY,
        ),
        row(
            "RUNTIME_ENABLE with queues",
            with_queue,
            |_| {
                req(
                    AMDKFD_IOC_RUNTIME_ENABLE,
                    RuntimeEnableArgs { mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK, ..Default::default() },
                )
            },
            EEXIST,
        ),
        row(
            "SET_XNACK_MODE with queues",
            with_queue,
            |_| req(AMDKFD_IOC_SET_XNACK_MODE, SetXnackModeArgs { xnack_enabled: 1 }),
            EBUSY,
        ),
        // --- Addresses outside the caller's GPU VM, or outside user space.
        row(
            "CREATE_QUEUE ring unmapped",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { ring_base_address: UNMAPPED_VA, ..fx.queue_args() }),
            EINVAL,
        ),
        row(
            "CREATE_QUEUE read pointer unmapped",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { read_pointer_address: UNMAPPED_VA, ..fx.queue_args() }),
            EINVAL,
        ),
        row(
            "CREATE_QUEUE write pointer unmapped",
            nothing,
            |fx| {
                req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { write_pointer_address: UNMAPPED_VA, ..fx.queue_args() })
            },
            EINVAL,
        ),
        row(
            "CREATE_QUEUE ring in an unmapped buffer",
            with_unmapped_buf,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { ring_base_address: fx.buf().va, ..fx.queue_args() }),
            EINVAL,
        ),
        row(
            "CREATE_QUEUE ring runs off its buffer",
            nothing,
            |fx| {
                let a = fx.queue_args();
                req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { ring_size: 2 * RING_SIZE, ..a })
            },
            EINVAL,
        ),
        row(
            "CREATE_QUEUE ring at a kernel address",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { ring_base_address: KERNEL, ..fx.queue_args() }),
            EFAULT,
        ),
        row(
            "CREATE_QUEUE read pointer at a kernel address",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { read_pointer_address: KERNEL, ..fx.queue_args() }),
            EFAULT,
        ),
        row(
            "CREATE_QUEUE write pointer at a kernel address",
            nothing,
            |fx| req(AMDKFD_IOC_CREATE_QUEUE, CreateQueueArgs { write_pointer_address: KERNEL, ..fx.queue_args() }),
            EFAULT,
        ),
        row(
            "CREATE_QUEUE EOP buffer at a kernel address",
            nothing,
            |fx| {
                req(
                    AMDKFD_IOC_CREATE_QUEUE,
                    CreateQueueArgs { eop_buffer_address: KERNEL, eop_buffer_size: PAGE_SIZE, ..fx.queue_args() },
                )
            },
            EFAULT,
        ),
        row(
            "CREATE_QUEUE save area at a kernel address",
            nothing,
            |fx| {
                req(
                    AMDKFD_IOC_CREATE_QUEUE,
                    CreateQueueArgs {
                        ctx_save_restore_address: KERNEL,
                        ctx_save_restore_size: PAGE_SIZE as u32,
                        ..fx.queue_args()
                    },
                )
            },
            EFAULT,
        ),
        row(
            "UPDATE_QUEUE ring unmapped",
            with_queue,
            |fx| {
                req(
                    AMDKFD_IOC_UPDATE_QUEUE,
                    UpdateQueueArgs {
                        queue_id: fx.queue().id,
                        ring_base_address: UNMAPPED_VA,
                        ring_size: RING_SIZE,
                        queue_percentage: 100,
                        queue_priority: 0,
                    },
                )
            },
            EFAULT,
        ),
        row(
            "UPDATE_QUEUE ring unmapped, size below the minimum",
            with_queue,
            |fx| {
                req(
                    AMDKFD_IOC_UPDATE_QUEUE,
                    UpdateQueueArgs {
                        queue_id: fx.queue().id,
                        ring_base_address: UNMAPPED_VA,
                        ring_size: 0,
                        queue_percentage: 100,
                        queue_priority: 0,
                    },
                )
            },
            EFAULT,
        ),
        row(
            "UPDATE_QUEUE ring at a kernel address",
            with_queue,
            |fx| {
                req(
                    AMDKFD_IOC_UPDATE_QUEUE,
                    UpdateQueueArgs {
                        queue_id: fx.queue().id,
                        ring_base_address: KERNEL,
                        ring_size: RING_SIZE,
                        queue_percentage: 100,
                        queue_priority: 0,
                    },
                )
            },
            EFAULT,
        ),
        // --- Limits.
        row(
            "CREATE_QUEUE 128th queue on a GPU",
            with_127_queues,
            |fx| {
                let ring = fx.buf();
                let ptrs = fx.c.alloc_mapped(Mem::Gtt, PAGE_SIZE);
                req(AMDKFD_IOC_CREATE_QUEUE, fx.c.aql_args(&ring, &ptrs))
            },
            ENOSPC,
        ),
        row(
            "CREATE_EVENT on a full event page",
            with_full_event_page,
            |_| {
                req(AMDKFD_IOC_CREATE_EVENT, CreateEventArgs { event_type: KFD_IOC_EVENT_SIGNAL, ..Default::default() })
            },
            ENOSPC,
        ),
        row(
            "ALLOC_MEMORY VRAM exhausted",
            with_vram_nearly_full,
            |fx| alloc(fx.gpu, fx.c.next_va(2 << 20), 2 << 20, Mem::Vram.flags()),
            ENOMEM,
        ),
        row(
            "ALLOC_MEMORY more VRAM than the GPU has",
            nothing,
            |fx| {
                let size = fx.rig.vram_size() + PAGE_SIZE;
                alloc(fx.gpu, FIRST_VA, size, Mem::Vram.flags())
            },
            ENOMEM,
        ),
        // --- Event pages.
        row(
            "CREATE_EVENT page handle unknown",
            nothing,
            |fx| {
                req(
                    AMDKFD_IOC_CREATE_EVENT,
                    CreateEventArgs {
                        event_page_offset: fx.unknown_handle(),
                        event_type: KFD_IOC_EVENT_SIGNAL,
                        ..Default::default()
                    },
                )
            },
            EINVAL,
        ),
        row(
            "CREATE_EVENT page too small",
            with_small_gtt,
            |fx| {
                req(
                    AMDKFD_IOC_CREATE_EVENT,
                    CreateEventArgs {
                        event_page_offset: fx.buf().handle,
                        event_type: KFD_IOC_EVENT_SIGNAL,
                        ..Default::default()
                    },
                )
            },
            EINVAL,
        ),
        row(
            "CREATE_EVENT second page",
            with_client_event_page,
            |fx| {
                let other = fx.c.alloc_mapped(Mem::Gtt, u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8);
                req(
                    AMDKFD_IOC_CREATE_EVENT,
                    CreateEventArgs {
                        event_page_offset: other.handle,
                        event_type: KFD_IOC_EVENT_SIGNAL,
                        ..Default::default()
                    },
                )
            },
            EINVAL,
        ),
        row(
            "CREATE_EVENT page after the device made one",
            with_event,
            |fx| {
                let page = fx.c.alloc_mapped(Mem::Gtt, u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8);
                req(
                    AMDKFD_IOC_CREATE_EVENT,
                    CreateEventArgs {
                        event_page_offset: page.handle,
                        event_type: KFD_IOC_EVENT_SIGNAL,
                        ..Default::default()
                    },
                )
            },
            EINVAL,
        ),
    ]
}

/// Sends a row's request; the errno it got (None for success).
fn send(fx: &Fx, req: Req) -> Option<Errno> {
    match req {
        Req::Ioctl(cmd, mut bytes) => fx.c.ioctl(cmd, &mut bytes).err(),
        Req::Short(cmd, bytes) => {
            assert!(bytes.len() < ioc_size(cmd), "a short request is shorter than its size");
            fx.c.raw_ioctl(cmd, &bytes).errno()
        }
    }
}

/// Sends row `r`'s request `req` on `fx` (after the row's setup): what went wrong, if anything.
fn check_row(r: &Row, fx: &Fx, req: Req) -> Vec<String> {
    let mut failures = Vec::new();
    let stats = fx.rig.stats();
    let files = count_files(&fx.rig.root);
    let got = send(fx, req);
    if got != Some(r.errno) {
        failures.push(format!(
            "{}: expected {}, got {}",
            r.name,
            r.errno,
            got.map_or("success".to_string(), |e| e.to_string())
        ));
    }
    let after = fx.rig.stats();
    if after != stats {
        failures.push(format!("{}: object counts changed: {stats:?} -> {after:?}", r.name));
    }
    let files_after = count_files(&fx.rig.root);
    if files_after != files {
        failures.push(format!("{}: backing files changed: {files} -> {files_after}", r.name));
    }
    // The device still serves this process normally after the refusal.
    let mut v = GetVersionArgs::default();
    if fx.c.call(AMDKFD_IOC_GET_VERSION, &mut v).is_err() || v.minor_version != KFD_IOCTL_MINOR_VERSION {
        failures.push(format!("{}: the device stopped answering", r.name));
    }
    failures
}

fn checked_rows() -> Vec<Row> {
    let rows = rows();
    assert!(rows.len() >= 60, "only {} rows", rows.len());
    let mut names = std::collections::HashSet::new();
    for r in &rows {
        assert!(names.insert(r.name), "duplicate row name {:?}", r.name);
    }
    rows
}

#[test]
fn malformed_requests_get_amdkfds_errno_and_create_nothing() {
    let rows = checked_rows();
    let mut failures = Vec::new();
    for r in &rows {
        let mut fx = Fx::new();
        (r.setup)(&mut fx);
        let req = (r.request)(&mut fx);
        failures.extend(check_row(r, &fx, req));
    }
    assert!(failures.is_empty(), "{} of {} rows failed:\n{}", failures.len(), rows.len(), failures.join("\n"));
}

/// The line a device-tier test prints when it really runs (tools/xtask/src/device.rs counts
/// them; kfd-tests/src/device.rs prints the same).
const RAN_MARKER: &str = "CUSE_KFD_DEVICE_TEST_RAN";

/// A `cuse-kfd serve` child with its node and runtime directory, stopped (SIGTERM) and its
/// directory removed when dropped. The tier's own helper (kfd-tests/src/device.rs) lives in a crate
/// this package cannot depend on; this is the same idea, smaller.
struct ServeDaemon {
    child: std::process::Child,
    node: PathBuf,
    runtime_dir: PathBuf,
}

impl ServeDaemon {
    fn start(bin: &Path, name: &str) -> ServeDaemon {
        use std::os::unix::fs::PermissionsExt;
        let node = Path::new("/dev").join(name);
        let runtime_dir = Path::new("/tmp").join(format!("cuse-kfd-{name}-{}", std::process::id()));
        let child = std::process::Command::new(bin)
            .args(["serve", "--name", name, "--mode", "0666", "--runtime-dir"])
            .arg(&runtime_dir)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
            .spawn()
            .expect("start cuse-kfd serve");
        let mut d = ServeDaemon { child, node, runtime_dir };
        let t0 = Instant::now();
        // Ready: the node has the requested mode (devtmpfs creates it 0600 first) and the
        // control socket answers.
        while !(std::fs::metadata(&d.node).is_ok_and(|m| m.permissions().mode() & 0o777 == 0o666)
            && cuse_kfd::frontend::control::request(&d.runtime_dir, "stats").is_ok())
        {
            if let Some(status) = d.child.try_wait().unwrap() {
                panic!("cuse-kfd serve exited with {status} before {} appeared", d.node.display());
            }
            assert!(t0.elapsed() < Duration::from_secs(90), "{} did not appear within 90 s", d.node.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }
}

impl Drop for ServeDaemon {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let t0 = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() {
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

/// The same table through the kernel, on a `cuse-kfd serve` node of the real-device
/// tier (`cargo xtask test device`, which runs it: a plain `cargo test` lists it as ignored). Each row gets a fresh open
/// of the node, closed (and its context torn down: this process's opens share one) before the
/// next row starts.
#[test]
#[ignore = "device tier"]
fn device_tier_malformed_requests_through_the_node() {
    assert!(
        std::env::var_os("CUSE_KFD_DEVICE_TIER").is_some(),
        "a device-tier test: it runs in `cargo xtask test device`, which sets CUSE_KFD_DEVICE_TIER"
    );
    let bin = PathBuf::from(std::env::var_os("CUSE_KFD_BIN").expect("CUSE_KFD_BIN names the daemon"));
    assert!(bin.is_file(), "{} is not a file", bin.display());
    {
        // Straight to stdout, past libtest's capture: the tier counts the tests that really ran.
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{RAN_MARKER} device_tier_malformed_requests_through_the_node")
            .and_then(|()| out.flush())
            .expect("write to stdout");
    }
    let daemon = ServeDaemon::start(&bin, "kfd-t-negtable");
    let node_rig = || Rig::node(&daemon.node, &daemon.runtime_dir);
    let idle = node_rig().stats();
    assert_eq!(idle, cuse_kfd::DeviceStats::default(), "a fresh daemon holds objects");
    let rows = checked_rows();
    let (mut ran, mut skipped) = (0, Vec::new());
    let mut failures = Vec::new();
    for r in &rows {
        let mut fx = Fx::on(node_rig());
        (r.setup)(&mut fx);
        let req = (r.request)(&mut fx);
        let short = matches!(req, Req::Short(..));
        if short {
            skipped.push(r.name);
        } else {
            failures.extend(check_row(r, &fx, req));
        }
        drop(fx);
        wait_for_teardown(&daemon, idle, r.name, &mut failures);
        if short {
            continue;
        }
        ran += 1;
    }
    println!(
        "{ran} of {} rows ran through {}; {} skipped (a caller buffer shorter than the size its request \
         encodes cannot be sent through ioctl(2), which copies the encoded size): {}",
        rows.len(),
        daemon.node.display(),
        skipped.len(),
        skipped.join(", ")
    );
    assert!(failures.is_empty(), "{} failures over {ran} rows:\n{}", failures.len(), failures.join("\n"));
}

/// After a row's client closed: the daemon's counts return to `idle` (the context is torn
/// down at the last close, which the kernel reports asynchronously) and the client's backing
/// directory is gone.
fn wait_for_teardown(daemon: &ServeDaemon, idle: cuse_kfd::DeviceStats, row: &str, failures: &mut Vec<String>) {
    let rig = Rig::node(&daemon.node, &daemon.runtime_dir);
    let dir = rig.client_dir(std::process::id());
    let t0 = Instant::now();
    loop {
        let now = rig.stats();
        if now == idle && !dir.exists() {
            return;
        }
        if t0.elapsed() > REPLY_TIMEOUT {
            let left = if dir.exists() { "; the client's backing directory is still there" } else { "" };
            failures.push(format!("{row}: after the last close the daemon still holds {now:?}{left}"));
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_refused_wait_reports_fail() {
    // amdkfd sets wait_result FAIL whenever WAIT_EVENTS returns an error.
    let rig = Rig::new();
    let c = rig.open();
    let e = c.signal_event(false);
    let mut a = WaitEventsArgs {
        events_ptr: BAD_PTR,
        num_events: 1,
        timeout: 0,
        wait_result: KFD_IOC_WAIT_RESULT_COMPLETE,
        ..Default::default()
    };
    assert_eq!(c.call(AMDKFD_IOC_WAIT_EVENTS, &mut a), Err(Errno::EFAULT));
    assert_eq!(a.wait_result, KFD_IOC_WAIT_RESULT_FAIL);
    let w = c.wait(&[e, e + 1], true, 0);
    assert_eq!((w.result, w.wait_result), (Err(Errno::EINVAL), KFD_IOC_WAIT_RESULT_FAIL));
}

#[test]
fn a_partly_failed_map_reports_how_far_it_got() {
    // amdkfd maps device by device and reports n_success, so the caller can resume.
    let rig = Rig::with_gpus(2);
    let c = rig.open();
    let gpus = rig.gpu_ids();
    let b = c.alloc(Mem::Gtt, PAGE_SIZE);
    let ids = [gpus[0], 0x1234, gpus[1]];
    let mut a =
        MapMemoryToGpuArgs { handle: b.handle, device_ids_array_ptr: ids.as_ptr() as u64, n_devices: 3, n_success: 0 };
    assert_eq!(c.call(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut a), Err(Errno::EINVAL));
    assert_eq!(a.n_success, 1);
    // Resuming past the bad id maps the rest.
    let ids = [gpus[0], gpus[1]];
    let mut a =
        MapMemoryToGpuArgs { handle: b.handle, device_ids_array_ptr: ids.as_ptr() as u64, n_devices: 2, n_success: 1 };
    c.call(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut a).unwrap();
    assert_eq!(a.n_success, 2);
    assert_eq!(rig.emb().device().process(c.pid()).unwrap().stats().mappings, 2);
}
