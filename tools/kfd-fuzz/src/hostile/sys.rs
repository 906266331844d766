//! Raw system calls for the hostile operations' helper processes.
//!
//! A node child is multi-threaded (its watchdog, its helpers parked in WAIT_EVENTS), so a
//! process it forks may use only async-signal-safe calls until it execs or exits: no
//! allocation, no locks, no Rust I/O. Everything here is a thin wrapper of one system call on
//! memory the caller owns, so it is safe to call between fork and exec or `_exit`.

use std::ffi::CStr;
use std::os::fd::RawFd;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::IntoBytes;

/// The errno of the last failed call (0 if none).
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// ioctl(2) on `fd` with `arg` as the argument struct: 0 or the errno.
///
/// # Safety
///
/// `arg` is the whole argument struct `cmd` reads and writes, and every pointer inside it is
/// null or points at memory the caller owns that is valid for what `cmd` does through it.
pub unsafe fn ioctl(fd: RawFd, cmd: u32, arg: &mut [u8]) -> i32 {
    // SAFETY: the caller's contract; `arg` is writable for its whole length.
    let r = unsafe { libc::ioctl(fd, cmd as libc::c_ulong, arg.as_mut_ptr()) };
    if r < 0 {
        errno()
    } else {
        0
    }
}

/// GET_VERSION on `fd`: 0 or the errno.
pub fn version(fd: RawFd) -> i32 {
    let mut a = GetVersionArgs::default();
    // SAFETY: GET_VERSION writes its 8-byte struct, which `a` is; no pointers in it.
    unsafe { ioctl(fd, AMDKFD_IOC_GET_VERSION, a.as_mut_bytes()) }
}

/// FREE_MEMORY_OF_GPU of `handle` on `fd`: 0 or the errno.
pub fn free(fd: RawFd, handle: u64) -> i32 {
    let mut a = FreeMemoryOfGpuArgs { handle };
    // SAFETY: FREE reads its 8-byte struct, which `a` is; no pointers in it.
    unsafe { ioctl(fd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, a.as_mut_bytes()) }
}

/// ALLOC_MEMORY_OF_GPU on `fd`: the handle, or the errno.
///
/// # Safety
///
/// For a USERPTR allocation, `[mmap_offset, mmap_offset + size)` is memory of this process
/// that the device may read and write until the buffer is freed or the process goes.
pub unsafe fn alloc(fd: RawFd, gpu_id: u32, va: u64, size: u64, flags: u32, mmap_offset: u64) -> Result<u64, i32> {
    let mut a = AllocMemoryOfGpuArgs { va_addr: va, size, handle: 0, mmap_offset, gpu_id, flags };
    // SAFETY: ALLOC reads and writes its struct, which `a` is; its one pointer (the USERPTR
    // address) is the caller's, under this function's contract.
    match unsafe { ioctl(fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, a.as_mut_bytes()) } {
        0 => Ok(a.handle),
        e => Err(e),
    }
}

/// MAP_MEMORY_TO_GPU of `handle` to `gpu_id`: 0 or the errno.
pub fn map(fd: RawFd, handle: u64, gpu_id: u32) -> i32 {
    let ids = [gpu_id];
    let mut a = MapMemoryToGpuArgs { handle, device_ids_array_ptr: ids.as_ptr() as u64, n_devices: 1, n_success: 0 };
    // SAFETY: MAP reads and writes its struct, which `a` is, and reads one u32 through
    // device_ids_array_ptr, which `ids` is (alive past the call).
    unsafe { ioctl(fd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, a.as_mut_bytes()) }
}

/// CUSE_KFD_KICK on `fd`: 0 or the errno.
pub fn kick(fd: RawFd) -> i32 {
    // SAFETY: KICK has no argument; the pointer is not used.
    unsafe { ioctl(fd, uapi::vendor::CUSE_KFD_IOC_KICK, &mut []) }
}

/// open(2) read-write: the descriptor or the errno.
pub fn open_rw(path: &CStr, cloexec: bool) -> Result<RawFd, i32> {
    let flags = libc::O_RDWR | if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd)
    }
}

pub fn close(fd: RawFd) {
    // SAFETY: closing a descriptor this process owns and no Rust object holds.
    unsafe { libc::close(fd) };
}

/// Ends a forked process at once (no destructors, no atexit handlers: async-signal-safe).
pub fn exit(code: i32) -> ! {
    // SAFETY: _exit(2) is async-signal-safe and never returns.
    unsafe { libc::_exit(code) }
}

/// A message of the one data byte at `iov`, with all of `space` for control messages. It points
/// at both: they must outlive the call that uses it.
fn one_byte_msg(iov: &mut libc::iovec, space: &mut [u64; 8]) -> libc::msghdr {
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(space);
    msg
}

/// Sends `fd` over the connected UNIX socket `sock` (SCM_RIGHTS) with one data byte.
pub fn send_fd(sock: RawFd, fd: RawFd) -> i32 {
    let mut byte = [1u8];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // Room for one cmsghdr with one int, aligned as cmsghdr wants.
    let mut space = [0u64; 8];
    let mut msg = one_byte_msg(&mut iov, &mut space);
    // SAFETY: CMSG_SPACE only computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    // SAFETY: msg_control points at `space` (64 bytes, 8-aligned), larger than CMSG_SPACE(4), so
    // the first header and its data lie inside it.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
    }
    // SAFETY: `msg` points at `iov`, `byte` and `space`, all alive past the call.
    let r = unsafe { libc::sendmsg(sock, &msg, 0) };
    if r < 0 {
        errno()
    } else {
        0
    }
}

/// Receives a descriptor sent by [`send_fd`] on `sock`.
pub fn recv_fd(sock: RawFd) -> Result<RawFd, i32> {
    let mut byte = [0u8];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut space = [0u64; 8];
    let mut msg = one_byte_msg(&mut iov, &mut space);
    // SAFETY: `msg` points at `iov`, `byte` and `space`, all alive past the call.
    let r = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if r <= 0 {
        return Err(if r == 0 { libc::EPIPE } else { errno() });
    }
    // SAFETY: the kernel filled `space` with msg_controllen bytes of control messages; the
    // header macros stay inside them.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS {
            return Err(libc::EBADMSG);
        }
        Ok(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>()))
    }
}

/// A connected pair of UNIX stream sockets (close-on-exec).
pub fn socketpair() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd), i32> {
    let mut fds = [0; 2];
    // SAFETY: socketpair(2) writes two descriptors into `fds`.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    if r != 0 {
        return Err(errno());
    }
    // SAFETY: the two descriptors are new and owned by nothing else.
    Ok(unsafe {
        (
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[0]),
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1]),
        )
    })
}

/// Reads one byte from `fd` (blocking): the byte, or the errno (EPIPE at end of file).
pub fn read_byte(fd: RawFd) -> Result<u8, i32> {
    let mut b = [0u8];
    // SAFETY: reads at most one byte into `b`.
    match unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) } {
        1 => Ok(b[0]),
        0 => Err(libc::EPIPE),
        _ => Err(errno()),
    }
}

/// Writes all of `data` to `fd`: 0 or the errno.
pub fn write_all(fd: RawFd, data: &[u8]) -> i32 {
    // SAFETY: writes from `data`, valid for its length.
    let r = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    if r == data.len() as isize {
        0
    } else {
        errno()
    }
}

/// Sleeps `ms` milliseconds (nanosleep: async-signal-safe).
pub fn sleep_ms(ms: u64) {
    let ts = libc::timespec { tv_sec: (ms / 1000) as libc::time_t, tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long };
    // SAFETY: reads `ts`; a null remainder is allowed.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// fork(2): 0 in the child, the child's pid in the parent, or the errno.
///
/// # Safety
///
/// In the child, until it execs or exits, only async-signal-safe calls (this module).
pub unsafe fn fork() -> Result<libc::pid_t, i32> {
    // SAFETY: the caller's contract covers the child.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        Err(errno())
    } else {
        Ok(pid)
    }
}

/// Waits for `pid` up to `within`, calling `tick` every millisecond or so; its exit code (128 +
/// the signal if killed), or None if it did not end in time (it is then SIGKILLed and reaped).
pub fn wait_for(pid: libc::pid_t, within: std::time::Duration, tick: &dyn Fn()) -> Option<i32> {
    let t0 = std::time::Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes `status`.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            });
        }
        if r < 0 {
            return Some(-errno());
        }
        if t0.elapsed() > within {
            // SAFETY: signals and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        tick();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_descriptor_sent_arrives_as_the_same_open_file() {
        let (a, b) = socketpair().expect("socketpair");
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        assert_eq!(send_fd(a.as_raw_fd(), file.as_raw_fd()), 0);
        let got = recv_fd(b.as_raw_fd()).expect("recv_fd");
        assert_ne!(got, file.as_raw_fd());
        // SAFETY: recv_fd made `got`, a descriptor nothing else owns.
        let got = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(got) });
        let (m, n) = (file.metadata().unwrap(), got.metadata().unwrap());
        assert_eq!((m.dev(), m.ino()), (n.dev(), n.ino()));
        drop(a);
        assert_eq!(recv_fd(b.as_raw_fd()), Err(libc::EPIPE), "a closed peer");
    }
}
