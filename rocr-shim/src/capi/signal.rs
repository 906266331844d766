//! Signals: create/destroy, value operations in every memory order hsa.h declares (the
//! deprecated acquire/release/acq_rel names included), waits and signal groups.

use super::{fail, out, runtime, slice, status, with_runtime, HsaStatus};
use crate::agent::Agent;
use crate::signal::hdp::HdpFlush;
use crate::signal::ops::{self, After, Order, Rmw};
use crate::signal::slot::{Slot, FLAG_DEVICE_MEMORY};
use crate::signal::{Condition, WaitEnd, WaitHint};
use crate::status::{Error, Status};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A view of the caller's signal.
///
/// # Safety
/// `signal` is a live `hsa_signal_t` of this runtime (hsa.h's precondition for the value
/// operations), and the caller does not destroy it while the view is in use.
unsafe fn slot(signal: u64) -> Slot {
    // SAFETY: by the contract above, a slot of this runtime that stays mapped while it is used.
    unsafe { Slot::new(signal) }
}

/// Runs the write `op` on the caller's signal with the HDP flush its stores need: a signal in
/// device memory (as its slot's flag says) finds it in its arena, which the runtime's registry
/// vouches for.
///
/// # Safety
/// As [`slot`].
unsafe fn write<T>(signal: u64, op: impl FnOnce(Slot, Option<&HdpFlush>) -> T) -> T {
    // SAFETY: passed on to our caller.
    let s = unsafe { slot(signal) };
    if s.flags() & FLAG_DEVICE_MEMORY == 0 {
        return op(s, None);
    }
    let arena = with_runtime(|rt| rt.signals().lookup(signal)).flatten();
    op(s, arena.as_ref().and_then(|a| a.hdp()))
}

fn finish(after: After) {
    if after != After::Nothing {
        with_runtime(|rt| rt.after(after));
    }
}

/// hsa_amd_signal_create: `*signal` receives a new signal.
///
/// # Safety
/// `consumers` is null or points to `num_consumers` agents; `signal` is null or valid for
/// writing an `hsa_signal_t`.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_signal_create(
    initial_value: i64,
    num_consumers: u32,
    consumers: *const Agent,
    attributes: u64,
    signal: *mut u64,
) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        // SAFETY: the caller's contract.
        let consumers = unsafe { slice(consumers, num_consumers as usize, "consumers") }?;
        if signal.is_null() {
            return Err(Error::invalid_argument("signal is NULL"));
        }
        let h = rt.create_signal_raw(initial_value, consumers, attributes)?;
        // SAFETY: the caller's contract.
        unsafe { out(signal, h, "signal") }
    });
    status(r)
}

/// hsa_signal_create: `*signal` receives a new signal.
///
/// # Safety
/// As [`hsa_amd_signal_create`].
#[no_mangle]
pub unsafe extern "C" fn hsa_signal_create(
    initial_value: i64,
    num_consumers: u32,
    consumers: *const Agent,
    signal: *mut u64,
) -> HsaStatus {
    // SAFETY: the same contract.
    unsafe { hsa_amd_signal_create(initial_value, num_consumers, consumers, 0, signal) }
}

#[no_mangle]
pub extern "C" fn hsa_signal_destroy(signal: u64) -> HsaStatus {
    status(runtime().and_then(|rt| {
        // The null signal is a bad argument rather than a bad signal, as ROCr answers.
        if signal == 0 {
            return Err(Error::invalid_argument("hsa_signal_destroy: the null signal"));
        }
        rt.destroy_signal_raw(signal)
    }))
}

macro_rules! loads {
    ($($name:ident => $order:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: loads the value, in the order its name gives.")]
        ///
        /// # Safety
        /// `signal` is a live `hsa_signal_t` of this runtime, not destroyed during the call (hsa.h's
        /// precondition).
        #[no_mangle]
        pub unsafe extern "C" fn $name(signal: u64) -> i64 {
            // SAFETY: the caller's contract.
            ops::load(unsafe { slot(signal) }, $order)
        }
    )*};
}

loads! {
    hsa_signal_load_relaxed => Order::Relaxed;
    hsa_signal_load_scacquire => Order::Acquire;
    hsa_signal_load_acquire => Order::Acquire;
}

macro_rules! stores {
    ($($name:ident => $order:expr, $silent:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: stores the value, in the order its name gives (silent stores wake nobody).")]
        ///
        /// # Safety
        /// `signal` is a live `hsa_signal_t` of this runtime, not destroyed during the call (hsa.h's
        /// precondition).
        #[no_mangle]
        pub unsafe extern "C" fn $name(signal: u64, value: i64) {
            // SAFETY: the caller's contract.
            finish(unsafe { write(signal, |s, hdp| ops::store(s, hdp, value, $order, $silent)) });
        }
    )*};
}

stores! {
    hsa_signal_store_relaxed => Order::Relaxed, false;
    hsa_signal_store_screlease => Order::Release, false;
    hsa_signal_store_release => Order::Release, false;
    hsa_signal_silent_store_relaxed => Order::Relaxed, true;
    hsa_signal_silent_store_screlease => Order::Release, true;
}

/// hsa_signal_{add,subtract,and,or,xor}_<order> (void) and hsa_signal_exchange_<order> (the
/// previous value), in the seven orders hsa.h declares.
macro_rules! rmw_family {
    (void $op:expr => $($name:ident $order:ident),*) => {$(
        #[doc = concat!("`", stringify!($name), "`: applies the operation, in the order its name gives.")]
        ///
        /// # Safety
        /// `signal` is a live `hsa_signal_t` of this runtime, not destroyed during the call (hsa.h's
        /// precondition).
        #[no_mangle]
        pub unsafe extern "C" fn $name(signal: u64, value: i64) {
            // SAFETY: the caller's contract.
            let (_, after) = unsafe { write(signal, |s, hdp| ops::rmw(s, hdp, $op, value, Order::$order)) };
            finish(after);
        }
    )*};
    (value $op:expr => $($name:ident $order:ident),*) => {$(
        #[doc = concat!("`", stringify!($name), "`: exchanges the value, in the order its name gives; returns the previous value.")]
        ///
        /// # Safety
        /// `signal` is a live `hsa_signal_t` of this runtime, not destroyed during the call (hsa.h's
        /// precondition).
        #[no_mangle]
        pub unsafe extern "C" fn $name(signal: u64, value: i64) -> i64 {
            // SAFETY: the caller's contract.
            let (old, after) = unsafe { write(signal, |s, hdp| ops::rmw(s, hdp, $op, value, Order::$order)) };
            finish(after);
            old
        }
    )*};
}

rmw_family!(void Rmw::Add => hsa_signal_add_relaxed Relaxed, hsa_signal_add_scacquire Acquire,
    hsa_signal_add_screlease Release, hsa_signal_add_scacq_screl AcqRel, hsa_signal_add_acquire Acquire,
    hsa_signal_add_release Release, hsa_signal_add_acq_rel AcqRel);
rmw_family!(void Rmw::Subtract => hsa_signal_subtract_relaxed Relaxed, hsa_signal_subtract_scacquire Acquire,
    hsa_signal_subtract_screlease Release, hsa_signal_subtract_scacq_screl AcqRel,
    hsa_signal_subtract_acquire Acquire, hsa_signal_subtract_release Release, hsa_signal_subtract_acq_rel AcqRel);
rmw_family!(void Rmw::And => hsa_signal_and_relaxed Relaxed, hsa_signal_and_scacquire Acquire,
    hsa_signal_and_screlease Release, hsa_signal_and_scacq_screl AcqRel, hsa_signal_and_acquire Acquire,
    hsa_signal_and_release Release, hsa_signal_and_acq_rel AcqRel);
rmw_family!(void Rmw::Or => hsa_signal_or_relaxed Relaxed, hsa_signal_or_scacquire Acquire,
    hsa_signal_or_screlease Release, hsa_signal_or_scacq_screl AcqRel, hsa_signal_or_acquire Acquire,
    hsa_signal_or_release Release, hsa_signal_or_acq_rel AcqRel);
rmw_family!(void Rmw::Xor => hsa_signal_xor_relaxed Relaxed, hsa_signal_xor_scacquire Acquire,
    hsa_signal_xor_screlease Release, hsa_signal_xor_scacq_screl AcqRel, hsa_signal_xor_acquire Acquire,
    hsa_signal_xor_release Release, hsa_signal_xor_acq_rel AcqRel);
rmw_family!(value Rmw::Exchange => hsa_signal_exchange_relaxed Relaxed, hsa_signal_exchange_scacquire Acquire,
    hsa_signal_exchange_screlease Release, hsa_signal_exchange_scacq_screl AcqRel,
    hsa_signal_exchange_acquire Acquire, hsa_signal_exchange_release Release, hsa_signal_exchange_acq_rel AcqRel);

macro_rules! cases {
    ($($name:ident => $order:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: compares and swaps the value; returns the value seen.")]
        ///
        /// # Safety
        /// `signal` is a live `hsa_signal_t` of this runtime, not destroyed during the call (hsa.h's
        /// precondition).
        #[no_mangle]
        pub unsafe extern "C" fn $name(signal: u64, expected: i64, value: i64) -> i64 {
            // SAFETY: the caller's contract.
            let (seen, after) = unsafe { write(signal, |s, hdp| ops::cas(s, hdp, expected, value, $order)) };
            finish(after);
            seen
        }
    )*};
}

cases! {
    hsa_signal_cas_relaxed => Order::Relaxed;
    hsa_signal_cas_scacquire => Order::Acquire;
    hsa_signal_cas_screlease => Order::Release;
    hsa_signal_cas_scacq_screl => Order::AcqRel;
    hsa_signal_cas_acquire => Order::Acquire;
    hsa_signal_cas_release => Order::Release;
    hsa_signal_cas_acq_rel => Order::AcqRel;
}

fn wait_one(signal: u64, condition: u32, compare: i64, timeout: u64, hint: u32, order: Order) -> i64 {
    let Some(cond) = Condition::from_raw(condition) else {
        fail(&Error::invalid_argument(format!("{condition} is not an hsa_signal_condition_t")));
        return 0;
    };
    let r = runtime().and_then(|rt| rt.wait_any(&[(signal, cond, compare)], timeout, WaitHint::from_raw(hint), order));
    match r {
        Ok(end) => end.value(),
        Err(e) => {
            fail(&e);
            0
        }
    }
}

#[no_mangle]
pub extern "C" fn hsa_signal_wait_relaxed(signal: u64, condition: u32, compare: i64, timeout: u64, hint: u32) -> i64 {
    wait_one(signal, condition, compare, timeout, hint, Order::Relaxed)
}

#[no_mangle]
pub extern "C" fn hsa_signal_wait_scacquire(signal: u64, condition: u32, compare: i64, timeout: u64, hint: u32) -> i64 {
    wait_one(signal, condition, compare, timeout, hint, Order::Acquire)
}

#[no_mangle]
pub extern "C" fn hsa_signal_wait_acquire(signal: u64, condition: u32, compare: i64, timeout: u64, hint: u32) -> i64 {
    wait_one(signal, condition, compare, timeout, hint, Order::Acquire)
}

/// Specs of a multi-signal wait from the caller's parallel arrays.
///
/// # Safety
/// Each of `signals`, `conds` and `values` is null or points to `n` elements.
unsafe fn specs(
    n: usize,
    signals: *const u64,
    conds: *const u32,
    values: *const i64,
) -> crate::Result<Vec<(u64, Condition, i64)>> {
    // SAFETY: the caller's contract.
    let (s, c, v) =
        unsafe { (slice(signals, n, "signals")?, slice(conds, n, "conditions")?, slice(values, n, "values")?) };
    s.iter()
        .zip(c)
        .zip(v)
        .map(|((&s, &c), &v)| {
            let cond = Condition::from_raw(c)
                .ok_or_else(|| Error::invalid_argument(format!("{c} is not an hsa_signal_condition_t")))?;
            Ok((s, cond, v))
        })
        .collect()
}

/// hsa_amd_signal_wait_any: the index of a signal that satisfied its condition (or was
/// destroyed), UINT32_MAX after the timeout.
///
/// # Safety
/// `signals`, `conds` and `values` are null or point to `signal_count` elements each;
/// `satisfying_value` is null or valid for writing an `hsa_signal_value_t`. (The signals are
/// looked up, so one that is not a live signal of this runtime is an error, not a fault.)
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_signal_wait_any(
    signal_count: u32,
    signals: *const u64,
    conds: *const u32,
    values: *const i64,
    timeout_hint: u64,
    wait_hint: u32,
    satisfying_value: *mut i64,
) -> u32 {
    let r = runtime().and_then(|rt| {
        // SAFETY: the caller's contract.
        let specs = unsafe { specs(signal_count as usize, signals, conds, values) }?;
        rt.wait_any(&specs, timeout_hint, WaitHint::from_raw(wait_hint), Order::Acquire)
    });
    match r {
        Ok(WaitEnd::Satisfied { index, value } | WaitEnd::Gone { index, value }) => {
            // SAFETY: the caller's contract.
            let _ = unsafe { out(satisfying_value, value, "satisfying_value") };
            index as u32
        }
        Ok(WaitEnd::TimedOut { .. }) => u32::MAX,
        Err(e) => {
            fail(&e);
            u32::MAX
        }
    }
}

/// Signal groups by handle.
static GROUPS: Mutex<Option<HashMap<u64, Vec<u64>>>> = Mutex::new(None);
static NEXT_GROUP: AtomicU64 = AtomicU64::new(1);

pub(super) fn forget_groups() {
    *GROUPS.lock() = None;
}

fn group(id: u64) -> crate::Result<Vec<u64>> {
    GROUPS
        .lock()
        .as_ref()
        .and_then(|g| g.get(&id).cloned())
        .ok_or_else(|| Error::new(Status::INVALID_SIGNAL_GROUP, format!("{id:#x} is not a signal group")))
}

/// hsa_signal_group_create: `*signal_group` receives a group of `signals`.
///
/// # Safety
/// `signals` is null or points to `num_signals` signals; `consumers` is null or points to
/// `num_consumers` agents; `signal_group` is null or valid for writing an
/// `hsa_signal_group_t`.
#[no_mangle]
pub unsafe extern "C" fn hsa_signal_group_create(
    num_signals: u32,
    signals: *const u64,
    num_consumers: u32,
    consumers: *const Agent,
    signal_group: *mut u64,
) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        // SAFETY: the caller's contract.
        let members = unsafe { slice(signals, num_signals as usize, "signals") }?.to_vec();
        if members.is_empty() {
            return Err(Error::invalid_argument("a signal group needs at least one signal"));
        }
        // SAFETY: the caller's contract.
        for c in unsafe { slice(consumers, num_consumers as usize, "consumers") }? {
            rt.agent_desc(*c)?;
        }
        for s in &members {
            rt.signal_info(*s).map_err(|e| Error::invalid_argument(e.reason))?;
        }
        let id = NEXT_GROUP.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { out(signal_group, id, "signal_group") }?;
        GROUPS.lock().get_or_insert_with(HashMap::new).insert(id, members);
        Ok(())
    });
    status(r)
}

#[no_mangle]
pub extern "C" fn hsa_signal_group_destroy(signal_group: u64) -> HsaStatus {
    let r =
        runtime().and_then(|_| {
            GROUPS.lock().as_mut().and_then(|g| g.remove(&signal_group)).map(drop).ok_or_else(|| {
                Error::new(Status::INVALID_SIGNAL_GROUP, format!("{signal_group:#x} is not a signal group"))
            })
        });
    status(r)
}

/// Waits until a member of `signal_group` satisfies its condition.
///
/// # Safety
/// `conditions` and `compare_values` are null or point to one element per member of the
/// group; `signal` and `value` are null or valid for writing an `hsa_signal_t` and an
/// `hsa_signal_value_t`.
unsafe fn group_wait(
    signal_group: u64,
    conditions: *const u32,
    compare_values: *const i64,
    hint: u32,
    signal: *mut u64,
    value: *mut i64,
    order: Order,
) -> HsaStatus {
    let r = runtime().and_then(|rt| {
        let members = group(signal_group)?;
        let n = members.len();
        // SAFETY: `members` has `n` elements; the rest is the caller's contract.
        let specs = unsafe { specs(n, members.as_ptr(), conditions, compare_values) }?;
        match rt.wait_any(&specs, u64::MAX, WaitHint::from_raw(hint), order)? {
            WaitEnd::Satisfied { index, value: v } => {
                // SAFETY: the caller's contract.
                unsafe { out(signal, members[index], "signal") }?;
                // SAFETY: the caller's contract.
                unsafe { out(value, v, "value") }
            }
            WaitEnd::Gone { index, .. } => Err(Error::new(
                Status::INVALID_SIGNAL,
                format!("signal {:#x} was destroyed during the wait", members[index]),
            )),
            WaitEnd::TimedOut { .. } => Err(Error::new(Status::ERROR, "a wait without timeout timed out")),
        }
    });
    status(r)
}

/// hsa_signal_group_wait_any_relaxed: `*signal` and `*value` receive the member that
/// satisfied its condition and the value it had.
///
/// # Safety
/// As `group_wait`: `conditions` and `compare_values` hold one element per member of the
/// group; `signal` and `value` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn hsa_signal_group_wait_any_relaxed(
    signal_group: u64,
    conditions: *const u32,
    compare_values: *const i64,
    wait_state_hint: u32,
    signal: *mut u64,
    value: *mut i64,
) -> HsaStatus {
    // SAFETY: the same contract.
    unsafe { group_wait(signal_group, conditions, compare_values, wait_state_hint, signal, value, Order::Relaxed) }
}

/// hsa_signal_group_wait_any_scacquire: `*signal` and `*value` receive the member that
/// satisfied its condition and the value it had.
///
/// # Safety
/// As `group_wait`: `conditions` and `compare_values` hold one element per member of the
/// group; `signal` and `value` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn hsa_signal_group_wait_any_scacquire(
    signal_group: u64,
    conditions: *const u32,
    compare_values: *const i64,
    wait_state_hint: u32,
    signal: *mut u64,
    value: *mut i64,
) -> HsaStatus {
    // SAFETY: the same contract.
    unsafe { group_wait(signal_group, conditions, compare_values, wait_state_hint, signal, value, Order::Acquire) }
}
