//! Wait timeouts: one thread sleeping until the earliest deadline, not a thread per wait.
//!
//! The thread sleeps on a `Sleeper` and fires in a busy section (see crate::fork): a fork
//! never finds it inside parking_lot.

use super::wait::WaitId;
use crate::fork::Sleeper;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

type Fire = Box<dyn Fn(u32, WaitId) + Send + Sync>;

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<(Instant, u32, WaitId)>>,
    stop: bool,
}

/// Calls `fire(pid, wait)` once each armed deadline passes (a wait that completed meanwhile
/// is simply not found by then).
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
        let mut st = self.shared.lock();
        let earliest = st.heap.peek().is_none_or(|Reverse((d, _, _))| deadline < *d);
        st.heap.push(Reverse((deadline, pid, wait)));
        if earliest {
            self.shared.notify_one();
        }
    }

    pub fn armed(&self) -> usize {
        self.shared.lock().heap.len()
    }
}

fn run(shared: &Sleeper<State>, fire: &(dyn Fn(u32, WaitId) + Send + Sync)) {
    let mut st = shared.lock();
    loop {
        if st.stop {
            return;
        }
        let now = Instant::now();
        match st.heap.peek().copied() {
            Some(Reverse((deadline, pid, wait))) if deadline <= now => {
                st.heap.pop();
                drop(st);
                {
                    let _busy = crate::fork::busy();
                    fire(pid, wait);
                }
                st = shared.lock();
            }
            Some(Reverse((deadline, _, _))) => st = shared.wait_for(st, deadline - now).0,
            None => st = shared.wait(st),
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.notify_all();
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = crate::fork::idle(|| t.join());
            }
        }
    }
}
