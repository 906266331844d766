//! C programs written against Debian's hsa.h / hsa_ext_amd.h and the shim's header, linked
//! with -lhsa-runtime64 and run on the shim over the embedded device (CUSE_KFD_EMBEDDED=1).
//!
//! The cdylib is not a product of `cargo test`, so the first test builds it in the same profile
//! and stages it as `libhsa-runtime64.so.1` (plus the `libhsa-runtime64.so` link name) in
//! `target/<profile>/lib-shim/` (`cuse_kfd_run::stage`), the directory the programs get through
//! -L and LD_LIBRARY_PATH.

use cuse_kfd_run::stage;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

struct Staged {
    lib_dir: PathBuf,
    out_dir: PathBuf,
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn stage() -> &'static Staged {
    static STAGED: OnceLock<Staged> = OnceLock::new();
    STAGED.get_or_init(|| {
        let profile = stage::profile_dir().expect("target/<profile>");
        let lib_dir =
            stage::build_and_stage(&profile, &[&stage::HSA_RUNTIME_SHIM]).unwrap_or_else(|e| panic!("{e}")).remove(0);
        let out_dir = profile.join("rocr-shim-c-tests");
        std::fs::create_dir_all(&out_dir).expect("out dir");
        Staged { lib_dir, out_dir }
    })
}

/// Compiles tests/c/<name>.c against the system's HSA headers and the shim's header.
fn compile(name: &str) -> PathBuf {
    let s = stage();
    let src = crate_dir().join("tests/c").join(format!("{name}.c"));
    // Per process: a concurrent `cargo test` must not overwrite a program another one runs.
    let exe = s.out_dir.join(format!("{name}.{}", std::process::id()));
    let out = Command::new("cc")
        .args(["-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-I")
        .arg(crate_dir().join("tests/c"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&s.lib_dir)
        .args(["-lhsa-runtime64", "-lpthread"])
        .output()
        .expect("running cc");
    assert!(out.status.success(), "cc {name}.c failed:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// Runs a compiled program on the embedded device; it must exit 0 and print "PASS <name>".
fn run(name: &str, env: &[(&str, &str)]) {
    let exe = compile(name);
    let s = stage();
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", &s.lib_dir)
        .env("CUSE_KFD_EMBEDDED", "1")
        .env_remove("CUSE_KFD_SHIM_PCIE_STORES_NEED_FLUSH")
        .env_remove("CUSE_KFD_SHIM_DEVICE_SIGNALS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawning the test program");
    // Read while it runs: a program that writes more than a pipe holds must not block on it.
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out_reader = drain(child.stdout.take().map(|r| Box::new(r) as Box<dyn std::io::Read + Send>));
    let err_reader = drain(child.stderr.take().map(|r| Box::new(r) as Box<dyn std::io::Read + Send>));
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting") {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = String::from_utf8_lossy(&out_reader.join().expect("stdout reader")).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().expect("stderr reader")).into_owned();
    let Some(status) = status else { panic!("{name} timed out\nstdout:\n{stdout}\nstderr:\n{stderr}") };
    assert!(status.success(), "{name} failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains(&format!("PASS {name}")), "{name} did not pass\nstdout:\n{stdout}\nstderr:\n{stderr}");
    print!("{stdout}");
    let _ = std::fs::remove_file(&exe);
}

/// Runs readelf (binutils) with `args` on the staged library; its output.
fn readelf(args: &[&str]) -> String {
    let lib = stage().lib_dir.join("libhsa-runtime64.so.1");
    let out = match Command::new("readelf").args(args).arg(&lib).output() {
        Ok(out) => out,
        Err(e) => panic!("running readelf: {e}; this test needs it: install the package binutils"),
    };
    assert!(out.status.success(), "readelf {args:?} {}: {}", lib.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The functions the library defines and exports (readelf --dyn-syms: defined GLOBAL/WEAK
/// symbols; `Num: Value Size Type Bind Vis Ndx Name`).
fn exported_functions() -> Vec<String> {
    let text = readelf(&["--dyn-syms", "-W"]);
    let mut names = Vec::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let [_, _, _, kind, bind, _, ndx, name, ..] = cols[..] else { continue };
        if ndx == "UND" || !matches!(bind, "GLOBAL" | "WEAK") || !matches!(kind, "FUNC" | "OBJECT") {
            continue;
        }
        names.push(name.split('@').next().unwrap_or(name).to_string());
    }
    names.sort();
    names.dedup();
    names
}

/// Compiles a C file that includes `headers` and takes the address of each of `names` as a
/// function; returns the names the compiler says are undeclared. Any other compiler error
/// fails the test.
fn undeclared(headers: &[&str], names: &[&String]) -> Vec<String> {
    let mut src: String = headers.iter().map(|h| format!("#include {h}\n")).collect();
    for n in names {
        src.push_str(&format!("void (*const ref_{n})(void) = (void (*)(void)){n};\n"));
    }
    let dir = stage().out_dir.join(format!("exports.{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("exports dir");
    let c = dir.join(format!("decl{}.c", headers.len()));
    std::fs::write(&c, src).expect("exports C file");
    let out = Command::new("cc")
        .args(["-std=gnu11", "-fsyntax-only", "-fmax-errors=0", "-I"])
        .arg(crate_dir().join("include"))
        .arg(&c)
        .output()
        .expect("running cc");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let missing: Vec<String> = stderr
        .lines()
        .filter(|l| l.contains("undeclared"))
        .filter_map(|l| l.split(['\'', '\u{2018}', '\u{2019}']).nth(1))
        .map(str::to_string)
        .collect();
    let other = stderr.lines().filter(|l| l.contains("error") && !l.contains("undeclared")).count();
    assert!(other == 0 && (out.status.success() || !missing.is_empty()), "cc {}:\n{stderr}", c.display());
    let _ = std::fs::remove_dir_all(&dir);
    missing
}

/// The library answers to libhsa-runtime64.so.1 and exports exactly what the headers declare:
/// every hsa_* function is declared by Debian's hsa.h / hsa_ext_amd.h or, for the shim's
/// documented extensions (the batch signal API), by include/cuse_kfd_shim.h, and every
/// cuse_kfd_shim_* function by include/cuse_kfd_shim.h; nothing else is exported.
#[test]
fn soname_and_exports() {
    let dynamic = readelf(&["-d"]);
    assert!(dynamic.contains("Library soname: [libhsa-runtime64.so.1]"), "{dynamic}");

    let exports = exported_functions();
    assert!(exports.iter().any(|n| n == "hsa_init"), "readelf lists no hsa_init export:\n{exports:?}");
    let stray: Vec<&String> =
        exports.iter().filter(|n| !n.starts_with("hsa_") && !n.starts_with("cuse_kfd_shim_")).collect();
    assert!(stray.is_empty(), "exports outside hsa_* and cuse_kfd_shim_*: {stray:?}");

    let hsa: Vec<&String> = exports.iter().filter(|n| n.starts_with("hsa_")).collect();
    let extensions = undeclared(&["<hsa/hsa.h>", "<hsa/hsa_ext_amd.h>"], &hsa);
    let ours: Vec<&String> =
        exports.iter().filter(|n| n.starts_with("cuse_kfd_shim_") || extensions.contains(n)).collect();
    let undocumented = undeclared(&["\"cuse_kfd_shim.h\""], &ours);
    assert!(
        undocumented.is_empty(),
        "exported but declared neither by Debian's hsa.h / hsa_ext_amd.h nor by include/cuse_kfd_shim.h: {undocumented:?}"
    );
    // The header's documented extensions, which Debian's headers lack.
    assert_eq!(extensions, ["hsa_amd_signal_batch_create", "hsa_amd_signal_batch_destroy"]);
}

#[test]
fn c_info() {
    run("info", &[]);
}

#[test]
fn c_queue() {
    run("queue", &[]);
}

#[test]
fn c_signals() {
    run("signals", &[]);
}

#[test]
fn c_threads() {
    run("threads", &[]);
}

#[test]
fn c_batch() {
    run("batch", &[]);
}

#[test]
fn c_copy() {
    run("copy", &[]);
}

/// Every number of src/hsa.rs and every status of src/status.rs, and the layouts the shim's
/// header shares with the library, against what the C headers say: the test writes a C
/// program printing each, compiles it against hsa.h, hsa_ext_amd.h and cuse_kfd_shim.h, and
/// compares.
#[test]
fn abi_numbers_match_headers() {
    use rocr_shim::hsa::*;
    use rocr_shim::Status;
    macro_rules! names {
        ($($n:ident),* $(,)?) => { vec![$((stringify!($n), $n as u64)),*] };
    }
    let mut expect: Vec<(String, u64)> = names!(
        HSA_SYSTEM_INFO_VERSION_MAJOR,
        HSA_SYSTEM_INFO_VERSION_MINOR,
        HSA_SYSTEM_INFO_TIMESTAMP,
        HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY,
        HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT,
        HSA_SYSTEM_INFO_ENDIANNESS,
        HSA_SYSTEM_INFO_MACHINE_MODEL,
        HSA_SYSTEM_INFO_EXTENSIONS,
        HSA_ENDIANNESS_LITTLE,
        HSA_MACHINE_MODEL_LARGE,
        HSA_PROFILE_BASE,
        HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR,
        HSA_AGENT_INFO_NAME,
        HSA_AGENT_INFO_VENDOR_NAME,
        HSA_AGENT_INFO_FEATURE,
        HSA_AGENT_INFO_MACHINE_MODEL,
        HSA_AGENT_INFO_PROFILE,
        HSA_AGENT_INFO_DEFAULT_FLOAT_ROUNDING_MODE,
        HSA_AGENT_INFO_WAVEFRONT_SIZE,
        HSA_AGENT_INFO_WORKGROUP_MAX_DIM,
        HSA_AGENT_INFO_WORKGROUP_MAX_SIZE,
        HSA_AGENT_INFO_GRID_MAX_DIM,
        HSA_AGENT_INFO_GRID_MAX_SIZE,
        HSA_AGENT_INFO_FBARRIER_MAX_SIZE,
        HSA_AGENT_INFO_QUEUES_MAX,
        HSA_AGENT_INFO_QUEUE_MIN_SIZE,
        HSA_AGENT_INFO_QUEUE_MAX_SIZE,
        HSA_AGENT_INFO_QUEUE_TYPE,
        HSA_AGENT_INFO_NODE,
        HSA_AGENT_INFO_DEVICE,
        HSA_AGENT_INFO_CACHE_SIZE,
        HSA_AGENT_INFO_ISA,
        HSA_AGENT_INFO_EXTENSIONS,
        HSA_AGENT_INFO_VERSION_MAJOR,
        HSA_AGENT_INFO_VERSION_MINOR,
        HSA_AGENT_INFO_BASE_PROFILE_DEFAULT_FLOAT_ROUNDING_MODES,
        HSA_AGENT_INFO_FAST_F16_OPERATION,
        HSA_DEVICE_TYPE_CPU,
        HSA_DEVICE_TYPE_GPU,
        HSA_AGENT_FEATURE_KERNEL_DISPATCH,
        HSA_AGENT_FEATURE_AGENT_DISPATCH,
        HSA_AMD_AGENT_INFO_CHIP_ID,
        HSA_AMD_AGENT_INFO_CACHELINE_SIZE,
        HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT,
        HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY,
        HSA_AMD_AGENT_INFO_DRIVER_NODE_ID,
        HSA_AMD_AGENT_INFO_MAX_ADDRESS_WATCH_POINTS,
        HSA_AMD_AGENT_INFO_BDFID,
        HSA_AMD_AGENT_INFO_MEMORY_WIDTH,
        HSA_AMD_AGENT_INFO_MEMORY_MAX_FREQUENCY,
        HSA_AMD_AGENT_INFO_PRODUCT_NAME,
        HSA_AMD_AGENT_INFO_MAX_WAVES_PER_CU,
        HSA_AMD_AGENT_INFO_NUM_SIMDS_PER_CU,
        HSA_AMD_AGENT_INFO_NUM_SHADER_ENGINES,
        HSA_AMD_AGENT_INFO_NUM_SHADER_ARRAYS_PER_SE,
        HSA_AMD_AGENT_INFO_HDP_FLUSH,
        HSA_AMD_AGENT_INFO_DOMAIN,
        HSA_AMD_AGENT_INFO_COOPERATIVE_QUEUES,
        HSA_AMD_AGENT_INFO_UUID,
        HSA_AMD_AGENT_INFO_ASIC_REVISION,
        HSA_AMD_AGENT_INFO_SVM_DIRECT_HOST_ACCESS,
        HSA_AMD_AGENT_INFO_COOPERATIVE_COMPUTE_UNIT_COUNT,
        HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH,
        HSA_REGION_INFO_SEGMENT,
        HSA_REGION_INFO_GLOBAL_FLAGS,
        HSA_REGION_INFO_SIZE,
        HSA_REGION_INFO_ALLOC_MAX_SIZE,
        HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED,
        HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE,
        HSA_REGION_INFO_RUNTIME_ALLOC_ALIGNMENT,
        HSA_REGION_INFO_ALLOC_MAX_PRIVATE_WORKGROUP_SIZE,
        HSA_AMD_REGION_INFO_HOST_ACCESSIBLE,
        HSA_AMD_REGION_INFO_BASE,
        HSA_REGION_SEGMENT_GLOBAL,
        HSA_REGION_GLOBAL_FLAG_KERNARG,
        HSA_REGION_GLOBAL_FLAG_FINE_GRAINED,
        HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED,
        HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
        HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
        HSA_AMD_MEMORY_POOL_INFO_SIZE,
        HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
        HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE,
        HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT,
        HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL,
        HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE,
        HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE,
        HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT,
        HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
        HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
        HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
        HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS,
        HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED,
        HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT,
        HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT,
        HSA_AMD_SIGNAL_AMD_GPU_ONLY,
        HSA_AMD_SIGNAL_IPC,
        HSA_QUEUE_TYPE_MULTI,
        HSA_QUEUE_TYPE_SINGLE,
        HSA_QUEUE_TYPE_COOPERATIVE
    )
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect();
    let statuses = [
        ("HSA_STATUS_SUCCESS", Status::SUCCESS),
        ("HSA_STATUS_INFO_BREAK", Status::INFO_BREAK),
        ("HSA_STATUS_ERROR", Status::ERROR),
        ("HSA_STATUS_ERROR_INVALID_ARGUMENT", Status::INVALID_ARGUMENT),
        ("HSA_STATUS_ERROR_INVALID_QUEUE_CREATION", Status::INVALID_QUEUE_CREATION),
        ("HSA_STATUS_ERROR_INVALID_ALLOCATION", Status::INVALID_ALLOCATION),
        ("HSA_STATUS_ERROR_INVALID_AGENT", Status::INVALID_AGENT),
        ("HSA_STATUS_ERROR_INVALID_REGION", Status::INVALID_REGION),
        ("HSA_STATUS_ERROR_INVALID_SIGNAL", Status::INVALID_SIGNAL),
        ("HSA_STATUS_ERROR_INVALID_QUEUE", Status::INVALID_QUEUE),
        ("HSA_STATUS_ERROR_OUT_OF_RESOURCES", Status::OUT_OF_RESOURCES),
        ("HSA_STATUS_ERROR_INVALID_PACKET_FORMAT", Status::INVALID_PACKET_FORMAT),
        ("HSA_STATUS_ERROR_RESOURCE_FREE", Status::RESOURCE_FREE),
        ("HSA_STATUS_ERROR_NOT_INITIALIZED", Status::NOT_INITIALIZED),
        ("HSA_STATUS_ERROR_REFCOUNT_OVERFLOW", Status::REFCOUNT_OVERFLOW),
        ("HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS", Status::INCOMPATIBLE_ARGUMENTS),
        ("HSA_STATUS_ERROR_INVALID_INDEX", Status::INVALID_INDEX),
        ("HSA_STATUS_ERROR_INVALID_ISA", Status::INVALID_ISA),
        ("HSA_STATUS_ERROR_INVALID_CODE_OBJECT", Status::INVALID_CODE_OBJECT),
        ("HSA_STATUS_ERROR_INVALID_EXECUTABLE", Status::INVALID_EXECUTABLE),
        ("HSA_STATUS_ERROR_INVALID_ISA_NAME", Status::INVALID_ISA_NAME),
        ("HSA_STATUS_ERROR_EXCEPTION", Status::EXCEPTION),
        ("HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP", Status::INVALID_SIGNAL_GROUP),
        ("HSA_STATUS_ERROR_INVALID_RUNTIME_STATE", Status::INVALID_RUNTIME_STATE),
        ("HSA_STATUS_ERROR_FATAL", Status::FATAL),
        ("HSA_STATUS_ERROR_INVALID_MEMORY_POOL", Status::INVALID_MEMORY_POOL),
        ("HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION", Status::MEMORY_APERTURE_VIOLATION),
        ("HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION", Status::ILLEGAL_INSTRUCTION),
        ("HSA_STATUS_ERROR_MEMORY_FAULT", Status::MEMORY_FAULT),
    ];
    expect.extend(statuses.iter().map(|(n, s)| (n.to_string(), u64::from(s.0))));
    let sizes = [
        ("sizeof(cuse_kfd_shim_counters_t)", size_of::<rocr_shim::Counters>()),
        ("sizeof(cuse_kfd_shim_signal_info_t)", size_of::<rocr_shim::SignalInfo>()),
        ("sizeof(cuse_kfd_fill_args_t)", size_of::<uapi::soft::FillArgs>()),
        ("sizeof(cuse_kfd_copy_args_t)", size_of::<uapi::soft::CopyArgs>()),
        ("sizeof(cuse_kfd_atomic_add_args_t)", size_of::<uapi::soft::AtomicAddArgs>()),
        ("sizeof(cuse_kfd_flat_id_args_t)", size_of::<uapi::soft::FlatIdArgs>()),
        ("sizeof(cuse_kfd_sleep_args_t)", size_of::<uapi::soft::SleepArgs>()),
        ("sizeof(cuse_kfd_signal_store_args_t)", size_of::<uapi::soft::SignalStoreArgs>()),
        ("offsetof(cuse_kfd_shim_counters_t, arena_memory_reused)", 72),
        ("offsetof(cuse_kfd_shim_signal_info_t, batch_member)", 16),
    ];
    expect.extend(sizes.iter().map(|(n, v)| (n.to_string(), *v as u64)));
    let builtins = [
        ("CUSE_KFD_SOFT_KERNEL_NOP", uapi::soft::SOFT_KERNEL_NOP),
        ("CUSE_KFD_SOFT_KERNEL_FILL_U32", uapi::soft::SOFT_KERNEL_FILL_U32),
        ("CUSE_KFD_SOFT_KERNEL_COPY_BYTES", uapi::soft::SOFT_KERNEL_COPY_BYTES),
        ("CUSE_KFD_SOFT_KERNEL_ATOMIC_ADD_U64", uapi::soft::SOFT_KERNEL_ATOMIC_ADD_U64),
        ("CUSE_KFD_SOFT_KERNEL_WRITE_FLAT_ID", uapi::soft::SOFT_KERNEL_WRITE_FLAT_ID),
        ("CUSE_KFD_SOFT_KERNEL_SLEEP", uapi::soft::SOFT_KERNEL_SLEEP),
        ("CUSE_KFD_SOFT_KERNEL_SIGNAL_STORE", uapi::soft::SOFT_KERNEL_SIGNAL_STORE),
    ];
    expect.extend(builtins.iter().map(|(n, v)| (n.to_string(), u64::from(*v))));

    let mut src =
        String::from("#include <stddef.h>\n#include <stdio.h>\n#include \"cuse_kfd_shim.h\"\nint main(void) {\n");
    for (n, _) in &expect {
        src.push_str(&format!("  printf(\"%s %llu\\n\", \"{n}\", (unsigned long long)({n}));\n"));
    }
    src.push_str("  return 0;\n}\n");
    let dir = stage().out_dir.join(format!("abi.{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("abi dir");
    let (c, exe) = (dir.join("abi.c"), dir.join("abi"));
    std::fs::write(&c, src).expect("abi.c");
    let out =
        Command::new("cc").arg("-I").arg(crate_dir().join("include")).arg(&c).arg("-o").arg(&exe).output().expect("cc");
    assert!(out.status.success(), "cc abi.c:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(&exe).output().expect("running abi");
    let text = String::from_utf8_lossy(&out.stdout);
    let got: std::collections::HashMap<&str, u64> =
        text.lines().filter_map(|l| l.rsplit_once(' ').map(|(n, v)| (n, v.parse().expect("a number")))).collect();
    for (n, v) in &expect {
        assert_eq!(got.get(n.as_str()), Some(v), "{n}: the C headers say {:?}, the shim {v}", got.get(n.as_str()));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
