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
    let built = profile_dir.join(CARGO_NAME);
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

/// `target/<profile>` of the running cargo artifact (a binary there, or a test in `deps/`).
pub fn profile_dir() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    Ok(dir)
}
