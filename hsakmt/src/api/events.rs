//! Events. `hsaKmtCreateEvent` hands out an `HsaEvent` the library owns (a Box);
//! `hsaKmtDestroyEvent` takes it back.

use super::{entry, thunk};
use crate::ptr;
use crate::types::*;
use thunk::hsakmt::{Event, EventDescriptor, Status};

/// `hsaKmtCreateEvent`: `*event` receives a new `HsaEvent`; a signal event's mailbox (its
/// event-page slot, mapped in this process) is in `EventData.HWData2`, the value to write there
/// in `HWData3`.
///
/// # Safety
/// `desc` is null or readable; `event` is null or points to a writable `HsaEvent*`.
pub unsafe extern "C" fn hsaKmtCreateEvent(
    desc: *mut HsaEventDescriptor,
    manual_reset: bool,
    is_signaled: bool,
    event: *mut *mut HsaEvent,
) -> HSAKMT_STATUS {
    entry("hsaKmtCreateEvent", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let d = unsafe { ptr::read(desc) }.ok_or(Status::InvalidParameter)?;
        if event.is_null() {
            return Err(Status::InvalidParameter);
        }
        let e = t.create_event(&EventDescriptor::from(&d), manual_reset, is_signaled)?;
        let boxed = Box::into_raw(Box::new(HsaEvent::from(&e)));
        // SAFETY: checked non-null, writable by the caller's contract.
        unsafe { ptr::write(event, boxed) }
    })
}

/// The event `e` points to.
///
/// # Safety
/// `e` is null or points to a readable `HsaEvent`.
unsafe fn read_event(e: *const HsaEvent) -> thunk::hsakmt::Result<Event> {
    // SAFETY: the caller's contract.
    unsafe { ptr::read(e) }.map(|c| Event::from(&c)).ok_or(Status::InvalidHandle)
}

/// `hsaKmtDestroyEvent`: destroys the event and frees its `HsaEvent`.
///
/// # Safety
/// `event` is null or an `HsaEvent*` from `hsaKmtCreateEvent` not yet destroyed.
pub unsafe extern "C" fn hsaKmtDestroyEvent(event: *mut HsaEvent) -> HSAKMT_STATUS {
    entry("hsaKmtDestroyEvent", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let e = unsafe { read_event(event) }?;
        t.destroy_event(&e)?;
        // SAFETY: created by Box::into_raw in hsaKmtCreateEvent and, by the caller's contract,
        // not freed yet; the device no longer knows the event.
        drop(unsafe { Box::from_raw(event) });
        Ok(())
    })
}

/// `hsaKmtSetEvent`.
///
/// # Safety
/// `event` is null or points to a readable `HsaEvent`.
pub unsafe extern "C" fn hsaKmtSetEvent(event: *mut HsaEvent) -> HSAKMT_STATUS {
    entry("hsaKmtSetEvent", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let e = unsafe { read_event(event) }?;
        t.set_event(&e)
    })
}

/// `hsaKmtResetEvent`: unsignals a (non-system) event (AMDKFD_IOC_RESET_EVENT).
///
/// # Safety
/// `event` is null or points to a readable `HsaEvent`.
pub unsafe extern "C" fn hsaKmtResetEvent(event: *mut HsaEvent) -> HSAKMT_STATUS {
    entry("hsaKmtResetEvent", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let e = unsafe { read_event(event) }?;
        t.reset_event(&e)
    })
}

/// `hsaKmtQueryEventState`: success for any event, as libhsakmt 5.2.3 (it asks nothing; a
/// wait with timeout 0 tells whether the event is signaled).
///
/// # Safety
/// `event` is null or points to a readable `HsaEvent`.
pub unsafe extern "C" fn hsaKmtQueryEventState(event: *mut HsaEvent) -> HSAKMT_STATUS {
    entry("hsaKmtQueryEventState", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let e = unsafe { read_event(event) }?;
        t.query_event_state(&e)
    })
}

/// `hsaKmtWaitOnEvent`: `HSAKMT_STATUS_WAIT_TIMEOUT` after `milliseconds`.
///
/// # Safety
/// `event` is null or points to a readable and writable `HsaEvent`.
pub unsafe extern "C" fn hsaKmtWaitOnEvent(event: *mut HsaEvent, milliseconds: u32) -> HSAKMT_STATUS {
    entry("hsaKmtWaitOnEvent", || {
        if event.is_null() {
            return Err(Status::InvalidHandle);
        }
        let mut events = event;
        // SAFETY: a one-element array of the caller's event.
        unsafe { wait(&mut events, 1, true, milliseconds) }
    })
}

/// `hsaKmtWaitOnMultipleEvents`: all or any of `num_events` events, `milliseconds` at most
/// (`HSA_EVENTTIMEOUT_INFINITE`: forever). A MEMORY event that saw a GPU fault gets it in
/// `EventData.EventData.MemoryAccessFault`.
///
/// # Safety
/// `events` is null or points to `num_events` pointers, each null or pointing to a readable
/// and writable `HsaEvent`.
pub unsafe extern "C" fn hsaKmtWaitOnMultipleEvents(
    events: *mut *mut HsaEvent,
    num_events: u32,
    wait_on_all: bool,
    milliseconds: u32,
) -> HSAKMT_STATUS {
    // SAFETY: the caller's contract.
    entry("hsaKmtWaitOnMultipleEvents", || unsafe { wait(events, num_events, wait_on_all, milliseconds) })
}

/// The body of both waits.
///
/// # Safety
/// As [`hsaKmtWaitOnMultipleEvents`].
unsafe fn wait(events: *mut *mut HsaEvent, n: u32, all: bool, ms: u32) -> thunk::hsakmt::Result<()> {
    let t = thunk()?;
    if events.is_null() {
        return Err(Status::InvalidHandle);
    }
    // SAFETY: the caller's contract.
    let ptrs = unsafe { ptr::read_array(events as *const *mut HsaEvent, n as usize) }.ok_or(Status::InvalidHandle)?;
    let mut list = ptrs
        .iter()
        // SAFETY: each pointer is null or a readable event (the caller's contract).
        .map(|p| unsafe { read_event(*p) })
        .collect::<thunk::hsakmt::Result<Vec<Event>>>()?;
    let mut refs: Vec<&mut Event> = list.iter_mut().collect();
    t.wait_on_multiple_events(&mut refs, all, ms)?;
    for (p, e) in ptrs.iter().zip(&list) {
        if let Some(f) = &e.memory_fault {
            // SAFETY: the caller's contract: readable and writable.
            let mut c = unsafe { ptr::read(*p) }.ok_or(Status::InvalidHandle)?;
            c.set_memory_fault(f);
            // SAFETY: as above.
            unsafe { ptr::write(*p, c) }?;
        }
    }
    Ok(())
}
