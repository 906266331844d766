//! Which request a FUSE_INTERRUPT is for, without letting one client's interrupts push out
//! another's.
//!
//! What the kernel guarantees (fs/fuse/dev.c, v6.6):
//! * an INTERRUPT frame names only the unique of the interrupted request (`fuse_read_interrupt`:
//!   the header's pid, uid and gid are zero), so nothing in it says whose it is;
//! * it is queued only for a request the daemon has already read (`request_wait_answer` queues
//!   it if FR_SENT; `fuse_dev_do_read` queues it right after setting FR_SENT), and a still-queued
//!   one is taken off the queue when its request ends (`fuse_request_end`);
//! * a reply of -EAGAIN to the interrupt (header unique = the request's unique | FUSE_INT_REQ_BIT)
//!   queues it again if the request is still in the daemon, and is ENOENT otherwise
//!   (`fuse_dev_do_write`).
//!
//! So an interrupt for a unique the daemon does not know is one of two things: racing (another
//! reader thread read the request and has not registered it yet) or stale (it was read before
//! its request was answered and handled after). Both are rare and short-lived; neither can be
//! told from the other by the frame.
//!
//! The design:
//! * every request is registered (unique -> the process it came from) as soon as a reader has
//!   decoded it, and forgotten when its reply goes out (every reply passes [`Interrupts::answered`]);
//!   an interrupt for a registered request marks it, and the session ends its wait;
//! * each process keeps a ring of the last [`RING`] uniques answered to it: an interrupt for one
//!   of them is stale, dropped and logged against that process;
//! * anything else is kept pending, at most [`MAX_PENDING`] of them and for at most [`EXPIRY`]:
//!   the registration of a racing request claims its interrupt from there. One that expires or
//!   is pushed out is not dropped but handed back to the kernel (-EAGAIN): if its request still
//!   lives the kernel sends it again, otherwise it is gone. Eviction therefore loses nothing, and
//!   no client can make the daemon forget another client's interrupt: the worst a flood of
//!   unknown uniques does is bounce interrupts through the kernel once more.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Uniques remembered per process after their reply: a stale interrupt is in flight only while a
/// reader thread holds it, so a few per reader thread are plenty.
pub const RING: usize = 16;
/// Processes whose answered uniques are remembered; the ring of the one answered longest ago
/// makes room (its stale interrupts then go the pending way, still bounded).
pub const MAX_RINGS: usize = 4096;
/// Interrupts kept for requests not registered yet.
pub const MAX_PENDING: usize = 64;
/// How long a pending interrupt waits for its request before it goes back to the kernel: the
/// race it covers is one reader thread between its read(2) and decoding the frame.
pub const EXPIRY: Duration = Duration::from_millis(50);

/// What became of an interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Its request is registered and now marked: end its wait.
    Deliver,
    /// Its request was answered to `pid` already: nothing to do.
    Stale { pid: u32 },
    /// Kept until its request is registered.
    Pending,
}

struct Flight {
    pid: u32,
    interrupted: bool,
}

struct Parked {
    /// The interrupted request's unique.
    unique: u64,
    /// The INTERRUPT frame's own unique, to hand it back with -EAGAIN.
    frame: u64,
    at: Instant,
}

#[derive(Default)]
struct Answered {
    uniques: VecDeque<u64>,
    /// When this process was last answered (which ring makes room first).
    last: u64,
}

#[derive(Default)]
struct State {
    in_flight: HashMap<u64, Flight>,
    /// Each process's ring of answered uniques ...
    answered: HashMap<u32, Answered>,
    /// ... and the same uniques by unique, to look one up at once.
    answered_by: HashMap<u64, u32>,
    /// Counts replies: the age of each ring.
    replies: u64,
    pending: VecDeque<Parked>,
}

/// The interrupt bookkeeping of one CUSE session.
pub struct Interrupts {
    state: Mutex<State>,
    /// How long an interrupt for a request never seen stays pending ([`EXPIRY`]; frame tests
    /// use a longer one so that a loaded machine cannot expire what they count).
    expiry: Duration,
}

impl Default for Interrupts {
    fn default() -> Interrupts {
        Interrupts::with_expiry(EXPIRY)
    }
}

impl State {
    /// Takes out of the pending set what expired by `now` and what is over `keep`: their frame
    /// uniques go into `requeue`.
    fn trim(&mut self, now: Instant, expiry: Duration, keep: usize, requeue: &mut Vec<u64>) {
        while let Some(p) = self.pending.front() {
            if self.pending.len() <= keep && now.saturating_duration_since(p.at) < expiry {
                break;
            }
            requeue.push(p.frame);
            self.pending.pop_front();
        }
    }
}

impl Interrupts {
    pub fn with_expiry(expiry: Duration) -> Interrupts {
        Interrupts { state: Mutex::new(State::default()), expiry }
    }

    /// Registers request `unique` of process `pid` (a reader decoded it). Returns whether an
    /// interrupt for it already came, and the frame uniques of pending interrupts that expired:
    /// answer those -EAGAIN.
    pub fn register(&self, unique: u64, pid: u32, now: Instant) -> (bool, Vec<u64>) {
        let mut s = self.state.lock();
        let mut requeue = Vec::new();
        let interrupted = match s.pending.iter().position(|p| p.unique == unique) {
            Some(i) => {
                s.pending.remove(i);
                true
            }
            None => false,
        };
        s.trim(now, self.expiry, MAX_PENDING, &mut requeue);
        s.in_flight.insert(unique, Flight { pid, interrupted });
        (interrupted, requeue)
    }

    /// A FUSE_INTERRUPT (frame unique `frame`) for request `unique`. Returns the verdict and the
    /// frame uniques of pending interrupts it pushed out or that expired: answer those -EAGAIN.
    pub fn interrupt(&self, unique: u64, frame: u64, now: Instant) -> (Verdict, Vec<u64>) {
        let mut s = self.state.lock();
        let mut requeue = Vec::new();
        if let Some(f) = s.in_flight.get_mut(&unique) {
            f.interrupted = true;
            return (Verdict::Deliver, requeue);
        }
        if let Some(&pid) = s.answered_by.get(&unique) {
            return (Verdict::Stale { pid }, requeue);
        }
        if s.pending.iter().any(|p| p.unique == unique) {
            // The kernel has one interrupt per request in its queue at a time: a repeat is the
            // same one, sent again; keep the newer frame unique (they are equal) and the age.
            return (Verdict::Pending, requeue);
        }
        s.trim(now, self.expiry, MAX_PENDING - 1, &mut requeue);
        s.pending.push_back(Parked { unique, frame, at: now });
        (Verdict::Pending, requeue)
    }

    /// Whether request `unique` is registered and was interrupted.
    pub fn is_interrupted(&self, unique: u64) -> bool {
        self.state.lock().in_flight.get(&unique).is_some_and(|f| f.interrupted)
    }

    /// A reply for `unique` goes out: the request is no longer in the daemon.
    pub fn answered(&self, unique: u64) {
        let mut s = self.state.lock();
        let Some(flight) = s.in_flight.remove(&unique) else { return };
        s.replies += 1;
        let now = s.replies;
        if !s.answered.contains_key(&flight.pid) && s.answered.len() >= MAX_RINGS {
            if let Some(oldest) = s.answered.iter().min_by_key(|(_, a)| a.last).map(|(pid, _)| *pid) {
                for u in s.answered.remove(&oldest).map(|a| a.uniques).unwrap_or_default() {
                    s.answered_by.remove(&u);
                }
            }
        }
        let ring = s.answered.entry(flight.pid).or_default();
        let dropped = if ring.uniques.len() == RING { ring.uniques.pop_front() } else { None };
        ring.uniques.push_back(unique);
        ring.last = now;
        if let Some(u) = dropped {
            s.answered_by.remove(&u);
        }
        s.answered_by.insert(unique, flight.pid);
    }

    /// Interrupts waiting for their request.
    pub fn pending(&self) -> usize {
        self.state.lock().pending.len()
    }

    /// Requests registered and not answered yet.
    pub fn in_flight(&self) -> usize {
        self.state.lock().in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_request_is_marked_and_a_racing_interrupt_is_claimed_at_registration() {
        let i = Interrupts::default();
        let t = Instant::now();
        i.register(2, 7, t);
        assert_eq!(i.interrupt(2, 3, t), (Verdict::Deliver, vec![]));
        assert!(i.is_interrupted(2));
        assert_eq!(i.interrupt(4, 5, t), (Verdict::Pending, vec![]));
        assert_eq!(i.register(4, 8, t), (true, vec![]));
        assert!(i.is_interrupted(4));
        assert_eq!((i.pending(), i.in_flight()), (0, 2));
        i.answered(2);
        i.answered(4);
        assert_eq!(i.in_flight(), 0);
        assert!(!i.is_interrupted(2));
    }

    #[test]
    fn stale_interrupts_are_attributed_to_their_process_within_its_ring() {
        let i = Interrupts::default();
        let t = Instant::now();
        for u in 1..=(RING as u64 + 1) {
            i.register(2 * u, 7, t);
            i.answered(2 * u);
        }
        assert_eq!(i.state.lock().answered_by.len(), RING, "the ring is all that is kept");
        assert_eq!(i.interrupt(2 * RING as u64 + 2, 1, t).0, Verdict::Stale { pid: 7 });
        // The first fell out of the ring: unknown, so pending (and later handed back).
        assert_eq!(i.interrupt(2, 3, t).0, Verdict::Pending);
    }

    #[test]
    fn the_pending_set_is_bounded_and_what_leaves_it_goes_back_to_the_kernel() {
        let i = Interrupts::default();
        let t = Instant::now();
        let mut requeued = Vec::new();
        for u in 0..(MAX_PENDING as u64 + 10) {
            let (v, r) = i.interrupt(2 * u, 2 * u + 1, t);
            assert_eq!(v, Verdict::Pending);
            requeued.extend(r);
        }
        assert_eq!(i.pending(), MAX_PENDING);
        assert_eq!(requeued, (0..10).map(|u| 2 * u + 1).collect::<Vec<_>>(), "oldest first");
        // Expired ones leave at the next registration.
        let (hit, r) = i.register(1000, 7, t + EXPIRY);
        assert!(!hit);
        assert_eq!(r.len(), MAX_PENDING);
        assert_eq!(i.pending(), 0);
    }

    #[test]
    fn rings_are_bounded() {
        let i = Interrupts::default();
        let t = Instant::now();
        for pid in 1..=(MAX_RINGS as u32 + 5) {
            i.register(2 * u64::from(pid), pid, t);
            i.answered(2 * u64::from(pid));
        }
        assert_eq!(i.state.lock().answered.len(), MAX_RINGS);
        assert_eq!(i.state.lock().answered_by.len(), MAX_RINGS);
        // The newest process's is there, the oldest's made room.
        assert_eq!(i.interrupt(2 * (MAX_RINGS as u64 + 5), 1, t).0, Verdict::Stale { pid: MAX_RINGS as u32 + 5 });
        assert_eq!(i.interrupt(2, 3, t).0, Verdict::Pending);
    }
}
