//! The packet processor of a PM4 compute queue or an SDMA queue: a byte ring of dwords that
//! the client fills and announces with a write pointer on the doorbell.
//!
//! Pointer units, as gfx9+ hardware and its clients use them (AMD kfdtest PM4Queue.cpp and
//! SDMAQueue.cpp; amdgpu gfx_v9_0 / sdma_v4_0 set_wptr):
//! - PM4: the doorbell carries the 64-bit write pointer in dwords; the read pointer is written
//!   back as a 32-bit dword offset into the ring (it wraps at the ring size).
//! - SDMA: the doorbell carries the 64-bit write pointer in bytes (a multiple of 4); the read
//!   pointer is written back as a 64-bit byte count that does not wrap.
//!
//! Packets run in ring order, each exactly once; the read pointer moves past a packet once it
//! has run. A poll that is not yet true (WAIT_REG_MEM, POLL_REGMEM) stops the queue there and
//! is polled again, as an AQL barrier is. An indirect buffer runs to its end before the ring
//! moves past the packet that called it; IBs nest up to [`MAX_IB_DEPTH`] deep.

pub(super) mod compute;
mod pm4;
pub mod pm4_ib;
mod sdma;

use super::fault::{QueueFault, ERROR_INVALID_PACKET_FORMAT};
use super::grid::Offload;
use super::mem::{Mem, Tlb};
use super::runner::{Deadline, Interrupt, LazyNow, PollCtx, Polled, PropsCache};
use super::HwQueue;
use crate::faults::Faults;
use crate::queue::QueueType;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Packets one queue runs per pass before the others get a turn.
const BUDGET: u32 = 256;
/// How deep indirect buffers may call indirect buffers (the CP has IB1 and IB2; a little more
/// room, but a self-calling IB must end in a queue error, not a hang).
pub const MAX_IB_DEPTH: usize = 4;

/// What a packet did.
#[derive(Debug)]
pub enum Action {
    Done,
    /// Done, and it raised an interrupt.
    Interrupt(Interrupt),
    /// A poll that is not true yet, or a dispatch on the shader workers: run the packet again
    /// later.
    Blocked,
    /// Started and not finished within the time slice: the packet goes on from where it
    /// stopped in the next pass.
    Sliced,
    /// Run `dwords` dwords at `base`, then continue after this packet (or, chained, after the
    /// calling IB).
    Indirect {
        base: u64,
        dwords: u64,
        chain: bool,
    },
}

/// The compare functions of WAIT_REG_MEM and POLL_REGMEM (same encoding in both).
#[derive(Debug, Clone, Copy)]
pub enum WaitFunction {
    Always,
    Less,
    LessEqual,
    Equal,
    NotEqual,
    GreaterEqual,
    Greater,
}

impl WaitFunction {
    pub fn decode(f: u32) -> Option<WaitFunction> {
        Some(match f {
            0 => WaitFunction::Always,
            1 => WaitFunction::Less,
            2 => WaitFunction::LessEqual,
            3 => WaitFunction::Equal,
            4 => WaitFunction::NotEqual,
            5 => WaitFunction::GreaterEqual,
            6 => WaitFunction::Greater,
            _ => return None,
        })
    }

    /// Whether `value FUNCTION reference` holds.
    pub fn holds(self, value: u32, reference: u32) -> bool {
        match self {
            WaitFunction::Always => true,
            WaitFunction::Less => value < reference,
            WaitFunction::LessEqual => value <= reference,
            WaitFunction::Equal => value == reference,
            WaitFunction::NotEqual => value != reference,
            WaitFunction::GreaterEqual => value >= reference,
            WaitFunction::Greater => value > reference,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pm4,
    Sdma,
}

/// An indirect buffer being run.
#[derive(Debug)]
struct Frame {
    base: u64,
    dwords: u64,
    pos: u64,
}

/// What one step did.
enum Stepped {
    Ran(Option<Interrupt>),
    /// Nothing to run: the ring is empty up to the write pointer, or its next packet is not
    /// all there yet.
    Idle,
    Blocked,
    /// The packet ran part of its work and goes on in the next pass.
    Sliced,
}

pub struct RingRunner {
    pub hw: Arc<HwQueue>,
    faults: Arc<Faults>,
    tlb: Tlb,
    kind: Kind,
    /// Dwords consumed from the ring (does not wrap).
    rptr: u64,
    /// The write pointer last rung, in dwords.
    target: u64,
    last_doorbell: u64,
    ibs: Vec<Frame>,
    /// Where the ring continues once the IB stack is done.
    ib_return: u64,
    /// Bytes of the packet at the read position that ran in earlier passes (a sliced COPY or
    /// CONST_FILL).
    resume: u64,
    /// PM4: the compute pipe's shader registers and running dispatch.
    compute: compute::Compute,
    stopped: bool,
    props: PropsCache,
}

impl RingRunner {
    /// A runner for a PM4 or SDMA queue; a new queue starts at ring offset 0, as a fresh MQD.
    pub fn new(hw: Arc<HwQueue>, faults: Arc<Faults>) -> RingRunner {
        let (gfx_target_version, queue_id) = (hw.gfx_target_version, hw.queue.id);
        let kind = if hw.queue.queue_type == QueueType::Compute { Kind::Pm4 } else { Kind::Sdma };
        RingRunner {
            hw,
            faults,
            tlb: Tlb::default(),
            kind,
            rptr: 0,
            target: 0,
            last_doorbell: u64::MAX,
            ibs: Vec::new(),
            ib_return: 0,
            resume: 0,
            compute: compute::Compute::new(gfx_target_version, queue_id),
            stopped: false,
            props: PropsCache::default(),
        }
    }

    /// Whether only a doorbell can give this queue work: then a poll that finds the doorbell
    /// unchanged returns at once (see [`super::Quiet`]).
    pub fn quiet(&self) -> Option<super::Quiet> {
        if self.stopped {
            return Some(super::Quiet::Stopped);
        }
        (self.rptr >= self.target && self.ibs.is_empty()).then_some(super::Quiet::Until(self.last_doorbell))
    }

    /// Bytes per unit of the doorbell / pointers.
    fn unit(&self) -> u64 {
        match self.kind {
            Kind::Pm4 => 4,
            Kind::Sdma => 1,
        }
    }

    pub fn poll(&mut self, _now: &LazyNow, ctx: &PollCtx) -> Polled {
        let mut out = Polled::default();
        if self.stopped || self.faults.is_hung(self.hw.queue.id) {
            return out;
        }
        if self.faults.panics(self.hw.queue.id) {
            panic!("fault injection: panic-queue={}", self.hw.queue.id);
        }
        let db = self.hw.doorbell();
        if db != self.last_doorbell {
            self.last_doorbell = db;
            if db != crate::queue::doorbell::UNRUNG {
                let bytes = db.saturating_mul(self.unit());
                if !bytes.is_multiple_of(4) {
                    let reason = format!("SDMA write pointer {db} is not a whole number of dwords");
                    self.fail(QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason), ctx);
                    return out;
                }
                self.target = self.target.max(bytes / 4);
            }
        }
        if self.rptr >= self.target && self.ibs.is_empty() {
            return out;
        }
        let props = self.props.get(&self.hw.queue);
        let (ring_base, ring_size, active) = (props.base, props.size, props.active);
        if !active {
            return out;
        }
        let ring_dwords = ring_size / 4;
        if self.target - self.rptr > ring_dwords {
            let reason = format!(
                "write pointer {} is more than a ring ({ring_size} bytes) ahead of read pointer {}",
                self.target * 4 / self.unit(),
                self.rptr * 4 / self.unit()
            );
            self.fail(QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason), ctx);
            return out;
        }
        let process = self.hw.process.clone();
        let queue = self.hw.queue.clone();
        let mut mem = Mem::new(&process, self.hw.queue.gpu_id, &mut self.tlb, &self.faults);
        let offload = ctx.pool.map(|pool| Offload { pool, process: &process, faults: &self.faults, queue: &queue });
        let mut budget = BUDGET;
        let mut failure = None;
        let start = self.rptr;
        let deadline = Deadline::after(ctx.slice);
        while budget > 0 {
            if budget < BUDGET && deadline.passed() {
                out.pending = true;
                break;
            }
            let at = Position { ibs: &mut self.ibs, rptr: &mut self.rptr, ib_return: &mut self.ib_return };
            let stepped = step(
                self.kind,
                at,
                (&mut self.resume, &mut self.compute, offload),
                deadline,
                self.target,
                &mut mem,
                ring_base,
                ring_dwords,
            );
            out.interrupts.append(&mut self.compute.interrupts);
            match stepped {
                Ok(Stepped::Ran(int)) => {
                    budget -= 1;
                    out.progressed = true;
                    out.interrupts.extend(int);
                }
                Ok(Stepped::Idle) => break,
                Ok(Stepped::Blocked) => {
                    out.pending = true;
                    break;
                }
                Ok(Stepped::Sliced) => {
                    out.progressed = true;
                    out.pending = true;
                    break;
                }
                Err(f) => {
                    failure = Some(f);
                    break;
                }
            }
        }
        if self.rptr != start {
            let rptr_va = self.hw.queue.read_ptr.0;
            let written = match self.kind {
                Kind::Pm4 => mem.store_u32(rptr_va, (self.rptr % ring_dwords) as u32, Ordering::Release),
                Kind::Sdma => mem.store_u64(rptr_va, self.rptr * 4, Ordering::Release),
            };
            if let Err(e) = written {
                failure.get_or_insert(e.into());
            }
        }
        if out.progressed || failure.is_some() {
            let unit = self.unit();
            self.hw.queue.set_progress(self.rptr * 4 / unit, self.target * 4 / unit);
        }
        if let Some(f) = failure {
            self.fail(f, ctx);
            return out;
        }
        if budget == 0 {
            out.pending = true;
        }
        out
    }

    fn fail(&mut self, fault: QueueFault, ctx: &PollCtx) {
        self.stopped = true;
        self.compute.abandon();
        super::report_fault(&self.hw, &fault, ctx.trace);
    }

    /// A poll of this queue panicked: the queue stops with an error its client sees.
    pub fn internal_error(&mut self, what: &str, ctx: &PollCtx) -> Polled {
        let reason = format!("internal error in the soft command processor at ring dword {}: {what}", self.rptr);
        self.fail(QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason), ctx);
        Polled::default()
    }

    /// Stops the queue with `fault` (memory it depends on is gone), unless it stopped already.
    pub fn lose(&mut self, fault: QueueFault, ctx: &PollCtx) -> Polled {
        if !self.stopped {
            self.fail(fault, ctx);
        }
        Polled::default()
    }

    /// The queue is being destroyed: ring packets carry no completion signals, so nobody waits
    /// on the packets that will not run.
    pub fn abandon(&mut self) -> Vec<u32> {
        self.compute.abandon();
        Vec::new()
    }
}

/// Where a ring runner reads: its indirect-buffer stack, its ring read pointer and where the
/// ring goes on after the IBs.
struct Position<'a> {
    ibs: &'a mut Vec<Frame>,
    rptr: &'a mut u64,
    ib_return: &'a mut u64,
}

/// Runs the next packet: from the innermost indirect buffer, else from the ring. `resume` is
/// how far a sliced packet got in earlier passes (see [`Action::Sliced`]); `compute` the PM4
/// queue's shader registers and running dispatch, `offload` how its dispatches reach the
/// shader workers, if the engine has them.
#[allow(clippy::too_many_arguments)]
fn step(
    kind: Kind,
    at: Position,
    (resume, compute, offload): (&mut u64, &mut compute::Compute, Option<Offload>),
    deadline: Deadline,
    target: u64,
    mem: &mut Mem,
    ring_base: u64,
    ring_dwords: u64,
) -> Result<Stepped, QueueFault> {
    let Position { ibs, rptr, ib_return } = at;
    let bad = |reason: String| QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason);
    // The packet's length and where it is.
    let packet = if let Some(top) = ibs.last() {
        if top.pos >= top.dwords {
            ibs.pop();
            if ibs.is_empty() {
                *rptr = *ib_return;
            }
            return Ok(Stepped::Ran(None));
        }
        let at = top.base.wrapping_add(top.pos * 4);
        let avail = top.dwords - top.pos;
        let header = mem.load_u32(at, Ordering::Acquire)?;
        let len = packet_length(kind, header, avail, |i| Ok(mem.load_u32(at.wrapping_add(i * 4), Ordering::Acquire)?))?;
        match len {
            Some(n) if n <= avail => (n, Src::Ib(at)),
            _ => return Err(bad(format!("a packet at {at:#x} runs past the end of its indirect buffer"))),
        }
    } else {
        if *rptr >= target {
            return Ok(Stepped::Idle);
        }
        let avail = target - *rptr;
        let slot = |i: u64| ring_base + ((*rptr + i) % ring_dwords) * 4;
        let header = mem.load_u32(slot(0), Ordering::Acquire)?;
        let len = packet_length(kind, header, avail, |i| Ok(mem.load_u32(slot(i), Ordering::Acquire)?))?;
        match len {
            Some(n) if n > ring_dwords => {
                return Err(bad(format!("a packet of {n} dwords at ring dword {rptr} is larger than the ring")))
            }
            Some(n) if n <= avail => (n, Src::Ring(*rptr)),
            // The rest of the packet is not written yet: the CP waits for the write pointer.
            _ => return Ok(Stepped::Idle),
        }
    };
    let (len, src) = packet;
    let read = |mem: &mut Mem, first: u64, n: u64| match src {
        Src::Ib(at) => {
            let mut bytes = vec![0u8; n as usize * 4];
            mem.read(at.wrapping_add(first * 4), &mut bytes)?;
            Ok::<_, QueueFault>(dwords(&bytes))
        }
        Src::Ring(from) => read_ring(mem, ring_base, ring_dwords, from + first, n),
    };
    let head = read(mem, 0, len.min(MAX_READ_DWORDS))?;
    let action = if len > MAX_READ_DWORDS {
        // Only an SDMA WRITE is this long (up to 2^22 dwords of inline data): its data goes
        // to memory a bounded piece at a time instead of through one buffer its size.
        if kind != Kind::Sdma || head[0] as u8 != sdma::OP_WRITE {
            return Err(bad(format!("a packet of {len} dwords (header {:#010x}) is too long", head[0])));
        }
        let dst = u64::from(head[1]) | u64::from(head[2]) << 32;
        let mut off = 0;
        while off < len {
            let data = if off == 0 { head[4..].to_vec() } else { read(mem, off, (len - off).min(MAX_READ_DWORDS))? };
            let at = dst.wrapping_add(if off == 0 { 0 } else { (off - 4) * 4 });
            let bytes: Vec<u8> = data.iter().flat_map(|d| d.to_le_bytes()).collect();
            mem.write(at, &bytes)?;
            off += if off == 0 { MAX_READ_DWORDS } else { data.len() as u64 };
        }
        Action::Done
    } else {
        match kind {
            Kind::Pm4 => match (head[0] >> 8) as u8 {
                _ if head[0] >> 30 != 3 => pm4::exec(mem, &head)?,
                compute::SET_SH_REG => compute.set_sh_reg(&head)?,
                compute::SET_BASE => compute.set_base(&head)?,
                compute::DISPATCH_DIRECT => compute.dispatch_direct(mem, &head, deadline, offload)?,
                compute::DISPATCH_INDIRECT => compute.dispatch_indirect(mem, &head, deadline, offload)?,
                _ => pm4::exec(mem, &head)?,
            },
            Kind::Sdma => sdma::exec(mem, &head, resume, deadline)?,
        }
    };
    if matches!(action, Action::Sliced) {
        return Ok(Stepped::Sliced);
    }
    // Whatever the packet did, the next one starts from its beginning.
    *resume = 0;
    let advance = |ibs: &mut Vec<Frame>, rptr: &mut u64| match ibs.last_mut() {
        Some(top) => top.pos += len,
        None => *rptr += len,
    };
    match action {
        Action::Blocked => return Ok(Stepped::Blocked),
        Action::Sliced => unreachable!("returned above"),
        Action::Done => advance(ibs, rptr),
        Action::Interrupt(i) => {
            advance(ibs, rptr);
            return Ok(Stepped::Ran(Some(i)));
        }
        Action::Indirect { base, dwords, chain } => {
            if ibs.is_empty() {
                if chain {
                    return Err(bad("a chained INDIRECT_BUFFER on the ring (chaining is for IBs)".into()));
                }
                *ib_return = *rptr + len;
            } else if chain {
                // The called IB replaces the caller: the caller's rest never runs.
                ibs.pop();
            } else {
                advance(ibs, rptr);
            }
            if ibs.len() >= MAX_IB_DEPTH {
                return Err(bad(format!("indirect buffers nested deeper than {MAX_IB_DEPTH}")));
            }
            if !base.is_multiple_of(4) {
                return Err(bad(format!("indirect buffer at {base:#x} is not dword aligned")));
            }
            ibs.push(Frame { base, dwords, pos: 0 });
        }
    }
    Ok(Stepped::Ran(None))
}

fn packet_length(
    kind: Kind,
    header: u32,
    avail: u64,
    mut dword: impl FnMut(u64) -> Result<u32, QueueFault>,
) -> Result<Option<u64>, QueueFault> {
    match kind {
        Kind::Pm4 => pm4::length(header).map(Some),
        Kind::Sdma => sdma::length(header, |i| if i < avail { dword(i).map(Some) } else { Ok(None) }),
    }
}

/// Where a packet is read from: an indirect buffer at a GPU address, or the ring from a dword.
#[derive(Clone, Copy)]
enum Src {
    Ib(u64),
    Ring(u64),
}

/// The most dwords of a packet read into the daemon at once (256 KiB); longer packets (an
/// SDMA WRITE) are streamed.
const MAX_READ_DWORDS: u64 = 1 << 16;

/// `n` dwords of the ring from dword `from` (which wraps), in at most two reads.
fn read_ring(mem: &mut Mem, ring_base: u64, ring_dwords: u64, from: u64, n: u64) -> Result<Vec<u32>, QueueFault> {
    let start = from % ring_dwords;
    let first = n.min(ring_dwords - start);
    let mut bytes = vec![0u8; n as usize * 4];
    mem.read(ring_base + start * 4, &mut bytes[..first as usize * 4])?;
    if first < n {
        mem.read(ring_base, &mut bytes[first as usize * 4..])?;
    }
    Ok(dwords(&bytes))
}

fn dwords(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_functions_compare_value_with_reference() {
        let table = [(0, [true, true, true]), (1, [true, false, false]), (2, [true, true, false])];
        for (f, want) in table {
            let f = WaitFunction::decode(f).unwrap();
            assert_eq!([f.holds(1, 2), f.holds(2, 2), f.holds(3, 2)], want, "{f:?}");
        }
        let table =
            [(3, [false, true, false]), (4, [true, false, true]), (5, [false, true, true]), (6, [false, false, true])];
        for (f, want) in table {
            let f = WaitFunction::decode(f).unwrap();
            assert_eq!([f.holds(1, 2), f.holds(2, 2), f.holds(3, 2)], want, "{f:?}");
        }
        assert!(WaitFunction::decode(7).is_none());
    }

    #[test]
    fn wait_functions_decode_only_the_seven_encodings() {
        for f in 0..7 {
            assert!(WaitFunction::decode(f).is_some(), "{f}");
        }
        for f in [7, 8, 0xF, u32::MAX] {
            assert!(WaitFunction::decode(f).is_none(), "{f}");
        }
        assert!(WaitFunction::decode(0).unwrap().holds(u32::MAX, 0), "ALWAYS ignores both sides");
        assert!(WaitFunction::decode(5).unwrap().holds(u32::MAX, u32::MAX), "comparisons are unsigned");
        assert!(!WaitFunction::decode(1).unwrap().holds(u32::MAX, 0));
    }

    #[test]
    fn an_sdma_length_in_a_dword_not_yet_rung_is_not_known_yet() {
        let dword = |i: u64| -> Result<u32, QueueFault> { Ok(if i == 3 { 2 } else { 0 }) };
        let write = u32::from(sdma::OP_WRITE);
        assert_eq!(packet_length(Kind::Sdma, write, 3, dword).unwrap(), None, "dword 3 is past the write pointer");
        assert_eq!(packet_length(Kind::Sdma, write, 4, dword).unwrap(), Some(7));
        // PM4 lengths are in the header: nothing else is read.
        let never = |_: u64| -> Result<u32, QueueFault> { panic!("a PM4 length read a body dword") };
        assert_eq!(packet_length(Kind::Pm4, 3 << 30 | 2 << 16, 1, never).unwrap(), Some(4));
    }
}
