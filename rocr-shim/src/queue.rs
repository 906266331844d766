//! HSA queues: an AQL queue of the thunk whose amd_queue_t starts with the `hsa_queue_t` the
//! caller sees, a doorbell signal whose store rings the queue's doorbell, and a
//! queue_inactive_signal the device writes its error code to.

use crate::agent::Agent;
use crate::hsa::*;
use crate::runtime::{Runtime, WeakRuntime};
use crate::signal::slot::{Slot, SlotInit, FLAG_INTERNAL};
use crate::signal::Signal;
use crate::status::{Error, Result, Status};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use thunk::memory::{open_backing, HostMapping, Space};
use thunk::queue::{packet, AqlQueue};
use uapi::aql::AQL_PACKET_SIZE;
use uapi::signal::{AMD_SIGNAL_KIND_DOORBELL, AMD_SIGNAL_KIND_USER};

/// Bytes of a process doorbell slice (two pages on SOC15, as the thunk maps it).
const DOORBELL_SLICE: u64 = 8192;
/// hsa_queue_t field offsets.
const HSA_QUEUE_TYPE: u64 = 0;
const HSA_QUEUE_DOORBELL_SIGNAL: u64 = 16;
const HSA_QUEUE_ID: u64 = 32;

/// Called once when the device stops a queue: the status and the `hsa_queue_t` address.
pub type QueueCallback = Box<dyn Fn(Status, u64) + Send + Sync>;

static NEXT_QUEUE_ID: AtomicU64 = AtomicU64::new(1);

/// ROCr's size rules: a power of two of at least 64 packets (else INVALID_ARGUMENT), at most
/// 131072 (else OUT_OF_RESOURCES).
pub fn check_size(size: u32) -> Result<()> {
    if !size.is_power_of_two() || size < QUEUE_MIN_PACKETS {
        return Err(Error::invalid_argument(format!(
            "queue size {size}: must be a power of two of at least {QUEUE_MIN_PACKETS} packets"
        )));
    }
    if size > QUEUE_MAX_PACKETS {
        return Err(Error::new(
            Status::OUT_OF_RESOURCES,
            format!("queue size {size}: this agent's queues hold at most {QUEUE_MAX_PACKETS} packets"),
        ));
    }
    Ok(())
}

/// One queue. Its doorbell and inactive signals live as long as it does (the async-event
/// thread may still look at a queue the caller has just destroyed).
pub struct QueueState {
    /// Always `Some` until dropped: the KFD queue goes before its signals.
    aql: Option<AqlQueue>,
    _doorbell_map: HostMapping,
    rt: WeakRuntime,
    pub agent: Agent,
    pub doorbell_signal: u64,
    pub inactive_signal: u64,
    pub id: u64,
    callback: Option<QueueCallback>,
    reported: AtomicBool,
    pub(crate) copy_lock: Mutex<()>,
}

impl QueueState {
    pub(crate) fn aql(&self) -> &AqlQueue {
        self.aql.as_ref().expect("present until dropped")
    }

    /// The `hsa_queue_t *` (the amd_queue_t's first member).
    pub fn address(&self) -> u64 {
        self.aql().desc.va()
    }

    pub fn size(&self) -> u32 {
        self.aql().slots as u32
    }

    /// Reserves a slot (waiting while the ring is full), writes `p` with its header last, and
    /// rings the doorbell; returns the packet's index.
    pub fn submit(&self, rt: &Runtime, p: &[u8; AQL_PACKET_SIZE]) -> u64 {
        let aql = self.aql();
        let index = aql.reserve();
        aql.publish(index, p);
        aql.ring_doorbell(index);
        rt.after(crate::signal::After::Kick);
        index
    }

    pub fn read_index(&self) -> u64 {
        self.aql().read_index()
    }

    pub fn write_index(&self) -> &std::sync::atomic::AtomicU64 {
        self.aql().write_index()
    }

    /// The error code the device wrote to queue_inactive_signal (0: none).
    pub fn error_code(&self) -> i64 {
        // SAFETY: the inactive signal is a pool slot of the runtime, which outlives its queues.
        unsafe { Slot::new(self.inactive_signal) }.value().load(Ordering::Acquire)
    }

    /// Calls the error callback once if the device stopped the queue.
    pub(crate) fn report_error(&self) {
        let code = self.error_code();
        if code == 0 {
            return;
        }
        if let Some(cb) = &self.callback {
            if !self.reported.swap(true, Ordering::AcqRel) {
                let status = crate::kernels::queue_error_status(code);
                log::warn!("queue {} stopped: {status} (code {code})", self.id);
                cb(status, self.address());
            }
        }
    }
}

impl Drop for QueueState {
    fn drop(&mut self) {
        // The KFD queue first, then the signals it pointed at (a runtime being torn down frees
        // its arenas wholesale).
        drop(self.aql.take());
        if let Some(rt) = self.rt.upgrade() {
            for s in [self.doorbell_signal, self.inactive_signal] {
                if let Err(e) = rt.signals().destroy(rt.kfd(), s, true) {
                    log::warn!("destroying a queue signal: {e}");
                }
            }
        }
    }
}

impl Runtime {
    pub(crate) fn new_queue_state(
        &self,
        agent: Agent,
        size: u32,
        queue_type: u32,
        callback: Option<QueueCallback>,
    ) -> Result<QueueState> {
        if !self.agent_desc(agent)?.is_gpu() {
            // The generic status, as ROCr answers for its CPU agent.
            return Err(Error::new(Status::ERROR, "CPU agents take no AQL queues in this runtime"));
        }
        let gpu = self.gpu_desc(agent)?.gpu_id();
        match queue_type {
            HSA_QUEUE_TYPE_MULTI | HSA_QUEUE_TYPE_SINGLE => {}
            HSA_QUEUE_TYPE_COOPERATIVE => {
                return Err(Error::new(
                    Status::INVALID_QUEUE_CREATION,
                    "cooperative queues need global wave sync (GWS), which this runtime does not allocate",
                ))
            }
            t => return Err(Error::invalid_argument(format!("queue type {t} is not an hsa_queue_type_t"))),
        }
        check_size(size)?;
        let kfd = self.kfd();
        let aql =
            AqlQueue::new(kfd, gpu, u64::from(size)).map_err(|e| Error::from_errno("creating the AQL queue", e))?;
        let slice = aql.doorbell_offset & !(DOORBELL_SLICE - 1);
        let file =
            open_backing(kfd, Space::Kfd, slice).map_err(|e| Error::from_errno("opening the doorbell page", e))?;
        let map = HostMapping::map(&file, DOORBELL_SLICE as usize)
            .map_err(|e| Error::from_errno("mapping the doorbells", e))?;
        let doorbell = map.addr() + (aql.doorbell_offset & (DOORBELL_SLICE - 1));
        let db_init = SlotInit {
            kind: AMD_SIGNAL_KIND_DOORBELL,
            value: doorbell as i64,
            queue_ptr: aql.desc.va(),
            flags: FLAG_INTERNAL,
            ..Default::default()
        };
        let doorbell_signal = self.create_internal_signal(db_init, false)?;
        let inactive_init = SlotInit { kind: AMD_SIGNAL_KIND_USER, flags: FLAG_INTERNAL, ..Default::default() };
        let inactive_signal = match self.create_internal_signal(inactive_init, false) {
            Ok(s) => s,
            Err(e) => {
                let _ = self.signals().destroy(kfd, doorbell_signal, true);
                return Err(e);
            }
        };
        aql.set_inactive_signal(inactive_signal);
        let id = NEXT_QUEUE_ID.fetch_add(1, Ordering::Relaxed);
        aql.desc.u32_at(HSA_QUEUE_TYPE).store(queue_type, Ordering::Relaxed);
        aql.desc.u64_at(HSA_QUEUE_ID).store(id, Ordering::Relaxed);
        aql.desc.u64_at(HSA_QUEUE_DOORBELL_SIGNAL).store(doorbell_signal, Ordering::Release);
        Ok(QueueState {
            aql: Some(aql),
            _doorbell_map: map,
            rt: self.downgrade(),
            agent,
            doorbell_signal,
            inactive_signal,
            id,
            callback,
            reported: AtomicBool::new(false),
            copy_lock: Mutex::new(()),
        })
    }

    /// hsa_queue_create: returns the queue, also entered in the runtime's table under its
    /// `hsa_queue_t` address.
    pub fn create_queue_raw(
        &self,
        agent: Agent,
        size: u32,
        queue_type: u32,
        callback: Option<QueueCallback>,
    ) -> Result<Arc<QueueState>> {
        if self.queues().count(agent) >= QUEUES_MAX as usize {
            return Err(Error::new(Status::OUT_OF_RESOURCES, format!("an agent has at most {QUEUES_MAX} queues")));
        }
        self.monitor().start_once(self)?;
        let q = Arc::new(self.new_queue_state(agent, size, queue_type, callback)?);
        self.queues().insert(q.clone());
        Ok(q)
    }

    /// hsa_queue_destroy of the queue at `hsa_queue_t` address `addr`.
    pub fn destroy_queue_raw(&self, addr: u64) -> Result<()> {
        let q = self.queues().remove(addr)?;
        drop(q);
        Ok(())
    }

    /// The queue at `hsa_queue_t` address `addr`.
    pub fn queue(&self, addr: u64) -> Result<Arc<QueueState>> {
        self.queues().get(addr)
    }

    /// hsa_queue_inactivate: the queue stops processing packets (KFD UPDATE_QUEUE to 0%).
    pub fn inactivate_queue(&self, addr: u64) -> Result<()> {
        let q = self.queue(addr)?;
        let ring = &q.aql().ring;
        q.aql().update(0, ring.va(), ring.size() as u32).map_err(|e| Error::from_errno("UPDATE_QUEUE", e))
    }

    /// An owned queue (destroyed on drop).
    pub fn create_queue(&self, agent: Agent, size: u32, callback: Option<QueueCallback>) -> Result<Queue> {
        let q = self.create_queue_raw(agent, size, HSA_QUEUE_TYPE_MULTI, callback)?;
        Ok(Queue { rt: self.clone(), q })
    }
}

fn not_a_queue(addr: u64) -> Error {
    Error::new(Status::INVALID_QUEUE, format!("{addr:#x} is not a queue of this runtime"))
}

/// The runtime's queues: the caller's, by `hsa_queue_t` address, and its own (for copies), one
/// per GPU agent and outside QUEUES_MAX.
#[derive(Default)]
pub(crate) struct QueueTable {
    user: Mutex<HashMap<u64, Arc<QueueState>>>,
    internal: Mutex<HashMap<Agent, Arc<QueueState>>>,
}

impl QueueTable {
    /// The caller's queues on `agent`.
    fn count(&self, agent: Agent) -> usize {
        self.user.lock().values().filter(|q| q.agent == agent).count()
    }

    fn insert(&self, q: Arc<QueueState>) {
        self.user.lock().insert(q.address(), q);
    }

    fn remove(&self, addr: u64) -> Result<Arc<QueueState>> {
        self.user.lock().remove(&addr).ok_or_else(|| not_a_queue(addr))
    }

    fn get(&self, addr: u64) -> Result<Arc<QueueState>> {
        self.user.lock().get(&addr).cloned().ok_or_else(|| not_a_queue(addr))
    }

    /// The caller's queues now.
    pub(crate) fn all(&self) -> Vec<Arc<QueueState>> {
        self.user.lock().values().cloned().collect()
    }

    /// How many queues the caller has.
    pub(crate) fn len(&self) -> usize {
        self.user.lock().len()
    }

    /// The runtime's own queue on `agent`, made by `create` on first use.
    pub(crate) fn internal(
        &self,
        agent: Agent,
        create: impl FnOnce() -> Result<QueueState>,
    ) -> Result<Arc<QueueState>> {
        let mut queues = self.internal.lock();
        if let Some(q) = queues.get(&agent) {
            return Ok(q.clone());
        }
        let q = Arc::new(create()?);
        queues.insert(agent, q.clone());
        Ok(q)
    }

    /// Forgets every queue (runtime teardown); they are dropped after the locks are released.
    pub(crate) fn clear(&self) {
        let user: Vec<_> = self.user.lock().drain().collect();
        let internal: Vec<_> = self.internal.lock().drain().collect();
        drop((user, internal));
    }
}

/// An owned queue.
pub struct Queue {
    rt: Runtime,
    q: Arc<QueueState>,
}

impl Queue {
    pub fn state(&self) -> &QueueState {
        &self.q
    }

    /// The `hsa_queue_t *`.
    pub fn address(&self) -> u64 {
        self.q.address()
    }

    /// Submits one packet (see [`thunk::queue::packet`] for builders); returns its index.
    pub fn submit(&self, p: &[u8; AQL_PACKET_SIZE]) -> u64 {
        self.q.submit(&self.rt, p)
    }

    /// Runs builtin `b` over `grid` work-items and waits for it (`timeout` in ns).
    pub fn dispatch_sync(&self, b: crate::Builtin, args: &[u8], grid: u32, timeout: u64) -> Result<()> {
        self.rt.dispatch_sync(&self.q, b, args, grid, 64, timeout)
    }

    /// A 1-D dispatch of builtin `b` whose arguments are already in `kernarg` (which must live
    /// until it completes); `completion` is decremented when it does. Returns the index.
    pub fn dispatch(
        &self,
        b: crate::Builtin,
        kernarg: &crate::Buffer,
        grid: u32,
        workgroup: u16,
        completion: Option<&Signal>,
        barrier: bool,
    ) -> Result<u64> {
        let kernel = self.rt.kernel_object(self.q.agent, b)?;
        let done = completion.map_or(0, Signal::handle);
        Ok(self.submit(&packet::dispatch(
            kernel,
            kernarg.addr(),
            [grid, 1, 1],
            [workgroup.max(1), 1, 1],
            done,
            barrier,
        )))
    }

    /// A barrier-AND packet: `completion` goes when every dependency (up to five) is 0.
    pub fn barrier_and(&self, deps: &[&Signal], completion: Option<&Signal>) -> Result<u64> {
        Ok(self.submit(&packet::barrier_and(deps_of(deps)?, completion.map_or(0, Signal::handle), false)))
    }

    /// A barrier-OR packet: `completion` goes when any dependency (up to five) is 0.
    pub fn barrier_or(&self, deps: &[&Signal], completion: Option<&Signal>) -> Result<u64> {
        Ok(self.submit(&packet::barrier_or(deps_of(deps)?, completion.map_or(0, Signal::handle), false)))
    }
}

fn deps_of(deps: &[&Signal]) -> Result<[u64; 5]> {
    if deps.len() > 5 {
        return Err(Error::invalid_argument(format!("a barrier packet takes 5 dependencies, not {}", deps.len())));
    }
    let mut out = [0u64; 5];
    for (o, d) in out.iter_mut().zip(deps) {
        *o = d.handle();
    }
    Ok(out)
}

impl Drop for Queue {
    fn drop(&mut self) {
        if let Err(e) = self.rt.destroy_queue_raw(self.q.address()) {
            log::warn!("destroying queue {}: {e}", self.q.id);
        }
    }
}
