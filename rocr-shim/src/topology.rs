//! The device's topology, read as libhsakmt reads sysfs: `<runtime dir>/topology/nodes/N/`
//! with `gpu_id`, `name`, `properties` and `mem_banks/M/properties` ("key value" lines).

use std::collections::HashMap;
use std::path::Path;

/// One "key value" file.
#[derive(Debug, Clone, Default)]
pub struct Properties(HashMap<String, u64>);

impl Properties {
    pub fn parse(text: &str) -> Properties {
        let mut map = HashMap::new();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            if let (Some(k), Some(v)) = (it.next(), it.next()) {
                if let Ok(v) = v.parse() {
                    map.insert(k.to_string(), v);
                }
            }
        }
        Properties(map)
    }

    /// The value of `key`, 0 when absent (as libhsakmt leaves unknown keys).
    pub fn get(&self, key: &str) -> u64 {
        self.0.get(key).copied().unwrap_or(0)
    }

    pub fn u32(&self, key: &str) -> u32 {
        u32::try_from(self.get(key)).unwrap_or(u32::MAX)
    }
}

/// One topology node: the CPU (no SIMDs) or a GPU.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: u32,
    pub gpu_id: u32,
    pub name: String,
    pub props: Properties,
    pub mem_banks: Vec<Properties>,
    pub caches: Vec<Properties>,
}

impl Node {
    pub fn is_gpu(&self) -> bool {
        self.gpu_id != 0 && self.props.get("simd_count") > 0
    }

    /// The LLVM target name from gfx_target_version (major * 10000 + minor * 100 + stepping):
    /// 90010 is "gfx90a".
    pub fn gfx_name(&self) -> String {
        let v = self.props.get("gfx_target_version");
        format!("gfx{}{}{:x}", v / 10000, (v / 100) % 100, v % 100)
    }

    /// HSA_AGENT_INFO_CACHE_SIZE: bytes of one data cache per level 1..4 (type bit 0 = data).
    pub fn cache_sizes(&self) -> [u32; 4] {
        let mut out = [0u32; 4];
        for c in self.caches.iter().filter(|c| c.get("type") & 1 != 0) {
            if let Some(slot) = (c.get("level") as usize).checked_sub(1).and_then(|l| out.get_mut(l)) {
                *slot = (*slot).max(u32::try_from(c.get("size") * 1024).unwrap_or(u32::MAX));
            }
        }
        out
    }

    /// Bytes of the banks of heap type `heap` (1 = public VRAM, 2 = private VRAM, 0 = system).
    pub fn bank_bytes(&self, heaps: &[u64]) -> u64 {
        self.mem_banks.iter().filter(|b| heaps.contains(&b.get("heap_type"))).map(|b| b.get("size_in_bytes")).sum()
    }
}

fn read(path: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

/// Reads every node under `<runtime_dir>/topology/nodes`, in node order.
pub fn read_nodes(runtime_dir: &Path) -> std::io::Result<Vec<Node>> {
    let dir = runtime_dir.join("topology").join("nodes");
    let mut nodes = Vec::new();
    for id in 0u32.. {
        let nd = dir.join(id.to_string());
        if !nd.is_dir() {
            break;
        }
        let gpu_id = read(&nd.join("gpu_id"))?.trim().parse().unwrap_or(0);
        let name = read(&nd.join("name")).map(|s| s.trim().to_string()).unwrap_or_default();
        let props = Properties::parse(&read(&nd.join("properties"))?);
        let list = |sub: &str| -> Vec<Properties> {
            (0u32..)
                .map_while(|m| read(&nd.join(sub).join(m.to_string()).join("properties")).ok())
                .map(|t| Properties::parse(&t))
                .collect()
        };
        let (mem_banks, caches) = (list("mem_banks"), list("caches"));
        nodes.push(Node { id, gpu_id, name, props, mem_banks, caches });
    }
    if nodes.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no topology nodes under {}", dir.display()),
        ));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_key_values_and_names_gfx_targets() {
        let p = Properties::parse("simd_count 416\ngfx_target_version 90010\nbad line\n");
        assert_eq!(p.get("simd_count"), 416);
        assert_eq!(p.get("missing"), 0);
        let n = Node { id: 1, gpu_id: 7, name: "aldebaran".into(), props: p, mem_banks: vec![], caches: vec![] };
        assert!(n.is_gpu());
        assert_eq!(n.gfx_name(), "gfx90a");
    }
}
