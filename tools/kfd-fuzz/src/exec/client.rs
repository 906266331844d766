//! The client side of simulated processes: the thunk (AQL queues, signals, the event page)
//! over a file that a kill takes away, and raw stores into backing files.

use super::check::fail;
use super::{Check, Harness, Kind, DOORBELL_SLICE, MAX_AQL_QUEUES};
use crate::ops::{self, Packet};
use cuse_kfd::{Device, EmbeddedFile, FileId};
use nix::errno::Errno;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use thunk::queue::AqlQueue;
use thunk::signal::Signals;
use thunk::transport::Transport;
use thunk::Kfd;
use uapi::IntoBytes;

// ---------------------------------------------------------------------------------------------
// Simulated processes.

/// A file the thunk of a simulated process talks through; taking it out is the kill.
pub(super) type SharedFile = Arc<Mutex<Option<EmbeddedFile>>>;

pub(super) struct SimTransport {
    pub(super) file: SharedFile,
    pub(super) device: Arc<Device>,
    pub(super) pid: u32,
    pub(super) runtime_dir: PathBuf,
}

impl Transport for SimTransport {
    unsafe fn ioctl(&self, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
        let f = self.file.lock();
        match f.as_ref() {
            // SAFETY: this method's contract, passed on.
            Some(file) => unsafe { file.ioctl(cmd, arg) },
            // The process is dead: its fd is closed.
            None => Err(Errno::EBADF),
        }
    }

    fn runtime_dir(&self) -> &std::path::Path {
        &self.runtime_dir
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn kick(&self) {
        self.device.kick();
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

pub struct Aql {
    pub q: AqlQueue,
    /// Only well-formed, never-blocking packets so far: everything submitted must be consumed.
    pub clean: bool,
}

/// The thunk side of a thunk process.
pub struct ThunkSide {
    pub(super) file: SharedFile,
    pub kfd: Kfd,
    pub queues: Vec<Aql>,
    pub signals: Vec<Signals>,
    /// Kernel descriptors and arguments for dispatches.
    pub scratch: Option<thunk::memory::GpuMemory>,
}

impl ThunkSide {
    pub(super) fn file_id(&self) -> Option<FileId> {
        self.file.lock().as_ref().map(|f| f.file_id())
    }

    /// The queue an operation's `q` names (modulo how many there are); none without queues.
    pub(super) fn queue(&mut self, q: u32) -> Option<&mut Aql> {
        let n = self.queues.len().max(1);
        self.queues.get_mut(q as usize % n)
    }
}

impl Harness {
    /// Stores into a raw process's backing file as its own mapping would: ring contents, read
    /// and write pointers, doorbells. A file that is not there (the object is gone, or the reply
    /// did not say its offset) is skipped.
    pub(super) fn file_write(&mut self, p: usize, target: ops::FileTarget, off: u64, bytes: &[u8]) -> Check {
        use cuse_kfd::memory::backing::{backing_path, doorbell_slice_offset, MmapSpace};
        use std::os::unix::fs::FileExt;
        let proc = &self.procs[p];
        let (path, at) = match target {
            ops::FileTarget::Buffer(h) => match proc.model.buffers.get(&h) {
                Some(b) if off < b.size => (backing_path(&self.root, proc.pid, MmapSpace::Render, b.mmap_offset), off),
                _ => return Ok(()),
            },
            ops::FileTarget::Doorbell(q) => match proc.model.queues.get(&q) {
                Some(m) => {
                    let slice = doorbell_slice_offset(m.doorbell_offset, DOORBELL_SLICE);
                    (backing_path(&self.root, proc.pid, MmapSpace::Kfd, slice), (m.doorbell_offset - slice) + off % 8)
                }
                None => return Ok(()),
            },
        };
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&path) {
            // Never past the end: a mapping cannot grow the file.
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let n = (len.saturating_sub(at) as usize).min(bytes.len());
            if n > 0 {
                let _ = f.write_at(&bytes[..n], at);
            }
            self.emb.device().kick();
        }
        Ok(())
    }

    pub(super) fn aql_create(&mut self, p: usize, slots: u32) -> Check {
        let gpu = self.gpus[0];
        let Some(t) = self.procs[p].thunk.as_mut() else { return Ok(()) };
        if t.queues.len() >= MAX_AQL_QUEUES {
            return Ok(());
        }
        let slots = u64::from(slots.clamp(16, 1024)).next_power_of_two();
        match AqlQueue::new(&t.kfd, gpu, slots) {
            Ok(q) => {
                t.queues.push(Aql { q, clean: true });
                Ok(())
            }
            Err(e) => fail(Kind::Model, format!("the thunk could not create an AQL queue of {slots} slots: {e}")),
        }
    }

    pub(super) fn aql_submit(&mut self, p: usize, q: u32, packet: &Packet) -> Check {
        use thunk::queue::packet as pk;
        let gpu = self.gpus[0];
        let Some(t) = self.procs[p].thunk.as_mut() else { return Ok(()) };
        if t.queues.is_empty() {
            return Ok(());
        }
        let sig = |t: &ThunkSide, s: Option<(u32, u32)>| -> u64 {
            match s {
                Some((s, i)) if !t.signals.is_empty() => {
                    let set = &t.signals[s as usize % t.signals.len()];
                    let i = u64::from(i) % set.count;
                    set.value(i).store(1, Ordering::Release);
                    set.handle(i)
                }
                _ => 0,
            }
        };
        let (bytes, clean) = match packet {
            Packet::BarrierAnd { signal } => (pk::barrier_and([0; 5], sig(t, *signal), false), true),
            Packet::BarrierOr => (pk::barrier_or([0; 5], 0, false), false),
            Packet::BarrierValue { signal, cond, value, mask } => {
                (pk::barrier_value(sig(t, Some(*signal)), *cond, *value, *mask, 0), false)
            }
            Packet::Dispatch { builtin, args, grid, wg, signal } => {
                if t.scratch.is_none() {
                    match t.kfd.alloc(gpu, 4096, thunk::memory::Kind::Gtt) {
                        Ok(m) => t.scratch = Some(m),
                        Err(e) => return fail(Kind::Model, format!("the thunk could not allocate 4 KiB: {e}")),
                    }
                }
                let scratch = t.scratch.as_ref().expect("allocated above");
                let desc = uapi::soft::SoftKernelDescriptor {
                    magic: uapi::soft::SOFT_KERNEL_MAGIC,
                    version: uapi::soft::SOFT_KERNEL_VERSION,
                    builtin: *builtin,
                    kernarg_size: 16,
                    ..Default::default()
                };
                scratch.write(0, desc.as_bytes());
                scratch.write(64, args.as_bytes());
                let grid = (*grid).clamp(1, 4096);
                let wg = (*wg).clamp(1, 1024);
                (pk::dispatch(scratch.va(), scratch.addr(64), [grid, 1, 1], [wg, 1, 1], sig(t, *signal), false), false)
            }
            Packet::Bogus { object, kernarg, grid, wg, setup } => {
                let mut b =
                    pk::dispatch(*object, *kernarg, [grid[0], grid[1], grid[2]], [wg[0], wg[1], wg[2]], 0, false);
                b[2..4].copy_from_slice(&setup.to_le_bytes());
                (b, false)
            }
        };
        let Some(a) = t.queue(q) else { return Ok(()) };
        let w = a.q.write_index().load(Ordering::Acquire);
        if w.wrapping_sub(a.q.read_index()) >= a.q.slots {
            return Ok(()); // full (or stalled): a producer would wait; the fuzzer moves on
        }
        a.clean &= clean;
        let index = a.q.write_index().fetch_add(1, Ordering::AcqRel);
        a.q.publish(index, &bytes);
        a.q.ring_doorbell(index);
        t.kfd.kick();
        Ok(())
    }
}
