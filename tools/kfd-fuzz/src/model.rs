//! What the fuzzer believes each simulated process owns, learned from the device's replies. The
//! device's own counts must always agree with it.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
pub struct BufferModel {
    pub va: u64,
    pub size: u64,
    pub gpu: u32,
    pub flags: u32,
    /// The mmap offset ALLOC answered (names the backing file).
    pub mmap_offset: u64,
    /// GPUs a successful MAP named (an approximation: a MAP through garbage ids is not seen).
    pub mapped: BTreeSet<u32>,
}

#[derive(Debug, Clone)]
pub struct QueueModel {
    pub gpu: u32,
    /// The doorbell offset CREATE_QUEUE answered.
    pub doorbell_offset: u64,
}

#[derive(Debug, Clone)]
pub struct EventModel {
    pub event_type: u32,
}

/// Object counts, as the device reports them per process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub buffers: usize,
    pub queues: usize,
    pub events: usize,
}

/// The objects of one process the fuzzer created through raw ioctls.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub buffers: BTreeMap<u64, BufferModel>,
    pub queues: BTreeMap<u32, QueueModel>,
    pub events: BTreeMap<u32, EventModel>,
    /// The buffer installed as the event page, if any (the device refuses to free it).
    pub event_page: Option<u64>,
    /// Whether the device made an event page (a signal event was created without one).
    pub device_page: bool,
    /// Next GPU VA the generator hands out.
    pub next_va: u64,
}

/// First GPU VA raw buffers use (far from the host addresses the thunk's buffers get).
pub const RAW_VA_BASE: u64 = 0x10_0000_0000;

impl Model {
    pub fn new() -> Model {
        Model { next_va: RAW_VA_BASE, ..Model::default() }
    }

    pub fn counts(&self) -> Counts {
        Counts { buffers: self.buffers.len(), queues: self.queues.len(), events: self.events.len() }
    }

    /// A fresh VA range of `size` bytes, 64 KiB aligned, after every earlier one.
    pub fn take_va(&mut self, size: u64) -> u64 {
        let va = self.next_va;
        self.next_va = va + size.next_multiple_of(0x1_0000) + 0x1_0000;
        va
    }
}
