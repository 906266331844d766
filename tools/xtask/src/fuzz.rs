//! The fuzz tier: a short kfd-fuzz run on the embedded device, then each cargo-fuzz target of
//! tools/cuse-kfd-fuzz for a minute from a corpus seeded with the test scenarios.
//!
//! cargo-fuzz wants a nightly toolchain for its default AddressSanitizer build; on a stable
//! toolchain the targets build with `--sanitizer none` (libFuzzer's coverage instrumentation
//! needs only stable `-C` flags), which still finds panics, hangs, leaks the targets check and
//! out-of-memory. Builds are optimised with debug assertions and overflow checks on (`-O -a`).
//! `KFD_FUZZ_SECONDS` changes the time per target.

use crate::steps::{status_outcome, Ctx, Outcome};
use std::process::Command;

/// The cargo-fuzz targets (tools/cuse-kfd-fuzz/fuzz_targets).
const TARGETS: [&str; 2] = ["cuse_frames", "dispatcher"];
const FUZZ_DIR: &str = "tools/cuse-kfd-fuzz";

/// Seconds per cargo-fuzz target.
fn seconds() -> u64 {
    std::env::var("KFD_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60)
}

/// Whether the toolchain that runs xtask is a nightly (or allows unstable flags).
fn nightly(ctx: &Ctx) -> bool {
    let out = ctx.cargo_cmd(&["--version"]).output();
    let nightly = out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("nightly"));
    nightly || std::env::var_os("RUSTC_BOOTSTRAP").is_some_and(|v| v == "1")
}

fn ensure_cargo_fuzz(ctx: &Ctx) -> Result<(), Outcome> {
    if ctx.cargo_works(&["fuzz", "--version"]) {
        return Ok(());
    }
    if ctx.no_install {
        return Err(Outcome::Skipped("cargo-fuzz is not installed (--no-install)".into()));
    }
    println!("cargo-fuzz is not installed: installing it");
    match ctx.cargo(&["install", "cargo-fuzz", "--locked"]) {
        Outcome::Passed => Ok(()),
        other => Err(match other {
            Outcome::Failed(why) => Outcome::Failed(format!("cannot install cargo-fuzz: {why}")),
            o => o,
        }),
    }
}

pub fn run(ctx: &Ctx) -> Outcome {
    // 1. The structure-aware fuzzer: oracles on counts, isolation, leaks, errnos (about 15 s).
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_secs());
    let seed = seed.to_string();
    let out_dir = ctx.root.join("target/kfd-fuzz-failures");
    let out_dir = out_dir.to_string_lossy();
    let args =
        ["run", "--release", "-p", "kfd-fuzz", "--", "--iterations", "100000", "--seed", &seed, "--out", &out_dir];
    if let Outcome::Failed(why) = ctx.cargo(&args) {
        return Outcome::Failed(format!("kfd-fuzz (seed {seed}; replay files in {out_dir}): {why}"));
    }
    // 2. cargo-fuzz targets from a corpus seeded with the test scenarios.
    if let Err(o) = ensure_cargo_fuzz(ctx) {
        return o;
    }
    let manifest = format!("{FUZZ_DIR}/Cargo.toml");
    if let Outcome::Failed(why) = ctx.cargo(&["test", "--manifest-path", &manifest]) {
        return Outcome::Failed(format!("the fuzz targets' own tests (seeds decode and run clean): {why}"));
    }
    let corpus = format!("{FUZZ_DIR}/corpus");
    if let Outcome::Failed(why) =
        ctx.cargo(&["run", "--manifest-path", &manifest, "--example", "seed-corpus", "--", &corpus])
    {
        return Outcome::Failed(format!("seeding the corpus: {why}"));
    }
    let sanitizer = if nightly(ctx) { "address" } else { "none" };
    let time = format!("-max_total_time={}", seconds());
    for target in TARGETS {
        let dir = format!("{corpus}/{target}");
        let args =
            ["fuzz", "run", "--fuzz-dir", FUZZ_DIR, "--sanitizer", sanitizer, "-O", "-a", target, &dir, "--", &time];
        println!("$ cargo {}", args.join(" "));
        let mut cmd: Command = ctx.cargo_cmd(&args);
        if sanitizer == "address" {
            cmd.env("RUSTC_BOOTSTRAP", "1");
        }
        if let Outcome::Failed(why) = status_outcome(cmd.status(), "cargo fuzz") {
            return Outcome::Failed(format!(
                "fuzz target {target} ({why}): the input is in {FUZZ_DIR}/artifacts/{target}"
            ));
        }
    }
    Outcome::Passed
}
