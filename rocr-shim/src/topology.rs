//! The device's topology, read through the thunk as ROCr reads it through libhsakmt:
//! `hsaKmtAcquireSystemProperties`, then per node `hsaKmtGetNodeProperties`,
//! `hsaKmtGetNodeMemoryProperties` and `hsaKmtGetNodeCacheProperties`, and
//! `hsaKmtReleaseSystemProperties`. The thunk is the one reader of the device's topology tree.

use crate::status::{Error, Result, Status};
use thunk::hsakmt::{CacheProperties, HeapType, MemoryProperties, NodeProperties, Thunk};
use thunk::Kfd;

/// One topology node: the CPU (no SIMDs) or a GPU.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: u32,
    /// The KFD gpu_id (0 for a CPU node).
    pub gpu_id: u32,
    pub props: NodeProperties,
    /// The node's banks, and for a GPU the apertures the thunk adds (LDS, scratch, SVM, MMIO).
    pub mem_banks: Vec<MemoryProperties>,
    pub caches: Vec<CacheProperties>,
}

impl Node {
    pub fn is_gpu(&self) -> bool {
        self.gpu_id != 0 && self.props.num_fcompute_cores > 0
    }

    /// The LLVM target name from the GFX version (major, minor, stepping in hex): gfx90a.
    pub fn gfx_name(&self) -> String {
        let e = self.props.engine_id;
        format!("gfx{}{}{:x}", e.major(), e.minor(), e.stepping())
    }

    /// HSA_AGENT_INFO_CACHE_SIZE: bytes of one data cache per level 1..4.
    pub fn cache_sizes(&self) -> [u32; 4] {
        let mut out = [0u32; 4];
        for c in self.caches.iter().filter(|c| c.cache_type.data() != 0) {
            if let Some(slot) = (c.cache_level as usize).checked_sub(1).and_then(|l| out.get_mut(l)) {
                *slot = (*slot).max(c.cache_size.saturating_mul(1024));
            }
        }
        out
    }

    /// Bytes of the banks of the given heap types.
    pub fn bank_bytes(&self, heaps: &[HeapType]) -> u64 {
        self.mem_banks.iter().filter(|b| heaps.contains(&b.heap_type)).map(|b| b.size_in_bytes).sum()
    }

    /// HSA_AMD_AGENT_INFO_PRODUCT_NAME of a GPU: the board's name, as ROCr reports it (the
    /// thunk's marketing name, from libdrm's amdgpu.ids), else the thunk's CAL name.
    pub fn product_name(&self) -> &str {
        if self.props.marketing_name.is_empty() {
            &self.props.amd_name
        } else {
            &self.props.marketing_name
        }
    }
}

fn thunk_error(what: &str, e: thunk::hsakmt::Status) -> Error {
    Error::new(Status::ERROR, format!("reading the topology: {what}: {e}"))
}

/// Every node of `kfd`'s topology, in node order, through a thunk opened over it for the
/// purpose.
pub fn read_nodes(kfd: &Kfd) -> Result<Vec<Node>> {
    let thunk = Thunk::open(kfd.clone()).map_err(|e| thunk_error("opening the thunk", e))?;
    let system = thunk.acquire_system_properties().map_err(|e| thunk_error("hsaKmtAcquireSystemProperties", e))?;
    let nodes = (0..system.num_nodes).map(|id| read_node(&thunk, id)).collect::<Result<Vec<_>>>();
    if let Err(e) = thunk.release_system_properties() {
        log::debug!("hsaKmtReleaseSystemProperties: {e}");
    }
    let nodes = nodes?;
    if nodes.is_empty() {
        return Err(Error::new(Status::ERROR, "reading the topology: the device reports no node"));
    }
    Ok(nodes)
}

fn read_node(thunk: &Thunk, id: u32) -> Result<Node> {
    let props = thunk.node_properties(id).map_err(|e| thunk_error(&format!("hsaKmtGetNodeProperties({id})"), e))?;
    let gpu_id = thunk.node_gpu_id(id).map_err(|e| thunk_error(&format!("the gpu_id of node {id}"), e))?;
    let mem_banks = thunk
        .node_memory_properties(id, props.num_memory_banks)
        .map_err(|e| thunk_error(&format!("hsaKmtGetNodeMemoryProperties({id})"), e))?;
    let caches = thunk
        .node_cache_properties(id, props.ccompute_id_lo, props.num_caches)
        .map_err(|e| thunk_error(&format!("hsaKmtGetNodeCacheProperties({id})"), e))?;
    Ok(Node { id, gpu_id, props, mem_banks, caches })
}

#[cfg(test)]
mod tests {
    use super::*;
    use thunk::hsakmt::{CacheType, EngineId};

    fn gpu() -> Node {
        let props = NodeProperties {
            num_fcompute_cores: 416,
            engine_id: EngineId::default().with_major(9).with_minor(0).with_stepping(10),
            amd_name: "Aldebaran".into(),
            ..NodeProperties::default()
        };
        let bank = |heap_type, size_in_bytes| MemoryProperties { heap_type, size_in_bytes, ..Default::default() };
        let cache = |level, kib, data| CacheProperties {
            cache_level: level,
            cache_size: kib,
            cache_type: CacheType::default().with_data(u32::from(data)),
            ..Default::default()
        };
        Node {
            id: 1,
            gpu_id: 7,
            props,
            mem_banks: vec![bank(HeapType::FRAME_BUFFER_PUBLIC, 1 << 30), bank(HeapType::GPU_LDS, 1 << 16)],
            caches: vec![cache(1, 16, true), cache(2, 8192, true), cache(1, 64, false)],
        }
    }

    #[test]
    fn names_gfx_targets_and_products() {
        let mut n = gpu();
        assert!(n.is_gpu());
        assert_eq!(n.gfx_name(), "gfx90a");
        assert_eq!(n.product_name(), "Aldebaran");
        n.props.marketing_name = "AMD Instinct MI210".into();
        assert_eq!(n.product_name(), "AMD Instinct MI210");
        n.gpu_id = 0;
        assert!(!n.is_gpu());
    }

    #[test]
    fn sums_banks_and_data_caches() {
        let n = gpu();
        assert_eq!(n.bank_bytes(&[HeapType::FRAME_BUFFER_PUBLIC, HeapType::FRAME_BUFFER_PRIVATE]), 1 << 30);
        assert_eq!(n.bank_bytes(&[HeapType::SYSTEM]), 0);
        assert_eq!(n.cache_sizes(), [16 * 1024, 8192 * 1024, 0, 0]);
    }
}
