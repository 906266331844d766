//! Ioctls for features this device does not have, answered as amdkfd answers on hardware or a
//! kernel without them. Never a fake success.

use super::Ctx;
use nix::errno::Errno;
use uapi::kfd::*;

/// The pre-1.x debugger interface: removed from amdkfd, which answers EPERM.
pub fn deprecated<T>(_: &Ctx, _: &mut T) -> Result<(), Errno> {
    Err(Errno::EPERM)
}

/// No dma-buf can reach this device (CUSE passes no file descriptors).
pub fn get_dmabuf_info(_: &Ctx, _: &mut GetDmabufInfoArgs) -> Result<(), Errno> {
    Err(Errno::EINVAL)
}

pub fn import_dmabuf(_: &Ctx, _: &mut ImportDmabufArgs) -> Result<(), Errno> {
    Err(Errno::EINVAL)
}

/// Exporting needs a dma-buf fd in the caller: unknown handles are EINVAL as in amdkfd, known
/// ones EOPNOTSUPP because no fd can be created in the caller.
pub fn export_dmabuf(ctx: &Ctx, a: &mut ExportDmabufArgs) -> Result<(), Errno> {
    if !ctx.process.inner().buffers.contains_key(&a.handle) {
        return Err(Errno::EINVAL);
    }
    Err(Errno::EOPNOTSUPP)
}

/// SMI events hand out an anonymous fd: unknown gpus are EINVAL, otherwise not supported.
pub fn smi_events(ctx: &Ctx, a: &mut SmiEventsArgs) -> Result<(), Errno> {
    if !ctx.gpu_exists(a.gpuid) {
        return Err(Errno::EINVAL);
    }
    Err(Errno::EOPNOTSUPP)
}

/// CRIU_OP carries KFD_IOC_FLAG_CHECKPOINT_RESTORE: amdkfd answers EACCES, before looking at
/// the arguments, to a caller without CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN. For one with
/// them an unknown op is EINVAL, and a known one EOPNOTSUPP: this device cannot checkpoint.
pub fn criu(ctx: &Ctx, a: &mut CriuArgs) -> Result<(), Errno> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", ctx.process.pid)).unwrap_or_default();
    if !may_checkpoint(&status) {
        return Err(Errno::EACCES);
    }
    if a.op > KFD_CRIU_OP_RESUME {
        return Err(Errno::EINVAL);
    }
    Err(Errno::EOPNOTSUPP)
}

/// Whether a /proc/<pid>/status text grants CAP_SYS_ADMIN (21) or CAP_CHECKPOINT_RESTORE (40)
/// in the effective set; no such line (the process is gone) grants nothing.
fn may_checkpoint(status: &str) -> bool {
    const CAPS: u64 = 1 << 21 | 1 << 40;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|eff| eff & CAPS != 0)
}

/// No debugger support: libhsakmt accepts EINVAL here.
pub fn dbg_trap(_: &Ctx, _: &mut DbgTrapArgs) -> Result<(), Errno> {
    Err(Errno::EINVAL)
}

#[cfg(test)]
mod tests {
    use super::may_checkpoint;

    #[test]
    fn checkpointing_needs_sys_admin_or_checkpoint_restore() {
        assert!(may_checkpoint("Name:\tx\nCapEff:\t000001ffffffffff\n"), "root");
        assert!(may_checkpoint("CapEff:\t0000000000200000\n"), "CAP_SYS_ADMIN alone");
        assert!(may_checkpoint("CapEff:\t0000010000000000\n"), "CAP_CHECKPOINT_RESTORE alone");
        assert!(!may_checkpoint("CapEff:\t0000000000000000\n"), "an unprivileged process");
        assert!(!may_checkpoint("CapEff:\t00000000001fffff\n"), "every capability below 21");
        assert!(!may_checkpoint(""), "a process that is gone");
    }
}
