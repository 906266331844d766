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

pub const AMDKFD_IOC_GET_VERSION: u32 = ior::<GetVersionArgs>(0x01);
pub const AMDKFD_IOC_CREATE_QUEUE: u32 = iowr::<CreateQueueArgs>(0x02);
pub const AMDKFD_IOC_DESTROY_QUEUE: u32 = iowr::<DestroyQueueArgs>(0x03);
pub const AMDKFD_IOC_SET_MEMORY_POLICY: u32 = iow::<SetMemoryPolicyArgs>(0x04);
pub const AMDKFD_IOC_GET_CLOCK_COUNTERS: u32 = iowr::<GetClockCountersArgs>(0x05);
pub const AMDKFD_IOC_GET_PROCESS_APERTURES: u32 = ior::<GetProcessAperturesArgs>(0x06);
pub const AMDKFD_IOC_UPDATE_QUEUE: u32 = iow::<UpdateQueueArgs>(0x07);
pub const AMDKFD_IOC_CREATE_EVENT: u32 = iowr::<CreateEventArgs>(0x08);
pub const AMDKFD_IOC_DESTROY_EVENT: u32 = iow::<DestroyEventArgs>(0x09);
pub const AMDKFD_IOC_SET_EVENT: u32 = iow::<SetEventArgs>(0x0A);
pub const AMDKFD_IOC_RESET_EVENT: u32 = iow::<ResetEventArgs>(0x0B);
pub const AMDKFD_IOC_WAIT_EVENTS: u32 = iowr::<WaitEventsArgs>(0x0C);
pub const AMDKFD_IOC_DBG_REGISTER_DEPRECATED: u32 = iow::<DbgRegisterArgs>(0x0D);
pub const AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED: u32 = iow::<DbgUnregisterArgs>(0x0E);
pub const AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED: u32 = iow::<DbgAddressWatchArgs>(0x0F);
pub const AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED: u32 = iow::<DbgWaveControlArgs>(0x10);
pub const AMDKFD_IOC_SET_SCRATCH_BACKING_VA: u32 = iowr::<SetScratchBackingVaArgs>(0x11);
pub const AMDKFD_IOC_GET_TILE_CONFIG: u32 = iowr::<GetTileConfigArgs>(0x12);
pub const AMDKFD_IOC_SET_TRAP_HANDLER: u32 = iow::<SetTrapHandlerArgs>(0x13);
pub const AMDKFD_IOC_GET_PROCESS_APERTURES_NEW: u32 = iowr::<GetProcessAperturesNewArgs>(0x14);
pub const AMDKFD_IOC_ACQUIRE_VM: u32 = iow::<AcquireVmArgs>(0x15);
pub const AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: u32 = iowr::<AllocMemoryOfGpuArgs>(0x16);
pub const AMDKFD_IOC_FREE_MEMORY_OF_GPU: u32 = iow::<FreeMemoryOfGpuArgs>(0x17);
pub const AMDKFD_IOC_MAP_MEMORY_TO_GPU: u32 = iowr::<MapMemoryToGpuArgs>(0x18);
pub const AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: u32 = iowr::<UnmapMemoryFromGpuArgs>(0x19);
pub const AMDKFD_IOC_SET_CU_MASK: u32 = iow::<SetCuMaskArgs>(0x1A);
pub const AMDKFD_IOC_GET_QUEUE_WAVE_STATE: u32 = iowr::<GetQueueWaveStateArgs>(0x1B);
pub const AMDKFD_IOC_GET_DMABUF_INFO: u32 = iowr::<GetDmabufInfoArgs>(0x1C);
pub const AMDKFD_IOC_IMPORT_DMABUF: u32 = iowr::<ImportDmabufArgs>(0x1D);
pub const AMDKFD_IOC_ALLOC_QUEUE_GWS: u32 = iowr::<AllocQueueGwsArgs>(0x1E);
pub const AMDKFD_IOC_SMI_EVENTS: u32 = iowr::<SmiEventsArgs>(0x1F);
pub const AMDKFD_IOC_SVM: u32 = iowr::<SvmArgs>(0x20);
pub const AMDKFD_IOC_SET_XNACK_MODE: u32 = iowr::<SetXnackModeArgs>(0x21);
pub const AMDKFD_IOC_CRIU_OP: u32 = iowr::<CriuArgs>(0x22);
pub const AMDKFD_IOC_AVAILABLE_MEMORY: u32 = iowr::<GetAvailableMemoryArgs>(0x23);
pub const AMDKFD_IOC_EXPORT_DMABUF: u32 = iowr::<ExportDmabufArgs>(0x24);
pub const AMDKFD_IOC_RUNTIME_ENABLE: u32 = iowr::<RuntimeEnableArgs>(0x25);
pub const AMDKFD_IOC_DBG_TRAP: u32 = iowr::<DbgTrapArgs>(0x26);

/// `AMDKFD_COMMAND_START` and `AMDKFD_COMMAND_END` (exclusive) of KFD 1.18.
pub const AMDKFD_COMMAND_START: u32 = 0x01;
pub const AMDKFD_COMMAND_END: u32 = 0x27;

/// Every request of KFD 1.18 with its name, in number order (nr = index + 1).
pub const ALL: [(&str, u32); 38] = [
    ("GET_VERSION", AMDKFD_IOC_GET_VERSION),
    ("CREATE_QUEUE", AMDKFD_IOC_CREATE_QUEUE),
    ("DESTROY_QUEUE", AMDKFD_IOC_DESTROY_QUEUE),
    ("SET_MEMORY_POLICY", AMDKFD_IOC_SET_MEMORY_POLICY),
    ("GET_CLOCK_COUNTERS", AMDKFD_IOC_GET_CLOCK_COUNTERS),
    ("GET_PROCESS_APERTURES", AMDKFD_IOC_GET_PROCESS_APERTURES),
    ("UPDATE_QUEUE", AMDKFD_IOC_UPDATE_QUEUE),
    ("CREATE_EVENT", AMDKFD_IOC_CREATE_EVENT),
    ("DESTROY_EVENT", AMDKFD_IOC_DESTROY_EVENT),
    ("SET_EVENT", AMDKFD_IOC_SET_EVENT),
    ("RESET_EVENT", AMDKFD_IOC_RESET_EVENT),
    ("WAIT_EVENTS", AMDKFD_IOC_WAIT_EVENTS),
    ("DBG_REGISTER_DEPRECATED", AMDKFD_IOC_DBG_REGISTER_DEPRECATED),
    ("DBG_UNREGISTER_DEPRECATED", AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED),
    ("DBG_ADDRESS_WATCH_DEPRECATED", AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED),
    ("DBG_WAVE_CONTROL_DEPRECATED", AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED),
    ("SET_SCRATCH_BACKING_VA", AMDKFD_IOC_SET_SCRATCH_BACKING_VA),
    ("GET_TILE_CONFIG", AMDKFD_IOC_GET_TILE_CONFIG),
    ("SET_TRAP_HANDLER", AMDKFD_IOC_SET_TRAP_HANDLER),
    ("GET_PROCESS_APERTURES_NEW", AMDKFD_IOC_GET_PROCESS_APERTURES_NEW),
    ("ACQUIRE_VM", AMDKFD_IOC_ACQUIRE_VM),
    ("ALLOC_MEMORY_OF_GPU", AMDKFD_IOC_ALLOC_MEMORY_OF_GPU),
    ("FREE_MEMORY_OF_GPU", AMDKFD_IOC_FREE_MEMORY_OF_GPU),
    ("MAP_MEMORY_TO_GPU", AMDKFD_IOC_MAP_MEMORY_TO_GPU),
    ("UNMAP_MEMORY_FROM_GPU", AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU),
    ("SET_CU_MASK", AMDKFD_IOC_SET_CU_MASK),
    ("GET_QUEUE_WAVE_STATE", AMDKFD_IOC_GET_QUEUE_WAVE_STATE),
    ("GET_DMABUF_INFO", AMDKFD_IOC_GET_DMABUF_INFO),
    ("IMPORT_DMABUF", AMDKFD_IOC_IMPORT_DMABUF),
    ("ALLOC_QUEUE_GWS", AMDKFD_IOC_ALLOC_QUEUE_GWS),
    ("SMI_EVENTS", AMDKFD_IOC_SMI_EVENTS),
    ("SVM", AMDKFD_IOC_SVM),
    ("SET_XNACK_MODE", AMDKFD_IOC_SET_XNACK_MODE),
    ("CRIU_OP", AMDKFD_IOC_CRIU_OP),
    ("AVAILABLE_MEMORY", AMDKFD_IOC_AVAILABLE_MEMORY),
    ("EXPORT_DMABUF", AMDKFD_IOC_EXPORT_DMABUF),
    ("RUNTIME_ENABLE", AMDKFD_IOC_RUNTIME_ENABLE),
    ("DBG_TRAP", AMDKFD_IOC_DBG_TRAP),
];
