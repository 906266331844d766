//! `isa-gen`: writes the shader crate's opcode tables (`shader/src/isa/<target>.rs` and the
//! shared opcode enum `shader/src/isa/op.rs`) by asking LLVM's disassembler what each opcode is.
//!
//! For every encoding it builds one probe word per value of the opcode field, with every other
//! field set to a distinct register number (dst 10, src0 20, src1 30, src2 40, ...), feeds all
//! probes to `llvm-mc-15 --disassemble -show-encoding -triple=amdgcn -mcpu=<target>` (LLVM 15.0.6,
//! Debian's llvm-15 package) and reads back what LLVM prints: the mnemonic, and for each printed
//! operand which field it came from (by its register number) and its width in dwords. Immediate
//! operands are probed three times (0, 0x1234, 0xfffd) to learn how LLVM prints them.
//!
//! gfx10 (gfx1030) probes its own encodings ([`gfx10_encodings`]) and disassembles each VOP
//! probe a second time with `-mattr=+wavefrontsize64` to learn which operands are lane masks
//! (one SGPR in wave32, a pair in wave64).
//!
//! Usage: `cargo run -p isa-gen -- [gfx90a] [gfx1030]` from the workspace root (default: both).
//! Every target is probed on each run, since `op.rs` is the union of their operations; only the
//! named targets' tables are written. The output is checked in; rerun it only when the tables'
//! format or the target list changes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, Stdio};

/// The LLVM disassembler the tables come from.
const LLVM_MC: &str = "llvm-mc-15";

/// What the probe of one opcode found.
#[derive(Clone, Debug, PartialEq)]
struct Probe {
    /// The mnemonic LLVM prints (with its _e32/_e64/_sdwa/_dpp suffix).
    name: String,
    /// The printed operands in order: (field, width in dwords).
    slots: Vec<(&'static str, u8)>,
    /// How the 16-bit immediate prints (SOPK, SOPP, SOPC s_set_gpr_idx_on).
    imm: &'static str,
    /// Flag names (`F_*` constants of the shader crate).
    flags: BTreeSet<&'static str>,
    /// Source modifiers LLVM prints for src0..2 (`MN` none, `MF` neg/abs, `MI` sext): of the
    /// VOP3/VOP3P form in those tables, of the SDWA form in the VOP1/VOP2/VOPC tables.
    mods: [&'static str; 3],
    /// The same for the DPP form (VOP1/VOP2/VOPC).
    dpp_mods: [&'static str; 3],
}

/// One encoding of a target: its table name, opcode-field size and probe builder.
struct Enc {
    name: &'static str,
    count: u32,
    /// The bits of the first dword that name the encoding and the opcode.
    id_mask: u32,
    /// The probe of an opcode with every field set (`imm`: the 16-bit immediate to use).
    build: fn(u32, u32) -> Vec<u32>,
    /// Fields LLVM requires to be zero when the opcode does not use them: (dword, mask).
    optional: &'static [(usize, u32)],
    /// Probe the 16-bit immediate's printing (SOPK, SOPP).
    imm: bool,
    /// Fields some opcodes need set (DS gds for the GWS operations): (dword, bits), tried after
    /// the shapes without them.
    set: &'static [(usize, u32)],
}

const IMM_VARIANTS: [u32; 3] = [0x1234, 0xfffd, 0];
const LITERAL: u32 = 0x1234_5678;

fn gfx9_encodings() -> Vec<Enc> {
    let mut encs = vec![
        Enc {
            name: "SOP2",
            count: 0x60,
            id_mask: 0xff80_0000,
            optional: &[],
            imm: false,
            set: &[],
            build: |op, _| vec![0x8000_0000 | op << 23 | 10 << 16 | 30 << 8 | 20, LITERAL],
        },
        Enc {
            name: "SOPK",
            count: 29,
            id_mask: 0xff80_0000,
            optional: &[(0, 0x7f << 16)],
            imm: true,
            set: &[],
            build: |op, imm| vec![0xB000_0000 | op << 23 | 10 << 16 | imm, LITERAL],
        },
        Enc {
            name: "SOP1",
            count: 256,
            id_mask: 0xff80_ff00,
            optional: &[(0, 0x7f << 16), (0, 0xff)],
            imm: false,
            set: &[],
            build: |op, _| vec![0xBE80_0000 | 10 << 16 | op << 8 | 20, LITERAL],
        },
        Enc {
            name: "SOPC",
            count: 128,
            id_mask: 0xffff_0000,
            optional: &[(0, 0xff), (0, 0xff00)],
            imm: false,
            set: &[],
            build: |op, _| vec![0xBF00_0000 | op << 16 | 30 << 8 | 20, LITERAL],
        },
        Enc {
            name: "SOPP",
            count: 128,
            id_mask: 0xffff_0000,
            optional: &[],
            imm: true,
            set: &[],
            build: |op, imm| vec![0xBF80_0000 | op << 16 | imm],
        },
        Enc {
            name: "SMEM",
            count: 256,
            id_mask: 0xfffc_0000,
            optional: &[(0, 0x7f << 6), (0, 0x3f), (1, 0x1f_ffff), (0, 1 << 17)],
            imm: false,
            set: &[],
            // sdata 16: aligned for the x16 forms.
            build: |op, _| vec![0xC000_0000 | op << 18 | 1 << 17 | 16 << 6 | 10, 0x10],
        },
        Enc {
            name: "VOP2",
            count: 62,
            id_mask: 0xfe00_0000,
            optional: &[],
            imm: false,
            set: &[],
            build: |op, _| vec![op << 25 | 10 << 17 | 30 << 9 | 276, LITERAL],
        },
        Enc {
            name: "VOP1",
            count: 256,
            id_mask: 0xfe01_fe00,
            optional: &[(0, 0xff << 17), (0, 0x1ff)],
            imm: false,
            set: &[],
            build: |op, _| vec![0x7E00_0000 | 10 << 17 | op << 9 | 276, LITERAL],
        },
        Enc {
            name: "VOPC",
            count: 256,
            id_mask: 0xfffe_0000,
            optional: &[],
            imm: false,
            set: &[],
            build: |op, _| vec![0x7C00_0000 | op << 17 | 30 << 9 | 276, LITERAL],
        },
        Enc {
            name: "VOP3",
            // Opcodes 0x380-0x3ff are the VOP3P encoding.
            count: 0x380,
            id_mask: 0xffff_0000,
            optional: &[(1, 0x1ff << 9), (1, 0x1ff << 18), (0, 0xff), (1, 0x1ff)],
            imm: false,
            set: &[],
            build: |op, _| vec![0xD000_0000 | op << 16 | 10, 276 | 286 << 9 | 296 << 18],
        },
        Enc {
            name: "VOP3P",
            count: 128,
            id_mask: 0xffff_0000,
            optional: &[(1, 0x1ff << 18), (1, 0x1ff << 9)],
            imm: false,
            set: &[],
            build: |op, _| vec![0xD380_0000 | op << 16 | 1 << 14 | 10, 276 | 286 << 9 | 296 << 18 | 3 << 27],
        },
        Enc {
            name: "DS",
            count: 256,
            id_mask: 0xfdfe_0000,
            optional: &[(1, 0xff << 24), (1, 0xff << 16), (1, 0xff << 8), (1, 0xff)],
            imm: false,
            // gds (bit 16): the GWS operations decode only with it.
            set: &[(0, 1 << 16)],
            build: |op, _| vec![0xD800_0000 | op << 17 | 2 << 8 | 1, 20 | 30 << 8 | 40 << 16 | 10 << 24],
        },
        Enc {
            name: "MUBUF",
            count: 128,
            id_mask: 0xfdfc_0000,
            optional: &[(1, 0xff << 8), (1, 0xff), (0, 1 << 12), (1, 0xff1f_0000)],
            imm: false,
            set: &[],
            build: |op, _| vec![0xE000_0000 | op << 18 | 1 << 12, 20 | 10 << 8 | 10 << 16 | 50 << 24],
        },
    ];
    encs.extend(flat_encs([|op, _| flat(op, 0), |op, _| flat(op, 1), |op, _| flat(op, 2)]));
    encs
}

/// FLAT, SCRATCH and GLOBAL: one opcode space, told apart by the segment field; `build` holds
/// each one's probe builder, in that order.
fn flat_encs(build: [fn(u32, u32) -> Vec<u32>; 3]) -> [Enc; 3] {
    let [flat, scratch, global] = build;
    let enc = |name, build| Enc {
        name,
        count: 128,
        id_mask: 0xfdfc_c000,
        optional: &[(1, 0xff << 24), (1, 0xff << 8)],
        imm: false,
        set: &[],
        build,
    };
    [enc("FLAT", flat), enc("SCRATCH", scratch), enc("GLOBAL", global)]
}

/// The gfx10 encodings (AMD "RDNA2" ISA Reference Guide, chapter "Microcode Formats"): the
/// scalar ALU and VOP1/VOP2/VOPC formats as on gfx9, and the MUBUF fields the probe sets; SMEM,
/// VOP3, VOP3P, DS and FLAT moved or reshaped. gfx10 names "no register" by SGPR_NULL (125)
/// where gfx9 used 0x7f.
fn gfx10_encodings() -> Vec<Enc> {
    let mut encs: Vec<Enc> = gfx9_encodings()
        .into_iter()
        .filter(|e| matches!(e.name, "SOP2" | "SOP1" | "SOPC" | "SOPP" | "VOP2" | "VOP1" | "VOPC" | "MUBUF"))
        .collect();
    encs.extend([
        Enc {
            name: "SOPK",
            // Opcodes 0x1d-0x1f would be SOP1, SOPC and SOPP.
            count: 29,
            id_mask: 0xff80_0000,
            optional: &[(0, 0x7f << 16)],
            imm: true,
            set: &[],
            build: |op, imm| vec![0xB000_0000 | op << 23 | 10 << 16 | imm, LITERAL],
        },
        Enc {
            name: "SMEM",
            count: 256,
            id_mask: 0xfffc_0000,
            optional: &[(0, 0x7f << 6), (0, 0x3f), (1, 0x1f_ffff)],
            imm: false,
            set: &[],
            // soffset null: the immediate offset alone.
            build: |op, _| vec![0xF400_0000 | op << 18 | 16 << 6 | 10, 0x7d << 25 | 0x10],
        },
        Enc {
            name: "VOP3",
            count: 0x400,
            id_mask: 0xffff_0000,
            optional: &[(1, 0x1ff << 9), (1, 0x1ff << 18), (0, 0xff), (1, 0x1ff)],
            imm: false,
            set: &[],
            build: |op, _| vec![0xD400_0000 | op << 16 | 10, 276 | 286 << 9 | 296 << 18],
        },
        Enc {
            name: "VOP3P",
            count: 128,
            id_mask: 0xffff_0000,
            optional: &[(1, 0x1ff << 18), (1, 0x1ff << 9)],
            imm: false,
            set: &[],
            build: |op, _| vec![0xCC00_0000 | op << 16 | 1 << 14 | 10, 276 | 286 << 9 | 296 << 18 | 3 << 27],
        },
        Enc {
            name: "DS",
            count: 256,
            id_mask: 0xfffc_0000,
            optional: &[(1, 0xff << 24), (1, 0xff << 16), (1, 0xff << 8), (1, 0xff)],
            imm: false,
            // gds (bit 17): the GWS operations decode only with it.
            set: &[(0, 1 << 17)],
            build: |op, _| vec![0xD800_0000 | op << 18 | 2 << 8 | 1, 20 | 30 << 8 | 40 << 16 | 10 << 24],
        },
    ]);
    encs.extend(flat_encs([|op, _| flat10(op, 0), |op, _| flat10(op, 1), |op, _| flat10(op, 2)]));
    encs
}

fn flat10(op: u32, seg: u32) -> Vec<u32> {
    vec![0xDC00_0000 | op << 18 | seg << 14, 20 | 30 << 8 | 0x7d << 16 | 10 << 24]
}

/// Whether `mcpu` is a gfx10 target.
fn is_gfx10(mcpu: &str) -> bool {
    mcpu.starts_with("gfx10")
}

fn flat(op: u32, seg: u32) -> Vec<u32> {
    // FLAT (seg 0) has no saddr and LLVM wants the field 0; GLOBAL and SCRATCH probe `off`.
    let saddr = if seg == 0 { 0 } else { 0x7f };
    vec![0xDC00_0000 | op << 18 | seg << 14, 20 | 30 << 8 | saddr << 16 | 10 << 24]
}

/// A printed register: (file letter, first index, width).
fn parse_reg(tok: &str) -> Option<(char, u32, u8)> {
    let (file, rest) = if let Some(r) = tok.strip_prefix("ttmp") {
        ('t', r)
    } else {
        let mut c = tok.chars();
        let f = c.next()?;
        if !matches!(f, 's' | 'v' | 'a') {
            return None;
        }
        (f, c.as_str())
    };
    if let Some(r) = rest.strip_prefix('[') {
        let r = r.strip_suffix(']')?;
        let (a, b) = r.split_once(':')?;
        let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
        Some((file, a, (b - a + 1) as u8))
    } else {
        Some((file, rest.parse().ok()?, 1))
    }
}

/// Splits `ops` at top-level commas (not inside brackets or parentheses).
fn split_operands(ops: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in ops.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            out.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Classifies the printed instruction of a probe.
fn classify(enc: &str, text: &str, variant: u32) -> Result<Probe, String> {
    let text = text.trim();
    let (name, rest) = text.split_once(' ').unwrap_or((text, ""));
    let mut probe = Probe {
        name: name.to_string(),
        slots: Vec::new(),
        imm: "None",
        flags: BTreeSet::new(),
        mods: ["MN"; 3],
        dpp_mods: ["MN"; 3],
    };
    let rest = rest.trim();
    // SOPP's operand may contain spaces (s_waitcnt vmcnt(..) lgkmcnt(..)).
    let mut ops = if enc == "SOPP" && !rest.is_empty() { vec![rest.to_string()] } else { split_operands(rest) };
    // The last operand carries the space-separated modifiers.
    let mut mods: Vec<String> = Vec::new();
    if enc != "SOPP" {
        if let Some(last) = ops.pop() {
            let mut words = split_words(&last);
            let first = words.remove(0);
            // An instruction with no operands prints its modifiers alone (ds_gws_sema_v
            // offset:.. gds).
            if first.starts_with("offset") || first == "gds" {
                mods.push(first);
            } else {
                ops.push(first);
            }
            mods.extend(words);
        }
    }
    for m in &mods {
        if m.starts_with("offset1:") {
        } else if m.starts_with("offset0:") {
            probe.flags.insert("F_OFFSET2");
        } else if m.starts_with("offset:swizzle") {
            probe.flags.insert("F_SWIZZLE");
        } else if m == "gds" {
            probe.flags.insert("F_GDS");
        } else if m == "offen" || m.starts_with("offset:") || m == "lds" || m == "glc" {
            // Printed from fields the display handles for every opcode of the encoding.
        } else if m.starts_with("abid:") || m.starts_with("cbsz:") || m.starts_with("blgp:") {
            probe.flags.insert("F_MAI");
        } else if m.starts_with("op_sel") || m.starts_with("neg_") {
        } else {
            return Err(format!("{text}: unknown modifier {m}"));
        }
    }
    for tok in ops {
        let tok = tok.as_str();
        let slot = classify_operand(enc, tok, variant, &mut probe)?;
        if let Some(s) = slot {
            probe.slots.push(s);
        }
    }
    Ok(probe)
}

fn split_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
        if c == ' ' && depth == 0 {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

fn classify_operand(
    enc: &str,
    tok: &str,
    variant: u32,
    probe: &mut Probe,
) -> Result<Option<(&'static str, u8)>, String> {
    let imm_fmt = |tok: &str| -> Option<&'static str> {
        if tok.starts_with("vmcnt") || tok.starts_with("expcnt") || tok.starts_with("lgkmcnt") {
            Some("Waitcnt")
        } else if tok.starts_with("sendmsg(") {
            Some("Sendmsg")
        } else if tok.starts_with("hwreg(") {
            Some("Hwreg")
        } else if tok.starts_with("gpr_idx(") {
            Some("GprIdx")
        } else if tok.starts_with("depctr_") {
            Some("DepCtr")
        } else {
            None
        }
    };
    if let Some(f) = imm_fmt(tok) {
        probe.imm = f;
        return Ok(Some(("Imm", 1)));
    }
    if tok == "vcc" {
        return Ok(Some(("Vcc", 2)));
    }
    // gfx10 wave32: the low half of VCC is the lane mask.
    if tok == "vcc_lo" {
        return Ok(Some(("Vcc", 1)));
    }
    if tok == "off" {
        return Ok(Some(("Saddr", 0)));
    }
    if tok == format!("0x{LITERAL:x}") {
        return Ok(Some(("K", 1)));
    }
    if matches!(enc, "SOPK" | "SOPP") {
        let v = IMM_VARIANTS[variant as usize];
        if tok == format!("0x{v:x}") {
            probe.imm = "Hex";
            return Ok(Some(("Imm", 1)));
        }
        if tok == v.to_string() {
            probe.imm = "Dec";
            return Ok(Some(("Imm", 1)));
        }
        if tok == (v as u16 as i16).to_string() {
            probe.imm = "SignedDec";
            return Ok(Some(("Imm", 1)));
        }
    }
    if enc == "SOPC" && tok == "0x1e" {
        // s_set_gpr_idx_on's mask (ssrc1 = 30 has bits outside gpr_idx's four).
        probe.imm = "GprIdx";
        return Ok(Some(("Imm", 1)));
    }
    if enc == "SMEM" {
        if tok == "0x10" {
            return Ok(Some(("Off", 1)));
        }
        if tok == "16" {
            // s_atc_probe's sdata field is a 3-bit code.
            return Ok(Some(("Imm", 1)));
        }
    }
    let Some((file, n, w)) = parse_reg(tok) else {
        return Err(format!("{}: unknown operand {tok}", probe.name));
    };
    let field = match (enc, n) {
        ("DS", 10) | ("FLAT" | "GLOBAL" | "SCRATCH", 10) | ("MUBUF", 10) => "D",
        ("DS", 20) | ("FLAT" | "GLOBAL" | "SCRATCH", 20) | ("MUBUF", 20) => "Addr",
        ("DS", 30) | ("FLAT" | "GLOBAL" | "SCRATCH", 30) => "Data0",
        ("DS", 40) => "Data1",
        ("MUBUF", 40) => "Rsrc",
        ("MUBUF", 50) => "Soff",
        ("SMEM", 20) => "Base",
        ("SMEM", 16) => "D",
        (_, 10) if file == 's' && enc.starts_with("VOP") => "Ds",
        (_, 10) => "D",
        (_, 20) => "S0",
        (_, 30) => "S1",
        (_, 40) => "S2",
        ("VOP3", 0) => "Sd",
        _ => return Err(format!("{}: operand {tok} matches no field", probe.name)),
    };
    // An operand LLVM prints as an AGPR in every form (v_accvgpr_*, MFMA): its own field name.
    if file == 'a' {
        let f: &'static str = match field {
            "D" => "DA",
            "S0" => "S0A",
            "S1" => "S1A",
            "S2" => "S2A",
            _ => return Err(format!("{}: AGPR operand {tok} in field {field}", probe.name)),
        };
        return Ok(Some((f, w)));
    }
    Ok(Some((field, w)))
}

/// A probe: (opcode, shape, immediate variant, words).
type ProbeWords = (u32, u32, u32, Vec<u32>);

/// Runs llvm-mc over the probes; returns the printed text of each probe that decodes. Each probe
/// follows a sentinel `s_movk_i32 s0, <index>` so its output can be told apart from what LLVM
/// prints for the rest of a probe it rejected.
fn disassemble(mcpu: &str, id_mask: u32, probes: &[ProbeWords]) -> HashMap<(u32, u32, u32), String> {
    disassemble_as(mcpu, "", id_mask, probes)
}

/// [`disassemble`] with target features (`-mattr`), e.g. `+wavefrontsize64`.
fn disassemble_as(mcpu: &str, mattr: &str, id_mask: u32, probes: &[ProbeWords]) -> HashMap<(u32, u32, u32), String> {
    let mut found = HashMap::new();
    for (chunk_no, chunk) in probes.chunks(0x8000).enumerate() {
        let mut input = String::new();
        for (i, (_, _, _, words)) in chunk.iter().enumerate() {
            // The sentinel: s_movk_i32 ttmp15, i.
            writeln!(input, "{}", bytes_line(&[0xB000_0000 | 123 << 16 | i as u32])).unwrap();
            writeln!(input, "{}", bytes_line(words)).unwrap();
            // gfx10: a rejected probe's later dwords may decode as the first of a longer
            // instruction (SMEM's soffset null reads as EXP) and swallow the next sentinel.
            if is_gfx10(mcpu) {
                writeln!(input, "{}", bytes_line(&[0xBF80_0000, 0xBF80_0000])).unwrap();
            }
        }
        let mut child = Command::new(LLVM_MC)
            .args(["--disassemble", "-show-encoding", "-triple=amdgcn", &format!("-mcpu={mcpu}")])
            .args((!mattr.is_empty()).then(|| format!("-mattr={mattr}")))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {LLVM_MC}: {e} (apt-get install llvm-15)"));
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        let mut current: Option<usize> = None;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some((asm, enc)) = line.split_once("; encoding: [") else { continue };
            let asm = asm.trim();
            if let Some(n) = asm.strip_prefix("s_movk_i32 ttmp15, ") {
                let n = n.trim_start_matches("0x");
                current = u32::from_str_radix(n, 16).ok().map(|n| n as usize);
                continue;
            }
            let Some(i) = current.take().filter(|&i| i < chunk.len()) else { continue };
            let b: Vec<u8> = enc
                .trim_end_matches(']')
                .split(',')
                .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).unwrap())
                .collect();
            let w0 = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let (op, shape, imm, words) = &chunk[i];
            if (w0 ^ words[0]) & id_mask == 0 {
                found.insert((*op, *shape, *imm), asm.to_string());
            }
        }
        let _ = chunk_no;
    }
    found
}

fn bytes_line(words: &[u32]) -> String {
    let bytes: Vec<String> = words.iter().flat_map(|w| w.to_le_bytes()).map(|b| format!("0x{b:02x}")).collect();
    bytes.join(" ")
}

/// `v_add_f32_e32` -> `v_add_f32`: the name of the operation, shared by its encodings.
fn base_name(name: &str) -> &str {
    for suffix in ["_e32", "_e64", "_sdwa", "_dpp"] {
        if let Some(b) = name.strip_suffix(suffix) {
            return b;
        }
    }
    name
}

fn camel(name: &str) -> String {
    name.split('_')
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// Everything learned about one target: per encoding, opcode -> probe.
type TargetTables = BTreeMap<&'static str, (u32, BTreeMap<u32, Probe>)>;

/// The shapes of an encoding's probes: subsets of its optional fields kept, most fields first,
/// then the same with the `set` fields.
fn shapes(enc: &Enc) -> Vec<u32> {
    let n = enc.optional.len() as u32;
    // A shape is the mask of optional fields zeroed, and above them the `set` fields set.
    let mut v: Vec<u32> = (0..1u32 << n).collect();
    v.sort_by_key(|m| m.count_ones());
    for i in 0..enc.set.len() {
        let with: Vec<u32> = v.iter().map(|m| m | 1 << (n + i as u32)).collect();
        v.extend(with);
    }
    v
}

fn build(enc: &Enc, op: u32, shape: u32, imm: u32) -> Vec<u32> {
    let mut words = (enc.build)(op, imm);
    for (i, (w, mask)) in enc.optional.iter().enumerate() {
        if shape & (1 << i) != 0 {
            words[*w] &= !mask;
        }
    }
    let n = enc.optional.len();
    for (i, (w, bits)) in enc.set.iter().enumerate() {
        if shape & (1 << (n + i)) != 0 {
            words[*w] |= bits;
        }
    }
    words
}

fn probe_target(mcpu: &str) -> TargetTables {
    let mut tables = BTreeMap::new();
    let encodings = if is_gfx10(mcpu) { gfx10_encodings() } else { gfx9_encodings() };
    for enc in encodings {
        let shapes = shapes(&enc);
        let imms: &[u32] = if enc.imm { &IMM_VARIANTS } else { &IMM_VARIANTS[..1] };
        let mut probes = Vec::new();
        for op in 0..enc.count {
            for &shape in &shapes {
                for (v, &imm) in imms.iter().enumerate() {
                    probes.push((op, shape, v as u32, build(&enc, op, shape, imm)));
                }
            }
        }
        let printed = disassemble(mcpu, enc.id_mask, &probes);
        let mut ops = BTreeMap::new();
        let mut shapes_of = BTreeMap::new();
        for op in 0..enc.count {
            let mut chosen = None;
            let mut errors = Vec::new();
            for &shape in &shapes {
                let Some((v, text)) = (0..3).find_map(|v| printed.get(&(op, shape, v)).map(|t| (v, t))) else {
                    continue;
                };
                match classify(enc.name, text, v) {
                    Ok(p) => {
                        chosen = Some((shape, p));
                        break;
                    }
                    Err(e) => errors.push(e),
                }
            }
            let Some((shape, mut probe)) = chosen else {
                if !errors.is_empty() {
                    eprintln!("{mcpu} {} {op:#x}: no probe classified: {errors:?}", enc.name);
                }
                continue;
            };
            if enc.imm {
                // A 16-bit immediate that prints nothing when 0, or prints signed.
                let neg = printed.get(&(op, shape, 1)).and_then(|t| classify(enc.name, t, 1).ok());
                let zero = printed.get(&(op, shape, 2)).and_then(|t| classify(enc.name, t, 2).ok());
                for p in [&neg, &zero].into_iter().flatten() {
                    if matches!(p.imm, "Waitcnt" | "Sendmsg" | "Hwreg" | "GprIdx" | "DepCtr") {
                        probe.imm = p.imm;
                    }
                }
                if neg.is_some_and(|n| n.imm == "SignedDec") {
                    probe.imm = "SignedDec";
                }
                if let Some(z) = &zero {
                    // LLVM prints some immediates in decimal up to 64 (an inline constant's range),
                    // larger ones in hex.
                    if probe.imm == "Hex" && z.imm == "Dec" {
                        probe.imm = "DecSmall";
                    }
                }
                if let Some(z) = zero {
                    if probe.slots.iter().any(|s| s.0 == "Imm") && !z.slots.iter().any(|s| s.0 == "Imm") {
                        probe.flags.insert("F_IMM_OMIT_ZERO");
                    }
                }
            }
            shapes_of.insert(op, shape);
            ops.insert(op, probe);
        }
        if is_gfx10(mcpu) && enc.name.starts_with("VOP") {
            lane_masks(mcpu, &enc, &shapes_of, &mut ops);
        }
        extra_probes(mcpu, &enc, &shapes_of, &mut ops);
        eprintln!("{mcpu} {}: {} opcodes", enc.name, ops.len());
        tables.insert(enc.name, (enc.count, ops));
    }
    tables
}

/// gfx10: marks the operands that are lane masks (one SGPR in wave32, a pair in wave64: VCC,
/// carries, compare results) by disassembling each opcode's probe again for wave64.
fn lane_masks(mcpu: &str, enc: &Enc, shapes_of: &BTreeMap<u32, u32>, ops: &mut BTreeMap<u32, Probe>) {
    let probes: Vec<ProbeWords> =
        shapes_of.iter().map(|(&op, &shape)| (op, shape, 0, build(enc, op, shape, IMM_VARIANTS[0]))).collect();
    let printed = disassemble_as(mcpu, "+wavefrontsize64", enc.id_mask, &probes);
    for (&op, probe) in ops.iter_mut() {
        let Some(text) = printed.get(&(op, shapes_of[&op], 0)) else {
            panic!("{mcpu} {} {op:#x}: no wave64 disassembly", enc.name);
        };
        let wide = classify(enc.name, text, 0).unwrap_or_else(|e| panic!("{mcpu} wave64: {e}"));
        assert_eq!(wide.slots.len(), probe.slots.len(), "{mcpu} {}: wave64 prints other operands", probe.name);
        for (slot, w) in probe.slots.iter_mut().zip(&wide.slots) {
            assert_eq!(slot.0, w.0, "{mcpu} {}: wave64 prints other operands", probe.name);
            if slot.1 == 1 && w.1 == 2 {
                slot.0 = match slot.0 {
                    "D" => "DL",
                    "Ds" => "DsL",
                    "Sd" => "SdL",
                    "S0" => "S0L",
                    "S1" => "S1L",
                    "S2" => "S2L",
                    "Vcc" => "VccL",
                    f => panic!("{mcpu} {}: lane mask in field {f}", probe.name),
                };
            } else {
                assert_eq!(slot.1, w.1, "{mcpu} {}: wave64 widths", probe.name);
            }
        }
    }
}

/// The source modifiers printed on the operands of `text`, in order, and its trailing words.
fn printed_mods(text: &str) -> (Vec<&'static str>, Vec<String>) {
    let (_, rest) = text.trim().split_once(' ').unwrap_or((text, ""));
    let mut ops = split_operands(rest.trim());
    let mut words = Vec::new();
    if let Some(last) = ops.pop() {
        let mut w = split_words(&last);
        ops.push(w.remove(0));
        words = w;
    }
    let kinds = ops
        .iter()
        .map(|t| {
            if t.starts_with("sext(") {
                "MI"
            } else if t.starts_with('-') && !t[1..].starts_with(|c: char| c.is_ascii_digit()) || t.starts_with('|') {
                "MF"
            } else {
                "MN"
            }
        })
        .collect();
    (kinds, words)
}

/// Learns per opcode, in one llvm-mc run per encoding: the SDWA and DPP forms (VOP1/VOP2/VOPC)
/// and their source modifiers, the VOP3/VOP3P source modifiers, op_sel and omod, and whether
/// a VOP1 src0 names only VGPRs.
fn extra_probes(mcpu: &str, enc: &Enc, shapes_of: &BTreeMap<u32, u32>, ops: &mut BTreeMap<u32, Probe>) {
    const SDWA_FP: u32 = 0;
    const SDWA_INT: u32 = 1;
    const DPP: u32 = 2;
    const VOP3_MODS: u32 = 3;
    const VSRC0: u32 = 4;
    const OPSEL: u32 = 5;
    const OMOD: u32 = 6;
    const GLC: u32 = 7;
    const INT16: u32 = 8;
    const LIT16: u32 = 9;
    const DPP_MODS: u32 = 10;
    const SDWA_PLAIN: u32 = 11;
    const SDWA_OMOD: u32 = 12;
    // DPP neg (and abs) of src0, then of src1.
    const DPP_MOD_BITS: [u32; 4] = [1 << 20, 3 << 20, 1 << 22, 3 << 22];
    let mut probes = Vec::new();
    for (&op, &shape) in shapes_of {
        let base = build(enc, op, shape, 0);
        match enc.name {
            "VOP1" | "VOP2" | "VOPC" => {
                // SDWA selects DWORD for what the encoding has (VOP1: no src1, VOPC: no dst).
                let sdwa = match enc.name {
                    "VOP1" => 0x0006_0614u32,
                    "VOPC" => 0x0606_0014,
                    _ => 0x0606_0614,
                };
                let src1_mods = if enc.name == "VOP1" { 0 } else { 1 };
                for (kind, src0, dword) in [
                    (SDWA_PLAIN, 249, sdwa),
                    // One source at a time: an operand may take float or integer modifiers.
                    (SDWA_FP, 249, sdwa | 3 << 20),
                    (SDWA_INT, 249, sdwa | 1 << 19),
                    (SDWA_FP + 16, 249, sdwa | (src1_mods * (3 << 28))),
                    (SDWA_INT + 16, 249, sdwa | (src1_mods * (1 << 27))),
                    (DPP, 250, 0xff00_e414),
                ] {
                    let mut words = base.clone();
                    words[0] = (words[0] & !0x1ff) | src0;
                    words[1] = dword;
                    probes.push((op, kind, 0, words));
                }
                // gfx10 SDWA takes an output modifier only where the operation has one.
                if is_gfx10(mcpu) && enc.name != "VOPC" {
                    let mut words = base.clone();
                    words[0] = (words[0] & !0x1ff) | 249;
                    words[1] = sdwa | 1 << 14;
                    probes.push((op, SDWA_OMOD, 0, words));
                }
                // A literal src0: a 16-bit operand prints its low half.
                let mut words = base.clone();
                words[0] = (words[0] & !0x1ff) | 255;
                words[1] = LITERAL;
                probes.push((op, LIT16, 0, words));
                // DPP source modifiers, one source at a time (neg, then neg and abs).
                for (j, bits) in DPP_MOD_BITS.iter().enumerate() {
                    let mut words = base.clone();
                    words[0] = (words[0] & !0x1ff) | 250;
                    words[1] = 0xff00_e414 | bits;
                    probes.push((op, DPP_MODS + 16 * (1 + j as u32), 0, words));
                }
                // src0 = 1.0: a 16-bit integer operand prints it as the f16 bits 0x3c00.
                let mut words = base.clone();
                words[0] = (words[0] & !0x1ff) | 242;
                probes.push((op, INT16, 0, words));
                if enc.name == "VOP1" {
                    let mut words = base.clone();
                    words[0] = (words[0] & !0x1ff) | 20;
                    probes.push((op, VSRC0, 0, words));
                }
            }
            "VOP3" => {
                // Modifiers and op_sel apart: LLVM rejects op_sel bits where there is no op_sel.
                // One source at a time, with and without abs: LLVM rejects modifiers where an
                // operand takes none.
                let n = ops[&op]
                    .slots
                    .iter()
                    .filter(|s| matches!(s.0.trim_end_matches(['A', 'L']), "S0" | "S1" | "S2"))
                    .count();
                let vop3b = ops[&op].slots.iter().any(|s| s.0.starts_with("Sd"));
                for i in 0..n as u32 {
                    for (k, abs) in [(0u32, true), (1, false)] {
                        let mut words = base.clone();
                        if abs && !vop3b {
                            words[0] |= 1 << (8 + i);
                        }
                        words[1] |= 1 << (29 + i);
                        probes.push((op, VOP3_MODS + 16 * (1 + 2 * i + k), 0, words));
                    }
                }
                let mut words = base.clone();
                words[1] |= 1 << 27;
                probes.push((op, OMOD, 0, words));
                for i in 0..n as u32 {
                    let mut words = base.clone();
                    words[1] = (words[1] & !(0x1ff << (9 * i))) | 242 << (9 * i);
                    probes.push((op, INT16 + 16 * (i + 1), 0, words));
                }
                if !vop3b {
                    let mut words = base.clone();
                    words[0] |= 0xf << 11;
                    probes.push((op, OPSEL, 0, words));
                    // gfx10 rejects a destination op_sel bit where the result is 32 bits.
                    if is_gfx10(mcpu) {
                        let mut words = base.clone();
                        words[0] |= 1 << 11;
                        probes.push((op, OPSEL + 16, 0, words));
                    }
                }
                // gfx10 VOP3 takes a literal: a 16-bit operand prints its low half.
                if is_gfx10(mcpu) {
                    for i in 0..n as u32 {
                        let mut words = base.clone();
                        words[1] = (words[1] & !(0x1ff << (9 * i))) | 255 << (9 * i);
                        words.push(LITERAL);
                        probes.push((op, LIT16 + 16 * (i + 1), 0, words));
                    }
                }
            }
            "SMEM" => {
                let mut words = base.clone();
                words[0] |= 1 << 16;
                probes.push((op, GLC, 0, words));
            }
            "VOP3P" => {
                let n = ops[&op]
                    .slots
                    .iter()
                    .filter(|s| matches!(s.0.trim_end_matches(['A', 'L']), "S0" | "S1" | "S2"))
                    .count();
                let m = (1u32 << n) - 1;
                let mut words = base.clone();
                words[0] |= m << 8;
                words[1] |= m << 29;
                probes.push((op, VOP3_MODS, 0, words));
                // gfx10 VOP3P takes a literal: a 16-bit operand prints its low half.
                if is_gfx10(mcpu) {
                    for i in 0..n as u32 {
                        let mut words = base.clone();
                        words[1] = (words[1] & !(0x1ff << (9 * i))) | 255 << (9 * i);
                        words.push(LITERAL);
                        probes.push((op, LIT16 + 16 * (i + 1), 0, words));
                    }
                }
            }
            _ => {}
        }
    }
    if probes.is_empty() {
        return;
    }
    let printed = disassemble(mcpu, enc.id_mask, &probes);
    for (&op, probe) in ops.iter_mut() {
        let first = |t: &String| t.split(' ').next().unwrap_or("").to_string();
        let srcs: Vec<usize> = probe
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s.0.trim_end_matches(['A', 'L']), "S0" | "S1" | "S2"))
            .map(|(i, _)| i)
            .collect();
        let learn = |text: &String, probe: &mut Probe| {
            let (kinds, words) = printed_mods(text);
            for (n, &i) in srcs.iter().enumerate() {
                if let Some(k) = kinds.get(i) {
                    if *k != "MN" {
                        probe.mods[n] = k;
                    }
                }
            }
            words
        };
        if printed.get(&(op, SDWA_PLAIN, 0)).is_some_and(|t| first(t).ends_with("_sdwa")) {
            probe.flags.insert("F_SDWA");
        }
        for key in [SDWA_FP, SDWA_INT, SDWA_FP + 16, SDWA_INT + 16] {
            if let Some(t) = printed.get(&(op, key, 0)).filter(|t| first(t).ends_with("_sdwa")) {
                probe.flags.insert("F_SDWA");
                learn(t, probe);
            }
        }
        if printed.get(&(op, SDWA_OMOD, 0)).is_some_and(|t| first(t).ends_with("_sdwa")) {
            probe.flags.insert("F_SDWA_OMOD");
        }
        if printed.get(&(op, DPP, 0)).is_some_and(|t| first(t).ends_with("_dpp")) {
            probe.flags.insert("F_DPP");
        }
        if printed.get(&(op, VSRC0, 0)).is_some_and(|t| printed_operand(t, srcs.first().copied()) == Some("v20".into()))
        {
            probe.flags.insert("F_VSRC0");
        }
        for key in [OPSEL, OPSEL + 16] {
            if let Some(t) = printed.get(&(op, key, 0)) {
                if printed_mods(t).1.iter().any(|w| w.starts_with("op_sel:")) {
                    probe.flags.insert("F_OPSEL");
                }
            }
        }
        // VOP3P: all sources at once (the mix instructions' neg_lo/neg_hi print as neg/abs).
        if let Some(t) = printed.get(&(op, VOP3_MODS, 0)) {
            learn(t, probe);
        }
        for i in 0..3u32 {
            for k in 0..2 {
                if let Some(t) = printed.get(&(op, VOP3_MODS + 16 * (1 + 2 * i + k), 0)) {
                    let (kinds, _) = printed_mods(t);
                    if let Some(k) = srcs.get(i as usize).and_then(|&at| kinds.get(at)) {
                        if *k != "MN" {
                            probe.mods[i as usize] = k;
                        }
                    }
                }
            }
        }
        if printed.get(&(op, OMOD, 0)).is_some_and(|t| printed_mods(t).1.iter().any(|w| w == "mul:2")) {
            probe.flags.insert("F_OMOD");
        }
        for (i, key) in [(0usize, INT16), (0, INT16 + 16), (1, INT16 + 32), (2, INT16 + 48)] {
            if printed.get(&(op, key, 0)).is_some_and(|t| {
                printed_mods(t).0.len() > srcs.get(i).copied().unwrap_or(99)
                    && printed_operand(t, srcs.get(i).copied()).is_some_and(|o| o.contains("0x3c00"))
            }) {
                probe.flags.insert(["F_I16_SRC0", "F_I16_SRC1", "F_I16_SRC2"][i]);
            }
        }
        for (i, flag) in ["F_LIT16", "F_LIT16_SRC1", "F_LIT16_SRC2"].into_iter().enumerate() {
            if printed
                .get(&(op, LIT16 + 16 * (i as u32 + 1), 0))
                .is_some_and(|t| printed_operand(t, srcs.get(i).copied()).is_some_and(|o| o == "0x5678"))
            {
                probe.flags.insert(flag);
            }
        }
        if printed
            .get(&(op, LIT16, 0))
            .is_some_and(|t| printed_operand(t, srcs.first().copied()).is_some_and(|o| o == "0x5678"))
        {
            probe.flags.insert("F_LIT16");
        }
        for j in 0..DPP_MOD_BITS.len() {
            if let Some(t) = printed.get(&(op, DPP_MODS + 16 * (1 + j as u32), 0)) {
                let src = j / 2;
                let (kinds, _) = printed_mods(t);
                if let Some(k) = srcs.get(src).and_then(|&at| kinds.get(at)) {
                    if *k != "MN" {
                        probe.dpp_mods[src] = k;
                    }
                }
            }
        }
        if printed.get(&(op, GLC, 0)).is_some_and(|t| printed_mods(t).1.iter().any(|w| w == "glc")) {
            probe.flags.insert("F_GLC");
        }
    }
}

/// The `i`th printed operand of `text`.
fn printed_operand(text: &str, i: Option<usize>) -> Option<String> {
    let (_, rest) = text.trim().split_once(' ')?;
    let ops = split_operands(rest.trim());
    let op = ops.get(i?)?;
    Some(split_words(op).remove(0))
}

/// Every target: op.rs is the union of their operations, whichever tables a run writes.
const TARGETS: [&str; 2] = ["gfx90a", "gfx1030"];

fn main() {
    let mut targets: Vec<String> = std::env::args().skip(1).collect();
    if targets.is_empty() {
        targets = TARGETS.iter().map(|t| t.to_string()).collect();
    }
    for t in &targets {
        assert!(TARGETS.contains(&t.as_str()), "unknown target {t} (known: {TARGETS:?})");
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shader/src/isa");
    let version = Command::new(LLVM_MC)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let version =
        version.lines().find(|l| l.contains("LLVM version")).unwrap_or("LLVM version unknown").trim().to_string();
    let header = |cmd: &str, what: &str| {
        format!(
            "// @generated by tools/isa-gen (`cargo run -p isa-gen{cmd}`): {what}\n\
             // Source: the AMDGPU disassembler of {LLVM_MC} ({version}, Debian's llvm-15 package),\n\
             // asked about every value of each encoding's opcode field. Do not edit by hand.\n\n",
        )
    };
    let mut all_ops: BTreeSet<String> = BTreeSet::new();
    let mut per_target = Vec::new();
    for t in TARGETS {
        let tables = probe_target(t);
        for (_, ops) in tables.values() {
            for p in ops.values() {
                all_ops.insert(base_name(&p.name).to_string());
            }
        }
        if targets.iter().any(|w| w == t) {
            per_target.push((t.to_string(), tables));
        }
    }
    // The opcode enum: one variant per operation (the base mnemonic), across all targets.
    let mut op_rs = header("", &format!("the dense opcode enum shared by every target ({}).", TARGETS.join(", ")));
    op_rs.push_str("/// An operation, whatever encoding carries it: `v_add_f32_e32` and `v_add_f32_e64` are both\n/// [`Op::VAddF32`]. Dense: execution dispatches on it.\n");
    op_rs
        .push_str("#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]\n#[repr(u16)]\npub enum Op {\n");
    for n in &all_ops {
        writeln!(op_rs, "    {},", camel(n)).unwrap();
    }
    op_rs.push_str(
        "}\n\n/// The base mnemonic of each [`Op`], indexed by its discriminant.\npub static OP_NAMES: [&str; ",
    );
    writeln!(op_rs, "{}] = [", all_ops.len()).unwrap();
    for n in &all_ops {
        writeln!(op_rs, "    \"{n}\",").unwrap();
    }
    op_rs.push_str("];\n");
    std::fs::write(root.join("op.rs"), op_rs).unwrap();
    for (t, tables) in per_target {
        let mut rs = header(&format!(" -- {t}"), &format!("the opcode tables of {t}."));
        rs.push_str("use super::op::Op;\nuse super::table::Field::*;\n#[allow(unused_imports)]\n");
        if is_gfx10(&t) {
            rs.push_str("use super::table::{a, l, s, ImmFmt, OpInfo, SrcMods, F_DPP, F_GDS, F_GLC, F_I16_SRC0, F_I16_SRC1, F_I16_SRC2, F_IMM_OMIT_ZERO, F_LIT16, F_LIT16_SRC1, F_LIT16_SRC2, F_MAI, F_OFFSET2, F_OMOD, F_OPSEL, F_SDWA, F_SDWA_OMOD, F_SWIZZLE, F_VSRC0, MF, MI, MN};\n\n");
        } else {
            rs.push_str("use super::table::{a, s, ImmFmt, OpInfo, SrcMods, F_DPP, F_GDS, F_GLC, F_I16_SRC0, F_I16_SRC1, F_I16_SRC2, F_IMM_OMIT_ZERO, F_LIT16, F_MAI, F_OFFSET2, F_OMOD, F_OPSEL, F_SDWA, F_SWIZZLE, F_VSRC0, MF, MI, MN};\n\n");
        }
        rs.push_str("#[allow(dead_code)]\nconst fn o(op: Op, name: &'static str, slots: &'static [super::table::Slot], imm: ImmFmt, flags: u16, mods: [SrcMods; 3], dpp_mods: [SrcMods; 3]) -> Option<OpInfo> {\n    Some(OpInfo { op, name, slots, imm, flags, mods, dpp_mods })\n}\n\n");
        for (enc, (count, ops)) in &tables {
            writeln!(rs, "/// {enc}: {} of {count} opcode values are instructions.", ops.len()).unwrap();
            writeln!(rs, "pub static {enc}: [Option<OpInfo>; {count}] = [").unwrap();
            for op in 0..*count {
                match ops.get(&op) {
                    None => writeln!(rs, "    None,").unwrap(),
                    Some(p) => {
                        let slots: Vec<String> = p
                            .slots
                            .iter()
                            .map(|(f, w)| match (f.strip_suffix('A'), f.strip_suffix('L')) {
                                (Some(base), _) => format!("a({base}, {w})"),
                                (_, Some(base)) => format!("l({base})"),
                                _ => format!("s({f}, {w})"),
                            })
                            .collect();
                        let flags = if p.flags.is_empty() {
                            "0".to_string()
                        } else {
                            p.flags.iter().copied().collect::<Vec<_>>().join(" | ")
                        };
                        writeln!(
                            rs,
                            "    o(Op::{}, \"{}\", &[{}], ImmFmt::{}, {flags}, [{}], [{}]), // {op:#x}",
                            camel(base_name(&p.name)),
                            p.name,
                            slots.join(", "),
                            imm_fmt(&t, p.imm),
                            p.mods.join(", "),
                            p.dpp_mods.join(", ")
                        )
                        .unwrap();
                    }
                }
            }
            rs.push_str("];\n\n");
        }
        std::fs::write(root.join(format!("{t}.rs")), rs).unwrap();
    }
}

/// The name of an [`ImmFmt`] variant: gfx10 packs s_waitcnt's counters and names hardware
/// registers and messages differently.
fn imm_fmt(mcpu: &str, imm: &str) -> String {
    match imm {
        "Waitcnt" | "Hwreg" | "Sendmsg" if is_gfx10(mcpu) => format!("{imm}Gfx10"),
        _ => imm.to_string(),
    }
}
