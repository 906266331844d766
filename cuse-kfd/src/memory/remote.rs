//! Memory of the process making a request (ioctl pointer arguments), reached with
//! process_vm_readv/writev while it is blocked in that request, so the pid is certainly its:
//! the kernel checks the address against the client's own page tables, so a bad pointer is
//! EFAULT, never a read of the device's memory. USERPTR buffers, which outlive the request, go
//! through the owner's memory instead (see [`crate::owner`]).

use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
use nix::unistd::Pid;
use std::io::{IoSlice, IoSliceMut};

/// Reads `buf.len()` bytes at `addr` in process `pid`.
pub fn read(pid: u32, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
    if buf.is_empty() {
        return Ok(());
    }
    addr.checked_add(buf.len() as u64).ok_or(Errno::EFAULT)?;
    let remote = [RemoteIoVec { base: addr as usize, len: buf.len() }];
    let want = buf.len();
    let n = process_vm_readv(Pid::from_raw(pid as i32), &mut [IoSliceMut::new(buf)], &remote).map_err(fault)?;
    if n == want {
        Ok(())
    } else {
        Err(Errno::EFAULT)
    }
}

/// Writes `data` at `addr` in process `pid`.
pub fn write(pid: u32, addr: u64, data: &[u8]) -> Result<(), Errno> {
    if data.is_empty() {
        return Ok(());
    }
    addr.checked_add(data.len() as u64).ok_or(Errno::EFAULT)?;
    let remote = [RemoteIoVec { base: addr as usize, len: data.len() }];
    let n = process_vm_writev(Pid::from_raw(pid as i32), &[IoSlice::new(data)], &remote).map_err(fault)?;
    if n == data.len() {
        Ok(())
    } else {
        Err(Errno::EFAULT)
    }
}

/// A gone process or a refused access reads as a bad address to the caller.
fn fault(e: Errno) -> Errno {
    match e {
        Errno::ESRCH | Errno::EPERM | Errno::EFAULT | Errno::EINVAL => Errno::EFAULT,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_memory_round_trips_and_bad_pointers_fault() {
        let me = std::process::id();
        let src = [1u8, 2, 3, 4];
        let mut dst = [0u8; 4];
        read(me, src.as_ptr() as u64, &mut dst).unwrap();
        assert_eq!(dst, src);
        let mut target = [0u8; 4];
        write(me, target.as_mut_ptr() as u64, &[9, 9, 9, 9]).unwrap();
        assert_eq!(std::hint::black_box(target), [9, 9, 9, 9]);
        assert_eq!(read(me, 8, &mut dst), Err(Errno::EFAULT));
        assert_eq!(read(me, u64::MAX - 1, &mut dst), Err(Errno::EFAULT));
    }
}
