//! Host operations on a signal's value: loads, stores and read-modify-writes in every memory
//! order hsa.h names. They touch only the slot; what must follow (waking sleepers through
//! SET_EVENT, kicking the engine after a doorbell store) is returned as an [`After`] for the
//! caller to carry out with the runtime, so the common case needs no runtime at all. A signal
//! in device memory behind PCIe comes with its arena's [`HdpFlush`], which writes follow.

use super::hdp::HdpFlush;
use super::slot::Slot;
use std::sync::atomic::{fence, Ordering};

/// A memory order as hsa.h spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Relaxed,
    /// scacquire (and the deprecated acquire).
    Acquire,
    /// screlease (and the deprecated release).
    Release,
    /// scacq_screl (and the deprecated acq_rel).
    AcqRel,
}

impl Order {
    fn rmw(self) -> Ordering {
        match self {
            Order::Relaxed => Ordering::Relaxed,
            Order::Acquire => Ordering::Acquire,
            Order::Release => Ordering::Release,
            Order::AcqRel => Ordering::AcqRel,
        }
    }

    pub fn load(self) -> Ordering {
        match self {
            Order::Relaxed | Order::Release => Ordering::Relaxed,
            Order::Acquire | Order::AcqRel => Ordering::Acquire,
        }
    }

    fn store(self) -> Ordering {
        match self {
            Order::Relaxed | Order::Acquire => Ordering::Relaxed,
            Order::Release | Order::AcqRel => Ordering::Release,
        }
    }
}

/// What the runtime must do after an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum After {
    Nothing,
    /// Waiters sleep in WAIT_EVENTS on this event: SET_EVENT wakes them.
    SetEvent(u32),
    /// A doorbell was rung: wake the command processor if it sleeps.
    Kick,
}

/// Read-modify-write operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rmw {
    Add,
    Subtract,
    And,
    Or,
    Xor,
    Exchange,
}

pub fn load(slot: Slot, order: Order) -> i64 {
    if slot.is_doorbell() {
        log::warn!("load of doorbell signal {:#x}: doorbell signals are write-only", slot.handle());
        return 0;
    }
    slot.value().load(order.load())
}

/// The tail of every write: the HDP flush a device-memory signal needs, then the wake-up
/// decision. The fence pairs with the one a waiter issues after announcing itself in
/// `sleepers` (see wait.rs): either the waiter sees the new value or this sees the waiter.
fn after_write(slot: Slot, hdp: Option<&HdpFlush>, silent: bool) -> After {
    if let Some(h) = hdp {
        h.flush();
    }
    if silent {
        return After::Nothing;
    }
    match slot.event() {
        Some(ev) => {
            fence(Ordering::SeqCst);
            if slot.sleepers().load(Ordering::Relaxed) > 0 {
                After::SetEvent(ev)
            } else {
                After::Nothing
            }
        }
        None => After::Nothing,
    }
}

fn ring_doorbell(slot: Slot, value: i64) -> After {
    let db = slot.doorbell_ptr();
    // SAFETY: a doorbell signal's value word holds the address of its queue's doorbell inside a
    // doorbell mapping that lives as long as the queue (and so the signal).
    let word = unsafe { std::sync::atomic::AtomicU64::from_ptr(db as *mut u64) };
    word.store(value as u64, Ordering::Release);
    After::Kick
}

/// hsa_signal_store_*: `silent` stores (hsa_signal_silent_store_*) wake nobody.
pub fn store(slot: Slot, hdp: Option<&HdpFlush>, value: i64, order: Order, silent: bool) -> After {
    if slot.is_doorbell() {
        return ring_doorbell(slot, value);
    }
    slot.value().store(value, order.store());
    after_write(slot, hdp, silent)
}

/// hsa_signal_{add,subtract,and,or,xor,exchange}_*: returns the previous value.
pub fn rmw(slot: Slot, hdp: Option<&HdpFlush>, op: Rmw, operand: i64, order: Order) -> (i64, After) {
    if slot.is_doorbell() {
        if op == Rmw::Exchange {
            return (0, ring_doorbell(slot, operand));
        }
        log::warn!("{op:?} on doorbell signal {:#x}: doorbell signals only take stores", slot.handle());
        return (0, After::Nothing);
    }
    let v = slot.value();
    let o = order.rmw();
    let old = match op {
        Rmw::Add => v.fetch_add(operand, o),
        Rmw::Subtract => v.fetch_sub(operand, o),
        Rmw::And => v.fetch_and(operand, o),
        Rmw::Or => v.fetch_or(operand, o),
        Rmw::Xor => v.fetch_xor(operand, o),
        Rmw::Exchange => v.swap(operand, o),
    };
    (old, after_write(slot, hdp, false))
}

/// hsa_signal_cas_*: returns the value observed (equal to `expected` when it swapped).
pub fn cas(slot: Slot, hdp: Option<&HdpFlush>, expected: i64, value: i64, order: Order) -> (i64, After) {
    if slot.is_doorbell() {
        log::warn!("cas on doorbell signal {:#x}: doorbell signals only take stores", slot.handle());
        return (0, After::Nothing);
    }
    match slot.value().compare_exchange(expected, value, order.rmw(), order.load()) {
        Ok(old) => (old, after_write(slot, hdp, false)),
        Err(seen) => (seen, After::Nothing),
    }
}
