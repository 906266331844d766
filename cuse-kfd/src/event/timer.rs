//! Wait timeouts: one thread sleeping until the earliest deadline, not a thread per wait.
//!
//! Deadlines are keyed by (deadline, wait) in an ordered map with an index by wait, so a wait
//! that ends before its deadline (completed, interrupted, torn down) takes its entry out at
//! once: the timer never holds more entries than there are parked timed waits. (A binary heap
//! with lazy deletion would keep a completed wait's entry until its deadline passed, up to the
//! longest timeout, ~49 days, of waits at the rate clients can complete them; compacting it
//! would need the same index anyway.)
//!
//! The thread sleeps on a `Sleeper` and fires in a busy section (see crate::fork): a fork
//! never finds it inside parking_lot.

use super::wait::WaitId;
use crate::fork::Sleeper;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

type Fire = Box<dyn Fn(u32, WaitId) + Send + Sync>;

/// The armed deadlines.
#[derive(Debug, Default)]
struct Deadlines {
    /// (deadline, wait) -> pid.
    by_time: BTreeMap<(Instant, WaitId), u32>,
    /// wait -> its deadline.
    by_wait: HashMap<WaitId, Instant>,
}

impl Deadlines {
    /// Arms `wait`; returns whether it is now the earliest. Re-arming a wait moves it.
    fn arm(&mut self, deadline: Instant, pid: u32, wait: WaitId) -> bool {
        self.cancel(wait);
        let earliest = self.by_time.first_key_value().is_none_or(|((d, _), _)| deadline < *d);
        self.by_time.insert((deadline, wait), pid);
        self.by_wait.insert(wait, deadline);
        earliest
    }

    fn cancel(&mut self, wait: WaitId) -> bool {
        match self.by_wait.remove(&wait) {
            Some(d) => self.by_time.remove(&(d, wait)).is_some(),
            None => false,
        }
    }

    fn earliest(&self) -> Option<Instant> {
        self.by_time.first_key_value().map(|((d, _), _)| *d)
    }

    /// Takes the earliest entry if its deadline is at or before `now`.
    fn pop_due(&mut self, now: Instant) -> Option<(u32, WaitId)> {
        let entry = self.by_time.first_entry().filter(|e| e.key().0 <= now)?;
        let ((_, wait), pid) = entry.remove_entry();
        self.by_wait.remove(&wait);
        Some((pid, wait))
    }

    fn len(&self) -> usize {
        debug_assert_eq!(self.by_time.len(), self.by_wait.len());
        self.by_time.len()
    }
}

#[derive(Default)]
struct State {
    deadlines: Deadlines,
    stop: bool,
    /// Since when the thread has been firing a deadline (None: it is not).
    firing: Option<Instant>,
}

/// What the timer is doing, for the device's status: a deadline long overdue, or a fire that
/// does not return, shows a timer that is stuck.
#[derive(Debug, Clone, Copy)]
pub struct TimerState {
    pub armed: usize,
    pub earliest: Option<Instant>,
    pub firing_since: Option<Instant>,
}

/// Calls `fire(pid, wait)` once each armed deadline passes, unless the wait is cancelled first.
pub struct Timer {
    shared: Arc<Sleeper<State>>,
    thread: Option<JoinHandle<()>>,
}

impl Timer {
    pub fn new(fire: Fire) -> Timer {
        crate::fork::install();
        let shared = Arc::new(Sleeper::new(State::default()));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kfd-timer".into())
            .spawn(move || run(&s, &*fire))
            .expect("spawning the timer thread");
        Timer { shared, thread: Some(thread) }
    }

    pub fn arm(&self, deadline: Instant, pid: u32, wait: WaitId) {
        if self.shared.lock().deadlines.arm(deadline, pid, wait) {
            self.shared.notify_one();
        }
    }

    /// Forgets the deadline of `wait` (it ended first); returns whether it was armed.
    pub fn cancel(&self, wait: WaitId) -> bool {
        // The thread may sleep toward this deadline; waking it early costs one spurious look.
        self.shared.lock().deadlines.cancel(wait)
    }

    /// How many deadlines are armed.
    pub fn armed(&self) -> usize {
        self.shared.lock().deadlines.len()
    }

    pub fn state(&self) -> TimerState {
        let st = self.shared.lock();
        TimerState { armed: st.deadlines.len(), earliest: st.deadlines.earliest(), firing_since: st.firing }
    }
}

fn run(shared: &Sleeper<State>, fire: &(dyn Fn(u32, WaitId) + Send + Sync)) {
    let mut st = shared.lock();
    loop {
        if st.stop {
            return;
        }
        let now = Instant::now();
        if let Some((pid, wait)) = st.deadlines.pop_due(now) {
            st.firing = Some(now);
            drop(st);
            {
                let _busy = crate::fork::busy();
                fire(pid, wait);
            }
            st = shared.lock();
            st.firing = None;
            continue;
        }
        st = match st.deadlines.earliest() {
            Some(deadline) => shared.wait_for(st, deadline - now).0,
            None => shared.wait(st),
        };
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.notify_all();
        if let Some(t) = self.thread.take() {
            crate::fork::join_device_thread(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::time::Duration;

    #[test]
    fn cancelled_deadlines_leave_no_entry() {
        let mut d = Deadlines::default();
        let t0 = Instant::now();
        assert!(d.arm(t0 + Duration::from_secs(10), 1, 1));
        assert!(d.arm(t0 + Duration::from_secs(5), 1, 2), "an earlier deadline is the earliest");
        assert!(!d.arm(t0 + Duration::from_secs(5), 2, 3), "a tie is not earlier");
        assert!(d.cancel(2));
        assert!(!d.cancel(2), "cancelled once");
        assert_eq!(d.len(), 2);
        assert_eq!(d.earliest(), Some(t0 + Duration::from_secs(5)));
        assert_eq!(d.pop_due(t0 + Duration::from_secs(4)), None);
        assert_eq!(d.pop_due(t0 + Duration::from_secs(20)), Some((2, 3)));
        d.arm(t0 + Duration::from_secs(1), 1, 1);
        assert_eq!(d.len(), 1, "re-arming moves a wait");
        assert_eq!(d.pop_due(t0 + Duration::from_secs(20)), Some((1, 1)));
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn a_cancelled_wait_never_fires() {
        let fired = Arc::new(Mutex::new(Vec::new()));
        let f = fired.clone();
        let timer = Timer::new(Box::new(move |pid, wait| f.lock().push((pid, wait))));
        let now = Instant::now();
        timer.arm(now + Duration::from_millis(30), 7, 1);
        timer.arm(now + Duration::from_millis(10), 7, 2);
        assert!(timer.cancel(1));
        assert_eq!(timer.armed(), 1);
        // Deadlines fire in order: had wait 1 stayed armed, it would fire between 2 and 3. No
        // fixed sleep: a loaded machine only makes this take longer.
        timer.arm(now + Duration::from_millis(60), 7, 3);
        let give_up = Instant::now() + Duration::from_secs(20);
        while fired.lock().len() < 2 && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(*fired.lock(), vec![(7, 2), (7, 3)]);
        assert_eq!(timer.armed(), 0);
    }
}
