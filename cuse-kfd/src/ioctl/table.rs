//! The ioctl table: one row per AMDKFD_IOC_* number, as amdkfd's `amdkfd_ioctls[]`.

use super::{
    cma, event, ipc, memory, misc, queue, svm, typed, unsupported, vendor, Ctx, Direction, Handled, UserRange,
};
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

/// A row of [`TABLE`]: the request's name and number come from uapi's declaration, the argument
/// type from the handler's signature, checked against the request's size at compile time.
macro_rules! row {
    ($cmd:ident, $handler:path) => {
        row!($cmd, $handler, no_ranges)
    };
    ($cmd:ident, $handler:path, $ranges:path) => {
        row!(@ $cmd, short_name($cmd), $handler, $ranges)
    };
    (@ $cmd:expr, $name:expr, $handler:path, $ranges:path) => {
        IoctlDesc {
            cmd: $cmd,
            name: $name,
            handler: |ctx, buf| typed::<_, { $cmd }>(ctx, buf, |c, a| $handler(c, a).into()),
            user_ranges: $ranges,
        }
    };
}

/// The name uapi declares for amdkfd request `cmd`.
const fn short_name(cmd: u32) -> &'static str {
    match uapi::ioctl::lookup(cmd) {
        Some(d) => d.name,
        None => panic!("not an amdkfd request"),
    }
}

/// One row per request of `uapi::ioctl::ALL`, in the same order: a missing, extra or misplaced
/// row fails to compile (the length below, and the check after the table).
const ROWS: [IoctlDesc; ALL.len()] = [
    row!(AMDKFD_IOC_GET_VERSION, misc::get_version),
    row!(AMDKFD_IOC_CREATE_QUEUE, queue::create),
    row!(AMDKFD_IOC_DESTROY_QUEUE, queue::destroy),
    row!(AMDKFD_IOC_SET_MEMORY_POLICY, misc::set_memory_policy),
    row!(AMDKFD_IOC_GET_CLOCK_COUNTERS, misc::get_clock_counters),
    row!(AMDKFD_IOC_GET_PROCESS_APERTURES, misc::get_process_apertures),
    row!(AMDKFD_IOC_UPDATE_QUEUE, queue::update),
    row!(AMDKFD_IOC_CREATE_EVENT, event::create),
    row!(AMDKFD_IOC_DESTROY_EVENT, event::destroy),
    row!(AMDKFD_IOC_SET_EVENT, event::set),
    row!(AMDKFD_IOC_RESET_EVENT, event::reset),
    row!(AMDKFD_IOC_WAIT_EVENTS, event::wait, wait_ranges),
    row!(AMDKFD_IOC_DBG_REGISTER_DEPRECATED, unsupported::deprecated::<DbgRegisterArgs>),
    row!(AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED, unsupported::deprecated::<DbgUnregisterArgs>),
    row!(AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED, unsupported::deprecated::<DbgAddressWatchArgs>),
    row!(AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED, unsupported::deprecated::<DbgWaveControlArgs>),
    row!(AMDKFD_IOC_SET_SCRATCH_BACKING_VA, misc::set_scratch_backing_va),
    row!(AMDKFD_IOC_GET_TILE_CONFIG, misc::get_tile_config, tile_config_ranges),
    row!(AMDKFD_IOC_SET_TRAP_HANDLER, misc::set_trap_handler),
    row!(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, misc::get_process_apertures_new, apertures_new_ranges),
    row!(AMDKFD_IOC_ACQUIRE_VM, memory::acquire_vm),
    row!(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, memory::alloc),
    row!(AMDKFD_IOC_FREE_MEMORY_OF_GPU, memory::free),
    row!(AMDKFD_IOC_MAP_MEMORY_TO_GPU, memory::map, map_ranges),
    row!(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, memory::unmap, unmap_ranges),
    row!(AMDKFD_IOC_SET_CU_MASK, queue::set_cu_mask, cu_mask_ranges),
    row!(AMDKFD_IOC_GET_QUEUE_WAVE_STATE, queue::get_wave_state),
    row!(AMDKFD_IOC_GET_DMABUF_INFO, unsupported::get_dmabuf_info),
    row!(AMDKFD_IOC_IMPORT_DMABUF, unsupported::import_dmabuf),
    row!(AMDKFD_IOC_ALLOC_QUEUE_GWS, queue::alloc_gws),
    row!(AMDKFD_IOC_SMI_EVENTS, unsupported::smi_events),
    // Variable-size: the attributes follow the arguments (see `svm`), so the handler takes the bytes.
    IoctlDesc {
        cmd: AMDKFD_IOC_SVM,
        name: short_name(AMDKFD_IOC_SVM),
        handler: |c, b| svm::svm(c, b).into(),
        user_ranges: no_ranges,
    },
    row!(AMDKFD_IOC_SET_XNACK_MODE, misc::set_xnack_mode),
    row!(AMDKFD_IOC_CRIU_OP, unsupported::criu),
    row!(AMDKFD_IOC_AVAILABLE_MEMORY, memory::available),
    row!(AMDKFD_IOC_EXPORT_DMABUF, unsupported::export_dmabuf),
    row!(AMDKFD_IOC_RUNTIME_ENABLE, misc::runtime_enable),
    row!(AMDKFD_IOC_DBG_TRAP, unsupported::dbg_trap),
];

const _: () = {
    let mut i = 0;
    while i < ROWS.len() {
        assert!(ROWS[i].cmd == ALL[i].cmd, "TABLE rows follow uapi::ioctl::ALL");
        i += 1;
    }
};

/// Indexed like `uapi::ioctl::ALL` (see `uapi::ioctl::index`).
pub static TABLE: [IoctlDesc; ALL.len()] = ROWS;

/// AMD's out-of-tree requests (ROCm's DKMS amdkfd numbers them from 0x80, beyond
/// AMDKFD_COMMAND_END; Debian's libhsakmt 5.2.3 sends them). Matched by their exact number:
/// cuse-kfd's own requests use the same nr with other sizes and directions.
pub static OUT_OF_TREE: [IoctlDesc; 3] = [
    row!(@ AMDKFD_IOC_IPC_IMPORT_HANDLE, "IPC_IMPORT_HANDLE", ipc::import, no_ranges),
    row!(@ AMDKFD_IOC_IPC_EXPORT_HANDLE, "IPC_EXPORT_HANDLE", ipc::export, no_ranges),
    row!(@ AMDKFD_IOC_CROSS_MEMORY_COPY, "CROSS_MEMORY_COPY", cma::cross_memory_copy, cma_ranges),
];

/// cuse-kfd's own requests, matched by their exact number.
pub static VENDOR: [IoctlDesc; 2] = [
    row!(@ CUSE_KFD_IOC_GET_RUNTIME_INFO, "CUSE_KFD_GET_RUNTIME_INFO", vendor::runtime_info, no_ranges),
    row!(@ CUSE_KFD_IOC_KICK, "CUSE_KFD_KICK", vendor::kick, no_ranges),
];

/// The row for `cmd` by its number, as amdkfd looks up (size and direction of `cmd` are not
/// compared: old and new struct sizes both reach the handler); then the vendor rows. Unlike
/// amdkfd, the type byte must be 'K': a stray ioctl meant for another driver (isatty's TCGETS
/// has nr 1) is ENOTTY here, not GET_VERSION.
pub fn lookup(cmd: u32) -> Option<&'static IoctlDesc> {
    match index(cmd) {
        Some(i) => TABLE.get(i),
        None => OUT_OF_TREE.iter().chain(&VENDOR).find(|d| d.cmd == cmd),
    }
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

fn cma_ranges(b: &[u8]) -> Vec<UserRange> {
    let Ok((a, _)) = CrossMemoryCopyArgs::read_from_prefix(b) else { return Vec::new() };
    cma::arrays(&a).iter().flat_map(|(addr, len)| range(*addr, *len, Direction::In)).collect()
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
            assert_eq!(ALL[i], Ioctl { name: row.name, cmd: row.cmd });
        }
    }

    #[test]
    fn lookup_ignores_size_and_direction_but_not_type() {
        let old_create = ioc(IOC_READ | IOC_WRITE, AMDKFD_IOCTL_BASE, 2, CREATE_QUEUE_ARGS_SIZE_V1_16);
        assert_eq!(lookup(old_create).unwrap().name, "CREATE_QUEUE");
        assert!(lookup(ioc(IOC_READ, b'X' as u32, 1, 8)).is_none());
        assert!(lookup(ioc(IOC_READ, AMDKFD_IOCTL_BASE, 0, 8)).is_none());
        assert!(lookup(ioc(IOC_READ, AMDKFD_IOCTL_BASE, 0x27, 8)).is_none());
        assert_eq!(lookup(CUSE_KFD_IOC_KICK).unwrap().name, "CUSE_KFD_KICK");
        assert_eq!(lookup(AMDKFD_IOC_IPC_EXPORT_HANDLE).unwrap().name, "IPC_EXPORT_HANDLE");
        assert_eq!(lookup(AMDKFD_IOC_IPC_IMPORT_HANDLE).unwrap().name, "IPC_IMPORT_HANDLE");
        assert_eq!(lookup(AMDKFD_IOC_CROSS_MEMORY_COPY).unwrap().name, "CROSS_MEMORY_COPY");
        assert_eq!(lookup(CUSE_KFD_IOC_GET_RUNTIME_INFO).unwrap().name, "CUSE_KFD_GET_RUNTIME_INFO");
    }
}
