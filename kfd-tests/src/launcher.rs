//! `cuse-kfd run` for the tests: the launcher through `cargo run` (which builds it), after the
//! shipped libraries it stages were built in the same profile.

use cuse_kfd_run::stage;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// `cargo run -q -p cuse-kfd-run --` in the workspace, in this test's profile; append the
/// launcher's arguments. Our libraries are built (once per test process) first: the launcher
/// only finds them.
pub fn cargo_run() -> Command {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let profile = stage::profile_dir().expect("target/<profile>");
    let built = BUILT.get_or_init(|| stage::build(&profile, &stage::ALL).map_err(|e| e.to_string()));
    if let Err(e) = built {
        panic!("{e}");
    }
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.args(["run", "-q"]).args(stage::profile_args(&profile)).args(["-p", "cuse-kfd-run", "--"]);
    c.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root"));
    c
}
