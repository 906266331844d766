//! The ioctl table: one row per AMDKFD_IOC_* number, as amdkfd's `amdkfd_ioctls[]`.

use super::{event, memory, misc, queue, typed, unsupported, vendor, Ctx, Direction, Handled, UserRange};
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::vendor::{CUSE_KFD_IOC_GET_RUNTIME_INFO, CUSE_KFD_IOC_KICK};
use uapi::FromBytes;

/// One row: the request as the device defines it, its handler, and the caller memory it touches.
pub struct IoctlDesc {
    pub cmd: u32,
    pub name: &'static str,
    pub handler: fn(&Ctx, &mut [u8]) -> Handled,
    /// The pointer-addressed ranges the ioctl reads or writes, from its (kernel-size) arguments.
    pub user_ranges: fn(&[u8]) -> Vec<UserRange>,
}

macro_rules! row {
    ($cmd:ident, $name:literal, $ty:ty, $handler:path) => {
        row!($cmd, $name, $ty, $handler, no_ranges)
    };
    ($cmd:ident, $name:literal, $ty:ty, $handler:path, $ranges:path) => {
        IoctlDesc {
            cmd: $cmd,
            name: $name,
            handler: |ctx, buf| typed::<$ty>(ctx, buf, |c, a| $handler(c, a).into()),
            user_ranges: $ranges,
        }
    };
}

/// Indexed by `nr - AMDKFD_COMMAND_START`.
pub static TABLE: [IoctlDesc; 38] = [
    row!(AMDKFD_IOC_GET_VERSION, "GET_VERSION", GetVersionArgs, misc::get_version),
    row!(AMDKFD_IOC_CREATE_QUEUE, "CREATE_QUEUE", CreateQueueArgs, queue::create),
    row!(AMDKFD_IOC_DESTROY_QUEUE, "DESTROY_QUEUE", DestroyQueueArgs, queue::destroy),
    row!(AMDKFD_IOC_SET_MEMORY_POLICY, "SET_MEMORY_POLICY", SetMemoryPolicyArgs, misc::set_memory_policy),
    row!(AMDKFD_IOC_GET_CLOCK_COUNTERS, "GET_CLOCK_COUNTERS", GetClockCountersArgs, misc::get_clock_counters),
    row!(
        AMDKFD_IOC_GET_PROCESS_APERTURES,
        "GET_PROCESS_APERTURES",
        GetProcessAperturesArgs,
        misc::get_process_apertures
    ),
    row!(AMDKFD_IOC_UPDATE_QUEUE, "UPDATE_QUEUE", UpdateQueueArgs, queue::update),
    row!(AMDKFD_IOC_CREATE_EVENT, "CREATE_EVENT", CreateEventArgs, event::create),
    row!(AMDKFD_IOC_DESTROY_EVENT, "DESTROY_EVENT", DestroyEventArgs, event::destroy),
    row!(AMDKFD_IOC_SET_EVENT, "SET_EVENT", SetEventArgs, event::set),
    row!(AMDKFD_IOC_RESET_EVENT, "RESET_EVENT", ResetEventArgs, event::reset),
    row!(AMDKFD_IOC_WAIT_EVENTS, "WAIT_EVENTS", WaitEventsArgs, event::wait, wait_ranges),
    row!(AMDKFD_IOC_DBG_REGISTER_DEPRECATED, "DBG_REGISTER_DEPRECATED", DbgRegisterArgs, unsupported::deprecated),
    row!(AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED, "DBG_UNREGISTER_DEPRECATED", DbgUnregisterArgs, unsupported::deprecated),
    row!(
        AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED,
        "DBG_ADDRESS_WATCH_DEPRECATED",
        DbgAddressWatchArgs,
        unsupported::deprecated
    ),
    row!(
        AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED,
        "DBG_WAVE_CONTROL_DEPRECATED",
        DbgWaveControlArgs,
        unsupported::deprecated
    ),
    row!(
        AMDKFD_IOC_SET_SCRATCH_BACKING_VA,
        "SET_SCRATCH_BACKING_VA",
        SetScratchBackingVaArgs,
        misc::set_scratch_backing_va
    ),
    row!(AMDKFD_IOC_GET_TILE_CONFIG, "GET_TILE_CONFIG", GetTileConfigArgs, misc::get_tile_config, tile_config_ranges),
    row!(AMDKFD_IOC_SET_TRAP_HANDLER, "SET_TRAP_HANDLER", SetTrapHandlerArgs, misc::set_trap_handler),
    row!(
        AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
        "GET_PROCESS_APERTURES_NEW",
        GetProcessAperturesNewArgs,
        misc::get_process_apertures_new,
        apertures_new_ranges
    ),
    row!(AMDKFD_IOC_ACQUIRE_VM, "ACQUIRE_VM", AcquireVmArgs, memory::acquire_vm),
    row!(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, "ALLOC_MEMORY_OF_GPU", AllocMemoryOfGpuArgs, memory::alloc),
    row!(AMDKFD_IOC_FREE_MEMORY_OF_GPU, "FREE_MEMORY_OF_GPU", FreeMemoryOfGpuArgs, memory::free),
    row!(AMDKFD_IOC_MAP_MEMORY_TO_GPU, "MAP_MEMORY_TO_GPU", MapMemoryToGpuArgs, memory::map, map_ranges),
    row!(
        AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
        "UNMAP_MEMORY_FROM_GPU",
        UnmapMemoryFromGpuArgs,
        memory::unmap,
        unmap_ranges
    ),
    row!(AMDKFD_IOC_SET_CU_MASK, "SET_CU_MASK", SetCuMaskArgs, queue::set_cu_mask, cu_mask_ranges),
    row!(AMDKFD_IOC_GET_QUEUE_WAVE_STATE, "GET_QUEUE_WAVE_STATE", GetQueueWaveStateArgs, queue::get_wave_state),
    row!(AMDKFD_IOC_GET_DMABUF_INFO, "GET_DMABUF_INFO", GetDmabufInfoArgs, unsupported::get_dmabuf_info),
    row!(AMDKFD_IOC_IMPORT_DMABUF, "IMPORT_DMABUF", ImportDmabufArgs, unsupported::import_dmabuf),
    row!(AMDKFD_IOC_ALLOC_QUEUE_GWS, "ALLOC_QUEUE_GWS", AllocQueueGwsArgs, queue::alloc_gws),
    row!(AMDKFD_IOC_SMI_EVENTS, "SMI_EVENTS", SmiEventsArgs, unsupported::smi_events),
    row!(AMDKFD_IOC_SVM, "SVM", SvmArgs, unsupported::svm),
    row!(AMDKFD_IOC_SET_XNACK_MODE, "SET_XNACK_MODE", SetXnackModeArgs, misc::set_xnack_mode),
    row!(AMDKFD_IOC_CRIU_OP, "CRIU_OP", CriuArgs, unsupported::criu),
    row!(AMDKFD_IOC_AVAILABLE_MEMORY, "AVAILABLE_MEMORY", GetAvailableMemoryArgs, memory::available),
    row!(AMDKFD_IOC_EXPORT_DMABUF, "EXPORT_DMABUF", ExportDmabufArgs, unsupported::export_dmabuf),
    row!(AMDKFD_IOC_RUNTIME_ENABLE, "RUNTIME_ENABLE", RuntimeEnableArgs, misc::runtime_enable),
    row!(AMDKFD_IOC_DBG_TRAP, "DBG_TRAP", DbgTrapArgs, unsupported::dbg_trap),
];

/// cuse-kfd's own requests, matched by their exact number.
pub static VENDOR: [IoctlDesc; 2] = [
    row!(CUSE_KFD_IOC_GET_RUNTIME_INFO, "CUSE_KFD_GET_RUNTIME_INFO", uapi::vendor::RuntimeInfo, vendor::runtime_info),
    row!(CUSE_KFD_IOC_KICK, "CUSE_KFD_KICK", (), vendor::kick),
];

/// The row for `cmd` by its number, as amdkfd looks up (size and direction of `cmd` are not
/// compared: old and new struct sizes both reach the handler); then the vendor rows. Unlike
/// amdkfd, the type byte must be 'K': a stray ioctl meant for another driver (isatty's TCGETS
/// has nr 1) is ENOTTY here, not GET_VERSION.
pub fn lookup(cmd: u32) -> Option<&'static IoctlDesc> {
    if ioc_type(cmd) != AMDKFD_IOCTL_BASE {
        return None;
    }
    let nr = ioc_nr(cmd);
    if !(AMDKFD_COMMAND_START..AMDKFD_COMMAND_END).contains(&nr) {
        return VENDOR.iter().find(|d| d.cmd == cmd);
    }
    TABLE.get((nr - AMDKFD_COMMAND_START) as usize)
}

fn no_ranges(_: &[u8]) -> Vec<UserRange> {
    Vec::new()
}

fn range(addr: u64, len: u64, dir: Direction) -> Vec<UserRange> {
    if len == 0 {
        Vec::new()
    } else {
        vec![UserRange { addr, len, dir }]
    }
}

fn wait_ranges(b: &[u8]) -> Vec<UserRange> {
    let Ok((a, _)) = WaitEventsArgs::read_from_prefix(b) else { return Vec::new() };
    if a.num_events > event::MAX_WAIT_EVENTS {
        return Vec::new();
    }
    range(a.events_ptr, u64::from(a.num_events) * std::mem::size_of::<EventData>() as u64, Direction::InOut)
}

fn map_ranges(b: &[u8]) -> Vec<UserRange> {
    let Ok((a, _)) = MapMemoryToGpuArgs::read_from_prefix(b) else { return Vec::new() };
    if a.n_devices > memory::MAX_DEVICES_PER_CALL {
        return Vec::new();
    }
    range(a.device_ids_array_ptr, u64::from(a.n_devices) * 4, Direction::In)
}

fn unmap_ranges(b: &[u8]) -> Vec<UserRange> {
    let Ok((a, _)) = UnmapMemoryFromGpuArgs::read_from_prefix(b) else { return Vec::new() };
    if a.n_devices > memory::MAX_DEVICES_PER_CALL {
        return Vec::new();
    }
    range(a.device_ids_array_ptr, u64::from(a.n_devices) * 4, Direction::In)
}

fn apertures_new_ranges(b: &[u8]) -> Vec<UserRange> {
    let Ok((a, _)) = GetProcessAperturesNewArgs::read_from_prefix(b) else { return Vec::new() };
    let n = a.num_of_nodes.min(misc::MAX_APERTURE_NODES);
    range(
        a.kfd_process_device_apertures_ptr,
        u64::from(n) * std::mem::size_of::<ProcessDeviceApertures>() as u64,
        Direction::Out,
    )
}

fn cu_mask_ranges(b: &[u8]) -> Vec<UserRange> {
    let Ok((a, _)) = SetCuMaskArgs::read_from_prefix(b) else { return Vec::new() };
    if a.num_cu_mask % 32 != 0 || a.num_cu_mask == 0 {
        return Vec::new();
    }
    range(a.cu_mask_ptr, u64::from(queue::cu_mask_words(a.num_cu_mask)) * 4, Direction::In)
}

fn tile_config_ranges(b: &[u8]) -> Vec<UserRange> {
    let Ok((a, _)) = GetTileConfigArgs::read_from_prefix(b) else { return Vec::new() };
    let mut v = range(a.tile_config_ptr, u64::from(a.num_tile_configs.min(misc::MAX_TILE_CONFIGS)) * 4, Direction::Out);
    v.extend(range(
        a.macro_tile_config_ptr,
        u64::from(a.num_macro_tile_configs.min(misc::MAX_TILE_CONFIGS)) * 4,
        Direction::Out,
    ));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_in_number_order_and_match_uapi() {
        for (i, row) in TABLE.iter().enumerate() {
            assert_eq!(ioc_nr(row.cmd), i as u32 + AMDKFD_COMMAND_START, "{}", row.name);
            assert_eq!(ALL[i], (row.name, row.cmd));
        }
    }

    #[test]
    fn lookup_ignores_size_and_direction_but_not_type() {
        let old_create = ioc(IOC_READ | IOC_WRITE, AMDKFD_IOCTL_BASE, 2, CREATE_QUEUE_ARGS_SIZE_V1_16);
        assert_eq!(lookup(old_create).unwrap().name, "CREATE_QUEUE");
        assert!(lookup(ioc(IOC_READ, b'X' as u32, 1, 8)).is_none());
        assert!(lookup(ioc(IOC_READ, AMDKFD_IOCTL_BASE, 0, 8)).is_none());
        assert!(lookup(ioc(IOC_READ, AMDKFD_IOCTL_BASE, 0x27, 8)).is_none());
    }
}
