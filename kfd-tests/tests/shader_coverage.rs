//! The shader core's coverage table: every opcode Debian's clang-15 emits for the project's
//! corpus (the HIP programs of kfd-tests/hip as hipcc builds them, and the shader crate's OpenCL
//! kernels at -O0, -O2 and -O3), decoded by the core, against what the core implements.
//!
//! The opcodes the corpus uses and the core lacks are listed in `shader_coverage.missing`; the
//! test fails when that list is not exactly right (an opcode lost, or one gained without the
//! list saying so). `KFD_UPDATE_COVERAGE=1 cargo test -p kfd-tests --test shader_coverage`
//! rewrites it. hipcc and clang-15/llvm-15 are needed (`cargo xtask test` installs them).

use kfd_tests::hip_corpus;
use shader::isa::{decode, Encoding, Op, Target};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The encodings a coverage line is printed for, in the manual's order.
const ENCODINGS: [Encoding; 16] = [
    Encoding::Sop1,
    Encoding::Sop2,
    Encoding::Sopk,
    Encoding::Sopc,
    Encoding::Sopp,
    Encoding::Smem,
    Encoding::Vop1,
    Encoding::Vop2,
    Encoding::Vopc,
    Encoding::Vop3,
    Encoding::Vop3p,
    Encoding::Ds,
    Encoding::Flat,
    Encoding::Global,
    Encoding::Scratch,
    Encoding::Mubuf,
];

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("kfd-shader-coverage-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The `.text` bytes of an AMDGPU ELF.
fn text(obj: &Path, dir: &Path) -> Vec<u8> {
    let out = dir.join(format!("{}.text", obj.file_name().unwrap().to_string_lossy()));
    run(Command::new("llvm-objcopy-15").args(["-O", "binary", "--only-section=.text"]).arg(obj).arg(&out));
    std::fs::read(out).unwrap()
}

/// Where each opcode is used: (encoding, op) -> (instructions, sources that use it).
type Uses = BTreeMap<(u8, Op), (usize, BTreeSet<String>)>;

/// Decodes every instruction of `code` into `uses`, under the name `source`.
fn tally(target: Target, code: &[u8], source: &str, uses: &mut Uses) {
    let mut at = 0;
    while at < code.len() {
        let inst = decode(target, code, at).unwrap_or_else(|e| panic!("{source}: byte {at}: {e}"));
        let key = (ENCODINGS.iter().position(|e| *e == inst.encoding).unwrap_or(99) as u8, inst.op);
        let e = uses.entry(key).or_default();
        e.0 += 1;
        e.1.insert(source.to_string());
        at += usize::from(inst.size);
    }
}

/// The OpenCL kernels of the decoder's differential test, at three optimisation levels.
fn opencl_objects(mcpu: &str, dir: &Path) -> Vec<(String, PathBuf)> {
    let cl = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shader/tests/corpus/kernels.cl");
    ["-O0", "-O2", "-O3"]
        .iter()
        .map(|opt| {
            let obj = dir.join(format!("kernels{opt}-{mcpu}.o"));
            run(Command::new("clang-15")
                .args(["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-x", "cl", "-cl-std=CL2.0", opt, "-c"])
                .arg(format!("-mcpu={mcpu}"))
                .arg(&cl)
                .arg("-o")
                .arg(&obj));
            (format!("kernels.cl{opt}"), obj)
        })
        .collect()
}

#[test]
fn coverage_table_of_the_corpus() {
    let built = hip_corpus::build_all(&hip_corpus::out_dir(), 2).unwrap_or_else(|e| panic!("HIP corpus: {e}"));
    let dir = scratch();
    let mut missing_now = Vec::new();
    for (target, mcpu) in [(Target::Gfx90a, "gfx90a"), (Target::Gfx1030, "gfx1030")] {
        let mut uses = Uses::new();
        for b in built.iter().filter(|b| b.target == mcpu) {
            tally(target, &text(&b.code_object, &dir), &b.name, &mut uses);
        }
        for (name, obj) in opencl_objects(mcpu, &dir) {
            tally(target, &text(&obj, &dir), &name, &mut uses);
        }
        // Every operation of the target, for the "implemented" column.
        let mut all: BTreeMap<u8, BTreeSet<Op>> = BTreeMap::new();
        for (i, enc) in ENCODINGS.iter().enumerate() {
            for info in target.table(*enc).unwrap_or(&[]).iter().flatten() {
                all.entry(i as u8).or_default().insert(info.op);
            }
        }
        println!(
            "COVERAGE {mcpu}: encoding, opcodes the corpus emits (implemented), opcodes of the target (implemented)"
        );
        let (mut emitted, mut emitted_done, mut total, mut total_done) = (0, 0, 0, 0);
        for (i, enc) in ENCODINGS.iter().enumerate() {
            let used: Vec<Op> = uses.keys().filter(|(e, _)| *e == i as u8).map(|(_, op)| *op).collect();
            let used_done = used.iter().filter(|op| shader::exec::implemented(**op)).count();
            let ops = all.get(&(i as u8)).cloned().unwrap_or_default();
            let ops_done = ops.iter().filter(|op| shader::exec::implemented(**op)).count();
            println!(
                "  {:<8} emitted {:>4} ({:>4} implemented)   all {:>4} ({:>4} implemented)",
                enc.name(),
                used.len(),
                used_done,
                ops.len(),
                ops_done
            );
            emitted += used.len();
            emitted_done += used_done;
            total += ops.len();
            total_done += ops_done;
        }
        println!("  {:<8} emitted {emitted:>4} ({emitted_done:>4} implemented)   all {total:>4} ({total_done:>4} implemented)", "total");
        println!("MISSING {mcpu}: opcodes the corpus emits that the core lacks (instructions, sources)");
        let mut rows: Vec<_> = uses.iter().filter(|((_, op), _)| !shader::exec::implemented(*op)).collect();
        rows.sort_by_key(|(_, (n, _))| std::cmp::Reverse(*n));
        for ((e, op), (n, sources)) in rows {
            let enc = ENCODINGS.get(usize::from(*e)).map_or("?", |e| e.name());
            let list: Vec<&str> = sources.iter().map(String::as_str).collect();
            println!("  {:<32} {enc:<7} {n:>6}  {}", op.mnemonic(), list.join(" "));
            missing_now.push(format!("{mcpu} {}", op.mnemonic()));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    missing_now.sort();
    missing_now.dedup();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shader_coverage.missing");
    let text: String = missing_now.iter().map(|l| format!("{l}\n")).collect();
    if std::env::var_os("KFD_UPDATE_COVERAGE").is_some() {
        std::fs::write(&file, &text).unwrap();
        return;
    }
    let listed = std::fs::read_to_string(&file).unwrap_or_default();
    let listed: BTreeSet<&str> = listed.lines().filter(|l| !l.trim().is_empty()).collect();
    let now: BTreeSet<&str> = missing_now.iter().map(String::as_str).collect();
    let gained: Vec<_> = listed.difference(&now).collect();
    let lost: Vec<_> = now.difference(&listed).collect();
    assert!(
        gained.is_empty() && lost.is_empty(),
        "{} is out of date: now implemented {gained:?}; missing and not listed {lost:?}. \
         Rewrite it with KFD_UPDATE_COVERAGE=1 cargo test -p kfd-tests --test shader_coverage",
        file.display()
    );
}
