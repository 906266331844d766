//! What every queue runner (AQL in `aql.rs`, PM4 and SDMA rings in `ring/`) shares with the
//! engine loop: the time of a pass, what a poll needs and reports, the interrupts packets
//! raise, and the cached ring properties of the queue.

use crate::queue::Queue;
use crate::trace::Trace;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// The time of this pass, read from the clock only if someone asks.
#[derive(Default)]
pub struct LazyNow(Cell<Option<Instant>>);

impl LazyNow {
    pub fn get(&self) -> Instant {
        match self.0.get() {
            Some(t) => t,
            None => {
                let t = Instant::now();
                self.0.set(Some(t));
                t
            }
        }
    }
}

/// How long one queue may run packets in one pass before the engine moves on to the next queue
/// (a packet that needs longer goes on in its next pass, see `kernels::Work`), so that one
/// client's expensive packets delay another's by about a slice per busy queue.
pub const SLICE: Duration = Duration::from_millis(1);

/// The end of a pass's time slice on the device clock (CLOCK_MONOTONIC_RAW ns, see
/// crate::clock), the clock packet timestamps come from: one read serves as the slice's start
/// and the first packet's start timestamp, one as a packet's end timestamp and the check before
/// the next packet.
#[derive(Clone, Copy, Debug)]
pub struct Deadline(u64);

impl Deadline {
    /// `slice` after `start_ns` (a [`crate::clock::cpu_clock_counter`] reading).
    pub fn at(start_ns: u64, slice: Duration) -> Deadline {
        Deadline(start_ns.saturating_add(u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX)))
    }

    /// `slice` from now.
    pub fn after(slice: Duration) -> Deadline {
        Deadline::at(crate::clock::cpu_clock_counter(), slice)
    }

    /// Whether the slice has ended (reads the clock).
    pub fn passed(self) -> bool {
        self.passed_at(crate::clock::cpu_clock_counter())
    }

    /// Whether the slice had ended at `now_ns`.
    pub fn passed_at(self, now_ns: u64) -> bool {
        now_ns >= self.0
    }
}

/// What every poll needs from the engine.
pub struct PollCtx<'a> {
    pub grace: Duration,
    pub trace: &'a Trace,
    /// The time slice of this poll ([`SLICE`]), counted from when the queue starts running.
    pub slice: Duration,
    /// The shader core's workers, if the engine has them.
    pub pool: Option<&'a super::workers::Pool>,
}

/// What happened in one poll of a queue.
#[derive(Debug, Default)]
pub struct Polled {
    pub progressed: bool,
    /// Work is waiting on something other than a doorbell (a barrier, a running kernel, a
    /// packet being published): keep polling.
    pub pending: bool,
    pub deadline: Option<Instant>,
    /// KFD events to raise in the queue's process.
    pub events: Vec<u32>,
    /// Interrupts PM4 and SDMA packets raised, in order.
    pub interrupts: Vec<Interrupt>,
}

/// An interrupt a PM4 or SDMA packet raised, as it reaches amdkfd through the IH ring: a
/// RELEASE_MEM with INT_SEL is a CP end-of-pipe interrupt whose context id is the packet's
/// INT_CTXID (32 valid bits); an SDMA TRAP is an SDMA trap interrupt with its 28-bit
/// INT_CONTEXT. amdkfd (kfd_int_process_v9.c) hands both to kfd_signal_event_interrupt: the
/// signal event with that id is set if its event-page slot was written (the packet before
/// writes the id there, as kfdtest does), otherwise every event whose slot was written is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupt {
    pub context_id: u32,
    pub valid_bits: u32,
}

/// The ring a queue runs from, as of its last UPDATE_QUEUE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingProps {
    pub base: u64,
    /// Bytes.
    pub size: u64,
    /// False while UPDATE_QUEUE stalls the queue (0% or a null ring).
    pub active: bool,
}

/// A queue's ring properties, reread only when UPDATE_QUEUE changed them (the engine polls
/// far more often than clients update queues).
#[derive(Debug)]
pub struct PropsCache {
    generation: u64,
    props: RingProps,
}

impl Default for PropsCache {
    fn default() -> PropsCache {
        PropsCache { generation: u64::MAX, props: RingProps { base: 0, size: 0, active: false } }
    }
}

impl PropsCache {
    pub fn get(&mut self, queue: &Queue) -> RingProps {
        let g = queue.props_generation();
        if g != self.generation {
            let p = queue.props();
            self.generation = g;
            self.props = RingProps { base: p.ring_base.0, size: p.ring_size, active: p.is_active() };
        }
        self.props
    }
}
