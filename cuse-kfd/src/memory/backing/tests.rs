use super::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn me() -> Owner {
    Owner { uid: nix::unistd::getuid().as_raw(), gid: nix::unistd::getgid().as_raw() }
}

#[test]
fn files_follow_the_path_scheme_and_go_away() {
    let store = BackingStore::private().unwrap();
    let root = store.root().to_owned();
    let f = store.create(42, me(), MmapSpace::Kfd, 0xC000_4000_0000_0000, 8192).unwrap();
    let expected = root.join("42/kfd/c000400000000000");
    assert_eq!(f.path(), expected);
    let meta = fs::metadata(&expected).unwrap();
    assert_eq!(meta.len(), 8192);
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // The client sees what the device writes.
    f.region().write(8, &[1, 2, 3]).unwrap();
    assert_eq!(&fs::read(&expected).unwrap()[8..11], &[1, 2, 3]);
    // Creating the same offset twice is refused rather than silently shared.
    assert!(store.create(42, me(), MmapSpace::Kfd, 0xC000_4000_0000_0000, 8192).is_err());
    drop(f);
    assert!(!expected.exists());
    store.remove_client(42);
    assert!(!root.join("42").exists());
}

#[test]
fn doorbell_offsets_name_their_slice() {
    assert_eq!(doorbell_slice_offset(0xC000_4000_0000_0018, 8192), 0xC000_4000_0000_0000);
}

#[test]
fn directories_belong_to_the_daemon_and_only_files_to_the_client() {
    let store = BackingStore::private().unwrap();
    let root = store.root().to_owned();
    let _f = store.create(7, me(), MmapSpace::Render, 0x1000, 4096).unwrap();
    let mode = |p: &Path| fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700, "a private runtime directory is the device's alone");
    assert_eq!(mode(&root.join("7")), 0o711);
    assert_eq!(mode(&root.join("7/render")), 0o711);
    assert_eq!(mode(&root.join("7/kfd")), 0o711);
    assert_eq!(mode(&root.join("7/render/0000000000001000")), 0o600);
}

#[test]
fn a_private_runtime_directory_is_fresh_and_goes_with_the_store() {
    let a = BackingStore::private().unwrap();
    let b = BackingStore::private().unwrap();
    assert_ne!(a.root(), b.root());
    let root = a.root().to_owned();
    let _f = a.create(1, me(), MmapSpace::Kfd, 0, 4096).unwrap();
    fs::create_dir(root.join("topology")).unwrap();
    drop(_f);
    drop(a);
    assert!(!root.exists(), "{} outlived its store", root.display());
}

#[test]
fn a_runtime_directory_of_someone_else_is_refused() {
    // A symlink in place of the runtime directory stands for a directory someone else made.
    let base = BackingStore::private().unwrap();
    let elsewhere = base.root().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let link = base.root().join("runtime");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    assert!(BackingStore::new(&link).is_err());
}

/// The stat and entries of a directory tree, to compare before and after.
fn snapshot(dir: &Path) -> Vec<(PathBuf, u32, u32, u64, i64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let m = fs::symlink_metadata(&d).unwrap();
        out.push((d.clone(), m.uid(), m.mode(), m.len(), m.ctime_nsec()));
        if m.is_dir() {
            for e in fs::read_dir(&d).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

/// Replaces directory `dir` by a symlink to `target` (the old directory moves aside).
fn swap_for_symlink(dir: &Path, target: &Path) {
    let aside = dir.with_extension("moved");
    fs::rename(dir, &aside).unwrap();
    std::os::unix::fs::symlink(target, dir).unwrap();
}

#[test]
fn symlink_swap_never_reaches_the_target() {
    let store = BackingStore::private().unwrap();
    let root = store.root().to_owned();
    let target = tempdir_outside();
    fs::write(target.join("passwd"), b"root:x:0:0").unwrap();
    let before = snapshot(&target);

    // Each client-visible directory swapped after the client's first file.
    for (pid, swapped) in [(10, "10"), (11, "11/render"), (12, "11/kfd")] {
        let pid = if pid == 12 { 11 } else { pid };
        let first = store.create(pid, me(), MmapSpace::Render, 0x1000 * u64::from(pid), 4096).ok();
        let _ = store.create(pid, me(), MmapSpace::Kfd, 0x10, 4096);
        swap_for_symlink(&root.join(swapped), &target);
        for space in [MmapSpace::Kfd, MmapSpace::Render] {
            if let Ok(f) = store.create(pid, me(), space, 0x2000, 8192) {
                f.region().write(0, b"x").unwrap();
            }
        }
        drop(first);
        assert_eq!(snapshot(&target), before, "after swapping {swapped}");
    }
    // A symlink planted where a client directory will be made.
    std::os::unix::fs::symlink(&target, root.join("13")).unwrap();
    if let Ok(f) = store.create(13, me(), MmapSpace::Render, 0, 4096) {
        assert!(!f.path().starts_with(&target));
    }
    assert!(fs::symlink_metadata(root.join("13")).unwrap().is_dir(), "the planted symlink is replaced");
    for pid in [10, 11, 13] {
        store.remove_client(pid);
    }
    drop(store);
    assert_eq!(snapshot(&target), before, "after teardown");
    fs::remove_dir_all(&target).unwrap();
}

#[test]
fn stale_client_directories_are_removed_on_start() {
    let base = BackingStore::private().unwrap();
    let rt = base.root().join("rt");
    let target = tempdir_outside();
    fs::write(target.join("keep"), b"").unwrap();
    let before = snapshot(&target);
    {
        let store = BackingStore::new(&rt).unwrap();
        let f = store.create(77, me(), MmapSpace::Render, 0, 4096).unwrap();
        // A killed daemon drops nothing.
        std::mem::forget(f);
        std::mem::forget(store);
    }
    std::os::unix::fs::symlink(&target, rt.join("78")).unwrap();
    fs::create_dir(rt.join("topology")).unwrap();
    let store = BackingStore::new(&rt).unwrap();
    let left: Vec<_> = fs::read_dir(&rt).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("topology")]);
    assert_eq!(snapshot(&target), before);
    // The next holder of pid 77 allocates as usual.
    store.create(77, me(), MmapSpace::Render, 0, 4096).unwrap();
    fs::remove_dir_all(&target).unwrap();
}

/// A directory outside every store (the stand-in for /etc).
fn tempdir_outside() -> PathBuf {
    nix::unistd::mkdtemp(&std::env::temp_dir().join("backing-target-XXXXXX")).unwrap()
}

/// A context torn down while a new context of the same pid (its owner exec'd and opened
/// again) already has files: the new context's files and directories stay.
#[test]
fn removing_a_client_keeps_the_files_of_a_newer_context_of_its_pid() {
    let store = BackingStore::private().unwrap();
    let root = store.root().to_owned();
    let newer = store.create(9, me(), MmapSpace::Render, 0x2000, 4096).unwrap();
    store.remove_client(9);
    assert!(newer.path().exists(), "a file of the newer context was removed");
    // The newer context goes on creating files in the same directories.
    let more = store.create(9, me(), MmapSpace::Kfd, 0x10, 4096).unwrap();
    assert!(more.path().exists());
    drop((newer, more));
    store.remove_client(9);
    assert!(!root.join("9").exists(), "empty directories are removed");
}
