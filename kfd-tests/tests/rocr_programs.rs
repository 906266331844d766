//! Real ROCr's queue and signal paths on our device: the C programs of kfd-tests/c/rocr, built
//! against Debian's hsa.h and linked with the real libhsa-runtime64 (ROCr 5.2.3), run over our
//! libhsakmt.so.1 through `cuse-kfd run`. Each program prints what it checks and exits non-zero
//! on the first failure; a test passes when its program exits 0 having printed `PASS <name>`
//! (vm_fault instead ends in ROCr's VM fault handler, which aborts: [`check_vm_fault`]).
//!
//! The transport is a parameter: the device embedded in the program's process
//! (`cargo run -p cuse-kfd-run -- --embedded`, any machine with root or user namespaces), or a
//! `cuse-kfd serve` node in the real-device tier (`$CUSE_KFD_BIN run --device /dev/<node>`, set up
//! by `cargo xtask test device`; a plain `cargo test` lists those tests as ignored). On the node the same
//! programs also run over the system's libhsakmt.so.1 (Debian's 5.2.3, `run --thunk system`):
//! the real ROCr over the real thunk over our device.
//!
//! kfd-tests/build.rs compiles the programs on the host (cc, libhsa-runtime-dev and libhsa-runtime64-1
//! are needed; `cargo xtask test` installs them), so the tier's VM only runs them.

use kfd_tests::device::{tier, Daemon};
use kfd_tests::program::{assert_lists_every_program, backtraces, run_bounded, threads_of};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How a program reaches the device.
#[derive(Clone, Copy)]
enum Transport<'a> {
    /// The device inside the program's process, through `cargo run -p cuse-kfd-run -- --embedded`.
    Embedded,
    /// A daemon's node, through `<bin> run --device <node> --thunk <thunk>` (`bin` is the
    /// cuse-kfd binary, `thunk` ours or system).
    Device { bin: &'a Path, node: &'a Path, runtime_dir: &'a Path, thunk: &'a str, daemon: &'a Daemon },
}

impl Transport<'_> {
    fn name(&self) -> String {
        match self {
            Transport::Embedded => "embedded".into(),
            Transport::Device { node, thunk, .. } => format!("{} ({thunk} libhsakmt)", node.display()),
        }
    }

    /// The command that runs `exe` on the device.
    fn command(&self, exe: &Path) -> Command {
        let mut cmd = match self {
            Transport::Embedded => {
                let mut c = kfd_tests::launcher::cargo_run();
                c.args(["--embedded", "--"]);
                c
            }
            Transport::Device { bin, node, thunk, .. } => {
                let mut c = Command::new(bin);
                c.args(["run", "--thunk", thunk, "--device"]).arg(node).arg("--");
                c
            }
        };
        cmd.arg(exe).current_dir(workspace());
        cmd
    }
}

/// The programs, in kfd-tests/c/rocr/<name>.c, and what each checks. The node's tests run them
/// all (but [`EMBEDDED_ONLY`]); the embedded tests below run each (ipc's two processes each with
/// a device of its own).
const PROGRAMS: [(&str, &str); 9] = [
    ("queue_create", "hsa_queue_create on the GPU agent and ROCr's ring size rules"),
    ("barriers", "barrier-AND and barrier-OR with host-set dependencies, completion signals waited"),
    ("ring_wrap", "300 barrier packets through a 64-slot queue, across the wrap; the read index"),
    ("blocked_wait", "BLOCKED waits sleep in the KFD event wait (CPU time) and wake on the store"),
    ("wait_timeout", "signal wait timeouts in timestamp ticks honoured, the old value returned"),
    ("queue_error", "a packet the device cannot run is a queue error through ROCr's callback"),
    ("vram_blit", "ROCr's blit kernels (HSA_ENABLE_SDMA=0): 4 MiB VRAM fills and a VRAM->VRAM copy"),
    ("vm_fault", "a copy into unmapped GPU memory ends in ROCr's VM fault handler (SDMA, then a blit kernel)"),
    ("ipc", "hsa_amd_ipc_memory_create/attach: a child process reads and writes its parent's VRAM"),
];

/// Programs that end in ROCr's VM fault handler (an abort) instead of printing PASS: see
/// [`check_vm_fault`].
const FAULTING: [&str; 1] = ["vm_fault"];

/// Programs that run on the embedded device only: four 4 MiB blits through the shader core are
/// too slow for the tier's emulated VM.
const EMBEDDED_ONLY: [&str; 1] = ["vram_blit"];

/// A whole program run is killed after this long (a hung wait must fail the test, not CI):
/// embedded runs go through `cargo run`, which may first have to build the daemon.
const RUN_LIMIT: Duration = Duration::from_secs(600);
/// On a node the daemon is already built; the slowest program takes about 10 s under TCG. This is
/// well inside the tier's per-binary limit, so that a hang is reported with the program's output.
const DEVICE_RUN_LIMIT: Duration = Duration::from_secs(90);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// Program `name`, which kfd-tests/build.rs compiled from kfd-tests/c/rocr/<name>.c on the host (with
/// cc -I/usr/include/hsa ... -lhsa-runtime64); panics with the compiler's output if it failed.
fn program(name: &str) -> PathBuf {
    let dir = Path::new(env!("OUT_DIR")).join("rocr");
    if let Ok(why) = std::fs::read_to_string(dir.join(format!("{name}.err"))) {
        panic!(
            "{name}.c did not compile (cc and libhsa-runtime-dev are needed; cargo xtask test installs them):\n{why}"
        );
    }
    let exe = dir.join(name);
    assert!(exe.is_file(), "{} was not built (kfd-tests/build.rs builds kfd-tests/c/rocr/{name}.c)", exe.display());
    exe
}

/// Runs `exe` through `transport` (see [`run_bounded`]); on a node, a hung run also reports the
/// daemon's status (its processes, queues, events, parked waits and wait timer), its threads and
/// stacks, and its log.
fn run(exe: &Path, transport: Transport, env: &[(&str, &str)]) -> (bool, String) {
    let limit = match transport {
        Transport::Embedded => RUN_LIMIT,
        Transport::Device { .. } => DEVICE_RUN_LIMIT,
    };
    let mut cmd = transport.command(exe);
    cmd.envs(env.iter().copied());
    run_bounded(cmd, exe, limit, || match transport {
        Transport::Embedded => String::new(),
        Transport::Device { bin, runtime_dir, daemon, .. } => {
            let status = match Command::new(bin).arg("status").arg("--runtime-dir").arg(runtime_dir).output() {
                Ok(o) => format!(
                    "--- cuse-kfd status:\n{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => format!("--- cuse-kfd status: {e}\n"),
            };
            let log = daemon.log();
            let tail: Vec<&str> = log.lines().rev().take(200).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!(
                "{status}--- the daemon's threads:\n{}{}--- the daemon's log (last {} lines):\n{}\n",
                threads_of(daemon.pid()),
                backtraces(daemon.pid()),
                tail.len(),
                tail.join("\n")
            )
        }
    })
}

/// Builds and runs program `name` on `transport`; it must exit 0 having printed `PASS <name>`.
fn check(name: &str, transport: Transport) -> String {
    check_with(name, transport, &[])
}

/// [`check`], with more environment for the program.
fn check_with(name: &str, transport: Transport, env: &[(&str, &str)]) -> String {
    let exe = program(name);
    let t0 = Instant::now();
    let (ok, text) = run(&exe, transport, env);
    println!("--- {name} ({}), {:.1} s:\n{text}", transport.name(), t0.elapsed().as_secs_f64());
    assert!(ok, "{name} failed on the {} device:\n{text}", transport.name());
    assert!(text.lines().any(|l| l.trim() == format!("PASS {name}")), "{name} did not reach its end:\n{text}");
    check_thunk(&text, transport);
    text
}

/// The system's libhsakmt.so.1 (Debian's libhsakmt1).
const SYSTEM_HSAKMT: &str = "/usr/lib/x86_64-linux-gnu/libhsakmt.so.1";

/// The program printed the libhsakmt that ROCr loaded: the system's for `--thunk system`, ours
/// (never the system's) otherwise.
fn check_thunk(text: &str, transport: Transport) {
    let loaded = text.lines().find_map(|l| l.strip_prefix("libhsakmt: ")).expect("the program names its libhsakmt");
    let real = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let is_system = real(loaded) == real(SYSTEM_HSAKMT);
    let want_system = matches!(transport, Transport::Device { thunk: "system", .. });
    assert_eq!(is_system, want_system, "ROCr loaded {loaded} on the {} device", transport.name());
}

#[test]
fn rocr_queue_create_and_size_rules() {
    check("queue_create", Transport::Embedded);
}

#[test]
fn rocr_barrier_and_or_packets() {
    check("barriers", Transport::Embedded);
}

#[test]
fn rocr_packets_across_the_ring_wrap() {
    check("ring_wrap", Transport::Embedded);
}

#[test]
fn rocr_blocked_waits_sleep_in_the_event_wait() {
    let text = check("blocked_wait", Transport::Embedded);
    // The program bounds the CPU fraction itself; the summary line is what the report quotes.
    assert!(text.contains("BLOCKED CPU fraction:"), "{text}");
}

#[test]
fn rocr_wait_timeouts_honoured() {
    check("wait_timeout", Transport::Embedded);
}

#[test]
fn rocr_queue_errors_reach_the_callback() {
    check("queue_error", Transport::Embedded);
}

/// The child's embedded device is its own (one per process): it finds the parent's handle in the
/// parent's backing store, and both see one memory.
#[test]
fn rocr_ipc_between_two_processes_with_embedded_devices() {
    check("ipc", Transport::Embedded);
}

/// ROCr's own blit kernels (a fill, and copies host->VRAM, VRAM->VRAM, VRAM->host) run on the
/// shader core when SDMA is off; the program checks every byte on the host.
#[test]
fn rocr_blit_kernels_fill_and_copy_vram() {
    check_with("vram_blit", Transport::Embedded, &[("HSA_ENABLE_SDMA", "0")]);
}

/// A VM fault, whichever engine takes it, reaches ROCr as a MEMORY event with the faulting page
/// and reason: ROCr's handler prints them and aborts; the program never hangs.
#[test]
fn rocr_vm_faults_end_in_rocrs_fault_handler() {
    check_vm_fault(Transport::Embedded);
}

/// Runs vm_fault with ROCr copying by SDMA, then by its blit kernel on the shader core: each run
/// must end in ROCr's VM fault handler (its message with the page the program wrote to and the
/// not-present reason, then abort), not in the program's own failure after 60 s nor in a hang.
fn check_vm_fault(transport: Transport) {
    let exe = program("vm_fault");
    for (engine, sdma) in [("SDMA", "1"), ("blit kernel", "0")] {
        let t0 = Instant::now();
        let (ok, text) = run(&exe, transport, &[("HSA_ENABLE_SDMA", sdma)]);
        println!("--- vm_fault by {engine} ({}), {:.1} s:\n{text}", transport.name(), t0.elapsed().as_secs_f64());
        assert!(!ok, "vm_fault by {engine} exited 0 on the {} device:\n{text}", transport.name());
        assert!(text.contains(&format!("({engine})")), "vm_fault did not copy by {engine}:\n{text}");
        // amdkfd reports the page (page_addr << PAGE_SHIFT): the program wrote at 0x100010.
        let reported = text.lines().find(|l| l.starts_with("Memory access fault by GPU node-"));
        let line = reported.unwrap_or_else(|| panic!("ROCr reported no VM fault ({engine}):\n{text}"));
        assert!(
            line.contains("on address 0x100000.") && line.contains("Reason: Page not present or supervisor privilege."),
            "ROCr's report of the {engine} fault: {line}"
        );
        assert!(!text.contains("FAIL "), "the program gave up waiting ({engine}):\n{text}");
        check_thunk(&text, transport);
    }
}

/// With `RUST_LOG` set, the embedded device inside the program's process logs why each queue
/// stopped to stderr (libhsakmt.so.1 starts the log; nothing else in the process would).
#[test]
fn rocr_queue_error_reasons_are_logged_with_rust_log() {
    let exe = program("queue_error");
    let mut cmd = Transport::Embedded.command(&exe);
    cmd.env("RUST_LOG", "warn").env_remove("HSAKMT_LOG");
    let (ok, text) = run_bounded(cmd, &exe, RUN_LIMIT, String::new);
    assert!(ok, "queue_error failed:\n{text}");
    let logged =
        |what: &str| text.lines().any(|l| l.contains("WARN") && l.contains("cuse_kfd::engine") && l.contains(what));
    assert!(logged("queue error 32: unknown packet type 7"), "the undefined packet's reason is not logged:\n{text}");
    assert!(
        logged("queue error 8: kernel object at 0x") && logged("lies inside its 64-byte kernel descriptor"),
        "the GFX dispatch's reason is not logged:\n{text}"
    );
}

/// Every program against a `cuse-kfd serve` node through the kernel's CUSE, over our libhsakmt.
#[test]
#[ignore = "device tier"]
fn device_tier_rocr_programs() {
    on_the_node("ours");
}

/// Every program against a node over the system's libhsakmt.so.1: nothing of ours in the
/// program's process but the LD_PRELOAD mmap redirect.
#[test]
#[ignore = "device tier"]
fn device_tier_rocr_programs_on_the_system_libhsakmt() {
    on_the_node("system");
}

fn on_the_node(thunk: &str) {
    let bin = tier();
    // Logged to a file, shown if a program hangs (RUST_LOG sets the level; warn by default).
    let d = Daemon::start_logged(&bin, &format!("kfd-t-rocr-{thunk}"));
    for (name, what) in PROGRAMS.into_iter().filter(|(n, _)| !EMBEDDED_ONLY.contains(n)) {
        println!("{name}: {what}");
        let transport = Transport::Device { bin: &bin, node: &d.node, runtime_dir: &d.runtime_dir, thunk, daemon: &d };
        if FAULTING.contains(&name) {
            check_vm_fault(transport);
            continue;
        }
        let text = check(name, transport);
        if name == "blocked_wait" {
            sleeps_in_a_fuse_request(&text);
        }
    }
}

/// On a node, a BLOCKED waiter sleeps in the kernel inside its WAIT_EVENTS ioctl, which CUSE
/// holds as a FUSE request until the daemon answers (fs/fuse/dev.c request_wait_answer): the
/// program prints the waiting thread's wchan.
fn sleeps_in_a_fuse_request(text: &str) {
    let at = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("the waiter sleeps in the kernel at "))
        .unwrap_or_else(|| panic!("blocked_wait names where its waiter sleeps:\n{text}"));
    assert!(
        at.contains("request_wait_answer") || at.contains("fuse"),
        "a BLOCKED waiter on the node sleeps at {at:?}, not in a FUSE request (the KFD wait):\n{text}"
    );
}

/// The list above names every program in kfd-tests/c/rocr, and each exists.
#[test]
fn every_program_is_listed() {
    assert_lists_every_program(&Path::new(env!("CARGO_MANIFEST_DIR")).join("c/rocr"), PROGRAMS.iter().map(|(n, _)| *n));
}
