//! The built-in soft kernels (the format is documented in `uapi::soft`).

use super::fault::{QueueFault, ERROR_INVALID_ARGUMENT, ERROR_INVALID_CODE_OBJECT, ERROR_INVALID_PACKET_FORMAT};
use super::mem::Mem;
use super::signal;
use std::sync::atomic::Ordering;
use std::time::Duration;
use uapi::aql::KernelDispatchPacket;
use uapi::soft::*;
use uapi::{FromBytes, IntoBytes};

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

/// Runs the dispatch `p` whose descriptor was already read from `kernel_object`.
pub fn run(mem: &mut Mem, p: &KernelDispatchPacket, desc: &SoftKernelDescriptor) -> Result<Ran, QueueFault> {
    let g = Geometry::of(p)?;
    let n = g.work_items();
    let ka = p.kernarg_address;
    let provided = desc.kernarg_size;
    match desc.builtin {
        SOFT_KERNEL_NOP => {}
        SOFT_KERNEL_FILL_U32 => {
            let a: FillArgs = args(mem, ka, provided)?;
            const CHUNK: u64 = 16384;
            let mut i = 0;
            while i < n {
                let k = CHUNK.min(n - i);
                let words = vec![a.value; k as usize];
                mem.write(a.dst.checked_add(i * 4).ok_or_else(|| overflow(a.dst))?, words.as_bytes())?;
                i += k;
            }
        }
        SOFT_KERNEL_COPY_BYTES => {
            let a: CopyArgs = args(mem, ka, provided)?;
            const CHUNK: u64 = 1 << 20;
            let mut buf = vec![0u8; CHUNK.min(n) as usize];
            let mut i = 0;
            while i < n {
                let k = CHUNK.min(n - i) as usize;
                mem.read(a.src.checked_add(i).ok_or_else(|| overflow(a.src))?, &mut buf[..k])?;
                mem.write(a.dst.checked_add(i).ok_or_else(|| overflow(a.dst))?, &buf[..k])?;
                i += k as u64;
            }
        }
        SOFT_KERNEL_ATOMIC_ADD_U64 => {
            let a: AtomicAddArgs = args(mem, ka, provided)?;
            for _ in 0..n {
                mem.fetch_add_i64(a.addr, a.value as i64, Ordering::AcqRel)?;
            }
        }
        SOFT_KERNEL_WRITE_FLAT_ID => {
            let a: FlatIdArgs = args(mem, ka, provided)?;
            write_flat_ids(mem, &g, &a)?;
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
    }
    Ok(Ran::Done { events: Vec::new() })
}

fn overflow(base: u64) -> QueueFault {
    QueueFault::Vm(crate::memory::vm::VmFault::Overflow { va: crate::memory::vm::GpuVa(base) })
}

/// One row (fixed y, z) at a time: flat ids and flat workgroup ids, partial workgroups included.
fn write_flat_ids(mem: &mut Mem, g: &Geometry, a: &FlatIdArgs) -> Result<(), QueueFault> {
    let [gx, gy, gz] = g.grid;
    let [wx, wy, wz] = g.workgroup;
    let groups_x = gx.div_ceil(wx);
    let groups_y = gy.div_ceil(wy);
    for z in 0..gz {
        for y in 0..gy {
            let row_start = x_flat(0, y, z, gx, gy);
            let ids: Vec<u32> = (0..gx).map(|x| x_flat(x, y, z, gx, gy) as u32).collect();
            mem.write(a.dst.checked_add(row_start * 4).ok_or_else(|| overflow(a.dst))?, ids.as_bytes())?;
            if a.wg_dst != 0 {
                let wgs: Vec<u32> =
                    (0..gx).map(|x| (x / wx + (y / wy) * groups_x + (z / wz) * groups_x * groups_y) as u32).collect();
                mem.write(a.wg_dst.checked_add(row_start * 4).ok_or_else(|| overflow(a.wg_dst))?, wgs.as_bytes())?;
            }
        }
    }
    Ok(())
}

fn x_flat(x: u64, y: u64, z: u64, gx: u64, gy: u64) -> u64 {
    x + y * gx + z * gx * gy
}
