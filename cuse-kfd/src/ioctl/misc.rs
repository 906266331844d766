//! Version, apertures, clocks, policies and per-device settings.

use super::Ctx;
use crate::clock;
use crate::process::apertures;
use nix::errno::Errno;
use uapi::kfd::*;
use uapi::IntoBytes;

/// Entries GET_PROCESS_APERTURES_NEW fills at most (one per GPU node).
pub const MAX_APERTURE_NODES: u32 = 64;
/// Tile config entries GET_TILE_CONFIG copies at most.
pub const MAX_TILE_CONFIGS: u32 = 64;

pub fn get_version(_: &Ctx, a: &mut GetVersionArgs) -> Result<(), Errno> {
    a.major_version = KFD_IOCTL_MAJOR_VERSION;
    a.minor_version = KFD_IOCTL_MINOR_VERSION;
    Ok(())
}

pub fn set_memory_policy(ctx: &Ctx, a: &mut SetMemoryPolicyArgs) -> Result<(), Errno> {
    let valid = |p| p == KFD_IOC_CACHE_POLICY_COHERENT || p == KFD_IOC_CACHE_POLICY_NONCOHERENT;
    if !valid(a.default_policy) || !valid(a.alternate_policy) {
        return Err(Errno::EINVAL);
    }
    let mut inner = ctx.process.inner();
    let dev = inner.devices.get_mut(&a.gpu_id).ok_or(Errno::EINVAL)?;
    dev.default_policy = a.default_policy;
    dev.alternate_policy = a.alternate_policy;
    dev.alternate_aperture = (a.alternate_aperture_base, a.alternate_aperture_size);
    Ok(())
}

pub fn get_clock_counters(ctx: &Ctx, a: &mut GetClockCountersArgs) -> Result<(), Errno> {
    // amdkfd reports 0 for the GPU counter of an unknown gpu_id rather than failing.
    a.gpu_clock_counter = if ctx.gpu_exists(a.gpu_id) { clock::gpu_clock_counter() } else { 0 };
    a.cpu_clock_counter = clock::cpu_clock_counter();
    a.system_clock_counter = clock::system_clock_counter();
    a.system_clock_freq = clock::SYSTEM_CLOCK_HZ;
    Ok(())
}

pub fn get_process_apertures(ctx: &Ctx, a: &mut GetProcessAperturesArgs) -> Result<(), Errno> {
    let gpus = ctx.device.topology().gpus();
    *a = GetProcessAperturesArgs::default();
    for (slot, g) in a.process_apertures.iter_mut().zip(gpus) {
        *slot = apertures(g.gpu_id);
    }
    a.num_of_nodes = gpus.len().min(NUM_OF_SUPPORTED_GPUS) as u32;
    Ok(())
}

pub fn get_process_apertures_new(ctx: &Ctx, a: &mut GetProcessAperturesNewArgs) -> Result<(), Errno> {
    let gpus = ctx.device.topology().gpus();
    if a.num_of_nodes == 0 {
        // A query: how many entries the caller must provide.
        a.num_of_nodes = gpus.len() as u32;
        return Ok(());
    }
    let n = (a.num_of_nodes.min(MAX_APERTURE_NODES) as usize).min(gpus.len());
    let entries: Vec<ProcessDeviceApertures> = gpus[..n].iter().map(|g| apertures(g.gpu_id)).collect();
    ctx.write_user(a.kfd_process_device_apertures_ptr, entries.as_bytes());
    a.num_of_nodes = n as u32;
    Ok(())
}

pub fn set_scratch_backing_va(ctx: &Ctx, a: &mut SetScratchBackingVaArgs) -> Result<(), Errno> {
    let mut inner = ctx.process.inner();
    inner.devices.get_mut(&a.gpu_id).ok_or(Errno::EINVAL)?.scratch_backing_va = a.va_addr;
    Ok(())
}

/// amdkfd kfd_chardev.c kfd_ioctl_set_trap_handler: EINVAL for an unknown GPU, otherwise the
/// addresses are recorded unchecked; a wave entering a TBA that is not mapped code faults then.
pub fn set_trap_handler(ctx: &Ctx, a: &mut SetTrapHandlerArgs) -> Result<(), Errno> {
    if !ctx.process.inner().devices.contains_key(&a.gpu_id) {
        return Err(Errno::EINVAL);
    }
    ctx.process.set_trap_handler(a.gpu_id, a.tba_addr, a.tma_addr);
    Ok(())
}

pub fn get_tile_config(ctx: &Ctx, a: &mut GetTileConfigArgs) -> Result<(), Errno> {
    let gpu = ctx.device.topology().gpu(a.gpu_id).ok_or(Errno::EINVAL)?;
    let p = gpu.profile;
    a.gb_addr_config = p.gb_addr_config;
    // gfx9 GB_ADDR_CONFIG: NUM_BANKS is log2 in bits 12-14, NUM_RB_PER_SE log2 in bits 26-27.
    a.num_banks = 1 << ((p.gb_addr_config >> 12) & 0x7);
    a.num_ranks = 1 << ((p.gb_addr_config >> 26) & 0x3);
    // gfx9 and later have no tile mode tables: the arrays are all zero.
    a.num_tile_configs = a.num_tile_configs.min(p.num_tile_configs).min(MAX_TILE_CONFIGS);
    a.num_macro_tile_configs = a.num_macro_tile_configs.min(p.num_macro_tile_configs).min(MAX_TILE_CONFIGS);
    ctx.write_user(a.tile_config_ptr, &vec![0u8; a.num_tile_configs as usize * 4]);
    ctx.write_user(a.macro_tile_config_ptr, &vec![0u8; a.num_macro_tile_configs as usize * 4]);
    Ok(())
}

/// amdkfd kfd_chardev.c kfd_ioctl_set_xnack_mode: a negative value queries; a change is EBUSY
/// while the process has queues, and turning XNACK on EPERM unless every GPU can
/// (kfd_process_xnack_mode). New SVM ranges take their default access from the mode.
pub fn set_xnack_mode(ctx: &Ctx, a: &mut SetXnackModeArgs) -> Result<(), Errno> {
    let mut inner = ctx.process.inner();
    if a.xnack_enabled < 0 {
        a.xnack_enabled = i32::from(inner.xnack_enabled);
        return Ok(());
    }
    if !inner.queues.is_empty() {
        return Err(Errno::EBUSY);
    }
    let enable = a.xnack_enabled != 0;
    if enable && !ctx.device.topology().gpus().iter().all(|g| g.profile.xnack_supported) {
        return Err(Errno::EPERM);
    }
    inner.xnack_enabled = enable;
    ctx.process.vm_mut().svm.xnack = enable;
    Ok(())
}

pub fn runtime_enable(ctx: &Ctx, a: &mut RuntimeEnableArgs) -> Result<(), Errno> {
    let mut inner = ctx.process.inner();
    if a.mode_mask & KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK == 0 {
        inner.runtime_enabled = false;
        return Ok(());
    }
    if inner.runtime_enabled {
        return Err(Errno::EBUSY);
    }
    if !inner.queues.is_empty() {
        return Err(Errno::EEXIST);
    }
    inner.runtime_enabled = true;
    // No debugger support: no core dumps to advertise.
    a.capabilities_mask = 0;
    Ok(())
}
