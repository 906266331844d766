//! VALU integer, bit and move operations (VOP1, VOP2, VOP3 and the AGPR moves of VOP3P).
//!
//! Semantics from AMD's "Instinct MI200 (CDNA2) ISA Reference Guide", chapter "Vector ALU
//! Operations" and its VOP1/VOP2/VOP3 opcode tables; which opcodes exist on gfx90a from LLVM 15's
//! VOP1/VOP2/VOP3Instructions.td (the generated decoder tables).

use super::{active, binary, fetch, lanes_mask, mask_src, read_operand, ternary, unary, write_vector, Handler};
use crate::exec::operand::{read_s32, sdst, Ty::B16, Ty::B32, Ty::I64};
use crate::exec::{Cx, ExecError, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op};
use crate::wave::{Wave, LANES};

/// The handler of `op`, if this family implements it.
pub(super) fn handler(op: Op) -> Option<Handler> {
    move_op(op).or_else(|| arith(op)).or_else(|| bits(op)).or_else(|| half(op))
}

/// Refuses modifiers an integer operation has no meaning for (float abs/neg, omod) and clamp
/// where the manual does not define it as saturation.
fn int_mods(inst: &Instruction, clamp_ok: bool) -> ExecResult<()> {
    let m = &inst.mods;
    if m.abs != 0 || m.neg != 0 || m.omod != 0 {
        return Err(ExecError::Unimplemented("abs/neg/omod on an integer operation".into()));
    }
    if m.clamp && !clamp_ok {
        return Err(ExecError::Unimplemented("clamp".into()));
    }
    Ok(())
}

fn u1(w: &mut Wave, i: &Instruction, cx: &mut Cx, f: fn(u32) -> u32) -> ExecResult {
    int_mods(i, false)?;
    unary(w, i, cx, B32, B32, |a| f(a as u32).into())
}

fn u2(w: &mut Wave, i: &Instruction, cx: &mut Cx, f: fn(u32, u32) -> u32) -> ExecResult {
    int_mods(i, false)?;
    binary(w, i, cx, [B32, B32], B32, |a, b| f(a as u32, b as u32).into())
}

fn u3(w: &mut Wave, i: &Instruction, cx: &mut Cx, f: fn(u32, u32, u32) -> u32) -> ExecResult {
    int_mods(i, false)?;
    ternary(w, i, cx, [B32, B32, B32], B32, |a, b, c| f(a as u32, b as u32, c as u32).into())
}

fn h2(w: &mut Wave, i: &Instruction, cx: &mut Cx, f: fn(u16, u16) -> u16) -> ExecResult {
    int_mods(i, false)?;
    binary(w, i, cx, [B16, B16], B16, |a, b| f(a as u16, b as u16).into())
}

fn h3(w: &mut Wave, i: &Instruction, cx: &mut Cx, f: fn(u16, u16, u16) -> u16) -> ExecResult {
    int_mods(i, false)?;
    ternary(w, i, cx, [B16, B16, B16], B16, |a, b, c| f(a as u16, b as u16, c as u16).into())
}

/// A 64-bit shift: a 32-bit shift amount (src0) and a 64-bit value (src1).
fn shift64(w: &mut Wave, i: &Instruction, cx: &mut Cx, f: fn(u64, u32) -> u64) -> ExecResult {
    int_mods(i, false)?;
    binary(w, i, cx, [B32, I64], I64, |s, v| f(v, s as u32 & 63))
}

/// Moves, lane access and register-file moves.
fn move_op(op: Op) -> Option<Handler> {
    Some(match op {
        Op::VNop => |_, i, _| {
            int_mods(i, false)?;
            Ok(Flow::Next)
        },
        Op::VMovB32 => |w, i, cx| u1(w, i, cx, |a| a),
        // AGPR moves: the operand kinds (AGPR/VGPR) come from the decoder's slots.
        Op::VAccvgprMovB32 | Op::VAccvgprReadB32 | Op::VAccvgprWriteB32 => |w, i, cx| unary(w, i, cx, B32, B32, |a| a),
        Op::VCndmaskB32 => cndmask,
        Op::VReadfirstlaneB32 => readfirstlane,
        Op::VReadlaneB32 => readlane,
        Op::VWritelaneB32 => writelane,
        Op::VSwapB32 => swap,
        _ => return None,
    })
}

/// v_cndmask_b32: src1 where the mask (VCC, or the VOP3 SGPR pair in src2) has the lane's bit,
/// else src0. abs/neg apply (the VOP3 form takes float modifiers).
fn cndmask(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    if i.mods.clamp || i.mods.omod != 0 {
        return Err(ExecError::Unimplemented("clamp/omod".into()));
    }
    let cond =
        i.operand(Field::S2).or_else(|| i.operand(Field::Vcc)).ok_or_else(|| ExecError::Invalid("no mask".into()))?;
    let m = mask_src(w, cond)?;
    let a = fetch(w, i, 0, B32, cx)?;
    let b = fetch(w, i, 1, B32, cx)?;
    let mask = active(w, i);
    let mut out = [0u64; LANES];
    for l in Wave::lanes(mask) {
        out[l] = if m & (1 << l) != 0 { b[l] } else { a[l] };
    }
    super::write_vdst(w, i, &out, B32, mask)?;
    Ok(Flow::Next)
}

/// The lane number an SGPR or constant selects, masked to the wave size (MI200 ISA guide,
/// V_READLANE_B32 / V_WRITELANE_B32: "lane select ... from SGPR or M0", wrapped).
fn lane_select(w: &Wave, i: &Instruction, cx: &Cx) -> ExecResult<usize> {
    let op = i.operand(Field::S1).ok_or_else(|| ExecError::Invalid("no lane select".into()))?;
    Ok(read_s32(w, op, B32, &cx.apertures)? as usize & (w.wave_size as usize - 1))
}

fn scalar_dst(i: &Instruction) -> ExecResult<u8> {
    sdst(i.operand(Field::Ds).ok_or_else(|| ExecError::Invalid("no scalar destination".into()))?)
}

/// v_readfirstlane_b32: the first lane EXEC enables, lane 0 when EXEC is zero.
fn readfirstlane(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    int_mods(i, false)?;
    let op = i.operand(Field::S0).ok_or_else(|| ExecError::Invalid("no source".into()))?;
    let v = read_operand(w, op, B32, cx)?;
    let exec = w.exec();
    let lane = if exec == 0 { 0 } else { exec.trailing_zeros() as usize };
    let d = scalar_dst(i)?;
    w.set_sreg(d, v[lane] as u32);
    Ok(Flow::Next)
}

/// v_readlane_b32: one lane of a VGPR into an SGPR, whatever EXEC is.
fn readlane(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    int_mods(i, false)?;
    let op = i.operand(Field::S0).ok_or_else(|| ExecError::Invalid("no source".into()))?;
    let v = read_operand(w, op, B32, cx)?;
    let lane = lane_select(w, i, cx)?;
    let d = scalar_dst(i)?;
    w.set_sreg(d, v[lane] as u32);
    Ok(Flow::Next)
}

/// v_writelane_b32: a scalar into one lane of a VGPR, whatever EXEC is.
fn writelane(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    int_mods(i, false)?;
    let op = i.operand(Field::S0).ok_or_else(|| ExecError::Invalid("no source".into()))?;
    let v = read_s32(w, op, B32, &cx.apertures)?;
    let lane = lane_select(w, i, cx)?;
    let mut out = [0u64; LANES];
    out[lane] = v.into();
    let d = i.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
    write_vector(w, d, i, &out, B32, 1 << lane)?;
    Ok(Flow::Next)
}

/// v_swap_b32: exchanges vdst and src0 in the active lanes.
fn swap(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    int_mods(i, false)?;
    let (d, s) = match (i.operand(Field::D), i.operand(Field::S0)) {
        (Some(d), Some(s)) => (d, s),
        _ => return Err(ExecError::Invalid("v_swap_b32 needs two VGPRs".into())),
    };
    let a = read_operand(w, d, B32, cx)?;
    let b = read_operand(w, s, B32, cx)?;
    let mask = active(w, i);
    write_vector(w, d, i, &b, B32, mask)?;
    write_vector(w, s, i, &a, B32, mask)?;
    Ok(Flow::Next)
}

/// `x` sign-extended from bit `bits - 1`.
fn sext(x: u64, bits: u32) -> i64 {
    let s = 64 - bits;
    ((x << s) as i64) >> s
}

/// 32-bit add/sub with a carry or borrow in and out, saturating with clamp: returns the result
/// and the carry-out bit. (Clamp is saturation on the integer adds: LLVM 15 selects
/// llvm.uadd.sat/usub.sat/sadd.sat to v_add_u32/v_sub_u32/v_add_i32/v_add_u16/v_add_i16 with
/// clamp on gfx90a.)
fn addsub(a: u32, b: u32, cin: bool, sub: bool, clamp: bool) -> (u64, bool) {
    let (a, b, c) = (u64::from(a), u64::from(b), u64::from(cin));
    if sub {
        let r = a.wrapping_sub(b).wrapping_sub(c);
        let borrow = b + c > a;
        (if clamp && borrow { 0 } else { r & 0xffff_ffff }, borrow)
    } else {
        let r = a + b + c;
        let carry = r > 0xffff_ffff;
        (if clamp && carry { 0xffff_ffff } else { r & 0xffff_ffff }, carry)
    }
}

/// The VOP2/VOP3 add and subtract family with a carry-out: `rev` swaps the sources, `carry_in`
/// reads VCC (VOP2) or the src2 mask (VOP3).
fn carry_op(w: &mut Wave, i: &Instruction, cx: &mut Cx, sub: bool, rev: bool, carry_in: bool) -> ExecResult {
    int_mods(i, true)?;
    let cin = if carry_in {
        // The VOP2 form lists VCC twice (carry-out, then carry-in); both are VCC.
        let op = i
            .operand(Field::S2)
            .or_else(|| i.operand(Field::Vcc))
            .ok_or_else(|| ExecError::Invalid("no carry-in".into()))?;
        mask_src(w, op)?
    } else {
        0
    };
    let clamp = i.mods.clamp;
    lanes_mask(w, i, cx, [B32, B32], B32, |l, [a, b]| {
        let (a, b) = if rev { (b, a) } else { (a, b) };
        addsub(a as u32, b as u32, cin & (1 << l) != 0, sub, clamp)
    })
}

/// 32-bit add/sub without carry-out: unsigned (saturating with clamp) or signed (clamp
/// saturates to the i32 range; MI200 ISA guide V_ADD_I32/V_SUB_I32).
fn add32(w: &mut Wave, i: &Instruction, cx: &mut Cx, sub: bool, rev: bool, signed: bool) -> ExecResult {
    int_mods(i, true)?;
    let clamp = i.mods.clamp;
    binary(w, i, cx, [B32, B32], B32, |a, b| {
        let (a, b) = if rev { (b, a) } else { (a, b) };
        if signed {
            let (a, b) = (a as u32 as i32 as i64, b as u32 as i32 as i64);
            let r = if sub { a - b } else { a + b };
            let r = if clamp { r.clamp(i32::MIN.into(), i32::MAX.into()) } else { r };
            r as u64 & 0xffff_ffff
        } else {
            addsub(a as u32, b as u32, false, sub, clamp).0
        }
    })
}

/// 16-bit add/sub, saturating with clamp (unsigned or signed range).
fn add16(w: &mut Wave, i: &Instruction, cx: &mut Cx, sub: bool, rev: bool, signed: bool) -> ExecResult {
    int_mods(i, true)?;
    let clamp = i.mods.clamp;
    binary(w, i, cx, [B16, B16], B16, |a, b| {
        let (a, b) = if rev { (b, a) } else { (a, b) };
        let (a, b) = if signed { (sext(a, 16), sext(b, 16)) } else { (a as i64, b as i64) };
        let r = if sub { a - b } else { a + b };
        let r = match (clamp, signed) {
            (false, _) => r,
            (true, true) => r.clamp(i16::MIN.into(), i16::MAX.into()),
            (true, false) => r.clamp(0, 0xffff),
        };
        r as u64 & 0xffff
    })
}

/// 24-bit multiplies: the sources' low 24 bits, sign- or zero-extended; `hi` is bits 63:32 of
/// the 48-bit product.
fn mul24(a: u64, b: u64, signed: bool) -> u64 {
    if signed {
        (sext(a & 0xff_ffff, 24) * sext(b & 0xff_ffff, 24)) as u64
    } else {
        (a & 0xff_ffff) * (b & 0xff_ffff)
    }
}

/// v_mad_u64_u32 / v_mad_i64_i32 (VOP3b): the 64-bit product plus a 64-bit src2, carry-out is
/// bit 64 of the exact sum (the 65-bit result the RDNA3 ISA guide's pseudocode spells out).
fn mad64(w: &mut Wave, i: &Instruction, cx: &mut Cx, signed: bool) -> ExecResult {
    int_mods(i, false)?;
    lanes_mask(w, i, cx, [B32, B32, I64], I64, |_, [a, b, c]| {
        let r: i128 = if signed {
            i128::from(a as u32 as i32) * i128::from(b as u32 as i32) + i128::from(c as i64)
        } else {
            i128::from(a) * i128::from(b) + i128::from(c)
        };
        (r as u64, (r >> 64) & 1 != 0)
    })
}

/// v_mad_u16 / v_mad_i16 (gfx9 op_sel forms): the 16-bit result, saturating with clamp, goes to
/// the half op_sel[3] names and the other half is kept (LLVM 15
/// GCNSubtarget::zeroesHigh16BitsOfDest: gfx9 V_MAD_U16/I16 preserve the high bits); the
/// legacy (VI) encodings zero the high half.
fn mad16(w: &mut Wave, i: &Instruction, cx: &mut Cx, signed: bool, legacy: bool) -> ExecResult {
    int_mods(i, true)?;
    let clamp = i.mods.clamp;
    let f = move |a: u64, b: u64, c: u64| {
        let r = if signed { sext(a, 16) * sext(b, 16) + sext(c, 16) } else { (a * b + c) as i64 };
        let r = match (clamp, signed) {
            (false, _) => r,
            (true, true) => r.clamp(i16::MIN.into(), i16::MAX.into()),
            (true, false) => r.clamp(0, 0xffff),
        };
        r as u64 & 0xffff
    };
    if legacy {
        return ternary(w, i, cx, [B16, B16, B16], B16, f);
    }
    let d = i.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
    let old = read_operand(w, d, B32, cx)?;
    let s = super::fetch_all(w, i, cx, [B16, B16, B16])?;
    let hi = i.mods.op_sel & (1 << 3) != 0;
    let mask = active(w, i);
    let mut out = [0u64; LANES];
    for l in Wave::lanes(mask) {
        let r = f(s[0][l], s[1][l], s[2][l]);
        out[l] = if hi { (old[l] & 0xffff) | r << 16 } else { (old[l] & 0xffff_0000) | r };
    }
    // Written as a whole dword: the merge above already placed the half.
    let mut plain = *i;
    plain.mods.op_sel &= !(1 << 3);
    write_vector(w, d, &plain, &out, B32, mask)?;
    Ok(Flow::Next)
}

/// Signed and unsigned 32-bit comparisons for min/max/med3.
fn i32of(x: u32) -> i32 {
    x as i32
}

fn med3<T: Ord + Copy>(a: T, b: T, c: T) -> T {
    a.max(b).min(a.min(b).max(c))
}

/// Arithmetic: adds, subtracts, multiplies, min/max.
fn arith(op: Op) -> Option<Handler> {
    Some(match op {
        Op::VAddU32 => |w, i, cx| add32(w, i, cx, false, false, false),
        Op::VSubU32 => |w, i, cx| add32(w, i, cx, true, false, false),
        Op::VSubrevU32 => |w, i, cx| add32(w, i, cx, true, true, false),
        Op::VAddI32 => |w, i, cx| add32(w, i, cx, false, false, true),
        Op::VSubI32 => |w, i, cx| add32(w, i, cx, true, false, true),
        Op::VAddCoU32 => |w, i, cx| carry_op(w, i, cx, false, false, false),
        Op::VSubCoU32 => |w, i, cx| carry_op(w, i, cx, true, false, false),
        Op::VSubrevCoU32 => |w, i, cx| carry_op(w, i, cx, true, true, false),
        Op::VAddcCoU32 => |w, i, cx| carry_op(w, i, cx, false, false, true),
        Op::VSubbCoU32 => |w, i, cx| carry_op(w, i, cx, true, false, true),
        Op::VSubbrevCoU32 => |w, i, cx| carry_op(w, i, cx, true, true, true),
        // gfx10 renames: the _nc ("no carry") adds are gfx9's v_add_u32/v_add_i32, the _co_ci
        // forms gfx9's v_addc_co_u32 (RDNA2 ISA guide, VOP2/VOP3 opcode tables).
        Op::VAddNcU32 => |w, i, cx| add32(w, i, cx, false, false, false),
        Op::VSubNcU32 => |w, i, cx| add32(w, i, cx, true, false, false),
        Op::VSubrevNcU32 => |w, i, cx| add32(w, i, cx, true, true, false),
        Op::VAddNcI32 => |w, i, cx| add32(w, i, cx, false, false, true),
        Op::VSubNcI32 => |w, i, cx| add32(w, i, cx, true, false, true),
        Op::VAddCoCiU32 => |w, i, cx| carry_op(w, i, cx, false, false, true),
        Op::VSubCoCiU32 => |w, i, cx| carry_op(w, i, cx, true, false, true),
        Op::VSubrevCoCiU32 => |w, i, cx| carry_op(w, i, cx, true, true, true),
        Op::VAdd3U32 => |w, i, cx| u3(w, i, cx, |a, b, c| a.wrapping_add(b).wrapping_add(c)),
        Op::VXadU32 => |w, i, cx| u3(w, i, cx, |a, b, c| (a ^ b).wrapping_add(c)),
        Op::VMulLoU32 => |w, i, cx| u2(w, i, cx, u32::wrapping_mul),
        Op::VMulHiU32 => |w, i, cx| u2(w, i, cx, |a, b| ((u64::from(a) * u64::from(b)) >> 32) as u32),
        Op::VMulHiI32 => |w, i, cx| u2(w, i, cx, |a, b| ((i64::from(a as i32) * i64::from(b as i32)) >> 32) as u32),
        Op::VMulU32U24 => |w, i, cx| u2(w, i, cx, |a, b| mul24(a.into(), b.into(), false) as u32),
        Op::VMulHiU32U24 => |w, i, cx| u2(w, i, cx, |a, b| (mul24(a.into(), b.into(), false) >> 32) as u32),
        Op::VMulI32I24 => |w, i, cx| u2(w, i, cx, |a, b| mul24(a.into(), b.into(), true) as u32),
        Op::VMulHiI32I24 => |w, i, cx| u2(w, i, cx, |a, b| (mul24(a.into(), b.into(), true) >> 32) as u32),
        Op::VMadU32U24 => |w, i, cx| u3(w, i, cx, |a, b, c| (mul24(a.into(), b.into(), false) as u32).wrapping_add(c)),
        Op::VMadI32I24 => |w, i, cx| u3(w, i, cx, |a, b, c| (mul24(a.into(), b.into(), true) as u32).wrapping_add(c)),
        Op::VMadU64U32 => |w, i, cx| mad64(w, i, cx, false),
        Op::VMadI64I32 => |w, i, cx| mad64(w, i, cx, true),
        Op::VMinU32 => |w, i, cx| u2(w, i, cx, u32::min),
        Op::VMaxU32 => |w, i, cx| u2(w, i, cx, u32::max),
        Op::VMinI32 => |w, i, cx| u2(w, i, cx, |a, b| i32of(a).min(i32of(b)) as u32),
        Op::VMaxI32 => |w, i, cx| u2(w, i, cx, |a, b| i32of(a).max(i32of(b)) as u32),
        Op::VMin3U32 => |w, i, cx| u3(w, i, cx, |a, b, c| a.min(b).min(c)),
        Op::VMax3U32 => |w, i, cx| u3(w, i, cx, |a, b, c| a.max(b).max(c)),
        Op::VMed3U32 => |w, i, cx| u3(w, i, cx, med3),
        Op::VMin3I32 => |w, i, cx| u3(w, i, cx, |a, b, c| i32of(a).min(i32of(b)).min(i32of(c)) as u32),
        Op::VMax3I32 => |w, i, cx| u3(w, i, cx, |a, b, c| i32of(a).max(i32of(b)).max(i32of(c)) as u32),
        Op::VMed3I32 => |w, i, cx| u3(w, i, cx, |a, b, c| med3(i32of(a), i32of(b), i32of(c)) as u32),
        // Sums of absolute differences: per byte (sad_u8, sad_hi_u8 shifts the sum to bits
        // 31:16), per half (sad_u16), per dword (sad_u32), plus src2.
        Op::VSadU8 => |w, i, cx| u3(w, i, cx, |a, b, c| sad(a, b, 8).wrapping_add(c)),
        Op::VSadHiU8 => |w, i, cx| u3(w, i, cx, |a, b, c| (sad(a, b, 8) << 16).wrapping_add(c)),
        Op::VSadU16 => |w, i, cx| u3(w, i, cx, |a, b, c| sad(a, b, 16).wrapping_add(c)),
        Op::VSadU32 => |w, i, cx| u3(w, i, cx, |a, b, c| a.abs_diff(b).wrapping_add(c)),
        // Masked: bytes whose src1 (reference) byte is zero are left out (Mesa's
        // ac_nir_to_llvm passes NIR msad_4x8's zero-masked reference as v_msad_u8's src1).
        Op::VMsadU8 => |w, i, cx| {
            u3(w, i, cx, |a, b, c| {
                let byte = |x: u32, k: u32| (x >> (8 * k)) & 0xff;
                (0..4)
                    .filter(|&k| byte(b, k) != 0)
                    .map(|k| byte(a, k).abs_diff(byte(b, k)))
                    .sum::<u32>()
                    .wrapping_add(c)
            })
        },
        // Per byte: (a + b + the low bit of c's byte) / 2.
        Op::VLerpU8 => |w, i, cx| {
            u3(w, i, cx, |a, b, c| {
                (0..4).fold(0, |d, k| {
                    let byte = |x: u32| (x >> (8 * k)) & 0xff;
                    d | ((byte(a) + byte(b) + (byte(c) & 1)) >> 1) << (8 * k)
                })
            })
        },
        _ => return None,
    })
}

/// The sum of absolute differences of the `width`-bit parts of `a` and `b`.
fn sad(a: u32, b: u32, width: u32) -> u32 {
    let m = (1u32 << width) - 1;
    (0..32 / width).map(|k| ((a >> (k * width)) & m).abs_diff((b >> (k * width)) & m)).sum()
}

/// Bitwise, shift, bit-field and lane-count operations.
fn bits(op: Op) -> Option<Handler> {
    Some(match op {
        Op::VAndB32 => |w, i, cx| u2(w, i, cx, |a, b| a & b),
        Op::VOrB32 => |w, i, cx| u2(w, i, cx, |a, b| a | b),
        Op::VXorB32 => |w, i, cx| u2(w, i, cx, |a, b| a ^ b),
        Op::VXnorB32 => |w, i, cx| u2(w, i, cx, |a, b| !(a ^ b)),
        Op::VNotB32 => |w, i, cx| u1(w, i, cx, |a| !a),
        Op::VAndOrB32 => |w, i, cx| u3(w, i, cx, |a, b, c| (a & b) | c),
        Op::VXor3B32 => |w, i, cx| u3(w, i, cx, |a, b, c| a ^ b ^ c),
        Op::VOr3B32 => |w, i, cx| u3(w, i, cx, |a, b, c| a | b | c),
        // Shift amounts use the low 5 bits (the "rev" forms shift src1 by src0).
        Op::VLshlrevB32 => |w, i, cx| u2(w, i, cx, |s, v| v << (s & 31)),
        Op::VLshrrevB32 => |w, i, cx| u2(w, i, cx, |s, v| v >> (s & 31)),
        Op::VAshrrevI32 => |w, i, cx| u2(w, i, cx, |s, v| ((v as i32) >> (s & 31)) as u32),
        Op::VLshlrevB64 => |w, i, cx| shift64(w, i, cx, |v, s| v << s),
        Op::VLshrrevB64 => |w, i, cx| shift64(w, i, cx, |v, s| v >> s),
        Op::VAshrrevI64 => |w, i, cx| shift64(w, i, cx, |v, s| ((v as i64) >> s) as u64),
        Op::VLshlAddU32 => |w, i, cx| u3(w, i, cx, |a, s, c| (a << (s & 31)).wrapping_add(c)),
        Op::VAddLshlU32 => |w, i, cx| u3(w, i, cx, |a, b, s| a.wrapping_add(b) << (s & 31)),
        Op::VLshlOrB32 => |w, i, cx| u3(w, i, cx, |a, s, c| (a << (s & 31)) | c),
        Op::VBfeU32 => |w, i, cx| u3(w, i, cx, |v, o, n| bfe(v, o, n, false)),
        Op::VBfeI32 => |w, i, cx| u3(w, i, cx, |v, o, n| bfe(v, o, n, true)),
        Op::VBfiB32 => |w, i, cx| u3(w, i, cx, |m, a, b| (m & a) | (!m & b)),
        Op::VBfmB32 => bfm,
        Op::VAlignbitB32 => |w, i, cx| u3(w, i, cx, |a, b, s| ((u64::from(a) << 32 | u64::from(b)) >> (s & 31)) as u32),
        Op::VAlignbyteB32 => {
            |w, i, cx| u3(w, i, cx, |a, b, s| ((u64::from(a) << 32 | u64::from(b)) >> (8 * (s & 3))) as u32)
        }
        Op::VPermB32 => |w, i, cx| u3(w, i, cx, perm),
        Op::VBfrevB32 => |w, i, cx| u1(w, i, cx, u32::reverse_bits),
        // Find first bit: -1 when there is none (MI200 ISA guide V_FFBH_U32, V_FFBL_B32); ffbh_i32
        // counts from the MSB to the first bit that differs from the sign bit.
        Op::VFfbhU32 => |w, i, cx| u1(w, i, cx, |a| if a == 0 { u32::MAX } else { a.leading_zeros() }),
        Op::VFfblB32 => |w, i, cx| u1(w, i, cx, |a| if a == 0 { u32::MAX } else { a.trailing_zeros() }),
        Op::VFfbhI32 => |w, i, cx| {
            u1(w, i, cx, |a| match a as i32 {
                0 | -1 => u32::MAX,
                x if x < 0 => (!a).leading_zeros(),
                _ => a.leading_zeros(),
            })
        },
        Op::VBcntU32B32 => |w, i, cx| u2(w, i, cx, |a, b| a.count_ones().wrapping_add(b)),
        Op::VDot2cI32I16 => |w, i, cx| dotc(w, i, cx, 16),
        Op::VDot4cI32I8 => |w, i, cx| dotc(w, i, cx, 8),
        Op::VDot8cI32I4 => |w, i, cx| dotc(w, i, cx, 4),
        Op::VMbcntLoU32B32 => |w, i, cx| mbcnt(w, i, cx, false),
        Op::VMbcntHiU32B32 => |w, i, cx| mbcnt(w, i, cx, true),
        _ => return None,
    })
}

/// v_bfm_b32: a mask of src0[4:0] ones shifted left by src1[4:0].
fn bfm(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    u2(w, i, cx, |n, o| (((1u64 << (n & 31)) - 1) as u32) << (o & 31))
}

/// Bit-field extract: `n` bits (src2[4:0]) at offset `o` (src1[4:0]), zero- or sign-extended;
/// a field reaching past bit 31 takes the bits there are (as LLVM 15's AMDGPUInstCombineIntrinsic
/// folds amdgcn_ubfe/sbfe; the tests compare with it).
fn bfe(v: u32, o: u32, n: u32, signed: bool) -> u32 {
    let (o, n) = (o & 31, n & 31);
    if n == 0 {
        return 0;
    }
    if o + n < 32 {
        let x = v << (32 - o - n);
        if signed {
            ((x as i32) >> (32 - n)) as u32
        } else {
            x >> (32 - n)
        }
    } else if signed {
        ((v as i32) >> o) as u32
    } else {
        v >> o
    }
}

/// v_perm_b32: each destination byte picks a byte of {src0, src1} by the selector byte in src2
/// (MI200 ISA guide, V_PERM_B32 byte_permute): 0-7 a byte, 8-11 the sign of bytes 1/3/5/7
/// replicated, 12 zero, 13-255 0xff.
fn perm(a: u32, b: u32, sel: u32) -> u32 {
    let data = u64::from(a) << 32 | u64::from(b);
    (0..4).fold(0, |d, k| {
        let s = (sel >> (8 * k)) & 0xff;
        let byte = match s {
            0..=7 => (data >> (8 * s)) & 0xff,
            8..=11 => {
                let bit = 16 * (s - 8) + 15;
                if (data >> bit) & 1 != 0 {
                    0xff
                } else {
                    0
                }
            }
            12 => 0,
            _ => 0xff,
        };
        d | (byte as u32) << (8 * k)
    })
}

/// v_dot2c_i32_i16, v_dot4c_i32_i8, v_dot8c_i32_i4: the signed `bits`-wide parts of src0 and
/// src1 multiplied pairwise and summed into vdst (the "c" forms accumulate into vdst).
fn dotc(w: &mut Wave, i: &Instruction, cx: &mut Cx, bits: u32) -> ExecResult {
    int_mods(i, false)?;
    let s = super::fetch_all(w, i, cx, [B32, B32])?;
    let d = i.operand(Field::D).ok_or_else(|| ExecError::Invalid("no destination".into()))?;
    let acc = read_operand(w, d, B32, cx)?;
    let mask = active(w, i);
    let mut out = [0u64; LANES];
    for l in Wave::lanes(mask) {
        let part = |x: u64, k: u32| sext((x >> (k * bits)) & ((1 << bits) - 1), bits);
        let dot: i64 = (0..32 / bits).map(|k| part(s[0][l], k) * part(s[1][l], k)).sum();
        out[l] = (dot + sext(acc[l], 32)) as u64 & 0xffff_ffff;
    }
    write_vector(w, d, i, &out, B32, mask)?;
    Ok(Flow::Next)
}

/// v_mbcnt_lo/hi_u32_b32: the set bits of src0 among the lanes below this one (lanes 0-31 for
/// lo, 32-63 for hi), plus src1.
fn mbcnt(w: &mut Wave, i: &Instruction, cx: &mut Cx, hi: bool) -> ExecResult {
    int_mods(i, false)?;
    let s = super::fetch_all(w, i, cx, [B32, B32])?;
    let mask = active(w, i);
    let mut out = [0u64; LANES];
    for l in Wave::lanes(mask) {
        let below = (1u64 << l) - 1;
        let part = if hi { below >> 32 } else { below & 0xffff_ffff } as u32;
        out[l] = u64::from((s[0][l] as u32 & part).count_ones().wrapping_add(s[1][l] as u32));
    }
    super::write_vdst(w, i, &out, B32, mask)?;
    Ok(Flow::Next)
}

/// 16-bit and packing operations.
fn half(op: Op) -> Option<Handler> {
    Some(match op {
        Op::VAddU16 => |w, i, cx| add16(w, i, cx, false, false, false),
        Op::VSubU16 => |w, i, cx| add16(w, i, cx, true, false, false),
        Op::VSubrevU16 => |w, i, cx| add16(w, i, cx, true, true, false),
        Op::VAddI16 => |w, i, cx| add16(w, i, cx, false, false, true),
        Op::VSubI16 => |w, i, cx| add16(w, i, cx, true, false, true),
        Op::VAddNcU16 => |w, i, cx| add16(w, i, cx, false, false, false),
        Op::VSubNcU16 => |w, i, cx| add16(w, i, cx, true, false, false),
        Op::VAddNcI16 => |w, i, cx| add16(w, i, cx, false, false, true),
        Op::VSubNcI16 => |w, i, cx| add16(w, i, cx, true, false, true),
        Op::VMulLoU16 => |w, i, cx| h2(w, i, cx, u16::wrapping_mul),
        // Shift amounts use the low 4 bits.
        Op::VLshlrevB16 => |w, i, cx| h2(w, i, cx, |s, v| v << (s & 15)),
        Op::VLshrrevB16 => |w, i, cx| h2(w, i, cx, |s, v| v >> (s & 15)),
        Op::VAshrrevI16 => |w, i, cx| h2(w, i, cx, |s, v| ((v as i16) >> (s & 15)) as u16),
        Op::VMinU16 => |w, i, cx| h2(w, i, cx, u16::min),
        Op::VMaxU16 => |w, i, cx| h2(w, i, cx, u16::max),
        Op::VMinI16 => |w, i, cx| h2(w, i, cx, |a, b| (a as i16).min(b as i16) as u16),
        Op::VMaxI16 => |w, i, cx| h2(w, i, cx, |a, b| (a as i16).max(b as i16) as u16),
        Op::VMin3U16 => |w, i, cx| h3(w, i, cx, |a, b, c| a.min(b).min(c)),
        Op::VMax3U16 => |w, i, cx| h3(w, i, cx, |a, b, c| a.max(b).max(c)),
        Op::VMed3U16 => |w, i, cx| h3(w, i, cx, med3),
        Op::VMin3I16 => |w, i, cx| h3(w, i, cx, |a, b, c| (a as i16).min(b as i16).min(c as i16) as u16),
        Op::VMax3I16 => |w, i, cx| h3(w, i, cx, |a, b, c| (a as i16).max(b as i16).max(c as i16) as u16),
        Op::VMed3I16 => |w, i, cx| h3(w, i, cx, |a, b, c| med3(a as i16, b as i16, c as i16) as u16),
        Op::VMadU16 => |w, i, cx| mad16(w, i, cx, false, false),
        Op::VMadI16 => |w, i, cx| mad16(w, i, cx, true, false),
        Op::VMadLegacyU16 => |w, i, cx| mad16(w, i, cx, false, true),
        Op::VMadLegacyI16 => |w, i, cx| mad16(w, i, cx, true, true),
        // 16 x 16 + 32-bit src2, a 32-bit result.
        Op::VMadU32U16 => |w, i, cx| {
            int_mods(i, false)?;
            ternary(w, i, cx, [B16, B16, B32], B32, |a, b, c| (a * b + c) & 0xffff_ffff)
        },
        Op::VMadI32I16 => |w, i, cx| {
            int_mods(i, false)?;
            ternary(w, i, cx, [B16, B16, B32], B32, |a, b, c| {
                (sext(a, 16) * sext(b, 16) + c as i64) as u64 & 0xffff_ffff
            })
        },
        // Two 32-bit values saturated to 16 bits, src0 in the low half (MI200 ISA guide
        // V_CVT_PK_U16_U32 / V_CVT_PK_I16_I32).
        Op::VCvtPkU16U32 => |w, i, cx| u2(w, i, cx, |a, b| a.min(0xffff) | b.min(0xffff) << 16),
        Op::VCvtPkI16I32 => |w, i, cx| {
            u2(w, i, cx, |a, b| {
                let s = |x: u32| (x as i32).clamp(i16::MIN.into(), i16::MAX.into()) as u32 & 0xffff;
                s(a) | s(b) << 16
            })
        },
        // Two signed 16-bit halves saturated to unsigned bytes in bits 15:0.
        Op::VSatPkU8I16 => |w, i, cx| {
            u1(w, i, cx, |a| {
                let s = |x: u32| (x as u16 as i16).clamp(0, 255) as u32;
                s(a) | s(a >> 16) << 8
            })
        },
        _ => return None,
    })
}

#[cfg(test)]
#[path = "int_tests.rs"]
mod tests;
