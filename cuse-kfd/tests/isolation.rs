//! Two processes on one device: neither can name, signal, destroy or map the other's objects; a
//! file is bound to the process that opened it; teardown reclaims everything.

mod support;

use cuse_kfd::memory::backing::MmapSpace;
use cuse_kfd::Caller;
use nix::errno::Errno;
use support::raw::*;
use uapi::ioctl::*;
use uapi::kfd::*;

const VICTIM: u32 = FAKE_PID;
const THIEF: u32 = FAKE_PID + 1;

#[test]
fn buffers_cannot_be_reached_by_guessing_handles() {
    let rig = Rig::new();
    let victim = rig.open_as(VICTIM);
    let thief = rig.open_as(THIEF);
    let mapped = victim.alloc_mapped(Mem::Gtt, 2 * PAGE_SIZE);
    let loose = victim.alloc(Mem::Vram, PAGE_SIZE);
    let gpu = rig.gpu();
    for b in [mapped, loose] {
        // amdkfd: FREE of an unknown handle is EINVAL; MAP/UNMAP of an unknown handle on a known
        // GPU is ENOMEM (kfd_process_device_translate_handle failed).
        assert_eq!(thief.free(b.handle), Err(Errno::EINVAL));
        assert_eq!(thief.map(b.handle, &[gpu]), Err(Errno::ENOMEM));
        assert_eq!(thief.unmap(b.handle, &[gpu]), Err(Errno::ENOMEM));
        // Nor as an event page, nor by exporting it.
        assert_eq!(thief.try_create_event(KFD_IOC_EVENT_SIGNAL, false, b.handle).unwrap_err(), Errno::EINVAL);
        let mut ex = ExportDmabufArgs { handle: b.handle, ..Default::default() };
        assert_eq!(thief.call(AMDKFD_IOC_EXPORT_DMABUF, &mut ex), Err(Errno::EINVAL));
    }
    // The thief's VM does not reach the victim's memory: a queue on it is refused.
    let mut q = thief.aql_args(&mapped, &mapped);
    q.write_pointer_address = mapped.va + PAGE_SIZE;
    q.read_pointer_address = mapped.va + PAGE_SIZE + 8;
    assert_eq!(thief.call(AMDKFD_IOC_CREATE_QUEUE, &mut q), Err(Errno::EINVAL));
    // The thief may use the same VAs for its own buffers: address spaces are per process.
    let own = thief.try_alloc_at(gpu, mapped.va, 2 * PAGE_SIZE, Mem::Gtt.flags(), 0).unwrap();
    assert_eq!(own.handle, mapped.handle, "the same handle value names a different buffer");
    thief.map(own.handle, &[gpu]).unwrap();
    let (dv, dt) = (rig.emb().device().process(VICTIM).unwrap(), rig.emb().device().process(THIEF).unwrap());
    dt.vm().write(gpu, cuse_kfd::memory::vm::GpuVa(own.va), b"thief").unwrap();
    let mut seen = [0u8; 5];
    dv.vm().read(gpu, cuse_kfd::memory::vm::GpuVa(mapped.va), &mut seen).unwrap();
    assert_eq!(seen, [0; 5], "the thief's writes never reach the victim's buffer");
    // The victim's buffers are intact and still its own.
    assert_eq!(dv.stats().buffers, 2);
    assert_eq!(dv.stats().mappings, 1);
    victim.unmap(mapped.handle, &[gpu]).unwrap();
    victim.free(mapped.handle).unwrap();
    victim.free(loose.handle).unwrap();
    assert_eq!(dt.stats().buffers, 1, "the thief's own buffer with the same handle value is still there");
}

#[test]
fn queues_cannot_be_reached_by_guessing_ids() {
    let rig = Rig::new();
    let victim = rig.open_as(VICTIM);
    let thief = rig.open_as(THIEF);
    let q = victim.create_queue();
    let mask = [u32::MAX];
    // amdkfd: DESTROY_QUEUE and ALLOC_QUEUE_GWS of an unknown id are EINVAL; UPDATE_QUEUE,
    // SET_CU_MASK and GET_QUEUE_WAVE_STATE are EFAULT.
    assert_eq!(thief.destroy_queue(q.id), Err(Errno::EINVAL));
    let mut u = UpdateQueueArgs { queue_id: q.id, queue_percentage: 0, ..Default::default() };
    assert_eq!(thief.call(AMDKFD_IOC_UPDATE_QUEUE, &mut u), Err(Errno::EFAULT));
    let mut m = SetCuMaskArgs { queue_id: q.id, num_cu_mask: 32, cu_mask_ptr: mask.as_ptr() as u64 };
    assert_eq!(thief.call(AMDKFD_IOC_SET_CU_MASK, &mut m), Err(Errno::EFAULT));
    let mut w = GetQueueWaveStateArgs { queue_id: q.id, ..Default::default() };
    assert_eq!(thief.call(AMDKFD_IOC_GET_QUEUE_WAVE_STATE, &mut w), Err(Errno::EFAULT));
    let mut g = AllocQueueGwsArgs { queue_id: q.id, num_gws: 1, ..Default::default() };
    assert_eq!(thief.call(AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut g), Err(Errno::EINVAL));
    // The victim's queue is untouched: still active with its own properties.
    let dv = rig.emb().device().process(VICTIM).unwrap();
    {
        let inner = dv.inner();
        let props = inner.queues[&q.id].props();
        assert!(props.is_active());
        assert_eq!((props.percentage, props.cu_mask.len()), (100, 0));
    }
    // XNACK is per process: the thief (no queues) may switch its own.
    thief.call(AMDKFD_IOC_SET_XNACK_MODE, &mut SetXnackModeArgs { xnack_enabled: 1 }).unwrap();
    assert_eq!(victim.call(AMDKFD_IOC_SET_XNACK_MODE, &mut SetXnackModeArgs { xnack_enabled: 1 }), Err(Errno::EBUSY));
    // Each process numbers its queues and doorbells from 0.
    let tq = thief.create_queue();
    assert_eq!((tq.id, tq.doorbell_offset), (q.id, q.doorbell_offset));
    thief.destroy_queue(tq.id).unwrap();
    assert_eq!(rig.stats().queues, 1);
    victim.destroy_queue(q.id).unwrap();
}

#[test]
fn events_cannot_be_reached_by_guessing_ids() {
    let rig = Rig::new();
    let victim = rig.open_as(VICTIM);
    let thief = rig.open_as(THIEF);
    let e = victim.signal_event(false);
    let parked = victim.start_wait(&[e], false, KFD_EVENT_TIMEOUT_INFINITE);
    assert_eq!(thief.set_event(e), Err(Errno::EINVAL));
    assert_eq!(thief.reset_event(e), Err(Errno::EINVAL));
    assert_eq!(thief.destroy_event(e), Err(Errno::EINVAL));
    let w = thief.wait(&[e], false, 0);
    assert_eq!((w.result, w.wait_result), (Err(Errno::EINVAL), KFD_IOC_WAIT_RESULT_FAIL));
    // The victim's waiter is still parked and its event still works.
    assert!(parked.still_parked());
    assert_eq!(rig.stats().events, 1);
    // The thief's own event 1 is a different event: setting it does not wake the victim.
    let own = thief.signal_event(false);
    assert_eq!(own, e);
    thief.set_event(own).unwrap();
    assert_eq!(rig.stats().waiters, 1);
    victim.set_event(e).unwrap();
    assert_eq!(rig.stats().waiters, 0);
    // Each process has its own event page file.
    assert!(rig.backing(VICTIM, MmapSpace::Kfd, KFD_MMAP_TYPE_EVENTS).exists());
    assert!(rig.backing(THIEF, MmapSpace::Kfd, KFD_MMAP_TYPE_EVENTS).exists());
}

#[test]
fn a_file_used_by_another_process_is_ebadf() {
    let rig = Rig::new();
    let owner = rig.open_as(VICTIM);
    let _other = rig.open_as(THIEF);
    let e = owner.signal_event(false);
    let ioctl_as = |caller: Caller, cmd: u32, arg: &mut [u8]| {
        // SAFETY: used below only with GET_VERSION and SET_EVENT, whose arguments hold no
        // pointer.
        unsafe { owner.emb().ioctl_as(caller, cmd, arg) }
    };
    let mut v = [0u8; 8];
    assert_eq!(ioctl_as(fake_caller(THIEF), AMDKFD_IOC_GET_VERSION, &mut v), Err(Errno::EBADF));
    let mut set = SetEventArgs { event_id: e, pad: 0 };
    assert_eq!(
        ioctl_as(fake_caller(THIEF), AMDKFD_IOC_SET_EVENT, uapi::IntoBytes::as_mut_bytes(&mut set)),
        Err(Errno::EBADF)
    );
    // Even a process that never opened the device.
    assert_eq!(ioctl_as(fake_caller(THIEF + 1), AMDKFD_IOC_GET_VERSION, &mut v), Err(Errno::EBADF));
    assert_eq!(v, [0; 8], "nothing was answered");
    // Another thread of the owner is fine.
    let mut thread = fake_caller(VICTIM);
    thread.tid = VICTIM + 7;
    ioctl_as(thread, AMDKFD_IOC_GET_VERSION, &mut v).unwrap();
    assert_eq!(rig.stats().processes, 2);
    assert_eq!(rig.emb().device().process(THIEF).unwrap().stats().events, 0);
}

#[test]
fn dropping_every_file_tears_the_process_down() {
    let rig = Rig::new();
    let c = rig.open_as(VICTIM);
    let other = rig.open_as(THIEF);
    let other_event = other.signal_event(false);
    let before_other = rig.emb().device().process(THIEF).unwrap().stats();
    // Give the victim one of everything.
    let q = c.create_queue();
    let _vram = c.alloc_mapped(Mem::Vram, 1 << 20);
    let _gtt = c.alloc(Mem::Gtt, PAGE_SIZE);
    let _db = c.try_alloc_at(rig.gpu(), c.next_va(8192), 8192, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL, 0).unwrap();
    let e = c.signal_event(true);
    let parked = c.start_wait(&[e], false, KFD_EVENT_TIMEOUT_INFINITE);
    let dir = rig.client_dir(VICTIM);
    assert!(count_files(&dir) >= 5, "buffers, doorbells and event page have files");
    let s = rig.stats();
    assert_eq!((s.files, s.processes, s.queues, s.events, s.waiters), (2, 2, 1, 2, 1));
    assert!(c.available() < rig.vram_size());
    let _ = q;
    drop(c);
    let w = parked.finish();
    assert_eq!((w.result, w.wait_result), (Err(Errno::EIO), KFD_IOC_WAIT_RESULT_FAIL));
    assert!(!dir.exists(), "the client's backing directory is removed");
    assert!(rig.emb().device().process(VICTIM).is_none());
    // The other process is untouched, VRAM is given back, and the device serves it.
    let s = rig.stats();
    assert_eq!((s.files, s.processes, s.buffers, s.queues, s.events, s.waiters), (1, 1, 0, 0, 1, 0));
    assert_eq!(rig.emb().device().process(THIEF).unwrap().stats(), before_other);
    assert_eq!(other.available(), rig.vram_size());
    other.set_event(other_event).unwrap();
    drop(other);
    assert_eq!(rig.stats(), Default::default());
    assert_eq!(count_files(&rig.root), 0);
}

#[test]
fn a_second_open_shares_the_process_context() {
    let rig = Rig::new();
    let first = rig.open_as(VICTIM);
    let second = rig.open_as(VICTIM);
    assert_eq!((rig.stats().files, rig.stats().processes), (2, 1));
    // Objects made through one file are reachable through the other.
    let e = first.signal_event(false);
    let b = first.alloc(Mem::Gtt, PAGE_SIZE);
    second.set_event(e).unwrap();
    let w = second.wait(&[e], false, 0);
    assert_eq!(w.wait_result, KFD_IOC_WAIT_RESULT_COMPLETE);
    second.map(b.handle, &[rig.gpu()]).unwrap();
    // Closing one file keeps the context alive.
    drop(first);
    assert_eq!((rig.stats().files, rig.stats().processes, rig.stats().events, rig.stats().buffers), (1, 1, 1, 1));
    second.unmap(b.handle, &[rig.gpu()]).unwrap();
    second.free(b.handle).unwrap();
    second.destroy_event(e).unwrap();
    // A third open after the last close starts afresh.
    drop(second);
    assert_eq!(rig.stats(), Default::default());
    let third = rig.open_as(VICTIM);
    assert_eq!(third.set_event(e), Err(Errno::EINVAL));
    assert_eq!(third.signal_event(false), 0, "ids start again from slot 0");
}

#[test]
fn teardown_of_the_real_process_context_frees_userptr_and_vm() {
    let rig = Rig::new();
    let c = rig.open();
    let mut pages = memmap2::MmapMut::map_anon(PAGE_SIZE as usize).unwrap();
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let b = c.try_alloc_at(rig.gpu(), c.next_va(PAGE_SIZE), PAGE_SIZE, flags, pages.as_mut_ptr() as u64).unwrap();
    c.map(b.handle, &[rig.gpu()]).unwrap();
    let null = std::fs::File::open("/dev/null").unwrap();
    let mut vm = AcquireVmArgs { drm_fd: std::os::fd::AsRawFd::as_raw_fd(&null) as u32, gpu_id: rig.gpu() };
    c.call(AMDKFD_IOC_ACQUIRE_VM, &mut vm).unwrap();
    let pid = c.pid();
    drop(c);
    assert_eq!(rig.stats(), Default::default());
    assert!(!rig.client_dir(pid).exists());
    // A new context of the same process starts with an empty VM and no bound render node.
    let c = rig.open();
    assert_eq!(c.unmap(b.handle, &[rig.gpu()]), Err(Errno::ENOMEM));
    let other = std::fs::File::create(rig.root.join("other")).unwrap();
    let mut vm = AcquireVmArgs { drm_fd: std::os::fd::AsRawFd::as_raw_fd(&other) as u32, gpu_id: rig.gpu() };
    c.call(AMDKFD_IOC_ACQUIRE_VM, &mut vm).unwrap();
    pages[0] = 1;
}
