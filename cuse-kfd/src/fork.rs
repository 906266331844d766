//! fork(2) in a process that runs a device (the embedded front end): what the child inherits
//! must be safe for it to leave alone, and safe for the child to build a device of its own.
//!
//! The hazard is parking_lot's one process-global table of parked threads (parking_lot_core's
//! `HASHTABLE`): each parked thread is a node in a bucket's queue, and the node is the thread's
//! `ThreadData`, a thread-local in the static TLS that glibc keeps inside the thread's stack
//! block. fork copies the table with every node still queued, but only the forking thread goes
//! on, and glibc's fork hands the stacks of all the other threads to its stack cache. The first
//! threads the child creates (the engine and timer of its own device) get those stacks, so
//! their `ThreadData` *is* a node still queued in the table, under the key the parent's thread
//! waited on. Parking on a key of the same bucket then links the node to itself; its removal
//! leaves the bucket with a head and no tail, and the next park there dereferences the null
//! tail (the "null pointer dereference" in `parking_lot::park` that killed forked children of
//! tests, or a hang on a self-linked queue). The same comes of a parent thread caught inside
//! parking_lot at the fork instant, holding a bucket lock.
//!
//! So the device keeps out of that table at every moment a fork can copy it:
//!
//! - its threads sleep only on std's futex-based `Mutex`/`Condvar` (the wait state lives in the
//!   object, nothing global): see `Sleeper`;
//! - what they do between sleeps (everything that may take the device's parking_lot locks) is a
//!   `busy` section, and a pthread_atfork prepare handler waits, before fork copies anything,
//!   until no thread of a device is in one, holding new ones off until fork returns. A wait
//!   inside a busy section for another device thread (a remover waiting for the engine, a join)
//!   is made `idle` and holds no device lock, so the handler cannot wait on it;
//! - the child handler starts a new [`epoch`]: handles made before it are the parent's, and the
//!   embedded front end answers them without touching the device (amdkfd's EBADF).
//!
//! What the gate does not cover: threads of the program itself that are inside parking_lot at
//! the fork instant (its own locks, or two of its threads contending for one device lock in
//! ioctls), which poison the child's table the same way.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex, MutexGuard, Once, PoisonError, WaitTimeoutResult};
use std::time::Duration;

/// Forks this process descends from (see [`epoch`]).
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The gate of every device of this process (the fork handlers use it).
static GATE: Gate = Gate::new();
/// How often a thread held off, or the prepare handler, looks again.
const POLL: Duration = Duration::from_micros(50);

thread_local! {
    /// Nesting of this thread's busy sections (counted once in the gate while above 0).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Registers the fork handlers (once per process); every device calls it before it starts a
/// thread.
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the three handlers are `extern "C"` functions of this module that live as long
        // as the program: they touch only atomics, a const-initialized thread-local and
        // nanosleep, so they may run in the forking thread around fork (the child one only
        // stores atomics, which is async-signal-safe).
        let r = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        assert_eq!(r, 0, "pthread_atfork: {}", std::io::Error::from_raw_os_error(r));
    });
}

/// How many forks this process is from the one that loaded the crate: a value taken before a
/// fork differs from the child's.
pub fn epoch() -> u64 {
    EPOCH.load(SeqCst)
}

/// Starts a busy section of this thread (see the module documentation); waits while a fork is
/// under way.
pub(crate) fn busy() -> Busy<'static> {
    GATE.busy()
}

/// Runs `f`, a wait that holds no device lock, outside this thread's busy section (if it is in
/// one), so that a fork need not wait for it; the section goes on after it (waiting while a fork
/// is under way).
pub(crate) fn idle<R>(f: impl FnOnce() -> R) -> R {
    GATE.idle(f)
}

/// Joins the device thread `t` as an [`idle`] wait, unless `t` is this thread: a device thread
/// may itself drop the last handle on the device it serves, and then ends on its own.
pub(crate) fn join_device_thread<T>(t: std::thread::JoinHandle<T>) {
    if t.thread().id() != std::thread::current().id() {
        let _ = idle(|| t.join());
    }
}

extern "C" fn prepare() {
    GATE.prepare();
}

extern "C" fn parent() {
    GATE.parent();
}

extern "C" fn child() {
    GATE.child();
    EPOCH.fetch_add(1, SeqCst);
}

/// Busy sections and forks: the process has one ([`GATE`]); a test makes its own, so that
/// holding forks off there holds off no other test's device threads.
struct Gate {
    /// Forks under way (their prepare handler has run, their parent handler not yet).
    forking: AtomicUsize,
    /// Threads in a busy section.
    active: AtomicUsize,
}

/// A busy section of this thread; ends on drop.
#[must_use]
pub(crate) struct Busy<'g> {
    gate: &'g Gate,
    _this_thread: PhantomData<*const ()>,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        DEPTH.with(|d| {
            d.set(d.get() - 1);
            if d.get() == 0 {
                self.gate.active.fetch_sub(1, SeqCst);
            }
        });
    }
}

impl Gate {
    const fn new() -> Gate {
        Gate { forking: AtomicUsize::new(0), active: AtomicUsize::new(0) }
    }

    fn busy(&self) -> Busy<'_> {
        DEPTH.with(|d| {
            if d.get() == 0 {
                self.join();
            }
            d.set(d.get() + 1);
        });
        Busy { gate: self, _this_thread: PhantomData }
    }

    fn idle<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Rejoin<'g>(&'g Gate, usize);
        impl Drop for Rejoin<'_> {
            fn drop(&mut self) {
                if self.1 > 0 {
                    self.0.join();
                    DEPTH.with(|d| d.set(self.1));
                }
            }
        }
        let depth = DEPTH.with(|d| d.replace(0));
        if depth > 0 {
            self.active.fetch_sub(1, SeqCst);
        }
        let _rejoin = Rejoin(self, depth);
        f()
    }

    /// Counts this thread in `active` once no fork is under way. With the prepare handler's
    /// store then load (both SeqCst), either it sees this thread counted or this thread sees
    /// the fork.
    fn join(&self) {
        loop {
            self.active.fetch_add(1, SeqCst);
            if self.forking.load(SeqCst) == 0 {
                return;
            }
            self.active.fetch_sub(1, SeqCst);
            while self.forking.load(SeqCst) != 0 {
                std::thread::sleep(POLL);
            }
        }
    }

    fn prepare(&self) {
        self.forking.fetch_add(1, SeqCst);
        while self.active.load(SeqCst) > own() {
            std::thread::sleep(POLL);
        }
    }

    fn parent(&self) {
        self.forking.fetch_sub(1, SeqCst);
    }

    fn child(&self) {
        // The child's only thread is this one: nobody else is busy, nobody is held off.
        self.active.store(own(), SeqCst);
        self.forking.store(0, SeqCst);
    }
}

/// This thread's own count in the gate (a fork from inside a busy section must not wait for
/// itself).
fn own() -> usize {
    DEPTH.with(|d| usize::from(d.get() > 0))
}

/// A value a device thread sleeps on: std's `Mutex` and `Condvar`, whose wait state is in the
/// object (a futex word), never in parking_lot's global table (see the module documentation).
/// Poisoning is ignored: the values are flags and counters, whole after any panic.
#[derive(Default)]
pub(crate) struct Sleeper<T> {
    value: Mutex<T>,
    cv: Condvar,
}

impl<T> Sleeper<T> {
    pub fn new(value: T) -> Sleeper<T> {
        Sleeper { value: Mutex::new(value), cv: Condvar::new() }
    }

    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.value.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps until notified or `timeout` passes (or spuriously).
    pub fn wait_for<'a>(&self, guard: MutexGuard<'a, T>, timeout: Duration) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        self.cv.wait_timeout(guard, timeout).unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps until notified (or spuriously).
    pub fn wait<'a>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.cv.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    pub fn notify_one(&self) {
        self.cv.notify_one();
    }

    pub fn notify_all(&self) {
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_section_counts_once_and_idle_steps_out_of_it() {
        let outer = busy();
        let inner = busy();
        assert_eq!(DEPTH.with(Cell::get), 2);
        idle(|| assert_eq!(DEPTH.with(Cell::get), 0, "idle leaves the section"));
        assert_eq!(DEPTH.with(Cell::get), 2, "and comes back to it");
        drop(inner);
        drop(outer);
        assert_eq!(DEPTH.with(Cell::get), 0);
        idle(|| ());
        assert_eq!(DEPTH.with(Cell::get), 0, "idle outside a section does nothing");
    }

    /// The prepare handler returns only once a thread's busy section has ended, and holds new
    /// sections off until the parent handler runs. On a gate of the test's own: the process's
    /// would hold off the device threads of the binary's other tests, whose timing it upsets.
    #[test]
    fn the_prepare_handler_waits_for_busy_sections_and_holds_new_ones_off() {
        use std::sync::atomic::AtomicBool;
        use std::sync::{mpsc, Arc};
        use std::time::Instant;
        const HELD: Duration = Duration::from_millis(100);
        static TEST_GATE: Gate = Gate::new();
        let (entered, in_section) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            let b = TEST_GATE.busy();
            entered.send(Instant::now()).unwrap();
            std::thread::sleep(HELD);
            drop(b);
        });
        let since = in_section.recv().unwrap();
        TEST_GATE.prepare();
        assert!(since.elapsed() >= HELD, "prepare returned while a busy section was open");
        let started = Arc::new(AtomicBool::new(false));
        let s = started.clone();
        let late = std::thread::spawn(move || {
            let _b = TEST_GATE.busy();
            s.store(true, SeqCst);
        });
        std::thread::sleep(Duration::from_millis(50));
        let held_off = !started.load(SeqCst);
        TEST_GATE.parent();
        late.join().unwrap();
        worker.join().unwrap();
        assert!(held_off, "a busy section began during a fork");
        assert!(started.load(SeqCst));
    }
}
