//! `AMDKFD_IOC_*` request numbers, computed with the kernel's `_IOC` formula from the size of each
//! argument struct (asm-generic/ioctl.h: nr bits 0-7, type bits 8-15, size bits 16-29, dir 30-31).

use crate::kfd::*;
use core::mem::size_of;

pub const IOC_NRBITS: u32 = 8;
pub const IOC_TYPEBITS: u32 = 8;
pub const IOC_SIZEBITS: u32 = 14;
pub const IOC_NRSHIFT: u32 = 0;
pub const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
pub const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
pub const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
pub const IOC_NONE: u32 = 0;
pub const IOC_WRITE: u32 = 1;
pub const IOC_READ: u32 = 2;

/// `AMDKFD_IOCTL_BASE`, the ioctl type byte of /dev/kfd.
pub const AMDKFD_IOCTL_BASE: u32 = b'K' as u32;

/// The kernel's `_IOC(dir, type, nr, size)`.
pub const fn ioc(dir: u32, ty: u32, nr: u32, size: usize) -> u32 {
    (dir << IOC_DIRSHIFT) | (ty << IOC_TYPESHIFT) | (nr << IOC_NRSHIFT) | ((size as u32) << IOC_SIZESHIFT)
}
/// `_IOC_NR(cmd)`.
pub const fn ioc_nr(cmd: u32) -> u32 {
    (cmd >> IOC_NRSHIFT) & ((1 << IOC_NRBITS) - 1)
}
/// `_IOC_TYPE(cmd)`.
pub const fn ioc_type(cmd: u32) -> u32 {
    (cmd >> IOC_TYPESHIFT) & ((1 << IOC_TYPEBITS) - 1)
}
/// `_IOC_SIZE(cmd)`.
pub const fn ioc_size(cmd: u32) -> usize {
    ((cmd >> IOC_SIZESHIFT) & ((1 << IOC_SIZEBITS) - 1)) as usize
}
/// `_IOC_DIR(cmd)`.
pub const fn ioc_dir(cmd: u32) -> u32 {
    cmd >> IOC_DIRSHIFT
}

const fn ior<T>(nr: u32) -> u32 {
    ioc(IOC_READ, AMDKFD_IOCTL_BASE, nr, size_of::<T>())
}
const fn iow<T>(nr: u32) -> u32 {
    ioc(IOC_WRITE, AMDKFD_IOCTL_BASE, nr, size_of::<T>())
}
const fn iowr<T>(nr: u32) -> u32 {
    ioc(IOC_READ | IOC_WRITE, AMDKFD_IOCTL_BASE, nr, size_of::<T>())
}

/// One amdkfd request: its name without the `AMDKFD_IOC_` prefix and its full request number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ioctl {
    pub name: &'static str,
    pub cmd: u32,
}

/// The one declaration of the amdkfd requests, as `kfd_ioctl.h` writes them
/// (`AMDKFD_IOC_X = iowr(nr, ArgsStruct);`). It produces a `pub const AMDKFD_IOC_X` per request
/// and [`ALL`], in number order, whose names are taken from the constants' names (as amdkfd's
/// `AMDKFD_IOCTL_DEF` stringifies each constant); the dispatcher's table is indexed like `ALL`.
macro_rules! kfd_ioctls {
    ($($cmd:ident = $dir:ident($nr:literal, $args:ty);)*) => {
        $(
            #[doc = concat!("`", stringify!($dir), "(", stringify!($nr), ", ", stringify!($args), ")`")]
            pub const $cmd: u32 = $dir::<$args>($nr);
        )*

        /// Every request of KFD 1.18, in number order (nr = index + [`AMDKFD_COMMAND_START`]).
        pub const ALL: [Ioctl; [$($nr),*].len()] = [$(Ioctl { name: short_name(stringify!($cmd)), cmd: $cmd }),*];
    };
}

kfd_ioctls! {
    AMDKFD_IOC_GET_VERSION = ior(0x01, GetVersionArgs);
    AMDKFD_IOC_CREATE_QUEUE = iowr(0x02, CreateQueueArgs);
    AMDKFD_IOC_DESTROY_QUEUE = iowr(0x03, DestroyQueueArgs);
    AMDKFD_IOC_SET_MEMORY_POLICY = iow(0x04, SetMemoryPolicyArgs);
    AMDKFD_IOC_GET_CLOCK_COUNTERS = iowr(0x05, GetClockCountersArgs);
    AMDKFD_IOC_GET_PROCESS_APERTURES = ior(0x06, GetProcessAperturesArgs);
    AMDKFD_IOC_UPDATE_QUEUE = iow(0x07, UpdateQueueArgs);
    AMDKFD_IOC_CREATE_EVENT = iowr(0x08, CreateEventArgs);
    AMDKFD_IOC_DESTROY_EVENT = iow(0x09, DestroyEventArgs);
    AMDKFD_IOC_SET_EVENT = iow(0x0A, SetEventArgs);
    AMDKFD_IOC_RESET_EVENT = iow(0x0B, ResetEventArgs);
    AMDKFD_IOC_WAIT_EVENTS = iowr(0x0C, WaitEventsArgs);
    AMDKFD_IOC_DBG_REGISTER_DEPRECATED = iow(0x0D, DbgRegisterArgs);
    AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED = iow(0x0E, DbgUnregisterArgs);
    AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED = iow(0x0F, DbgAddressWatchArgs);
    AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED = iow(0x10, DbgWaveControlArgs);
    AMDKFD_IOC_SET_SCRATCH_BACKING_VA = iowr(0x11, SetScratchBackingVaArgs);
    AMDKFD_IOC_GET_TILE_CONFIG = iowr(0x12, GetTileConfigArgs);
    AMDKFD_IOC_SET_TRAP_HANDLER = iow(0x13, SetTrapHandlerArgs);
    AMDKFD_IOC_GET_PROCESS_APERTURES_NEW = iowr(0x14, GetProcessAperturesNewArgs);
    AMDKFD_IOC_ACQUIRE_VM = iow(0x15, AcquireVmArgs);
    AMDKFD_IOC_ALLOC_MEMORY_OF_GPU = iowr(0x16, AllocMemoryOfGpuArgs);
    AMDKFD_IOC_FREE_MEMORY_OF_GPU = iow(0x17, FreeMemoryOfGpuArgs);
    AMDKFD_IOC_MAP_MEMORY_TO_GPU = iowr(0x18, MapMemoryToGpuArgs);
    AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU = iowr(0x19, UnmapMemoryFromGpuArgs);
    AMDKFD_IOC_SET_CU_MASK = iow(0x1A, SetCuMaskArgs);
    AMDKFD_IOC_GET_QUEUE_WAVE_STATE = iowr(0x1B, GetQueueWaveStateArgs);
    AMDKFD_IOC_GET_DMABUF_INFO = iowr(0x1C, GetDmabufInfoArgs);
    AMDKFD_IOC_IMPORT_DMABUF = iowr(0x1D, ImportDmabufArgs);
    AMDKFD_IOC_ALLOC_QUEUE_GWS = iowr(0x1E, AllocQueueGwsArgs);
    AMDKFD_IOC_SMI_EVENTS = iowr(0x1F, SmiEventsArgs);
    AMDKFD_IOC_SVM = iowr(0x20, SvmArgs);
    AMDKFD_IOC_SET_XNACK_MODE = iowr(0x21, SetXnackModeArgs);
    AMDKFD_IOC_CRIU_OP = iowr(0x22, CriuArgs);
    AMDKFD_IOC_AVAILABLE_MEMORY = iowr(0x23, GetAvailableMemoryArgs);
    AMDKFD_IOC_EXPORT_DMABUF = iowr(0x24, ExportDmabufArgs);
    AMDKFD_IOC_RUNTIME_ENABLE = iowr(0x25, RuntimeEnableArgs);
    AMDKFD_IOC_DBG_TRAP = iowr(0x26, DbgTrapArgs);
}

/// AMD's out-of-tree requests (the amdkfd of ROCm's DKMS driver numbers them from
/// `AMDKFD_COMMAND_START_2` = 0x80; ROCT-Thunk-Interface rocm-5.2.3 include/linux/kfd_ioctl.h),
/// which Debian's libhsakmt 5.2.3 sends. Linux's kfd_ioctl.h has none of them.
pub const AMDKFD_IOC_IPC_IMPORT_HANDLE: u32 = iowr::<IpcImportHandleArgs>(0x80);
pub const AMDKFD_IOC_IPC_EXPORT_HANDLE: u32 = iowr::<IpcExportHandleArgs>(0x81);
pub const AMDKFD_IOC_CROSS_MEMORY_COPY: u32 = iowr::<CrossMemoryCopyArgs>(0x83);
// The number libhsakmt 5.2.3 sends (its header's AMDKFD_IOWR(0x83, ...), compiled and printed).
const _: () = assert!(AMDKFD_IOC_CROSS_MEMORY_COPY == 0xC030_4B83);

/// The out-of-tree requests this device answers, by name without the prefix.
pub const OUT_OF_TREE: [Ioctl; 3] = [
    Ioctl { name: "IPC_IMPORT_HANDLE", cmd: AMDKFD_IOC_IPC_IMPORT_HANDLE },
    Ioctl { name: "IPC_EXPORT_HANDLE", cmd: AMDKFD_IOC_IPC_EXPORT_HANDLE },
    Ioctl { name: "CROSS_MEMORY_COPY", cmd: AMDKFD_IOC_CROSS_MEMORY_COPY },
];

/// `AMDKFD_COMMAND_START` and `AMDKFD_COMMAND_END` (exclusive) of KFD 1.18.
pub const AMDKFD_COMMAND_START: u32 = 0x01;
pub const AMDKFD_COMMAND_END: u32 = AMDKFD_COMMAND_START + ALL.len() as u32;

/// The index into [`ALL`] of the request `cmd` names, looked up as amdkfd does by its number
/// alone (size and direction are not compared: old and new struct sizes name the same request),
/// except that the type byte must be `'K'`: a stray ioctl meant for another driver (isatty's
/// TCGETS has nr 1) names no request here.
pub const fn index(cmd: u32) -> Option<usize> {
    let nr = ioc_nr(cmd);
    if ioc_type(cmd) != AMDKFD_IOCTL_BASE || nr < AMDKFD_COMMAND_START || nr >= AMDKFD_COMMAND_END {
        return None;
    }
    Some((nr - AMDKFD_COMMAND_START) as usize)
}

/// The request `cmd` names (see [`index`]).
pub const fn lookup(cmd: u32) -> Option<&'static Ioctl> {
    match index(cmd) {
        Some(i) => Some(&ALL[i]),
        None => None,
    }
}

/// `name` without its `AMDKFD_IOC_` prefix, at compile time.
const fn short_name(name: &'static str) -> &'static str {
    const PREFIX: &[u8] = b"AMDKFD_IOC_";
    let (prefix, rest) = name.as_bytes().split_at(PREFIX.len());
    let mut i = 0;
    while i < PREFIX.len() {
        assert!(prefix[i] == PREFIX[i], "an ioctl constant is named AMDKFD_IOC_*");
        i += 1;
    }
    match core::str::from_utf8(rest) {
        Ok(s) => s,
        Err(_) => panic!("ioctl names are ASCII"),
    }
}

/// Every request number `ALL` holds is its index plus [`AMDKFD_COMMAND_START`], and each is a
/// `'K'` request: [`index`] relies on both.
const _: () = {
    let mut i = 0;
    while i < ALL.len() {
        assert!(ioc_nr(ALL[i].cmd) == AMDKFD_COMMAND_START + i as u32, "ALL is in number order without gaps");
        assert!(ioc_type(ALL[i].cmd) == AMDKFD_IOCTL_BASE);
        i += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_ignores_size_and_direction_but_not_type() {
        let old_create = ioc(IOC_READ | IOC_WRITE, AMDKFD_IOCTL_BASE, 2, CREATE_QUEUE_ARGS_SIZE_V1_16);
        assert_eq!(lookup(old_create).map(|d| d.name), Some("CREATE_QUEUE"));
        assert_eq!(lookup(AMDKFD_IOC_DBG_TRAP).map(|d| d.cmd), Some(AMDKFD_IOC_DBG_TRAP));
        assert!(lookup(ioc(IOC_READ, b'X' as u32, 1, 8)).is_none());
        assert!(lookup(ioc(IOC_READ, AMDKFD_IOCTL_BASE, 0, 8)).is_none());
        assert!(lookup(ioc(IOC_READ, AMDKFD_IOCTL_BASE, 0x27, 8)).is_none());
    }

    #[test]
    fn names_drop_the_prefix() {
        assert_eq!(ALL[0].name, "GET_VERSION");
        assert_eq!(ALL[0].cmd, AMDKFD_IOC_GET_VERSION);
        assert_eq!(ALL[ALL.len() - 1].name, "DBG_TRAP");
    }
}
