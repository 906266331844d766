//! Wait timeouts: one thread sleeping until the earliest deadline, not a thread per wait.

use super::wait::WaitId;
use parking_lot::{Condvar, Mutex};
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
    shared: Arc<(Mutex<State>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Timer {
    pub fn new(fire: Fire) -> Timer {
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kfd-timer".into())
            .spawn(move || run(&s, &*fire))
            .expect("spawning the timer thread");
        Timer { shared, thread: Some(thread) }
    }

    pub fn arm(&self, deadline: Instant, pid: u32, wait: WaitId) {
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock();
        let earliest = st.heap.peek().is_none_or(|Reverse((d, _, _))| deadline < *d);
        st.heap.push(Reverse((deadline, pid, wait)));
        if earliest {
            cv.notify_one();
        }
    }

    pub fn armed(&self) -> usize {
        self.shared.0.lock().heap.len()
    }
}

fn run(shared: &(Mutex<State>, Condvar), fire: &(dyn Fn(u32, WaitId) + Send + Sync)) {
    let (lock, cv) = shared;
    let mut st = lock.lock();
    loop {
        if st.stop {
            return;
        }
        let now = Instant::now();
        match st.heap.peek().copied() {
            Some(Reverse((deadline, pid, wait))) if deadline <= now => {
                st.heap.pop();
                drop(st);
                fire(pid, wait);
                st = lock.lock();
            }
            Some(Reverse((deadline, _, _))) => {
                _ = cv.wait_for(&mut st, deadline - now);
            }
            None => cv.wait(&mut st),
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        {
            let (lock, cv) = &*self.shared;
            lock.lock().stop = true;
            cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}
