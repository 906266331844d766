//! `cuse-kfd`: serve the device through CUSE, or print its topology.

use clap::{Parser, Subcommand};
use cuse_kfd::frontend::cuse::channel::{self, Channel};
use cuse_kfd::frontend::cuse::session::{Session, SystemCallers};
use cuse_kfd::frontend::sandbox;
use cuse_kfd::{Device, DeviceConfig};
use nix::sys::signal::{SigSet, Signal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "cuse-kfd",
    version,
    about = "A software amdkfd: /dev/kfd through CUSE, with a soft command processor"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the device as /dev/<NAME> through CUSE (needs root and a kernel with CUSE).
    Serve(Box<ServeArgs>),
    /// Run an unmodified ROCm program on our device (e.g. `cuse-kfd run --embedded -- rocminfo`):
    /// the `cuse-kfd-run` executable beside this one; `cuse-kfd run --help` shows its options.
    #[command(disable_help_flag = true)]
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Ask a running daemon what it holds (processes, queues, events, memory), or for its trace.
    Status {
        /// The daemon's device name (its runtime directory is /run/cuse-kfd/<NAME>).
        #[arg(long, default_value = "kfd")]
        name: String,
        /// The daemon's runtime directory, if not the default for --name.
        #[arg(long)]
        runtime_dir: Option<PathBuf>,
        /// Write the ioctl and packet trace as Chrome trace JSON (open it in Perfetto) instead.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
    },
    /// Print the topology of a profile, or write its sysfs-shaped tree.
    Topology {
        #[arg(long, default_value = cuse_kfd::topology::DEFAULT_PROFILE)]
        profile: String,
        #[arg(long, default_value_t = 1)]
        gpus: usize,
        /// Write the tree (DIR/topology/...) instead of printing it.
        #[arg(long, value_name = "DIR")]
        write: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Device node name under /dev (e.g. kfd-soft beside a real GPU's kfd).
    #[arg(long, default_value = "kfd")]
    name: String,
    /// Mode of the device node, octal (devtmpfs creates it 0600 root). A mode that lets
    /// everyone open it (0666) is logged as a warning: every local user then reaches the daemon.
    #[arg(long, default_value = "0660", value_parser = parse_mode)]
    mode: u32,
    /// Group owning the device node (name or number), as amdkfd's udev rule gives /dev/kfd.
    #[arg(long, default_value = "render")]
    group: String,
    /// Device profile (gfx90a or gfx1030).
    #[arg(long, default_value = cuse_kfd::topology::DEFAULT_PROFILE)]
    profile: String,
    /// Number of GPU nodes.
    #[arg(long, default_value_t = 1)]
    gpus: usize,
    /// Where backing files and the topology tree live (default /run/cuse-kfd/<NAME>).
    #[arg(long)]
    runtime_dir: Option<PathBuf>,
    /// Idle reader threads kept on the CUSE channel. Another one starts whenever every reader is
    /// busy with a request (one waiting on storage, say), up to --max-threads.
    #[arg(long, default_value_t = channel::Readers::DEFAULT.min)]
    threads: usize,
    /// The most reader threads at once: past it, requests wait until a reader is free. One user's
    /// requests run on at most a quarter of them at once; that user's others wait for those.
    #[arg(long, default_value_t = channel::Readers::DEFAULT.max)]
    max_threads: usize,
    /// The CUSE control device.
    #[arg(long, default_value = "/dev/cuse")]
    cuse: PathBuf,
    /// Also serve the topology read-only through FUSE at DIR (DIR/topology/...), to bind-mount
    /// over /sys/devices/virtual/kfd/kfd in a mount namespace.
    #[arg(long, value_name = "DIR")]
    sysfs_mount: Option<PathBuf>,
    /// Inject a fault (repeatable): vm-fault=ADDR[+LEN], hang-queue=ID, panic-queue=ID, delay-completions=MS,
    /// crash-at=ioctl:NAME, stall-ioctl=NAME:MS (NAME as in crash-at, e.g. ALLOC_MEMORY_OF_GPU).
    #[arg(long = "fault", value_name = "SPEC")]
    faults: Vec<String>,
    /// Per-process limits, e.g. `vram=8G,queues=64`: RES is buffers, vram, gtt (bytes, with a
    /// K/M/G/T suffix), queues, events or waits (parked WAIT_EVENTS); N may be `unlimited`. A
    /// request past a limit gets amdkfd's errno for the shortage (ENOMEM for buffers, memory
    /// and waits; ENOSPC for queues and events) and changes nothing. Defaults: all of the
    /// device's VRAM and GTT (half of RAM), 32768 buffers, 1024 queues, 8192 events, 4096
    /// waits. `cuse-kfd status` shows the limits and each process's and uid's usage.
    #[arg(long, value_name = "RES=N[,RES=N...]", value_parser = cuse_kfd::quota::Overrides::parse)]
    process_limit: Option<cuse_kfd::quota::Overrides>,
    /// Per-uid limits, over all processes of a uid, in the syntax of --process-limit.
    /// Defaults: all of the device's VRAM and GTT, and four processes' worth of the counted
    /// objects (131072 buffers, 4096 queues, 32768 events, 16384 waits).
    #[arg(long, value_name = "RES=N[,RES=N...]", value_parser = cuse_kfd::quota::Overrides::parse)]
    uid_limit: Option<cuse_kfd::quota::Overrides>,
    /// Record ioctls and packets from the start (`cuse-kfd status --trace FILE` exports them).
    #[arg(long)]
    trace: bool,
    /// Threads that run the workgroups of GFX kernels on the shader core (default: one per
    /// core); 0 runs them on the engine thread.
    #[arg(long, value_name = "N")]
    shader_workers: Option<usize>,
    /// Command processor threads that share the queues (default 1; one per core, up to 4, suits
    /// a machine with cores to spare); a new queue goes to the one serving the fewest.
    #[arg(long, value_name = "N")]
    engine_threads: Option<usize>,
    /// Run each ioctl in its first round on the blocked caller's memory (process_vm_readv and
    /// process_vm_writev): one round trip instead of the two or three of CUSE's RETRY rounds,
    /// which stay the fallback where direct access cannot do exactly what the kernel's copies
    /// do. Off by default while it gains test runs: ROCr 5.2.3 has a lost wakeup in
    /// hsa_queue_destroy that changes of timing expose (see the README).
    #[arg(long)]
    direct_copies: bool,
    /// Run unconfined, for debugging (strace, gdb): keep every capability, no seccomp filter, no
    /// no_new_privs. The directory checks stay.
    #[arg(long)]
    no_sandbox: bool,
    /// Test only (the device tier's confinement test): once confined, try execve and
    /// socket(AF_INET) from the daemon and log what they return.
    #[arg(long, hide = true)]
    probe_sandbox: bool,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|e| format!("not an octal mode: {e}")).and_then(|m| {
        if m <= 0o777 {
            Ok(m)
        } else {
            Err("mode must be at most 0777".into())
        }
    })
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Serve(a) => serve(*a),
        Command::Topology { profile, gpus, write } => topology(&profile, gpus, write.as_deref()),
        Command::Status { name, runtime_dir, trace } => status(&name, runtime_dir, trace.as_deref()),
        Command::Run { args } => run(&args),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(e: String) -> ExitCode {
    eprintln!("cuse-kfd: {e}");
    ExitCode::FAILURE
}

/// Execs the launcher, `cuse-kfd-run`, from this executable's directory (as git runs `git-NAME`
/// for `git NAME`): the launcher is a package of its own, the daemon knows nothing of it.
fn run(args: &[std::ffi::OsString]) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let launcher = exe.with_file_name("cuse-kfd-run");
    if !launcher.is_file() {
        let release = exe.parent().and_then(Path::file_name).is_some_and(|n| n == "release");
        return Err(format!(
            "`cuse-kfd run` needs {}: build it with `cargo build{} -p cuse-kfd-run`",
            launcher.display(),
            if release { " --release" } else { "" }
        ));
    }
    let e = std::process::Command::new(&launcher).args(args).exec();
    Err(format!("running {}: {e}", launcher.display()))
}

fn status(name: &str, runtime_dir: Option<PathBuf>, trace: Option<&Path>) -> Result<(), String> {
    let dir = runtime_dir.unwrap_or_else(|| PathBuf::from("/run/cuse-kfd").join(name));
    let ask = |cmd| cuse_kfd::frontend::control::request(&dir, cmd).map_err(|e| e.to_string());
    match trace {
        Some(file) => {
            let json = ask("trace")?;
            std::fs::write(file, json).map_err(|e| format!("writing {}: {e}", file.display()))
        }
        None => {
            print!("{}", ask("status")?);
            Ok(())
        }
    }
}

fn topology(profile: &str, gpus: usize, write: Option<&Path>) -> Result<(), String> {
    let t = cuse_kfd::topology::Topology::from_profile_name(profile, gpus).map_err(|e| e.to_string())?;
    match write {
        Some(dir) => t.write_tree(dir).map_err(|e| format!("writing the topology under {}: {e}", dir.display())),
        None => {
            for (path, text) in t.files() {
                println!("== {path}\n{text}");
            }
            Ok(())
        }
    }
}

fn group_id(g: &str) -> Result<u32, String> {
    if let Ok(n) = g.parse() {
        return Ok(n);
    }
    nix::unistd::Group::from_name(g)
        .map_err(|e| format!("looking up group {g} (--group): {e}"))?
        .map(|gr| gr.gid.as_raw())
        .ok_or_else(|| format!("no group named {g}: name the node's group with --group (a name or a number)"))
}

/// A directory check's answer, with the option that gave the directory.
fn trusted(r: sandbox::Result<PathBuf>, option: &str) -> Result<PathBuf, String> {
    r.map_err(|e| format!("{option}: {e}"))
}

/// `--probe-sandbox`: what execve and socket(AF_INET) return inside the daemon, logged as
/// `sandbox probe: <call>: <result>` (the device tier's confinement test reads these lines).
/// Real calls: an execve that worked would replace the daemon with /bin/true.
fn probe_sandbox() {
    let exec = nix::unistd::execv(c"/bin/true", &[c"true"]);
    log::warn!("sandbox probe: execve: {}", exec.map_or_else(|e| format!("{e:?}"), |_| "ran".into()));
    // std's UDP bind is socket(AF_INET, SOCK_DGRAM) then bind: the first fails if confined.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0");
    let sock = sock.map_or_else(
        |e| e.raw_os_error().map_or_else(|| e.to_string(), |c| format!("{:?}", nix::errno::Errno::from_raw(c))),
        |_| "created".into(),
    );
    log::warn!("sandbox probe: socket(AF_INET): {sock}");
}

fn serve(a: ServeArgs) -> Result<(), String> {
    // SIGINT and SIGTERM are taken by the main thread (the sigwait below), so they are blocked
    // here, before Device::new starts the engine and timer threads, the control socket its
    // thread and the server its readers: threads inherit the mask, and a signal during setup
    // stays pending until the wait instead of killing the daemon without a teardown.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block().map_err(|e| format!("blocking signals: {e}"))?;
    if a.name.is_empty() || a.name.contains("..") || a.name.starts_with('/') {
        return Err(format!("invalid device name {:?}", a.name));
    }
    let readers =
        channel::Readers::new(a.threads, a.max_threads).map_err(|e| format!("--threads/--max-threads: {e}"))?;
    let max = cuse_kfd::engine::MAX_THREADS;
    if let Some(n) = a.engine_threads.filter(|n| !(1..=max).contains(n)) {
        return Err(format!("--engine-threads {n}: 1 to {max} engine threads"));
    }
    for spec in &a.faults {
        // Checked before anything is set up, so a typo costs nothing.
        cuse_kfd::faults::Faults::default().apply(spec).map_err(|e| e.to_string())?;
    }
    if !nix::unistd::geteuid().is_root() {
        return Err("serving needs root: /dev/cuse is root-only, and the daemon sets up the node".into());
    }
    let gid = group_id(&a.group)?;
    if a.mode & 0o007 != 0 {
        log::warn!(
            "--mode {:04o}: every local user can open the node and reach this root daemon; \
             prefer 0660 and --group",
            a.mode
        );
    }
    let sysfs_mount = match &a.sysfs_mount {
        Some(dir) => Some(trusted(sandbox::trusted_dir(dir), "--sysfs-mount")?),
        None => None,
    };
    if !a.no_sandbox {
        // Before any thread starts: capset changes only the calling thread, and every thread
        // started afterwards inherits its sets.
        let keep = sandbox::kept_caps(sysfs_mount.is_some());
        sandbox::drop_caps(&keep).map_err(|e| e.to_string())?;
    }
    let channel = Arc::new(Channel::open(&a.cuse).map_err(|e| e.to_string())?);
    let runtime_dir = a.runtime_dir.clone().unwrap_or_else(|| PathBuf::from("/run/cuse-kfd").join(&a.name));
    let runtime_dir = trusted(sandbox::runtime_dir(&runtime_dir), "--runtime-dir")?;
    let mut engine = cuse_kfd::engine::EngineConfig::default();
    if let Some(n) = a.shader_workers {
        engine.shader_workers = n;
    }
    if let Some(n) = a.engine_threads {
        engine.threads = n;
    }
    let config = DeviceConfig {
        profile: a.profile.clone(),
        gpus: a.gpus,
        runtime_dir: Some(runtime_dir.clone()),
        quotas: cuse_kfd::quota::QuotaConfig {
            process: a.process_limit.unwrap_or_default(),
            uid: a.uid_limit.unwrap_or_default(),
            device_buffers: None,
        },
        engine,
    };
    let device = Device::new(&config).map_err(|e| e.to_string())?;
    for spec in &a.faults {
        device.faults().apply(spec).map_err(|e| e.to_string())?;
    }
    device.trace().set_enabled(a.trace);
    cuse_kfd::frontend::control::spawn(device.weak(), &runtime_dir)
        .map_err(|e| format!("starting the control socket in {}: {e}", runtime_dir.display()))?;

    let session = Arc::new(Session::new(
        device.clone(),
        channel.clone(),
        Box::new(SystemCallers { direct: a.direct_copies }),
        &a.name,
    ));
    let (s, c) = (session.clone(), channel.clone());
    let server = std::thread::Builder::new()
        .name("cuse-serve".into())
        .spawn(move || {
            let r = channel::serve(
                c,
                move |frame: &[u8]| s.handle(frame),
                cuse_kfd::frontend::cuse::frame::share_key,
                readers,
            );
            if let Err(e) = &r {
                log::error!("the CUSE channel failed: {e}");
            }
            // The device is gone: wake the main thread.
            let _ = nix::sys::signal::kill(nix::unistd::getpid(), Signal::SIGTERM);
        })
        .map_err(|e| format!("starting the server: {e}"))?;

    let node = Path::new("/dev").join(&a.name);
    let sysfs = setup_node(&node, a.mode, gid, &session).and_then(|()| match &sysfs_mount {
        Some(dir) => cuse_kfd::frontend::topology_fs::mount(device.topology(), dir)
            .map(Some)
            .map_err(|e| format!("mounting the topology at {}: {e}", dir.display())),
        None => Ok(None),
    });
    let sysfs = match sysfs {
        Ok(m) => m,
        Err(e) => {
            // A failed setup leaves nothing behind either.
            shutdown(&session, None, &runtime_dir);
            return Err(e);
        }
    };
    if !a.no_sandbox {
        // Every set-up thread runs now (engine, timer, control, readers, FUSE); later ones
        // inherit the filter.
        if let Err(e) = sandbox::restrict_syscalls() {
            shutdown(&session, sysfs, &runtime_dir);
            return Err(e.to_string());
        }
    }
    if a.probe_sandbox {
        probe_sandbox();
    }
    log::info!("serving {} ({} x{}), runtime directory {}", node.display(), a.profile, a.gpus, runtime_dir.display());
    // A signal that came during setup is pending and returns at once.
    let sig = signals.wait().map_err(|e| format!("waiting for signals: {e}"));
    match &sig {
        Ok(sig) => log::info!("{sig:?}: shutting down"),
        Err(e) => log::error!("{e}: shutting down"),
    }
    shutdown(&session, sysfs, &runtime_dir);
    drop(server);
    sig.map(|_| ())
}

/// Tears down every context (answering parked waits, removing backing files), unmounts the
/// topology and removes its tree and the control socket.
fn shutdown(session: &Session, sysfs: Option<cuse_kfd::frontend::topology_fs::SysfsMount>, runtime_dir: &Path) {
    session.shutdown();
    if let Some(Err(e)) = sysfs.map(|m| m.unmount()) {
        log::warn!("unmounting the topology: {e}");
    }
    let _ = std::fs::remove_dir_all(runtime_dir.join("topology"));
    // Nothing answers it any more.
    let _ = std::fs::remove_file(cuse_kfd::frontend::control::socket_path(runtime_dir));
}

/// Waits for devtmpfs to create the node after CUSE_INIT, then gives it its mode and group.
fn setup_node(node: &Path, mode: u32, gid: u32, session: &Session) -> Result<(), String> {
    let t0 = Instant::now();
    while !(session.is_initialized() && node.exists()) {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!("{} did not appear within 10 s of starting CUSE", node.display()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(node, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {:o} {}: {e}", mode, node.display()))?;
    std::os::unix::fs::chown(node, None, Some(gid)).map_err(|e| format!("chgrp {gid} {}: {e}", node.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve_args(args: &[&str]) -> ServeArgs {
        let argv = ["cuse-kfd", "serve"].iter().chain(args).copied();
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Serve(a) => *a,
            _ => unreachable!("parsed as serve"),
        }
    }

    #[test]
    fn m1_the_node_defaults_to_0660_group_render() {
        let a = serve_args(&[]);
        assert_eq!((a.mode, a.group.as_str()), (0o660, "render"));
        assert!(!a.no_sandbox && !a.probe_sandbox, "confined unless asked");
        let a = serve_args(&["--mode", "0666", "--group", "44"]);
        assert_eq!((a.mode, a.group.as_str()), (0o666, "44"));
        assert!(serve_args(&["--no-sandbox"]).no_sandbox);
    }

    #[test]
    fn quota_limits_come_from_the_command_line_and_its_help_states_the_defaults() {
        use cuse_kfd::quota::{self, Overrides, Resource};
        let a = serve_args(&["--process-limit", "vram=8G,queues=64", "--uid-limit", "waits=10"]);
        assert_eq!(
            a.process_limit,
            Some(Overrides::default().with(Resource::Vram, 8 << 30).with(Resource::Queues, 64))
        );
        assert_eq!(a.uid_limit, Some(Overrides::default().with(Resource::Waits, 10)));
        assert_eq!(serve_args(&[]).process_limit, None);
        assert!(Cli::try_parse_from(["cuse-kfd", "serve", "--uid-limit", "bogus=1"]).is_err());
        let mut cli = <Cli as clap::CommandFactory>::command();
        let help = cli.find_subcommand_mut("serve").expect("serve").render_long_help().to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let n = |base: u64, times: u64| base * times;
        for times in [1, quota::DEFAULT_UID_PROCESSES] {
            for (base, name) in [
                (quota::DEFAULT_PROCESS_BUFFERS, "buffers"),
                (quota::DEFAULT_PROCESS_QUEUES, "queues"),
                (quota::DEFAULT_PROCESS_EVENTS, "events"),
                (quota::DEFAULT_PROCESS_WAITS, "waits"),
            ] {
                let said = format!("{} {name}", n(base, times));
                assert!(help.contains(&said), "the help must say {said:?}: {help}");
            }
        }
    }

    #[test]
    fn m1_a_missing_group_names_the_option() {
        assert_eq!(group_id("0"), Ok(0));
        let e = group_id("no-such-group-cuse-kfd").unwrap_err();
        assert!(e.contains("--group"), "{e}");
    }

    #[test]
    fn modes_parse_as_octal_up_to_0777() {
        assert_eq!(parse_mode("0660"), Ok(0o660));
        assert_eq!(parse_mode("0o666"), Ok(0o666));
        assert!(parse_mode("1777").is_err());
        assert!(parse_mode("0968").is_err());
    }
}
