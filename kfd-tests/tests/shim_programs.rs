//! The shim's C programs (rocr-shim/tests/c) beyond the shim's own tests, which run them on
//! the embedded device (`cargo test -p rocr-shim --test c_programs`):
//!
//! - built with -DCUSE_KFD_REAL_ROCR (the shim's extensions compiled out) and linked with Debian's
//!   real ROCr 5.2.3, they run over our libhsakmt on the embedded device (`cargo run -p cuse-kfd-run
//!   -- --embedded`): the same standard-HSA checks hold on both runtimes;
//! - in the real-device tier, against a `cuse-kfd serve` node: every program on the shim
//!   (CUSE_KFD_DEVICE names the node), and the real-ROCr builds through `$CUSE_KFD_BIN run
//!   --device`. A plain `cargo test` lists those tests as ignored ("device tier").
//!
//! kfd-tests/build.rs compiles the programs on the host (kfd_tests::shim_programs lists them), so the
//! tier's VM only runs them; `cargo xtask test device` stages the shim's library in
//! target/<profile>/lib-shim beside the daemon before the VM starts.
//!
//! Each program exits non-zero on its first failed check; it passes when it exits 0 having printed
//! `PASS <name>`.

use kfd_tests::device::{tier, Daemon};
use kfd_tests::program::{assert_lists_every_program, run_bounded};
use kfd_tests::shim_programs::{REAL_ROCR_PROGRAMS, SHIM_PROGRAMS};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A build of the programs: which runtime it links.
#[derive(Clone, Copy, PartialEq)]
enum Build {
    Shim,
    RealRocr,
}

impl Build {
    fn dir(self) -> PathBuf {
        let sub = match self {
            Build::Shim => "shim",
            Build::RealRocr => "rocr",
        };
        Path::new(env!("OUT_DIR")).join("shim-programs").join(sub)
    }
}

/// How a program reaches the device.
#[derive(Clone, Copy)]
enum Transport<'a> {
    /// The device inside the program's process: `cargo run -p cuse-kfd-run -- --embedded`.
    Embedded,
    /// The device inside the program's process, on the shim: `cuse-kfd run --embedded --runtime
    /// shim`, which puts the shim's libhsa-runtime64.so.1 and our libhsakmt first.
    EmbeddedShim,
    /// A node, through `<bin> run --device <node>` (it puts our libhsakmt first).
    Run { bin: &'a Path, node: &'a Path },
    /// A node, the program started directly with the staged shim first on the library path.
    Shim { lib_dir: &'a Path, node: &'a Path },
}

impl Transport<'_> {
    fn name(&self) -> String {
        match self {
            Transport::Embedded | Transport::EmbeddedShim => "embedded".into(),
            Transport::Run { node, .. } | Transport::Shim { node, .. } => node.display().to_string(),
        }
    }

    fn command(&self, exe: &Path) -> Command {
        let mut cmd = match self {
            Transport::Embedded => {
                let mut c = kfd_tests::launcher::cargo_run();
                c.args(["--embedded", "--"]).arg(exe);
                c
            }
            Transport::EmbeddedShim => {
                let mut c = kfd_tests::launcher::cargo_run();
                c.args(["--embedded", "--runtime", "shim", "--"]).arg(exe);
                c
            }
            Transport::Run { bin, node } => {
                let mut c = Command::new(bin);
                c.args(["run", "--device"]).arg(node).arg("--").arg(exe).env("CUSE_KFD_TEST_DIVISOR", DEVICE_DIVISOR);
                c
            }
            Transport::Shim { lib_dir, node } => {
                let mut c = Command::new(exe);
                // The switches batch.c sets itself start unset, as in the shim's own tests.
                c.env("LD_LIBRARY_PATH", lib_dir)
                    .env("CUSE_KFD_DEVICE", node)
                    .env("CUSE_KFD_TEST_DIVISOR", DEVICE_DIVISOR)
                    .env_remove("CUSE_KFD_EMBEDDED")
                    .env_remove("CUSE_KFD_SHIM_PCIE_STORES_NEED_FLUSH")
                    .env_remove("CUSE_KFD_SHIM_DEVICE_SIGNALS");
                c
            }
        };
        cmd.current_dir(workspace());
        cmd
    }
}

/// Embedded runs go through `cargo run`, which may first have to build the daemon.
const RUN_LIMIT: Duration = Duration::from_secs(600);
/// On a node a program takes 10-50 s under TCG (queue.c's 127 queues the longest); a hang is
/// reported with the program's output inside the tier's per-binary limit.
const DEVICE_RUN_LIMIT: Duration = Duration::from_secs(150);
/// On a node the stress loops (threads.c: rounds of creates, BLOCKED ping-pongs) run an eighth of
/// their iterations (check.h's scaled()): under TCG a BLOCKED wake-up through CUSE costs about
/// 15 ms, and the full counts run on the embedded device already.
const DEVICE_DIVISOR: &str = "8";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// Program `name` of `build`; panics with the build's output if it did not build.
fn program(build: Build, name: &str) -> PathBuf {
    let dir = build.dir();
    if let Ok(why) = std::fs::read_to_string(dir.join(format!("{name}.err"))) {
        panic!("{name}.c did not build (cc, binutils and libhsa-runtime-dev are needed; cargo xtask test installs them):\n{why}");
    }
    let exe = dir.join(name);
    assert!(exe.is_file(), "{} was not built (kfd-tests/build.rs builds it)", exe.display());
    exe
}

/// Runs `exe` through `transport` (see [`run_bounded`]).
fn run(exe: &Path, transport: Transport) -> (bool, String) {
    let limit = match transport {
        Transport::Embedded | Transport::EmbeddedShim => RUN_LIMIT,
        _ => DEVICE_RUN_LIMIT,
    };
    run_bounded(transport.command(exe), exe, limit, String::new)
}

/// Runs program `name` of `build` through `transport`; it must exit 0 having printed `PASS <name>`.
fn check(build: Build, name: &str, transport: Transport) {
    let exe = program(build, name);
    let runtime = if build == Build::Shim { "shim" } else { "real ROCr" };
    let t0 = Instant::now();
    let (ok, text) = run(&exe, transport);
    println!("--- {name} on the {runtime} ({}), {:.1} s:\n{text}", transport.name(), t0.elapsed().as_secs_f64());
    assert!(ok, "{name} failed on the {runtime} ({}):\n{text}", transport.name());
    assert!(text.lines().any(|l| l.trim() == format!("PASS {name}")), "{name} did not reach its end:\n{text}");
}

#[test]
fn real_rocr_info() {
    check(Build::RealRocr, "info", Transport::Embedded);
}

#[test]
fn real_rocr_queue() {
    check(Build::RealRocr, "queue", Transport::Embedded);
}

#[test]
fn real_rocr_signals() {
    check(Build::RealRocr, "signals", Transport::Embedded);
}

#[test]
fn real_rocr_threads() {
    check(Build::RealRocr, "threads", Transport::Embedded);
}

#[test]
fn real_rocr_copy() {
    check(Build::RealRocr, "copy", Transport::Embedded);
}

/// `cuse-kfd run --runtime shim` runs an HSA program on the shim (and a later `--runtime rocr`
/// run still gets the real ROCr: real_rocr_* check that the shim is not what they loaded).
#[test]
fn cuse_kfd_run_with_the_shim_runtime() {
    check(Build::Shim, "queue", Transport::EmbeddedShim);
}

/// Every program on the shim, against a `cuse-kfd serve` node through the kernel's CUSE.
#[test]
#[ignore = "device tier"]
fn device_tier_shim_programs() {
    let bin = tier();
    // `cargo xtask test device` stages the shim's library beside the daemon (target/<profile>).
    let lib_dir = bin.parent().expect("the daemon's directory").join(cuse_kfd_run::stage::HSA_RUNTIME_SHIM.dir);
    assert!(
        lib_dir.join("libhsa-runtime64.so.1").is_file(),
        "{} holds no libhsa-runtime64.so.1 (cargo xtask test device stages it there)",
        lib_dir.display()
    );
    let d = Daemon::start(&bin, "kfd-t-shim");
    for name in SHIM_PROGRAMS {
        check(Build::Shim, name, Transport::Shim { lib_dir: &lib_dir, node: &d.node });
    }
}

/// The real-ROCr builds against a node, through `cuse-kfd run --device`.
#[test]
#[ignore = "device tier"]
fn device_tier_real_rocr_programs() {
    let bin = tier();
    let d = Daemon::start(&bin, "kfd-t-shimr");
    for name in REAL_ROCR_PROGRAMS {
        check(Build::RealRocr, name, Transport::Run { bin: &bin, node: &d.node });
    }
}

/// One test per real-ROCr program above, and the lists name programs that exist.
#[test]
fn every_program_is_listed() {
    assert_lists_every_program(&workspace().join("rocr-shim/tests/c"), SHIM_PROGRAMS.iter().copied());
    assert!(REAL_ROCR_PROGRAMS.iter().all(|n| SHIM_PROGRAMS.contains(n)));
    let this = std::fs::read_to_string(workspace().join(file!())).expect("this test's source");
    for name in REAL_ROCR_PROGRAMS {
        assert!(this.contains(&format!("fn real_rocr_{name}()")), "no test runs {name} on the real ROCr");
    }
}
