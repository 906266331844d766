//! Performance counters: the PMC trace calls (libhsakmt perfctr.c and pmc_table.c at tag
//! rocm-5.2.3) and streaming performance monitoring (spm.c, same tag).
//!
//! libhsakmt lists two kinds of counter blocks. The GFX blocks (SQ, TA, TCC, ...) come from its
//! own tables of the GPU's performance counter registers, which a profiler programs itself
//! through its queues; the soft GPU has no such registers, so this thunk lists none of them
//! (listing them would promise counts nobody makes). The one privileged block is the host's AMD
//! IOMMU PMU (perf_event, `amd_iommu_0`): this thunk does not use it, so it behaves as libhsakmt
//! on a host without one. The counter properties are therefore an empty list, and
//! registering a trace is refused as libhsakmt refuses counters of a block it does not list.
//!
//! SPM is AMD's out-of-tree AMDKFD_IOC_RLC_SPM (nr 0x84), which upstream amdkfd and this device
//! lack. libhsakmt 5.2.3 returns that request's raw result as the status: on failure -1, which
//! is [`Status::IoctlFailed`].

use super::{Result, Status, Thunk};
use uapi::ioctl::{ioc, AMDKFD_IOCTL_BASE, IOC_READ, IOC_WRITE};
use uapi::IntoBytes;

/// ROCm's `AMDKFD_IOC_RLC_SPM` (`struct kfd_ioctl_spm_args`: dest_buf u64, then buf_size, op,
/// timeout, gpu_id, bytes_copied, has_data_loss, u32 each).
const AMDKFD_IOC_RLC_SPM: u32 = ioc(IOC_READ | IOC_WRITE, AMDKFD_IOCTL_BASE, 0x84, 32);
const SPM_OP_ACQUIRE: u32 = 0;
const SPM_OP_RELEASE: u32 = 1;
const SPM_OP_SET_DEST_BUF: u32 = 2;

/// libhsakmt's block ids run 0 ..= 24 (the IOMMU block); a counter naming another is invalid.
const PERFCOUNTER_BLOCKID_MAX: u32 = 25;
/// `HSA_PROFILE_TYPE_PRIVILEGED_STREAMING`: types up to it are the privileged ones, the only
/// ones a trace registers.
const PROFILE_TYPE_PRIVILEGED_STREAMING: u32 = 1;
/// Counters one RegisterTrace takes at most (more: `NoMemory`, as libhsakmt).
pub const MAX_TRACE_COUNTERS: usize = 512;

/// `HsaCounterProperties` of a node: its blocks and how many can be counted at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterProperties {
    /// Counter slots over every block.
    pub num_concurrent: u32,
    /// The blocks (none on this device).
    pub blocks: Vec<CounterBlock>,
}

/// One `HsaCounterBlockProperties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterBlock {
    /// The block's `HSA_UUID`, as 16 bytes.
    pub block_id: [u8; 16],
    pub num_concurrent: u32,
    pub counters: Vec<Counter>,
}

/// One `HsaCounter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// `HSA_PROFILE_TYPE`.
    pub profile_type: u32,
    pub counter_id: u64,
    pub size_in_bits: u32,
    pub mask: u64,
    /// `HsaCounterFlags`.
    pub flags: u32,
    pub block_index: u32,
}

/// What `hsaKmtPmcRegisterTrace` fills in (`HsaPmcTraceRoot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRoot {
    pub buffer_min_size: u64,
    pub number_of_passes: u32,
    pub trace_id: u64,
}

/// What `hsaKmtSPMSetDestBuffer` reports back, whatever the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpmCopy {
    /// The time left of the caller's timeout, in ms.
    pub timeout: u32,
    pub bytes_copied: u32,
    pub data_loss: bool,
}

/// No trace is ever registered here (see the module): 0 is `InvalidParameter`, any other id
/// `InvalidHandle`, libhsakmt's answer for an id that is not one of its traces.
fn unknown_trace(trace_id: u64) -> Status {
    if trace_id == 0 {
        Status::InvalidParameter
    } else {
        Status::InvalidHandle
    }
}

impl Thunk {
    /// `hsaKmtPmcGetCounterProperties`: the counter blocks of `node` (none; see the module).
    pub fn pmc_counter_properties(&self, node: u32) -> Result<CounterProperties> {
        self.gpu_id(node).map_err(|_| Status::InvalidNodeUnit)?;
        Ok(CounterProperties::default())
    }

    /// `hsaKmtPmcRegisterTrace`, with libhsakmt's checks in its order: no counters
    /// (`InvalidParameter`), an unknown node, more than [`MAX_TRACE_COUNTERS`] (`NoMemory`), a
    /// bad block index, then any privileged counter of a block not listed, or none privileged
    /// at all (`InvalidParameter`): with no block listed, every registration ends there.
    pub fn pmc_register_trace(&self, node: u32, counters: &[Counter]) -> Result<TraceRoot> {
        if counters.is_empty() {
            return Err(Status::InvalidParameter);
        }
        self.gpu_id(node).map_err(|_| Status::InvalidNodeUnit)?;
        if counters.len() > MAX_TRACE_COUNTERS {
            return Err(Status::NoMemory);
        }
        if counters.iter().any(|c| c.block_index >= PERFCOUNTER_BLOCKID_MAX) {
            return Err(Status::InvalidParameter);
        }
        let privileged = counters.iter().filter(|c| c.profile_type <= PROFILE_TYPE_PRIVILEGED_STREAMING).count();
        log::debug!("PMC trace of {privileged} privileged counters: no counter block to trace them on");
        Err(Status::InvalidParameter)
    }

    /// `hsaKmtPmcUnregisterTrace`: 0 is `InvalidParameter`, then the node is checked, then the
    /// trace (see [`unknown_trace`]).
    pub fn pmc_unregister_trace(&self, node: u32, trace_id: u64) -> Result<()> {
        if trace_id == 0 {
            return Err(Status::InvalidParameter);
        }
        self.gpu_id(node).map_err(|_| Status::InvalidNodeUnit)?;
        Err(unknown_trace(trace_id))
    }

    /// `hsaKmtPmcAcquireTraceAccess`: the trace is checked before the node.
    pub fn pmc_acquire_trace_access(&self, _node: u32, trace_id: u64) -> Result<()> {
        Err(unknown_trace(trace_id))
    }

    /// `hsaKmtPmcReleaseTraceAccess`.
    pub fn pmc_release_trace_access(&self, _node: u32, trace_id: u64) -> Result<()> {
        Err(unknown_trace(trace_id))
    }

    /// `hsaKmtPmcStartTrace`: a null or empty buffer is `InvalidParameter` before the trace
    /// is looked at.
    pub fn pmc_start_trace(&self, trace_id: u64, buffer: u64, size: u64) -> Result<()> {
        if buffer == 0 || size == 0 {
            return Err(Status::InvalidParameter);
        }
        Err(unknown_trace(trace_id))
    }

    /// `hsaKmtPmcQueryTrace`.
    pub fn pmc_query_trace(&self, trace_id: u64) -> Result<()> {
        Err(unknown_trace(trace_id))
    }

    /// `hsaKmtPmcStopTrace`.
    pub fn pmc_stop_trace(&self, trace_id: u64) -> Result<()> {
        Err(unknown_trace(trace_id))
    }

    /// One RLC_SPM request; its argument comes back whatever the result.
    fn spm(&self, op: u32, gpu_id: u32, dest: u64, size: u32, timeout: u32) -> (Result<()>, [u8; 32]) {
        let mut a = [0u8; 32];
        a[0..8].copy_from_slice(dest.as_bytes());
        for (i, w) in [size, op, timeout, gpu_id].iter().enumerate() {
            a[8 + 4 * i..12 + 4 * i].copy_from_slice(w.as_bytes());
        }
        let r = loop {
            // SAFETY: the device may write `size` bytes at `dest` only for SET_DEST_BUF, whose
            // caller vouches for it (see [`Thunk::spm_set_dest_buffer`]); the rest holds no pointer.
            match unsafe { self.kfd.ioctl(AMDKFD_IOC_RLC_SPM, &mut a) } {
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
                r => break r,
            }
        };
        let r = r.map_err(|e| {
            log::debug!("RLC_SPM op {op}: {e}");
            Status::IoctlFailed
        });
        (r, a)
    }

    /// `hsaKmtSPMAcquire`: `IoctlFailed` where the driver has no SPM (see the module).
    pub fn spm_acquire(&self, node: u32) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        self.spm(SPM_OP_ACQUIRE, gpu_id, 0, 0, 0).0
    }

    /// `hsaKmtSPMRelease`: as acquiring.
    pub fn spm_release(&self, node: u32) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        self.spm(SPM_OP_RELEASE, gpu_id, 0, 0, 0).0
    }

    /// `hsaKmtSPMSetDestBuffer`: the status, and what the request reported (libhsakmt writes
    /// it back even when the request fails). An unknown node is not refused first: libhsakmt
    /// sends the request regardless, and it fails.
    ///
    /// # Safety
    ///
    /// `[dest, dest + size)` is valid for the device's writes until the next SetDestBuffer or
    /// release (a null `dest` stops the copying).
    pub unsafe fn spm_set_dest_buffer(&self, node: u32, size: u32, timeout: u32, dest: u64) -> (Result<()>, SpmCopy) {
        // libhsakmt ignores validate_nodeid's answer here and sends the request anyway (for no
        // GPU: gpu_id 0, which no driver knows).
        let gpu_id = self.gpu_id(node).unwrap_or(0);
        let (r, a) = self.spm(SPM_OP_SET_DEST_BUF, gpu_id, dest, size, timeout);
        let word = |off: usize| u32::from_le_bytes(a[off..off + 4].try_into().expect("4 bytes"));
        (r, SpmCopy { timeout: word(16), bytes_copied: word(24), data_loss: word(28) != 0 })
    }
}
