//! The built-in soft kernels (the format is documented in `uapi::soft`).

use super::fault::{QueueFault, ERROR_INVALID_ARGUMENT, ERROR_INVALID_CODE_OBJECT, ERROR_INVALID_PACKET_FORMAT};
use super::mem::Mem;
use super::runner::Deadline;
use super::signal;
use std::sync::atomic::Ordering;
use std::time::Duration;
use uapi::aql::KernelDispatchPacket;
use uapi::soft::*;
use uapi::FromBytes;

/// Work-items one dispatch may have (keeps a hostile grid from stalling the device for hours).
pub const MAX_WORK_ITEMS: u64 = 1 << 28;
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// A dispatch's grid, checked.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    pub grid: [u64; 3],
    pub workgroup: [u64; 3],
}

impl Geometry {
    /// HSA rules: 1-3 dimensions, non-zero sizes, unused dimensions 1, at most 1024 work-items
    /// per workgroup.
    pub fn of(p: &KernelDispatchPacket) -> Result<Geometry, QueueFault> {
        let dims = p.setup & 0x3;
        let grid = [u64::from(p.grid_size_x), u64::from(p.grid_size_y), u64::from(p.grid_size_z)];
        let wg = [u64::from(p.workgroup_size_x), u64::from(p.workgroup_size_y), u64::from(p.workgroup_size_z)];
        let bad =
            |why: String| QueueFault::invalid(ERROR_INVALID_PACKET_FORMAT, format!("bad dispatch dimensions: {why}"));
        if dims == 0 {
            return Err(bad("setup has 0 dimensions".into()));
        }
        for d in 0..3 {
            if grid[d] == 0 || wg[d] == 0 {
                return Err(bad(format!("grid {grid:?} workgroup {wg:?} has a zero size")));
            }
            if d >= usize::from(dims) && (grid[d] != 1 || wg[d] != 1) {
                return Err(bad(format!("{dims}-dimensional dispatch with size in dimension {d}")));
            }
        }
        if wg.iter().product::<u64>() > 1024 {
            return Err(bad(format!("workgroup {wg:?} exceeds 1024 work-items")));
        }
        if grid.iter().product::<u64>() > MAX_WORK_ITEMS {
            return Err(bad(format!("grid {grid:?} exceeds {MAX_WORK_ITEMS} work-items")));
        }
        Ok(Geometry { grid, workgroup: wg })
    }

    pub fn work_items(&self) -> u64 {
        self.grid.iter().product()
    }
}

/// How a dispatch ends.
#[derive(Debug)]
pub enum Ran {
    /// Finished; `events` are KFD events its signal stores raised.
    Done { events: Vec<u32> },
    /// Still running for this long (the sleep kernel).
    Running(Duration),
    /// Started but not finished: the rest runs in later passes ([`Work::resume`]).
    Sliced(Work),
}

fn args<T: FromBytes>(mem: &mut Mem, kernarg: u64, provided: u32) -> Result<T, QueueFault> {
    let size = std::mem::size_of::<T>();
    if (provided as usize) < size {
        return Err(QueueFault::invalid(
            ERROR_INVALID_ARGUMENT,
            format!("kernel arguments are {provided} bytes, the kernel needs {size}"),
        ));
    }
    let mut buf = vec![0u8; size];
    mem.read(kernarg, &mut buf)?;
    Ok(T::read_from_bytes(&buf).expect("sized above"))
}

/// Runs the dispatch `p` whose descriptor was already read from `kernel_object`, until it ends
/// or `deadline` passes (then it returns [`Ran::Sliced`] with its progress).
pub fn run(
    mem: &mut Mem,
    p: &KernelDispatchPacket,
    desc: &SoftKernelDescriptor,
    deadline: Deadline,
) -> Result<Ran, QueueFault> {
    let g = Geometry::of(p)?;
    let n = g.work_items();
    let ka = p.kernarg_address;
    let provided = desc.kernarg_size;
    let op = match desc.builtin {
        SOFT_KERNEL_NOP => return Ok(Ran::Done { events: Vec::new() }),
        SOFT_KERNEL_FILL_U32 => {
            let a: FillArgs = args(mem, ka, provided)?;
            Op::Fill { dst: a.dst, value: a.value }
        }
        SOFT_KERNEL_COPY_BYTES => {
            let a: CopyArgs = args(mem, ka, provided)?;
            Op::Copy { src: a.src, dst: a.dst }
        }
        SOFT_KERNEL_ATOMIC_ADD_U64 => {
            let a: AtomicAddArgs = args(mem, ka, provided)?;
            Op::AtomicAdd { addr: a.addr, value: a.value }
        }
        SOFT_KERNEL_WRITE_FLAT_ID => {
            let a: FlatIdArgs = args(mem, ka, provided)?;
            Op::FlatId { geometry: g, dst: a.dst, wg_dst: a.wg_dst }
        }
        SOFT_KERNEL_SLEEP => {
            let a: SleepArgs = args(mem, ka, provided)?;
            return Ok(Ran::Running(Duration::from_nanos(a.nanoseconds).min(MAX_SLEEP)));
        }
        SOFT_KERNEL_SIGNAL_STORE => {
            let a: SignalStoreArgs = args(mem, ka, provided)?;
            let events = signal::store(mem, a.signal, a.value)?.into_iter().collect();
            return Ok(Ran::Done { events });
        }
        other => {
            return Err(QueueFault::invalid(
                ERROR_INVALID_CODE_OBJECT,
                format!("soft kernel descriptor names unknown builtin {other}"),
            ))
        }
    };
    let mut work = Work { op, next: 0, total: n };
    Ok(if work.resume(mem, deadline)? { Ran::Done { events: Vec::new() } } else { Ran::Sliced(work) })
}

/// The kernels whose work grows with the grid, decoded once (the packet and its arguments are
/// client memory and may change while the dispatch runs).
#[derive(Debug, Clone, Copy)]
enum Op {
    Fill { dst: u64, value: u32 },
    Copy { src: u64, dst: u64 },
    AtomicAdd { addr: u64, value: u64 },
    FlatId { geometry: Geometry, dst: u64, wg_dst: u64 },
}

impl Op {
    /// Work-items one chunk runs: between two looks at the clock, and what bounds the buffer a
    /// chunk needs (at most [`CHUNK_BYTES`]).
    fn chunk(&self) -> u64 {
        match self {
            Op::Fill { .. } | Op::FlatId { .. } => CHUNK_BYTES / 4,
            Op::Copy { .. } => CHUNK_BYTES,
            // Two process_vm_* calls per item on USERPTR memory.
            Op::AtomicAdd { .. } => 64,
        }
    }
}

/// Bytes of client data one chunk of a kernel moves through the daemon.
const CHUNK_BYTES: u64 = 64 << 10;

/// A dispatch part way through: work-items `next..total` are still to run.
#[derive(Debug)]
pub struct Work {
    op: Op,
    next: u64,
    total: u64,
}

impl Work {
    /// Runs chunks of the remaining work-items until all are done (`Ok(true)`) or `deadline`
    /// has passed (`Ok(false)`; at least one chunk ran).
    pub fn resume(&mut self, mem: &mut Mem, deadline: Deadline) -> Result<bool, QueueFault> {
        let chunk = self.op.chunk();
        let mut buf = Vec::new();
        while self.next < self.total {
            let (i, k) = (self.next, chunk.min(self.total - self.next));
            run_chunk(mem, &self.op, i, k, &mut buf)?;
            self.next += k;
            if self.next < self.total && deadline.passed() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Work-items `i..i + k` of `op`; `buf` is scratch space kept across chunks.
fn run_chunk(mem: &mut Mem, op: &Op, i: u64, k: u64, buf: &mut Vec<u8>) -> Result<(), QueueFault> {
    let at = |base: u64, off: u64| base.checked_add(off).ok_or_else(|| overflow(base));
    match *op {
        Op::Fill { dst, value } => {
            buf.clear();
            buf.extend((0..k).flat_map(|_| value.to_le_bytes()));
            mem.write(at(dst, i * 4)?, buf)?;
        }
        Op::Copy { src, dst } => {
            buf.resize(k as usize, 0);
            mem.read(at(src, i)?, buf)?;
            mem.write(at(dst, i)?, buf)?;
        }
        Op::AtomicAdd { addr, value } => {
            for _ in 0..k {
                mem.fetch_add_i64(addr, value as i64, Ordering::AcqRel)?;
            }
        }
        Op::FlatId { geometry, dst, wg_dst } => {
            // The flat id of a work-item is its index in the grid, so ids i..i+k are stored
            // at dst + 4i, and so are their flat workgroup ids at wg_dst + 4i.
            buf.clear();
            buf.extend((i..i + k).flat_map(|f| (f as u32).to_le_bytes()));
            mem.write(at(dst, i * 4)?, buf)?;
            if wg_dst != 0 {
                buf.clear();
                buf.extend((i..i + k).flat_map(|f| flat_workgroup(&geometry, f).to_le_bytes()));
                mem.write(at(wg_dst, i * 4)?, buf)?;
            }
        }
    }
    Ok(())
}

fn overflow(base: u64) -> QueueFault {
    QueueFault::Vm(crate::memory::vm::VmFault::Overflow { va: crate::memory::vm::GpuVa(base) })
}

/// The flat workgroup id of the work-item with flat id `f`, partial workgroups included.
fn flat_workgroup(g: &Geometry, f: u64) -> u32 {
    let [gx, gy, _] = g.grid;
    let [wx, wy, wz] = g.workgroup;
    let (x, y, z) = (f % gx, f / gx % gy, f / (gx * gy));
    let groups_x = gx.div_ceil(wx);
    let groups_y = gy.div_ceil(wy);
    (x / wx + (y / wy) * groups_x + (z / wz) * groups_x * groups_y) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_workgroup_ids_count_partial_workgroups() {
        // A 5x3x2 grid of 2x2x1 workgroups: 3 groups along x, 2 along y, 2 along z.
        let g = Geometry { grid: [5, 3, 2], workgroup: [2, 2, 1] };
        let id = |x: u64, y: u64, z: u64| flat_workgroup(&g, x + y * 5 + z * 15);
        assert_eq!(id(0, 0, 0), 0);
        assert_eq!(id(1, 1, 0), 0);
        assert_eq!(id(2, 0, 0), 1);
        assert_eq!(id(4, 0, 0), 2, "the last, partial group along x");
        assert_eq!(id(0, 2, 0), 3, "the second row of groups");
        assert_eq!(id(4, 2, 1), 11);
    }

    #[test]
    fn no_chunk_needs_more_than_a_mebibyte() {
        let g = Geometry { grid: [1 << 14, 1 << 14, 1], workgroup: [1, 1, 1] };
        for op in [
            Op::Fill { dst: 0, value: 0 },
            Op::Copy { src: 0, dst: 0 },
            Op::AtomicAdd { addr: 0, value: 0 },
            Op::FlatId { geometry: g, dst: 0, wg_dst: 0 },
        ] {
            let bytes = match op {
                Op::Copy { .. } => op.chunk(),
                Op::AtomicAdd { .. } => 0,
                _ => op.chunk() * 4,
            };
            assert!(bytes <= 1 << 20, "{op:?}: {bytes} bytes per chunk");
        }
    }
}
