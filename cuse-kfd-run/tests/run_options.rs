//! `cuse-kfd run` says when an option of the embedded device is ignored: `--profile` and `--gpus`
//! configure the device in the program's process, while a node serves what its daemon was
//! started with.

use cuse_kfd_run::stage;
use std::process::Command;

/// `cuse-kfd run ARGS -- true`: its stderr (the program does nothing with the device).
fn run_stderr(args: &[&str]) -> String {
    // `--embedded` puts our libhsakmt.so.1 on the program's library path.
    stage::build(&stage::profile_dir().unwrap(), &[&stage::HSAKMT]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cuse-kfd-run"))
        .args(args)
        .args(["--", "true"])
        .output()
        .expect("cuse-kfd run");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "cuse-kfd run {args:?} -- true failed:\n{stderr}");
    stderr
}

#[test]
fn profile_and_gpus_with_a_node_are_reported_as_ignored() {
    let node = "/nonexistent/kfd";
    let err = run_stderr(&["--device", node, "--profile", "gfx1030"]);
    assert!(err.contains("warning: --profile is ignored"), "{err}");
    assert!(!err.contains("--gpus"), "{err}");
    let err = run_stderr(&["--device", node, "--gpus", "2"]);
    assert!(err.contains("warning: --gpus is ignored"), "{err}");
    // Not given, or given for the embedded device: nothing to say.
    let err = run_stderr(&["--device", node]);
    assert!(!err.contains("is ignored"), "{err}");
    let err = run_stderr(&["--embedded", "--profile", "gfx1030", "--gpus", "2"]);
    assert!(!err.contains("is ignored"), "{err}");
}

#[test]
fn print_library_path_stages_our_libraries() {
    let profile = stage::profile_dir().unwrap();
    stage::build(&profile, &[&stage::HSAKMT, &stage::HSA_RUNTIME_SHIM]).unwrap();
    let path = |runtime: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_cuse-kfd-run"))
            .args(["--runtime", runtime, "--print-library-path"])
            .output()
            .expect("cuse-kfd-run");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim_end().to_string()
    };
    let lib = profile.join("lib");
    assert_eq!(path("rocr"), lib.display().to_string());
    assert!(lib.join("libhsakmt.so.1").is_file());
    let shim = profile.join("lib-shim");
    assert_eq!(path("shim"), format!("{}:{}", shim.display(), lib.display()));
    assert!(shim.join("libhsa-runtime64.so.1").is_file());
    // The shim never stands in the thunk's directory, where it would hide the real ROCr.
    assert!(!lib.join("libhsa-runtime64.so.1").exists());
}
