//! How the command processor touches a process's memory: every address goes through the
//! process GPU VM of the queue's GPU, with a small translation cache (a TLB) that a VM change
//! flushes, so the hot path does not take the VM lock per access.

use crate::faults::Faults;
use crate::memory::shm::{SharedRegion, ShmError};
use crate::memory::vm::{GpuVa, RegionBacking, VmFault};
use crate::owner::OwnerProcess;
use crate::process::Process;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const TLB_ENTRIES: usize = 8;

/// Serializes the device's read-modify-writes of USERPTR words (reached through the owner's
/// memory file, a load then a store): the engine and the shader workers update them from
/// several threads, and each update must not lose another's. They stay non-atomic against the
/// client's own CPU atomics, which no file access can join.
static USERPTR_RMW: parking_lot::Mutex<()> = parking_lot::const_mutex(());

#[derive(Debug, Clone)]
struct Entry {
    start: u64,
    end: u64,
    writable: bool,
    backing: RegionBacking,
}

/// A per-queue translation cache.
#[derive(Debug, Default)]
pub struct Tlb {
    generation: u64,
    entries: Vec<Entry>,
    next_victim: usize,
    /// The entry hit last: consecutive accesses mostly touch the same buffer.
    last: usize,
}

/// The memory of one process as one GPU sees it.
pub struct Mem<'a> {
    pub process: &'a Process,
    pub gpu_id: u32,
    tlb: &'a mut Tlb,
    faults: &'a Faults,
}

impl<'a> Mem<'a> {
    pub fn new(process: &'a Process, gpu_id: u32, tlb: &'a mut Tlb, faults: &'a Faults) -> Mem<'a> {
        let g = process.vm_generation();
        if tlb.generation != g {
            tlb.entries.clear();
            tlb.generation = g;
        }
        Mem { process, gpu_id, tlb, faults }
    }

    /// An injected VM fault on `[va, va + len)` (see crate::faults).
    fn injected(&self, va: u64, len: u64) -> Result<(), VmFault> {
        match self.faults.vm_fault_in(va, len) {
            Some(at) => Err(VmFault::Unmapped { va: GpuVa(at) }),
            None => Ok(()),
        }
    }

    /// The cached region holding `[va, va + len)`, filled from the VM on a miss.
    fn entry(&mut self, va: u64, len: u64) -> Option<&Entry> {
        let i = self.entry_index(va, len)?;
        self.tlb.entries.get(i)
    }

    fn entry_index(&mut self, va: u64, len: u64) -> Option<usize> {
        let end = va.checked_add(len)?;
        let hit = |e: &Entry| e.start <= va && end <= e.end;
        if self.tlb.entries.get(self.tlb.last).is_some_and(hit) {
            return Some(self.tlb.last);
        }
        if let Some(i) = self.tlb.entries.iter().position(hit) {
            self.tlb.last = i;
            return Some(i);
        }
        let vm = self.process.vm();
        let r = vm.region(self.gpu_id, GpuVa(va))?;
        let e = Entry { start: r.start.0, end: r.start.0 + r.len, writable: r.writable, backing: r.backing.clone() };
        drop(vm);
        if end > e.end {
            return None;
        }
        if self.tlb.entries.len() < TLB_ENTRIES {
            self.tlb.entries.push(e);
            Some(self.tlb.entries.len() - 1)
        } else {
            let i = self.tlb.next_victim % TLB_ENTRIES;
            self.tlb.next_victim = self.tlb.next_victim.wrapping_add(1);
            self.tlb.entries[i] = e;
            Some(i)
        }
    }

    /// Copies `buf.len()` bytes at `va` out of GPU memory.
    pub fn read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), VmFault> {
        self.injected(va, buf.len() as u64)?;
        let hit = self.entry_index(va, buf.len() as u64);
        match hit.map(|i| &self.tlb.entries[i]) {
            Some(Entry { start, backing: RegionBacking::File { file, offset }, .. }) => {
                let at = offset + (va - start) as usize;
                file.region().read(at, buf).map_err(|e| VmFault::from_shm(e, GpuVa(va)))
            }
            // USERPTR memory, or a range spanning regions: the VM's general path.
            _ => self.process.vm().read(self.gpu_id, GpuVa(va), buf),
        }
    }

    /// Copies `data` into GPU memory at `va`.
    pub fn write(&mut self, va: u64, data: &[u8]) -> Result<(), VmFault> {
        self.injected(va, data.len() as u64)?;
        let hit = self.entry_index(va, data.len() as u64);
        match hit.map(|i| &self.tlb.entries[i]) {
            Some(Entry { start, writable: true, backing: RegionBacking::File { file, offset }, .. }) => {
                let at = offset + (va - start) as usize;
                file.region().write(at, data).map_err(|e| VmFault::from_shm(e, GpuVa(va)))
            }
            _ => self.process.vm().write(self.gpu_id, GpuVa(va), data),
        }
    }

    /// Applies `f` to the atomic word at `va` in a shared file, or returns `Ok(None)` for a
    /// USERPTR word (the caller then goes through the owner's memory file).
    fn with_word<R>(
        &mut self,
        va: u64,
        write: bool,
        f: impl FnOnce(&SharedRegion, usize) -> Result<R, VmFault>,
    ) -> Result<Option<R>, VmFault> {
        self.with_sized_word(va, 8, write, f)
    }

    /// [`Mem::with_word`] for a naturally aligned word of `size` bytes.
    fn with_sized_word<R>(
        &mut self,
        va: u64,
        size: u64,
        write: bool,
        f: impl FnOnce(&SharedRegion, usize) -> Result<R, VmFault>,
    ) -> Result<Option<R>, VmFault> {
        if !va.is_multiple_of(size) {
            return Err(VmFault::Misaligned { va: GpuVa(va) });
        }
        self.injected(va, size)?;
        let i = self.entry_index(va, size).ok_or(VmFault::Unmapped { va: GpuVa(va) })?;
        let e = &self.tlb.entries[i];
        if write && !e.writable {
            return Err(VmFault::ReadOnly { va: GpuVa(va) });
        }
        match &e.backing {
            RegionBacking::File { file, offset } => f(file.region(), offset + (va - e.start) as usize).map(Some),
            RegionBacking::Userptr(_) => Ok(None),
        }
    }

    fn userptr_addr(&mut self, va: u64, len: u64) -> Result<(Arc<OwnerProcess>, u64), VmFault> {
        match self.entry(va, len) {
            Some(Entry { start, backing: RegionBacking::Userptr(c), .. }) => {
                Ok((c.owner().clone(), c.addr() + (va - start)))
            }
            _ => Err(VmFault::Unmapped { va: GpuVa(va) }),
        }
    }

    /// Atomically loads the u64 at `va`.
    pub fn load_u64(&mut self, va: u64, order: Ordering) -> Result<u64, VmFault> {
        if let Some(v) = self.with_word(va, false, |r, off| shm(va, r.with_u64(off, |w| w.load(order))))? {
            return Ok(v);
        }
        let mut b = [0u8; 8];
        let (memory, addr) = self.userptr_addr(va, 8)?;
        // SAFETY: inside a USERPTR region, whose `ClientAddr` contract keeps it valid for the
        // device while the region is mapped (the TLB entry's region is mapped: the TLB empties when
        // the VM changes).
        unsafe { memory.read(addr, &mut b) }.map_err(|_| VmFault::Userptr { va: GpuVa(va) })?;
        Ok(u64::from_ne_bytes(b))
    }

    /// Atomically stores the u64 at `va`.
    pub fn store_u64(&mut self, va: u64, value: u64, order: Ordering) -> Result<(), VmFault> {
        if let Some(()) = self.with_word(va, true, |r, off| shm(va, r.with_u64(off, |w| w.store(value, order))))? {
            return Ok(());
        }
        let (memory, addr) = self.userptr_addr(va, 8)?;
        // SAFETY: inside a USERPTR region, whose `ClientAddr` contract keeps it valid for the
        // device while the region is mapped (the TLB entry's region is mapped: the TLB empties when
        // the VM changes).
        unsafe { memory.write(addr, &value.to_ne_bytes()) }.map_err(|_| VmFault::Userptr { va: GpuVa(va) })
    }

    /// Atomically loads the u32 at `va` (PM4 and SDMA packets poll and write dwords).
    pub fn load_u32(&mut self, va: u64, order: Ordering) -> Result<u32, VmFault> {
        let atomic = |r: &SharedRegion, off: usize| shm(va, r.with_u32(off, |w| w.load(order)));
        if let Some(v) = self.with_sized_word(va, 4, false, atomic)? {
            return Ok(v);
        }
        let mut b = [0u8; 4];
        let (memory, addr) = self.userptr_addr(va, 4)?;
        // SAFETY: inside a USERPTR region, whose `ClientAddr` contract keeps it valid for the
        // device while the region is mapped (the TLB entry's region is mapped: the TLB empties when
        // the VM changes).
        unsafe { memory.read(addr, &mut b) }.map_err(|_| VmFault::Userptr { va: GpuVa(va) })?;
        Ok(u32::from_ne_bytes(b))
    }

    /// Atomically stores the u32 at `va`.
    pub fn store_u32(&mut self, va: u64, value: u32, order: Ordering) -> Result<(), VmFault> {
        let atomic = |r: &SharedRegion, off: usize| shm(va, r.with_u32(off, |w| w.store(value, order)));
        if let Some(()) = self.with_sized_word(va, 4, true, atomic)? {
            return Ok(());
        }
        let (memory, addr) = self.userptr_addr(va, 4)?;
        // SAFETY: inside a USERPTR region, whose `ClientAddr` contract keeps it valid for the
        // device while the region is mapped (the TLB entry's region is mapped: the TLB empties when
        // the VM changes).
        unsafe { memory.write(addr, &value.to_ne_bytes()) }.map_err(|_| VmFault::Userptr { va: GpuVa(va) })
    }

    /// Atomically adds `delta` to the i64 at `va`, returning the old value. On USERPTR memory
    /// (reached through the owner's memory file) the update is not atomic against the client.
    pub fn fetch_add_i64(&mut self, va: u64, delta: i64, order: Ordering) -> Result<i64, VmFault> {
        if let Some(old) = self.with_word(va, true, |r, off| shm(va, r.with_i64(off, |w| w.fetch_add(delta, order))))? {
            return Ok(old);
        }
        let _rmw = USERPTR_RMW.lock();
        let old = self.load_u64(va, order)? as i64;
        self.store_u64(va, old.wrapping_add(delta) as u64, order)?;
        Ok(old)
    }

    /// Atomically exchanges the i64 at `va`, returning the old value.
    pub fn swap_i64(&mut self, va: u64, value: i64, order: Ordering) -> Result<i64, VmFault> {
        if let Some(old) = self.with_word(va, true, |r, off| shm(va, r.with_i64(off, |w| w.swap(value, order))))? {
            return Ok(old);
        }
        let _rmw = USERPTR_RMW.lock();
        let old = self.load_u64(va, order)? as i64;
        self.store_u64(va, value as u64, order)?;
        Ok(old)
    }
}

impl Mem<'_> {
    /// An atomic read-modify-write of the naturally aligned u32 at `va` (the shader core's
    /// memory atomics): a compare-exchange loop on the shared word, so clients and other
    /// queues see one atomic update. Returns the old value. On USERPTR memory (reached through
    /// the owner's memory file) the update is not atomic against the client.
    pub fn update_u32(&mut self, va: u64, f: impl Fn(u32) -> u32) -> Result<u32, VmFault> {
        let atomic = |r: &SharedRegion, off: usize| {
            shm(
                va,
                r.with_u32(off, |w| match w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| Some(f(old))) {
                    Ok(old) | Err(old) => old,
                }),
            )
        };
        if let Some(old) = self.with_sized_word(va, 4, true, atomic)? {
            return Ok(old);
        }
        let _rmw = USERPTR_RMW.lock();
        let old = self.load_u32(va, Ordering::Acquire)?;
        self.store_u32(va, f(old), Ordering::Release)?;
        Ok(old)
    }

    /// [`Mem::update_u32`] for the naturally aligned u64 at `va`.
    pub fn update_u64(&mut self, va: u64, f: impl Fn(u64) -> u64) -> Result<u64, VmFault> {
        let atomic = |r: &SharedRegion, off: usize| {
            shm(
                va,
                r.with_u64(off, |w| match w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| Some(f(old))) {
                    Ok(old) | Err(old) => old,
                }),
            )
        };
        if let Some(old) = self.with_sized_word(va, 8, true, atomic)? {
            return Ok(old);
        }
        let _rmw = USERPTR_RMW.lock();
        let old = self.load_u64(va, Ordering::Acquire)?;
        self.store_u64(va, f(old), Ordering::Release)?;
        Ok(old)
    }
}

/// The VM fault of a failed shared-memory access at `va`.
fn shm<R>(va: u64, r: Result<R, ShmError>) -> Result<R, VmFault> {
    r.map_err(|e| VmFault::from_shm(e, GpuVa(va)))
}
