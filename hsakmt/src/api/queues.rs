//! Queues.

use super::{entry, thunk};
use crate::ptr;
use crate::types::*;
use std::ffi::c_void;
use thunk::hsakmt::{Event, QueueId, QueuePriority, QueueResource, QueueType, Status};

/// `HSA_QUEUE_PRIORITY` as the thunk's value (out of range: `InvalidParameter`).
fn priority(p: HSA_QUEUE_PRIORITY) -> thunk::hsakmt::Result<QueuePriority> {
    i32::try_from(p).map(QueuePriority).map_err(|_| Status::InvalidParameter)
}

/// The event a queue call names, if any.
///
/// # Safety
/// `event` is null or points to a readable `HsaEvent`.
unsafe fn event(event: *const HsaEvent) -> Option<Event> {
    // SAFETY: the caller's contract.
    unsafe { ptr::read(event) }.map(|e| Event::from(&e))
}

/// `hsaKmtCreateQueue`: fills `QueueId` and the doorbell of `*resource`; AQL queues use the
/// read and write pointers the caller put there, others get the thunk's.
///
/// # Safety
/// `resource` is null or points to a readable and writable `HsaQueueResource`; `event` is null
/// or points to an `HsaEvent`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hsaKmtCreateQueue(
    node_id: u32,
    queue_type: HSA_QUEUE_TYPE,
    queue_percentage: u32,
    priority_: HSA_QUEUE_PRIORITY,
    queue_address: *mut c_void,
    queue_size: u64,
    event_: *mut HsaEvent,
    resource: *mut HsaQueueResource,
) -> HSAKMT_STATUS {
    entry("hsaKmtCreateQueue", || {
        let t = thunk()?;
        let prio = priority(priority_)?;
        // SAFETY: the caller's contract.
        let c = unsafe { ptr::read(resource) }.ok_or(Status::InvalidParameter)?;
        let mut res = QueueResource {
            queue_id: QueueId(c.QueueId),
            doorbell: c.QueueDoorBell,
            write_ptr: c.QueueWptrValue,
            read_ptr: c.QueueRptrValue,
            error_reason: c.ErrorReason,
        };
        // SAFETY: the caller's contract.
        let ev = unsafe { event(event_) };
        t.create_queue(
            node_id,
            QueueType(queue_type),
            queue_percentage,
            prio,
            queue_address as u64,
            queue_size,
            ev.as_ref(),
            &mut res,
        )?;
        let out = HsaQueueResource {
            QueueId: res.queue_id.0,
            QueueDoorBell: res.doorbell,
            QueueWptrValue: res.write_ptr,
            QueueRptrValue: res.read_ptr,
            ErrorReason: res.error_reason,
        };
        // SAFETY: as above.
        unsafe { ptr::write(resource, out) }
    })
}

/// `hsaKmtUpdateQueue`.
///
/// # Safety
/// `event` is null or points to an `HsaEvent`.
pub unsafe extern "C" fn hsaKmtUpdateQueue(
    queue_id: HSA_QUEUEID,
    queue_percentage: u32,
    priority_: HSA_QUEUE_PRIORITY,
    queue_address: *mut c_void,
    queue_size: u64,
    event_: *mut HsaEvent,
) -> HSAKMT_STATUS {
    entry("hsaKmtUpdateQueue", || {
        let t = thunk()?;
        let prio = priority(priority_)?;
        // SAFETY: the caller's contract.
        let ev = unsafe { event(event_) };
        t.update_queue(QueueId(queue_id), queue_percentage, prio, queue_address as u64, queue_size, ev.as_ref())
    })
}

/// `hsaKmtDestroyQueue`.
pub extern "C" fn hsaKmtDestroyQueue(queue_id: HSA_QUEUEID) -> HSAKMT_STATUS {
    entry("hsaKmtDestroyQueue", || thunk()?.destroy_queue(QueueId(queue_id)))
}

/// `hsaKmtSetQueueCUMask`: `cu_mask_count` bits (a non-zero multiple of 32) at `cu_mask`.
///
/// # Safety
/// `cu_mask` is null or points to `cu_mask_count / 32` readable u32s.
pub unsafe extern "C" fn hsaKmtSetQueueCUMask(
    queue_id: HSA_QUEUEID,
    cu_mask_count: u32,
    cu_mask: *mut u32,
) -> HSAKMT_STATUS {
    entry("hsaKmtSetQueueCUMask", || {
        let t = thunk()?;
        if cu_mask_count == 0 || cu_mask.is_null() || cu_mask_count & 31 != 0 {
            return Err(Status::InvalidParameter);
        }
        // SAFETY: the caller's contract.
        let mask =
            unsafe { ptr::read_array(cu_mask, (cu_mask_count / 32) as usize) }.ok_or(Status::InvalidParameter)?;
        t.set_queue_cu_mask(QueueId(queue_id), &mask)
    })
}

/// `hsaKmtAllocQueueGWS`: `HSAKMT_STATUS_NOT_SUPPORTED` here (no GWS on the device).
///
/// # Safety
/// `first_gws` is null or points to a writable u32.
pub unsafe extern "C" fn hsaKmtAllocQueueGWS(
    queue_id: HSA_QUEUEID,
    num_gws: u32,
    first_gws: *mut u32,
) -> HSAKMT_STATUS {
    entry("hsaKmtAllocQueueGWS", || {
        let first = thunk()?.alloc_queue_gws(QueueId(queue_id), num_gws)?;
        if !first_gws.is_null() {
            // SAFETY: the caller's contract.
            unsafe { ptr::write(first_gws, first) }?;
        }
        Ok(())
    })
}

/// `hsaKmtGetQueueInfo`: `HSAKMT_STATUS_ERROR` for every queue here, libhsakmt 5.2.3's answer
/// for a queue without a context save area: the device has no compute wave save/restore, so
/// the thunk gives queues none, and there is no wave state to report. `*queue_info` is left
/// untouched. A null `queue_info` or an unknown queue: `HSAKMT_STATUS_INVALID_PARAMETER`.
pub extern "C" fn hsaKmtGetQueueInfo(queue_id: HSA_QUEUEID, queue_info: *mut c_void) -> HSAKMT_STATUS {
    entry("hsaKmtGetQueueInfo", || {
        let t = thunk()?;
        if queue_info.is_null() {
            return Err(Status::InvalidParameter);
        }
        match t.queue_info(QueueId(queue_id))? {}
    })
}
