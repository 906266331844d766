//! `cargo xtask`: the project's runner for the demo, the test tiers and the benches.
//!
//! Arguments are a subcommand and a few names, parsed by hand; cargo's JSON messages are read
//! with serde_json, signals and uids come from nix.

mod bench;
mod device;
mod disk;
mod fuzz;
mod packages;
mod steps;
mod tiers;
mod vm;

use std::process::ExitCode;
use steps::{Ctx, Step};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
    let command = args.first().map(String::as_str);
    // `demo` passes its arguments on; the other commands take --help anywhere.
    if command != Some("demo") && rest.iter().any(|a| matches!(*a, "-h" | "--help")) {
        print_help();
        return ExitCode::SUCCESS;
    }
    let mut ctx = Ctx::new();
    match command {
        Some("-h" | "--help" | "help") => {
            print_help();
            ExitCode::SUCCESS
        }
        Some("demo") => demo(&ctx, &rest),
        Some("test") => test(&mut ctx, &rest),
        Some("bench") => bench(&ctx, &rest),
        Some(other) => usage_error(&format!("unknown command `{other}`")),
        None => usage_error("no command given"),
    }
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("cargo xtask: {msg}; see `cargo xtask --help`");
    ExitCode::from(2)
}

/// `cargo xtask demo [PROFILE]`: `cargo run --release -p kfd-demo -- [PROFILE]`, its exit code.
fn demo(ctx: &Ctx, rest: &[&str]) -> ExitCode {
    let mut args = vec!["run", "--release", "-p", "kfd-demo", "--"];
    args.extend_from_slice(rest);
    println!("$ cargo {}", args.join(" "));
    match ctx.cargo_cmd(&args).status() {
        Ok(status) => exit_code(status),
        Err(e) => {
            eprintln!("cargo xtask: cannot run cargo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A child's exit status as ours: its code, or 128 + the signal that killed it.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code as u8),
        (None, Some(sig)) => ExitCode::from(128u8.saturating_add(sig as u8)),
        (None, None) => ExitCode::FAILURE,
    }
}

/// `cargo xtask test [--no-install] [TIER...]`.
fn test(ctx: &mut Ctx, rest: &[&str]) -> ExitCode {
    let (flags, names): (Vec<&str>, Vec<&str>) = rest.iter().partition(|a| a.starts_with('-'));
    let no_install = match flags.as_slice() {
        [] => false,
        ["--no-install"] => true,
        _ => return usage_error(&format!("unknown option in {flags:?}")),
    };
    let tiers = match select(&tiers::TIERS, &names) {
        Ok(tiers) => tiers,
        Err(name) => {
            let known = list(&tiers::TIERS);
            return usage_error(&format!("unknown tier `{name}` (tiers: {known})"));
        }
    };
    ctx.no_install = no_install;
    let target = ctx.target_dir();
    let disk = match disk::free_bytes(&target) {
        // Only the whole gate is refused up front; one tier needs a fraction of it.
        Ok(free) if names.is_empty() => match disk::verdict(&target, free, disk::FULL_RUN_BYTES) {
            Ok(line) => line,
            Err(why) => {
                eprintln!("xtask test: {why}");
                return ExitCode::FAILURE;
            }
        },
        Ok(free) => format!("{:.1} GiB free", free as f64 / (1u64 << 30) as f64),
        Err(e) => format!("free space unknown ({e})"),
    };
    let packages = if no_install { "not checked (--no-install)".to_owned() } else { packages::ensure() };
    let records = tiers::run(ctx, &tiers, std::env::var("CI").ok().as_deref());
    let preface = [format!("packages: {packages}"), format!("disk: {disk}")];
    status(steps::print_summary("tier", &preface, &records))
}

fn status(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `cargo xtask bench [BENCH...]`.
fn bench(ctx: &Ctx, rest: &[&str]) -> ExitCode {
    let benches = match select(&bench::BENCHES, rest) {
        Ok(benches) => benches,
        Err(name) => {
            let known = list(&bench::BENCHES);
            return usage_error(&format!("unknown bench `{name}` (benches: {known})"));
        }
    };
    let records = steps::run_steps(ctx, "bench", &benches);
    status(steps::print_summary("bench", &[], &records))
}

/// The named steps in table order, or all of them when no name is given; Err(name) for a name
/// the table does not know.
fn select<'a>(table: &'a [Step], names: &[&'a str]) -> Result<Vec<&'a Step>, &'a str> {
    if let Some(unknown) = names.iter().find(|n| !table.iter().any(|s| s.is_called(n))) {
        return Err(unknown);
    }
    let wanted = |s: &&Step| names.is_empty() || names.iter().any(|n| s.is_called(n));
    Ok(table.iter().filter(wanted).collect())
}

fn list(table: &[Step]) -> String {
    table.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

fn print_help() {
    println!(
        "cargo xtask: the cuse-kfd project runner

USAGE:
    cargo xtask demo [PROFILE]
        The end-to-end demo through the HSA runtime's Rust API (rocr-shim) on the embedded
        device (no root): `cargo run --release -p kfd-demo -- [PROFILE]` (topology profile,
        gfx90a by default, or gfx1030), exiting with its code.

    cargo xtask test [--no-install] [TIER...]
        The test gate (what .ci/run runs). First makes sure the system packages below are
        installed: checks each with dpkg-query; when some are missing and xtask runs as root,
        runs `apt-get update` once and `apt-get install -y --no-install-recommends` them; when
        not root, says which were skipped and goes on (the tests that need them fail, saying
        what to install). --no-install skips this step. Then runs the named tiers, or all of
        them in this order, streaming their output, and prints a table: each tier passed,
        FAILED or skipped (with the reason) and its seconds. Exits non-zero if a tier failed.
        A tier may be named by its name or an alias (`cargo xtask test unit`). CI must never
        skip a tier: when the environment variable CI is set (not empty, not `false` or `0`),
        a tier that would be skipped (no clippy, no rustfmt, no root for the device tier)
        FAILS, with the reason. The unit+integration tier runs every crate's tests even after
        one fails (--no-fail-fast) and names each failed target, then in release the tests too
        slow for debug (cuse-kfd --test quota). A full run (no TIER named) first checks the
        free space under the target directory and stops at once, saying so, when it is below
        what a run from a clean clone writes (16 GiB with margin).

        The device tier needs root. It runs its test binaries natively when /dev/cuse exists
        or `modprobe cuse` makes it; otherwise it boots a virtme-ng VM (QEMU, TCG) with a
        Debian kernel that has CUSE, first installing the VM's packages below (apt-get) and
        virtme-ng (pip, in a venv of its own). Without root it is skipped, with the reason
        (under CI: fails).
        Environment: CUSE_KFD_DEVICE_RUNNER=native|vm forces the choice; CUSE_KFD_VM_KVM=1
        lets the VM use KVM; CUSE_KFD_VNG=PATH uses that vng instead of the venv's;
        CUSE_KFD_DEVICE_EXTRA_TESTS='package/target ...' runs more test targets than the
        table below; CUSE_KFD_DEVICE_ONLY='target ...' runs only those (while working on
        one; a run that sets it is not the whole tier).

    cargo xtask bench [BENCH...]
        Runs the benches (release builds) and prints the same kind of table. A bench whose
        binary does not exist yet is reported as skipped.

    cargo xtask --help
        This text.

TIERS:"
    );
    for t in &tiers::TIERS {
        print_step(t);
    }
    println!("\nBENCHES:");
    for b in &bench::BENCHES {
        print_step(b);
    }
    println!("\nDEVICE TIER TEST BINARIES (cargo test -p PACKAGE --test TARGET):");
    for t in &device::DEVICE_TESTS {
        println!("    {:<24} {}", format!("{}/{}", t.package, t.target), t.what);
    }
    println!("\nSYSTEM PACKAGES (Debian):");
    for p in &packages::REQUIRED {
        println!("    {:<20} {}", p.name, p.why);
    }
    println!("\nDEVICE TIER VM PACKAGES (installed by the device tier when it boots a VM):");
    for p in &packages::DEVICE_VM {
        println!("    {:<20} {}", p.name, p.why);
    }
    let v = &packages::VIRTME_NG;
    println!("    {:<20} {} (PyPI {}=={}, in {})", v.name, v.why, v.name, v.version, vm::VENV);
}

fn print_step(s: &Step) {
    let aliases = if s.aliases.is_empty() { String::new() } else { format!(" (also: {})", s.aliases.join(", ")) };
    println!("    {}{aliases}\n        needs {}", s.name, s.needs);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(steps: &[&Step]) -> Vec<&'static str> {
        steps.iter().map(|s| s.name).collect()
    }

    #[test]
    fn select_takes_names_and_aliases_in_table_order() {
        let all = select(&tiers::TIERS, &[]).unwrap();
        assert_eq!(names(&all), ["unit+integration", "clippy", "fmt", "device", "fuzz"]);
        let some = select(&tiers::TIERS, &["device", "unit"]).unwrap();
        assert_eq!(names(&some), ["unit+integration", "device"]);
        assert_eq!(select(&tiers::TIERS, &["fmt", "nope"]).err(), Some("nope"));
    }

    #[test]
    fn every_tier_and_bench_name_is_unique() {
        let steps = tiers::TIERS.iter().chain(&bench::BENCHES);
        let mut seen = Vec::new();
        for s in steps {
            for n in std::iter::once(&s.name).chain(s.aliases) {
                assert!(!seen.contains(n), "{n} names two steps");
                seen.push(n);
            }
        }
    }
}
