//! Reading the sysfs-shaped topology tree as libhsakmt 5.2.3 reads
//! /sys/devices/virtual/kfd/kfd/topology: one read of at most a page per file, then
//! "key value" pairs until the first line that is not one. A cache's `sibling_map` line
//! ("sibling_map 1,0,...") ends its file.
//!
//! The device writes this tree to `<runtime dir>/topology` whatever the transport, so the
//! embedded and the device-node clients read the same files, through the device's own parser of
//! the format in its libhsakmt reading (`cuse_kfd::topology::parse_properties_leniently`).

use super::{Result, Status};
pub(super) use cuse_kfd::topology::Properties;
use cuse_kfd::topology::{leading_u64, parse_properties_leniently};
use std::io::Read;
use std::path::Path;

/// libhsakmt reads one page of each file.
const MAX_READ: usize = cuse_kfd::topology::MAX_FILE_SIZE;

/// Reads at most a page of `path`; a missing or unreadable file is `Error`.
fn read_page(path: &Path) -> Result<String> {
    let mut buf = Vec::with_capacity(MAX_READ);
    std::fs::File::open(path).and_then(|f| f.take(MAX_READ as u64 - 1).read_to_end(&mut buf)).map_err(|e| {
        log::warn!("cannot read topology file {}: {e}", path.display());
        Status::Error
    })?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Reads and parses a `properties` file.
pub(super) fn read_properties(path: &Path) -> Result<Properties> {
    Ok(parse_properties_leniently(&read_page(path)?))
}

/// Reads a file holding one decimal number (`gpu_id`, `generation_id`).
pub(super) fn read_number(path: &Path) -> Result<u64> {
    leading_u64(read_page(path)?.trim_start()).ok_or_else(|| {
        log::warn!("{} does not hold a number", path.display());
        Status::Error
    })
}

/// The number of node directories under `nodes` (named 0, 1, ...).
pub(super) fn count_nodes(nodes: &Path) -> Result<u32> {
    let entries = std::fs::read_dir(nodes).map_err(|e| {
        log::warn!("cannot list {}: {e}", nodes.display());
        Status::Error
    })?;
    let n = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|s| s.parse::<u32>().is_ok()))
        .count();
    Ok(n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_then_sibling_map() {
        let p = parse_properties_leniently("processor_id_low 7\nlevel 1\ntype 9\nsibling_map 1,0,1,0\n");
        assert_eq!(p.get("processor_id_low"), Some(7));
        assert_eq!(p.u32("type"), 9);
        assert_eq!(p.sibling_map, vec![1, 0, 1, 0]);
        assert_eq!(p.get("missing"), None);
    }

    #[test]
    fn stops_at_the_first_line_that_is_not_a_pair() {
        let p = parse_properties_leniently("a 1\nb x\nc 3\n");
        assert_eq!(p.get("a"), Some(1));
        assert_eq!(p.get("c"), None);
        assert_eq!(parse_properties_leniently("big 18446744073709551615\n").u64("big"), u64::MAX);
    }
}
