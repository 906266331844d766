//! AMD's out-of-tree CROSS_MEMORY_COPY (ROCm's DKMS amdkfd, kfd_chardev.c
//! kfd_ioctl_cross_memory_copy; read at ROCK-Kernel-Driver commit 003a9f0b6bf4): copies between
//! GPU memory of the caller and of another process, hsaKmtProcessVMRead/Write's request.
//!
//! The source and destination are lists of GPU address ranges, the remote process's list being
//! the destination for a write (flag bit 0) and the source for a read. The bytes flow as one
//! stream: each source range fills the destination ranges in order, and the copy stops when
//! either list runs out. Every range must lie inside one buffer of its process (EFAULT
//! otherwise, found when the copy reaches that range, after the bytes before it were copied and
//! counted in `bytes_copied`, as in amdkfd).
//!
//! Unlike amdkfd, which copies buffer objects with SDMA whether mapped or not, the device
//! reaches memory only through a process's GPU VM: a range's buffer must be mapped on some GPU
//! (EFAULT otherwise), and doorbell and MMIO buffers are not memory to copy (EFAULT). A
//! zero-size range is skipped (amdkfd's iterator would spin on one). Bytes go through a bounce
//! buffer with one process's locks held at a time, so two processes copying from each other
//! at once cannot deadlock; a buffer freed between two chunks ends the copy with EFAULT.
//!
//! The embedded device is one per process: a process it has no context for may have an embedded
//! device of its own, which it then reaches through that device's peer socket ([`crate::peer`];
//! [`Served`] is the serving side). The rule and the answers are the same.

use super::Ctx;
use crate::attach::{self, Requester};
use crate::device::Device;
use crate::memory::vm::GpuVa;
use crate::memory::BufferKind;
use crate::peer::{self, Peer};
use crate::process::Process;
use nix::errno::Errno;
use std::sync::Arc;
use uapi::kfd::{CrossMemoryCopyArgs, MemoryRange, KFD_CROSS_MEMORY_RW_BIT};

/// Most ranges (source and destination together) one request may name: amdkfd answers ENOMEM
/// when it cannot allocate the copy of both arrays; the CUSE transport carries 128 KiB.
pub const MAX_RANGES: u64 = 4096;

/// Largest piece copied under one process's locks.
const CHUNK: u64 = 1 << 20;

/// The caller memory the request reads: both range arrays (none if their counts are refused).
pub fn arrays(a: &CrossMemoryCopyArgs) -> [(u64, u64); 2] {
    let ok = a.src_mem_array_size.checked_add(a.dst_mem_array_size).is_some_and(|n| n <= MAX_RANGES);
    let len = |n: u64| if ok { n * std::mem::size_of::<MemoryRange>() as u64 } else { 0 };
    [(a.src_mem_range_array, len(a.src_mem_array_size)), (a.dst_mem_range_array, len(a.dst_mem_array_size))]
}

pub fn cross_memory_copy(ctx: &Ctx, a: &mut CrossMemoryCopyArgs) -> Result<(), Errno> {
    // The checks in amdkfd's order: the arrays (EINVAL), their copy (ENOMEM, EFAULT), the
    // remote task (ESRCH), the caller's right to attach to it (EPERM), its KFD process (EINVAL).
    if a.src_mem_range_array == 0
        || a.dst_mem_range_array == 0
        || a.src_mem_array_size == 0
        || a.dst_mem_array_size == 0
    {
        return Err(Errno::EINVAL);
    }
    a.bytes_copied = 0;
    if a.src_mem_array_size.checked_add(a.dst_mem_array_size).is_none_or(|n| n > MAX_RANGES) {
        return Err(Errno::ENOMEM);
    }
    let src = ctx.read_user::<MemoryRange>(a.src_mem_range_array, a.src_mem_array_size as usize)?;
    let dst = ctx.read_user::<MemoryRange>(a.dst_mem_range_array, a.dst_mem_array_size as usize)?;
    let remote = remote(ctx, a.pid)?;
    let (local, remote) = (Side::Local(ctx.process), remote.side());
    let (from, to) = if a.flags & KFD_CROSS_MEMORY_RW_BIT != 0 { (local, remote) } else { (remote, local) };
    let mut copied = 0;
    let r = copy(from, &src, to, &dst, &mut copied);
    a.bytes_copied = copied;
    if let Err(e) = r {
        log::debug!("pid {}: CROSS_MEMORY_COPY with pid {} stopped after {copied} bytes: {e}", ctx.process.pid, a.pid);
    }
    r
}

/// The other process of a copy: a context of this device, or of the embedded device living in
/// that process.
enum Remote {
    Here(Arc<Process>),
    Peer(Peer),
}

impl Remote {
    fn side(&self) -> Side<'_> {
        match self {
            Remote::Here(p) => Side::Local(p),
            Remote::Peer(p) => Side::Peer(p),
        }
    }
}

/// Process `pid`, once the caller may attach to it (see [`crate::attach`]).
fn remote(ctx: &Ctx, pid: u32) -> Result<Remote, Errno> {
    if pid == ctx.process.pid {
        return Ok(Remote::Here(ctx.process.clone()));
    }
    let caller = Requester { pid: ctx.process.memory.pid(), uid: ctx.caller.uid, gid: ctx.caller.gid };
    let Some(p) = ctx.device.process(pid) else {
        attach::may_attach(caller, pid, None)?;
        // The process's own embedded device, which checks the rule again for its side.
        if let Some(socket) = ctx.device.backing().peer_socket_of(pid) {
            return Peer::connect(&socket, pid).map(Remote::Peer);
        }
        // A live process without a context: amdkfd's "invalid kfd process" once it may attach.
        return Err(Errno::EINVAL);
    };
    // Both contexts bound to one process (the embedded device's simulated clients): itself.
    if !p.memory.same_as(&ctx.process.memory) {
        attach::may_attach(caller, p.memory.pid(), Some(p.memory.start_time()))?;
    }
    Ok(Remote::Here(p))
}

/// One process's memory as a copy reaches it.
#[derive(Clone, Copy)]
enum Side<'a> {
    Local(&'a Process),
    Peer(&'a Peer),
}

impl Side<'_> {
    /// Whether `[va, va + size)` lies whole in one copyable buffer mapped on some GPU.
    fn check(&self, va: u64, size: u64) -> Result<(), Errno> {
        match self {
            Side::Local(p) => gpu_of(p, va, size).map(|_| ()),
            Side::Peer(p) => p.check(va, size),
        }
    }

    /// Most bytes one read or write takes.
    fn chunk(&self) -> u64 {
        match self {
            Side::Local(_) => CHUNK,
            Side::Peer(_) => peer::CHUNK,
        }
    }

    fn read(&self, va: GpuVa, buf: &mut [u8]) -> Result<(), Errno> {
        match self {
            Side::Local(p) => read_local(p, va, buf),
            Side::Peer(p) => p.read(va.0, buf),
        }
    }

    fn write(&self, va: GpuVa, buf: &[u8]) -> Result<(), Errno> {
        match self {
            Side::Local(p) => write_local(p, va, buf),
            Side::Peer(p) => p.write(va.0, buf),
        }
    }
}

/// Reads `[va, va + buf.len())` of `process`, a range one of its buffers holds whole. The
/// range's buffer is looked up again each time (it may have been unmapped or freed since), then
/// reached through the VM under its read lock, as the engine does.
fn read_local(process: &Process, va: GpuVa, buf: &mut [u8]) -> Result<(), Errno> {
    let gpu = gpu_of(process, va.0, buf.len() as u64)?;
    process.vm().read(gpu, va, buf).map_err(|e| {
        log::debug!("pid {}: reading {} bytes at {:#x}: {e:?}", process.pid, buf.len(), va.0);
        Errno::EFAULT
    })
}

fn write_local(process: &Process, va: GpuVa, buf: &[u8]) -> Result<(), Errno> {
    let gpu = gpu_of(process, va.0, buf.len() as u64)?;
    process.vm().write(gpu, va, buf).map_err(|e| {
        log::debug!("pid {}: writing {} bytes at {:#x}: {e:?}", process.pid, buf.len(), va.0);
        Errno::EFAULT
    })
}

/// The serving side of [`crate::peer`]: this device's process `pid` reached for a copy that
/// the embedded device of another process runs, under the same rule (the caller, as the kernel
/// names the connecting process, may attach to the process whose memory it is).
pub struct Served<'a>(pub &'a Device);

impl Served<'_> {
    fn process(&self, pid: u32, caller: Requester) -> Result<Arc<Process>, Errno> {
        let p = self.0.process(pid).ok_or(Errno::EINVAL)?;
        attach::may_attach(caller, p.memory.pid(), Some(p.memory.start_time()))?;
        Ok(p)
    }
}

impl peer::Memory for Served<'_> {
    fn check(&self, pid: u32, caller: Requester, va: u64, len: u64) -> Result<(), Errno> {
        gpu_of(&*self.process(pid, caller)?, va, len).map(|_| ())
    }

    fn read(&self, pid: u32, caller: Requester, va: u64, buf: &mut [u8]) -> Result<(), Errno> {
        read_local(&*self.process(pid, caller)?, GpuVa(va), buf)
    }

    fn write(&self, pid: u32, caller: Requester, va: u64, buf: &[u8]) -> Result<(), Errno> {
        write_local(&*self.process(pid, caller)?, GpuVa(va), buf)
    }
}

/// A position in one process's range list (amdkfd's cma_iter).
struct Cursor<'a> {
    side: Side<'a>,
    ranges: &'a [MemoryRange],
    /// The current range and the bytes of it already copied.
    index: usize,
    offset: u64,
    /// Bytes left over all ranges.
    left: u64,
}

impl<'a> Cursor<'a> {
    /// At the first non-empty range, which must lie in one buffer.
    fn new(side: Side<'a>, ranges: &'a [MemoryRange]) -> Result<Cursor<'a>, Errno> {
        let left = ranges.iter().fold(0u64, |n, r| n.saturating_add(r.size));
        let mut c = Cursor { side, ranges, index: 0, offset: 0, left };
        c.skip_empty()?;
        Ok(c)
    }

    fn done(&self) -> bool {
        self.index >= self.ranges.len() || self.left == 0
    }

    /// Bytes left in the current range.
    fn here(&self) -> u64 {
        self.ranges[self.index].size - self.offset
    }

    fn va(&self) -> GpuVa {
        GpuVa(self.ranges[self.index].va_addr.wrapping_add(self.offset))
    }

    /// Moves past empty ranges and checks the range it stops at.
    fn skip_empty(&mut self) -> Result<(), Errno> {
        while self.index < self.ranges.len() && self.ranges[self.index].size == 0 {
            self.index += 1;
        }
        if self.done() {
            return Ok(());
        }
        let r = self.ranges[self.index];
        self.side.check(r.va_addr, r.size)
    }

    /// Moves `n` bytes on; past the end of the current range to the next one, checked.
    fn advance(&mut self, n: u64) -> Result<(), Errno> {
        self.offset += n;
        self.left -= n;
        if self.offset == self.ranges[self.index].size {
            self.index += 1;
            self.offset = 0;
            self.skip_empty()?;
        }
        Ok(())
    }
}

/// The GPU whose VM reaches `[va, va + size)` of `process`: one on which the buffer holding the
/// whole range is mapped. EFAULT if no VRAM, GTT or USERPTR buffer holds it, or it is unmapped.
fn gpu_of(process: &Process, va: u64, size: u64) -> Result<u32, Errno> {
    let end = va.checked_add(size).ok_or(Errno::EFAULT)?;
    let inner = process.inner();
    let Some(b) = inner.buffers.values().find(|b| b.va.0 <= va && end <= b.end()) else {
        log::debug!("pid {}: no buffer holds [{va:#x}, {end:#x}) whole", process.pid);
        return Err(Errno::EFAULT);
    };
    if !matches!(b.kind, BufferKind::Vram | BufferKind::Gtt | BufferKind::Userptr) {
        log::debug!("pid {}: [{va:#x}, {end:#x}) is in a {} buffer", process.pid, b.kind.name());
        return Err(Errno::EFAULT);
    }
    let gpu = b.mapped_on.first().copied();
    if gpu.is_none() {
        log::debug!("pid {}: the buffer at {:#x} holding [{va:#x}, {end:#x}) is mapped on no GPU", process.pid, b.va.0);
    }
    gpu.ok_or(Errno::EFAULT)
}

/// Copies `n` bytes from `from` at `src` to `to` at `dst`, a chunk at a time, one process's
/// locks at a time; `copied` counts the chunks that arrived.
fn copy_bytes(from: Side, src: GpuVa, to: Side, dst: GpuVa, n: u64, copied: &mut u64) -> Result<(), Errno> {
    let chunk = from.chunk().min(to.chunk());
    let mut buf = vec![0u8; n.min(chunk) as usize];
    let mut done = 0;
    while done < n {
        let len = (n - done).min(chunk);
        let piece = &mut buf[..len as usize];
        from.read(GpuVa(src.0 + done), piece)?;
        to.write(GpuVa(dst.0 + done), piece)?;
        done += len;
        *copied += len;
    }
    Ok(())
}

/// The copy loop (amdkfd kfd_ioctl_cross_memory_copy and kfd_copy_single_range): each source
/// range into as many destination ranges as it takes, until either list ends.
fn copy(from: Side, src: &[MemoryRange], to: Side, dst: &[MemoryRange], copied: &mut u64) -> Result<(), Errno> {
    // amdkfd sets up the destination first.
    let mut d = Cursor::new(to, dst)?;
    let mut s = Cursor::new(from, src)?;
    while !s.done() && !d.done() {
        let n = s.here().min(d.here());
        copy_bytes(from, s.va(), to, d.va(), n, copied)?;
        s.advance(n)?;
        d.advance(n)?;
    }
    Ok(())
}
