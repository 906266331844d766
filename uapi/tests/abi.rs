//! Checks `uapi` against the C headers installed on the system.
//!
//! The test writes a C program from the tables below, compiles it with the system C compiler
//! against `linux/kfd_ioctl.h` and ROCr's `hsa/*.h`, runs it, and compares what it prints
//! (`sizeof`, `_Alignof`, `offsetof` and member sizes of every struct, the value of every
//! `AMDKFD_IOC_*` request and of every constant) with the Rust side. Everything the header and
//! `uapi` both define is compared; what only one side has is listed in the summary. The system
//! `kfd_ioctl.h` may be older than the 1.18 ABI that `uapi` declares: requests it lacks are
//! checked against a table of the 1.18 requests ([`KFD_1_18_IOCTLS`]), fields it lacks are gated
//! on `KFD_IOCTL_MINOR_VERSION`, and structs it lacks are reported, not skipped silently.
//! AMD's out-of-tree requests (`IPC_EXPORT_HANDLE`, `IPC_IMPORT_HANDLE`, `CROSS_MEMORY_COPY`,
//! from ROCm's DKMS driver) are in no Linux header: they show up as absent structs and Rust-only
//! constants, and only their compile-time size asserts (uapi/src/kfd.rs) check them.
//!
//! Adding a struct is one entry in [`layouts`], a constant one name in [`constants`]; a check
//! that parses `uapi/src` fails if a struct, field or constant is missing from the tables.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use uapi::{aql::*, fuse::*, ioctl::*, kfd::*, queue::*, signal::*};

/// Headers the C program includes, with the Debian package that ships each.
const HEADERS: [(&str, &str); 6] = [
    ("linux/kfd_ioctl.h", "linux-libc-dev"),
    ("drm/drm.h", "libdrm-dev"),
    ("hsa/hsa.h", "libhsa-runtime-dev"),
    ("hsa/hsa_ext_amd.h", "libhsa-runtime-dev"),
    ("hsa/amd_hsa_queue.h", "libhsa-runtime-dev"),
    ("hsa/amd_hsa_signal.h", "libhsa-runtime-dev"),
];

/// Debian ships `drm/drm.h` only under this directory (libdrm-dev).
const LIBDRM_INCLUDE: &str = "/usr/include/libdrm";

/// Every request of KFD 1.18 (x86-64) as `linux/kfd_ioctl.h` defines it with `AMDKFD_IOW`,
/// `AMDKFD_IOR` or `AMDKFD_IOWR`: nr, name, direction, argument size (`sizeof` its struct).
const KFD_1_18_IOCTLS: [(u32, &str, &str, usize); 38] = [
    (0x01, "GET_VERSION", "R", 8),
    (0x02, "CREATE_QUEUE", "WR", 96),
    (0x03, "DESTROY_QUEUE", "WR", 8),
    (0x04, "SET_MEMORY_POLICY", "W", 32),
    (0x05, "GET_CLOCK_COUNTERS", "WR", 40),
    (0x06, "GET_PROCESS_APERTURES", "R", 400),
    (0x07, "UPDATE_QUEUE", "W", 24),
    (0x08, "CREATE_EVENT", "WR", 32),
    (0x09, "DESTROY_EVENT", "W", 8),
    (0x0A, "SET_EVENT", "W", 8),
    (0x0B, "RESET_EVENT", "W", 8),
    (0x0C, "WAIT_EVENTS", "WR", 24),
    (0x0D, "DBG_REGISTER_DEPRECATED", "W", 8),
    (0x0E, "DBG_UNREGISTER_DEPRECATED", "W", 8),
    (0x0F, "DBG_ADDRESS_WATCH_DEPRECATED", "W", 16),
    (0x10, "DBG_WAVE_CONTROL_DEPRECATED", "W", 16),
    (0x11, "SET_SCRATCH_BACKING_VA", "WR", 16),
    (0x12, "GET_TILE_CONFIG", "WR", 40),
    (0x13, "SET_TRAP_HANDLER", "W", 24),
    (0x14, "GET_PROCESS_APERTURES_NEW", "WR", 16),
    (0x15, "ACQUIRE_VM", "W", 8),
    (0x16, "ALLOC_MEMORY_OF_GPU", "WR", 40),
    (0x17, "FREE_MEMORY_OF_GPU", "W", 8),
    (0x18, "MAP_MEMORY_TO_GPU", "WR", 24),
    (0x19, "UNMAP_MEMORY_FROM_GPU", "WR", 24),
    (0x1A, "SET_CU_MASK", "W", 16),
    (0x1B, "GET_QUEUE_WAVE_STATE", "WR", 24),
    (0x1C, "GET_DMABUF_INFO", "WR", 32),
    (0x1D, "IMPORT_DMABUF", "WR", 24),
    (0x1E, "ALLOC_QUEUE_GWS", "WR", 16),
    (0x1F, "SMI_EVENTS", "WR", 8),
    (0x20, "SVM", "WR", 24),
    (0x21, "SET_XNACK_MODE", "WR", 4),
    (0x22, "CRIU_OP", "WR", 56),
    (0x23, "AVAILABLE_MEMORY", "WR", 16),
    (0x24, "EXPORT_DMABUF", "WR", 16),
    (0x25, "RUNTIME_ENABLE", "WR", 16),
    (0x26, "DBG_TRAP", "WR", 32),
];

/// Full request numbers, as `AMDKFD_IOC_*` expand on x86-64 (a check of the `_IOC` formula).
const KNOWN_REQUESTS: [(u32, u32); 3] = [
    (AMDKFD_IOC_GET_VERSION, 0x8008_4B01),
    (AMDKFD_IOC_CREATE_QUEUE, 0xC060_4B02),
    (AMDKFD_IOC_WAIT_EVENTS, 0xC018_4B0C),
];

/// One field of a Rust struct and the C member it must line up with.
struct Field {
    rust: &'static str,
    c: &'static str,
    offset: usize,
    size: usize,
    /// The C member is one member of a union the Rust field stands for: it may be smaller.
    union_member: bool,
    /// Present in `kfd_ioctl.h` from this minor version on.
    since: u32,
    /// Present in `kfd_ioctl.h` before this minor version only (renamed after).
    before: u32,
}

impl Field {
    fn new(rust: &'static str, c: Option<&'static str>, offset: usize, size: usize) -> Self {
        let c = c.unwrap_or_else(|| rust.trim_end_matches('_'));
        Field { rust, c, offset, size, union_member: false, since: 0, before: u32::MAX }
    }

    fn set(&mut self, modifier: &str, value: Option<u32>) {
        match (modifier, value) {
            ("union", None) => self.union_member = true,
            ("since", Some(v)) => self.since = v,
            ("before", Some(v)) => self.before = v,
            _ => panic!("bad field modifier {modifier} {value:?} on {}", self.rust),
        }
    }

    /// The `#if` that says whether the header has this member.
    fn gate(&self) -> String {
        format!("KFD_IOCTL_MINOR_VERSION >= {} && KFD_IOCTL_MINOR_VERSION < {}", self.since, self.before)
    }
}

/// A Rust struct, the C type it mirrors and the fields they share.
struct Layout {
    rust: &'static str,
    c: &'static str,
    size: usize,
    align: usize,
    fields: Vec<Field>,
    /// C aligns the type to this (amd_queue_t, amd_signal_t); the Rust type states it as a const.
    c_align: Option<usize>,
    /// The struct grew in this minor version; older headers have the older size.
    grew: Option<(u32, usize)>,
    /// Rust fields with no C member (compiler padding made explicit).
    rust_only: &'static [&'static str],
}

impl Layout {
    fn c_align(mut self, align: usize) -> Self {
        self.c_align = Some(align);
        self
    }
    fn grew(mut self, minor: u32, old_size: usize) -> Self {
        self.grew = Some((minor, old_size));
        self
    }
    fn rust_only(mut self, fields: &'static [&'static str]) -> Self {
        self.rust_only = fields;
        self
    }
    /// The token that is in the preprocessed headers when they declare this type.
    fn c_token(&self) -> &'static str {
        self.c.strip_prefix("struct ").unwrap_or(self.c)
    }
    fn short_name(&self) -> &'static str {
        self.rust.rsplit("::").next().unwrap_or(self.rust)
    }
}

fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    std::mem::size_of::<F>()
}

/// `layout!(RustType => "C type" { field, field = "CName", field = "CName" [union, since = 14] })`.
/// A field without a C name maps to its own name minus a trailing `_` (`type_` -> `type`).
macro_rules! layout {
    ($ty:ty => $c:literal {
        $($f:ident $(= $cf:literal)? $([$($m:ident $(= $mv:literal)?),*])?),* $(,)?
    }) => {
        Layout {
            rust: stringify!($ty),
            c: $c,
            size: std::mem::size_of::<$ty>(),
            align: std::mem::align_of::<$ty>(),
            fields: vec![$({
                let c: &[&'static str] = &[$($cf)?];
                #[allow(unused_mut)]
                let mut field = Field::new(
                    stringify!($f),
                    c.first().copied(),
                    std::mem::offset_of!($ty, $f),
                    field_size(|s: &$ty| &s.$f),
                );
                $($({
                    let v: &[u32] = &[$($mv)?];
                    field.set(stringify!($m), v.first().copied());
                })*)?
                field
            }),*],
            c_align: None,
            grew: None,
            rust_only: &[],
        }
    };
}

/// Every `uapi` struct with its C counterpart.
fn layouts() -> Vec<Layout> {
    vec![
        // linux/kfd_ioctl.h
        layout!(GetVersionArgs => "struct kfd_ioctl_get_version_args" {
            major_version, minor_version,
        }),
        layout!(CreateQueueArgs => "struct kfd_ioctl_create_queue_args" {
            ring_base_address, write_pointer_address, read_pointer_address, doorbell_offset,
            ring_size, gpu_id, queue_type, queue_percentage, queue_priority, queue_id,
            eop_buffer_address, eop_buffer_size, ctx_save_restore_address, ctx_save_restore_size,
            ctl_stack_size, sdma_engine_id [since = 17], pad [since = 17],
        })
        .grew(17, CREATE_QUEUE_ARGS_SIZE_V1_16),
        layout!(DestroyQueueArgs => "struct kfd_ioctl_destroy_queue_args" { queue_id, pad }),
        layout!(UpdateQueueArgs => "struct kfd_ioctl_update_queue_args" {
            ring_base_address, queue_id, ring_size, queue_percentage, queue_priority,
        }),
        layout!(SetCuMaskArgs => "struct kfd_ioctl_set_cu_mask_args" {
            queue_id, num_cu_mask, cu_mask_ptr,
        }),
        layout!(GetQueueWaveStateArgs => "struct kfd_ioctl_get_queue_wave_state_args" {
            ctl_stack_address, ctl_stack_used_size, save_area_used_size, queue_id, pad,
        }),
        layout!(GetAvailableMemoryArgs => "struct kfd_ioctl_get_available_memory_args" {
            available, gpu_id, pad,
        }),
        layout!(SetMemoryPolicyArgs => "struct kfd_ioctl_set_memory_policy_args" {
            alternate_aperture_base, alternate_aperture_size, gpu_id, default_policy,
            alternate_policy,
            pad [before = 18], pad = "misc_process_flag" [since = 18],
        }),
        layout!(GetClockCountersArgs => "struct kfd_ioctl_get_clock_counters_args" {
            gpu_clock_counter, cpu_clock_counter, system_clock_counter, system_clock_freq, gpu_id,
            pad,
        }),
        layout!(ProcessDeviceApertures => "struct kfd_process_device_apertures" {
            lds_base, lds_limit, scratch_base, scratch_limit, gpuvm_base, gpuvm_limit, gpu_id, pad,
        }),
        layout!(GetProcessAperturesArgs => "struct kfd_ioctl_get_process_apertures_args" {
            process_apertures, num_of_nodes, pad,
        }),
        layout!(GetProcessAperturesNewArgs => "struct kfd_ioctl_get_process_apertures_new_args" {
            kfd_process_device_apertures_ptr, num_of_nodes, pad,
        }),
        layout!(DbgRegisterArgs => "struct kfd_ioctl_dbg_register_args" { gpu_id, pad }),
        layout!(DbgUnregisterArgs => "struct kfd_ioctl_dbg_unregister_args" { gpu_id, pad }),
        layout!(DbgAddressWatchArgs => "struct kfd_ioctl_dbg_address_watch_args" {
            content_ptr, gpu_id, buf_size_in_bytes,
        }),
        layout!(DbgWaveControlArgs => "struct kfd_ioctl_dbg_wave_control_args" {
            content_ptr, gpu_id, buf_size_in_bytes,
        }),
        layout!(CreateEventArgs => "struct kfd_ioctl_create_event_args" {
            event_page_offset, event_trigger_data, event_type, auto_reset, node_id, event_id,
            event_slot_index,
        }),
        layout!(DestroyEventArgs => "struct kfd_ioctl_destroy_event_args" { event_id, pad }),
        layout!(SetEventArgs => "struct kfd_ioctl_set_event_args" { event_id, pad }),
        layout!(ResetEventArgs => "struct kfd_ioctl_reset_event_args" { event_id, pad }),
        layout!(MemoryExceptionFailure => "struct kfd_memory_exception_failure" {
            not_present = "NotPresent", read_only = "ReadOnly", no_execute = "NoExecute", imprecise,
        }),
        layout!(HsaMemoryExceptionData => "struct kfd_hsa_memory_exception_data" {
            failure, va, gpu_id, error_type = "ErrorType",
        }),
        layout!(HsaHwExceptionData => "struct kfd_hsa_hw_exception_data" {
            reset_type, reset_cause, memory_lost, gpu_id,
        }),
        layout!(HsaSignalEventData => "struct kfd_hsa_signal_event_data" { last_event_age }),
        layout!(EventData => "struct kfd_event_data" {
            payload = "memory_exception_data" [union],
            payload = "hw_exception_data" [union],
            payload = "signal_event_data" [union, since = 14],
            kfd_event_data_ext, event_id, pad,
        }),
        layout!(WaitEventsArgs => "struct kfd_ioctl_wait_events_args" {
            events_ptr, num_events, wait_for_all, timeout, wait_result,
        }),
        layout!(SetScratchBackingVaArgs => "struct kfd_ioctl_set_scratch_backing_va_args" {
            va_addr, gpu_id, pad,
        }),
        layout!(GetTileConfigArgs => "struct kfd_ioctl_get_tile_config_args" {
            tile_config_ptr, macro_tile_config_ptr, num_tile_configs, num_macro_tile_configs,
            gpu_id,
            gb_addr_config, num_banks, num_ranks,
        }),
        layout!(SetTrapHandlerArgs => "struct kfd_ioctl_set_trap_handler_args" {
            tba_addr, tma_addr, gpu_id, pad,
        }),
        layout!(AcquireVmArgs => "struct kfd_ioctl_acquire_vm_args" { drm_fd, gpu_id }),
        layout!(AllocMemoryOfGpuArgs => "struct kfd_ioctl_alloc_memory_of_gpu_args" {
            va_addr, size, handle, mmap_offset, gpu_id, flags,
        }),
        layout!(FreeMemoryOfGpuArgs => "struct kfd_ioctl_free_memory_of_gpu_args" { handle }),
        layout!(MapMemoryToGpuArgs => "struct kfd_ioctl_map_memory_to_gpu_args" {
            handle, device_ids_array_ptr, n_devices, n_success,
        }),
        layout!(UnmapMemoryFromGpuArgs => "struct kfd_ioctl_unmap_memory_from_gpu_args" {
            handle, device_ids_array_ptr, n_devices, n_success,
        }),
        layout!(AllocQueueGwsArgs => "struct kfd_ioctl_alloc_queue_gws_args" {
            queue_id, num_gws, first_gws, pad,
        }),
        layout!(GetDmabufInfoArgs => "struct kfd_ioctl_get_dmabuf_info_args" {
            size, metadata_ptr, metadata_size, gpu_id, flags, dmabuf_fd,
        }),
        layout!(ImportDmabufArgs => "struct kfd_ioctl_import_dmabuf_args" {
            va_addr, handle, gpu_id, dmabuf_fd,
        }),
        layout!(SmiEventsArgs => "struct kfd_ioctl_smi_events_args" { gpuid, anon_fd }),
        layout!(SvmAttribute => "struct kfd_ioctl_svm_attribute" { type_, value }),
        layout!(SvmArgs => "struct kfd_ioctl_svm_args" { start_addr, size, op, nattr }),
        layout!(SetXnackModeArgs => "struct kfd_ioctl_set_xnack_mode_args" { xnack_enabled }),
        layout!(CriuArgs => "struct kfd_ioctl_criu_args" {
            devices, bos, priv_data, priv_data_size, num_devices, num_bos, num_objects, pid, op,
        })
        .rust_only(&["tail_pad"]),
        layout!(ExportDmabufArgs => "struct kfd_ioctl_export_dmabuf_args" {
            handle, flags, dmabuf_fd,
        }),
        // AMD's out-of-tree IPC and CMA requests (ROCT-Thunk-Interface rocm-5.2.3's kfd_ioctl.h):
        // Linux's header has none, so the run lists them as absent; their sizes are asserted in
        // uapi/src/kfd.rs and their numbers below, in `constants`.
        layout!(IpcExportHandleArgs => "struct kfd_ioctl_ipc_export_handle_args" {
            handle, share_handle, gpu_id, flags,
        }),
        layout!(IpcImportHandleArgs => "struct kfd_ioctl_ipc_import_handle_args" {
            handle, va_addr, mmap_offset, share_handle, gpu_id, flags,
        }),
        layout!(MemoryRange => "struct kfd_memory_range" { va_addr, size }),
        layout!(CrossMemoryCopyArgs => "struct kfd_ioctl_cross_memory_copy_args" {
            pid, flags, src_mem_range_array, src_mem_array_size, dst_mem_range_array,
            dst_mem_array_size, bytes_copied,
        }),
        layout!(RuntimeEnableArgs => "struct kfd_ioctl_runtime_enable_args" {
            r_debug, mode_mask, capabilities_mask,
        }),
        layout!(DbgTrapArgs => "struct kfd_ioctl_dbg_trap_args" {
            pid, op, op_args = "enable" [union],
        }),
        // hsa/hsa.h, hsa/hsa_ext_amd.h
        layout!(KernelDispatchPacket => "hsa_kernel_dispatch_packet_t" {
            header, setup, workgroup_size_x, workgroup_size_y, workgroup_size_z, reserved0,
            grid_size_x, grid_size_y, grid_size_z, private_segment_size, group_segment_size,
            kernel_object, kernarg_address, reserved2, completion_signal,
        }),
        layout!(AgentDispatchPacket => "hsa_agent_dispatch_packet_t" {
            header, type_, reserved0, return_address, arg, reserved2, completion_signal,
        }),
        layout!(BarrierPacket => "hsa_barrier_and_packet_t" {
            header, reserved0, reserved1, dep_signal, reserved2, completion_signal,
        }),
        layout!(BarrierPacket => "hsa_barrier_or_packet_t" {
            header, reserved0, reserved1, dep_signal, reserved2, completion_signal,
        }),
        layout!(AmdVendorPacketHeader => "hsa_amd_vendor_packet_header_t" {
            header, amd_format = "AmdFormat", reserved,
        }),
        // ROCr's own (a struct of amd_aql_queue.cpp, in no installed header: listed so that the
        // run says it was not compared).
        layout!(AmdAqlPm4IbPacket => "struct amd_aql_pm4_ib" {
            header, ib_jump_cmd, dw_cnt_remain, reserved, completion_signal,
        }),
        layout!(AmdBarrierValuePacket => "hsa_amd_barrier_value_packet_t" {
            header, reserved0, signal, value, mask, cond, reserved1, reserved2, reserved3,
            completion_signal,
        }),
        // hsa/hsa.h, hsa/amd_hsa_queue.h
        layout!(HsaQueue => "hsa_queue_t" {
            type_, features, base_address, doorbell_signal, size, reserved1, id,
        }),
        layout!(AmdQueue => "amd_queue_t" {
            hsa_queue, reserved1, write_dispatch_id, group_segment_aperture_base_hi,
            private_segment_aperture_base_hi, max_cu_id, max_wave_id,
            max_legacy_doorbell_dispatch_id_plus_1, legacy_doorbell_lock, reserved2,
            read_dispatch_id,
            read_dispatch_id_field_base_byte_offset, compute_tmpring_size,
            scratch_resource_descriptor,
            scratch_backing_memory_location, scratch_backing_memory_byte_size,
            // ROCr 5.x renamed scratch_workitem_byte_size; same offset and meaning.
            scratch_workitem_byte_size = "scratch_wave64_lane_byte_size",
            queue_properties, reserved3, queue_inactive_signal, reserved4,
        })
        .c_align(AMD_QUEUE_ALIGN_BYTES),
        // hsa/amd_hsa_signal.h
        layout!(AmdSignal => "amd_signal_t" {
            kind, value, value = "hardware_doorbell_ptr" [union], value =
            "legacy_hardware_doorbell_ptr" [union],
            event_mailbox_ptr, event_id, reserved1, start_ts, end_ts, queue_ptr,
            queue_ptr = "reserved2" [union], reserved3,
        })
        .c_align(AMD_SIGNAL_ALIGN_BYTES),
        // linux/fuse.h (the CUSE subset)
        layout!(FuseInHeader => "struct fuse_in_header" {
            len, opcode, unique, nodeid, uid, gid, pid, total_extlen, padding,
        }),
        layout!(FuseOutHeader => "struct fuse_out_header" { len, error, unique }),
        layout!(CuseInitIn => "struct cuse_init_in" { major, minor, unused, flags }),
        layout!(CuseInitOut => "struct cuse_init_out" {
            major, minor, unused, flags, max_read, max_write, dev_major, dev_minor, spare,
        }),
        layout!(FuseOpenIn => "struct fuse_open_in" { flags, open_flags }),
        layout!(FuseOpenOut => "struct fuse_open_out" { fh, open_flags, padding }),
        layout!(FuseReleaseIn => "struct fuse_release_in" { fh, flags, release_flags, lock_owner }),
        layout!(FuseReadIn => "struct fuse_read_in" {
            fh, offset, size, read_flags, lock_owner, flags, padding,
        }),
        layout!(FuseWriteIn => "struct fuse_write_in" {
            fh, offset, size, write_flags, lock_owner, flags, padding,
        }),
        layout!(FuseWriteOut => "struct fuse_write_out" { size, padding }),
        layout!(FuseInterruptIn => "struct fuse_interrupt_in" { unique }),
        layout!(FuseIoctlIn => "struct fuse_ioctl_in" { fh, flags, cmd, arg, in_size, out_size }),
        layout!(FuseIoctlOut => "struct fuse_ioctl_out" { result, flags, in_iovs, out_iovs }),
        layout!(FuseIoctlIovec => "struct fuse_ioctl_iovec" { base, len }),
        layout!(FusePollIn => "struct fuse_poll_in" { fh, kh, flags, events }),
        layout!(FusePollOut => "struct fuse_poll_out" { revents, padding }),
        layout!(FuseNotifyPollWakeupOut => "struct fuse_notify_poll_wakeup_out" { kh }),
    ]
}

/// A Rust constant and the C expression it must equal.
struct Constant {
    rust: &'static str,
    c: &'static str,
    /// The Rust value, sign- or zero-extended from its type.
    value: i128,
    /// Width of the Rust type in bits; C values are compared modulo this width.
    bits: u32,
}

/// `constants![NAME, NAME = "C expression"]`: a bare name is looked up under the same name in C.
macro_rules! constants {
    ($($n:ident $(= $c:literal)?),* $(,)?) => {
        vec![$({
            let c: &[&'static str] = &[$($c)?];
            Constant {
                rust: stringify!($n),
                c: c.first().copied().unwrap_or(stringify!($n)),
                value: $n as i128,
                bits: 8 * std::mem::size_of_val(&$n) as u32,
            }
        }),*]
    };
}

/// Every `pub const` of `uapi` except the `AMDKFD_IOC_*` requests (checked through `ioctl::ALL`).
/// Kernel-private constants (kfd_priv.h) are listed too: they show up as Rust-only.
fn constants() -> Vec<Constant> {
    constants![
        // ioctl.rs
        IOC_NRBITS = "_IOC_NRBITS",
        IOC_TYPEBITS = "_IOC_TYPEBITS",
        IOC_SIZEBITS = "_IOC_SIZEBITS",
        IOC_NRSHIFT = "_IOC_NRSHIFT",
        IOC_TYPESHIFT = "_IOC_TYPESHIFT",
        IOC_SIZESHIFT = "_IOC_SIZESHIFT",
        IOC_DIRSHIFT = "_IOC_DIRSHIFT",
        IOC_NONE = "_IOC_NONE",
        IOC_WRITE = "_IOC_WRITE",
        IOC_READ = "_IOC_READ",
        AMDKFD_IOCTL_BASE,
        // The out-of-tree requests (not in `ioctl::ALL`; Rust-only against Linux's header).
        AMDKFD_IOC_IPC_IMPORT_HANDLE,
        AMDKFD_IOC_IPC_EXPORT_HANDLE,
        AMDKFD_IOC_CROSS_MEMORY_COPY,
        AMDKFD_COMMAND_START,
        AMDKFD_COMMAND_END,
        // kfd.rs
        KFD_IOCTL_MAJOR_VERSION,
        KFD_IOCTL_MINOR_VERSION,
        PAGE_SIZE,
        KFD_IOC_QUEUE_TYPE_COMPUTE,
        KFD_IOC_QUEUE_TYPE_SDMA,
        KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        KFD_IOC_QUEUE_TYPE_SDMA_XGMI,
        KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID,
        KFD_MAX_QUEUE_PERCENTAGE,
        KFD_MAX_QUEUE_PRIORITY,
        KFD_MIN_QUEUE_RING_SIZE,
        CREATE_QUEUE_ARGS_SIZE_V1_16 = "_IOC_SIZE(AMDKFD_IOC_CREATE_QUEUE)",
        KFD_IOC_CACHE_POLICY_COHERENT,
        KFD_IOC_CACHE_POLICY_NONCOHERENT,
        NUM_OF_SUPPORTED_GPUS,
        KFD_INVALID_FD,
        KFD_IOC_EVENT_SIGNAL,
        KFD_IOC_EVENT_NODECHANGE,
        KFD_IOC_EVENT_DEVICESTATECHANGE,
        KFD_IOC_EVENT_HW_EXCEPTION,
        KFD_IOC_EVENT_SYSTEM_EVENT,
        KFD_IOC_EVENT_DEBUG_EVENT,
        KFD_IOC_EVENT_PROFILE_EVENT,
        KFD_IOC_EVENT_QUEUE_EVENT,
        KFD_IOC_EVENT_MEMORY,
        KFD_IOC_WAIT_RESULT_COMPLETE,
        KFD_IOC_WAIT_RESULT_TIMEOUT,
        KFD_IOC_WAIT_RESULT_FAIL,
        KFD_SIGNAL_EVENT_LIMIT,
        UNSIGNALED_EVENT_SLOT,
        KFD_HW_EXCEPTION_WHOLE_GPU_RESET,
        KFD_HW_EXCEPTION_PER_ENGINE_RESET,
        KFD_HW_EXCEPTION_GPU_HANG,
        KFD_HW_EXCEPTION_ECC,
        KFD_MEM_ERR_NO_RAS,
        KFD_MEM_ERR_SRAM_ECC,
        KFD_MEM_ERR_POISON_CONSUMED,
        KFD_MEM_ERR_GPU_HANG,
        KFD_EVENT_TIMEOUT_INFINITE,
        KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
        KFD_IOC_ALLOC_MEM_FLAGS_GTT,
        KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
        KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL,
        KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
        KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE,
        KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
        KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE,
        KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM,
        KFD_IOC_ALLOC_MEM_FLAGS_COHERENT,
        KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED,
        KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT,
        KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS,
        KFD_IOCTL_SVM_OP_SET_ATTR,
        KFD_IOCTL_SVM_OP_GET_ATTR,
        KFD_IOCTL_SVM_LOCATION_SYSMEM,
        KFD_IOCTL_SVM_LOCATION_UNDEFINED,
        KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
        KFD_IOCTL_SVM_ATTR_PREFETCH_LOC,
        KFD_IOCTL_SVM_ATTR_ACCESS,
        KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
        KFD_IOCTL_SVM_ATTR_NO_ACCESS,
        KFD_IOCTL_SVM_ATTR_SET_FLAGS,
        KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
        KFD_IOCTL_SVM_ATTR_GRANULARITY,
        KFD_IOCTL_SVM_FLAG_HOST_ACCESS,
        KFD_IOCTL_SVM_FLAG_COHERENT,
        KFD_IOCTL_SVM_FLAG_HIVE_LOCAL,
        KFD_IOCTL_SVM_FLAG_GPU_RO,
        KFD_IOCTL_SVM_FLAG_GPU_EXEC,
        KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY,
        KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED,
        KFD_CRIU_OP_PROCESS_INFO,
        KFD_CRIU_OP_CHECKPOINT,
        KFD_CRIU_OP_UNPAUSE,
        KFD_CRIU_OP_RESTORE,
        KFD_CRIU_OP_RESUME,
        KFD_CROSS_MEMORY_RW_BIT,
        KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK,
        KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK,
        KFD_RUNTIME_ENABLE_CAPS_SUPPORTS_CORE_DUMP_MASK,
        KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL,
        KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL,
        KFD_MMAP_TYPE_SHIFT,
        KFD_MMAP_TYPE_MASK,
        KFD_MMAP_TYPE_DOORBELL,
        KFD_MMAP_TYPE_EVENTS,
        KFD_MMAP_TYPE_RESERVED_MEM,
        KFD_MMAP_TYPE_MMIO,
        KFD_MMAP_GPU_ID_SHIFT,
        KFD_MMAP_GPU_ID_MASK,
        KFD_MMAP_OFFSET_VALUE_MASK,
        KFD_MAX_QUEUES_PER_DEVICE,
        KFD_MAX_NUM_OF_QUEUES_PER_PROCESS,
        KFD_DOORBELLS_PER_PROCESS,
        KFD_DOORBELL_SIZE_SOC15,
        // aql.rs
        AQL_PACKET_SIZE = "sizeof(hsa_kernel_dispatch_packet_t)",
        HSA_PACKET_TYPE_VENDOR_SPECIFIC,
        HSA_PACKET_TYPE_INVALID,
        HSA_PACKET_TYPE_KERNEL_DISPATCH,
        HSA_PACKET_TYPE_BARRIER_AND,
        HSA_PACKET_TYPE_AGENT_DISPATCH,
        HSA_PACKET_TYPE_BARRIER_OR,
        HSA_PACKET_HEADER_TYPE,
        HSA_PACKET_HEADER_BARRIER,
        HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE,
        HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE,
        HSA_PACKET_HEADER_WIDTH_TYPE,
        HSA_PACKET_HEADER_WIDTH_BARRIER,
        HSA_PACKET_HEADER_WIDTH_SCACQUIRE_FENCE_SCOPE,
        HSA_PACKET_HEADER_WIDTH_SCRELEASE_FENCE_SCOPE,
        HSA_FENCE_SCOPE_NONE,
        HSA_FENCE_SCOPE_AGENT,
        HSA_FENCE_SCOPE_SYSTEM,
        HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS,
        HSA_KERNEL_DISPATCH_PACKET_SETUP_WIDTH_DIMENSIONS,
        HSA_SIGNAL_CONDITION_EQ,
        HSA_SIGNAL_CONDITION_NE,
        HSA_SIGNAL_CONDITION_LT,
        HSA_SIGNAL_CONDITION_GTE,
        HSA_AMD_PACKET_TYPE_BARRIER_VALUE,
        AMD_AQL_FORMAT_PM4_IB,
        AMD_AQL_PM4_IB_DW_CNT_REMAIN,
        // queue.rs
        HSA_QUEUE_TYPE_MULTI,
        HSA_QUEUE_TYPE_SINGLE,
        HSA_QUEUE_TYPE_COOPERATIVE,
        HSA_QUEUE_FEATURE_KERNEL_DISPATCH,
        HSA_QUEUE_FEATURE_AGENT_DISPATCH,
        AMD_QUEUE_ALIGN_BYTES,
        AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET = "offsetof(amd_queue_t, write_dispatch_id)",
        AMD_QUEUE_READ_DISPATCH_ID_OFFSET = "offsetof(amd_queue_t, read_dispatch_id)",
        AMD_QUEUE_INACTIVE_SIGNAL_OFFSET = "offsetof(amd_queue_t, queue_inactive_signal)",
        AMD_QUEUE_PROPERTIES_ENABLE_TRAP_HANDLER,
        AMD_QUEUE_PROPERTIES_IS_PTR64,
        AMD_QUEUE_PROPERTIES_ENABLE_TRAP_HANDLER_DEBUG_SGPRS,
        AMD_QUEUE_PROPERTIES_ENABLE_PROFILING,
        AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE,
        // signal.rs
        AMD_SIGNAL_KIND_INVALID,
        AMD_SIGNAL_KIND_USER,
        AMD_SIGNAL_KIND_DOORBELL,
        AMD_SIGNAL_KIND_LEGACY_DOORBELL,
        AMD_SIGNAL_ALIGN_BYTES,
        AMD_SIGNAL_VALUE_OFFSET = "offsetof(amd_signal_t, value)",
        AMD_SIGNAL_EVENT_MAILBOX_PTR_OFFSET = "offsetof(amd_signal_t, event_mailbox_ptr)",
        AMD_SIGNAL_EVENT_ID_OFFSET = "offsetof(amd_signal_t, event_id)",
        AMD_SIGNAL_START_TS_OFFSET = "offsetof(amd_signal_t, start_ts)",
        AMD_SIGNAL_END_TS_OFFSET = "offsetof(amd_signal_t, end_ts)",
        // fuse.rs
        FUSE_KERNEL_VERSION,
        FUSE_KERNEL_MINOR_VERSION_MIN_CUSE = "16",
        FUSE_OPEN,
        FUSE_READ,
        FUSE_WRITE,
        FUSE_RELEASE,
        FUSE_FLUSH,
        FUSE_INTERRUPT,
        FUSE_IOCTL,
        FUSE_POLL,
        CUSE_INIT,
        FUSE_NOTIFY_POLL,
        CUSE_UNRESTRICTED_IOCTL,
        CUSE_INIT_INFO_MAX,
        FOPEN_DIRECT_IO,
        FOPEN_NONSEEKABLE,
        FUSE_IOCTL_COMPAT,
        FUSE_IOCTL_UNRESTRICTED,
        FUSE_IOCTL_RETRY,
        FUSE_IOCTL_32BIT,
        FUSE_IOCTL_DIR,
        FUSE_IOCTL_COMPAT_X32,
        FUSE_IOCTL_MAX_IOV,
        FUSE_POLL_SCHEDULE_NOTIFY,
    ]
}

/// Constants that track the interface version: with an older header, Rust's may only be larger.
const VERSIONED_CONSTANTS: [&str; 2] = ["KFD_IOCTL_MINOR_VERSION", "AMDKFD_COMMAND_END"];

/// Structs whose ioctl grew: request name, the minor version it grew in, the size before.
const GROWN_IOCTLS: [(&str, u32, usize); 1] = [("CREATE_QUEUE", 17, CREATE_QUEUE_ARGS_SIZE_V1_16)];

// ---------------------------------------------------------------------------------------------
// The C side: include directory, header probes, program text, build and run.

/// What the preprocessed headers declare: macro names and every identifier token.
struct Declared {
    macros: BTreeSet<String>,
    tokens: BTreeSet<String>,
}

impl Declared {
    fn has(&self, name: &str) -> bool {
        self.macros.contains(name) || self.tokens.contains(name)
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_owned())
}

fn work_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("uapi-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the work directory");
    dir
}

/// Makes `<dir>/include/drm` point at libdrm's headers (kfd_ioctl.h includes `<drm/drm.h>`).
fn include_dir(dir: &Path) -> PathBuf {
    let inc = dir.join("include");
    std::fs::create_dir_all(&inc).expect("create the include directory");
    let link = inc.join("drm");
    if Path::new(LIBDRM_INCLUDE).join("drm.h").exists() && std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(LIBDRM_INCLUDE, &link).expect("symlink drm -> libdrm");
    }
    inc
}

fn cc_args(inc: &Path) -> Vec<String> {
    ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-isystem"]
        .iter()
        .map(|s| s.to_string())
        .chain([inc.display().to_string()])
        .collect()
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{cmd:?} failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr)))
    }
}

/// Fails with the Debian packages to install when the compiler or a header is missing.
fn require_headers(dir: &Path, inc: &Path) {
    let mut missing = Vec::new();
    let mut packages = BTreeSet::new();
    for (header, package) in HEADERS {
        let probe = dir.join("probe.c");
        std::fs::write(&probe, format!("#include <{header}>\n")).expect("write probe.c");
        let mut cmd = Command::new(compiler());
        match run(cmd.args(cc_args(inc)).arg("-E").arg(&probe)) {
            Ok(_) => {}
            Err(e) if e.starts_with("cannot run") => {
                panic!("{e}\nNo C compiler: install the Debian package gcc (cargo xtask test does).")
            }
            Err(_) => {
                missing.push(format!("<{header}> (Debian package {package})"));
                packages.insert(package);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "system headers missing: {}.\nInstall them with `apt-get install --no-install-recommends \
         {}`, or run `cargo xtask test` as root, which does.",
        missing.join(", "),
        packages.into_iter().collect::<Vec<_>>().join(" ")
    );
}

const PRELUDE: &str = "#include <stdio.h>
#include <stddef.h>
#include <linux/kfd_ioctl.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/amd_hsa_queue.h>
#include <hsa/amd_hsa_signal.h>
#include <linux/fuse.h>
";

fn declared(dir: &Path, inc: &Path) -> Declared {
    let prelude = dir.join("prelude.c");
    std::fs::write(&prelude, PRELUDE).expect("write prelude.c");
    let cc = || {
        let mut c = Command::new(compiler());
        c.args(cc_args(inc)).arg("-E");
        c
    };
    let defines = run(cc().arg("-dM").arg(&prelude)).unwrap_or_else(|e| panic!("{e}"));
    let macros = defines
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split([' ', '(']).next())
        .map(str::to_owned)
        .collect();
    let text = run(cc().arg(&prelude)).unwrap_or_else(|e| panic!("{e}"));
    let tokens = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|t| is_identifier(t))
        .map(str::to_owned)
        .collect();
    Declared { macros, tokens }
}

/// The header names a request may have: `DBG_*_DEPRECATED` was plain `DBG_*` before 5.x.
fn ioctl_c_names(name: &str) -> Vec<String> {
    let mut names = vec![format!("AMDKFD_IOC_{name}")];
    if let Some(old) = name.strip_suffix("_DEPRECATED") {
        names.push(format!("AMDKFD_IOC_{old}"));
    }
    names
}

/// The C program. Output lines:
/// `V minor` | `S i size align` | `F i j offset size` | `I i value nr dir type size` | `I i absent`
/// | `C i value`.
fn c_program(layouts: &[Layout], consts: &[Constant], decl: &Declared) -> String {
    let mut c = String::from(PRELUDE);
    c.push_str("#define MSIZE(T, f) sizeof(((T *)0)->f)\nint main(void) {\n");
    c.push_str("  printf(\"V %d\\n\", (int)KFD_IOCTL_MINOR_VERSION);\n");
    for (i, l) in layouts.iter().enumerate() {
        if !decl.has(l.c_token()) {
            continue;
        }
        let t = l.c;
        writeln!(c, "  printf(\"S {i} %zu %zu\\n\", sizeof({t}), _Alignof({t}));").unwrap();
        for (j, f) in l.fields.iter().enumerate() {
            let m = f.c;
            writeln!(c, "#if {}", f.gate()).unwrap();
            writeln!(c, "  printf(\"F {i} {j} %zu %zu\\n\", offsetof({t}, {m}), MSIZE({t}, {m}));").unwrap();
            c.push_str("#endif\n");
        }
    }
    for (i, d) in ALL.iter().enumerate() {
        for (k, n) in ioctl_c_names(d.name).iter().enumerate() {
            let kw = if k == 0 { "#if" } else { "#elif" };
            writeln!(c, "{kw} defined({n})").unwrap();
            writeln!(
                c,
                "  printf(\"I {i} %u %u %u %u %u\\n\", (unsigned){n}, (unsigned)_IOC_NR({n}), \
                 (unsigned)_IOC_DIR({n}), (unsigned)_IOC_TYPE({n}), (unsigned)_IOC_SIZE({n}));"
            )
            .unwrap();
        }
        writeln!(c, "#else\n  printf(\"I {i} absent\\n\");\n#endif").unwrap();
    }
    for (i, k) in consts.iter().enumerate() {
        if !is_identifier(k.c) || decl.has(k.c) {
            writeln!(c, "  printf(\"C {i} %lld\\n\", (long long)({}));", k.c).unwrap();
        }
    }
    c.push_str("  return 0;\n}\n");
    c
}

/// What the C program printed.
#[derive(Default)]
struct COutput {
    minor: u32,
    structs: BTreeMap<usize, (usize, usize)>,
    fields: BTreeMap<(usize, usize), (usize, usize)>,
    /// Request index -> (value, nr, dir, type, size), or None when the header lacks it.
    ioctls: BTreeMap<usize, Option<[u32; 5]>>,
    consts: BTreeMap<usize, i128>,
}

fn parse_output(text: &str) -> COutput {
    let mut out = COutput::default();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let n = |k: usize| -> u64 { w[k].parse().unwrap_or_else(|_| panic!("bad C output line {line:?}")) };
        match w[0] {
            "V" => out.minor = n(1) as u32,
            "S" => _ = out.structs.insert(n(1) as usize, (n(2) as usize, n(3) as usize)),
            "F" => _ = out.fields.insert((n(1) as usize, n(2) as usize), (n(3) as usize, n(4) as usize)),
            "I" if w[2] == "absent" => _ = out.ioctls.insert(n(1) as usize, None),
            "I" => {
                let v = [n(2), n(3), n(4), n(5), n(6)].map(|x| x as u32);
                out.ioctls.insert(n(1) as usize, Some(v));
            }
            "C" => _ = out.consts.insert(n(1) as usize, w[2].parse().expect("constant value")),
            _ => panic!("bad C output line {line:?}"),
        }
    }
    out
}

fn run_c_program(dir: &Path, inc: &Path, source: &str) -> String {
    let src = dir.join("abi.c");
    let exe = dir.join("abi");
    std::fs::write(&src, source).expect("write abi.c");
    run(Command::new(compiler()).args(cc_args(inc)).arg("-o").arg(&exe).arg(&src))
        .unwrap_or_else(|e| panic!("the generated C program ({}) does not compile: {e}", src.display()));
    run(&mut Command::new(&exe)).unwrap_or_else(|e| panic!("{e}"))
}

// ---------------------------------------------------------------------------------------------
// The comparison.

#[derive(Default)]
struct Report {
    mismatches: Vec<String>,
    structs: usize,
    fields: usize,
    ioctls_header: usize,
    ioctls_table: usize,
    consts: usize,
    absent_structs: Vec<&'static str>,
    absent_fields: Vec<String>,
    absent_ioctls: Vec<&'static str>,
    rust_only_consts: Vec<&'static str>,
}

impl Report {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.mismatches.push(what());
        }
    }
}

fn compare_structs(r: &mut Report, layouts: &[Layout], out: &COutput) {
    for (i, l) in layouts.iter().enumerate() {
        let Some(&(size, align)) = out.structs.get(&i) else {
            r.absent_structs.push(l.c);
            continue;
        };
        r.structs += 1;
        let (rust, c) = (l.rust, l.c);
        match l.grew {
            Some((minor, old)) if out.minor < minor => r.check(size == old, || {
                format!("{c}: sizeof {size} in header 1.{}, expected the pre-1.{minor} size {old}", out.minor)
            }),
            _ => r.check(size == l.size, || format!("{rust} is {} bytes, {c} is {size}", l.size)),
        }
        let want_align = l.c_align.unwrap_or(l.align);
        r.check(align == want_align, || format!("{c}: _Alignof {align}, expected {want_align} ({rust})"));
        for (j, f) in l.fields.iter().enumerate() {
            let Some(&(offset, fsize)) = out.fields.get(&(i, j)) else {
                r.absent_fields.push(format!("{c}.{}", f.c));
                continue;
            };
            r.fields += 1;
            let (rf, cf) = (f.rust, f.c);
            r.check(offset == f.offset, || format!("{rust}.{rf} is at offset {}, {c}.{cf} at {offset}", f.offset));
            let size_ok = if f.union_member { fsize <= f.size } else { fsize == f.size };
            r.check(size_ok, || format!("{rust}.{rf} is {} bytes, {c}.{cf} is {fsize}", f.size));
        }
    }
}

fn dir_name(dir: u32) -> &'static str {
    match dir {
        IOC_READ => "R",
        IOC_WRITE => "W",
        d if d == IOC_READ | IOC_WRITE => "WR",
        _ => "NONE",
    }
}

fn compare_ioctls(r: &mut Report, out: &COutput, decl: &Declared) {
    r.check(ALL.len() == KFD_1_18_IOCTLS.len(), || {
        format!("ioctl::ALL has {} requests, the KFD 1.18 table {}", ALL.len(), KFD_1_18_IOCTLS.len())
    });
    for (i, (&Ioctl { name, cmd }, &(md_nr, md_name, md_dir, md_size))) in ALL.iter().zip(&KFD_1_18_IOCTLS).enumerate()
    {
        r.ioctls_table += 1;
        let ours = (ioc_nr(cmd), dir_name(ioc_dir(cmd)), ioc_type(cmd), ioc_size(cmd));
        r.check(name == md_name && ours == (md_nr, md_dir, AMDKFD_IOCTL_BASE, md_size), || {
            let (nr, dir, ty, size) = ours;
            format!(
                "{name} = {cmd:#010x} (nr {nr:#04x} {dir} type {ty:#x} size {size}), \
                 the KFD 1.18 table has {md_name} nr {md_nr:#04x} {md_dir} size {md_size}"
            )
        });
        r.check(ioc_nr(cmd) as usize == i + 1, || format!("{name} sits at ALL[{i}] but has nr {:#x}", ioc_nr(cmd)));
        match out.ioctls.get(&i).copied().flatten() {
            None => r.absent_ioctls.push(name),
            Some([value, nr, dir, ty, size]) => {
                r.ioctls_header += 1;
                let c_fields = (nr, dir, ty, size as usize);
                let decoded = (ioc_nr(value), ioc_dir(value), ioc_type(value), ioc_size(value));
                r.check(decoded == c_fields, || {
                    format!("uapi::ioctl decodes {value:#010x} unlike the C _IOC_* macros")
                });
                let grown = GROWN_IOCTLS.iter().find(|g| g.0 == name && out.minor < g.1);
                if let Some(&(_, minor, old)) = grown {
                    let same_but_size = value & !(0x3fff << IOC_SIZESHIFT) == cmd & !(0x3fff << IOC_SIZESHIFT);
                    r.check(same_but_size && size as usize == old, || {
                        format!(
                            "{name}: header {value:#010x} should be ours {cmd:#010x} \
                             with the pre-1.{minor} size {old}"
                        )
                    });
                } else {
                    r.check(value == cmd, || format!("AMDKFD_IOC_{name}: uapi {cmd:#010x}, header {value:#010x}"));
                }
            }
        }
    }
    for (cmd, want) in KNOWN_REQUESTS {
        r.check(cmd == want, || format!("request {cmd:#010x}, expected {want:#010x}"));
    }
    // Every request the header defines must be in ALL under one of its names.
    let ours: BTreeSet<String> = ALL.iter().flat_map(|d| ioctl_c_names(d.name)).collect();
    for m in decl.macros.iter().filter(|m| m.starts_with("AMDKFD_IOC_")) {
        r.check(ours.contains(m), || format!("the header defines {m}, uapi::ioctl::ALL does not"));
    }
    // AMDKFD_COMMAND_END is one past the last request on either side.
    r.check(AMDKFD_COMMAND_END as usize == ALL.len() + 1, || {
        format!("AMDKFD_COMMAND_END {AMDKFD_COMMAND_END:#x} but ALL ends at {:#x}", ALL.len())
    });
    let header_last = out.ioctls.iter().filter_map(|(i, v)| v.map(|_| i + 1)).max().unwrap_or(0);
    let end_idx = constants().iter().position(|k| k.rust == "AMDKFD_COMMAND_END");
    if let Some(&c_end) = end_idx.and_then(|i| out.consts.get(&i)) {
        r.check(c_end == header_last as i128 + 1, || {
            format!("header AMDKFD_COMMAND_END {c_end:#x}, but its last request is {header_last:#x}")
        });
    }
}

fn compare_constants(r: &mut Report, consts: &[Constant], out: &COutput) {
    let older = out.minor < KFD_IOCTL_MINOR_VERSION;
    for (i, k) in consts.iter().enumerate() {
        let Some(&c) = out.consts.get(&i) else {
            r.rust_only_consts.push(k.rust);
            continue;
        };
        r.consts += 1;
        let mask = (1u128 << k.bits) - 1;
        let fits = c >= -(1i128 << (k.bits - 1)) && c < (1i128 << k.bits);
        let same = fits && (c as u128) & mask == (k.value as u128) & mask;
        if older && VERSIONED_CONSTANTS.contains(&k.rust) {
            r.check(k.value >= c, || format!("{} = {}, below the header's {} = {c}", k.rust, k.value, k.c));
        } else {
            r.check(same, || format!("{} = {} ({:#x}), C {} = {c} ({c:#x})", k.rust, k.value, k.value, k.c));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Completeness: every struct, field and constant in uapi/src is in the tables above.

struct Source {
    structs: BTreeMap<String, Vec<String>>,
    consts: BTreeSet<String>,
}

const INTEGER_TYPES: [&str; 10] = ["u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize"];

/// Files of uapi/src that mirror no C header: cuse-kfd's own formats. Every other file's structs
/// and constants must be in the tables.
const OWN_FORMATS: [&str; 3] = [
    "lib.rs", // The soft code-object format of cuse-kfd's built-in kernels.
    "soft.rs",
    // cuse-kfd's own ioctls outside amdkfd's range.
    "vendor.rs",
];

fn parse_sources() -> Source {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut src = Source { structs: BTreeMap::new(), consts: BTreeSet::new() };
    for entry in std::fs::read_dir(&dir).expect("read uapi/src") {
        let path = entry.expect("dir entry").path();
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        if OWN_FORMATS.contains(&file.as_ref()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read source");
        for line in text.lines() {
            // Integer constants only: `pub const fn` and the `ALL` table are checked elsewhere.
            let Some((name, ty)) = line.strip_prefix("pub const ").and_then(|r| r.split_once(':')) else {
                continue;
            };
            let ty = ty.split('=').next().unwrap().trim();
            if INTEGER_TYPES.contains(&ty) {
                src.consts.insert(name.trim().to_owned());
            }
        }
        for chunk in text.split("abi_struct!(").skip(1) {
            // Skip doc comments and attributes, then `Name = size { field: Type, ... }`.
            let body: String = chunk
                .lines()
                .map(str::trim)
                .filter(|l| !l.starts_with("///") && !l.starts_with("#["))
                .collect::<Vec<_>>()
                .join(" ");
            let name = body.split_whitespace().next().unwrap().to_owned();
            let open = body.find('{').expect("abi_struct body");
            let close = open + body[open..].find('}').expect("abi_struct body end");
            let fields = body[open + 1..close]
                .split(',')
                .filter_map(|f| f.split(':').next())
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .map(str::to_owned)
                .collect();
            src.structs.insert(name, fields);
        }
    }
    src
}

fn check_complete(r: &mut Report, layouts: &[Layout], consts: &[Constant]) {
    let src = parse_sources();
    for (name, fields) in &src.structs {
        let tables: Vec<&Layout> = layouts.iter().filter(|l| l.short_name() == name).collect();
        r.check(!tables.is_empty(), || format!("uapi struct {name} is not in the layouts() table"));
        for l in tables {
            for f in fields {
                let covered = l.fields.iter().any(|x| x.rust == f) || l.rust_only.contains(&f.as_str());
                r.check(covered, || format!("{name}.{f} is not in its layouts() entry ({})", l.c));
            }
        }
    }
    for k in src.consts.iter().filter(|k| !k.starts_with("AMDKFD_IOC_")) {
        r.check(consts.iter().any(|c| c.rust == k), || format!("uapi const {k} is not in the constants() table"));
    }
}

#[test]
fn abi_matches_system_headers() {
    let dir = work_dir();
    let inc = include_dir(&dir);
    require_headers(&dir, &inc);
    let decl = declared(&dir, &inc);

    let layouts = layouts();
    let consts = constants();
    let out = parse_output(&run_c_program(&dir, &inc, &c_program(&layouts, &consts, &decl)));

    let mut r = Report::default();
    compare_structs(&mut r, &layouts, &out);
    compare_ioctls(&mut r, &out, &decl);
    compare_constants(&mut r, &consts, &out);
    check_complete(&mut r, &layouts, &consts);
    let _ = std::fs::remove_dir_all(&dir);

    let summary = format!(
        "uapi ABI vs system headers (kfd_ioctl.h 1.{}, uapi 1.{KFD_IOCTL_MINOR_VERSION}):\n  \
         {} structs ({} fields) compared with C; not in these headers: {}\n  \
         fields not in this header version: {}\n  \
         {} ioctls compared with the header, {} with the KFD 1.18 table; not in the header: {}\n  \
         {} constants compared; Rust-only (not in these headers): {}\n  \
         {} mismatches",
        out.minor,
        r.structs,
        r.fields,
        list(&r.absent_structs),
        list(&r.absent_fields),
        r.ioctls_header,
        r.ioctls_table,
        list(&r.absent_ioctls),
        r.consts,
        list(&r.rust_only_consts),
        r.mismatches.len(),
    );
    // Written straight to stderr so that the summary shows even when the test passes.
    let _ = writeln!(std::io::stderr(), "{summary}");
    assert!(r.mismatches.is_empty(), "{summary}\n  - {}", r.mismatches.join("\n  - "));
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".to_owned();
    }
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}
