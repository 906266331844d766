//! Waiting on signals, as ROCr's InterruptSignal waits: check the value; with the ACTIVE hint
//! spin (yielding now and then); with BLOCKED spin briefly, then sleep in WAIT_EVENTS on the
//! signals' KFD events, with the event ages last seen so that a wake-up between the value check
//! and the sleep is not lost. Signals without an event are polled with a growing sleep.
//!
//! A waiter announces itself in each slot's `sleepers` count and then fences; a host store
//! fences and then reads the count (ops.rs): either the waiter sees the store or the storer
//! sees the waiter and raises the event.

use super::events::EventPool;
use super::ops::Order;
use super::slot::Slot;
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;
use thunk::{Errno, Kfd};
use uapi::ioctl::AMDKFD_IOC_WAIT_EVENTS;
use uapi::kfd::{EventData, WaitEventsArgs, KFD_EVENT_TIMEOUT_INFINITE, KFD_IOC_WAIT_RESULT_COMPLETE};

/// How long a BLOCKED waiter spins before it sleeps.
const SPIN_NS: u64 = 20_000;
/// Longest sleep of a waiter on polled signals.
const MAX_POLL_SLEEP: Duration = Duration::from_millis(1);

/// The system timestamp: CLOCK_BOOTTIME in ns, the system clock of GET_CLOCK_COUNTERS
/// (HSA_SYSTEM_INFO_TIMESTAMP, frequency 1 GHz).
pub fn timestamp() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// `hsa_signal_condition_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    Eq,
    Ne,
    Lt,
    Gte,
}

impl Condition {
    pub fn from_raw(c: u32) -> Option<Condition> {
        Some(match c {
            0 => Condition::Eq,
            1 => Condition::Ne,
            2 => Condition::Lt,
            3 => Condition::Gte,
            _ => return None,
        })
    }

    pub fn holds(self, value: i64, compare: i64) -> bool {
        match self {
            Condition::Eq => value == compare,
            Condition::Ne => value != compare,
            Condition::Lt => value < compare,
            Condition::Gte => value >= compare,
        }
    }
}

/// `hsa_wait_state_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitHint {
    Blocked,
    Active,
}

impl WaitHint {
    /// Unknown hints are treated as BLOCKED (a hint may be ignored).
    pub fn from_raw(h: u32) -> WaitHint {
        if h == 1 {
            WaitHint::Active
        } else {
            WaitHint::Blocked
        }
    }
}

/// One signal and the condition a waiter wants.
#[derive(Debug, Clone, Copy)]
pub struct WaitSpec {
    pub slot: Slot,
    pub cond: Condition,
    pub compare: i64,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEnd {
    /// Signal `index` satisfied its condition with `value`.
    Satisfied { index: usize, value: i64 },
    /// The timeout passed; `value` is the first signal's value.
    TimedOut { value: i64 },
    /// Signal `index` was destroyed while waited on.
    Gone { index: usize, value: i64 },
}

impl WaitEnd {
    /// The value hsa_signal_wait_* returns.
    pub fn value(self) -> i64 {
        match self {
            WaitEnd::Satisfied { value, .. } | WaitEnd::TimedOut { value } | WaitEnd::Gone { value, .. } => value,
        }
    }
}

fn check(specs: &[WaitSpec], tags: &[u64], order: Order) -> Option<WaitEnd> {
    for (index, (s, tag)) in specs.iter().zip(tags).enumerate() {
        let value = s.slot.value().load(order.load());
        if s.cond.holds(value, s.compare) {
            return Some(WaitEnd::Satisfied { index, value });
        }
        if s.slot.tag() != *tag {
            return Some(WaitEnd::Gone { index, value });
        }
    }
    None
}

/// Waits until one of `specs` holds, one is destroyed, or `timeout` system ticks (ns) pass
/// (`u64::MAX`: forever). Every slot must stay mapped for the call (the caller holds its arena).
pub fn wait(kfd: &Kfd, events: &EventPool, specs: &[WaitSpec], timeout: u64, hint: WaitHint, order: Order) -> WaitEnd {
    assert!(!specs.is_empty(), "a wait needs a signal");
    let tags: Vec<u64> = specs.iter().map(|s| s.slot.tag()).collect();
    let start = timestamp();
    let deadline = (timeout != u64::MAX).then(|| start.saturating_add(timeout));
    // Sleep on events only if every signal has one; batch members share theirs.
    let mut event_ids: Option<Vec<u32>> = specs.iter().map(|s| s.slot.event()).collect();
    if let Some(ids) = event_ids.as_mut() {
        ids.sort_unstable();
        ids.dedup();
    }
    let mut spins = 0u32;
    let mut poll_sleep = Duration::from_micros(20);
    loop {
        if let Some(end) = check(specs, &tags, order) {
            return end;
        }
        let now = timestamp();
        let remaining = match deadline {
            Some(d) if now >= d => return WaitEnd::TimedOut { value: specs[0].slot.value().load(order.load()) },
            Some(d) => d - now,
            None => u64::MAX,
        };
        if hint == WaitHint::Active || now.saturating_sub(start) < SPIN_NS {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(16) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        match &event_ids {
            Some(ids) => {
                if let Some(end) = sleep_on_events(kfd, events, specs, &tags, ids, remaining, order) {
                    return end;
                }
            }
            None => {
                std::thread::sleep(poll_sleep.min(Duration::from_nanos(remaining)));
                poll_sleep = (poll_sleep * 2).min(MAX_POLL_SLEEP);
            }
        }
    }
}

/// One sleep in WAIT_EVENTS; returns the end of the wait if the signals settled it first.
fn sleep_on_events(
    kfd: &Kfd,
    events: &EventPool,
    specs: &[WaitSpec],
    tags: &[u64],
    ids: &[u32],
    remaining: u64,
    order: Order,
) -> Option<WaitEnd> {
    for s in specs {
        s.slot.sleepers().fetch_add(1, Ordering::Relaxed);
    }
    fence(Ordering::SeqCst);
    // Ages first, then the value: a store after this check raises an age newer than these.
    let ages: Vec<u64> = ids.iter().map(|&id| events.age(id)).collect();
    let end = check(specs, tags, order);
    if end.is_none() {
        let ms = if remaining == u64::MAX {
            KFD_EVENT_TIMEOUT_INFINITE
        } else {
            u32::try_from(remaining.div_ceil(1_000_000)).unwrap_or(KFD_EVENT_TIMEOUT_INFINITE - 1)
        };
        match wait_events(kfd, ids, &ages, ms) {
            Ok(seen) => {
                for (id, age) in seen {
                    events.saw_age(id, age);
                }
            }
            Err(e) => {
                // An event went away under us (its signal was destroyed and the event reused
                // or the device closed): poll briefly instead of spinning on the error.
                log::debug!("WAIT_EVENTS on {ids:?}: {e}");
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
    for s in specs {
        s.slot.sleepers().fetch_sub(1, Ordering::Relaxed);
    }
    end
}

/// WAIT_EVENTS (any) on `ids` with the ages last seen; returns the ages of the events that
/// fired (none on a timeout).
fn wait_events(kfd: &Kfd, ids: &[u32], ages: &[u64], timeout_ms: u32) -> Result<Vec<(u32, u64)>, Errno> {
    let mut data: Vec<EventData> = ids
        .iter()
        .zip(ages)
        .map(|(&event_id, &age)| EventData { event_id, payload: [age, 0, 0, 0], ..Default::default() })
        .collect();
    let mut a = WaitEventsArgs {
        events_ptr: data.as_mut_ptr() as u64,
        num_events: ids.len() as u32,
        wait_for_all: 0,
        timeout: timeout_ms,
        wait_result: 0,
    };
    // SAFETY: the device reads and writes `num_events` entries of `data`, owned here and not
    // borrowed during the call.
    unsafe { kfd.call(AMDKFD_IOC_WAIT_EVENTS, &mut a)? };
    if a.wait_result != KFD_IOC_WAIT_RESULT_COMPLETE {
        return Ok(Vec::new());
    }
    Ok(data.iter().map(|d| (d.event_id, d.payload[0])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions() {
        assert!(Condition::Eq.holds(3, 3) && !Condition::Eq.holds(3, 4));
        assert!(Condition::Ne.holds(3, 4) && !Condition::Ne.holds(4, 4));
        assert!(Condition::Lt.holds(-1, 0) && !Condition::Lt.holds(0, 0));
        assert!(Condition::Gte.holds(0, 0) && !Condition::Gte.holds(-5, 0));
        assert_eq!(Condition::from_raw(4), None);
        assert_eq!(WaitHint::from_raw(1), WaitHint::Active);
        assert_eq!(WaitHint::from_raw(7), WaitHint::Blocked);
    }
}
