//! `cuse-kfd serve`'s clear errors: not root, no /dev/cuse (with the modprobe hint), a reader
//! pool it cannot have. No VM and no CUSE needed: these are the paths where serve gives up
//! before serving.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_cuse-kfd");

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A runtime directory for one test that does not exist yet (serve must not create it).
fn runtime_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuse-kfd-serve-errors-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `cuse-kfd serve` with a test's own node name and runtime directory, plus `extra`. The node's
/// group is root's (gid 0, which every system has): the default, `render`, exists only where
/// udev created it, and serve looks it up before it opens /dev/cuse.
fn serve(cmd: &mut Command, test: &str, extra: &[&str]) -> Output {
    let dir = runtime_dir(test);
    let out = cmd
        .args(["serve", "--name", &format!("kfd-serve-errors-{test}"), "--group", "0", "--runtime-dir"])
        .arg(&dir)
        .args(extra)
        .output()
        .expect("run cuse-kfd serve");
    assert!(!dir.exists(), "serve gave up but left its runtime directory {}", dir.display());
    out
}

/// It failed: a non-zero exit (not a signal), one `cuse-kfd: ...` line on stderr, and nothing
/// on stdout. Returns the stderr text.
fn failed(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.signal(), None, "serve was killed: {stderr}");
    assert_ne!(out.status.code(), Some(0), "serve succeeded: {stderr}");
    assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr.starts_with("cuse-kfd: "), "{stderr}");
    stderr
}

#[test]
fn serve_refuses_without_root() {
    let mut cmd = Command::new(BIN);
    if is_root() {
        // Drop to nobody: setpriv changes every uid and gid and clears the groups.
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN]);
        cmd = c;
    }
    let stderr = failed(&serve(&mut cmd, "nonroot", &[]));
    assert!(stderr.contains("serving needs root"), "{stderr}");
}

#[test]
fn serve_without_dev_cuse_names_modprobe() {
    if !is_root() {
        eprintln!("skipped: not root, so serve stops at the root check before it opens /dev/cuse");
        return;
    }
    if Path::new("/dev/cuse").exists() {
        eprintln!("skipped: /dev/cuse exists here, so serve would open it (the --cuse test covers the message)");
        return;
    }
    let stderr = failed(&serve(&mut Command::new(BIN), "nocuse", &[]));
    assert!(stderr.contains("/dev/cuse does not exist"), "{stderr}");
    assert!(stderr.contains("modprobe cuse"), "the hint: {stderr}");
}

#[test]
fn serve_with_a_missing_cuse_path_names_modprobe() {
    if !is_root() {
        eprintln!("skipped: not root, so serve stops at the root check before it opens the control device");
        return;
    }
    let missing = runtime_dir("missing-cuse").join("cuse");
    let stderr = failed(&serve(&mut Command::new(BIN), "badpath", &["--cuse", missing.to_str().unwrap()]));
    assert!(stderr.contains(&format!("{} does not exist", missing.display())), "{stderr}");
    assert!(stderr.contains("modprobe cuse"), "the hint: {stderr}");
}

#[test]
fn serve_refuses_a_reader_pool_it_cannot_have() {
    // Checked before the root check, so anyone gets the message.
    for (extra, says) in [
        (&["--threads", "0"][..], "at least one reader thread"),
        (&["--threads", "8", "--max-threads", "4"][..], "at most 4 reader threads, fewer than the 8"),
    ] {
        let stderr = failed(&serve(&mut Command::new(BIN), "readers", extra));
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    }
}

#[test]
fn serve_refuses_engine_threads_out_of_range() {
    // Checked before the root check, so anyone gets the message.
    for n in ["0", "65"] {
        let stderr = failed(&serve(&mut Command::new(BIN), "lanes", &["--engine-threads", n]));
        assert!(stderr.contains(&format!("--engine-threads {n}: 1 to 64 engine threads")), "{stderr}");
    }
}
