//! Engine scaling (issue 16): barrier packets per second when 1, 2, 4 and 8 processes each keep
//! a queue of their own full, from a producer thread each, on a device with one engine thread
//! against the same on a device with one lane per core (up to four), in the same run. The processes are simulated ones on one embedded device (their own pids and contexts).

use crate::stats::{bench, ratio};
use cuse_kfd::engine::EngineConfig;
use cuse_kfd::{Caller, DeviceConfig};
use std::time::Instant;
use thunk::queue::{packet, AqlQueue};
use thunk::transport::EmbeddedTransport;
use thunk::Kfd;

/// Packets each producer submits per round.
const PER_PRODUCER: u64 = 500_000;
/// Rounds per configuration; the median is reported.
const ROUNDS: usize = 5;
/// The first simulated pid (above the kernel's 2^22 limit, so no real process has it).
const FIRST_PID: u32 = 5_100_000;

pub fn run() {
    let lanes = cuse_kfd::engine::lanes_per_core();
    for processes in [1usize, 2, 4, 8] {
        let one = throughput(1, processes);
        bench(&format!("scaling_{processes}p_1lane"), one / 1e6, "M/s");
        if lanes > 1 {
            let many = throughput(lanes, processes);
            bench(&format!("scaling_{processes}p_{lanes}lanes"), many / 1e6, "M/s");
            ratio(&format!("scaling_{processes}p_{lanes}lanes_vs_1lane"), many, one);
        }
    }
}

/// Barrier packets per second, all producers together (median of [`ROUNDS`]), on a device of
/// `lanes` engine threads with `processes` clients.
fn throughput(lanes: usize, processes: usize) -> f64 {
    let config =
        DeviceConfig { engine: EngineConfig { threads: lanes, ..EngineConfig::default() }, ..DeviceConfig::default() };
    let transport = EmbeddedTransport::new(&config).expect("embedded device");
    let emb = transport.embedded().clone();
    let gpu = Kfd::new(Box::new(transport)).gpu_ids().expect("gpus")[0];
    let me = Caller::current();
    let clients: Vec<Kfd> = (0..processes as u32)
        .map(|p| {
            let pid = FIRST_PID + p;
            let file = EmbeddedTransport::open_as(&emb, Caller { pid, tid: pid, ..me }).expect("a simulated client");
            Kfd::new(Box::new(file))
        })
        .collect();
    let queues: Vec<AqlQueue> = clients.iter().map(|k| AqlQueue::new(k, gpu, 4096).expect("queue")).collect();
    let pkt = packet::barrier_and([0; 5], 0, false);
    let mut rates = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for q in &queues {
                s.spawn(move || {
                    let want = q.read_index() + PER_PRODUCER;
                    for _ in 0..PER_PRODUCER {
                        q.submit(&pkt);
                    }
                    while q.read_index() < want {
                        std::hint::spin_loop();
                    }
                });
            }
        });
        rates.push((PER_PRODUCER * processes as u64) as f64 / t0.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}
