//! Real-client runs: Debian's rocminfo (real ROCr 5.2.3) over our libhsakmt.so.1 and the
//! embedded device, through `cuse-kfd run`. Needs rocminfo (cargo xtask test installs it) and
//! root or user namespaces (for a private /dev/kfd).

use std::process::Command;

fn rocminfo(profile: &str) -> (bool, String) {
    let out = kfd_tests::launcher::cargo_run()
        .args(["--embedded", "--profile", profile, "--", "rocminfo"])
        .output()
        .expect("cargo run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// One agent of rocminfo's listing.
#[derive(Debug, Default)]
struct Agent {
    name: String,
    marketing: String,
    device_type: String,
    /// (segment, size in KB) of each pool under its "Pool Info:".
    pools: Vec<(String, u64)>,
}

/// rocminfo's agents, each from its "Agent N" header to the next.
fn agents(text: &str) -> Vec<Agent> {
    let mut v: Vec<Agent> = Vec::new();
    let mut named = false;
    for l in text.lines().map(str::trim) {
        let numbered = |prefix: &str| {
            l.strip_prefix(prefix).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        if numbered("Agent ") {
            v.push(Agent::default());
            named = false;
            continue;
        }
        let Some(a) = v.last_mut() else { continue };
        let field = |key: &str| l.strip_prefix(key).map(|r| r.trim().to_string());
        if numbered("Pool ") {
            a.pools.push((String::new(), 0));
        } else if let Some(n) = field("Name:").filter(|_| !named) {
            // The agent's own name comes first; its ISAs' names follow.
            (a.name, named) = (n, true);
        } else if let Some(m) = field("Marketing Name:") {
            a.marketing = m;
        } else if let Some(t) = field("Device Type:") {
            a.device_type = t;
        } else if let (Some(seg), Some(p)) = (field("Segment:"), a.pools.last_mut()) {
            p.0 = seg;
        } else if let (Some(size), Some(p)) = (field("Size:"), a.pools.last_mut()) {
            // "67092480(0x3ffc000) KB"
            let digits: String = size.chars().take_while(char::is_ascii_digit).collect();
            p.1 = digits.parse().unwrap_or(0);
        }
    }
    v
}

/// What every rocminfo run here must show: a CPU agent and one GPU agent `name` with our
/// marketing name, the GPU with a GLOBAL memory pool of its own (the CPU's pools do not count),
/// and rocminfo's last line.
fn check_agents(text: &str, name: &str, marketing: &str) {
    let a = agents(text);
    assert_eq!(a.len(), 2, "a CPU and a GPU agent:\n{text}");
    assert_eq!(a[0].device_type, "CPU", "the first agent:\n{text}");
    let gpu = &a[1];
    assert_eq!(gpu.device_type, "GPU", "the second agent:\n{text}");
    assert_eq!((gpu.name.as_str(), gpu.marketing.as_str()), (name, marketing), "the GPU agent:\n{text}");
    assert!(
        gpu.pools.iter().any(|(seg, kb)| seg.starts_with("GLOBAL") && *kb > 0),
        "the GPU agent has no GLOBAL pool with a size ({:?}):\n{text}",
        gpu.pools
    );
    assert!(text.contains("*** Done ***"), "{text}");
}

/// The checker reads each agent's own pools: a GPU agent without a GLOBAL pool fails it even
/// when the CPU agent lists one (rocminfo's layout, abridged).
#[test]
fn the_gpu_agent_needs_a_global_pool_of_its_own() {
    let listing = |gpu_pools: &str| {
        format!(
            "*******\nAgent 1\n*******\n  Name:                    AMD EPYC\n  Marketing Name:          AMD EPYC\n  \
             Device Type:             CPU\n  Pool Info:\n    Pool 1\n      Segment:                 GLOBAL; FLAGS: \
             FINE GRAINED\n      Size:                    24683656(0x178a488) KB\n*******\nAgent 2\n*******\n  \
             Name:                    gfx90a\n  Marketing Name:          AMD Instinct MI210\n  Device Type:             \
             GPU\n  Pool Info:\n{gpu_pools}  ISA Info:\n    ISA 1\n      Name:                    \
             amdgcn-amd-amdhsa--gfx90a\n      Workgroup Max Size:      1024(0x400)\n*** Done ***\n"
        )
    };
    let global =
        "    Pool 1\n      Segment:                 GLOBAL; FLAGS: COARSE GRAINED\n      Size:                    \
                  16777216(0x1000000) KB\n";
    let group = "    Pool 2\n      Segment:                 GROUP\n      Size:                    64(0x40) KB\n";
    let a = agents(&listing(&format!("{global}{group}")));
    assert_eq!(a[1].name, "gfx90a");
    assert_eq!(a[1].pools, [("GLOBAL; FLAGS: COARSE GRAINED".to_string(), 16777216), ("GROUP".to_string(), 64)]);
    check_agents(&listing(&format!("{global}{group}")), "gfx90a", "AMD Instinct MI210");
    for pools in [group.to_string(), global.replace("16777216", "0")] {
        let text = listing(&pools);
        let r = std::panic::catch_unwind(|| check_agents(&text, "gfx90a", "AMD Instinct MI210"));
        assert!(r.is_err(), "accepted a GPU without a sized GLOBAL pool:\n{text}");
    }
}

fn check(profile: &str, marketing: &str) {
    assert!(
        std::path::Path::new("/usr/bin/rocminfo").exists(),
        "rocminfo is not installed (cargo xtask test installs it)"
    );
    let (ok, text) = rocminfo(profile);
    assert!(ok, "rocminfo failed:\n{text}");
    check_agents(&text, profile, marketing);
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
#[ignore = "device tier"]
fn device_tier_rocminfo_through_the_node() {
    let bin = kfd_tests::device::tier();
    let d = kfd_tests::device::Daemon::start(&bin, "kfd-t-rocminfo");
    let out = Command::new(&bin)
        .args(["run", "--device"])
        .arg(&d.node)
        .args(["--", "rocminfo"])
        .output()
        .expect("cuse-kfd run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rocminfo failed:\n{text}");
    check_agents(&text, "gfx90a", "AMD Instinct MI210");
}

/// One layer further down, in the real-device tier: Debian's real libhsakmt 5.2.3 and real ROCr
/// over /dev/<node> (`run --thunk system`: the topology as a FUSE tree at its sysfs path, a
/// render-node stand-in, and kfd-preload redirecting its mmaps to the device's backing files).
#[test]
#[ignore = "device tier"]
fn device_tier_rocminfo_on_the_system_libhsakmt() {
    let bin = kfd_tests::device::tier();
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
    // The marketing name comes through libdrm_amdgpu, answered by kfd-preload for the stand-in.
    check_agents(&text, "gfx90a", "AMD Instinct MI210");
    assert!(text.contains("amdgcn-amd-amdhsa--gfx90a"), "the GPU's ISA:\n{text}");
}

/// `cuse-kfd run --embedded -- rocminfo` with our thunk as an unprivileged user (uid and gid
/// 65534, no groups, through setpriv when this test is root): run reaches a private /dev/kfd
/// through a user namespace and the device needs nothing of root.
#[test]
fn rocminfo_without_root() {
    assert!(
        std::path::Path::new("/usr/bin/rocminfo").exists(),
        "rocminfo is not installed (cargo xtask test installs it)"
    );
    // As this user, with cargo: builds the launcher and our libhsakmt and makes
    // target/<profile>/lib/libhsakmt.so.1, which uid 65534 cannot write.
    let out = kfd_tests::launcher::cargo_run().args(["--embedded", "--", "true"]).output().expect("cargo run");
    assert!(out.status.success(), "cuse-kfd run -- true:\n{}", String::from_utf8_lossy(&out.stderr));
    let bin = cuse_kfd_run::stage::profile_dir().expect("target/<profile>").join("cuse-kfd-run");
    assert!(bin.is_file(), "{} is not built", bin.display());

    let mut cmd = if nix::unistd::geteuid().is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(&bin);
        c
    } else {
        Command::new(&bin)
    };
    // No cargo: the unprivileged run uses what is built and builds nothing.
    let out = cmd.args(["--embedded", "--", "rocminfo"]).env_remove("CARGO").output().expect("setpriv");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rocminfo as uid 65534 failed ({}):\n{text}", out.status);
    check_agents(&text, "gfx90a", "AMD Instinct MI210");
}
