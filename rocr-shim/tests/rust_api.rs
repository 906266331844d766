//! The Rust API over an embedded device: agents and pools, signals and waits, a batch, queues
//! with barrier packets and soft kernels, copies.

use rocr_shim::hsa::*;
use rocr_shim::{Builtin, Condition, Config, Order, Placement, Rmw, Runtime, Status, WaitHint};
use std::time::{Duration, Instant};
use uapi::soft::FillArgs;
use uapi::IntoBytes;

const SECOND: u64 = 1_000_000_000;

fn runtime() -> Runtime {
    let kfd = thunk::Kfd::embedded(&Default::default()).expect("embedded device");
    Runtime::new(Config { kfd: Some(kfd), ..Default::default() }).expect("runtime")
}

#[test]
fn agents_pools_and_info() {
    let rt = runtime();
    let agents = rt.agents();
    assert_eq!(agents.len(), 2, "a CPU and a GPU");
    let gpu = rt.gpu_agents()[0];
    let cpu = rt.cpu_agent().expect("cpu");
    assert_eq!(rt.agent_info(gpu, HSA_AGENT_INFO_NAME).unwrap().as_text().as_deref(), Some("gfx90a"));
    assert_eq!(rt.agent_info(gpu, HSA_AGENT_INFO_DEVICE).unwrap().as_u64(), Some(HSA_DEVICE_TYPE_GPU.into()));
    assert_eq!(rt.agent_info(cpu, HSA_AGENT_INFO_DEVICE).unwrap().as_u64(), Some(HSA_DEVICE_TYPE_CPU.into()));
    assert_eq!(rt.agent_info(gpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE).unwrap().as_u64(), Some(131_072));
    let isa = rt.agent_info(gpu, HSA_AGENT_INFO_ISA).unwrap_err();
    assert_eq!(isa.status, Status::INVALID_ARGUMENT);
    assert!(isa.reason.contains("loader"), "{isa}");
    let pool = rt.pools(gpu).unwrap()[0];
    assert_eq!(rt.pool_info(pool, HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE).unwrap(), rocr_shim::Info::Bool(true));
    assert_eq!(rt.signal_pool(gpu), Some(pool));
    assert_eq!(rt.system_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY).unwrap().as_u64(), Some(1_000_000_000));
}

#[test]
fn signal_ops_and_waits() {
    let rt = runtime();
    let s = rt.create_signal(5, &[]).unwrap();
    assert_eq!(s.info().unwrap().interrupt, 1);
    assert_eq!(s.rmw(Rmw::Add, 3, Order::AcqRel), 5);
    assert_eq!(s.rmw(Rmw::Exchange, 1, Order::Relaxed), 8);
    assert_eq!(s.cas(1, 9, Order::AcqRel), 1);
    assert_eq!(s.cas(1, 7, Order::AcqRel), 9, "failed cas returns what it saw");
    assert_eq!(s.load(Order::Acquire), 9);
    // Timeout: the unsatisfied value comes back after at least the timeout.
    let t0 = Instant::now();
    assert_eq!(s.wait(Condition::Eq, 0, 20_000_000, WaitHint::Blocked), 9);
    assert!(t0.elapsed() >= Duration::from_millis(20));
    // A host store from another thread wakes a blocked waiter.
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(30));
            s.store(0, Order::Release);
        });
        assert_eq!(s.wait(Condition::Eq, 0, 10 * SECOND, WaitHint::Blocked), 0);
    });
    // GPU-only consumers need no event.
    let g = rt.create_signal(1, &[rt.gpu_agents()[0]]).unwrap();
    assert_eq!(g.info().unwrap().interrupt, 0);
}

#[test]
fn batch_lifetime() {
    let rt = runtime();
    let gpu = rt.gpu_agents()[0];
    let batch = rt.create_batch(64, 1, Some(gpu)).unwrap();
    assert_eq!(batch.placement, Placement::Device);
    let c = rt.counters();
    assert_eq!((c.batch_arenas_created, c.batch_arenas_freed), (1, 0));
    let mut members = batch.into_signals();
    assert_eq!(rt.counters().batch_arenas_freed, 0, "members keep the arena");
    let flushes = rt.counters().hdp_flushes;
    members[3].store(0, Order::Release);
    assert_eq!(rt.counters().hdp_flushes, flushes + 1, "one HDP flush per device-memory store");
    assert_eq!(members[3].wait(Condition::Eq, 0, SECOND, WaitHint::Active), 0);
    while let Some(s) = members.pop() {
        assert_eq!(rt.counters().batch_arenas_freed, 0);
        drop(s);
    }
    let c = rt.counters();
    assert_eq!((c.batch_arenas_freed, c.arena_double_frees), (1, 0));
}

#[test]
fn fresh_batches_share_slabs_without_overlap() {
    // 40 live batches of 1024 (5 MiB of signals): pieces of three 2 MiB slabs.
    let rt = runtime();
    let mut batches: Vec<_> = (0..40).map(|i| rt.create_batch(1024, i, None).unwrap()).collect();
    let mut ranges: Vec<(u64, u64)> = batches
        .iter()
        .map(|b| {
            let lo = b.signals.iter().map(|s| s.handle()).min().unwrap();
            let hi = b.signals.iter().map(|s| s.handle()).max().unwrap();
            (lo, hi + 128)
        })
        .collect();
    ranges.sort_unstable();
    assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0), "no two batches share a slot: {ranges:x?}");
    for (i, b) in batches.iter().enumerate() {
        assert!(b.signals.iter().all(|s| s.load(Order::Acquire) == i as i64), "batch {i} starts at its value");
    }
    batches[7].signals[1000].store(-1, Order::Release);
    assert_eq!(batches[8].signals[0].load(Order::Acquire), 8, "a neighbour's store stays in its batch");
    // Released members give their pieces back; new batches get them (or slab space) again.
    batches.truncate(10);
    let again: Vec<_> = (0..30).map(|_| rt.create_batch(1024, 5, None).unwrap()).collect();
    assert!(again.iter().all(|b| b.signals.iter().all(|s| s.load(Order::Acquire) == 5)));
    let c = rt.counters();
    assert_eq!((c.batch_arenas_created, c.arena_double_frees), (70, 0));
    assert!(c.arena_memory_reused >= 30, "the released batches' pieces served the new ones: {c:?}");
}

#[test]
fn queues_barriers_and_soft_kernels() {
    let rt = runtime();
    let gpu = rt.gpu_agents()[0];
    assert_eq!(rt.create_queue(gpu, 100, None).err().map(|e| e.status), Some(Status::INVALID_ARGUMENT));
    assert_eq!(rt.create_queue(gpu, 1 << 18, None).err().map(|e| e.status), Some(Status::OUT_OF_RESOURCES));
    // A small graph over two queues: AND(a, b) -> c on one, OR(c, d) -> e on the other.
    let (q, q2) = (rt.create_queue(gpu, 64, None).unwrap(), rt.create_queue(gpu, 64, None).unwrap());
    let s: Vec<_> = (0..5).map(|_| rt.create_signal(1, &[]).unwrap()).collect();
    q.barrier_and(&[&s[0], &s[1]], Some(&s[2])).unwrap();
    q2.barrier_or(&[&s[2], &s[3]], Some(&s[4])).unwrap();
    assert_eq!(s[2].wait(Condition::Eq, 0, 20_000_000, WaitHint::Blocked), 1, "AND waits for its dependencies");
    s[0].store(0, Order::Release);
    assert_eq!(s[2].wait(Condition::Eq, 0, 20_000_000, WaitHint::Blocked), 1, "one of two is not enough");
    s[1].store(0, Order::Release);
    assert_eq!(s[4].wait(Condition::Eq, 0, 10 * SECOND, WaitHint::Blocked), 0, "OR fires from the AND's completion");
    assert_eq!(
        q.barrier_and(&[&s[0], &s[0], &s[0], &s[0], &s[0], &s[0]], None).unwrap_err().status,
        Status::INVALID_ARGUMENT
    );

    // Soft kernels: fill VRAM with a packet of our own, copy it back with hsa_memory_copy.
    let vram = rt.buffer(rt.vram_pool(gpu).unwrap(), 4096).unwrap();
    let host = rt.buffer(rt.system_pool().unwrap(), 4096).unwrap();
    let kernarg = rt.buffer(rt.system_pool().unwrap(), 64).unwrap();
    kernarg.write(0, FillArgs { dst: vram.addr(), value: 0xC0FFEE, reserved: 0 }.as_bytes());
    let done = rt.create_signal(1, &[]).unwrap();
    q.dispatch(Builtin::FillU32, &kernarg, 1024, 256, Some(&done), true).unwrap();
    assert_eq!(done.wait(Condition::Eq, 0, 10 * SECOND, WaitHint::Blocked), 0);
    rt.copy(host.addr(), vram.addr(), 4096).unwrap();
    let mut buf = [0u8; 4096];
    host.read(0, &mut buf);
    assert!(buf.chunks(4).all(|w| w == 0xC0FFEEu32.to_le_bytes()));
    let args = FillArgs { dst: vram.addr(), value: 7, reserved: 0 };
    q2.dispatch_sync(Builtin::FillU32, args.as_bytes(), 16, 10 * SECOND).unwrap();
    assert_eq!(rt.copy(host.addr(), 0x1000, 16).unwrap_err().status, Status::INVALID_ARGUMENT);
    let addr = host.addr();
    drop(host);
    assert_eq!(rt.free(addr).unwrap_err().status, Status::INVALID_ALLOCATION, "the buffer freed itself");
    drop((vram, kernarg));
    assert_eq!(rt.counters().live_allocations, 0);
}

#[test]
fn gpu_clock_brackets_packet_timestamps() {
    let rt = runtime();
    let gpu = rt.gpu_agents()[0];
    let q = rt.create_queue(gpu, 64, None).unwrap();
    let done = rt.create_signal(1, &[]).unwrap();
    let before = rt.gpu_clock(gpu).unwrap();
    q.barrier_and(&[], Some(&done)).unwrap();
    assert_eq!(done.wait(Condition::Eq, 0, 10 * SECOND, WaitHint::Blocked), 0);
    let after = rt.gpu_clock(gpu).unwrap();
    let (start, end) = done.timestamps();
    assert!(before <= start && start <= end && end <= after, "{before} {start} {end} {after}");
    let cpu = rt.cpu_agent().unwrap();
    assert_eq!(rt.gpu_clock(cpu).unwrap_err().status, Status::INVALID_AGENT);
}
