//! Device-side signal operations on `amd_signal_t` in GPU memory: what the command processor
//! does when a packet completes or a kernel stores to a signal.

use super::mem::Mem;
use crate::memory::vm::{GpuVa, VmFault};
use std::sync::atomic::Ordering;
use uapi::signal::*;

const VALUE: u64 = AMD_SIGNAL_VALUE_OFFSET as u64;
const MAILBOX: u64 = AMD_SIGNAL_EVENT_MAILBOX_PTR_OFFSET as u64;
const EVENT_ID: u64 = AMD_SIGNAL_EVENT_ID_OFFSET as u64;
const START_TS: u64 = AMD_SIGNAL_START_TS_OFFSET as u64;
const END_TS: u64 = AMD_SIGNAL_END_TS_OFFSET as u64;

/// The address of field `off` of the signal whose handle is `signal`; a handle so high that the
/// field wraps around the address space is a fault, as any unmapped address.
fn field(signal: u64, off: u64) -> Result<u64, VmFault> {
    signal.checked_add(off).ok_or(VmFault::Overflow { va: GpuVa(signal) })
}

/// Completes a packet: its start and end timestamps (written together, so the signal's cache
/// line moves to the device once), then the value decremented by exactly one (release, so the
/// packet's effects are visible first), then the event mailbox. Returns the KFD event to raise,
/// if the signal has a mailbox.
pub fn complete(mem: &mut Mem, signal: u64, start_ts: u64, end_ts: u64) -> Result<Option<u32>, VmFault> {
    if signal == 0 {
        return Ok(None);
    }
    mem.store_u64(field(signal, START_TS)?, start_ts, Ordering::Relaxed)?;
    mem.store_u64(field(signal, END_TS)?, end_ts, Ordering::Relaxed)?;
    mem.fetch_add_i64(field(signal, VALUE)?, -1, Ordering::AcqRel)?;
    notify(mem, signal)
}

/// Stores `value` to the signal (a device-side signal store), then notifies its mailbox.
pub fn store(mem: &mut Mem, signal: u64, value: i64) -> Result<Option<u32>, VmFault> {
    mem.swap_i64(field(signal, VALUE)?, value, Ordering::AcqRel)?;
    notify(mem, signal)
}

/// Writes the signal's event id into its mailbox (an event-page slot) and returns the id to
/// raise; `None` for a signal without a mailbox (a polled signal).
pub fn notify(mem: &mut Mem, signal: u64) -> Result<Option<u32>, VmFault> {
    let mailbox = mem.load_u64(field(signal, MAILBOX)?, Ordering::Acquire)?;
    if mailbox == 0 {
        return Ok(None);
    }
    let event_id = mem.load_u64(field(signal, EVENT_ID)?, Ordering::Relaxed)? as u32;
    mem.store_u64(mailbox, u64::from(event_id), Ordering::Release)?;
    Ok(Some(event_id))
}

/// The KFD event of the signal's mailbox, without writing it; `None` for a polled signal.
pub fn event_of(mem: &mut Mem, signal: u64) -> Result<Option<u32>, VmFault> {
    if mem.load_u64(field(signal, MAILBOX)?, Ordering::Acquire)? == 0 {
        return Ok(None);
    }
    Ok(Some(mem.load_u64(field(signal, EVENT_ID)?, Ordering::Relaxed)? as u32))
}

/// The signal's current value.
pub fn load(mem: &mut Mem, signal: u64) -> Result<i64, VmFault> {
    Ok(mem.load_u64(field(signal, VALUE)?, Ordering::Acquire)? as i64)
}
