//! System, agent, region and memory pool queries.

use super::{fail, out, out_info, runtime, slice, status, HsaStatus};
use crate::agent::{Agent, Pool};
use crate::runtime::Runtime;
use crate::status::{Error, Result, Status};
use std::ffi::c_void;

/// The caller's iteration callback: a C function, so calling it is the caller's promise.
type Callback = Option<unsafe extern "C" fn(u64, *mut c_void) -> HsaStatus>;
type AgentCallback = Callback;
type PoolCallback = Callback;

/// Calls `cb` for each handle until it answers something other than SUCCESS (INFO_BREAK
/// included), which is then returned.
///
/// # Safety
/// `cb`, if given, is a function of that signature that may be called with `data`.
unsafe fn iterate(items: Result<Vec<u64>>, cb: Callback, data: *mut c_void) -> HsaStatus {
    let Some(cb) = cb else { return fail(&Error::invalid_argument("callback is NULL")) };
    let items = match items {
        Ok(i) => i,
        Err(e) => return fail(&e),
    };
    for h in items {
        // SAFETY: the caller's contract.
        let s = unsafe { cb(h, data) };
        if s != Status::SUCCESS.0 {
            return s;
        }
    }
    Status::SUCCESS.0
}

fn with<T>(f: impl FnOnce(&Runtime) -> Result<T>) -> Result<T> {
    f(&runtime()?)
}

/// `hsa_system_get_info`: `value` receives the answer.
///
/// # Safety
/// `value` is null or valid for writing the type hsa.h gives `attribute`.
#[no_mangle]
pub unsafe extern "C" fn hsa_system_get_info(attribute: u32, value: *mut c_void) -> HsaStatus {
    // SAFETY: the caller's contract.
    unsafe { out_info(value, with(|rt| rt.system_info(attribute))) }
}

/// `hsa_system_extension_supported`: no extension is supported.
///
/// # Safety
/// `result` is null or valid for writing a `bool`.
#[no_mangle]
pub unsafe extern "C" fn hsa_system_extension_supported(
    extension: u16,
    major: u16,
    minor: u16,
    result: *mut bool,
) -> HsaStatus {
    let r = with(|_| {
        log::debug!("extension {extension} v{major}.{minor}: not provided");
        // SAFETY: the caller's contract.
        unsafe { out(result, false, "result") }
    });
    status(r)
}

/// `hsa_agent_extension_supported`: no extension is supported.
///
/// # Safety
/// `result` is null or valid for writing a `bool`.
#[no_mangle]
pub unsafe extern "C" fn hsa_agent_extension_supported(
    extension: u16,
    agent: Agent,
    major: u16,
    minor: u16,
    result: *mut bool,
) -> HsaStatus {
    let r = with(|rt| {
        rt.agent_desc(agent)?;
        log::debug!("agent extension {extension} v{major}.{minor}: not provided");
        // SAFETY: the caller's contract.
        unsafe { out(result, false, "result") }
    });
    status(r)
}

/// `hsa_system_get_extension_table`: there are none (`table` is not touched).
#[no_mangle]
pub extern "C" fn hsa_system_get_extension_table(
    extension: u16,
    major: u16,
    minor: u16,
    _table: *mut c_void,
) -> HsaStatus {
    fail(&Error::invalid_argument(format!(
        "extension {extension} v{major}.{minor}: this runtime provides no extension tables (no finalizer, images or loader)"
    )))
}

/// `hsa_iterate_agents`: calls `callback` with each agent, CPUs first.
///
/// # Safety
/// `callback`, if given, is a function of that signature that may be called with `data` during
/// the call.
#[no_mangle]
pub unsafe extern "C" fn hsa_iterate_agents(callback: AgentCallback, data: *mut c_void) -> HsaStatus {
    // SAFETY: the caller's contract.
    unsafe { iterate(with(|rt| Ok(rt.agents().into_iter().map(|a| a.0).collect())), callback, data) }
}

/// `hsa_agent_get_info`: `value` receives the answer.
///
/// # Safety
/// `value` is null or valid for writing the type hsa.h gives `attribute`.
#[no_mangle]
pub unsafe extern "C" fn hsa_agent_get_info(agent: Agent, attribute: u32, value: *mut c_void) -> HsaStatus {
    // SAFETY: the caller's contract.
    unsafe { out_info(value, with(|rt| rt.agent_info(agent, attribute))) }
}

/// `hsa_agent_iterate_regions`: calls `callback` with each region of `agent`.
///
/// # Safety
/// `callback`, if given, is a function of that signature that may be called with `data` during
/// the call.
#[no_mangle]
pub unsafe extern "C" fn hsa_agent_iterate_regions(
    agent: Agent,
    callback: PoolCallback,
    data: *mut c_void,
) -> HsaStatus {
    // SAFETY: the caller's contract.
    unsafe { iterate(with(|rt| Ok(rt.regions(agent)?.into_iter().map(|p| p.0).collect())), callback, data) }
}

/// `hsa_region_get_info`: `value` receives the answer.
///
/// # Safety
/// `value` is null or valid for writing the type hsa.h gives `attribute`.
#[no_mangle]
pub unsafe extern "C" fn hsa_region_get_info(region: Pool, attribute: u32, value: *mut c_void) -> HsaStatus {
    // SAFETY: the caller's contract.
    unsafe { out_info(value, with(|rt| rt.region_info(region, attribute))) }
}

/// `hsa_amd_agent_iterate_memory_pools`: calls `callback` with each memory pool of `agent`.
///
/// # Safety
/// `callback`, if given, is a function of that signature that may be called with `data` during
/// the call.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_agent_iterate_memory_pools(
    agent: Agent,
    callback: PoolCallback,
    data: *mut c_void,
) -> HsaStatus {
    // SAFETY: the caller's contract.
    unsafe { iterate(with(|rt| Ok(rt.pools(agent)?.into_iter().map(|p| p.0).collect())), callback, data) }
}

/// `hsa_amd_memory_pool_get_info`: `value` receives the answer.
///
/// # Safety
/// `value` is null or valid for writing the type hsa.h gives `attribute`.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_memory_pool_get_info(pool: Pool, attribute: u32, value: *mut c_void) -> HsaStatus {
    // SAFETY: the caller's contract.
    unsafe { out_info(value, with(|rt| rt.pool_info(pool, attribute))) }
}

/// `hsa_amd_agent_memory_pool_get_info`: `value` receives the answer.
///
/// # Safety
/// `value` is null or valid for writing the type hsa.h gives `attribute`.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_agent_memory_pool_get_info(
    agent: Agent,
    pool: Pool,
    attribute: u32,
    value: *mut c_void,
) -> HsaStatus {
    // SAFETY: the caller's contract.
    unsafe { out_info(value, with(|rt| rt.agent_pool_info(agent, pool, attribute))) }
}

/// Every allocation is already mapped to every agent of the process: the call checks its
/// arguments and grants what is already granted.
///
/// # Safety
/// `agents` is null or points to `num_agents` agents. (`flags` is not read; `ptr` is looked up,
/// not dereferenced.)
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_agents_allow_access(
    num_agents: u32,
    agents: *const Agent,
    _flags: *const u32,
    ptr: *const c_void,
) -> HsaStatus {
    let r = with(|rt| {
        // SAFETY: the caller's contract.
        let agents = unsafe { slice(agents, num_agents as usize, "agents") }?;
        if agents.is_empty() {
            return Err(Error::invalid_argument("no agents"));
        }
        for a in agents {
            rt.agent_desc(*a)?;
        }
        // The generic status, as ROCr answers for memory it did not allocate.
        rt.allocation(ptr as u64, 1)
            .map(|_| ())
            .ok_or_else(|| Error::new(Status::ERROR, format!("{ptr:p} is not memory this runtime allocated")))
    });
    status(r)
}
