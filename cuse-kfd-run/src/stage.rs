//! The shipped libraries, found where cargo builds them and staged under the names programs
//! load them by. This is the one place that knows those names: the launcher, xtask and the tests
//! all stage through it.
//!
//! Cargo builds `lib<crate>.so` in `target/<profile>`; a program's loader looks for a soname
//! (`libhsakmt.so.1`, `libhsa-runtime64.so.1`), and a C link (`-lhsa-runtime64`) for the link
//! name. Staging makes `target/<profile>/<dir>/<name>`, a relative symlink to `../lib<crate>.so`,
//! for each name: the directory `LD_LIBRARY_PATH` and `-L` name. A rebuild replaces the file
//! cargo made, so the link always reaches the newest build, and a program already running keeps
//! the file it mapped.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A library the project ships.
#[derive(Debug)]
pub struct Library {
    /// The cargo package that builds it.
    pub package: &'static str,
    /// The file cargo builds in `target/<profile>`.
    pub built: &'static str,
    /// The directory under `target/<profile>` it is staged in; a directory of its own for each
    /// library that can shadow a system one another run wants (the shim's libhsa-runtime64.so.1
    /// beside our libhsakmt.so.1 would hide the real ROCr from every later run).
    pub dir: &'static str,
    /// The names it is staged under: its soname first, then any link name.
    pub names: &'static [&'static str],
}

/// libhsakmt.so.1 (our thunk's C ABI).
pub const HSAKMT: Library =
    Library { package: "hsakmt", built: "libhsakmt.so", dir: "lib", names: &["libhsakmt.so.1"] };

/// libhsa-runtime64.so.1 (the HSA runtime shim), also as `libhsa-runtime64.so` for `-l`.
pub const HSA_RUNTIME_SHIM: Library = Library {
    package: "rocr-shim",
    built: "librocr_shim.so",
    dir: "lib-shim",
    names: &["libhsa-runtime64.so.1", "libhsa-runtime64.so"],
};

/// libkfd_preload.so, loaded by path through LD_PRELOAD: nothing to stage.
pub const KFD_PRELOAD: Library = Library { package: "kfd-preload", built: "libkfd_preload.so", dir: "", names: &[] };

/// Every shipped library.
pub const ALL: [&Library; 3] = [&HSAKMT, &HSA_RUNTIME_SHIM, &KFD_PRELOAD];

/// A library that is not built, or could not be staged.
#[derive(Debug)]
pub enum Error {
    /// Not built in this profile: the command that builds it.
    NotBuilt { path: PathBuf, command: String },
    /// Making the staged names failed.
    Stage { path: PathBuf, source: io::Error },
    /// Building failed (`cargo-build` feature only).
    Build(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotBuilt { path, command } => {
                write!(f, "{} is not built: build it with `{command}`", path.display())
            }
            Error::Stage { path, source } => write!(f, "staging {}: {source}", path.display()),
            Error::Build(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Error {}

impl Library {
    /// The file cargo built in `profile` (a `target/<profile>` directory).
    pub fn built(&self, profile: &Path) -> Result<PathBuf, Error> {
        let path = profile.join(self.built);
        if path.is_file() {
            Ok(path)
        } else {
            Err(Error::NotBuilt { path, command: build_command(profile, &[self]) })
        }
    }

    /// Stages the built library under its names and returns the directory holding them.
    /// Names already in place are left alone, so a read-only target directory (the device tier's
    /// VM sees it so) works once staged; concurrent stagings each rename a new link over the
    /// name, so no program ever finds it missing.
    pub fn stage(&self, profile: &Path) -> Result<PathBuf, Error> {
        let built = self.built(profile)?;
        let dir = profile.join(self.dir);
        let target = Path::new("..").join(self.built);
        for name in self.names {
            let link = dir.join(name);
            let err = |source| Error::Stage { path: link.clone(), source };
            if std::fs::canonicalize(&link).ok() == std::fs::canonicalize(&built).ok() {
                continue;
            }
            std::fs::create_dir_all(&dir).map_err(err)?;
            let tmp = dir.join(format!(".{name}.{}.{}", std::process::id(), unique()));
            std::os::unix::fs::symlink(&target, &tmp).map_err(err)?;
            std::fs::rename(&tmp, &link).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                err(e)
            })?;
        }
        Ok(dir)
    }
}

/// A number no other staging of this process uses (temporary link names).
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// `target/<profile>` of the running cargo artifact: the directory of an executable, or of a
/// test binary in `target/<profile>/deps`.
pub fn profile_dir() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    Ok(dir)
}

/// The cargo profile a `target/<profile>` directory belongs to.
fn profile_name(profile: &Path) -> &str {
    profile.file_name().and_then(|n| n.to_str()).unwrap_or("debug")
}

/// The profile's flags for cargo: none for debug (`dev`), `--release`, or `--profile NAME`.
pub fn profile_args(profile: &Path) -> Vec<String> {
    match profile_name(profile) {
        "debug" => vec![],
        "release" => vec!["--release".into()],
        other => vec!["--profile".into(), other.into()],
    }
}

/// The command that builds `libs` in `profile`.
pub fn build_command(profile: &Path, libs: &[&Library]) -> String {
    let mut words = vec!["cargo".to_string(), "build".into()];
    words.extend(profile_args(profile));
    for lib in libs {
        words.extend(["-p".to_string(), lib.package.to_string()]);
    }
    words.push("--lib".into());
    words.join(" ")
}

/// Builds `libs` in `profile` with the cargo that runs this process (`$CARGO`), so that a test
/// never loads a library older than the code it tests (`cargo test` builds the rlibs, not these
/// files). Without `$CARGO` (a test binary run by hand, or the device tier's VM, where the target
/// directory is read-only and xtask built everything first) a library already built is used.
#[cfg(feature = "cargo-build")]
pub fn build(profile: &Path, libs: &[&Library]) -> Result<(), Error> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return libs.iter().try_for_each(|lib| lib.built(profile).map(drop));
    };
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "-q"]).args(profile_args(profile)).arg("--lib");
    for lib in libs {
        cmd.args(["-p", lib.package]);
    }
    let status = cmd.status().map_err(|e| Error::Build(format!("running cargo: {e}")))?;
    if !status.success() {
        return Err(Error::Build(format!("`{}` failed ({status})", build_command(profile, libs))));
    }
    libs.iter().try_for_each(|lib| lib.built(profile).map(drop))
}

/// [`build`], then [`Library::stage`] each: the directories, in the order of `libs`.
#[cfg(feature = "cargo-build")]
pub fn build_and_stage(profile: &Path, libs: &[&Library]) -> Result<Vec<PathBuf>, Error> {
    build(profile, libs)?;
    libs.iter().map(|lib| lib.stage(profile)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str) -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join(name);
        std::fs::create_dir(&p).unwrap();
        (t, p)
    }

    #[test]
    fn a_missing_library_names_the_command_that_builds_it() {
        let (_t, p) = profile("release");
        let e = HSA_RUNTIME_SHIM.stage(&p).unwrap_err();
        assert!(matches!(e, Error::NotBuilt { .. }), "{e}");
        assert!(e.to_string().contains("`cargo build --release -p rocr-shim --lib`"), "{e}");
        let (_t, p) = profile("debug");
        assert!(HSAKMT.built(&p).unwrap_err().to_string().contains("`cargo build -p hsakmt --lib`"));
    }

    #[test]
    fn staging_links_every_name_to_the_built_file_and_is_idempotent() {
        let (_t, p) = profile("debug");
        std::fs::write(p.join(HSA_RUNTIME_SHIM.built), b"elf").unwrap();
        let dir = HSA_RUNTIME_SHIM.stage(&p).unwrap();
        assert_eq!(dir, p.join("lib-shim"));
        for name in HSA_RUNTIME_SHIM.names {
            let link = dir.join(name);
            assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("../librocr_shim.so"));
            assert_eq!(std::fs::read(&link).unwrap(), b"elf");
        }
        // Again: nothing changes, and no temporary link is left behind.
        HSA_RUNTIME_SHIM.stage(&p).unwrap();
        let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["libhsa-runtime64.so", "libhsa-runtime64.so.1"]);
    }

    #[test]
    fn a_stale_link_is_replaced() {
        let (_t, p) = profile("debug");
        std::fs::write(p.join(HSAKMT.built), b"new").unwrap();
        std::fs::create_dir(p.join("lib")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/libhsakmt.so", p.join("lib/libhsakmt.so.1")).unwrap();
        let dir = HSAKMT.stage(&p).unwrap();
        assert_eq!(std::fs::read(dir.join("libhsakmt.so.1")).unwrap(), b"new");
    }
}
