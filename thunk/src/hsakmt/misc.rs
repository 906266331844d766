//! Clocks, XNACK, the runtime and debugger hooks, trap handlers, tile configuration, memory
//! policy and the SVM attribute calls.

use super::types::*;
use super::{Result, Status, Thunk, PAGE_SIZE};
use nix::errno::Errno;
use uapi::ioctl::*;
use uapi::kfd::{
    GetClockCountersArgs, GetTileConfigArgs, SetMemoryPolicyArgs, SetTrapHandlerArgs, SetXnackModeArgs, SvmArgs,
    SvmAttribute as KfdSvmAttribute, KFD_IOCTL_SVM_OP_GET_ATTR, KFD_IOCTL_SVM_OP_SET_ATTR,
    KFD_IOC_CACHE_POLICY_COHERENT, KFD_IOC_CACHE_POLICY_NONCOHERENT,
};
use uapi::IntoBytes;

/// ROCm 5.2's debugger request (`AMDKFD_IOC_DBG_TRAP` there: nr 0x82, 32 bytes: exception_mask,
/// ptr, pid, op, data1..4), which upstream amdkfd never had. libhsakmt 5.2.3's
/// hsaKmtRuntimeEnable asks it for the debugger version first.
const AMDKFD_IOC_DBG_TRAP_ROCM52: u32 = ioc(IOC_READ | IOC_WRITE, AMDKFD_IOCTL_BASE, 0x82, 32);
const DBG_TRAP_OP_GET_VERSION: u32 = 7;
const DBG_TRAP_OP_RUNTIME_ENABLE: u32 = 13;
/// The debugger major version hsaKmtRuntimeEnable needs (any minor: it needs 0 or later).
const RUNTIME_ENABLE_MAJOR: u32 = 10;

/// `HSA_CACHING_TYPE` values SetMemoryPolicy accepts.
const HSA_CACHING_CACHED: u32 = 0;
const HSA_CACHING_NONCACHED: u32 = 1;
/// Kaveri, the only GPU where SetMemoryPolicy does anything.
const GFX_VERSION_KAVERI: u32 = 0x070000;

/// `KFD_IOCTL_SVM_LOCATION_SYSMEM` / `_UNDEFINED`.
const SVM_LOCATION_SYSMEM: u32 = 0;
const SVM_LOCATION_UNDEFINED: u32 = 0xFFFF_FFFF;

/// A ROCm 5.2 debugger request: (pid, op, data1, data2, data3) in, the 32 bytes back.
fn dbg_trap_args(op: u32, data1: u32, data2: u32, ptr: u64) -> [u8; 32] {
    let mut a = [0u8; 32];
    a[8..16].copy_from_slice(&ptr.to_le_bytes());
    a[16..20].copy_from_slice(&std::process::id().to_le_bytes());
    a[20..24].copy_from_slice(&op.to_le_bytes());
    a[24..28].copy_from_slice(&data1.to_le_bytes());
    a[28..32].copy_from_slice(&data2.to_le_bytes());
    a
}

impl Thunk {
    /// `hsaKmtGetClockCounters` of node `node` (a CPU node's GPU counter is 0).
    pub fn clock_counters(&self, node: u32) -> Result<ClockCounters> {
        let gpu_id = self.gpu_id(node)?;
        let mut a = GetClockCountersArgs { gpu_id, ..Default::default() };
        // SAFETY: GET_CLOCK_COUNTERS' argument holds no pointer.
        unsafe { self.ioctl(AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut a) }.map_err(|_| Status::Error)?;
        Ok(ClockCounters {
            gpu_clock_counter: a.gpu_clock_counter,
            cpu_clock_counter: a.cpu_clock_counter,
            system_clock_counter: a.system_clock_counter,
            system_clock_frequency_hz: a.system_clock_freq,
        })
    }

    /// SET_XNACK_MODE: `mode` < 0 queries. EPERM (a GPU cannot) is `NotSupported`.
    fn xnack(&self, mode: i32) -> Result<i32> {
        self.need_minor(5)?;
        let mut a = SetXnackModeArgs { xnack_enabled: mode };
        // SAFETY: SET_XNACK_MODE's argument holds no pointer.
        match unsafe { self.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut a) } {
            Ok(()) => Ok(a.xnack_enabled),
            Err(Errno::EPERM) => Err(Status::NotSupported),
            Err(e) => {
                log::debug!("SET_XNACK_MODE {mode}: {e}");
                Err(Status::Error)
            }
        }
    }

    /// `hsaKmtGetXNACKMode`: 1 if XNACK (retry on GPU page faults) is on.
    pub fn xnack_mode(&self) -> Result<i32> {
        self.xnack(-1)
    }

    /// `hsaKmtSetXNACKMode`. Not with queues alive (`Error`); not where a GPU lacks XNACK
    /// (`NotSupported`).
    pub fn set_xnack_mode(&self, enable: bool) -> Result<()> {
        self.xnack(i32::from(enable)).map(|_| ())
    }

    /// `hsaKmtRuntimeEnable`, as libhsakmt 5.2.3 does it: ask the ROCm 5.2 debugger interface
    /// for its version, then enable the runtime through it. This device has no debugger: the
    /// request is unknown to it, and the answer is `NotSupported`, which ROCr 5.2.3 takes to
    /// mean "no exception debugging" (it then uses its own trap handler and no CWSR header).
    pub fn runtime_enable(&self, r_debug: u64, setup_ttmp: bool) -> Result<()> {
        self.debugger_version()?;
        let mut a = dbg_trap_args(DBG_TRAP_OP_RUNTIME_ENABLE, 1, u32::from(setup_ttmp), r_debug);
        match self.raw_dbg_trap(&mut a) {
            Ok(()) => Ok(()),
            Err(Errno::EBUSY) => Err(Status::Unavailable),
            Err(_) => Err(Status::Error),
        }
    }

    /// `hsaKmtRuntimeDisable` (`NotSupported` here, as enabling).
    pub fn runtime_disable(&self) -> Result<()> {
        self.debugger_version()?;
        let mut a = dbg_trap_args(DBG_TRAP_OP_RUNTIME_ENABLE, 0, 0, 0);
        self.raw_dbg_trap(&mut a).map_err(|_| Status::Error)
    }

    /// `hsaKmtGetKernelDebugTrapVersionInfo`: the (major, minor) version of the ROCm 5.2
    /// debugger interface (ROCT-Thunk-Interface rocm-5.2.3 src/debug.c asks DBG_TRAP GET_VERSION and
    /// answers any failure with `Error`). This device has no such debugger: `Error`.
    pub fn kernel_debug_trap_version(&self) -> Result<(u32, u32)> {
        let mut a = dbg_trap_args(DBG_TRAP_OP_GET_VERSION, 0, 0, 0);
        if let Err(e) = self.raw_dbg_trap(&mut a) {
            log::debug!("no ROCm debugger interface: {e}");
            return Err(Status::Error);
        }
        let word = |off: usize| u32::from_le_bytes(a[off..off + 4].try_into().expect("4 bytes"));
        Ok((word(24), word(28)))
    }

    /// The ROCm 5.2 debugger's version, if the device has one that can enable the runtime.
    fn debugger_version(&self) -> Result<()> {
        match self.kernel_debug_trap_version() {
            Ok((RUNTIME_ENABLE_MAJOR, _)) => Ok(()),
            _ => Err(Status::NotSupported),
        }
    }

    /// The ROCm 5.2 debug-trap request, for the operations this thunk sends (GET_VERSION and
    /// RUNTIME_ENABLE).
    fn raw_dbg_trap(&self, a: &mut [u8; 32]) -> std::result::Result<(), Errno> {
        loop {
            // SAFETY: the pointer field is 0, or RUNTIME_ENABLE's r_debug address, which the
            // driver only stores and reports to a debugger, never reads or writes through.
            match unsafe { self.kfd.ioctl(AMDKFD_IOC_DBG_TRAP_ROCM52, a) } {
                Err(Errno::EINTR | Errno::EAGAIN) => continue,
                r => return r,
            }
        }
    }

    /// `hsaKmtSetTrapHandler`: the trap handler code (TBA) and its buffer (TMA) of a GPU.
    pub fn set_trap_handler(&self, node: u32, tba: u64, _tba_size: u64, tma: u64, _tma_size: u64) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        let mut a = SetTrapHandlerArgs { tba_addr: tba, tma_addr: tma, gpu_id, pad: 0 };
        // SAFETY: the trap handler addresses are GPU addresses, reached through the device's VM.
        unsafe { self.ioctl(AMDKFD_IOC_SET_TRAP_HANDLER, &mut a) }.map_err(|_| Status::Error)
    }

    /// `hsaKmtGetTileConfig`: up to `num_tile_configs` and `num_macro_tile_configs` entries
    /// (GFX9 and later have none) and the address configuration.
    pub fn tile_config(&self, node: u32, num_tile_configs: u32, num_macro_tile_configs: u32) -> Result<TileConfig> {
        let gpu_id = self.gpu_id(node)?;
        let mut tile = vec![0u32; num_tile_configs as usize];
        let mut macro_tile = vec![0u32; num_macro_tile_configs as usize];
        let mut a = GetTileConfigArgs {
            tile_config_ptr: tile.as_mut_ptr() as u64,
            macro_tile_config_ptr: macro_tile.as_mut_ptr() as u64,
            num_tile_configs,
            num_macro_tile_configs,
            gpu_id,
            ..Default::default()
        };
        // SAFETY: the device writes at most `num_tile_configs` and `num_macro_tile_configs` words
        // into `tile` and `macro_tile`, owned here and not borrowed during the call.
        unsafe { self.ioctl(AMDKFD_IOC_GET_TILE_CONFIG, &mut a) }.map_err(|_| Status::Error)?;
        tile.truncate(a.num_tile_configs as usize);
        macro_tile.truncate(a.num_macro_tile_configs as usize);
        Ok(TileConfig {
            tile_config: tile,
            macro_tile_config: macro_tile,
            gb_addr_config: a.gb_addr_config,
            num_banks: a.num_banks,
            num_ranks: a.num_ranks,
        })
    }

    /// `hsaKmtSetMemoryPolicy`: a Kaveri-only legacy call. Other GPUs get `NotImplemented`
    /// (their policy follows the apertures, set at open).
    pub fn set_memory_policy(
        &self,
        node: u32,
        default_policy: u32,
        alternate_policy: u32,
        alt_base: u64,
        alt_size: u64,
    ) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        let gfxv = self.nodes.node(node).map_or(0, |n| n.props.engine_id.gfx_version());
        if gfxv != GFX_VERSION_KAVERI {
            return Err(Status::NotImplemented);
        }
        let valid = |p| p == HSA_CACHING_CACHED || p == HSA_CACHING_NONCACHED;
        if !valid(default_policy) || !valid(alternate_policy) {
            return Err(Status::InvalidParameter);
        }
        if (alt_base | alt_size) & (PAGE_SIZE - 1) != 0 {
            return Err(Status::InvalidParameter);
        }
        let kfd_policy =
            |p| if p == HSA_CACHING_CACHED { KFD_IOC_CACHE_POLICY_COHERENT } else { KFD_IOC_CACHE_POLICY_NONCOHERENT };
        let mut a = SetMemoryPolicyArgs {
            alternate_aperture_base: alt_base,
            alternate_aperture_size: alt_size,
            gpu_id,
            default_policy: kfd_policy(default_policy),
            alternate_policy: kfd_policy(alternate_policy),
            pad: 0,
        };
        // SAFETY: SET_MEMORY_POLICY's argument holds no pointer.
        unsafe { self.ioctl(AMDKFD_IOC_SET_MEMORY_POLICY, &mut a) }.map_err(|_| Status::Error)
    }

    /// Checks an SVM range and turns node ids into gpu ids for the attributes that carry nodes.
    fn svm_args(&self, start: u64, size: u64, attrs: &[SvmAttribute], op: u32, get: bool) -> Result<Vec<u8>> {
        self.need_minor(5)?;
        if start == 0 || size == 0 || (start | size) & (PAGE_SIZE - 1) != 0 {
            return Err(Status::InvalidParameter);
        }
        let mut args = SvmArgs { start_addr: start, size, op, nattr: attrs.len() as u32 }.as_bytes().to_vec();
        for at in attrs {
            let t = at.attr_type;
            let access = matches!(t, SvmAttrType::ACCESS | SvmAttrType::ACCESS_IN_PLACE | SvmAttrType::NO_ACCESS);
            let location = matches!(t, SvmAttrType::PREFERRED_LOC | SvmAttrType::PREFETCH_LOC);
            let value = if access || (location && !get) {
                if t == SvmAttrType::PREFERRED_LOC && at.value == INVALID_NODEID {
                    SVM_LOCATION_UNDEFINED
                } else {
                    let gpu = self.gpu_id(at.value)?;
                    if gpu == 0 && access {
                        return Err(Status::InvalidNodeUnit);
                    }
                    gpu
                }
            } else {
                at.value
            };
            args.extend_from_slice(KfdSvmAttribute { type_: t.0, value }.as_bytes());
        }
        Ok(args)
    }

    /// The SVM request with its attributes inline (the request size covers them, as KFD reads
    /// them in one copy).
    ///
    /// # Safety
    ///
    /// For SET_ATTR, as for [`Thunk::svm_set_attr`].
    unsafe fn svm_ioctl(&self, args: &mut [u8]) -> Result<()> {
        let cmd = AMDKFD_IOC_SVM + ((args.len() - std::mem::size_of::<SvmArgs>()) << IOC_SIZESHIFT) as u32;
        loop {
            // SAFETY: the attributes are inline; the range is covered by this function's
            // contract.
            match unsafe { self.kfd.ioctl(cmd, args) } {
                Err(Errno::EINTR | Errno::EAGAIN) => continue,
                Ok(()) => return Ok(()),
                Err(e) => {
                    log::debug!("SVM request: {e}");
                    return Err(Status::Error);
                }
            }
        }
    }

    /// `hsaKmtSVMSetAttr`.
    ///
    /// # Safety
    ///
    /// SET_ATTR makes `[start, start + size)` of this process reachable by the GPU, as a
    /// registration does: as for [`Thunk::register_memory_with_flags`], for as long as the range
    /// keeps its attributes.
    pub unsafe fn svm_set_attr(&self, start: u64, size: u64, attrs: &[SvmAttribute]) -> Result<()> {
        let mut args = self.svm_args(start, size, attrs, KFD_IOCTL_SVM_OP_SET_ATTR, false)?;
        // SAFETY: this function's contract.
        unsafe { self.svm_ioctl(&mut args) }
    }

    /// `hsaKmtSVMGetAttr`: fills the values of `attrs` (locations as node ids), and the type of
    /// each ACCESS query with the GPU's access.
    pub fn svm_get_attr(&self, start: u64, size: u64, attrs: &mut [SvmAttribute]) -> Result<()> {
        let mut args = self.svm_args(start, size, attrs, KFD_IOCTL_SVM_OP_GET_ATTR, true)?;
        // SAFETY: GET_ATTR only reports attributes, inline in `args`; it registers nothing.
        unsafe { self.svm_ioctl(&mut args)? };
        let head = std::mem::size_of::<SvmArgs>();
        for (i, at) in attrs.iter_mut().enumerate() {
            let off = head + i * 8 + 4;
            let value = u32::from_le_bytes(args[off..off + 4].try_into().expect("4 bytes"));
            // ACCESS answers in its type (ACCESS, ACCESS_IN_PLACE or NO_ACCESS for its GPU).
            at.attr_type = SvmAttrType(u32::from_le_bytes(args[off - 4..off].try_into().expect("4 bytes")));
            let located = matches!(
                at.attr_type,
                SvmAttrType::PREFERRED_LOC
                    | SvmAttrType::PREFETCH_LOC
                    | SvmAttrType::ACCESS
                    | SvmAttrType::ACCESS_IN_PLACE
                    | SvmAttrType::NO_ACCESS
            );
            at.value = match value {
                v if !located => v,
                SVM_LOCATION_SYSMEM => 0,
                SVM_LOCATION_UNDEFINED => INVALID_NODEID,
                gpu => self.node_of(gpu)?,
            };
        }
        Ok(())
    }
}
