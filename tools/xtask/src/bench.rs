//! The benches of `cargo xtask bench`.

use crate::steps::{Ctx, Outcome, Step};

/// Every bench. A new bench is one entry here and one function below.
pub const BENCHES: [Step; 1] =
    [Step { name: "engine", aliases: &[], needs: "the kfd-bench binary (tools/bench)", run: engine_bench }];

/// The soft command processor on the embedded device (tools/bench/src/engine.rs).
fn engine_bench(ctx: &Ctx) -> Outcome {
    if !has_bin(ctx, "tools/bench", "kfd-bench") {
        return Outcome::Skipped("tools/bench has no kfd-bench binary".into());
    }
    ctx.cargo(&["run", "--release", "-p", "kfd-bench", "--", "engine"])
}

/// Whether package directory `package` has binary `bin`, by cargo's rules: a `[[bin]]` of that
/// name in its manifest, or `src/bin/<bin>.rs`, or `src/bin/<bin>/main.rs`.
fn has_bin(ctx: &Ctx, package: &str, bin: &str) -> bool {
    let dir = ctx.root.join(package);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    let declared = manifest.lines().any(|l| l.replace(' ', "") == format!("name=\"{bin}\""));
    declared || dir.join(format!("src/bin/{bin}.rs")).is_file() || dir.join(format!("src/bin/{bin}/main.rs")).is_file()
}
