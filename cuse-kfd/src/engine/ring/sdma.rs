//! SDMA packets of SDMA queues (KFD_IOC_QUEUE_TYPE_SDMA, SDMA_XGMI, SDMA_BY_ENG_ID): the subset
//! the soft command processor runs, in the gfx9+ encoding (Linux amdgpu
//! vega10_sdma_pkt_open.h, sdma_v5_*_pkt_open.h; counts are "minus one" since gfx9).
//!
//! The header dword holds the opcode in bits 7:0 and the sub-opcode in 15:8. Supported:
//! - NOP (0): skips its COUNT (bits 29:16) extra dwords.
//! - COPY (1) LINEAR (0): `count + 1` bytes from src to dst, or to two dsts with BROADCAST.
//! - WRITE (2) LINEAR (0): `count + 1` dwords of inline data to dst.
//! - FENCE (5): a 32-bit store.
//! - TRAP (6): an SDMA trap interrupt with the 28-bit INT_CONTEXT (see [`Interrupt`]).
//! - POLL_REGMEM (8) on memory: `(*addr & mask) FUNC value`, re-polled while false. On a
//!   register it is only accepted where it cannot wait: with HDP_FLUSH (amdgpu's HDP flush) or
//!   function ALWAYS (ROCr's HDP flush packet); there is no HDP or register file to touch.
//! - ATOMIC (10) with operation ADD64 (47): the 64-bit add ROCr's BlitSdma decrements
//!   completion signals with.
//! - CONST_FILL (11): `count + 1` bytes of the 1-, 2- or 4-byte pattern.
//! - TIMESTAMP (13) GET (1) and GET_GLOBAL (2): the 64-bit GPU clock counter.
//! - GCR (17, gfx10+): cache write-back / invalidate; no caches here, so it is consumed.
//!
//! Anything else is a queue error that names what was refused.

use super::{Action, WaitFunction};
use crate::clock;
use crate::engine::fault::{QueueFault, ERROR_INVALID_PACKET_FORMAT};
use crate::engine::mem::Mem;
use crate::engine::runner::Deadline;
use crate::engine::runner::Interrupt;
use std::sync::atomic::Ordering;

pub const OP_NOP: u8 = 0;
pub const OP_COPY: u8 = 1;
pub const OP_WRITE: u8 = 2;
pub const OP_FENCE: u8 = 5;
pub const OP_TRAP: u8 = 6;
pub const OP_POLL_REGMEM: u8 = 8;
pub const OP_ATOMIC: u8 = 10;
pub const OP_CONST_FILL: u8 = 11;
pub const OP_TIMESTAMP: u8 = 13;
pub const OP_GCR: u8 = 17;
/// The TC atomic operation of an SDMA ATOMIC packet: 64-bit add.
pub const ATOMIC_ADD64: u32 = 47;
pub const SUBOP_LINEAR: u8 = 0;
pub const SUBOP_TIMESTAMP_GET: u8 = 1;
pub const SUBOP_TIMESTAMP_GET_GLOBAL: u8 = 2;

/// amdkfd's SDMA trap interrupt carries 28 bits of event id.
const TRAP_CONTEXT_ID_BITS: u32 = 28;
/// Bytes a copy or fill moves per chunk, so a large one does not need a buffer its size; the
/// clock is read between chunks, and a packet whose time slice is over goes on in the next pass.
const CHUNK: u64 = 256 << 10;

fn bad(reason: String) -> QueueFault {
    QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason)
}

fn op_name(op: u8) -> Option<&'static str> {
    Some(match op {
        4 => "INDIRECT",
        7 => "SEM",
        9 => "COND_EXE",
        12 => "PTEPDE",
        14 => "SRBM_WRITE",
        15 => "PRE_EXE",
        16 => "DUMMY_TRAP",
        _ => return None,
    })
}

fn addr(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}

/// Dwords in the packet starting with `header`; `dword(i)` reads dword `i` of the packet, or
/// `None` if it is not there yet. `Ok(None)`: the length is not known yet.
pub fn length(
    header: u32,
    dword: impl FnOnce(u64) -> Result<Option<u32>, QueueFault>,
) -> Result<Option<u64>, QueueFault> {
    let op = header as u8;
    let sub_op = (header >> 8) as u8;
    let fixed = |n: u64| Ok(Some(n));
    match op {
        OP_NOP => fixed(1 + u64::from((header >> 16) & 0x3FFF)),
        OP_COPY if sub_op == SUBOP_LINEAR => fixed(if header & (1 << 27) != 0 { 9 } else { 7 }),
        OP_WRITE if sub_op == SUBOP_LINEAR => Ok(dword(3)?.map(|c| 5 + u64::from(c & 0x3F_FFFF))),
        OP_FENCE => fixed(4),
        OP_TRAP => fixed(2),
        OP_POLL_REGMEM => fixed(6),
        OP_ATOMIC => fixed(8),
        OP_CONST_FILL => fixed(5),
        OP_TIMESTAMP => fixed(3),
        OP_GCR => fixed(5),
        _ => Err(unsupported(header)),
    }
}

fn unsupported(header: u32) -> QueueFault {
    let (op, sub_op) = (header as u8, (header >> 8) as u8);
    bad(match op_name(op) {
        Some(name) => format!("SDMA {name} packet (op {op}) is not supported by this device"),
        None if matches!(op, OP_COPY | OP_WRITE | OP_TIMESTAMP) => {
            format!("SDMA op {op} sub-op {sub_op} is not supported by this device")
        }
        None => format!("unknown SDMA opcode {op} (header {header:#010x})"),
    })
}

/// Runs the packet `p` (header included, as long as [`length`] said). A COPY or CONST_FILL
/// starts `*resume` bytes in and stops once `deadline` has passed: it then returns
/// [`Action::Sliced`] with `*resume` moved on.
pub fn exec(mem: &mut Mem, p: &[u32], resume: &mut u64, deadline: Deadline) -> Result<Action, QueueFault> {
    let header = p[0];
    match header as u8 {
        OP_NOP => Ok(Action::Done),
        OP_COPY => {
            let bytes = u64::from(p[1] & 0x3FFF_FFFF) + 1;
            let src = addr(p[3], p[4]);
            let mut dsts = vec![addr(p[5], p[6])];
            if p.len() == 9 {
                dsts.push(addr(p[7], p[8]));
            }
            Ok(copy(mem, src, &dsts, bytes, resume, deadline)?)
        }
        OP_WRITE => {
            let dst = addr(p[1], p[2]);
            let data: Vec<u8> = p[4..].iter().flat_map(|d| d.to_le_bytes()).collect();
            mem.write(dst, &data)?;
            Ok(Action::Done)
        }
        OP_FENCE => {
            mem.store_u32(addr(p[1], p[2]), p[3], Ordering::Release)?;
            Ok(Action::Done)
        }
        OP_TRAP => {
            Ok(Action::Interrupt(Interrupt { context_id: p[1] & 0x0FFF_FFFF, valid_bits: TRAP_CONTEXT_ID_BITS }))
        }
        OP_POLL_REGMEM => {
            let hdp_flush = header & (1 << 26) != 0;
            let mem_poll = header & (1 << 31) != 0;
            let f = WaitFunction::decode((header >> 28) & 0x7)
                .ok_or_else(|| bad("SDMA POLL_REGMEM function 7 is reserved".into()))?;
            if !mem_poll {
                return if hdp_flush || matches!(f, WaitFunction::Always) {
                    Ok(Action::Done)
                } else {
                    Err(bad("SDMA POLL_REGMEM waiting on a register is not supported by this device".into()))
                };
            }
            let value = mem.load_u32(addr(p[1], p[2]), Ordering::Acquire)?;
            Ok(if f.holds(value & p[4], p[3]) { Action::Done } else { Action::Blocked })
        }
        OP_ATOMIC => {
            let operation = header >> 25;
            if operation != ATOMIC_ADD64 {
                return Err(bad(format!("SDMA ATOMIC operation {operation} is not supported (only ADD64, 47)")));
            }
            mem.fetch_add_i64(addr(p[1], p[2]), addr(p[3], p[4]) as i64, Ordering::AcqRel)?;
            Ok(Action::Done)
        }
        OP_GCR => Ok(Action::Done),
        OP_CONST_FILL => {
            let pattern = match header >> 30 {
                0 => p[3].to_le_bytes()[..1].to_vec(),
                1 => p[3].to_le_bytes()[..2].to_vec(),
                2 => p[3].to_le_bytes().to_vec(),
                s => return Err(bad(format!("SDMA CONST_FILL with FILLSIZE {s} is not supported"))),
            };
            Ok(fill(mem, addr(p[1], p[2]), &pattern, u64::from(p[4] & 0x3FFF_FFFF) + 1, resume, deadline)?)
        }
        OP_TIMESTAMP => match (header >> 8) as u8 {
            SUBOP_TIMESTAMP_GET | SUBOP_TIMESTAMP_GET_GLOBAL => {
                mem.write(addr(p[1], p[2]), &clock::gpu_clock_counter().to_le_bytes())?;
                Ok(Action::Done)
            }
            _ => Err(bad("SDMA TIMESTAMP SET (a local counter) is not supported by this device".into())),
        },
        _ => Err(unsupported(header)),
    }
}

/// Copies `bytes` from `src` to each of `dsts`, front to back, a chunk at a time, from byte
/// `*done` until the end or the deadline.
fn copy(
    mem: &mut Mem,
    src: u64,
    dsts: &[u64],
    bytes: u64,
    done: &mut u64,
    deadline: Deadline,
) -> Result<Action, QueueFault> {
    let mut buf = vec![0u8; (bytes - (*done).min(bytes)).min(CHUNK) as usize];
    while *done < bytes {
        let n = (bytes - *done).min(CHUNK) as usize;
        mem.read(src.wrapping_add(*done), &mut buf[..n])?;
        for d in dsts {
            mem.write(d.wrapping_add(*done), &buf[..n])?;
        }
        *done += n as u64;
        if *done < bytes && deadline.passed() {
            return Ok(Action::Sliced);
        }
    }
    Ok(Action::Done)
}

/// Fills `bytes` at `dst` with `pattern` repeated, from byte `*done` until the end or the
/// deadline.
fn fill(
    mem: &mut Mem,
    dst: u64,
    pattern: &[u8],
    bytes: u64,
    done: &mut u64,
    deadline: Deadline,
) -> Result<Action, QueueFault> {
    let chunk: Vec<u8> = pattern.iter().copied().cycle().take(bytes.min(CHUNK) as usize).collect();
    while *done < bytes {
        // CHUNK is a multiple of every pattern length, so each chunk starts on a pattern boundary.
        let n = (bytes - *done).min(CHUNK) as usize;
        mem.write(dst.wrapping_add(*done), &chunk[..n])?;
        *done += n as u64;
        if *done < bytes && deadline.passed() {
            return Ok(Action::Sliced);
        }
    }
    Ok(Action::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(op: u8, sub_op: u8) -> u32 {
        u32::from(op) | u32::from(sub_op) << 8
    }

    fn fixed(h: u32) -> Option<u64> {
        length(h, |_| panic!("a fixed-length packet read a body dword")).unwrap()
    }

    #[test]
    fn fixed_lengths_by_opcode() {
        assert_eq!(fixed(header(OP_NOP, 0)), Some(1));
        assert_eq!(fixed(header(OP_NOP, 0) | 3 << 16), Some(4), "NOP skips COUNT extra dwords");
        assert_eq!(fixed(header(OP_NOP, 0) | 0x3FFF << 16), Some(0x4000));
        assert_eq!(fixed(header(OP_COPY, SUBOP_LINEAR)), Some(7));
        assert_eq!(fixed(header(OP_COPY, SUBOP_LINEAR) | 1 << 27), Some(9), "broadcast copy");
        assert_eq!(fixed(header(OP_FENCE, 0)), Some(4));
        assert_eq!(fixed(header(OP_TRAP, 0)), Some(2));
        assert_eq!(fixed(header(OP_POLL_REGMEM, 0)), Some(6));
        assert_eq!(fixed(header(OP_ATOMIC, 0)), Some(8));
        assert_eq!(fixed(header(OP_CONST_FILL, 0)), Some(5));
        assert_eq!(fixed(header(OP_TIMESTAMP, SUBOP_TIMESTAMP_GET)), Some(3));
        assert_eq!(fixed(header(OP_GCR, 0)), Some(5));
    }

    #[test]
    fn a_write_is_as_long_as_its_dword_3_says() {
        let w = header(OP_WRITE, SUBOP_LINEAR);
        assert_eq!(length(w, |_| Ok(None)).unwrap(), None, "dword 3 is not there yet");
        let mut asked = None;
        assert_eq!(
            length(w, |i| {
                asked = Some(i);
                Ok(Some(2))
            })
            .unwrap(),
            Some(7)
        );
        assert_eq!(asked, Some(3));
        assert_eq!(length(w, |_| Ok(Some(0xFFC0_0000))).unwrap(), Some(5), "COUNT is 22 bits");
        let e = length(w, |_| Err(bad("unreadable".into()))).unwrap_err();
        assert!(e.to_string().contains("unreadable"), "{e}");
    }

    #[test]
    fn other_opcodes_and_sub_opcodes_are_refused_by_name() {
        let refused = |h: u32| length(h, |_| Ok(Some(0))).unwrap_err().to_string();
        assert!(refused(header(4, 0)).contains("SDMA INDIRECT packet (op 4)"));
        assert!(refused(header(OP_COPY, 1)).contains("op 1 sub-op 1"));
        assert!(refused(header(OP_WRITE, 1)).contains("op 2 sub-op 1"));
        assert!(refused(header(0x33, 0)).contains("unknown SDMA opcode 51"));
    }
}
