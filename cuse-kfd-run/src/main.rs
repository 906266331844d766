//! `cuse-kfd-run` (also reached as `cuse-kfd run`): run an unmodified ROCm program on cuse-kfd.

use clap::Parser;
use cuse_kfd_run::launch::{self, RunArgs, Thunk, Transport};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run an unmodified ROCm program on cuse-kfd (e.g. `cuse-kfd run --embedded -- rocminfo`).
///
/// The shipped libraries are found beside this executable, where cargo builds them
/// (`cargo build --release -p hsakmt -p rocr-shim -p kfd-preload`).
#[derive(Parser)]
#[command(name = "cuse-kfd run", version)]
struct Cli {
    /// The device inside the program's own process (no daemon, no root needed for the device).
    #[arg(long, conflicts_with = "device")]
    embedded: bool,
    /// A cuse-kfd node to use (default /dev/kfd).
    #[arg(long, value_name = "PATH")]
    device: Option<PathBuf>,
    /// libhsakmt: `ours` (the hsakmt package) first on the library path, or `system` (the
    /// system's libhsakmt.so.1, over a node given by --device: in a mount namespace with the
    /// topology at /sys/devices/virtual/kfd/kfd, render-node stand-ins and kfd-preload; root or
    /// user namespaces; the program is killed if `run` dies).
    #[arg(long, default_value = "ours", value_parser = ["ours", "system"])]
    thunk: String,
    /// HSA runtime: `rocr` keeps the system's real ROCr, `shim` uses ours.
    #[arg(long, default_value = "rocr", value_parser = ["rocr", "shim"])]
    runtime: String,
    /// Device profile of the embedded device [default: gfx90a]; a node serves its daemon's.
    #[arg(long)]
    profile: Option<String>,
    /// GPU nodes of the embedded device [default: 1]; a node serves its daemon's.
    #[arg(long)]
    gpus: Option<usize>,
    /// As root, use libraries and an `lsmod` stand-in that a user other than root can change
    /// (a checkout a user owns). Refused by default: the program, running as root, would run
    /// whatever that user put in their place.
    #[arg(long)]
    allow_user_writable: bool,
    /// Print the LD_LIBRARY_PATH that gives a program our libraries for --runtime (staging
    /// them under their sonames), and run nothing.
    #[arg(long, conflicts_with_all = ["embedded", "device", "thunk", "profile", "gpus"])]
    print_library_path: bool,
    /// The program and its arguments.
    #[arg(last = true, required_unless_present = "print_library_path")]
    program: Vec<OsString>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.print_library_path {
        let path = cuse_kfd_run::stage::profile_dir()
            .map_err(|e| format!("finding this executable: {e}"))
            .and_then(|profile| launch::library_path(&profile, &cli.runtime));
        return match path {
            Ok(p) => {
                println!("{}", p.to_string_lossy());
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        };
    }
    if let Some(p) = cli.profile.as_deref().filter(|p| cuse_kfd::topology::Profile::by_name(p).is_none()) {
        return fail(format!("unknown profile {p:?}"));
    }
    let transport = if cli.embedded {
        Transport::Embedded
    } else {
        Transport::Device(cli.device.unwrap_or_else(|| PathBuf::from("/dev/kfd")))
    };
    let thunk = if cli.thunk == "system" { Thunk::System } else { Thunk::Ours };
    let args = RunArgs {
        transport,
        thunk,
        runtime: cli.runtime,
        profile: cli.profile,
        gpus: cli.gpus,
        allow_user_writable: cli.allow_user_writable,
        program: cli.program,
    };
    match launch::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(e: String) -> ExitCode {
    eprintln!("cuse-kfd run: {e}");
    ExitCode::FAILURE
}
