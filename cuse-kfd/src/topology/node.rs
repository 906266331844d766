//! Nodes: what one `topology/nodes/N` directory says, and how the CPU and GPU nodes are built.
//!
//! The construction follows amdkfd's virtual CRAT path (kfd_crat.c) plus the fix-ups of
//! kfd_topology_add_device (kfd_topology.c), for one CPU NUMA node and discrete GPUs on PCIe.

use super::hsa::*;
use super::{GpuNode, HostInfo, Profile};

/// First GPU processor id (kfd_crat.c `gpu_processor_id_low`); each GPU then takes
/// array_count * cu_per_simd_array ids for its CU slots.
pub const GPU_PROCESSOR_ID_BASE: u32 = 0x8000_1000;

/// Link numbers for a PCIe 4.0 x16 board, by amdgpu_amdkfd_get_pcie_bandwidth_mbytes'
/// formula lanes * MT/s / 8: x1 at 2.5 GT/s (min) and x16 at 16 GT/s (max).
const PCIE_MIN_BANDWIDTH_MBS: u32 = 2500 / 8;
const PCIE_MAX_BANDWIDTH_MBS: u32 = 16 * 16000 / 8;
/// kfd_parse_subtype_iolink gives every PCIe link weight 20; a peer link sums its two hops.
const PCIE_WEIGHT: u32 = 20;

/// Chosen DIMM width and clock for the system bank (kfd reads them from DMI type-17 records).
const SYSTEM_MEM_WIDTH: u32 = 64;
const SYSTEM_MEM_CLK_MAX: u32 = 3200;

/// Scalar node properties (the non-count keys of kfd_topology.c `node_show`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeProps {
    pub cpu_cores_count: u32,
    pub simd_count: u32,
    pub cpu_core_id_base: u32,
    pub simd_id_base: u32,
    pub max_waves_per_simd: u32,
    pub lds_size_in_kb: u32,
    pub gds_size_in_kb: u32,
    pub num_gws: u32,
    pub wave_front_size: u32,
    pub array_count: u32,
    pub simd_arrays_per_engine: u32,
    pub cu_per_simd_array: u32,
    pub simd_per_cu: u32,
    pub max_slots_scratch_cu: u32,
    pub gfx_target_version: u32,
    pub vendor_id: u32,
    pub device_id: u32,
    pub location_id: u32,
    pub domain: u32,
    pub drm_render_minor: u32,
    pub hive_id: u64,
    pub num_sdma_engines: u32,
    pub num_sdma_xgmi_engines: u32,
    pub num_sdma_queues_per_engine: u32,
    pub num_cp_queues: u32,
    pub max_engine_clk_fcompute: u32,
    /// amdkfd prints 0 here; sizes live in the memory banks.
    pub local_mem_size: u64,
    pub fw_version: u32,
    pub capability: u32,
    pub debug_prop: u64,
    pub sdma_fw_version: u32,
    pub unique_id: u64,
    pub num_xcc: u32,
    pub max_engine_clk_ccompute: u32,
}

/// `mem_banks/M/properties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemBank {
    pub heap_type: u32,
    pub size_in_bytes: u64,
    pub flags: u32,
    pub width: u32,
    pub mem_clk_max: u32,
}

/// `caches/C/properties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    pub processor_id_low: u32,
    pub level: u32,
    /// KiB.
    pub size: u32,
    pub cache_line_size: u32,
    pub cache_lines_per_tag: u32,
    pub association: u32,
    pub latency: u32,
    pub cache_type: u32,
    /// One flag per processor from `processor_id_low` on; printed as "0,1,..." (a multiple of 32).
    pub sibling_map: Vec<bool>,
}

/// `io_links/L/properties` and `p2p_links/L/properties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoLink {
    pub link_type: u32,
    pub version_major: u32,
    pub version_minor: u32,
    pub node_from: u32,
    pub node_to: u32,
    pub weight: u32,
    pub min_latency: u32,
    pub max_latency: u32,
    pub min_bandwidth: u32,
    pub max_bandwidth: u32,
    pub recommended_transfer_size: u32,
    pub flags: u32,
}

/// One topology node: the CPU (gpu_id 0) or a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub node_id: u32,
    pub gpu_id: u32,
    /// The `name` file without its newline: the ASIC name, empty for the CPU.
    pub name: String,
    pub props: NodeProps,
    pub mem_banks: Vec<MemBank>,
    pub caches: Vec<Cache>,
    pub io_links: Vec<IoLink>,
    pub p2p_links: Vec<IoLink>,
}

impl Node {
    pub fn is_gpu(&self) -> bool {
        self.gpu_id != 0
    }

    /// The `properties` file as (key, value) pairs in `node_show` order. The counts come from
    /// the lists, so they always match the directories; the block from max_engine_clk_fcompute
    /// to num_xcc is printed for GPU nodes only, as amdkfd does.
    pub fn properties(&self) -> Vec<(&'static str, u64)> {
        let p = &self.props;
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        let mut out: Vec<(&'static str, u64)> = vec![
            ("cpu_cores_count", p.cpu_cores_count.into()),
            ("simd_count", p.simd_count.into()),
            ("mem_banks_count", n(self.mem_banks.len())),
            ("caches_count", n(self.caches.len())),
            ("io_links_count", n(self.io_links.len())),
            ("p2p_links_count", n(self.p2p_links.len())),
            ("cpu_core_id_base", p.cpu_core_id_base.into()),
            ("simd_id_base", p.simd_id_base.into()),
            ("max_waves_per_simd", p.max_waves_per_simd.into()),
            ("lds_size_in_kb", p.lds_size_in_kb.into()),
            ("gds_size_in_kb", p.gds_size_in_kb.into()),
            ("num_gws", p.num_gws.into()),
            ("wave_front_size", p.wave_front_size.into()),
            ("array_count", p.array_count.into()),
            ("simd_arrays_per_engine", p.simd_arrays_per_engine.into()),
            ("cu_per_simd_array", p.cu_per_simd_array.into()),
            ("simd_per_cu", p.simd_per_cu.into()),
            ("max_slots_scratch_cu", p.max_slots_scratch_cu.into()),
            ("gfx_target_version", p.gfx_target_version.into()),
            ("vendor_id", p.vendor_id.into()),
            ("device_id", p.device_id.into()),
            ("location_id", p.location_id.into()),
            ("domain", p.domain.into()),
            ("drm_render_minor", p.drm_render_minor.into()),
            ("hive_id", p.hive_id),
            ("num_sdma_engines", p.num_sdma_engines.into()),
            ("num_sdma_xgmi_engines", p.num_sdma_xgmi_engines.into()),
            ("num_sdma_queues_per_engine", p.num_sdma_queues_per_engine.into()),
            ("num_cp_queues", p.num_cp_queues.into()),
        ];
        if self.is_gpu() {
            out.extend([
                ("max_engine_clk_fcompute", p.max_engine_clk_fcompute.into()),
                ("local_mem_size", p.local_mem_size),
                ("fw_version", p.fw_version.into()),
                ("capability", p.capability.into()),
                ("debug_prop", p.debug_prop),
                ("sdma_fw_version", p.sdma_fw_version.into()),
                ("unique_id", p.unique_id),
                ("num_xcc", p.num_xcc.into()),
            ]);
        }
        out.push(("max_engine_clk_ccompute", p.max_engine_clk_ccompute.into()));
        out
    }
}

/// A PCIe link as kfd_fill_iolink_non_crat_info leaves it.
fn pcie_link(node_from: u32, node_to: u32, weight: u32, flags: u32) -> IoLink {
    IoLink {
        link_type: IOLINK_TYPE_PCIEXPRESS,
        version_major: 0,
        version_minor: 0,
        node_from,
        node_to,
        weight,
        min_latency: 0,
        max_latency: 0,
        min_bandwidth: PCIE_MIN_BANDWIDTH_MBS,
        max_bandwidth: PCIE_MAX_BANDWIDTH_MBS,
        recommended_transfer_size: 0,
        flags,
    }
}

fn low_bits(n: u32) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1 << n) - 1
    }
}

fn mask_bits(mask: u32) -> impl Iterator<Item = bool> {
    (0..32).map(move |bit| mask >> bit & 1 == 1)
}

/// A CPU cache shared by the first `shared` of `cpus` processors.
fn cpu_cache(level: u32, size: u32, association: u32, cache_type: u32, shared: u32, cpus: u32) -> Cache {
    // kfd prints whole 32-bit words; libhsakmt reads at most 256 siblings.
    let len = cpus.div_ceil(32).clamp(1, 8) * 32;
    Cache {
        processor_id_low: 0,
        level,
        size,
        cache_line_size: 64,
        cache_lines_per_tag: 1,
        association,
        latency: 0,
        cache_type,
        sibling_map: (0..len).map(|cpu| cpu < shared).collect(),
    }
}

/// Node 0. amdkfd itself lists no CPU caches (libhsakmt then reads /sys/devices/system/cpu),
/// but ROCr asserts without one, so a representative set is listed here: per-core L1d, L1i and
/// L2, and an L3 shared by all cores. Only the L1d (Data|CPU) survives ROCr's filter.
pub(super) fn cpu_node(host: &HostInfo, gpus: &[GpuNode]) -> Node {
    let cpus = host.cpu_cores.max(1);
    let unified = CACHE_TYPE_DATA | CACHE_TYPE_INSTRUCTION | CACHE_TYPE_CPU;
    Node {
        node_id: 0,
        gpu_id: 0,
        name: String::new(),
        props: NodeProps { cpu_cores_count: cpus, max_engine_clk_ccompute: host.max_clock_mhz, ..NodeProps::default() },
        mem_banks: vec![MemBank {
            heap_type: MEM_HEAP_TYPE_SYSTEM,
            size_in_bytes: host.mem_total,
            flags: 0,
            width: SYSTEM_MEM_WIDTH,
            mem_clk_max: SYSTEM_MEM_CLK_MAX,
        }],
        caches: vec![
            cpu_cache(1, 32, 8, CACHE_TYPE_DATA | CACHE_TYPE_CPU, 1, cpus),
            cpu_cache(1, 32, 8, CACHE_TYPE_INSTRUCTION | CACHE_TYPE_CPU, 1, cpus),
            cpu_cache(2, 512, 8, unified, 1, cpus),
            cpu_cache(3, 32 * 1024, 16, unified, cpus, cpus),
        ],
        // The CPU -> GPU half of each large-BAR link; kfd marks it non-coherent.
        io_links: gpus
            .iter()
            .map(|g| pcie_link(0, g.node_id, PCIE_WEIGHT, IOLINK_FLAGS_ENABLED | IOLINK_FLAGS_NON_COHERENT))
            .collect(),
        p2p_links: Vec::new(),
    }
}

/// The first processor id of GPU number `index` (0-based).
pub(super) fn simd_id_base(profile: &Profile, index: u32) -> u32 {
    let slots = profile.array_count * profile.cu_per_simd_array;
    GPU_PROCESSOR_ID_BASE.wrapping_add(index.wrapping_mul(slots))
}

/// A GPU node, with its VRAM bank, caches, link to the CPU and peer links to the other GPUs
/// (kfd_add_peer_prop, as a large-BAR system with CONFIG_HSA_AMD_P2P reports them; because
/// a p2p_links_count is present, libhsakmt adds no indirect links of its own).
pub(super) fn gpu_node(gpu: &GpuNode, host: &HostInfo, all: &[GpuNode]) -> Node {
    let p = gpu.profile;
    let base = simd_id_base(p, gpu.node_id - 1);
    let peer_flags = IOLINK_FLAGS_ENABLED | IOLINK_FLAGS_NON_COHERENT;
    Node {
        node_id: gpu.node_id,
        gpu_id: gpu.gpu_id,
        name: p.asic_name.to_string(),
        props: NodeProps {
            simd_count: p.simd_count,
            simd_id_base: base,
            max_waves_per_simd: p.max_waves_per_simd,
            lds_size_in_kb: p.lds_size_in_kb,
            num_gws: p.num_gws,
            wave_front_size: p.wave_front_size,
            array_count: p.array_count,
            simd_arrays_per_engine: p.simd_arrays_per_engine,
            cu_per_simd_array: p.cu_per_simd_array,
            simd_per_cu: p.simd_per_cu,
            max_slots_scratch_cu: p.max_slots_scratch_cu,
            gfx_target_version: p.gfx_target_version,
            vendor_id: p.vendor_id,
            device_id: p.device_id,
            location_id: gpu.location_id,
            drm_render_minor: gpu.drm_render_minor,
            num_sdma_engines: p.num_sdma_engines,
            num_sdma_xgmi_engines: p.num_sdma_xgmi_engines,
            num_sdma_queues_per_engine: p.num_sdma_queues_per_engine,
            num_cp_queues: p.num_cp_queues,
            max_engine_clk_fcompute: p.max_engine_clk_fcompute,
            fw_version: p.fw_version,
            capability: p.capability,
            debug_prop: p.debug_prop,
            sdma_fw_version: p.sdma_fw_version,
            unique_id: gpu.unique_id,
            num_xcc: 1,
            max_engine_clk_ccompute: host.max_clock_mhz,
            ..NodeProps::default()
        },
        mem_banks: vec![MemBank {
            heap_type: MEM_HEAP_TYPE_FB_PUBLIC,
            size_in_bytes: p.vram_size,
            flags: 0,
            width: p.vram_width,
            mem_clk_max: p.vram_clk_max,
        }],
        caches: gpu_caches(p, base),
        io_links: vec![pcie_link(gpu.node_id, 0, PCIE_WEIGHT, IOLINK_FLAGS_ENABLED)],
        p2p_links: all
            .iter()
            .filter(|peer| peer.node_id != gpu.node_id)
            .map(|peer| pcie_link(gpu.node_id, peer.node_id, 2 * PCIE_WEIGHT, peer_flags))
            .collect(),
    }
}

/// GPU caches the way kfd_fill_cache_non_crat_info walks them: for each row of the profile's
/// table, a level-1 cache per group of `num_cu_shared` CU slots in every shader array (skipping
/// groups with no active CU), and one instance of each higher level for the whole GPU.
fn gpu_caches(p: &Profile, simd_id_base: u32) -> Vec<Cache> {
    let slots = p.cu_per_simd_array;
    let active = |array: u32| low_bits(p.active_cus_in_array(array));
    let mut out = Vec::new();
    for info in p.caches {
        let shared = info.num_cu_shared.max(1);
        let entry = |processor_id_low: u32, sibling_map: Vec<bool>| Cache {
            processor_id_low,
            level: info.level,
            size: info.size_kb,
            cache_line_size: info.line_size,
            cache_lines_per_tag: 0,
            association: 0,
            latency: 0,
            cache_type: info.cache_type,
            sibling_map,
        };
        if info.level == 1 {
            let mut processor_id = simd_id_base;
            for array in 0..p.array_count {
                for first_slot in (0..slots).step_by(shared as usize) {
                    let group = (active(array) >> first_slot) & low_bits(shared);
                    if group != 0 {
                        let first = group.trailing_zeros();
                        out.push(entry(processor_id + first, mask_bits(group >> first).collect()));
                    }
                    processor_id += shared.min(slots - first_slot);
                }
            }
        } else {
            let first = (active(0) & low_bits(shared)).trailing_zeros().min(31);
            let map = (0..p.array_count)
                .flat_map(|array| {
                    let mask = active(array) & low_bits(shared);
                    mask_bits(if array == 0 { mask >> first } else { mask })
                })
                .collect();
            out.push(entry(simd_id_base + first, map));
        }
    }
    out
}
