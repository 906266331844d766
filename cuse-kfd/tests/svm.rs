//! Shared virtual memory on the embedded device: attributes set and read back, the GPU (SDMA and
//! PM4 packets) reaching malloc'd memory through SVM ranges, and the faults of NO_ACCESS, GPU_RO,
//! unmapped memory, and XNACK.

mod support;

use nix::errno::Errno;
use std::alloc::Layout;
use support::client::{wait_for, Rig, TIMEOUT};
use thunk::queue::{RingKind, RingQueue};
use thunk::{pm4, sdma};
use uapi::ioctl::{ioc, ioc_dir, ioc_nr, ioc_type, AMDKFD_IOC_SET_XNACK_MODE, AMDKFD_IOC_SVM};
use uapi::kfd::*;
use uapi::{FromBytes, IntoBytes};

const PAGE: u64 = PAGE_SIZE;

/// The tests map and unmap memory and watch what the device sees of it: one at a time, so that
/// no other test's mapping lands where one test unmapped.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh private read-write anonymous mapping of `len` bytes, which the caller unmaps.
fn map_rw(len: usize) -> std::ptr::NonNull<std::ffi::c_void> {
    use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
    // SAFETY: a new mapping at an address of the kernel's choosing overlaps nothing of ours.
    unsafe {
        mmap_anonymous(
            None,
            std::num::NonZeroUsize::new(len).unwrap(),
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_PRIVATE,
        )
    }
    .expect("mmap")
}

/// Page-aligned memory of this process the GPU may write (no Rust reference to it exists while
/// a queue runs: the tests read it with volatile loads once the queue is idle or stopped).
struct Pages {
    ptr: *mut u8,
    layout: Layout,
}

impl Pages {
    fn new(n: u64) -> Pages {
        let layout = Layout::from_size_align((n * PAGE) as usize, PAGE as usize).unwrap();
        // SAFETY: a non-zero size; freed in Drop with the same layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Pages { ptr, layout }
    }

    fn addr(&self, off: u64) -> u64 {
        self.ptr as u64 + off
    }

    fn u32_at(&self, off: u64) -> u32 {
        assert!(off + 4 <= self.layout.size() as u64);
        // SAFETY: in bounds; the device writes it only while a queue runs, which the callers
        // have waited out.
        unsafe { std::ptr::read_volatile(self.ptr.add(off as usize) as *const u32) }
    }

    fn set_u32(&self, off: u64, v: u32) {
        assert!(off + 4 <= self.layout.size() as u64);
        // SAFETY: in bounds; no queue runs yet.
        unsafe { std::ptr::write_volatile(self.ptr.add(off as usize) as *mut u32, v) }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// One SVM request with `attrs` inline; GET_ATTR's answers come back in `attrs`.
fn svm(rig: &Rig, start: u64, size: u64, op: u32, attrs: &mut [SvmAttribute]) -> Result<(), Errno> {
    let mut b = SvmArgs { start_addr: start, size, op, nattr: attrs.len() as u32 }.as_bytes().to_vec();
    b.extend_from_slice(attrs.as_bytes());
    let cmd = ioc(ioc_dir(AMDKFD_IOC_SVM), ioc_type(AMDKFD_IOC_SVM), ioc_nr(AMDKFD_IOC_SVM), b.len());
    // SAFETY: the ranges SET_ATTR registers are `Pages` or mappings this test owns, which it
    // keeps for as long as the device may reach them (it drops them only after the queues).
    unsafe { rig.kfd.ioctl(cmd, &mut b)? };
    for (i, a) in attrs.iter_mut().enumerate() {
        *a = SvmAttribute::read_from_bytes(&b[24 + 8 * i..32 + 8 * i]).unwrap();
    }
    Ok(())
}

fn attr(type_: u32, value: u32) -> SvmAttribute {
    SvmAttribute { type_, value }
}

fn set(rig: &Rig, start: u64, size: u64, attrs: &[SvmAttribute]) {
    svm(rig, start, size, KFD_IOCTL_SVM_OP_SET_ATTR, &mut attrs.to_vec()).expect("SVM SET_ATTR");
}

/// GET_ATTR of every attribute over `[start, start + size)`: preferred, prefetch, this GPU's
/// access type, SET_FLAGS, CLR_FLAGS, granularity.
fn get(rig: &Rig, start: u64, size: u64) -> [u32; 6] {
    let mut a = [
        attr(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0),
        attr(KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0),
        attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu),
        attr(KFD_IOCTL_SVM_ATTR_SET_FLAGS, 0),
        attr(KFD_IOCTL_SVM_ATTR_CLR_FLAGS, 0),
        attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, 0),
    ];
    svm(rig, start, size, KFD_IOCTL_SVM_OP_GET_ATTR, &mut a).expect("SVM GET_ATTR");
    assert_eq!(a[2].value, rig.gpu, "ACCESS answers in its type");
    [a[0].value, a[1].value, a[2].type_, a[3].value, a[4].value, a[5].value]
}

fn queue(rig: &Rig, kind: RingKind) -> RingQueue {
    RingQueue::new(&rig.kfd, rig.gpu, kind, 1024).expect("creating a ring queue")
}

fn wait_idle(q: &RingQueue) {
    wait_for(TIMEOUT, &format!("queue {} to consume its ring", q.id), || q.idle().then_some(()));
}

/// The MEMORY event of a VM fault: (page, not present, read only); and the queue's fault address.
fn fault(rig: &Rig, mem_ev: u32, q: &RingQueue) -> (u64, u32, u32, Option<u64>) {
    let w = rig.assert_fires(mem_ev, "the MEMORY event");
    let data = &w.data[0].payload.as_bytes()[..32];
    let f = HsaMemoryExceptionData::read_from_bytes(data).unwrap();
    assert_eq!(f.gpu_id, rig.gpu);
    let at = rig.wait_error(q.id).error.unwrap().fault_va;
    (f.va, f.failure.not_present, f.failure.read_only, at)
}

const BASE_FLAGS: u32 = KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_COHERENT;
const UNDEFINED: u32 = KFD_IOCTL_SVM_LOCATION_UNDEFINED;

#[test]
fn attributes_read_back_split_and_combine() {
    let _serial = serial();
    let rig = Rig::new();
    let p = Pages::new(8);
    // No range yet: the defaults (no access with XNACK off).
    assert_eq!(
        get(&rig, p.addr(0), 8 * PAGE),
        [UNDEFINED, UNDEFINED, KFD_IOCTL_SVM_ATTR_NO_ACCESS, BASE_FLAGS, !BASE_FLAGS, 9]
    );
    set(
        &rig,
        p.addr(0),
        8 * PAGE,
        &[
            attr(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, rig.gpu),
            attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu),
            attr(KFD_IOCTL_SVM_ATTR_SET_FLAGS, KFD_IOCTL_SVM_FLAG_GPU_EXEC),
            attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, 4),
        ],
    );
    let all = BASE_FLAGS | KFD_IOCTL_SVM_FLAG_GPU_EXEC;
    assert_eq!(get(&rig, p.addr(0), 8 * PAGE), [rig.gpu, UNDEFINED, KFD_IOCTL_SVM_ATTR_ACCESS, all, !all, 4]);
    // The middle two pages differ: the span over all disagrees, each part answers its own.
    set(
        &rig,
        p.addr(2 * PAGE),
        2 * PAGE,
        &[
            attr(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, KFD_IOCTL_SVM_LOCATION_SYSMEM),
            attr(KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, rig.gpu),
            attr(KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, rig.gpu),
            attr(KFD_IOCTL_SVM_ATTR_CLR_FLAGS, KFD_IOCTL_SVM_FLAG_COHERENT),
            attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, 2),
        ],
    );
    let mid = KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_GPU_EXEC;
    assert_eq!(
        get(&rig, p.addr(2 * PAGE), 2 * PAGE),
        [KFD_IOCTL_SVM_LOCATION_SYSMEM, rig.gpu, KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, mid, !mid, 2]
    );
    assert_eq!(get(&rig, p.addr(0), 2 * PAGE), [rig.gpu, UNDEFINED, KFD_IOCTL_SVM_ATTR_ACCESS, all, !all, 4]);
    // Access is the intersection: ACCESS on one part, ACCESS_IN_PLACE on the other is neither.
    assert_eq!(
        get(&rig, p.addr(PAGE), 2 * PAGE),
        [UNDEFINED, UNDEFINED, KFD_IOCTL_SVM_ATTR_NO_ACCESS, mid, !all, 2],
        "SET_FLAGS the AND, CLR_FLAGS the complement of the OR"
    );
    let ranges = || rig.emb.device().process(std::process::id()).unwrap().vm().svm.ranges.len();
    assert_eq!(ranges(), 3);
    // Setting the middle back merges the three.
    set(
        &rig,
        p.addr(2 * PAGE),
        2 * PAGE,
        &[
            attr(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, rig.gpu),
            attr(KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, KFD_IOCTL_SVM_LOCATION_SYSMEM),
            attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu),
            attr(KFD_IOCTL_SVM_ATTR_SET_FLAGS, KFD_IOCTL_SVM_FLAG_COHERENT),
            attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, 4),
        ],
    );
    set(&rig, p.addr(0), 8 * PAGE, &[attr(KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, KFD_IOCTL_SVM_LOCATION_SYSMEM)]);
    assert_eq!(ranges(), 1);
    assert_eq!(get(&rig, p.addr(0), 8 * PAGE)[1], KFD_IOCTL_SVM_LOCATION_SYSMEM, "PREFETCH_LOC answers what was set");
    drop(p);
}

#[test]
fn sdma_and_pm4_reach_malloced_memory_through_svm() {
    let _serial = serial();
    let rig = Rig::new();
    let p = Pages::new(4);
    p.set_u32(0x100, 0x1234_5678);
    set(&rig, p.addr(0), 4 * PAGE, &[attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu)]);
    let sdma = queue(&rig, RingKind::Sdma);
    sdma.submit(&sdma::write(p.addr(0x1000), &[1, 2, 3]));
    sdma.submit(&sdma::copy_linear(p.addr(0x2ffc), p.addr(0x100), 8));
    wait_idle(&sdma);
    assert_eq!([p.u32_at(0x1000), p.u32_at(0x1004), p.u32_at(0x1008)], [1, 2, 3]);
    assert_eq!([p.u32_at(0x2ffc), p.u32_at(0x3000)], [0x1234_5678, 0], "a copy across a page boundary");
    let pm4q = queue(&rig, RingKind::Pm4);
    pm4q.submit(&pm4::write_data(p.addr(0x3ff8), &[7, 8]));
    wait_idle(&pm4q);
    assert_eq!([p.u32_at(0x3ff8), p.u32_at(0x3ffc)], [7, 8]);
    drop((sdma, pm4q));
}

#[test]
fn no_access_read_only_and_unmapped_memory_fault() {
    let _serial = serial();
    let rig = Rig::new();
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, true);
    let p = Pages::new(4);
    // A range without access for this GPU (XNACK off: a new range has none).
    set(&rig, p.addr(0), PAGE, &[attr(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, rig.gpu)]);
    let q = queue(&rig, RingKind::Sdma);
    q.submit(&sdma::write(p.addr(0x10), &[0xDEAD]));
    assert_eq!(fault(&rig, mem_ev, &q), (p.addr(0), 1, 0, Some(p.addr(0x10))));
    // Access given, then taken away again.
    set(&rig, p.addr(PAGE), PAGE, &[attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu)]);
    set(&rig, p.addr(PAGE), PAGE, &[attr(KFD_IOCTL_SVM_ATTR_NO_ACCESS, rig.gpu)]);
    let q = queue(&rig, RingKind::Pm4);
    q.submit(&pm4::write_data(p.addr(PAGE + 8), &[0xDEAD]));
    assert_eq!(fault(&rig, mem_ev, &q), (p.addr(PAGE), 1, 0, Some(p.addr(PAGE + 8))));
    // GPU_RO: reads work, writes are read-only faults.
    p.set_u32(2 * PAGE, 42);
    let flags =
        [attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu), attr(KFD_IOCTL_SVM_ATTR_SET_FLAGS, KFD_IOCTL_SVM_FLAG_GPU_RO)];
    set(&rig, p.addr(2 * PAGE), PAGE, &flags);
    set(&rig, p.addr(3 * PAGE), PAGE, &[attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu)]);
    let q = queue(&rig, RingKind::Sdma);
    q.submit(&sdma::copy_linear(p.addr(3 * PAGE), p.addr(2 * PAGE), 4));
    wait_idle(&q);
    assert_eq!(p.u32_at(3 * PAGE), 42, "read from the read-only range");
    q.submit(&sdma::write(p.addr(2 * PAGE + 4), &[0xDEAD]));
    assert_eq!(fault(&rig, mem_ev, &q), (p.addr(2 * PAGE), 0, 1, Some(p.addr(2 * PAGE + 4))));
    assert_eq!([p.u32_at(0x10), p.u32_at(PAGE + 8), p.u32_at(2 * PAGE + 4)], [0, 0, 0], "no faulting write landed");
    drop(q);
    drop(p);
}

#[test]
fn unmapped_memory_faults_and_leaves_the_table() {
    let _serial = serial();
    let rig = Rig::new();
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, true);
    let len = 2 * PAGE as usize;
    let m = map_rw(len);
    let va = m.as_ptr() as u64;
    set(&rig, va, 2 * PAGE, &[attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu)]);
    let ranges = || rig.emb.device().process(std::process::id()).unwrap().vm().svm.ranges.len();
    assert_eq!(ranges(), 1);
    // Made first, so that no ALLOC of the queue's buffers looks at the ranges before the GPU
    // meets the unmapped page.
    let q = queue(&rig, RingKind::Sdma);
    // SAFETY: the mapping made above; the device has nothing in flight on it.
    unsafe { nix::sys::mman::munmap(m, len) }.expect("munmap");
    // Between SVM requests the range is still listed, but the GPU finds no memory there.
    q.submit(&sdma::write(va + PAGE, &[1]));
    let (page, not_present, _, at) = fault(&rig, mem_ev, &q);
    assert_eq!((page, not_present, at), (va + PAGE, 1, Some(va + PAGE)));
    // The next SVM request sees the unmapping (EFAULT for the span, as svm_range_is_valid) and
    // drops the range, whatever it was asked about.
    let mut a = [attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, 0)];
    assert_eq!(svm(&rig, va, 2 * PAGE, KFD_IOCTL_SVM_OP_GET_ATTR, &mut a), Err(Errno::EFAULT));
    assert_eq!(ranges(), 0);
}

/// With XNACK on a new range gives the GPU access. Memory no range names is reached only in
/// another process (amdkfd maps it on fault); embedded, the owner is this process and it faults.
#[test]
fn with_xnack_on_new_ranges_are_accessible() {
    let _serial = serial();
    let rig = Rig::new();
    let mut x = SetXnackModeArgs { xnack_enabled: 1 };
    rig.call(AMDKFD_IOC_SET_XNACK_MODE, &mut x).expect("XNACK on (gfx90a can)");
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, true);
    let p = Pages::new(3);
    assert_eq!(get(&rig, p.addr(0), 3 * PAGE)[2], KFD_IOCTL_SVM_ATTR_ACCESS, "no range: a new one's access");
    set(&rig, p.addr(0), PAGE, &[attr(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, rig.gpu)]);
    let q = queue(&rig, RingKind::Sdma);
    q.submit(&sdma::write(p.addr(0x20), &[5, 6]));
    wait_idle(&q);
    assert_eq!([p.u32_at(0x20), p.u32_at(0x24)], [5, 6]);
    // NO_ACCESS still refuses the GPU.
    set(&rig, p.addr(PAGE), PAGE, &[attr(KFD_IOCTL_SVM_ATTR_NO_ACCESS, rig.gpu)]);
    q.submit(&sdma::write(p.addr(PAGE), &[7]));
    assert_eq!(fault(&rig, mem_ev, &q), (p.addr(PAGE), 1, 0, Some(p.addr(PAGE))));
    // The third page is in no range.
    let q = queue(&rig, RingKind::Sdma);
    q.submit(&sdma::write(p.addr(2 * PAGE), &[8]));
    assert_eq!(fault(&rig, mem_ev, &q), (p.addr(2 * PAGE), 1, 0, Some(p.addr(2 * PAGE))));
    assert_eq!([p.u32_at(PAGE), p.u32_at(2 * PAGE)], [0, 0]);
    drop(q);
}

/// A page the CPU may not write is read-only for the GPU too, once an SVM request has seen the
/// protection (amdkfd's notifier sees the mprotect itself).
#[test]
fn pages_the_cpu_may_not_write_are_read_only_for_the_gpu() {
    use nix::sys::mman::{mprotect, munmap, ProtFlags};
    let _serial = serial();
    let rig = Rig::new();
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, true);
    let len = 2 * PAGE as usize;
    let m = map_rw(len);
    let va = m.as_ptr() as u64;
    // SAFETY: in the mapping, writable until the mprotect below.
    unsafe { std::ptr::write_volatile(m.as_ptr() as *mut u32, 0x55) };
    set(&rig, va, 2 * PAGE, &[attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu)]);
    // SAFETY: the first page of the mapping made above.
    unsafe { mprotect(m, PAGE as usize, ProtFlags::PROT_READ) }.expect("mprotect");
    let _ = get(&rig, va, 2 * PAGE);
    let q = queue(&rig, RingKind::Sdma);
    q.submit(&sdma::copy_linear(va + PAGE, va, 4));
    wait_idle(&q);
    // SAFETY: in the mapping; the queue is idle.
    assert_eq!(unsafe { std::ptr::read_volatile((va + PAGE) as *const u32) }, 0x55, "read from the read-only page");
    q.submit(&sdma::write(va + 8, &[0xAA]));
    assert_eq!(fault(&rig, mem_ev, &q), (va, 0, 1, Some(va + 8)));
    // SAFETY: in the mapping; the queue has stopped.
    assert_eq!(unsafe { std::ptr::read_volatile((va + 8) as *const u32) }, 0, "the faulting write landed");
    drop(q);
    // SAFETY: the mapping made above; the device has nothing in flight on it.
    unsafe { munmap(m, len) }.expect("munmap");
}

/// Freed SVM memory whose addresses the runtime reserves again (PROT_NONE) for a buffer: the
/// buffer's ALLOC there succeeds, as amdkfd's notifier would have dropped the range; over live
/// SVM memory it is EADDRINUSE.
#[test]
fn a_buffer_may_take_the_place_of_freed_svm_memory() {
    use nix::sys::mman::{mmap_anonymous, munmap, MapFlags, ProtFlags};
    let _serial = serial();
    let rig = Rig::new();
    let len = std::num::NonZeroUsize::new(2 * PAGE as usize).unwrap();
    let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
    // SAFETY: fresh anonymous mappings nothing else uses; unmapped below.
    let m = unsafe { mmap_anonymous(None, len, rw, MapFlags::MAP_PRIVATE) }.expect("mmap");
    let va = m.as_ptr() as u64;
    set(&rig, va, 2 * PAGE, &[attr(KFD_IOCTL_SVM_ATTR_ACCESS, rig.gpu)]);
    let alloc = || {
        let flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
        let mut a = AllocMemoryOfGpuArgs { va_addr: va, size: 2 * PAGE, gpu_id: rig.gpu, flags, ..Default::default() };
        rig.call(uapi::ioctl::AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a).map(|()| a.handle)
    };
    assert_eq!(alloc(), Err(Errno::EADDRINUSE), "over live SVM memory");
    let at = std::num::NonZeroUsize::new(va as usize);
    // SAFETY: the mapping made above, replaced in place (nothing else maps meanwhile: serial).
    let again = unsafe {
        munmap(m, len.get()).expect("munmap");
        mmap_anonymous(at, len, ProtFlags::PROT_NONE, MapFlags::MAP_PRIVATE | MapFlags::MAP_FIXED)
    };
    assert_eq!(again.expect("the reservation").as_ptr() as u64, va);
    let handle = alloc().expect("ALLOC where the SVM memory was");
    let mut f = FreeMemoryOfGpuArgs { handle };
    rig.call(uapi::ioctl::AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut f).unwrap();
    assert_eq!(rig.emb.device().process(std::process::id()).unwrap().vm().svm.ranges.len(), 0);
    // SAFETY: the reservation made above.
    unsafe { munmap(std::ptr::NonNull::new(va as *mut std::ffi::c_void).unwrap(), len.get()) }.expect("munmap");
}
