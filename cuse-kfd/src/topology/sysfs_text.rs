//! The sysfs text of the topology, byte for byte as amdkfd prints it, and a parser for it.
//!
//! libhsakmt (ROCT 5.2.3 src/topology.c) reads every file with one `fread` of a page and walks
//! it with `sscanf("%s %llu\n")`, so each file must be "key value" lines under 4096 bytes; the
//! one exception is a cache's last line, `sibling_map` followed by comma-separated bits.

use super::node::{Cache, IoLink, MemBank, Node};
use super::{Topology, TopologyError};
use std::fmt::Write as _;
use std::path::Path;
use std::{fs, io};

/// The directory the tree lives in on a real system; `files()` paths are relative to it.
pub const KFD_SYSFS_DIR: &str = "/sys/devices/virtual/kfd/kfd";

/// libhsakmt reads at most one page of each file.
pub const MAX_FILE_SIZE: usize = uapi::kfd::PAGE_SIZE as usize;

fn key_values(pairs: &[(&str, u64)]) -> String {
    let mut s = String::new();
    for (key, value) in pairs {
        let _ = writeln!(s, "{key} {value}");
    }
    s
}

/// "platform_oem", "platform_id", "platform_rev": the OEM fields of the CRAT/DSDT header.
/// Chosen: table id "CUSE-KFD" and OEM id "CUSE" as kfd packs them (little-endian ASCII).
pub(super) fn system_properties() -> String {
    let oem = u64::from_le_bytes(*b"CUSE-KFD");
    let id = u64::from_le_bytes(*b"CUSE\0\0\0\0");
    key_values(&[("platform_oem", oem), ("platform_id", id), ("platform_rev", 1)])
}

fn mem_text(m: &MemBank) -> String {
    key_values(&[
        ("heap_type", m.heap_type.into()),
        ("size_in_bytes", m.size_in_bytes),
        ("flags", m.flags.into()),
        ("width", m.width.into()),
        ("mem_clk_max", m.mem_clk_max.into()),
    ])
}

fn cache_text(c: &Cache) -> String {
    let mut s = key_values(&[
        ("processor_id_low", c.processor_id_low.into()),
        ("level", c.level.into()),
        ("size", c.size.into()),
        ("cache_line_size", c.cache_line_size.into()),
        ("cache_lines_per_tag", c.cache_lines_per_tag.into()),
        ("association", c.association.into()),
        ("latency", c.latency.into()),
        ("type", c.cache_type.into()),
    ]);
    // kfd_cache_show prints "%d," per bit and turns the last comma into the newline.
    s.push_str("sibling_map ");
    let bits: Vec<&str> = c.sibling_map.iter().map(|&b| if b { "1" } else { "0" }).collect();
    s.push_str(&bits.join(","));
    s.push('\n');
    s
}

/// The io_link keys of kfd_topology.c `iolink_show`. Newer kernels add
/// recommended_sdma_engine_id_mask (for XGMI SDMA); libhsakmt 5.2.3 does not read it.
fn link_text(l: &IoLink) -> String {
    key_values(&[
        ("type", l.link_type.into()),
        ("version_major", l.version_major.into()),
        ("version_minor", l.version_minor.into()),
        ("node_from", l.node_from.into()),
        ("node_to", l.node_to.into()),
        ("weight", l.weight.into()),
        ("min_latency", l.min_latency.into()),
        ("max_latency", l.max_latency.into()),
        ("min_bandwidth", l.min_bandwidth.into()),
        ("max_bandwidth", l.max_bandwidth.into()),
        ("recommended_transfer_size", l.recommended_transfer_size.into()),
        ("flags", l.flags.into()),
    ])
}

fn node_dir(node: &Node) -> String {
    format!("topology/nodes/{}", node.node_id)
}

/// Every directory of the tree, parents first, including the empty ones kfd creates.
pub(super) fn dirs(topo: &Topology) -> Vec<String> {
    let mut out = vec!["topology".to_string(), "topology/nodes".to_string()];
    for node in topo.nodes() {
        let dir = node_dir(node);
        out.push(dir.clone());
        let lists = [
            ("mem_banks", node.mem_banks.len()),
            ("caches", node.caches.len()),
            ("io_links", node.io_links.len()),
            ("p2p_links", node.p2p_links.len()),
            ("perf", 0),
        ];
        for (sub, count) in lists {
            out.push(format!("{dir}/{sub}"));
            out.extend((0..count).map(|i| format!("{dir}/{sub}/{i}")));
        }
    }
    out
}

/// Every file of the tree with its contents.
pub(super) fn files(topo: &Topology) -> Vec<(String, String)> {
    let mut out = vec![
        ("topology/generation_id".to_string(), format!("{}\n", topo.generation_id())),
        ("topology/system_properties".to_string(), system_properties()),
    ];
    for node in topo.nodes() {
        let dir = node_dir(node);
        out.push((format!("{dir}/gpu_id"), format!("{}\n", node.gpu_id)));
        out.push((format!("{dir}/name"), format!("{}\n", node.name)));
        out.push((format!("{dir}/properties"), key_values(&node.properties())));
        let lists: [(&str, Vec<String>); 4] = [
            ("mem_banks", node.mem_banks.iter().map(mem_text).collect()),
            ("caches", node.caches.iter().map(cache_text).collect()),
            ("io_links", node.io_links.iter().map(link_text).collect()),
            ("p2p_links", node.p2p_links.iter().map(link_text).collect()),
        ];
        for (sub, texts) in lists {
            for (i, text) in texts.into_iter().enumerate() {
                out.push((format!("{dir}/{sub}/{i}/properties"), text));
            }
        }
    }
    out
}

/// Writes the tree under `dir`, replacing any `dir/topology` left by an earlier call, so a
/// smaller topology leaves no stale nodes behind.
pub(super) fn write_tree(topo: &Topology, dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir.join("topology")) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    for sub in dirs(topo) {
        fs::create_dir_all(dir.join(sub))?;
    }
    for (path, text) in files(topo) {
        fs::write(dir.join(path), text)?;
    }
    Ok(())
}

/// One parsed `properties` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    /// The "key value" lines, in order.
    pub values: Vec<(String, u64)>,
    /// A cache's sibling_map entries (0 or 1 as the device writes them), empty for other files.
    pub sibling_map: Vec<u32>,
}

impl Properties {
    /// The first value under `key` (the one sscanf would see).
    pub fn get(&self, key: &str) -> Option<u64> {
        self.values.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
    }

    /// The value of `key`, 0 if absent (as libhsakmt leaves the fields it finds no key for).
    pub fn u64(&self, key: &str) -> u64 {
        self.get(key).unwrap_or(0)
    }

    /// The value of `key` truncated to 32 bits as libhsakmt's `(uint32_t)` casts do, 0 if absent.
    pub fn u32(&self, key: &str) -> u32 {
        self.u64(key) as u32
    }
}

/// Parses a `properties` (or `system_properties`) file, strictly: every line must be
/// "key value" with a decimal u64, or a final "sibling_map b,b,..." of 0s and 1s.
pub fn parse_properties(text: &str) -> Result<Properties, TopologyError> {
    parse(text, true)
}

/// Parses a `properties` file as libhsakmt does (`sscanf("%s %llu")` in a loop): "key value"
/// pairs up to the first line that is not one, each value its leading decimal digits (strtoull);
/// a `sibling_map` line ends the file.
pub fn parse_properties_leniently(text: &str) -> Properties {
    parse(text, false).unwrap_or_else(|_| unreachable!("a lenient parse stops instead of failing"))
}

/// strtoull on a token: the value of its leading decimal digits (wrapping, as the thunk's casts
/// expect), None when it does not start with one.
pub fn leading_u64(s: &str) -> Option<u64> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    Some(s[..digits].bytes().fold(0u64, |v, d| v.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))))
}

/// The one parser of `properties` text: `strict` rejects what the device never writes (an
/// error naming the line), otherwise the parse stops there as libhsakmt's does.
fn parse(text: &str, strict: bool) -> Result<Properties, TopologyError> {
    let mut out = Properties::default();
    for (index, line) in text.lines().enumerate() {
        let bad = || TopologyError::Malformed { line: index + 1, text: line.to_string() };
        let pair = if strict {
            line.split_once(' ').filter(|(key, _)| !key.is_empty())
        } else {
            let mut words = line.split_whitespace();
            words.next().zip(words.next())
        };
        let Some((key, value)) = pair.filter(|_| out.sibling_map.is_empty()) else {
            return if strict { Err(bad()) } else { Ok(out) };
        };
        if key == "sibling_map" {
            if strict {
                let bit = |b: &str| matches!(b, "0" | "1").then(|| u32::from(b == "1")).ok_or_else(bad);
                out.sibling_map = value.split(',').map(bit).collect::<Result<_, _>>()?;
            } else {
                out.sibling_map = value.split(',').map_while(|b| leading_u64(b).map(|v| v as u32)).collect();
                return Ok(out);
            }
            continue;
        }
        let value = if strict { value.parse().ok() } else { leading_u64(value) };
        let Some(value) = value else {
            return if strict { Err(bad()) } else { Ok(out) };
        };
        out.values.push((key.to_string(), value));
    }
    Ok(out)
}
