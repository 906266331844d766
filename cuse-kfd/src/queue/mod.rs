//! User-mode queues of a process (amdkfd kfd_process_queue_manager.c): their properties,
//! doorbells and state. Packet processing lives in the command processor.

pub mod doorbell;
pub mod preempt;

use crate::memory::vm::GpuVa;
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};
use uapi::kfd::*;

/// What kind of engine a queue feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueType {
    /// PM4 compute queue.
    Compute,
    Sdma,
    ComputeAql,
    SdmaXgmi,
    SdmaByEngId,
}

impl QueueType {
    pub fn from_ioctl(t: u32) -> Option<QueueType> {
        Some(match t {
            KFD_IOC_QUEUE_TYPE_COMPUTE => QueueType::Compute,
            KFD_IOC_QUEUE_TYPE_SDMA => QueueType::Sdma,
            KFD_IOC_QUEUE_TYPE_COMPUTE_AQL => QueueType::ComputeAql,
            KFD_IOC_QUEUE_TYPE_SDMA_XGMI => QueueType::SdmaXgmi,
            KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID => QueueType::SdmaByEngId,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            QueueType::Compute => "compute",
            QueueType::Sdma => "sdma",
            QueueType::ComputeAql => "compute-aql",
            QueueType::SdmaXgmi => "sdma-xgmi",
            QueueType::SdmaByEngId => "sdma-by-eng-id",
        }
    }
}

/// What UPDATE_QUEUE and SET_CU_MASK change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueProps {
    pub ring_base: GpuVa,
    /// Ring size in bytes.
    pub ring_size: u64,
    pub percentage: u32,
    pub priority: u32,
    pub cu_mask: Vec<u32>,
}

impl QueueProps {
    /// amdkfd: a queue is active when it has a ring and a non-zero percentage.
    pub fn is_active(&self) -> bool {
        self.ring_size > 0 && self.ring_base.0 != 0 && self.percentage & 0xFF > 0
    }
}

/// One queue.
#[derive(Debug)]
pub struct Queue {
    pub id: u32,
    pub gpu_id: u32,
    pub queue_type: QueueType,
    pub read_ptr: GpuVa,
    pub write_ptr: GpuVa,
    pub doorbell_index: u32,
    /// The doorbell_offset CREATE_QUEUE returned (mmap offset of the slice | byte offset).
    pub doorbell_offset: u64,
    pub eop_buffer: GpuVa,
    pub ctx_save_restore: GpuVa,
    props: Mutex<QueueProps>,
    /// Bumped by every props change, so the command processor re-reads them only then.
    props_generation: AtomicU64,
    read_index: AtomicU64,
    write_index: AtomicU64,
    error: Mutex<Option<QueueError>>,
    /// Whether the queue's waves may run on the shader core (UPDATE_QUEUE preempts them).
    pub waves: preempt::WaveGate,
}

/// Why a queue stopped (written by the command processor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueError {
    /// The code written to the queue's `queue_inactive_signal` (ROCr's queue error codes).
    pub code: u64,
    pub reason: String,
    /// The faulting GPU address of a VM fault.
    pub fault_va: Option<u64>,
}

/// What the command processor reports about a queue. On PM4 and SDMA queues the counts are in
/// the queue's pointer units instead of packets: dwords (PM4) or bytes (SDMA), not wrapped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStatus {
    /// Packets consumed.
    pub packets: u64,
    /// read_dispatch_id as last written.
    pub read_index: u64,
    /// One past the highest packet index rung on the doorbell (the write pointer rung).
    pub write_index: u64,
    pub error: Option<QueueError>,
}

impl Queue {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: u32,
        gpu_id: u32,
        queue_type: QueueType,
        read_ptr: GpuVa,
        write_ptr: GpuVa,
        doorbell_index: u32,
        doorbell_offset: u64,
        eop_buffer: GpuVa,
        ctx_save_restore: GpuVa,
        props: QueueProps,
    ) -> Queue {
        Queue {
            id,
            gpu_id,
            queue_type,
            read_ptr,
            write_ptr,
            doorbell_index,
            doorbell_offset,
            eop_buffer,
            ctx_save_restore,
            props: Mutex::new(props),
            props_generation: AtomicU64::new(0),
            read_index: AtomicU64::new(0),
            write_index: AtomicU64::new(0),
            error: Mutex::new(None),
            waves: preempt::WaveGate::default(),
        }
    }

    /// The properties, for reading (change them with [`Queue::set_props`]).
    pub fn props(&self) -> MutexGuard<'_, QueueProps> {
        self.props.lock()
    }

    pub fn set_props(&self, f: impl FnOnce(&mut QueueProps)) {
        f(&mut self.props());
        self.props_generation.fetch_add(1, Ordering::Release);
    }

    pub fn props_generation(&self) -> u64 {
        self.props_generation.load(Ordering::Acquire)
    }

    /// A snapshot of what the command processor reports.
    pub fn status(&self) -> QueueStatus {
        let read_index = self.read_index.load(Ordering::Acquire);
        QueueStatus {
            packets: read_index,
            read_index,
            write_index: self.write_index.load(Ordering::Acquire),
            error: self.error.lock().clone(),
        }
    }

    /// Progress, as the command processor publishes it.
    pub fn set_progress(&self, read_index: u64, write_index: u64) {
        self.read_index.store(read_index, Ordering::Release);
        self.write_index.store(write_index, Ordering::Release);
    }

    pub fn set_error(&self, e: QueueError) {
        *self.error.lock() = Some(e);
    }
}
