//! The shader core's worker pool: threads that run workgroups of GFX dispatches, so a kernel
//! uses the machine's cores while the engine thread keeps serving every queue's doorbells.
//!
//! A dispatch is a [`Job`] that hands out work in slices (a workgroup, or part of one). Workers
//! take the jobs round robin, one slice at a time, so two processes' kernels share the workers
//! and a long kernel does not hold another's back. Workers sleep on std's Mutex/Condvar and run
//! slices in a busy section (see crate::fork).
//!
//! A job whose work is all in other workers' slices says so ([`Slice::Idle`]); the pool skips it
//! until some slice ends, since only a slice's end (a workgroup pausing or ending) gives a job
//! new work. A worker that finds every job idle sleeps until then.

use crate::fork::{self, Sleeper};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a worker that found every job idle sleeps at most: a safety net only, as the end of
/// every slice wakes it.
const IDLE_NET: Duration = Duration::from_millis(10);

/// What a slice did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slice {
    /// It ran some of the job, which has more.
    Ran,
    /// Nothing to take now: the job's work left is in other workers' slices.
    Idle,
    /// The job needs no more slices (it has ended, or been cancelled); the pool drops it.
    Ended,
}

/// Work the pool runs a slice at a time.
pub trait Job: Send + Sync {
    /// Runs one slice, or says why it ran none.
    fn run_slice(&self) -> Slice;

    /// A slice panicked (a bug in the shader core): the job ends with an error its queue sees.
    /// The worker lives on, so a client cannot take the workers from every other client.
    fn panicked(&self, what: &str);
}

struct Entry {
    job: Arc<dyn Job>,
    /// The `Queue::ends` at which a slice found the job idle: no use trying it again before a
    /// slice ends.
    idle_at: Option<u64>,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Entry>,
    /// Where the next worker starts looking (round robin over jobs).
    next: usize,
    /// How many slices have ended (one that found its job idle does not count).
    ends: u64,
    /// Workers asleep because every job was idle.
    idle: usize,
}

impl Queue {
    /// The next job, round robin, that is not idle since the last slice ended.
    fn pick(&mut self) -> Option<Arc<dyn Job>> {
        let n = self.jobs.len();
        let i = (0..n).map(|k| (self.next + k) % n).find(|&i| self.jobs[i].idle_at != Some(self.ends))?;
        self.next = i + 1;
        Some(self.jobs[i].job.clone())
    }
}

struct Shared {
    queue: Sleeper<Queue>,
    stop: AtomicBool,
    idle_net: Duration,
}

/// The pool; dropping it stops the workers after their current slice.
pub struct Workers {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// `n` worker threads (at least one).
    pub fn new(n: usize) -> Workers {
        Workers::with_idle_net(n, IDLE_NET)
    }

    fn with_idle_net(n: usize, idle_net: Duration) -> Workers {
        fork::install();
        let shared = Arc::new(Shared { queue: Sleeper::new(Queue::default()), stop: AtomicBool::new(false), idle_net });
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

    /// Hands `job` to the workers; it stays until a slice of it says it has ended.
    pub fn submit(&self, job: Arc<dyn Job>) {
        self.shared.queue.lock().jobs.push(Entry { job, idle_at: None });
        self.shared.queue.notify_all();
    }

    /// A job found idle may have work again for a reason other than a slice's end (its queue
    /// was resumed): the workers look at every job again.
    pub fn nudge(&self) {
        self.shared.queue.lock().ends += 1;
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
        let (job, ends) = {
            let mut q = s.queue.lock();
            loop {
                if s.stop.load(Ordering::Acquire) {
                    return;
                }
                if let Some(job) = q.pick() {
                    break (job, q.ends);
                }
                q.idle += 1;
                q = if q.jobs.is_empty() {
                    s.queue.wait(q)
                } else {
                    let (mut q, t) = s.queue.wait_for(q, s.idle_net);
                    if t.timed_out() {
                        // A missed wake (there should be none) costs one net's time.
                        q.ends += 1;
                    }
                    q
                };
                q.idle -= 1;
            }
        };
        let slice = {
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
                Slice::Ended
            })
        };
        let mut q = s.queue.lock();
        let entry = q.jobs.iter().position(|e| Arc::ptr_eq(&e.job, &job));
        if slice == Slice::Idle {
            // Marked with the count from before the slice: if a slice ended meanwhile (and may
            // have given the job work), the mark is stale at once.
            if let Some(i) = entry {
                q.jobs[i].idle_at = Some(ends);
            }
            continue;
        }
        if let (Slice::Ended, Some(i)) = (slice, entry) {
            q.jobs.remove(i);
        }
        // A workgroup may have paused or ended: a sleeping worker may have work now.
        q.ends += 1;
        if q.idle > 0 {
            drop(q);
            s.queue.notify_one();
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

    /// See [`Workers::nudge`].
    pub fn nudge(&self) {
        self.workers.nudge();
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
        fn run_slice(&self) -> Slice {
            let before = self.left.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            if before.is_err() {
                return Slice::Ended;
            }
            self.log.lock().unwrap().push(self.id);
            // A slice's work, long enough that the other job is queued before this one ends.
            std::thread::sleep(Duration::from_millis(1));
            Slice::Ran
        }

        fn panicked(&self, _: &str) {}
    }

    /// Panics in its first slice and notes that it was told.
    struct Panics {
        told: Arc<Mutex<Option<String>>>,
    }

    impl Job for Panics {
        fn run_slice(&self) -> Slice {
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

    /// A job whose first slice holds all its work until the test lets go; then it has two
    /// pieces whose slices must run at once (each waits for the other, as workgroups meeting at
    /// a barrier), so the second needs the worker that found the job idle meanwhile.
    #[derive(Default)]
    struct Handoff {
        started: AtomicBool,
        release: AtomicBool,
        pieces: AtomicUsize,
        arrived: AtomicUsize,
        met: AtomicUsize,
        idles: AtomicUsize,
    }

    impl Job for Handoff {
        fn run_slice(&self) -> Slice {
            if !self.started.swap(true, Ordering::AcqRel) {
                assert!(spin_until(|| self.release.load(Ordering::Acquire)));
                self.pieces.store(2, Ordering::Release);
                return Slice::Ran;
            }
            if self.pieces.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok() {
                self.arrived.fetch_add(1, Ordering::AcqRel);
                if spin_until(|| self.arrived.load(Ordering::Acquire) == 2) {
                    self.met.fetch_add(1, Ordering::AcqRel);
                }
                return Slice::Ran;
            }
            if self.arrived.load(Ordering::Acquire) == 2 {
                return Slice::Ended;
            }
            self.idles.fetch_add(1, Ordering::AcqRel);
            Slice::Idle
        }

        fn panicked(&self, _: &str) {}
    }

    /// Whether `f` came true within 10 s (a hang detector, not a timing check).
    fn spin_until(f: impl Fn() -> bool) -> bool {
        let t0 = Instant::now();
        while !f() {
            if t0.elapsed() > Duration::from_secs(10) {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    #[test]
    fn a_worker_that_found_every_job_idle_sleeps_until_a_slice_ends() {
        // No safety net to speak of: only the end of the first slice can wake the other worker.
        let w = Workers::with_idle_net(2, Duration::from_secs(3600));
        let job = Arc::new(Handoff::default());
        w.submit(job.clone());
        wait_until("the other worker finds the job idle", || job.idles.load(Ordering::Acquire) == 1);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(job.idles.load(Ordering::Acquire), 1, "it sleeps, it does not poll");
        job.release.store(true, Ordering::Release);
        wait_until("both pieces ran", || job.arrived.load(Ordering::Acquire) == 2);
        wait_until("at once", || job.met.load(Ordering::Acquire) == 2);
        wait_until("the job is gone", || w.shared.queue.lock().jobs.is_empty());
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
