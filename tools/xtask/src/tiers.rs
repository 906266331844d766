//! The test tiers of `cargo xtask test`, in the order they run.

use crate::steps::{Ctx, Outcome, Step};

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

/// `cargo test --workspace` in debug: unit tests, the uapi ABI test, cross-crate tests.
fn unit_and_integration(ctx: &Ctx) -> Outcome {
    ctx.cargo(&["test", "--workspace"])
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
