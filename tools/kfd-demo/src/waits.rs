//! Step 5: waits on interrupt signals (signals with a KFD event). A waiter thread waits for 0
//! with the BLOCKED or the ACTIVE hint; the demo watches the device's parked WAIT_EVENTS calls to
//! see whether it sleeps (BLOCKED: spins 20 us, then sleeps in WAIT_EVENTS) or spins (ACTIVE),
//! then wakes it with a host store (which raises SET_EVENT for sleepers) or with the device's
//! completion of a NOP dispatch (which raises the signal's event), and measures the wake-up.

use crate::report::{check, check_eq, micros, note, Context, Result, Samples};
use crate::{Demo, WAIT_NS};
use rocr_shim::{Buffer, Builtin, Condition, Order, Signal, WaitHint};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the demo gives a BLOCKED waiter to fall asleep.
const PARK_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an ACTIVE waiter is watched in the shown cases.
const WATCH_ACTIVE: Duration = Duration::from_millis(20);
const SAMPLES: usize = 200;

#[derive(Clone, Copy, PartialEq)]
enum Waker {
    HostStore,
    Device,
}

/// What one wait looked like from outside.
struct Wake {
    /// The value the wait returned.
    value: i64,
    /// From the wake-up (store or submit) to the waiter's return.
    latency: Duration,
    /// The waiter was seen parked in WAIT_EVENTS before the wake-up.
    slept: bool,
    /// The signal still read 1 just before the wake-up.
    pending: bool,
    /// Parked waits before the wait and after the waiter returned.
    parked: (usize, usize),
}

/// Polls `f` until it holds or `limit` passes; whether it held.
fn poll_until(limit: Duration, mut f: impl FnMut() -> Result<bool>) -> Result<bool> {
    let t0 = Instant::now();
    loop {
        if f()? {
            return Ok(true);
        }
        if t0.elapsed() >= limit {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// One wait on `s` (set to 1 first) in another thread with `hint`, woken by `waker`. An ACTIVE
/// waiter is watched for `watch` first (a BLOCKED one until it sleeps).
fn wake(d: &Demo, s: &Signal, args: &Buffer, hint: WaitHint, waker: Waker, watch: Duration) -> Result<Wake> {
    s.store(1, Order::Release);
    let before = d.parked_waits()?;
    let started = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            started.store(true, Ordering::Release);
            let v = s.wait(Condition::Eq, 0, WAIT_NS, hint);
            (v, Instant::now())
        });
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        let parked = || d.parked_waits().map(|n| n > before);
        // Errors are kept until the waiter has been woken: it must not be left waiting.
        let slept = match hint {
            WaitHint::Blocked => poll_until(PARK_TIMEOUT, parked),
            WaitHint::Active => poll_until(watch, parked),
        };
        let pending = s.load(Order::Acquire) == 1;
        let t0 = Instant::now();
        let woken = match waker {
            Waker::HostStore => {
                s.store(0, Order::Release);
                Ok(())
            }
            Waker::Device => d.queue.dispatch(Builtin::Nop, args, 1, 1, Some(s), false).map(drop),
        };
        if let Err(e) = woken {
            s.store(0, Order::Release);
            return Err(format!("waking the waiter: {e}"));
        }
        let (value, t1) = waiter.join().map_err(|_| "the waiter thread panicked")?;
        let after = d.parked_waits()?;
        Ok(Wake { value, latency: t1.saturating_duration_since(t0), slept: slept?, pending, parked: (before, after) })
    })
}

/// The shown case: one wait, checked step by step.
fn show(d: &Demo, s: &Signal, args: &Buffer, hint: WaitHint, waker: Waker) -> Result {
    let (hint_name, waker_name) = match (hint, waker) {
        (WaitHint::Blocked, Waker::HostStore) => ("BLOCKED", "a host store"),
        (WaitHint::Blocked, Waker::Device) => ("BLOCKED", "the device completing a NOP dispatch"),
        (WaitHint::Active, Waker::HostStore) => ("ACTIVE", "a host store"),
        (WaitHint::Active, Waker::Device) => ("ACTIVE", "the device completing a NOP dispatch"),
    };
    note(format!("{hint_name} wait for 0, woken by {waker_name}:"));
    let w = wake(d, s, args, hint, waker, WATCH_ACTIVE)?;
    match hint {
        WaitHint::Blocked => check(w.slept, "  the waiter sleeps in WAIT_EVENTS (a parked wait on the device)")?,
        WaitHint::Active => check(!w.slept, "  the waiter spins: no parked wait on the device for 20 ms")?,
    }
    check(w.pending, "  the signal was still 1 while it waited")?;
    check_eq(w.value, 0, &format!("  it returned 0, {} after the wake-up", micros(w.latency)))?;
    check_eq(w.parked.1, w.parked.0, "  no wait is left parked on the device")
}

pub fn run(d: &mut Demo) -> Result {
    let s = d.rt.create_signal(1, &[]).context("hsa_signal_create")?;
    let info = s.info().context("signal info")?;
    note(format!("signal {:#x}: KFD event {}", s.handle(), info.event_id));
    check_eq(info.interrupt, 1, "a signal the host may wait on is an interrupt signal (it has a KFD event)")?;
    let args = d.rt.buffer(d.rt.system_pool().context("system pool")?, 64).context("kernel arguments")?;
    for (hint, waker) in [
        (WaitHint::Blocked, Waker::Device),
        (WaitHint::Blocked, Waker::HostStore),
        (WaitHint::Active, Waker::Device),
        (WaitHint::Active, Waker::HostStore),
    ] {
        show(d, &s, &args, hint, waker)?;
    }

    s.store(1, Order::Release);
    let t0 = Instant::now();
    let v = s.wait(Condition::Eq, 0, 20_000_000, WaitHint::Blocked);
    let waited = t0.elapsed();
    check(v == 1 && waited >= Duration::from_millis(20), "a BLOCKED wait nobody wakes times out after 20 ms with 1")?;

    // Wake-up latencies: BLOCKED waiters asleep when woken, ACTIVE ones spinning for 100 us.
    for (what, hint, waker) in [
        ("wake-up, host store -> BLOCKED waiter", WaitHint::Blocked, Waker::HostStore),
        ("wake-up, host store -> ACTIVE waiter", WaitHint::Active, Waker::HostStore),
        ("wake-up, NOP dispatch -> BLOCKED waiter", WaitHint::Blocked, Waker::Device),
    ] {
        let mut samples = Samples::new(what);
        for i in 0..SAMPLES {
            let w = wake(d, &s, &args, hint, waker, Duration::from_micros(100))?;
            if w.value != 0 || (hint == WaitHint::Blocked && !w.slept) {
                return Err(format!("{what}: wait {i} returned {} (slept: {})", w.value, w.slept));
            }
            samples.push(w.latency);
        }
        d.summary.add(samples);
    }
    Ok(())
}
