//! The device topology: one CPU node and N GPU nodes, as amdkfd builds it at boot.
//!
//! One model feeds both consumers: the ioctl handlers (gpu_id lookup, VRAM size, XNACK,
//! tile config) and the sysfs-shaped text tree that libhsakmt reads from
//! /sys/devices/virtual/kfd/kfd/topology (`files`, `write_tree`).
//!
//! Node 0 is the CPU; GPU `i` (0-based) is node `i + 1`, sits on synthetic PCI bus
//! `FIRST_GPU_BUS + i` and has render minor `128 + i`.

pub mod hsa;
mod node;
mod profile;
mod sysfs_text;
#[cfg(test)]
mod tests;

pub use node::{Cache, IoLink, MemBank, Node, NodeProps, GPU_PROCESSOR_ID_BASE};
pub use profile::{GpuCacheInfo, Profile, DEFAULT_PROFILE};
pub use sysfs_text::{
    leading_u64, parse_properties, parse_properties_leniently, Properties, KFD_SYSFS_DIR, MAX_FILE_SIZE,
};

use std::path::Path;

/// The project's GPU limit (render minors then stay in 128..=143).
pub const MAX_GPUS: usize = 16;

/// The PCI bus of GPU 0 in the synthetic PCI identity.
pub const FIRST_GPU_BUS: u32 = 0x03;

/// The first DRM render minor (libhsakmt drops nodes outside 128..=255).
pub const FIRST_RENDER_MINOR: u32 = 128;

/// gpu_id width: amdkfd's KFD_GPU_ID_HASH_WIDTH, and the mmap offset's bits 61:46.
const GPU_ID_BITS: u32 = 16;

/// Errors of this module.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("{requested} GPUs requested; at most {max} are supported")]
    TooManyGpus { requested: usize, max: usize },
    #[error("no GPU profile is named {0:?}")]
    UnknownProfile(String),
    #[error("line {line} of a properties file is malformed: {text:?}")]
    Malformed { line: usize, text: String },
}

pub type Result<T> = std::result::Result<T, TopologyError>;

/// What the CPU node reports about the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    pub cpu_cores: u32,
    /// Bytes of system memory.
    pub mem_total: u64,
    /// MHz; 0 when unknown, as kfd prints without cpufreq.
    pub max_clock_mhz: u32,
}

impl HostInfo {
    /// Used when /proc/meminfo cannot be read.
    pub const FALLBACK_MEM_TOTAL: u64 = 8 << 30;

    /// The running host: CPUs this process may use, /proc/meminfo MemTotal, and cpu0's
    /// cpufreq maximum (kfd's cpufreq_quick_get_max(0) / 1000).
    pub fn detect() -> HostInfo {
        let cpu_cores = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX));
        let mem_total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                kib.checked_mul(1024)
            })
            .unwrap_or(Self::FALLBACK_MEM_TOTAL);
        let max_clock_mhz = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
            .ok()
            .and_then(|khz| khz.trim().parse::<u64>().ok())
            .and_then(|khz| u32::try_from(khz / 1000).ok())
            .unwrap_or(0);
        HostInfo { cpu_cores, mem_total, max_clock_mhz }
    }
}

/// One GPU: its place in the topology and its synthetic PCI identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuNode {
    /// Topology node number (1-based; node 0 is the CPU).
    pub node_id: u32,
    /// Non-zero, unique, below 2^16 (see `gpu_ids`).
    pub gpu_id: u32,
    pub profile: &'static Profile,
    /// 128 + GPU index.
    pub drm_render_minor: u32,
    /// PCI bus/device/function: bus << 8 | devfn (pci_dev_id).
    pub location_id: u32,
    /// Stands in for the ASIC serial number; ROCr names the agent `GPU-<hex>` after it.
    pub unique_id: u64,
}

/// The whole topology, immutable once built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    profile: &'static Profile,
    host: HostInfo,
    gpus: Vec<GpuNode>,
    nodes: Vec<Node>,
}

impl Topology {
    /// `gpus` GPUs of `profile` on this host. 0 GPUs is allowed: a CPU-only topology, as amdkfd
    /// shows with no GPU bound. More than `MAX_GPUS` is an error.
    pub fn new(profile: &'static Profile, gpus: usize) -> Result<Topology> {
        Topology::with_host(profile, gpus, HostInfo::detect())
    }

    /// As `new`, by profile name.
    pub fn from_profile_name(name: &str, gpus: usize) -> Result<Topology> {
        let profile = Profile::by_name(name).ok_or_else(|| TopologyError::UnknownProfile(name.to_string()))?;
        Topology::new(profile, gpus)
    }

    /// As `new`, with given host facts (deterministic, for tests and reproducible trees).
    pub fn with_host(profile: &'static Profile, gpus: usize, host: HostInfo) -> Result<Topology> {
        if gpus > MAX_GPUS {
            return Err(TopologyError::TooManyGpus { requested: gpus, max: MAX_GPUS });
        }
        // gpus <= 16, so the casts below cannot truncate.
        let count = gpus as u32;
        let ids = gpu_ids(profile, count);
        let gpus: Vec<GpuNode> = (0..count)
            .zip(ids)
            .map(|(index, gpu_id)| {
                let location_id = (FIRST_GPU_BUS + index) << 8;
                GpuNode {
                    node_id: index + 1,
                    gpu_id,
                    profile,
                    drm_render_minor: FIRST_RENDER_MINOR + index,
                    location_id,
                    unique_id: unique_id(profile, location_id),
                }
            })
            .collect();
        let mut nodes = vec![node::cpu_node(&host, &gpus)];
        nodes.extend(gpus.iter().map(|g| node::gpu_node(g, &host, &gpus)));
        Ok(Topology { profile, host, gpus, nodes })
    }

    pub fn profile(&self) -> &'static Profile {
        self.profile
    }

    pub fn host(&self) -> &HostInfo {
        &self.host
    }

    /// The GPUs in node order.
    pub fn gpus(&self) -> &[GpuNode] {
        &self.gpus
    }

    /// The GPU with this gpu_id.
    pub fn gpu(&self, gpu_id: u32) -> Option<&GpuNode> {
        self.gpus.iter().find(|g| g.gpu_id == gpu_id)
    }

    /// Every node, CPU first.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, node_id: u32) -> Option<&Node> {
        self.nodes.get(usize::try_from(node_id).ok()?)
    }

    /// CPU plus GPUs.
    pub fn node_count(&self) -> u32 {
        // At most 1 + MAX_GPUS.
        self.nodes.len() as u32
    }

    /// amdkfd bumps its generation count once for the CPU and once per GPU it adds.
    pub fn generation_id(&self) -> u32 {
        self.node_count()
    }

    /// (relative path under the kfd sysfs directory, contents), e.g.
    /// ("topology/nodes/1/properties", "cpu_cores_count 0\n...").
    pub fn files(&self) -> Vec<(String, String)> {
        sysfs_text::files(self)
    }

    /// Every directory of the tree (relative, parents first), including empty ones.
    pub fn dirs(&self) -> Vec<String> {
        sysfs_text::dirs(self)
    }

    /// Writes `files()` under `dir`, creating directories; replaces an existing `dir/topology`.
    pub fn write_tree(&self, dir: &Path) -> std::io::Result<()> {
        sysfs_text::write_tree(self, dir)
    }
}

/// CRC-16/ARC (reflected polynomial 0x8005, initial value 0): the kernel's crc16().
fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ u16::from(byte), |c, _| if c & 1 == 1 { (c >> 1) ^ 0xA001 } else { c >> 1 })
    })
}

/// gpu_ids for `count` GPUs, derived the way kfd_generate_gpu_id derives them: CRC-16 over
/// eight little-endian words of the device's PCI identity (devfn, subsystem ids, domain, device
/// id, bus, VRAM size low and high, XCC layout), here the synthetic identity of GPU `i` (bus
/// `FIRST_GPU_BUS + i`, devfn 0, domain 0, subsystem 0x1002:device_id, one XCC). As in kfd, a
/// zero hash becomes 1 and a taken id is incremented (wrapping past 0xFFFF to 1) until unique.
/// The result is deterministic, non-zero, below 2^16 and unique.
fn gpu_ids(profile: &Profile, count: u32) -> Vec<u32> {
    let mask = (1u32 << GPU_ID_BITS) - 1;
    let mut ids: Vec<u32> = Vec::new();
    for index in 0..count {
        let words = [
            0,                                           // devfn
            profile.vendor_id | profile.device_id << 16, // subsystem vendor | device
            0,                                           // PCI domain
            profile.device_id,
            FIRST_GPU_BUS + index,
            profile.vram_size as u32, // low half, as lower_32_bits()
            (profile.vram_size >> 32) as u32,
            1 << 16, // first XCC 0, one XCC
        ];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut id = u32::from(crc16(&bytes)) & mask;
        loop {
            if id == 0 {
                id = 1;
            }
            if !ids.contains(&id) {
                break;
            }
            id = (id + 1) & mask;
        }
        ids.push(id);
    }
    ids
}

/// A deterministic non-zero 64-bit id (SplitMix64's finaliser over vendor, device, location).
fn unique_id(profile: &Profile, location_id: u32) -> u64 {
    let mut z = u64::from(profile.vendor_id) << 48 | u64::from(profile.device_id) << 32 | u64::from(location_id);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).max(1)
}
