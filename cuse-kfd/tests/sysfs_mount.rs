//! The topology tree mounted through FUSE (`cuse_kfd::frontend::topology_fs`): read back through the kernel,
//! listed, refused writes, and unmounted. Needs root and /dev/fuse; without them each test says
//! why and returns.

use cuse_kfd::frontend::topology_fs::{self, SysfsMount, FSNAME};
use cuse_kfd::topology::{HostInfo, Profile, Topology, DEFAULT_PROFILE};
use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn topology() -> Topology {
    let host = HostInfo { cpu_cores: 8, mem_total: 16 << 30, max_clock_mhz: 3000 };
    Topology::with_host(Profile::by_name(DEFAULT_PROFILE).unwrap(), 2, host).unwrap()
}

/// Why FUSE mounts cannot be tested here, if they cannot.
fn unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: the mount syscall needs CAP_SYS_ADMIN".into());
    }
    if let Err(e) = fs::OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Some(format!("/dev/fuse cannot be opened: {e}"));
    }
    None
}

macro_rules! require_fuse {
    () => {
        if let Some(why) = unavailable() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// A fresh, empty mount point for one test.
fn mount_point(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuse-kfd-sysfs-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The mountinfo line of `dir`'s top mount, split in fields, if `dir` is a mount point.
fn mountinfo(dir: &Path) -> Option<Vec<String>> {
    let dir = dir.canonicalize().ok()?;
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap();
    // The last line for a mount point is the top of its stack.
    text.lines()
        .map(|l| l.split(' ').map(str::to_string).collect::<Vec<_>>())
        .rfind(|f| f.len() > 4 && Path::new(&f[4]) == dir)
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or_else(|| panic!("not an OS error: {e}"))
}

fn assert_refused(what: &str, r: io::Result<impl std::fmt::Debug>) {
    match r {
        Ok(v) => panic!("{what} succeeded ({v:?}) on a read-only tree"),
        Err(e) => assert!([libc::EROFS, libc::EACCES].contains(&errno(&e)), "{what}: {e}"),
    }
}

#[test]
fn every_file_reads_back_and_listings_match() {
    require_fuse!();
    let t = topology();
    let dir = mount_point("read");
    let m = topology_fs::mount(&t, &dir).expect("mounting");
    assert_eq!(m.dir(), dir.canonicalize().unwrap());

    for (path, text) in t.files() {
        let file = dir.join(&path);
        assert_eq!(fs::read_to_string(&file).unwrap(), text, "{path}");
        let meta = fs::metadata(&file).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o444, "{path}");
        assert_eq!((meta.uid(), meta.gid()), (0, 0));
        assert_eq!(meta.len(), text.len() as u64, "{path}");
        // A small-buffer read, as fgets does, sees the same bytes.
        let mut got = Vec::new();
        let mut f = fs::File::open(&file).unwrap();
        let mut buf = [0u8; 7];
        loop {
            let n = io::Read::read(&mut f, &mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, text.as_bytes(), "{path}");
    }

    // Each directory lists exactly the dirs() and files() right under it.
    let dirs = t.dirs();
    let files: Vec<String> = t.files().into_iter().map(|(p, _)| p).collect();
    let all: Vec<&String> = dirs.iter().chain(&files).collect();
    for d in std::iter::once(&String::new()).chain(&dirs) {
        let meta = fs::metadata(dir.join(d)).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o555, "{d:?}");
        let got: BTreeSet<String> =
            fs::read_dir(dir.join(d)).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        let want: BTreeSet<String> = all
            .iter()
            .filter_map(|p| match p.rsplit_once('/') {
                Some((parent, name)) if parent == d => Some(name.to_string()),
                None if d.is_empty() => Some(p.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(got, want, "listing of {d:?}");
        // Subdirectories by type, as readdir's d_type gives them.
        for e in fs::read_dir(dir.join(d)).unwrap() {
            let e = e.unwrap();
            let rel = if d.is_empty() {
                e.file_name().into_string().unwrap()
            } else {
                format!("{d}/{}", e.file_name().to_str().unwrap())
            };
            assert_eq!(e.file_type().unwrap().is_dir(), dirs.contains(&rel), "{rel}");
        }
    }
    assert!(fs::metadata(dir.join("topology/nodes/3")).is_err_and(|e| errno(&e) == libc::ENOENT));
    assert!(fs::metadata(dir.join("topology/generation_id/x")).is_err_and(|e| errno(&e) == libc::ENOTDIR));
    m.unmount().unwrap();
    fs::remove_dir(&dir).unwrap();
}

#[test]
fn the_mount_is_read_only_allow_other_and_named() {
    require_fuse!();
    let t = topology();
    let dir = mount_point("options");
    let m = topology_fs::mount(&t, &dir).expect("mounting");
    let f = mountinfo(&dir).expect("the mount is in mountinfo");
    let sep = f.iter().position(|x| x == "-").unwrap();
    let (opts, fstype, source, sopts) = (&f[5], &f[sep + 1], &f[sep + 2], &f[sep + 3]);
    assert_eq!((fstype.as_str(), source.as_str()), ("fuse", FSNAME));
    for o in ["ro", "nosuid", "nodev", "noexec"] {
        assert!(opts.split(',').any(|x| x == o), "{o} missing from {opts}");
    }
    for o in ["allow_other", "default_permissions"] {
        assert!(sopts.split(',').any(|x| x == o), "{o} missing from {sopts}");
    }

    // Another user reads it (allow_other, files 0444) and cannot write it.
    let props = dir.join("topology/nodes/1/properties");
    let out = Command::new("cat").arg(&props).uid(65534).gid(65534).output().unwrap();
    assert!(out.status.success(), "cat as nobody: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        t.files().iter().find(|f| f.0 == "topology/nodes/1/properties").unwrap().1
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("echo 1 > {}", props.display()))
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(!out.status.success(), "nobody wrote a topology file");
    drop(m);
    fs::remove_dir(&dir).unwrap();
}

#[test]
fn writes_creates_and_unlinks_fail() {
    require_fuse!();
    let t = topology();
    let dir = mount_point("write");
    let m = topology_fs::mount(&t, &dir).expect("mounting");
    let file = dir.join("topology/nodes/1/properties");
    let before = fs::read_to_string(&file).unwrap();

    assert_refused("open for writing", fs::OpenOptions::new().write(true).open(&file));
    assert_refused("open read-write", fs::OpenOptions::new().read(true).write(true).open(&file));
    assert_refused("open for appending", fs::OpenOptions::new().append(true).open(&file));
    assert_refused("truncating open", fs::OpenOptions::new().write(true).truncate(true).open(&file));
    assert_refused("fs::write", fs::write(&file, "x"));
    assert_refused("create", fs::File::create(dir.join("topology/new")));
    assert_refused("create_new", fs::OpenOptions::new().write(true).create_new(true).open(dir.join("new")));
    assert_refused("unlink", fs::remove_file(&file));
    assert_refused("rmdir", fs::remove_dir(dir.join("topology/nodes/1/perf")));
    assert_refused("mkdir", fs::create_dir(dir.join("topology/nodes/9")));
    assert_refused("rename", fs::rename(&file, dir.join("topology/nodes/1/p")));
    assert_refused("hard link", fs::hard_link(&file, dir.join("topology/l")));
    assert_refused("symlink", std::os::unix::fs::symlink("x", dir.join("topology/s")));
    assert_refused("chmod", fs::set_permissions(&file, fs::Permissions::from_mode(0o644)));
    assert_refused("chown", std::os::unix::fs::chown(&file, Some(1), None));
    let path = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; truncate(2) and access(2) only read it.
    assert_eq!(unsafe { libc::truncate(path.as_ptr(), 0) }, -1);
    assert_eq!(errno(&io::Error::last_os_error()), libc::EROFS, "truncate");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::access(path.as_ptr(), libc::W_OK) }, -1);
    assert_eq!(errno(&io::Error::last_os_error()), libc::EROFS, "access(W_OK)");
    // A read-only descriptor is refused by the VFS itself (EBADF/EINVAL), before FUSE.
    let f = fs::File::open(&file).unwrap();
    assert!(f.set_len(0).is_err());
    assert!((&f).write(b"x").is_err());

    assert_eq!(fs::read_to_string(&file).unwrap(), before, "the tree changed");
    let listing: BTreeSet<String> =
        fs::read_dir(dir.join("topology")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(listing, ["generation_id", "nodes", "system_properties"].map(String::from).into());
    drop(m);
    fs::remove_dir(&dir).unwrap();
}

#[test]
fn the_mount_disappears_when_the_session_drops() {
    require_fuse!();
    let t = topology();
    let dir = mount_point("drop");
    let m: SysfsMount = topology_fs::mount(&t, &dir).expect("mounting");
    assert!(mountinfo(&dir).is_some_and(|f| f.contains(&FSNAME.to_string())));
    assert!(dir.join("topology/generation_id").exists());
    drop(m);
    assert_eq!(mountinfo(&dir), None, "still mounted after the drop");
    assert!(fs::read_dir(&dir).unwrap().next().is_none(), "the mount point is not empty");

    // Explicit unmount, and a busy mount (a file held open) is detached lazily.
    let m = topology_fs::mount(&t, &dir).expect("mounting again");
    let held = fs::File::open(dir.join("topology/system_properties")).unwrap();
    let dir_held = fs::File::open(dir.join("topology")).unwrap();
    m.unmount().unwrap();
    assert_eq!(mountinfo(&dir), None, "still mounted after unmount()");
    drop((held, dir_held));
    fs::remove_dir(&dir).unwrap();
}
