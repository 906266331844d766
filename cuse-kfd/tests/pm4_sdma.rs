//! PM4 compute queues and SDMA queues on the embedded device, through the thunk's RingQueue:
//! the packet subsets of engine/ring/pm4.rs and engine/ring/sdma.rs, the interrupt path to KFD
//! events, polls that block the queue, indirect buffers, queue errors, VM faults and ring
//! wrapping.

mod support;

use cuse_kfd::engine::ERROR_INVALID_PACKET_FORMAT;
use std::sync::atomic::Ordering;
use support::client::{spawn, stays, wait_for, Rig, QUIET, TIMEOUT, WAIT_MS};
use thunk::memory::{GpuMemory, Kind};
use thunk::pm4;
use thunk::queue::{RingKind, RingQueue};
use thunk::sdma;
use uapi::kfd::*;

/// An address no buffer is mapped at.
const UNMAPPED: u64 = 0x7000_0000_0000;

fn queue(rig: &Rig, kind: RingKind, bytes: u64) -> RingQueue {
    RingQueue::new(&rig.kfd, rig.gpu, kind, bytes).expect("creating a ring queue")
}

fn wait_idle(q: &RingQueue) {
    wait_for(TIMEOUT, &format!("queue {} to consume its ring", q.id), || q.idle().then_some(()));
}

fn u32s(m: &GpuMemory, off: u64, n: u64) -> Vec<u32> {
    (0..n).map(|i| m.u32_at(off + 4 * i).load(Ordering::Acquire)).collect()
}

/// A signal event and the GPU address of its event-page slot.
fn slot_event(rig: &Rig) -> (u32, u64) {
    let e = rig.kfd.create_event(rig.gpu, KFD_IOC_EVENT_SIGNAL, false).expect("CREATE_EVENT");
    (e.event_id, rig.kfd.mailbox(e.event_slot_index).expect("the event page"))
}

#[test]
fn pm4_write_data_nops_and_acquire_mem() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Pm4, 4096);
    let dst = rig.alloc(4096, Kind::Gtt);
    q.write(&pm4::nop(3));
    q.write(&[pm4::filler(), pm4::filler()]);
    q.write(&pm4::acquire_mem());
    q.write(&pm4::write_data(dst.addr(16), &[1, 2, 3]));
    // ADDR_INCR 1: every dword to the same address.
    let mut fixed = pm4::write_data(dst.addr(64), &[7, 8, 9]);
    fixed[1] |= 1 << 16;
    q.write(&fixed);
    let end = q.submit(&[pm4::filler()]);
    wait_idle(&q);
    assert_eq!(u32s(&dst, 12, 5), [0, 1, 2, 3, 0]);
    assert_eq!(u32s(&dst, 64, 2), [9, 0]);
    assert_eq!(q.read_pointer(), end, "PM4 read pointer in dwords");
    let st = rig.status(q.id);
    assert_eq!((st.read_index, st.write_index, st.error), (end, end, None), "status in dwords");
}

#[test]
fn pm4_release_mem_writes_memory_and_fires_the_event_a_wait_sees() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Pm4, 4096);
    let dst = rig.alloc(4096, Kind::Gtt);
    let (ev, mailbox) = slot_event(&rig);
    let kfd = rig.kfd.clone();
    let waiter = spawn(move || kfd.wait_events(&[ev], false, WAIT_MS));
    std::thread::sleep(QUIET);
    let before = cuse_kfd::clock::gpu_clock_counter();
    q.write(&pm4::release_mem(dst.addr(0), 0x1122_3344_5566_7788, 1, 0, 0));
    q.write(&pm4::release_mem(dst.addr(8), 0x1122_3344_5566_7788, 2, 3, 0));
    q.write(&pm4::release_mem(dst.addr(16), 0, 3, 0, 0));
    // What kfdtest does for an event: the event id into its slot, then the interrupt.
    q.submit(&pm4::release_mem(mailbox, u64::from(ev), 2, 2, ev));
    let w = waiter.recv_timeout(TIMEOUT).expect("the waiter returns");
    assert_eq!((w.result, w.wait_result), (Ok(()), KFD_IOC_WAIT_RESULT_COMPLETE));
    wait_idle(&q);
    assert_eq!(u32s(&dst, 0, 2), [0x5566_7788, 0], "DATA_SEL 1 writes the low 32 bits");
    assert_eq!(dst.u64_at(8).load(Ordering::Acquire), 0x1122_3344_5566_7788);
    let ts = dst.u64_at(16).load(Ordering::Acquire);
    assert!(ts >= before && ts <= cuse_kfd::clock::gpu_clock_counter(), "GPU clock timestamp {ts}");
    assert_eq!(slot_value(mailbox), UNSIGNALED_EVENT_SLOT, "the interrupt acknowledged the slot");
}

/// The event-page slot at `mailbox` (the thunk maps the page at its GPU address).
fn slot_value(mailbox: u64) -> u64 {
    // SAFETY: the event page is a live shared mapping at its GPU address for the whole test and
    // slots are aligned 8-byte words.
    unsafe { std::sync::atomic::AtomicU64::from_ptr(mailbox as *mut u64) }.load(Ordering::Acquire)
}

#[test]
fn an_interrupt_sets_the_events_whose_slots_were_written_as_amdkfd_does() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Pm4, 4096);
    let (a, a_slot) = slot_event(&rig);
    let (b, _) = slot_event(&rig);
    // An interrupt naming an event whose slot was not written sets nothing.
    q.submit(&pm4::release_mem(0, 0, 0, 1, b));
    wait_idle(&q);
    rig.assert_quiet(b, "an interrupt without its slot written");
    // A wrong context id: amdkfd searches for written slots and finds a.
    q.submit(&pm4::release_mem(a_slot, u64::from(a), 2, 2, 0xFFFF));
    rig.assert_fires(a, "event a, found by its written slot");
    rig.assert_quiet(b, "event b");
}

#[test]
fn pm4_wait_reg_mem_blocks_the_queue_until_the_host_writes() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Pm4, 4096);
    let mem = rig.alloc(4096, Kind::Gtt);
    let flag = mem.u32_at(0);
    flag.store(0x10, Ordering::Release);
    // Waits for (flag & 0xF) == 5.
    let wait = pm4::wait_reg_mem(mem.addr(0), 3, 5, 0xF);
    q.write(&pm4::write_data(mem.addr(8), &[1]));
    q.write(&wait);
    q.submit(&pm4::write_data(mem.addr(12), &[2]));
    wait_for(TIMEOUT, "the packet before the wait", || (mem.u32_at(8).load(Ordering::Acquire) == 1).then_some(()));
    stays(QUIET, "the packet after the wait has not run", || mem.u32_at(12).load(Ordering::Acquire) == 0);
    assert_eq!(q.read_pointer(), 5, "the read pointer stays at the wait");
    flag.store(0x25, Ordering::Release);
    wait_idle(&q);
    assert_eq!(mem.u32_at(12).load(Ordering::Acquire), 2);
    assert_eq!(rig.status(q.id).error, None);
}

#[test]
fn pm4_indirect_buffers_run_nested_and_in_order() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Pm4, 4096);
    let dst = rig.alloc(4096, Kind::Gtt);
    let ib1 = rig.alloc(4096, Kind::Gtt);
    let ib2 = rig.alloc(4096, Kind::Gtt);
    let put = |m: &GpuMemory, p: &[u32]| {
        for (i, d) in p.iter().enumerate() {
            m.u32_at(4 * i as u64).store(*d, Ordering::Relaxed);
        }
        p.len() as u32
    };
    let mut inner = pm4::write_data(dst.addr(4), &[20]);
    inner.extend(pm4::wait_reg_mem(dst.addr(100), 3, 1, 0xFFFF_FFFF));
    inner.extend(pm4::write_data(dst.addr(8), &[30]));
    let n2 = put(&ib2, &inner);
    let mut outer = pm4::write_data(dst.addr(0), &[10]);
    outer.extend(pm4::indirect_buffer(ib2.addr(0), n2));
    outer.extend(pm4::write_data(dst.addr(12), &[40]));
    let n1 = put(&ib1, &outer);
    q.write(&pm4::indirect_buffer(ib1.addr(0), n1));
    let end = q.submit(&pm4::write_data(dst.addr(16), &[50]));
    // The wait inside the inner IB holds everything after it, and the ring stays at the IB.
    wait_for(TIMEOUT, "the packets before the wait", || (dst.u32_at(4).load(Ordering::Acquire) == 20).then_some(()));
    stays(QUIET, "nothing after the wait runs", || u32s(&dst, 8, 3) == [0, 0, 0]);
    assert_eq!(q.read_pointer(), 0, "the ring waits at the INDIRECT_BUFFER packet");
    dst.u32_at(100).store(1, Ordering::Release);
    wait_idle(&q);
    assert_eq!(u32s(&dst, 0, 5), [10, 20, 30, 40, 50]);
    assert_eq!(q.read_pointer(), end);
}

#[test]
fn an_indirect_buffer_calling_itself_is_a_queue_error() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Pm4, 4096);
    let ib = rig.alloc(4096, Kind::Gtt);
    for (i, d) in pm4::indirect_buffer(ib.addr(0), 4).iter().enumerate() {
        ib.u32_at(4 * i as u64).store(*d, Ordering::Relaxed);
    }
    q.submit(&pm4::indirect_buffer(ib.addr(0), 4));
    let err = rig.wait_error(q.id).error.unwrap();
    assert!(err.reason.contains("nested deeper"), "{err:?}");
}

#[test]
fn sdma_copy_fill_write_and_timestamp_then_fence() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Sdma, 4096);
    let src = rig.alloc(3 << 20, Kind::Gtt);
    let dst = rig.alloc(3 << 20, Kind::Vram);
    let small = rig.alloc(4096, Kind::Gtt);
    let data: Vec<u8> = (0..(2 << 20) + 5003u32).map(|i| (i * 7 + 3) as u8).collect();
    src.write(3, &data);
    dst.fill(0, dst.size(), 0xEE);
    // An odd copy larger than a chunk, to an odd address.
    q.write(&sdma::copy_linear(dst.addr(1), src.addr(3), data.len() as u32));
    q.write(&sdma::const_fill(small.addr(0), 0xA1B2_C3D4, 16, 2));
    q.write(&sdma::const_fill(small.addr(16), 0x77, 5, 0));
    q.write(&sdma::write(small.addr(32), &[5, 6, 7]));
    q.write(&sdma::nop(2));
    q.write(&sdma::timestamp_global(small.addr(64)));
    let before = cuse_kfd::clock::gpu_clock_counter();
    let end = q.submit(&sdma::fence(small.addr(128), 0xF00D));
    wait_for(TIMEOUT, "the fence", || (small.u32_at(128).load(Ordering::Acquire) == 0xF00D).then_some(()));
    let mut got = vec![0u8; data.len() + 2];
    dst.read(0, &mut got);
    assert_eq!(got[0], 0xEE, "the byte before the copy");
    assert!(got[1..=data.len()] == data[..], "the copied bytes");
    assert_eq!(got[data.len() + 1], 0xEE, "the byte after the copy");
    assert_eq!(u32s(&small, 0, 4), [0xA1B2_C3D4; 4]);
    let mut fill = [0u8; 6];
    small.read(16, &mut fill);
    assert_eq!(fill, [0x77, 0x77, 0x77, 0x77, 0x77, 0]);
    assert_eq!(u32s(&small, 32, 4), [5, 6, 7, 0]);
    let ts = small.u64_at(64).load(Ordering::Acquire);
    assert!(ts >= before && ts <= cuse_kfd::clock::gpu_clock_counter(), "timestamp {ts}");
    wait_idle(&q);
    assert_eq!(q.read_pointer(), end * 4, "SDMA read pointer in bytes");
    assert_eq!(rig.status(q.id).read_index, end * 4);
}

#[test]
fn sdma_fence_and_trap_fire_the_event() {
    let rig = Rig::new();
    for kind in [RingKind::Sdma, RingKind::SdmaXgmi] {
        let q = queue(&rig, kind, 1024);
        let (ev, mailbox) = slot_event(&rig);
        rig.assert_quiet(ev, "before the trap");
        // ROCr's BlitSdma: a fence with the event id into the slot, then a trap.
        q.write(&sdma::fence(mailbox, ev));
        q.submit(&sdma::trap(ev));
        rig.assert_fires(ev, "the SDMA trap");
        wait_idle(&q);
    }
}

#[test]
fn sdma_runs_rocr_blit_sdma_copy_and_completion_sequence() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Sdma, 4096);
    let src = rig.alloc(4096, Kind::Vram);
    let dst = rig.alloc(4096, Kind::Gtt);
    let signal = rig.alloc(4096, Kind::Gtt);
    let (ev, mailbox) = slot_event(&rig);
    src.write(0, b"through the SDMA engine");
    signal.u64_at(8).store(1, Ordering::Release);
    // BlitSdma::SubmitCommand: timestamps around the copy, HDP flush and GCR, an atomic
    // decrement of the completion signal's value, then its mailbox and a trap.
    q.write(&sdma::timestamp_global(signal.addr(32)));
    q.write(&sdma::copy_linear(dst.addr(0), src.addr(0), 23));
    q.write(&sdma::rocr_hdp_flush());
    q.write(&sdma::gcr());
    q.write(&sdma::timestamp_global(signal.addr(40)));
    q.write(&sdma::atomic_add64(signal.addr(8), -1));
    q.write(&sdma::fence(mailbox, ev));
    q.submit(&sdma::trap(ev));
    rig.assert_fires(ev, "the copy's completion");
    assert_eq!(signal.u64_at(8).load(Ordering::Acquire), 0, "the signal was decremented");
    let mut got = [0u8; 24];
    dst.read(0, &mut got);
    assert_eq!(&got, b"through the SDMA engine\0");
    let (start, end) = (signal.u64_at(32).load(Ordering::Acquire), signal.u64_at(40).load(Ordering::Acquire));
    assert!(start > 0 && start <= end, "timestamps {start} {end}");
    wait_idle(&q);
    assert_eq!(rig.status(q.id).error, None);
}

#[test]
fn sdma_poll_regmem_blocks_until_the_host_writes() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Sdma, 1024);
    let mem = rig.alloc(4096, Kind::Gtt);
    // Waits for flag >= 3.
    q.write(&sdma::poll_regmem(mem.addr(0), 5, 3, 0xFFFF_FFFF));
    q.submit(&sdma::fence(mem.addr(8), 1));
    stays(QUIET, "the fence after the poll has not run", || mem.u32_at(8).load(Ordering::Acquire) == 0);
    assert_eq!(q.read_pointer(), 0);
    mem.u32_at(0).store(2, Ordering::Release);
    stays(QUIET, "2 is not >= 3", || mem.u32_at(8).load(Ordering::Acquire) == 0);
    mem.u32_at(0).store(9, Ordering::Release);
    wait_idle(&q);
    assert_eq!(mem.u32_at(8).load(Ordering::Acquire), 1);
}

#[test]
fn unknown_and_unsupported_packets_are_queue_errors() {
    let rig = Rig::new();
    let hw = rig.event(KFD_IOC_EVENT_HW_EXCEPTION, true);
    let mem = rig.alloc(4096, Kind::Gtt);
    let cases: [(RingKind, Vec<u32>, &str); 7] = [
        (RingKind::Pm4, vec![pm4::header(0xEE, 1), 0], "unknown PM4 opcode 0xee"),
        (RingKind::Pm4, vec![pm4::header(0x15, 4), 1, 1, 1, 0], "DISPATCH_DIRECT"),
        (RingKind::Pm4, vec![0x0000_1234], "type-0"),
        (RingKind::Sdma, vec![0x33], "unknown SDMA opcode 51"),
        (RingKind::Sdma, vec![4, 0, 0, 0, 0, 0], "INDIRECT"),
        (RingKind::Sdma, vec![10 | 8 << 25, 0, 0, 0, 0, 0, 0, 0], "ATOMIC operation 8"),
        (RingKind::Sdma, vec![8 | 3 << 28, 0, 0, 0, 0, 0], "waiting on a register"),
    ];
    for (kind, bad, what) in cases {
        let q = queue(&rig, kind, 1024);
        q.write(&bad);
        // A good packet after it must not run: nothing is skipped.
        q.submit(&match kind {
            RingKind::Pm4 => pm4::write_data(mem.addr(0), &[1]),
            _ => sdma::fence(mem.addr(0), 1),
        });
        let err = rig.wait_error(q.id).error.expect("an error");
        assert!(err.reason.contains(what), "{what}: {err:?}");
        assert_eq!((err.code, err.fault_va), (ERROR_INVALID_PACKET_FORMAT, None));
        rig.assert_fires(hw, what);
        assert_eq!(mem.u32_at(0).load(Ordering::Acquire), 0, "{what}: the packet after the error ran");
        assert_eq!(q.read_pointer(), 0, "{what}");
    }
}

#[test]
fn an_address_outside_the_gpu_vm_is_a_vm_fault() {
    let rig = Rig::new();
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, true);
    let src = rig.alloc(4096, Kind::Gtt);
    let cases: [(RingKind, Vec<u32>, u64); 4] = [
        (RingKind::Pm4, pm4::write_data(UNMAPPED, &[1]), UNMAPPED),
        (RingKind::Pm4, pm4::indirect_buffer(UNMAPPED + 0x100, 8), UNMAPPED + 0x100),
        (RingKind::Sdma, sdma::copy_linear(src.addr(0), UNMAPPED + 0x40, 64), UNMAPPED + 0x40),
        (RingKind::Sdma, sdma::poll_regmem(UNMAPPED + 8, 3, 0, 1), UNMAPPED + 8),
    ];
    for (kind, packet, va) in cases {
        let q = queue(&rig, kind, 1024);
        q.submit(&packet);
        let w = rig.assert_fires(mem_ev, "the MEMORY event");
        let data = &uapi::IntoBytes::as_bytes(&w.data[0].payload)[..32];
        let fault = <HsaMemoryExceptionData as uapi::FromBytes>::read_from_bytes(data).unwrap();
        assert_eq!((fault.va, fault.gpu_id, fault.failure.not_present), (va & !0xfff, rig.gpu, 1), "the page");
        assert_eq!(rig.wait_error(q.id).error.unwrap().fault_va, Some(va));
    }
}

/// A write into a page the process mapped without KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE is a VM fault
/// whose MEMORY event says ReadOnly, not NotPresent, and names the page (amdkfd v6.1
/// kfd_signal_vm_fault_event: page_addr << PAGE_SHIFT, NotPresent from PROT_VALID, ReadOnly from
/// PROT_WRITE); the queue stops with the exact address, and nothing is written.
#[test]
fn an_sdma_write_to_a_read_only_page_is_a_read_only_fault() {
    let rig = Rig::new();
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, true);
    let layout = std::alloc::Layout::from_size_align(8192, 4096).unwrap();
    // SAFETY: a non-zero size; freed below with the same layout, after the queue is gone.
    let page = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!page.is_null());
    let va = page as u64;
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: va,
        size: 8192,
        handle: 0,
        mmap_offset: va,
        gpu_id: rig.gpu,
        flags: KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
    };
    rig.call(uapi::ioctl::AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a).expect("read-only USERPTR ALLOC");
    let gpus = [rig.gpu];
    let mut m =
        MapMemoryToGpuArgs { handle: a.handle, device_ids_array_ptr: gpus.as_ptr() as u64, n_devices: 1, n_success: 0 };
    rig.call(uapi::ioctl::AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut m).expect("USERPTR MAP");
    let q = queue(&rig, RingKind::Sdma, 1024);
    let at = va + 0x1084;
    q.submit(&sdma::write(at, &[0xDEAD_BEEF]));
    let w = rig.assert_fires(mem_ev, "the MEMORY event");
    let data = &uapi::IntoBytes::as_bytes(&w.data[0].payload)[..32];
    let fault = <HsaMemoryExceptionData as uapi::FromBytes>::read_from_bytes(data).unwrap();
    assert_eq!((fault.va, fault.gpu_id), (va + 0x1000, rig.gpu), "the page and the GPU");
    let f = fault.failure;
    assert_eq!((f.not_present, f.read_only, f.no_execute, f.imprecise), (0, 1, 0, 0), "{f:?}");
    assert_eq!(rig.wait_error(q.id).error.unwrap().fault_va, Some(at));
    // SAFETY: in bounds of the allocation; the device wrote nothing (the write faulted).
    let word = unsafe { std::ptr::read_volatile(page.add(0x1084) as *const u32) };
    assert_eq!(word, 0, "the faulting write reached memory");
    drop(q);
    let mut u = UnmapMemoryFromGpuArgs {
        handle: a.handle,
        device_ids_array_ptr: gpus.as_ptr() as u64,
        n_devices: 1,
        n_success: 0,
    };
    rig.call(uapi::ioctl::AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &mut u).expect("USERPTR UNMAP");
    let mut f = FreeMemoryOfGpuArgs { handle: a.handle };
    rig.call(uapi::ioctl::AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut f).expect("USERPTR FREE");
    // SAFETY: allocated above with this layout; the device no longer maps it.
    unsafe { std::alloc::dealloc(page, layout) };
}

#[test]
fn rings_wrap_with_packets_across_the_end() {
    let rig = Rig::new();
    let out = rig.alloc(8192, Kind::Gtt);
    for (n, kind) in [RingKind::Pm4, RingKind::Sdma].into_iter().enumerate() {
        // 256 dwords; 5-dword packets never line up with the end.
        let q = queue(&rig, kind, 1024);
        let base = 4096 * n as u64;
        for i in 0..600u32 {
            let p = match kind {
                RingKind::Pm4 => pm4::write_data(out.addr(base + 4 * u64::from(i)), &[i + 1]),
                _ => sdma::write(out.addr(base + 4 * u64::from(i)), &[i + 1]),
            };
            wait_for(TIMEOUT, "room in the ring", || {
                let used = q.written() - consumed(&q);
                // Never quite full: a full PM4 ring would read back as an empty one.
                (used + (p.len() as u64) < q.ring_dwords()).then_some(())
            });
            q.submit(&p);
        }
        wait_idle(&q);
        assert_eq!(rig.status(q.id).error, None);
        let got = u32s(&out, base, 600);
        assert_eq!(got, (1..=600).collect::<Vec<u32>>());
    }
}

/// Dwords the device consumed (the PM4 read pointer wraps; the writer never gets a ring
/// ahead, so the distance from the write pointer resolves it).
fn consumed(q: &RingQueue) -> u64 {
    match q.kind {
        RingKind::Pm4 => {
            let n = q.ring_dwords();
            let w = q.written();
            let behind = (w % n + n - q.read_pointer()) % n;
            w - behind
        }
        _ => q.read_pointer() / 4,
    }
}

#[test]
fn a_packet_runs_only_once_all_of_it_is_below_the_write_pointer() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Pm4, 1024);
    let mem = rig.alloc(4096, Kind::Gtt);
    let p = pm4::write_data(mem.addr(0), &[1, 2, 3]);
    q.write(&p[..3]);
    q.commit();
    stays(QUIET, "half a packet does not run", || mem.u32_at(0).load(Ordering::Acquire) == 0);
    q.write(&p[3..]);
    q.commit();
    wait_idle(&q);
    assert_eq!(u32s(&mem, 0, 3), [1, 2, 3]);
}

#[test]
fn an_sdma_write_pointer_that_is_not_whole_dwords_is_a_queue_error() {
    let rig = Rig::new();
    let q = queue(&rig, RingKind::Sdma, 1024);
    q.write(&sdma::nop(0));
    q.ring_doorbell(2);
    let err = rig.wait_error(q.id).error.unwrap();
    assert!(err.reason.contains("whole number of dwords"), "{err:?}");
}
