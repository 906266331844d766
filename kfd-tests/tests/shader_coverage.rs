//! The shader core's coverage table: every opcode Debian's clang-15 emits for the project's
//! corpus (the HIP programs of kfd-tests/hip and the shader crate's OpenCL kernels, each at -O0,
//! -O2 and -O3 as issue 14 asks), decoded by the core, against what the core implements, per
//! level and in all.
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
const ENCODINGS: [Encoding; 20] = Encoding::ALL;

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

/// The OpenCL kernels of the decoder's differential test at `level`.
fn opencl_object(mcpu: &str, level: &str, dir: &Path) -> (String, PathBuf) {
    let cl = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shader/tests/corpus/kernels.cl");
    let obj = dir.join(format!("kernels{level}-{mcpu}.o"));
    run(Command::new("clang-15")
        .args(["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-x", "cl", "-cl-std=CL2.0", level, "-c"])
        .arg(format!("-mcpu={mcpu}"))
        .arg(&cl)
        .arg("-o")
        .arg(&obj));
    (format!("kernels.cl{level}"), obj)
}

/// (opcodes, implemented) of `ops`.
fn counted<'a>(ops: impl Iterator<Item = &'a Op>) -> (usize, usize) {
    ops.fold((0, 0), |(n, done), op| (n + 1, done + usize::from(shader::exec::implemented(*op))))
}

#[test]
fn coverage_table_of_the_corpus() {
    // Every program at every level: the first run compiles about 50 builds (a few minutes with
    // two hipcc jobs); later runs reuse them while their sources and hipcc stay the same.
    let built = hip_corpus::build_levels(&hip_corpus::out_dir(), 2).unwrap_or_else(|e| panic!("HIP corpus: {e}"));
    let dir = scratch();
    let mut missing_now = Vec::new();
    for (target, mcpu) in [(Target::Gfx90a, "gfx90a"), (Target::Gfx1030, "gfx1030")] {
        // What each level emits, and their union.
        let mut by_level: Vec<Uses> = Vec::new();
        for level in hip_corpus::LEVELS {
            let mut uses = Uses::new();
            for (_, b) in built.iter().filter(|(l, b)| *l == level && b.target == mcpu) {
                tally(target, &text(&b.code_object, &dir), &format!("{}{level}", b.name), &mut uses);
            }
            let (name, obj) = opencl_object(mcpu, level, &dir);
            tally(target, &text(&obj, &dir), &name, &mut uses);
            by_level.push(uses);
        }
        let mut union = Uses::new();
        for uses in &by_level {
            for (key, (n, sources)) in uses {
                let e = union.entry(*key).or_default();
                e.0 += n;
                e.1.extend(sources.iter().cloned());
            }
        }
        // Every operation of the target, for the "implemented" column.
        let mut all: BTreeMap<u8, BTreeSet<Op>> = BTreeMap::new();
        for (i, enc) in ENCODINGS.iter().enumerate() {
            for info in target.table(*enc).unwrap_or(&[]).iter().flatten() {
                all.entry(i as u8).or_default().insert(info.op);
            }
        }
        println!(
            "COVERAGE {mcpu}: per encoding, the opcodes the corpus emits at each level and in all \
             (implemented/emitted), and the target's opcodes (implemented/all)"
        );
        println!("  {:<8} {:>11} {:>11} {:>11} {:>11} {:>11}", "", "-O0", "-O2", "-O3", "union", "target");
        let cell = |(n, done): (usize, usize)| format!("{done}/{n}");
        let of = |uses: &Uses, i: Option<u8>| {
            counted(uses.keys().filter(|(e, _)| i.is_none_or(|i| *e == i)).map(|(_, op)| op))
        };
        for (i, enc) in ENCODINGS.iter().enumerate() {
            let (n, i) = (i as u8, Some(i as u8));
            println!(
                "  {:<8} {:>11} {:>11} {:>11} {:>11} {:>11}",
                enc.name(),
                cell(of(&by_level[0], i)),
                cell(of(&by_level[1], i)),
                cell(of(&by_level[2], i)),
                cell(of(&union, i)),
                cell(counted(all.get(&n).into_iter().flatten()))
            );
        }
        println!(
            "  {:<8} {:>11} {:>11} {:>11} {:>11} {:>11}",
            "total",
            cell(of(&by_level[0], None)),
            cell(of(&by_level[1], None)),
            cell(of(&by_level[2], None)),
            cell(of(&union, None)),
            cell(counted(all.values().flatten()))
        );
        println!("MISSING {mcpu}: opcodes the corpus emits that the core lacks (instructions, sources)");
        let mut rows: Vec<_> = union.iter().filter(|((_, op), _)| !shader::exec::implemented(*op)).collect();
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
