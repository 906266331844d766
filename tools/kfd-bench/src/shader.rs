//! The soft shader core running real gfx90a code through AQL dispatches on the embedded device:
//! the overhead of an empty kernel against an empty soft-kernel dispatch, saxpy and a tiled
//! matmul against the same loops in plain Rust, a pure VALU loop, and saxpy split over one queue
//! per worker against one queue. Kernels are built at bench time with LLVM 15 (`codeobj.rs`);
//! every measured dispatch's output is checked on the host, and a wrong answer fails the bench.

use crate::codeobj::{self, CodeObject, Loaded};
use crate::stats::{bench, ns, percentile, ratio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use thunk::memory::{GpuMemory, Kind};
use thunk::queue::{packet, AqlQueue};
use thunk::signal::Signals;
use thunk::Kfd;

/// Rounds of each throughput figure (medians are taken; the machine is noisy), and of the
/// plain-Rust baselines, which take milliseconds.
const ROUNDS: usize = 5;
const RUST_ROUNDS: usize = 31;
/// Round trips of the per-dispatch overhead figures.
const OVERHEAD_ITERS: usize = 2_000;
/// saxpy's length (floats) and work-group size.
const SAXPY_N: usize = 4 << 20;
const SAXPY_WG: u16 = 256;
/// The matmul's order and tile (work-groups are TILE x TILE).
const MM_N: usize = 256;
const MM_TILE: usize = 16;
/// The VALU loop: iterations of FMAS_PER_ITER v_fma_f32 in VALU_GROUPS work-groups of 64.
const VALU_ITERS: u32 = 1000;
const FMAS_PER_ITER: u32 = 8;
const VALU_GROUPS: u32 = 32;
/// The longest a measured dispatch may take before the bench calls it hung.
const TIMEOUT: Duration = Duration::from_secs(120);

type Result<T = ()> = std::result::Result<T, String>;

/// A gfx90a assembly kernel `name` with `body` and the descriptor of the GFX dispatch tests:
/// private segment buffer in s[0:3], kernarg pointer in s[4:5], work-group id X in s6.
fn asm_kernel(name: &str, body: &str) -> String {
    format!(
        r#"
.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"
.text
.globl {name}
.p2align 8
.type {name},@function
{name}:
{body}
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel {name}
  .amdhsa_user_sgpr_private_segment_buffer 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 16
  .amdhsa_accum_offset 8
.end_amdhsa_kernel
"#
    )
}

/// Each lane: v1 = float(lane id), then VALU_ITERS x FMAS_PER_ITER times v1 = v1 * c + 1.0 with
/// c = 0.999 (0x3f7fbe77), and stores v1 at kernarg + 4 * (64 * group + lane).
fn valu_loop_body() -> String {
    let fmas = "  v_fma_f32 v1, v1, v2, v3\n".repeat(FMAS_PER_ITER as usize);
    format!(
        "  v_cvt_f32_u32 v1, v0
  v_mov_b32 v2, 0x3f7fbe77
  v_mov_b32 v3, 1.0
  s_mov_b32 s8, {VALU_ITERS}
loop:
{fmas}  s_sub_u32 s8, s8, 1
  s_cmp_lg_u32 s8, 0
  s_cbranch_scc1 loop
  v_lshlrev_b32 v4, 2, v0
  s_lshl_b32 s7, s6, 8
  v_add_u32 v4, s7, v4
  global_store_dword v4, v1, s[4:5]"
    )
}

/// The same VALU loop on the host, for the check.
fn valu_loop_expected(lane: u32) -> f32 {
    let c = f32::from_bits(0x3f7f_be77);
    let mut v = lane as f32;
    for _ in 0..VALU_ITERS * FMAS_PER_ITER {
        v = v.mul_add(c, 1.0);
    }
    v
}

/// Without the device libraries (`-nogpulib`) the OpenCL work-item functions are missing: the
/// kernels use the clang builtins ROCm's ockl builds them from, and fixed work-group sizes.
const CL_PRELUDE: &str = r#"
#define LOCAL_ID(d) __builtin_amdgcn_workitem_id_##d()
#define GROUP_ID(d) __builtin_amdgcn_workgroup_id_##d()
/* barrier(CLK_LOCAL_MEM_FENCE) as ROCm's device library builds it. */
#define LDS_BARRIER() do { \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); \
    __builtin_amdgcn_s_barrier(); \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); \
} while (0)
"#;

/// Work-groups of SAXPY_WG (256) work-items.
const SAXPY_CL: &str = r#"
__kernel void saxpy(float a, __global const float *x, __global float *y) {
    size_t i = (size_t)GROUP_ID(x) * 256 + LOCAL_ID(x);
    y[i] = a * x[i] + y[i];
}
"#;

const MATMUL_CL: &str = r#"
#define T 16
/* C = A B for n x n row-major matrices, n a multiple of T: each work-group computes one T x T
   tile of C through T x T tiles of A and B staged in LDS. */
__kernel void matmul(__global const float *a, __global const float *b, __global float *c, int n) {
    __local float as[T][T];
    __local float bs[T][T];
    int tx = LOCAL_ID(x), ty = LOCAL_ID(y);
    int row = GROUP_ID(y) * T + ty, col = GROUP_ID(x) * T + tx;
    float acc = 0.0f;
    for (int t = 0; t < n; t += T) {
        as[ty][tx] = a[row * n + t + tx];
        bs[ty][tx] = b[(t + ty) * n + col];
        LDS_BARRIER();
        for (int k = 0; k < T; k++)
            acc += as[ty][k] * bs[k][tx];
        LDS_BARRIER();
    }
    c[row * n + col] = acc;
}
"#;

/// The kernels, built.
struct Objects {
    empty: CodeObject,
    valu: CodeObject,
    saxpy: CodeObject,
    matmul: CodeObject,
}

fn build() -> Result<Objects> {
    Ok(Objects {
        empty: codeobj::assemble("empty", &asm_kernel("empty", ""))?,
        valu: codeobj::assemble("valu", &asm_kernel("valu", &valu_loop_body()))?,
        saxpy: codeobj::opencl("saxpy", &format!("{CL_PRELUDE}{SAXPY_CL}"))?,
        matmul: codeobj::opencl("matmul", &format!("{CL_PRELUDE}{MATMUL_CL}"))?,
    })
}

/// The kernels' descriptors in one device's memory.
struct Kernels {
    empty: u64,
    valu: u64,
    saxpy: u64,
    matmul: u64,
    _code: Vec<Loaded>,
}

/// An embedded device with `workers` shader workers, its GPU, the kernels and per-dispatch
/// kernel-argument blocks.
struct Rig {
    kfd: Kfd,
    gpu: u32,
    args: GpuMemory,
    k: Kernels,
    workers: usize,
}

impl Rig {
    fn new(workers: usize, o: &Objects) -> Result<Rig> {
        let mut config = cuse_kfd::DeviceConfig::default();
        config.engine.shader_workers = workers;
        let kfd = Kfd::embedded(&config).map_err(|e| format!("embedded device: {e}"))?;
        let gpu = kfd.gpu_ids().map_err(|e| format!("gpu ids: {e}"))?[0];
        let args = kfd.alloc(gpu, 16 * KERNARG_BLOCK, Kind::Gtt).map_err(|e| format!("kernargs: {e}"))?;
        let (empty, valu) = (o.empty.load(&kfd, gpu)?, o.valu.load(&kfd, gpu)?);
        let (saxpy, matmul) = (o.saxpy.load(&kfd, gpu)?, o.matmul.load(&kfd, gpu)?);
        let k = Kernels {
            empty: empty.kernel_object("empty")?,
            valu: valu.kernel_object("valu")?,
            saxpy: saxpy.kernel_object("saxpy")?,
            matmul: matmul.kernel_object("matmul")?,
            _code: vec![empty, valu, saxpy, matmul],
        };
        Ok(Rig { kfd, gpu, args, k, workers })
    }

    /// The figures' name tag: `1worker`, `2workers`, ...
    fn tag(&self) -> String {
        format!("{}worker{}", self.workers, if self.workers == 1 { "" } else { "s" })
    }
}

/// Bytes of one kernarg block: the explicit arguments and the hidden ones clang's code object
/// v4 kernels read (global offsets, ...), left zero.
const KERNARG_BLOCK: u64 = 256;

impl Rig {
    fn alloc(&self, bytes: usize) -> Result<GpuMemory> {
        self.kfd.alloc(self.gpu, bytes as u64, Kind::Gtt).map_err(|e| format!("allocating {bytes} bytes: {e}"))
    }

    /// Kernarg block `slot` holding `explicit`; its GPU address.
    fn kernarg(&self, slot: u64, explicit: &[u8]) -> u64 {
        let off = slot * KERNARG_BLOCK;
        self.args.fill(off, KERNARG_BLOCK, 0);
        self.args.write(off, explicit);
        self.args.addr(off)
    }
}

/// The CPU time of this process (every thread: the device's and the host's) so far.
fn process_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through the pointer, to `t`, which outlives the
    // call.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    assert_eq!(r, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// A measured dispatch: its wall time, and the CPU time the process used meanwhile (the host
/// sleeps while it waits, so this is the device's work; it is what noise from other processes
/// on the machine inflates least).
struct Timing {
    wall: Duration,
    cpu: Duration,
}

/// Dispatches on `queues` (one packet each, all submitted before any wait) and times them until
/// every completion signal reached 0. The host sleeps while it waits, leaving the cores to the
/// device.
fn timed(queues: &[(&AqlQueue, [u8; 64])], sig: &Signals) -> Result<Timing> {
    for i in 0..queues.len() {
        sig.value(i as u64).store(1, Ordering::Release);
    }
    let (t0, cpu0) = (Instant::now(), process_cpu());
    for (q, p) in queues {
        q.submit(p);
    }
    for i in 0..queues.len() {
        while sig.value(i as u64).load(Ordering::Acquire) != 0 {
            if t0.elapsed() > TIMEOUT {
                return Err(format!("a dispatch did not complete in {TIMEOUT:?} (see the device's log)"));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    Ok(Timing { wall: t0.elapsed(), cpu: process_cpu() - cpu0 })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32(mem: &GpuMemory, n: usize) -> Vec<f32> {
    let mut b = vec![0u8; 4 * n];
    mem.read(0, &mut b);
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
}

/// `got` against `want`, exactly (the inputs keep every result exact in f32).
fn check(what: &str, got: &[f32], want: impl Fn(usize) -> f32) -> Result {
    match got.iter().enumerate().find(|(i, g)| g.to_bits() != want(*i).to_bits()) {
        None => Ok(()),
        Some((i, g)) => Err(format!("{what}: element {i} is {g}, the host computes {}", want(i))),
    }
}

pub fn run() -> Result {
    let missing = codeobj::missing_tools();
    if !missing.is_empty() {
        println!("SKIPPED shader: {} missing (apt-get install clang-15 llvm-15 lld-15)", missing.join(", "));
        return Ok(());
    }
    let objects = build()?;
    // One worker: the interpreter single-threaded; all: the machine's cores, the default.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let one = Rig::new(1, &objects)?;
    let all = Rig::new(workers, &objects)?;
    // KFD_BENCH_SHADER=saxpy,matmul,... runs only those parts (for profiling one of them).
    let only = std::env::var("KFD_BENCH_SHADER").unwrap_or_default();
    let part = |name: &str| only.is_empty() || only.split(',').any(|p| p == name);
    if part("overhead") {
        overhead(&all)?;
    }
    if part("valu") {
        valu_loop(&one)?;
        valu_loop(&all)?;
    }
    if part("saxpy") {
        saxpy(&one, &all)?;
    }
    if part("matmul") {
        matmul(&[&one, &all])?;
    }
    Ok(())
}

/// Submit-to-completion of the empty GFX kernel (one work-group of 64) against the empty soft
/// kernel, p50 of OVERHEAD_ITERS round trips each (the host spins: these are microseconds).
fn overhead(rig: &Rig) -> Result {
    let k = &rig.k;
    let q = AqlQueue::new(&rig.kfd, rig.gpu, 1024).map_err(|e| format!("queue: {e}"))?;
    let mut soft = crate::engine::empty_dispatch_round_trips(&rig.kfd, rig.gpu, &q, OVERHEAD_ITERS);
    let soft_p50 = ns(percentile(&mut soft, 50));
    let sig = Signals::new(&rig.kfd, rig.gpu, 1).map_err(|e| format!("signal: {e}"))?;
    let out = rig.alloc(4096)?;
    let arg = rig.kernarg(0, &out.va().to_le_bytes());
    let mut lat = Vec::with_capacity(OVERHEAD_ITERS);
    for _ in 0..OVERHEAD_ITERS {
        sig.value(0).store(1, Ordering::Relaxed);
        let p = packet::dispatch(k.empty, arg, [64, 1, 1], [64, 1, 1], sig.handle(0), false);
        let t0 = Instant::now();
        q.submit(&p);
        while sig.value(0).load(Ordering::Acquire) != 0 {
            if t0.elapsed() > TIMEOUT {
                return Err("the empty kernel did not complete".into());
            }
            std::hint::spin_loop();
        }
        lat.push(t0.elapsed());
    }
    let p50 = ns(percentile(&mut lat, 50));
    bench("shader_empty_dispatch_p50", p50, "ns");
    bench("shader_empty_dispatch_p99", ns(percentile(&mut lat, 99)), "ns");
    bench("soft_empty_dispatch_p50", soft_p50, "ns");
    ratio("shader_empty_dispatch_p50_vs_soft_kernel", p50, soft_p50);
    Ok(())
}

/// FMA lane-operations per second of the VALU loop kernel.
fn valu_loop(rig: &Rig) -> Result {
    let k = &rig.k;
    let q = AqlQueue::new(&rig.kfd, rig.gpu, 64).map_err(|e| format!("queue: {e}"))?;
    let sig = Signals::new(&rig.kfd, rig.gpu, 1).map_err(|e| format!("signal: {e}"))?;
    let lanes = 64 * VALU_GROUPS as usize;
    let out = rig.alloc(4 * lanes)?;
    let arg = out.va();
    let mut rates = Vec::new();
    for _ in 0..ROUNDS {
        out.fill(0, 4 * lanes as u64, 0xEE);
        let p = packet::dispatch(k.valu, arg, [lanes as u32, 1, 1], [64, 1, 1], sig.handle(0), false);
        let t = timed(&[(&q, p)], &sig)?;
        check("valu loop", &read_f32(&out, lanes), |i| valu_loop_expected(i as u32 % 64))?;
        let ops = (lanes as u64 * u64::from(VALU_ITERS * FMAS_PER_ITER)) as f64;
        rates.push((ops / t.wall.as_secs_f64(), ops / t.cpu.as_secs_f64()));
    }
    let tag = rig.tag();
    bench(&format!("shader_valu_fma_lane_ops_per_s_{tag}"), median(rates.iter().map(|r| r.0).collect()) / 1e6, "M/s");
    let cpu = median(rates.iter().map(|r| r.1).collect());
    bench(&format!("shader_valu_fma_lane_ops_per_cpu_s_{tag}"), cpu / 1e6, "M/s");
    Ok(())
}

/// saxpy y = a x + y over SAXPY_N floats: one dispatch with one worker and with all, and the
/// work split over one queue per worker, against the plain-Rust loop on one thread and on as
/// many threads as workers.
fn saxpy(one: &Rig, all: &Rig) -> Result {
    let n = SAXPY_N;
    let xs: Vec<f32> = (0..n).map(|i| (i % 1024) as f32).collect();
    let ys: Vec<f32> = (0..n).map(|i| (i % 977) as f32).collect();
    let (t1, cpu1) = saxpy_on(one, &xs, &ys, 1)?;
    let rust1 = rust_saxpy(SAXPY_A, &xs, &ys, 1);
    let tag1 = one.tag();
    bench(&format!("shader_saxpy_work_items_per_s_{tag1}"), n as f64 / t1 / 1e6, "M/s");
    bench(&format!("shader_saxpy_ns_per_element_{tag1}"), t1 * 1e9 / n as f64, "ns");
    bench(&format!("shader_saxpy_cpu_ns_per_element_{tag1}"), cpu1 * 1e9 / n as f64, "ns");
    bench("rust_saxpy_ns_per_element_1thread", rust1 * 1e9 / n as f64, "ns");
    ratio(&format!("shader_saxpy_time_{tag1}_vs_rust_1thread"), t1, rust1);

    let w = all.workers;
    let tag = all.tag();
    let (tw, cpuw) = saxpy_on(all, &xs, &ys, 1)?;
    let (tq, cpuq) = saxpy_on(all, &xs, &ys, w)?;
    let rustw = rust_saxpy(SAXPY_A, &xs, &ys, w);
    bench(&format!("shader_saxpy_work_items_per_s_{tag}"), n as f64 / tw / 1e6, "M/s");
    bench(&format!("shader_saxpy_ns_per_element_{tag}"), tw * 1e9 / n as f64, "ns");
    bench(&format!("shader_saxpy_cpu_ns_per_element_{tag}"), cpuw * 1e9 / n as f64, "ns");
    bench(&format!("shader_saxpy_ns_per_element_{tag}_{w}queues"), tq * 1e9 / n as f64, "ns");
    bench(&format!("shader_saxpy_cpu_ns_per_element_{tag}_{w}queues"), cpuq * 1e9 / n as f64, "ns");
    bench(&format!("rust_saxpy_ns_per_element_{w}threads"), rustw * 1e9 / n as f64, "ns");
    // Speed-ups (time over time): `w` is linear scaling.
    ratio(&format!("shader_saxpy_speedup_{tag}_vs_{tag1}"), t1, tw);
    ratio(&format!("shader_saxpy_speedup_{tag}_{w}queues_vs_{tag1}"), t1, tq);
    ratio(&format!("rust_saxpy_speedup_{w}threads_vs_1thread"), rust1, rustw);
    ratio(&format!("shader_saxpy_time_{tag}_vs_rust_{w}threads"), tw, rustw);
    Ok(())
}

const SAXPY_A: f32 = 3.0;

/// The median wall and CPU seconds of saxpy on `rig` split over `parts` queues: queue i runs
/// elements [i n / parts, (i + 1) n / parts), all dispatched before any wait. Checked.
fn saxpy_on(rig: &Rig, xs: &[f32], ys: &[f32], parts: usize) -> Result<(f64, f64)> {
    let n = xs.len();
    // Small integers: a x + y is exact in f32, fused or not.
    let want = |i: usize| SAXPY_A * xs[i] + ys[i];
    let x = rig.alloc(4 * n)?;
    let y = rig.alloc(4 * n)?;
    x.write(0, &f32_bytes(xs));
    let y_init = f32_bytes(ys);
    let sig = Signals::new(&rig.kfd, rig.gpu, parts as u64).map_err(|e| format!("signal: {e}"))?;
    let queues: Vec<AqlQueue> = (0..parts)
        .map(|_| AqlQueue::new(&rig.kfd, rig.gpu, 64))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("queue: {e}"))?;
    let mut times = Vec::new();
    for _ in 0..ROUNDS {
        y.write(0, &y_init);
        let packets: Vec<(&AqlQueue, [u8; 64])> = (0..parts)
            .map(|i| {
                let (lo, hi) = (i * n / parts, (i + 1) * n / parts);
                let mut explicit = Vec::with_capacity(24);
                explicit.extend_from_slice(&SAXPY_A.to_bits().to_le_bytes());
                explicit.extend_from_slice(&[0; 4]);
                explicit.extend_from_slice(&x.addr(4 * lo as u64).to_le_bytes());
                explicit.extend_from_slice(&y.addr(4 * lo as u64).to_le_bytes());
                let arg = rig.kernarg(i as u64, &explicit);
                let grid = [(hi - lo) as u32, 1, 1];
                (&queues[i], packet::dispatch(rig.k.saxpy, arg, grid, [SAXPY_WG, 1, 1], sig.handle(i as u64), false))
            })
            .collect();
        let t = timed(&packets, &sig)?;
        check(&format!("saxpy on {parts} queue(s), {}", rig.tag()), &read_f32(&y, n), want)?;
        times.push((t.wall.as_secs_f64(), t.cpu.as_secs_f64()));
    }
    Ok((median(times.iter().map(|t| t.0).collect()), median(times.iter().map(|t| t.1).collect())))
}

/// The median time of y = a x + y in plain Rust on `threads` threads (each its share), checked.
fn rust_saxpy(a: f32, xs: &[f32], ys: &[f32], threads: usize) -> f64 {
    let mut times = Vec::new();
    let mut y = ys.to_vec();
    for _ in 0..RUST_ROUNDS {
        y.copy_from_slice(ys);
        let chunk = xs.len().div_ceil(threads);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for (yc, xc) in y.chunks_mut(chunk).zip(xs.chunks(chunk)) {
                s.spawn(move || {
                    for (y, x) in yc.iter_mut().zip(xc) {
                        *y += a * x;
                    }
                });
            }
        });
        times.push(t0.elapsed().as_secs_f64());
        std::hint::black_box(&mut y);
    }
    assert!(y.iter().zip(xs.iter().zip(ys)).all(|(r, (x, y0))| *r == a * x + y0), "the Rust saxpy is wrong");
    median(times)
}

/// MM_N x MM_N matmul in MM_TILE tiles through LDS, GFLOP/s against plain Rust (ikj order).
fn matmul(rigs: &[&Rig]) -> Result {
    let n = MM_N;
    // Small integers: every partial sum is exact in f32.
    let am: Vec<f32> = (0..n * n).map(|i| ((i * 7 + 3) % 11) as f32 - 5.0).collect();
    let bm: Vec<f32> = (0..n * n).map(|i| ((i * 5 + 1) % 13) as f32 - 6.0).collect();
    let (want, rust_secs) = rust_matmul(&am, &bm, n);
    let flop = 2.0 * (n * n * n) as f64;
    let rust = flop / rust_secs / 1e9;
    bench("rust_matmul_256_ikj_gflops_1thread", rust, "GFLOP/s");
    for rig in rigs {
        let ours = matmul_on(rig, &am, &bm, &want)?;
        let tag = rig.tag();
        bench(&format!("shader_matmul_256_gflops_{tag}"), ours, "GFLOP/s");
        // As a time ratio (the interpreter's slowdown), like saxpy's.
        ratio(&format!("shader_matmul_256_time_{tag}_vs_rust_ikj_1thread"), rust, ours);
    }
    Ok(())
}

/// The median GFLOP/s of the MM_N matmul of `am` and `bm` on `rig`, checked against `want`.
fn matmul_on(rig: &Rig, am: &[f32], bm: &[f32], want: &[f32]) -> Result<f64> {
    let (k, n) = (&rig.k, MM_N);
    let (a, b, c) = (rig.alloc(4 * n * n)?, rig.alloc(4 * n * n)?, rig.alloc(4 * n * n)?);
    a.write(0, &f32_bytes(am));
    b.write(0, &f32_bytes(bm));
    let q = AqlQueue::new(&rig.kfd, rig.gpu, 64).map_err(|e| format!("queue: {e}"))?;
    let sig = Signals::new(&rig.kfd, rig.gpu, 1).map_err(|e| format!("signal: {e}"))?;
    let mut explicit = Vec::new();
    for m in [&a, &b, &c] {
        explicit.extend_from_slice(&m.va().to_le_bytes());
    }
    explicit.extend_from_slice(&(n as i32).to_le_bytes());
    let arg = rig.kernarg(0, &explicit);
    let flop = 2.0 * (n * n * n) as f64;
    let mut rates = Vec::new();
    for _ in 0..ROUNDS {
        c.fill(0, 4 * (n * n) as u64, 0xEE);
        let tile = MM_TILE as u16;
        let p = packet::dispatch(k.matmul, arg, [n as u32, n as u32, 1], [tile, tile, 1], sig.handle(0), false);
        let t = timed(&[(&q, p)], &sig)?;
        check(&format!("matmul, {}", rig.tag()), &read_f32(&c, n * n), |i| want[i])?;
        rates.push(flop / t.wall.as_secs_f64() / 1e9);
    }
    Ok(median(rates))
}

/// C = A B in plain Rust (ikj order, one thread) and its median time in seconds.
fn rust_matmul(a: &[f32], b: &[f32], n: usize) -> (Vec<f32>, f64) {
    let mut times = Vec::new();
    let mut c = vec![0f32; n * n];
    for _ in 0..RUST_ROUNDS {
        c.fill(0.0);
        let t0 = Instant::now();
        for i in 0..n {
            for kk in 0..n {
                let aik = a[i * n + kk];
                let (row, brow) = (&mut c[i * n..(i + 1) * n], &b[kk * n..(kk + 1) * n]);
                for (cv, bv) in row.iter_mut().zip(brow) {
                    *cv += aik * bv;
                }
            }
        }
        times.push(t0.elapsed().as_secs_f64());
        std::hint::black_box(&mut c);
    }
    (c, median(times))
}
