//! The runtime: one open KFD device, its agents and pools, and the tables of what this runtime
//! created (signals, queues, memory). [`Runtime`] is a cheap handle; everything it made is
//! released when the last handle goes (hsa_shut_down of the last reference, for C).

use crate::agent::{Agent, AgentDesc, Agents, LayoutConfig, Pool, PoolDesc, PoolKind};
use crate::hsa::*;
use crate::info::{self, Info};
use crate::kernels::Kernels;
use crate::memory::{self, Allocation, MemoryTable};
use crate::monitor::Monitor;
use crate::queue::QueueTable;
use crate::signal::arena::SignalManager;
use crate::signal::hdp::{HdpPage, HdpPages};
use crate::signal::ops::After;
use crate::status::{Error, Result, Status};
use std::sync::{Arc, Weak};
use thunk::transport::EmbeddedTransport;
use thunk::Kfd;

/// How to open the runtime.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The device; `None` opens the one the environment names (`Kfd::open_default`:
    /// CUSE_KFD_EMBEDDED=1, else CUSE_KFD_DEVICE or /dev/kfd).
    pub kfd: Option<Kfd>,
    /// HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH of every GPU; `None`: discrete GPUs (no CPU
    /// cores in their node) report true.
    pub pcie_stores_need_flush: Option<bool>,
    /// Whether GPU VRAM pools report HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE (default true).
    pub no_device_signal_pool: bool,
    /// Wake the command processor after each doorbell store; `None`: only for an embedded
    /// device, where it is a function call (over /dev/kfd it would be an ioctl per doorbell).
    pub kick_doorbells: Option<bool>,
}

impl Config {
    /// The configuration the C ABI uses: the environment's device, and the switches
    /// CUSE_KFD_SHIM_PCIE_STORES_NEED_FLUSH=0|1 and CUSE_KFD_SHIM_DEVICE_SIGNALS=0.
    pub fn from_env() -> Config {
        let flag = |name: &str| thunk::secure_env::var(name).map(|v| v != "0");
        Config {
            kfd: None,
            pcie_stores_need_flush: flag("CUSE_KFD_SHIM_PCIE_STORES_NEED_FLUSH"),
            no_device_signal_pool: flag("CUSE_KFD_SHIM_DEVICE_SIGNALS") == Some(false),
            kick_doorbells: None,
        }
    }
}

/// What one runtime holds: the device and one state per subsystem, each with its own locks.
struct Inner {
    kfd: Kfd,
    /// Wake the command processor after a doorbell store ([`Config::kick_doorbells`]).
    kick: bool,
    /// HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY.
    timestamp_hz: u64,
    agents: Agents,
    signals: SignalManager,
    memory: MemoryTable,
    queues: QueueTable,
    kernels: Kernels,
    hdp: HdpPages,
    monitor: Monitor,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The async-event thread first (it looks at the queues), then the queues (their
        // signals and memory go with the arenas and allocations below).
        self.monitor.stop(&self.kfd);
        self.queues.clear();
        self.kernels.clear();
        self.signals.clear();
        self.memory.clear();
    }
}

/// An HSA runtime over one KFD device. Clones share it.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

/// A runtime that does not keep it alive (what its queues and its async-event thread hold).
#[derive(Clone)]
pub(crate) struct WeakRuntime(Weak<Inner>);

impl WeakRuntime {
    /// The runtime, unless its last handle went.
    pub(crate) fn upgrade(&self) -> Option<Runtime> {
        self.0.upgrade().map(|inner| Runtime { inner })
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("agents", &self.inner.agents.len())
            .field("gpus", &self.inner.agents.gpu_ids())
            .finish()
    }
}

impl Runtime {
    /// Opens the device and builds agents and pools from its topology.
    pub fn new(config: Config) -> Result<Runtime> {
        let kfd = match config.kfd {
            Some(k) => k,
            None => Kfd::open_default().map_err(|e| Error::from_errno("opening the KFD device", e))?,
        };
        let (major, _) = kfd.version().map_err(|e| Error::from_errno("GET_VERSION", e))?;
        if major != 1 {
            return Err(Error::new(Status::ERROR, format!("KFD interface {major}.x: this runtime speaks 1.x")));
        }
        let gpus = kfd.gpu_ids().map_err(|e| Error::from_errno("GET_PROCESS_APERTURES_NEW", e))?;
        let nodes = crate::topology::read_nodes(&kfd)?;
        let layout = LayoutConfig {
            pcie_stores_need_flush: config.pcie_stores_need_flush,
            device_signal_pool: !config.no_device_signal_pool,
        };
        let agents = Agents::new(&nodes, layout, gpus)?;
        let first = agents.first_gpu();
        let clock = kfd.clock_counters(first).map_err(|e| Error::from_errno("GET_CLOCK_COUNTERS", e))?;
        let kernels = Kernels::new(&kfd, agents.gpu_ids())?;
        let embedded = kfd.transport().as_any().downcast_ref::<EmbeddedTransport>().is_some();
        Ok(Runtime {
            inner: Arc::new(Inner {
                signals: SignalManager::new(first, agents.gpu_ids().to_vec()),
                kick: config.kick_doorbells.unwrap_or(embedded),
                timestamp_hz: if clock.system_clock_freq != 0 {
                    clock.system_clock_freq
                } else {
                    TIMESTAMP_FREQUENCY_HZ
                },
                kfd,
                agents,
                memory: MemoryTable::default(),
                queues: QueueTable::default(),
                kernels,
                hdp: HdpPages::default(),
                monitor: Monitor::default(),
            }),
        })
    }

    pub fn kfd(&self) -> &Kfd {
        &self.inner.kfd
    }

    pub(crate) fn downgrade(&self) -> WeakRuntime {
        WeakRuntime(Arc::downgrade(&self.inner))
    }

    /// The agents and pools.
    pub(crate) fn agent_table(&self) -> &Agents {
        &self.inner.agents
    }

    pub(crate) fn signals(&self) -> &SignalManager {
        &self.inner.signals
    }

    pub(crate) fn queues(&self) -> &QueueTable {
        &self.inner.queues
    }

    pub(crate) fn kernels(&self) -> &Kernels {
        &self.inner.kernels
    }

    pub(crate) fn monitor(&self) -> &Monitor {
        &self.inner.monitor
    }

    /// Every agent: CPUs first, then GPUs.
    pub fn agents(&self) -> Vec<Agent> {
        self.inner.agents.iter().map(|a| a.handle).collect()
    }

    pub fn gpu_agents(&self) -> Vec<Agent> {
        self.inner.agents.iter().filter(|a| a.is_gpu()).map(|a| a.handle).collect()
    }

    pub fn cpu_agent(&self) -> Option<Agent> {
        self.inner.agents.iter().find(|a| !a.is_gpu()).map(|a| a.handle)
    }

    pub(crate) fn agent_desc(&self, agent: Agent) -> Result<&AgentDesc> {
        self.inner.agents.agent(agent)
    }

    pub(crate) fn gpu_desc(&self, agent: Agent) -> Result<&AgentDesc> {
        self.inner.agents.gpu(agent)
    }

    pub(crate) fn pool_desc(&self, pool: Pool) -> Result<&PoolDesc> {
        self.inner.agents.pool(pool)
    }

    /// hsa_agent_iterate_regions order.
    pub fn regions(&self, agent: Agent) -> Result<Vec<Pool>> {
        Ok(self.agent_desc(agent)?.regions.clone())
    }

    /// hsa_amd_agent_iterate_memory_pools order.
    pub fn pools(&self, agent: Agent) -> Result<Vec<Pool>> {
        Ok(self.agent_desc(agent)?.pools.clone())
    }

    /// The GPU's signal-capable device pool, if it has one.
    pub fn signal_pool(&self, agent: Agent) -> Option<Pool> {
        let a = self.agent_desc(agent).ok()?;
        a.pools.iter().copied().find(|p| self.pool_desc(*p).is_ok_and(|d| d.kind == PoolKind::Vram && d.signal_capable))
    }

    pub fn system_info(&self, attr: u32) -> Result<Info> {
        Ok(match attr {
            HSA_SYSTEM_INFO_VERSION_MAJOR | HSA_SYSTEM_INFO_VERSION_MINOR => Info::U16(1),
            HSA_SYSTEM_INFO_TIMESTAMP => Info::U64(crate::signal::wait::timestamp()),
            HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY => Info::U64(self.inner.timestamp_hz),
            HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT => Info::U64(u64::MAX),
            HSA_SYSTEM_INFO_ENDIANNESS => Info::U32(HSA_ENDIANNESS_LITTLE),
            HSA_SYSTEM_INFO_MACHINE_MODEL => Info::U32(HSA_MACHINE_MODEL_LARGE),
            // No finalizer, images, loader or profiler extension is provided.
            HSA_SYSTEM_INFO_EXTENSIONS => Info::Bytes(vec![0; 128]),
            _ => {
                return Err(Error::invalid_argument(format!(
                    "system attribute {attr:#x} is not one this runtime knows"
                )))
            }
        })
    }

    /// GPU agent `agent`'s clock counter now (KFD GET_CLOCK_COUNTERS), in the ticks the device
    /// stamps completion signals with ([`crate::Signal::timestamps`]), so a caller can place a
    /// host event on the same time line as packet start and end times.
    pub fn gpu_clock(&self, agent: Agent) -> Result<u64> {
        let clock = self
            .inner
            .kfd
            .clock_counters(self.gpu_desc(agent)?.gpu_id())
            .map_err(|e| Error::from_errno("GET_CLOCK_COUNTERS", e))?;
        Ok(clock.gpu_clock_counter)
    }

    pub fn agent_info(&self, agent: Agent, attr: u32) -> Result<Info> {
        let a = self.agent_desc(agent)?;
        info::agent(a, attr, || {
            let page = self.hdp_page(a.gpu_id())?;
            Ok((page.mem_flush_cntl(), page.reg_flush_cntl()))
        })
    }

    pub fn region_info(&self, region: Pool, attr: u32) -> Result<Info> {
        let p = self.pool_desc(region).map_err(|e| Error::new(Status::INVALID_REGION, e.reason))?;
        info::region(p, attr)
    }

    pub fn pool_info(&self, pool: Pool, attr: u32) -> Result<Info> {
        let p = self.pool_desc(pool)?;
        if !p.is_pool {
            return Err(Error::new(Status::INVALID_MEMORY_POOL, "the kernarg region is a region, not a memory pool"));
        }
        info::pool(p, attr)
    }

    pub fn agent_pool_info(&self, agent: Agent, pool: Pool, attr: u32) -> Result<Info> {
        info::agent_pool(self.agent_desc(agent)?, self.pool_desc(pool)?, attr)
    }

    /// The MMIO remap page (HDP flush registers) of `gpu_id`, mapped on first use.
    pub(crate) fn hdp_page(&self, gpu_id: u32) -> Result<Arc<HdpPage>> {
        self.inner.hdp.page(&self.inner.kfd, gpu_id)
    }

    /// Carries out what a signal operation left to do.
    pub fn after(&self, after: After) {
        match after {
            After::Nothing => {}
            After::SetEvent(ev) => {
                if let Err(e) = self.inner.kfd.set_event(ev) {
                    log::debug!("SET_EVENT {ev}: {e}");
                }
            }
            After::Kick => {
                if self.inner.kick {
                    self.inner.kfd.kick();
                }
            }
        }
    }

    /// Allocates `size` bytes from `pool` (a pool or a region); returns the address.
    pub fn allocate(&self, pool: Pool, size: u64) -> Result<u64> {
        let p = self.pool_desc(pool)?;
        memory::check_request(size, p.size)?;
        let gpus: &[u32] = if p.kind == PoolKind::Vram { &[p.gpu_id] } else { self.inner.agents.gpu_ids() };
        let new = || Allocation::new(&self.inner.kfd, p.gpu_id, size, memory::kind_of(p.kind), gpus);
        // Memory kept for signal batches gives way to the caller's.
        let a = new().or_else(|_| {
            self.inner.signals.trim_cache();
            new()
        });
        let mut a = a.map_err(|e| {
            Error::new(Status::OUT_OF_RESOURCES, format!("allocating {size} bytes from pool {:#x}: {e}", pool.0))
        })?;
        a.pool = Some(pool);
        a.requested = size;
        Ok(self.inner.memory.insert(a).va())
    }

    /// An owned allocation from `pool` (freed on drop).
    pub fn buffer(&self, pool: Pool, size: u64) -> Result<memory::Buffer> {
        let va = self.allocate(pool, size)?;
        let alloc = self.inner.memory.find(va, 1).expect("just allocated");
        Ok(memory::Buffer { rt: self.clone(), alloc })
    }

    /// The CPU's system memory pool (fine-grained, for kernel arguments too).
    pub fn system_pool(&self) -> Result<Pool> {
        let cpu = self.cpu_agent().ok_or_else(|| Error::new(Status::ERROR, "the topology has no CPU node"))?;
        Ok(self.agent_desc(cpu)?.pools[0])
    }

    /// GPU `agent`'s VRAM pool.
    pub fn vram_pool(&self, agent: Agent) -> Result<Pool> {
        Ok(self.gpu_desc(agent)?.pools[0])
    }

    /// Frees memory [`Runtime::allocate`] returned.
    pub fn free(&self, ptr: u64) -> Result<()> {
        self.inner.memory.remove(ptr).map(drop)
    }

    /// The allocation holding `[addr, addr + len)`.
    pub fn allocation(&self, addr: u64, len: u64) -> Option<Arc<Allocation>> {
        self.inner.memory.find(addr, len)
    }

    /// The debug counters of the shim's header.
    pub fn counters(&self) -> Counters {
        let s = self.inner.signals.stats();
        Counters {
            live_signals: s.live_signals,
            pool_arenas: s.pool_arenas,
            batch_arenas_created: s.batch_arenas_created,
            batch_arenas_freed: s.batch_arenas_freed,
            arena_double_frees: s.arena_double_frees,
            hdp_flushes: crate::signal::hdp::flushes(),
            events_created: s.events_created,
            arena_memory_reused: s.arena_memory_reused,
            live_queues: self.inner.queues.len() as u64,
            live_allocations: self.inner.memory.len() as u64,
        }
    }
}

/// Debug counters (`cuse_kfd_shim_counters_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Counters {
    pub live_signals: u64,
    pub pool_arenas: u64,
    pub batch_arenas_created: u64,
    pub batch_arenas_freed: u64,
    pub arena_double_frees: u64,
    /// Process-wide: HDP flushes issued after stores to device-memory signals.
    pub hdp_flushes: u64,
    pub events_created: u64,
    pub live_queues: u64,
    pub live_allocations: u64,
    /// Batches whose arena memory came from a released batch (no new allocation).
    pub arena_memory_reused: u64,
}
