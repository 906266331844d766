//! `cuse-kfd run` says when an option of the embedded device is ignored: `--profile` and `--gpus`
//! configure the device in the program's process, while a node serves what its daemon was
//! started with.

use std::process::Command;

/// `cuse-kfd run ARGS -- true`: its stderr (the program does nothing with the device).
fn run_stderr(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cuse-kfd"))
        .arg("run")
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
