//! What a launcher run as root may put on the program's PATH, LD_LIBRARY_PATH and LD_PRELOAD:
//! only what no other user can change. The shipped libraries are staged under cargo's
//! `target/<profile>`, which is usually a user's checkout: as root, a library or `lsmod` there
//! would run whatever that user leaves in its place.
//!
//! A path passes when, once its symlinks are resolved, it and every directory above it belong
//! to root, no directory above it can have an entry renamed by another user (not writable by
//! group or others, or sticky as /tmp is), it is not writable by group or others itself, and,
//! for a directory, the same holds for every entry in it (the staged names, and the files they
//! link to). The caller puts the resolved path in the environment, so no symlink is left for
//! anyone to swap later.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Group- or other-writable.
const WRITABLE_BY_OTHERS: u32 = 0o022;
/// The sticky bit: only an entry's owner (or the directory's) may rename or remove it.
const STICKY: u32 = 0o1000;

/// Why a path is refused.
fn refusal(path: &Path, why: &str) -> String {
    format!(
        "{} {why}: as root, cuse-kfd run puts on the program's search paths only what no other user can \
         change (build and run from a root-owned directory, or pass --allow-user-writable)",
        path.display()
    )
}

/// `path` resolved, if only root can change what it names (see the module docs).
pub fn only_root_can_change(path: &Path) -> Result<PathBuf, String> {
    let real = std::fs::canonicalize(path).map_err(|e| format!("resolving {}: {e}", path.display()))?;
    check_leaf(&real)?;
    for dir in real.ancestors().skip(1) {
        let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if meta.uid() != 0 {
            return Err(refusal(dir, &format!("belongs to uid {}", meta.uid())));
        }
        if meta.mode() & WRITABLE_BY_OTHERS != 0 && meta.mode() & STICKY == 0 {
            return Err(refusal(dir, &format!("is writable by others (mode {:o})", meta.mode() & 0o7777)));
        }
    }
    if real.is_dir() {
        let entries = std::fs::read_dir(&real).map_err(|e| format!("reading {}: {e}", real.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("reading {}: {e}", real.display()))?;
            let name = entry.path();
            check_leaf(&std::fs::canonicalize(&name).map_err(|e| format!("resolving {}: {e}", name.display()))?)?;
        }
    }
    Ok(real)
}

/// The path itself (already resolved): root's, and writable by nobody else.
fn check_leaf(real: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(real).map_err(|e| format!("{}: {e}", real.display()))?;
    if meta.uid() != 0 {
        return Err(refusal(real, &format!("belongs to uid {}", meta.uid())));
    }
    if meta.mode() & WRITABLE_BY_OTHERS != 0 {
        return Err(refusal(real, &format!("is writable by others (mode {:o})", meta.mode() & 0o7777)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    /// `path` given to uid 65534 (as root), or left to its non-root creator: another user's.
    fn give_away(path: &Path) {
        if is_root() {
            std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
        }
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// `<tmp>/profile/lib/libx.so.1 -> ../libx.so` as staging makes it.
    fn staged() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let profile = t.path().join("profile");
        std::fs::create_dir_all(profile.join("lib")).unwrap();
        std::fs::write(profile.join("libx.so"), b"elf").unwrap();
        std::os::unix::fs::symlink("../libx.so", profile.join("lib/libx.so.1")).unwrap();
        (t, profile.join("lib"), profile.join("libx.so"))
    }

    #[test]
    fn h7_a_library_of_another_user_is_refused() {
        let (_t, lib, file) = staged();
        give_away(&file);
        let e = only_root_can_change(&lib).unwrap_err();
        assert!(e.contains("libx.so belongs to uid"), "{e}");
    }

    #[test]
    fn h7_a_directory_others_can_write_is_refused_on_the_path_or_above_it() {
        let (_t, lib, _) = staged();
        if !is_root() {
            // Everything a non-root test makes is another user's (for root): refused already.
            assert!(only_root_can_change(&lib).unwrap_err().contains("belongs to uid"));
            return;
        }
        assert_eq!(only_root_can_change(&lib).unwrap(), std::fs::canonicalize(&lib).unwrap());
        chmod(&lib, 0o777);
        assert!(only_root_can_change(&lib).unwrap_err().contains("is writable by others (mode 777)"));
        chmod(&lib, 0o755);
        let profile = lib.parent().unwrap();
        chmod(profile, 0o775);
        let e = only_root_can_change(&lib).unwrap_err();
        assert!(e.contains(&format!("{} is writable by others", profile.display())), "{e}");
        // Sticky, as /tmp: others can add names, not rename root's.
        chmod(profile, 0o1777);
        only_root_can_change(&lib).unwrap();
        give_away(profile);
        chmod(profile, 0o755);
        let e = only_root_can_change(&lib).unwrap_err();
        assert!(e.contains(&format!("{} belongs to uid 65534", profile.display())), "{e}");
    }
}
