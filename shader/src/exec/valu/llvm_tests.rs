//! Integer LLVM IR compiled by llc-15 for gfx90a, run on the core and compared with the same
//! operation computed in Rust: the compiler's choice of VALU instructions (64-bit arithmetic
//! through carries and v_mad_u64_u32, v_perm for bswap, v_alignbit for funnel shifts, clamp for
//! saturation, compares and v_cndmask for selects) must give LLVM IR's result.

use crate::testing::run;
use crate::wave::LANES;
use std::process::Command;

/// One function: argument and result widths in bits, the IR body (arguments %a, %b, %c; the
/// result returned), and the same operation in Rust on zero-extended values.
struct Case {
    args: &'static [u32],
    ret: u32,
    body: &'static str,
    rust: fn(&[u64]) -> u64,
}

fn sext(x: u64, bits: u32) -> i64 {
    let s = 64 - bits;
    ((x << s) as i64) >> s
}

const CASES: &[Case] = &[
    Case { args: &[64, 64], ret: 64, body: "%r = mul i64 %a, %b", rust: |v| v[0].wrapping_mul(v[1]) },
    Case { args: &[64, 64], ret: 64, body: "%r = add i64 %a, %b", rust: |v| v[0].wrapping_add(v[1]) },
    Case { args: &[64, 64], ret: 64, body: "%r = sub i64 %a, %b", rust: |v| v[0].wrapping_sub(v[1]) },
    Case { args: &[64, 32], ret: 64, body: "%s = zext i32 %b to i64\n%m = and i64 %s, 63\n%r = shl i64 %a, %m", rust: |v| v[0] << (v[1] & 63) },
    Case { args: &[64, 32], ret: 64, body: "%s = zext i32 %b to i64\n%m = and i64 %s, 63\n%r = lshr i64 %a, %m", rust: |v| v[0] >> (v[1] & 63) },
    Case { args: &[64, 32], ret: 64, body: "%s = zext i32 %b to i64\n%m = and i64 %s, 63\n%r = ashr i64 %a, %m", rust: |v| (v[0] as i64 >> (v[1] & 63)) as u64 },
    Case { args: &[64, 64], ret: 64, body: "%r = call i64 @llvm.smax.i64(i64 %a, i64 %b)", rust: |v| (v[0] as i64).max(v[1] as i64) as u64 },
    Case { args: &[64, 64], ret: 64, body: "%r = call i64 @llvm.umin.i64(i64 %a, i64 %b)", rust: |v| v[0].min(v[1]) },
    Case { args: &[64, 64], ret: 32, body: "%lt = icmp slt i64 %a, %b\n%r = zext i1 %lt to i32", rust: |v| u64::from((v[0] as i64) < (v[1] as i64)) },
    Case { args: &[32, 32], ret: 32, body: "%x = zext i32 %a to i64\n%y = zext i32 %b to i64\n%p = mul i64 %x, %y\n%h = lshr i64 %p, 32\n%r = trunc i64 %h to i32", rust: |v| (v[0] * v[1]) >> 32 },
    Case { args: &[32, 32], ret: 32, body: "%x = sext i32 %a to i64\n%y = sext i32 %b to i64\n%p = mul i64 %x, %y\n%h = lshr i64 %p, 32\n%r = trunc i64 %h to i32", rust: |v| ((sext(v[0], 32) * sext(v[1], 32)) >> 32) as u64 },
    Case { args: &[32, 32], ret: 64, body: "%x = zext i32 %a to i64\n%y = zext i32 %b to i64\n%r = mul i64 %x, %y", rust: |v| v[0] * v[1] },
    Case { args: &[32, 32], ret: 32, body: "%x = and i32 %a, 16777215\n%y = and i32 %b, 16777215\n%r = mul i32 %x, %y", rust: |v| ((v[0] & 0xff_ffff) * (v[1] & 0xff_ffff)) & 0xffff_ffff },
    Case { args: &[32], ret: 32, body: "%r = call i32 @llvm.ctpop.i32(i32 %a)", rust: |v| u64::from(v[0].count_ones()) },
    Case { args: &[32], ret: 32, body: "%r = call i32 @llvm.ctlz.i32(i32 %a, i1 false)", rust: |v| u64::from((v[0] as u32).leading_zeros()) },
    Case { args: &[32], ret: 32, body: "%r = call i32 @llvm.cttz.i32(i32 %a, i1 false)", rust: |v| u64::from((v[0] as u32).trailing_zeros()) },
    Case { args: &[32], ret: 32, body: "%r = call i32 @llvm.bitreverse.i32(i32 %a)", rust: |v| u64::from((v[0] as u32).reverse_bits()) },
    Case { args: &[32], ret: 32, body: "%r = call i32 @llvm.bswap.i32(i32 %a)", rust: |v| u64::from((v[0] as u32).swap_bytes()) },
    Case { args: &[32], ret: 32, body: "%r = call i32 @llvm.abs.i32(i32 %a, i1 false)", rust: |v| u64::from((v[0] as i32).wrapping_abs() as u32) },
    Case { args: &[32, 32, 32], ret: 32, body: "%r = call i32 @llvm.fshl.i32(i32 %a, i32 %b, i32 %c)", rust: |v| (((v[0] << 32 | v[1]) << (v[2] & 31)) >> 32) & 0xffff_ffff },
    Case { args: &[32, 32, 32], ret: 32, body: "%r = call i32 @llvm.fshr.i32(i32 %a, i32 %b, i32 %c)", rust: |v| ((v[0] << 32 | v[1]) >> (v[2] & 31)) & 0xffff_ffff },
    Case { args: &[32, 32], ret: 32, body: "%r = call i32 @llvm.uadd.sat.i32(i32 %a, i32 %b)", rust: |v| (v[0] + v[1]).min(0xffff_ffff) },
    Case { args: &[32, 32], ret: 32, body: "%r = call i32 @llvm.usub.sat.i32(i32 %a, i32 %b)", rust: |v| v[0].saturating_sub(v[1]) },
    Case { args: &[32, 32], ret: 32, body: "%r = call i32 @llvm.sadd.sat.i32(i32 %a, i32 %b)", rust: |v| (v[0] as i32).saturating_add(v[1] as i32) as u32 as u64 },
    Case { args: &[32, 32], ret: 32, body: "%r = call i32 @llvm.ssub.sat.i32(i32 %a, i32 %b)", rust: |v| (v[0] as i32).saturating_sub(v[1] as i32) as u32 as u64 },
    Case { args: &[16, 16], ret: 16, body: "%r = call i16 @llvm.sadd.sat.i16(i16 %a, i16 %b)", rust: |v| (v[0] as i16).saturating_add(v[1] as i16) as u16 as u64 },
    Case { args: &[16, 16], ret: 16, body: "%r = call i16 @llvm.usub.sat.i16(i16 %a, i16 %b)", rust: |v| v[0].saturating_sub(v[1]) },
    Case { args: &[16, 16], ret: 16, body: "%m = and i16 %b, 15\n%r = ashr i16 %a, %m", rust: |v| (sext(v[0], 16) >> (v[1] & 15)) as u64 & 0xffff },
    Case { args: &[16, 16], ret: 16, body: "%r = mul i16 %a, %b", rust: |v| (v[0] * v[1]) & 0xffff },
    Case { args: &[32], ret: 32, body: "%t = trunc i32 %a to i8\n%r = sext i8 %t to i32", rust: |v| sext(v[0], 8) as u64 & 0xffff_ffff },
    Case { args: &[32], ret: 32, body: "%t = trunc i32 %a to i16\n%r = sext i16 %t to i32", rust: |v| sext(v[0], 16) as u64 & 0xffff_ffff },
    Case { args: &[32, 32], ret: 32, body: "%r = call i32 @llvm.smin.i32(i32 %a, i32 %b)", rust: |v| (v[0] as i32).min(v[1] as i32) as u32 as u64 },
    Case { args: &[32, 32, 32], ret: 32, body: "%lt = icmp ult i32 %a, %b\n%r = select i1 %lt, i32 %c, i32 %a", rust: |v| if v[0] < v[1] { v[2] } else { v[0] } },
    Case { args: &[32, 32, 32], ret: 32, body: "%s = shl i32 %a, 3\n%r = add i32 %s, %b", rust: |v| ((v[0] << 3) + v[1]) & 0xffff_ffff },
    Case { args: &[32, 32, 32], ret: 32, body: "%s = add i32 %a, %b\n%r = add i32 %s, %c", rust: |v| (v[0] + v[1] + v[2]) & 0xffff_ffff },
    Case { args: &[32, 32, 32], ret: 32, body: "%s = and i32 %a, %b\n%r = or i32 %s, %c", rust: |v| (v[0] & v[1]) | v[2] },
    Case { args: &[32, 32], ret: 32, body: "%x = xor i32 %a, %b\n%r = xor i32 %x, -1", rust: |v| !(v[0] ^ v[1]) & 0xffff_ffff },
    Case { args: &[32, 32], ret: 32, body: "%m = and i32 %b, 31\n%o = lshr i32 %a, %m\n%r = and i32 %o, 255", rust: |v| (v[0] >> (v[1] & 31)) & 255 },
    Case { args: &[32], ret: 32, body: "%r = udiv i32 %a, 7", rust: |v| v[0] / 7 },
    Case { args: &[32], ret: 32, body: "%r = urem i32 %a, 1000", rust: |v| v[0] % 1000 },
    Case { args: &[32], ret: 32, body: "%r = sdiv i32 %a, -3", rust: |v| (v[0] as i32).wrapping_div(-3) as u32 as u64 },
    Case { args: &[16, 16, 16], ret: 16, body: "%lt = icmp slt i16 %a, %b\n%r = select i1 %lt, i16 %c, i16 %b", rust: |v| if (v[0] as i16) < (v[1] as i16) { v[2] } else { v[1] } },
    Case { args: &[64, 64, 32], ret: 32, body: "%eq = icmp eq i64 %a, %b\n%r = select i1 %eq, i32 %c, i32 7", rust: |v| if v[0] == v[1] { v[2] } else { 7 } },
    Case { args: &[32, 32], ret: 32, body: "%gt = icmp sgt i32 %a, %b\n%r = sext i1 %gt to i32", rust: |v| if (v[0] as i32) > (v[1] as i32) { 0xffff_ffff } else { 0 } },
];

const DECLS: &str = "
declare i64 @llvm.smax.i64(i64, i64)
declare i64 @llvm.umin.i64(i64, i64)
declare i32 @llvm.ctpop.i32(i32)
declare i32 @llvm.ctlz.i32(i32, i1)
declare i32 @llvm.cttz.i32(i32, i1)
declare i32 @llvm.bitreverse.i32(i32)
declare i32 @llvm.bswap.i32(i32)
declare i32 @llvm.abs.i32(i32, i1)
declare i32 @llvm.fshl.i32(i32, i32, i32)
declare i32 @llvm.fshr.i32(i32, i32, i32)
declare i32 @llvm.uadd.sat.i32(i32, i32)
declare i32 @llvm.usub.sat.i32(i32, i32)
declare i32 @llvm.sadd.sat.i32(i32, i32)
declare i32 @llvm.ssub.sat.i32(i32, i32)
declare i16 @llvm.sadd.sat.i16(i16, i16)
declare i16 @llvm.usub.sat.i16(i16, i16)
declare i32 @llvm.smin.i32(i32, i32)
";

/// The module of every case as `f0`, `f1`, ...
fn module() -> String {
    let mut m = String::from(DECLS);
    for (k, c) in CASES.iter().enumerate() {
        let names = ["%a", "%b", "%c"];
        let params: Vec<String> = c.args.iter().zip(names).map(|(w, n)| format!("i{w} {n}")).collect();
        m += &format!("define i{} @f{k}({}) {{\n{}\nret i{} %r\n}}\n", c.ret, params.join(", "), c.body, c.ret);
    }
    m
}

/// Reports a missing LLVM tool: the test passes skipped, except under CI, where it must run
/// (as `crate::testing` does for llvm-mc-15).
pub(super) fn missing(tool: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(!ci, "{tool} missing: CI must not skip the shader core's tests");
    eprintln!("SKIPPED: {tool} missing (apt-get install llvm-15)");
}

/// llc-15's gfx90a assembly of [`module`], `None` when llc-15 is missing.
fn compile() -> Option<String> {
    let dir = std::env::temp_dir().join(format!("shader-llc-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("m.ll");
    std::fs::write(&path, module()).expect("write IR");
    let out = Command::new("llc-15").args(["-march=amdgcn", "-mcpu=gfx90a", "-O2", "-o", "-"]).arg(&path).output();
    let _ = std::fs::remove_dir_all(&dir);
    let Ok(out) = out else {
        missing("llc-15");
        return None;
    };
    assert!(out.status.success(), "llc-15: {}\n{}", String::from_utf8_lossy(&out.stderr), module());
    Some(String::from_utf8(out.stdout).expect("utf-8"))
}

/// The instructions of function `name` up to its return, with `s_mov_b32 sN, imm` (constants
/// the compiler keeps in SGPRs) taken out as (N, imm) for the test to preload: the SALU is not
/// this family's.
fn body(asm: &str, name: &str) -> (String, Vec<(usize, u32)>) {
    let mut lines = asm.lines().skip_while(|l| !l.starts_with(&format!("{name}:"))).skip(1);
    let mut code = String::new();
    let mut sgprs = Vec::new();
    for l in lines.by_ref() {
        let l = l.split(';').next().unwrap().trim();
        if l.is_empty() || l.starts_with('.') {
            continue;
        }
        if l.starts_with("s_setpc_b64") {
            return (code, sgprs);
        }
        if let Some(rest) = l.strip_prefix("s_mov_b32 s") {
            let (reg, imm) = rest.split_once(", ").expect("s_mov_b32 operands");
            let imm = match imm.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).expect("hex"),
                None => imm.parse::<i64>().expect("an immediate") as u32,
            };
            sgprs.push((reg.parse().expect("an SGPR"), imm));
            continue;
        }
        assert!(!l.starts_with("s_") || l.starts_with("s_waitcnt"), "{name}: scalar instruction `{l}`");
        code += l;
        code += "\n";
    }
    panic!("{name}: no s_setpc_b64");
}

fn inputs(seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    (0..LANES * 3)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match i % 7 {
                0 => x % 70,
                1 => [0, u64::MAX, 1 << 63, (1 << 63) - 1, 0xffff_ffff, 0x8000_0000, 0x7fff, 0x8000][(x % 8) as usize],
                2 => x >> (x % 64),
                _ => x,
            }
        })
        .collect()
}

#[test]
fn compiled_integer_ir_matches_rust() {
    let Some(asm) = compile() else { return };
    for (k, c) in CASES.iter().enumerate() {
        let (code, sgprs) = body(&asm, &format!("f{k}"));
        let vals = inputs(k as u64 * 0x9e37_79b9 + 17);
        let arg = |l: usize, i: usize| vals[3 * l + i] & (u64::MAX >> (64 - c.args[i]));
        let Some((w, _)) = run(&code, |w, _| {
            for (n, v) in &sgprs {
                w.s[*n] = *v;
            }
            for l in 0..LANES {
                // Arguments in consecutive VGPRs (an i64 in a pair); a 16-bit argument's high
                // half is junk the code must ignore.
                let mut r = 0;
                for (i, &bits) in c.args.iter().enumerate() {
                    let v = arg(l, i) | if bits == 16 { vals[3 * l + i] & 0xffff_0000 } else { 0 };
                    w.v[r][l] = v as u32;
                    if bits == 64 {
                        w.v[r + 1][l] = (v >> 32) as u32;
                        r += 1;
                    }
                    r += 1;
                }
            }
        }) else {
            return;
        };
        for l in 0..LANES {
            let args: Vec<u64> = (0..c.args.len()).map(|i| arg(l, i)).collect();
            let want = (c.rust)(&args) & (u64::MAX >> (64 - c.ret));
            let mut got = u64::from(w.v[0][l]);
            if c.ret == 64 {
                got |= u64::from(w.v[1][l]) << 32;
            }
            got &= u64::MAX >> (64 - c.ret);
            assert_eq!(got, want, "f{k} `{}` on {args:#x?}\n{code}", c.body);
        }
    }
}
