//! Numbers of hsa.h and hsa_ext_amd.h (ROCr 5.2.3, as Debian ships them) that the shim answers
//! to, plus the shim's own extensions (declared in include/cuse_kfd_shim.h). The C tests compile
//! against those headers, so a wrong number here fails a test.

// hsa_system_info_t
pub const HSA_SYSTEM_INFO_VERSION_MAJOR: u32 = 0;
pub const HSA_SYSTEM_INFO_VERSION_MINOR: u32 = 1;
pub const HSA_SYSTEM_INFO_TIMESTAMP: u32 = 2;
pub const HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY: u32 = 3;
pub const HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT: u32 = 4;
pub const HSA_SYSTEM_INFO_ENDIANNESS: u32 = 5;
pub const HSA_SYSTEM_INFO_MACHINE_MODEL: u32 = 6;
pub const HSA_SYSTEM_INFO_EXTENSIONS: u32 = 7;

pub const HSA_ENDIANNESS_LITTLE: u32 = 0;
pub const HSA_MACHINE_MODEL_LARGE: u32 = 1;
pub const HSA_PROFILE_BASE: u32 = 0;
pub const HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR: u32 = 2;

// hsa_agent_info_t
pub const HSA_AGENT_INFO_NAME: u32 = 0;
pub const HSA_AGENT_INFO_VENDOR_NAME: u32 = 1;
pub const HSA_AGENT_INFO_FEATURE: u32 = 2;
pub const HSA_AGENT_INFO_MACHINE_MODEL: u32 = 3;
pub const HSA_AGENT_INFO_PROFILE: u32 = 4;
pub const HSA_AGENT_INFO_DEFAULT_FLOAT_ROUNDING_MODE: u32 = 5;
pub const HSA_AGENT_INFO_WAVEFRONT_SIZE: u32 = 6;
pub const HSA_AGENT_INFO_WORKGROUP_MAX_DIM: u32 = 7;
pub const HSA_AGENT_INFO_WORKGROUP_MAX_SIZE: u32 = 8;
pub const HSA_AGENT_INFO_GRID_MAX_DIM: u32 = 9;
pub const HSA_AGENT_INFO_GRID_MAX_SIZE: u32 = 10;
pub const HSA_AGENT_INFO_FBARRIER_MAX_SIZE: u32 = 11;
pub const HSA_AGENT_INFO_QUEUES_MAX: u32 = 12;
pub const HSA_AGENT_INFO_QUEUE_MIN_SIZE: u32 = 13;
pub const HSA_AGENT_INFO_QUEUE_MAX_SIZE: u32 = 14;
pub const HSA_AGENT_INFO_QUEUE_TYPE: u32 = 15;
pub const HSA_AGENT_INFO_NODE: u32 = 16;
pub const HSA_AGENT_INFO_DEVICE: u32 = 17;
pub const HSA_AGENT_INFO_CACHE_SIZE: u32 = 18;
pub const HSA_AGENT_INFO_ISA: u32 = 19;
pub const HSA_AGENT_INFO_EXTENSIONS: u32 = 20;
pub const HSA_AGENT_INFO_VERSION_MAJOR: u32 = 21;
pub const HSA_AGENT_INFO_VERSION_MINOR: u32 = 22;
pub const HSA_AGENT_INFO_BASE_PROFILE_DEFAULT_FLOAT_ROUNDING_MODES: u32 = 23;
pub const HSA_AGENT_INFO_FAST_F16_OPERATION: u32 = 24;

pub const HSA_DEVICE_TYPE_CPU: u32 = 0;
pub const HSA_DEVICE_TYPE_GPU: u32 = 1;
pub const HSA_AGENT_FEATURE_KERNEL_DISPATCH: u32 = 1;
pub const HSA_AGENT_FEATURE_AGENT_DISPATCH: u32 = 2;

// hsa_amd_agent_info_t
pub const HSA_AMD_AGENT_INFO_CHIP_ID: u32 = 0xA000;
pub const HSA_AMD_AGENT_INFO_CACHELINE_SIZE: u32 = 0xA001;
pub const HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT: u32 = 0xA002;
pub const HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY: u32 = 0xA003;
pub const HSA_AMD_AGENT_INFO_DRIVER_NODE_ID: u32 = 0xA004;
pub const HSA_AMD_AGENT_INFO_MAX_ADDRESS_WATCH_POINTS: u32 = 0xA005;
pub const HSA_AMD_AGENT_INFO_BDFID: u32 = 0xA006;
pub const HSA_AMD_AGENT_INFO_MEMORY_WIDTH: u32 = 0xA007;
pub const HSA_AMD_AGENT_INFO_MEMORY_MAX_FREQUENCY: u32 = 0xA008;
pub const HSA_AMD_AGENT_INFO_PRODUCT_NAME: u32 = 0xA009;
pub const HSA_AMD_AGENT_INFO_MAX_WAVES_PER_CU: u32 = 0xA00A;
pub const HSA_AMD_AGENT_INFO_NUM_SIMDS_PER_CU: u32 = 0xA00B;
pub const HSA_AMD_AGENT_INFO_NUM_SHADER_ENGINES: u32 = 0xA00C;
pub const HSA_AMD_AGENT_INFO_NUM_SHADER_ARRAYS_PER_SE: u32 = 0xA00D;
pub const HSA_AMD_AGENT_INFO_HDP_FLUSH: u32 = 0xA00E;
pub const HSA_AMD_AGENT_INFO_DOMAIN: u32 = 0xA00F;
pub const HSA_AMD_AGENT_INFO_COOPERATIVE_QUEUES: u32 = 0xA010;
pub const HSA_AMD_AGENT_INFO_UUID: u32 = 0xA011;
pub const HSA_AMD_AGENT_INFO_ASIC_REVISION: u32 = 0xA012;
pub const HSA_AMD_AGENT_INFO_SVM_DIRECT_HOST_ACCESS: u32 = 0xA013;
pub const HSA_AMD_AGENT_INFO_COOPERATIVE_COMPUTE_UNIT_COUNT: u32 = 0xA014;
/// Shim extension (ROCr interface 1.36; absent from Debian's header): bool, host stores to
/// this agent's device memory reach it over PCIe and need an HDP flush to become visible.
pub const HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH: u32 = 0xA5E0;

// hsa_region_info_t and hsa_amd_region_info_t
pub const HSA_REGION_INFO_SEGMENT: u32 = 0;
pub const HSA_REGION_INFO_GLOBAL_FLAGS: u32 = 1;
pub const HSA_REGION_INFO_SIZE: u32 = 2;
pub const HSA_REGION_INFO_ALLOC_MAX_SIZE: u32 = 4;
pub const HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED: u32 = 5;
pub const HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE: u32 = 6;
pub const HSA_REGION_INFO_RUNTIME_ALLOC_ALIGNMENT: u32 = 7;
pub const HSA_REGION_INFO_ALLOC_MAX_PRIVATE_WORKGROUP_SIZE: u32 = 8;
pub const HSA_AMD_REGION_INFO_HOST_ACCESSIBLE: u32 = 0xA000;
pub const HSA_AMD_REGION_INFO_BASE: u32 = 0xA001;

pub const HSA_REGION_SEGMENT_GLOBAL: u32 = 0;
pub const HSA_REGION_GLOBAL_FLAG_KERNARG: u32 = 1;
pub const HSA_REGION_GLOBAL_FLAG_FINE_GRAINED: u32 = 2;
pub const HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED: u32 = 4;

// hsa_amd_memory_pool_info_t
pub const HSA_AMD_MEMORY_POOL_INFO_SEGMENT: u32 = 0;
pub const HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS: u32 = 1;
pub const HSA_AMD_MEMORY_POOL_INFO_SIZE: u32 = 2;
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: u32 = 5;
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE: u32 = 6;
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT: u32 = 7;
pub const HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL: u32 = 15;
pub const HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE: u32 = 16;
/// Shim extension (ROCr interface 1.36; absent from Debian's header): bool, signals may live in
/// this pool (the batch API's device placement).
pub const HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE: u32 = 0x5E00;

pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT: u32 = 1;
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED: u32 = 2;
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED: u32 = 4;

// hsa_amd_agent_memory_pool_info_t and hsa_amd_memory_pool_access_t
pub const HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS: u32 = 0;
pub const HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS: u32 = 1;
pub const HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED: u32 = 0;
pub const HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT: u32 = 1;
pub const HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT: u32 = 2;

// hsa_amd_signal_attribute_t
pub const HSA_AMD_SIGNAL_AMD_GPU_ONLY: u64 = 1;
pub const HSA_AMD_SIGNAL_IPC: u64 = 2;

// hsa_queue_type_t
pub const HSA_QUEUE_TYPE_MULTI: u32 = 0;
pub const HSA_QUEUE_TYPE_SINGLE: u32 = 1;
pub const HSA_QUEUE_TYPE_COOPERATIVE: u32 = 2;

/// ROCr's queue limits for a GPU agent.
pub const QUEUE_MIN_PACKETS: u32 = 64;
pub const QUEUE_MAX_PACKETS: u32 = 131_072;
pub const QUEUES_MAX: u32 = 128;

/// HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY: the system clock of GET_CLOCK_COUNTERS
/// (CLOCK_BOOTTIME in ns).
pub const TIMESTAMP_FREQUENCY_HZ: u64 = 1_000_000_000;
