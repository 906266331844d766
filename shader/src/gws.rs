//! The global wave sync unit (GWS): counting semaphores and barriers that waves of any
//! workgroup of a queue reach with the `ds_gws_*` instructions. amdkfd gives a queue its GPU's
//! GWS entries with AMDKFD_IOC_ALLOC_QUEUE_GWS (pqm_set_gws, "first_gws" 0); their values live
//! with the queue from one dispatch to the next (kfdtest's KFDGWSTest initialises a semaphore in
//! one dispatch and uses it in the next), so the device keeps one [`Gws`] per queue that has
//! them and hands it to each of its dispatches.
//!
//! Which resource an instruction names: (M0[21:16] + the instruction's offset) mod 64 (LLVM
//! llvmorg-15.0.6, llvm/test/CodeGen/AMDGPU/llvm.amdgcn.ds.gws.init.ll: resource 0 is emitted
//! as M0 = -1 with offset:1, resource 63 as M0 = -1 with offset:64).

use std::sync::{Mutex, PoisonError};

/// GWS resources a queue may hold (amdgpu's gws_size; what the topology's num_gws reports).
pub const RESOURCES: usize = 64;

#[derive(Debug, Default, Clone, Copy)]
struct Resource {
    /// The semaphore's count (ds_gws_init sets it, sema_v adds one, sema_p takes one).
    count: u32,
    /// Waves arrived at the barrier in its current round.
    arrived: u32,
    /// Rounds of the barrier completed: a waiting wave goes on when it changes.
    round: u64,
}

/// What became of a GWS instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Done: the wave goes on.
    Pass,
    /// The wave waits (a semaphore at zero, a barrier not yet full): it tries again later, with
    /// this barrier round to wait past (`None` for a semaphore).
    Wait(Option<u64>),
}

/// The GWS resources of one queue.
#[derive(Debug)]
pub struct Gws {
    // A plain lock: each instruction holds it for a few loads and stores.
    resources: Mutex<[Resource; RESOURCES]>,
}

impl Default for Gws {
    fn default() -> Gws {
        Gws { resources: Mutex::new([Resource::default(); RESOURCES]) }
    }
}

impl Gws {
    fn with<T>(&self, id: usize, f: impl FnOnce(&mut Resource) -> T) -> T {
        let mut r = self.resources.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut r[id % RESOURCES])
    }

    /// ds_gws_init: the resource starts over with `value` (a semaphore's count; a barrier's
    /// members are given by each ds_gws_barrier).
    pub fn init(&self, id: usize, value: u32) {
        self.with(id, |r| *r = Resource { count: value, arrived: 0, round: r.round });
    }

    /// ds_gws_sema_v (`n` = 1) and ds_gws_sema_br (`n` = the value given): releases `n`.
    pub fn release(&self, id: usize, n: u32) {
        self.with(id, |r| r.count = r.count.saturating_add(n));
    }

    /// ds_gws_sema_p: takes one, or waits while there is none.
    pub fn acquire(&self, id: usize) -> Gate {
        self.with(id, |r| {
            if r.count == 0 {
                return Gate::Wait(None);
            }
            r.count -= 1;
            Gate::Pass
        })
    }

    /// ds_gws_barrier with `members_minus_one` (what `__ockl_gws_barrier` passes): the wave
    /// arrives (`waiting` is `None`) or looks again (`Some(round)` it waits past).
    pub fn barrier(&self, id: usize, members_minus_one: u32, waiting: Option<u64>) -> Gate {
        self.with(id, |r| match waiting {
            Some(round) if r.round != round => Gate::Pass,
            Some(round) => Gate::Wait(Some(round)),
            None => {
                r.arrived += 1;
                if r.arrived > members_minus_one {
                    r.arrived = 0;
                    r.round = r.round.wrapping_add(1);
                    Gate::Pass
                } else {
                    Gate::Wait(Some(r.round))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semaphore_counts_what_is_released_and_taken() {
        let g = Gws::default();
        assert_eq!(g.acquire(3), Gate::Wait(None), "a resource starts at zero");
        g.init(3, 1);
        assert_eq!(g.acquire(3), Gate::Pass);
        assert_eq!(g.acquire(3), Gate::Wait(None));
        g.release(3, 2);
        assert_eq!((g.acquire(3), g.acquire(3), g.acquire(3)), (Gate::Pass, Gate::Pass, Gate::Wait(None)));
        assert_eq!(g.acquire(3 + RESOURCES), Gate::Wait(None), "ids wrap at 64");
        g.release(4, 1);
        assert_eq!(g.acquire(3), Gate::Wait(None), "resources are separate");
    }

    #[test]
    fn a_barrier_lets_its_members_go_when_the_last_arrives_and_starts_over() {
        let g = Gws::default();
        let a = g.barrier(0, 2, None);
        let b = g.barrier(0, 2, None);
        assert!(matches!((a, b), (Gate::Wait(Some(0)), Gate::Wait(Some(0)))));
        assert_eq!(g.barrier(0, 2, Some(0)), Gate::Wait(Some(0)), "two of three arrived");
        assert_eq!(g.barrier(0, 2, None), Gate::Pass, "the third completes the round");
        assert_eq!(g.barrier(0, 2, Some(0)), Gate::Pass);
        assert_eq!(g.barrier(0, 2, None), Gate::Wait(Some(1)), "the next round starts empty");
    }
}
