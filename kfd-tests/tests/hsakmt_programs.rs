//! The real libhsakmt on our device: the C programs of kfd-tests/c/hsakmt, built against Debian's
//! hsakmt.h and linked with the system's libhsakmt.so.1 (5.2.3), run by
//! `$CUSE_KFD_BIN run --thunk system --device /dev/<node>` against a `cuse-kfd serve` node in the
//! real-device tier (set up by `cargo xtask test device`; a plain `cargo test` lists it as ignored).
//! Each program prints what it checks and exits non-zero on the first failure; it passes when it
//! exits 0 having printed `PASS <name>`.
//!
//! kfd-tests/build.rs compiles the programs on the host (cc and libhsakmt-dev are needed; `cargo xtask
//! test` installs them), so the tier's VM only runs them.

use kfd_tests::device::{tier, Daemon};
use kfd_tests::program::{assert_lists_every_program, run_bounded};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The programs, in kfd-tests/c/hsakmt/<name>.c, and what each checks.
const PROGRAMS: [(&str, &str); 10] = [
    ("topology", "hsaKmtOpenKFD, the version, system and node properties, memory banks, caches, IO links, clocks"),
    ("memory", "system (userptr), GTT and VRAM: allocate, map, host write, SDMA COPY_LINEAR + FENCE, host read back"),
    ("memory_limit", "VRAM until HSAKMT_STATUS_NO_MEMORY (ENOMEM) and GTT until the limit; freeing makes room again"),
    ("queues", "AQL, PM4 and SDMA queues created and destroyed; PM4 WRITE_DATA and SDMA FENCE run on them"),
    ("events", "PM4 RELEASE_MEM and SDMA FENCE+TRAP set the signal event that hsaKmtWaitOnEvent waits on"),
    ("event_limit", "4096 signal events (amdkfd's limit), then HSAKMT_STATUS_ERROR; one destroyed makes room for one"),
    ("isolation", "a forked child's own KFD cannot reach the parent's queue, event or VRAM; the parent's still work"),
    ("cma", "hsaKmtProcessVMRead/Write (CROSS_MEMORY_COPY) between a parent and its forked child's VRAM, and within one process"),
    ("pmc", "the gfx9 counter blocks (20, 158 slots, 3289 counters) and the trace calls' answers for them"),
    ("pmc_blocks", "every counter block listed, one line each, to compare two libraries' lists"),
];

/// A program run is killed after this long, so that a hang is reported with its output, well
/// inside the tier's per-binary limit.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// Program `name`, which kfd-tests/build.rs compiled from kfd-tests/c/hsakmt/<name>.c on the host;
/// panics with the compiler's output if that failed.
fn program(name: &str) -> PathBuf {
    let dir = Path::new(env!("OUT_DIR")).join("hsakmt");
    if let Ok(why) = std::fs::read_to_string(dir.join(format!("{name}.err"))) {
        panic!("{name}.c did not compile (cc and libhsakmt-dev are needed; cargo xtask test installs them):\n{why}");
    }
    let exe = dir.join(name);
    assert!(exe.is_file(), "{} was not built (kfd-tests/build.rs builds kfd-tests/c/hsakmt/{name}.c)", exe.display());
    exe
}

/// Runs `exe` on `node` with the system's libhsakmt (see [`run_bounded`]).
fn run(bin: &Path, node: &Path, exe: &Path) -> (bool, String) {
    let mut cmd = Command::new(bin);
    cmd.args(["run", "--thunk", "system", "--device"]).arg(node).arg("--").arg(exe);
    run_bounded(cmd, exe, RUN_LIMIT, String::new)
}

/// Every program on a `cuse-kfd serve` node through the kernel's CUSE, with the real libhsakmt.
#[test]
#[ignore = "device tier"]
fn device_tier_hsakmt_programs() {
    let bin = tier();
    let real = Path::new("/usr/lib/x86_64-linux-gnu/libhsakmt.so.1");
    assert!(real.exists(), "{} is missing (cargo xtask test installs libhsakmt1)", real.display());
    let d = Daemon::start(&bin, "kfd-t-hsakmt");
    for (name, what) in PROGRAMS {
        println!("{name}: {what}");
        let exe = program(name);
        let t0 = Instant::now();
        let (ok, text) = run(&bin, &d.node, &exe);
        println!("--- {name}, {:.1} s:\n{text}", t0.elapsed().as_secs_f64());
        assert!(ok, "{name} failed on {}:\n{text}", d.node.display());
        assert!(text.lines().any(|l| l.trim() == format!("PASS {name}")), "{name} did not reach its end:\n{text}");
    }
}

/// Over our libhsakmt on the embedded device, where a forked child has a device of its own: the
/// parent's hsaKmtProcessVMRead/Write reach the child's VRAM through the child's device (its
/// peer socket), with the same answers as on a node.
#[test]
fn embedded_cma_between_two_processes_each_with_its_device() {
    let exe = program("cma");
    let mut cmd = kfd_tests::launcher::cargo_run();
    cmd.args(["--embedded", "--"]).arg(&exe);
    // `cargo run` may first have to build the launcher.
    let (ok, text) = run_bounded(cmd, &exe, Duration::from_secs(600), String::new);
    println!("--- cma, embedded:\n{text}");
    assert!(ok && text.lines().any(|l| l.trim() == "PASS cma"), "cma failed on the embedded device:\n{text}");
}

/// The counter blocks our libhsakmt lists are the real one's, line for line, on a node of each
/// profile: libhsakmt keeps a table per GFX major version (gfx9 for gfx90a, gfx10 for gfx1030).
#[test]
#[ignore = "device tier"]
fn device_tier_our_counter_blocks_are_the_real_libhsakmts() {
    let bin = tier();
    let exe = program("pmc_blocks");
    for profile in ["gfx90a", "gfx1030"] {
        let d = Daemon::start_with(&bin, &format!("kfd-t-pmc-{profile}"), &["--profile", profile]);
        let lists: Vec<Vec<String>> = ["system", "ours"]
            .iter()
            .map(|thunk| {
                let mut cmd = Command::new(&bin);
                cmd.args(["run", "--thunk", thunk, "--device"]).arg(&d.node).arg("--").arg(&exe);
                let (ok, text) = run_bounded(cmd, &exe, RUN_LIMIT, String::new);
                println!("--- {profile}, {thunk} libhsakmt:\n{text}");
                assert!(ok && text.lines().any(|l| l.trim() == "PASS pmc_blocks"), "{profile}, {thunk}:\n{text}");
                text.lines().filter(|l| l.starts_with("pmc ")).map(str::to_owned).collect()
            })
            .collect();
        assert!(lists[0].len() > 2, "{profile}: the real libhsakmt listed blocks");
        assert_eq!(lists[1], lists[0], "{profile}: our blocks (left) against the real libhsakmt's (right)");
    }
}

/// `run --thunk system` as an unprivileged user (uid/gid 65534, no groups): it enters a user and
/// mount namespace for the topology tree, the node and the render stand-in, and the topology
/// program passes there as it does for root.
#[test]
#[ignore = "device tier"]
fn device_tier_the_system_libhsakmt_without_root() {
    let bin = tier();
    let d = Daemon::start(&bin, "kfd-t-hsakmt-user");
    let exe = program("topology");
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(&bin);
    cmd.args(["run", "--thunk", "system", "--device"]).arg(&d.node).arg("--").arg(&exe);
    let (ok, text) = run_bounded(cmd, &exe, RUN_LIMIT, String::new);
    println!("--- topology as uid 65534:\n{text}");
    assert!(ok && text.lines().any(|l| l.trim() == "PASS topology"), "topology failed without root:\n{text}");
}

/// A `cuse-kfd run --thunk system` that is SIGKILLed takes its program with it: the program
/// must not live on over a topology tree whose server is gone.
#[test]
#[ignore = "device tier"]
fn device_tier_a_killed_run_takes_its_program_with_it() {
    let bin = tier();
    let d = Daemon::start(&bin, "kfd-t-hsakmt-kill");
    let pidfile = std::env::temp_dir().join(format!("cuse-kfd-killed-run-{}", std::process::id()));
    let _ = std::fs::remove_file(&pidfile);
    let script = format!("echo $$ > {}; exec sleep 600", pidfile.display());
    let mut run = Command::new(&bin)
        .args(["run", "--thunk", "system", "--device"])
        .arg(&d.node)
        .args(["--", "sh", "-c", &script])
        .spawn()
        .expect("starting cuse-kfd run");
    let t0 = Instant::now();
    let pid: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile).ok().and_then(|s| s.trim().parse().ok()) {
            break pid;
        }
        if let Some(st) = run.try_wait().expect("waiting for cuse-kfd run") {
            panic!("cuse-kfd run exited ({st}) before its program wrote {}", pidfile.display());
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the program did not start within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = std::fs::remove_file(&pidfile);
    assert!(alive(pid), "the program {pid} runs under cuse-kfd run");
    run.kill().expect("SIGKILL to cuse-kfd run");
    run.wait().expect("reaping cuse-kfd run");
    let t0 = Instant::now();
    while alive(pid) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = alive(pid);
    if left {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    assert!(!left, "the program {pid} outlived the killed cuse-kfd run by 10 s");
    println!("the program {pid} died with cuse-kfd run");
}

/// Whether `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis.
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// The list above names every program in kfd-tests/c/hsakmt, and each exists.
#[test]
fn every_program_is_listed() {
    assert_lists_every_program(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("c/hsakmt"),
        PROGRAMS.iter().map(|(n, _)| *n),
    );
}
