//! Free space before a long run: a full `cargo xtask test` writes several GiB (debug and release
//! builds, the fuzz build, the VM's kernel and packages), and a disk that fills half-way fails a
//! tier after many minutes with a compiler's "No space left on device". Checking first turns that
//! into one clear line at the start.

use std::path::Path;

/// What a full test run from a clean clone writes, with room to grow: measured 8.3 GiB on
/// 2026-12-01 (target/ 7.0 GiB, the cargo-fuzz target 1.3 GiB), the system packages aside.
pub const FULL_RUN_BYTES: u64 = 16 << 30;

/// Free bytes for an unprivileged writer on the filesystem holding `path` (its nearest existing
/// ancestor, since target/ may not exist yet).
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    let existing = path.ancestors().find(|p| p.exists()).unwrap_or(Path::new("/"));
    let st = nix::sys::statvfs::statvfs(existing).map_err(std::io::Error::from)?;
    Ok(st.blocks_available() as u64 * st.fragment_size() as u64)
}

/// Ok(summary) when `free` covers `need`, else Err(the message to stop with).
pub fn verdict(path: &Path, free: u64, need: u64) -> Result<String, String> {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    if free >= need {
        Ok(format!("{:.1} GiB free under {}", gib(free), path.display()))
    } else {
        Err(format!(
            "only {:.1} GiB free under {}; a full test run needs about {:.0} GiB \
             (free space, e.g. `cargo clean` in other checkouts, or set CARGO_TARGET_DIR elsewhere)",
            gib(free),
            path.display(),
            gib(need)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_little_space_is_refused_with_the_numbers() {
        let p = Path::new("/x/target");
        let err = verdict(p, 3 << 30, 16 << 30).unwrap_err();
        assert!(err.contains("3.0 GiB free") && err.contains("16 GiB"), "{err}");
        assert!(verdict(p, 16 << 30, 16 << 30).unwrap().contains("16.0 GiB free"));
    }

    #[test]
    fn free_bytes_reads_the_nearest_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("not/yet/made");
        assert!(free_bytes(&missing).unwrap() > 0);
    }
}
