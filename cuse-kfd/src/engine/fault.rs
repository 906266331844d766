//! Why a queue stops: the fault kinds and the error codes a client reads from its queue's
//! queue_inactive_signal.

use crate::memory::vm::VmFault;
use crate::queue::QueueError;
use std::fmt;

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
