//! The baseline: a raw cross-thread ping-pong through shared memory, the least any
//! doorbell-to-consumer round trip can cost on this machine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[repr(align(128))]
struct Line(AtomicU64);

/// Round-trip times of `iters` pings: one thread stores a sequence number, the other spins
/// until it sees it and stores it back.
pub fn ping_pong(iters: usize) -> Vec<Duration> {
    let ping = Arc::new(Line(AtomicU64::new(0)));
    let pong = Arc::new(Line(AtomicU64::new(0)));
    let (p2, q2) = (ping.clone(), pong.clone());
    let peer = std::thread::spawn(move || {
        let mut seen = 0;
        while seen < iters as u64 {
            let v = p2.0.load(Ordering::Acquire);
            if v != seen {
                seen = v;
                q2.0.store(v, Ordering::Release);
            } else {
                std::hint::spin_loop();
            }
        }
    });
    let mut out = Vec::with_capacity(iters);
    for i in 1..=iters as u64 {
        let t0 = Instant::now();
        ping.0.store(i, Ordering::Release);
        while pong.0.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        out.push(t0.elapsed());
    }
    peer.join().expect("ping-pong peer");
    out
}
