//! Operands resolved from their encoding fields into a compact form an interpreter reads directly.

use std::fmt;

/// A resolved operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Operand {
    /// No operand (unused slot of an [`Instruction`](super::Instruction)'s operand array).
    #[default]
    None,
    /// Scalar registers `index..index+count` of the 128-entry scalar file: s0-s101, then
    /// flat_scratch (102-103), xnack_mask (104-105), vcc (106-107), ttmp0-15 (108-123), m0
    /// (124), null (125, reads 0, writes are discarded), exec (126-127), as the hardware
    /// numbers them.
    Sgpr { index: u8, count: u8 },
    /// Vector registers `v[index..index+count]`.
    Vgpr { index: u8, count: u8 },
    /// Accumulation registers `a[index..index+count]` (gfx90a).
    Agpr { index: u8, count: u8 },
    /// An inline integer constant (-16..=64).
    Int(i8),
    /// An inline floating-point constant.
    Float(InlineFloat),
    /// A 32-bit literal that follows the instruction.
    Literal(u32),
    /// A source that reads machine state (src_shared_base, src_vccz, src_scc, ...).
    Special(Special),
    /// An immediate field printed as a number (offsets, lane selects, 16-bit immediates).
    Imm(u32),
    /// `off`: an absent address or base (FLAT saddr, MUBUF vaddr).
    Off,
}

/// The inline floating-point constants (source encodings 240-248).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InlineFloat {
    Half,
    NegHalf,
    One,
    NegOne,
    Two,
    NegTwo,
    Four,
    NegFour,
    /// 1/(2*pi) (gfx8+).
    InvTwoPi,
}

impl InlineFloat {
    /// The value as an f64 (the operand's width decides how it is rounded).
    pub fn value(self) -> f64 {
        match self {
            InlineFloat::Half => 0.5,
            InlineFloat::NegHalf => -0.5,
            InlineFloat::One => 1.0,
            InlineFloat::NegOne => -1.0,
            InlineFloat::Two => 2.0,
            InlineFloat::NegTwo => -2.0,
            InlineFloat::Four => 4.0,
            InlineFloat::NegFour => -4.0,
            InlineFloat::InvTwoPi => 0.159_154_943_091_895_34,
        }
    }
}

/// Sources that read machine state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    SharedBase,
    SharedLimit,
    PrivateBase,
    PrivateLimit,
    PopsExitingWaveId,
    Vccz,
    Execz,
    Scc,
    LdsDirect,
}

/// Resolves a 9-bit source field (8-bit scalar fields use the low half of the same map).
/// `count` is the operand's width in dwords; `literal` the dword after the instruction.
pub fn source(value: u16, count: u8, literal: Option<u32>) -> Option<Operand> {
    Some(match value {
        // A 64-bit scalar operand ignores bit 0 of its register number, a wider one bits 1:0
        // (LLVM's disassembler reads them so; the ISA requires aligned tuples).
        0..=123 | 124 | 126 | 127 => Operand::Sgpr { index: align_sgpr(value as u8, count), count },
        125 => Operand::Sgpr { index: 125, count },
        128..=192 => Operand::Int((value - 128) as i8),
        193..=208 => Operand::Int(-((value - 192) as i8)),
        235 => Operand::Special(Special::SharedBase),
        236 => Operand::Special(Special::SharedLimit),
        237 => Operand::Special(Special::PrivateBase),
        238 => Operand::Special(Special::PrivateLimit),
        239 => Operand::Special(Special::PopsExitingWaveId),
        240 => Operand::Float(InlineFloat::Half),
        241 => Operand::Float(InlineFloat::NegHalf),
        242 => Operand::Float(InlineFloat::One),
        243 => Operand::Float(InlineFloat::NegOne),
        244 => Operand::Float(InlineFloat::Two),
        245 => Operand::Float(InlineFloat::NegTwo),
        246 => Operand::Float(InlineFloat::Four),
        247 => Operand::Float(InlineFloat::NegFour),
        248 => Operand::Float(InlineFloat::InvTwoPi),
        251 => Operand::Special(Special::Vccz),
        252 => Operand::Special(Special::Execz),
        253 => Operand::Special(Special::Scc),
        254 => Operand::Special(Special::LdsDirect),
        255 => Operand::Literal(literal?),
        256..=511 => Operand::Vgpr { index: (value - 256) as u8, count },
        _ => return None,
    })
}

/// The first register of a scalar tuple of `count` dwords named by `index`.
/// Only s0-s101 and ttmp0-15 align; the named registers (vcc, exec, ...) are taken as named.
pub fn align_sgpr(index: u8, count: u8) -> u8 {
    // Named registers, and tuples no scalar instruction has (an MFMA C matrix named by an
    // SGPR), are taken as they are.
    if !(index < 102 || (108..=123).contains(&index)) || count > 16 {
        return index;
    }
    match count {
        0 | 1 => index,
        2 => index & !1,
        _ => index & !3,
    }
}

/// Prints `prefix` + index or `prefix[first:last]`.
fn range(f: &mut fmt::Formatter<'_>, prefix: &str, index: u32, count: u8) -> fmt::Result {
    if count <= 1 {
        write!(f, "{prefix}{index}")
    } else {
        write!(f, "{prefix}[{index}:{}]", index + u32::from(count) - 1)
    }
}

/// Prints scalar registers by number (`s102`, `s[102:103]`), whatever their gfx9 names.
pub fn fmt_sgprs(f: &mut fmt::Formatter<'_>, index: u8, count: u8) -> fmt::Result {
    range(f, "s", index.into(), count)
}

/// Prints a scalar register range by LLVM's names.
fn sgpr(f: &mut fmt::Formatter<'_>, index: u8, count: u8) -> fmt::Result {
    let pair = |name: &str, f: &mut fmt::Formatter<'_>| -> fmt::Result {
        match count {
            2.. => f.write_str(name),
            _ => write!(f, "{name}_{}", if index.is_multiple_of(2) { "lo" } else { "hi" }),
        }
    };
    // No scalar tuple is wider than 16 (an MFMA C matrix named by an SGPR): LLVM prints the first.
    let count = if count > 16 { 1 } else { count };
    match index {
        0..=101 => range(f, "s", index.into(), count),
        102 | 103 => pair("flat_scratch", f),
        104 | 105 => pair("xnack_mask", f),
        106 | 107 => pair("vcc", f),
        108..=123 => range(f, "ttmp", u32::from(index) - 108, count),
        124 => f.write_str("m0"),
        125 => f.write_str("null"),
        126 | 127 => pair("exec", f),
        _ => write!(f, "s{index}"),
    }
}

/// Prints an operand in LLVM's syntax; `width` (dwords) picks 1/(2*pi)'s digits.
pub fn fmt_operand(f: &mut fmt::Formatter<'_>, op: &Operand, width: u8) -> fmt::Result {
    match *op {
        Operand::None => Ok(()),
        Operand::Sgpr { index, count } => sgpr(f, index, count),
        Operand::Vgpr { index, count } => range(f, "v", index.into(), count),
        Operand::Agpr { index, count } => range(f, "a", index.into(), count),
        Operand::Int(v) => write!(f, "{v}"),
        Operand::Float(InlineFloat::InvTwoPi) if width == 2 => f.write_str("0.15915494309189532"),
        Operand::Float(InlineFloat::InvTwoPi) => f.write_str("0.15915494"),
        Operand::Float(v) => write!(f, "{:?}", v.value()),
        Operand::Literal(v) => literal(f, v),
        Operand::Special(s) => f.write_str(match s {
            Special::SharedBase => "src_shared_base",
            Special::SharedLimit => "src_shared_limit",
            Special::PrivateBase => "src_private_base",
            Special::PrivateLimit => "src_private_limit",
            Special::PopsExitingWaveId => "src_pops_exiting_wave_id",
            Special::Vccz => "src_vccz",
            Special::Execz => "src_execz",
            Special::Scc => "src_scc",
            Special::LdsDirect => "src_lds_direct",
        }),
        Operand::Imm(v) => write!(f, "{v}"),
        Operand::Off => f.write_str("off"),
    }
}

/// LLVM prints a 32-bit literal whose value an inline constant could express as that constant.
fn literal(f: &mut fmt::Formatter<'_>, v: u32) -> fmt::Result {
    let i = v as i32;
    if (-16..=64).contains(&i) {
        return write!(f, "{i}");
    }
    let float = match v {
        0x3f00_0000 => "0.5",
        0xbf00_0000 => "-0.5",
        0x3f80_0000 => "1.0",
        0xbf80_0000 => "-1.0",
        0x4000_0000 => "2.0",
        0xc000_0000 => "-2.0",
        0x4080_0000 => "4.0",
        0xc080_0000 => "-4.0",
        0x3e22_f983 => "0.15915494",
        _ => return write!(f, "0x{v:x}"),
    };
    f.write_str(float)
}
