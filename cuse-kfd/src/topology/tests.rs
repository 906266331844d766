use super::hsa::*;
use super::*;
use std::collections::{BTreeMap, BTreeSet};

fn host() -> HostInfo {
    HostInfo { cpu_cores: 8, mem_total: 32 << 30, max_clock_mhz: 3000 }
}

fn topo(name: &str, gpus: usize) -> Topology {
    Topology::with_host(Profile::by_name(name).unwrap(), gpus, host()).unwrap()
}

fn file_map(t: &Topology) -> BTreeMap<String, String> {
    t.files().into_iter().collect()
}

fn props(files: &BTreeMap<String, String>, path: &str) -> Properties {
    parse_properties(&files[path]).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Number of `<dir>/<sub>/<i>/properties` files.
fn count_entries(files: &BTreeMap<String, String>, dir: &str, sub: &str) -> u64 {
    let prefix = format!("{dir}/{sub}/");
    files.keys().filter(|k| k.starts_with(&prefix) && k.ends_with("/properties")).count() as u64
}

const CPU_KEYS: &[&str] = &[
    "cpu_cores_count",
    "simd_count",
    "mem_banks_count",
    "caches_count",
    "io_links_count",
    "p2p_links_count",
    "cpu_core_id_base",
    "simd_id_base",
    "max_waves_per_simd",
    "lds_size_in_kb",
    "gds_size_in_kb",
    "num_gws",
    "wave_front_size",
    "array_count",
    "simd_arrays_per_engine",
    "cu_per_simd_array",
    "simd_per_cu",
    "max_slots_scratch_cu",
    "gfx_target_version",
    "vendor_id",
    "device_id",
    "location_id",
    "domain",
    "drm_render_minor",
    "hive_id",
    "num_sdma_engines",
    "num_sdma_xgmi_engines",
    "num_sdma_queues_per_engine",
    "num_cp_queues",
];
const GPU_ONLY_KEYS: &[&str] = &[
    "max_engine_clk_fcompute",
    "local_mem_size",
    "fw_version",
    "capability",
    "debug_prop",
    "sdma_fw_version",
    "unique_id",
    "num_xcc",
];

#[test]
fn profiles_are_found_by_name() {
    let p = Profile::by_name("gfx90a").unwrap();
    assert_eq!((p.device_id, p.gfx_target_version, p.wave_front_size), (0x740F, 90010, 64));
    assert!(p.xnack_supported);
    let p = Profile::by_name("gfx1030").unwrap();
    assert_eq!((p.device_id, p.gfx_target_version, p.wave_front_size), (0x73BF, 100300, 32));
    assert!(!p.xnack_supported);
    assert!(Profile::by_name("gfx942").is_none());
    assert_eq!(Profile::by_name(DEFAULT_PROFILE), Some(Profile::default_profile()));
    let names: BTreeSet<_> = Profile::all().iter().map(|p| p.name).collect();
    assert_eq!(names.len(), Profile::all().len());
    assert_eq!(Profile::by_name("gfx90a").unwrap().data_cache_kb(2), Some(8192));
}

#[test]
fn profiles_are_self_consistent() {
    for p in Profile::all() {
        assert_eq!(p.simd_count, p.cu_count * p.simd_per_cu, "{}", p.name);
        assert_eq!(p.array_count % p.simd_arrays_per_engine, 0, "{}", p.name);
        let active: Vec<u32> = (0..p.array_count).map(|a| p.active_cus_in_array(a)).collect();
        assert_eq!(active.iter().sum::<u32>(), p.cu_count, "{}", p.name);
        assert!(active.iter().all(|&n| n <= p.cu_per_simd_array && n <= 32), "{}", p.name);
        // major * 10000 + minor * 100 + stepping, with minor/stepping as hex digits.
        let v = p.gfx_target_version;
        assert_eq!(format!("gfx{}{:x}{:x}", v / 10000, v / 100 % 100, v % 100), p.name);
        assert_eq!(p.capability & CAP_DOORBELL_TYPE_TOTALBITS_MASK, cap_doorbell_type(2));
    }
}

#[test]
fn gpu_count_limits() {
    let p = Profile::default_profile();
    let cpu_only = Topology::with_host(p, 0, host()).unwrap();
    assert_eq!((cpu_only.node_count(), cpu_only.gpus().len()), (1, 0));
    assert!(Topology::with_host(p, MAX_GPUS, host()).is_ok());
    assert_eq!(
        Topology::with_host(p, MAX_GPUS + 1, host()),
        Err(TopologyError::TooManyGpus { requested: 17, max: 16 })
    );
    assert!(matches!(Topology::from_profile_name("gfx9000", 1), Err(TopologyError::UnknownProfile(_))));
}

#[test]
fn crc16_matches_the_kernel_variant() {
    // CRC-16/ARC check value.
    assert_eq!(crc16(b"123456789"), 0xBB3D);
}

#[test]
fn gpu_ids_are_unique_non_zero_16_bit_and_stable() {
    for p in Profile::all() {
        let t = Topology::with_host(p, MAX_GPUS, host()).unwrap();
        let ids: BTreeSet<u32> = t.gpus().iter().map(|g| g.gpu_id).collect();
        assert_eq!(ids.len(), MAX_GPUS, "{}", p.name);
        assert!(ids.iter().all(|&id| id != 0 && id < 1 << 16), "{}", p.name);
        for (i, g) in t.gpus().iter().enumerate() {
            assert_eq!(t.gpu(g.gpu_id), Some(g));
            assert_eq!(g.node_id as usize, i + 1);
            assert_eq!(g.drm_render_minor as usize, 128 + i);
            assert_ne!(g.unique_id, 0);
        }
        // Deterministic, and a prefix of a larger topology.
        assert_eq!(Topology::with_host(p, 2, host()).unwrap().gpus(), &t.gpus()[..2]);
    }
    assert_eq!(topo("gfx90a", 1).gpu(0), None);
}

#[test]
fn gfx90a_x2_has_the_expected_files() {
    let t = topo("gfx90a", 2);
    assert_eq!((t.node_count(), t.generation_id()), (3, 3));
    let files = file_map(&t);
    assert_eq!(files["topology/generation_id"], "3\n");
    let sys = props(&files, "topology/system_properties");
    let keys: Vec<_> = sys.values.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["platform_oem", "platform_id", "platform_rev"]);
    assert_eq!(files["topology/nodes/0/gpu_id"], "0\n");
    assert_eq!(files["topology/nodes/0/name"], "\n");
    for g in t.gpus() {
        let dir = format!("topology/nodes/{}", g.node_id);
        assert_eq!(files[&format!("{dir}/gpu_id")], format!("{}\n", g.gpu_id));
        assert_eq!(files[&format!("{dir}/name")], "aldebaran\n");
        for sub in ["properties", "mem_banks/0/properties", "caches/0/properties", "io_links/0/properties"] {
            assert!(files.contains_key(&format!("{dir}/{sub}")), "{dir}/{sub}");
        }
        // One peer link to the other GPU.
        assert!(files.contains_key(&format!("{dir}/p2p_links/0/properties")));
        assert!(!files.contains_key(&format!("{dir}/p2p_links/1/properties")));
    }
    // The GPU's link to the CPU, exactly.
    assert_eq!(
        files["topology/nodes/1/io_links/0/properties"],
        "type 2\nversion_major 0\nversion_minor 0\nnode_from 1\nnode_to 0\nweight 20\n\
         min_latency 0\nmax_latency 0\nmin_bandwidth 312\nmax_bandwidth 32000\n\
         recommended_transfer_size 0\nflags 1\n"
    );
    let gpu = props(&files, "topology/nodes/1/properties");
    assert_eq!(gpu.get("simd_count"), Some(416));
    assert_eq!(gpu.get("gfx_target_version"), Some(90010));
    assert_eq!(gpu.get("device_id"), Some(0x740F));
    assert_eq!(gpu.get("vendor_id"), Some(0x1002));
    assert_eq!(gpu.get("drm_render_minor"), Some(128));
    assert_eq!(gpu.get("location_id"), Some(0x300));
    assert_eq!(gpu.get("simd_id_base"), Some(0x8000_1000));
    let gpu2 = props(&files, "topology/nodes/2/properties");
    assert_eq!(gpu2.get("simd_id_base"), Some(0x8000_1000 + 8 * 14));
    assert_eq!(gpu2.get("drm_render_minor"), Some(129));
    let cpu = props(&files, "topology/nodes/0/properties");
    assert_eq!(cpu.get("cpu_cores_count"), Some(8));
    assert_eq!(cpu.get("max_engine_clk_ccompute"), Some(3000));
    assert_eq!(props(&files, "topology/nodes/0/mem_banks/0/properties").get("size_in_bytes"), Some(32 << 30));
    let vram = props(&files, "topology/nodes/1/mem_banks/0/properties");
    assert_eq!(vram.get("heap_type"), Some(u64::from(MEM_HEAP_TYPE_FB_PUBLIC)));
    assert_eq!(vram.get("size_in_bytes"), Some(16 << 30));
}

#[test]
fn node_property_keys_follow_node_show() {
    let files = file_map(&topo("gfx1030", 1));
    let keys = |path: &str| -> Vec<String> { props(&files, path).values.into_iter().map(|(k, _)| k).collect() };
    let mut cpu: Vec<&str> = CPU_KEYS.to_vec();
    cpu.push("max_engine_clk_ccompute");
    assert_eq!(keys("topology/nodes/0/properties"), cpu);
    let mut gpu: Vec<&str> = CPU_KEYS.to_vec();
    gpu.extend(GPU_ONLY_KEYS);
    gpu.push("max_engine_clk_ccompute");
    assert_eq!(gpu.len(), 38);
    assert_eq!(keys("topology/nodes/1/properties"), gpu);
}

#[test]
fn counts_match_directories_and_files_parse() {
    for (name, gpus) in [("gfx90a", 2), ("gfx90a", 0), ("gfx1030", 3), ("gfx90a", MAX_GPUS)] {
        let t = topo(name, gpus);
        let files = file_map(&t);
        let dirs: BTreeSet<String> = t.dirs().into_iter().collect();
        for (path, text) in &files {
            assert!(text.len() < MAX_FILE_SIZE, "{path} is {} bytes", text.len());
            let parent = &path[..path.rfind('/').unwrap()];
            assert!(dirs.contains(parent), "{path} has no directory");
            if path.ends_with("properties") {
                parse_properties(text).unwrap_or_else(|e| panic!("{path}: {e}"));
            }
        }
        for node in 0..t.node_count() {
            let dir = format!("topology/nodes/{node}");
            let p = props(&files, &format!("{dir}/properties"));
            for (key, sub) in [
                ("mem_banks_count", "mem_banks"),
                ("caches_count", "caches"),
                ("io_links_count", "io_links"),
                ("p2p_links_count", "p2p_links"),
            ] {
                assert_eq!(p.get(key), Some(count_entries(&files, &dir, sub)), "{name} {dir} {key}");
                assert!(dirs.contains(&format!("{dir}/{sub}")));
            }
            // libhsakmt keeps at most node_count - 1 links per node.
            let links = p.get("io_links_count").unwrap() + p.get("p2p_links_count").unwrap();
            assert!(links <= u64::from(t.node_count() - 1), "{name} {dir}");
        }
    }
}

#[test]
fn caches_satisfy_rocr() {
    for p in Profile::all() {
        let t = Topology::with_host(p, 1, host()).unwrap();
        let usable = |node: &Node, need: u32| {
            node.caches
                .iter()
                .filter(|c| c.cache_type & need == need && c.cache_type & CACHE_TYPE_INSTRUCTION == 0)
                .count()
        };
        assert!(usable(&t.nodes()[0], CACHE_TYPE_CPU) >= 1, "{}", p.name);
        let gpu = &t.nodes()[1];
        assert!(usable(gpu, CACHE_TYPE_DATA | CACHE_TYPE_HSACU) >= 1, "{}", p.name);
        assert!(gpu.caches.iter().any(|c| c.level == 1 && c.cache_type == 9));
        assert!(gpu.caches.iter().any(|c| c.level == 2));
        let base = gpu.props.simd_id_base;
        let slots = p.array_count * p.cu_per_simd_array;
        for c in &gpu.caches {
            assert!(c.processor_id_low >= base && c.processor_id_low < base + slots);
            assert!(c.sibling_map[0], "siblings start at processor_id_low");
            assert_eq!(c.sibling_map.len() % 32, 0);
        }
        // One TCP L1 per active CU.
        let tcp =
            gpu.caches.iter().filter(|c| c.level == 1 && c.size == 16 && c.cache_line_size == p.caches[0].line_size);
        assert!(tcp.count() >= p.cu_count as usize);
    }
    // Per kfd's walk: 104 TCP + 56 + 56 SQC + L2; 72 TCP + 40 + 40 SQC + 8 GL1 + L2 + L3.
    assert_eq!(topo("gfx90a", 1).nodes()[1].caches.len(), 217);
    assert_eq!(topo("gfx1030", 1).nodes()[1].caches.len(), 162);
}

#[test]
fn links_connect_every_gpu() {
    let t = topo("gfx90a", 3);
    let cpu = &t.nodes()[0];
    let to: Vec<u32> = cpu.io_links.iter().map(|l| l.node_to).collect();
    assert_eq!(to, [1, 2, 3]);
    assert!(cpu.io_links.iter().all(|l| l.node_from == 0 && l.link_type == IOLINK_TYPE_PCIEXPRESS));
    for gpu in &t.nodes()[1..] {
        assert_eq!(gpu.io_links.len(), 1);
        assert_eq!((gpu.io_links[0].node_from, gpu.io_links[0].node_to), (gpu.node_id, 0));
        let peers: Vec<u32> = gpu.p2p_links.iter().map(|l| l.node_to).collect();
        let expected: Vec<u32> = (1..=3).filter(|&n| n != gpu.node_id).collect();
        assert_eq!(peers, expected);
        assert!(gpu.p2p_links.iter().all(|l| l.node_from == gpu.node_id && l.weight == 40));
    }
}

#[test]
fn parser_rejects_malformed_text() {
    let ok = parse_properties("a 1\nb 18446744073709551615\nsibling_map 1,0\n").unwrap();
    assert_eq!(ok.get("b"), Some(u64::MAX));
    assert_eq!(ok.sibling_map, [1, 0]);
    for bad in ["a\n", "a x\n", "a -1\n", " 1\n", "sibling_map 1,2\n", "sibling_map 1\na 1\n"] {
        assert!(parse_properties(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn the_lenient_reading_is_libhsakmts() {
    let text = "a 1\nb  22x\nc 3\nd\ne 5\n";
    assert!(parse_properties(text).is_err());
    let p = parse_properties_leniently(text);
    assert_eq!(p.values, [("a".to_owned(), 1), ("b".to_owned(), 22), ("c".to_owned(), 3)]);
    assert_eq!(parse_properties_leniently("sibling_map 1,0,2x,y,1\nz 1\n").sibling_map, [1, 0, 2]);
    assert_eq!(p.u32("a"), 1);
    assert_eq!(parse_properties_leniently("big 4294967297\n").u32("big"), 1);
    assert_eq!(p.u64("missing"), 0);
}

#[test]
fn write_tree_round_trips_and_replaces() {
    let dir = std::env::temp_dir().join(format!("cuse-kfd-topology-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    topo("gfx90a", 4).write_tree(&dir).unwrap();
    let t = topo("gfx1030", 1);
    t.write_tree(&dir).unwrap();
    for (path, text) in t.files() {
        assert_eq!(std::fs::read_to_string(dir.join(&path)).unwrap(), text, "{path}");
    }
    let nodes = std::fs::read_dir(dir.join("topology/nodes")).unwrap().count();
    assert_eq!(nodes, 2, "stale nodes from the larger tree remain");
    assert!(dir.join("topology/nodes/0/p2p_links").is_dir());
    std::fs::remove_dir_all(&dir).unwrap();
}
