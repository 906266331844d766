//! The benches of `cargo xtask bench`.

use crate::steps::{Ctx, Outcome, Step};

/// Every bench. A new bench is one entry here and one function below.
pub const BENCHES: [Step; 5] = [
    Step { name: "engine", aliases: &[], needs: "the kfd-bench binary (tools/kfd-bench)", run: engine_bench },
    Step { name: "signals", aliases: &[], needs: "the kfd-bench binary and the rocr-shim", run: signals_bench },
    Step { name: "kfd", aliases: &[], needs: "the kfd-bench binary (tools/kfd-bench)", run: kfd_bench },
    Step {
        name: "shader",
        aliases: &[],
        needs: "the kfd-bench binary; llvm-mc-15, clang-15, ld.lld-15 and llvm-nm-15 (apt-get install clang-15 llvm-15 lld-15)",
        run: shader_bench,
    },
    Step {
        name: "cuse",
        aliases: &[],
        needs: "root, CUSE (natively or the device tier's VM), cc and libfuse3-dev for the reference server",
        run: cuse_bench,
    },
];

/// The soft command processor on the embedded device (tools/kfd-bench/src/engine.rs).
fn engine_bench(ctx: &Ctx) -> Outcome {
    if !has_bin(ctx, "tools/kfd-bench", "kfd-bench") {
        return Outcome::Skipped("tools/kfd-bench has no kfd-bench binary".into());
    }
    ctx.cargo(&["run", "--release", "-p", "kfd-bench", "--", "engine"])
}

/// Signal batches and wake-up latency through the rocr-shim (tools/kfd-bench/src/signals.rs).
fn signals_bench(ctx: &Ctx) -> Outcome {
    ctx.cargo(&["run", "--release", "-p", "kfd-bench", "--", "signals"])
}

/// The KFD interface's throughput on the embedded device: SDMA copies, PM4 packets, queue
/// churn, event round trips, USERPTR registration (tools/kfd-bench/src/kfd.rs).
fn kfd_bench(ctx: &Ctx) -> Outcome {
    ctx.cargo(&["run", "--release", "-p", "kfd-bench", "--", "kfd"])
}

/// The soft shader core on gfx90a kernels built with LLVM 15, against plain Rust
/// (tools/kfd-bench/src/shader.rs).
fn shader_bench(ctx: &Ctx) -> Outcome {
    let missing: Vec<&str> = ["llvm-mc-15", "clang-15", "ld.lld-15", "llvm-nm-15"]
        .into_iter()
        .filter(|t| !std::process::Command::new(t).arg("--version").output().is_ok_and(|o| o.status.success()))
        .collect();
    if !missing.is_empty() {
        return Outcome::Skipped(format!("{} missing (apt-get install clang-15 llvm-15 lld-15)", missing.join(", ")));
    }
    ctx.cargo(&["run", "--release", "-p", "kfd-bench", "--", "shader"])
}

/// CUSE round trips against a libfuse3 CUSE device (tools/kfd-bench/src/cuse.rs), where the device
/// tier runs: natively with /dev/cuse, otherwise in its VM.
fn cuse_bench(ctx: &Ctx) -> Outcome {
    crate::device::run_where_cuse_is(ctx, "the release daemon, kfd-bench and the libfuse3 reference server", |ctx| {
        let messages =
            crate::device::cargo_json(ctx, &["build", "--release", "-p", "cuse-kfd", "--bins", "-p", "kfd-bench"])?;
        let exe = |name: &str| {
            crate::device::artifacts(&messages)
                .find(|a| a.name == name && a.kinds.iter().any(|k| k == "bin") && !a.test)
                .map(|a| a.executable)
                .ok_or(format!("the release build produced no {name}"))
        };
        let (daemon, bench) = (exe("cuse-kfd")?, exe("kfd-bench")?);
        let reference = build_cuse_ref(ctx)?;
        let test = crate::vm::GuestTest {
            label: "kfd-bench/cuse".into(),
            exe: bench,
            args: vec!["cuse".into()],
            cwd: ctx.root.clone(),
            limit: None,
            tests: None,
        };
        let mut env = vec![
            ("CUSE_KFD_BIN", daemon.to_string_lossy().into_owned()),
            ("KFD_BENCH_CUSE_REF", reference.to_string_lossy().into_owned()),
        ];
        if let Ok(n) = std::env::var("KFD_BENCH_CUSE_CALLS") {
            env.push(("KFD_BENCH_CUSE_CALLS", n));
        }
        if let Ok(log) = std::env::var("RUST_LOG") {
            env.push(("RUST_LOG", log));
        }
        Ok((vec![test], env))
    })
}

/// Compiles tools/kfd-bench/cuse-ref/cuse_ref.c against libfuse3 (pkg-config fuse3) and
/// linux/kfd_ioctl.h (whose <drm/drm.h> Debian keeps in libdrm/).
fn build_cuse_ref(ctx: &Ctx) -> Result<std::path::PathBuf, String> {
    use std::process::Command;
    let dir = ctx.target_dir().join("release");
    let inc = ctx.target_dir().join("cuse-ref-include");
    std::fs::create_dir_all(&inc).map_err(|e| format!("creating {}: {e}", inc.display()))?;
    let drm = inc.join("drm");
    if !drm.exists() {
        std::os::unix::fs::symlink("/usr/include/libdrm", &drm)
            .map_err(|e| format!("linking {}: {e}", drm.display()))?;
    }
    let pkg = |flag: &str| -> Result<Vec<String>, String> {
        let out = Command::new("pkg-config").args([flag, "fuse3"]).output().map_err(|e| format!("pkg-config: {e}"))?;
        if !out.status.success() {
            return Err("pkg-config knows no fuse3: install libfuse3-dev".into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect())
    };
    let out = dir.join("cuse_ref");
    let src = ctx.root.join("tools/kfd-bench/cuse-ref/cuse_ref.c");
    println!("$ cc {} -> {}", src.display(), out.display());
    let st = Command::new("cc")
        .args(["-O2", "-Wall", "-Werror"])
        .arg(format!("-I{}", inc.display()))
        .args(pkg("--cflags")?)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .args(pkg("--libs")?)
        .status()
        .map_err(|e| format!("running cc: {e}"))?;
    if !st.success() {
        return Err(format!("compiling {} failed ({st})", src.display()));
    }
    Ok(out)
}

/// Whether package directory `package` has binary `bin`, by cargo's rules: a `[[bin]]` of that
/// name in its manifest, or `src/bin/<bin>.rs`, or `src/bin/<bin>/main.rs`.
fn has_bin(ctx: &Ctx, package: &str, bin: &str) -> bool {
    let dir = ctx.root.join(package);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    let declared = manifest.lines().any(|l| l.replace(' ', "") == format!("name=\"{bin}\""));
    declared || dir.join(format!("src/bin/{bin}.rs")).is_file() || dir.join(format!("src/bin/{bin}/main.rs")).is_file()
}
