//! The device's soft kernels (uapi::soft): one page of kernel descriptors per GPU, so a
//! dispatch's `kernel_object` can name a builtin; synchronous dispatches; and hsa_memory_copy,
//! done by the COPY_BYTES kernel on an internal queue.

use crate::memory::Allocation;
use crate::queue::QueueState;
use crate::runtime::Runtime;
use crate::signal::slot::SlotInit;
use crate::signal::{Condition, Order, WaitEnd, WaitHint};
use crate::status::{Error, Result, Status};
use crate::Agent;
use std::collections::HashMap;
use std::sync::Arc;
use thunk::memory::Kind;
use thunk::queue::packet;
use thunk::Kfd;
use uapi::signal::AMD_SIGNAL_KIND_USER;
use uapi::soft::*;
use uapi::IntoBytes;

/// A builtin soft kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Builtin {
    Nop = SOFT_KERNEL_NOP,
    FillU32 = SOFT_KERNEL_FILL_U32,
    CopyBytes = SOFT_KERNEL_COPY_BYTES,
    AtomicAddU64 = SOFT_KERNEL_ATOMIC_ADD_U64,
    WriteFlatId = SOFT_KERNEL_WRITE_FLAT_ID,
    Sleep = SOFT_KERNEL_SLEEP,
    SignalStore = SOFT_KERNEL_SIGNAL_STORE,
}

impl Builtin {
    pub const ALL: [Builtin; 7] = [
        Builtin::Nop,
        Builtin::FillU32,
        Builtin::CopyBytes,
        Builtin::AtomicAddU64,
        Builtin::WriteFlatId,
        Builtin::Sleep,
        Builtin::SignalStore,
    ];

    pub fn from_id(id: u32) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| *b as u32 == id)
    }

    /// Bytes of kernel arguments the builtin reads.
    pub fn kernarg_size(self) -> u32 {
        (match self {
            Builtin::Nop => 0,
            Builtin::FillU32 => size_of::<FillArgs>(),
            Builtin::CopyBytes => size_of::<CopyArgs>(),
            Builtin::AtomicAddU64 => size_of::<AtomicAddArgs>(),
            Builtin::WriteFlatId => size_of::<FlatIdArgs>(),
            Builtin::Sleep => size_of::<SleepArgs>(),
            Builtin::SignalStore => size_of::<SignalStoreArgs>(),
        }) as u32
    }

    fn name(self) -> &'static str {
        match self {
            Builtin::Nop => "nop",
            Builtin::FillU32 => "fill_u32",
            Builtin::CopyBytes => "copy_bytes",
            Builtin::AtomicAddU64 => "atomic_add_u64",
            Builtin::WriteFlatId => "write_flat_id",
            Builtin::Sleep => "sleep",
            Builtin::SignalStore => "signal_store",
        }
    }
}

/// The descriptors of every builtin, in one page of a GPU's memory.
pub struct KernelTable {
    code: Allocation,
}

impl KernelTable {
    pub fn new(kfd: &Kfd, gpu_id: u32) -> Result<KernelTable> {
        let code = Allocation::new(kfd, gpu_id, 4096, Kind::Gtt, &[gpu_id])
            .map_err(|e| Error::from_errno("allocating soft kernel descriptors", e))?;
        for b in Builtin::ALL {
            let mut name = [0u8; 32];
            name[..b.name().len()].copy_from_slice(b.name().as_bytes());
            let d = SoftKernelDescriptor { name, ..SoftKernelDescriptor::new(b as u32, b.kernarg_size()) };
            code.mem().write(u64::from(b as u32) * 64, d.as_bytes());
        }
        Ok(KernelTable { code })
    }

    /// The `kernel_object` that names `b`.
    pub fn object(&self, b: Builtin) -> u64 {
        self.code.va() + u64::from(b as u32) * 64
    }
}

/// The kernel tables of every GPU of a runtime.
pub(crate) struct Kernels {
    tables: HashMap<u32, KernelTable>,
}

impl Kernels {
    /// A table on each of `gpus`.
    pub fn new(kfd: &Kfd, gpus: &[u32]) -> Result<Kernels> {
        let tables = gpus.iter().map(|&g| Ok((g, KernelTable::new(kfd, g)?))).collect::<Result<_>>()?;
        Ok(Kernels { tables })
    }

    /// The `kernel_object` of `b` on `gpu_id`, one of the runtime's GPUs.
    fn object(&self, gpu_id: u32, b: Builtin) -> u64 {
        self.tables.get(&gpu_id).expect("a table per GPU").object(b)
    }

    /// Frees every table (runtime teardown).
    pub fn clear(&mut self) {
        self.tables.clear();
    }
}

/// ROCr's queue error codes (written to queue_inactive_signal) as statuses.
pub fn queue_error_status(code: i64) -> Status {
    match code {
        8 => Status::INVALID_CODE_OBJECT,
        32 => Status::INVALID_PACKET_FORMAT,
        64 => Status::INVALID_ARGUMENT,
        _ => Status::EXCEPTION,
    }
}

/// Longest a runtime-internal dispatch may take.
const INTERNAL_TIMEOUT_NS: u64 = 600 * 1_000_000_000;

impl Runtime {
    /// The `kernel_object` of builtin `b` on GPU agent `agent`.
    pub fn kernel_object(&self, agent: Agent, b: Builtin) -> Result<u64> {
        let gpu = self.gpu_desc(agent)?.gpu_id();
        Ok(self.kernels().object(gpu, b))
    }

    /// Dispatches `b` with `args` on `q` as a 1-D grid and waits for it; a queue error is
    /// reported as its status.
    pub(crate) fn dispatch_sync(
        &self,
        q: &QueueState,
        b: Builtin,
        args: &[u8],
        grid: u32,
        wg: u16,
        timeout: u64,
    ) -> Result<()> {
        if args.len() < b.kernarg_size() as usize {
            return Err(Error::invalid_argument(format!(
                "{} needs {} bytes of arguments, got {}",
                b.name(),
                b.kernarg_size(),
                args.len()
            )));
        }
        let agent = q.agent;
        let kernel = self.kernel_object(agent, b)?;
        let kernarg_pool = self.cpu_agent().and_then(|c| self.pools(c).ok()?.first().copied());
        let kernarg_pool =
            kernarg_pool.ok_or_else(|| Error::new(Status::ERROR, "no system memory pool for kernel arguments"))?;
        let kernarg = self.allocate(kernarg_pool, args.len().max(1) as u64)?;
        let done =
            self.create_internal_signal(SlotInit { kind: AMD_SIGNAL_KIND_USER, value: 1, ..Default::default() }, true);
        let result = done.and_then(|done| {
            if let Some(a) = self.allocation(kernarg, args.len() as u64) {
                a.mem().write(0, args);
            }
            let p = packet::dispatch(kernel, kernarg, [grid, 1, 1], [wg.max(1), 1, 1], done, true);
            q.submit(self, &p);
            let specs = [(done, Condition::Eq, 0), (q.inactive_signal, Condition::Ne, 0)];
            let end = self.wait_any(&specs, timeout, WaitHint::Blocked, Order::Acquire);
            let _ = self.destroy_signal_raw(done);
            match end? {
                WaitEnd::Satisfied { index: 0, .. } => Ok(()),
                WaitEnd::Satisfied { value, .. } => {
                    Err(Error::new(queue_error_status(value), format!("the queue stopped with error code {value}")))
                }
                _ => Err(Error::new(Status::ERROR, format!("{} did not complete within {timeout} ns", b.name()))),
            }
        });
        let _ = self.free(kernarg);
        result
    }

    /// The runtime's own queue on `gpu_id` (for copies), created on first use.
    fn internal_queue(&self, agent: Agent) -> Result<Arc<QueueState>> {
        self.queues().internal(agent, || self.new_queue_state(agent, 256, crate::hsa::HSA_QUEUE_TYPE_MULTI, None))
    }

    /// hsa_memory_copy: `size` bytes from `src` to `dst`, both inside memory of this runtime,
    /// copied by the device's COPY_BYTES kernel (on the GPU that owns the VRAM involved).
    pub fn copy(&self, dst: u64, src: u64, size: u64) -> Result<()> {
        if size == 0 {
            return Ok(());
        }
        let find = |addr: u64, what: &str| {
            self.allocation(addr, size).ok_or_else(|| {
                Error::invalid_argument(format!(
                    "hsa_memory_copy: {what} {addr:#x}+{size} is not inside memory this runtime allocated (the device copies only GPU-mapped memory)"
                ))
            })
        };
        let (d, s) = (find(dst, "destination")?, find(src, "source")?);
        let vram = |a: &Allocation| {
            a.pool.and_then(|p| self.pool_desc(p).ok()).filter(|p| p.kind == crate::agent::PoolKind::Vram)
        };
        let gpu = match (vram(&d), vram(&s)) {
            (Some(a), Some(b)) if a.gpu_id != b.gpu_id => {
                return Err(Error::invalid_argument("hsa_memory_copy between two GPUs' VRAM is not supported"))
            }
            (Some(p), _) | (_, Some(p)) => p.gpu_id,
            _ => self.agent_table().first_gpu(),
        };
        let agent = self
            .agent_table()
            .gpu_agent(gpu)
            .ok_or_else(|| Error::new(Status::ERROR, "no agent for the copy's GPU"))?;
        let q = self.internal_queue(agent)?;
        let _serial = q.copy_lock.lock();
        let mut done = 0u64;
        while done < size {
            let chunk = (size - done).min(MAX_CHUNK);
            let args = CopyArgs { dst: dst + done, src: src + done };
            self.dispatch_sync(&q, Builtin::CopyBytes, args.as_bytes(), chunk as u32, 256, INTERNAL_TIMEOUT_NS)?;
            done += chunk;
        }
        Ok(())
    }
}

/// Bytes per copy dispatch (one work-item per byte; the device caps a grid at 2^28 items).
const MAX_CHUNK: u64 = 1 << 28;
