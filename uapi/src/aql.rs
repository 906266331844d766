//! AQL packets (`hsa.h`, `hsa_ext_amd.h`): 64-byte slots in a queue's ring.

use crate::kfd::abi_struct;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Every AQL packet is 64 bytes.
pub const AQL_PACKET_SIZE: usize = 64;

// hsa_packet_type_t
pub const HSA_PACKET_TYPE_VENDOR_SPECIFIC: u8 = 0;
pub const HSA_PACKET_TYPE_INVALID: u8 = 1;
pub const HSA_PACKET_TYPE_KERNEL_DISPATCH: u8 = 2;
pub const HSA_PACKET_TYPE_BARRIER_AND: u8 = 3;
pub const HSA_PACKET_TYPE_AGENT_DISPATCH: u8 = 4;
pub const HSA_PACKET_TYPE_BARRIER_OR: u8 = 5;

// hsa_packet_header_t: bit offsets and widths.
pub const HSA_PACKET_HEADER_TYPE: u16 = 0;
pub const HSA_PACKET_HEADER_BARRIER: u16 = 8;
pub const HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE: u16 = 9;
pub const HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE: u16 = 11;
pub const HSA_PACKET_HEADER_WIDTH_TYPE: u16 = 8;
pub const HSA_PACKET_HEADER_WIDTH_BARRIER: u16 = 1;
pub const HSA_PACKET_HEADER_WIDTH_SCACQUIRE_FENCE_SCOPE: u16 = 2;
pub const HSA_PACKET_HEADER_WIDTH_SCRELEASE_FENCE_SCOPE: u16 = 2;

// hsa_fence_scope_t
pub const HSA_FENCE_SCOPE_NONE: u16 = 0;
pub const HSA_FENCE_SCOPE_AGENT: u16 = 1;
pub const HSA_FENCE_SCOPE_SYSTEM: u16 = 2;

// hsa_kernel_dispatch_packet_setup_t
pub const HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS: u16 = 0;
pub const HSA_KERNEL_DISPATCH_PACKET_SETUP_WIDTH_DIMENSIONS: u16 = 2;

// hsa_signal_condition_t
pub const HSA_SIGNAL_CONDITION_EQ: u32 = 0;
pub const HSA_SIGNAL_CONDITION_NE: u32 = 1;
pub const HSA_SIGNAL_CONDITION_LT: u32 = 2;
pub const HSA_SIGNAL_CONDITION_GTE: u32 = 3;

// hsa_amd_packet_type_t (AmdFormat of a vendor-specific packet)
pub const HSA_AMD_PACKET_TYPE_BARRIER_VALUE: u8 = 2;
/// ROCr's own vendor packet format (not in hsa_ext_amd.h): an INDIRECT_BUFFER to a PM4 stream.
/// ROCR-Runtime rocm-5.2.3 src/core/runtime/amd_aql_queue.cpp, `AqlQueue::ExecutePM4`:
/// `constexpr uint32_t AMD_AQL_FORMAT_PM4_IB = 0x1`, stored in `ven_hdr`.
pub const AMD_AQL_FORMAT_PM4_IB: u8 = 1;
/// `dw_cnt_remain` of a PM4_IB packet: the dwords after it (8 reserved, 2 of the completion
/// signal), the value ROCr always writes.
pub const AMD_AQL_PM4_IB_DW_CNT_REMAIN: u32 = 10;

abi_struct!(
    /// `hsa_kernel_dispatch_packet_t`.
    KernelDispatchPacket = 64 {
        header: u16,
        setup: u16,
        workgroup_size_x: u16,
        workgroup_size_y: u16,
        workgroup_size_z: u16,
        reserved0: u16,
        grid_size_x: u32,
        grid_size_y: u32,
        grid_size_z: u32,
        private_segment_size: u32,
        group_segment_size: u32,
        kernel_object: u64,
        kernarg_address: u64,
        reserved2: u64,
        completion_signal: u64,
    }
);
abi_struct!(
    /// `hsa_agent_dispatch_packet_t`.
    AgentDispatchPacket = 64 {
        header: u16,
        type_: u16,
        reserved0: u32,
        return_address: u64,
        arg: [u64; 4],
        reserved2: u64,
        completion_signal: u64,
    }
);
abi_struct!(
    /// `hsa_barrier_and_packet_t` and `hsa_barrier_or_packet_t` (same layout).
    BarrierPacket = 64 {
        header: u16,
        reserved0: u16,
        reserved1: u32,
        dep_signal: [u64; 5],
        reserved2: u64,
        completion_signal: u64,
    }
);
abi_struct!(
    /// `hsa_amd_vendor_packet_header_t`.
    AmdVendorPacketHeader = 4 { header: u16, amd_format: u8, reserved: u8 }
);
abi_struct!(
    /// ROCr's `amd_aql_pm4_ib` (ROCR-Runtime rocm-5.2.3 src/core/runtime/amd_aql_queue.cpp,
    /// `AqlQueue::ExecutePM4`, gfx9 and later): the vendor header with format
    /// [`AMD_AQL_FORMAT_PM4_IB`], a 4-dword PM4 INDIRECT_BUFFER command, `dw_cnt_remain`
    /// ([`AMD_AQL_PM4_IB_DW_CNT_REMAIN`]), 8 reserved dwords (ROCr zeroes them) and the completion
    /// signal where every AQL packet has it.
    AmdAqlPm4IbPacket = 64 {
        header: AmdVendorPacketHeader,
        ib_jump_cmd: [u32; 4],
        dw_cnt_remain: u32,
        reserved: [u32; 8],
        completion_signal: u64,
    }
);
abi_struct!(
    /// `hsa_amd_barrier_value_packet_t`: waits until `(signal & mask) cond value`.
    AmdBarrierValuePacket = 64 {
        header: AmdVendorPacketHeader,
        reserved0: u32,
        signal: u64,
        value: i64,
        mask: i64,
        cond: u32,
        reserved1: u32,
        reserved2: u64,
        reserved3: u64,
        completion_signal: u64,
    }
);
