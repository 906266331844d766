//! The device's parked waits by front-end tag, shared by the device (which parks waits and
//! interrupts them) and the command processor (which completes them): whoever finishes a wait
//! hands its completion here, and the tag is forgotten before the reply goes out.

use super::wait::{Completion, WaitId};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Parked waits by the tag of the request that parked them (the FUSE unique).
#[derive(Debug)]
pub struct WaitRegistry {
    /// tag -> (pid, wait).
    parked: Mutex<HashMap<u64, (u32, WaitId)>>,
    next: AtomicU64,
}

impl Default for WaitRegistry {
    fn default() -> WaitRegistry {
        WaitRegistry { parked: Mutex::new(HashMap::new()), next: AtomicU64::new(1) }
    }
}

impl WaitRegistry {
    /// A device-wide unique wait id (never 0).
    pub fn new_id(&self) -> WaitId {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Records that the request `tag` of process `pid` parked as `wait`.
    pub fn park(&self, tag: u64, pid: u32, wait: WaitId) {
        self.parked.lock().insert(tag, (pid, wait));
    }

    /// The process and wait the request `tag` parked as, if it is still parked.
    pub fn find(&self, tag: u64) -> Option<(u32, WaitId)> {
        self.parked.lock().get(&tag).copied()
    }

    /// How many waits are parked.
    pub fn len(&self) -> usize {
        self.parked.lock().len()
    }

    /// Whether no wait is parked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sends finished waits' replies (the caller holds no event lock) and forgets their tags
    /// first, so an interrupt arriving after the reply finds nothing.
    pub fn deliver(&self, completions: Vec<Completion>) {
        if completions.is_empty() {
            return;
        }
        {
            let mut parked = self.parked.lock();
            for c in &completions {
                parked.remove(&c.tag());
            }
        }
        for c in completions {
            c.send();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::{Pending, Responder};
    use std::sync::Arc;
    use uapi::kfd::WaitEventsArgs;

    #[test]
    fn a_delivered_wait_forgets_its_tag_before_the_reply_goes_out() {
        let registry = Arc::new(WaitRegistry::default());
        let wait = registry.new_id();
        assert_ne!(wait, 0, "wait ids start at 1");
        assert_ne!(registry.new_id(), wait, "wait ids are unique");
        registry.park(7, 42, wait);
        registry.park(8, 42, registry.new_id());
        assert_eq!(registry.find(7), Some((42, wait)));
        let seen = Arc::new(Mutex::new(None));
        let (r, s) = (registry.clone(), seen.clone());
        let responder = Responder::new(7, move |reply| {
            *s.lock() = Some((reply.result, r.find(7)));
        });
        let completion = Completion {
            reply: Pending::new(responder, 0, false),
            result: Ok(()),
            args: WaitEventsArgs::default(),
            writes: Vec::new(),
        };
        registry.deliver(vec![completion]);
        assert_eq!(*seen.lock(), Some((0, None)), "answered once, the tag already gone");
        assert_eq!(registry.find(8), Some((42, wait + 2)), "other parked waits stay");
        assert_eq!(registry.len(), 1);
    }
}
