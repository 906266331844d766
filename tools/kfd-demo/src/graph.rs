//! Step 4: a small dependency graph of barrier packets over two queues.
//!
//! ```text
//!   a ─┐                         (a, b, d: host signals, 1 = pending)
//!      AND ── c ─┐
//!   b ─┘         OR ── e          queue 1: AND(a, b) -> c, then NOP -> n
//!           d ───┘                queue 2: OR(c, d) -> e
//! ```
//!
//! Nothing may complete while a or b is pending (an AND blocks its queue, so the NOP behind it
//! waits too); once both are 0, c, n and e complete with d still pending. The device's packet
//! timestamps show the order: c ended after the host set b, n and e started after c ended.

use crate::report::{check, check_eq, note, Context, Result, Samples};
use crate::{Demo, WAIT_NS};
use rocr_shim::{Builtin, Condition, Order, Signal, WaitHint};
use std::time::Instant;

/// How long "nothing happens" is watched for.
const QUIET_NS: u64 = 20_000_000;
const ROUND_TRIPS: usize = 1000;

/// Whether every signal of `pending` still reads 1 after watching the first for QUIET_NS.
fn still_pending(pending: &[&Signal]) -> bool {
    let first = pending[0].wait(Condition::Eq, 0, QUIET_NS, WaitHint::Blocked);
    first == 1 && pending.iter().all(|s| s.load(Order::Acquire) == 1)
}

pub fn run(d: &mut Demo) -> Result {
    let rt = &d.rt;
    let q2 = rt.create_queue(d.gpu, 64, None).context("hsa_queue_create(GPU, 64)")?;
    let signal = || rt.create_signal(1, &[]).context("hsa_signal_create");
    let (a, b, c, n, dep, e) = (signal()?, signal()?, signal()?, signal()?, signal()?, signal()?);
    let nop_args = rt.buffer(rt.system_pool().context("system pool")?, 64).context("kernel arguments")?;
    let q1 = &d.queue;
    q1.barrier_and(&[&a, &b], Some(&c)).context("barrier-AND")?;
    q1.dispatch(Builtin::Nop, &nop_args, 1, 1, Some(&n), false).context("NOP dispatch")?;
    q2.barrier_or(&[&c, &dep], Some(&e)).context("barrier-OR")?;
    note("queue 1: AND(a, b) -> c, NOP -> n; queue 2: OR(c, d) -> e; a = b = d = 1");

    check(still_pending(&[&c, &n, &e]), "nothing completes while a and b are pending (c, n, e = 1 after 20 ms)")?;
    a.store(0, Order::Release);
    note("host: a := 0");
    check(still_pending(&[&c, &n, &e]), "one of two is not enough for the AND (c, n, e = 1 after 20 ms)")?;
    let before = rt.gpu_clock(d.gpu).context("reading the GPU clock")?;
    b.store(0, Order::Release);
    note(format!("host: b := 0 at GPU tick {before}"));
    check_eq(c.wait(Condition::Eq, 0, WAIT_NS, WaitHint::Blocked), 0, "the AND completes once a and b are 0")?;
    check_eq(n.wait(Condition::Eq, 0, WAIT_NS, WaitHint::Blocked), 0, "the NOP behind it on queue 1 runs")?;
    check_eq(e.wait(Condition::Eq, 0, WAIT_NS, WaitHint::Blocked), 0, "the OR on queue 2 completes from c")?;
    check_eq(dep.load(Order::Acquire), 1, "... while its other dependency d is still pending")?;

    let ((_, c_end), (n_start, _), (e_start, _)) = (c.timestamps(), n.timestamps(), e.timestamps());
    let since = |t: u64| t.wrapping_sub(before) as i64;
    note(format!(
        "device timestamps, GPU ticks after b := 0: c ended {}, n started {}, e started {}",
        since(c_end),
        since(n_start),
        since(e_start)
    ));
    check(c_end >= before, "by the device clock the AND completed after b := 0, not before")?;
    check(n_start >= c_end, "the NOP started after the AND completed (the AND blocked queue 1)")?;
    check(e_start >= c_end, "the OR started after the AND completed")?;
    let too_many = [&a, &a, &a, &a, &a, &a];
    let refused = q1.barrier_and(&too_many, None).err().map(|e| e.status);
    check_eq(refused, Some(rocr_shim::Status::INVALID_ARGUMENT), "a barrier packet takes five dependencies at most")?;

    // Round trips of a barrier-AND whose dependencies are met (none): submit to completion.
    let done = signal()?;
    let mut samples = Samples::new("barrier-AND round trip (no deps, ACTIVE wait)");
    for i in 0..ROUND_TRIPS {
        done.store(1, Order::Relaxed);
        let t0 = Instant::now();
        q1.barrier_and(&[], Some(&done)).context("barrier-AND")?;
        if done.wait(Condition::Eq, 0, WAIT_NS, WaitHint::Active) != 0 {
            return Err(format!("barrier-AND {i} did not complete"));
        }
        samples.push(t0.elapsed());
    }
    d.summary.add(samples);
    Ok(())
}
