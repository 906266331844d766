//! The test tiers of `cargo xtask test`, in the order they run.

use crate::steps::{self, Ctx, Outcome, Record, Step};

/// Every tier. A new tier is one entry here and one function below.
pub const TIERS: [Step; 5] = [
    Step {
        name: "unit+integration",
        aliases: &["unit", "integration"],
        needs: "the system packages: the uapi ABI test compiles C against their headers",
        run: unit_and_integration,
    },
    Step {
        name: "clippy",
        aliases: &["lint"],
        needs: "the clippy component (rustup component add clippy)",
        run: clippy,
    },
    Step {
        name: "fmt",
        aliases: &["rustfmt"],
        needs: "the rustfmt component (rustup component add rustfmt)",
        run: fmt,
    },
    Step {
        name: "device",
        aliases: &["real-device"],
        needs: "root, and a kernel with CUSE: natively (/dev/cuse) or in a virtme-ng VM that it provisions",
        run: device,
    },
    Step {
        name: "fuzz",
        aliases: &["fuzzers"],
        needs: "cargo-fuzz (installed when missing) and a C++ compiler for libFuzzer; see fuzz.rs",
        run: crate::fuzz::run,
    },
];

/// Runs `tiers` in order under the CI rule: when the environment variable CI marks a CI run
/// (`ci` is its value, see [`steps::is_ci`]), a tier that would be skipped fails instead.
pub fn run(ctx: &Ctx, tiers: &[&Step], ci: Option<&str>) -> Vec<Record> {
    let mut records = steps::run_steps(ctx, "tier", tiers);
    for r in &mut records {
        let outcome = std::mem::replace(&mut r.outcome, Outcome::Passed);
        r.outcome = steps::judge_skip(r.name, outcome, ci);
    }
    records
}

/// Test targets whose heaviest tests are too slow for a debug build, so they are ignored there
/// (`#[cfg_attr(debug_assertions, ignore)]`) and run here in release: cuse-kfd's quota tests
/// (10^6 timed waits completed early, issue 13 item 8).
const RELEASE_TARGETS: [&[&str]; 1] = [&["-p", "cuse-kfd", "--test", "quota"]];

/// `cargo test --workspace` in debug: unit tests, the uapi ABI test, cross-crate tests. With
/// --no-fail-fast, so that one failing target does not hide the results of the later ones; the
/// summary names every target that failed. Then the [`RELEASE_TARGETS`] in release, whatever
/// the debug run said.
fn unit_and_integration(ctx: &Ctx) -> Outcome {
    let mut failures = Vec::new();
    if let Outcome::Failed(why) = cargo_test(ctx, &["test", "--workspace", "--no-fail-fast"]) {
        failures.push(why);
    }
    for target in RELEASE_TARGETS {
        let args: Vec<&str> = ["test", "--release"].into_iter().chain(target.iter().copied()).collect();
        if let Outcome::Failed(why) = cargo_test(ctx, &args) {
            failures.push(format!("in release, {why}"));
        }
    }
    if failures.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed(failures.join("; "))
    }
}

fn cargo_test(ctx: &Ctx, args: &[&str]) -> Outcome {
    match ctx.cargo_reporting_failures(args) {
        Ok((status, _)) if status.success() => Outcome::Passed,
        Ok((status, failed)) if failed.is_empty() => Outcome::Failed(format!("cargo test: {status}")),
        Ok((_, failed)) => {
            let n = failed.len();
            let which = failed.join(", ");
            Outcome::Failed(format!("cargo test: {n} target{} failed: {which}", if n == 1 { "" } else { "s" }))
        }
        Err(e) => Outcome::Failed(format!("cannot run cargo test: {e}")),
    }
}

fn clippy(ctx: &Ctx) -> Outcome {
    if !ctx.cargo_works(&["clippy", "--version"]) {
        return Outcome::Skipped("cargo clippy is not installed (rustup component add clippy)".into());
    }
    ctx.cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])
}

fn fmt(ctx: &Ctx) -> Outcome {
    if !ctx.cargo_works(&["fmt", "--version"]) {
        return Outcome::Skipped("rustfmt is not installed (rustup component add rustfmt)".into());
    }
    ctx.cargo(&["fmt", "--all", "--", "--check"])
}

/// The real-device tier: /dev/kfd served over CUSE to real clients (device.rs).
fn device(ctx: &Ctx) -> Outcome {
    crate::device::run(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::judge_skip;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for cargo: a shell script in a fresh directory.
    fn fake_cargo(script: &str) -> (tempfile::TempDir, Ctx) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cargo");
        std::fs::write(&path, format!("#!/bin/sh\n{script}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ctx = Ctx::with_cargo(&path);
        (dir, ctx)
    }

    #[test]
    fn the_unit_tier_runs_every_crate_and_reports_every_failure() {
        // Like cargo: without --no-fail-fast the first failed target ends the run.
        let (_dir, ctx) = fake_cargo(
            r#"echo "error: test failed, to rerun pass \`-p a --lib\`" >&2
case " $* " in *" --no-fail-fast "*) ;; *) exit 101 ;; esac
echo "error: test failed, to rerun pass \`-p b --test t\`" >&2
echo "error: 2 targets failed:" >&2
exit 101
"#,
        );
        match unit_and_integration(&ctx) {
            Outcome::Failed(why) => assert_eq!(
                why,
                "cargo test: 2 targets failed: -p a --lib, -p b --test t; \
                 in release, cargo test: 1 target failed: -p a --lib"
            ),
            other => panic!("{other:?}"),
        }
        let (_dir, ctx) = fake_cargo("exit 0\n");
        assert!(matches!(unit_and_integration(&ctx), Outcome::Passed));
        // A failure cargo names no target for (a build error) keeps cargo's status.
        let (_dir, ctx) = fake_cargo("echo 'error: could not compile `a`' >&2; exit 101\n");
        assert!(matches!(unit_and_integration(&ctx), Outcome::Failed(w) if w.contains("exit status: 101")));
    }

    #[test]
    fn under_ci_a_missing_clippy_or_rustfmt_fails_the_tier() {
        // `cargo clippy --version` and `cargo fmt --version` fail: the components are missing.
        let (_dir, ctx) = fake_cargo("exit 1\n");
        let lints: Vec<&Step> = TIERS.iter().filter(|t| matches!(t.name, "clippy" | "fmt")).collect();
        assert_eq!(lints.len(), 2);
        // A developer's run, and CI turned off: skipped, with the reason.
        for ci in [None, Some(""), Some("false"), Some("0")] {
            for r in run(&ctx, &lints, ci) {
                assert!(
                    matches!(&r.outcome, Outcome::Skipped(w) if w.contains("not installed")),
                    "{}: {:?}",
                    r.name,
                    r.outcome
                );
            }
        }
        // CI: failed, saying why.
        for r in run(&ctx, &lints, Some("true")) {
            match &r.outcome {
                Outcome::Failed(why) => {
                    assert!(why.contains("CI must never skip") && why.contains("not installed"), "{why}")
                }
                other => panic!("{}: {other:?}", r.name),
            }
        }
    }

    #[test]
    fn under_ci_a_skipped_tier_fails() {
        let skipped = || Outcome::Skipped("not root (uid 1000)".into());
        // A developer's run, and CI turned off: the skip stays a skip.
        for ci in [None, Some(""), Some("false"), Some("FALSE"), Some("0"), Some(" ")] {
            assert!(matches!(judge_skip("device", skipped(), ci), Outcome::Skipped(_)), "CI={ci:?}");
        }
        // CI set: a failure that says why it was skipped.
        for ci in [Some("true"), Some("1"), Some("yes"), Some("woodpecker")] {
            match judge_skip("device", skipped(), ci) {
                Outcome::Failed(msg) => assert!(
                    msg.contains("CI must never skip the device tier") && msg.contains("not root (uid 1000)"),
                    "{msg}"
                ),
                _ => panic!("CI={ci:?}: a skip must fail"),
            }
        }
        // Other outcomes are left alone.
        assert!(matches!(judge_skip("device", Outcome::Passed, Some("true")), Outcome::Passed));
        assert!(
            matches!(judge_skip("device", Outcome::Failed("x".into()), Some("true")), Outcome::Failed(m) if m == "x")
        );
    }
}
