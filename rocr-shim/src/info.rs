//! Answers of hsa_system_get_info, hsa_agent_get_info, hsa_region_get_info,
//! hsa_amd_memory_pool_get_info and hsa_amd_agent_memory_pool_get_info, as typed values whose
//! bytes are what the C caller's buffer receives. An attribute the shim has no true answer for
//! is an error with the reason, never a made-up value.

use crate::agent::{AgentDesc, DeviceType, PoolDesc, PoolKind};
use crate::hsa::*;
use crate::memory::GRANULE;
use crate::status::{Error, Result};

/// One info answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Info {
    Bool(bool),
    U16(u16),
    U32(u32),
    U64(u64),
    /// Fixed-size arrays (names, dimension triples, pointer pairs), exactly as C lays them out.
    Bytes(Vec<u8>),
}

impl Info {
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Info::Bool(b) => vec![u8::from(*b)],
            Info::U16(v) => v.to_ne_bytes().to_vec(),
            Info::U32(v) => v.to_ne_bytes().to_vec(),
            Info::U64(v) => v.to_ne_bytes().to_vec(),
            Info::Bytes(b) => b.clone(),
        }
    }

    /// A NUL-padded `char[len]`.
    pub fn text(s: &str, len: usize) -> Info {
        let mut b = vec![0u8; len];
        let n = s.len().min(len - 1);
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        Info::Bytes(b)
    }

    fn u32s(vals: &[u32]) -> Info {
        Info::Bytes(vals.iter().flat_map(|v| v.to_ne_bytes()).collect())
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Info::Bool(b) => Some(u64::from(*b)),
            Info::U16(v) => Some(u64::from(*v)),
            Info::U32(v) => Some(u64::from(*v)),
            Info::U64(v) => Some(*v),
            Info::Bytes(_) => None,
        }
    }

    /// The text of a `char[]` answer.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Info::Bytes(b) => Some(String::from_utf8_lossy(b.split(|c| *c == 0).next().unwrap_or(&[])).into_owned()),
            _ => None,
        }
    }
}

fn unknown(what: &str, attr: u32) -> Error {
    Error::invalid_argument(format!("{what} attribute {attr:#x} is not one this runtime knows"))
}

/// hsa_agent_get_info (and the hsa_amd_agent_info_t attributes). `hdp` gives the host
/// addresses of the HDP flush registers of a GPU (allocating its MMIO remap page on demand).
pub fn agent(a: &AgentDesc, attr: u32, hdp: impl FnOnce() -> Result<(u64, u64)>) -> Result<Info> {
    let gpu = a.device == DeviceType::Gpu;
    let p = &a.node.props;
    let cu_count = if gpu { p.num_fcompute_cores / p.num_simd_per_cu.max(1) } else { p.num_cpu_cores };
    Ok(match attr {
        HSA_AGENT_INFO_NAME => Info::text(&a.name, 64),
        HSA_AGENT_INFO_VENDOR_NAME => Info::text(&a.vendor, 64),
        HSA_AGENT_INFO_FEATURE => {
            Info::U32(if gpu { HSA_AGENT_FEATURE_KERNEL_DISPATCH } else { HSA_AGENT_FEATURE_AGENT_DISPATCH })
        }
        HSA_AGENT_INFO_MACHINE_MODEL => Info::U32(HSA_MACHINE_MODEL_LARGE),
        HSA_AGENT_INFO_PROFILE => Info::U32(HSA_PROFILE_BASE),
        HSA_AGENT_INFO_DEFAULT_FLOAT_ROUNDING_MODE | HSA_AGENT_INFO_BASE_PROFILE_DEFAULT_FLOAT_ROUNDING_MODES => {
            Info::U32(HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR)
        }
        HSA_AGENT_INFO_FAST_F16_OPERATION => Info::Bool(gpu),
        HSA_AGENT_INFO_WAVEFRONT_SIZE => Info::U32(if gpu { p.wave_front_size } else { 0 }),
        HSA_AGENT_INFO_WORKGROUP_MAX_DIM => {
            let d: u16 = if gpu { 1024 } else { 0 };
            Info::Bytes([d, d, d].iter().flat_map(|v| v.to_ne_bytes()).collect())
        }
        HSA_AGENT_INFO_WORKGROUP_MAX_SIZE => Info::U32(if gpu { 1024 } else { 0 }),
        HSA_AGENT_INFO_GRID_MAX_DIM => {
            let d = if gpu { u32::MAX } else { 0 };
            Info::u32s(&[d, d, d])
        }
        HSA_AGENT_INFO_GRID_MAX_SIZE => Info::U32(if gpu { u32::MAX } else { 0 }),
        HSA_AGENT_INFO_FBARRIER_MAX_SIZE => Info::U32(if gpu { 32 } else { 0 }),
        HSA_AGENT_INFO_QUEUES_MAX => Info::U32(if gpu { QUEUES_MAX } else { 0 }),
        HSA_AGENT_INFO_QUEUE_MIN_SIZE => Info::U32(if gpu { QUEUE_MIN_PACKETS } else { 0 }),
        HSA_AGENT_INFO_QUEUE_MAX_SIZE => Info::U32(if gpu { QUEUE_MAX_PACKETS } else { 0 }),
        HSA_AGENT_INFO_QUEUE_TYPE => Info::U32(HSA_QUEUE_TYPE_MULTI),
        HSA_AGENT_INFO_NODE => Info::U32(a.node.id),
        HSA_AGENT_INFO_DEVICE => Info::U32(if gpu { HSA_DEVICE_TYPE_GPU } else { HSA_DEVICE_TYPE_CPU }),
        HSA_AGENT_INFO_CACHE_SIZE => Info::u32s(&a.caches),
        HSA_AGENT_INFO_ISA => {
            return Err(Error::invalid_argument(
                "HSA_AGENT_INFO_ISA: this runtime has no code-object loader and hands out no ISA handles (the device runs soft kernels only)",
            ))
        }
        HSA_AGENT_INFO_EXTENSIONS => Info::Bytes(vec![0; 128]),
        HSA_AGENT_INFO_VERSION_MAJOR | HSA_AGENT_INFO_VERSION_MINOR => Info::U16(1),
        HSA_AMD_AGENT_INFO_CHIP_ID => Info::U32(u32::from(p.device_id)),
        HSA_AMD_AGENT_INFO_CACHELINE_SIZE => Info::U32(64),
        HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT => Info::U32(cu_count),
        HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY => {
            Info::U32(if gpu { p.max_engine_clock_mhz_fcompute } else { p.max_engine_clock_mhz_ccompute })
        }
        HSA_AMD_AGENT_INFO_DRIVER_NODE_ID => Info::U32(a.node.id),
        HSA_AMD_AGENT_INFO_BDFID => Info::U32(p.location_id),
        HSA_AMD_AGENT_INFO_DOMAIN => Info::U32(p.domain),
        HSA_AMD_AGENT_INFO_MEMORY_WIDTH if gpu => {
            Info::U32(a.node.mem_banks.first().map_or(0, |b| b.width))
        }
        HSA_AMD_AGENT_INFO_MEMORY_MAX_FREQUENCY if gpu => {
            Info::U32(a.node.mem_banks.first().map_or(0, |b| b.memory_clock_max))
        }
        HSA_AMD_AGENT_INFO_PRODUCT_NAME => Info::text(if gpu { a.node.product_name() } else { &a.name }, 64),
        HSA_AMD_AGENT_INFO_MAX_WAVES_PER_CU if gpu => {
            Info::U32(p.max_waves_per_simd * p.num_simd_per_cu)
        }
        HSA_AMD_AGENT_INFO_NUM_SIMDS_PER_CU if gpu => Info::U32(p.num_simd_per_cu),
        HSA_AMD_AGENT_INFO_NUM_SHADER_ENGINES if gpu => {
            Info::U32(p.num_shader_banks / p.num_arrays.max(1))
        }
        HSA_AMD_AGENT_INFO_NUM_SHADER_ARRAYS_PER_SE if gpu => Info::U32(p.num_arrays),
        HSA_AMD_AGENT_INFO_HDP_FLUSH if gpu => {
            let (mem, reg) = hdp()?;
            Info::Bytes([mem, reg].iter().flat_map(|v| v.to_ne_bytes()).collect())
        }
        HSA_AMD_AGENT_INFO_COOPERATIVE_QUEUES => Info::Bool(false),
        HSA_AMD_AGENT_INFO_UUID => {
            let id = if gpu { format!("GPU-{:016x}", p.unique_id) } else { "CPU-XX".to_string() };
            Info::text(&id, 21)
        }
        HSA_AMD_AGENT_INFO_SVM_DIRECT_HOST_ACCESS => Info::Bool(true),
        HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH => Info::Bool(a.pcie_stores_need_flush),
        HSA_AMD_AGENT_INFO_MEMORY_WIDTH
        | HSA_AMD_AGENT_INFO_MEMORY_MAX_FREQUENCY
        | HSA_AMD_AGENT_INFO_MAX_WAVES_PER_CU
        | HSA_AMD_AGENT_INFO_NUM_SIMDS_PER_CU
        | HSA_AMD_AGENT_INFO_NUM_SHADER_ENGINES
        | HSA_AMD_AGENT_INFO_NUM_SHADER_ARRAYS_PER_SE
        | HSA_AMD_AGENT_INFO_HDP_FLUSH => {
            return Err(Error::invalid_argument(format!("agent attribute {attr:#x} describes GPUs only")))
        }
        HSA_AMD_AGENT_INFO_MAX_ADDRESS_WATCH_POINTS
        | HSA_AMD_AGENT_INFO_ASIC_REVISION
        | HSA_AMD_AGENT_INFO_COOPERATIVE_COMPUTE_UNIT_COUNT => {
            return Err(Error::invalid_argument(format!(
                "agent attribute {attr:#x}: the topology does not report it and the shim does not invent it"
            )))
        }
        _ => return Err(unknown("agent", attr)),
    })
}

fn global_flags(p: &PoolDesc) -> u32 {
    match p.kind {
        PoolKind::System => HSA_REGION_GLOBAL_FLAG_FINE_GRAINED,
        PoolKind::Kernarg => HSA_REGION_GLOBAL_FLAG_KERNARG | HSA_REGION_GLOBAL_FLAG_FINE_GRAINED,
        PoolKind::Vram => HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED,
    }
}

/// hsa_region_get_info (and the hsa_amd_region_info_t attributes).
pub fn region(p: &PoolDesc, attr: u32) -> Result<Info> {
    Ok(match attr {
        HSA_REGION_INFO_SEGMENT => Info::U32(HSA_REGION_SEGMENT_GLOBAL),
        HSA_REGION_INFO_GLOBAL_FLAGS => Info::U32(global_flags(p)),
        HSA_REGION_INFO_SIZE | HSA_REGION_INFO_ALLOC_MAX_SIZE => Info::U64(p.size),
        HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED => Info::Bool(true),
        HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE | HSA_REGION_INFO_RUNTIME_ALLOC_ALIGNMENT => Info::U64(GRANULE),
        HSA_REGION_INFO_ALLOC_MAX_PRIVATE_WORKGROUP_SIZE => {
            return Err(Error::invalid_argument(
                "ALLOC_MAX_PRIVATE_WORKGROUP_SIZE describes private-segment regions; this is a global region",
            ))
        }
        // Every allocation of this device is mapped into the process, VRAM included.
        HSA_AMD_REGION_INFO_HOST_ACCESSIBLE => Info::Bool(true),
        HSA_AMD_REGION_INFO_BASE => Info::U64(0),
        _ => return Err(unknown("region", attr)),
    })
}

/// hsa_amd_memory_pool_get_info.
pub fn pool(p: &PoolDesc, attr: u32) -> Result<Info> {
    Ok(match attr {
        HSA_AMD_MEMORY_POOL_INFO_SEGMENT => Info::U32(HSA_REGION_SEGMENT_GLOBAL),
        HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS => Info::U32(match p.kind {
            PoolKind::System | PoolKind::Kernarg => {
                HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT
            }
            PoolKind::Vram => HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
        }),
        HSA_AMD_MEMORY_POOL_INFO_SIZE | HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE => Info::U64(p.size),
        HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED => Info::Bool(true),
        HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE | HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT => {
            Info::U64(GRANULE)
        }
        HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL => Info::Bool(p.kind != PoolKind::Vram),
        HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE => Info::Bool(p.signal_capable),
        _ => return Err(unknown("memory pool", attr)),
    })
}

/// hsa_amd_agent_memory_pool_get_info. Access is what ROCr reports: an agent's own pools are
/// open to it, another agent's must be granted with hsa_amd_agents_allow_access (the CPU to VRAM,
/// a GPU to system memory). Granting is then a no-op here, every allocation being mapped to every
/// agent already, but a program written against these answers also runs on ROCr.
pub fn agent_pool(a: &AgentDesc, p: &PoolDesc, attr: u32) -> Result<Info> {
    Ok(match attr {
        HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS => Info::U32(if p.owner == a.handle {
            HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT
        } else {
            HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT
        }),
        HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS => Info::U32(u32::from(p.owner != a.handle)),
        _ => return Err(unknown("agent memory pool", attr)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_bytes() {
        assert_eq!(Info::text("gfx90a", 8).to_bytes(), b"gfx90a\0\0".to_vec());
        assert_eq!(Info::text("gfx90a", 8).as_text().as_deref(), Some("gfx90a"));
        assert_eq!(Info::Bool(true).to_bytes(), vec![1]);
        assert_eq!(Info::U16(1).to_bytes().len(), 2);
        assert_eq!(Info::u32s(&[1, 2, 3]).to_bytes().len(), 12);
    }
}
