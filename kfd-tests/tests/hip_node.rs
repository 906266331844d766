//! HIP programs of the corpus (kfd-tests/hip) on a `cuse-kfd serve` node through the kernel's
//! CUSE, in the real-device tier: the real ROCr 5.2.3 and HIP over our libhsakmt, and over the
//! system's (`cuse-kfd run --thunk system`), with the daemon's shader core running the kernels on
//! its default worker pool (one worker per core of the machine, here the tier's VM).
//!
//! The tier's VM emulates its CPU (TCG) and sees the target directory read-only: the host builds
//! the programs first (the tier runs [`the_programs_are_built_on_the_host`] there before it
//! boots the VM), the VM only runs them.

use kfd_tests::device::{tier, Daemon};
use kfd_tests::hip_corpus::{self, Built};
use kfd_tests::program::run_bounded;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The programs each thunk runs. Under TCG a program takes 16-25 times as long as natively;
/// measured in the tier's VM on a loaded 2-core machine: matmul 65-113 s and histogram 246 s on
/// our libhsakmt, vadd 72-76 s and warp 67 s on the system's (natively 4.1, 13, 3.0 and 2.1 s).
/// So each program runs on one thunk only, the LDS/barrier one (matmul) and the atomics one
/// (histogram) on ours: about 9 min in all.
/// managed (over the system's) runs with XNACK on: HIP's managed memory as SVM ranges, and a
/// kernel on plain malloc'd memory through map-on-fault, which only a node's client has.
const OURS: [&str; 2] = ["matmul", "histogram"];
const SYSTEM: [&str; 3] = ["vadd", "warp", "managed"];

/// A program's name, what it covers, its time limit and its environment.
type Covers = (&'static str, &'static str, Duration, Env);
type Env = &'static [(&'static str, &'static str)];

/// What each program covers, how long one run on the node may take (about twice the longest it
/// took in the VM, so that a slow CI machine passes, and a hang is reported with the program's
/// output and the daemon's log well inside the tier's limit for this binary), and its
/// environment.
const COVERS: [Covers; 5] = [
    ("vadd", "hipMalloc, hipMemcpy both ways, one kernel", Duration::from_secs(240), &[]),
    ("warp", "cross-lane __shfl/__shfl_down/__shfl_xor, __ballot, __any, __all", Duration::from_secs(240), &[]),
    ("matmul", "16x16 tiles in shared memory (LDS) with __syncthreads", Duration::from_secs(240), &[]),
    (
        "histogram",
        "atomicAdd on shared memory, atomicAdd/Max/Min/CAS on global memory, barriers",
        Duration::from_secs(600),
        &[],
    ),
    (
        "managed",
        "hipMallocManaged as SVM ranges, and malloc'd memory by map-on-fault (HSA_XNACK=1)",
        Duration::from_secs(240),
        &[("HSA_XNACK", "1"), ("KFD_TESTS_PAGEABLE", "1")],
    ),
];

/// The system's libhsakmt.so.1 (Debian's libhsakmt1).
const SYSTEM_HSAKMT: &str = "/usr/lib/x86_64-linux-gnu/libhsakmt.so.1";

fn program(name: &str) -> hip_corpus::Program {
    hip_corpus::programs().unwrap().into_iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no {name}.hip"))
}

/// An ordinary test (the unit tier runs it too): builds the programs of both thunks for gfx90a.
/// The device tier runs it on the host before it boots the VM.
#[test]
fn the_programs_are_built_on_the_host() {
    for name in OURS.iter().chain(&SYSTEM) {
        let b = hip_corpus::build(&program(name), "gfx90a", &hip_corpus::out_dir()).unwrap_or_else(|e| panic!("{e}"));
        assert!(b.exe.is_file(), "{}", b.exe.display());
    }
    for name in OURS.iter().chain(&SYSTEM) {
        assert!(COVERS.iter().any(|(n, ..)| n == name), "{name} says what it covers");
    }
}

/// Both thunks together run at least four programs, among them the LDS/barrier one and the
/// atomics one.
#[test]
fn the_programs_cover_lds_barriers_and_atomics() {
    let mut all: Vec<&str> = OURS.iter().chain(&SYSTEM).copied().collect();
    all.sort();
    all.dedup();
    assert!(all.len() >= 4, "{all:?}");
    for needed in ["matmul", "histogram"] {
        assert!(all.contains(&needed), "{needed} runs on the node");
    }
}

#[test]
#[ignore = "device tier"]
fn device_tier_hip_programs_on_our_libhsakmt() {
    on_the_node("ours", &OURS);
}

#[test]
#[ignore = "device tier"]
fn device_tier_hip_programs_on_the_system_libhsakmt() {
    on_the_node("system", &SYSTEM);
}

/// Starts a daemon with its default shader workers and runs each of `programs` on its node over
/// `thunk`: each must exit 0 having printed `PASS <name>`, with ROCr on the libhsakmt asked for.
fn on_the_node(thunk: &str, programs: &[&str]) {
    let bin = tier();
    let d = Daemon::start_logged(&bin, &format!("kfd-t-hip-{thunk}"));
    let mut times = Vec::new();
    for name in programs {
        let (_, what, limit, env) = COVERS.iter().find(|(n, ..)| n == name).expect("in COVERS");
        println!("{name}: {what}");
        let b =
            hip_corpus::prebuilt(&program(name), "gfx90a", &hip_corpus::out_dir()).unwrap_or_else(|e| panic!("{e}"));
        let t0 = Instant::now();
        let (ok, text) = run(&bin, &d, thunk, &b, *limit, env);
        let took = t0.elapsed().as_secs_f64();
        let passed = ok && text.lines().any(|l| l.trim() == format!("PASS {name}"));
        assert!(
            passed,
            "{name} failed on {} over {thunk} libhsakmt after {took:.1} s:\n{}\n--- the daemon's log:\n{}",
            d.node.display(),
            without_ld_debug(&text),
            d.log()
        );
        check_thunk(&text, thunk);
        println!("HIP-NODE {name:<10} {thunk:<6} libhsakmt {took:>6.1} s PASS");
        times.push(format!("{name} {took:.1} s"));
    }
    println!("HIP-NODE {thunk} libhsakmt: {}", times.join(", "));
}

/// Runs `b` with `env` through `cuse-kfd run --thunk <thunk> --device <node>`, with the dynamic
/// loader naming each library it initialises (LD_DEBUG=files), for [`check_thunk`].
fn run(bin: &Path, d: &Daemon, thunk: &str, b: &Built, limit: Duration, env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(bin);
    cmd.envs(env.iter().copied());
    cmd.args(["run", "--thunk", thunk, "--device"]).arg(&d.node).arg("--").arg(&b.exe);
    cmd.env("LD_DEBUG", "files").env_remove("HSAKMT_LOG");
    run_bounded(cmd, &b.exe, limit, || {
        match Command::new(bin).arg("status").arg("--runtime-dir").arg(&d.runtime_dir).output() {
            Ok(o) => format!(
                "--- cuse-kfd status:\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => format!("--- cuse-kfd status: {e}\n"),
        }
    })
}

/// The program's process initialised exactly one libhsakmt.so.1: the system's for `--thunk
/// system`, ours (never the system's) otherwise.
fn check_thunk(text: &str, thunk: &str) {
    // ld.so (LD_DEBUG=files): "     12345:	calling init: /path/libhsakmt.so.1"
    let loaded: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once("calling init: ").map(|(_, p)| p.trim()))
        .filter(|p| p.ends_with("/libhsakmt.so.1"))
        .collect();
    assert_eq!(loaded.len(), 1, "one libhsakmt.so.1 is loaded, not {loaded:?}:\n{}", without_ld_debug(text));
    let real = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let is_system = real(loaded[0]) == real(SYSTEM_HSAKMT);
    assert_eq!(is_system, thunk == "system", "ROCr loaded {} over {thunk} libhsakmt", loaded[0]);
}

/// `text` without the dynamic loader's lines ("     12345:\t..."), which would bury the
/// program's own output in a failure's report.
fn without_ld_debug(text: &str) -> String {
    let from_ld = |l: &str| {
        l.trim_start()
            .split_once(":\t")
            .is_some_and(|(pid, _)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
    };
    text.lines().filter(|l| !from_ld(l)).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_report_leaves_out_the_loaders_lines() {
    let text = "     176:\t\n     176:\tcalling init: /lib/libc.so.6\nPASS x\nmismatch: 3:\t4\n";
    assert_eq!(without_ld_debug(text), "PASS x\nmismatch: 3:\t4");
}
