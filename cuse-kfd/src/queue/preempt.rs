//! Preemption of a queue's waves: what lets UPDATE_QUEUE take a queue off the shader core with
//! its waves part way through, and put it back.
//!
//! amdkfd makes a queue inactive (UPDATE_QUEUE to 0 percent or a null ring) by unmapping it
//! from the hardware scheduler with preemption and waiting for the preemption fence before it
//! answers (linux v6.1 drivers/gpu/drm/amd/amdkfd/kfd_device_queue_manager.c update_queue,
//! which calls unmap_queues_cpsch; kfd_packet_manager_v9.c pm_unmap_queues_v9 asks for
//! PREEMPT_QUEUES with the queue's context saved when CWSR is on). The waves stop where they
//! are, and their state comes back when the queue is mapped again. Here a wave stops between two
//! of the shader core's slices: the gate is held, no new slice of the queue's dispatch starts,
//! and [`WaveGate::hold`] returns once the slices that had started have ended. The stopped
//! workgroups keep their state in the device (the shader core's waves and LDS) until
//! [`WaveGate::release`]; nothing of it is written to the client's memory.

use parking_lot::{Condvar, Mutex};

#[derive(Debug, Default)]
struct State {
    /// The queue is preempted: no slice may start.
    held: bool,
    /// Slices of the queue's dispatches running now.
    running: u32,
    /// How many times the queue has been preempted (for the inspector and tests).
    preemptions: u64,
}

/// Where the shader core asks whether a queue's waves may run.
#[derive(Debug, Default)]
pub struct WaveGate {
    state: Mutex<State>,
    quiet: Condvar,
}

/// A slice of a queue's waves that is running: the gate's preemption waits for it to drop.
#[must_use]
pub struct Running<'g>(&'g WaveGate);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut s = self.0.state.lock();
        s.running -= 1;
        if s.running == 0 {
            self.0.quiet.notify_all();
        }
    }
}

impl WaveGate {
    /// Starts a slice of the queue's waves, unless the queue is preempted.
    pub fn enter(&self) -> Option<Running<'_>> {
        let mut s = self.state.lock();
        if s.held {
            return None;
        }
        s.running += 1;
        Some(Running(self))
    }

    /// Whether the queue is preempted.
    pub fn is_held(&self) -> bool {
        self.state.lock().held
    }

    /// Preempts the queue: returns once no slice of its waves runs, and none will start until
    /// [`WaveGate::release`]. `wait` runs the wait (the device's fork-safe idle wrapper).
    pub fn hold(&self, wait: impl FnOnce(&dyn Fn())) {
        {
            let mut s = self.state.lock();
            if !s.held {
                s.held = true;
                s.preemptions += 1;
            }
        }
        wait(&|| {
            let mut s = self.state.lock();
            while s.running > 0 {
                self.quiet.wait(&mut s);
            }
        });
    }

    /// Lets the queue's waves run again.
    pub fn release(&self) {
        self.state.lock().held = false;
    }

    /// How many times the queue has been preempted.
    pub fn preemptions(&self) -> u64 {
        self.state.lock().preemptions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_held_gate_refuses_slices_until_released() {
        let g = WaveGate::default();
        g.hold(|w| w());
        assert!(g.enter().is_none());
        assert_eq!(g.preemptions(), 1);
        g.release();
        assert!(g.enter().is_some());
    }

    #[test]
    fn hold_waits_for_the_running_slice() {
        let g = Arc::new(WaveGate::default());
        let slice = g.enter().expect("not held");
        let (tx, rx) = std::sync::mpsc::channel();
        let g2 = g.clone();
        let t = std::thread::spawn(move || {
            g2.hold(|w| w());
            tx.send(()).unwrap();
        });
        // The holder is blocked while the slice runs (it cannot have sent yet: the slice is
        // still held here).
        assert!(rx.try_recv().is_err());
        drop(slice);
        rx.recv().expect("hold returned once the slice ended");
        t.join().unwrap();
        assert!(g.enter().is_none());
    }
}
