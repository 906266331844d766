//! Real ROCr (Debian's rocminfo 5.2.3 and libhsa-runtime64 5.2.3) over this library and an
//! embedded device. Needs root (a private mount namespace), so it is ignored by default:
//! `cargo test -p hsakmt --test rocminfo -- --ignored`.
//!
//! rocminfo first runs `lsmod | grep amdgpu` and opens /dev/kfd itself (jobs of a later
//! `cuse-kfd run`); here a script named lsmod prints an amdgpu line and, inside `unshare -m`,
//! a tmpfs with a regular file `kfd` (and the usual character devices) is mounted over /dev.

use cuse_kfd_run::stage;
use std::path::Path;
use std::process::Command;

const ROCMINFO: &str = "/usr/bin/rocminfo";

/// The script run inside the namespace: fake /dev, then exec the rest of its arguments.
const WRAPPER: &str = r#"#!/bin/sh
set -e
dev="$1"; shift
mount -t tmpfs tmpfs "$dev"
for d in null zero random urandom tty full; do cp -a /dev/$d "$dev/"; done
mkdir "$dev/shm" "$dev/pts"
touch "$dev/kfd"
mount --bind /dev/shm "$dev/shm"
mount --bind "$dev" /dev
exec "$@"
"#;

fn run(profile: &str, gpus: usize) -> String {
    let target = stage::profile_dir().unwrap();
    let lib_dir = stage::build_and_stage(&target, &[&stage::HSAKMT]).unwrap().remove(0);
    let work = std::env::temp_dir().join(format!("hsakmt-rocminfo-{}-{profile}", std::process::id()));
    let bin = work.join("bin");
    let dev = work.join("dev");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&dev).unwrap();
    let lsmod = bin.join("lsmod");
    std::fs::write(&lsmod, "#!/bin/sh\necho 'Module Size Used by'\necho 'amdgpu 9000000 0'\n").unwrap();
    let wrapper = work.join("wrapper.sh");
    std::fs::write(&wrapper, WRAPPER).unwrap();
    for f in [&lsmod, &wrapper] {
        Command::new("chmod").arg("+x").arg(f).status().unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private"])
        .arg(&wrapper)
        .arg(&dev)
        .arg(ROCMINFO)
        .env("PATH", path)
        .env("LD_LIBRARY_PATH", &lib_dir)
        .env("CUSE_KFD_EMBEDDED", "1")
        .env("CUSE_KFD_PROFILE", profile)
        .env("CUSE_KFD_GPUS", gpus.to_string())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&work);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("*** Done ***"),
        "rocminfo failed ({})\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn agents(out: &str) -> Vec<String> {
    out.lines().filter(|l| l.starts_with("  Name:")).map(|l| l["  Name:".len()..].trim().to_string()).collect()
}

#[test]
#[ignore = "needs root (unshare -m) and Debian's rocminfo"]
fn rocminfo_enumerates_the_cpu_and_the_gpus() {
    if !Path::new(ROCMINFO).exists() {
        eprintln!("rocminfo is not installed: skipped");
        return;
    }
    let out = run("gfx90a", 1);
    let names = agents(&out);
    assert_eq!(names.len(), 2, "{out}");
    assert_eq!(names[1], "gfx90a");
    assert!(out.contains("Marketing Name:          AMD Instinct MI210"), "{out}");
    assert!(out.contains("Compute Unit:            104"), "{out}");
    assert!(out.contains("amdgcn-amd-amdhsa--gfx90a"), "{out}");

    let out = run("gfx1030", 2);
    assert_eq!(agents(&out)[1..], ["gfx1030", "gfx1030"], "{out}");
}
