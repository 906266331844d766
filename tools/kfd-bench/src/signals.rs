//! Signal figures of the HSA runtime (rocr-shim, embedded device): creating 1024 signals as
//! one batch (with fresh memory, and in the steady state where a released batch's arena serves
//! the next) against 1024 pooled single creates, and the wake-up latency from a host store to the
//! waiter's return, ACTIVE and BLOCKED, against raw futex baselines measured in this run.
//! A fresh batch is also set against the floor of any fresh memory: mapping a new 128 KiB tmpfs
//! file and touching its pages (page faults dominate both).
//!
//! * ping-pong: two threads bounce a value through two signals (two futex words for the
//!   baseline); one-way latency is half the round trip. BLOCKED waiters mostly catch the store
//!   in their short spin here, as ROCr's do.
//! * asleep: the store comes 300 us after the waiter started, so a BLOCKED waiter is asleep in
//!   WAIT_EVENTS (the baseline asleep in FUTEX_WAIT); the latency is store to return.
//!
//! The asleep case has two baselines. A bare futex waiter uses almost no CPU between sleeps,
//! and Linux's EEVDF scheduler then lets it preempt its waker on the waker's CPU at once (here
//! in about 2 wakes of 3; the woken thread lands on the waker's CPU on this 2-vCPU machine).
//! A waiter that does any work between sleeps loses that: with 5 us of spinning before each
//! FUTEX_WAIT it was preempting about 1 wake in 40 and its p50 rose from ~3.2 to ~9.6 us. An
//! HSA BLOCKED waiter always spins first (20 us, rocr-shim signal/wait.rs; ROCr's
//! InterruptSignal::WaitRelaxed polls 5 ms: ROCR-Runtime commit 0b9d0e13,
//! src/core/runtime/interrupt_signal.cpp) and then runs the WAIT_EVENTS call, so the second
//! baseline, a futex waiter that spins as long before each sleep, is the like-for-like one;
//! the first stays the target. tools/kfd-bench/HISTORY.md has the figures.

use crate::stats::{bench, ns, percentile, ratio};
use rocr_shim::{Condition, Config, Order, Runtime, WaitHint};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const COUNT: u32 = 1024;
const ROUNDS: usize = 11;
/// Fresh batches kept alive at once: enough (4 MiB of signals) that the shim's pre-faulted
/// slabs (2 MiB, see rocr-shim signal/cache.rs) are made during the run, so the mean shows
/// their cost spread over the batches they serve.
const FRESH_ROUNDS: usize = 32;
const PINGS: usize = 20_000;
const ASLEEP: usize = 300;
const FOREVER: u64 = u64::MAX;
/// How long a BLOCKED signal waiter spins before it sleeps (rocr-shim signal/wait.rs SPIN_NS).
const BLOCKED_SPIN: Duration = Duration::from_micros(20);

fn median(mut v: Vec<Duration>) -> Duration {
    percentile(&mut v, 50)
}

pub fn run() {
    let kfd = thunk::Kfd::embedded(&cuse_kfd::DeviceConfig::default()).expect("embedded device");
    let rt = Runtime::new(Config { kfd: Some(kfd), ..Default::default() }).expect("runtime");
    creates(&rt);
    wake_latency(&rt);
}

fn creates(rt: &Runtime) {
    // The first round creates the pool's slots and KFD events; later rounds reuse them.
    let mut per_round = Vec::new();
    for round in 0..=ROUNDS {
        let t0 = Instant::now();
        let handles: Vec<u64> = (0..COUNT).map(|_| rt.create_signal_raw(0, &[], 0).expect("signal")).collect();
        let took = t0.elapsed();
        for h in handles {
            rt.destroy_signal_raw(h).expect("destroy");
        }
        if round == 0 {
            bench("signal_create_single_cold_ns", ns(took) / f64::from(COUNT), "ns");
        } else {
            per_round.push(took);
        }
    }
    let singles = median(per_round);
    bench("signal_create_single_pooled_ns", ns(singles) / f64::from(COUNT), "ns");
    bench("signal_create_1024_singles_us", ns(singles) / 1e3, "us");

    // Batches: fresh memory first (every batch kept alive, so each needs a new allocation),
    // then the steady state, where a released batch's arena memory serves the next one.
    let gpu = rt.gpu_agents()[0];
    for (place, device) in [("", None), ("_device", Some(gpu))] {
        let mut fresh = Vec::new();
        let mut live = Vec::new();
        for _ in 0..FRESH_ROUNDS {
            let t0 = Instant::now();
            live.push(rt.create_batch_raw(COUNT, 0, &[], 0, device).expect("batch"));
            fresh.push(t0.elapsed());
        }
        let mean = fresh.iter().sum::<Duration>() / FRESH_ROUNDS as u32;
        for b in live {
            release(rt, b);
        }
        let mut steady = Vec::new();
        for _ in 0..ROUNDS {
            let t0 = Instant::now();
            let b = rt.create_batch_raw(COUNT, 0, &[], 0, device).expect("batch");
            steady.push(t0.elapsed());
            release(rt, b);
        }
        let (fresh, steady) = (median(fresh), median(steady));
        bench(&format!("signal_batch_create_1024{place}_fresh_us"), ns(fresh) / 1e3, "us");
        // The mean carries the batches that had to make a new slab: the amortized cost.
        bench(&format!("signal_batch_create_1024{place}_fresh_mean_us"), ns(mean) / 1e3, "us");
        if device.is_none() {
            // Fresh memory costs its page faults whoever allocates it: the floor of a fresh batch.
            let floor = fresh_shared_memory(COUNT as usize * 128);
            bench("baseline_fresh_shm_128k_map_and_touch_us", ns(floor) / 1e3, "us");
            ratio("signal_batch_1024_fresh_vs_fresh_shm_touch", ns(fresh), ns(floor));
            ratio("signal_batch_1024_fresh_mean_vs_fresh_shm_touch", ns(mean), ns(floor));
        }
        bench(&format!("signal_batch_create_1024{place}_us"), ns(steady) / 1e3, "us");
        if device.is_none() {
            ratio("signal_batch_1024_vs_1024_singles", ns(steady), ns(singles));
        }
    }
}

/// The median time to make `bytes` of new shared memory (a tmpfs file, as the device's backing
/// files are) and touch each page once, with every mapping kept until the end (fresh pages
/// each round, as for fresh batches).
fn fresh_shared_memory(bytes: usize) -> Duration {
    let dir = std::path::Path::new("/dev/shm");
    let mut times = Vec::new();
    let mut maps = Vec::new();
    for i in 0..ROUNDS {
        let path = dir.join(format!("kfd-bench-{}-{i}", std::process::id()));
        let t0 = Instant::now();
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).expect("/dev/shm");
        let _ = std::fs::remove_file(&path);
        file.set_len(bytes as u64).expect("set_len");
        use std::os::fd::AsRawFd;
        // SAFETY: a new shared mapping of our own file, at an address the kernel picks.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        for off in (0..bytes).step_by(4096) {
            // SAFETY: inside the mapping just made, which lives until the munmap below.
            unsafe { std::ptr::write_volatile(p.cast::<u8>().add(off), 1) };
        }
        times.push(t0.elapsed());
        maps.push(p);
    }
    for p in maps {
        // SAFETY: each is a mapping of `bytes` made above and not used after this.
        unsafe { libc::munmap(p, bytes) };
    }
    median(times)
}

/// Releases the batch handle first, then the members.
fn release(rt: &Runtime, b: rocr_shim::signal::NewBatch) {
    rt.destroy_batch_raw(b.id).expect("batch destroy");
    for h in b.handles {
        rt.destroy_signal_raw(h).expect("member destroy");
    }
}

/// FUTEX_WAIT while `*word == expected`.
fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT on a live, aligned u32 that outlives the call; no timeout pointer.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32; wakes at most one waiter.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
    }
}

/// One-way latencies (half round trips) of a futex ping-pong.
pub(crate) fn futex_ping_pong(iters: usize) -> Vec<Duration> {
    let words = Arc::new((AtomicU32::new(0), AtomicU32::new(0)));
    let w2 = words.clone();
    let peer = std::thread::spawn(move || {
        for i in 1..=iters as u32 {
            loop {
                let v = w2.0.load(Ordering::Acquire);
                if v == i {
                    break;
                }
                futex_wait(&w2.0, v);
            }
            w2.1.store(i, Ordering::Release);
            futex_wake(&w2.1);
        }
    });
    let mut out = Vec::with_capacity(iters);
    for i in 1..=iters as u32 {
        let t0 = Instant::now();
        words.0.store(i, Ordering::Release);
        futex_wake(&words.0);
        loop {
            let v = words.1.load(Ordering::Acquire);
            if v == i {
                break;
            }
            futex_wait(&words.1, v);
        }
        out.push(t0.elapsed() / 2);
    }
    peer.join().expect("futex peer");
    out
}

/// One-way latencies of a ping-pong through two signals, both sides waiting with `hint`.
fn signal_ping_pong(rt: &Runtime, iters: usize, hint: WaitHint) -> Vec<Duration> {
    let ping = Arc::new(rt.create_signal(0, &[]).expect("signal"));
    let pong = Arc::new(rt.create_signal(0, &[]).expect("signal"));
    let (p2, q2) = (ping.clone(), pong.clone());
    let peer = std::thread::spawn(move || {
        for i in 1..=iters as i64 {
            p2.wait(Condition::Eq, i, FOREVER, hint);
            q2.store(i, Order::Release);
        }
    });
    let mut out = Vec::with_capacity(iters);
    for i in 1..=iters as i64 {
        let t0 = Instant::now();
        ping.store(i, Order::Release);
        pong.wait(Condition::Eq, i, FOREVER, hint);
        out.push(t0.elapsed() / 2);
    }
    peer.join().expect("signal peer");
    out
}

/// Store-to-return latency of a waiter that has been waiting 300 us: `wait(i)` blocks until
/// the value reaches i, `store(i)` stores it. The storer then sleeps rather than spins while
/// it waits for the waiter's timestamp, so the woken thread can have its CPU (on a 2-CPU box
/// a spinning storer delays it by a whole time slice, for futexes and signals alike).
fn asleep(wait: impl Fn(u64) + Send + 'static, store: impl Fn(u64)) -> Vec<Duration> {
    let base = Instant::now();
    let returned = Arc::new(AtomicU64::new(0));
    let r2 = returned.clone();
    let peer = std::thread::spawn(move || {
        for i in 1..=ASLEEP as u64 {
            wait(i);
            r2.store(base.elapsed().as_nanos() as u64, Ordering::Release);
        }
    });
    let mut out = Vec::with_capacity(ASLEEP);
    for i in 1..=ASLEEP as u64 {
        std::thread::sleep(Duration::from_micros(300));
        let before = returned.load(Ordering::Acquire);
        let t = base.elapsed().as_nanos() as u64;
        store(i);
        let mut back = returned.load(Ordering::Acquire);
        while back == before {
            std::thread::sleep(Duration::from_micros(50));
            back = returned.load(Ordering::Acquire);
        }
        out.push(Duration::from_nanos(back.saturating_sub(t)));
    }
    peer.join().expect("asleep peer");
    out
}

fn wake_latency(rt: &Runtime) {
    let mut futex = futex_ping_pong(PINGS);
    let base = percentile(&mut futex, 50);
    bench("baseline_futex_pingpong_oneway_p50", ns(base), "ns");
    bench("baseline_futex_pingpong_oneway_p99", ns(percentile(&mut futex, 99)), "ns");
    for (name, hint) in [("active", WaitHint::Active), ("blocked", WaitHint::Blocked)] {
        let mut v = signal_ping_pong(rt, PINGS, hint);
        let p50 = percentile(&mut v, 50);
        bench(&format!("signal_wake_{name}_p50"), ns(p50), "ns");
        bench(&format!("signal_wake_{name}_p99"), ns(percentile(&mut v, 99)), "ns");
        ratio(&format!("signal_wake_{name}_p50_vs_futex"), ns(p50), ns(base));
    }

    let fbase = percentile(&mut futex_asleep(Duration::ZERO), 50);
    bench("baseline_futex_wake_asleep_p50", ns(fbase), "ns");
    // The same, with the spin a BLOCKED signal waiter does before each sleep.
    let spun = percentile(&mut futex_asleep(BLOCKED_SPIN), 50);
    bench("baseline_futex_wake_asleep_spun_p50", ns(spun), "ns");
    let s = Arc::new(rt.create_signal(0, &[]).expect("signal"));
    let s2 = s.clone();
    let mut w = asleep(
        move |i| {
            s2.wait(Condition::Gte, i as i64, FOREVER, WaitHint::Blocked);
        },
        |i| s.store(i as i64, Order::Release),
    );
    let p50 = percentile(&mut w, 50);
    bench("signal_wake_blocked_asleep_p50", ns(p50), "ns");
    bench("signal_wake_blocked_asleep_p99", ns(percentile(&mut w, 99)), "ns");
    ratio("signal_wake_blocked_asleep_p50_vs_futex", ns(p50), ns(fbase));
    ratio("signal_wake_blocked_asleep_p50_vs_spun_futex", ns(p50), ns(spun));
}

/// Wake latencies of a futex sleeper that first spins for `spin` (none when zero) on the word
/// its waker stores, as [`asleep`] measures them.
fn futex_asleep(spin: Duration) -> Vec<Duration> {
    let word = Arc::new(AtomicU32::new(0));
    let w2 = word.clone();
    asleep(
        move |i| {
            let t0 = Instant::now();
            while u64::from(w2.load(Ordering::Acquire)) < i && t0.elapsed() < spin {
                std::hint::spin_loop();
            }
            loop {
                let v = w2.load(Ordering::Acquire);
                if u64::from(v) >= i {
                    break;
                }
                futex_wait(&w2, v);
            }
        },
        |i| {
            word.store(i as u32, Ordering::Release);
            futex_wake(&word);
        },
    )
}
