//! HSA signals: `amd_signal_t`s in GPU-visible memory, pooled or in batches, with interrupt
//! (KFD event) wake-ups; the runtime's signal calls and the owning Rust [`Signal`] type.

pub mod arena;
pub mod cache;
pub mod events;
pub mod hdp;
pub mod ops;
pub mod slot;
pub mod wait;

use crate::agent::{Agent, DeviceType};
use crate::hsa::{HSA_AMD_SIGNAL_AMD_GPU_ONLY, HSA_AMD_SIGNAL_IPC};
use crate::runtime::Runtime;
use crate::status::{Error, Result, Status};
use arena::{Arena, DeviceRequest};
pub use arena::{NewBatch, Placement};
pub use ops::{After, Order, Rmw};
use slot::{Slot, SlotInit, FLAG_BATCH_MEMBER};
use std::sync::Arc;
use uapi::signal::AMD_SIGNAL_KIND_USER;
pub use wait::{timestamp, Condition, WaitEnd, WaitHint};

/// What the shim's header reports about one signal (`cuse_kfd_shim_signal_info_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SignalInfo {
    /// 1 if a KFD event wakes its waiters.
    pub interrupt: u32,
    pub event_id: u32,
    /// 0 host memory, 1 device memory.
    pub placement: u32,
    /// 1 if host stores to it are followed by an HDP flush.
    pub needs_flush: u32,
    pub batch_member: u32,
    pub reserved: u32,
}

impl Runtime {
    /// ROCr's rule (hsa_amd_signal_create): a signal gets an interrupt event unless it is
    /// GPU-only, or every consumer named is a GPU (no host thread will wait on it).
    fn wants_interrupt(&self, consumers: &[Agent], attributes: u64) -> Result<bool> {
        if attributes & HSA_AMD_SIGNAL_IPC != 0 {
            return Err(Error::invalid_argument(
                "HSA_AMD_SIGNAL_IPC: signals shared between processes are not supported by this runtime",
            ));
        }
        if attributes & !(HSA_AMD_SIGNAL_AMD_GPU_ONLY | HSA_AMD_SIGNAL_IPC) != 0 {
            return Err(Error::invalid_argument(format!("unknown signal attributes {attributes:#x}")));
        }
        let mut any_cpu = consumers.is_empty();
        for c in consumers {
            any_cpu |= self.agent_desc(*c)?.device == DeviceType::Cpu;
        }
        Ok(attributes & HSA_AMD_SIGNAL_AMD_GPU_ONLY == 0 && any_cpu)
    }

    /// hsa_amd_signal_create: returns the `hsa_signal_t` handle, owned by the caller until
    /// [`Runtime::destroy_signal_raw`].
    pub fn create_signal_raw(&self, value: i64, consumers: &[Agent], attributes: u64) -> Result<u64> {
        let interrupt = self.wants_interrupt(consumers, attributes)?;
        let init = SlotInit { kind: AMD_SIGNAL_KIND_USER, value, ..Default::default() };
        self.signals().create(self.kfd(), init, interrupt)
    }

    /// A signal of the runtime's own (a queue's doorbell or inactive signal, a dispatch's
    /// completion), with the given slot contents.
    pub(crate) fn create_internal_signal(&self, init: SlotInit, interrupt: bool) -> Result<u64> {
        self.signals().create(self.kfd(), init, interrupt)
    }

    pub fn destroy_signal_raw(&self, handle: u64) -> Result<()> {
        self.signals().destroy(self.kfd(), handle, false)
    }

    /// An owned signal (destroyed on drop).
    pub fn create_signal(&self, value: i64, consumers: &[Agent]) -> Result<Signal> {
        let h = self.create_signal_raw(value, consumers, 0)?;
        Signal::adopt(self, h)
    }

    /// hsa_amd_signal_batch_create: `count` signals in one arena; in the signal-capable pool of
    /// `device` when given and possible, else in host memory. Returns the batch and where the
    /// signals went.
    pub fn create_batch_raw(
        &self,
        count: u32,
        value: i64,
        consumers: &[Agent],
        attributes: u64,
        device: Option<Agent>,
    ) -> Result<NewBatch> {
        let interrupt = self.wants_interrupt(consumers, attributes)?;
        let request = match device {
            None => None,
            Some(agent) => {
                let desc = self.agent_desc(agent)?;
                match self.signal_pool(agent) {
                    Some(_) => Some(DeviceRequest {
                        gpu_id: desc.gpu_id(),
                        hdp: if desc.pcie_stores_need_flush {
                            Some(self.hdp_page(desc.gpu_id())?.flusher())
                        } else {
                            None
                        },
                    }),
                    None => {
                        log::debug!("agent {:#x} has no signal-capable pool: the batch goes to host memory", agent.0);
                        None
                    }
                }
            }
        };
        self.signals().create_batch(self.kfd(), count, value, interrupt, request)
    }

    /// hsa_amd_signal_batch_destroy: releases the batch handle; members live on.
    pub fn destroy_batch_raw(&self, id: u64) -> Result<()> {
        self.signals().destroy_batch(id)
    }

    /// An owned batch.
    pub fn create_batch(&self, count: u32, value: i64, device: Option<Agent>) -> Result<SignalBatch> {
        let b = self.create_batch_raw(count, value, &[], 0, device)?;
        let signals = b.handles.iter().map(|&h| Signal::adopt(self, h)).collect::<Result<Vec<_>>>()?;
        Ok(SignalBatch { rt: self.clone(), id: Some(b.id), signals, placement: b.placement })
    }

    fn arena_of(&self, handle: u64) -> Result<Arc<Arena>> {
        self.signals()
            .lookup(handle)
            .ok_or_else(|| Error::new(Status::INVALID_SIGNAL, format!("{handle:#x} is not a signal of this runtime")))
    }

    /// Waits until one of `specs` (handle, condition, compare value) holds, one is destroyed,
    /// or `timeout` ticks pass (u64::MAX: forever).
    pub fn wait_any(
        &self,
        specs: &[(u64, Condition, i64)],
        timeout: u64,
        hint: WaitHint,
        order: Order,
    ) -> Result<WaitEnd> {
        if specs.is_empty() {
            return Err(Error::invalid_argument("a wait needs at least one signal"));
        }
        // Holding the arenas keeps every slot mapped while we look at it.
        let arenas = specs.iter().map(|s| self.arena_of(s.0)).collect::<Result<Vec<_>>>()?;
        if let Some((s, _)) = specs.iter().zip(&arenas).find(|(s, a)| a.view(s.0).is_doorbell()) {
            return Err(Error::new(
                Status::INVALID_SIGNAL,
                format!("{:#x} is a doorbell signal: it can be stored to, not waited on", s.0),
            ));
        }
        let waits: Vec<wait::WaitSpec> = specs
            .iter()
            .zip(&arenas)
            .map(|(s, a)| wait::WaitSpec { slot: a.view(s.0), cond: s.1, compare: s.2 })
            .collect();
        Ok(wait::wait(self.kfd(), self.signals().events(), &waits, timeout, hint, order))
    }

    pub fn signal_info(&self, handle: u64) -> Result<SignalInfo> {
        let arena = self.arena_of(handle)?;
        let s = arena.view(handle);
        if s.tag() == 0 {
            return Err(Error::new(Status::INVALID_SIGNAL, format!("signal {handle:#x} was destroyed")));
        }
        Ok(SignalInfo {
            interrupt: u32::from(s.event().is_some()),
            event_id: s.event().unwrap_or(0),
            placement: u32::from(arena.placement == Placement::Device),
            needs_flush: u32::from(arena.hdp().is_some()),
            batch_member: u32::from(s.flags() & FLAG_BATCH_MEMBER != 0),
            reserved: 0,
        })
    }
}

/// An owned signal: `hsa_signal_t` plus its runtime; destroyed on drop.
pub struct Signal {
    rt: Runtime,
    slot: Slot,
    /// Keeps the slot mapped, and has the HDP flush its stores need.
    arena: Arc<Arena>,
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signal({:#x})", self.slot.handle())
    }
}

impl Signal {
    fn adopt(rt: &Runtime, handle: u64) -> Result<Signal> {
        let arena = rt.arena_of(handle)?;
        Ok(Signal { rt: rt.clone(), slot: arena.view(handle), arena })
    }

    /// The `hsa_signal_t` handle (the amd_signal_t's address), for packets.
    pub fn handle(&self) -> u64 {
        self.slot.handle()
    }

    pub fn load(&self, order: Order) -> i64 {
        ops::load(self.slot, order)
    }

    pub fn store(&self, value: i64, order: Order) {
        self.rt.after(ops::store(self.slot, self.arena.hdp(), value, order, false));
    }

    pub fn silent_store(&self, value: i64, order: Order) {
        self.rt.after(ops::store(self.slot, self.arena.hdp(), value, order, true));
    }

    /// A read-modify-write; returns the previous value.
    pub fn rmw(&self, op: Rmw, operand: i64, order: Order) -> i64 {
        let (old, after) = ops::rmw(self.slot, self.arena.hdp(), op, operand, order);
        self.rt.after(after);
        old
    }

    pub fn cas(&self, expected: i64, value: i64, order: Order) -> i64 {
        let (seen, after) = ops::cas(self.slot, self.arena.hdp(), expected, value, order);
        self.rt.after(after);
        seen
    }

    /// hsa_signal_wait_*: the value observed when the wait ended (it may not satisfy the
    /// condition after a timeout). `timeout` is in system ticks (ns); u64::MAX waits forever.
    pub fn wait(&self, cond: Condition, compare: i64, timeout: u64, hint: WaitHint) -> i64 {
        let spec = wait::WaitSpec { slot: self.slot, cond, compare };
        wait::wait(self.rt.kfd(), self.rt.signals().events(), &[spec], timeout, hint, Order::Acquire).value()
    }

    /// Packet timestamps the device wrote on completion (GPU clock ticks).
    pub fn timestamps(&self) -> (u64, u64) {
        (self.slot.start_ts(), self.slot.end_ts())
    }

    pub fn info(&self) -> Result<SignalInfo> {
        self.rt.signal_info(self.handle())
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        if let Err(e) = self.rt.destroy_signal_raw(self.slot.handle()) {
            log::warn!("destroying signal {:#x}: {e}", self.slot.handle());
        }
    }
}

/// An owned batch: its handle (released on drop or by [`SignalBatch::release`]) and members.
pub struct SignalBatch {
    rt: Runtime,
    id: Option<u64>,
    pub signals: Vec<Signal>,
    pub placement: Placement,
}

impl SignalBatch {
    /// Releases the batch handle now; the members stay.
    pub fn release(&mut self) -> Result<()> {
        match self.id.take() {
            Some(id) => self.rt.destroy_batch_raw(id),
            None => Ok(()),
        }
    }

    /// Releases the handle and hands over the members.
    pub fn into_signals(mut self) -> Vec<Signal> {
        if let Err(e) = self.release() {
            log::warn!("releasing a signal batch: {e}");
        }
        std::mem::take(&mut self.signals)
    }
}

impl Drop for SignalBatch {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            log::warn!("releasing a signal batch: {e}");
        }
    }
}
