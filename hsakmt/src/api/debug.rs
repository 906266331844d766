//! The debugger calls of libhsakmt 5.2.3 that ROCr does not import: the pre-ROCm-5 debugger
//! (Dbg*) and the ROCm 5.2 debugger's version. The device has neither debugger: each answers
//! what libhsakmt answers against a driver without it (see `thunk`'s debug module).

use super::{entry, thunk};
use crate::ptr;
use crate::types::*;
use std::ffi::c_void;
use thunk::hsakmt::{Status, WatchPoint};

/// `hsaKmtDbgRegister`: `HSAKMT_STATUS_ERROR` (the driver refuses the deprecated request).
pub extern "C" fn hsaKmtDbgRegister(node_id: u32) -> HSAKMT_STATUS {
    entry("hsaKmtDbgRegister", || thunk()?.dbg_register(node_id))
}

/// `hsaKmtDbgUnregister`: `HSAKMT_STATUS_ERROR`, as registering.
pub extern "C" fn hsaKmtDbgUnregister(node_id: u32) -> HSAKMT_STATUS {
    entry("hsaKmtDbgUnregister", || thunk()?.dbg_unregister(node_id))
}

/// `hsaKmtDbgWavefrontControl`: `HSAKMT_STATUS_ERROR`, as registering (a null message:
/// `HSAKMT_STATUS_INVALID_PARAMETER`; libhsakmt would read through it).
///
/// # Safety
/// `msg` is null or points to a readable `HsaDbgWaveMessage`.
pub unsafe extern "C" fn hsaKmtDbgWavefrontControl(
    node_id: u32,
    operand: u32,
    mode: u32,
    trap_id: u32,
    msg: *mut HsaDbgWaveMessage,
) -> HSAKMT_STATUS {
    entry("hsaKmtDbgWavefrontControl", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let m = unsafe { ptr::read(msg) }.ok_or(Status::InvalidParameter)?;
        t.dbg_wavefront_control(node_id, operand, mode, trap_id, m.DbgWaveMsg, m.MemoryVA)
    })
}

/// `hsaKmtDbgAddressWatch`: `HSAKMT_STATUS_ERROR`, as registering, after libhsakmt's checks
/// (more than 100 points: `HSAKMT_STATUS_INVALID_PARAMETER`). `masks[0] == 0` means no masks;
/// a null `events` no events. Null modes, addresses or masks: `INVALID_PARAMETER` (libhsakmt
/// would read through them).
///
/// # Safety
/// `modes` and `addresses` are null or hold `num_points` entries; `masks` is null or holds
/// `num_points` entries (or one, 0); `events` is null or holds `num_points` pointers.
pub unsafe extern "C" fn hsaKmtDbgAddressWatch(
    node_id: u32,
    num_points: u32,
    modes: *mut u32,
    addresses: *mut *mut c_void,
    masks: *mut u64,
    events: *mut *mut HsaEvent,
) -> HSAKMT_STATUS {
    entry("hsaKmtDbgAddressWatch", || {
        // SAFETY: the caller's contract.
        let first_mask = unsafe { ptr::read(masks) }.ok_or(Status::InvalidParameter)?;
        let t = thunk()?;
        let n = num_points as usize;
        if n > thunk::hsakmt::MAX_WATCH_POINTS {
            // Too many to read: the thunk checks the node, then refuses any count over its limit.
            let over = [WatchPoint { mode: 0, address: 0 }; thunk::hsakmt::MAX_WATCH_POINTS + 1];
            return t.dbg_address_watch(node_id, &over, &[], &[]);
        }
        // SAFETY: the caller's contract.
        let modes = unsafe { ptr::read_array(modes, n) }.ok_or(Status::InvalidParameter)?;
        // SAFETY: the caller's contract.
        let addrs = unsafe { ptr::read_array(addresses as *const *mut c_void, n) }.ok_or(Status::InvalidParameter)?;
        let points: Vec<WatchPoint> =
            modes.iter().zip(&addrs).map(|(m, a)| WatchPoint { mode: *m, address: *a as u64 }).collect();
        let masks = if first_mask > 0 {
            // SAFETY: the caller's contract.
            unsafe { ptr::read_array(masks, n) }.ok_or(Status::InvalidParameter)?
        } else {
            vec![first_mask]
        };
        // SAFETY: the caller's contract.
        let events = unsafe { ptr::read_array(events as *const *mut HsaEvent, if events.is_null() { 0 } else { n }) }
            .ok_or(Status::InvalidParameter)?;
        let events: Vec<u64> = events.iter().map(|e| *e as u64).collect();
        t.dbg_address_watch(node_id, &points, &masks, &events)
    })
}

/// `hsaKmtGetKernelDebugTrapVersionInfo`: `HSAKMT_STATUS_ERROR` here, libhsakmt 5.2.3's answer
/// when the driver lacks ROCm's debugger (DBG_TRAP GET_VERSION fails); it asks without checking
/// that the KFD is open, so a closed one is `ERROR` too.
///
/// # Safety
/// `major` and `minor` are null or writable.
pub unsafe extern "C" fn hsaKmtGetKernelDebugTrapVersionInfo(major: *mut u32, minor: *mut u32) -> HSAKMT_STATUS {
    entry("hsaKmtGetKernelDebugTrapVersionInfo", || {
        let (ma, mi) = thunk().map_err(|_| Status::Error)?.kernel_debug_trap_version()?;
        // SAFETY: the caller's contract.
        unsafe { ptr::write(major, ma) }?;
        // SAFETY: as above.
        unsafe { ptr::write(minor, mi) }
    })
}
