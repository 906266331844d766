//! The HIP corpus (kfd-tests/hip, built by `kfd_tests::hip_corpus` into target/hip-corpus): every
//! program compiles with Debian's hipcc for gfx90a and gfx1030 and yields an AMDGPU code object
//! for its target; and what a HIP program does on the embedded device today, with the real ROCr.
//!
//! hipcc, libamdhip64-dev and rocm-device-libs are needed (`cargo xtask test` installs them).

use kfd_tests::hip_corpus::{self, Built, TARGETS};
use kfd_tests::program::run_bounded;
use std::path::Path;
use std::time::{Duration, Instant};

/// What every program must cover, by file name.
const PROGRAMS: [&str; 13] = [
    "grid3d",
    "histogram",
    "int64_f64",
    "managed",
    "math",
    "matmul",
    "memset_d2d",
    "printf",
    "reduce_O0",
    "saxpy",
    "streams",
    "vadd",
    "warp",
];

/// hipcc processes at once: the machine's cores, at most four (each needs a few hundred MiB).
fn jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

fn build_all() -> Vec<Built> {
    hip_corpus::build_all(&hip_corpus::out_dir(), jobs()).unwrap_or_else(|e| panic!("building the HIP corpus: {e}"))
}

/// hipcc leaves empty `<name>-XXXXXX` directories in its TMPDIR on every build; a build gives
/// it one of its own and removes it, so the machine's temporary directory keeps none.
#[test]
fn a_build_leaves_nothing_in_the_temporary_directory() {
    let leftovers = |name: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|f| f.strip_prefix(name).and_then(|r| r.strip_prefix('-')).is_some_and(|r| r.len() == 6))
            .collect();
        v.sort();
        v
    };
    let p = hip_corpus::programs().unwrap().into_iter().find(|p| p.name == "vadd").unwrap();
    // A fresh output directory, so that the program is compiled.
    let out = hip_corpus::out_dir().join(format!("fresh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let before = leftovers("vadd");
    let b = hip_corpus::build(&p, "gfx90a", &out).unwrap_or_else(|e| panic!("{e}"));
    assert!(b.compiled && b.exe.is_file());
    assert_eq!(leftovers("vadd"), before, "directories hipcc left in {}", std::env::temp_dir().display());
    let left: Vec<_> = std::fs::read_dir(out.join("gfx90a")).unwrap().flatten().map(|e| e.file_name()).collect();
    std::fs::remove_dir_all(&out).unwrap();
    assert!(!left.iter().any(|f| f.to_string_lossy().ends_with(".tmp")), "hipcc's own TMPDIR removed: {left:?}");
}

#[test]
fn every_program_builds_for_both_targets_with_its_code_object() {
    let t0 = Instant::now();
    let built = build_all();
    let took = t0.elapsed();
    let names: Vec<String> = hip_corpus::programs().unwrap().into_iter().map(|p| p.name).collect();
    assert_eq!(names, PROGRAMS, "kfd-tests/hip holds exactly the programs listed here");
    assert_eq!(built.len(), PROGRAMS.len() * TARGETS.len());
    for b in &built {
        assert!(b.exe.is_file(), "{}", b.exe.display());
        hip_corpus::check_code_object(&b.code_object, b.target).unwrap();
        let source = std::fs::read_to_string(hip_corpus::source_dir().join(format!("{}.hip", b.name))).unwrap();
        assert!(source.contains(&format!("verdict(\"{}\")", b.name)), "{} prints PASS under its own name", b.name);
        println!(
            "{:<12} {:<8} {:>6.1} s {}",
            b.name,
            b.target,
            b.took.as_secs_f64(),
            if b.compiled { "compiled" } else { "cached" }
        );
    }
    let compiled = built.iter().filter(|b| b.compiled).count();
    println!(
        "BUILD hip-corpus: {} builds ({compiled} compiled, {} cached) in {:.1} s with {} jobs",
        built.len(),
        built.len() - compiled,
        took.as_secs_f64(),
        jobs()
    );
}

#[test]
fn the_o0_program_is_built_without_optimisation() {
    let p = hip_corpus::programs().unwrap().into_iter().find(|p| p.name == "reduce_O0").unwrap();
    assert_eq!(p.flags, ["-O0"]);
    let vadd = hip_corpus::programs().unwrap().into_iter().find(|p| p.name == "vadd").unwrap();
    assert_eq!(vadd.flags, ["-O2"]);
}

/// Programs known to pass on the shader core (all of them, since the VALU float family landed):
/// a regression if one stops passing.
const PASSING: [&str; 13] = PROGRAMS;

/// The same for gfx1030.
const PASSING_GFX1030: [&str; 13] = PROGRAMS;

/// Whether a HIP program passes on the embedded device (default profile gfx90a), with the real
/// ROCr: HIP's first hipMemcpy loads HIP's blit code object, and freezing it copies the code into
/// VRAM with ROCr's own blit kernel (ROCR-Runtime rocm-5.2.3 amd_loader_context.cpp RegionMemory::Freeze
/// -> GpuAgent::DmaCopy -> the BlitDevToDev kernel CopyAligned, a legacy amd_kernel_code_t with
/// the code at offset 256) on its utility queue; then come HIP's and the program's kernels. The
/// shader core runs them: the program passes, or stops at the first instruction the core lacks,
/// which the queue error names (with its kernel object) and ROCr's callback reports as
/// HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION; never a hang, another fault or a wrong result.
fn run_on_the_shader_core(name: &str) -> bool {
    run_on_the_shader_core_of(name, "gfx90a")
}

/// [`run_on_the_shader_core`] with the program built for `target` on a device of that profile.
fn run_on_the_shader_core_of(name: &str, target: &'static str) -> bool {
    run_at_level(name, target, None, Duration::from_secs(300))
}

/// [`run_on_the_shader_core_of`] with the program built at `level` (one of
/// [`hip_corpus::LEVELS`]) instead of its own level.
fn run_at_level(name: &str, target: &'static str, level: Option<&str>, limit: Duration) -> bool {
    let p = hip_corpus::programs().unwrap().into_iter().find(|p| p.name == name).unwrap();
    let out = hip_corpus::out_dir();
    let (p, out) = match level {
        Some(l) => (hip_corpus::at_level(&p, l), hip_corpus::level_dir(&p, l, &out)),
        None => (p, out),
    };
    let b = hip_corpus::build(&p, target, &out).unwrap_or_else(|e| panic!("{e}"));
    let shown = format!("{name}{}", level.unwrap_or(""));
    let name = shown.as_str();
    let mut cmd = kfd_tests::launcher::cargo_run();
    cmd.args(["--embedded", "--profile", target, "--"]).arg(&b.exe).env("RUST_LOG", "warn").env_remove("HSAKMT_LOG");
    let t0 = Instant::now();
    let (ok, text) = run_bounded(cmd, Path::new(&b.exe), limit, String::new);
    let took = t0.elapsed().as_secs_f64();
    assert!(!text.contains("killed after"), "{name} hung:\n{text}");
    if ok {
        assert!(text.contains(&format!("PASS {}", p.name)), "{text}");
        println!("{name:<12} {target:<8} {took:>6.1} s PASS");
        return true;
    }
    assert!(!text.contains(&format!("PASS {}", p.name)), "{text}");
    let stop = text
        .lines()
        .find(|l| l.contains("WARN") && l.contains("queue error 1073741824: kernel object at 0x"))
        .unwrap_or_else(|| panic!("{name} failed, but not at an instruction the shader core lacks:\n{text}"));
    assert!(stop.contains("is not implemented by the shader core"), "{stop}");
    assert!(text.contains("HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION"), "ROCr's callback did not report it:\n{text}");
    let what = stop.split(": `").nth(1).map_or(stop, |s| s.split(" at pc").next().unwrap_or(s));
    println!("{name:<12} {target:<8} {took:>6.1} s stops at `{what}");
    false
}

/// With HSA_XNACK=1 ROCr turns XNACK on (SET_XNACK_MODE) and HIP's managed memory is an SVM
/// range the device maps for the kernel (AMDKFD_IOC_SVM). Plain malloc'd memory (map-on-fault) is
/// the node's test (hip_node): the embedded device refuses to fault in its own process's memory
/// at any address a kernel names.
#[test]
fn managed_memory_with_xnack_on_is_an_svm_range() {
    let p = hip_corpus::programs().unwrap().into_iter().find(|p| p.name == "managed").unwrap();
    let b = hip_corpus::build(&p, "gfx90a", &hip_corpus::out_dir()).unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = kfd_tests::launcher::cargo_run();
    cmd.args(["--embedded", "--"]).arg(&b.exe).env("HSA_XNACK", "1").env_remove("HSAKMT_LOG");
    cmd.env("RUST_LOG", "cuse_kfd::ioctl=debug");
    let (ok, text) = run_bounded(cmd, Path::new(&b.exe), Duration::from_secs(300), String::new);
    assert!(ok && text.contains("PASS managed"), "{text}");
    assert!(text.contains("xnack+") && text.contains("pageable memory access 1"), "XNACK is not on:\n{text}");
    let ok_calls = |name: &str| text.lines().filter(|l| l.contains(&format!(": {name} -> None"))).count();
    assert!(ok_calls("SET_XNACK_MODE") >= 1, "ROCr did not turn XNACK on:\n{text}");
    assert!(ok_calls("SVM") >= 1, "managed memory made no SVM range:\n{text}");
}

#[test]
fn vadd_passes_on_the_shader_core() {
    assert!(run_on_the_shader_core("vadd"), "vadd stopped at an instruction the shader core lacks");
}

#[test]
fn every_program_passes_on_the_shader_core() {
    let mut passed = Vec::new();
    for name in PROGRAMS {
        if run_on_the_shader_core(name) {
            passed.push(name);
        }
    }
    println!("SHADER hip-corpus gfx90a: {} of {} programs pass: {passed:?}", passed.len(), PROGRAMS.len());
    for p in PASSING {
        assert!(passed.contains(&p), "{p} passed before and no longer does");
    }
}

/// The same on a gfx1030 device: HIP builds gfx1030 code for wave32, ROCr's blits are wave64.
#[test]
fn every_program_passes_on_the_shader_core_as_gfx1030() {
    let mut passed = Vec::new();
    for name in PROGRAMS {
        if run_on_the_shader_core_of(name, "gfx1030") {
            passed.push(name);
        }
    }
    println!("SHADER hip-corpus gfx1030: {} of {} programs pass: {passed:?}", passed.len(), PROGRAMS.len());
    for p in PASSING_GFX1030 {
        assert!(passed.contains(&p), "{p} passed before and no longer does");
    }
}

/// A build is reused while its source, the shared header, its flags and hipcc stay the same,
/// and redone when the source changes.
#[test]
fn a_build_is_cached_until_its_source_changes() {
    let dir = hip_corpus::out_dir().join("cache-test");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("twice.hip");
    let text = |k: u32| {
        format!(
            "#include <hip/hip_runtime.h>\n__global__ void twice(int *p) {{ p[threadIdx.x] *= {k}; }}\n\
             int main() {{ return 0; }}\n"
        )
    };
    std::fs::write(&source, text(2)).unwrap();
    let p = hip_corpus::Program { name: "twice".into(), source: source.clone(), flags: vec!["-O2".into()] };
    let out = dir.join("out");
    let first = hip_corpus::build(&p, "gfx90a", &out).unwrap_or_else(|e| panic!("{e}"));
    assert!(first.compiled, "the first build compiles");
    let again = hip_corpus::build(&p, "gfx90a", &out).unwrap();
    assert!(!again.compiled, "an unchanged source is not compiled again");
    std::fs::write(&source, text(3)).unwrap();
    let changed = hip_corpus::build(&p, "gfx90a", &out).unwrap();
    assert!(changed.compiled, "a changed source is compiled again");
    let o1 = hip_corpus::Program { flags: vec!["-O1".into()], ..p };
    assert!(hip_corpus::build(&o1, "gfx90a", &out).unwrap().compiled, "other flags are another build");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every program built at -O0 (calls, 16 KiB of stack per lane through MUBUF scratch, SGPR
/// spills through lanes: what the coverage table's -O0 column holds) passes on a gfx90a device.
/// Too slow for a debug build (about 12 minutes on a loaded 2-core machine: matmul 2, histogram
/// with its CAS loops 4); about 2 minutes in release:
/// `cargo test --release -p kfd-tests --test hip_corpus -- at_o0`, or `--ignored` in debug.
#[test]
#[cfg_attr(debug_assertions, ignore = "-O0 code on the debug shader core takes over ten minutes")]
fn every_program_at_o0_passes_on_the_shader_core() {
    let mut passed = Vec::new();
    for name in PROGRAMS {
        if run_at_level(name, "gfx90a", Some("-O0"), Duration::from_secs(1800)) {
            passed.push(name);
        }
    }
    println!("SHADER hip-corpus gfx90a -O0: {} of {} programs pass: {passed:?}", passed.len(), PROGRAMS.len());
    assert_eq!(passed, PROGRAMS, "every program passes at -O0");
}
