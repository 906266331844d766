//! Builds the C programs of tests/c against Debian's hsakmt.h, links each with `-lhsakmt` to
//! the `hsakmt` crate's library (hsakmt, a dev-dependency) and runs it with `LD_LIBRARY_PATH` at
//! `target/<profile>/lib` (where `libhsakmt.so.1` is made) over an embedded device.

use cuse_kfd_run::stage;
use std::path::Path;
use std::process::Command;

/// Builds `tests/c/<name>.c`, runs it and checks it printed "<name>: ok"; returns its stdout.
fn run_c_client(name: &str) -> String {
    assert!(Path::new("/usr/include/hsakmt.h").exists(), "hsakmt.h missing: apt-get install libhsakmt-dev");
    let profile = stage::profile_dir().unwrap();
    let lib_dir = stage::build_and_stage(&profile, &[&stage::HSAKMT]).unwrap().remove(0);
    let dir = std::env::temp_dir().join(format!("hsakmt-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let out = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(format!("-L{}", profile.display()))
        .arg("-lhsakmt")
        .arg("-pthread")
        .output()
        .expect("cc runs");
    assert!(out.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&out.stderr));

    let needed = Command::new("readelf").arg("-d").arg(&exe).output().unwrap();
    assert!(String::from_utf8_lossy(&needed.stdout).contains("[libhsakmt.so.1]"), "{name} needs libhsakmt.so.1");

    let out = Command::new(&exe)
        .env("LD_LIBRARY_PATH", &lib_dir)
        .env("CUSE_KFD_EMBEDDED", "1")
        .env("HSAKMT_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && stdout.contains(&format!("{name}: ok")),
        "{name} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

#[test]
fn a_c_program_drives_the_device_through_libhsakmt() {
    println!("{}", run_c_client("client"));
}

/// The calls ROCr does not import: the working ones do their work, the refused ones answer
/// libhsakmt 5.2.3's exact status for a driver or host without the feature.
#[test]
fn a_c_program_calls_the_rest_of_the_libhsakmt_api() {
    println!("{}", run_c_client("rest_of_api"));
}
