//! Signals in GPU memory (`amd_signal_t`), as ROCr lays them out.

use crate::memory::{GpuMemory, Kind};
use crate::Kfd;
use nix::errno::Errno;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};
use uapi::kfd::KFD_IOC_EVENT_SIGNAL;
use uapi::signal::*;

const SIGNAL_SIZE: u64 = 64;

/// `count` signals in one GPU buffer; signal `i` is the amd_signal_t at `va + 64 i`.
pub struct Signals {
    pub mem: GpuMemory,
    pub count: u64,
}

impl Signals {
    pub fn new(kfd: &Kfd, gpu_id: u32, count: u64) -> Result<Signals, Errno> {
        let mem = kfd.alloc(gpu_id, count * SIGNAL_SIZE, Kind::Gtt)?;
        for i in 0..count {
            mem.u64_at(i * SIGNAL_SIZE).store(AMD_SIGNAL_KIND_USER as u64, Ordering::Relaxed);
        }
        Ok(Signals { mem, count })
    }

    fn off(&self, i: u64) -> u64 {
        assert!(i < self.count, "signal {i} of {}", self.count);
        i * SIGNAL_SIZE
    }

    /// The hsa_signal_t handle: the GPU address of the amd_signal_t.
    pub fn handle(&self, i: u64) -> u64 {
        self.mem.addr(self.off(i))
    }

    pub fn value(&self, i: u64) -> &AtomicI64 {
        self.mem.i64_at(self.off(i) + AMD_SIGNAL_VALUE_OFFSET as u64)
    }

    pub fn start_ts(&self, i: u64) -> u64 {
        self.mem.u64_at(self.off(i) + AMD_SIGNAL_START_TS_OFFSET as u64).load(Ordering::Acquire)
    }

    pub fn end_ts(&self, i: u64) -> u64 {
        self.mem.u64_at(self.off(i) + AMD_SIGNAL_END_TS_OFFSET as u64).load(Ordering::Acquire)
    }

    /// Makes signal `i` an interrupt signal: a new KFD signal event, whose event-page slot
    /// becomes the mailbox. Returns the event id.
    pub fn attach_event(&self, kfd: &Kfd, i: u64) -> Result<u32, Errno> {
        let ev = kfd.create_event(self.mem.gpu_id(), KFD_IOC_EVENT_SIGNAL, false)?;
        let mailbox = kfd.mailbox(ev.event_slot_index).ok_or(Errno::EINVAL)?;
        let off = self.off(i);
        self.mem.u64_at(off + AMD_SIGNAL_EVENT_ID_OFFSET as u64).store(u64::from(ev.event_id), Ordering::Relaxed);
        self.mem.u64_at(off + AMD_SIGNAL_EVENT_MAILBOX_PTR_OFFSET as u64).store(mailbox, Ordering::Release);
        Ok(ev.event_id)
    }

    /// Spins (then yields) until signal `i` satisfies `pred` or `timeout` passes; returns the
    /// last value seen.
    pub fn wait(&self, i: u64, timeout: Duration, pred: impl Fn(i64) -> bool) -> Result<i64, i64> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let v = self.value(i).load(Ordering::Acquire);
            if pred(v) {
                return Ok(v);
            }
            if start.elapsed() >= timeout {
                return Err(v);
            }
            spins += 1;
            if spins > 256 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}
