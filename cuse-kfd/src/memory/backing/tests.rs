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
    let c = store.client(42);
    let f = store.create(c, me(), MmapSpace::Kfd, 0xC000_4000_0000_0000, 8192).unwrap();
    let expected = root.join("42/kfd/c000400000000000");
    assert_eq!(f.path(), expected);
    let meta = fs::metadata(&expected).unwrap();
    assert_eq!(meta.len(), 8192);
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // The client sees what the device writes.
    f.region().write(8, &[1, 2, 3]).unwrap();
    assert_eq!(&fs::read(&expected).unwrap()[8..11], &[1, 2, 3]);
    // Creating the same offset twice is refused rather than silently shared.
    assert!(store.create(c, me(), MmapSpace::Kfd, 0xC000_4000_0000_0000, 8192).is_err());
    drop(f);
    assert!(!expected.exists());
    store.remove_client(c);
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
    let _f = store.create(store.client(7), me(), MmapSpace::Render, 0x1000, 4096).unwrap();
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
    let _f = a.create(a.client(1), me(), MmapSpace::Kfd, 0, 4096).unwrap();
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
    let (c10, c11) = (store.client(10), store.client(11));
    for (c, swapped) in [(c10, "10"), (c11, "11/render"), (c11, "11/kfd")] {
        let first = store.create(c, me(), MmapSpace::Render, 0x1000 * u64::from(c.pid()), 4096).ok();
        let _ = store.create(c, me(), MmapSpace::Kfd, 0x10, 4096);
        swap_for_symlink(&root.join(swapped), &target);
        for space in [MmapSpace::Kfd, MmapSpace::Render] {
            if let Ok(f) = store.create(c, me(), space, 0x2000, 8192) {
                f.region().write(0, b"x").unwrap();
            }
        }
        drop(first);
        assert_eq!(snapshot(&target), before, "after swapping {swapped}");
    }
    // A symlink planted where a client directory will be made.
    std::os::unix::fs::symlink(&target, root.join("13")).unwrap();
    let c13 = store.client(13);
    if let Ok(f) = store.create(c13, me(), MmapSpace::Render, 0, 4096) {
        assert!(!f.path().starts_with(&target));
    }
    assert!(fs::symlink_metadata(root.join("13")).unwrap().is_dir(), "the planted symlink is replaced");
    for c in [c10, c11, c13] {
        store.remove_client(c);
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
        let f = store.create(store.client(77), me(), MmapSpace::Render, 0, 4096).unwrap();
        // A killed daemon drops nothing.
        std::mem::forget(f);
        std::mem::forget(store);
    }
    std::os::unix::fs::symlink(&target, rt.join("78")).unwrap();
    fs::create_dir_all(rt.join("79.4/kfd")).unwrap();
    fs::create_dir(rt.join("topology")).unwrap();
    let store = BackingStore::new(&rt).unwrap();
    let left: Vec<_> = fs::read_dir(&rt).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("topology")]);
    assert_eq!(snapshot(&target), before);
    // The next holder of pid 77 allocates as usual.
    store.create(store.client(77), me(), MmapSpace::Render, 0, 4096).unwrap();
    fs::remove_dir_all(&target).unwrap();
}

/// A directory outside every store (the stand-in for /etc).
fn tempdir_outside() -> PathBuf {
    nix::unistd::mkdtemp(&std::env::temp_dir().join("backing-target-XXXXXX")).unwrap()
}

/// Two contexts of one pid at once (the owner exec'd and opened again while its old context
/// was being torn down, or a reused pid): the newer one makes the files of fixed names (the
/// doorbell slice, the event page) while the older one's still exist, and neither's end touches
/// the other's files. With one directory per pid the newer context's create failed (EEXIST).
#[test]
fn contexts_of_one_pid_never_share_a_file() {
    const DOORBELL: u64 = 0xC000_4000_0000_0000;
    let store = BackingStore::private().unwrap();
    let root = store.root().to_owned();
    let older = store.client(9);
    let old = store.create(older, me(), MmapSpace::Kfd, DOORBELL, 8192).unwrap();
    old.region().write(0, b"old").unwrap();
    let newer = store.client(9);
    // A request of the older context still in flight makes its file in its own directory.
    let old_buffer = store.create(older, me(), MmapSpace::Render, 0x1_0000_0000, 4096).unwrap();
    let new = store.create(newer, me(), MmapSpace::Kfd, DOORBELL, 8192).expect("the newer context's doorbell");
    new.region().write(0, b"new").unwrap();
    let path = root.join("9/kfd/c000400000000000");
    assert_eq!(new.path(), path, "the client finds the newer context's file at the usual path");
    assert_eq!(&fs::read(&path).unwrap()[..3], b"new");
    // The older context's files moved aside with its directory, and are still its own.
    let aside = root.join(format!("9.{}", older.context));
    assert_eq!(&fs::read(aside.join("kfd/c000400000000000")).unwrap()[..3], b"old");
    // The older context's files and the context itself end: the newer's stay.
    drop(old);
    assert_eq!(&fs::read(&path).unwrap()[..3], b"new", "the older doorbell's end removed the newer one's");
    store.remove_client(older);
    assert!(!aside.exists(), "the older context's directory goes with it");
    assert_eq!(&fs::read(&path).unwrap()[..3], b"new", "the older context's end removed the newer one's file");
    drop(old_buffer);
    let more = store.create(newer, me(), MmapSpace::Render, 0x1_0000_0000, 4096).expect("the newer context goes on");
    assert!(more.path().exists());
    drop((new, more));
    store.remove_client(newer);
    assert_eq!(fs::read_dir(&root).unwrap().count(), 0, "nothing is left");
}

/// A context that made no file before a newer context of its pid came (a request of the older
/// one still in flight), or that was removed already, makes none: it would take the newer
/// one's directory, or leave one no teardown removes.
#[test]
fn a_stale_context_makes_no_file() {
    let store = BackingStore::private().unwrap();
    let root = store.root().to_owned();
    let (older, newer) = (store.client(5), store.client(5));
    let err = store.create(older, me(), MmapSpace::Render, 0x2000, 4096).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "before the newer context made a file");
    assert!(!root.join("5").exists());
    let new = store.create(newer, me(), MmapSpace::Render, 0x1000, 4096).unwrap();
    let err = store.create(older, me(), MmapSpace::Render, 0x2000, 4096).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "after");
    assert!(new.path().exists() && new.path().starts_with(root.join("5")));
    store.remove_client(newer);
    assert!(!root.join("5").exists());
    let err = store.create(newer, me(), MmapSpace::Render, 0x3000, 4096).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "a removed context");
    assert!(!root.join("5").exists(), "a removed context made its directory again");
}

#[test]
fn client_directory_names() {
    for ok in ["1", "4194304", "12.0", "12.345"] {
        assert!(is_client_dir(ok.as_bytes()), "{ok}");
    }
    for no in ["", ".", "12.", ".3", "1.2.3", "topology", "control.sock", ".control-12", "12a"] {
        assert!(!is_client_dir(no.as_bytes()), "{no}");
    }
}

#[test]
fn a_private_store_names_its_process_and_removes_those_of_dead_processes() {
    let me = StoreOwner::this_process().expect("/proc/self is readable");
    let store = BackingStore::private().unwrap();
    let name = store.root().file_name().unwrap().as_bytes().to_vec();
    assert_eq!(StoreOwner::parse(&name), Some(me), "{:?}", store.root());
    assert_eq!(StoreOwner::parse(b"cuse-kfd-Ab12Cd"), None, "an older store's name gives no owner");
    assert_eq!(StoreOwner::parse(b"cuse-kfd-1.2.3.4-Ab12Cd"), None);

    // Stores as a killed process leaves them (this pid with another start time: a reused pid),
    // one of this live process, and one of a pid namespace this process cannot judge.
    let base = store.root().parent().unwrap().to_owned();
    let dead = StoreOwner { start: me.start + 1, ..me };
    let other_ns = StoreOwner { pid_ns: me.pid_ns + 1, ..dead };
    let make = |owner: StoreOwner, suffix: &str| {
        let dir = base.join(format!("{PRIVATE_PREFIX}{}{suffix}", owner.tag()));
        fs::create_dir_all(dir.join("42/kfd")).unwrap();
        fs::write(dir.join("42/kfd/0000000000001000"), [1u8; 64]).unwrap();
        // A device's topology tree, the deepest a store holds.
        fs::create_dir_all(dir.join("topology/nodes/1/caches/0")).unwrap();
        fs::write(dir.join("topology/nodes/1/caches/0/properties"), "size 64\n").unwrap();
        dir
    };
    let made = Made(vec![make(dead, "tst001"), make(me, "tst002"), make(other_ns, "tst003")]);
    let later = BackingStore::private().unwrap();
    assert!(!made.0[0].exists(), "the dead process's store is removed");
    assert!(made.0[1].exists() && made.0[2].exists(), "a live process's store and another namespace's stay");
    assert!(store.root().exists() && later.root().exists());
}

/// Directories a test made, removed when it ends, passed or not.
struct Made(Vec<std::path::PathBuf>);

impl Drop for Made {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = fs::remove_dir_all(d);
        }
    }
}

#[test]
fn a_reserved_file_that_would_leave_the_machine_short_of_memory_is_refused_and_not_made() {
    let store = BackingStore::private().unwrap();
    assert!(store.in_ram, "/dev/shm is tmpfs on the machines the tests run on");
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    let c = store.client(42);
    let all = usize::try_from(total_kib * 1024).unwrap();
    let err = store.create(c, me(), MmapSpace::Render, 0x1000, all).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert!(!store.root().join("42/render/0000000000001000").exists(), "nothing is left behind");
    // Sparse (VRAM) files are not reserved, so not refused; a small reserved one is made.
    store.create_sparse(c, me(), MmapSpace::Render, 0x1000, all).unwrap();
    store.create(c, me(), MmapSpace::Render, 0x2000, 4096).unwrap();
}

#[test]
fn meminfo_kept_open_is_parsed_at_every_check() {
    // A parse failure allows (returns true); every read of the kept file must find the figures.
    for _ in 0..3 {
        assert!(!ram_allows(u64::MAX), "MemAvailable was not read");
    }
}
