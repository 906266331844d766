//! Fork with the embedded device while it is busy (issue 13, "Fork with the embedded device"):
//! the parent's command processor runs a queue of huge dispatches, its timer has a long wait
//! armed and short ones arming and firing, while the test forks child after child. Each child
//! finds the inherited file EBADF and the inherited device closed to it, drops both, then makes
//! and uses a device of its own (its engine runs dispatches and sleeps, its timer arms and
//! fires) and drops it; the parent's device is untouched throughout. The child also parks on
//! many keys of its own in parking_lot (as any user of it there would, the thunk included), so a
//! node the parent's device left in parking_lot's table is met whatever bucket it is in.
//! Alone in its binary, and the parent runs no thread but the device's: the test forks.
//!
//! Without crate::fork the children died here in parking_lot or hung (see that module).

mod support;

use cuse_kfd::frontend::embedded::PendingIoctl;
use cuse_kfd::{Embedded, EmbeddedFile};
use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use support::client::{wait_for, Rig, TIMEOUT};
use thunk::memory::Kind;
use thunk::queue::packet;
use thunk::signal::Signals;
use uapi::kfd::{
    EventData, WaitEventsArgs, KFD_IOC_EVENT_SIGNAL, KFD_IOC_WAIT_RESULT_COMPLETE, KFD_IOC_WAIT_RESULT_TIMEOUT,
};
use uapi::soft::{AtomicAddArgs, SOFT_KERNEL_ATOMIC_ADD_U64, SOFT_KERNEL_NOP};
use uapi::{FromBytes, IntoBytes};

/// Children forked, one after the other.
const CHILDREN: usize = 12;
/// How long a child may take before it counts as hung.
const CHILD_DEADLINE: Duration = Duration::from_secs(20);
/// Work-items of each dispatch that keeps the parent's engine busy.
const ITEMS: u32 = 1 << 28;

/// What one child checks; it panics (with the failed check) on the first that fails.
fn child(round: usize, emb: Embedded, file: EmbeddedFile) {
    let mut v = uapi::kfd::GetVersionArgs::default();
    // SAFETY: GET_VERSION's argument holds no pointer.
    assert_eq!(unsafe { file.call(uapi::ioctl::AMDKFD_IOC_GET_VERSION, &mut v) }, Err(Errno::EBADF), "inherited file");
    assert_eq!(emb.open().err(), Some(Errno::ENODEV), "open of the inherited device");
    drop(file);
    drop(emb);
    // A heap layout of its own each round, so that the child's device lands elsewhere each time.
    let shift = vec![0u8; 80 * round];
    let own = Rig::new();
    park_on_many_keys();
    let ev = own.event(KFD_IOC_EVENT_SIGNAL, true);
    // The timer arms and fires.
    for _ in 0..4 {
        let r = own.wait(&[ev], 2);
        assert_eq!((r.result, r.wait_result), (Ok(()), KFD_IOC_WAIT_RESULT_TIMEOUT), "a 2 ms wait");
    }
    own.kfd.set_event(ev).expect("SET_EVENT");
    own.assert_fires(ev, "the child's own event");
    // The engine runs a dispatch, then idles into its sleeps and wakes for the next.
    let queue = own.queue(16);
    let sig = Signals::new(&own.kfd, own.gpu, 1).expect("a signal");
    for _ in 0..3 {
        sig.value(0).store(1, Ordering::Release);
        queue.submit(&packet::dispatch(own.kernel(SOFT_KERNEL_NOP), 0, [64, 1, 1], [64, 1, 1], sig.handle(0), false));
        own.kfd.kick();
        sig.wait(0, TIMEOUT, |v| v == 0).expect("the child's dispatch completes");
        park_on_many_keys();
    }
    drop(queue);
    assert_eq!(own.stats().processes, 1, "the child's device has the child's context only");
    drop(sig);
    drop(own);
    drop(shift);
}

/// Parks this thread briefly on 64 keys of its own in parking_lot's table.
fn park_on_many_keys() {
    let keys: Vec<(parking_lot::Mutex<()>, parking_lot::Condvar)> = (0..64).map(|_| Default::default()).collect();
    for (lock, cv) in &keys {
        let mut guard = lock.lock();
        let _ = cv.wait_for(&mut guard, Duration::from_micros(100));
    }
}

/// A WAIT_EVENTS on event `ev` of `file`, started and left parked (its timeout armed).
struct Armed {
    pending: PendingIoctl,
    _events: Box<[EventData; 1]>,
}

impl Armed {
    fn new(file: &EmbeddedFile, ev: u32, timeout_ms: u32) -> Armed {
        let events = Box::new([EventData { event_id: ev, ..Default::default() }]);
        let args = WaitEventsArgs {
            events_ptr: events.as_ptr() as u64,
            num_events: 1,
            timeout: timeout_ms,
            ..Default::default()
        };
        // SAFETY: the events pointer is `events`' heap buffer, which the returned value owns (a
        // move keeps the buffer in place) for as long as the request lasts; the reply's writes
        // are never applied (`result` reads only its argument bytes).
        let pending = unsafe { file.start(uapi::ioctl::AMDKFD_IOC_WAIT_EVENTS, args.as_bytes()) };
        Armed { pending, _events: events }
    }

    /// Its reply (bounded): the errno and the wait result.
    fn result(&self) -> (Option<Errno>, u32) {
        let reply = self.pending.wait_timeout(TIMEOUT).expect("a parked wait was never answered");
        let args = WaitEventsArgs::read_from_bytes(&reply.data[..24]).expect("the reply's argument bytes");
        (reply.errno(), args.wait_result)
    }
}

/// Runs `child` in a forked child and returns its exit status (0: every check passed).
fn fork_child(round: usize, emb: Embedded, file: EmbeddedFile) -> WaitStatus {
    // SAFETY: the child runs `child` (its own device, which no inherited thread can hold: see
    // crate::fork) and leaves with _exit, running nothing of the parent's.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            // A failed check's message goes straight to stderr (the test harness captures the
            // parent's output, not a child's).
            std::panic::set_hook(Box::new(|info| {
                let _ = writeln!(std::io::stderr(), "child {}: {info}", std::process::id());
            }));
            let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| child(round, emb, file))) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            // SAFETY: _exit ends the child at once.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => wait_child(child),
    }
}

/// Waits for `child`, killing it past CHILD_DEADLINE (a hung child is a failure, not a hung test).
fn wait_child(child: Pid) -> WaitStatus {
    let start = Instant::now();
    loop {
        match waitpid(child, Some(WaitPidFlag::WNOHANG)).expect("waitpid") {
            WaitStatus::StillAlive if start.elapsed() < CHILD_DEADLINE => std::thread::sleep(Duration::from_millis(5)),
            WaitStatus::StillAlive => {
                nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL).expect("kill");
                panic!("child {child} hung: {:?}", waitpid(child, None));
            }
            s => return s,
        }
    }
}

#[test]
fn fork_while_the_device_runs_a_queue_and_the_timer_has_armed_waits() {
    let rig = Rig::new();
    // The engine: a queue of huge dispatches, always something to run.
    let counter = rig.alloc(4096, Kind::Gtt);
    let args = rig.args(&AtomicAddArgs { addr: counter.addr(0), value: 1 });
    let queue = rig.queue(16);
    for _ in 0..8 {
        queue.submit(&packet::dispatch(
            rig.kernel(SOFT_KERNEL_ATOMIC_ADD_U64),
            args,
            [ITEMS, 1, 1],
            [64, 1, 1],
            0,
            false,
        ));
    }
    rig.kfd.kick();
    let count = || counter.u64_at(0).load(Ordering::Acquire);
    wait_for(TIMEOUT, "the busy dispatch to start", || (count() > 0).then_some(()));
    // The timer: one long wait armed all along, short ones arming and firing around each fork.
    let waits = rig.emb.open().expect("a file for the waits");
    let (long, short) = (rig.event(KFD_IOC_EVENT_SIGNAL, false), rig.event(KFD_IOC_EVENT_SIGNAL, true));
    let long_wait = Armed::new(&waits, long, 60_000);
    let before = rig.stats();
    assert_eq!(before.waiters, 1, "the long wait is parked");
    let mut failed = Vec::new();
    for round in 0..CHILDREN {
        let short_waits: Vec<Armed> =
            [1, 2, 3].iter().map(|ms| Armed::new(&waits, short, ms * (1 + round as u32 % 4))).collect();
        let (emb, file) = (rig.emb.clone(), rig.emb.open().expect("a file for the child to inherit"));
        let status = fork_child(round, emb, file);
        if !matches!(status, WaitStatus::Exited(_, 0)) {
            failed.push((round, status));
        }
        for w in short_waits {
            assert_eq!(w.result(), (None, KFD_IOC_WAIT_RESULT_TIMEOUT), "a short wait of the parent");
        }
    }
    assert!(failed.is_empty(), "children failed (round, status): {failed:?} (their messages are above)");
    // The parent's device went on all along and still serves: the dispatches run, the long wait
    // is still armed and completes when its event is set.
    let now = rig.stats();
    assert_eq!((now.files, now.processes, now.events, now.waiters), (before.files, before.processes, before.events, 1));
    let c = count();
    wait_for(TIMEOUT, "the busy dispatch to go on", || (count() > c).then_some(()));
    rig.kfd.set_event(long).expect("SET_EVENT");
    assert_eq!(long_wait.result(), (None, KFD_IOC_WAIT_RESULT_COMPLETE), "the long wait");
    drop(queue);
}
