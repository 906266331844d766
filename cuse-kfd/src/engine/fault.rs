//! Why a queue stops: the fault kinds and the error codes a client reads from its queue's
//! queue_inactive_signal.

use crate::memory::vm::VmFault;
use crate::queue::QueueError;
use std::fmt;
use uapi::kfd::{HsaMemoryExceptionData, MemoryExceptionFailure, KFD_MEM_ERR_NO_RAS};

/// The GPU page size the VM reports faults in.
const PAGE_SIZE: u64 = 4096;

/// ROCr's queue error codes (written to queue_inactive_signal), as its trap handler reports.
pub const ERROR_INVALID_CODE_OBJECT: u64 = 8;
pub const ERROR_INVALID_PACKET_FORMAT: u64 = 32;
pub const ERROR_INVALID_ARGUMENT: u64 = 64;
/// A wave ran an instruction the device cannot execute; s_trap (ROCR-Runtime amd_aql_queue.cpp,
/// DynamicQueueEventsHandler: HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION and HSA_STATUS_ERROR_EXCEPTION).
pub const ERROR_ILLEGAL_INSTRUCTION: u64 = 0x4000_0000;
pub const ERROR_TRAP: u64 = 0x8000_0000;

/// Why a queue stopped.
#[derive(Debug, Clone)]
pub enum QueueFault {
    /// A GPU VM fault (reported through MEMORY events).
    Vm(VmFault),
    /// A packet the device cannot process (reported through queue_inactive_signal and
    /// HW-exception / queue events).
    Invalid { code: u64, reason: String },
}

impl QueueFault {
    pub fn invalid(code: u64, reason: String) -> QueueFault {
        QueueFault::Invalid { code, reason }
    }

    pub(super) fn to_error(&self) -> QueueError {
        match self {
            QueueFault::Vm(f) => QueueError { code: 0, reason: f.to_string(), fault_va: Some(f.va().0) },
            QueueFault::Invalid { code, reason } => QueueError { code: *code, reason: reason.clone(), fault_va: None },
        }
    }
}

/// What MEMORY events carry for VM fault `f` on GPU `gpu_id`, as amdkfd fills it from the
/// fault's interrupt (amdkfd v6.1 kfd_int_process_v9.c, event_interrupt_wq_v9, and
/// kfd_events.c, kfd_signal_vm_fault_event): the faulting page (page_addr << PAGE_SHIFT), not
/// the byte; NotPresent for a page the VM does not map (PROT_VALID), ReadOnly for a write to a
/// page mapped read-only (PROT_WRITE); NoExecute stays 0 (gfx9's handler never sets prot_exec,
/// and the device does not enforce execute permission); precise, no RAS error. The queue's own
/// error keeps the exact address.
pub(super) fn memory_exception(f: &VmFault, gpu_id: u32) -> HsaMemoryExceptionData {
    let read_only = matches!(f, VmFault::ReadOnly { .. });
    HsaMemoryExceptionData {
        failure: MemoryExceptionFailure {
            not_present: u32::from(!read_only),
            read_only: u32::from(read_only),
            no_execute: 0,
            imprecise: 0,
        },
        va: f.va().0 & !(PAGE_SIZE - 1),
        gpu_id,
        error_type: KFD_MEM_ERR_NO_RAS,
    }
}

impl From<VmFault> for QueueFault {
    fn from(f: VmFault) -> QueueFault {
        QueueFault::Vm(f)
    }
}

impl fmt::Display for QueueFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueFault::Vm(v) => write!(f, "GPU VM fault: {v}"),
            QueueFault::Invalid { code, reason } => write!(f, "queue error {code}: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::vm::GpuVa;

    #[test]
    fn memory_events_carry_the_page_and_amdkfds_failure_bits() {
        let m = memory_exception(&VmFault::Unmapped { va: GpuVa(0x5_0000_0a84) }, 7);
        assert_eq!((m.va, m.gpu_id, m.error_type), (0x5_0000_0000, 7, KFD_MEM_ERR_NO_RAS));
        let f = m.failure;
        assert_eq!((f.not_present, f.read_only, f.no_execute, f.imprecise), (1, 0, 0, 0));
        let m = memory_exception(&VmFault::ReadOnly { va: GpuVa(0x7000_1fff) }, 7);
        assert_eq!(m.va, 0x7000_1000);
        assert_eq!((m.failure.not_present, m.failure.read_only), (0, 1), "a write to a read-only page is present");
        let m = memory_exception(&VmFault::Userptr { va: GpuVa(0x7f7d_3040_0018) }, 7);
        assert_eq!((m.va, m.failure.not_present), (0x7f7d_3040_0000, 1));
    }
}
