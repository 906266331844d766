//! `linux/kfd_ioctl.h`, interface version 1.18: argument structs, flags and limits.
//!
//! Struct and field names follow the C header (`struct kfd_ioctl_create_queue_args` becomes
//! [`CreateQueueArgs`]); C names are kept for constants.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Declares one `#[repr(C)]` ABI struct with the zerocopy derives and a size assertion.
macro_rules! abi_struct {
    ($(#[$m:meta])* $name:ident = $size:literal { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        const _: () = assert!(core::mem::size_of::<$name>() == $size);
    };
}
pub(crate) use abi_struct;

pub const KFD_IOCTL_MAJOR_VERSION: u32 = 1;
pub const KFD_IOCTL_MINOR_VERSION: u32 = 18;

/// The page size of the ABI (x86-64: 4 KiB): the unit of mmap offsets, doorbell and event pages,
/// and the alignment of buffer objects. (The kernel's `PAGE_SIZE`; no uapi header exports it.)
pub const PAGE_SIZE: u64 = 4096;

abi_struct!(GetVersionArgs = 8 { major_version: u32, minor_version: u32 });

// Queue types, limits.
pub const KFD_IOC_QUEUE_TYPE_COMPUTE: u32 = 0x0;
pub const KFD_IOC_QUEUE_TYPE_SDMA: u32 = 0x1;
pub const KFD_IOC_QUEUE_TYPE_COMPUTE_AQL: u32 = 0x2;
pub const KFD_IOC_QUEUE_TYPE_SDMA_XGMI: u32 = 0x3;
pub const KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID: u32 = 0x4;
pub const KFD_MAX_QUEUE_PERCENTAGE: u32 = 100;
pub const KFD_MAX_QUEUE_PRIORITY: u32 = 15;
pub const KFD_MIN_QUEUE_RING_SIZE: u32 = 1024;

abi_struct!(
    /// `struct kfd_ioctl_create_queue_args`; 88 bytes before 1.17 (no `sdma_engine_id`).
    CreateQueueArgs = 96 {
        ring_base_address: u64,
        write_pointer_address: u64,
        read_pointer_address: u64,
        doorbell_offset: u64,
        ring_size: u32,
        gpu_id: u32,
        queue_type: u32,
        queue_percentage: u32,
        queue_priority: u32,
        queue_id: u32,
        eop_buffer_address: u64,
        eop_buffer_size: u64,
        ctx_save_restore_address: u64,
        ctx_save_restore_size: u32,
        ctl_stack_size: u32,
        sdma_engine_id: u32,
        pad: u32,
    }
);
/// Size of `kfd_ioctl_create_queue_args` before 1.17.
pub const CREATE_QUEUE_ARGS_SIZE_V1_16: usize = 88;

abi_struct!(DestroyQueueArgs = 8 { queue_id: u32, pad: u32 });
abi_struct!(UpdateQueueArgs = 24 {
    ring_base_address: u64,
    queue_id: u32,
    ring_size: u32,
    queue_percentage: u32,
    queue_priority: u32,
});
abi_struct!(SetCuMaskArgs = 16 { queue_id: u32, num_cu_mask: u32, cu_mask_ptr: u64 });
abi_struct!(GetQueueWaveStateArgs = 24 {
    ctl_stack_address: u64,
    ctl_stack_used_size: u32,
    save_area_used_size: u32,
    queue_id: u32,
    pad: u32,
});
abi_struct!(
    /// `struct kfd_ioctl_get_available_memory_args` (AMDKFD_IOC_AVAILABLE_MEMORY).
    GetAvailableMemoryArgs = 16 { available: u64, gpu_id: u32, pad: u32 }
);

pub const KFD_IOC_CACHE_POLICY_COHERENT: u32 = 0;
pub const KFD_IOC_CACHE_POLICY_NONCOHERENT: u32 = 1;

abi_struct!(SetMemoryPolicyArgs = 32 {
    alternate_aperture_base: u64,
    alternate_aperture_size: u64,
    gpu_id: u32,
    default_policy: u32,
    alternate_policy: u32,
    pad: u32,
});
abi_struct!(GetClockCountersArgs = 40 {
    gpu_clock_counter: u64,
    cpu_clock_counter: u64,
    system_clock_counter: u64,
    system_clock_freq: u64,
    gpu_id: u32,
    pad: u32,
});
abi_struct!(
    /// `struct kfd_process_device_apertures`: one GPU's apertures in the process.
    ProcessDeviceApertures = 56 {
        lds_base: u64,
        lds_limit: u64,
        scratch_base: u64,
        scratch_limit: u64,
        gpuvm_base: u64,
        gpuvm_limit: u64,
        gpu_id: u32,
        pad: u32,
    }
);
pub const NUM_OF_SUPPORTED_GPUS: usize = 7;
abi_struct!(GetProcessAperturesArgs = 400 {
    process_apertures: [ProcessDeviceApertures; NUM_OF_SUPPORTED_GPUS],
    num_of_nodes: u32,
    pad: u32,
});
abi_struct!(GetProcessAperturesNewArgs = 16 {
    kfd_process_device_apertures_ptr: u64,
    num_of_nodes: u32,
    pad: u32,
});

abi_struct!(DbgRegisterArgs = 8 { gpu_id: u32, pad: u32 });
abi_struct!(DbgUnregisterArgs = 8 { gpu_id: u32, pad: u32 });
abi_struct!(DbgAddressWatchArgs = 16 { content_ptr: u64, gpu_id: u32, buf_size_in_bytes: u32 });
abi_struct!(DbgWaveControlArgs = 16 { content_ptr: u64, gpu_id: u32, buf_size_in_bytes: u32 });

pub const KFD_INVALID_FD: u32 = 0xffff_ffff;

// Event types (HSA_EVENTTYPE).
pub const KFD_IOC_EVENT_SIGNAL: u32 = 0;
pub const KFD_IOC_EVENT_NODECHANGE: u32 = 1;
pub const KFD_IOC_EVENT_DEVICESTATECHANGE: u32 = 2;
pub const KFD_IOC_EVENT_HW_EXCEPTION: u32 = 3;
pub const KFD_IOC_EVENT_SYSTEM_EVENT: u32 = 4;
pub const KFD_IOC_EVENT_DEBUG_EVENT: u32 = 5;
pub const KFD_IOC_EVENT_PROFILE_EVENT: u32 = 6;
pub const KFD_IOC_EVENT_QUEUE_EVENT: u32 = 7;
pub const KFD_IOC_EVENT_MEMORY: u32 = 8;

pub const KFD_IOC_WAIT_RESULT_COMPLETE: u32 = 0;
pub const KFD_IOC_WAIT_RESULT_TIMEOUT: u32 = 1;
pub const KFD_IOC_WAIT_RESULT_FAIL: u32 = 2;

/// Slots in the event page, and so signal events per process (ids 0..4095).
pub const KFD_SIGNAL_EVENT_LIMIT: u32 = 4096;
/// The value of an unsignaled event-page slot.
pub const UNSIGNALED_EVENT_SLOT: u64 = u64::MAX;

pub const KFD_HW_EXCEPTION_WHOLE_GPU_RESET: u32 = 0;
pub const KFD_HW_EXCEPTION_PER_ENGINE_RESET: u32 = 1;
pub const KFD_HW_EXCEPTION_GPU_HANG: u32 = 0;
pub const KFD_HW_EXCEPTION_ECC: u32 = 1;
pub const KFD_MEM_ERR_NO_RAS: u32 = 0;
pub const KFD_MEM_ERR_SRAM_ECC: u32 = 1;
pub const KFD_MEM_ERR_POISON_CONSUMED: u32 = 2;
pub const KFD_MEM_ERR_GPU_HANG: u32 = 3;

abi_struct!(CreateEventArgs = 32 {
    event_page_offset: u64,
    event_trigger_data: u32,
    event_type: u32,
    auto_reset: u32,
    node_id: u32,
    event_id: u32,
    event_slot_index: u32,
});
abi_struct!(DestroyEventArgs = 8 { event_id: u32, pad: u32 });
abi_struct!(SetEventArgs = 8 { event_id: u32, pad: u32 });
abi_struct!(ResetEventArgs = 8 { event_id: u32, pad: u32 });

abi_struct!(
    /// `struct kfd_memory_exception_failure` (C field names in snake case).
    MemoryExceptionFailure = 16 { not_present: u32, read_only: u32, no_execute: u32, imprecise: u32 }
);
abi_struct!(
    /// `struct kfd_hsa_memory_exception_data`.
    HsaMemoryExceptionData = 32 {
        failure: MemoryExceptionFailure,
        va: u64,
        gpu_id: u32,
        error_type: u32,
    }
);
abi_struct!(
    /// `struct kfd_hsa_hw_exception_data`.
    HsaHwExceptionData = 16 { reset_type: u32, reset_cause: u32, memory_lost: u32, gpu_id: u32 }
);
abi_struct!(
    /// `struct kfd_hsa_signal_event_data` (1.14+): the event age a waiter last saw.
    HsaSignalEventData = 8 { last_event_age: u64 }
);
abi_struct!(
    /// `struct kfd_event_data`: one element of the WAIT_EVENTS `events_ptr` array. `payload` is
    /// the C union of [`HsaMemoryExceptionData`], [`HsaHwExceptionData`] and
    /// [`HsaSignalEventData`].
    EventData = 48 {
        payload: [u64; 4],
        kfd_event_data_ext: u64,
        event_id: u32,
        pad: u32,
    }
);
abi_struct!(WaitEventsArgs = 24 {
    events_ptr: u64,
    num_events: u32,
    wait_for_all: u32,
    timeout: u32,
    wait_result: u32,
});
/// WAIT_EVENTS timeout meaning "forever".
pub const KFD_EVENT_TIMEOUT_INFINITE: u32 = 0xFFFF_FFFF;

abi_struct!(SetScratchBackingVaArgs = 16 { va_addr: u64, gpu_id: u32, pad: u32 });
abi_struct!(GetTileConfigArgs = 40 {
    tile_config_ptr: u64,
    macro_tile_config_ptr: u64,
    num_tile_configs: u32,
    num_macro_tile_configs: u32,
    gpu_id: u32,
    gb_addr_config: u32,
    num_banks: u32,
    num_ranks: u32,
});
abi_struct!(SetTrapHandlerArgs = 24 { tba_addr: u64, tma_addr: u64, gpu_id: u32, pad: u32 });
abi_struct!(AcquireVmArgs = 8 { drm_fd: u32, gpu_id: u32 });

// Allocation flags: memory types.
pub const KFD_IOC_ALLOC_MEM_FLAGS_VRAM: u32 = 1 << 0;
pub const KFD_IOC_ALLOC_MEM_FLAGS_GTT: u32 = 1 << 1;
pub const KFD_IOC_ALLOC_MEM_FLAGS_USERPTR: u32 = 1 << 2;
pub const KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL: u32 = 1 << 3;
pub const KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP: u32 = 1 << 4;
// Allocation flags: attributes.
pub const KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE: u32 = 1 << 31;
pub const KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE: u32 = 1 << 30;
pub const KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC: u32 = 1 << 29;
pub const KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE: u32 = 1 << 28;
pub const KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM: u32 = 1 << 27;
pub const KFD_IOC_ALLOC_MEM_FLAGS_COHERENT: u32 = 1 << 26;
pub const KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED: u32 = 1 << 25;
pub const KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT: u32 = 1 << 24;
pub const KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS: u32 = 1 << 23;

abi_struct!(AllocMemoryOfGpuArgs = 40 {
    va_addr: u64,
    size: u64,
    handle: u64,
    mmap_offset: u64,
    gpu_id: u32,
    flags: u32,
});
abi_struct!(FreeMemoryOfGpuArgs = 8 { handle: u64 });
abi_struct!(MapMemoryToGpuArgs = 24 {
    handle: u64,
    device_ids_array_ptr: u64,
    n_devices: u32,
    n_success: u32,
});
abi_struct!(UnmapMemoryFromGpuArgs = 24 {
    handle: u64,
    device_ids_array_ptr: u64,
    n_devices: u32,
    n_success: u32,
});
abi_struct!(AllocQueueGwsArgs = 16 { queue_id: u32, num_gws: u32, first_gws: u32, pad: u32 });
abi_struct!(GetDmabufInfoArgs = 32 {
    size: u64,
    metadata_ptr: u64,
    metadata_size: u32,
    gpu_id: u32,
    flags: u32,
    dmabuf_fd: u32,
});
abi_struct!(ImportDmabufArgs = 24 { va_addr: u64, handle: u64, gpu_id: u32, dmabuf_fd: u32 });
abi_struct!(SmiEventsArgs = 8 { gpuid: u32, anon_fd: u32 });

pub const KFD_IOCTL_SVM_OP_SET_ATTR: u32 = 0;
pub const KFD_IOCTL_SVM_OP_GET_ATTR: u32 = 1;
pub const KFD_IOCTL_SVM_LOCATION_SYSMEM: u32 = 0;
pub const KFD_IOCTL_SVM_LOCATION_UNDEFINED: u32 = 0xffff_ffff;
pub const KFD_IOCTL_SVM_ATTR_PREFERRED_LOC: u32 = 0;
pub const KFD_IOCTL_SVM_ATTR_PREFETCH_LOC: u32 = 1;
pub const KFD_IOCTL_SVM_ATTR_ACCESS: u32 = 2;
pub const KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE: u32 = 3;
pub const KFD_IOCTL_SVM_ATTR_NO_ACCESS: u32 = 4;
pub const KFD_IOCTL_SVM_ATTR_SET_FLAGS: u32 = 5;
pub const KFD_IOCTL_SVM_ATTR_CLR_FLAGS: u32 = 6;
pub const KFD_IOCTL_SVM_ATTR_GRANULARITY: u32 = 7;
pub const KFD_IOCTL_SVM_FLAG_HOST_ACCESS: u32 = 0x01;
pub const KFD_IOCTL_SVM_FLAG_COHERENT: u32 = 0x02;
pub const KFD_IOCTL_SVM_FLAG_HIVE_LOCAL: u32 = 0x04;
pub const KFD_IOCTL_SVM_FLAG_GPU_RO: u32 = 0x08;
pub const KFD_IOCTL_SVM_FLAG_GPU_EXEC: u32 = 0x10;
pub const KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY: u32 = 0x20;
pub const KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED: u32 = 0x40;
abi_struct!(SvmAttribute = 8 { type_: u32, value: u32 });
abi_struct!(
    /// `struct kfd_ioctl_svm_args`; `nattr` [`SvmAttribute`]s follow it inline.
    SvmArgs = 24 { start_addr: u64, size: u64, op: u32, nattr: u32 }
);
abi_struct!(SetXnackModeArgs = 4 { xnack_enabled: i32 });

pub const KFD_CRIU_OP_PROCESS_INFO: u32 = 0;
pub const KFD_CRIU_OP_CHECKPOINT: u32 = 1;
pub const KFD_CRIU_OP_UNPAUSE: u32 = 2;
pub const KFD_CRIU_OP_RESTORE: u32 = 3;
pub const KFD_CRIU_OP_RESUME: u32 = 4;
abi_struct!(
    /// `struct kfd_ioctl_criu_args`; `tail_pad` is the compiler's trailing padding in C.
    CriuArgs = 56 {
        devices: u64,
        bos: u64,
        priv_data: u64,
        priv_data_size: u64,
        num_devices: u32,
        num_bos: u32,
        num_objects: u32,
        pid: u32,
        op: u32,
        tail_pad: u32,
    }
);
abi_struct!(ExportDmabufArgs = 16 { handle: u64, flags: u32, dmabuf_fd: u32 });

// AMD's out-of-tree IPC requests: not in Linux's kfd_ioctl.h (so `tests/abi.rs` cannot compare
// them), but sent by Debian's libhsakmt 5.2.3 for hsaKmtShareMemory/RegisterSharedHandle.
// Layouts from ROCT-Thunk-Interface rocm-5.2.3 include/linux/kfd_ioctl.h.
abi_struct!(
    /// `struct kfd_ioctl_ipc_export_handle_args`: `handle`, `gpu_id` and `flags` to KFD,
    /// `share_handle` (128 bits) from it.
    IpcExportHandleArgs = 32 { handle: u64, share_handle: [u32; 4], gpu_id: u32, flags: u32 }
);
abi_struct!(
    /// `struct kfd_ioctl_ipc_import_handle_args`: `va_addr`, `share_handle` and `gpu_id` to KFD;
    /// `handle`, `mmap_offset` and `flags` (what the exporter passed as its `flags`) from it.
    IpcImportHandleArgs = 48 {
        handle: u64,
        va_addr: u64,
        mmap_offset: u64,
        share_handle: [u32; 4],
        gpu_id: u32,
        flags: u32,
    }
);

// AMD's out-of-tree CROSS_MEMORY_COPY (hsaKmtProcessVMRead/Write): layouts from
// ROCT-Thunk-Interface rocm-5.2.3 include/linux/kfd_ioctl.h, like the IPC requests above.
abi_struct!(
    /// `struct kfd_memory_range`: a GPU virtual address range of one process.
    MemoryRange = 16 { va_addr: u64, size: u64 }
);
/// Flag bit 0 of CROSS_MEMORY_COPY: set, the local process's ranges are the source and the
/// remote's the destination (a write); clear, the other way round (a read).
pub const KFD_CROSS_MEMORY_RW_BIT: u32 = 1;
abi_struct!(
    /// `struct kfd_ioctl_cross_memory_copy_args`: everything to KFD but `bytes_copied`; the two
    /// arrays are `MemoryRange`s in the caller's memory, their lengths counted in ranges.
    CrossMemoryCopyArgs = 48 {
        pid: u32,
        flags: u32,
        src_mem_range_array: u64,
        src_mem_array_size: u64,
        dst_mem_range_array: u64,
        dst_mem_array_size: u64,
        bytes_copied: u64,
    }
);

pub const KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK: u32 = 1;
pub const KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK: u32 = 2;
pub const KFD_RUNTIME_ENABLE_CAPS_SUPPORTS_CORE_DUMP_MASK: u32 = 0x8000_0000;
abi_struct!(RuntimeEnableArgs = 16 { r_debug: u64, mode_mask: u32, capabilities_mask: u32 });
abi_struct!(
    /// `struct kfd_ioctl_dbg_trap_args`: `pid`, `op`, then a union of per-op argument structs.
    DbgTrapArgs = 32 { pid: u32, op: u32, op_args: [u64; 3] }
);

// HDP flush registers in the MMIO remap page.
pub const KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL: u32 = 0;
pub const KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL: u32 = 4;

// mmap offsets handed out by KFD (kfd_priv.h): type in bits 63:62, gpu_id in 61:46.
pub const KFD_MMAP_TYPE_SHIFT: u32 = 62;
pub const KFD_MMAP_TYPE_MASK: u64 = 0x3 << KFD_MMAP_TYPE_SHIFT;
pub const KFD_MMAP_TYPE_DOORBELL: u64 = 0x3 << KFD_MMAP_TYPE_SHIFT;
pub const KFD_MMAP_TYPE_EVENTS: u64 = 0x2 << KFD_MMAP_TYPE_SHIFT;
pub const KFD_MMAP_TYPE_RESERVED_MEM: u64 = 0x1 << KFD_MMAP_TYPE_SHIFT;
pub const KFD_MMAP_TYPE_MMIO: u64 = 0x0 << KFD_MMAP_TYPE_SHIFT;
pub const KFD_MMAP_GPU_ID_SHIFT: u32 = 46;
pub const KFD_MMAP_GPU_ID_MASK: u64 = ((1 << 16) - 1) << KFD_MMAP_GPU_ID_SHIFT;
pub const KFD_MMAP_OFFSET_VALUE_MASK: u64 = (1 << KFD_MMAP_GPU_ID_SHIFT) - 1;

/// Process queues per device (amdkfd `max_queues` default minus the HIQ).
pub const KFD_MAX_QUEUES_PER_DEVICE: u32 = 127;
/// Queue ids per process (`KFD_MAX_NUM_OF_QUEUES_PER_PROCESS`).
pub const KFD_MAX_NUM_OF_QUEUES_PER_PROCESS: u32 = 1024;
/// Doorbells in one process doorbell slice (`KFD_MAX_NUM_OF_QUEUES_PER_PROCESS`), 8 bytes each on
/// SOC15.
pub const KFD_DOORBELLS_PER_PROCESS: u32 = 1024;
pub const KFD_DOORBELL_SIZE_SOC15: u32 = 8;
