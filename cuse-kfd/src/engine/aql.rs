//! The packet processor of one queue: consumes AQL packets from read_dispatch_id up to the
//! doorbell, exactly once each, as a GPU's command processor does.
//!
//! Per packet: the header is loaded with acquire; an INVALID slot below the doorbell index is
//! waited for briefly (a producer between reserving and publishing) and then is a queue error;
//! the packet runs; its header is stored back INVALID with release, then read_dispatch_id
//! advances with release; then its completion signal is decremented.

use super::fault::{QueueFault, ERROR_INVALID_PACKET_FORMAT};
use super::gfx;
use super::grid::Offload;
use super::kernels::{self, Ran};
use super::mem::{Mem, Tlb};
use super::ring::pm4_ib::{self, IbProgress, IbRun};
use super::runner::{Deadline, Interrupt, LazyNow, PollCtx, Polled, PropsCache};
use super::{signal, HwQueue};
use crate::clock;
use crate::faults::Faults;
use crate::process::Process;
use crate::queue::QueueType;
use crate::trace::{Kind as TraceKind, Trace};
use std::collections::VecDeque;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::Instant;
use uapi::aql::*;
use uapi::soft::{SoftKernelDescriptor, SOFT_KERNEL_MAGIC};
use uapi::FromBytes;

/// Packets one queue processes per pass before the others get a turn (a pass also ends at its
/// time slice, [`super::runner::SLICE`]).
const BUDGET: u32 = 256;

/// A kernel still running (the sleep kernel) and the signal it will complete.
#[derive(Debug)]
struct InFlight {
    until: Instant,
    signal: u64,
    start_ts: u64,
}

/// The clock of one pass of a queue: its slice and the last clock reading that is still "now"
/// (none once a packet has run since), so a packet's end timestamp is also the next packet's
/// start and the slice check between them. Packets run back to back as on a command
/// processor, which starts the next packet when the last one ends.
///
/// The clock is read only when something needs the time: a timestamp, the slice of a packet
/// that may run long, or the slice check before a further packet. The slice starts at the first
/// reading, so a pass that runs one barrier without a completion signal reads no clock at all
/// (the slice bounds passes of long work; a barrier takes nanoseconds).
struct Pass {
    slice: std::time::Duration,
    deadline: Option<Deadline>,
    now_ns: Option<u64>,
}

impl Pass {
    fn new(slice: std::time::Duration) -> Pass {
        Pass { slice, deadline: None, now_ns: None }
    }

    /// Now on the CPU counter (ns), read from the clock unless a reading is still current.
    fn now(&mut self) -> u64 {
        let now = *self.now_ns.get_or_insert_with(clock::cpu_clock_counter);
        self.deadline.get_or_insert(Deadline::at(now, self.slice));
        now
    }

    /// The end of the pass's slice (read from the clock if no reading has started it yet; that
    /// reading does not become "now": the packet that needs the slice runs after it).
    fn deadline(&mut self) -> Deadline {
        let slice = self.slice;
        *self.deadline.get_or_insert_with(|| Deadline::at(clock::cpu_clock_counter(), slice))
    }

    /// Whether the slice has ended.
    fn passed(&mut self) -> bool {
        let now = self.now();
        self.deadline().passed_at(now)
    }
}

/// The address of the amd_queue_t field at `offset`, found from the queue's read pointer (its
/// read_dispatch_id field); None where a client's read pointer puts the structure below address 0
/// or the field past the top of the address space.
fn amd_queue_field(read_ptr: u64, offset: usize) -> Option<u64> {
    read_ptr.checked_sub(uapi::queue::AMD_QUEUE_READ_DISPATCH_ID_OFFSET as u64)?.checked_add(offset as u64)
}

/// What one packet did.
enum Step {
    /// Consumed and finished: complete its signal now.
    Done(Vec<u32>),
    /// Consumed, still running until the instant.
    Running(Instant),
    /// Not startable yet (barrier dependencies); look again later.
    Blocked,
    /// Started and not finished within this pass: it stays at the read index and goes on in
    /// the next pass.
    Sliced(Work),
    /// Started and waiting on a poll (a WAIT_REG_MEM in a PM4_IB): it stays at the read index
    /// and goes on once the poll holds.
    Waiting(Work),
}

/// A packet that runs over several passes.
enum Work {
    /// A soft kernel's remaining work-items.
    Kernel(kernels::Work),
    /// The rest of a PM4_IB packet's indirect buffer.
    Pm4(IbRun),
    /// A GFX kernel's remaining workgroups.
    Shader(Box<gfx::Work>),
}

/// How far [`Work::resume`] got.
enum Resumed {
    Finished,
    /// Out of time: goes on in the next pass.
    Paused,
    /// Waiting on a poll.
    Blocked,
}

impl Work {
    fn resume(
        &mut self,
        mem: &mut Mem,
        deadline: Deadline,
        interrupts: &mut Vec<Interrupt>,
        offload: Option<Offload>,
    ) -> Result<Resumed, QueueFault> {
        Ok(match self {
            Work::Kernel(w) => {
                if w.resume(mem, deadline)? {
                    Resumed::Finished
                } else {
                    Resumed::Paused
                }
            }
            Work::Shader(w) => match w.resume(mem, deadline, interrupts, offload)? {
                gfx::Progress::Finished => Resumed::Finished,
                gfx::Progress::Paused => Resumed::Paused,
                gfx::Progress::Blocked => Resumed::Blocked,
            },
            Work::Pm4(ib) => match ib.resume(mem, deadline, interrupts, offload)? {
                IbProgress::Finished => Resumed::Finished,
                IbProgress::Paused => Resumed::Paused,
                IbProgress::Blocked => Resumed::Blocked,
            },
        })
    }
}

/// The packet at the read index, started in an earlier pass and not finished.
struct Current {
    work: Work,
    /// The packet's first 8 bytes as read when it started (the header goes back INVALID).
    first: u64,
    signal: u64,
    start_ts: u64,
    trace_start: u64,
}

pub struct QueueRunner {
    pub hw: Arc<HwQueue>,
    faults: Arc<Faults>,
    tlb: Tlb,
    read_index: u64,
    target: u64,
    last_doorbell: u64,
    invalid_since: Option<Instant>,
    in_flight: VecDeque<InFlight>,
    current: Option<Current>,
    stopped: bool,
    props: PropsCache,
    /// The process and fault configuration a pass's memory view borrows (see `poll`).
    lent: Option<(Arc<Process>, Arc<Faults>)>,
}

impl QueueRunner {
    /// How this queue's GFX dispatches reach the worker pool, if the engine has one.
    fn offload<'a>(&'a self, ctx: &PollCtx<'a>) -> Option<Offload<'a>> {
        ctx.pool.map(|pool| Offload { pool, process: &self.hw.process, faults: &self.faults, queue: &self.hw.queue })
    }

    pub fn new(hw: Arc<HwQueue>, faults: Arc<Faults>) -> QueueRunner {
        let mut r = QueueRunner {
            hw,
            faults,
            tlb: Tlb::default(),
            read_index: 0,
            target: 0,
            last_doorbell: u64::MAX,
            invalid_since: None,
            in_flight: VecDeque::new(),
            current: None,
            stopped: false,
            props: PropsCache::default(),
            lent: None,
        };
        // Start from the read pointer the client initialised.
        let rptr = r.hw.queue.read_ptr.0;
        let mut mem = Mem::new(&r.hw.process, r.hw.queue.gpu_id, &mut r.tlb, &r.faults);
        if let Ok(rd) = mem.load_u64(rptr, Ordering::Acquire) {
            r.read_index = rd;
            r.target = rd;
        }
        r
    }

    pub fn poll(&mut self, now: &LazyNow, ctx: &PollCtx) -> Polled {
        let mut out = Polled::default();
        if self.stopped || self.faults.is_hung(self.hw.queue.id) {
            return out;
        }
        if self.faults.panics(self.hw.queue.id) {
            panic!("fault injection: panic-queue={}", self.hw.queue.id);
        }
        let grace = ctx.grace;
        let db = self.hw.doorbell();
        if db != self.last_doorbell {
            self.last_doorbell = db;
            if db != u64::MAX {
                // Doorbells announce the index of the last packet written; a late, smaller
                // store from another producer does not move the target back.
                self.target = self.target.max(db.wrapping_add(1));
            }
        }
        if self.read_index >= self.target && self.in_flight.is_empty() {
            return out;
        }
        let props = self.props.get(&self.hw.queue);
        let (ring_base, ring_size, active) = (props.base, props.size, props.active);
        if !active {
            // Stalled by UPDATE_QUEUE (0% or a null ring): the read pointer stops here.
            return out;
        }
        if self.hw.queue.queue_type != QueueType::ComputeAql {
            let reason = format!(
                "{} queues are not processed by this device (only AQL queues)",
                self.hw.queue.queue_type.name()
            );
            self.fail(QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason), &mut out, ctx.trace);
            return out;
        }
        // The TLB and the references are lent to the pass's memory view, so the pass can still
        // borrow the runner. They are moved out and back, not cloned: a clone and its drop are
        // four atomic read-modify-writes per pass, and such an instruction holds back every later
        // load, the packet's among them. (A pass that panicked lost them: cloned anew.)
        let (process, faults) = self.lent.take().unwrap_or_else(|| (self.hw.process.clone(), self.faults.clone()));
        let mut tlb = std::mem::take(&mut self.tlb);
        let out = {
            let mut mem = Mem::new(&process, self.hw.queue.gpu_id, &mut tlb, &faults);
            let mut pass = Pass::new(ctx.slice);
            self.run(&mut mem, now, ctx, &mut pass, out, (ring_base, ring_size), grace)
        };
        self.tlb = tlb;
        self.lent = Some((process, faults));
        out
    }

    /// The packets of one pass, from the read index, at most [`BUDGET`] of them and until the
    /// pass's time slice ends.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        mem: &mut Mem<'_>,
        now: &LazyNow,
        ctx: &PollCtx,
        pass: &mut Pass,
        mut out: Polled,
        (ring_base, ring_size): (u64, u64),
        grace: std::time::Duration,
    ) -> Polled {
        let start_index = self.read_index;
        // Retire running kernels whose time has come.
        let mut i = 0;
        while i < self.in_flight.len() {
            if self.in_flight[i].until <= now.get() {
                let f = self.in_flight.remove(i).expect("index checked");
                fence(Ordering::Release);
                match signal::complete(mem, f.signal, f.start_ts, clock::gpu_counter_at(pass.now())) {
                    Ok(ev) => out.events.extend(ev),
                    Err(e) => {
                        self.fail(e.into(), &mut out, ctx.trace);
                        return out;
                    }
                }
                out.progressed = true;
            } else {
                i += 1;
            }
        }
        let slots = ring_size / AQL_PACKET_SIZE as u64;
        let mut budget = BUDGET;
        let mut failure = None;
        let mut sliced = false;
        while budget > 0 {
            let slot = ring_base + (self.read_index % slots) * AQL_PACKET_SIZE as u64;
            if let Some(mut c) = self.current.take() {
                // The packet this queue was running when its last pass ended.
                let deadline = pass.deadline();
                match c.work.resume(mem, deadline, &mut out.interrupts, self.offload(ctx)) {
                    Ok(Resumed::Finished) => {}
                    Ok(Resumed::Paused) => {
                        self.current = Some(c);
                        out.progressed = true;
                        sliced = true;
                        break;
                    }
                    Ok(Resumed::Blocked) => {
                        self.current = Some(c);
                        out.pending = true;
                        break;
                    }
                    Err(f) => {
                        failure = Some(f);
                        break;
                    }
                }
                budget -= 1;
                let step = Step::Done(Vec::new());
                let started = (c.first, c.signal, c.start_ts, c.trace_start);
                pass.now_ns = None;
                if let Err(f) = self.consume(mem, slot, started, step, &mut out, now, (ctx, pass)) {
                    failure = Some(f);
                    break;
                }
                continue;
            }
            if self.read_index >= self.target {
                if !published_past_target(mem, self.hw.queue.write_ptr.0, self.read_index, ring_base, slots) {
                    break;
                }
                self.target = self.read_index + 1;
            }
            // A further packet waits for the next pass once the slice has ended (checked only
            // when there is one: a drained queue needs no clock).
            if self.read_index > start_index && pass.passed() {
                break;
            }
            budget -= 1;
            let first = match mem.load_u64(slot, Ordering::Acquire) {
                Ok(w) => w,
                Err(e) => {
                    failure = Some(e.into());
                    break;
                }
            };
            let header = first as u16;
            let ptype = header as u8;
            if ptype == HSA_PACKET_TYPE_INVALID {
                let since = *self.invalid_since.get_or_insert(now.get());
                if now.get().duration_since(since) >= grace {
                    failure = Some(QueueFault::invalid(
                        ERROR_INVALID_PACKET_FORMAT,
                        format!(
                            "write index {} was rung over packet {} whose header is still INVALID",
                            self.target, self.read_index
                        ),
                    ));
                } else {
                    out.pending = true;
                }
                break;
            }
            self.invalid_since = None;
            if header & (1 << HSA_PACKET_HEADER_BARRIER) != 0 && !self.in_flight.is_empty() {
                out.pending = true;
                break;
            }
            let mut packet = [0u8; AQL_PACKET_SIZE];
            if let Err(e) = mem.read(slot, &mut packet) {
                failure = Some(e.into());
                break;
            }
            let signal = u64::from_le_bytes(packet[56..64].try_into().expect("8 bytes"));
            let start_ts = if signal != 0 { clock::gpu_counter_at(pass.now()) } else { 0 };
            let trace_start = if ctx.trace.enabled() { ctx.trace.now_ns() } else { 0 };
            let read_ptr = self.hw.queue.read_ptr.0;
            let target = self.hw.gfx_target_version;
            let at = gfx::PacketAt { queue_id: self.hw.queue.id, slot, index: self.read_index, read_ptr, target };
            let offload = self.offload(ctx);
            // The packet runs: the time read before it is not its end's.
            pass.now_ns = None;
            let step = match run_packet(mem, ptype, &packet, (at, offload), now, pass, &mut out.interrupts) {
                Ok(s) => s,
                Err(f) => {
                    failure = Some(f);
                    break;
                }
            };
            if matches!(step, Step::Blocked) {
                out.pending = true;
                break;
            }
            if header >> HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE & 0x3 != HSA_FENCE_SCOPE_NONE {
                fence(Ordering::Acquire);
            }
            if let Step::Sliced(work) = step {
                self.current = Some(Current { work, first, signal, start_ts, trace_start });
                out.progressed = true;
                sliced = true;
                break;
            }
            if let Step::Waiting(work) = step {
                self.current = Some(Current { work, first, signal, start_ts, trace_start });
                out.pending = true;
                break;
            }
            let started = (first, signal, start_ts, trace_start);
            if let Err(f) = self.consume(mem, slot, started, step, &mut out, now, (ctx, pass)) {
                failure = Some(f);
                break;
            }
        }
        if out.progressed || failure.is_some() {
            self.hw.queue.set_progress(self.read_index, self.target);
        }
        if let Some(f) = failure {
            self.fail(f, &mut out, ctx.trace);
            return out;
        }
        if sliced || (self.read_index < self.target && (budget == 0 || self.read_index > start_index)) {
            out.pending = true;
        }
        if let Some(d) = self.in_flight.iter().map(|f| f.until).min() {
            out.pending = true;
            out.deadline = Some(d);
        }
        out
    }

    /// The packet at the read index has run (`step`): its header goes back INVALID, the read
    /// index moves past it, and its completion signal is decremented now or when it ends.
    /// `started` is what was read when it started: its first 8 bytes, its completion signal,
    /// the start timestamp and the trace's start time.
    #[allow(clippy::too_many_arguments)]
    fn consume(
        &mut self,
        mem: &mut Mem<'_>,
        slot: u64,
        started: (u64, u64, u64, u64),
        step: Step,
        out: &mut Polled,
        now: &LazyNow,
        (ctx, pass): (&PollCtx, &mut Pass),
    ) -> Result<(), QueueFault> {
        let (first, signal, start_ts, trace_start) = started;
        // Header back to INVALID (barrier bit set), then the read index.
        let invalid = u64::from(HSA_PACKET_TYPE_INVALID) | 1 << HSA_PACKET_HEADER_BARRIER;
        mem.store_u64(slot, (first & !0xFFFF) | invalid, Ordering::Release)?;
        mem.store_u64(self.hw.queue.read_ptr.0, self.read_index + 1, Ordering::Release)?;
        if ctx.trace.enabled() {
            let kind = TraceKind::Packet { queue: self.hw.queue.id, index: self.read_index, packet_type: first as u8 };
            ctx.trace.record(self.hw.process.pid, trace_start, kind);
        }
        self.read_index += 1;
        out.progressed = true;
        // Injected delay: the packet stays running for that long.
        let step = match (step, self.faults.completion_delay()) {
            (Step::Done(events), Some(d)) => {
                out.events.extend(events);
                Step::Running(now.get() + d)
            }
            (s, _) => s,
        };
        match step {
            Step::Done(events) => {
                out.events.extend(events);
                fence(Ordering::Release);
                if signal != 0 {
                    // The end timestamp's read also starts the next packet and checks the slice.
                    let end_ns = pass.now();
                    out.events.extend(signal::complete(mem, signal, start_ts, clock::gpu_counter_at(end_ns))?);
                }
            }
            Step::Running(until) => self.in_flight.push_back(InFlight { until, signal, start_ts }),
            Step::Blocked | Step::Sliced(_) | Step::Waiting(_) => {
                unreachable!("a packet that has not finished is not consumed")
            }
        }
        Ok(())
    }

    /// Whether only a doorbell can give this queue work: then a poll that finds the doorbell
    /// unchanged returns at once (see [`super::Quiet`]).
    pub fn quiet(&self) -> Option<super::Quiet> {
        if self.stopped {
            return Some(super::Quiet::Stopped);
        }
        let drained = self.read_index >= self.target && self.in_flight.is_empty() && self.current.is_none();
        drained.then_some(super::Quiet::Until(self.last_doorbell))
    }

    /// Stops the queue and reports why (queue_inactive_signal, HW-exception / queue or memory
    /// events), as the trap handler and KFD do.
    fn fail(&mut self, fault: QueueFault, out: &mut Polled, trace: &Trace) {
        self.stopped = true;
        let process = self.hw.process.clone();
        let gpu_id = self.hw.queue.gpu_id;
        if let QueueFault::Invalid { code, .. } = &fault {
            // The queue's amd_queue_t holds the read pointer it was created with; its
            // queue_inactive_signal receives the error code.
            let mut mem = Mem::new(&process, gpu_id, &mut self.tlb, &self.faults);
            let field = amd_queue_field(self.hw.queue.read_ptr.0, uapi::queue::AMD_QUEUE_INACTIVE_SIGNAL_OFFSET);
            let inactive = field.and_then(|va| mem.load_u64(va, Ordering::Acquire).ok());
            if let Some(sig) = inactive.filter(|s| *s != 0) {
                // A handle whose value field would wrap around the address space is not mapped.
                let value = sig.checked_add(uapi::signal::AMD_SIGNAL_VALUE_OFFSET as u64);
                let first = value.map(|va| mem.swap_i64(va, *code as i64, Ordering::AcqRel));
                if first == Some(Ok(0)) {
                    if let Ok(Some(ev)) = signal::notify(&mut mem, sig) {
                        out.events.push(ev);
                    }
                }
            }
        }
        super::report_fault(&self.hw, &fault, trace);
    }

    /// A poll of this queue panicked (a bug in the command processor): the queue stops with an
    /// error its client sees, as a hung queue would be reset, and the other queues go on.
    pub fn internal_error(&mut self, what: &str, trace: &Trace) -> Polled {
        let mut out = Polled::default();
        let reason = format!("internal error in the soft command processor at packet {}: {what}", self.read_index);
        self.fail(QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason), &mut out, trace);
        out
    }

    /// Stops the queue with `fault` (memory it depends on is gone), unless it stopped already.
    pub fn lose(&mut self, fault: QueueFault, trace: &Trace) -> Polled {
        let mut out = Polled::default();
        if !self.stopped {
            self.fail(fault, &mut out, trace);
        }
        out
    }

    /// The queue is being destroyed: returns the events of the completion signals of packets
    /// that will never run, whose waiters are then woken with FAIL (the signals keep their
    /// values).
    pub fn abandon(&mut self) -> Vec<u32> {
        let mut events = Vec::new();
        // Packets rung since the last poll are pending too.
        let db = self.hw.doorbell();
        if db != u64::MAX {
            self.target = self.target.max(db.wrapping_add(1));
        }
        let (ring_base, ring_size) = {
            let p = self.hw.queue.props();
            (p.ring_base.0, p.ring_size)
        };
        let mut mem = Mem::new(&self.hw.process, self.hw.queue.gpu_id, &mut self.tlb, &self.faults);
        // A packet part way through is still at the read index: it is counted below.
        self.current = None;
        let mut signals: Vec<u64> = self.in_flight.drain(..).map(|f| f.signal).collect();
        let slots = ring_size / AQL_PACKET_SIZE as u64;
        if ring_base != 0 && slots > 0 {
            for idx in self.read_index..self.target.min(self.read_index.saturating_add(slots)) {
                let slot = ring_base + (idx % slots) * AQL_PACKET_SIZE as u64;
                if let Ok(s) = mem.load_u64(slot + 56, Ordering::Acquire) {
                    signals.push(s);
                }
            }
        }
        // Their mailboxes stay unwritten: nothing completed.
        for s in signals.into_iter().filter(|s| *s != 0) {
            if let Ok(Some(ev)) = signal::event_of(&mut mem, s) {
                events.push(ev);
            }
        }
        events
    }
}

/// Runs one packet of type `ptype`.
fn run_packet(
    mem: &mut Mem,
    ptype: u8,
    packet: &[u8; AQL_PACKET_SIZE],
    (at, offload): (gfx::PacketAt, Option<Offload>),
    now: &LazyNow,
    pass: &mut Pass,
    interrupts: &mut Vec<Interrupt>,
) -> Result<Step, QueueFault> {
    match ptype {
        HSA_PACKET_TYPE_BARRIER_AND | HSA_PACKET_TYPE_BARRIER_OR => {
            let p = BarrierPacket::read_from_bytes(packet).expect("64 bytes");
            let mut any = false;
            let mut all = true;
            for dep in p.dep_signal.iter().copied().filter(|d| *d != 0) {
                let done = signal::load(mem, dep)? == 0;
                any |= done;
                all &= done;
            }
            let ready = if ptype == HSA_PACKET_TYPE_BARRIER_AND { all } else { any };
            Ok(if ready { Step::Done(Vec::new()) } else { Step::Blocked })
        }
        HSA_PACKET_TYPE_VENDOR_SPECIFIC => {
            let format = AmdVendorPacketHeader::read_from_bytes(&packet[..4]).expect("4 bytes").amd_format;
            if format == AMD_AQL_FORMAT_PM4_IB {
                let p = AmdAqlPm4IbPacket::read_from_bytes(packet).expect("64 bytes");
                let mut ib = pm4_ib::start(mem, &p, at.target, at.queue_id)?;
                return Ok(match ib.resume(mem, pass.deadline(), interrupts, offload)? {
                    IbProgress::Finished => Step::Done(Vec::new()),
                    IbProgress::Paused => Step::Sliced(Work::Pm4(ib)),
                    IbProgress::Blocked => Step::Waiting(Work::Pm4(ib)),
                });
            }
            if format != HSA_AMD_PACKET_TYPE_BARRIER_VALUE {
                return Err(QueueFault::invalid(
                    ERROR_INVALID_PACKET_FORMAT,
                    format!(
                        "unknown AMD vendor packet format {format} (this device runs {AMD_AQL_FORMAT_PM4_IB}, PM4_IB, \
                         and {HSA_AMD_PACKET_TYPE_BARRIER_VALUE}, BARRIER_VALUE)"
                    ),
                ));
            }
            let p = AmdBarrierValuePacket::read_from_bytes(packet).expect("64 bytes");
            if p.signal == 0 {
                return Err(QueueFault::invalid(
                    ERROR_INVALID_PACKET_FORMAT,
                    "barrier-value packet without a signal".into(),
                ));
            }
            let v = signal::load(mem, p.signal)? & p.mask;
            let ready = match p.cond {
                HSA_SIGNAL_CONDITION_EQ => v == p.value,
                HSA_SIGNAL_CONDITION_NE => v != p.value,
                HSA_SIGNAL_CONDITION_LT => v < p.value,
                HSA_SIGNAL_CONDITION_GTE => v >= p.value,
                c => {
                    return Err(QueueFault::invalid(
                        ERROR_INVALID_PACKET_FORMAT,
                        format!("barrier-value condition {c} is not a signal condition"),
                    ))
                }
            };
            Ok(if ready { Step::Done(Vec::new()) } else { Step::Blocked })
        }
        HSA_PACKET_TYPE_KERNEL_DISPATCH => {
            let p = KernelDispatchPacket::read_from_bytes(packet).expect("64 bytes");
            let mut raw = [0u8; 64];
            mem.read(p.kernel_object, &mut raw)?;
            let desc = SoftKernelDescriptor::read_from_bytes(&raw).expect("64 bytes");
            if desc.magic != SOFT_KERNEL_MAGIC {
                // GFX code: the shader core runs it.
                let mut work = gfx::start(mem, &p, at, &raw, interrupts)?;
                return Ok(match work.resume(mem, pass.deadline(), interrupts, offload)? {
                    gfx::Progress::Finished => Step::Done(Vec::new()),
                    gfx::Progress::Paused => Step::Sliced(Work::Shader(Box::new(work))),
                    gfx::Progress::Blocked => Step::Waiting(Work::Shader(Box::new(work))),
                });
            }
            match kernels::run(mem, &p, &desc, pass.deadline())? {
                Ran::Done { events } => Ok(Step::Done(events)),
                Ran::Running(d) => Ok(Step::Running(now.get() + d)),
                Ran::Sliced(work) => Ok(Step::Sliced(Work::Kernel(work))),
            }
        }
        HSA_PACKET_TYPE_AGENT_DISPATCH => Err(QueueFault::invalid(
            ERROR_INVALID_PACKET_FORMAT,
            "agent dispatch packets are not supported by this device".into(),
        )),
        t => Err(QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, format!("unknown packet type {t}"))),
    }
}

/// Whether packet `read_index`, at or past the doorbell target, is published below the write
/// index. Producers ring the doorbell with plain stores, so a late, smaller index can overwrite
/// a larger one before the engine saw it; like the CP, which reads the write pointer and stops at
/// an INVALID header, the engine still runs what was published. An INVALID slot here is no error:
/// nobody rang over it.
///
/// The slot's header is looked at first: it is the line the engine itself wrote last (it set
/// the header INVALID when it consumed the slot a ring ago), so a drained queue, whose next slot
/// is INVALID, costs no read of the write index, a line the client writes on every reserve.
/// A header published after its slot was reserved means the write index is past it already.
fn published_past_target(mem: &mut Mem, write_ptr: u64, read_index: u64, ring_base: u64, slots: u64) -> bool {
    let slot = ring_base + (read_index % slots) * AQL_PACKET_SIZE as u64;
    if !matches!(mem.load_u64(slot, Ordering::Acquire), Ok(w) if w as u8 != HSA_PACKET_TYPE_INVALID) {
        return false;
    }
    let Ok(write) = mem.load_u64(write_ptr, Ordering::Acquire) else { return false };
    write > read_index && write - read_index <= slots
}

#[cfg(test)]
mod tests {
    use super::amd_queue_field;
    use uapi::queue::{AMD_QUEUE_INACTIVE_SIGNAL_OFFSET, AMD_QUEUE_READ_DISPATCH_ID_OFFSET};

    #[test]
    fn a_read_pointer_near_either_end_of_the_address_space_has_no_queue_fields() {
        let rd = AMD_QUEUE_READ_DISPATCH_ID_OFFSET as u64;
        let inactive = AMD_QUEUE_INACTIVE_SIGNAL_OFFSET;
        // The fuzzer's queue with its read pointer at GPU address 8 (once an overflow panic).
        assert_eq!(amd_queue_field(8, inactive), None);
        assert_eq!(amd_queue_field(rd - 1, inactive), None);
        assert_eq!(amd_queue_field(rd, inactive), Some(inactive as u64));
        assert_eq!(amd_queue_field(0x1000 + rd, inactive), Some(0x1000 + inactive as u64));
        assert_eq!(amd_queue_field(u64::MAX, inactive), None);
    }
}
