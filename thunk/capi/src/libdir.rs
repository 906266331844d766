//! The directory `LD_LIBRARY_PATH` names: cargo builds `libhsakmt.so`, the dynamic loader
//! looks for the soname `libhsakmt.so.1`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The file cargo builds, in `target/<profile>`.
pub const CARGO_NAME: &str = "libhsakmt.so";
/// The soname.
pub const SONAME: &str = "libhsakmt.so.1";

/// Makes `<profile_dir>/lib/libhsakmt.so.1`, a symlink to `../libhsakmt.so`, and returns the
/// `lib` directory. Safe to run concurrently: the link is replaced atomically.
pub fn install(profile_dir: &Path) -> io::Result<PathBuf> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let built = ensure_built(profile_dir)?;
    if !built.is_file() {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("{} is not built", built.display())));
    }
    let dir = profile_dir.join("lib");
    std::fs::create_dir_all(&dir)?;
    let tmp = dir.join(format!(".{SONAME}.{}.{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    std::os::unix::fs::symlink(Path::new("..").join(CARGO_NAME), &tmp)?;
    std::fs::rename(&tmp, dir.join(SONAME))?;
    Ok(dir)
}

/// `<profile_dir>/libhsakmt.so`, built first with `$CARGO build -p hsakmt --lib` when cargo is
/// at hand: `cargo test` links tests against the rlib and leaves that file missing, or as old as
/// the last `cargo build` (the tests of `thunk`, which test this library, would run an old one).
/// When that build fails (a read-only target directory) a library already there is used.
pub fn ensure_built(profile_dir: &Path) -> io::Result<PathBuf> {
    let built = profile_dir.join(CARGO_NAME);
    let Some(cargo) = std::env::var_os("CARGO") else { return Ok(built) };
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "-q", "-p", "hsakmt", "--lib"]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let st = cmd.status()?;
    if !st.success() && !built.is_file() {
        return Err(io::Error::other(format!("cargo build -p hsakmt --lib failed ({st})")));
    }
    Ok(built)
}

/// `target/<profile>` of the running cargo artifact (a binary there, or a test in `deps/`).
pub fn profile_dir() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    Ok(dir)
}
