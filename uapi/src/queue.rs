//! `hsa_queue_t` (`hsa.h`) and `amd_queue_t` (`amd_hsa_queue.h`).

use crate::kfd::abi_struct;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

// hsa_queue_type_t
pub const HSA_QUEUE_TYPE_MULTI: u32 = 0;
pub const HSA_QUEUE_TYPE_SINGLE: u32 = 1;
pub const HSA_QUEUE_TYPE_COOPERATIVE: u32 = 2;
// hsa_queue_feature_t
pub const HSA_QUEUE_FEATURE_KERNEL_DISPATCH: u32 = 1;
pub const HSA_QUEUE_FEATURE_AGENT_DISPATCH: u32 = 2;

abi_struct!(
    /// `hsa_queue_t`: the part of a queue every HSA client sees.
    HsaQueue = 40 {
        type_: u32,
        features: u32,
        base_address: u64,
        doorbell_signal: u64,
        size: u32,
        reserved1: u32,
        id: u64,
    }
);

/// `amd_queue_t` must sit on a 64-byte boundary.
pub const AMD_QUEUE_ALIGN_BYTES: usize = 64;

abi_struct!(
    /// `amd_queue_t`: ROCr's queue descriptor; KFD gets the addresses of `write_dispatch_id` and
    /// `read_dispatch_id` as the queue's write and read pointers.
    AmdQueue = 256 {
        hsa_queue: HsaQueue,
        reserved1: [u32; 4],
        write_dispatch_id: u64,
        group_segment_aperture_base_hi: u32,
        private_segment_aperture_base_hi: u32,
        max_cu_id: u32,
        max_wave_id: u32,
        max_legacy_doorbell_dispatch_id_plus_1: u64,
        legacy_doorbell_lock: u32,
        reserved2: [u32; 9],
        read_dispatch_id: u64,
        read_dispatch_id_field_base_byte_offset: u32,
        compute_tmpring_size: u32,
        scratch_resource_descriptor: [u32; 4],
        scratch_backing_memory_location: u64,
        scratch_backing_memory_byte_size: u64,
        scratch_workitem_byte_size: u32,
        queue_properties: u32,
        reserved3: [u32; 2],
        queue_inactive_signal: u64,
        reserved4: [u32; 14],
    }
);

/// Byte offset of `write_dispatch_id` in `amd_queue_t`.
pub const AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET: usize = 56;
/// Byte offset of `read_dispatch_id` in `amd_queue_t`.
pub const AMD_QUEUE_READ_DISPATCH_ID_OFFSET: usize = 128;
/// Byte offset of `queue_inactive_signal` in `amd_queue_t`.
pub const AMD_QUEUE_INACTIVE_SIGNAL_OFFSET: usize = 192;

// amd_queue_properties_t bits
pub const AMD_QUEUE_PROPERTIES_ENABLE_TRAP_HANDLER: u32 = 1 << 0;
pub const AMD_QUEUE_PROPERTIES_IS_PTR64: u32 = 1 << 1;
pub const AMD_QUEUE_PROPERTIES_ENABLE_TRAP_HANDLER_DEBUG_SGPRS: u32 = 1 << 2;
pub const AMD_QUEUE_PROPERTIES_ENABLE_PROFILING: u32 = 1 << 3;
/// The queue's scratch serves one dispatch and is then given back (engine/gfx.rs).
pub const AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE: u32 = 1 << 4;
