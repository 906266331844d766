//! The soft code-object format: what a KERNEL_DISPATCH packet's `kernel_object` must point at
//! for this device to run it.
//!
//! A real GPU's `kernel_object` is the address of an AMD kernel descriptor loaded from a GFX
//! code object. cuse-kfd runs no GFX ISA; instead it runs a fixed set of built-in soft kernels.
//! A dispatch names one by pointing `kernel_object` at a [`SoftKernelDescriptor`] in GPU
//! memory: 64 bytes, 64-byte aligned, starting with [`SOFT_KERNEL_MAGIC`]. Anything else (a real
//! kernel descriptor, garbage) is a queue error with reason INVALID_CODE_OBJECT, never a silent
//! completion.
//!
//! Kernel arguments are read from `kernarg_address` as the `*Args` structs below; every address
//! in them is a GPU virtual address of the dispatching process. Each built-in is defined per
//! work-item over the dispatch grid (flat id = x + y * grid_x + z * grid_x * grid_y).

use crate::kfd::abi_struct;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// "SOFTKERN" read as a little-endian u64.
pub const SOFT_KERNEL_MAGIC: u64 = u64::from_le_bytes(*b"SOFTKERN");
pub const SOFT_KERNEL_VERSION: u32 = 1;

abi_struct!(
    /// The descriptor `kernel_object` points at.
    SoftKernelDescriptor = 64 {
        magic: u64,
        version: u32,
        /// One of the `SOFT_KERNEL_*` ids.
        builtin: u32,
        /// Bytes of kernel arguments the dispatch provides (at least the builtin's args size).
        kernarg_size: u32,
        reserved0: u32,
        reserved1: [u32; 2],
        /// NUL-padded name, informational.
        name: [u8; 32],
    }
);

impl SoftKernelDescriptor {
    /// The descriptor of `builtin` (this format's magic and version), with `kernarg_size`
    /// bytes of arguments and no name.
    pub const fn new(builtin: u32, kernarg_size: u32) -> SoftKernelDescriptor {
        SoftKernelDescriptor {
            magic: SOFT_KERNEL_MAGIC,
            version: SOFT_KERNEL_VERSION,
            builtin,
            kernarg_size,
            reserved0: 0,
            reserved1: [0; 2],
            name: [0; 32],
        }
    }
}

/// Does nothing (the empty dispatch). No arguments.
pub const SOFT_KERNEL_NOP: u32 = 0;
/// Work-item i stores `value` to the u32 at `dst + 4 i`. Args: [`FillArgs`].
pub const SOFT_KERNEL_FILL_U32: u32 = 1;
/// Work-item i copies the byte at `src + i` to `dst + i`. Args: [`CopyArgs`].
pub const SOFT_KERNEL_COPY_BYTES: u32 = 2;
/// Every work-item atomically adds `value` to the u64 at `addr`. Args: [`AtomicAddArgs`].
pub const SOFT_KERNEL_ATOMIC_ADD_U64: u32 = 3;
/// Work-item with flat id f stores f to the u32 at `dst + 4 f` and, if `wg_dst` is non-zero,
/// its flat workgroup id to `wg_dst + 4 f`. Args: [`FlatIdArgs`].
pub const SOFT_KERNEL_WRITE_FLAT_ID: u32 = 4;
/// Completes `nanoseconds` after it starts, without holding the device. Args: [`SleepArgs`].
pub const SOFT_KERNEL_SLEEP: u32 = 5;
/// Stores `value` to the signal whose handle is `signal` (its amd_signal_t value), writing its
/// event mailbox and raising the event as a device store does. Args: [`SignalStoreArgs`].
pub const SOFT_KERNEL_SIGNAL_STORE: u32 = 6;

abi_struct!(FillArgs = 16 { dst: u64, value: u32, reserved: u32 });
abi_struct!(CopyArgs = 16 { dst: u64, src: u64 });
abi_struct!(AtomicAddArgs = 16 { addr: u64, value: u64 });
abi_struct!(FlatIdArgs = 16 { dst: u64, wg_dst: u64 });
abi_struct!(SleepArgs = 8 { nanoseconds: u64 });
abi_struct!(SignalStoreArgs = 16 { signal: u64, value: i64 });
