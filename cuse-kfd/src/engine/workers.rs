//! The shader core's worker pool: threads that run workgroups of GFX dispatches, so a kernel
//! uses the machine's cores while the engine thread keeps serving every queue's doorbells.
//!
//! A dispatch is a [`Job`] that hands out work in slices (a workgroup, or part of one). Workers
//! take the jobs round robin, one slice at a time, so two processes' kernels share the workers
//! and a long kernel does not hold another's back. Workers sleep on std's Mutex/Condvar and run
//! slices in a busy section (see crate::fork).

use crate::fork::{self, Sleeper};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Work the pool runs a slice at a time.
pub trait Job: Send + Sync {
    /// Runs one slice. Returns false when the job needs no more slices (it has ended, or been
    /// cancelled); the pool then drops it.
    fn run_slice(&self) -> bool;

    /// A slice panicked (a bug in the shader core): the job ends with an error its queue sees.
    /// The worker lives on, so a client cannot take the workers from every other client.
    fn panicked(&self, what: &str);
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Arc<dyn Job>>,
    /// Where the next worker starts looking (round robin over jobs).
    next: usize,
}

struct Shared {
    queue: Sleeper<Queue>,
    stop: AtomicBool,
}

/// The pool; dropping it stops the workers after their current slice.
pub struct Workers {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// `n` worker threads (at least one).
    pub fn new(n: usize) -> Workers {
        fork::install();
        let shared = Arc::new(Shared { queue: Sleeper::new(Queue::default()), stop: AtomicBool::new(false) });
        let threads = (0..n.max(1))
            .map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("kfd-shader-{i}"))
                    .spawn(move || worker(&s))
                    .expect("spawning a shader worker")
            })
            .collect();
        Workers { shared, threads }
    }

    /// How many workers run.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Hands `job` to the workers; it stays until a slice of it says it has no work left.
    pub fn submit(&self, job: Arc<dyn Job>) {
        self.shared.queue.lock().jobs.push(job);
        self.shared.queue.notify_all();
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.queue.notify_all();
        for t in self.threads.drain(..) {
            fork::join_device_thread(t);
        }
    }
}

fn worker(s: &Shared) {
    loop {
        let job = {
            let mut q = s.queue.lock();
            loop {
                if s.stop.load(Ordering::Acquire) {
                    return;
                }
                if !q.jobs.is_empty() {
                    break;
                }
                q = s.queue.wait(q);
            }
            let i = q.next % q.jobs.len();
            q.next = i + 1;
            q.jobs[i].clone()
        };
        let more = {
            use std::panic::{catch_unwind, AssertUnwindSafe};
            let _busy = fork::busy();
            catch_unwind(AssertUnwindSafe(|| job.run_slice())).unwrap_or_else(|payload| {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                log::error!("a shader worker's slice panicked: {what}");
                job.panicked(&what);
                false
            })
        };
        if !more {
            s.queue.lock().jobs.retain(|j| !Arc::ptr_eq(j, &job));
        }
    }
}

/// The workers and how they wake the engine when a dispatch has news for its queue.
pub struct Pool {
    workers: Workers,
    wake: Arc<dyn Fn() + Send + Sync>,
}

impl Pool {
    pub fn new(workers: usize, wake: Arc<dyn Fn() + Send + Sync>) -> Pool {
        Pool { workers: Workers::new(workers), wake }
    }

    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    pub fn submit(&self, job: Arc<dyn Job>) {
        self.workers.submit(job);
    }

    /// What a job calls to wake the engine.
    pub fn waker(&self) -> Arc<dyn Fn() + Send + Sync> {
        self.wake.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// `slices` slices, each noting which job ran.
    struct Counted {
        left: AtomicUsize,
        id: usize,
        log: Arc<Mutex<Vec<usize>>>,
    }

    impl Job for Counted {
        fn run_slice(&self) -> bool {
            let before = self.left.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            if before.is_err() {
                return false;
            }
            self.log.lock().unwrap().push(self.id);
            std::thread::sleep(Duration::from_millis(1));
            true
        }

        fn panicked(&self, _: &str) {}
    }

    /// Panics in its first slice and notes that it was told.
    struct Panics {
        told: Arc<Mutex<Option<String>>>,
    }

    impl Job for Panics {
        fn run_slice(&self) -> bool {
            panic!("a bug in a slice");
        }

        fn panicked(&self, what: &str) {
            *self.told.lock().unwrap() = Some(what.to_string());
        }
    }

    #[test]
    fn a_panicking_slice_ends_its_job_and_the_worker_serves_the_next() {
        let w = Workers::new(1);
        let told = Arc::new(Mutex::new(None));
        w.submit(Arc::new(Panics { told: told.clone() }));
        wait_until("the job told of its panic", || told.lock().unwrap().is_some());
        assert_eq!(told.lock().unwrap().as_deref(), Some("a bug in a slice"));
        let log = Arc::new(Mutex::new(Vec::new()));
        w.submit(Arc::new(Counted { left: AtomicUsize::new(3), id: 7, log: log.clone() }));
        wait_until("the same worker runs the next job", || log.lock().unwrap().len() == 3);
    }

    fn wait_until(what: &str, f: impl Fn() -> bool) {
        let t0 = Instant::now();
        while !f() {
            assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn every_slice_runs_once_and_two_jobs_take_turns() {
        let w = Workers::new(1);
        let log = Arc::new(Mutex::new(Vec::new()));
        let a = Arc::new(Counted { left: AtomicUsize::new(20), id: 0, log: log.clone() });
        let b = Arc::new(Counted { left: AtomicUsize::new(20), id: 1, log: log.clone() });
        w.submit(a);
        w.submit(b);
        wait_until("40 slices", || log.lock().unwrap().len() == 40);
        let log = log.lock().unwrap().clone();
        assert_eq!(log.iter().filter(|&&j| j == 0).count(), 20);
        // Once both are queued, neither runs more than twice in a row (round robin).
        let runs = log[2..].windows(3).filter(|w| w[0] == w[1] && w[1] == w[2]).count();
        assert_eq!(runs, 0, "{log:?}");
        wait_until("the jobs are gone", || w.shared.queue.lock().jobs.is_empty());
    }

    #[test]
    fn dropping_the_pool_stops_its_workers() {
        let w = Workers::new(2);
        assert_eq!(w.len(), 2);
        let log = Arc::new(Mutex::new(Vec::new()));
        w.submit(Arc::new(Counted { left: AtomicUsize::new(usize::MAX), id: 0, log: log.clone() }));
        wait_until("a slice", || !log.lock().unwrap().is_empty());
        drop(w);
        let n = log.lock().unwrap().len();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(log.lock().unwrap().len(), n, "no slice after the drop returned");
    }
}
