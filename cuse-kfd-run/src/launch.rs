//! `cuse-kfd run` (the `cuse-kfd-run` executable): an unmodified ROCm program on our device. Puts our libhsakmt.so.1 (and, with
//! `--runtime shim`, our libhsa-runtime64.so.1) first on the library path, answers the
//! `lsmod | grep amdgpu` check rocminfo makes, gives the program a /dev/kfd it can open (a
//! private mount namespace where there is none), picks the transport (the device embedded in the
//! program's own process, or a cuse-kfd node), then execs the program.
//!
//! With `--thunk system` the program keeps the system's libhsakmt.so.1, which talks to the
//! kernel interfaces directly, so the private mount namespace gives it all of them: the node at
//! /dev/kfd, the daemon's topology as a FUSE tree at /sys/devices/virtual/kfd/kfd, a regular
//! file standing in for each GPU's `/dev/dri/renderD<minor>`, and kfd-preload in LD_PRELOAD
//! to turn its mmaps of those into mappings of the device's backing files. `run` then stays as
//! the parent that serves the FUSE tree until the program exits.
//!
//! The `lsmod` stand-in lives in a fresh mkdtemp directory removed after the program exits
//! (`scratch`). As root, only what no other user can change goes on the program's PATH,
//! LD_LIBRARY_PATH and LD_PRELOAD ([`trust`]; `--allow-user-writable` overrides).

use crate::stage::{self, Library};
use crate::{scratch, trust};
use cuse_kfd::frontend::topology_fs::{SysfsMount, SysfsTree};
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How the program reaches the device.
pub enum Transport {
    /// The device inside the program's process (CUSE_KFD_EMBEDDED=1).
    Embedded,
    /// A cuse-kfd node.
    Device(PathBuf),
}

/// Which libhsakmt.so.1 the program uses.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Thunk {
    /// Ours (hsakmt), first on the library path.
    Ours,
    /// The system's (e.g. Debian's libhsakmt1), over a cuse-kfd node.
    System,
}

pub struct RunArgs {
    pub transport: Transport,
    pub thunk: Thunk,
    /// `rocr` (the system's real ROCr) or `shim` (ours).
    pub runtime: String,
    /// The embedded device's profile and GPU count, where given (a node serves its daemon's).
    pub profile: Option<String>,
    pub gpus: Option<usize>,
    /// As root, accept libraries and directories other users can change (see [`trust`]).
    pub allow_user_writable: bool,
    pub program: Vec<OsString>,
}

/// `path` as it goes into the program's environment: as root (unless `allow_user_writable`),
/// resolved and only if no other user can change it ([`trust::only_root_can_change`]).
fn vetted(path: &Path, allow_user_writable: bool) -> Result<PathBuf, String> {
    if nix::unistd::geteuid().is_root() && !allow_user_writable {
        trust::only_root_can_change(path)
    } else {
        Ok(path.to_path_buf())
    }
}

fn prepend(var: &str, dir: &Path) -> OsString {
    let mut v = OsString::from(dir);
    if let Some(old) = std::env::var_os(var).filter(|o| !o.is_empty()) {
        v.push(":");
        v.push(old);
    }
    v
}

/// Enters a private mount namespace (through a user namespace when not root).
fn private_mounts() -> Result<(), String> {
    if nix::unistd::geteuid().is_root() {
        unshare(CloneFlags::CLONE_NEWNS).map_err(|e| format!("unshare(CLONE_NEWNS): {e}"))?;
    } else {
        let (uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
            .map_err(|e| format!("unshare(CLONE_NEWUSER|CLONE_NEWNS): {e} (no root and no user namespaces)"))?;
        let w = |f: &str, s: String| std::fs::write(f, s).map_err(|e| format!("writing {f}: {e}"));
        w("/proc/self/setgroups", "deny".into())?;
        w("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        w("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    }
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(|e| format!("making / private: {e}"))
}

fn bind(src: &Path, dst: &Path) -> Result<(), String> {
    mount(Some(src), dst, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
        .map_err(|e| format!("bind-mounting {} on {}: {e}", src.display(), dst.display()))
}

/// Mounts a tmpfs over `dir` that carries over what `dir` had (bind mounts of its entries),
/// except the names in `skip`, so that entries can be added without touching the original.
/// The original stays reachable through a descriptor opened before the tmpfs hides it: no
/// temporary directory, no name anyone else could have made first.
fn overlay(dir: &Path, skip: &[&str]) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let held = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(dir)
        .map_err(|e| format!("opening {}: {e}", dir.display()))?;
    let old = PathBuf::from(format!("/proc/self/fd/{}", held.as_raw_fd()));
    mount(Some("tmpfs"), dir, Some("tmpfs"), MsFlags::MS_NOSUID, Some("mode=755"))
        .map_err(|e| format!("mounting a tmpfs on {}: {e}", dir.display()))?;
    for entry in std::fs::read_dir(&old).map_err(|e| e.to_string())?.flatten() {
        if skip.iter().any(|s| entry.file_name() == *s) {
            continue;
        }
        let (src, dst) = (entry.path(), dir.join(entry.file_name()));
        let ft = entry.file_type().map_err(|e| e.to_string())?;
        if ft.is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| e.to_string())?;
            let _ = std::os::unix::fs::symlink(target, &dst);
        } else if ft.is_dir() {
            if std::fs::create_dir(&dst).is_ok() {
                let _ = bind(&src, &dst);
            }
        } else if std::fs::File::create(&dst).is_ok() {
            let _ = bind(&src, &dst);
        }
    }
    Ok(())
}

/// Creates /dev/kfd (mode 0666) and binds `node` on it.
fn put_dev_kfd(node: Option<&Path>) -> Result<(), String> {
    let dev_kfd = Path::new("/dev/kfd");
    std::fs::File::create(dev_kfd).map_err(|e| format!("creating /dev/kfd: {e}"))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dev_kfd, std::fs::Permissions::from_mode(0o666)).map_err(|e| e.to_string())?;
    match node {
        Some(node) => bind(node, dev_kfd),
        None => Ok(()),
    }
}

/// Puts `kfd` (a node to bind, or an empty file for the embedded device, which rocminfo only
/// opens) at /dev/kfd: a tmpfs over /dev carrying over everything /dev had.
fn provide_dev_kfd(kfd: Option<&Path>) -> Result<(), String> {
    private_mounts()?;
    overlay(Path::new("/dev"), &[])?;
    put_dev_kfd(kfd)
}

/// The runtime directory of the cuse-kfd node `node` (cuse-kfd's runtime-info ioctl).
fn runtime_dir_of(node: &Path) -> Result<PathBuf, String> {
    use std::os::fd::AsRawFd;
    use uapi::vendor::{RuntimeInfo, CUSE_KFD_IOC_GET_RUNTIME_INFO};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(node)
        .map_err(|e| format!("opening {}: {e}", node.display()))?;
    let mut info = RuntimeInfo::default();
    // SAFETY: `info` is a live, writable RuntimeInfo of exactly the size the ioctl number
    // encodes; the device writes at most that many bytes.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), CUSE_KFD_IOC_GET_RUNTIME_INFO as _, &mut info as *mut RuntimeInfo) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "{} does not answer cuse-kfd's runtime-info ioctl ({e}): not a cuse-kfd node",
            node.display()
        ));
    }
    let bytes = uapi::IntoBytes::as_bytes(&info.runtime_dir);
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    use std::os::unix::ffi::OsStrExt;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes[..end])))
}

/// The daemon's topology (`<runtime dir>/topology`, written by the device) as a FUSE tree, and
/// the render minors of its GPU nodes.
fn read_topology(runtime_dir: &Path) -> Result<(SysfsTree, Vec<u32>), String> {
    fn walk(base: &Path, rel: &str, dirs: &mut Vec<String>, files: &mut Vec<(String, String)>) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(base.join(rel))?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let path = format!("{rel}/{}", e.file_name().to_string_lossy());
            if e.file_type()?.is_dir() {
                dirs.push(path.clone());
                walk(base, &path, dirs, files)?;
            } else {
                let text = std::fs::read_to_string(base.join(&path))?;
                files.push((path, text));
            }
        }
        Ok(())
    }
    let (mut dirs, mut files) = (vec!["topology".to_string()], Vec::new());
    walk(runtime_dir, "topology", &mut dirs, &mut files)
        .map_err(|e| format!("reading the topology under {}: {e}", runtime_dir.display()))?;
    let minors = files
        .iter()
        .filter(|(p, _)| p.starts_with("topology/nodes/") && p.matches('/').count() == 3 && p.ends_with("/properties"))
        .filter_map(|(_, text)| {
            text.lines().find_map(|l| l.strip_prefix("drm_render_minor ").and_then(|v| v.trim().parse().ok()))
        })
        .filter(|m: &u32| *m != 0)
        .collect();
    let tree =
        SysfsTree::new(&dirs, &files).map_err(|e| format!("the topology under {}: {e}", runtime_dir.display()))?;
    Ok((tree, minors))
}

/// The mount namespace the system's libhsakmt needs (see the module docs); the tree is served
/// while the returned mount lives.
fn system_thunk_namespace(node: &Path, runtime_dir: &Path) -> Result<SysfsMount, String> {
    let (tree, minors) = read_topology(runtime_dir)?;
    private_mounts()?;
    // Held by an O_PATH fd (no open of the device itself), taken in the new namespace (a bind
    // source must be a mount of it): the node may be /dev/kfd, which the tmpfs below hides.
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let held = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(node)
        .map_err(|e| format!("opening {}: {e}", node.display()))?;
    // A host GPU's own /dev/dri and kfd sysfs are hidden: the program must see only our device.
    overlay(Path::new("/dev"), &["kfd", "dri"])?;
    put_dev_kfd(Some(Path::new(&format!("/proc/self/fd/{}", held.as_raw_fd()))))?;
    std::fs::create_dir("/dev/dri").map_err(|e| format!("creating /dev/dri: {e}"))?;
    for minor in minors {
        // libhsakmt opens it O_RDWR, hands the fd to ACQUIRE_VM and mmaps buffers through it
        // (redirected by kfd-preload); a regular file is enough for all three.
        let path = PathBuf::from(format!("/dev/dri/renderD{minor}"));
        std::fs::File::create(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).map_err(|e| e.to_string())?;
    }
    let kfd_dir = Path::new(cuse_kfd::topology::KFD_SYSFS_DIR);
    if !kfd_dir.is_dir() {
        // sysfs cannot make directories: a tmpfs over its parent's parent can.
        overlay(Path::new("/sys/devices/virtual"), &["kfd"])?;
        std::fs::create_dir_all(kfd_dir).map_err(|e| format!("creating {}: {e}", kfd_dir.display()))?;
    }
    tree.mount(kfd_dir).map_err(|e| format!("mounting the topology at {}: {e}", kfd_dir.display()))
}

/// The program gets SIGKILL when this process dies: it serves the program's topology tree, so a
/// `cuse-kfd run` that is killed must not leave the program behind on a dead mount.
fn die_with_this_process(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and calls only prctl and getppid,
    // which are async-signal-safe; it touches no memory of the parent's other threads.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Died between fork and prctl: the signal was never armed.
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("cuse-kfd run exited before the program started"));
            }
            Ok(())
        });
    }
}

/// Runs the program on the system's libhsakmt over `node` and exits with its status.
fn run_system_thunk(mut cmd: Command, profile: &Path, node: &Path, allow_user_writable: bool) -> Result<(), String> {
    let preload = vetted(&stage::KFD_PRELOAD.built(profile).map_err(|e| e.to_string())?, allow_user_writable)?;
    let runtime_dir = runtime_dir_of(node)?;
    let mut list = preload.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        list.push(":");
        list.push(old);
    }
    cmd.env("LD_PRELOAD", list);
    let _tree = system_thunk_namespace(node, &runtime_dir)?;
    die_with_this_process(&mut cmd);
    let status = cmd.status().map_err(|e| format!("running {:?}: {e}", cmd.get_program()))?;
    // Exiting ends the mount namespace and, with it, the tree (no unmount to wait for). _exit,
    // not exit: libc's exit-time teardown would race the FUSE thread, which is still serving.
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    let _ = (std::io::stdout().flush(), std::io::stderr().flush());
    let code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    // SAFETY: _exit ends the process at once; nothing of this process is used after it.
    unsafe { libc::_exit(code) }
}

/// Our libraries for `runtime` (`rocr`: our libhsakmt.so.1 under the system's ROCr; `shim`: our
/// libhsa-runtime64.so.1 too), staged in `profile`: the directories for LD_LIBRARY_PATH.
pub fn library_path(profile: &Path, runtime: &str) -> Result<OsString, String> {
    std::env::join_paths(library_dirs(profile, runtime)?).map_err(|e| format!("library path: {e}"))
}

/// The directories of [`library_path`], in order.
fn library_dirs(profile: &Path, runtime: &str) -> Result<Vec<PathBuf>, String> {
    let staged = |lib: &Library| lib.stage(profile).map_err(|e| e.to_string());
    // The shim's libhsa-runtime64.so.1 has a directory of its own: in the thunk's, it would
    // shadow the real ROCr for every later `--runtime rocr` run.
    match runtime {
        "rocr" => Ok(vec![staged(&stage::HSAKMT)?]),
        "shim" => Ok(vec![staged(&stage::HSA_RUNTIME_SHIM)?, staged(&stage::HSAKMT)?]),
        other => Err(format!("unknown runtime {other:?} (rocr or shim)")),
    }
}

/// Sets everything up and execs the program; returns only on failure.
pub fn run(a: RunArgs) -> Result<(), String> {
    let Some((program, args)) = a.program.split_first() else {
        return Err("no program to run (cuse-kfd run [OPTIONS] -- PROGRAM ARGS...)".into());
    };
    if let Transport::Device(node) = &a.transport {
        // A node's device is the daemon's: its profile and GPU count were chosen at `serve`.
        let given = [("profile", a.profile.is_some()), ("gpus", a.gpus.is_some())];
        for (opt, _) in given.iter().filter(|(_, g)| *g) {
            eprintln!(
                "cuse-kfd run: warning: --{opt} is ignored: it configures the embedded device (--embedded), and {} \
                 serves what its daemon was started with",
                node.display()
            );
        }
    }
    // The libraries are found beside this executable, as cargo builds them.
    let profile = stage::profile_dir().map_err(|e| format!("finding this executable: {e}"))?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    let lsmod = vetted(&scratch::lsmod_dir(&std::env::temp_dir())?, a.allow_user_writable)?;
    cmd.env("PATH", prepend("PATH", &lsmod));
    if a.thunk == Thunk::System {
        let Transport::Device(node) = &a.transport else {
            return Err("--thunk system needs a cuse-kfd node (--device PATH): the system's libhsakmt issues real \
                        ioctls on /dev/kfd, and the embedded device lives inside our libhsakmt"
                .into());
        };
        if a.runtime != "rocr" {
            return Err("--thunk system runs the system's ROCr (--runtime rocr): the shim is built on our thunk".into());
        }
        cmd.env_remove("CUSE_KFD_EMBEDDED");
        return run_system_thunk(cmd, &profile, node, a.allow_user_writable);
    }
    let dirs = library_dirs(&profile, &a.runtime)?;
    let dirs = dirs.iter().map(|d| vetted(d, a.allow_user_writable)).collect::<Result<Vec<_>, _>>()?;
    let libs = std::env::join_paths(dirs).map_err(|e| format!("library path: {e}"))?;
    cmd.env("LD_LIBRARY_PATH", prepend("LD_LIBRARY_PATH", Path::new(&libs)));
    let profile = a.profile.as_deref().unwrap_or(cuse_kfd::topology::DEFAULT_PROFILE);
    cmd.env("CUSE_KFD_PROFILE", profile).env("CUSE_KFD_GPUS", a.gpus.unwrap_or(1).to_string());
    let node = match &a.transport {
        Transport::Embedded => {
            cmd.env("CUSE_KFD_EMBEDDED", "1");
            None
        }
        Transport::Device(p) => {
            cmd.env_remove("CUSE_KFD_EMBEDDED").env("CUSE_KFD_DEVICE", p);
            Some(p.as_path())
        }
    };
    let kfd_ok = node.is_some_and(|n| n == Path::new("/dev/kfd")) || Path::new("/dev/kfd").exists();
    if !kfd_ok {
        if let Err(e) = provide_dev_kfd(node) {
            eprintln!("cuse-kfd run: could not provide /dev/kfd ({e}); programs that open it (rocminfo) will fail");
        }
    }
    Err(format!("running {}: {}", Path::new(program).display(), cmd.exec()))
}
