//! Real-client runs: Debian's rocminfo (real ROCr 5.2.3) over our libhsakmt.so.1 and the
//! embedded device, through `cuse-kfd run`. Needs rocminfo (cargo xtask test installs it) and
//! root or user namespaces (for a private /dev/kfd).

use std::process::Command;

fn rocminfo(profile: &str) -> (bool, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["run", "-q", "-p", "cuse-kfd", "--", "run", "--embedded", "--profile", profile, "--", "rocminfo"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn agents(text: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let mut name = None;
    for l in text.lines().map(str::trim) {
        if let Some(n) = l.strip_prefix("Name:").filter(|_| name.is_none()) {
            name = Some(n.trim().to_string());
        } else if let Some(m) = l.strip_prefix("Marketing Name:") {
            v.push((name.take().unwrap_or_default(), m.trim().to_string()));
        } else if l.starts_with("Agent ") {
            name = None;
        }
    }
    v
}

fn check(profile: &str, marketing: &str) {
    assert!(
        std::path::Path::new("/usr/bin/rocminfo").exists(),
        "rocminfo is not installed (cargo xtask test installs it)"
    );
    let (ok, text) = rocminfo(profile);
    assert!(ok, "rocminfo failed:\n{text}");
    let a = agents(&text);
    assert_eq!(a.len(), 2, "a CPU and a GPU agent:\n{text}");
    assert_eq!(a[1], (profile.to_string(), marketing.to_string()), "the GPU agent:\n{text}");
    assert!(text.contains("Device Type:             CPU") && text.contains("Device Type:             GPU"), "{text}");
    assert!(text.contains("Pool Info:") && text.contains("Segment:                 GLOBAL"), "memory pools:\n{text}");
    assert!(text.contains("*** Done ***"), "{text}");
}

#[test]
fn rocminfo_lists_our_gfx90a_agent() {
    check("gfx90a", "AMD Instinct MI210");
}

#[test]
fn rocminfo_lists_our_gfx1030_agent() {
    check("gfx1030", "AMD Radeon RX 6900 XT");
}

/// The same through a served node, in the real-device tier: the real ROCr over our libhsakmt
/// over /dev/<node> over CUSE.
#[test]
fn device_tier_rocminfo_through_the_node() {
    let Some(bin) = kfd_tests::device::tier() else { return };
    let d = kfd_tests::device::Daemon::start(&bin, "kfd-t-rocminfo");
    let out = Command::new(&bin)
        .args(["run", "--device"])
        .arg(&d.node)
        .args(["--", "rocminfo"])
        .output()
        .expect("cuse-kfd run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rocminfo failed:\n{text}");
    let a = agents(&text);
    assert_eq!(a.len(), 2, "a CPU and a GPU agent:\n{text}");
    assert_eq!(a[1], ("gfx90a".to_string(), "AMD Instinct MI210".to_string()), "{text}");
    assert!(text.contains("*** Done ***"), "{text}");
}

/// One layer further down, in the real-device tier: Debian's real libhsakmt 5.2.3 and real ROCr
/// over /dev/<node> (`run --thunk system`: the topology as a FUSE tree at its sysfs path, a
/// render-node stand-in, and kfd-preload redirecting its mmaps to the device's backing files).
#[test]
fn device_tier_rocminfo_on_the_system_libhsakmt() {
    let Some(bin) = kfd_tests::device::tier() else { return };
    let real = std::path::Path::new("/usr/lib/x86_64-linux-gnu/libhsakmt.so.1");
    assert!(real.exists(), "{} is missing (cargo xtask test installs libhsakmt1)", real.display());
    let d = kfd_tests::device::Daemon::start(&bin, "kfd-t-rocminfo-sys");
    let out = Command::new(&bin)
        .args(["run", "--thunk", "system", "--device"])
        .arg(&d.node)
        .args(["--", "rocminfo"])
        // The real libhsakmt's own log: its "acquiring VM" line shows that it, not ours, ran.
        .env("HSAKMT_DEBUG_LEVEL", "7")
        .output()
        .expect("cuse-kfd run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rocminfo failed:\n{text}");
    assert!(text.contains("acquiring VM for"), "the system's libhsakmt did not run:\n{text}");
    let a = agents(&text);
    assert_eq!(a.len(), 2, "a CPU and a GPU agent:\n{text}");
    // The marketing name comes through libdrm_amdgpu, answered by kfd-preload for the stand-in.
    assert_eq!(a[1], ("gfx90a".to_string(), "AMD Instinct MI210".to_string()), "the GPU agent:\n{text}");
    assert!(text.contains("Device Type:             GPU"), "{text}");
    assert!(text.contains("amdgcn-amd-amdhsa--gfx90a"), "the GPU's ISA:\n{text}");
    assert!(text.contains("*** Done ***"), "{text}");
}
