//! The unsafe part: the exported `mmap`/`mmap64` that replace libc's for the whole process,
//! the raw mmap syscall behind them, and cuse-kfd's runtime-info ioctl.

use std::os::fd::{AsRawFd, RawFd};
use uapi::vendor::{RuntimeInfo, CUSE_KFD_IOC_GET_RUNTIME_INFO};

/// The kernel's mmap, bypassing libc's (which this library replaces). glibc's syscall() gives
/// -1 (MAP_FAILED) and sets errno on failure, which is mmap's contract too.
fn raw_mmap(addr: *mut libc::c_void, len: usize, prot: i32, flags: i32, fd: RawFd, off: i64) -> *mut libc::c_void {
    // SAFETY: the arguments go to the kernel unchanged, exactly as the caller's libc mmap would
    // pass them; creating a mapping (even MAP_FIXED over the caller's own reservation) is what
    // the caller asked for.
    let r = unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) };
    r as *mut libc::c_void
}

fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno, always valid to write.
    unsafe { *libc::__errno_location() = e };
}

/// libc's mmap, with device mappings redirected to their backing files (see the crate docs).
#[no_mangle]
pub extern "C" fn mmap(
    addr: *mut libc::c_void,
    len: libc::size_t,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    offset: libc::off_t,
) -> *mut libc::c_void {
    if flags & libc::MAP_ANONYMOUS == 0 {
        match super::redirect(fd, offset as u64, len as u64) {
            None => {}
            Some(Ok(file)) => return raw_mmap(addr, len, prot, flags, file.as_raw_fd(), 0),
            Some(Err(e)) => {
                set_errno(e);
                return libc::MAP_FAILED;
            }
        }
    }
    raw_mmap(addr, len, prot, flags, fd, offset)
}

/// The same symbol under its large-file name (one function on 64-bit glibc).
#[no_mangle]
pub extern "C" fn mmap64(
    addr: *mut libc::c_void,
    len: libc::size_t,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    offset: libc::off_t,
) -> *mut libc::c_void {
    mmap(addr, len, prot, flags, fd, offset)
}

/// cuse-kfd's CUSE_KFD_IOC_GET_RUNTIME_INFO on `fd`.
pub fn runtime_info(fd: RawFd) -> Result<RuntimeInfo, i32> {
    let mut info = RuntimeInfo::default();
    // SAFETY: `info` is a live, writable RuntimeInfo of exactly the size the ioctl number
    // encodes; the device writes at most that many bytes.
    let r = unsafe { libc::ioctl(fd, CUSE_KFD_IOC_GET_RUNTIME_INFO as _, &mut info as *mut RuntimeInfo) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn other_file_mappings_pass_through_this_mmap() {
        // This test binary exports the replacement `mmap`, so this call goes through it.
        let mut path = std::env::temp_dir();
        path.push(format!("kfd-preload-test-{}", std::process::id()));
        std::fs::write(&path, b"hello, mapping").unwrap();
        let f = File::open(&path).unwrap();
        let p = mmap(std::ptr::null_mut(), 14, libc::PROT_READ, libc::MAP_PRIVATE, f.as_raw_fd(), 0);
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: a live 14-byte read-only mapping made just above.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, 14) };
        assert_eq!(bytes, b"hello, mapping");
        // SAFETY: unmaps exactly the mapping made above; `bytes` is not used after.
        unsafe { libc::munmap(p, 14) };
        std::fs::remove_file(&path).unwrap();
    }
}
