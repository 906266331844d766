//! Differential test of the decoder against LLVM 15: kernels compiled at test time with Debian's
//! clang-15 (tests/corpus/kernels.cl at -O0, -O2, -O3) and a hand-written assembly file that
//! exercises every encoding and modifier kind (tests/corpus/encodings.s for gfx90a,
//! encodings_gfx1030.s for gfx1030 in wave32, encodings_gfx1030_w64.s for the wave-size
//! dependent operands in wave64; assembled with llvm-mc-15), each disassembled with
//! `llvm-objdump-15 -d --mcpu=<target>` (`--mattr=+wavefrontsize64` for wave64): every
//! instruction must decode to what objdump prints, at the same size. Random words per opcode are
//! compared with what `llvm-mc-15 --disassemble` prints, for each target.
//!
//! Without clang-15/llvm-15 (apt-get install clang-15 llvm-15) the test says so and
//! passes, except under CI (`CI` set to anything but empty, `false` or `0`), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use shader::isa::table::Field;
use shader::isa::{decode, Operand, Target};

const TOOLS: [&str; 4] = ["clang-15", "llvm-mc-15", "llvm-objdump-15", "llvm-objcopy-15"];

fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `Some(())` when every tool runs; otherwise skips (or fails under CI).
fn tools_present() -> bool {
    let missing: Vec<&str> = TOOLS
        .iter()
        .copied()
        .filter(|t| Command::new(t).arg("--version").output().map(|o| !o.status.success()).unwrap_or(true))
        .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!("{} missing (apt-get install clang-15 llvm-15)", missing.join(", "));
    assert!(!is_ci(), "{msg}: CI must not skip the decoder's differential test");
    eprintln!("SKIPPED: {msg}");
    false
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shader-llvm-diff-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Collapses runs of whitespace.
fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Compares every instruction of `obj`'s .text; returns (instructions checked, mismatches).
fn check_object(target: Target, obj: &Path) -> (usize, Vec<String>) {
    let mcpu = format!("--mcpu={}", target.mcpu());
    let bin = obj.with_extension("text");
    run(Command::new("llvm-objcopy-15").args(["-O", "binary", "--only-section=.text"]).arg(obj).arg(&bin));
    let text = std::fs::read(&bin).unwrap();
    let mattr = target.mattr().map(|a| format!("--mattr={a}"));
    let dump =
        String::from_utf8(run(Command::new("llvm-objdump-15").args(["-d", &mcpu]).args(mattr).arg(obj))).unwrap();
    let mut checked = 0;
    let mut bad = Vec::new();
    for line in dump.lines() {
        let Some((asm, comment)) = line.split_once("//") else { continue };
        let Some((addr, hex)) = comment.trim().split_once(':') else { continue };
        let Ok(addr) = usize::from_str_radix(addr.trim(), 16) else { continue };
        let words =
            hex.split_whitespace().take_while(|w| w.len() == 8 && w.chars().all(|c| c.is_ascii_hexdigit())).count();
        let want = norm(asm);
        checked += 1;
        match decode(target, &text, addr) {
            Ok(inst) => {
                let got = norm(&inst.to_string());
                if got != want || usize::from(inst.size) != 4 * words {
                    bad.push(format!(
                        "{}+{addr:#x}: objdump `{want}` ({} bytes), decoder `{got}` ({} bytes)",
                        obj.display(),
                        4 * words,
                        inst.size
                    ));
                }
            }
            Err(e) => bad.push(format!("{}+{addr:#x}: objdump `{want}`, decoder error: {e}", obj.display())),
        }
    }
    (checked, bad)
}

/// Compiles tests/corpus/kernels.cl for `target` at `opt` (clang-15 `-mcpu`, plus
/// `-mwavefrontsize64` for a wave64 target) into `dir`.
fn compile_kernels(target: Target, opt: &str, dir: &Path) -> PathBuf {
    let obj = dir.join(format!("kernels{opt}.o"));
    let mcpu = format!("-mcpu={}", target.mcpu());
    let wave64 = target.mattr().map(|_| "-mwavefrontsize64");
    run(Command::new("clang-15")
        .args(["-target", "amdgcn-amd-amdhsa", &mcpu, "-nogpulib", "-x", "cl", "-cl-std=CL2.0", opt, "-c"])
        .args(wave64)
        .arg(corpus().join("kernels.cl"))
        .arg("-o")
        .arg(&obj));
    obj
}

/// Assembles tests/corpus/`file` for `target` into `dir`.
fn assemble(target: Target, file: &str, dir: &Path) -> PathBuf {
    let obj = dir.join(Path::new(file).with_extension("o"));
    let mcpu = format!("-mcpu={}", target.mcpu());
    let mattr = target.mattr().map(|a| format!("-mattr={a}"));
    run(Command::new("llvm-mc-15")
        .args(["-triple=amdgcn-amd-amdhsa", &mcpu, "-filetype=obj"])
        .args(mattr)
        .arg(corpus().join(file))
        .arg("-o")
        .arg(&obj));
    obj
}

#[test]
fn gfx90a_decodes_as_llvm_objdump_prints() {
    if !tools_present() {
        return;
    }
    let target = Target::Gfx90a;
    let dir = scratch_dir("objdump");
    let mut objects: Vec<PathBuf> =
        ["-O0", "-O2", "-O3"].iter().map(|opt| compile_kernels(target, opt, &dir)).collect();
    objects.push(assemble(target, "encodings.s", &dir));
    compare_objects(target, &objects);
    let _ = std::fs::remove_dir_all(&dir);
}

/// gfx1030 in wave32 (clang's default for gfx10): the kernels at -O0/-O2/-O3 and the gfx10
/// encodings file.
#[test]
fn gfx1030_decodes_as_llvm_objdump_prints() {
    if !tools_present() {
        return;
    }
    let target = Target::Gfx1030;
    let dir = scratch_dir("objdump-gfx1030");
    let mut objects: Vec<PathBuf> =
        ["-O0", "-O2", "-O3"].iter().map(|opt| compile_kernels(target, opt, &dir)).collect();
    objects.push(assemble(target, "encodings_gfx1030.s", &dir));
    compare_objects(target, &objects);
    let _ = std::fs::remove_dir_all(&dir);
}

/// gfx1030 in wave64 (`-mwavefrontsize64`): lane masks are SGPR pairs. The kernels at -O0/-O2
/// and the instructions whose operands follow the wave size, in wave64 syntax.
#[test]
fn gfx1030_wave64_decodes_as_llvm_objdump_prints() {
    if !tools_present() {
        return;
    }
    let target = Target::Gfx1030W64;
    let dir = scratch_dir("objdump-gfx1030w64");
    let mut objects: Vec<PathBuf> = ["-O0", "-O2"].iter().map(|opt| compile_kernels(target, opt, &dir)).collect();
    objects.push(assemble(target, "encodings_gfx1030_w64.s", &dir));
    compare_objects(target, &objects);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Checks every object's instructions against objdump's; fails listing the differences.
fn compare_objects(target: Target, objects: &[PathBuf]) {
    let mut total = 0;
    let mut bad = Vec::new();
    for obj in objects {
        let (n, b) = check_object(target, obj);
        eprintln!("{}: {n} instructions, {} mismatches", obj.display(), b.len());
        assert!(n > 0, "{}: objdump printed no instructions", obj.display());
        total += n;
        bad.extend(b);
    }
    eprintln!("{target:?}: {total} instructions, {} differences", bad.len());
    for b in &bad {
        eprintln!("MISMATCH {b}");
    }
    assert!(
        bad.is_empty(),
        "{} of {total} instructions differ from llvm-objdump-15:\n{}",
        bad.len(),
        bad[..bad.len().min(60)].join("\n")
    );
}

/// The fixed bits (encoding and opcode) of each table's instructions: (table, bits, mask).
fn templates(target: Target) -> Vec<(shader::isa::Encoding, u32, u32)> {
    use shader::isa::Encoding as E;
    let gfx9 = [
        (E::Sop2, 0x8000_0000u32, 0xff80_0000u32, 23),
        (E::Sopk, 0xB000_0000, 0xff80_0000, 23),
        (E::Sop1, 0xBE80_0000, 0xff80_ff00, 8),
        (E::Sopc, 0xBF00_0000, 0xffff_0000, 16),
        (E::Sopp, 0xBF80_0000, 0xffff_0000, 16),
        (E::Smem, 0xC000_0000, 0xfffc_0000, 18),
        (E::Vop2, 0, 0xfe00_0000, 25),
        (E::Vop1, 0x7E00_0000, 0xfe01_fe00, 9),
        (E::Vopc, 0x7C00_0000, 0xfffe_0000, 17),
        (E::Vop3, 0xD000_0000, 0xffff_0000, 16),
        (E::Vop3p, 0xD380_0000, 0xffff_0000, 16),
        (E::Ds, 0xD800_0000, 0xfdfe_0000, 17),
        (E::Flat, 0xDC00_0000, 0xfdfc_c000, 18),
        (E::Scratch, 0xDC00_4000, 0xfdfc_c000, 18),
        (E::Global, 0xDC00_8000, 0xfdfc_c000, 18),
        (E::Mubuf, 0xE000_0000, 0xfdfc_0000, 18),
    ];
    // gfx10 (RDNA2 ISA, "Microcode Formats"): SMEM, VOP3, VOP3P, DS and FLAT moved.
    let gfx10 = [
        (E::Sop2, 0x8000_0000u32, 0xff80_0000u32, 23),
        (E::Sopk, 0xB000_0000, 0xff80_0000, 23),
        (E::Sop1, 0xBE80_0000, 0xff80_ff00, 8),
        (E::Sopc, 0xBF00_0000, 0xffff_0000, 16),
        (E::Sopp, 0xBF80_0000, 0xffff_0000, 16),
        (E::Smem, 0xF400_0000, 0xfffc_0000, 18),
        (E::Vop2, 0, 0xfe00_0000, 25),
        (E::Vop1, 0x7E00_0000, 0xfe01_fe00, 9),
        (E::Vopc, 0x7C00_0000, 0xfffe_0000, 17),
        (E::Vop3, 0xD400_0000, 0xffff_0000, 16),
        (E::Vop3p, 0xCC00_0000, 0xffff_0000, 16),
        (E::Ds, 0xD800_0000, 0xfffc_0000, 18),
        (E::Flat, 0xDC00_0000, 0xfffc_c000, 18),
        (E::Scratch, 0xDC00_4000, 0xfffc_c000, 18),
        (E::Global, 0xDC00_8000, 0xfffc_c000, 18),
        (E::Mubuf, 0xE000_0000, 0xfffc_0000, 18),
    ];
    let mut out = Vec::new();
    for (enc, base, mask, shift) in if target == Target::Gfx90a { gfx9 } else { gfx10 } {
        let table = target.table(enc).unwrap();
        for (op, entry) in table.iter().enumerate() {
            if entry.is_some() {
                out.push((enc, base | (op as u32) << shift, mask));
            }
        }
    }
    out
}

/// What llvm-mc-15 printed for a probe it decoded: (probe index, text, size of its re-encoding).
type Printed = (usize, String, usize);

/// Disassembles `probes` (index, words) with llvm-mc-15, each on a line after its sentinel
/// `s_movk_i32 ttmp15, <index>`. Returns what it printed for each probe it decoded from the
/// first byte, the number it printed with an invalid operand, and the indices of the words it
/// crashed on: LLVM 15's disassembler aborts on some words, so a crashing batch is bisected.
fn llvm_mc(target: Target, dir: &Path, probes: &[(usize, [u32; 3])]) -> (Vec<Printed>, usize, Vec<usize>) {
    let line = |words: &[u32]| -> String {
        let bytes: Vec<String> = words.iter().flat_map(|w| w.to_le_bytes()).map(|b| format!("0x{b:02x}")).collect();
        bytes.join(" ") + "\n"
    };
    let mut input = String::new();
    for (i, p) in probes {
        input.push_str(&line(&[0xB000_0000u32 | 123 << 16 | *i as u32]));
        input.push_str(&line(p));
    }
    let file = dir.join("random.txt");
    std::fs::write(&file, input).unwrap();
    let mcpu = format!("-mcpu={}", target.mcpu());
    let mattr = target.mattr().map(|a| format!("-mattr={a}"));
    let out = Command::new("llvm-mc-15")
        .args(["--disassemble", "-show-encoding", "-triple=amdgcn", &mcpu])
        .args(mattr)
        .arg(&file)
        .output()
        .unwrap();
    if !out.status.success() {
        if probes.len() == 1 {
            return (Vec::new(), 0, vec![probes[0].0]);
        }
        let (a, b) = probes.split_at(probes.len() / 2);
        let (mut pa, ia, mut ca) = llvm_mc(target, dir, a);
        let (pb, ib, cb) = llvm_mc(target, dir, b);
        pa.extend(pb);
        ca.extend(cb);
        return (pa, ia + ib, ca);
    }
    // Lines (1-based) whose first byte LLVM rejected.
    let rejected: std::collections::HashSet<usize> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("invalid instruction encoding"))
        .filter_map(|l| {
            let mut parts = l.split(':');
            let (_, line, col) = (parts.next()?, parts.next()?.parse::<usize>().ok()?, parts.next()?);
            (col == "1").then_some(line)
        })
        .collect();
    let position: std::collections::HashMap<usize, usize> =
        probes.iter().enumerate().map(|(n, (i, _))| (*i, n)).collect();
    let (mut printed, mut invalid, mut current) = (Vec::new(), 0, None);
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((asm, enc)) = l.split_once("; encoding: [") else { continue };
        let asm = norm(asm);
        if let Some(n) = asm.strip_prefix("s_movk_i32 ttmp15, ") {
            current = u32::from_str_radix(n.trim_start_matches("0x"), 16).ok().map(|n| n as usize);
            continue;
        }
        let Some(i) = current.take() else { continue };
        let Some(&n) = position.get(&i) else { continue };
        if rejected.contains(&(2 * n + 2)) {
            continue;
        }
        if asm.contains("/*") {
            // LLVM decoded the word but marks an operand invalid: not an instruction.
            invalid += 1;
            continue;
        }
        printed.push((i, asm, enc.split(',').count()));
    }
    (printed, invalid, Vec::new())
}

/// Random words for every opcode of every table (fixed seed), disassembled by llvm-mc-15: each
/// word LLVM decodes must decode to the same text and size here. Covers operand kinds, literals,
/// modifiers, SDWA and DPP far beyond what the compiler emits.
#[test]
fn gfx90a_random_words_decode_as_llvm_mc_prints() {
    random_words(Target::Gfx90a);
}

/// The same for gfx1030 in wave32, with DPP8 and VOP3 literals.
#[test]
fn gfx1030_random_words_decode_as_llvm_mc_prints() {
    random_words(Target::Gfx1030);
}

/// And in wave64 (lane masks are pairs).
#[test]
fn gfx1030_wave64_random_words_decode_as_llvm_mc_prints() {
    random_words(Target::Gfx1030W64);
}

fn random_words(target: Target) {
    if !tools_present() {
        return;
    }
    let gfx10 = target.is_gfx10();
    const PER_OPCODE: usize = 12;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed as u32
    };
    use shader::isa::Encoding as E;
    let mut probes: Vec<(usize, [u32; 3])> = Vec::new();
    for (enc, bits, mask) in templates(target) {
        for k in 0..PER_OPCODE {
            let mut w1 = rand();
            // Half the probes use small register numbers so tuples fit and fewer are rejected.
            if k % 2 == 0 {
                w1 &= 0xe3e3_e3e3;
            }
            let mut w0 = bits | (rand() & !mask);
            // VOP1/VOP2/VOPC: a quarter each SDWA (src0 249), DPP (250) and a literal (255).
            if matches!(enc, E::Vop1 | E::Vop2 | E::Vopc) && k % 4 != 0 {
                // gfx10: every other DPP probe is DPP8 (233, or 234 with fetch-inactive).
                let dpp = if gfx10 && k % 8 == 6 { 233 + (k as u32 / 8) % 2 } else { 250 };
                w0 = (w0 & !0x1ff) | [249, dpp, 255][k % 4 - 1];
                // The reserved SDWA select 7 crashes llvm-mc-15 (the decoder rejects it): use 6.
                for at in [8, 16, 24] {
                    if k % 4 == 1 && (w1 >> at) & 7 == 7 {
                        w1 &= !(1 << at);
                    }
                }
            }
            // MFMA: sources in VGPRs/AGPRs; llvm-mc-15 crashes on some scalar and constant ones.
            if !gfx10 && enc == E::Vop3p && (0xd3c0_0000..0xd3f0_0000).contains(&(w0 & 0xffff_0000)) {
                w1 |= 1 << 8 | 1 << 17 | 1 << 26;
            }
            // gfx10 VOP3/VOP3P: a quarter of the probes have a literal source.
            if gfx10 && matches!(enc, E::Vop3 | E::Vop3p) && k % 4 == 3 {
                let at = 9 * (k as u32 / 4 % 3);
                w1 = (w1 & !(0x1ff << at)) | 255 << at;
            }
            probes.push((probes.len(), [w0, w1, rand()]));
        }
    }
    assert!(probes.len() < 0x10000);
    let dir = scratch_dir(&format!("random-{target:?}"));
    let mut printed = Vec::new();
    let (mut invalid, mut crashed) = (0, Vec::new());
    for chunk in probes.chunks(256) {
        let (p, i, c) = llvm_mc(target, &dir, chunk);
        printed.extend(p);
        invalid += i;
        crashed.extend(c);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut bad = Vec::new();
    for (i, asm, mut size) in &printed {
        let words = probes[*i].1;
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        match decode(target, &bytes, 0) {
            Ok(inst) => {
                let got = norm(&inst.to_string());
                // llvm-mc re-encodes what it printed: a 16-bit integer operand's inline float
                // constant comes back as a literal, so the size it shows for a VOP1/VOP2/VOPC
                // word is 4 bytes too many there.
                let i16_float = (0..3).any(|s| {
                    inst.info.flags & (shader::isa::table::F_I16_SRC0 << s) != 0
                        && matches!(inst.operand([Field::S0, Field::S1, Field::S2][s]), Some(Operand::Float(_)))
                });
                if i16_float && size == usize::from(inst.size) + 4 {
                    size -= 4;
                }
                // Likewise a literal LLVM prints as an inline constant comes back without its
                // literal dword.
                let literal_as_inline = inst.operands().iter().any(|o| matches!(o, Operand::Literal(_)))
                    && !got.contains("0x")
                    && size + 4 == usize::from(inst.size);
                if literal_as_inline {
                    size += 4;
                }
                if got != *asm || usize::from(inst.size) != size {
                    bad.push(format!(
                        "{words:08x?}: llvm-mc `{asm}` ({size} bytes), decoder `{got}` ({} bytes)",
                        inst.size
                    ));
                }
            }
            Err(e) => bad.push(format!("{words:08x?}: llvm-mc `{asm}`, decoder error: {e}")),
        }
    }
    for i in &crashed {
        eprintln!(
            "llvm-mc-15 crashed on {:08x?} (decoder: {:?})",
            probes[*i].1,
            decode(target, &bytes_of(&probes[*i].1), 0).map(|i| i.to_string())
        );
    }
    eprintln!(
        "{target:?}: {} random words, {} decoded by LLVM and compared ({invalid} more printed with invalid operands, {} crashed llvm-mc-15), {} mismatches",
        probes.len(),
        printed.len(),
        crashed.len(),
        bad.len()
    );
    for b in &bad {
        eprintln!("MISMATCH {b}");
    }
    assert!(printed.len() > probes.len() / 4, "only {} of {} random words compared", printed.len(), probes.len());
    assert!(
        bad.is_empty(),
        "{} of {} random words differ from llvm-mc-15:\n{}",
        bad.len(),
        printed.len(),
        bad[..bad.len().min(60)].join("\n")
    );
}

fn bytes_of(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}
