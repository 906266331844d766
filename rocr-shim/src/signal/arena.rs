//! Where signals live: arenas of 128-byte slots in GPU-visible memory.
//!
//! * Pool arenas serve single creates: a free list of slots, refilled 512 slots (one
//!   allocation) at a time, so a create is a pop, not an ioctl. They live as long as the runtime.
//! * A batch arena is one allocation for the N signals of one hsa_amd_signal_batch_create, in
//!   host memory or in a GPU's signal-capable VRAM pool. It counts N members plus the batch
//!   handle; whichever of them goes last frees it, exactly once. Its members share one KFD
//!   event (one CREATE_EVENT per batch, not per signal): a waiter woken for another member
//!   re-checks its own value and sleeps again. Its memory, once nobody can see it any more,
//!   goes to the [`super::cache`] for the next batch of the same size class and placement.
//!
//! The registry maps an address range to its arena: it validates handles on destroy and keeps
//! an arena's memory alive (an `Arc`) while a waiter still looks at one of its slots.

use super::cache::{ArenaCache, ArenaMemory, Block, Key};
use super::events::{Event, EventPool};
use super::hdp::HdpFlush;
use super::slot::{Slot, SlotInit, FLAG_BATCH_MEMBER, FLAG_DEVICE_MEMORY, FLAG_INTERNAL, SLOT_BYTES};
use crate::memory::Allocation;
use crate::status::{Error, Result, Status};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use thunk::memory::Kind;
use thunk::Kfd;
use uapi::signal::AMD_SIGNAL_KIND_USER;

/// Slots per pool arena (64 KiB).
const POOL_SLOTS: u64 = 512;
/// Largest batch (64 MiB of slots).
pub const MAX_BATCH: u32 = 1 << 19;

/// Where a batch's signals went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Host,
    Device,
}

/// Device placement asked for: a GPU's signal-capable pool, and its HDP flush when host stores
/// to it need one.
#[derive(Clone)]
pub struct DeviceRequest {
    pub gpu_id: u32,
    pub hdp: Option<HdpFlush>,
}

pub struct Arena {
    mem: ArenaMemory,
    slots: u64,
    pub placement: Placement,
    batch: Option<BatchState>,
    /// The flush a host store to one of its signals needs (device memory behind PCIe).
    hdp: Option<HdpFlush>,
}

struct BatchState {
    /// Live members plus the batch handle.
    refs: AtomicU32,
    released: AtomicBool,
    event: Option<Event>,
}

impl Arena {
    fn base(&self) -> u64 {
        self.mem.va()
    }

    fn holds(&self, handle: u64) -> bool {
        handle >= self.base()
            && handle < self.base() + self.slots * SLOT_BYTES
            && (handle - self.base()).is_multiple_of(SLOT_BYTES)
    }

    fn slot(&self, i: u64) -> Slot {
        assert!(i < self.slots);
        // SAFETY: slot `i` lies inside this arena's allocation, which lives as long as `self`.
        unsafe { Slot::new(self.base() + i * SLOT_BYTES) }
    }

    /// The HDP flush host stores to its signals need, if they do.
    pub fn hdp(&self) -> Option<&HdpFlush> {
        self.hdp.as_ref()
    }

    /// A view of `handle`, which this arena holds; valid while the arena lives.
    pub fn view(&self, handle: u64) -> Slot {
        assert!(self.holds(handle));
        self.slot((handle - self.base()) / SLOT_BYTES)
    }
}

/// `a` with its pages faulted in (see [`super::cache`]).
fn populated(a: Allocation) -> std::result::Result<Allocation, thunk::Errno> {
    a.mem().populate()?;
    Ok(a)
}

/// Debug counters (the shim header's cuse_kfd_shim_counters_t).
#[derive(Debug, Default)]
struct Counters {
    live_signals: AtomicU64,
    pool_arenas: AtomicU64,
    batch_arenas_created: AtomicU64,
    batch_arenas_freed: AtomicU64,
    /// Times an arena was found released twice (must stay 0).
    arena_double_frees: AtomicU64,
}

/// The signal manager's part of the debug counters, at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignalStats {
    pub live_signals: u64,
    pub pool_arenas: u64,
    pub batch_arenas_created: u64,
    pub batch_arenas_freed: u64,
    pub arena_double_frees: u64,
    pub events_created: u64,
    pub arena_memory_reused: u64,
}

/// A new batch.
#[derive(Debug)]
pub struct NewBatch {
    pub id: u64,
    pub handles: Vec<u64>,
    pub placement: Placement,
}

pub struct SignalManager {
    /// The GPU whose GTT holds host signals, and every GPU they are mapped to.
    host_gpu: u32,
    gpus: Vec<u32>,
    registry: RwLock<BTreeMap<u64, Arc<Arena>>>,
    free: Mutex<Vec<u64>>,
    batches: Mutex<HashMap<u64, Arc<Arena>>>,
    events: EventPool,
    next_tag: AtomicU64,
    next_batch: AtomicU64,
    counters: Counters,
    cache: Arc<ArenaCache>,
}

impl SignalManager {
    pub fn new(host_gpu: u32, gpus: Vec<u32>) -> SignalManager {
        SignalManager {
            host_gpu,
            gpus,
            registry: RwLock::default(),
            free: Mutex::default(),
            batches: Mutex::default(),
            events: EventPool::new(host_gpu),
            next_tag: AtomicU64::new(1),
            next_batch: AtomicU64::new(1),
            counters: Counters::default(),
            cache: Arc::default(),
        }
    }

    /// The KFD events of interrupt signals (waiters sleep on them).
    pub fn events(&self) -> &EventPool {
        &self.events
    }

    pub fn stats(&self) -> SignalStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = &self.counters;
        SignalStats {
            live_signals: get(&c.live_signals),
            pool_arenas: get(&c.pool_arenas),
            batch_arenas_created: get(&c.batch_arenas_created),
            batch_arenas_freed: get(&c.batch_arenas_freed),
            arena_double_frees: get(&c.arena_double_frees),
            events_created: self.events.created(),
            arena_memory_reused: self.cache.reused(),
        }
    }

    /// Frees the memory kept for future batches (the caller's allocations need it).
    pub fn trim_cache(&self) {
        self.cache.trim();
    }

    fn register(&self, arena: Arc<Arena>) {
        self.registry.write().insert(arena.base(), arena);
    }

    /// The arena holding slot `handle`, if it is one of this runtime's slots.
    pub fn lookup(&self, handle: u64) -> Option<Arc<Arena>> {
        let reg = self.registry.read();
        let (_, a) = reg.range(..=handle).next_back()?;
        a.holds(handle).then(|| a.clone())
    }

    fn tag(&self) -> u64 {
        self.next_tag.fetch_add(1, Ordering::Relaxed)
    }

    fn host_alloc(&self, kfd: &Kfd, bytes: u64) -> Result<Allocation> {
        Allocation::new(kfd, self.host_gpu, bytes, Kind::Gtt, &self.gpus)
            .map_err(|e| Error::from_errno("allocating signal memory", e))
    }

    fn pop_slot(&self, kfd: &Kfd) -> Result<u64> {
        let mut free = self.free.lock();
        if let Some(h) = free.pop() {
            return Ok(h);
        }
        let alloc = self.host_alloc(kfd, POOL_SLOTS * SLOT_BYTES)?;
        // Pool arenas live as long as the runtime: nothing to give back.
        let mem = ArenaMemory::new(Block::Whole(alloc), Key::new(None, 0), std::sync::Weak::new());
        let arena = Arc::new(Arena { mem, slots: POOL_SLOTS, placement: Placement::Host, batch: None, hdp: None });
        free.extend((0..POOL_SLOTS).rev().map(|i| arena.base() + i * SLOT_BYTES));
        self.counters.pool_arenas.fetch_add(1, Ordering::Relaxed);
        self.register(arena);
        Ok(free.pop().expect("just refilled"))
    }

    /// A single signal from the pool: an interrupt signal (with a pooled KFD event) when
    /// `interrupt`, else a polled one. `init.kind`, `init.value` and `init.queue_ptr` are kept.
    pub fn create(&self, kfd: &Kfd, mut init: SlotInit, interrupt: bool) -> Result<u64> {
        let event = if interrupt { self.events.get(kfd)? } else { None };
        let handle = match self.pop_slot(kfd) {
            Ok(h) => h,
            Err(e) => {
                if let Some(ev) = event {
                    self.events.put(ev);
                }
                return Err(e);
            }
        };
        if let Some(ev) = event {
            init.mailbox = ev.mailbox;
            init.event_id = ev.id;
        }
        // SAFETY: a pool slot: pool arenas live as long as this manager.
        unsafe { Slot::new(handle) }.init(&init, self.tag());
        self.counters.live_signals.fetch_add(1, Ordering::Relaxed);
        Ok(handle)
    }

    /// Destroys a signal: wakes its sleepers, then gives its slot (and event) back. A queue's
    /// own signals (FLAG_INTERNAL) go only with their queue (`internal`).
    pub fn destroy(&self, kfd: &Kfd, handle: u64, internal: bool) -> Result<()> {
        let arena = self.lookup(handle).ok_or_else(|| {
            Error::new(Status::INVALID_SIGNAL, format!("{handle:#x} is not a signal of this runtime"))
        })?;
        let slot = arena.view(handle);
        if slot.flags() & FLAG_INTERNAL != 0 && !internal && slot.tag() != 0 {
            return Err(Error::new(
                Status::INVALID_SIGNAL,
                format!("signal {handle:#x} is a queue's doorbell or inactive signal: hsa_queue_destroy releases it"),
            ));
        }
        if slot.retire() == 0 {
            return Err(Error::new(Status::INVALID_SIGNAL, format!("signal {handle:#x} was destroyed already")));
        }
        let event = slot.event();
        if let Some(ev) = event {
            if slot.sleepers().load(Ordering::SeqCst) > 0 {
                let _ = kfd.set_event(ev);
            }
        }
        self.counters.live_signals.fetch_sub(1, Ordering::Relaxed);
        match &arena.batch {
            None => {
                if let Some(ev) = event {
                    self.events.put(Event { id: ev, mailbox: slot.mailbox() });
                }
                self.free.lock().push(handle);
            }
            Some(b) => {
                if b.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.release_batch(&arena);
                }
            }
        }
        Ok(())
    }

    /// Creates `count` signals in one arena: in `device` memory when asked and possible, else
    /// in host memory.
    pub fn create_batch(
        &self,
        kfd: &Kfd,
        count: u32,
        value: i64,
        interrupt: bool,
        device: Option<DeviceRequest>,
    ) -> Result<NewBatch> {
        if count == 0 {
            return Err(Error::invalid_argument("a batch of 0 signals"));
        }
        if count > MAX_BATCH {
            return Err(Error::new(Status::OUT_OF_RESOURCES, format!("a batch holds at most {MAX_BATCH} signals")));
        }
        let bytes = u64::from(count) * SLOT_BYTES;
        let mut placed = None;
        if let Some(d) = device {
            let key = Key::new(Some(d.gpu_id), bytes);
            let vram = |bytes| Allocation::new(kfd, d.gpu_id, bytes, Kind::Vram, &[d.gpu_id]);
            let alloc = self.cache.block(key, |bytes| vram(bytes).and_then(populated), vram);
            match alloc {
                Ok(a) => {
                    placed = Some((ArenaMemory::new(a, key, Arc::downgrade(&self.cache)), Placement::Device, d.hdp))
                }
                Err(e) => log::debug!("batch of {count} signals: device memory failed ({e}), using host memory"),
            }
        }
        let (mem, placement, hdp) = match placed {
            Some(p) => p,
            None => {
                let key = Key::new(None, bytes);
                let slab = |bytes| {
                    self.host_alloc(kfd, bytes)
                        .and_then(|a| populated(a).map_err(|e| Error::from_errno("faulting in signal memory", e)))
                };
                let alloc = self.cache.block(key, slab, |bytes| self.host_alloc(kfd, bytes))?;
                (ArenaMemory::new(alloc, key, Arc::downgrade(&self.cache)), Placement::Host, None)
            }
        };
        let event = if interrupt { self.events.get(kfd)? } else { None };
        let arena = Arc::new(Arena {
            mem,
            slots: u64::from(count),
            placement,
            batch: Some(BatchState { refs: AtomicU32::new(count + 1), released: AtomicBool::new(false), event }),
            hdp,
        });
        let init = SlotInit {
            kind: AMD_SIGNAL_KIND_USER,
            value,
            mailbox: event.map_or(0, |e| e.mailbox),
            event_id: event.map_or(0, |e| e.id),
            queue_ptr: 0,
            flags: FLAG_BATCH_MEMBER | if placement == Placement::Device { FLAG_DEVICE_MEMORY } else { 0 },
        };
        let first = self.next_tag.fetch_add(u64::from(count), Ordering::Relaxed);
        let handles: Vec<u64> = (0..u64::from(count))
            .map(|i| {
                let s = arena.slot(i);
                s.init(&init, first + i);
                s.handle()
            })
            .collect();
        let id = self.next_batch.fetch_add(1, Ordering::Relaxed);
        self.register(arena.clone());
        self.batches.lock().insert(id, arena);
        self.counters.live_signals.fetch_add(u64::from(count), Ordering::Relaxed);
        self.counters.batch_arenas_created.fetch_add(1, Ordering::Relaxed);
        Ok(NewBatch { id, handles, placement })
    }

    /// Releases the batch handle; the members live on.
    pub fn destroy_batch(&self, id: u64) -> Result<()> {
        let arena = self
            .batches
            .lock()
            .remove(&id)
            .ok_or_else(|| Error::invalid_argument(format!("{id:#x} is not a live signal batch")))?;
        let b = arena.batch.as_ref().expect("batch arenas have batch state");
        if b.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.release_batch(&arena);
        }
        Ok(())
    }

    /// The last reference went: forget the arena (its memory goes with the last `Arc`, which a
    /// waiter may still hold for a moment) and give its event back.
    fn release_batch(&self, arena: &Arc<Arena>) {
        let b = arena.batch.as_ref().expect("batch arenas have batch state");
        if b.released.swap(true, Ordering::AcqRel) {
            self.counters.arena_double_frees.fetch_add(1, Ordering::Relaxed);
            log::error!("signal batch arena {:#x} released twice", arena.base());
            return;
        }
        self.registry.write().remove(&arena.base());
        if let Some(ev) = b.event {
            self.events.put(ev);
        }
        self.counters.batch_arenas_freed.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops every arena (runtime shutdown).
    pub fn clear(&self) {
        self.batches.lock().clear();
        self.free.lock().clear();
        self.registry.write().clear();
        self.cache.trim();
    }
}
