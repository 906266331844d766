//! The structs of `hsakmttypes.h` as C lays them out (`#pragma pack(push, 4)`), and their
//! conversions from and to the thunk's Rust types.
//!
//! Names are the C names, so the ABI test can compare member by member. Bitfield unions are the
//! thunk's `u32` newtypes (`MemFlags`, `EngineId`, ...: `#[repr(transparent)]`); other unions
//! are byte-exact members with accessors. Pointers are `u64` (x86-64): the C layer only moves
//! them. Sizes are asserted at compile time beside each struct.

#![allow(non_snake_case, non_camel_case_types)]

use thunk::hsakmt::*;

/// `HSAKMT_STATUS`.
pub type HSAKMT_STATUS = u32;
pub const HSAKMT_STATUS_SUCCESS: HSAKMT_STATUS = 0;

/// `HSA_QUEUEID`.
pub type HSA_QUEUEID = u64;

/// `HSA_QUEUE_PRIORITY`: its values span -3 and 0xFFFFFFFF, so gcc makes the enum a `long`.
pub type HSA_QUEUE_PRIORITY = i64;

/// `HSA_QUEUE_TYPE` and the other unsigned enums.
pub type HSA_QUEUE_TYPE = u32;

macro_rules! c_struct {
    ($(#[$m:meta])* $name:ident = $size:literal { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[repr(C, packed(4))]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        const _: () = assert!(std::mem::size_of::<$name>() == $size);
    };
}

c_struct!(HsaVersionInfo = 8 { KernelInterfaceMajorVersion: u32, KernelInterfaceMinorVersion: u32 });

c_struct!(HsaSystemProperties = 16 { NumNodes: u32, PlatformOem: u32, PlatformId: u32, PlatformRev: u32 });

/// Characters of `MarketingName` and `AMDName`.
pub const HSA_PUBLIC_NAME_SIZE: usize = 64;

c_struct!(HsaNodeProperties = 356 {
    NumCPUCores: u32,
    NumFComputeCores: u32,
    NumMemoryBanks: u32,
    NumCaches: u32,
    NumIOLinks: u32,
    CComputeIdLo: u32,
    FComputeIdLo: u32,
    Capability: Capability,
    MaxWavesPerSIMD: u32,
    LDSSizeInKB: u32,
    GDSSizeInKB: u32,
    WaveFrontSize: u32,
    NumShaderBanks: u32,
    NumArrays: u32,
    NumCUPerArray: u32,
    NumSIMDPerCU: u32,
    MaxSlotsScratchCU: u32,
    EngineId: EngineId,
    VendorId: u16,
    DeviceId: u16,
    LocationId: u32,
    LocalMemSize: u64,
    MaxEngineClockMhzFCompute: u32,
    MaxEngineClockMhzCCompute: u32,
    DrmRenderMinor: i32,
    /// UTF-16, NUL-terminated.
    MarketingName: [u16; HSA_PUBLIC_NAME_SIZE],
    /// ASCII, NUL-terminated.
    AMDName: [u8; HSA_PUBLIC_NAME_SIZE],
    uCodeEngineVersions: u32,
    DebugProperties: u64,
    HiveID: u64,
    NumSdmaEngines: u32,
    NumSdmaXgmiEngines: u32,
    NumSdmaQueuesPerEngine: u8,
    NumCpQueues: u8,
    NumGws: u8,
    Reserved2: u8,
    Domain: u32,
    UniqueID: u64,
    VGPRSizePerCU: u32,
    SGPRSizePerCU: u32,
    Reserved: [u8; 12],
});

/// `s` as UTF-16 with a NUL, truncated to fit.
fn utf16_name(s: &str) -> [u16; HSA_PUBLIC_NAME_SIZE] {
    let mut out = [0u16; HSA_PUBLIC_NAME_SIZE];
    for (o, c) in out.iter_mut().take(HSA_PUBLIC_NAME_SIZE - 1).zip(s.encode_utf16()) {
        *o = c;
    }
    out
}

/// `s` as bytes with a NUL, truncated to fit.
fn ascii_name(s: &str) -> [u8; HSA_PUBLIC_NAME_SIZE] {
    let mut out = [0u8; HSA_PUBLIC_NAME_SIZE];
    for (o, c) in out.iter_mut().take(HSA_PUBLIC_NAME_SIZE - 1).zip(s.bytes()) {
        *o = c;
    }
    out
}

impl From<&NodeProperties> for HsaNodeProperties {
    fn from(p: &NodeProperties) -> HsaNodeProperties {
        HsaNodeProperties {
            NumCPUCores: p.num_cpu_cores,
            NumFComputeCores: p.num_fcompute_cores,
            NumMemoryBanks: p.num_memory_banks,
            NumCaches: p.num_caches,
            NumIOLinks: p.num_io_links,
            CComputeIdLo: p.ccompute_id_lo,
            FComputeIdLo: p.fcompute_id_lo,
            Capability: p.capability,
            MaxWavesPerSIMD: p.max_waves_per_simd,
            LDSSizeInKB: p.lds_size_in_kb,
            GDSSizeInKB: p.gds_size_in_kb,
            WaveFrontSize: p.wave_front_size,
            NumShaderBanks: p.num_shader_banks,
            NumArrays: p.num_arrays,
            NumCUPerArray: p.num_cu_per_array,
            NumSIMDPerCU: p.num_simd_per_cu,
            MaxSlotsScratchCU: p.max_slots_scratch_cu,
            EngineId: p.engine_id,
            VendorId: p.vendor_id,
            DeviceId: p.device_id,
            LocationId: p.location_id,
            LocalMemSize: p.local_mem_size,
            MaxEngineClockMhzFCompute: p.max_engine_clock_mhz_fcompute,
            MaxEngineClockMhzCCompute: p.max_engine_clock_mhz_ccompute,
            DrmRenderMinor: p.drm_render_minor,
            MarketingName: utf16_name(&p.marketing_name),
            AMDName: ascii_name(&p.amd_name),
            uCodeEngineVersions: p.ucode_engine_versions,
            DebugProperties: p.debug_properties,
            HiveID: p.hive_id,
            NumSdmaEngines: p.num_sdma_engines,
            NumSdmaXgmiEngines: p.num_sdma_xgmi_engines,
            NumSdmaQueuesPerEngine: p.num_sdma_queues_per_engine,
            NumCpQueues: p.num_cp_queues,
            NumGws: p.num_gws,
            Reserved2: 0,
            Domain: p.domain,
            UniqueID: p.unique_id,
            VGPRSizePerCU: p.vgpr_size_per_cu,
            SGPRSizePerCU: p.sgpr_size_per_cu,
            Reserved: [0; 12],
        }
    }
}

c_struct!(HsaMemoryProperties = 32 {
    HeapType: u32,
    /// The union of `SizeInBytes` and `ui32.{SizeInBytesLow, SizeInBytesHigh}`.
    SizeInBytes: u64,
    Flags: u32,
    Width: u32,
    MemoryClockMax: u32,
    VirtualBaseAddress: u64,
});

impl From<&MemoryProperties> for HsaMemoryProperties {
    fn from(m: &MemoryProperties) -> HsaMemoryProperties {
        HsaMemoryProperties {
            HeapType: m.heap_type.0,
            SizeInBytes: m.size_in_bytes,
            Flags: m.flags,
            Width: m.width,
            MemoryClockMax: m.memory_clock_max,
            VirtualBaseAddress: m.virtual_base_address,
        }
    }
}

c_struct!(HsaCacheProperties = 1056 {
    ProcessorIdLow: u32,
    CacheLevel: u32,
    CacheSize: u32,
    CacheLineSize: u32,
    CacheLinesPerTag: u32,
    CacheAssociativity: u32,
    CacheLatency: u32,
    CacheType: CacheType,
    SiblingMap: [u32; CPU_SIBLINGS],
});

impl From<&CacheProperties> for HsaCacheProperties {
    fn from(c: &CacheProperties) -> HsaCacheProperties {
        let mut map = [0u32; CPU_SIBLINGS];
        for (m, v) in map.iter_mut().zip(&c.sibling_map) {
            *m = *v;
        }
        HsaCacheProperties {
            ProcessorIdLow: c.processor_id_low,
            CacheLevel: c.cache_level,
            CacheSize: c.cache_size,
            CacheLineSize: c.cache_line_size,
            CacheLinesPerTag: c.cache_lines_per_tag,
            CacheAssociativity: c.cache_associativity,
            CacheLatency: c.cache_latency,
            CacheType: c.cache_type,
            SiblingMap: map,
        }
    }
}

c_struct!(HsaIoLinkProperties = 48 {
    IoLinkType: u32,
    VersionMajor: u32,
    VersionMinor: u32,
    NodeFrom: u32,
    NodeTo: u32,
    Weight: u32,
    MinimumLatency: u32,
    MaximumLatency: u32,
    MinimumBandwidth: u32,
    MaximumBandwidth: u32,
    RecTransferSize: u32,
    Flags: u32,
});

impl From<&IoLinkProperties> for HsaIoLinkProperties {
    fn from(l: &IoLinkProperties) -> HsaIoLinkProperties {
        HsaIoLinkProperties {
            IoLinkType: l.io_link_type.0,
            VersionMajor: l.version_major,
            VersionMinor: l.version_minor,
            NodeFrom: l.node_from,
            NodeTo: l.node_to,
            Weight: l.weight,
            MinimumLatency: l.minimum_latency,
            MaximumLatency: l.maximum_latency,
            MinimumBandwidth: l.minimum_bandwidth,
            MaximumBandwidth: l.maximum_bandwidth,
            RecTransferSize: l.rec_transfer_size,
            Flags: l.flags,
        }
    }
}

/// `HsaMemFlags` (a struct around a union of bitfields and a u32).
pub type HsaMemFlags = MemFlags;
/// `HsaMemMapFlags`.
pub type HsaMemMapFlags = MemMapFlags;
const _: () = assert!(std::mem::size_of::<HsaMemFlags>() == 4 && std::mem::size_of::<HsaMemMapFlags>() == 4);

c_struct!(HsaClockCounters = 32 {
    GPUClockCounter: u64,
    CPUClockCounter: u64,
    SystemClockCounter: u64,
    SystemClockFrequencyHz: u64,
});

impl From<&ClockCounters> for HsaClockCounters {
    fn from(c: &ClockCounters) -> HsaClockCounters {
        HsaClockCounters {
            GPUClockCounter: c.gpu_clock_counter,
            CPUClockCounter: c.cpu_clock_counter,
            SystemClockCounter: c.system_clock_counter,
            SystemClockFrequencyHz: c.system_clock_frequency_hz,
        }
    }
}

c_struct!(HsaQueueResource = 40 {
    QueueId: HSA_QUEUEID,
    /// The union of `Queue_DoorBell`, `Queue_DoorBell_aql` and `QueueDoorBell`.
    QueueDoorBell: u64,
    /// The union of `Queue_write_ptr`, `Queue_write_ptr_aql` and `QueueWptrValue`.
    QueueWptrValue: u64,
    /// The union of `Queue_read_ptr`, `Queue_read_ptr_aql` and `QueueRptrValue`.
    QueueRptrValue: u64,
    ErrorReason: u64,
});

c_struct!(
    /// `HsaSyncVar`: `SyncVar` is the union of `UserData` and `UserDataPtrValue`.
    HsaSyncVar = 16 { SyncVar: u64, SyncVarSize: u64 }
);

c_struct!(HsaEventDescriptor = 24 { EventType: u32, NodeId: u32, SyncVar: HsaSyncVar });

impl From<&HsaEventDescriptor> for EventDescriptor {
    fn from(d: &HsaEventDescriptor) -> EventDescriptor {
        EventDescriptor {
            event_type: EventType(d.EventType),
            node_id: d.NodeId,
            sync_var: d.SyncVar.SyncVar,
            sync_var_size: d.SyncVar.SyncVarSize,
        }
    }
}

c_struct!(
    /// `HsaMemoryAccessFault`, one member of the `HsaEventData.EventData` union.
    HsaMemoryAccessFault = 20 { NodeId: u32, VirtualAddress: u64, Failure: AccessFailure, Flags: u32 }
);

c_struct!(HsaEventData = 44 {
    EventType: u32,
    /// The union of `HsaSyncVar` (16 bytes), `HsaNodeChange`, `HsaDeviceStateChange` and
    /// `HsaMemoryAccessFault` (20 bytes, the largest).
    EventData: [u32; 5],
    HWData1: u64,
    HWData2: u64,
    HWData3: u32,
});

c_struct!(HsaEvent = 48 { EventId: u32, EventData: HsaEventData });

/// The union member at the start of `EventData` as `words`.
fn union_words<const N: usize>(words: [u32; N]) -> [u32; 5] {
    let mut out = [0u32; 5];
    out[..N].copy_from_slice(&words);
    out
}

impl From<&Event> for HsaEvent {
    fn from(e: &Event) -> HsaEvent {
        let union = match e.memory_fault {
            Some(f) => {
                let va = f.virtual_address;
                union_words([f.node_id, va as u32, (va >> 32) as u32, f.failure.0, f.flags.0])
            }
            None => union_words([
                e.sync_var as u32,
                (e.sync_var >> 32) as u32,
                e.sync_var_size as u32,
                (e.sync_var_size >> 32) as u32,
            ]),
        };
        HsaEvent {
            EventId: e.event_id,
            EventData: HsaEventData {
                EventType: e.event_type.0,
                EventData: union,
                HWData1: e.hw_data1,
                HWData2: e.hw_data2,
                HWData3: e.hw_data3,
            },
        }
    }
}

impl From<&HsaEvent> for Event {
    fn from(c: &HsaEvent) -> Event {
        let d = c.EventData;
        let w = d.EventData;
        Event {
            event_id: c.EventId,
            event_type: EventType(d.EventType),
            hw_data1: d.HWData1,
            hw_data2: d.HWData2,
            hw_data3: d.HWData3,
            sync_var: u64::from(w[0]) | u64::from(w[1]) << 32,
            sync_var_size: u64::from(w[2]) | u64::from(w[3]) << 32,
            memory_fault: None,
        }
    }
}

impl HsaEvent {
    /// Writes a memory fault into the event's data (the MemoryAccessFault union member).
    pub fn set_memory_fault(&mut self, f: &MemoryAccessFault) {
        let va = f.virtual_address;
        let mut d = self.EventData;
        d.EventData = union_words([f.node_id, va as u32, (va >> 32) as u32, f.failure.0, f.flags.0]);
        self.EventData = d;
    }
}

/// `HsaSharedMemoryHandle` (`HSAuint32[8]`).
pub type HsaSharedMemoryHandle = [u32; 8];

c_struct!(HsaPointerInfo = 68 {
    Type: u32,
    Node: u32,
    MemFlags: MemFlags,
    CPUAddress: u64,
    GPUAddress: u64,
    SizeInBytes: u64,
    NRegisteredNodes: u32,
    NMappedNodes: u32,
    RegisteredNodes: u64,
    MappedNodes: u64,
    UserData: u64,
});

impl HsaPointerInfo {
    /// What libhsakmt leaves for an unknown pointer: zeros, HSA_POINTER_UNKNOWN.
    pub const UNKNOWN: HsaPointerInfo = HsaPointerInfo {
        Type: 0,
        Node: 0,
        MemFlags: MemFlags(0),
        CPUAddress: 0,
        GPUAddress: 0,
        SizeInBytes: 0,
        NRegisteredNodes: 0,
        NMappedNodes: 0,
        RegisteredNodes: 0,
        MappedNodes: 0,
        UserData: 0,
    };
}

impl From<&PointerInfo> for HsaPointerInfo {
    fn from(p: &PointerInfo) -> HsaPointerInfo {
        // The node arrays live in the thunk's object until its mapping or registration changes.
        let array = |a: &std::sync::Arc<[u32]>| if a.is_empty() { 0 } else { a.as_ptr() as u64 };
        HsaPointerInfo {
            Type: p.pointer_type.0,
            Node: p.node,
            MemFlags: p.mem_flags,
            CPUAddress: p.cpu_address,
            GPUAddress: p.gpu_address,
            SizeInBytes: p.size_in_bytes,
            NRegisteredNodes: p.registered_nodes.len() as u32,
            NMappedNodes: p.mapped_nodes.len() as u32,
            RegisteredNodes: array(&p.registered_nodes),
            MappedNodes: array(&p.mapped_nodes),
            UserData: p.user_data,
        }
    }
}

c_struct!(HsaGpuTileConfig = 64 {
    TileConfig: u64,
    MacroTileConfig: u64,
    NumTileConfigs: u32,
    NumMacroTileConfigs: u32,
    GbAddrConfig: u32,
    NumBanks: u32,
    NumRanks: u32,
    Reserved: [u32; 7],
});

c_struct!(HsaGraphicsResourceInfo = 32 {
    MemoryAddress: u64,
    SizeInBytes: u64,
    Metadata: u64,
    MetadataSizeInBytes: u32,
    Reserved: u32,
});

c_struct!(HSA_SVM_ATTRIBUTE = 8 { r#type: u32, value: u32 });

impl From<&HSA_SVM_ATTRIBUTE> for SvmAttribute {
    fn from(a: &HSA_SVM_ATTRIBUTE) -> SvmAttribute {
        SvmAttribute { attr_type: SvmAttrType(a.r#type), value: a.value }
    }
}

c_struct!(
    /// `HsaMemoryRange` (the ranges of hsaKmtProcessVMRead/Write).
    HsaMemoryRange = 16 { MemoryAddress: u64, SizeInBytes: u64 }
);

c_struct!(
    /// `HsaDbgWaveMessage`: the memory address, then the 8-byte `HsaDbgWaveMessageAMD`.
    HsaDbgWaveMessage = 16 { MemoryVA: u64, DbgWaveMsg: u64 }
);

c_struct!(
    /// `HsaCounter`.
    HsaCounter = 32 {
        Type: u32,
        CounterId: u64,
        CounterSizeInBits: u32,
        CounterMask: u64,
        Flags: u32,
        BlockIndex: u32,
    }
);

c_struct!(
    /// `HsaCounterBlockProperties`: its `Counters` run on past the one declared.
    HsaCounterBlockProperties = 56 {
        BlockId: [u8; 16],
        NumCounters: u32,
        NumConcurrent: u32,
        Counters: [HsaCounter; 1],
    }
);

c_struct!(
    /// `HsaCounterProperties`: its `Blocks` run on past the one declared.
    HsaCounterProperties = 64 { NumBlocks: u32, NumConcurrent: u32, Blocks: [HsaCounterBlockProperties; 1] }
);

c_struct!(
    /// `HsaPmcTraceRoot`.
    HsaPmcTraceRoot = 20 { TraceBufferMinSizeBytes: u64, NumberOfPasses: u32, TraceId: u64 }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_truncated_and_terminated() {
        let long = "x".repeat(100);
        assert_eq!(utf16_name(&long)[62..], [u16::from(b'x'), 0]);
        assert_eq!(&ascii_name("gfx")[..4], b"gfx\0");
    }

    #[test]
    fn events_round_trip_and_take_faults() {
        let e = Event {
            event_id: 5,
            event_type: EventType::MEMORY,
            hw_data1: 5,
            hw_data2: 0x1000,
            hw_data3: 5,
            sync_var: 0x1234_5678_9abc,
            sync_var_size: 8,
            memory_fault: None,
        };
        let mut c = HsaEvent::from(&e);
        assert_eq!(Event::from(&c), e);
        let f = MemoryAccessFault {
            node_id: 1,
            virtual_address: 0x0dea_dbee_f000,
            failure: AccessFailure(0).with_not_present(1),
            flags: MemoryFaultFlags::FATAL_PROCESS,
        };
        c.set_memory_fault(&f);
        let words = { c.EventData }.EventData;
        assert_eq!(words, [1, 0xdbee_f000, 0xdea, 1, 1]);
    }
}
