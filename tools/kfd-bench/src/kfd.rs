//! The KFD interface's throughput on the embedded device (issue 15, item 5: what kfdtest's heavy
//! tests lean on), each against a baseline measured in this run:
//!
//! * SDMA COPY_LINEAR bandwidth, VRAM->VRAM and GTT->VRAM, against memcpy of the same size;
//! * PM4 WRITE_DATA + RELEASE_MEM pairs per second on one compute queue, a doorbell per pair (as
//!   kfdtest's PM4EventInterrupt submits), against AQL barrier packets per second on one queue;
//! * queue create + destroy per second, compute and SDMA, the ioctls alone and with the ring and
//!   pointer buffers a client allocates for each queue, against a GET_VERSION call;
//! * an event round trip: RELEASE_MEM writes the event's slot and raises the interrupt, the host
//!   waits in WAIT_EVENTS; against a futex ping-pong round trip between two threads;
//! * USERPTR registration (hsaKmtRegisterMemory + hsaKmtDeregisterMemory through the thunk) of
//!   4 and 64 MiB: a registration neither copies nor pins, so 64 MiB costs what 4 MiB does, far
//!   below a memcpy of the range.
//!
//! Rates are medians of [`ROUNDS`] rounds that each run for about [`ROUND`].

use crate::stats::{bench, ns, percentile, ratio};
use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use thunk::hsakmt::Thunk;
use thunk::memory::Kind;
use thunk::queue::{RingKind, RingQueue};
use thunk::{pm4, sdma, Kfd};
use uapi::ioctl::{AMDKFD_IOC_CREATE_QUEUE, AMDKFD_IOC_DESTROY_QUEUE};
use uapi::kfd::*;

const ROUNDS: usize = 5;
const ROUND: Duration = Duration::from_millis(200);
/// Bytes one SDMA or memcpy round moves.
const ROUND_BYTES: usize = 64 << 20;
/// How long a wait for the device may take before the bench gives up.
const STUCK: Duration = Duration::from_secs(20);
const EVENT_ROUND_TRIPS: usize = 5_000;

fn kfd() -> Kfd {
    Kfd::embedded(&cuse_kfd::DeviceConfig::default()).expect("embedded device")
}

pub fn run() {
    let kfd = kfd();
    let gpu = kfd.gpu_ids().expect("gpus")[0];
    sdma_bandwidth(&kfd, gpu);
    pm4_packets(&kfd, gpu);
    queue_churn(&kfd, gpu);
    event_round_trip(&kfd, gpu);
    drop(kfd);
    userptr();
}

/// Waits until `done()`, panicking after [`STUCK`] (a device that stopped is a failure, not a
/// slow figure).
fn spin_until(what: &str, mut done: impl FnMut() -> bool) {
    if done() {
        // No clock read when there is nothing to wait for (the PM4 producer asks every pair).
        return;
    }
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < STUCK, "kfd bench: {what} did not finish in {STUCK:?}");
        // Yield, not spin: on a machine with fewer free cores than busy threads a spinning
        // waiter takes the engine thread's CPU (the PM4 producer then spent 85 % of the
        // samples waiting for ring space while the engine, which frees it, ran 15 %).
        std::thread::yield_now();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The median over [`ROUNDS`] of `op`'s rate in operations per second, each round running `op`
/// for about [`ROUND`].
fn rate(mut op: impl FnMut()) -> f64 {
    median(
        (0..ROUNDS)
            .map(|_| {
                let t0 = Instant::now();
                let mut n = 0u64;
                while t0.elapsed() < ROUND {
                    op();
                    n += 1;
                }
                n as f64 / t0.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn size_label(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{}m", bytes >> 20)
    } else {
        format!("{}k", bytes >> 10)
    }
}

/// memcpy bandwidth in GB/s: the median of rounds of [`ROUND_BYTES`] in `bytes` copies.
fn memcpy_gbps(bytes: usize) -> f64 {
    let src = vec![0x5Au8; bytes];
    let mut dst = vec![0u8; bytes];
    let copies = (ROUND_BYTES / bytes).max(1);
    median(
        (0..ROUNDS)
            .map(|_| {
                let t0 = Instant::now();
                for _ in 0..copies {
                    dst.copy_from_slice(black_box(&src));
                    black_box(&mut dst);
                }
                (copies * bytes) as f64 / t0.elapsed().as_secs_f64() / 1e9
            })
            .collect(),
    )
}

fn sdma_bandwidth(kfd: &Kfd, gpu: u32) {
    // 1024 copies of 64 KiB (7 dwords each) and the fence fit in the ring at once.
    let q = RingQueue::new(kfd, gpu, RingKind::Sdma, 64 << 10).expect("SDMA queue");
    let fence = kfd.alloc(gpu, 4096, Kind::Gtt).expect("fence");
    let mut seq = 0u32;
    for bytes in [64 << 10, 1 << 20, 16 << 20] {
        let label = size_label(bytes);
        let base = memcpy_gbps(bytes);
        bench(&format!("baseline_memcpy_{label}_gbps"), base, "GB/s");
        let dst = kfd.alloc(gpu, bytes as u64, Kind::Vram).expect("VRAM destination");
        dst.fill(0, bytes as u64, 0);
        for (from, kind) in [("vram", Kind::Vram), ("gtt", Kind::Gtt)] {
            let src = kfd.alloc(gpu, bytes as u64, kind).expect("source");
            src.fill(0, bytes as u64, 0x5A);
            let copies = (ROUND_BYTES / bytes).max(1);
            let packet = sdma::copy_linear(dst.va(), src.va(), bytes as u32);
            let gbps = median(
                (0..ROUNDS)
                    .map(|_| {
                        seq += 1;
                        let t0 = Instant::now();
                        for _ in 0..copies {
                            q.write(&packet);
                        }
                        q.submit(&sdma::fence(fence.va(), seq));
                        spin_until("an SDMA copy round", || fence.u32_at(0).load(Ordering::Acquire) == seq);
                        (copies * bytes) as f64 / t0.elapsed().as_secs_f64() / 1e9
                    })
                    .collect(),
            );
            let mut ends = [0u8; 2];
            dst.read(0, &mut ends[..1]);
            dst.read(bytes as u64 - 1, &mut ends[1..]);
            assert_eq!(ends, [0x5A; 2], "the SDMA copy {from}->vram of {label} left its destination wrong");
            let name = format!("sdma_copy_{from}_to_vram_{label}");
            bench(&format!("{name}_gbps"), gbps, "GB/s");
            ratio(&format!("{name}_vs_memcpy"), gbps, base);
            dst.fill(0, bytes as u64, 0);
        }
    }
}

/// WRITE_DATA + RELEASE_MEM pairs per second, a doorbell per pair; the RELEASE_MEM writes the
/// pair's number to a fence the producer reads to keep the ring from overflowing.
fn pm4_packets(kfd: &Kfd, gpu: u32) {
    let q = RingQueue::new(kfd, gpu, RingKind::Pm4, 64 << 10).expect("PM4 queue");
    let mem = kfd.alloc(gpu, 4096, Kind::Gtt).expect("target");
    let fence = mem.u32_at(64);
    // The packets once; each pair patches its number in (WRITE_DATA's data dword, RELEASE_MEM's
    // DATA_LO), so no packet is built in the loop.
    let mut write = pm4::write_data(mem.addr(0), &[0]);
    let mut release = pm4::release_mem(mem.addr(64), 0, 1, 0, 0);
    let pair = (write.len() + release.len()) as u64;
    let room = q.ring_dwords() / pair - 2;
    let mut n = 0u64;
    let pairs = median(
        (0..ROUNDS)
            .map(|_| {
                let (t0, n0) = (Instant::now(), n);
                // The clock is read every 64 pairs: at one read a pair it was a fifth of the
                // producer's time (so is spin_until's only when it has to wait).
                while !n.is_multiple_of(64) || t0.elapsed() < ROUND {
                    n += 1;
                    spin_until("PM4 ring space", || n - u64::from(fence.load(Ordering::Acquire)) <= room);
                    write[4] = n as u32;
                    release[5] = n as u32;
                    q.write(&write);
                    q.submit(&release);
                }
                spin_until("a PM4 round", || u64::from(fence.load(Ordering::Acquire)) == n);
                (n - n0) as f64 / t0.elapsed().as_secs_f64()
            })
            .collect(),
    );
    assert_eq!(u64::from(mem.u32_at(0).load(Ordering::Acquire)), n, "the last WRITE_DATA");
    bench("pm4_write_data_release_mem_pairs_per_s", pairs / 1e3, "k/s");
    let aql = crate::engine::barrier_throughput(kfd, gpu, 1);
    ratio("pm4_write_data_release_mem_pairs_vs_aql_barriers", pairs, aql);
}

fn queue_churn(kfd: &Kfd, gpu: u32) {
    let call = rate(|| {
        kfd.version().expect("GET_VERSION");
    });
    bench("baseline_get_version_per_s", call / 1e3, "k/s");
    for (name, kind, queue_type) in
        [("compute", RingKind::Pm4, KFD_IOC_QUEUE_TYPE_COMPUTE), ("sdma", RingKind::Sdma, KFD_IOC_QUEUE_TYPE_SDMA)]
    {
        // The ioctls alone, over one ring and pointer buffer.
        let ring = kfd.alloc(gpu, 4096, Kind::Gtt).expect("ring");
        let ptrs = kfd.alloc(gpu, 4096, Kind::Gtt).expect("pointers");
        let ioctls = rate(|| {
            let mut a = CreateQueueArgs {
                ring_base_address: ring.va(),
                write_pointer_address: ptrs.addr(8),
                read_pointer_address: ptrs.addr(0),
                ring_size: 4096,
                gpu_id: gpu,
                queue_type,
                queue_percentage: 100,
                queue_priority: 7,
                ..Default::default()
            };
            // SAFETY: CREATE_QUEUE's and DESTROY_QUEUE's addresses are GPU addresses (buffers
            // mapped above, alive for the whole loop), never pointers into this process.
            unsafe {
                kfd.call(AMDKFD_IOC_CREATE_QUEUE, &mut a).expect("CREATE_QUEUE");
                kfd.call(AMDKFD_IOC_DESTROY_QUEUE, &mut DestroyQueueArgs { queue_id: a.queue_id, pad: 0 })
                    .expect("DESTROY_QUEUE");
            }
        });
        bench(&format!("queue_create_destroy_{name}_per_s"), ioctls / 1e3, "k/s");
        ratio(&format!("queue_create_destroy_{name}_vs_get_version"), call, ioctls);
        // As a client makes one: ring and pointer buffers allocated and mapped, the doorbell
        // mapped, all of it freed again (thunk RingQueue; kfdtest's BaseQueue::Create does as
        // much).
        let full = rate(|| drop(RingQueue::new(kfd, gpu, kind, 4096).expect("ring queue")));
        bench(&format!("ring_queue_new_drop_{name}_per_s"), full / 1e3, "k/s");
    }
}

/// RELEASE_MEM writes the event id into the event's slot and raises the interrupt (what
/// kfdtest does for an event); the host, right after the doorbell, waits in WAIT_EVENTS.
fn event_round_trip(kfd: &Kfd, gpu: u32) {
    let mut futex: Vec<Duration> = crate::signals::futex_ping_pong(EVENT_ROUND_TRIPS).iter().map(|d| *d * 2).collect();
    let base = percentile(&mut futex, 50);
    bench("baseline_futex_round_trip_p50", ns(base), "ns");
    let q = RingQueue::new(kfd, gpu, RingKind::Pm4, 4096).expect("PM4 queue");
    let e = kfd.create_event(gpu, KFD_IOC_EVENT_SIGNAL, true).expect("CREATE_EVENT");
    let (ev, slot) = (e.event_id, kfd.mailbox(e.event_slot_index).expect("the event page"));
    let packet = pm4::release_mem(slot, u64::from(ev), 2, 2, ev);
    let mut lat = Vec::with_capacity(EVENT_ROUND_TRIPS);
    for _ in 0..EVENT_ROUND_TRIPS {
        let t0 = Instant::now();
        q.submit(&packet);
        let w = kfd.wait_events(&[ev], false, STUCK.as_millis() as u32);
        assert_eq!((w.result, w.wait_result), (Ok(()), KFD_IOC_WAIT_RESULT_COMPLETE), "WAIT_EVENTS");
        lat.push(t0.elapsed());
    }
    let p50 = percentile(&mut lat, 50);
    bench("event_release_mem_round_trip_p50", ns(p50), "ns");
    bench("event_release_mem_round_trip_p99", ns(percentile(&mut lat, 99)), "ns");
    ratio("event_release_mem_round_trip_p50_vs_futex", ns(p50), ns(base));
}

/// hsaKmtRegisterMemory + hsaKmtDeregisterMemory of 4 and 64 MiB of touched heap memory, the two
/// sizes in alternate rounds so that the machine's load changes both alike.
fn userptr() {
    let thunk = Thunk::open(kfd()).expect("the thunk over an embedded device");
    let big = vec![1u8; 64 << 20];
    let addr = big.as_ptr() as u64;
    let sizes = [4usize << 20, 64 << 20];
    let mut rates = [Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        for (bytes, rates) in sizes.iter().zip(&mut rates) {
            let t0 = Instant::now();
            let mut n = 0u32;
            while t0.elapsed() < ROUND {
                // SAFETY: `big` outlives the registration, which ends right here; the device does
                // no work on it, and nothing writes it meanwhile.
                unsafe { thunk.register_memory(addr, *bytes as u64) }.expect("hsaKmtRegisterMemory");
                thunk.deregister_memory(addr).expect("hsaKmtDeregisterMemory");
                n += 1;
            }
            rates.push(f64::from(n) / t0.elapsed().as_secs_f64());
        }
    }
    let [small, large] = rates.map(median);
    bench("userptr_register_deregister_4m_per_s", small / 1e3, "k/s");
    bench("userptr_register_deregister_64m_per_s", large / 1e3, "k/s");
    // Time per registration, 64 MiB over 4 MiB: 1 if it does not depend on the size, 16 if it
    // were a copy or a pin of every page.
    ratio("userptr_register_64m_vs_4m", small, large);
    let copy = memcpy_gbps(64 << 20) * 1e9 / f64::from(64u32 << 20);
    bench("baseline_memcpy_64m_per_s", copy, "1/s");
    ratio("userptr_register_64m_vs_memcpy_64m", copy, large);
}
