//! SALU: SOP1, SOP2, SOPK and SOPC (scalar arithmetic, bit operations, EXEC manipulation,
//! compares into SCC, and the PC operations s_getpc/s_setpc/s_swappc/s_call).
//!
//! Semantics are the opcode descriptions of AMD's "Vega Instruction Set Architecture" (chapter
//! 12.1-12.4, SOP2/SOPK/SOP1/SOPC), which the "Instinct MI200 (CDNA2) ISA" repeats for gfx90a.
//! Most operations are pure functions of their sources and SCC ([`pure`]); the ones that touch
//! EXEC, the PC, M0-relative registers or hardware registers have their own handlers.

pub(super) mod hwreg;

use super::operand::{read_s32, read_s64, sdst, Ty};
use super::{unimplemented, Cx, ExecError, ExecResult, Flow};
use crate::isa::table::Field;
use crate::isa::{Instruction, Op, Operand};
use crate::wave::{Wave, EXEC, M0};

/// Runs one scalar ALU instruction.
type Handler = fn(&mut Wave, &Instruction, &mut Cx) -> ExecResult;

/// What a pure operation produces: the destination value (`None`: not written) and SCC
/// (`None`: unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Out {
    d: Option<u64>,
    scc: Option<bool>,
}

/// Writes `v`, SCC unchanged.
fn val(v: u64) -> Out {
    Out { d: Some(v), scc: None }
}

/// Writes `v` and SCC.
fn with_scc(v: u64, scc: bool) -> Out {
    Out { d: Some(v), scc: Some(scc) }
}

/// Writes `v`, SCC = `v != 0` (the bit operations).
fn nz32(v: u32) -> Out {
    with_scc(u64::from(v), v != 0)
}

fn nz64(v: u64) -> Out {
    with_scc(v, v != 0)
}

/// Only SCC (the compares).
fn cmp(c: bool) -> Out {
    Out { d: None, scc: Some(c) }
}

/// A pure operation of S0, S1 (0 when absent) and SCC. 32-bit operands arrive zero-extended.
type Pure = fn(u64, u64, bool) -> Out;

/// Sign-extends the low `bits` bits of `v`.
fn sext(v: u64, bits: u32) -> u64 {
    if bits == 0 {
        0
    } else if bits >= 64 {
        v
    } else {
        ((v << (64 - bits)) as i64 >> (64 - bits)) as u64
    }
}

/// `bits` ones (all 64 for `bits >= 64`).
fn ones(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// s_bfe: offset S1[5:0] (S1[4:0] for 32 bits), width S1[22:16]; the signed forms sign-extend
/// the field from its top bit. A width of 0 extracts nothing; a field past the top of the
/// source reads the bits the shift brings in (zeros, or sign bits for the signed forms: the
/// manual shifts S0.i).
fn bfe(s0: u64, s1: u64, size: u32, signed: bool) -> u64 {
    let offset = (s1 as u32) & (size - 1);
    let width = ((s1 >> 16) & 0x7f) as u32;
    let shifted = if signed { (sext(s0, size) as i64 >> offset) as u64 } else { s0 >> offset };
    let width = width.min(size);
    let v = shifted & ones(width);
    let v = if signed { sext(v, width) } else { v };
    v & ones(size)
}

/// s_flbit_i32 (signed): the number of bits before the first one that differs from the sign
/// bit, counted from the MSB; -1 when every bit equals the sign bit (0 and -1).
fn flbit_signed(v: u64, size: u32) -> u64 {
    let v = if v >> (size - 1) & 1 != 0 { !v & ones(size) } else { v };
    if v == 0 {
        u64::from(u32::MAX)
    } else {
        u64::from(v.leading_zeros() - (64 - size))
    }
}

/// s_flbit_i32_b32/b64: leading zeros from the MSB, -1 for 0.
fn flbit(v: u64, size: u32) -> u64 {
    if v == 0 {
        u64::from(u32::MAX)
    } else {
        u64::from(v.leading_zeros() - (64 - size))
    }
}

/// s_ff1: the index of the lowest one, -1 for none.
fn ff1(v: u64) -> u64 {
    if v == 0 {
        u64::from(u32::MAX)
    } else {
        u64::from(v.trailing_zeros())
    }
}

/// s_wqm: each quad of bits becomes all ones if any of its bits is set.
fn wqm(v: u64) -> u64 {
    (0..16).filter(|q| v >> (4 * q) & 0xf != 0).fold(0, |acc, q| acc | 0xf << (4 * q))
}

/// s_quadmask: bit q of the result is whether quad q of the source has a bit set.
fn quadmask(v: u64) -> u64 {
    (0..16).filter(|q| v >> (4 * q) & 0xf != 0).fold(0, |acc, q| acc | 1 << q)
}

/// s_bitreplicate_b64_b32: each source bit becomes two adjacent bits.
fn bitreplicate(v: u64) -> u64 {
    (0..32).filter(|b| v >> b & 1 != 0).fold(0, |acc, b| acc | 3 << (2 * b))
}

/// s_lshlN_add_u32: `(S0 << n) + S1` computed in 64 bits; SCC is whether it exceeds 32 bits.
fn lshl_add(s0: u64, s1: u64, n: u32) -> Out {
    let t = (s0 << n) + s1;
    with_scc(t & 0xffff_ffff, t >> 32 != 0)
}

fn i32_of(v: u64) -> i32 {
    v as u32 as i32
}

fn u32_of(v: u64) -> u32 {
    v as u32
}

/// The operations whose result depends only on their sources and SCC.
fn pure(op: Op) -> Option<Pure> {
    Some(match op {
        // Moves. s_cmov writes only when SCC is set.
        Op::SMovB32 | Op::SMovB64 => |a, _, _| val(a),
        Op::SCmovB32 | Op::SCmovB64 => |a, _, scc| Out { d: scc.then_some(a), scc: None },
        Op::SCselectB32 | Op::SCselectB64 => |a, b, scc| val(if scc { a } else { b }),

        // Integer arithmetic.
        Op::SAddU32 => |a, b, _| {
            let (v, c) = u32_of(a).overflowing_add(u32_of(b));
            with_scc(v.into(), c)
        },
        Op::SSubU32 => |a, b, _| {
            let (v, c) = u32_of(a).overflowing_sub(u32_of(b));
            with_scc(v.into(), c)
        },
        Op::SAddI32 => |a, b, _| {
            let (v, o) = i32_of(a).overflowing_add(i32_of(b));
            with_scc(u64::from(v as u32), o)
        },
        Op::SSubI32 => |a, b, _| {
            let (v, o) = i32_of(a).overflowing_sub(i32_of(b));
            with_scc(u64::from(v as u32), o)
        },
        Op::SAddcU32 => |a, b, scc| {
            let t = a + b + u64::from(scc);
            with_scc(t & 0xffff_ffff, t >> 32 != 0)
        },
        Op::SSubbU32 => |a, b, scc| {
            let v = u32_of(a).wrapping_sub(u32_of(b)).wrapping_sub(u32::from(scc));
            with_scc(v.into(), b + u64::from(scc) > a)
        },
        // min/max: SCC says whether S0 was chosen.
        Op::SMinI32 => |a, b, _| {
            let s0_lt = i32_of(a) < i32_of(b);
            with_scc(if s0_lt { a } else { b }, s0_lt)
        },
        Op::SMinU32 => |a, b, _| with_scc(a.min(b), a < b),
        Op::SMaxI32 => |a, b, _| {
            let s0_gt = i32_of(a) > i32_of(b);
            with_scc(if s0_gt { a } else { b }, s0_gt)
        },
        Op::SMaxU32 => |a, b, _| with_scc(a.max(b), a > b),
        Op::SMulI32 => |a, b, _| val(u32_of(a).wrapping_mul(u32_of(b)).into()),
        Op::SMulHiU32 => |a, b, _| val((a * b) >> 32),
        Op::SMulHiI32 => |a, b, _| {
            let p = i64::from(i32_of(a)) * i64::from(i32_of(b));
            val(u64::from((p >> 32) as u32))
        },
        Op::SAbsdiffI32 => |a, b, _| nz32(i32_of(a).wrapping_sub(i32_of(b)).unsigned_abs()),
        Op::SAbsI32 => |a, _, _| nz32(i32_of(a).unsigned_abs()),
        Op::SLshl1AddU32 => |a, b, _| lshl_add(a, b, 1),
        Op::SLshl2AddU32 => |a, b, _| lshl_add(a, b, 2),
        Op::SLshl3AddU32 => |a, b, _| lshl_add(a, b, 3),
        Op::SLshl4AddU32 => |a, b, _| lshl_add(a, b, 4),

        // Bitwise logic: SCC = result != 0.
        Op::SAndB32 | Op::SAndB64 => |a, b, _| nz64(a & b),
        Op::SOrB32 | Op::SOrB64 => |a, b, _| nz64(a | b),
        Op::SXorB32 | Op::SXorB64 => |a, b, _| nz64(a ^ b),
        Op::SAndn2B32 => |a, b, _| nz32(u32_of(a & !b)),
        Op::SAndn2B64 => |a, b, _| nz64(a & !b),
        Op::SOrn2B32 => |a, b, _| nz32(u32_of(a | !b)),
        Op::SOrn2B64 => |a, b, _| nz64(a | !b),
        Op::SNandB32 => |a, b, _| nz32(!u32_of(a & b)),
        Op::SNandB64 => |a, b, _| nz64(!(a & b)),
        Op::SNorB32 => |a, b, _| nz32(!u32_of(a | b)),
        Op::SNorB64 => |a, b, _| nz64(!(a | b)),
        Op::SXnorB32 => |a, b, _| nz32(!u32_of(a ^ b)),
        Op::SXnorB64 => |a, b, _| nz64(!(a ^ b)),
        Op::SNotB32 => |a, _, _| nz32(!u32_of(a)),
        Op::SNotB64 => |a, _, _| nz64(!a),

        // Shifts: the amount is S1[4:0] (S1[5:0] for 64 bits).
        Op::SLshlB32 => |a, b, _| nz32(u32_of(a) << (b & 31)),
        Op::SLshlB64 => |a, b, _| nz64(a << (b & 63)),
        Op::SLshrB32 => |a, b, _| nz32(u32_of(a) >> (b & 31)),
        Op::SLshrB64 => |a, b, _| nz64(a >> (b & 63)),
        Op::SAshrI32 => |a, b, _| nz32((i32_of(a) >> (b & 31)) as u32),
        Op::SAshrI64 => |a, b, _| nz64(((a as i64) >> (b & 63)) as u64),

        // Bit fields.
        Op::SBfmB32 => |a, b, _| val(u64::from(u32_of(ones((a & 31) as u32) << (b & 31)))),
        Op::SBfmB64 => |a, b, _| val(ones((a & 63) as u32) << (b & 63)),
        Op::SBfeU32 => |a, b, _| nz64(bfe(a, b, 32, false)),
        Op::SBfeI32 => |a, b, _| nz64(bfe(a, b, 32, true)),
        Op::SBfeU64 => |a, b, _| nz64(bfe(a, b, 64, false)),
        Op::SBfeI64 => |a, b, _| nz64(bfe(a, b, 64, true)),
        Op::SBitset0B32 => |a, d, _| val(d & !(1 << (a & 31))),
        Op::SBitset0B64 => |a, d, _| val(d & !(1 << (a & 63))),
        Op::SBitset1B32 => |a, d, _| val(d | 1 << (a & 31)),
        Op::SBitset1B64 => |a, d, _| val(d | 1 << (a & 63)),
        Op::SBrevB32 => |a, _, _| val(u32_of(a).reverse_bits().into()),
        Op::SBrevB64 => |a, _, _| val(a.reverse_bits()),
        Op::SBcnt0I32B32 => |a, _, _| nz64(u64::from(u32_of(a).count_zeros())),
        Op::SBcnt0I32B64 => |a, _, _| nz64(u64::from(a.count_zeros())),
        Op::SBcnt1I32B32 | Op::SBcnt1I32B64 => |a, _, _| nz64(u64::from(a.count_ones())),
        Op::SFf0I32B32 => |a, _, _| val(ff1(u64::from(!u32_of(a)))),
        Op::SFf0I32B64 => |a, _, _| val(ff1(!a)),
        Op::SFf1I32B32 | Op::SFf1I32B64 => |a, _, _| val(ff1(a)),
        Op::SFlbitI32B32 => |a, _, _| val(flbit(a, 32)),
        Op::SFlbitI32B64 => |a, _, _| val(flbit(a, 64)),
        Op::SFlbitI32 => |a, _, _| val(flbit_signed(a, 32)),
        Op::SFlbitI32I64 => |a, _, _| val(flbit_signed(a, 64)),
        Op::SSextI32I8 => |a, _, _| val(sext(a, 8) & 0xffff_ffff),
        Op::SSextI32I16 => |a, _, _| val(sext(a, 16) & 0xffff_ffff),
        Op::SWqmB32 => |a, _, _| nz64(wqm(a) & 0xffff_ffff),
        Op::SWqmB64 => |a, _, _| nz64(wqm(a)),
        Op::SQuadmaskB32 => |a, _, _| nz64(quadmask(a & 0xffff_ffff)),
        Op::SQuadmaskB64 => |a, _, _| nz64(quadmask(a)),
        Op::SBitreplicateB64B32 => |a, _, _| val(bitreplicate(a)),
        Op::SPackLlB32B16 => |a, b, _| val((a & 0xffff) | (b & 0xffff) << 16),
        Op::SPackLhB32B16 => |a, b, _| val((a & 0xffff) | (b & 0xffff_0000)),
        Op::SPackHhB32B16 => |a, b, _| val(a >> 16 | (b & 0xffff_0000)),

        // Compares (SOPC).
        Op::SCmpEqI32 | Op::SCmpEqU32 | Op::SCmpEqU64 => |a, b, _| cmp(a == b),
        Op::SCmpLgI32 | Op::SCmpLgU32 | Op::SCmpLgU64 => |a, b, _| cmp(a != b),
        Op::SCmpGtI32 => |a, b, _| cmp(i32_of(a) > i32_of(b)),
        Op::SCmpGeI32 => |a, b, _| cmp(i32_of(a) >= i32_of(b)),
        Op::SCmpLtI32 => |a, b, _| cmp(i32_of(a) < i32_of(b)),
        Op::SCmpLeI32 => |a, b, _| cmp(i32_of(a) <= i32_of(b)),
        Op::SCmpGtU32 => |a, b, _| cmp(a > b),
        Op::SCmpGeU32 => |a, b, _| cmp(a >= b),
        Op::SCmpLtU32 => |a, b, _| cmp(a < b),
        Op::SCmpLeU32 => |a, b, _| cmp(a <= b),
        Op::SBitcmp0B32 => |a, b, _| cmp(a >> (b & 31) & 1 == 0),
        Op::SBitcmp1B32 => |a, b, _| cmp(a >> (b & 31) & 1 == 1),
        Op::SBitcmp0B64 => |a, b, _| cmp(a >> (b & 63) & 1 == 0),
        Op::SBitcmp1B64 => |a, b, _| cmp(a >> (b & 63) & 1 == 1),
        _ => return None,
    })
}

/// s_bitset reads its destination as well (the bit is set in D, S0 names it).
fn reads_dst(op: Op) -> bool {
    matches!(op, Op::SBitset0B32 | Op::SBitset0B64 | Op::SBitset1B32 | Op::SBitset1B64)
}

/// A SOPK operation of D (the register) and the 16-bit immediate (raw). Sign- or
/// zero-extension of the immediate is the operation's.
type Sopk = fn(u32, u16, bool) -> Out;

fn simm(k: u16) -> u32 {
    k as i16 as i32 as u32
}

fn sopk(op: Op) -> Option<Sopk> {
    Some(match op {
        Op::SMovkI32 => |_, k, _| val(simm(k).into()),
        Op::SCmovkI32 => |_, k, scc| Out { d: scc.then_some(simm(k).into()), scc: None },
        Op::SCmpkEqI32 => |d, k, _| cmp(d == simm(k)),
        Op::SCmpkLgI32 => |d, k, _| cmp(d != simm(k)),
        Op::SCmpkGtI32 => |d, k, _| cmp(d as i32 > i32::from(k as i16)),
        Op::SCmpkGeI32 => |d, k, _| cmp(d as i32 >= i32::from(k as i16)),
        Op::SCmpkLtI32 => |d, k, _| cmp((d as i32) < i32::from(k as i16)),
        Op::SCmpkLeI32 => |d, k, _| cmp(d as i32 <= i32::from(k as i16)),
        // The unsigned compares zero-extend the immediate.
        Op::SCmpkEqU32 => |d, k, _| cmp(d == u32::from(k)),
        Op::SCmpkLgU32 => |d, k, _| cmp(d != u32::from(k)),
        Op::SCmpkGtU32 => |d, k, _| cmp(d > u32::from(k)),
        Op::SCmpkGeU32 => |d, k, _| cmp(d >= u32::from(k)),
        Op::SCmpkLtU32 => |d, k, _| cmp(d < u32::from(k)),
        Op::SCmpkLeU32 => |d, k, _| cmp(d <= u32::from(k)),
        // s_addk_i32: SCC is signed overflow, as s_add_i32.
        Op::SAddkI32 => |d, k, _| {
            let (v, o) = (d as i32).overflowing_add(i32::from(k as i16));
            with_scc(u64::from(v as u32), o)
        },
        Op::SMulkI32 => |d, k, _| val(d.wrapping_mul(simm(k)).into()),
        _ => return None,
    })
}

/// The EXEC operations of SOP1: `(new EXEC, what D receives)` from S0 and the old EXEC.
/// saveexec: D = old EXEC; wrexec: D = new EXEC. SCC = new EXEC != 0 for all.
type ExecOp = fn(u64, u64) -> (u64, bool);

fn exec_op(op: Op) -> Option<ExecOp> {
    // `true`: D receives the old EXEC (saveexec), `false`: the new one (wrexec).
    Some(match op {
        Op::SAndSaveexecB64 => |s, e| (s & e, true),
        Op::SOrSaveexecB64 => |s, e| (s | e, true),
        Op::SXorSaveexecB64 => |s, e| (s ^ e, true),
        Op::SAndn2SaveexecB64 => |s, e| (s & !e, true),
        Op::SOrn2SaveexecB64 => |s, e| (s | !e, true),
        Op::SNandSaveexecB64 => |s, e| (!(s & e), true),
        Op::SNorSaveexecB64 => |s, e| (!(s | e), true),
        Op::SXnorSaveexecB64 => |s, e| (!(s ^ e), true),
        Op::SAndn1SaveexecB64 => |s, e| (!s & e, true),
        Op::SOrn1SaveexecB64 => |s, e| (!s | e, true),
        Op::SAndn1WrexecB64 => |s, e| (!s & e, false),
        Op::SAndn2WrexecB64 => |s, e| (s & !e, false),
        // gfx10 wave32: the same operations on exec_lo (RDNA2 ISA guide, SOP1 opcodes 0x3c-0x49).
        Op::SAndSaveexecB32 => |s, e| (s & e, true),
        Op::SOrSaveexecB32 => |s, e| (s | e, true),
        Op::SXorSaveexecB32 => |s, e| (s ^ e, true),
        Op::SAndn2SaveexecB32 => |s, e| (s & !e, true),
        Op::SOrn2SaveexecB32 => |s, e| (s | !e, true),
        Op::SNandSaveexecB32 => |s, e| (!(s & e), true),
        Op::SNorSaveexecB32 => |s, e| (!(s | e), true),
        Op::SXnorSaveexecB32 => |s, e| (!(s ^ e), true),
        Op::SAndn1SaveexecB32 => |s, e| (!s & e, true),
        Op::SOrn1SaveexecB32 => |s, e| (!s | e, true),
        Op::SAndn1WrexecB32 => |s, e| (!s & e, false),
        Op::SAndn2WrexecB32 => |s, e| (s & !e, false),
        _ => return None,
    })
}

fn handler(op: Op) -> Option<Handler> {
    if pure(op).is_some() {
        return Some(run_pure);
    }
    if sopk(op).is_some() {
        return Some(run_sopk);
    }
    if exec_op(op).is_some() {
        return Some(run_exec);
    }
    Some(match op {
        Op::SGetpcB64 => |w, i, _| {
            // The address of the next instruction (step has advanced the PC past this one).
            write(w, i, Field::D, w.pc)?;
            Ok(Flow::Next)
        },
        Op::SRfeB64 => |w, i, cx| super::trap::ret(w, src(w, i, Field::S0, cx)?),
        Op::SSetpcB64 => |w, i, cx| {
            w.pc = src(w, i, Field::S0, cx)?;
            Ok(Flow::Next)
        },
        Op::SSwappcB64 => |w, i, cx| {
            let target = src(w, i, Field::S0, cx)?;
            write(w, i, Field::D, w.pc)?;
            w.pc = target;
            Ok(Flow::Next)
        },
        // s_call_b64: D = the next instruction's address; PC += simm16 * 4 from there.
        Op::SCallB64 => |w, i, _| {
            let k = imm16(i)?;
            write(w, i, Field::D, w.pc)?;
            w.pc = w.pc.wrapping_add_signed(i64::from(k as i16) * 4);
            Ok(Flow::Next)
        },
        // M0[7:0] = S0[7:0]: only the index; the indexing mode (s_set_gpr_idx_on) is what the
        // core lacks.
        Op::SSetGprIdxIdx => |w, i, cx| {
            let v = src(w, i, Field::S0, cx)? as u32;
            w.set_sreg(M0, (w.sreg(M0) & !0xff) | (v & 0xff));
            Ok(Flow::Next)
        },
        // gfx10 SOPK counter waits (the count is SDST + SIMM16) and s_version: every memory
        // access completes before the next instruction, so there is nothing to wait for.
        Op::SWaitcntVscnt | Op::SWaitcntVmcnt | Op::SWaitcntExpcnt | Op::SWaitcntLgkmcnt | Op::SVersion => {
            |_, _, _| Ok(Flow::Next)
        }
        Op::SMovrelsB32 | Op::SMovrelsB64 => movrels,
        Op::SMovreldB32 | Op::SMovreldB64 => movreld,
        Op::SGetregB32 => |w, i, cx| {
            let v = hwreg::get(w, cx, imm16(i)?, i.target.is_gfx10())?;
            w.set_sreg(sdst(operand(i, Field::D)?)?, v);
            Ok(Flow::Next)
        },
        Op::SSetregB32 => |w, i, cx| {
            // The register to write is encoded in the SDST field.
            let v = read_s32(w, operand(i, Field::D)?, Ty::B32, &cx.apertures)?;
            hwreg::set(w, imm16(i)?, v, i.target.is_gfx10())?;
            Ok(Flow::Next)
        },
        Op::SSetregImm32B32 => |w, i, cx| {
            let v = read_s32(w, operand(i, Field::K)?, Ty::B32, &cx.apertures)?;
            hwreg::set(w, imm16(i)?, v, i.target.is_gfx10())?;
            Ok(Flow::Next)
        },
        _ => return None,
    })
}

/// Why the core lacks an SALU operation it decodes.
fn missing(op: Op) -> &'static str {
    match op {
        // GPR indexing changes how every later VALU operand is read.
        Op::SSetGprIdxOn => "GPR indexing mode",
        Op::SCbranchIFork | Op::SCbranchGFork | Op::SCbranchJoin => "the fork/join mask stack",
        // s_rfe_restore_b64 returns restoring wave state from S1, which the core does not model.
        Op::SRfeRestoreB64 => "return from a trap handler restoring wave state",
        Op::SSetvskip => "VSKIP mode",
        _ => "",
    }
}

/// Whether this module runs `op`.
pub fn implements(op: Op) -> bool {
    handler(op).is_some()
}

pub fn exec(w: &mut Wave, inst: &Instruction, cx: &mut Cx) -> ExecResult {
    let h = handler(inst.op).ok_or_else(|| ExecError::Unimplemented(missing(inst.op).into()))?;
    h(w, inst, cx)
}

/// The operand of `field`; its absence is a decoder bug, reported as an invalid instruction.
fn operand(i: &Instruction, field: Field) -> ExecResult<Operand> {
    i.operand(field).ok_or_else(|| ExecError::Invalid(format!("no {field:?} operand")))
}

/// The width in dwords of the operand of `field` (1 when the instruction has none).
fn width(i: &Instruction, field: Field) -> u8 {
    i.info.slots.iter().find(|s| s.field == field).map_or(1, |s| s.width)
}

/// Reads the source of `field` at its width (32-bit values zero-extended).
fn src(w: &Wave, i: &Instruction, field: Field, cx: &Cx) -> ExecResult<u64> {
    let op = operand(i, field)?;
    if width(i, field) == 2 {
        read_s64(w, op, Ty::I64, &cx.apertures)
    } else {
        read_s32(w, op, Ty::B32, &cx.apertures).map(u64::from)
    }
}

/// Writes the destination of `field` at its width.
fn write(w: &mut Wave, i: &Instruction, field: Field, v: u64) -> ExecResult<()> {
    let d = sdst(operand(i, field)?)?;
    if width(i, field) == 2 {
        w.set_sreg64(d, v);
    } else {
        w.set_sreg(d, v as u32);
    }
    Ok(())
}

fn imm16(i: &Instruction) -> ExecResult<u16> {
    match operand(i, Field::Imm)? {
        Operand::Imm(v) => Ok(v as u16),
        op => Err(ExecError::Invalid(format!("{op:?} is not a 16-bit immediate"))),
    }
}

fn apply(w: &mut Wave, i: &Instruction, out: Out) -> ExecResult {
    if let Some(v) = out.d {
        write(w, i, Field::D, v)?;
    }
    if let Some(c) = out.scc {
        w.scc = c;
    }
    Ok(Flow::Next)
}

fn run_pure(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    let f = pure(i.op).ok_or_else(unimplemented)?;
    let a = src(w, i, Field::S0, cx)?;
    let b = if reads_dst(i.op) {
        src(w, i, Field::D, cx)?
    } else if i.operand(Field::S1).is_some() {
        src(w, i, Field::S1, cx)?
    } else {
        0
    };
    apply(w, i, f(a, b, w.scc))
}

fn run_sopk(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    let f = sopk(i.op).ok_or_else(unimplemented)?;
    let d = read_s32(w, operand(i, Field::D)?, Ty::B32, &cx.apertures)?;
    apply(w, i, f(d, imm16(i)?, w.scc))
}

fn run_exec(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    let f = exec_op(i.op).ok_or_else(unimplemented)?;
    let s = src(w, i, Field::S0, cx)?;
    if width(i, Field::D) == 1 {
        // The _b32 forms read and write exec_lo only, in wave64 too (RDNA2 ISA guide,
        // S_AND_SAVEEXEC_B32: "EXEC_LO = S0 & EXEC_LO; SCC = (EXEC_LO != 0)").
        let old = u64::from(w.sreg(EXEC));
        let (new, save_old) = f(s, old);
        let new = new & 0xffff_ffff;
        w.set_sreg(EXEC, new as u32);
        w.scc = new != 0;
        write(w, i, Field::D, if save_old { old } else { new })?;
        return Ok(Flow::Next);
    }
    let old = w.exec();
    let (new, save_old) = f(s, old);
    // Lanes past the wave's size do not exist (wave32 has no exec_hi lanes).
    let new = new & w.lane_mask();
    w.set_exec(new);
    w.scc = new != 0;
    let d = if save_old { old } else { new };
    write(w, i, Field::D, d)?;
    Ok(Flow::Next)
}

/// The scalar register `index + M0` for a `count`-dword access, checked against the file (the
/// manual leaves an index past it undefined; the core refuses it).
fn relative(w: &Wave, op: Operand, count: u8) -> ExecResult<u8> {
    let base = sdst(op)?;
    let index = u32::from(base) + w.sreg(M0);
    if index + u32::from(count) > 128 {
        return Err(ExecError::Invalid(format!("s{base} + M0 ({}) is past the scalar registers", w.sreg(M0))));
    }
    Ok(index as u8)
}

/// s_movrels: D = SGPR[S0 + M0].
fn movrels(w: &mut Wave, i: &Instruction, _: &mut Cx) -> ExecResult {
    let n = width(i, Field::S0);
    let s = relative(w, operand(i, Field::S0)?, n)?;
    let v = if n == 2 { w.sreg64(s) } else { u64::from(w.sreg(s)) };
    write(w, i, Field::D, v)?;
    Ok(Flow::Next)
}

/// s_movreld: SGPR[D + M0] = S0.
fn movreld(w: &mut Wave, i: &Instruction, cx: &mut Cx) -> ExecResult {
    let n = width(i, Field::D);
    let v = src(w, i, Field::S0, cx)?;
    let d = relative(w, operand(i, Field::D)?, n)?;
    if n == 2 {
        w.set_sreg64(d, v);
    } else {
        w.set_sreg(d, v as u32);
    }
    Ok(Flow::Next)
}

#[cfg(test)]
mod tests;
