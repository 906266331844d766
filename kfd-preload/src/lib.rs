//! An LD_PRELOAD library for running the real libhsakmt on a cuse-kfd node
//! (`cuse-kfd run --thunk system`).
//!
//! CUSE cannot mmap, and the render node is a regular-file stand-in, so the mmaps libhsakmt
//! makes on them would fail (kfd fd: ENODEV) or map nothing the device sees (render fd: an empty
//! file, SIGBUS on access). This library replaces `mmap`: a mapping of the kfd fd (doorbells, the
//! MMIO remap page, the event page) or of a render fd (VRAM and GTT buffers at their
//! mmap_offset) becomes the same mapping (address, length, protection, flags) of the device's
//! backing file for that offset, at file offset 0 (cuse_kfd::memory::backing documents the
//! scheme: `<runtime dir>/<pid>/{kfd,render}/<offset as 16 hex digits>`). Every other mmap goes
//! to the kernel untouched.
//!
//! The runtime directory and the pid the device knows this process by come from cuse-kfd's
//! vendor ioctl on the process's /dev/kfd fd.
//!
//! libhsakmt also asks libdrm_amdgpu for each GPU's marketing name (amdgpu_device_initialize
//! on the render fd, amdgpu_get_marketing_name), which a regular file cannot answer. For a
//! render stand-in this library answers those three calls itself, with the name libdrm would
//! give: the first entry of libdrm's amdgpu.ids for the node's device_id (what our own thunk
//! reports too). Real render nodes go to libdrm_amdgpu.

mod sys;

use parking_lot::Mutex;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use uapi::kfd::{KFD_MMAP_TYPE_DOORBELL, KFD_MMAP_TYPE_MASK};

/// Where libhsakmt opens the device and its render nodes (fixed paths in libhsakmt 5.2).
const KFD_PATH: &str = "/dev/kfd";
const RENDER_PREFIX: &str = "/dev/dri/renderD";

/// The bytes of a process doorbell slice (cuse_kfd::queue::doorbell::DOORBELL_SLICE_SIZE): a
/// doorbell offset with low bits set names the slice's file.
const DOORBELL_SLICE_SIZE: u64 = 8192;

/// Which backing directory an fd's mmap offsets live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Kfd,
    Render,
}

/// What an fd is, from the path it was opened by.
fn space_of(fd: RawFd) -> Option<Space> {
    let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let path = path.to_str()?;
    if path == KFD_PATH {
        Some(Space::Kfd)
    } else if path.starts_with(RENDER_PREFIX) {
        Some(Space::Render)
    } else {
        None
    }
}

/// The device's answer for this process: (our pid when asked, runtime dir, the device's pid).
static RUNTIME: Mutex<Option<(u32, PathBuf, u32)>> = Mutex::new(None);

/// The runtime directory and the device's pid for this process, asked once per process (a
/// forked child asks again) on `kfd` or, failing that, on any open /dev/kfd fd.
fn runtime(kfd: Option<RawFd>) -> Result<(PathBuf, u32), i32> {
    let me = std::process::id();
    let mut cached = RUNTIME.lock();
    if let Some((_, dir, dev_pid)) = cached.as_ref().filter(|c| c.0 == me) {
        return Ok((dir.clone(), *dev_pid));
    }
    let fd = match kfd {
        Some(fd) => fd,
        None => find_kfd_fd().ok_or(libc::EBADF)?,
    };
    let info = sys::runtime_info(fd)?;
    let bytes = uapi::IntoBytes::as_bytes(&info.runtime_dir);
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    let dir = PathBuf::from(String::from_utf8_lossy(&bytes[..end]).into_owned());
    *cached = Some((me, dir.clone(), info.pid));
    Ok((dir, info.pid))
}

fn find_kfd_fd() -> Option<RawFd> {
    std::fs::read_dir("/proc/self/fd")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<RawFd>().ok())
        .find(|&fd| space_of(fd) == Some(Space::Kfd))
}

fn backing_path(dir: &Path, pid: u32, space: Space, offset: u64) -> PathBuf {
    let sub = match space {
        Space::Kfd => "kfd",
        Space::Render => "render",
    };
    dir.join(pid.to_string()).join(sub).join(format!("{offset:016x}"))
}

/// Opens a backing file for read and write: never through a symlink (O_NOFOLLOW: whoever can
/// write the directory must not redirect the mapping to another file), and not into exec'd
/// programs (O_CLOEXEC, as std always sets).
fn open_backing(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
}

/// The backing file to map instead of `len` bytes at `offset` of `fd`: `None` to leave the
/// mmap alone, `Some(Err(errno))` when it is a device mapping that has no file.
fn redirect(fd: RawFd, offset: u64, len: u64) -> Option<Result<File, i32>> {
    if fd < 0 {
        return None;
    }
    let space = space_of(fd)?;
    Some((|| {
        let (dir, pid) = runtime((space == Space::Kfd).then_some(fd))?;
        let mut candidates = vec![offset];
        if space == Space::Kfd && offset & KFD_MMAP_TYPE_MASK == KFD_MMAP_TYPE_DOORBELL {
            candidates.push(offset & !(DOORBELL_SLICE_SIZE - 1));
        }
        for off in candidates {
            let path = backing_path(&dir, pid, space, off);
            if let Ok(file) = open_backing(&path) {
                // Past the file's end the pages would SIGBUS: refuse as amdkfd refuses a mapping
                // larger than its object.
                return match file.metadata() {
                    Ok(m) if m.len() >= len => Ok(file),
                    _ => Err(libc::EINVAL),
                };
            }
        }
        // amdkfd answers EINVAL for an offset naming no object.
        Err(libc::EINVAL)
    })())
}

/// Where libhsakmt reads the topology (served by `cuse-kfd run` in its mount namespace).
const TOPOLOGY_NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

/// libdrm's table of board names (what amdgpu_get_marketing_name reads).
const AMDGPU_IDS: &str = "/usr/share/libdrm/amdgpu.ids";

/// The value of `key` in a sysfs properties text ("key value" lines).
fn property(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The first board name `amdgpu_ids` (amdgpu.ids' "ID, REVISION, NAME" lines) gives `device_id`.
fn board_name(amdgpu_ids: &str, device_id: u64) -> Option<String> {
    amdgpu_ids.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (id, rest) = l.split_once(',')?;
        let (_revision, name) = rest.split_once(',')?;
        (u64::from_str_radix(id.trim(), 16).ok()? == device_id).then(|| name.trim().to_string())
    })
}

/// The marketing name of the GPU whose render stand-in (a regular file, not a DRM node) is
/// `fd`; `None` for anything else or when libdrm's table has no name for it.
fn stand_in_marketing_name(fd: RawFd) -> Option<CString> {
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let minor: u64 = link.to_str()?.strip_prefix(RENDER_PREFIX)?.parse().ok()?;
    if !std::fs::metadata(format!("/proc/self/fd/{fd}")).ok()?.is_file() {
        return None;
    }
    let device_id = std::fs::read_dir(TOPOLOGY_NODES).ok()?.flatten().find_map(|node| {
        let text = std::fs::read_to_string(node.path().join("properties")).ok()?;
        (property(&text, "drm_render_minor")? == minor).then(|| property(&text, "device_id"))?
    })?;
    let name = board_name(&std::fs::read_to_string(AMDGPU_IDS).ok()?, device_id)?;
    CString::new(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn only_the_device_paths_are_device_fds() {
        let f = File::open("/proc/self/status").unwrap();
        assert_eq!(space_of(f.as_raw_fd()), None);
        assert_eq!(redirect(f.as_raw_fd(), 0, 4096).map(|r| r.is_ok()), None);
        assert!(redirect(-1, 0, 4096).is_none());
        assert_eq!(space_of(-1), None);
    }

    #[test]
    fn board_names_come_from_the_first_matching_amdgpu_ids_line() {
        let ids = "# comment\n1.0.0\n73BF,\tC0,\tAMD Radeon RX 6900 XT\n73BF,\tC1,\tAMD Radeon RX 6800 XT\n\
                   740F,\t02,\tAMD Instinct MI210\n";
        assert_eq!(board_name(ids, 0x740F).as_deref(), Some("AMD Instinct MI210"));
        assert_eq!(board_name(ids, 0x73BF).as_deref(), Some("AMD Radeon RX 6900 XT"));
        assert_eq!(board_name(ids, 0x1234), None);
        let props = "cpu_cores_count 0\ndevice_id 29711\ndrm_render_minor 128\n";
        assert_eq!(property(props, "device_id"), Some(0x740F));
        assert_eq!(property(props, "drm_render_minor"), Some(128));
        assert_eq!(property(props, "device"), None);
        let f = File::open("/proc/self/status").unwrap();
        assert_eq!(stand_in_marketing_name(f.as_raw_fd()), None);
    }

    #[test]
    fn l6_o_nofollow_a_symlinked_backing_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (file, link) = (dir.path().join("0000000100000000"), dir.path().join("0000000100001000"));
        std::fs::write(&file, [0u8; 4096]).unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let opened = open_backing(&file).unwrap();
        // SAFETY: fcntl F_GETFD on an fd this test owns; no memory is passed.
        let fd_flags = unsafe { libc::fcntl(opened.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(fd_flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC, "backing fds are close-on-exec");
        let e = open_backing(&link).expect_err("a symlink under a backing file's name was followed");
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    }

    #[test]
    fn backing_paths_follow_the_device_scheme() {
        let p = backing_path(Path::new("/run/x"), 42, Space::Kfd, 0xC000_4000_0000_0000);
        assert_eq!(p, Path::new("/run/x/42/kfd/c000400000000000"));
        let p = backing_path(Path::new("/run/x"), 7, Space::Render, 0x1000);
        assert_eq!(p, Path::new("/run/x/7/render/0000000000001000"));
    }
}
