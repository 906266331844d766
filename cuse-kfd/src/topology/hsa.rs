//! Topology property bits, as linux/kfd_sysfs.h and the kernel's kfd_topology.h define them.
//!
//! Only what this model writes is here; names match the C macros without the `HSA_` prefix.

// Node `capability` bits.
pub const CAP_WATCH_POINTS_SUPPORTED: u32 = 0x0000_0080;
pub const CAP_WATCH_POINTS_TOTALBITS_SHIFT: u32 = 8;
pub const CAP_WATCH_POINTS_TOTALBITS_MASK: u32 = 0x0000_0f00;
pub const CAP_DOORBELL_TYPE_TOTALBITS_SHIFT: u32 = 12;
pub const CAP_DOORBELL_TYPE_TOTALBITS_MASK: u32 = 0x0000_3000;
/// SOC15 (gfx9 and later) doorbells: 64-bit, written with the full write index.
pub const CAP_DOORBELL_TYPE_2_0: u32 = 0x2;
pub const CAP_MEM_EDCSUPPORTED: u32 = 0x0010_0000;
pub const CAP_RASEVENTNOTIFY: u32 = 0x0020_0000;
pub const CAP_ASIC_REVISION_SHIFT: u32 = 22;
pub const CAP_ASIC_REVISION_MASK: u32 = 0x03c0_0000;
pub const CAP_SRAM_EDCSUPPORTED: u32 = 0x0400_0000;
/// The SVM ioctl works (kfd_topology.c sets it where KFD_IS_SVM_API_SUPPORTED).
pub const CAP_SVMAPI_SUPPORTED: u32 = 0x0800_0000;

/// `capability` with 2^`log2` address watch points, as kfd_topology.c sets it.
pub const fn cap_watch_points(log2: u32) -> u32 {
    CAP_WATCH_POINTS_SUPPORTED | ((log2 << CAP_WATCH_POINTS_TOTALBITS_SHIFT) & CAP_WATCH_POINTS_TOTALBITS_MASK)
}

/// `capability` bits naming the doorbell type.
pub const fn cap_doorbell_type(kind: u32) -> u32 {
    (kind << CAP_DOORBELL_TYPE_TOTALBITS_SHIFT) & CAP_DOORBELL_TYPE_TOTALBITS_MASK
}

/// `capability` bits holding the ASIC revision (amdgpu's rev_id).
pub const fn cap_asic_revision(rev: u32) -> u32 {
    (rev << CAP_ASIC_REVISION_SHIFT) & CAP_ASIC_REVISION_MASK
}

// Node `debug_prop` bits (kfd_sysfs.h) and the per-family values (kfd_topology.h).
pub const DBG_WATCH_ADDR_MASK_HI_BIT_SHIFT: u64 = 4;
pub const DBG_DISPATCH_INFO_ALWAYS_VALID: u64 = 0x400;
pub const DBG_WATCH_ADDR_MASK_LO_BIT_GFX9: u64 = 6;
pub const DBG_WATCH_ADDR_MASK_LO_BIT_GFX10: u64 = 7;
pub const DBG_WATCH_ADDR_MASK_HI_BIT: u64 = 29 << DBG_WATCH_ADDR_MASK_HI_BIT_SHIFT;

// Memory bank `heap_type`.
pub const MEM_HEAP_TYPE_SYSTEM: u32 = 0;
pub const MEM_HEAP_TYPE_FB_PUBLIC: u32 = 1;

// Cache `type` bits. ROCr keeps a GPU cache only with HSACU set and INSTRUCTION clear, and a
// CPU cache only with CPU set and INSTRUCTION clear; it asserts if an agent keeps none.
pub const CACHE_TYPE_DATA: u32 = 0x1;
pub const CACHE_TYPE_INSTRUCTION: u32 = 0x2;
pub const CACHE_TYPE_CPU: u32 = 0x4;
pub const CACHE_TYPE_HSACU: u32 = 0x8;

// IO link `type` and `flags`.
pub const IOLINK_TYPE_PCIEXPRESS: u32 = 2;
pub const IOLINK_FLAGS_ENABLED: u32 = 1 << 0;
pub const IOLINK_FLAGS_NON_COHERENT: u32 = 1 << 1;
