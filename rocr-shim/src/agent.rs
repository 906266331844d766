//! Agents, regions and memory pools, built from the topology, and their info answers.
//!
//! The CPU agent has a fine-grained system pool (GTT, kernel arguments may live there) and the
//! regions "system" and "kernarg"; each GPU agent has a coarse-grained VRAM pool, which is
//! signal-capable, and lists its VRAM region followed by the system regions (as ROCr's GPU
//! agents do, so that the common "find the kernarg region of the GPU" idiom works).

use crate::status::{Error, Result, Status};
use crate::topology::Node;
use thunk::hsakmt::HeapType;

/// An `hsa_agent_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Agent(pub u64);

/// An `hsa_region_t` or `hsa_amd_memory_pool_t` (regions and pools share handles, as in ROCr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Pool(pub u64);

const AGENT_TAG: u64 = 0xA6E7 << 48;
const POOL_TAG: u64 = 0x9001 << 48;

impl Agent {
    pub(crate) fn from_index(i: usize) -> Agent {
        Agent(AGENT_TAG | (i as u64 + 1))
    }

    pub(crate) fn index(self) -> Option<usize> {
        (self.0 & !0xFFFF_FFFF == AGENT_TAG && self.0 as u32 != 0).then(|| (self.0 as u32 - 1) as usize)
    }
}

impl Pool {
    pub(crate) fn from_index(i: usize) -> Pool {
        Pool(POOL_TAG | (i as u64 + 1))
    }

    pub(crate) fn index(self) -> Option<usize> {
        (self.0 & !0xFFFF_FFFF == POOL_TAG && self.0 as u32 != 0).then(|| (self.0 as u32 - 1) as usize)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceType {
    Cpu,
    Gpu,
}

/// What memory a pool hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// System memory (GTT), fine-grained, mapped to every GPU.
    System,
    /// System memory for kernel arguments (a region only; the system pool also serves them).
    Kernarg,
    /// A GPU's VRAM, coarse-grained.
    Vram,
}

#[derive(Debug, Clone)]
pub struct PoolDesc {
    pub handle: Pool,
    pub owner: Agent,
    pub kind: PoolKind,
    /// The GPU whose KFD allocation backs it (the first GPU for system memory).
    pub gpu_id: u32,
    pub size: u64,
    /// Reported as HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE.
    pub signal_capable: bool,
    /// Listed by hsa_amd_agent_iterate_memory_pools (the kernarg region is a region only).
    pub is_pool: bool,
}

#[derive(Debug, Clone)]
pub struct AgentDesc {
    pub handle: Agent,
    pub device: DeviceType,
    pub node: Node,
    pub name: String,
    pub vendor: String,
    /// Regions in hsa_agent_iterate_regions order.
    pub regions: Vec<Pool>,
    /// Pools in hsa_amd_agent_iterate_memory_pools order.
    pub pools: Vec<Pool>,
    /// HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH.
    pub pcie_stores_need_flush: bool,
    /// L1..L4 data cache sizes in bytes (HSA_AGENT_INFO_CACHE_SIZE).
    pub caches: [u32; 4],
}

impl AgentDesc {
    pub fn is_gpu(&self) -> bool {
        self.device == DeviceType::Gpu
    }

    pub fn gpu_id(&self) -> u32 {
        self.node.gpu_id
    }
}

/// Layout choices the runtime's configuration makes.
#[derive(Debug, Clone, Copy)]
pub struct LayoutConfig {
    pub pcie_stores_need_flush: Option<bool>,
    pub device_signal_pool: bool,
}

fn cpu_field(field: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string())
}

/// The agents and pools of a runtime, built once from the topology, and the GPUs of the process.
pub struct Agents {
    agents: Vec<AgentDesc>,
    pools: Vec<PoolDesc>,
    /// KFD gpu_ids of the process's GPUs, never empty; the first one's GTT holds host memory.
    gpus: Vec<u32>,
}

impl Agents {
    /// The agents of `nodes` for a process whose GPUs are `gpus`.
    pub fn new(nodes: &[Node], cfg: LayoutConfig, gpus: Vec<u32>) -> Result<Agents> {
        if gpus.is_empty() {
            return Err(Error::new(Status::ERROR, "the device has no GPU"));
        }
        let (agents, pools) = build(nodes, cfg);
        Ok(Agents { agents, pools, gpus })
    }

    /// CPUs first, then GPUs.
    pub fn iter(&self) -> impl Iterator<Item = &AgentDesc> {
        self.agents.iter()
    }

    pub fn len(&self) -> usize {
        self.agents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    pub fn agent(&self, agent: Agent) -> Result<&AgentDesc> {
        agent
            .index()
            .and_then(|i| self.agents.get(i))
            .ok_or_else(|| Error::new(Status::INVALID_AGENT, format!("{:#x} is not an agent of this runtime", agent.0)))
    }

    /// `agent`, which must be a GPU.
    pub fn gpu(&self, agent: Agent) -> Result<&AgentDesc> {
        let a = self.agent(agent)?;
        if !a.is_gpu() {
            return Err(Error::new(
                Status::INVALID_AGENT,
                format!("agent {:#x} is a CPU; this needs a GPU agent", agent.0),
            ));
        }
        Ok(a)
    }

    pub fn pool(&self, pool: Pool) -> Result<&PoolDesc> {
        pool.index().and_then(|i| self.pools.get(i)).ok_or_else(|| {
            Error::new(
                Status::INVALID_MEMORY_POOL,
                format!("{:#x} is not a memory pool or region of this runtime", pool.0),
            )
        })
    }

    /// The process's GPUs (KFD gpu_ids).
    pub fn gpu_ids(&self) -> &[u32] {
        &self.gpus
    }

    /// The GPU whose GTT holds host memory and whose events the runtime creates.
    pub fn first_gpu(&self) -> u32 {
        self.gpus[0]
    }

    /// The GPU agent of `gpu_id`.
    pub fn gpu_agent(&self, gpu_id: u32) -> Option<Agent> {
        self.agents.iter().find(|a| a.is_gpu() && a.gpu_id() == gpu_id).map(|a| a.handle)
    }
}

/// Agents and pools of `nodes` (CPU nodes first, as ROCr enumerates them).
fn build(nodes: &[Node], cfg: LayoutConfig) -> (Vec<AgentDesc>, Vec<PoolDesc>) {
    let first_gpu = nodes.iter().find(|n| n.is_gpu()).map_or(0, |n| n.gpu_id);
    let mut agents = Vec::new();
    let mut pools: Vec<PoolDesc> = Vec::new();
    let mut system_regions = Vec::new();
    let ordered = nodes.iter().filter(|n| !n.is_gpu()).chain(nodes.iter().filter(|n| n.is_gpu()));
    for node in ordered {
        let handle = Agent::from_index(agents.len());
        let mut add = |kind, gpu_id, size, signal_capable, is_pool| {
            let p = Pool::from_index(pools.len());
            pools.push(PoolDesc { handle: p, owner: handle, kind, gpu_id, size, signal_capable, is_pool });
            p
        };
        if node.is_gpu() {
            let vram = add(
                PoolKind::Vram,
                node.gpu_id,
                node.bank_bytes(&[HeapType::FRAME_BUFFER_PUBLIC, HeapType::FRAME_BUFFER_PRIVATE]),
                cfg.device_signal_pool,
                true,
            );
            let mut regions = vec![vram];
            regions.extend(system_regions.iter().copied());
            agents.push(AgentDesc {
                handle,
                device: DeviceType::Gpu,
                name: node.gfx_name(),
                vendor: "AMD".into(),
                regions,
                pools: vec![vram],
                // A discrete GPU (no CPU cores of its own) sits behind PCIe.
                pcie_stores_need_flush: cfg.pcie_stores_need_flush.unwrap_or(node.props.num_cpu_cores == 0),
                caches: node.cache_sizes(),
                node: node.clone(),
            });
        } else {
            let size = node.bank_bytes(&[HeapType::SYSTEM]);
            let system = add(PoolKind::System, first_gpu, size, true, true);
            let kernarg = add(PoolKind::Kernarg, first_gpu, size, false, false);
            if system_regions.is_empty() {
                system_regions = vec![system, kernarg];
            }
            agents.push(AgentDesc {
                handle,
                device: DeviceType::Cpu,
                name: cpu_field("model name").unwrap_or_else(|| "CPU".into()),
                vendor: cpu_field("vendor_id").unwrap_or_else(|| "CPU".into()),
                regions: vec![system, kernarg],
                pools: vec![system],
                pcie_stores_need_flush: false,
                caches: node.cache_sizes(),
                node: node.clone(),
            });
        }
    }
    (agents, pools)
}
