//! `cuse-kfd run`: an unmodified ROCm program on our device. Puts our libhsakmt.so.1 (and, with
//! `--runtime shim`, our libhsa-runtime64.so.1) first on the library path, answers the
//! `lsmod | grep amdgpu` check rocminfo makes, gives the program a /dev/kfd it can open (a
//! private mount namespace where there is none), picks the transport (the device embedded in the
//! program's own process, or a cuse-kfd node), then execs the program.

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

pub struct RunArgs {
    pub transport: Transport,
    /// `rocr` (the system's real ROCr) or `shim` (ours).
    pub runtime: String,
    pub profile: String,
    pub gpus: usize,
    pub program: Vec<OsString>,
}

/// The directory of this executable's cargo profile (target/debug or target/release).
fn profile_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    Ok(exe.parent().ok_or("this executable has no directory")?.to_path_buf())
}

/// `<profile dir>/lib` holding `soname` -> the cargo-built `built`, building the package first
/// when it is missing and cargo is at hand (as under `cargo run`).
fn library(profile: &Path, package: &str, built: &str, soname: &str) -> Result<PathBuf, String> {
    let lib = profile.join(built);
    if !lib.is_file() {
        let cargo = std::env::var_os("CARGO").ok_or_else(|| {
            format!("{} is missing: build it with `cargo build -p {package}` (same profile as cuse-kfd)", lib.display())
        })?;
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q", "-p", package]);
        if profile.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        eprintln!("cuse-kfd run: building {package} (its library is not built yet)");
        let st = cmd.status().map_err(|e| format!("running cargo: {e}"))?;
        if !st.success() || !lib.is_file() {
            return Err(format!("building {package} failed ({st})"));
        }
    }
    let dir = profile.join("lib");
    let link = dir.join(soname);
    // Already in place: leave it (the device tier's VM sees the target directory read-only).
    if std::fs::read_link(&link).is_ok_and(|t| t == lib) {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&lib, &link).map_err(|e| format!("linking {}: {e}", link.display()))?;
    Ok(dir)
}

/// A directory with an `lsmod` that reports amdgpu, as rocminfo requires before it starts.
fn fake_lsmod() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("cuse-kfd-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let script = dir.join("lsmod");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'Module                  Size  Used by'\necho 'amdgpu               9076736  0'\n",
    )
    .map_err(|e| format!("writing {}: {e}", script.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    Ok(dir)
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

/// Puts `kfd` (a node to bind, or an empty file for the embedded device, which rocminfo only
/// opens) at /dev/kfd: a tmpfs over /dev carrying over everything /dev had.
fn provide_dev_kfd(kfd: Option<&Path>) -> Result<(), String> {
    private_mounts()?;
    let old = std::env::temp_dir().join(format!("cuse-kfd-run-dev-{}", std::process::id()));
    std::fs::create_dir_all(&old).map_err(|e| format!("creating {}: {e}", old.display()))?;
    bind(Path::new("/dev"), &old)?;
    mount(Some("tmpfs"), "/dev", Some("tmpfs"), MsFlags::MS_NOSUID, Some("mode=755"))
        .map_err(|e| format!("mounting a tmpfs on /dev: {e}"))?;
    for entry in std::fs::read_dir(&old).map_err(|e| e.to_string())?.flatten() {
        let (src, dst) = (entry.path(), Path::new("/dev").join(entry.file_name()));
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
    let dev_kfd = Path::new("/dev/kfd");
    std::fs::File::create(dev_kfd).map_err(|e| format!("creating /dev/kfd: {e}"))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dev_kfd, std::fs::Permissions::from_mode(0o666)).map_err(|e| e.to_string())?;
    if let Some(node) = kfd {
        bind(node, dev_kfd)?;
    }
    Ok(())
}

/// Sets everything up and execs the program; returns only on failure.
pub fn run(a: RunArgs) -> Result<(), String> {
    let Some((program, args)) = a.program.split_first() else {
        return Err("no program to run (cuse-kfd run [OPTIONS] -- PROGRAM ARGS...)".into());
    };
    let profile = profile_dir()?;
    let mut libs = library(&profile, "hsakmt", "libhsakmt.so", "libhsakmt.so.1")?;
    match a.runtime.as_str() {
        "rocr" => {}
        "shim" => libs = library(&profile, "rocr-shim", "librocr_shim.so", "libhsa-runtime64.so.1")?,
        other => return Err(format!("unknown runtime {other:?} (rocr or shim)")),
    }
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd.env("LD_LIBRARY_PATH", prepend("LD_LIBRARY_PATH", &libs));
    cmd.env("PATH", prepend("PATH", &fake_lsmod()?));
    cmd.env("CUSE_KFD_PROFILE", &a.profile).env("CUSE_KFD_GPUS", a.gpus.to_string());
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
