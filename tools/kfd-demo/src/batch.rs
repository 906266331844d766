//! Step 6: a signal batch (hsa_amd_signal_batch_create of ROCr interface 1.36): 1024 signals
//! in one arena in the GPU's SIGNAL_CAPABLE pool, sharing one KFD event; the device completes
//! one of them, the host stores to another (one HDP flush when the agent says PCIe stores need
//! one); the batch handle is released first, then the members are destroyed one by one, and the
//! arena goes with the last of them, exactly once. Then the create is timed.

use crate::report::{check, check_eq, note, Context, Result, Samples};
use crate::{Demo, WAIT_NS};
use rocr_shim::hsa::HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH;
use rocr_shim::{Builtin, Condition, Info, Order, Placement, Signal, WaitHint};
use std::time::Instant;

const COUNT: u32 = 1024;
/// Bytes of one amd_signal_t slot.
const SLOT: u64 = 128;
const CREATES: usize = 50;

pub fn run(d: &mut Demo) -> Result {
    let rt = &d.rt;
    let flush = rt.agent_info(d.gpu, HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH).context("PCIE_STORES_NEED_FLUSH")?;
    let needs_flush = flush == Info::Bool(true);
    let want = if rt.signal_pool(d.gpu).is_some() { Placement::Device } else { Placement::Host };
    let before = rt.counters();

    let t0 = Instant::now();
    let mut batch = rt.create_batch(COUNT, 1, Some(d.gpu)).context("hsa_amd_signal_batch_create")?;
    let took = t0.elapsed();
    let mut handles: Vec<u64> = batch.signals.iter().map(Signal::handle).collect();
    handles.sort_unstable();
    let (lo, hi) = (handles[0], handles[handles.len() - 1]);
    note(format!(
        "{} signals in {took:?}: {:?} memory, {lo:#x}..{:#x}",
        batch.signals.len(),
        batch.placement,
        hi + SLOT
    ));
    let where_ = match want {
        Placement::Device => "placed in the GPU's SIGNAL_CAPABLE pool (device memory)",
        Placement::Host => "placed in host memory (the GPU has no SIGNAL_CAPABLE pool)",
    };
    check_eq(batch.placement, want, where_)?;
    check_eq(batch.signals.len(), COUNT as usize, "1024 members")?;
    check(
        handles.windows(2).all(|w| w[1] - w[0] == SLOT),
        "the members are consecutive 128-byte amd_signal_t slots of one arena",
    )?;
    let c = rt.counters();
    check_eq(c.batch_arenas_created - before.batch_arenas_created, 1, "one arena (one allocation) for the batch")?;
    check_eq(c.live_signals - before.live_signals, u64::from(COUNT), "1024 more live signals")?;
    let infos = batch.signals.iter().map(|s| s.info().context("signal info")).collect::<Result<Vec<_>>>()?;
    let event = infos[0].event_id;
    note(format!("shared KFD event {event}, HDP flush after host stores: {needs_flush}"));
    check(
        infos.iter().all(|i| {
            i.batch_member == 1
                && i.placement == u32::from(want == Placement::Device)
                && i.interrupt == 1
                && i.event_id == event
                && (i.needs_flush == 1) == (needs_flush && want == Placement::Device)
        }),
        "every member: a batch member, in that memory, an interrupt signal on the one shared event",
    )?;

    // The device completes member 7; the host stores to member 3.
    let args = rt.buffer(rt.system_pool().context("system pool")?, 64).context("kernel arguments")?;
    d.queue.dispatch(Builtin::Nop, &args, 1, 1, Some(&batch.signals[7]), false).context("NOP dispatch")?;
    let v = batch.signals[7].wait(Condition::Eq, 0, WAIT_NS, WaitHint::Blocked);
    check_eq(v, 0, "a member completed by the device (NOP dispatch) wakes a BLOCKED waiter")?;
    let flushes = rt.counters().hdp_flushes;
    batch.signals[3].store(0, Order::Release);
    let wanted = u64::from(needs_flush && want == Placement::Device);
    check_eq(rt.counters().hdp_flushes - flushes, wanted, "a host store to a member: HDP flushes as the agent asks")?;
    check(batch.signals[5].load(Order::Acquire) == 1, "the other members are untouched")?;

    // The handle first: the members live on, the arena stays.
    batch.release().context("hsa_amd_signal_batch_destroy")?;
    let mut members = std::mem::take(&mut batch.signals);
    drop(batch);
    check_eq(rt.counters().batch_arenas_freed, before.batch_arenas_freed, "handle released: the arena stays")?;
    members[5].store(0, Order::Release);
    check_eq(members[5].load(Order::Acquire), 0, "members still work after the handle is gone")?;
    let mut freed_early = false;
    while let Some(s) = members.pop() {
        freed_early |= rt.counters().batch_arenas_freed != before.batch_arenas_freed;
        drop(s);
    }
    check(!freed_early, "members destroyed one by one: the arena stays while any is alive")?;
    let c = rt.counters();
    check_eq(c.batch_arenas_freed - before.batch_arenas_freed, 1, "the last member freed the arena")?;
    check_eq(c.arena_double_frees, 0, "exactly once")?;
    check_eq(c.live_signals, before.live_signals, "no signal left behind")?;

    let host = rt.create_batch(COUNT, 1, None).context("hsa_amd_signal_batch_create (host)")?;
    check_eq(host.placement, Placement::Host, "a batch with no device named goes to host memory")?;
    drop(host);

    // Creates in the steady state: a released batch's memory serves the next one.
    let reused = rt.counters().arena_memory_reused;
    let what = match want {
        Placement::Device => "batch create, 1024 signals in device memory",
        Placement::Host => "batch create, 1024 signals in host memory",
    };
    let mut samples = Samples::new(what);
    for _ in 0..CREATES {
        let t0 = Instant::now();
        let b = rt.create_batch(COUNT, 0, Some(d.gpu)).context("hsa_amd_signal_batch_create")?;
        samples.push(t0.elapsed());
        drop(b.into_signals());
    }
    let reused = rt.counters().arena_memory_reused - reused;
    note(format!("{reused} of {CREATES} creates reused a released batch's memory"));
    check_eq(rt.counters().live_signals, before.live_signals, "every timed batch was destroyed")?;
    d.summary.add(samples);
    Ok(())
}
