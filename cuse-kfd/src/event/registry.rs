//! The device's parked waits by front-end tag, shared by the device (which parks waits and
//! interrupts them) and the command processor (which completes them): whoever finishes a wait
//! hands its completion here, and the tag is forgotten before the reply goes out. Forgetting a
//! wait also disarms its timeout and gives back its quota charge, whoever ended it.

use super::timer::{Timer, TimerState};
use super::wait::{Completion, WaitId};
use crate::quota::{AccountId, Charge, Ledger, Resource};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Clone, Copy)]
struct Parked {
    pid: u32,
    wait: WaitId,
    /// The account charged one wait for it.
    account: AccountId,
}

/// Parked waits by the tag of the request that parked them (the FUSE unique).
pub struct WaitRegistry {
    parked: Mutex<HashMap<u64, Parked>>,
    next: AtomicU64,
    /// The timeouts of parked waits.
    timer: Timer,
    ledger: Arc<Ledger>,
}

impl WaitRegistry {
    /// A registry whose waits time out through `timer` and are charged in `ledger`.
    pub fn new(timer: Timer, ledger: Arc<Ledger>) -> WaitRegistry {
        WaitRegistry { parked: Mutex::new(HashMap::new()), next: AtomicU64::new(1), timer, ledger }
    }

    /// The charge of one parked wait (taken by the caller before it parks).
    pub fn charge() -> Charge {
        Charge::of(Resource::Waits, 1)
    }

    /// A device-wide unique wait id (never 0).
    pub fn new_id(&self) -> WaitId {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Records that the request `tag` of process `pid` parked as `wait`, with [`Self::charge`]
    /// charged to `account`, and arms its `deadline` if it has one.
    pub fn park(&self, tag: u64, pid: u32, wait: WaitId, account: AccountId, deadline: Option<Instant>) {
        self.parked.lock().insert(tag, Parked { pid, wait, account });
        if let Some(d) = deadline {
            self.timer.arm(d, pid, wait);
        }
    }

    /// The process and wait the request `tag` parked as, if it is still parked.
    pub fn find(&self, tag: u64) -> Option<(u32, WaitId)> {
        self.parked.lock().get(&tag).map(|p| (p.pid, p.wait))
    }

    /// How many wait deadlines the timer holds (never more than the parked waits).
    pub fn armed(&self) -> usize {
        self.timer.armed()
    }

    /// The timer's deadlines and whether it is firing one.
    pub fn timer_state(&self) -> TimerState {
        self.timer.state()
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
        let gone: Vec<Parked> = {
            let mut parked = self.parked.lock();
            completions.iter().filter_map(|c| parked.remove(&c.tag())).collect()
        };
        // The charge goes back before the reply (the caller may park again at once), the
        // deadline after it: a woken waiter's latency need not include the timer's lock, and a
        // deadline firing meanwhile finds its wait ended and does nothing.
        for p in &gone {
            self.ledger.release(p.account, &Self::charge());
        }
        for c in completions {
            c.send();
        }
        for p in gone {
            self.timer.cancel(p.wait);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::QuotaConfig;
    use crate::reply::{Pending, Responder};
    use std::collections::BTreeMap;
    use std::time::Duration;
    use uapi::kfd::WaitEventsArgs;

    #[test]
    fn a_delivered_wait_forgets_its_tag_before_the_reply_goes_out() {
        let ledger = Arc::new(Ledger::new(&QuotaConfig::default(), BTreeMap::new(), 0));
        let account = ledger.open(42, 1000);
        let registry = Arc::new(WaitRegistry::new(Timer::new(Box::new(|_, _| {})), ledger.clone()));
        let wait = registry.new_id();
        assert_ne!(wait, 0, "wait ids start at 1");
        assert_ne!(registry.new_id(), wait, "wait ids are unique");
        let later = Some(Instant::now() + Duration::from_secs(3600));
        for tag in [7, 8] {
            ledger.charge(account, &WaitRegistry::charge()).unwrap();
            let id = if tag == 7 { wait } else { registry.new_id() };
            registry.park(tag, 42, id, account, later);
        }
        assert_eq!(registry.armed(), 2);
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
        assert_eq!(registry.armed(), 1, "its deadline went with it");
        assert_eq!(ledger.usage(account).get(Resource::Waits), 1, "and its charge");
    }
}
