//! The real-device tier: test binaries that need a kernel with CUSE, run natively where
//! /dev/cuse exists (or `modprobe cuse` makes it) and we are root, otherwise inside a virtme-ng
//! VM that boots a stock Debian kernel (see vm.rs).
//!
//! Every test binary is built on the host first (`cargo test --no-run`, executables from
//! cargo's JSON messages), with the daemon (`cargo build -p cuse-kfd --bins`) and kfd-fuzz
//! (`cargo build -p kfd-fuzz --bins`). The tests get CUSE_KFD_DEVICE_TIER=1, CUSE_KFD_BIN=<the
//! cuse-kfd binary> and CUSE_KFD_FUZZ_BIN=<the kfd-fuzz binary>. A device-tier test is marked
//! [`DEVICE_TIER_IGNORE`], so a plain `cargo test` lists it as ignored (and fails it when run
//! outside the tier); the tier runs exactly the marked tests of each target, by name. Each
//! prints [`RAN_MARKER`] straight to stdout (not captured by libtest) when it really runs: the
//! tier fails when a target ran fewer tests than it has marked, or one passed without its line.

use crate::packages;
use crate::steps::{Ctx, Outcome};
use crate::vm::{self, GuestTest};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A test target of the tier: `cargo test -p <package> --test <target>`, run with `args`.
pub struct DeviceTest {
    pub package: &'static str,
    pub target: &'static str,
    /// More libtest options (`--show-output`); the tests are the target's [`DEVICE_TIER_IGNORE`]
    /// ones, given by name.
    pub args: &'static [&'static str],
    /// Ordinary tests of the target that the host runs first (by name), to make what the guest
    /// only runs (the HIP programs: the guest sees the target directory read-only, and hipcc
    /// under TCG would take most of the tier's time).
    pub host_first: &'static [&'static str],
    pub what: &'static str,
}

/// Every test binary of the tier, in the order they run. A new one is a line here: an
/// integration test target with tests marked [`DEVICE_TIER_IGNORE`].
/// `CUSE_KFD_DEVICE_EXTRA_TESTS="package/target ..."` adds targets for one run (to try a new
/// one in the VM before it joins the table); `CUSE_KFD_DEVICE_ONLY="target ..."` keeps only the
/// named ones (a quicker loop while working on one; CI never sets it).
pub const DEVICE_TESTS: [DeviceTest; 14] = [
    DeviceTest {
        package: "kfd-tests",
        target: "device",
        args: &[],
        host_first: &[],
        what: "CUSE itself: CUSE_INIT answered by hand makes a node, closing removes it",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "rocr_programs",
        // The output of passing tests too: each program's checks and time on the node.
        args: &["--show-output"],
        host_first: &[],
        what: "the real ROCr 5.2.3 over the node, on our libhsakmt and on the system's: queues, barriers, \
               wraparound, BLOCKED waits, timeouts, queue errors, IPC memory between two processes",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "shim_programs",
        // The output of passing tests too: each program's checks and time on the node.
        args: &["--show-output"],
        host_first: &[],
        what: "the shim's C programs over the node on our HSA runtime, and without its extensions on the \
               real ROCr 5.2.3: one behaviour, two runtimes",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "rocminfo",
        args: &[],
        host_first: &[],
        what: "Debian's rocminfo (real ROCr 5.2.3) over our libhsakmt over the node",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "hsakmt_programs",
        // The output of passing tests too: each program's checks and time on the node.
        args: &["--show-output"],
        host_first: &[],
        what: "C programs on Debian's real libhsakmt 5.2.3 over the node: topology, memory and SDMA copies, \
               allocation until ENOMEM, AQL/PM4/SDMA queues, RELEASE_MEM and TRAP events, 4096 events, \
               a forked process isolated, the PMC counter blocks; run without root; a killed run takes its \
               program along",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "cuse_device",
        args: &[],
        host_first: &[],
        what: "cuse-kfd serve through the kernel: ioctls and RETRY hops, waits, EINTR, killed clients, \
               isolation, the daemon dying, a clean SIGTERM shutdown, status, fault injection, the \
               --sysfs-mount tree",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "backing_hostile",
        args: &[],
        host_first: &[],
        what: "the backing store against hostile clients: uid 65534 swapping its directories for symlinks \
               reaches nothing, a 4 MiB tmpfs runtime directory answers ENOMEM at allocation",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "cross_uid",
        // The output of the passing test too: what the intruder tried.
        args: &["--show-output"],
        host_first: &[],
        what: "two clients of uids 65534 and 65533: the second cannot open, stat, list or map the first's                backing files, and every ioctl naming the first's handles or ids is refused with amdkfd's errno",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "identity_node",
        // The output of the passing test too: how soon the context ended.
        args: &["--show-output"],
        host_first: &[],
        what: "identity through the node: a context ends within 100 ms of its owner's exit while a child \
               holds the fd, whose ioctls answer EBADF; clients each pid 1 of their own pid namespace get a \
               context each; a daemon in its own pid namespace refuses callers it cannot see (pid 0)",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "restart",
        // The output of passing tests too: how soon clients failed and the daemon exited.
        args: &["--show-output"],
        host_first: &[],
        what: "the daemon SIGKILLed under three blocked clients (each fails within 1 s), restarted on the same \
               runtime directory (as a fresh one) and served to a recycled pid; a reused pid gets a fresh \
               context; SIGTERM under busy clients exits 0 within 5 s",
    },
    DeviceTest {
        package: "cuse-kfd",
        target: "negative",
        // The output of the passing test too: how many rows ran through the node, which not.
        args: &["--show-output"],
        host_first: &[],
        what: "the negative table (cuse-kfd/tests/negative.rs) through the kernel on a cuse-kfd serve node: \
               every row ioctl(2) can express, amdkfd's errno, nothing created, each row's context torn down",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "confinement",
        // The output of passing tests too: the CapEff and the systemd unit's exposure score.
        args: &["--show-output"],
        host_first: &[],
        what: "cuse-kfd serve confined: node 0660 group render by default, NoNewPrivs 1, Seccomp 2 and the \
               kept capabilities on every thread, execve and socket(AF_INET) refused, untrusted \
               directories refused, deploy/cuse-kfd.service scored by systemd-analyze",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "hip_node",
        // The output of passing tests too: each program's time on the node.
        args: &["--show-output"],
        host_first: &["the_programs_are_built_on_the_host"],
        what: "HIP programs (hipcc 5.2.3 for gfx90a) on the node with the real ROCr and HIP, each PASS on the \
               daemon's shader core: matmul (LDS and barriers) and histogram (atomics) on our libhsakmt, vadd, \
               warp and managed (XNACK on: SVM ranges, malloc'd memory by map-on-fault) on the system's",
    },
    DeviceTest {
        package: "kfd-tests",
        target: "fuzz_node",
        args: &[],
        host_first: &[],
        what: "kfd-fuzz --target node --iterations 100000 (fixed seed) against cuse-kfd serve: no crash, \
               hang, leak or isolation break",
    },
];

/// A test target to build and run: the table's, then the extra ones.
struct Target {
    package: String,
    target: String,
    args: Vec<String>,
    host_first: Vec<String>,
}

/// [`DEVICE_TESTS`] and the targets of `CUSE_KFD_DEVICE_EXTRA_TESTS`.
fn targets() -> Result<Vec<Target>, String> {
    let mut all: Vec<Target> = DEVICE_TESTS
        .iter()
        .map(|t| Target {
            package: t.package.into(),
            target: t.target.into(),
            args: t.args.iter().map(|a| a.to_string()).collect(),
            host_first: t.host_first.iter().map(|a| a.to_string()).collect(),
        })
        .collect();
    let extra = std::env::var("CUSE_KFD_DEVICE_EXTRA_TESTS").unwrap_or_default();
    for item in extra.split([' ', ',']).filter(|i| !i.is_empty()) {
        let Some((package, target)) = item.split_once('/') else {
            return Err(format!("CUSE_KFD_DEVICE_EXTRA_TESTS: `{item}` is not package/target"));
        };
        if !all.iter().any(|t| t.package == package && t.target == target) {
            println!("extra device test {item} (CUSE_KFD_DEVICE_EXTRA_TESTS)");
            all.push(Target {
                package: package.into(),
                target: target.into(),
                args: Vec::new(),
                host_first: Vec::new(),
            });
        }
    }
    let only = std::env::var("CUSE_KFD_DEVICE_ONLY").unwrap_or_default();
    let only: Vec<&str> = only.split([' ', ',']).filter(|i| !i.is_empty()).collect();
    if !only.is_empty() {
        if crate::steps::is_ci(std::env::var("CI").ok().as_deref()) {
            return Err("CUSE_KFD_DEVICE_ONLY is set under CI, which runs the whole device tier: unset it".into());
        }
        if let Some(unknown) = only.iter().find(|o| !all.iter().any(|t| t.target == **o)) {
            return Err(format!("CUSE_KFD_DEVICE_ONLY: no device test target `{unknown}`"));
        }
        all.retain(|t| only.contains(&t.target.as_str()));
        println!("CUSE_KFD_DEVICE_ONLY: running only {}", only.join(", "));
    }
    Ok(all)
}

/// The attribute that makes a test of a device target a device-tier test: `cargo test` lists it
/// as ignored, the tier runs it (kfd-tests/src/device.rs `tier`).
pub const DEVICE_TIER_IGNORE: &str = r#"#[ignore = "device tier"]"#;

/// The names of the tests in `source` (a test target's root file) marked [`DEVICE_TIER_IGNORE`]:
/// for each such attribute, the first `fn` after it. (A marked test inside a `mod` has a longer
/// name; libtest then runs fewer tests than expected, and the tier says so.)
fn device_test_names(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut marked = false;
    for line in source.lines().map(str::trim) {
        if line == DEVICE_TIER_IGNORE {
            marked = true;
        } else if marked {
            let item = line.strip_prefix("pub ").unwrap_or(line);
            if let Some(rest) = item.strip_prefix("fn ") {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                names.push(name);
                marked = false;
            }
        }
    }
    names
}

/// The line a device test prints when it really runs (kfd-tests/tests/device.rs), one per test.
pub const RAN_MARKER: &str = "CUSE_KFD_DEVICE_TEST_RAN";

/// The whole VM run (boot, tests, power-off) is killed after this long; CI must never hang.
const VM_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Each test binary is killed after this long (natively, and in the guest with `timeout`), so
/// that one hung binary still leaves the others' results.
const BINARY_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Test binaries (package/target) that need longer than [`BINARY_TIMEOUT`], with their own
/// limit; the VM's limit grows by the difference. kfd-fuzz's 100,000 operations on the node
/// (fuzz_node, CPU-bound under TCG) take up to about 12 min on a 2-core machine shared with
/// another TCG VM; a hang kfd-fuzz finds ends its round within 30 s. HIP programs on the node
/// (hip_node) take about 9 min under TCG; their own limits add up to 22 min. The ROCr programs
/// (rocr_programs) run over both thunks, vm_fault four times among them: 260 s measured, 300 s
/// and more on a loaded machine.
const LONG_BINARIES: [(&str, Duration); 3] = [
    ("kfd-tests/fuzz_node", Duration::from_secs(20 * 60)),
    ("kfd-tests/hip_node", Duration::from_secs(25 * 60)),
    ("kfd-tests/rocr_programs", Duration::from_secs(8 * 60)),
];

/// The limit of the test binary `label` where it has its own.
fn own_limit(label: &str) -> Option<Duration> {
    LONG_BINARIES.iter().find(|(l, _)| *l == label).map(|(_, d)| *d)
}

/// The tier: build, choose where to run, run, summarize. Under CI a skip fails the tier (see
/// [`crate::tiers::run`]).
pub fn run(ctx: &Ctx) -> Outcome {
    for t in &DEVICE_TESTS {
        println!("device test {}/{}: {}", t.package, t.target, t.what);
    }
    let targets = match targets() {
        Ok(t) => t,
        Err(why) => return Outcome::Failed(why),
    };
    run_where_cuse_is(ctx, "the daemon and test binaries", |ctx| {
        let built = build(ctx, &targets)?;
        let mut env = vec![
            ("CUSE_KFD_DEVICE_TIER", "1".to_owned()),
            ("CUSE_KFD_BIN", built.daemon.to_string_lossy().into_owned()),
            ("CUSE_KFD_FUZZ_BIN", built.fuzz.to_string_lossy().into_owned()),
            ("RUST_BACKTRACE", "1".to_owned()),
        ];
        if let Ok(log) = std::env::var("RUST_LOG") {
            env.push(("RUST_LOG", log));
        }
        Ok((built.tests, env))
    })
}

/// Runs what `prepare` builds (executables and their environment) where CUSE is: natively or
/// in the VM, provisioned first so that a missing package fails fast. The device tier and the
/// CUSE benchmark share this.
pub fn run_where_cuse_is<F>(ctx: &Ctx, what: &str, prepare: F) -> Outcome
where
    F: FnOnce(&Ctx) -> Result<(Vec<GuestTest>, Vec<(&'static str, String)>), String>,
{
    let runner = match choose_runner() {
        Ok(r) => r,
        Err(outcome) => return outcome,
    };
    let vm_setup = match &runner {
        Runner::Native(_) => None,
        Runner::Vm(_) => match provision(ctx) {
            Ok(setup) => Some(setup),
            Err(why) => return Outcome::Failed(why),
        },
    };
    let build_start = Instant::now();
    let (tests, env) = match prepare(ctx) {
        Ok(p) => p,
        Err(why) => return Outcome::Failed(why),
    };
    println!("built {what} in {:.1} s", build_start.elapsed().as_secs_f64());
    let report = match (&runner, vm_setup) {
        (Runner::Native(why), _) => {
            println!("running natively: {why}");
            run_native(&tests, &env)
        }
        (Runner::Vm(why), Some((vng, kernel))) => {
            println!("running in a VM: {why}");
            run_vm(ctx, &vng, &kernel, &tests, &env)
        }
        (Runner::Vm(_), None) => unreachable!("the VM path is provisioned above"),
    };
    report.print_and_judge()
}

/// Where the tests run, and why there.
enum Runner {
    Native(String),
    Vm(String),
}

/// Natively when root and /dev/cuse exists or `modprobe cuse` makes it; otherwise the VM.
/// `CUSE_KFD_DEVICE_RUNNER=native|vm` forces one (to try the VM path on a CUSE machine).
fn choose_runner() -> Result<Runner, Outcome> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_owned();
    let forced = std::env::var("CUSE_KFD_DEVICE_RUNNER").unwrap_or_default();
    match forced.as_str() {
        "native" => return Ok(Runner::Native("CUSE_KFD_DEVICE_RUNNER=native".into())),
        "vm" => return Ok(Runner::Vm("CUSE_KFD_DEVICE_RUNNER=vm".into())),
        "" | "auto" => {}
        other => {
            return Err(Outcome::Failed(format!("CUSE_KFD_DEVICE_RUNNER={other}: expected native, vm or auto")));
        }
    }
    match nix::unistd::geteuid().as_raw() {
        0 => {}
        uid => {
            let why = format!(
                "not root (uid {uid}): natively the tests open /dev/cuse, and the VM path installs packages and \
                 boots /boot/vmlinuz-* (readable by root only); run `sudo cargo xtask test device`"
            );
            println!("device tier skipped: {why}");
            return Err(Outcome::Skipped(why));
        }
    }
    if is_char_device("/dev/cuse") {
        return Ok(Runner::Native(format!("/dev/cuse exists (kernel {release})")));
    }
    println!("$ modprobe cuse");
    let modprobe = Command::new("modprobe").arg("cuse").stdin(Stdio::null()).output();
    let said = match &modprobe {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            if out.status.success() {
                text
            } else {
                format!("{}: {text}", out.status)
            }
        }
        Err(e) => format!("cannot run modprobe: {e}"),
    };
    if !said.is_empty() {
        println!("{said}");
    }
    if is_char_device("/dev/cuse") {
        return Ok(Runner::Native(format!("`modprobe cuse` made /dev/cuse (kernel {release})")));
    }
    Ok(Runner::Vm(format!("the running kernel {release} has no CUSE (no /dev/cuse; modprobe cuse: {said})")))
}

fn is_char_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

/// The VM's packages (apt, as root), virtme-ng (pip, in its venv), and a kernel with CUSE.
fn provision(ctx: &Ctx) -> Result<(vm::Vng, vm::Kernel), String> {
    println!("==> device tier: VM packages");
    let install = !ctx.no_install;
    let ensured = packages::ensure_set(&packages::DEVICE_VM, install);
    if !ensured.missing.is_empty() {
        return Err(format!("VM packages missing: {} ({})", ensured.missing.join(" "), ensured.line));
    }
    let vng = vm::ensure_vng(install)?;
    let kernel = vm::find_kernel(Path::new("/boot"), Path::new("/lib/modules"))?;
    println!("kernel: {} (cuse.ko in /lib/modules/{})", kernel.image.display(), kernel.version);
    Ok((vng, kernel))
}

/// What the build produced.
struct Built {
    daemon: PathBuf,
    /// kfd-fuzz, for `kfd-tests/fuzz_node`.
    fuzz: PathBuf,
    tests: Vec<GuestTest>,
}

/// `cargo build -p cuse-kfd --bins`, then `cargo test --no-run -p P --test T` for each target;
/// the paths come from cargo's JSON messages (diagnostics rendered as usual).
fn build(ctx: &Ctx, targets: &[Target]) -> Result<Built, String> {
    // The guest sees the target directory read-only and builds nothing: the shipped libraries
    // (`--lib` on its own: with `--bins` a library is built as an rlib only), the launcher that
    // `cuse-kfd run` execs, the daemon and kfd-fuzz are built here.
    cargo_json(ctx, &["build", "-p", "hsakmt", "-p", "rocr-shim", "-p", "kfd-preload", "--lib"])?;
    let messages = cargo_json(ctx, &["build", "-p", "cuse-kfd", "-p", "cuse-kfd-run", "-p", "kfd-fuzz", "--bins"])?;
    let bin = |name: &str| {
        artifacts(&messages)
            .find(|a| a.name == name && a.kinds.iter().any(|k| k == "bin") && !a.test)
            .map(|a| a.executable)
            .ok_or(format!("cargo build --bins produced no {name} executable"))
    };
    let (daemon, launcher, fuzz) = (bin("cuse-kfd")?, bin("cuse-kfd-run")?, bin("kfd-fuzz")?);
    // The launcher stages the libraries under their sonames (target/<profile>/lib, lib-shim),
    // where `cuse-kfd run` and kfd-tests/shim_programs find them in the guest.
    let staged = std::process::Command::new(&launcher)
        .args(["--runtime", "shim", "--print-library-path"])
        .output()
        .map_err(|e| format!("running {}: {e}", launcher.display()))?;
    if !staged.status.success() {
        return Err(format!("staging the libraries: {}", String::from_utf8_lossy(&staged.stderr)));
    }
    let mut tests = Vec::new();
    for t in targets {
        let messages = cargo_json(ctx, &["test", "--no-run", "-p", &t.package, "--test", &t.target])?;
        let artifact = artifacts(&messages).find(|a| a.test && a.name == t.target).ok_or_else(|| {
            format!("cargo test --no-run -p {} --test {} produced no test executable", t.package, t.target)
        })?;
        let label = format!("{}/{}", t.package, t.target);
        let src = artifact.src_path.as_deref().ok_or_else(|| format!("{label}: cargo named no source file"))?;
        let source = std::fs::read_to_string(src).map_err(|e| format!("{label}: reading {}: {e}", src.display()))?;
        let names = device_test_names(&source);
        if names.is_empty() {
            return Err(format!("{label}: {} has no test marked {DEVICE_TIER_IGNORE}", src.display()));
        }
        println!("{label}: device tests ({}): {}", names.len(), names.join(" "));
        let cwd = artifact.package_dir.unwrap_or_else(|| ctx.root.clone());
        if !t.host_first.is_empty() {
            run_on_the_host(&label, &artifact.executable, &cwd, &t.host_first)?;
        }
        tests.push(GuestTest {
            limit: own_limit(&label),
            label,
            exe: artifact.executable,
            tests: Some(names.len() as u32),
            // Exactly the device tests (not the target's ordinary tests, which the unit tier
            // runs, nor tests ignored for other reasons). One at a time: the guest has 2 vCPUs
            // under TCG, and two tests each starting a daemon and running ROCr programs side by
            // side starved each other (a node took over 90 s to appear in CI).
            args: ["--ignored", "--exact"]
                .into_iter()
                .map(String::from)
                .chain(names)
                .chain(t.args.iter().cloned())
                .chain(["--test-threads=1".to_owned()])
                .collect(),
            cwd,
        });
    }
    Ok(Built { daemon, fuzz, tests })
}

/// Runs the ordinary tests `names` of test binary `exe` on the host, in `cwd`; they must pass.
fn run_on_the_host(label: &str, exe: &Path, cwd: &Path, names: &[String]) -> Result<(), String> {
    println!("{label}: on the host first: {}", names.join(" "));
    let status = Command::new(exe)
        .arg("--exact")
        .args(names)
        .arg("--test-threads=1")
        .current_dir(cwd)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("{label}: running {}: {e}", exe.display()))?;
    if !status.success() {
        return Err(format!("{label}: {} on the host: {status}", names.join(" ")));
    }
    Ok(())
}

/// Runs `cargo <args> --message-format=json-render-diagnostics`: compiler output goes to the
/// terminal as usual, the JSON messages (stdout) are returned.
pub(crate) fn cargo_json(ctx: &Ctx, args: &[&str]) -> Result<Vec<Message>, String> {
    let mut args = args.to_vec();
    args.push("--message-format=json-render-diagnostics");
    println!("$ cargo {}", args.join(" "));
    let out = ctx
        .cargo_cmd(&args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo {}: {}", args[..args.len() - 1].join(" "), out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).map_err(|e| format!("cargo's message {l:.80}: {e}")))
        .collect()
}

/// The fields xtask reads of one of cargo's JSON messages (the others are ignored).
#[derive(Debug, Deserialize)]
pub(crate) struct Message {
    reason: String,
    target: Option<MessageTarget>,
    profile: Option<MessageProfile>,
    executable: Option<PathBuf>,
    manifest_path: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
struct MessageTarget {
    name: String,
    kind: Vec<String>,
    src_path: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
struct MessageProfile {
    test: bool,
}

/// A compiler-artifact message with an executable.
pub(crate) struct Artifact {
    pub(crate) name: String,
    pub(crate) kinds: Vec<String>,
    /// profile.test: built with the test harness.
    pub(crate) test: bool,
    pub(crate) executable: PathBuf,
    /// The directory of manifest_path.
    package_dir: Option<PathBuf>,
    /// The target's root source file.
    src_path: Option<PathBuf>,
}

pub(crate) fn artifacts(messages: &[Message]) -> impl Iterator<Item = Artifact> + '_ {
    messages.iter().filter_map(|m| {
        if m.reason != "compiler-artifact" {
            return None;
        }
        let target = m.target.as_ref()?;
        Some(Artifact {
            name: target.name.clone(),
            kinds: target.kind.clone(),
            test: m.profile.as_ref()?.test,
            executable: m.executable.clone()?,
            package_dir: m.manifest_path.as_deref().and_then(|p| Some(p.parent()?.to_owned())),
            src_path: target.src_path.clone(),
        })
    })
}

/// One test binary's result, from its BEGIN/END lines and libtest's `test result:` lines.
#[derive(Debug, Default, Clone, PartialEq)]
struct BinaryResult {
    label: String,
    exit: Option<i32>,
    passed: u32,
    failed: u32,
    ignored: u32,
    /// Tests that printed [`RAN_MARKER`]: really ran, not returned early.
    marked: u32,
    /// The first panic: the test's name and the first line of its message (the summary names
    /// what failed, since a long run's output is cut where CI shows it).
    first_panic: Option<String>,
    /// The line before was a panic's "panicked at" line of this test.
    panic_of: Option<String>,
}

/// What the output of a run told, line by line.
#[derive(Debug, Default)]
struct Tally {
    binaries: Vec<BinaryResult>,
    /// The guest script started (its first line), and when the host saw it.
    guest_up: Option<(String, Duration)>,
    /// The guest script's own exit code, from its last line.
    guest_exit: Option<i32>,
}

impl Tally {
    fn feed(&mut self, line: &str, since_start: Duration) {
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix(vm::UP) {
            self.guest_up = Some((rest.trim().to_owned(), since_start));
        } else if let Some(rest) = line.strip_prefix(vm::EXIT) {
            self.guest_exit = rest.trim().parse().ok();
        } else if let Some(label) = line.strip_prefix(vm::BEGIN) {
            self.binaries.push(BinaryResult { label: label.trim().to_owned(), ..Default::default() });
        } else if let Some(rest) = line.strip_prefix(vm::END) {
            let mut words = rest.split_whitespace();
            let (label, code) = (words.next().unwrap_or(""), words.next().and_then(|c| c.parse().ok()));
            if let Some(b) = self.binaries.iter_mut().rev().find(|b| b.label == label) {
                b.exit = code;
            }
        } else if let Some(b) = self.binaries.last_mut() {
            if let Some(test) = b.panic_of.take() {
                b.first_panic.get_or_insert_with(|| format!("{test}: {}", line.trim()));
            }
            // "thread 'name' (tid) panicked at file:line:col:"; the message follows.
            if let Some(rest) =
                line.strip_prefix("thread '").filter(|l| l.contains("' panicked at ") || l.contains(") panicked at "))
            {
                if b.first_panic.is_none() {
                    b.panic_of = Some(rest.split('\'').next().unwrap_or("?").to_owned());
                }
            }
            // Anywhere in the line: with one test thread libtest prints "test name ... " first.
            if line.contains(RAN_MARKER) {
                b.marked += line.matches(RAN_MARKER).count() as u32;
            } else if let Some(result) = line.strip_prefix("test result: ") {
                // "ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s"
                for part in result.split([';', '.']) {
                    let mut words = part.split_whitespace();
                    if let (Some(n), Some(what)) = (words.next().and_then(|n| n.parse::<u32>().ok()), words.next()) {
                        match what {
                            "passed" => b.passed += n,
                            "failed" => b.failed += n,
                            "ignored" => b.ignored += n,
                            _ => {}
                        }
                    }
                }
            }
        }
    }
}

/// The outcome of running the tests somewhere.
struct Report {
    place: String,
    tally: Tally,
    /// Each binary's label, and how many device tests it must run (None: a plain program).
    expected: Vec<(String, Option<u32>)>,
    /// A failure of the run itself (timeout, VM did not boot, cannot spawn), if any.
    trouble: Option<String>,
    elapsed: Duration,
}

impl Report {
    /// Prints the tier's own summary; the tier's outcome.
    fn print_and_judge(&self) -> Outcome {
        let t = &self.tally;
        println!("\n== device tier: {}", self.place);
        if let Some((info, at)) = &t.guest_up {
            println!("VM boot: {:.1} s from starting vng to the guest script ({info})", at.as_secs_f64());
        }
        let (mut passed, mut failed, mut marked) = (0, 0, 0);
        let mut problems = Vec::new();
        for (label, tests) in &self.expected {
            match t.binaries.iter().find(|b| &b.label == label) {
                Some(b) => {
                    let exit = b.exit.map_or("no exit line".to_owned(), |c| format!("exit {c}"));
                    println!(
                        "{label:<28} {exit:<12} {} passed, {} failed, {} ignored; {} really ran",
                        b.passed, b.failed, b.ignored, b.marked
                    );
                    passed += b.passed;
                    failed += b.failed;
                    marked += b.marked;
                    if b.exit != Some(0) {
                        match &b.first_panic {
                            Some(p) => {
                                println!("  first failure: {p}");
                                problems.push(format!("{label} {exit} ({p})"));
                            }
                            None => problems.push(format!("{label} {exit}")),
                        }
                    }
                    // Exactly its device tests ran, and none passed without really running.
                    if let Some(n) = *tests {
                        let ran = b.passed + b.failed;
                        if ran != n {
                            problems.push(format!("{label} ran {ran} tests of its {n} device tests"));
                        }
                        if b.marked < b.passed {
                            problems.push(format!(
                                "{label}: {} passed but only {} printed {RAN_MARKER}",
                                b.passed, b.marked
                            ));
                        }
                    }
                }
                None => {
                    println!("{label:<28} did not run");
                    problems.push(format!("{label} did not run"));
                }
            }
        }
        let total = format!("{passed} passed, {failed} failed");
        println!("total: {total}; really ran (printed {RAN_MARKER}): {marked}; {:.1} s", self.elapsed.as_secs_f64());
        if let Some(trouble) = &self.trouble {
            problems.insert(0, trouble.clone());
        }
        // A libtest binary reports its tests; a plain program (the CUSE bench) only its marker.
        if passed + failed == 0 && marked == 0 {
            problems.push("no test ran (libtest reported none)".into());
        } else if marked == 0 {
            problems.push(format!(
                "no test really ran: none printed {RAN_MARKER}, so CUSE_KFD_DEVICE_TIER did not reach them"
            ));
        }
        let boot = t.guest_up.as_ref().map_or(String::new(), |(_, at)| format!("; boot {:.0} s", at.as_secs_f64()));
        if problems.is_empty() {
            let detail = format!("{}: {total}, {marked} really ran{boot}", self.place);
            println!("device tier passed: {detail}");
            Outcome::PassedWith(detail)
        } else {
            let why = format!("{}: {total}{boot}; {}", self.place, problems.join("; "));
            println!("device tier FAILED: {why}");
            Outcome::Failed(why)
        }
    }
}

/// Each test binary in turn on this machine, with the same BEGIN/END lines the guest prints.
fn run_native(tests: &[GuestTest], env: &[(&str, String)]) -> Report {
    let start = Instant::now();
    let mut tally = Tally::default();
    let mut troubles = Vec::new();
    for t in tests {
        let begin = format!("{} {}", vm::BEGIN, t.label);
        println!("{begin}");
        tally.feed(&begin, start.elapsed());
        println!("$ (cd {} && {} {})", t.cwd.display(), t.exe.display(), t.args.join(" "));
        let mut cmd = Command::new(&t.exe);
        cmd.args(&t.args).current_dir(&t.cwd).envs(env.iter().map(|(k, v)| (k, v)));
        let deadline = Instant::now() + t.limit.unwrap_or(BINARY_TIMEOUT);
        let code = match run_streamed(cmd, deadline, |line| tally.feed(line, start.elapsed())) {
            Ok(status) => status.code().unwrap_or(-1),
            Err(why) => {
                troubles.push(format!("{}: {why}", t.label));
                -1
            }
        };
        let end = format!("{} {} {code}", vm::END, t.label);
        println!("{end}");
        tally.feed(&end, start.elapsed());
    }
    Report {
        place: "native".into(),
        tally,
        expected: tests.iter().map(|t| (t.label.clone(), t.tests)).collect(),
        trouble: (!troubles.is_empty()).then(|| troubles.join("; ")),
        elapsed: start.elapsed(),
    }
}

/// One `vng` boot that runs the guest script; its output is streamed and read as it comes.
fn run_vm(ctx: &Ctx, vng: &vm::Vng, kernel: &vm::Kernel, tests: &[GuestTest], env: &[(&str, String)]) -> Report {
    let expected = tests.iter().map(|t| (t.label.clone(), t.tests)).collect();
    let kvm = std::env::var_os("CUSE_KFD_VM_KVM").is_some_and(|v| v == "1");
    let place = format!("VM ({}, {}, vng {})", kernel.version, if kvm { "KVM" } else { "TCG" }, vng.version);
    let mut report = Report { place, tally: Tally::default(), expected, trouble: None, elapsed: Duration::ZERO };
    // One file per run: two runs in one workspace (two terminals) must not share a script.
    let script_path = ctx.target_dir().join(format!("xtask/device-guest-{}.sh", std::process::id()));
    let script = vm::guest_script(tests, env, BINARY_TIMEOUT);
    let written = script_path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&script_path, script));
    if let Err(e) = written {
        report.trouble = Some(format!("cannot write {}: {e}", script_path.display()));
        return report;
    }
    let args = vm::vng_args(kernel, &script_path, kvm);
    println!("$ {} {}", vng.exe.display(), args.join(" "));
    let mut cmd = vng.command();
    cmd.args(&args).current_dir(&ctx.root);
    let start = Instant::now();
    let longer: Duration = tests.iter().filter_map(|t| t.limit).map(|l| l.saturating_sub(BINARY_TIMEOUT)).sum();
    let result = run_streamed(cmd, start + VM_TIMEOUT + longer, |line| report.tally.feed(line, start.elapsed()));
    report.elapsed = start.elapsed();
    let _ = std::fs::remove_file(&script_path);
    let t = &report.tally;
    report.trouble = match (result, t.guest_up.is_some(), t.guest_exit) {
        (Err(why), _, _) => Some(why),
        (Ok(status), false, _) => {
            Some(format!("the VM never reached the guest script (vng: {status}); see the output above"))
        }
        (Ok(_), true, Some(vm::EXIT_NO_MODPROBE)) => {
            Some(format!("modprobe cuse failed in the guest ({})", kernel.version))
        }
        (Ok(_), true, Some(vm::EXIT_NO_CUSE_NODE)) => Some("no /dev/cuse in the guest after modprobe cuse".into()),
        (Ok(status), true, None) => Some(format!("the guest script ended without its exit line (vng: {status})")),
        // vng passes the script's exit code on (virtme's ret port); a mismatch means trouble.
        (Ok(status), true, Some(code)) if status.code() != Some(code) => {
            Some(format!("the guest script exited {code} but vng {status}"))
        }
        (Ok(_), true, Some(_)) => None,
    };
    report
}

/// Runs `cmd` in a process group of its own, with stdin from /dev/null, stdout read line by line
/// (each printed, then given to `on_line`) and stderr copied to ours. At `deadline` the whole
/// group is killed (vng -> virtme-run -> qemu). Err for a spawn failure or a timeout.
///
/// Both outputs are pipes, never our own descriptors: QEMU reopens /proc/self/fd/1 and 2 for the
/// guest's output with O_TRUNC, which would clobber a log file that xtask's output goes to.
fn run_streamed(mut cmd: Command, deadline: Instant, mut on_line: impl FnMut(&str)) -> Result<ExitStatus, String> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let limit = deadline.saturating_duration_since(Instant::now());
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    // Copied as it comes, in chunks (a partial line, a progress bar), on a detached thread.
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut buf) {
            let mut err = std::io::stderr().lock();
            if err.write_all(&buf[..n]).and_then(|()| err.flush()).is_err() {
                break;
            }
        }
    });
    let (tx, rx) = mpsc::channel::<String>();
    // A detached reader: if some orphan keeps the pipe open, we stop listening instead of joining.
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        while reader.by_ref().read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            let line = String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']).to_owned();
            buf.clear();
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut show = |line: String| {
        println!("{line}");
        on_line(&line);
    };
    let mut exited: Option<(ExitStatus, Instant)> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => show(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        match exited {
            // Output still buffered in the pipe is read after the exit, for a little while.
            Some((_, at)) if at.elapsed() > Duration::from_secs(5) => break,
            Some(_) => {}
            None => match child.try_wait() {
                Ok(Some(status)) => exited = Some((status, Instant::now())),
                Ok(None) if Instant::now() >= deadline => {
                    let killed = kill_group(&mut child);
                    while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
                        show(line);
                    }
                    let secs = limit.as_secs();
                    return Err(format!(
                        "{program} timed out after {secs} s; killed it and {killed} others of its group"
                    ));
                }
                Ok(None) => {}
                Err(e) => return Err(format!("waiting for {program}: {e}")),
            },
        }
    }
    match exited {
        Some((status, _)) => Ok(status),
        None => child.wait().map_err(|e| format!("waiting for {program}: {e}")),
    }
}

/// SIGKILLs the process group `child` leads (see [`run_streamed`]) and reaps the child. First
/// prints each member's state and kernel wait channel, to show where it hung. Returns how many
/// other members the group had.
fn kill_group(child: &mut Child) -> usize {
    let leader = child.id();
    let others = group_members(leader);
    println!("timed out: killing process group {leader}:");
    for pid in std::iter::once(leader).chain(others.iter().copied()) {
        let read = |what: &str| std::fs::read_to_string(format!("/proc/{pid}/{what}")).unwrap_or_default();
        let state = read("stat").rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("?").to_owned();
        let cmdline = read("cmdline").replace('\0', " ");
        println!("  {pid} {state} wchan={} {cmdline:.160}", read("wchan"));
    }
    if let Ok(pgid) = i32::try_from(leader) {
        if let Err(e) = killpg(Pid::from_raw(pgid), Signal::SIGKILL) {
            println!("  killpg({pgid}): {e}");
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    others.len()
}

/// The live processes of process group `pgid` other than its leader, by /proc/PID/stat (for the
/// report only: killpg reaches them all).
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != pgid)
        .filter(|pid| {
            // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(2)?.parse::<u32>().ok()) == Some(pgid)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(lines: &str) -> Tally {
        let mut t = Tally::default();
        for l in lines.lines() {
            t.feed(l, Duration::from_secs(40));
        }
        t
    }

    #[test]
    fn the_tally_reads_guest_lines_and_libtest_results() {
        let t = feed_all(
            "CUSE_KFD_GUEST_UP kernel 6.1.0-57-amd64, 2 cpus, uptime 44.1 s\n\
             CUSE_KFD_TEST_BEGIN kfd-tests/device\r\n\
             running 2 tests\n\
             test cuse_init_makes_a_node ... CUSE_KFD_DEVICE_TEST_RAN cuse_init_makes_a_node\n\
             ok\n\
             test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.31s\n\
             CUSE_KFD_TEST_END kfd-tests/device 0\n\
             CUSE_KFD_TEST_BEGIN kfd-tests/cuse_device\n\
             test result: FAILED. 7 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 9.00s\n\
             CUSE_KFD_TEST_END kfd-tests/cuse_device 101\n\
             CUSE_KFD_GUEST_EXIT=1\n",
        );
        assert_eq!(t.guest_up, Some(("kernel 6.1.0-57-amd64, 2 cpus, uptime 44.1 s".into(), Duration::from_secs(40))));
        assert_eq!(t.guest_exit, Some(1));
        let device = BinaryResult {
            label: "kfd-tests/device".into(),
            exit: Some(0),
            passed: 2,
            failed: 0,
            ignored: 1,
            marked: 1,
            ..Default::default()
        };
        assert_eq!(t.binaries[0], device);
        assert_eq!((t.binaries[1].exit, t.binaries[1].passed, t.binaries[1].failed), (Some(101), 7, 1));
    }

    /// A failed binary's summary names its first failing test and the panic's first line: a long
    /// run's output is cut where CI shows it, the summary is not.
    #[test]
    fn a_failed_binary_is_summarised_with_its_first_panic() {
        let lines = "CUSE_KFD_TEST_BEGIN kfd-tests/rocr_programs\n\
                     test a ... CUSE_KFD_DEVICE_TEST_RAN a\n\
                     thread 'a' (150) panicked at kfd-tests/tests/rocr_programs.rs:134:5:\n\
                     wait_timeout failed on the /dev/kfd-t device:\n\
                     more text\n\
                     thread 'b' (151) panicked at x.rs:1:1:\n\
                     second\n\
                     test result: FAILED. 0 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out\n\
                     CUSE_KFD_TEST_END kfd-tests/rocr_programs 101\n";
        let t = feed_all(lines);
        assert_eq!(t.binaries[0].first_panic.as_deref(), Some("a: wait_timeout failed on the /dev/kfd-t device:"));
        let report = Report {
            place: "VM".into(),
            tally: t,
            expected: vec![("kfd-tests/rocr_programs".into(), Some(2))],
            trouble: None,
            elapsed: Duration::from_secs(60),
        };
        let Outcome::Failed(why) = report.print_and_judge() else { panic!("a failed binary fails the tier") };
        assert!(why.contains("kfd-tests/rocr_programs exit 101 (a: wait_timeout failed"), "{why}");
    }

    #[test]
    fn the_tier_fails_when_no_test_really_ran() {
        let report = |lines: &str| Report {
            place: "VM".into(),
            tally: feed_all(lines),
            expected: vec![("kfd-tests/device".into(), Some(1))],
            trouble: None,
            elapsed: Duration::from_secs(60),
        };
        let ok = "CUSE_KFD_TEST_BEGIN kfd-tests/device\nCUSE_KFD_DEVICE_TEST_RAN x\n\
                  test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n\
                  CUSE_KFD_TEST_END kfd-tests/device 0\n";
        assert!(matches!(report(ok).print_and_judge(), Outcome::PassedWith(_)));
        let unmarked = "CUSE_KFD_TEST_BEGIN kfd-tests/device\n\
                        test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n\
                        CUSE_KFD_TEST_END kfd-tests/device 0\n";
        assert!(matches!(report(unmarked).print_and_judge(), Outcome::Failed(w) if w.contains("no test really ran")));
        let empty = "CUSE_KFD_TEST_BEGIN kfd-tests/device\nCUSE_KFD_TEST_END kfd-tests/device 0\n";
        assert!(matches!(report(empty).print_and_judge(), Outcome::Failed(w) if w.contains("no test ran")));
        assert!(matches!(report("").print_and_judge(), Outcome::Failed(w) if w.contains("did not run")));
    }

    #[test]
    fn the_tier_fails_unless_exactly_the_device_tests_ran_and_really_ran() {
        let report = |expected: u32, lines: &str| Report {
            place: "VM".into(),
            tally: feed_all(lines),
            expected: vec![("kfd-tests/cuse_device".into(), Some(expected))],
            trouble: None,
            elapsed: Duration::from_secs(60),
        };
        let two = "CUSE_KFD_TEST_BEGIN kfd-tests/cuse_device\n\
                   test a ... CUSE_KFD_DEVICE_TEST_RAN a\nok\ntest b ... CUSE_KFD_DEVICE_TEST_RAN b\nok\n\
                   test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 9 filtered out\n\
                   CUSE_KFD_TEST_END kfd-tests/cuse_device 0\n";
        assert!(matches!(report(2, two).print_and_judge(), Outcome::PassedWith(_)));
        // A device test that did not run (a name the filter missed) fails the tier.
        let judged = report(3, two).print_and_judge();
        assert!(matches!(&judged, Outcome::Failed(w) if w.contains("ran 2 tests of its 3 device tests")), "{judged:?}");
        // Nor may a test pass without really running (an ordinary test among them).
        let one_unmarked = "CUSE_KFD_TEST_BEGIN kfd-tests/cuse_device\n\
                            test a ... CUSE_KFD_DEVICE_TEST_RAN a\nok\ntest b ... ok\n\
                            test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 9 filtered out\n\
                            CUSE_KFD_TEST_END kfd-tests/cuse_device 0\n";
        let judged = report(2, one_unmarked).print_and_judge();
        assert!(matches!(&judged, Outcome::Failed(w) if w.contains("2 passed but only 1 printed")), "{judged:?}");
    }

    #[test]
    fn device_tests_are_the_ones_marked_device_tier() {
        let source = r#"
#[test]
fn ordinary() {}

#[test]
#[ignore = "device tier"]
fn device_tier_one() { let bin = tier(); }

/// Run by other tests in a child.
#[test]
#[ignore = "a client role"]
fn client_role() {}

#[test]
#[ignore = "device tier"]
/// A doc comment after the attribute.
#[allow(clippy::too_many_lines)]
pub fn two_processes_are_isolated() {}
"#;
        assert_eq!(device_test_names(source), ["device_tier_one", "two_processes_are_isolated"]);
        assert!(device_test_names("#[test]\n#[ignore = \"needs root\"]\nfn rocminfo() {}\n").is_empty());
    }

    /// Each target of the table has device tests, and every test there that calls the tier's
    /// helper is marked (otherwise `cargo test` would run it outside the tier, or the tier
    /// would skip it).
    #[test]
    fn every_device_target_marks_its_device_tests() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for t in &DEVICE_TESTS {
            let path = root.join(t.package).join("tests").join(format!("{}.rs", t.target));
            let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let marked = device_test_names(&source);
            assert!(!marked.is_empty(), "{}: no test marked {DEVICE_TIER_IGNORE}", path.display());
            // Test functions whose body calls the helper directly: `fn NAME(` ... up to the next `fn `.
            let mut current: Option<&str> = None;
            let mut is_test = false;
            for line in source.lines() {
                if line.starts_with("#[test]") {
                    is_test = true;
                } else if let Some(rest) = line.strip_prefix("fn ") {
                    current = is_test.then(|| rest.split('(').next().unwrap_or(""));
                    is_test = false;
                } else if let Some(name) = current {
                    if line.contains("tier()")
                        || line.contains("device_tier(\"")
                        || line.contains("CUSE_KFD_DEVICE_TIER")
                    {
                        assert!(
                            marked.iter().any(|m| m == name),
                            "{}: {name} is a device test but not marked",
                            path.display()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn artifacts_come_from_compiler_artifact_messages() {
        let lines = [
            r#"{"reason":"compiler-artifact","manifest_path":"/w/tests/Cargo.toml","target":{"kind":["test"],"name":"device","src_path":"/w/tests/tests/device.rs"},"profile":{"test":true},"executable":"/w/target/debug/deps/device-1f"}"#,
            r#"{"reason":"compiler-artifact","manifest_path":"/w/tests/Cargo.toml","target":{"kind":["lib"],"name":"kfd_tests"},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ];
        let messages: Vec<Message> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        let found: Vec<Artifact> = artifacts(&messages).collect();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].executable, Path::new("/w/target/debug/deps/device-1f"));
        assert_eq!(found[0].package_dir.as_deref(), Some(Path::new("/w/tests")));
        assert!(found[0].test && found[0].name == "device" && found[0].kinds == ["test"]);
        assert_eq!(found[0].src_path.as_deref(), Some(Path::new("/w/tests/tests/device.rs")));
    }

    #[test]
    fn a_timed_out_child_and_its_process_group_are_killed() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg("echo started $$; sleep 300 & sleep 300; echo never");
        let mut lines = Vec::new();
        let t0 = Instant::now();
        let err = run_streamed(cmd, Instant::now() + Duration::from_secs(1), |l| lines.push(l.to_owned())).unwrap_err();
        assert!(err.contains("timed out") && err.contains("2 others of its group"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert_eq!(lines.len(), 1, "{lines:?}");
        let shell: u32 = lines[0].strip_prefix("started ").and_then(|p| p.parse().ok()).expect("the shell's pid");
        // SIGKILLed members may take a moment to be reaped by init; none may stay alive.
        let alive = |pid: &u32| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            !matches!(stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()), None | Some("Z" | "X"))
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while group_members(shell).iter().any(alive) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!group_members(shell).iter().any(alive), "the background sleep outlived the kill");
    }

    #[test]
    fn the_exit_status_and_every_line_come_through() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg("printf 'a\\nb\\r\\nc'; exit 3");
        let mut lines = Vec::new();
        let status = run_streamed(cmd, Instant::now() + Duration::from_secs(30), |l| lines.push(l.to_owned())).unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(lines, ["a", "b", "c"]);
    }

    #[test]
    fn binaries_with_their_own_limit_are_in_the_table_and_get_longer() {
        for (label, limit) in &LONG_BINARIES {
            assert!(DEVICE_TESTS.iter().any(|t| format!("{}/{}", t.package, t.target) == *label), "{label}");
            assert!(*limit > BINARY_TIMEOUT, "{label}");
        }
        assert_eq!(own_limit("kfd-tests/fuzz_node"), Some(Duration::from_secs(20 * 60)));
        assert_eq!(own_limit("kfd-tests/device"), None);
    }

    #[test]
    fn the_device_test_table_names_each_target_once() {
        for (i, t) in DEVICE_TESTS.iter().enumerate() {
            assert!(!DEVICE_TESTS[..i].iter().any(|u| u.package == t.package && u.target == t.target));
        }
    }
}
