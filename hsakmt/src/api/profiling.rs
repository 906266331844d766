//! Performance counters (the Pmc* calls) and streaming performance monitoring (SPM*), as
//! libhsakmt 5.2.3 answers them on this device's topology (no IOMMU PMU slots) and a driver
//! without ROCm's RLC_SPM request (see `thunk`'s profiling module for which counter blocks a
//! node lists and why no trace can be acquired).

use super::{entry, thunk};
use crate::ptr;
use crate::types::*;
use std::ffi::c_void;
use std::sync::Mutex;
use thunk::hsakmt::{Counter, CounterProperties, SpmCopy, Status};

/// The properties handed out per node, which stay valid until the process ends (libhsakmt
/// keeps them until CloseKFD; keeping them longer keeps a caller's stale pointer readable).
static PROPERTIES: Mutex<Vec<(u32, usize)>> = Mutex::new(Vec::new());

/// An `HsaCounterProperties` laid out for C: the header, then each block and its counters.
fn c_properties(p: &CounterProperties) -> Box<[u32]> {
    let mut words: Vec<u32> = vec![p.blocks.len() as u32, p.num_concurrent];
    for b in &p.blocks {
        words.extend(b.block_id.chunks(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))));
        words.extend([b.counters.len() as u32, b.num_concurrent]);
        for c in &b.counters {
            let pair = |v: u64| [v as u32, (v >> 32) as u32];
            words.push(c.profile_type);
            words.extend(pair(c.counter_id));
            words.push(c.size_in_bits);
            words.extend(pair(c.mask));
            words.extend([c.flags, c.block_index]);
        }
    }
    // At least the declared size of the struct (one block of one counter), zeroed past the data.
    words.resize(words.len().max(std::mem::size_of::<HsaCounterProperties>() / 4), 0);
    words.into_boxed_slice()
}

/// `hsaKmtPmcGetCounterProperties`: `*counter_properties` receives the node's counter blocks,
/// owned by the library (a gfx9 GPU node: libhsakmt's 20 non-privileged GFX blocks; a CPU
/// node: `HSAKMT_STATUS_INVALID_PARAMETER`). A closed KFD: `HSAKMT_STATUS_NO_MEMORY`
/// (libhsakmt has no table then).
///
/// # Safety
/// `counter_properties` is null or writable.
pub unsafe extern "C" fn hsaKmtPmcGetCounterProperties(
    node_id: u32,
    counter_properties: *mut *mut HsaCounterProperties,
) -> HSAKMT_STATUS {
    entry("hsaKmtPmcGetCounterProperties", || {
        let t = thunk().map_err(|_| Status::NoMemory)?;
        if counter_properties.is_null() {
            return Err(Status::InvalidParameter);
        }
        let p = t.pmc_counter_properties(node_id)?;
        let mut table = PROPERTIES.lock().unwrap_or_else(|e| e.into_inner());
        let addr = match table.iter().find(|(n, _)| *n == node_id) {
            Some((_, a)) => *a,
            None => {
                let a = Box::leak(c_properties(&p)).as_mut_ptr() as usize;
                table.push((node_id, a));
                a
            }
        };
        // SAFETY: the caller's contract.
        unsafe { ptr::write(counter_properties, addr as *mut HsaCounterProperties) }
    })
}

/// `hsaKmtPmcRegisterTrace`: registers the privileged counters of `counters` (those of type
/// up to PRIVILEGED_STREAMING; the others are skipped) on blocks the node lists, at most a
/// block's slots each; none at all is `HSAKMT_STATUS_INVALID_PARAMETER`. A closed KFD is
/// `HSAKMT_STATUS_NO_MEMORY`.
///
/// # Safety
/// `counters` is null or holds `num_counters` entries; `trace_root` is null or writable.
pub unsafe extern "C" fn hsaKmtPmcRegisterTrace(
    node_id: u32,
    num_counters: u32,
    counters: *mut HsaCounter,
    trace_root: *mut HsaPmcTraceRoot,
) -> HSAKMT_STATUS {
    entry("hsaKmtPmcRegisterTrace", || {
        let t = thunk().map_err(|_| Status::NoMemory)?;
        if counters.is_null() || trace_root.is_null() {
            return Err(Status::InvalidParameter);
        }
        let n = (num_counters as usize).min(thunk::hsakmt::MAX_TRACE_COUNTERS + 1);
        // SAFETY: the caller's contract (at most `num_counters` entries are read).
        let c = unsafe { ptr::read_array(counters, n) }.ok_or(Status::InvalidParameter)?;
        let list: Vec<Counter> = c
            .iter()
            .map(|c| Counter {
                profile_type: c.Type,
                counter_id: c.CounterId,
                size_in_bits: c.CounterSizeInBits,
                mask: c.CounterMask,
                flags: c.Flags,
                block_index: c.BlockIndex,
            })
            .collect();
        let root = t.pmc_register_trace(node_id, &list)?;
        let c = HsaPmcTraceRoot {
            TraceBufferMinSizeBytes: root.buffer_min_size,
            NumberOfPasses: root.number_of_passes,
            TraceId: root.trace_id,
        };
        // SAFETY: the caller's contract.
        unsafe { ptr::write(trace_root, c) }
    })
}

/// The trace calls, which libhsakmt answers from its own trace records without asking
/// whether the KFD is open. Here the records live with the open KFD: with it closed no trace
/// exists (libhsakmt's outlive CloseKFD), and the answers for an unknown trace (0:
/// `INVALID_PARAMETER`, any other: `INVALID_HANDLE`) stand; a node it would check first is
/// then `INVALID_NODE_UNIT`.
fn trace_call(
    name: &'static str,
    node: Option<u32>,
    f: impl FnOnce(&thunk::hsakmt::Thunk) -> thunk::hsakmt::Result<()>,
) -> HSAKMT_STATUS {
    entry(name, || match thunk() {
        Ok(t) => f(&t),
        Err(_) if node.is_some() => Err(Status::InvalidNodeUnit),
        Err(_) => Err(Status::InvalidHandle),
    })
}

/// `hsaKmtPmcUnregisterTrace`: forgets a trace of the node's GPU (never running here).
pub extern "C" fn hsaKmtPmcUnregisterTrace(node_id: u32, trace_id: u64) -> HSAKMT_STATUS {
    if trace_id == 0 {
        return entry("hsaKmtPmcUnregisterTrace", || Err(Status::InvalidParameter));
    }
    trace_call("hsaKmtPmcUnregisterTrace", Some(node_id), |t| t.pmc_unregister_trace(node_id, trace_id))
}

/// `hsaKmtPmcAcquireTraceAccess`: `HSAKMT_STATUS_UNAVAILABLE` for any registered trace (only
/// the IOMMU block, never listed here, has slots to acquire).
pub extern "C" fn hsaKmtPmcAcquireTraceAccess(node_id: u32, trace_id: u64) -> HSAKMT_STATUS {
    if trace_id == 0 {
        return entry("hsaKmtPmcAcquireTraceAccess", || Err(Status::InvalidParameter));
    }
    trace_call("hsaKmtPmcAcquireTraceAccess", None, |t| t.pmc_acquire_trace_access(node_id, trace_id))
}

/// `hsaKmtPmcReleaseTraceAccess`: success for any registered trace.
pub extern "C" fn hsaKmtPmcReleaseTraceAccess(node_id: u32, trace_id: u64) -> HSAKMT_STATUS {
    if trace_id == 0 {
        return entry("hsaKmtPmcReleaseTraceAccess", || Err(Status::InvalidParameter));
    }
    trace_call("hsaKmtPmcReleaseTraceAccess", None, |t| t.pmc_release_trace_access(node_id, trace_id))
}

/// `hsaKmtPmcStartTrace`: `HSAKMT_STATUS_ERROR` for any registered trace (its perf_event
/// files were never opened); a null or empty buffer: `INVALID_PARAMETER` first.
pub extern "C" fn hsaKmtPmcStartTrace(trace_id: u64, buffer: *mut c_void, size: u64) -> HSAKMT_STATUS {
    if trace_id == 0 || buffer.is_null() || size == 0 {
        return entry("hsaKmtPmcStartTrace", || Err(Status::InvalidParameter));
    }
    trace_call("hsaKmtPmcStartTrace", None, |t| t.pmc_start_trace(trace_id, buffer as u64, size))
}

/// `hsaKmtPmcQueryTrace`: `HSAKMT_STATUS_NO_MEMORY` for any registered trace (never
/// started, it has no buffer).
pub extern "C" fn hsaKmtPmcQueryTrace(trace_id: u64) -> HSAKMT_STATUS {
    if trace_id == 0 {
        return entry("hsaKmtPmcQueryTrace", || Err(Status::InvalidParameter));
    }
    trace_call("hsaKmtPmcQueryTrace", None, |t| t.pmc_query_trace(trace_id))
}

/// `hsaKmtPmcStopTrace`: `HSAKMT_STATUS_ERROR` for any registered trace, as StartTrace.
pub extern "C" fn hsaKmtPmcStopTrace(trace_id: u64) -> HSAKMT_STATUS {
    if trace_id == 0 {
        return entry("hsaKmtPmcStopTrace", || Err(Status::InvalidParameter));
    }
    trace_call("hsaKmtPmcStopTrace", None, |t| t.pmc_stop_trace(trace_id))
}

/// `hsaKmtSPMAcquire`: `(HSAKMT_STATUS)-1` here, libhsakmt 5.2.3's answer (the ioctl's -1 as
/// the status) when the driver lacks AMD's out-of-tree RLC_SPM request, as this device does.
/// An unknown node (or a closed KFD, which knows none) is `HSAKMT_STATUS_INVALID_NODE_UNIT`.
pub extern "C" fn hsaKmtSPMAcquire(preferred_node: u32) -> HSAKMT_STATUS {
    entry("hsaKmtSPMAcquire", || thunk().map_err(|_| Status::InvalidNodeUnit)?.spm_acquire(preferred_node))
}

/// `hsaKmtSPMRelease`: as SPMAcquire.
pub extern "C" fn hsaKmtSPMRelease(preferred_node: u32) -> HSAKMT_STATUS {
    entry("hsaKmtSPMRelease", || thunk().map_err(|_| Status::InvalidNodeUnit)?.spm_release(preferred_node))
}

/// `hsaKmtSPMSetDestBuffer`: `(HSAKMT_STATUS)-1` here, as SPMAcquire, for any node (libhsakmt
/// sends the request without checking it) and with the KFD closed; `*timeout`, `*size_copied`
/// and `*is_data_loss` receive what the request reported, whatever the status (null pointers:
/// `INVALID_PARAMETER`; libhsakmt would write through them).
///
/// # Safety
/// `timeout` is null or readable and writable; `size_copied` and `is_data_loss` null or
/// writable; `[dest, dest + size)` is valid for the device's writes until the next
/// SetDestBuffer or SPMRelease.
pub unsafe extern "C" fn hsaKmtSPMSetDestBuffer(
    preferred_node: u32,
    size: u32,
    timeout: *mut u32,
    size_copied: *mut u32,
    dest: *mut c_void,
    is_data_loss: *mut bool,
) -> HSAKMT_STATUS {
    entry("hsaKmtSPMSetDestBuffer", || {
        // SAFETY: the caller's contract.
        let ms = unsafe { ptr::read(timeout) }.ok_or(Status::InvalidParameter)?;
        if size_copied.is_null() || is_data_loss.is_null() {
            return Err(Status::InvalidParameter);
        }
        let (r, copy) = match thunk() {
            // SAFETY: the caller's contract.
            Ok(t) => unsafe { t.spm_set_dest_buffer(preferred_node, size, ms, dest as u64) },
            Err(_) => (Err(Status::IoctlFailed), SpmCopy { timeout: ms, ..Default::default() }),
        };
        // SAFETY: checked non-null; writable by the caller's contract.
        unsafe {
            ptr::write(size_copied, copy.bytes_copied)?;
            ptr::write(is_data_loss, copy.data_loss)?;
            ptr::write(timeout, copy.timeout)?;
        }
        r
    })
}
