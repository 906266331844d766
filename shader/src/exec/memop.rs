//! What the vector memory families (FLAT/GLOBAL/SCRATCH, MUBUF, DS) share: the registers a
//! load fills or a store drains, how a sub-dword value is extended or placed, and where each byte
//! of a lane's access lives ([`Place`]), so one engine moves the data for all of them.
//!
//! An access is split into pieces by its addressing: a global access is one piece, a swizzled
//! private (scratch) access one piece per backing dword, a buffer access one piece per range
//! checked component. Every piece goes through [`Cx::mem`] or the workgroup's LDS; a fault of any
//! lane stops the instruction with [`ExecError::Memory`] before a register is written.

use super::operand::vreg_range;
use super::{Cx, ExecError, ExecResult, Flow};
use crate::isa::Operand;
use crate::mem::{AtomicOp, MemFault};
use crate::wave::{Wave, LANES};

/// The registers of a data or destination operand: VGPRs, or AGPRs when the instruction's acc
/// bit names them (gfx90a).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regs {
    pub agpr: bool,
    pub first: usize,
    pub count: usize,
}

impl Regs {
    /// The `count` registers `op` starts.
    pub fn of(w: &Wave, op: Option<Operand>, count: usize, what: &str) -> ExecResult<Regs> {
        let n = u8::try_from(count).map_err(|_| ExecError::Invalid(format!("{count} {what} registers")))?;
        match op {
            Some(Operand::Vgpr { index, .. }) => {
                Ok(Regs { agpr: false, first: vreg_range(w.v.len(), index, n, "v")?, count })
            }
            Some(Operand::Agpr { index, .. }) => {
                Ok(Regs { agpr: true, first: vreg_range(w.a.len(), index, n, "a")?, count })
            }
            _ => Err(ExecError::Invalid(format!("no {what} register"))),
        }
    }

    pub fn get(self, w: &Wave, k: usize, lane: usize) -> u32 {
        let file = if self.agpr { &w.a } else { &w.v };
        file[self.first + k][lane]
    }

    pub fn set(self, w: &mut Wave, k: usize, lane: usize, v: u32) {
        let file = if self.agpr { &mut w.a } else { &mut w.v };
        file[self.first + k][lane] = v;
    }

    /// The 64-bit value of registers `2k, 2k+1`.
    pub fn get64(self, w: &Wave, k: usize, lane: usize) -> u64 {
        u64::from(self.get(w, 2 * k, lane)) | u64::from(self.get(w, 2 * k + 1, lane)) << 32
    }
}

/// What a load or store moves per lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A byte or short, zero- or sign-extended to a dword by a load; a store writes the low bits.
    U8,
    I8,
    U16,
    I16,
    /// Whole dwords (1 to 4).
    Dwords(u8),
    /// A d16 load: 8 or 16 bits, extended to 16, into the low or (`hi`) high half of the
    /// register; the other half keeps its value (LLVM: "d16 preserves unused bits" on gfx9),
    /// or is zeroed under SRAM ECC ([`super::Apertures::sramecc`]).
    D16 {
        bytes: u8,
        signed: bool,
        hi: bool,
    },
    /// store_byte_d16_hi, store_short_d16_hi: the low bytes of the register's high half.
    StoreHi {
        bytes: u8,
    },
}

impl Kind {
    /// Bytes the access moves.
    pub fn bytes(self) -> usize {
        match self {
            Kind::U8 | Kind::I8 => 1,
            Kind::U16 | Kind::I16 => 2,
            Kind::Dwords(n) => 4 * usize::from(n),
            Kind::D16 { bytes, .. } | Kind::StoreHi { bytes } => usize::from(bytes),
        }
    }

    /// Registers of the data or destination operand.
    pub fn regs(self) -> usize {
        match self {
            Kind::Dwords(n) => usize::from(n),
            _ => 1,
        }
    }

    /// Register `k`'s value after a load of `data`; `old` is its value before (d16 keeps half).
    pub fn loaded(self, data: &[u8], k: usize, old: u32) -> u32 {
        let half = |signed: bool, bytes: u8| -> u32 {
            let v = if bytes == 1 {
                if signed {
                    data[0] as i8 as i16 as u16
                } else {
                    u16::from(data[0])
                }
            } else {
                u16::from_le_bytes([data[0], data[1]])
            };
            u32::from(v)
        };
        match self {
            Kind::U8 => u32::from(data[0]),
            Kind::I8 => data[0] as i8 as i32 as u32,
            Kind::U16 => u32::from(u16::from_le_bytes([data[0], data[1]])),
            Kind::I16 => i16::from_le_bytes([data[0], data[1]]) as i32 as u32,
            Kind::Dwords(_) => u32::from_le_bytes(data[4 * k..4 * k + 4].try_into().expect("4 bytes")),
            Kind::D16 { bytes, signed, hi: false } => old & 0xffff_0000 | half(signed, bytes),
            Kind::D16 { bytes, signed, hi: true } => old & 0xffff | half(signed, bytes) << 16,
            Kind::StoreHi { .. } => old,
        }
    }

    /// The bytes a store writes from the data registers `regs`.
    pub fn stored(self, regs: &[u32; 4], out: &mut [u8]) {
        match self {
            Kind::StoreHi { bytes } => out.copy_from_slice(&regs[0].to_le_bytes()[2..2 + usize::from(bytes)]),
            _ => {
                let mut all = [0u8; 16];
                for (k, r) in regs.iter().enumerate() {
                    all[4 * k..4 * k + 4].copy_from_slice(&r.to_le_bytes());
                }
                out.copy_from_slice(&all[..out.len()]);
            }
        }
    }
}

/// Where some bytes of a lane's access live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A GPU virtual address: goes through [`Cx::mem`].
    Mem(u64),
    /// A byte offset into the workgroup's LDS. An access past its end reads 0 and writes
    /// nothing: the GCN ISA manuals' rule for LDS addresses past the clamp (out-of-range reads
    /// return 0, writes are discarded), taken for gfx90a's allocation bound (unverified on
    /// hardware).
    Lds(u64),
    /// Outside a buffer's range: reads 0, writes are dropped (ISA manuals, MUBUF range checking).
    Void,
}

/// Where byte `off` of a lane's access is, and how many bytes from there are contiguous in the
/// same place (at least 1).
pub type Map<'a> = &'a dyn Fn(usize, u32) -> (Place, u32);

/// The address of private byte `pa` of `lane`: the wave's scratch interleaves its lanes by
/// dword (LLVM AMDGPUUsage "Address Spaces", Private: wavefront-scratch-base +
/// (private-address / 4) * wavefront-size * 4 + wavefront-lane-id * 4 + private-address % 4;
/// the same for buffer, scratch and flat instructions). Returns the bytes left in that dword.
pub fn private(base: u64, wave_size: u32, lane: usize, pa: u32) -> (Place, u32) {
    let va = base
        .wrapping_add(u64::from(pa / 4) * u64::from(wave_size) * 4)
        .wrapping_add(lane as u64 * 4)
        .wrapping_add(u64::from(pa % 4));
    (Place::Mem(va), 4 - pa % 4)
}

/// The LDS bytes `a..a+len`, `None` when any is past the end.
fn lds_range(lds_len: usize, a: u64, len: usize) -> Option<std::ops::Range<usize>> {
    let start = usize::try_from(a).ok()?;
    let end = start.checked_add(len)?;
    (end <= lds_len).then_some(start..end)
}

/// Reads `buf.len()` bytes of `lane`'s access.
pub fn read_lane(cx: &mut Cx, map: Map, lane: usize, buf: &mut [u8]) -> ExecResult<()> {
    let mut off = 0;
    while off < buf.len() {
        let (place, run) = map(lane, off as u32);
        let n = (run as usize).clamp(1, buf.len() - off);
        let piece = &mut buf[off..off + n];
        match place {
            Place::Mem(va) => cx.mem.read(va, piece)?,
            Place::Lds(a) => match lds_range(cx.lds.len(), a, n) {
                Some(r) => piece.copy_from_slice(&cx.lds[r]),
                None => piece.fill(0),
            },
            Place::Void => piece.fill(0),
        }
        off += n;
    }
    Ok(())
}

/// Writes `data` as `lane`'s access.
pub fn write_lane(cx: &mut Cx, map: Map, lane: usize, data: &[u8]) -> ExecResult<()> {
    let mut off = 0;
    while off < data.len() {
        let (place, run) = map(lane, off as u32);
        let n = (run as usize).clamp(1, data.len() - off);
        let piece = &data[off..off + n];
        match place {
            Place::Mem(va) => cx.mem.write(va, piece)?,
            Place::Lds(a) => {
                if let Some(r) = lds_range(cx.lds.len(), a, n) {
                    cx.lds[r].copy_from_slice(piece);
                }
            }
            Place::Void => {}
        }
        off += n;
    }
    Ok(())
}

/// Lanes (in lane order) whose whole accesses are one contiguous range of memory, so one
/// [`Memory`](crate::mem::Memory) call moves them all: the common case of consecutive work-items
/// reading consecutive elements, where a call per lane costs an address translation each.
struct Run {
    va: u64,
    lanes: [u8; LANES],
    n: usize,
}

impl Run {
    fn new() -> Run {
        Run { va: 0, lanes: [0; LANES], n: 0 }
    }

    /// Adds `lane`, whose access of `bytes` is at `va`, if it continues the run (or starts it).
    fn extend(&mut self, lane: usize, va: u64, bytes: usize) -> bool {
        if self.n > 0 && self.va.checked_add((self.n * bytes) as u64) != Some(va) {
            return false;
        }
        if self.n == 0 {
            self.va = va;
        }
        self.lanes[self.n] = lane as u8;
        self.n += 1;
        true
    }

    fn lanes(&self) -> impl Iterator<Item = usize> + '_ {
        self.lanes[..self.n].iter().map(|&l| usize::from(l))
    }
}

/// The address of `lane`'s whole access when it is one piece of memory.
fn whole_in_mem(map: Map, lane: usize, bytes: usize) -> Option<u64> {
    match map(lane, 0) {
        (Place::Mem(va), run) if run as usize >= bytes => Some(va),
        _ => None,
    }
}

/// `dst.copy_from_slice(src)` for one lane's access (1 to 16 bytes), with the common sizes as
/// constant-length copies: a library call per lane costs more than the copy.
#[inline(always)]
fn copy_small(dst: &mut [u8], src: &[u8]) {
    match src.len() {
        4 => dst[..4].copy_from_slice(&src[..4]),
        8 => dst[..8].copy_from_slice(&src[..8]),
        16 => dst[..16].copy_from_slice(&src[..16]),
        _ => dst.copy_from_slice(src),
    }
}

/// Reads the accesses of `run` into `got` (one read; lane by lane when that faults, so the
/// fault is the first faulting lane's, as without coalescing).
fn read_run(cx: &mut Cx, map: Map, kind: Kind, run: &Run, got: &mut [[u8; 16]; LANES]) -> ExecResult<()> {
    let bytes = kind.bytes();
    if run.n == 0 {
        return Ok(());
    }
    let mut buf = [0u8; 16 * LANES];
    let span = &mut buf[..run.n * bytes];
    if cx.mem.read(run.va, span).is_ok() {
        for (i, l) in run.lanes().enumerate() {
            copy_small(&mut got[l][..bytes], &span[i * bytes..(i + 1) * bytes]);
        }
        return Ok(());
    }
    for l in run.lanes() {
        read_lane(cx, map, l, &mut got[l][..bytes])?;
    }
    Ok(())
}

/// Loads every EXEC lane's access into `dst`. Registers are written only after every lane read.
pub fn load(w: &mut Wave, cx: &mut Cx, kind: Kind, dst: Regs, map: Map) -> ExecResult {
    let exec = w.exec();
    let keep = !cx.apertures.sramecc;
    let bytes = kind.bytes();
    let mut data = [[0u8; 16]; LANES];
    let mut run = Run::new();
    for l in Wave::lanes(exec) {
        match whole_in_mem(map, l, bytes) {
            Some(va) if run.extend(l, va, bytes) => {}
            va => {
                read_run(cx, map, kind, &run, &mut data)?;
                run = Run::new();
                match va {
                    Some(va) => _ = run.extend(l, va, bytes),
                    None => read_lane(cx, map, l, &mut data[l][..bytes])?,
                }
            }
        }
    }
    read_run(cx, map, kind, &run, &mut data)?;
    // Every lane has been read: write the registers, each from its own old value (d16).
    if let Kind::Dwords(n) = kind {
        // Whole dwords replace the registers (Kind::loaded without its per-lane dispatch).
        let file = if dst.agpr { &mut w.a } else { &mut w.v };
        for (k, reg) in file[dst.first..dst.first + usize::from(n)].iter_mut().enumerate() {
            for l in Wave::lanes(exec) {
                reg[l] = u32::from_le_bytes(data[l][4 * k..4 * k + 4].try_into().expect("4 bytes"));
            }
        }
        return Ok(Flow::Next);
    }
    for l in Wave::lanes(exec) {
        for k in 0..kind.regs() {
            let old = if keep { dst.get(w, k, l) } else { 0 };
            dst.set(w, k, l, kind.loaded(&data[l], k, old));
        }
    }
    Ok(Flow::Next)
}

/// The bytes lane `l` stores from its `data` registers.
fn store_bytes(w: &Wave, kind: Kind, data: Regs, l: usize) -> [u8; 16] {
    let mut buf = [0u8; 16];
    if let Kind::Dwords(n) = kind {
        // Whole registers, little-endian (Kind::stored's result without its staging copies).
        for k in 0..usize::from(n) {
            buf[4 * k..4 * k + 4].copy_from_slice(&data.get(w, k, l).to_le_bytes());
        }
        return buf;
    }
    let mut regs = [0u32; 4];
    for (k, r) in regs.iter_mut().enumerate().take(kind.regs()) {
        *r = data.get(w, k, l);
    }
    kind.stored(&regs, &mut buf[..kind.bytes()]);
    buf
}

/// Writes the accesses of `run` (one write; lane by lane when that faults, which rewrites the
/// same bytes up to the first faulting lane, as without coalescing).
fn write_run(w: &Wave, cx: &mut Cx, map: Map, kind: Kind, data: Regs, run: &Run) -> ExecResult<()> {
    let bytes = kind.bytes();
    if run.n == 0 {
        return Ok(());
    }
    let mut buf = [0u8; 16 * LANES];
    if let Kind::Dwords(n) = kind {
        // Whole registers, little-endian, straight into the run's bytes.
        let file = if data.agpr { &w.a } else { &w.v };
        let regs = &file[data.first..data.first + usize::from(n)];
        for (i, l) in run.lanes().enumerate() {
            for (k, reg) in regs.iter().enumerate() {
                buf[i * bytes + 4 * k..i * bytes + 4 * k + 4].copy_from_slice(&reg[l].to_le_bytes());
            }
        }
    } else {
        for (i, l) in run.lanes().enumerate() {
            copy_small(&mut buf[i * bytes..(i + 1) * bytes], &store_bytes(w, kind, data, l)[..bytes]);
        }
    }
    if cx.mem.write(run.va, &buf[..run.n * bytes]).is_ok() {
        return Ok(());
    }
    for (i, l) in run.lanes().enumerate() {
        write_lane(cx, map, l, &buf[i * bytes..(i + 1) * bytes])?;
    }
    Ok(())
}

/// Stores every EXEC lane's `data` registers, in lane order.
pub fn store(w: &mut Wave, cx: &mut Cx, kind: Kind, data: Regs, map: Map) -> ExecResult {
    let bytes = kind.bytes();
    let mut run = Run::new();
    for l in Wave::lanes(w.exec()) {
        match whole_in_mem(map, l, bytes) {
            Some(va) if run.extend(l, va, bytes) => {}
            va => {
                write_run(w, cx, map, kind, data, &run)?;
                run = Run::new();
                match va {
                    Some(va) => _ = run.extend(l, va, bytes),
                    None => write_lane(cx, map, l, &store_bytes(w, kind, data, l)[..bytes])?,
                }
            }
        }
    }
    write_run(w, cx, map, kind, data, &run).map(|()| Flow::Next)
}

/// A memory atomic of every EXEC lane: `data` holds the operand (cmpswap: the new value, then
/// the compare value), `ret` receives the old value when the instruction returns it (glc).
pub fn atomic(
    w: &mut Wave,
    cx: &mut Cx,
    op: AtomicOp,
    wide: bool,
    data: Regs,
    ret: Option<Regs>,
    map: Map,
) -> ExecResult {
    let size: u32 = if wide { 8 } else { 4 };
    let exec = w.exec();
    let mut old = [0u64; LANES];
    for l in Wave::lanes(exec) {
        let (src, cmp) = if wide {
            (data.get64(w, 0, l), if op == AtomicOp::CmpSwap { data.get64(w, 1, l) } else { 0 })
        } else {
            let cmp = if op == AtomicOp::CmpSwap { data.get(w, 1, l) } else { 0 };
            (u64::from(data.get(w, 0, l)), u64::from(cmp))
        };
        let (place, run) = map(l, 0);
        old[l] = match place {
            Place::Mem(va) => {
                // Atomics need natural alignment (Memory::atomic32/64); the unaligned access
                // mode covers loads and stores only.
                if !va.is_multiple_of(u64::from(size)) || run < size {
                    let reason = "misaligned atomic".to_string();
                    return Err(ExecError::Memory(MemFault { va, len: size.into(), write: true, reason }));
                }
                if wide {
                    cx.mem.atomic64(va, op, src, cmp)?
                } else {
                    u64::from(cx.mem.atomic32(va, op, src as u32, cmp as u32)?)
                }
            }
            Place::Lds(a) => match lds_range(cx.lds.len(), a, size as usize) {
                Some(r) => {
                    let mut b = [0u8; 8];
                    b[..r.len()].copy_from_slice(&cx.lds[r.clone()]);
                    let o = u64::from_le_bytes(b);
                    let new = if wide {
                        op.apply64(o, src, cmp)
                    } else {
                        u64::from(op.apply32(o as u32, src as u32, cmp as u32))
                    };
                    cx.lds[r].copy_from_slice(&new.to_le_bytes()[..size as usize]);
                    o
                }
                None => 0,
            },
            Place::Void => 0,
        };
    }
    if let Some(ret) = ret {
        for l in Wave::lanes(exec) {
            ret.set(w, 0, l, old[l] as u32);
            if wide {
                ret.set(w, 1, l, (old[l] >> 32) as u32);
            }
        }
    }
    Ok(Flow::Next)
}
