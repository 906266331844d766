//! The soft command processor: watches doorbells, consumes AQL packets, runs barrier packets
//! and soft kernels, completes signals and raises events; on PM4 compute and SDMA queues it runs
//! the packet subsets documented in `ring/pm4.rs` and `ring/sdma.rs` (the ring runner in
//! `ring/mod.rs`, the AQL runner in `aql.rs`, what both share with this loop in `runner.rs`).
//!
//! Engine threads ("lanes", [`EngineConfig::threads`], one unless asked for more) share the
//! device's queues: a new queue goes to the lane serving the fewest, so queues, and the processes that
//! own them, run side by side on a machine with cores to spare, and a queue that runs the most
//! expensive packets holds up only the queues of its own lane. Clients ring doorbells with plain
//! 64-bit stores into their doorbell slice (what ROCr does: no syscall), so each lane polls: it
//! spins briefly after activity, then yields, then sleeps with growing intervals (an idle device
//! does not burn a core; a lane with no queue sleeps until it is given one). While it spins with
//! every queue drained, it watches the doorbells alone between passes (`watch`). Cooperative
//! clients can cut the wait short with [`Engine::kick`].

mod aql;
mod fault;
mod gfx;
mod grid;
mod kernels;
mod mem;
mod ring;
mod runner;
mod signal;
pub mod workers;

pub use fault::{
    QueueFault, ERROR_ILLEGAL_INSTRUCTION, ERROR_INVALID_ARGUMENT, ERROR_INVALID_CODE_OBJECT,
    ERROR_INVALID_PACKET_FORMAT, ERROR_TRAP,
};
pub use runner::Interrupt;

use crate::event::registry::WaitRegistry;
use crate::event::wait::Completion;
use crate::event::EventTable;
use crate::faults::Faults;
use crate::fork::Sleeper;
use crate::memory::backing::BackingFile;
use crate::memory::sigbus;
use crate::memory::vm::{GpuVa, VmFault};
use crate::process::Process;
use crate::queue::{Queue, QueueType};
use crate::trace::Trace;
use aql::QueueRunner;
use parking_lot::Mutex;
use ring::RingRunner;
use runner::{LazyNow, PollCtx, Polled};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

/// The most engine threads a device may be given.
pub const MAX_THREADS: usize = 64;
/// Lanes a caller who wants them may ask for: one per core, at most 4 (each idles at a few dozen
/// polls a second while it has queues).
pub fn lanes_per_core() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}
/// How long a lane with no queue sleeps between looks (it is woken when given one; this bounds
/// a wake that could be lost).
const EMPTY_LANE_SLEEP: Duration = Duration::from_secs(1);

/// Tuning of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How long an INVALID packet below the doorbell index may stay unpublished before it is a
    /// queue error (a multi-producer queue publishes out of order for a moment).
    pub invalid_packet_grace: Duration,
    /// Busy-polling time after the last activity.
    pub spin: Duration,
    /// Yielding time after the spin, before sleeping.
    pub yield_for: Duration,
    /// Longest sleep between polls of an idle device.
    pub max_sleep: Duration,
    /// Threads that run the workgroups of GFX dispatches (0: dispatches run on the engine
    /// thread, sliced like soft kernels).
    pub shader_workers: usize,
    /// Engine threads (lanes) that share the queues (at least 1).
    pub threads: usize,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            invalid_packet_grace: Duration::from_millis(500),
            spin: Duration::from_micros(200),
            yield_for: Duration::from_millis(2),
            max_sleep: Duration::from_millis(16),
            shader_workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            // One lane by default. More lanes are more runnable threads on a small machine,
            // which widens a lost-wakeup window of ROCr 5.2.3's own (its async thread checks a
            // signal, then waits on its event; a queue destructor's set and consuming wait can
            // fall in between when that thread is preempted for longer than the destructor's
            // 5 ms spin): on two vCPUs it hung one CI run. Lanes are for `--engine-threads`.
            threads: 1,
        }
    }
}

/// Records why a queue stopped and reports it: the queue's error, then MEMORY events for a VM
/// fault or HW-exception / queue events for anything else, as KFD does.
///
/// Client memory that became unreachable because its owner exited or exec'd is no GPU fault:
/// the context is ending (amdkfd tears a process down when its mm goes, and reports nothing).
/// Such a queue stops with its error, logged as what it is, and raises no event: a queue
/// blocked on a poll of client memory (ROCr's SDMA copies poll their dependencies) would
/// otherwise report a "VM fault" the moment a killed client dies, which reads as the cause.
fn report_fault(hw: &HwQueue, fault: &QueueFault, trace: &Trace) {
    if matches!(fault, QueueFault::Vm(VmFault::Userptr { .. })) && hw.process.memory.is_gone() {
        log::info!("pid {} queue {}: stopped, its process has exited or exec'd ({fault})", hw.process.pid, hw.queue.id);
        hw.queue.set_error(fault.to_error());
        return;
    }
    log::warn!("pid {} queue {}: {}", hw.process.pid, hw.queue.id, fault);
    if trace.enabled() {
        let kind = crate::trace::Kind::QueueError { queue: hw.queue.id, reason: fault.to_string() };
        trace.record(hw.process.pid, trace.now_ns(), kind);
    }
    hw.queue.set_error(fault.to_error());
    let gpu_id = hw.queue.gpu_id;
    let mut done = Vec::new();
    {
        let mut events = hw.process.events();
        match fault {
            QueueFault::Vm(f) => events.memory_exception(fault::memory_exception(f, gpu_id), &mut done),
            QueueFault::Invalid { .. } => events.hw_exception(
                uapi::kfd::HsaHwExceptionData {
                    reset_type: uapi::kfd::KFD_HW_EXCEPTION_PER_ENGINE_RESET,
                    reset_cause: uapi::kfd::KFD_HW_EXCEPTION_GPU_HANG,
                    memory_lost: 0,
                    gpu_id,
                },
                &mut done,
            ),
        }
    }
    hw.deliver(done);
}

/// A queue as the engine sees it.
pub struct HwQueue {
    pub process: Arc<Process>,
    pub queue: Arc<Queue>,
    /// The queue's GPU's gfx_target_version (90010 is gfx90a): which machine code it runs.
    pub gfx_target_version: u32,
    doorbell: Arc<BackingFile>,
    /// Where completed waits go (shared with the device).
    waits: Arc<WaitRegistry>,
}

impl HwQueue {
    fn doorbell(&self) -> u64 {
        let off = crate::queue::doorbell::Doorbells::byte_offset(self.queue.doorbell_index) as usize;
        // A lost slice reads as unrung; the run loop then stops the queue (`lost_memory`).
        self.doorbell.region().with_u64(off, |w| w.load(Ordering::Acquire)).unwrap_or(u64::MAX)
    }

    /// The fault to stop this queue with if its client truncated the file of its doorbell slice
    /// or of its process's event page (see crate::memory::sigbus). Neither has a GPU address
    /// the queue knows: the fault is reported at address 0.
    fn lost_memory(&self) -> Option<QueueFault> {
        let lost = self.doorbell.region().is_lost() || self.process.events().page().is_some_and(|p| p.is_lost());
        lost.then_some(QueueFault::Vm(VmFault::Lost { va: GpuVa(0) }))
    }

    fn deliver(&self, done: Vec<Completion>) {
        self.waits.deliver(done);
    }

    /// Raises KFD signal events `ids` of the queue's process (the interrupt path).
    fn raise(&self, ids: &[u32]) {
        self.for_each_event(ids, |events, id, done| events.signal_from_device(*id, done));
    }

    /// Wakes the waiters on KFD events `ids` of the queue's process with FAIL, without setting
    /// the events: the queue whose packets were to set them is gone. (amdkfd has no such link
    /// from a queue to events; a waiter is told as `destroy_event` tells the waiters of a
    /// destroyed event:
    /// <https://github.com/torvalds/linux/blob/v6.1/drivers/gpu/drm/amd/amdkfd/kfd_events.c>.)
    fn fail_waiters(&self, ids: &[u32]) {
        self.for_each_event(ids, |events, id, done| events.fail_waiters(*id, done));
    }

    /// Delivers interrupts raised by the queue's packets to its process's events.
    fn interrupt(&self, interrupts: &[Interrupt]) {
        self.for_each_event(interrupts, |events, i, done| events.interrupt(i.context_id, i.valid_bits, done));
    }

    /// Applies `f` to each item under one lock of the process's events, then delivers the waits
    /// that completed (outside the lock).
    fn for_each_event<T>(&self, items: &[T], f: impl Fn(&mut EventTable, &T, &mut Vec<Completion>)) {
        if items.is_empty() {
            return;
        }
        let mut done = Vec::new();
        {
            let mut events = self.process.events();
            for item in items {
                f(&mut events, item, &mut done);
            }
        }
        self.deliver(done);
    }
}

/// The packet processor of one queue, by queue type.
enum Runner {
    Aql(QueueRunner),
    Ring(RingRunner),
}

impl Runner {
    fn new(hw: Arc<HwQueue>, faults: Arc<Faults>) -> Runner {
        match hw.queue.queue_type {
            QueueType::ComputeAql => Runner::Aql(QueueRunner::new(hw, faults)),
            QueueType::Compute | QueueType::Sdma | QueueType::SdmaXgmi | QueueType::SdmaByEngId => {
                Runner::Ring(RingRunner::new(hw, faults))
            }
        }
    }

    fn hw(&self) -> &Arc<HwQueue> {
        match self {
            Runner::Aql(r) => &r.hw,
            Runner::Ring(r) => &r.hw,
        }
    }

    fn poll(&mut self, now: &LazyNow, ctx: &PollCtx) -> Polled {
        match self {
            Runner::Aql(r) => r.poll(now, ctx),
            Runner::Ring(r) => r.poll(now, ctx),
        }
    }

    fn internal_error(&mut self, what: &str, ctx: &PollCtx) -> Polled {
        match self {
            Runner::Aql(r) => r.internal_error(what, ctx.trace),
            Runner::Ring(r) => r.internal_error(what, ctx),
        }
    }

    fn lose(&mut self, fault: QueueFault, ctx: &PollCtx) -> Polled {
        match self {
            Runner::Aql(r) => r.lose(fault, ctx.trace),
            Runner::Ring(r) => r.lose(fault, ctx),
        }
    }

    fn abandon(&mut self) -> Vec<u32> {
        match self {
            Runner::Aql(r) => r.abandon(),
            Runner::Ring(r) => r.abandon(),
        }
    }

    fn quiet(&self) -> Option<Quiet> {
        match self {
            Runner::Aql(r) => r.quiet(),
            Runner::Ring(r) => r.quiet(),
        }
    }

    /// Whether a poll would find something to do: the queue is not quiet, or its doorbell moved.
    fn rung(&self) -> bool {
        match self.quiet() {
            Some(Quiet::Stopped) => false,
            Some(Quiet::Until(last)) => self.hw().doorbell() != last,
            None => true,
        }
    }
}

/// A queue that only a doorbell can give work (nothing running, nothing waiting, the ring
/// drained up to the last doorbell seen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quiet {
    /// Stopped by an error: polls do nothing, rung or not.
    Stopped,
    /// Until the doorbell holds something other than this value.
    Until(u64),
}

/// Doorbell looks per [`watch`]: between two passes of the spin phase.
const WATCH_LOOKS: u32 = 64;

/// The spin phase between two passes: while every queue is quiet, only a doorbell store (or a
/// registry change, a stop, lost memory) can bring work, so the engine watches the doorbells
/// alone, up to [`WATCH_LOOKS`] times, instead of making a pass each time. A pass costs a busy
/// section (two atomic read-modify-writes), a clock read and a poll of each queue; a look is a
/// load per doorbell, so a doorbell store is seen within a look, not within a pass. Returns at
/// once (after one pause) if a queue is not quiet: then passes poll it.
fn watch(s: &Shared, runners: &[Runner], seen: u64, losses_seen: Option<u64>) {
    if runners.iter().any(|r| r.quiet().is_none()) {
        std::hint::spin_loop();
        return;
    }
    for _ in 0..WATCH_LOOKS {
        if runners.iter().any(Runner::rung)
            || s.generation.load(Ordering::Acquire) != seen
            || s.stop.load(Ordering::Acquire)
            || losses_seen != Some(sigbus::losses())
        {
            return;
        }
        std::hint::spin_loop();
    }
}

#[derive(Default)]
struct Registry {
    queues: Vec<Arc<HwQueue>>,
    generation: u64,
}

struct Shared {
    config: EngineConfig,
    faults: Arc<Faults>,
    trace: Arc<Trace>,
    registry: Mutex<Registry>,
    generation: AtomicU64,
    /// The registry generation the engine has adopted (removers sleep on it).
    acked: Sleeper<u64>,
    /// Rung to cut the engine's sleep short.
    bell: Arc<Bell>,
    stop: AtomicBool,
    packets_polls: AtomicU64,
    /// The shader core's workers (none with `shader_workers` 0), shared by the lanes.
    pool: Option<Arc<workers::Pool>>,
}

/// The engine's lanes: threads, each with its queue registry.
pub struct Engine {
    lanes: Vec<Lane>,
    pool: Option<Arc<workers::Pool>>,
    /// Where completed waits go (each queue holds it).
    waits: Arc<WaitRegistry>,
}

/// One engine thread and the queues it serves.
struct Lane {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    thread_id: ThreadId,
}

impl Lane {
    /// Waits until the lane has adopted registry `generation` (or stops). Waiting for the
    /// engine is no device work: a fork need not wait for it.
    fn wait_adopted(&self, generation: u64) {
        crate::fork::idle(|| {
            let mut acked = self.shared.acked.lock();
            while *acked < generation && !self.shared.stop.load(Ordering::Acquire) {
                acked = self.shared.acked.wait_for(acked, Duration::from_millis(10)).0;
            }
        });
    }

    /// Moves the registry to a new generation (the lane adopts it at its next pass).
    fn bump(&self, reg: &mut Registry) -> u64 {
        reg.generation += 1;
        // SeqCst, with the bell's: a lane about to sleep sees the new generation, or its ringer
        // sees it parked (see `run`).
        self.shared.generation.store(reg.generation, Ordering::SeqCst);
        reg.generation
    }
}

impl Engine {
    /// An engine whose completed waits go to `waits`.
    pub fn new(config: EngineConfig, faults: Arc<Faults>, trace: Arc<Trace>, waits: Arc<WaitRegistry>) -> Engine {
        crate::fork::install();
        let lanes = config.threads.max(1);
        let bells: Vec<Arc<Bell>> =
            (0..lanes).map(|_| Arc::new(Bell { rung: Sleeper::new(false), parked: AtomicBool::new(false) })).collect();
        let pool = (config.shader_workers > 0).then(|| {
            // A worker with news for a queue wakes the lanes as a doorbell kick does. It holds
            // the bells only: were it to hold the engine, the last reference could end on a
            // worker, which would then tear the engine down behind its owner's back.
            let bells = bells.clone();
            Arc::new(workers::Pool::new(config.shader_workers, Arc::new(move || bells.iter().for_each(|b| b.ring()))))
        });
        let lanes = bells
            .into_iter()
            .enumerate()
            .map(|(n, bell)| {
                let shared = Arc::new(Shared {
                    pool: pool.clone(),
                    bell,
                    config: config.clone(),
                    faults: faults.clone(),
                    trace: trace.clone(),
                    registry: Mutex::new(Registry::default()),
                    generation: AtomicU64::new(0),
                    acked: Sleeper::new(0),
                    stop: AtomicBool::new(false),
                    packets_polls: AtomicU64::new(0),
                });
                let s = shared.clone();
                let thread = std::thread::Builder::new()
                    .name(if n == 0 { "kfd-engine".into() } else { format!("kfd-engine-{n}") })
                    .spawn(move || run(&s))
                    .expect("spawning an engine thread");
                let thread_id = thread.thread().id();
                Lane { shared, thread: Some(thread), thread_id }
            })
            .collect();
        Engine { lanes, pool, waits }
    }

    /// How many engine threads share the queues.
    pub fn threads(&self) -> usize {
        self.lanes.len()
    }

    /// How many queues each engine thread serves.
    pub fn queues_per_thread(&self) -> Vec<usize> {
        self.lanes.iter().map(|l| l.shared.registry.lock().queues.len()).collect()
    }

    /// Starts processing `queue` of `process`, on a GPU of `gfx_target_version`, on the lane
    /// that serves the fewest queues.
    pub fn add(&self, process: Arc<Process>, queue: Arc<Queue>, doorbell: Arc<BackingFile>, gfx_target_version: u32) {
        let waits = self.waits.clone();
        let hw = Arc::new(HwQueue { process, queue, gfx_target_version, doorbell, waits });
        let lane = self.lanes.iter().min_by_key(|l| l.shared.registry.lock().queues.len()).expect("at least one lane");
        let mut reg = lane.shared.registry.lock();
        reg.queues.push(hw);
        lane.bump(&mut reg);
        drop(reg);
        lane.shared.bell.ring();
    }

    /// Stops processing the queues `which` selects and returns once the engine no longer touches
    /// them (waiters on their pending packets have been woken).
    pub fn remove(&self, which: impl Fn(&HwQueue) -> bool) {
        let mut changed = Vec::new();
        for lane in &self.lanes {
            let mut reg = lane.shared.registry.lock();
            let before = reg.queues.len();
            reg.queues.retain(|q| !which(q));
            if reg.queues.len() != before {
                changed.push((lane, lane.bump(&mut reg)));
            }
        }
        for (lane, _) in &changed {
            lane.shared.bell.ring();
        }
        if self.on_a_lane() {
            return;
        }
        for (lane, generation) in changed {
            lane.wait_adopted(generation);
        }
    }

    /// Returns once every lane has ended the pass under way (if any): a poll after this sees
    /// every queue property changed before the call. From an engine thread it returns at once.
    pub fn sync(&self) {
        let generations: Vec<u64> = self.lanes.iter().map(|l| l.bump(&mut l.shared.registry.lock())).collect();
        self.kick();
        if self.on_a_lane() {
            return;
        }
        for (lane, generation) in self.lanes.iter().zip(generations) {
            lane.wait_adopted(generation);
        }
    }

    /// Whether the caller is one of the engine's threads (which must not wait for a lane: two
    /// lanes waiting for each other would never adopt).
    fn on_a_lane(&self) -> bool {
        let me = std::thread::current().id();
        self.lanes.iter().any(|l| l.thread_id == me)
    }

    /// A preempted queue was resumed: the shader workers look at its dispatch again.
    pub fn resume_waves(&self) {
        if let Some(p) = &self.pool {
            p.nudge();
        }
        self.kick();
    }

    /// Wakes the sleeping lanes now (the cheap wake path for cooperative clients).
    pub fn kick(&self) {
        for lane in &self.lanes {
            lane.shared.bell.ring();
        }
    }

    /// How many times the engine's lanes have polled their queues (for idle-CPU checks).
    pub fn polls(&self) -> u64 {
        self.lanes.iter().map(|l| l.shared.packets_polls.load(Ordering::Relaxed)).sum()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        for lane in &self.lanes {
            lane.shared.stop.store(true, Ordering::Release);
            *lane.shared.bell.rung.lock() = true;
            lane.shared.bell.rung.notify_one();
        }
        for lane in &mut self.lanes {
            if let Some(t) = lane.thread.take() {
                crate::fork::join_device_thread(t);
            }
        }
    }
}

/// What cuts the engine's sleep short: the engine parks on `rung`; doorbell kicks and workers
/// ring it.
struct Bell {
    rung: Sleeper<bool>,
    parked: AtomicBool,
}

impl Bell {
    /// Wakes the engine if it sleeps.
    fn ring(&self) {
        // SeqCst: see `run`'s sleep.
        if self.parked.load(Ordering::SeqCst) {
            *self.rung.lock() = true;
            self.rung.notify_one();
        }
    }
}

fn run(s: &Shared) {
    let mut runners: Vec<Runner> = Vec::new();
    let mut seen = 0u64;
    // When the engine was last found idle after activity (None: it was busy in its last pass,
    // or just woken): the spin, yield and sleep phases count from there, so a busy pass needs
    // no clock read of its own.
    let mut idle_since: Option<Instant> = None;
    let mut sleep = Duration::from_micros(50);
    let mut polls = 0u64;
    // The SIGBUS guard's loss count the runners were last checked against (None: check now).
    let mut losses_seen: Option<u64> = None;
    // Where the next pass starts: a pass cut short by a registry change resumes with the queue
    // after the last one polled, so no queue waits on others being added and removed.
    let mut cursor = 0usize;
    while !s.stop.load(Ordering::Acquire) {
        // A pass is device work (it takes the device's locks); the spin, yield and sleep after
        // it are not (see crate::fork).
        let busy = crate::fork::busy();
        let generation = s.generation.load(Ordering::Acquire);
        if generation != seen {
            adopt(s, &mut runners);
            losses_seen = None;
            seen = generation;
            *s.acked.lock() = generation;
            s.acked.notify_all();
            idle_since = None;
        }
        polls += 1;
        s.packets_polls.store(polls, Ordering::Relaxed);
        let now = LazyNow::default();
        let mut progressed = false;
        let mut pending = false;
        let mut deadline: Option<Instant> = None;
        let ctx = PollCtx {
            grace: s.config.invalid_packet_grace,
            trace: &s.trace,
            slice: runner::SLICE,
            pool: s.pool.as_deref(),
        };
        let n = runners.len();
        for k in 0..n {
            let i = (cursor + k) % n;
            let r = &mut runners[i];
            let p = poll_guarded(r, &now, &ctx);
            r.hw().raise(&p.events);
            r.hw().interrupt(&p.interrupts);
            progressed |= p.progressed;
            pending |= p.pending;
            deadline = match (deadline, p.deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // Each poll is bounded by its slice, so a remover or a stop waits for about one
            // slice, not for a whole pass over every busy queue.
            if p.progressed && (s.generation.load(Ordering::Acquire) != seen || s.stop.load(Ordering::Acquire)) {
                cursor = i + 1;
                break;
            }
        }
        let losses = sigbus::losses();
        if losses_seen != Some(losses) {
            losses_seen = Some(losses);
            let ctx = PollCtx {
                grace: s.config.invalid_packet_grace,
                trace: &s.trace,
                slice: runner::SLICE,
                pool: s.pool.as_deref(),
            };
            for r in runners.iter_mut() {
                if let Some(fault) = r.hw().lost_memory() {
                    let p = r.lose(fault, &ctx);
                    r.hw().raise(&p.events);
                    progressed = true;
                }
            }
        }
        if progressed {
            idle_since = None;
            sleep = Duration::from_micros(50);
            continue;
        }
        drop(busy);
        let now = now.get();
        let idle = now.duration_since(*idle_since.get_or_insert(now));
        if idle < s.config.spin {
            watch(s, &runners, seen, losses_seen);
            continue;
        }
        if idle < s.config.spin + s.config.yield_for {
            std::thread::yield_now();
            continue;
        }
        let mut timeout = sleep;
        if let Some(d) = deadline {
            timeout = timeout.min(d.saturating_duration_since(now));
        }
        if runners.is_empty() {
            // No queue: nothing but being given one can bring work.
            timeout = EMPTY_LANE_SLEEP;
        }
        sleep = (sleep * 2).min(if pending { s.config.max_sleep / 4 } else { s.config.max_sleep });
        let mut woken = s.bell.rung.lock();
        // SeqCst on both sides (here, and the registry's generation store and the bell's parked
        // load): either this lane sees a new generation, or its ringer sees it parked.
        s.bell.parked.store(true, Ordering::SeqCst);
        if !*woken && s.generation.load(Ordering::SeqCst) == seen {
            woken = s.bell.rung.wait_for(woken, timeout).0;
        }
        s.bell.parked.store(false, Ordering::Release);
        if std::mem::take(&mut *woken) {
            idle_since = None;
            sleep = Duration::from_micros(50);
        }
    }
}

/// Polls `r`; a panic in it (client memory is hostile, and a bug there must not take the
/// engine thread, and with it every queue and every DESTROY_QUEUE, down) stops that queue
/// with an error instead.
fn poll_guarded(r: &mut Runner, now: &LazyNow, ctx: &PollCtx) -> Polled {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let payload = match catch_unwind(AssertUnwindSafe(|| r.poll(now, ctx))) {
        Ok(p) => return p,
        Err(payload) => payload,
    };
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    log::error!("pid {} queue {}: the command processor panicked: {what}", r.hw().process.pid, r.hw().queue.id);
    // Reporting the error reads client memory too: if that panics as well, the queue just stops.
    catch_unwind(AssertUnwindSafe(|| r.internal_error(&what, ctx))).unwrap_or_default()
}

/// Brings the runner list in line with the registry; removed queues are abandoned here, on the
/// engine thread, before the remover is released.
fn adopt(s: &Shared, runners: &mut Vec<Runner>) {
    let current: Vec<Arc<HwQueue>> = s.registry.lock().queues.clone();
    let mut kept = Vec::with_capacity(current.len());
    for mut r in runners.drain(..) {
        if current.iter().any(|q| Arc::ptr_eq(q, r.hw())) {
            kept.push(r);
        } else {
            let ids = r.abandon();
            r.hw().fail_waiters(&ids);
        }
    }
    for q in current {
        if !kept.iter().any(|r| Arc::ptr_eq(r.hw(), &q)) {
            kept.push(Runner::new(q, s.faults.clone()));
        }
    }
    *runners = kept;
}
