//! `cuse-kfd run` as root runs nothing another user planted (issue 13, H7): not from a
//! temporary directory someone made first, and not from libraries or directories a non-root
//! user can change.

use cuse_kfd_run::stage;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn h7_a_planted_tmp_dir_of_another_uid_is_never_used() {
    stage::build(&stage::profile_dir().unwrap(), &[&stage::HSAKMT]).unwrap();
    let t = tempfile::tempdir().unwrap();
    let marker = t.path().join("planted-code-ran");
    // The launcher's pid is the shell's ($$), which execs it: the directory an attacker would
    // plant for that pid, with a `grep` and an `lsmod` of theirs, given to uid 65534 (as root).
    let planted = format!("#!/bin/sh\ntouch {}\n", marker.display());
    let script = r#"d=/tmp/cuse-kfd-run-$$
        mkdir "$d" && printf '%s' "$PLANTED" > "$d/grep" && cp "$d/grep" "$d/lsmod" && chmod 755 "$d" "$d/grep" "$d/lsmod" || exit 99
        [ "$(id -u)" != 0 ] || chown -R 65534:65534 "$d" || exit 99
        echo "$d" > "$DIR_FILE"
        exec "$LAUNCHER" --embedded --allow-user-writable -- sh -c 'lsmod | grep amdgpu'"#;
    let dir_file = t.path().join("planted-dir");
    let out = Command::new("sh")
        .args(["-c", script])
        .env("PLANTED", &planted)
        .env("DIR_FILE", &dir_file)
        .env("LAUNCHER", env!("CARGO_BIN_EXE_cuse-kfd-run"))
        .output()
        .unwrap();
    let dir = std::fs::read_to_string(&dir_file).map(|d| d.trim().to_string()).unwrap_or_default();
    let planted_lsmod = std::fs::read_to_string(Path::new(&dir).join("lsmod"));
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(out.status.code(), Some(99), "planting failed: {}", text(&out));
    assert!(!marker.exists(), "the launcher ran a planted program from {dir}: {}", text(&out));
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("amdgpu"), "our lsmod answered: {}", text(&out));
    assert_eq!(planted_lsmod.unwrap(), planted, "the launcher wrote into the planted directory");
}

/// `<tmp>/debug/cuse-kfd-run` and the libhsakmt.so it stages: a profile directory of our own.
fn copied_profile() -> (tempfile::TempDir, std::path::PathBuf) {
    let profile = stage::profile_dir().unwrap();
    stage::build(&profile, &[&stage::HSAKMT]).unwrap();
    let t = tempfile::tempdir().unwrap();
    let copy = t.path().join("debug");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_cuse-kfd-run"), copy.join("cuse-kfd-run")).unwrap();
    std::fs::copy(profile.join(stage::HSAKMT.built), copy.join(stage::HSAKMT.built)).unwrap();
    (t, copy)
}

fn run_copy(copy: &Path, extra: &[&str]) -> Output {
    Command::new(copy.join("cuse-kfd-run"))
        .arg("--embedded")
        .args(extra)
        .args(["--", "sh", "-c", "echo LD_LIBRARY_PATH=$LD_LIBRARY_PATH"])
        .output()
        .unwrap()
}

#[test]
fn h7_as_root_no_user_writable_library_or_directory_goes_on_the_search_paths() {
    let (_t, copy) = copied_profile();
    // Root's own, 0755: accepted (as root, the resolved directory is what goes on the path).
    let out = run_copy(&copy, &[]);
    if !is_root() {
        // The rule is for root: a user runs their own build.
        assert!(out.status.success(), "{}", text(&out));
        return;
    }
    assert!(out.status.success(), "{}", text(&out));
    let lib = std::fs::canonicalize(copy.join("lib")).unwrap();
    assert!(text(&out).contains(&format!("LD_LIBRARY_PATH={}", lib.display())), "{}", text(&out));

    // The profile directory writable by everyone: anyone could replace the library.
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run_copy(&copy, &[]);
    assert!(!out.status.success(), "ran with a world-writable library directory: {}", text(&out));
    assert!(text(&out).contains("is writable by others (mode 777)"), "{}", text(&out));
    assert!(!text(&out).contains("LD_LIBRARY_PATH="), "{}", text(&out));
    // The explicit override.
    let out = run_copy(&copy, &["--allow-user-writable"]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();

    // The library itself another user's.
    std::os::unix::fs::chown(copy.join(stage::HSAKMT.built), Some(65534), Some(65534)).unwrap();
    let out = run_copy(&copy, &[]);
    assert!(!out.status.success(), "ran with another user's library: {}", text(&out));
    assert!(text(&out).contains("libhsakmt.so belongs to uid 65534"), "{}", text(&out));
}

#[test]
fn h7_as_root_a_user_writable_tmpdir_is_refused_for_path() {
    let (_t, copy) = copied_profile();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = Command::new(copy.join("cuse-kfd-run"))
        .args(["--embedded", "--", "true"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    if !is_root() {
        assert!(out.status.success(), "{}", text(&out));
        return;
    }
    assert!(!out.status.success(), "an lsmod in a world-writable TMPDIR went on root's PATH: {}", text(&out));
    assert!(text(&out).contains("is writable by others (mode 777)"), "{}", text(&out));
}
