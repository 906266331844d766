//! The topology: nodes, memory banks, caches and IO links read from the device's tree
//! (libhsakmt 5.2.3 topology.c), and the property getters of the API.

use super::topology_files::{self, Properties};
use super::types::*;
use super::{Result, Status, Thunk, PAGE_SIZE};
use std::path::Path;
use std::sync::Arc;

/// Memory banks a dGPU node reports beyond its sysfs banks: LDS, scratch and the SVM aperture
/// (NUM_OF_DGPU_HEAPS); the MMIO remap page adds one more when it is mapped.
const DGPU_EXTRA_BANKS: u32 = 3;

/// SGPR bytes per CU (SGPR_SIZE_PER_CU).
const SGPR_SIZE_PER_CU: u32 = 0x4000;

/// The CAL names libhsakmt's device table gives the device ids cuse-kfd's profiles use.
/// Other GPUs are named `GFX<version>` as libhsakmt does for ids missing from its table.
const CAL_NAMES: [(u16, &str); 6] = [
    (0x7408, "Aldebaran"),
    (0x740C, "Aldebaran"),
    (0x740F, "Aldebaran"),
    (0x7410, "Aldebaran"),
    (0x73BF, "SIENNA_CICHLID"),
    (0x73A1, "SIENNA_CICHLID"),
];

/// libdrm's table of board names (what amdgpu_get_marketing_name reads).
const AMDGPU_IDS: &str = "/usr/share/libdrm/amdgpu.ids";

/// One node as read from the tree.
#[derive(Debug, Clone, Default)]
pub(super) struct Node {
    /// 0 for a CPU node.
    pub gpu_id: u32,
    pub props: NodeProperties,
    pub mems: Vec<MemoryProperties>,
    pub caches: Vec<CacheProperties>,
    pub links: Vec<IoLinkProperties>,
}

/// A snapshot of the whole tree.
#[derive(Debug, Clone, Default)]
pub(super) struct Topology {
    pub system: SystemProperties,
    pub nodes: Vec<Node>,
}

impl Topology {
    /// Reads the tree under `dir` (the `topology` directory), again if its generation changed
    /// meanwhile (libhsakmt's topology_take_snapshot).
    pub fn read(dir: &Path) -> Result<Topology> {
        let cpus = cpu_model_names();
        loop {
            let generation = topology_files::read_number(&dir.join("generation_id"))?;
            let topo = read_once(dir, &cpus)?;
            if topology_files::read_number(&dir.join("generation_id"))? == generation {
                return Ok(topo);
            }
        }
    }

    pub fn node(&self, node: u32) -> Option<&Node> {
        self.nodes.get(usize::try_from(node).ok()?)
    }

    /// The node of `gpu_id`.
    pub fn node_of(&self, gpu_id: u32) -> Option<u32> {
        self.nodes.iter().position(|n| n.gpu_id == gpu_id).map(|i| i as u32)
    }

    /// The GPU nodes as (node id, node).
    pub fn gpus(&self) -> impl Iterator<Item = (u32, &Node)> {
        self.nodes.iter().enumerate().filter(|(_, n)| n.gpu_id != 0).map(|(i, n)| (i as u32, n))
    }
}

fn read_once(dir: &Path, cpus: &[(u32, String)]) -> Result<Topology> {
    let sys = topology_files::read_properties(&dir.join("system_properties"))?;
    let nodes_dir = dir.join("nodes");
    let count = topology_files::count_nodes(&nodes_dir)?;
    let mut nodes = Vec::with_capacity(count as usize);
    let mut any_p2p = false;
    for id in 0..count {
        let node_dir = nodes_dir.join(id.to_string());
        let gpu_id = topology_files::read_number(&node_dir.join("gpu_id"))? as u32;
        let p = topology_files::read_properties(&node_dir.join("properties"))?;
        let mut props = node_properties(&p)?;
        if props.num_cpu_cores != 0 {
            if let Some((_, name)) = cpus.iter().find(|(apic, _)| *apic == props.ccompute_id_lo) {
                if props.device_id == 0 {
                    props.amd_name = name.clone();
                }
                props.marketing_name = name.clone();
            }
        } else if gpu_id != 0 {
            props.marketing_name = marketing_name(props.device_id).unwrap_or_default();
        }
        let mems = (0..props.num_memory_banks)
            .map(|m| {
                topology_files::read_properties(&node_dir.join(format!("mem_banks/{m}/properties")))
                    .map(|p| memory_properties(&p))
            })
            .collect::<Result<Vec<_>>>()?;
        let caches = (0..props.num_caches)
            .map(|c| {
                topology_files::read_properties(&node_dir.join(format!("caches/{c}/properties")))
                    .map(|p| cache_properties(&p))
            })
            .collect::<Result<Vec<_>>>()?;
        let p2p = p.u32("p2p_links_count");
        any_p2p |= p2p > 0;
        let io = props.num_io_links - p2p;
        let max_links = count.saturating_sub(1) as usize;
        let mut links = Vec::new();
        for (sub, n) in [("io_links", io), ("p2p_links", p2p)] {
            for l in 0..n {
                if links.len() >= max_links {
                    break;
                }
                let lp = topology_files::read_properties(&node_dir.join(format!("{sub}/{l}/properties")))?;
                if lp.u32("node_from") != id {
                    return Err(Status::InvalidNodeUnit);
                }
                // A link to a node the client cannot see is skipped.
                if lp.u32("node_to") >= count {
                    continue;
                }
                links.push(link_properties(&lp));
            }
        }
        props.num_io_links = links.len() as u32;
        nodes.push(Node { gpu_id, props, mems, caches, links });
    }
    if !any_p2p {
        add_indirect_links(&mut nodes);
    }
    let system = SystemProperties {
        num_nodes: count,
        platform_oem: sys.u32("platform_oem"),
        platform_id: sys.u32("platform_id"),
        platform_rev: sys.u32("platform_rev"),
    };
    Ok(Topology { system, nodes })
}

/// A node's `properties` file as HsaNodeProperties (topology_sysfs_get_node_props).
fn node_properties(p: &Properties) -> Result<NodeProperties> {
    let mut n = NodeProperties {
        num_cpu_cores: p.u32("cpu_cores_count"),
        num_fcompute_cores: p.u32("simd_count"),
        num_memory_banks: p.u32("mem_banks_count"),
        num_caches: p.u32("caches_count"),
        num_io_links: p.u32("io_links_count").wrapping_add(p.u32("p2p_links_count")),
        ccompute_id_lo: p.u32("cpu_core_id_base"),
        fcompute_id_lo: p.u32("simd_id_base"),
        capability: Capability(p.u32("capability")),
        debug_properties: p.u64("debug_prop"),
        max_waves_per_simd: p.u32("max_waves_per_simd"),
        lds_size_in_kb: p.u32("lds_size_in_kb"),
        gds_size_in_kb: p.u32("gds_size_in_kb"),
        wave_front_size: p.u32("wave_front_size"),
        num_shader_banks: p.u32("array_count"),
        num_arrays: p.u32("simd_arrays_per_engine"),
        num_cu_per_array: p.u32("cu_per_simd_array"),
        num_simd_per_cu: p.u32("simd_per_cu"),
        max_slots_scratch_cu: p.u32("max_slots_scratch_cu"),
        engine_id: EngineId(p.u32("fw_version") & 0x3ff),
        vendor_id: p.u32("vendor_id") as u16,
        device_id: p.u32("device_id") as u16,
        location_id: p.u32("location_id"),
        domain: p.u32("domain"),
        max_engine_clock_mhz_fcompute: p.u32("max_engine_clk_fcompute"),
        max_engine_clock_mhz_ccompute: p.u32("max_engine_clk_ccompute"),
        local_mem_size: p.u64("local_mem_size"),
        drm_render_minor: p.u32("drm_render_minor") as i32,
        ucode_engine_versions: p.u32("sdma_fw_version") & 0x3ff,
        hive_id: p.u64("hive_id"),
        unique_id: p.u64("unique_id"),
        num_sdma_engines: p.u32("num_sdma_engines"),
        num_sdma_xgmi_engines: p.u32("num_sdma_xgmi_engines"),
        num_gws: p.u32("num_gws") as u8,
        num_sdma_queues_per_engine: p.u32("num_sdma_queues_per_engine") as u8,
        num_cp_queues: p.u32("num_cp_queues") as u8,
        ..NodeProperties::default()
    };
    let gfxv = p.u32("gfx_target_version");
    let cal = CAL_NAMES.iter().find(|(id, _)| *id == n.device_id).map(|(_, name)| *name);
    if gfxv != 0 || cal.is_some() {
        let (major, minor, stepping) = match crate::secure_env::var("HSA_OVERRIDE_GFX_VERSION") {
            Some(v) => parse_gfx_override(&v).ok_or_else(|| {
                log::error!("HSA_OVERRIDE_GFX_VERSION {v} is invalid");
                Status::Error
            })?,
            None => (gfxv / 10000 % 100, gfxv / 100 % 100, gfxv % 100),
        };
        n.engine_id = n.engine_id.with_major(major & 0x3f).with_minor(minor & 0xff).with_stepping(stepping & 0xff);
        n.amd_name = match cal {
            Some(name) => name.to_string(),
            None => format!("GFX{:06x}", n.engine_id.gfx_version()),
        };
        n.sgpr_size_per_cu = SGPR_SIZE_PER_CU;
        // gfx908 (Arcturus) and gfx90a (Aldebaran) have twice the VGPRs of other GFX9+ parts.
        n.vgpr_size_per_cu = if matches!(n.engine_id.gfx_version(), 0x090008 | 0x09000A) { 0x80000 } else { 0x40000 };
    }
    Ok(n)
}

/// "major.minor.stepping" with major < 64 and minor, stepping < 256.
fn parse_gfx_override(v: &str) -> Option<(u32, u32, u32)> {
    let mut it = v.split('.').map(|s| s.parse::<u32>().ok());
    let (Some(Some(a)), Some(Some(b)), Some(Some(c)), None) = (it.next(), it.next(), it.next(), it.next()) else {
        return None;
    };
    (a <= 63 && b <= 255 && c <= 255).then_some((a, b, c))
}

fn memory_properties(p: &Properties) -> MemoryProperties {
    MemoryProperties {
        heap_type: HeapType(p.u32("heap_type")),
        size_in_bytes: p.u64("size_in_bytes"),
        flags: p.u32("flags"),
        width: p.u32("width"),
        memory_clock_max: p.u32("mem_clk_max"),
        virtual_base_address: 0,
    }
}

fn cache_properties(p: &Properties) -> CacheProperties {
    let mut sibling_map = p.sibling_map.clone();
    sibling_map.truncate(CPU_SIBLINGS);
    CacheProperties {
        processor_id_low: p.u32("processor_id_low"),
        cache_level: p.u32("level"),
        cache_size: p.u32("size"),
        cache_line_size: p.u32("cache_line_size"),
        cache_lines_per_tag: p.u32("cache_lines_per_tag"),
        cache_associativity: p.u32("association"),
        cache_latency: p.u32("latency"),
        cache_type: CacheType(p.u32("type")),
        sibling_map,
    }
}

fn link_properties(p: &Properties) -> IoLinkProperties {
    IoLinkProperties {
        io_link_type: IoLinkType(p.u32("type")),
        version_major: p.u32("version_major"),
        version_minor: p.u32("version_minor"),
        node_from: p.u32("node_from"),
        node_to: p.u32("node_to"),
        weight: p.u32("weight"),
        minimum_latency: p.u32("min_latency"),
        maximum_latency: p.u32("max_latency"),
        minimum_bandwidth: p.u32("min_bandwidth"),
        maximum_bandwidth: p.u32("max_bandwidth"),
        rec_transfer_size: p.u32("recommended_transfer_size"),
        flags: p.u32("flags"),
    }
}

/// The CPU a GPU hangs off directly: its first PCIe link of weight at most 20.
fn direct_cpu(nodes: &[Node], gpu: usize) -> Option<usize> {
    if nodes[gpu].gpu_id == 0 {
        return None;
    }
    nodes[gpu]
        .links
        .iter()
        .find(|l| l.io_link_type == IoLinkType::PCIEXPRESS && l.weight <= 20)
        .map(|l| l.node_to as usize)
}

/// The direct link `a -> b`: (weight, type).
fn direct_link(nodes: &[Node], a: usize, b: usize) -> Option<(u32, IoLinkType)> {
    nodes[a].links.iter().find(|l| l.node_to as usize == b).map(|l| (l.weight, l.io_link_type))
}

/// The path `a -> ... -> b` through CPUs (get_indirect_iolink_info): its total weight and
/// the type of its CPU-side hop.
fn indirect_link(nodes: &[Node], a: usize, b: usize) -> Option<(u32, IoLinkType)> {
    if a == b || (nodes[a].gpu_id == 0 && nodes[b].gpu_id == 0) {
        return None;
    }
    let (ha, hb) = (nodes[a].props.hive_id, nodes[b].props.hive_id);
    if ha != 0 && ha == hb {
        return None;
    }
    let cpu_a = direct_cpu(nodes, a);
    let cpu_b = direct_cpu(nodes, b);
    // A destination GPU must have host-visible VRAM.
    if nodes[b].gpu_id != 0 && !nodes[b].mems.iter().any(|m| m.heap_type == HeapType::FRAME_BUFFER_PUBLIC) {
        return None;
    }
    match (cpu_a, cpu_b) {
        (None, None) => None,
        (Some(ca), Some(cb)) if ca == cb => {
            let (w1, _) = direct_link(nodes, a, ca)?;
            let (w2, t) = direct_link(nodes, ca, b)?;
            Some((w1 + w2, t))
        }
        (Some(ca), Some(cb)) => {
            let (w1, _) = direct_link(nodes, a, ca)?;
            let (w2, t) = direct_link(nodes, ca, cb)?;
            // GPUs on different sockets behind QPI cannot reach each other.
            if t == IoLinkType::QPI_1_1 && w2 > 20 {
                return None;
            }
            let (w3, _) = direct_link(nodes, cb, b)?;
            Some((w1 + w2 + w3, t))
        }
        (Some(ca), None) => {
            let (w1, _) = direct_link(nodes, a, ca)?;
            let (w2, t) = direct_link(nodes, ca, b)?;
            Some((w1 + w2, t))
        }
        (None, Some(cb)) => {
            let (w2, t) = direct_link(nodes, a, cb)?;
            let (w3, _) = direct_link(nodes, cb, b)?;
            Some((w2 + w3, t))
        }
    }
}

/// GPU<->GPU and GPU<->remote-CPU links through the CPUs, which the kernel does not list
/// (topology_create_indirect_gpu_links).
fn add_indirect_links(nodes: &mut [Node]) {
    let n = nodes.len();
    let add = |nodes: &mut [Node], from: usize, to: usize| {
        if let Some((weight, io_link_type)) = indirect_link(nodes, from, to) {
            if weight == 0 || nodes[from].links.len() >= n - 1 {
                return;
            }
            nodes[from].links.push(IoLinkProperties {
                io_link_type,
                node_from: from as u32,
                node_to: to as u32,
                weight,
                ..IoLinkProperties::default()
            });
            nodes[from].props.num_io_links += 1;
        }
    };
    for i in 0..n.saturating_sub(1) {
        for j in i + 1..n {
            add(nodes, i, j);
            add(nodes, j, i);
        }
    }
}

/// /proc/cpuinfo: (apicid, model name) per processor.
fn cpu_model_names() -> Vec<(u32, String)> {
    let Ok(text) = std::fs::read_to_string("/proc/cpuinfo") else { return Vec::new() };
    let mut out = Vec::new();
    let mut name = String::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        match key.trim() {
            "model name" => name = value.trim().chars().take(HSA_PUBLIC_NAME_SIZE - 1).collect(),
            "apicid" => {
                if let Ok(apic) = value.trim().parse() {
                    out.push((apic, name.clone()));
                }
            }
            _ => {}
        }
    }
    out
}

/// Characters of `MarketingName` and `AMDName`, the NUL included.
const HSA_PUBLIC_NAME_SIZE: usize = 64;

/// The board name libdrm gives `device_id` (the first entry of amdgpu.ids for it).
fn marketing_name(device_id: u16) -> Option<String> {
    let text = std::fs::read_to_string(AMDGPU_IDS).ok()?;
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let mut cols = l.split(',');
        let id = u16::from_str_radix(cols.next()?.trim(), 16).ok()?;
        let _revision = cols.next()?;
        let name: String = cols.collect::<Vec<_>>().join(",").trim().chars().take(HSA_PUBLIC_NAME_SIZE - 1).collect();
        (id == device_id).then_some(name)
    })
}

impl Thunk {
    fn snapshot(&self) -> Result<Arc<Topology>> {
        self.snapshot.lock().clone().ok_or(Status::InvalidNodeUnit)
    }

    fn snapshot_node(&self, node: u32) -> Result<(Arc<Topology>, usize)> {
        let topo = self.snapshot()?;
        let i = usize::try_from(node).ok().filter(|i| *i < topo.nodes.len()).ok_or(Status::InvalidNodeUnit)?;
        Ok((topo, i))
    }

    /// `hsaKmtAcquireSystemProperties`: takes a snapshot of the topology, which the node
    /// property calls then read.
    pub fn acquire_system_properties(&self) -> Result<SystemProperties> {
        let topo = Topology::read(&self.kfd.runtime_dir().join("topology"))?;
        let system = topo.system;
        *self.snapshot.lock() = Some(Arc::new(topo));
        Ok(system)
    }

    /// `hsaKmtReleaseSystemProperties`: drops the snapshot.
    pub fn release_system_properties(&self) -> Result<()> {
        *self.snapshot.lock() = None;
        Ok(())
    }

    /// `hsaKmtGetNodeProperties`. A GPU node counts the banks the thunk adds (LDS, scratch,
    /// SVM and, when mapped, the MMIO remap page).
    pub fn node_properties(&self, node: u32) -> Result<NodeProperties> {
        let (topo, i) = self.snapshot_node(node)?;
        let n = &topo.nodes[i];
        let mut props = n.props.clone();
        if n.gpu_id != 0 {
            props.num_memory_banks += DGPU_EXTRA_BANKS;
            if self.fmm.mmio_page(n.gpu_id).is_some() {
                props.num_memory_banks += 1;
            }
        }
        Ok(props)
    }

    /// `hsaKmtGetNodeMemoryProperties`: up to `num_banks` entries, the sysfs banks first, then
    /// for a GPU its LDS, scratch, SVM and MMIO apertures. (The C call zeroes the rest of the
    /// caller's `num_banks`.)
    pub fn node_memory_properties(&self, node: u32, num_banks: u32) -> Result<Vec<MemoryProperties>> {
        let (topo, i) = self.snapshot_node(node)?;
        let n = &topo.nodes[i];
        let want = num_banks as usize;
        let mut out: Vec<MemoryProperties> = n.mems.iter().take(want).copied().collect();
        if n.gpu_id != 0 {
            let mut extra = Vec::new();
            if let Some(ap) = self.fmm.apertures(n.gpu_id) {
                extra.push(MemoryProperties {
                    heap_type: HeapType::GPU_LDS,
                    size_in_bytes: u64::from(n.props.lds_size_in_kb) * 1024,
                    virtual_base_address: ap.lds_base,
                    ..MemoryProperties::default()
                });
                extra.push(MemoryProperties {
                    heap_type: HeapType::GPU_SCRATCH,
                    size_in_bytes: ap.scratch_limit - ap.scratch_base + 1,
                    virtual_base_address: ap.scratch_base,
                    ..MemoryProperties::default()
                });
            }
            let (svm_base, svm_limit) = self.fmm.svm_aperture();
            extra.push(MemoryProperties {
                heap_type: HeapType::DEVICE_SVM,
                size_in_bytes: svm_limit - svm_base + 1,
                virtual_base_address: svm_base,
                ..MemoryProperties::default()
            });
            if let Some(mmio) = self.fmm.mmio_page(n.gpu_id) {
                extra.push(MemoryProperties {
                    heap_type: HeapType::MMIO_REMAP,
                    size_in_bytes: PAGE_SIZE,
                    virtual_base_address: mmio,
                    ..MemoryProperties::default()
                });
            }
            let room = want.saturating_sub(out.len());
            out.extend(extra.into_iter().take(room));
        }
        Ok(out)
    }

    /// `hsaKmtGetNodeCacheProperties`: the first `num_caches` caches (`processor_id` is not
    /// used, as in libhsakmt). Asking for more than the node has is `InvalidParameter`.
    pub fn node_cache_properties(
        &self,
        node: u32,
        _processor_id: u32,
        num_caches: u32,
    ) -> Result<Vec<CacheProperties>> {
        let (topo, i) = self.snapshot_node(node)?;
        let n = &topo.nodes[i];
        if num_caches > n.props.num_caches {
            return Err(Status::InvalidParameter);
        }
        Ok(n.caches.iter().take(num_caches as usize).cloned().collect())
    }

    /// `hsaKmtGetNodeIoLinkProperties`: the first `num_links` links, the indirect ones the
    /// thunk derives included.
    pub fn node_io_link_properties(&self, node: u32, num_links: u32) -> Result<Vec<IoLinkProperties>> {
        let (topo, i) = self.snapshot_node(node)?;
        let n = &topo.nodes[i];
        if num_links > n.props.num_io_links {
            return Err(Status::InvalidParameter);
        }
        Ok(n.links.iter().take(num_links as usize).copied().collect())
    }

    /// The KFD gpu_id of node `node` in the snapshot (0 for a CPU node): the name the ioctls
    /// give the node. libhsakmt 5.2.3 keeps it to itself (its callers pass node ids); a client
    /// that also speaks ioctls over [`Thunk::kfd`], as rocr-shim does, needs it.
    pub fn node_gpu_id(&self, node: u32) -> Result<u32> {
        let (topo, i) = self.snapshot_node(node)?;
        Ok(topo.nodes[i].gpu_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_override_is_three_bounded_numbers() {
        assert_eq!(parse_gfx_override("9.0.10"), Some((9, 0, 10)));
        assert_eq!(parse_gfx_override("9.0"), None);
        assert_eq!(parse_gfx_override("64.0.0"), None);
        assert_eq!(parse_gfx_override("9.0.1.2"), None);
    }

    fn gpu_with_link_to(cpu: u32, weight: u32) -> Node {
        let mut n = Node { gpu_id: 7, ..Node::default() };
        n.mems.push(MemoryProperties { heap_type: HeapType::FRAME_BUFFER_PUBLIC, ..MemoryProperties::default() });
        n.links.push(IoLinkProperties {
            io_link_type: IoLinkType::PCIEXPRESS,
            node_to: cpu,
            weight,
            ..Default::default()
        });
        n.props.num_io_links = 1;
        n
    }

    #[test]
    fn two_gpus_on_one_cpu_get_links_through_it() {
        let mut cpu = Node::default();
        for to in [1, 2] {
            cpu.links.push(IoLinkProperties {
                io_link_type: IoLinkType::PCIEXPRESS,
                node_to: to,
                weight: 20,
                ..Default::default()
            });
        }
        let mut nodes = vec![cpu, gpu_with_link_to(0, 20), gpu_with_link_to(0, 20)];
        nodes[2].gpu_id = 8;
        add_indirect_links(&mut nodes);
        assert_eq!(nodes[1].links.len(), 2);
        assert_eq!((nodes[1].links[1].node_to, nodes[1].links[1].weight), (2, 40));
        assert_eq!((nodes[2].links[1].node_to, nodes[2].links[1].weight), (1, 40));
        assert_eq!(nodes[0].links.len(), 2, "CPU->CPU is never indirect and the CPU links are direct");
    }
}
