//! The pre-ROCm-5 debugger calls (ROCT-Thunk-Interface rocm-5.2.3 src/debug.c): DbgRegister,
//! DbgUnregister, DbgWavefrontControl and DbgAddressWatch, sent as libhsakmt 5.2.3 sends them,
//! through the deprecated requests 0x0D-0x10.
//!
//! amdkfd dropped that debugger; its deprecated entries answer EPERM (amdkfd v6.1
//! kfd_chardev.c, `kfd_ioctl_dbg_*` "deprecated"), as this device does, and libhsakmt turns any
//! failure of these requests into `Error`. So every one of them is `Error` here after the checks
//! libhsakmt makes first: never a pretended debugger.

use super::{Result, Status, Thunk};
use uapi::ioctl::*;
use uapi::kfd::{DbgAddressWatchArgs, DbgRegisterArgs, DbgUnregisterArgs, DbgWaveControlArgs};
use uapi::IntoBytes;

/// At most this many watch points a call (kfd_ioctl.h of ROCT rocm-5.2.3, MAX_ALLOWED_NUM_POINTS).
pub const MAX_WATCH_POINTS: usize = 100;

/// One address watch point of [`Thunk::dbg_address_watch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchPoint {
    /// `HSA_DBG_WATCH_MODE`.
    pub mode: u32,
    pub address: u64,
}

impl Thunk {
    /// A deprecated debugger request whose variable part is `content` (the watch or wave
    /// control payload, pointed to by the fixed header as libhsakmt lays it out).
    fn dbg_content_request(&self, cmd: u32, gpu_id: u32, content: &[u8]) -> Result<()> {
        let size = std::mem::size_of::<DbgWaveControlArgs>() + content.len();
        let mut a = DbgWaveControlArgs {
            content_ptr: content.as_ptr() as u64,
            gpu_id,
            buf_size_in_bytes: u32::try_from(size).map_err(|_| Status::InvalidParameter)?,
        };
        // SAFETY: the device may read `content`, borrowed for the call, and nothing else.
        unsafe { self.ioctl(cmd, &mut a) }.map_err(|e| {
            log::debug!("deprecated debugger request {cmd:#x}: {e}");
            Status::Error
        })
    }

    /// `hsaKmtDbgRegister`: `Error` where the driver has no such debugger (amdkfd, this device).
    pub fn dbg_register(&self, node: u32) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        // SAFETY: the argument holds no pointer.
        unsafe { self.ioctl(AMDKFD_IOC_DBG_REGISTER_DEPRECATED, &mut DbgRegisterArgs { gpu_id, pad: 0 }) }
            .map_err(|_| Status::Error)
    }

    /// `hsaKmtDbgUnregister`: `Error`, as registering.
    pub fn dbg_unregister(&self, node: u32) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        // SAFETY: the argument holds no pointer.
        unsafe { self.ioctl(AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED, &mut DbgUnregisterArgs { gpu_id, pad: 0 }) }
            .map_err(|_| Status::Error)
    }

    /// `hsaKmtDbgWavefrontControl`: operand, mode, trap id, the 8-byte wave message and its
    /// memory address, as one payload. `Error`, as registering.
    pub fn dbg_wavefront_control(
        &self,
        node: u32,
        operand: u32,
        mode: u32,
        trap_id: u32,
        message: u64,
        memory_va: u64,
    ) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        let mut content = Vec::with_capacity(28);
        for w in [operand, mode, trap_id] {
            content.extend_from_slice(w.as_bytes());
        }
        content.extend_from_slice(message.as_bytes());
        content.extend_from_slice(memory_va.as_bytes());
        self.dbg_content_request(AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED, gpu_id, &content)
    }

    /// `hsaKmtDbgAddressWatch`: up to [`MAX_WATCH_POINTS`] points (more: `InvalidParameter`),
    /// their masks (one shared mask when `masks` has one entry) and event addresses (none, or
    /// one a point). `Error` once sent, as registering.
    pub fn dbg_address_watch(&self, node: u32, points: &[WatchPoint], masks: &[u64], events: &[u64]) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        if points.len() > MAX_WATCH_POINTS {
            return Err(Status::InvalidParameter);
        }
        let mut content = Vec::new();
        content.extend_from_slice((points.len() as u32).as_bytes());
        points.iter().for_each(|p| content.extend_from_slice(p.mode.as_bytes()));
        points.iter().for_each(|p| content.extend_from_slice(p.address.as_bytes()));
        masks.iter().for_each(|m| content.extend_from_slice(m.as_bytes()));
        events.iter().for_each(|e| content.extend_from_slice(e.as_bytes()));
        const _: () = assert!(std::mem::size_of::<DbgAddressWatchArgs>() == std::mem::size_of::<DbgWaveControlArgs>());
        self.dbg_content_request(AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED, gpu_id, &content)
    }
}
