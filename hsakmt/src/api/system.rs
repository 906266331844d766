//! Open and close, version, topology, clocks, XNACK, runtime, trap handler, tile config,
//! memory policy and SVM attributes.

use super::{entry, thunk};
use crate::ptr;
use crate::types::*;
use std::ffi::c_void;
use thunk::hsakmt::{self, Opened, Status, SvmAttribute};

/// `hsaKmtOpenKFD`: opens the device on first call (`CUSE_KFD_EMBEDDED=1`: an embedded one;
/// else the node `CUSE_KFD_DEVICE`, default /dev/kfd); later calls count and answer
/// `HSAKMT_STATUS_KERNEL_ALREADY_OPENED`.
///
/// The first call also starts the log (stderr) of this library and of the embedded device it
/// may hold: the filter is `HSAKMT_LOG`, else `RUST_LOG` (so `RUST_LOG=warn cuse-kfd run
/// --embedded` shows the device's queue errors), else errors only.
pub extern "C" fn hsaKmtOpenKFD() -> HSAKMT_STATUS {
    let mut logger = env_logger::Builder::new();
    if let Some(filter) = log_filter(thunk::secure_env::var) {
        logger.parse_filters(&filter);
    }
    let _ = logger.try_init();
    entry("hsaKmtOpenKFD", || match hsakmt::open_kfd()? {
        Opened::First => Ok(()),
        Opened::Again => Err(Status::KernelAlreadyOpened),
    })
}

/// The log filter from the environment `var` reads: `HSAKMT_LOG` first, then `RUST_LOG`.
fn log_filter(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    var("HSAKMT_LOG").or_else(|| var("RUST_LOG"))
}

/// `hsaKmtCloseKFD`: drops one reference; the last closes the device.
pub extern "C" fn hsaKmtCloseKFD() -> HSAKMT_STATUS {
    entry("hsaKmtCloseKFD", hsakmt::close_kfd)
}

/// `hsaKmtGetVersion`.
///
/// # Safety
/// `version_info` is null or points to a writable `HsaVersionInfo`.
pub unsafe extern "C" fn hsaKmtGetVersion(version_info: *mut HsaVersionInfo) -> HSAKMT_STATUS {
    entry("hsaKmtGetVersion", || {
        let v = thunk()?.version();
        let c = HsaVersionInfo { KernelInterfaceMajorVersion: v.major, KernelInterfaceMinorVersion: v.minor };
        // SAFETY: the caller's contract.
        unsafe { ptr::write(version_info, c) }
    })
}

/// `hsaKmtAcquireSystemProperties`: takes the topology snapshot the node calls read.
///
/// # Safety
/// `props` is null or points to a writable `HsaSystemProperties`.
pub unsafe extern "C" fn hsaKmtAcquireSystemProperties(props: *mut HsaSystemProperties) -> HSAKMT_STATUS {
    entry("hsaKmtAcquireSystemProperties", || {
        let t = thunk()?;
        if props.is_null() {
            return Err(Status::InvalidParameter);
        }
        let s = t.acquire_system_properties()?;
        let c = HsaSystemProperties {
            NumNodes: s.num_nodes,
            PlatformOem: s.platform_oem,
            PlatformId: s.platform_id,
            PlatformRev: s.platform_rev,
        };
        // SAFETY: the caller's contract.
        unsafe { ptr::write(props, c) }
    })
}

/// `hsaKmtReleaseSystemProperties`.
pub extern "C" fn hsaKmtReleaseSystemProperties() -> HSAKMT_STATUS {
    entry("hsaKmtReleaseSystemProperties", || match thunk() {
        Ok(t) => t.release_system_properties(),
        // libhsakmt drops its (absent) snapshot without asking whether the KFD is open.
        Err(_) => Ok(()),
    })
}

/// `hsaKmtGetNodeProperties`.
///
/// # Safety
/// `props` is null or points to a writable `HsaNodeProperties`.
pub unsafe extern "C" fn hsaKmtGetNodeProperties(node_id: u32, props: *mut HsaNodeProperties) -> HSAKMT_STATUS {
    entry("hsaKmtGetNodeProperties", || {
        if props.is_null() {
            return Err(Status::InvalidParameter);
        }
        let p = thunk()?.node_properties(node_id)?;
        // SAFETY: the caller's contract.
        unsafe { ptr::write(props, HsaNodeProperties::from(&p)) }
    })
}

/// `hsaKmtGetNodeMemoryProperties`: fills `num_banks` entries.
///
/// # Safety
/// `props` is null or points to `num_banks` writable `HsaMemoryProperties`.
pub unsafe extern "C" fn hsaKmtGetNodeMemoryProperties(
    node_id: u32,
    num_banks: u32,
    props: *mut HsaMemoryProperties,
) -> HSAKMT_STATUS {
    entry("hsaKmtGetNodeMemoryProperties", || {
        if props.is_null() {
            return Err(Status::InvalidParameter);
        }
        let banks = thunk()?.node_memory_properties(node_id, num_banks)?;
        let zero = HsaMemoryProperties::from(&thunk::hsakmt::MemoryProperties::default());
        let padded = banks.iter().map(HsaMemoryProperties::from).chain(std::iter::repeat(zero));
        // SAFETY: exactly `num_banks` entries (the banks, then zeros, as libhsakmt leaves them),
        // which the caller provides room for.
        unsafe { ptr::write_array(props, padded.take(num_banks as usize)) }
    })
}

/// `hsaKmtGetNodeCacheProperties`.
///
/// # Safety
/// `props` is null or points to `num_caches` writable `HsaCacheProperties`.
pub unsafe extern "C" fn hsaKmtGetNodeCacheProperties(
    node_id: u32,
    processor_id: u32,
    num_caches: u32,
    props: *mut HsaCacheProperties,
) -> HSAKMT_STATUS {
    entry("hsaKmtGetNodeCacheProperties", || {
        if props.is_null() {
            return Err(Status::InvalidParameter);
        }
        let caches = thunk()?.node_cache_properties(node_id, processor_id, num_caches)?;
        // SAFETY: at most `num_caches` entries, which the caller provides room for.
        unsafe { ptr::write_array(props, caches.iter().map(HsaCacheProperties::from)) }
    })
}

/// `hsaKmtGetNodeIoLinkProperties`.
///
/// # Safety
/// `props` is null or points to `num_links` writable `HsaIoLinkProperties`.
pub unsafe extern "C" fn hsaKmtGetNodeIoLinkProperties(
    node_id: u32,
    num_links: u32,
    props: *mut HsaIoLinkProperties,
) -> HSAKMT_STATUS {
    entry("hsaKmtGetNodeIoLinkProperties", || {
        if props.is_null() {
            return Err(Status::InvalidParameter);
        }
        let links = thunk()?.node_io_link_properties(node_id, num_links)?;
        // SAFETY: at most `num_links` entries, which the caller provides room for.
        unsafe { ptr::write_array(props, links.iter().map(HsaIoLinkProperties::from)) }
    })
}

/// `hsaKmtGetClockCounters`.
///
/// # Safety
/// `counters` is null or points to a writable `HsaClockCounters`.
pub unsafe extern "C" fn hsaKmtGetClockCounters(node_id: u32, counters: *mut HsaClockCounters) -> HSAKMT_STATUS {
    entry("hsaKmtGetClockCounters", || {
        let c = thunk()?.clock_counters(node_id)?;
        // SAFETY: the caller's contract.
        unsafe { ptr::write(counters, HsaClockCounters::from(&c)) }
    })
}

/// `hsaKmtGetXNACKMode`.
///
/// # Safety
/// `enable` is null or points to a writable `HSAint32`.
pub unsafe extern "C" fn hsaKmtGetXNACKMode(enable: *mut i32) -> HSAKMT_STATUS {
    entry("hsaKmtGetXNACKMode", || {
        let t = thunk()?;
        // SAFETY: the caller's contract (libhsakmt stores -1 before asking).
        unsafe { ptr::write(enable, -1) }?;
        let mode = t.xnack_mode()?;
        // SAFETY: as above.
        unsafe { ptr::write(enable, mode) }
    })
}

/// `hsaKmtSetXNACKMode`.
pub extern "C" fn hsaKmtSetXNACKMode(enable: i32) -> HSAKMT_STATUS {
    entry("hsaKmtSetXNACKMode", || thunk()?.set_xnack_mode(enable != 0))
}

/// `hsaKmtRuntimeEnable`: `HSAKMT_STATUS_NOT_SUPPORTED` on this device (no ROCm debugger).
pub extern "C" fn hsaKmtRuntimeEnable(r_debug: *mut c_void, setup_ttmp: bool) -> HSAKMT_STATUS {
    entry("hsaKmtRuntimeEnable", || thunk()?.runtime_enable(r_debug as u64, setup_ttmp))
}

/// `hsaKmtRuntimeDisable`.
pub extern "C" fn hsaKmtRuntimeDisable() -> HSAKMT_STATUS {
    entry("hsaKmtRuntimeDisable", || thunk()?.runtime_disable())
}

/// `hsaKmtSetTrapHandler`.
pub extern "C" fn hsaKmtSetTrapHandler(
    node_id: u32,
    trap_handler: *mut c_void,
    trap_handler_size: u64,
    trap_buffer: *mut c_void,
    trap_buffer_size: u64,
) -> HSAKMT_STATUS {
    entry("hsaKmtSetTrapHandler", || {
        thunk()?.set_trap_handler(node_id, trap_handler as u64, trap_handler_size, trap_buffer as u64, trap_buffer_size)
    })
}

/// `hsaKmtGetTileConfig`: fills the caller's arrays (`TileConfig`, `MacroTileConfig`, as long
/// as their counts say) and the counts and address configuration.
///
/// # Safety
/// `config` is null or points to a writable `HsaGpuTileConfig` whose arrays hold their counts.
pub unsafe extern "C" fn hsaKmtGetTileConfig(node_id: u32, config: *mut HsaGpuTileConfig) -> HSAKMT_STATUS {
    entry("hsaKmtGetTileConfig", || {
        // SAFETY: the caller's contract.
        let mut c = unsafe { ptr::read(config) }.ok_or(Status::InvalidParameter)?;
        let tc = thunk()?.tile_config(node_id, c.NumTileConfigs, c.NumMacroTileConfigs)?;
        // SAFETY: no more entries than the counts the caller gave for its arrays.
        unsafe { ptr::write_array(c.TileConfig as *mut u32, tc.tile_config.iter().copied()) }?;
        // SAFETY: as above.
        unsafe { ptr::write_array(c.MacroTileConfig as *mut u32, tc.macro_tile_config.iter().copied()) }?;
        c.NumTileConfigs = tc.tile_config.len() as u32;
        c.NumMacroTileConfigs = tc.macro_tile_config.len() as u32;
        c.GbAddrConfig = tc.gb_addr_config;
        c.NumBanks = tc.num_banks;
        c.NumRanks = tc.num_ranks;
        // SAFETY: the caller's contract.
        unsafe { ptr::write(config, c) }
    })
}

/// `hsaKmtSetMemoryPolicy`: `HSAKMT_STATUS_NOT_IMPLEMENTED` except on Kaveri.
pub extern "C" fn hsaKmtSetMemoryPolicy(
    node: u32,
    default_policy: u32,
    alternate_policy: u32,
    memory_address_alternate: *mut c_void,
    memory_size: u64,
) -> HSAKMT_STATUS {
    entry("hsaKmtSetMemoryPolicy", || {
        thunk()?.set_memory_policy(node, default_policy, alternate_policy, memory_address_alternate as u64, memory_size)
    })
}

/// The attributes of an SVM call.
///
/// # Safety
/// `attrs` is null or points to `nattr` readable `HSA_SVM_ATTRIBUTE`s.
unsafe fn svm_attrs(attrs: *const HSA_SVM_ATTRIBUTE, nattr: u32) -> thunk::hsakmt::Result<Vec<SvmAttribute>> {
    // SAFETY: the caller's contract.
    let c = unsafe { ptr::read_array(attrs, nattr as usize) }.ok_or(Status::InvalidParameter)?;
    Ok(c.iter().map(SvmAttribute::from).collect())
}

/// `hsaKmtSVMSetAttr`.
///
/// # Safety
/// `attrs` is null or points to `nattr` readable `HSA_SVM_ATTRIBUTE`s; the range
/// `[start_addr, start_addr + size)` stays valid for the GPU's reads and writes while it keeps
/// the attributes set, as with a registration.
pub unsafe extern "C" fn hsaKmtSVMSetAttr(
    start_addr: *mut c_void,
    size: u64,
    nattr: u32,
    attrs: *mut HSA_SVM_ATTRIBUTE,
) -> HSAKMT_STATUS {
    entry("hsaKmtSVMSetAttr", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let a = unsafe { svm_attrs(attrs, nattr) }?;
        // SAFETY: the caller's contract.
        unsafe { t.svm_set_attr(start_addr as u64, size, &a) }
    })
}

/// `hsaKmtSVMGetAttr`: ACCESS queries answer in their type, as libhsakmt.
///
/// # Safety
/// `attrs` is null or points to `nattr` readable and writable `HSA_SVM_ATTRIBUTE`s.
pub unsafe extern "C" fn hsaKmtSVMGetAttr(
    start_addr: *mut c_void,
    size: u64,
    nattr: u32,
    attrs: *mut HSA_SVM_ATTRIBUTE,
) -> HSAKMT_STATUS {
    entry("hsaKmtSVMGetAttr", || {
        let t = thunk()?;
        // SAFETY: the caller's contract.
        let mut a = unsafe { svm_attrs(attrs, nattr) }?;
        t.svm_get_attr(start_addr as u64, size, &mut a)?;
        let out = a.iter().map(|s| HSA_SVM_ATTRIBUTE { r#type: s.attr_type.0, value: s.value });
        // SAFETY: `nattr` entries, as read above.
        unsafe { ptr::write_array(attrs, out) }
    })
}

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn the_log_filter_is_hsakmt_log_then_rust_log() {
        let env = |set: &'static [(&'static str, &'static str)]| {
            move |name: &str| set.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(log_filter(env(&[])), None);
        assert_eq!(log_filter(env(&[("RUST_LOG", "warn")])).as_deref(), Some("warn"));
        assert_eq!(log_filter(env(&[("HSAKMT_LOG", "debug"), ("RUST_LOG", "warn")])).as_deref(), Some("debug"));
    }
}
