//! GPU profiles: the per-ASIC constants amdkfd reports for a GPU node.
//!
//! Sources, per value: kfd_crat.c (cache tables), kfd_topology.c and kfd_debug.h (capability and
//! debug_prop rules), kfd_device.c (gfx_target_version, SDMA counts), and `rocminfo` output from
//! real boards (CU, SIMD, shader-engine counts, clocks, firmware versions). Where no public source
//! gives a value it is marked "chosen" with the reason.

use super::hsa::*;

/// The profile used when none is named: gfx90a (device id 0x740F), a target that ROCr 5.2.3
/// (Debian bookworm's) knows by its engine id (it silently drops gfx942 and gfx1100 agents).
pub const DEFAULT_PROFILE: &str = "gfx90a";

/// One row of amdkfd's `kfd_gpu_cache_info` tables (kfd_crat.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuCacheInfo {
    /// KiB.
    pub size_kb: u32,
    pub level: u32,
    /// Bytes.
    pub line_size: u32,
    /// HSA_CACHE_TYPE_* bits (the CRAT flags translated as kfd_topology.c does).
    pub cache_type: u32,
    /// How many neighbouring CUs share one instance.
    pub num_cu_shared: u32,
}

/// A GPU model: everything a GPU node reports that does not depend on where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The LLVM target name, e.g. "gfx90a".
    pub name: &'static str,
    /// major * 10000 + minor * 100 + stepping, as kfd_device.c encodes it (90010 is gfx90a).
    pub gfx_target_version: u32,
    pub device_id: u32,
    pub vendor_id: u32,
    pub marketing_name: &'static str,
    /// The sysfs node `name`: amdgpu's asic name, lower case.
    pub asic_name: &'static str,
    /// Active SIMDs: cu_count * simd_per_cu.
    pub simd_count: u32,
    /// Active compute units.
    pub cu_count: u32,
    pub simd_per_cu: u32,
    /// Shader arrays in the GPU: shader engines * arrays per engine (kfd's `array_count`).
    pub array_count: u32,
    pub simd_arrays_per_engine: u32,
    /// CU slots per shader array, active or not (amdgpu's max_cu_per_sh).
    pub cu_per_simd_array: u32,
    pub max_waves_per_simd: u32,
    pub wave_front_size: u32,
    pub lds_size_in_kb: u32,
    pub max_slots_scratch_cu: u32,
    /// Global wave sync barriers (amdgpu's gws_size).
    pub num_gws: u32,
    /// VRAM in bytes. Bookkeeping only: soft VRAM is host memory allocated on demand.
    pub vram_size: u64,
    /// VRAM bus width in bits and clock in MHz, for the memory bank.
    pub vram_width: u32,
    pub vram_clk_max: u32,
    /// MHz.
    pub max_engine_clk_fcompute: u32,
    pub xnack_supported: bool,
    pub num_sdma_engines: u32,
    pub num_sdma_xgmi_engines: u32,
    pub num_sdma_queues_per_engine: u32,
    pub num_cp_queues: u32,
    /// GET_TILE_CONFIG answers.
    pub gb_addr_config: u32,
    pub num_tile_configs: u32,
    pub num_macro_tile_configs: u32,
    /// HSA_CAP_* bits this device reports (see each profile for what is left out and why).
    pub capability: u32,
    pub debug_prop: u64,
    /// MEC firmware version (libhsakmt keeps the low 10 bits as EngineId.uCode).
    pub fw_version: u32,
    pub sdma_fw_version: u32,
    /// kfd_crat.c's cache table for this ASIC, in its order.
    pub caches: &'static [GpuCacheInfo],
}

impl Profile {
    /// The profile with this target name ("gfx90a", "gfx1030").
    pub fn by_name(name: &str) -> Option<&'static Profile> {
        PROFILES.iter().find(|p| p.name == name)
    }

    /// Every known profile.
    pub fn all() -> &'static [Profile] {
        PROFILES
    }

    /// The default profile (`DEFAULT_PROFILE`).
    pub fn default_profile() -> &'static Profile {
        &PROFILES[0]
    }

    /// Size in KiB of the first data cache at `level` (1, 2, 3), as ROCr reports per level.
    pub fn data_cache_kb(&self, level: u32) -> Option<u32> {
        self.caches.iter().find(|c| c.level == level && c.cache_type & CACHE_TYPE_INSTRUCTION == 0).map(|c| c.size_kb)
    }

    /// Shader engines: arrays / arrays per engine.
    pub fn shader_engines(&self) -> u32 {
        self.array_count / self.simd_arrays_per_engine
    }

    /// Active CUs in shader array `array`: spread evenly, lower arrays take the remainder
    /// (chosen: the real harvest pattern is per board).
    pub fn active_cus_in_array(&self, array: u32) -> u32 {
        let base = self.cu_count / self.array_count;
        base + u32::from(array < self.cu_count % self.array_count)
    }
}

const GIB: u64 = 1 << 30;
const DATA_CU: u32 = CACHE_TYPE_DATA | CACHE_TYPE_HSACU;
const INST_CU: u32 = CACHE_TYPE_INSTRUCTION | CACHE_TYPE_HSACU;

const fn cache(size_kb: u32, level: u32, line_size: u32, cache_type: u32, shared: u32) -> GpuCacheInfo {
    GpuCacheInfo { size_kb, level, line_size, cache_type, num_cu_shared: shared }
}

/// kfd_crat.c `aldebaran_cache_info`.
const ALDEBARAN_CACHES: &[GpuCacheInfo] = &[
    cache(16, 1, 64, DATA_CU, 1),     // TCP L1 per CU
    cache(32, 1, 64, INST_CU, 2),     // SQC instruction cache
    cache(16, 1, 64, DATA_CU, 2),     // SQC scalar data cache
    cache(8192, 2, 128, DATA_CU, 14), // L2
];

/// kfd_crat.c `sienna_cichlid_cache_info`.
const SIENNA_CICHLID_CACHES: &[GpuCacheInfo] = &[
    cache(16, 1, 128, DATA_CU, 1),         // TCP L1 per CU
    cache(32, 1, 64, INST_CU, 2),          // SQC instruction cache
    cache(16, 1, 64, DATA_CU, 2),          // SQC scalar data cache
    cache(128, 1, 128, DATA_CU, 10),       // GL1 per shader array
    cache(4096, 2, 128, DATA_CU, 10),      // L2
    cache(128 * 1024, 3, 64, DATA_CU, 10), // Infinity Cache
];

static PROFILES: &[Profile] = &[
    // AMD Instinct MI210 (aldebaran, GC 9.4.2).
    Profile {
        name: "gfx90a",
        gfx_target_version: 90010,
        device_id: 0x740F,
        vendor_id: 0x1002,
        marketing_name: "AMD Instinct MI210",
        asic_name: "aldebaran",
        simd_count: 104 * 4,
        cu_count: 104,
        simd_per_cu: 4,
        // rocminfo on MI210: 8 shader engines, 1 array per engine.
        array_count: 8,
        simd_arrays_per_engine: 1,
        // Chosen: 14, the L2 row's num_cu_shared, which equals max_cu_per_sh on every other
        // ASIC in kfd_crat.c (8 x 14 = 112 slots; the MI210 enables 104).
        cu_per_simd_array: 14,
        // rocminfo: 32 waves per CU over 4 SIMDs.
        max_waves_per_simd: 8,
        wave_front_size: 64,
        lds_size_in_kb: 64,
        max_slots_scratch_cu: 32,
        num_gws: 64,
        // Chosen: 16 GiB (the board has 64 GiB) since it only bounds bookkeeping.
        vram_size: 16 * GIB,
        vram_width: 4096,
        vram_clk_max: 1600,
        max_engine_clk_fcompute: 1700,
        xnack_supported: true,
        // kfd_get_num_sdma_engines: with XGMI, 2 of aldebaran's 5 SDMA engines serve PCIe.
        num_sdma_engines: 2,
        num_sdma_xgmi_engines: 3,
        num_sdma_queues_per_engine: 8,
        // Chosen: 24, the MEC queues amdgpu leaves to KFD on gfx9 (4 pipes x 8 minus 8 KCQs).
        num_cp_queues: 24,
        // gfx_v9_0.c forces these bits for GC 9.4.x; the register's other bits are taken as 0.
        gb_addr_config: 0x2201_4042,
        // amdgpu_amdkfd_get_tile_config reports the array lengths even where unused (gfx9+).
        num_tile_configs: 32,
        num_macro_tile_configs: 16,
        // What an MI210 reports (4 watch points, SOC15 doorbells, revision 1, SRAM and HBM
        // ECC, RAS events, the SVM API), minus what this device does not implement: the
        // debugger trap bits (DBG_TRAP answers EINVAL) and per-queue reset.
        capability: cap_watch_points(2)
            | cap_doorbell_type(CAP_DOORBELL_TYPE_2_0)
            | cap_asic_revision(1)
            | CAP_SRAM_EDCSUPPORTED
            | CAP_MEM_EDCSUPPORTED
            | CAP_RASEVENTNOTIFY
            | CAP_SVMAPI_SUPPORTED,
        // kfd_topology_set_capabilities: GFX9 watch mask bits; GC 9.4.2 lacks always-valid TTMPs.
        debug_prop: DBG_WATCH_ADDR_MASK_LO_BIT_GFX9 | DBG_WATCH_ADDR_MASK_HI_BIT,
        // rocminfo on MI210: Packet Processor uCode 96, SDMA engine uCode 9.
        fw_version: 96,
        sdma_fw_version: 9,
        caches: ALDEBARAN_CACHES,
    },
    // AMD Radeon RX 6800 XT (sienna_cichlid / Navi 21, GC 10.3.0).
    Profile {
        name: "gfx1030",
        gfx_target_version: 100300,
        device_id: 0x73BF,
        vendor_id: 0x1002,
        marketing_name: "AMD Radeon RX 6800 XT",
        asic_name: "sienna_cichlid",
        simd_count: 72 * 2,
        cu_count: 72,
        // RDNA: 2 SIMD32 per CU, wave32 native (kfd reports wave_front_size 32 on gfx10.3).
        simd_per_cu: 2,
        // Navi 21: 4 shader engines x 2 arrays x 10 CU slots (the GL1/L2 rows share 10 CUs).
        array_count: 8,
        simd_arrays_per_engine: 2,
        cu_per_simd_array: 10,
        // RDNA2: 16 wave slots per SIMD (32 waves per CU in rocminfo).
        max_waves_per_simd: 16,
        wave_front_size: 32,
        lds_size_in_kb: 64,
        max_slots_scratch_cu: 32,
        num_gws: 64,
        vram_size: 16 * GIB,
        vram_width: 256,
        vram_clk_max: 1000,
        // Chosen: the board's 2250 MHz boost clock.
        max_engine_clk_fcompute: 2250,
        xnack_supported: false,
        // No XGMI: all 4 SDMA engines serve PCIe.
        num_sdma_engines: 4,
        num_sdma_xgmi_engines: 0,
        num_sdma_queues_per_engine: 8,
        num_cp_queues: 24,
        // Chosen: gfx10 reads GB_ADDR_CONFIG from hardware; 16 pipes, 16 packers, 256 B interleave.
        gb_addr_config: 0x0000_0444,
        num_tile_configs: 32,
        num_macro_tile_configs: 16,
        // 4 watch points, SOC15 doorbells and the SVM API; consumer boards report no ECC/RAS.
        // Debugger trap bits are left out as for gfx90a. Revision 0 is chosen.
        capability: cap_watch_points(2)
            | cap_doorbell_type(CAP_DOORBELL_TYPE_2_0)
            | cap_asic_revision(0)
            | CAP_SVMAPI_SUPPORTED,
        // GFX10 watch mask bits; TTMPs are always set up before GC 11 (kfd_debug.h).
        debug_prop: DBG_WATCH_ADDR_MASK_LO_BIT_GFX10 | DBG_WATCH_ADDR_MASK_HI_BIT | DBG_DISPATCH_INFO_ALWAYS_VALID,
        // Chosen: plausible Navi 21 MEC/SDMA firmware (>= 89, which kfd's debugger check needs).
        fw_version: 115,
        sdma_fw_version: 80,
        caches: SIENNA_CICHLID_CACHES,
    },
];
