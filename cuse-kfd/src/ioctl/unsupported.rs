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

/// amdkfd built without CONFIG_HSA_AMD_SVM answers EPERM.
pub fn svm(_: &Ctx, _: &mut SvmArgs) -> Result<(), Errno> {
    Err(Errno::EPERM)
}

/// CRIU needs CAP_CHECKPOINT_RESTORE and real GPU state; an unknown op is EINVAL.
pub fn criu(_: &Ctx, a: &mut CriuArgs) -> Result<(), Errno> {
    if a.op > KFD_CRIU_OP_RESUME {
        return Err(Errno::EINVAL);
    }
    Err(Errno::EOPNOTSUPP)
}

/// No debugger support: libhsakmt accepts EINVAL here.
pub fn dbg_trap(_: &Ctx, _: &mut DbgTrapArgs) -> Result<(), Errno> {
    Err(Errno::EINVAL)
}
