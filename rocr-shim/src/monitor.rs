//! The runtime's async-event thread (ROCr's has the same job): it sleeps in WAIT_EVENTS on the
//! process's HW-exception and memory-fault events and, when one fires, calls the error callback
//! of each queue the device stopped (its queue_inactive_signal holds the error code) and logs
//! GPU memory faults.

use crate::runtime::{Runtime, WeakRuntime};
use crate::status::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use thunk::Kfd;
use uapi::kfd::*;

/// A runtime's async-event thread: started with its first queue, stopped with the runtime.
#[derive(Default)]
pub(crate) struct Monitor {
    running: Mutex<Option<Running>>,
}

impl Monitor {
    /// Starts the thread unless it runs.
    pub fn start_once(&self, rt: &Runtime) -> Result<()> {
        let mut running = self.running.lock();
        if running.is_none() {
            *running = Some(Running::start(rt)?);
        }
        Ok(())
    }

    /// Ends the thread, if it runs, and destroys its events.
    pub fn stop(&self, kfd: &Kfd) {
        let running = self.running.lock().take();
        if let Some(r) = running {
            r.stop(kfd);
        }
    }
}

struct Running {
    thread: JoinHandle<()>,
    stop: Arc<AtomicBool>,
    /// The events it waits on: HW exception, memory fault, and the control event that ends it.
    events: [u32; 3],
}

impl Running {
    fn start(rt: &Runtime) -> Result<Running> {
        let kfd = rt.kfd().clone();
        let gpu = rt.agent_table().first_gpu();
        let mut events = [0u32; 3];
        for (slot, ty) in
            events.iter_mut().zip([KFD_IOC_EVENT_HW_EXCEPTION, KFD_IOC_EVENT_MEMORY, KFD_IOC_EVENT_SIGNAL])
        {
            match kfd.create_event(gpu, ty, true) {
                Ok(a) => *slot = a.event_id,
                Err(e) => {
                    for id in events.iter().filter(|id| **id != 0) {
                        let _ = kfd.destroy_event(*id);
                    }
                    return Err(Error::from_errno("creating the runtime's exception events", e));
                }
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let weak = rt.downgrade();
        let s2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rocr-shim-async".into())
            .spawn(move || run(&kfd, weak, &s2, events))
            .map_err(|e| {
                Error::new(crate::Status::OUT_OF_RESOURCES, format!("starting the async-event thread: {e}"))
            })?;
        Ok(Running { thread, stop, events })
    }

    fn stop(self, kfd: &Kfd) {
        self.stop.store(true, Ordering::Release);
        let _ = kfd.set_event(self.events[2]);
        if self.thread.thread().id() == std::thread::current().id() {
            // The runtime's last reference went on this very thread (inside a queue callback):
            // the loop sees `stop` when the callback returns, and the thread ends by itself.
        } else if self.thread.join().is_err() {
            log::error!("the async-event thread panicked");
        }
        for id in self.events {
            let _ = kfd.destroy_event(id);
        }
    }
}

fn run(kfd: &Kfd, rt: WeakRuntime, stop: &AtomicBool, events: [u32; 3]) {
    let mut failures = 0u32;
    while !stop.load(Ordering::Acquire) {
        let w = kfd.wait_events(&events, false, KFD_EVENT_TIMEOUT_INFINITE);
        if stop.load(Ordering::Acquire) {
            break;
        }
        if let Err(e) = w.result {
            failures += 1;
            log::debug!("async-event wait: {e}");
            if failures > 100 {
                log::error!("the async-event thread stops: WAIT_EVENTS keeps failing ({e})");
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        failures = 0;
        if let Some(d) = w.data.iter().find(|d| d.event_id == events[1] && d.payload != [0; 4]) {
            // payload is a kfd_hsa_memory_exception_data: failure (16 bytes), va, gpu_id.
            let va = d.payload[2];
            let gpu = d.payload[3] as u32;
            log::error!("GPU memory fault at {va:#x} on gpu {gpu:#x}: the faulting queue has stopped");
        }
        let Some(runtime) = rt.upgrade() else { break };
        let queues = runtime.queues().all();
        for q in &queues {
            q.report_error();
        }
        // Queues before the runtime: if this was its last reference, the queues still find it.
        drop(queues);
        drop(runtime);
    }
}
