//! Memory of the process making a request (ioctl pointer arguments), reached with
//! process_vm_readv/writev while it is blocked in that request, so the pid is certainly its:
//! the kernel checks the address against the client's own page tables, so a bad pointer is
//! EFAULT, never a read of the device's memory. USERPTR buffers, which outlive the request, go
//! through the owner's memory instead (see [`crate::owner`]), from a [`ClientAddr`].
//!
//! Reaching another process is no concern of Rust's soundness: its memory is not ours. When the
//! client is this very process (the embedded front end), the same calls read and write our own
//! memory at any address, so both functions are `unsafe`, and so are the owner's
//! ([`OwnerProcess::read`], [`OwnerProcess::write`]); the contract is the one
//! [`crate::Device::ioctl`] passes on from its caller, for argument pointers and for the USERPTR
//! ranges a request registers.

use crate::owner::OwnerProcess;
use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
use nix::unistd::Pid;
use std::io::{IoSlice, IoSliceMut};
use std::sync::Arc;

/// Where a USERPTR buffer starts: an address in the memory of the process its context is bound
/// to. Only a registration, under the contract of [`crate::Device::ioctl`], makes one, so a
/// region backed by it may be read and written with the owner's [`OwnerProcess::read`] and
/// [`OwnerProcess::write`] (within the region's length, while the region is mapped). Once the
/// owner has exited or exec'd every such access is EFAULT (a VM fault), never an access to its
/// new image or to a process that got the pid later.
#[derive(Debug, Clone)]
pub struct ClientAddr {
    owner: Arc<OwnerProcess>,
    addr: u64,
}

impl ClientAddr {
    /// # Safety
    ///
    /// If `owner` is this process, the memory from `addr` on, as far as the region this value
    /// backs reaches, is valid for the device's reads and writes while that region is mapped,
    /// and no Rust reference aliases it. For any other process there is no requirement.
    pub unsafe fn new(owner: Arc<OwnerProcess>, addr: u64) -> ClientAddr {
        ClientAddr { owner, addr }
    }

    /// The process whose memory this is.
    pub fn owner(&self) -> &Arc<OwnerProcess> {
        &self.owner
    }

    pub fn addr(&self) -> u64 {
        self.addr
    }
}

/// Reads `buf.len()` bytes at `addr` in process `pid`.
///
/// # Safety
///
/// If `pid` is this process, nothing writes `[addr, addr + buf.len())` during the call except
/// through atomics (the bytes are copied as by a volatile read; an unmapped page is EFAULT).
/// For any other process there is no requirement.
pub unsafe fn read(pid: u32, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
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
///
/// # Safety
///
/// If `pid` is this process, `[addr, addr + data.len())` is memory the caller may write (not
/// the inside of a live Rust value it does not own) and no Rust reference to it is alive during
/// the call. For any other process there is no requirement.
pub unsafe fn write(pid: u32, addr: u64, data: &[u8]) -> Result<(), Errno> {
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

/// Reads every `(addr, buf)` of `parts` from process `pid` in one call. The error is the
/// kernel's own (EPERM for a process this one may not reach, ESRCH for one that is gone,
/// EFAULT for a bad address, which also stands for a short read), so a caller can tell a
/// refusal from a bad pointer.
///
/// # Safety
///
/// As [`read`], for each part.
pub unsafe fn read_each(pid: u32, parts: &mut [(u64, &mut [u8])]) -> Result<(), Errno> {
    let mut remote = Vec::with_capacity(parts.len());
    let mut want = 0usize;
    for (addr, buf) in parts.iter() {
        addr.checked_add(buf.len() as u64).ok_or(Errno::EFAULT)?;
        remote.push(RemoteIoVec { base: *addr as usize, len: buf.len() });
        want += buf.len();
    }
    if want == 0 {
        return Ok(());
    }
    let mut local: Vec<IoSliceMut> = parts.iter_mut().map(|(_, buf)| IoSliceMut::new(buf)).collect();
    let n = process_vm_readv(Pid::from_raw(pid as i32), &mut local, &remote)?;
    if n == want {
        Ok(())
    } else {
        Err(Errno::EFAULT)
    }
}

/// Writes every `(addr, data)` of `parts` to process `pid` in one call, in order; errors as
/// [`write`]'s (a short write is EFAULT).
///
/// # Safety
///
/// As [`write`], for each part.
pub unsafe fn write_each(pid: u32, parts: &[(u64, &[u8])]) -> Result<(), Errno> {
    let mut remote = Vec::with_capacity(parts.len());
    let mut want = 0usize;
    for (addr, data) in parts {
        addr.checked_add(data.len() as u64).ok_or(Errno::EFAULT)?;
        remote.push(RemoteIoVec { base: *addr as usize, len: data.len() });
        want += data.len();
    }
    if want == 0 {
        return Ok(());
    }
    let local: Vec<IoSlice> = parts.iter().map(|(_, data)| IoSlice::new(data)).collect();
    let n = process_vm_writev(Pid::from_raw(pid as i32), &local, &remote).map_err(fault)?;
    if n == want {
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
        // SAFETY: `src` is a live local nothing writes.
        unsafe { read(me, src.as_ptr() as u64, &mut dst) }.unwrap();
        assert_eq!(dst, src);
        let mut target = [0u8; 4];
        let at = target.as_mut_ptr() as u64;
        // SAFETY: `target` is a live local, not borrowed during the call.
        unsafe { write(me, at, &[9, 9, 9, 9]) }.unwrap();
        assert_eq!(std::hint::black_box(target), [9, 9, 9, 9]);
        // SAFETY: the null page and the top of the address space are never mapped: both fault.
        unsafe {
            assert_eq!(read(me, 8, &mut dst), Err(Errno::EFAULT));
            assert_eq!(read(me, u64::MAX - 1, &mut dst), Err(Errno::EFAULT));
        }
    }

    #[test]
    fn batches_move_every_part_or_fail_whole() {
        let me = std::process::id();
        let (a, b) = ([1u8, 2], [3u8, 4, 5]);
        let (mut x, mut y) = ([0u8; 2], [0u8; 3]);
        // SAFETY: `a` and `b` are live locals nothing writes.
        unsafe { read_each(me, &mut [(a.as_ptr() as u64, &mut x), (b.as_ptr() as u64, &mut y)]) }.unwrap();
        assert_eq!((x, y), (a, b));
        let (mut p, mut q) = ([0u8; 2], [0u8; 3]);
        let (pa, qa) = (p.as_mut_ptr() as u64, q.as_mut_ptr() as u64);
        // SAFETY: `p` and `q` are live locals, not borrowed during the call.
        unsafe { write_each(me, &[(pa, &[7, 7]), (qa, &[8, 8, 8])]) }.unwrap();
        assert_eq!((std::hint::black_box(p), std::hint::black_box(q)), ([7, 7], [8, 8, 8]));
        // A bad part anywhere fails the batch with EFAULT (a short transfer).
        let mut z = [0u8; 1];
        // SAFETY: page 0 is never mapped; `a` is a live local.
        let r = unsafe { read_each(me, &mut [(a.as_ptr() as u64, &mut x), (8, &mut z)]) };
        assert_eq!(r, Err(Errno::EFAULT));
        // Another process this one may not reach (init, unless we are root) is the kernel's
        // refusal, not a bad address.
        if !nix::unistd::geteuid().is_root() {
            // SAFETY: pid 1 is not this process.
            let r = unsafe { read_each(1, &mut [(0x1000, &mut z)]) };
            assert_eq!(r, Err(Errno::EPERM));
        }
    }
}
