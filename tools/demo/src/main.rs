//! `cargo xtask demo`: the whole stack on the embedded device, no root: the KFD ioctl ABI
//! through the thunk, GPU memory, an AQL queue on the soft command processor, soft kernels
//! that move data, barrier packets, interrupt signals, and what it all cost.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use thunk::memory::Kind;
use thunk::queue::{packet, AqlQueue};
use thunk::signal::Signals;
use thunk::{Errno, Kfd};
use uapi::kfd::*;
use uapi::soft::*;
use uapi::IntoBytes;

const WAIT: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let profile = std::env::args().nth(1).unwrap_or_else(|| cuse_kfd::topology::DEFAULT_PROFILE.to_string());
    match run(&profile) {
        Ok(()) => {
            println!("\ndemo: all steps passed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("\ndemo FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn step(name: &str) {
    println!("\n== {name}");
}

fn check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        println!("   ok: {what}");
        Ok(())
    } else {
        Err(format!("check failed: {what}"))
    }
}

fn errno(what: &'static str) -> impl Fn(Errno) -> String {
    move |e| format!("{what}: {e}")
}

fn soft_kernel(kfd: &Kfd, gpu: u32, builtin: u32, kernarg_size: u32) -> Result<thunk::memory::GpuMemory, String> {
    let code = kfd.alloc(gpu, 4096, Kind::Gtt).map_err(errno("allocating a kernel descriptor"))?;
    let d = SoftKernelDescriptor {
        magic: SOFT_KERNEL_MAGIC,
        version: SOFT_KERNEL_VERSION,
        builtin,
        kernarg_size,
        ..Default::default()
    };
    code.write(0, d.as_bytes());
    Ok(code)
}

fn run(profile: &str) -> Result<(), String> {
    let config = cuse_kfd::DeviceConfig { profile: profile.to_string(), gpus: 1, ..Default::default() };
    let kfd = Kfd::embedded(&config).map_err(|e| format!("creating the embedded device: {e}"))?;
    println!("cuse-kfd demo: embedded device, profile {profile}, runtime dir {}", kfd.runtime_dir().display());

    step("version and topology");
    let (major, minor) = kfd.version().map_err(errno("GET_VERSION"))?;
    println!("   KFD interface {major}.{minor}");
    check(major == 1 && minor == 18, "KFD 1.18")?;
    let topo = cuse_kfd::topology::Topology::from_profile_name(profile, 1).map_err(|e| e.to_string())?;
    for n in topo.nodes() {
        println!(
            "   node {}: {} gpu_id {:#06x} ({} caches, {} memory banks, {} io links)",
            n.node_id,
            if n.is_gpu() { n.name.as_str() } else { "cpu" },
            n.gpu_id,
            n.caches.len(),
            n.mem_banks.len(),
            n.io_links.len()
        );
    }
    let apertures = kfd.apertures().map_err(errno("GET_PROCESS_APERTURES_NEW"))?;
    let gpu = apertures[0].gpu_id;
    let a = &apertures[0];
    println!(
        "   gpuvm {:#x}..{:#x}, lds {:#x}, scratch {:#x}",
        a.gpuvm_base, a.gpuvm_limit, a.lds_base, a.scratch_base
    );

    step("memory");
    let mut avail = GetAvailableMemoryArgs { gpu_id: gpu, ..Default::default() };
    kfd.call(uapi::ioctl::AMDKFD_IOC_AVAILABLE_MEMORY, &mut avail).map_err(errno("AVAILABLE_MEMORY"))?;
    let before = avail.available;
    let vram = kfd.alloc(gpu, 1 << 20, Kind::Vram).map_err(errno("VRAM alloc"))?;
    let gtt = kfd.alloc(gpu, 1 << 20, Kind::Gtt).map_err(errno("GTT alloc"))?;
    kfd.call(uapi::ioctl::AMDKFD_IOC_AVAILABLE_MEMORY, &mut avail).map_err(errno("AVAILABLE_MEMORY"))?;
    println!(
        "   1 MiB VRAM at {:#x}, 1 MiB GTT at {:#x}; VRAM available {} -> {} MiB",
        vram.va,
        gtt.va,
        before >> 20,
        avail.available >> 20
    );
    check(before - avail.available == 1 << 20, "VRAM accounting")?;

    step("an AQL queue and barrier packets");
    let q = AqlQueue::new(&kfd, gpu, 256).map_err(errno("CREATE_QUEUE"))?;
    println!("   queue {} with 256 slots, doorbell offset {:#x}", q.id, q.doorbell_offset);
    let sig = Signals::new(&kfd, gpu, 8).map_err(errno("signals"))?;
    // A small graph: s0, s1 are host-controlled; AND(s0, s1) -> s2; OR(s2, s3) -> s4.
    sig.value(0).store(1, Ordering::Release);
    sig.value(1).store(1, Ordering::Release);
    sig.value(2).store(1, Ordering::Release);
    sig.value(3).store(1, Ordering::Release);
    sig.value(4).store(1, Ordering::Release);
    let q2 = AqlQueue::new(&kfd, gpu, 64).map_err(errno("CREATE_QUEUE"))?;
    q.submit(&packet::barrier_and([sig.handle(0), sig.handle(1), 0, 0, 0], sig.handle(2), false));
    q2.submit(&packet::barrier_or([sig.handle(2), sig.handle(3), 0, 0, 0], sig.handle(4), false));
    std::thread::sleep(Duration::from_millis(20));
    check(sig.value(2).load(Ordering::Acquire) == 1, "AND holds while its dependencies are pending")?;
    sig.value(0).store(0, Ordering::Release);
    std::thread::sleep(Duration::from_millis(20));
    check(sig.value(2).load(Ordering::Acquire) == 1, "AND still holds with one of two dependencies done")?;
    sig.value(1).store(0, Ordering::Release);
    check(sig.wait(2, WAIT, |v| v == 0).is_ok(), "AND fires when both are done")?;
    check(sig.wait(4, WAIT, |v| v == 0).is_ok(), "OR on the other queue fires from the AND's completion")?;

    step("soft kernels move data");
    let fill = soft_kernel(&kfd, gpu, SOFT_KERNEL_FILL_U32, 16)?;
    fill.write(64, FillArgs { dst: vram.va, value: 0x5EED_CAFE, reserved: 0 }.as_bytes());
    sig.value(5).store(1, Ordering::Release);
    let t0 = Instant::now();
    q.submit(&packet::dispatch(fill.va, fill.addr(64), [65536, 1, 1], [256, 1, 1], sig.handle(5), false));
    check(sig.wait(5, WAIT, |v| v == 0).is_ok(), "fill kernel completed")?;
    let fill_time = t0.elapsed();
    let copy = soft_kernel(&kfd, gpu, SOFT_KERNEL_COPY_BYTES, 16)?;
    copy.write(64, CopyArgs { dst: gtt.va, src: vram.va }.as_bytes());
    sig.value(5).store(1, Ordering::Release);
    let t0 = Instant::now();
    q.submit(&packet::dispatch(copy.va, copy.addr(64), [1 << 18, 1, 1], [256, 1, 1], sig.handle(5), true));
    check(sig.wait(5, WAIT, |v| v == 0).is_ok(), "copy kernel completed")?;
    let copy_time = t0.elapsed();
    let mut host = vec![0u8; 1 << 18];
    gtt.read(0, &mut host);
    check(
        host.chunks(4).all(|w| w == 0x5EED_CAFEu32.to_le_bytes()),
        "256 KiB filled in VRAM and copied to GTT, checked by the host",
    )?;
    println!("   fill 256 KiB: {fill_time:?}, copy 256 KiB: {copy_time:?}");

    step("interrupt signals and KFD events");
    let event = sig.attach_event(&kfd, 6).map_err(errno("CREATE_EVENT"))?;
    let store = soft_kernel(&kfd, gpu, SOFT_KERNEL_SIGNAL_STORE, 16)?;
    store.write(64, SignalStoreArgs { signal: sig.handle(6), value: 42 }.as_bytes());
    let sleep = soft_kernel(&kfd, gpu, SOFT_KERNEL_SLEEP, 8)?;
    sleep.write(64, SleepArgs { nanoseconds: 50_000_000 }.as_bytes());
    let t0 = Instant::now();
    q.submit(&packet::dispatch(sleep.va, sleep.addr(64), [1, 1, 1], [1, 1, 1], 0, false));
    q.submit(&packet::dispatch(store.va, store.addr(64), [1, 1, 1], [1, 1, 1], 0, true));
    let w = kfd.wait_events(&[event], false, 5000);
    let woke = t0.elapsed();
    check(
        w.result.is_ok() && w.wait_result == KFD_IOC_WAIT_RESULT_COMPLETE,
        "WAIT_EVENTS woken by the device's signal store",
    )?;
    check(sig.value(6).load(Ordering::Acquire) == 42, "signal holds the stored value")?;
    check(woke >= Duration::from_millis(50), "the barrier bit held the store behind the 50 ms sleep kernel")?;
    println!("   woke after {woke:?}");

    step("latency summary (embedded, this run)");
    let nop = soft_kernel(&kfd, gpu, SOFT_KERNEL_NOP, 0)?;
    let mut samples = Vec::new();
    for _ in 0..2000 {
        sig.value(7).store(1, Ordering::Relaxed);
        let t0 = Instant::now();
        q.submit(&packet::dispatch(nop.va, 0, [1, 1, 1], [1, 1, 1], sig.handle(7), false));
        sig.wait(7, WAIT, |v| v == 0).map_err(|v| format!("empty dispatch did not complete (signal {v})"))?;
        samples.push(t0.elapsed());
    }
    samples.sort_unstable();
    println!(
        "   empty dispatch, submit to signal: p50 {:?}, p99 {:?}",
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100]
    );
    let mut samples = Vec::new();
    for _ in 0..200 {
        let t0 = Instant::now();
        kfd.set_event(event).map_err(errno("SET_EVENT"))?;
        let w = kfd.wait_events(&[event], false, 1000);
        if w.wait_result != KFD_IOC_WAIT_RESULT_COMPLETE {
            return Err(format!("SET_EVENT then WAIT_EVENTS answered {}", w.wait_result));
        }
        samples.push(t0.elapsed());
    }
    samples.sort_unstable();
    println!("   SET_EVENT + WAIT_EVENTS round trip: p50 {:?}", samples[samples.len() / 2]);
    drop((q, q2));
    Ok(())
}
