//! The unsafe part: the exported `mmap`/`mmap64` that replace libc's for the whole process,
//! the raw mmap syscall behind them, cuse-kfd's runtime-info ioctl, and the three
//! libdrm_amdgpu calls answered for render stand-ins (others forwarded to libdrm_amdgpu).

use parking_lot::Mutex;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::{AsRawFd, RawFd};
use uapi::vendor::{RuntimeInfo, CUSE_KFD_IOC_GET_RUNTIME_INFO};

/// The kernel's mmap, bypassing libc's (which this library replaces). glibc's syscall() gives
/// -1 (MAP_FAILED) and sets errno on failure, which is mmap's contract too.
///
/// # Safety
///
/// As for [`mmap`].
unsafe fn raw_mmap(
    addr: *mut libc::c_void,
    len: usize,
    prot: i32,
    flags: i32,
    fd: RawFd,
    off: i64,
) -> *mut libc::c_void {
    // SAFETY: the arguments go to the kernel unchanged, exactly as the caller's libc mmap would
    // pass them; a MAP_FIXED range is the caller's to replace (this function's contract).
    let r = unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) };
    r as *mut libc::c_void
}

fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno, always valid to write.
    unsafe { *libc::__errno_location() = e };
}

/// libc's mmap, with device mappings redirected to their backing files (see the crate docs).
///
/// # Safety
///
/// mmap(2)'s contract: with MAP_FIXED, `[addr, addr + len)` must hold nothing the caller
/// still uses, since the new mapping replaces it.
#[no_mangle]
pub unsafe extern "C" fn mmap(
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
            // SAFETY: the caller's arguments, under the caller's contract; only the file differs.
            Some(Ok(file)) => return unsafe { raw_mmap(addr, len, prot, flags, file.as_raw_fd(), 0) },
            Some(Err(e)) => {
                set_errno(e);
                return libc::MAP_FAILED;
            }
        }
    }
    // SAFETY: the caller's arguments, under the caller's contract.
    unsafe { raw_mmap(addr, len, prot, flags, fd, offset) }
}

/// The same symbol under its large-file name (one function on 64-bit glibc).
///
/// # Safety
///
/// As for [`mmap`].
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut libc::c_void,
    len: libc::size_t,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    offset: libc::off_t,
) -> *mut libc::c_void {
    // SAFETY: the caller's arguments, under the same contract.
    unsafe { mmap(addr, len, prot, flags, fd, offset) }
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

/// glibc's RTLD_NEXT: the next definition of a symbol after this library's.
const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

/// The next definition of `name`, i.e. libdrm_amdgpu's.
fn next(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: `name` is NUL-terminated (a CStr) and outlives the call; dlsym only reads it.
    let f = unsafe { libc::dlsym(RTLD_NEXT, name.as_ptr()) };
    (!f.is_null()).then_some(f)
}

/// The handles this library made (each a leaked `Box<CString>`: the marketing name).
static STAND_IN_HANDLES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn is_ours(handle: *mut c_void) -> bool {
    STAND_IN_HANDLES.lock().contains(&(handle as usize))
}

/// libdrm_amdgpu's `amdgpu_device_initialize`: for a render stand-in, a handle that only
/// answers `amdgpu_get_marketing_name`.
///
/// # Safety
///
/// libdrm's contract: `major`, `minor` and `handle` are each null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_device_initialize(
    fd: c_int,
    major: *mut u32,
    minor: *mut u32,
    handle: *mut *mut c_void,
) -> c_int {
    if let Some(name) = super::stand_in_marketing_name(fd).filter(|_| !handle.is_null()) {
        let h = Box::into_raw(Box::new(name)) as *mut c_void;
        STAND_IN_HANDLES.lock().push(h as usize);
        // SAFETY: the caller passes writable out-pointers (libdrm's contract; `handle` checked
        // non-null above, the version pointers checked here). 3.0: amdgpu's DRM interface.
        unsafe {
            if !major.is_null() {
                *major = 3;
            }
            if !minor.is_null() {
                *minor = 0;
            }
            *handle = h;
        }
        return 0;
    }
    let Some(f) = next(c"amdgpu_device_initialize") else { return -libc::ENOSYS };
    // SAFETY: libdrm_amdgpu's function of exactly this signature, called with the caller's
    // arguments.
    unsafe {
        let f: unsafe extern "C" fn(c_int, *mut u32, *mut u32, *mut *mut c_void) -> c_int = std::mem::transmute(f);
        f(fd, major, minor, handle)
    }
}

/// libdrm_amdgpu's `amdgpu_get_marketing_name`.
///
/// # Safety
///
/// `handle` is one `amdgpu_device_initialize` gave and `amdgpu_device_deinitialize` has not
/// taken back (libdrm's contract).
#[no_mangle]
pub unsafe extern "C" fn amdgpu_get_marketing_name(handle: *mut c_void) -> *const c_char {
    if is_ours(handle) {
        // SAFETY: one of our live handles (a leaked Box<CString>, freed only by deinitialize).
        return unsafe { (*(handle as *const CString)).as_ptr() };
    }
    let Some(f) = next(c"amdgpu_get_marketing_name") else { return std::ptr::null() };
    // SAFETY: libdrm_amdgpu's function of exactly this signature, with the caller's handle.
    unsafe {
        let f: unsafe extern "C" fn(*mut c_void) -> *const c_char = std::mem::transmute(f);
        f(handle)
    }
}

/// libdrm_amdgpu's `amdgpu_device_deinitialize`.
///
/// # Safety
///
/// As for [`amdgpu_get_marketing_name`]; the handle is not used after this call.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_device_deinitialize(handle: *mut c_void) -> c_int {
    let mut ours = STAND_IN_HANDLES.lock();
    if let Some(i) = ours.iter().position(|h| *h == handle as usize) {
        ours.swap_remove(i);
        // SAFETY: made by Box::into_raw in amdgpu_device_initialize and removed from the list
        // just now, so freed exactly once.
        drop(unsafe { Box::from_raw(handle as *mut CString) });
        return 0;
    }
    drop(ours);
    let Some(f) = next(c"amdgpu_device_deinitialize") else { return -libc::ENOSYS };
    // SAFETY: libdrm_amdgpu's function of exactly this signature, with the caller's handle.
    unsafe {
        let f: unsafe extern "C" fn(*mut c_void) -> c_int = std::mem::transmute(f);
        f(handle)
    }
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
        // SAFETY: no MAP_FIXED: the kernel picks a fresh address, which replaces nothing.
        let p = unsafe { mmap(std::ptr::null_mut(), 14, libc::PROT_READ, libc::MAP_PRIVATE, f.as_raw_fd(), 0) };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: a live 14-byte read-only mapping made just above.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, 14) };
        assert_eq!(bytes, b"hello, mapping");
        // SAFETY: unmaps exactly the mapping made above; `bytes` is not used after.
        unsafe { libc::munmap(p, 14) };
        std::fs::remove_file(&path).unwrap();
    }
}
