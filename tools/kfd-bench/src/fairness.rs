//! Fairness (issue 13, H6): a client's empty-dispatch round trip while another process keeps a
//! queue full of the most expensive packets the device accepts (2^28-work-item ATOMIC_ADD
//! dispatches), against the same round trip on an idle device. The target: p99 under
//! 50 ms.

use crate::stats::{bench, ns, percentile, ratio};
use cuse_kfd::Caller;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use thunk::memory::{GpuMemory, Kind};
use thunk::queue::{packet, AqlQueue};
use thunk::transport::EmbeddedTransport;
use thunk::Kfd;
use uapi::soft::*;
use uapi::IntoBytes;

const ROUND_TRIPS: usize = 2_000;
/// A pid no real process can have (above the kernel's 2^22 limit): the busy client.
const BUSY_PID: u32 = 5_000_000;

/// A soft kernel descriptor of `builtin` in a fresh code buffer.
fn kernel(kfd: &Kfd, gpu: u32, builtin: u32) -> GpuMemory {
    let code = kfd.alloc(gpu, 4096, Kind::Gtt).expect("code");
    let desc = SoftKernelDescriptor::new(builtin, 16);
    code.write(0, desc.as_bytes());
    code
}

/// Empty-dispatch round trips on a fresh queue.
fn round_trips(kfd: &Kfd, gpu: u32) -> Vec<Duration> {
    let q = AqlQueue::new(kfd, gpu, 64).expect("queue");
    crate::engine::empty_dispatch_round_trips(kfd, gpu, &q, ROUND_TRIPS)
}

/// The figures on a device of one engine thread, then (where the machine has cores for more)
/// on one with a lane per core, in the same run.
pub fn run() {
    run_with(1);
    let lanes = cuse_kfd::engine::lanes_per_core();
    if lanes > 1 {
        run_with(lanes);
    }
}

/// The figures on a device of `lanes` engine threads; names end in `_{lanes}lane(s)`.
fn run_with(lanes: usize) {
    let suffix = if lanes == 1 { "_1lane".to_owned() } else { format!("_{lanes}lanes") };
    let bench = |name: &str, value: f64, unit: &str| bench(&format!("{name}{suffix}"), value, unit);
    let ratio = |name: &str, a: f64, b: f64| ratio(&format!("{name}{suffix}"), a, b);
    let engine = cuse_kfd::engine::EngineConfig { threads: lanes, ..Default::default() };
    let config = cuse_kfd::DeviceConfig { engine, ..Default::default() };
    let transport = EmbeddedTransport::new(&config).expect("embedded device");
    let emb = transport.embedded().clone();
    let kfd = Kfd::new(Box::new(transport));
    let gpu = kfd.gpu_ids().expect("gpus")[0];

    let mut idle = round_trips(&kfd, gpu);
    let idle_p99 = percentile(&mut idle, 99);
    bench("fairness_idle_empty_dispatch_p50", ns(percentile(&mut idle, 50)), "ns");
    bench("fairness_idle_empty_dispatch_p99", ns(idle_p99), "ns");

    // The busy process: a ring of 2^28-item ATOMIC_ADD dispatches (each would take the engine
    // seconds to minutes in one go).
    let me = Caller::current();
    let file = EmbeddedTransport::open_as(&emb, Caller { pid: BUSY_PID, tid: BUSY_PID, ..me })
        .expect("opening as the busy process");
    let busy = Kfd::new(Box::new(file));
    let code = kernel(&busy, gpu, SOFT_KERNEL_ATOMIC_ADD_U64);
    let counter = busy.alloc(gpu, 4096, Kind::Gtt).expect("counter");
    let args = busy.alloc(gpu, 4096, Kind::Gtt).expect("kernel arguments");
    args.write(0, AtomicAddArgs { addr: counter.va(), value: 1 }.as_bytes());
    let q = AqlQueue::new(&busy, gpu, 64).expect("the busy queue");
    for _ in 0..63 {
        q.submit(&packet::dispatch(code.va(), args.va(), [1 << 28, 1, 1], [64, 1, 1], 0, false));
    }
    while counter.u64_at(0).load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }

    let tids = crate::engine::engine_tids();
    let waited = crate::engine::schedstat_sum(&tids, 1);
    let (polls, items, t0) = (emb.device().engine().polls(), counter.u64_at(0).load(Ordering::Acquire), Instant::now());
    let mut loaded = round_trips(&kfd, gpu);
    let secs = t0.elapsed().as_secs_f64();
    // On a shared machine the engine thread waits for a CPU too; the round trips include that.
    let waited = (crate::engine::schedstat_sum(&tids, 1) - waited) as f64 / 1e9;
    bench("fairness_busy_engine_runqueue_wait_share", waited / secs * 100.0, "%");
    bench("fairness_busy_engine_passes_per_s", (emb.device().engine().polls() - polls) as f64 / secs, "1/s");
    bench("fairness_busy_work_items_per_s", (counter.u64_at(0).load(Ordering::Acquire) - items) as f64 / secs, "1/s");
    let p99 = percentile(&mut loaded, 99);
    bench("fairness_busy_neighbour_empty_dispatch_p50", ns(percentile(&mut loaded, 50)), "ns");
    bench("fairness_busy_neighbour_empty_dispatch_p99", ns(p99), "ns");
    ratio("fairness_busy_neighbour_p99_vs_idle_p99", ns(p99), ns(idle_p99));

    // DESTROY_QUEUE of the busy queue: how long the caller waits for the engine to let go.
    let t0 = Instant::now();
    drop(q);
    bench("fairness_destroy_busy_queue", ns(t0.elapsed()), "ns");
}
