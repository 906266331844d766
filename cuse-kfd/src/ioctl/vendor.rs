//! cuse-kfd's own ioctls (uapi::vendor), outside amdkfd's range.

use super::Ctx;
use nix::errno::Errno;
use std::os::unix::ffi::OsStrExt;
use uapi::vendor::*;
use uapi::IntoBytes;

pub fn runtime_info(ctx: &Ctx, a: &mut RuntimeInfo) -> Result<(), Errno> {
    let path = ctx.device.backing().root().as_os_str().as_bytes();
    if path.len() >= CUSE_KFD_PATH_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    *a = RuntimeInfo { version: CUSE_KFD_RUNTIME_INFO_VERSION, pid: ctx.process.pid, ..Default::default() };
    a.runtime_dir.as_mut_bytes()[..path.len()].copy_from_slice(path);
    Ok(())
}

pub fn kick(ctx: &Ctx, _: &mut ()) -> Result<(), Errno> {
    ctx.device.kick();
    Ok(())
}
