//! PM4 packets of compute (KFD_IOC_QUEUE_TYPE_COMPUTE) queues: the subset the soft command
//! processor runs, decoded as gfx9/gfx10 MEC firmware does (Linux amdgpu soc15d.h / nvd.h).
//!
//! A type-3 packet is a header dword (type 3 in bits 31:30, body dwords minus one in 29:16,
//! opcode in 15:8, compute shader type in bit 1) and its body. Supported:
//! - NOP (0x10): body skipped; a count of 0x3FFF is the one-dword filler amdgpu pads rings with.
//! - WRITE_DATA (0x37) to memory (DST_SEL 1, 2 or 5), incrementing or fixed address.
//! - RELEASE_MEM (0x49): DATA_SEL 0-4 (none, 32-bit data, 64-bit data, GPU clock, system
//!   clock) to memory, then INT_SEL 1 or 2 raises an end-of-pipe interrupt whose context id is
//!   the packet's INT_CTXID (see [`Interrupt`]).
//! - WAIT_REG_MEM (0x3C) on memory: `(*addr & mask) FUNCTION reference`, re-polled while false;
//!   the queue waits there as behind an AQL barrier.
//! - INDIRECT_BUFFER (0x3F): runs an IB of GPU VM memory (the ring runner keeps the IB stack).
//! - ACQUIRE_MEM (0x58): cache actions; this device has no caches to act on, so it is consumed.
//! - SET_SH_REG (0x76) of the compute registers, DISPATCH_DIRECT (0x15), SET_BASE (0x11) of the
//!   dispatch-indirect base and DISPATCH_INDIRECT (0x16): `compute.rs`.
//!
//! A type-2 packet is a one-dword filler. Everything else (type 0/1 register writes, other
//! opcodes, register targets) is a queue error that names what was refused.

use super::{Action, WaitFunction};
use crate::clock;
use crate::engine::fault::{QueueFault, ERROR_INVALID_PACKET_FORMAT};
use crate::engine::mem::Mem;
use crate::engine::runner::Interrupt;
use std::sync::atomic::Ordering;

pub const NOP: u8 = 0x10;
pub const WRITE_DATA: u8 = 0x37;
pub const WAIT_REG_MEM: u8 = 0x3C;
pub const INDIRECT_BUFFER: u8 = 0x3F;
pub const RELEASE_MEM: u8 = 0x49;
pub const ACQUIRE_MEM: u8 = 0x58;

/// The NOP count amdgpu's ring padding uses: the packet is its header alone.
const NOP_FILLER_COUNT: u32 = 0x3FFF;
/// amdkfd's CP end-of-pipe interrupt carries a whole 32-bit event id.
const EOP_CONTEXT_ID_BITS: u32 = 32;

fn bad(reason: String) -> QueueFault {
    QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, reason)
}

/// Opcode names for the error of a packet this device does not run.
fn opcode_name(op: u8) -> Option<&'static str> {
    Some(match op {
        0x1E => "ATOMIC_MEM",
        0x39 => "MEM_SEMAPHORE",
        0x40 => "COPY_DATA",
        0x46 => "EVENT_WRITE",
        0x50 => "DMA_DATA",
        0x79 => "SET_UCONFIG_REG",
        _ => return None,
    })
}

/// Dwords in the packet starting with `header`.
pub fn length(header: u32) -> Result<u64, QueueFault> {
    match header >> 30 {
        2 => Ok(1),
        3 => {
            let count = (header >> 16) & 0x3FFF;
            let op = (header >> 8) as u8;
            if op == NOP && count == NOP_FILLER_COUNT {
                return Ok(1);
            }
            Ok(u64::from(count) + 2)
        }
        t => Err(bad(format!("PM4 type-{t} packet {header:#010x}: register writes are not supported by this device"))),
    }
}

fn addr(lo: u32, hi: u32) -> u64 {
    u64::from(lo & !3) | u64::from(hi) << 32
}

/// Runs the packet `p` (header included, as long as [`length`] said).
pub fn exec(mem: &mut Mem, p: &[u32]) -> Result<Action, QueueFault> {
    if p[0] >> 30 == 2 {
        return Ok(Action::Done);
    }
    let op = (p[0] >> 8) as u8;
    let body = p.len() - 1;
    let need = |n: usize, name: &str| {
        if body < n {
            Err(bad(format!("PM4 {name} with {body} body dwords, it needs {n}")))
        } else {
            Ok(())
        }
    };
    match op {
        NOP | ACQUIRE_MEM => Ok(Action::Done),
        WRITE_DATA => {
            need(3, "WRITE_DATA")?;
            let ctl = p[1];
            let dst_sel = (ctl >> 8) & 0xF;
            if !matches!(dst_sel, 1 | 2 | 5) {
                return Err(bad(format!(
                    "PM4 WRITE_DATA to DST_SEL {dst_sel}: only memory destinations are supported"
                )));
            }
            let fixed = ctl & (1 << 16) != 0;
            let dst = addr(p[2], p[3]);
            for (i, v) in p[4..].iter().enumerate() {
                let at = if fixed { dst } else { dst.wrapping_add(4 * i as u64) };
                mem.store_u32(at, *v, Ordering::Release)?;
            }
            Ok(Action::Done)
        }
        RELEASE_MEM => {
            need(7, "RELEASE_MEM")?;
            let sel = p[2];
            let dst_sel = (sel >> 16) & 0x3;
            let int_sel = (sel >> 24) & 0x7;
            let data_sel = (sel >> 29) & 0x7;
            let dst = addr(p[3], p[4]);
            let data = u64::from(p[5]) | u64::from(p[6]) << 32;
            if dst_sel > 1 {
                return Err(bad(format!("PM4 RELEASE_MEM with DST_SEL {dst_sel}: only memory is supported")));
            }
            match data_sel {
                0 => {}
                1 => mem.store_u32(dst, data as u32, Ordering::Release)?,
                2 => mem.store_u64(dst, data, Ordering::Release)?,
                3 => mem.store_u64(dst, clock::gpu_clock_counter(), Ordering::Release)?,
                4 => mem.store_u64(dst, clock::system_clock_counter(), Ordering::Release)?,
                d => return Err(bad(format!("PM4 RELEASE_MEM with DATA_SEL {d} (GDS or reserved) is not supported"))),
            }
            match int_sel {
                0 | 3 => Ok(Action::Done),
                1 | 2 => Ok(Action::Interrupt(Interrupt { context_id: p[7], valid_bits: EOP_CONTEXT_ID_BITS })),
                i => Err(bad(format!("PM4 RELEASE_MEM with INT_SEL {i} is not supported"))),
            }
        }
        WAIT_REG_MEM => {
            need(6, "WAIT_REG_MEM")?;
            let ctl = p[1];
            let mem_space = (ctl >> 4) & 0x3;
            let operation = (ctl >> 6) & 0x3;
            if mem_space != 1 || operation != 0 {
                return Err(bad(format!(
                    "PM4 WAIT_REG_MEM with MEM_SPACE {mem_space} OPERATION {operation}: only memory polls are supported"
                )));
            }
            let f =
                WaitFunction::decode(ctl & 0x7).ok_or_else(|| bad("PM4 WAIT_REG_MEM function 7 is reserved".into()))?;
            let value = mem.load_u32(addr(p[2], p[3]), Ordering::Acquire)?;
            Ok(if f.holds(value & p[5], p[4]) { Action::Done } else { Action::Blocked })
        }
        INDIRECT_BUFFER => {
            need(3, "INDIRECT_BUFFER")?;
            if p[3] & (1 << 23) == 0 {
                return Err(bad("PM4 INDIRECT_BUFFER without its VALID bit".into()));
            }
            Ok(Action::Indirect {
                base: addr(p[1], p[2]),
                dwords: u64::from(p[3] & 0xFFFFF),
                chain: p[3] & (1 << 20) != 0,
            })
        }
        op => Err(bad(match opcode_name(op) {
            Some(name) => format!("PM4 opcode {op:#04x} {name} is not supported by this device"),
            None => format!("unknown PM4 opcode {op:#04x} (header {:#010x})", p[0]),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn type3(op: u8, count: u32) -> u32 {
        3 << 30 | count << 16 | u32::from(op) << 8
    }

    #[test]
    fn type3_lengths_are_the_count_plus_two() {
        assert_eq!(length(type3(NOP, 2)).unwrap(), 4);
        assert_eq!(length(type3(RELEASE_MEM, 6)).unwrap(), 8);
        assert_eq!(length(type3(WRITE_DATA, 0)).unwrap(), 2);
        assert_eq!(length(type3(WRITE_DATA, 0x3FFF)).unwrap(), 0x3FFF + 2, "the filler count is NOP's alone");
        assert_eq!(length(type3(NOP, 0x3FFF)).unwrap(), 1, "the one-dword filler");
        assert_eq!(length(type3(NOP, 1) | 0x2).unwrap(), 3, "the shader-type bit is not part of the count");
    }

    #[test]
    fn type2_is_a_filler_and_types_0_and_1_are_refused() {
        assert_eq!(length(0x8000_0000).unwrap(), 1);
        assert_eq!(length(0xBFFF_FFFF).unwrap(), 1);
        for header in [0x0000_0000, 0x4000_0000, 0x3FFF_FFFF] {
            let e = length(header).unwrap_err();
            assert!(
                matches!(&e, QueueFault::Invalid { code: ERROR_INVALID_PACKET_FORMAT, reason } if reason.contains("register writes")),
                "{header:#x}: {e}"
            );
        }
    }
}
