//! The errnos amdkfd can answer for each request (kfd_chardev.c and what it calls),
//! plus those every request may get from the path to the handler: a file of another process
//! (EBADF), a request number no table row has (ENOTTY), a caller buffer shorter than the request
//! or a bad pointer met while copying (EFAULT).

use nix::errno::Errno;
use nix::errno::Errno::*;

/// ALLOC_MEMORY_OF_GPU: EADDRINUSE over an SVM range.
const ALLOC_MEMORY: &[Errno] = &[EINVAL, ENOMEM, EFAULT, EADDRINUSE];
/// SVM: bad arguments, an unmapped span, a buffer mapped in it, a wrapping span.
const SVM: &[Errno] = &[EINVAL, EFAULT, EADDRINUSE, EOVERFLOW];

/// Errnos request `nr` may answer with well-formed framing.
pub fn allowed(nr: u32) -> &'static [Errno] {
    match nr {
        0x01 => &[],                               // GET_VERSION
        0x02 => &[EINVAL, EFAULT, ENOSPC, ENOMEM], // CREATE_QUEUE
        0x03 => &[EINVAL],                         // DESTROY_QUEUE
        0x04 => &[EINVAL],                         // SET_MEMORY_POLICY
        0x05 => &[],                               // GET_CLOCK_COUNTERS
        0x06 => &[],                               // GET_PROCESS_APERTURES
        0x07 => &[EINVAL, EFAULT],                 // UPDATE_QUEUE
        0x08 => &[EINVAL, ENOSPC, ENOMEM],         // CREATE_EVENT
        0x09..=0x0B => &[EINVAL],                  // DESTROY/SET/RESET_EVENT
        // WAIT_EVENTS: bad ids EINVAL, bad array EFAULT, event destroyed or process gone EIO,
        // interrupted EINTR; ENOMEM when the waiters cannot be allocated (amdkfd's
        // alloc_event_waiters; over CUSE, an event array beyond the 128 KiB transfer limit).
        0x0C => &[EINVAL, EFAULT, EIO, EINTR, ENOMEM],
        0x0D..=0x10 => &[EPERM],                  // DBG_*_DEPRECATED
        0x11 => &[EINVAL],                        // SET_SCRATCH_BACKING_VA
        0x12 => &[EINVAL, EFAULT],                // GET_TILE_CONFIG
        0x13 => &[EINVAL],                        // SET_TRAP_HANDLER
        0x14 => &[EINVAL, EFAULT],                // GET_PROCESS_APERTURES_NEW
        0x15 => &[EINVAL, EBUSY],                 // ACQUIRE_VM
        0x16 => ALLOC_MEMORY,                     // ALLOC_MEMORY_OF_GPU
        0x17 => &[EINVAL, EPERM, EBUSY],          // FREE_MEMORY_OF_GPU
        0x18 => &[EINVAL, EFAULT, ENOMEM],        // MAP_MEMORY_TO_GPU
        0x19 => &[EINVAL, EFAULT, ENOMEM, EBUSY], // UNMAP_MEMORY_FROM_GPU
        0x1A => &[EINVAL, EFAULT],                // SET_CU_MASK
        0x1B => &[EINVAL, EFAULT],                // GET_QUEUE_WAVE_STATE
        0x1C | 0x1D => &[EINVAL],                 // GET_DMABUF_INFO, IMPORT_DMABUF
        0x1E => &[EINVAL, ENODEV, EBUSY],         // ALLOC_QUEUE_GWS
        0x1F => &[EINVAL, EOPNOTSUPP],            // SMI_EVENTS
        0x20 => SVM,                              // SVM
        0x21 => &[EINVAL, EBUSY, EPERM],          // SET_XNACK_MODE
        0x22 => &[EACCES, EINVAL, EOPNOTSUPP],    // CRIU_OP
        0x23 => &[EINVAL],                        // AVAILABLE_MEMORY
        0x24 => &[EINVAL, EOPNOTSUPP],            // EXPORT_DMABUF
        0x25 => &[EINVAL, EBUSY, EEXIST],         // RUNTIME_ENABLE
        0x26 => &[EINVAL],                        // DBG_TRAP
        0x80 => &[ENAMETOOLONG],                  // CUSE_KFD_GET_RUNTIME_INFO
        0x81 => &[],                              // CUSE_KFD_KICK
        _ => &[],
    }
}

/// Whether `e` is a legitimate answer to `cmd` sent with `sent` argument bytes.
pub fn is_allowed(cmd: u32, sent: usize, e: Errno) -> Result<(), String> {
    let Some(desc) = cuse_kfd::ioctl::lookup(cmd) else {
        return if e == ENOTTY {
            Ok(())
        } else {
            Err(format!("unknown request {cmd:#x} answered {e} (amdkfd: ENOTTY)"))
        };
    };
    let nr = uapi::ioctl::ioc_nr(desc.cmd);
    if e == ENOTTY {
        return Err(format!("{} answered ENOTTY though the table has it", desc.name));
    }
    // A caller buffer shorter than the request says faults on the copy in, and through a
    // device node also on the copy out.
    let short = sent < uapi::ioctl::ioc_size(cmd);
    if e == EFAULT && (short || has_pointers(nr)) {
        return Ok(());
    }
    let allowed = allowed_for(desc.name, nr);
    if allowed.contains(&e) {
        Ok(())
    } else {
        Err(format!("{} answered {e}, which amdkfd never gives for it (allowed: {allowed:?})", desc.name))
    }
}

/// Errnos of the request the device's table names `name` (number `nr`): AMD's out-of-tree IPC
/// requests share their numbers with cuse-kfd's own (0x80, 0x81) and are told apart by name.
/// IPC (ROCm's DKMS amdkfd kfd_ipc.c): unknown buffer, GPU or share handle EINVAL; an import
/// that cannot be charged or backed ENOMEM, one whose file cannot be granted to its uid EPERM;
/// an export that cannot draw a random handle EIO. CROSS_MEMORY_COPY (kfd_chardev.c
/// kfd_ioctl_cross_memory_copy): missing arrays or a process without the device open EINVAL,
/// arrays too long to copy in ENOMEM, a bad array or range EFAULT, no such process ESRCH, no
/// right to attach to it EPERM.
fn allowed_for(name: &str, nr: u32) -> &'static [Errno] {
    match name {
        "IPC_IMPORT_HANDLE" => &[EINVAL, ENOMEM, EPERM],
        "IPC_EXPORT_HANDLE" => &[EINVAL, ENOMEM, EIO],
        "CROSS_MEMORY_COPY" => &[EINVAL, ENOMEM, EFAULT, ESRCH, EPERM],
        _ => allowed(nr),
    }
}

/// Requests that copy from or to caller memory through pointers in their arguments.
fn has_pointers(nr: u32) -> bool {
    matches!(nr, 0x0C | 0x12 | 0x14 | 0x16 | 0x18 | 0x19 | 0x1A)
}

/// The errno amdkfd gives when a request names an object of another process (to amdkfd, an
/// unknown object, since each process has its own tables):
/// unknown buffer handles are EINVAL to FREE and EXPORT, ENOMEM to MAP/UNMAP; unknown queue ids
/// EINVAL to DESTROY and ALLOC_QUEUE_GWS, EFAULT to UPDATE, SET_CU_MASK and
/// GET_QUEUE_WAVE_STATE; unknown events EINVAL.
pub fn foreign(nr: u32) -> Option<Errno> {
    Some(match nr {
        0x17 | 0x24 | 0x08 => EINVAL,
        0x18 | 0x19 => ENOMEM,
        0x03 | 0x1E => EINVAL,
        0x07 | 0x1A | 0x1B => EFAULT,
        0x09..=0x0C => EINVAL,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uapi::ioctl::*;

    #[test]
    fn generic_errnos_follow_the_framing() {
        assert!(is_allowed(AMDKFD_IOC_GET_VERSION, 8, EINVAL).is_err());
        assert!(is_allowed(AMDKFD_IOC_FREE_MEMORY_OF_GPU, 0, EFAULT).is_ok());
        assert!(is_allowed(AMDKFD_IOC_FREE_MEMORY_OF_GPU, 8, EFAULT).is_err());
        assert!(is_allowed(0x1234_5678, 8, ENOTTY).is_ok());
        // The IPC requests and cuse-kfd's own share numbers 0x80/0x81, not errnos.
        assert!(is_allowed(AMDKFD_IOC_IPC_EXPORT_HANDLE, 32, EINVAL).is_ok());
        assert!(is_allowed(AMDKFD_IOC_IPC_IMPORT_HANDLE, 48, EPERM).is_ok());
        assert!(is_allowed(AMDKFD_IOC_CROSS_MEMORY_COPY, 48, ESRCH).is_ok());
        assert!(is_allowed(AMDKFD_IOC_CROSS_MEMORY_COPY, 48, EIO).is_err());
        assert!(is_allowed(uapi::vendor::CUSE_KFD_IOC_KICK, 0, EINVAL).is_err());
        assert!(is_allowed(AMDKFD_IOC_WAIT_EVENTS, 24, EIO).is_ok());
        // Through a node, more than about 2,730 events exceed CUSE's 128 KiB ioctl transfer.
        assert!(is_allowed(AMDKFD_IOC_WAIT_EVENTS, 24, ENOMEM).is_ok());
        assert!(is_allowed(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, 40, EIO).is_err());
    }
}
