//! Queues: CREATE/DESTROY/UPDATE_QUEUE, SET_CU_MASK, GET_QUEUE_WAVE_STATE, ALLOC_QUEUE_GWS,
//! with amdkfd's validation order and errnos.

use super::memory::doorbells;
use super::Ctx;
use crate::memory::vm::GpuVa;
use crate::queue::doorbell::Doorbells;
use crate::queue::{Queue, QueueProps, QueueType};
use crate::quota::{Charge, Resource};
use nix::errno::Errno;
use std::sync::Arc;
use uapi::kfd::*;

/// Highest user address + 1 (x86-64 TASK_SIZE): what access_ok() accepts.
const TASK_SIZE: u64 = (1 << 47) - 4096;
/// CU mask words SET_CU_MASK keeps (amdkfd truncates longer masks).
const MAX_CU_MASK_WORDS: u32 = 32;

/// Words of CU mask SET_CU_MASK reads for `num_cu_mask` bits.
pub fn cu_mask_words(num_cu_mask: u32) -> u32 {
    (num_cu_mask / 32).min(MAX_CU_MASK_WORDS)
}

/// access_ok(): the range lies in user space.
fn access_ok(addr: u64, len: u64) -> bool {
    addr.checked_add(len).is_some_and(|end| end <= TASK_SIZE)
}

/// set_queue_properties_from_user's checks shared by create and update.
fn check_common(percentage: u32, priority: u32, ring_base: u64, ring_size: u32) -> Result<(), Errno> {
    if percentage & 0xFF > KFD_MAX_QUEUE_PERCENTAGE || priority > KFD_MAX_QUEUE_PRIORITY {
        return Err(Errno::EINVAL);
    }
    if ring_base != 0 && !access_ok(ring_base, u64::from(ring_size)) {
        return Err(Errno::EFAULT);
    }
    if ring_size != 0 && !ring_size.is_power_of_two() {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

pub fn create(ctx: &Ctx, a: &mut CreateQueueArgs) -> Result<(), Errno> {
    check_common(a.queue_percentage, a.queue_priority, a.ring_base_address, a.ring_size)?;
    if !access_ok(a.read_pointer_address, 8) || !access_ok(a.write_pointer_address, 8) {
        return Err(Errno::EFAULT);
    }
    if (a.eop_buffer_address != 0 && !access_ok(a.eop_buffer_address, a.eop_buffer_size))
        || (a.ctx_save_restore_address != 0
            && !access_ok(a.ctx_save_restore_address, u64::from(a.ctx_save_restore_size)))
    {
        return Err(Errno::EFAULT);
    }
    let queue_type = QueueType::from_ioctl(a.queue_type).ok_or(Errno::EINVAL)?;
    let ring_size = a.ring_size.max(KFD_MIN_QUEUE_RING_SIZE);
    let gpu = ctx.device.topology().gpu(a.gpu_id).ok_or(Errno::EINVAL)?;
    // amdkfd: an SDMA engine chosen by id must exist (PCIe engines, then XGMI engines).
    let sdma_engines = gpu.profile.num_sdma_engines + gpu.profile.num_sdma_xgmi_engines;
    if queue_type == QueueType::SdmaByEngId && a.sdma_engine_id >= sdma_engines {
        return Err(Errno::EINVAL);
    }
    let mut inner = ctx.process.inner();
    {
        // The device reaches ring and pointers only through the GPU VM (kfd_queue_acquire_buffers).
        let vm = ctx.process.vm();
        let ring_ok =
            a.ring_base_address == 0 || vm.is_mapped(a.gpu_id, GpuVa(a.ring_base_address), u64::from(ring_size));
        let ptrs_ok = vm.is_mapped(a.gpu_id, GpuVa(a.read_pointer_address), 8)
            && vm.is_mapped(a.gpu_id, GpuVa(a.write_pointer_address), 8);
        if !ring_ok || !ptrs_ok {
            return Err(Errno::EINVAL);
        }
    }
    let on_gpu = inner.queues.values().filter(|q| q.gpu_id == a.gpu_id).count() as u32;
    if on_gpu >= KFD_MAX_QUEUES_PER_DEVICE {
        return Err(Errno::ENOSPC);
    }
    let id = (0..KFD_MAX_NUM_OF_QUEUES_PER_PROCESS).find(|id| !inner.queues.contains_key(id)).ok_or(Errno::ENOMEM)?;
    // The process's and its uid's queue quotas (ENOSPC, as pqm_create_queue past its count);
    // given back if the doorbell cannot be had.
    let charge = Charge::of(Resource::Queues, 1);
    ctx.device.ledger().charge(ctx.process.account, &charge)?;
    let doorbell = doorbells(ctx, &mut inner, a.gpu_id).and_then(|db| {
        let index = db.alloc().ok_or(Errno::ENOMEM)?;
        Ok((index, db.mmap_offset | Doorbells::byte_offset(index), db.file.clone()))
    });
    let (index, doorbell_offset, doorbell_file) =
        doorbell.inspect_err(|_| ctx.device.ledger().release(ctx.process.account, &charge))?;
    let props = QueueProps {
        ring_base: GpuVa(a.ring_base_address),
        ring_size: u64::from(ring_size),
        percentage: a.queue_percentage,
        priority: a.queue_priority,
        cu_mask: Vec::new(),
    };
    let queue = Queue::new(
        id,
        a.gpu_id,
        queue_type,
        GpuVa(a.read_pointer_address),
        GpuVa(a.write_pointer_address),
        index,
        doorbell_offset,
        GpuVa(a.eop_buffer_address),
        GpuVa(a.ctx_save_restore_address),
        props,
    );
    let queue = Arc::new(queue);
    inner.queues.insert(id, queue.clone());
    let target = ctx.device.topology().gpu(a.gpu_id).map_or(0, |g| g.profile.gfx_target_version);
    ctx.device.engine().add(ctx.process.clone(), queue, doorbell_file, target);
    a.queue_id = id;
    a.ring_size = ring_size;
    a.doorbell_offset = doorbell_offset;
    log::debug!("pid {}: queue {id} ({}) on gpu {:#x}, doorbell {index}", ctx.process.pid, queue_type.name(), a.gpu_id);
    Ok(())
}

pub fn destroy(ctx: &Ctx, a: &mut DestroyQueueArgs) -> Result<(), Errno> {
    let mut inner = ctx.process.inner();
    let q = inner.queues.remove(&a.queue_id).ok_or(Errno::EINVAL)?;
    ctx.device.ledger().release(ctx.process.account, &Charge::of(Resource::Queues, 1));
    // Returns once the command processor has let go of the queue and woken its waiters.
    ctx.device.engine().remove(|hw| Arc::ptr_eq(&hw.queue, &q));
    if let Some(pdd) = inner.devices.get_mut(&q.gpu_id) {
        if let Some(db) = pdd.doorbells.as_mut() {
            db.free(q.doorbell_index);
        }
    }
    // Its GWS go with it (pqm_destroy_queue).
    if ctx.process.gws_queue(q.gpu_id) == Some(a.queue_id) {
        ctx.process.set_gws_queue(q.gpu_id, None);
    }
    Ok(())
}

pub fn update(ctx: &Ctx, a: &mut UpdateQueueArgs) -> Result<(), Errno> {
    check_common(a.queue_percentage, a.queue_priority, a.ring_base_address, a.ring_size)?;
    // amdkfd clamps small rings here too, so a ring is never checked as empty.
    let ring_size = a.ring_size.max(KFD_MIN_QUEUE_RING_SIZE);
    let inner = ctx.process.inner();
    let q = inner.queues.get(&a.queue_id).ok_or(Errno::EFAULT)?;
    // pqm_update_queue_properties: a new ring must be mapped on the GPU, else EFAULT (create's
    // kfd_queue_acquire_buffers says EINVAL for the same fault).
    if a.ring_base_address != 0
        && !ctx.process.vm().is_mapped(q.gpu_id, GpuVa(a.ring_base_address), u64::from(ring_size))
    {
        return Err(Errno::EFAULT);
    }
    // Through set_props, so the command processor sees the change (it caches the props).
    let was_active = q.props().is_active();
    q.set_props(|p| {
        p.ring_base = GpuVa(a.ring_base_address);
        p.ring_size = u64::from(ring_size);
        p.percentage = a.queue_percentage;
        p.priority = a.queue_priority;
    });
    let now_active = q.props().is_active();
    let q = q.clone();
    drop(inner);
    let engine = ctx.device.engine();
    if was_active && !now_active {
        // Preemption, as amdkfd's update_queue unmaps the queue and waits for the preemption
        // fence (see crate::queue::preempt): no slice of its waves starts after this, the
        // engine's pass under way ends, and so do the worker slices already running.
        q.waves.hold(|wait| crate::fork::idle(wait));
        engine.sync();
        log::debug!("pid {}: queue {} preempted", ctx.process.pid, q.id);
    } else if now_active && q.waves.is_held() {
        q.waves.release();
        engine.resume_waves();
        log::debug!("pid {}: queue {} resumed", ctx.process.pid, q.id);
    }
    // A kick, so a resumed queue does not wait for the next idle poll.
    ctx.device.kick();
    Ok(())
}

pub fn set_cu_mask(ctx: &Ctx, a: &mut SetCuMaskArgs) -> Result<(), Errno> {
    if !a.num_cu_mask.is_multiple_of(32) || a.num_cu_mask == 0 {
        return Err(Errno::EINVAL);
    }
    let mask = ctx.read_user::<u32>(a.cu_mask_ptr, cu_mask_words(a.num_cu_mask) as usize)?;
    let inner = ctx.process.inner();
    let q = inner.queues.get(&a.queue_id).ok_or(Errno::EFAULT)?;
    q.set_props(|p| p.cu_mask = mask);
    Ok(())
}

pub fn get_wave_state(ctx: &Ctx, a: &mut GetQueueWaveStateArgs) -> Result<(), Errno> {
    let inner = ctx.process.inner();
    // pqm_get_wave_state: an unknown queue is EFAULT. Then the device queue manager's
    // get_wave_state answers EINVAL for a queue that is not a compute queue, that is active, or
    // on a device without CWSR (linux v6.1 kfd_device_queue_manager.c get_wave_state). This
    // device preempts a queue's waves (UPDATE_QUEUE, crate::queue::preempt) but keeps their
    // state to itself: it writes no control stack or wave save area to the queue's context save
    // area, so it answers as amdkfd does without CWSR, for every queue.
    inner.queues.get(&a.queue_id).ok_or(Errno::EFAULT)?;
    Err(Errno::EINVAL)
}

/// kfd_ioctl_alloc_queue_gws / pqm_set_gws: num_gws > 0 gives the queue all of its GPU's GWS
/// (first_gws 0), one queue per process and GPU; 0 takes them back. A release from a queue
/// that holds none is EINVAL (amdkfd checks only the process's count and would go on to
/// release the holder's through a queue without any).
pub fn alloc_gws(ctx: &Ctx, a: &mut AllocQueueGwsArgs) -> Result<(), Errno> {
    let inner = ctx.process.inner();
    let gpu_id = inner.queues.get(&a.queue_id).ok_or(Errno::EINVAL)?.gpu_id;
    if ctx.device.topology().gpu(gpu_id).is_none_or(|g| g.profile.num_gws == 0) {
        return Err(Errno::ENODEV);
    }
    if !inner.devices.contains_key(&gpu_id) {
        return Err(Errno::EINVAL);
    }
    // Under the process lock, so two calls cannot both find the GPU's GWS free.
    match (a.num_gws, ctx.process.gws_queue(gpu_id)) {
        (0, Some(q)) if q == a.queue_id => ctx.process.set_gws_queue(gpu_id, None),
        (0, _) => return Err(Errno::EINVAL),
        (_, Some(_)) => return Err(Errno::EBUSY),
        (_, None) => ctx.process.set_gws_queue(gpu_id, Some(a.queue_id)),
    }
    drop(inner);
    a.first_gws = 0;
    Ok(())
}
