//! `amd_signal_t` (`amd_hsa_signal.h`): the memory behind an `hsa_signal_t` handle.

use crate::kfd::abi_struct;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

// amd_signal_kind_t
pub const AMD_SIGNAL_KIND_INVALID: i64 = 0;
pub const AMD_SIGNAL_KIND_USER: i64 = 1;
pub const AMD_SIGNAL_KIND_DOORBELL: i64 = -1;
pub const AMD_SIGNAL_KIND_LEGACY_DOORBELL: i64 = -2;

/// `amd_signal_t` must sit on a 64-byte boundary.
pub const AMD_SIGNAL_ALIGN_BYTES: usize = 64;

abi_struct!(
    /// `amd_signal_t`. `value` is the C union of the signal value and the hardware doorbell
    /// pointer; `queue_ptr` the union with `reserved2`.
    AmdSignal = 64 {
        kind: i64,
        value: i64,
        event_mailbox_ptr: u64,
        event_id: u32,
        reserved1: u32,
        start_ts: u64,
        end_ts: u64,
        queue_ptr: u64,
        reserved3: [u32; 2],
    }
);

/// Byte offset of `value` in `amd_signal_t`.
pub const AMD_SIGNAL_VALUE_OFFSET: usize = 8;
/// Byte offset of `event_mailbox_ptr` in `amd_signal_t`.
pub const AMD_SIGNAL_EVENT_MAILBOX_PTR_OFFSET: usize = 16;
/// Byte offset of `event_id` in `amd_signal_t`.
pub const AMD_SIGNAL_EVENT_ID_OFFSET: usize = 24;
/// Byte offset of `start_ts` in `amd_signal_t`.
pub const AMD_SIGNAL_START_TS_OFFSET: usize = 32;
/// Byte offset of `end_ts` in `amd_signal_t`.
pub const AMD_SIGNAL_END_TS_OFFSET: usize = 40;
