//! The values the hsaKmt API takes and returns, as Rust types.
//!
//! Names follow `hsakmttypes.h` (libhsakmt 5.2.3) in Rust spelling. The C layouts live in the
//! C-ABI crate; here a struct is what the caller needs, not what C packs. Bitfield unions of the
//! header (`HsaMemFlags`, `HSA_ENGINE_ID`, ...) are `u32` newtypes with accessors, laid out
//! exactly as the C bitfields (the first member is the least significant bit), so the C layer
//! passes them through unchanged. Open C enums (`HSA_HEAPTYPE`, ...) are `u32` newtypes with
//! associated constants: an unknown value survives a round trip.

use std::sync::Arc;

/// Declares a `u32`/`i32` newtype standing for an open C enum, with its named values.
macro_rules! open_enum {
    ($(#[$m:meta])* $name:ident($t:ty) { $($(#[$vm:meta])* $v:ident = $x:expr),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[repr(transparent)]
        pub struct $name(pub $t);
        impl $name {
            $($(#[$vm])* pub const $v: $name = $name($x);)*
        }
    };
}

/// Declares a `u32` newtype over C bitfields: `name: lsb, width` accessors and `with_` setters.
macro_rules! bitfields {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $get:ident / $set:ident : $lsb:literal, $w:literal;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[repr(transparent)]
        pub struct $name(pub u32);
        impl $name {
            $(
                $(#[$fm])*
                pub const fn $get(self) -> u32 {
                    (self.0 >> $lsb) & ((1u32 << $w) - 1)
                }
                pub const fn $set(self, v: u32) -> $name {
                    let mask = ((1u32 << $w) - 1) << $lsb;
                    $name((self.0 & !mask) | ((v << $lsb) & mask))
                }
            )*
        }
    };
}

/// The KFD interface version (`HsaVersionInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VersionInfo {
    pub major: u32,
    pub minor: u32,
}

/// `HsaSystemProperties`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SystemProperties {
    pub num_nodes: u32,
    pub platform_oem: u32,
    pub platform_id: u32,
    pub platform_rev: u32,
}

bitfields!(
    /// `HSA_ENGINE_ID`: the GFX IP version of a GPU node.
    EngineId {
        ucode / with_ucode: 0, 10;
        major / with_major: 10, 6;
        minor / with_minor: 16, 8;
        stepping / with_stepping: 24, 8;
    }
);

impl EngineId {
    /// `HSA_GET_GFX_VERSION_FULL`: major << 16 | minor << 8 | stepping (0x090010 for gfx90a).
    pub const fn gfx_version(self) -> u32 {
        (self.major() << 16) | (self.minor() << 8) | self.stepping()
    }
}

bitfields!(
    /// `HSA_CAPABILITY` (the sysfs `capability` value).
    Capability {
        hot_pluggable / with_hot_pluggable: 0, 1;
        hsammu_present / with_hsammu_present: 1, 1;
        shared_with_graphics / with_shared_with_graphics: 2, 1;
        queue_size_pow2 / with_queue_size_pow2: 3, 1;
        queue_size_32bit / with_queue_size_32bit: 4, 1;
        queue_idle_event / with_queue_idle_event: 5, 1;
        va_limit / with_va_limit: 6, 1;
        watch_points_supported / with_watch_points_supported: 7, 1;
        watch_points_total_bits / with_watch_points_total_bits: 8, 4;
        doorbell_type / with_doorbell_type: 12, 2;
        aql_queue_double_map / with_aql_queue_double_map: 14, 1;
        debug_trap_supported / with_debug_trap_supported: 15, 1;
        svm_api_supported / with_svm_api_supported: 27, 1;
        coherent_host_access / with_coherent_host_access: 28, 1;
    }
);

/// `HsaNodeProperties`. Names are the C member names in snake case.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeProperties {
    pub num_cpu_cores: u32,
    pub num_fcompute_cores: u32,
    pub num_memory_banks: u32,
    pub num_caches: u32,
    pub num_io_links: u32,
    pub ccompute_id_lo: u32,
    pub fcompute_id_lo: u32,
    pub capability: Capability,
    pub max_waves_per_simd: u32,
    pub lds_size_in_kb: u32,
    pub gds_size_in_kb: u32,
    pub wave_front_size: u32,
    pub num_shader_banks: u32,
    pub num_arrays: u32,
    pub num_cu_per_array: u32,
    pub num_simd_per_cu: u32,
    pub max_slots_scratch_cu: u32,
    pub engine_id: EngineId,
    pub vendor_id: u16,
    pub device_id: u16,
    pub location_id: u32,
    pub local_mem_size: u64,
    pub max_engine_clock_mhz_fcompute: u32,
    pub max_engine_clock_mhz_ccompute: u32,
    pub drm_render_minor: i32,
    /// The board's public name (UTF-16 in C, at most 63 code units there).
    pub marketing_name: String,
    /// The CAL name (ASCII in C, at most 63 bytes there).
    pub amd_name: String,
    pub ucode_engine_versions: u32,
    pub debug_properties: u64,
    pub hive_id: u64,
    pub num_sdma_engines: u32,
    pub num_sdma_xgmi_engines: u32,
    pub num_sdma_queues_per_engine: u8,
    pub num_cp_queues: u8,
    pub num_gws: u8,
    pub domain: u32,
    pub unique_id: u64,
    pub vgpr_size_per_cu: u32,
    pub sgpr_size_per_cu: u32,
}

open_enum!(
    /// `HSA_HEAPTYPE`.
    HeapType(u32) {
        SYSTEM = 0,
        FRAME_BUFFER_PUBLIC = 1,
        FRAME_BUFFER_PRIVATE = 2,
        GPU_GDS = 3,
        GPU_LDS = 4,
        GPU_SCRATCH = 5,
        DEVICE_SVM = 6,
        MMIO_REMAP = 7,
    }
);

/// `HsaMemoryProperties`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryProperties {
    pub heap_type: HeapType,
    pub size_in_bytes: u64,
    /// `HSA_MEMORYPROPERTY` bits (HotPluggable 0, NonVolatile 1).
    pub flags: u32,
    pub width: u32,
    pub memory_clock_max: u32,
    pub virtual_base_address: u64,
}

/// Entries of `HsaCacheProperties::SiblingMap`.
pub const CPU_SIBLINGS: usize = 256;

bitfields!(
    /// `HsaCacheType`.
    CacheType {
        data / with_data: 0, 1;
        instruction / with_instruction: 1, 1;
        cpu / with_cpu: 2, 1;
        hsacu / with_hsacu: 3, 1;
    }
);

/// `HsaCacheProperties`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CacheProperties {
    pub processor_id_low: u32,
    pub cache_level: u32,
    /// KiB, as sysfs says.
    pub cache_size: u32,
    pub cache_line_size: u32,
    pub cache_lines_per_tag: u32,
    pub cache_associativity: u32,
    pub cache_latency: u32,
    pub cache_type: CacheType,
    /// One entry per logical processor (at most [`CPU_SIBLINGS`]).
    pub sibling_map: Vec<u32>,
}

open_enum!(
    /// `HSA_IOLINKTYPE`.
    IoLinkType(u32) {
        UNDEFINED = 0,
        HYPERTRANSPORT = 1,
        PCIEXPRESS = 2,
        AMBA = 3,
        MIPI = 4,
        QPI_1_1 = 5,
        INFINIBAND = 9,
        XGMI = 11,
        OTHER = 16,
    }
);

/// `HsaIoLinkProperties`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoLinkProperties {
    pub io_link_type: IoLinkType,
    pub version_major: u32,
    pub version_minor: u32,
    pub node_from: u32,
    pub node_to: u32,
    pub weight: u32,
    pub minimum_latency: u32,
    pub maximum_latency: u32,
    pub minimum_bandwidth: u32,
    pub maximum_bandwidth: u32,
    pub rec_transfer_size: u32,
    /// `HSA_LINKPROPERTY` bits.
    pub flags: u32,
}

open_enum!(
    /// `HSA_PAGE_SIZE`.
    PageSize(u32) { SIZE_4KB = 0, SIZE_64KB = 1, SIZE_2MB = 2, SIZE_1GB = 3 }
);

impl PageSize {
    pub const fn bytes(self) -> u64 {
        match self.0 {
            1 => 64 << 10,
            2 => 2 << 20,
            3 => 1 << 30,
            _ => 4 << 10,
        }
    }
}

bitfields!(
    /// `HsaMemFlags`: how `hsaKmtAllocMemory` allocates.
    MemFlags {
        /// System memory that is not paged out (GTT) rather than pageable memory.
        non_paged / with_non_paged: 0, 1;
        cache_policy / with_cache_policy: 1, 2;
        read_only / with_read_only: 3, 1;
        page_size / with_page_size: 4, 2;
        /// The CPU may access it (mapped in the process).
        host_access / with_host_access: 6, 1;
        no_substitute / with_no_substitute: 7, 1;
        gds_memory / with_gds_memory: 8, 1;
        /// A scratch backing reservation.
        scratch / with_scratch: 9, 1;
        atomic_access_full / with_atomic_access_full: 10, 1;
        atomic_access_partial / with_atomic_access_partial: 11, 1;
        execute_access / with_execute_access: 12, 1;
        /// Not coherent with other agents while in use (no KFD COHERENT flag).
        coarse_grain / with_coarse_grain: 13, 1;
        aql_queue_memory / with_aql_queue_memory: 14, 1;
        fixed_address / with_fixed_address: 15, 1;
        no_numa_bind / with_no_numa_bind: 16, 1;
        uncached / with_uncached: 17, 1;
        reserved / with_reserved: 18, 14;
    }
);

bitfields!(
    /// `HsaMemMapFlags`.
    MemMapFlags {
        cache_policy / with_cache_policy: 1, 2;
        read_only / with_read_only: 3, 1;
        page_size / with_page_size: 4, 2;
        host_access / with_host_access: 6, 1;
        migrate / with_migrate: 7, 1;
        probe / with_probe: 8, 1;
    }
);

open_enum!(
    /// `HSA_POINTER_TYPE`.
    PointerType(u32) { UNKNOWN = 0, ALLOCATED = 1, REGISTERED_USER = 2, REGISTERED_GRAPHICS = 3, REGISTERED_SHARED = 4 }
);

/// `HsaPointerInfo`. The node lists are the thunk's own arrays, valid until the mapping or
/// registration of the memory changes (the C layer hands out pointers into them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PointerInfo {
    pub pointer_type: PointerType,
    pub node: u32,
    pub mem_flags: MemFlags,
    pub cpu_address: u64,
    pub gpu_address: u64,
    pub size_in_bytes: u64,
    pub registered_nodes: Arc<[u32]>,
    pub mapped_nodes: Arc<[u32]>,
    pub user_data: u64,
}

/// `HsaSharedMemoryHandle`: opaque 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct SharedMemoryHandle(pub [u32; 8]);

open_enum!(
    /// `HSA_QUEUE_TYPE`.
    QueueType(u32) {
        COMPUTE = 1,
        SDMA = 2,
        MULTIMEDIA_DECODE = 3,
        MULTIMEDIA_ENCODE = 4,
        SDMA_XGMI = 5,
        COMPUTE_OS = 11,
        SDMA_OS = 12,
        COMPUTE_AQL = 21,
        DMA_AQL = 22,
        DMA_AQL_XGMI = 23,
    }
);

open_enum!(
    /// `HSA_QUEUE_PRIORITY`: -3 ..= 3.
    QueuePriority(i32) { MINIMUM = -3, LOW = -2, BELOW_NORMAL = -1, NORMAL = 0, ABOVE_NORMAL = 1, HIGH = 2, MAXIMUM = 3 }
);

/// A queue as `hsaKmtCreateQueue` names it (`HSA_QUEUEID`): opaque to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct QueueId(pub u64);

/// `HsaQueueResource`. For AQL queues the caller sets `read_ptr`, `write_ptr` (its
/// `amd_queue_t` dispatch ids) and `error_reason`; `create_queue` fills the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueResource {
    pub queue_id: QueueId,
    /// Address of the queue's doorbell in the mapped doorbell slice.
    pub doorbell: u64,
    pub write_ptr: u64,
    pub read_ptr: u64,
    pub error_reason: u64,
}

open_enum!(
    /// `HSA_EVENTTYPE`.
    EventType(u32) {
        SIGNAL = 0,
        NODECHANGE = 1,
        DEVICESTATECHANGE = 2,
        HW_EXCEPTION = 3,
        SYSTEM_EVENT = 4,
        DEBUG_EVENT = 5,
        PROFILE_EVENT = 6,
        QUEUE_EVENT = 7,
        MEMORY = 8,
    }
);

impl EventType {
    /// Every type below this is valid (`HSA_EVENTTYPE_MAXID`).
    pub const MAXID: u32 = 9;

    /// Events the system raises: they cannot be set or reset (libhsakmt's IsSystemEventType).
    pub const fn is_system(self) -> bool {
        self.0 != EventType::SIGNAL.0 && self.0 != EventType::DEBUG_EVENT.0
    }
}

/// `HsaEventDescriptor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventDescriptor {
    pub event_type: EventType,
    pub node_id: u32,
    /// `SyncVar.SyncVar.UserData`, kept opaque.
    pub sync_var: u64,
    pub sync_var_size: u64,
}

/// `HSA_EVENTTIMEOUT_INFINITE`.
pub const EVENT_TIMEOUT_INFINITE: u32 = 0xFFFF_FFFF;

open_enum!(
    /// `HSA_EVENTID_MEMORYFLAGS`.
    MemoryFaultFlags(u32) { RECOVERABLE = 0, FATAL_PROCESS = 1, FATAL_VM = 2 }
);

bitfields!(
    /// `HsaAccessAttributeFailure`.
    AccessFailure {
        not_present / with_not_present: 0, 1;
        read_only / with_read_only: 1, 1;
        no_execute / with_no_execute: 2, 1;
        gpu_access / with_gpu_access: 3, 1;
        ecc / with_ecc: 4, 1;
        imprecise / with_imprecise: 5, 1;
        error_type / with_error_type: 6, 3;
    }
);

/// `HsaMemoryAccessFault`: what a MEMORY event reports after a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryAccessFault {
    pub node_id: u32,
    pub virtual_address: u64,
    pub failure: AccessFailure,
    pub flags: MemoryFaultFlags,
}

/// `HsaEvent`: what `create_event` hands out and the other event calls take back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    pub event_id: u32,
    pub event_type: EventType,
    /// The KFD event id (`HWData1`).
    pub hw_data1: u64,
    /// The event mailbox: the address of the event's slot in the mapped event page, for
    /// signal events (`HWData2`, what ROCr stores as `amd_signal_t::event_mailbox_ptr`).
    pub hw_data2: u64,
    /// The value to write to the mailbox: KFD's event trigger data, the slot (`HWData3`).
    pub hw_data3: u32,
    pub sync_var: u64,
    pub sync_var_size: u64,
    /// Filled by a wait that saw a memory fault on a MEMORY event.
    pub memory_fault: Option<MemoryAccessFault>,
}

/// `HsaClockCounters`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClockCounters {
    pub gpu_clock_counter: u64,
    pub cpu_clock_counter: u64,
    pub system_clock_counter: u64,
    pub system_clock_frequency_hz: u64,
}

/// `HsaGpuTileConfig`: the arrays are as long as the caller asked, then trimmed to what the
/// device filled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TileConfig {
    pub tile_config: Vec<u32>,
    pub macro_tile_config: Vec<u32>,
    pub gb_addr_config: u32,
    pub num_banks: u32,
    pub num_ranks: u32,
}

open_enum!(
    /// `HSA_SVM_ATTR_TYPE`.
    SvmAttrType(u32) {
        PREFERRED_LOC = 0,
        PREFETCH_LOC = 1,
        ACCESS = 2,
        ACCESS_IN_PLACE = 3,
        NO_ACCESS = 4,
        SET_FLAGS = 5,
        CLR_FLAGS = 6,
        GRANULARITY = 7,
    }
);

/// `HSA_SVM_ATTRIBUTE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SvmAttribute {
    pub attr_type: SvmAttrType,
    pub value: u32,
}

/// `INVALID_NODEID`.
pub const INVALID_NODEID: u32 = 0xFFFF_FFFF;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitfields_follow_the_c_layout() {
        // gcc puts the first bitfield member in the least significant bits.
        let f = MemFlags(0).with_non_paged(1).with_host_access(1).with_scratch(1).with_uncached(1);
        assert_eq!(f.0, 1 | 1 << 6 | 1 << 9 | 1 << 17);
        assert_eq!(f.page_size(), 0);
        assert_eq!(MemFlags(0b11 << 4).page_size(), 3);
        let e = EngineId(0).with_major(9).with_minor(0).with_stepping(10).with_ucode(96);
        assert_eq!(e.0, 96 | 9 << 10 | 10 << 24);
        assert_eq!(e.gfx_version(), 0x09000A);
        assert_eq!(MemFlags(u32::MAX).with_reserved(0).0, (1 << 18) - 1);
    }

    #[test]
    fn system_event_types() {
        assert!(!EventType::SIGNAL.is_system());
        assert!(!EventType::DEBUG_EVENT.is_system());
        assert!(EventType::MEMORY.is_system());
        assert_eq!(PageSize::SIZE_2MB.bytes(), 2 << 20);
    }
}
