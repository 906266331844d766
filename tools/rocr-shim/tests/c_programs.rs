//! C programs written against Debian's hsa.h / hsa_ext_amd.h and the shim's header, linked
//! with -lhsa-runtime64 and run on the shim over the embedded device (CUSE_KFD_EMBEDDED=1).
//!
//! The cdylib is not a product of `cargo test`, so the first test builds it (`cargo build -p
//! rocr-shim` in the same profile) and stages it as `libhsa-runtime64.so.1` (plus the
//! `libhsa-runtime64.so` link name) in `target/<profile>/rocr-shim-lib/`, the directory the
//! programs get through -L and LD_LIBRARY_PATH. scripts/stage-lib.sh does the same by hand.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

struct Staged {
    lib_dir: PathBuf,
    out_dir: PathBuf,
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// target/<profile>, from this test binary's path (target/<profile>/deps/c_programs-*).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf()
}

fn stage() -> &'static Staged {
    static STAGED: OnceLock<Staged> = OnceLock::new();
    STAGED.get_or_init(|| {
        let profile = profile_dir();
        let name = profile.file_name().and_then(|n| n.to_str()).expect("profile name").to_string();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-p", "rocr-shim", "--lib"]).current_dir(crate_dir());
        match name.as_str() {
            "debug" => {}
            "release" => {
                build.arg("--release");
            }
            other => {
                build.args(["--profile", other]);
            }
        }
        let status = build.status().expect("running cargo build");
        assert!(status.success(), "cargo build -p rocr-shim failed");
        let lib_dir = profile.join("rocr-shim-lib");
        std::fs::create_dir_all(&lib_dir).expect("lib dir");
        let so1 = lib_dir.join("libhsa-runtime64.so.1");
        // Copy to a new name and rename, so a program of a concurrent run never maps half a file.
        let tmp = lib_dir.join(format!("libhsa-runtime64.so.1.{}", std::process::id()));
        std::fs::copy(profile.join("librocr_shim.so"), &tmp).expect("copying librocr_shim.so");
        std::fs::rename(&tmp, &so1).expect("staging libhsa-runtime64.so.1");
        let link = lib_dir.join("libhsa-runtime64.so");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("libhsa-runtime64.so.1", &link).expect("link name");
        let out_dir = profile.join("rocr-shim-c-tests");
        std::fs::create_dir_all(&out_dir).expect("out dir");
        Staged { lib_dir, out_dir }
    })
}

/// Compiles tests/c/<name>.c against the system's HSA headers and the shim's header.
fn compile(name: &str) -> PathBuf {
    let s = stage();
    let src = crate_dir().join("tests/c").join(format!("{name}.c"));
    let exe = s.out_dir.join(name);
    let out = Command::new("cc")
        .args(["-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-I")
        .arg(crate_dir().join("tests/c"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&s.lib_dir)
        .args(["-lhsa-runtime64", "-lpthread"])
        .output()
        .expect("running cc");
    assert!(out.status.success(), "cc {name}.c failed:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// Runs a compiled program on the embedded device; it must exit 0 and print "PASS <name>".
fn run(name: &str, env: &[(&str, &str)]) {
    let exe = compile(name);
    let s = stage();
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", &s.lib_dir)
        .env("CUSE_KFD_EMBEDDED", "1")
        .env_remove("CUSE_KFD_SHIM_PCIE_STORES_NEED_FLUSH")
        .env_remove("CUSE_KFD_SHIM_DEVICE_SIGNALS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawning the test program");
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{name} timed out\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{name} failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains(&format!("PASS {name}")), "{name} did not pass\nstdout:\n{stdout}\nstderr:\n{stderr}");
    print!("{stdout}");
}

#[test]
fn soname_and_exports() {
    let s = stage();
    let out = Command::new("readelf").arg("-d").arg(s.lib_dir.join("libhsa-runtime64.so.1")).output();
    if let Ok(out) = out {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Library soname: [libhsa-runtime64.so.1]"), "{text}");
    }
}

#[test]
fn c_info() {
    run("info", &[]);
}

#[test]
fn c_queue() {
    run("queue", &[]);
}

#[test]
fn c_signals() {
    run("signals", &[]);
}

#[test]
fn c_threads() {
    run("threads", &[]);
}

#[test]
fn c_batch() {
    run("batch", &[]);
}

#[test]
fn c_copy() {
    run("copy", &[]);
}
