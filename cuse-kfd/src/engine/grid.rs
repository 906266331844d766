//! A GFX dispatch on the worker pool ([`super::workers`]): its workgroups run on the workers,
//! each slice a bounded number of instructions of one workgroup, while the queue's runner waits
//! (the engine thread serves the other queues) and collects the outcome.
//!
//! Workgroups that run at once need scratch of their own: a workgroup takes a group slot of the
//! queue's scratch ([`Dispatch::scratch_group_slots`]) when it starts and keeps it until it
//! ends, so at most that many run at once, as the CP runs as many waves as TMPRING_SIZE covers.

use super::fault::{QueueFault, ERROR_INVALID_PACKET_FORMAT};
use super::gfx::{self, GpuMemory, Progress};
use super::mem::{Mem, Tlb};
use super::runner::Interrupt;
use super::workers::{Job, Pool, Slice};
use crate::faults::Faults;
use crate::process::Process;
use crate::queue::Queue;
use shader::exec::Code;
use shader::group::{self, Workgroup};
use shader::launch::Dispatch;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Instructions of one workgroup per slice: long enough to amortise taking the slice, short
/// enough that dispatches of several queues share the workers finely.
const SLICE_BUDGET: u64 = 50_000;

/// What a dispatch needs to run on the pool: the pool and the queue's process, faults and
/// itself (whose wave gate says whether its waves may run).
#[derive(Clone, Copy)]
pub struct Offload<'a> {
    pub pool: &'a Pool,
    pub process: &'a Arc<Process>,
    pub faults: &'a Arc<Faults>,
    pub queue: &'a Arc<Queue>,
}

/// A workgroup that started and has not ended, with its scratch group slot.
struct Started {
    index: u64,
    slot: u64,
    group: Workgroup,
}

/// What the workers report to the queue.
#[derive(Default)]
struct Outcome {
    fault: Option<QueueFault>,
    interrupts: Vec<Interrupt>,
}

/// A dispatch being run by the workers.
pub struct Grid {
    dispatch: Dispatch,
    total: u64,
    process: Arc<Process>,
    gpu_id: u32,
    faults: Arc<Faults>,
    /// The queue the dispatch came from: while it is preempted no slice starts.
    queue: Arc<Queue>,
    /// The next workgroup to start.
    next: AtomicU64,
    done: AtomicU64,
    /// Started work-groups between slices, oldest first.
    paused: Mutex<VecDeque<Started>>,
    /// Scratch group slots no running workgroup holds.
    free_slots: Mutex<Vec<u64>>,
    /// Decode caches, one taken per slice (decoding once per worker, not per workgroup).
    codes: Mutex<Vec<Code>>,
    outcome: Mutex<Outcome>,
    /// Set by a fault or when the queue drops the dispatch: no more slices run.
    cancelled: AtomicBool,
    wake: Arc<dyn Fn() + Send + Sync>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Grid {
    /// Hands workgroups `first..` of `dispatch` to the pool.
    pub fn submit(dispatch: Dispatch, first: u64, code: Code, o: Offload, gpu_id: u32) -> Arc<Grid> {
        let total = dispatch.workgroups();
        let slots = dispatch.scratch_group_slots().min(o.pool.len() as u64 * 2).max(1);
        let grid = Arc::new(Grid {
            dispatch,
            total,
            process: o.process.clone(),
            gpu_id,
            faults: o.faults.clone(),
            queue: o.queue.clone(),
            next: AtomicU64::new(first),
            done: AtomicU64::new(first),
            paused: Mutex::new(VecDeque::new()),
            free_slots: Mutex::new((0..slots).rev().collect()),
            codes: Mutex::new(vec![code]),
            outcome: Mutex::new(Outcome::default()),
            cancelled: AtomicBool::new(false),
            wake: o.pool.waker(),
        });
        o.pool.submit(grid.clone());
        grid
    }

    /// The dispatch's state for its queue: its interrupts so far, then its fault, or whether
    /// every workgroup has ended.
    pub fn poll(&self, interrupts: &mut Vec<Interrupt>) -> Result<Progress, QueueFault> {
        let mut o = lock(&self.outcome);
        interrupts.append(&mut o.interrupts);
        if let Some(f) = o.fault.take() {
            return Err(f);
        }
        drop(o);
        Ok(if self.done.load(Ordering::Acquire) >= self.total { Progress::Finished } else { Progress::Blocked })
    }

    /// The queue no longer wants the dispatch (it faulted, or the queue is going away).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }

    /// The next piece of work: a new workgroup while a scratch slot is free, else the paused
    /// one that waited longest. Up to the slots' count of workgroups are resident and take
    /// turns, as a CU's resident waves do, so workgroups that wait on each other through memory
    /// progress even on one worker.
    fn take(&self) -> Option<Result<Started, QueueFault>> {
        let slot = lock(&self.free_slots).pop();
        let fresh = slot.and_then(|slot| {
            let index = self.next.fetch_add(1, Ordering::AcqRel);
            if index < self.total {
                return Some((slot, index));
            }
            lock(&self.free_slots).push(slot);
            None
        });
        let Some((slot, index)) = fresh else {
            return lock(&self.paused).pop_front().map(Ok);
        };
        let id = self.dispatch.workgroup_id(index);
        Some(
            self.dispatch
                .workgroup_in_slot(id, slot)
                .map(|group| Started { index, slot, group })
                .map_err(|e| gfx::launch_fault(self.dispatch.kernel_object, e)),
        )
    }

    fn fail(&self, f: QueueFault) {
        self.cancel();
        lock(&self.outcome).fault.get_or_insert(f);
        (self.wake)();
    }
}

impl Job for Grid {
    fn panicked(&self, what: &str) {
        let reason =
            format!("internal error in the shader core, kernel object at {:#x}: {what}", self.dispatch.kernel_object);
        self.fail(QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason));
    }

    fn run_slice(&self) -> Slice {
        if self.cancelled.load(Ordering::Acquire) {
            return Slice::Ended;
        }
        // A preempted queue's workgroups stay where they stopped (the pool is nudged when the
        // queue is resumed); UPDATE_QUEUE waits for this slice to end before it answers.
        let Some(_running) = self.queue.waves.enter() else {
            return Slice::Idle;
        };
        let mut s = match self.take() {
            // The work-groups left are in other workers' slices (and hold every scratch slot):
            // the pool tries the job again when a slice ends, as one may pause or free a slot.
            None if self.done.load(Ordering::Acquire) < self.total => return Slice::Idle,
            None => return Slice::Ended,
            Some(Err(f)) => {
                self.fail(f);
                return Slice::Ended;
            }
            Some(Ok(s)) => s,
        };
        let mut code = lock(&self.codes).pop().unwrap_or_else(|| Code::new(self.dispatch.code.target));
        let mut tlb = Tlb::default();
        let mut mem = Mem::new(&self.process, self.gpu_id, &mut tlb, &self.faults);
        let mut gm = GpuMemory::new(&mut mem);
        let mut payloads = Vec::new();
        let r = s.group.run(&mut code, &mut gm, self.dispatch.apertures, SLICE_BUDGET, &mut payloads);
        let vm = gm.take_fault();
        lock(&self.codes).push(code);
        if !payloads.is_empty() {
            lock(&self.outcome).interrupts.extend(payloads.into_iter().map(gfx::sq_interrupt));
            (self.wake)();
        }
        match r {
            Ok(group::Progress::Finished) => {
                lock(&self.free_slots).push(s.slot);
                if self.done.fetch_add(1, Ordering::AcqRel) + 1 >= self.total {
                    (self.wake)();
                }
            }
            Ok(group::Progress::Paused) => lock(&self.paused).push_back(s),
            Err(f) => {
                self.fail(gfx::fault(&self.dispatch, s.index, f, vm));
                return Slice::Ended;
            }
        }
        if self.done.load(Ordering::Acquire) < self.total {
            Slice::Ran
        } else {
            Slice::Ended
        }
    }
}
