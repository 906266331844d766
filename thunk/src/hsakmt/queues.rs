//! Queues (libhsakmt queues.c): CREATE/UPDATE/DESTROY_QUEUE, SET_CU_MASK, ALLOC_QUEUE_GWS and
//! the process doorbell slice of each GPU.
//!
//! An AQL queue's read and write pointers are the caller's (ROCr points them into its
//! `amd_queue_t`); other queues get them from a page of the thunk. The doorbell slice of a GPU
//! is mapped once, on the first queue: as a DOORBELL buffer object in the SVM aperture, also
//! mapped on the GPU (libhsakmt's dGPU path), or else as a plain host mapping of its file.
//! The device has no compute wave save/restore, so no EOP buffer and no context save area are
//! allocated (the CREATE_QUEUE fields stay 0, which the device accepts).

use super::types::*;
use super::{Result, Status, Thunk, PAGE_SIZE};
use crate::memory::{open_backing, HostMapping, Space};
use crate::Kfd;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::collections::HashMap;
use uapi::ioctl::*;
use uapi::kfd::*;

/// KFD priority of each thunk priority -3 ..= 3.
const PRIORITY_MAP: [u32; 7] = [0, 3, 5, 7, 9, 11, 15];
/// Doorbells in a process slice.
const DOORBELLS_PER_SLICE: u64 = 1024;
/// GFX9 and later (SOC15): 8-byte doorbells, each queue's offset in the slice from KFD.
const GFX_VERSION_SOC15: u32 = 0x090000;
/// Where the thunk's own read and write pointers lie in a non-AQL queue's page (libhsakmt's
/// `struct queue`: id, then wptr, then rptr).
const WPTR_OFFSET: u64 = 8;
const RPTR_OFFSET: u64 = 16;

#[derive(Debug)]
enum Doorbells {
    /// A DOORBELL buffer object in the SVM aperture, GPU-mapped.
    Gpuvm(u64),
    /// A host mapping of the slice's file.
    Host(HostMapping),
}

impl Doorbells {
    fn addr(&self) -> u64 {
        match self {
            Doorbells::Gpuvm(va) => *va,
            Doorbells::Host(m) => m.addr(),
        }
    }
}

#[derive(Debug)]
struct Queue {
    kfd_id: u32,
    /// The thunk's page holding a non-AQL queue's pointers.
    pointers: Option<u64>,
    cu_mask: Vec<u32>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    queues: HashMap<u64, Queue>,
    /// node -> its doorbell slice.
    doorbells: HashMap<u32, Doorbells>,
}

#[derive(Debug, Default)]
pub(super) struct Queues {
    state: Mutex<State>,
}

impl Queues {
    /// Destroys every queue (CloseKFD); buffers go with the memory manager.
    pub fn destroy_all(&self, kfd: &Kfd) {
        let mut st = self.state.lock();
        for (_, q) in st.queues.drain() {
            // SAFETY: DESTROY_QUEUE's argument holds no pointer.
            let _ = unsafe {
                super::ioctl(kfd, AMDKFD_IOC_DESTROY_QUEUE, &mut DestroyQueueArgs { queue_id: q.kfd_id, pad: 0 })
            };
        }
        st.doorbells.clear();
    }
}

fn check_priority(p: QueuePriority) -> Result<u32> {
    if !(QueuePriority::MINIMUM.0..=QueuePriority::MAXIMUM.0).contains(&p.0) {
        return Err(Status::InvalidParameter);
    }
    Ok(PRIORITY_MAP[(p.0 + 3) as usize])
}

impl Thunk {
    /// `hsaKmtCreateQueue`: a queue of `queue_type` on GPU node `node` over the ring at `ring`
    /// (`ring_size` bytes). Fills `res.queue_id` and `res.doorbell`; for non-AQL queues also
    /// the read and write pointers.
    #[allow(clippy::too_many_arguments)]
    pub fn create_queue(
        &self,
        node: u32,
        queue_type: QueueType,
        percentage: u32,
        priority: QueuePriority,
        ring: u64,
        ring_size: u64,
        _event: Option<&Event>,
        res: &mut QueueResource,
    ) -> Result<()> {
        let kfd_priority = check_priority(priority)?;
        let gpu_id = self.gpu_id(node)?;
        let props = &self.nodes.node(node).ok_or(Status::InvalidNodeUnit)?.props;
        let gfxv = props.engine_id.gfx_version();
        let kfd_type = match queue_type {
            QueueType::COMPUTE => KFD_IOC_QUEUE_TYPE_COMPUTE,
            QueueType::SDMA => KFD_IOC_QUEUE_TYPE_SDMA,
            QueueType::SDMA_XGMI => KFD_IOC_QUEUE_TYPE_SDMA_XGMI,
            QueueType::COMPUTE_AQL => KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            _ => return Err(Status::InvalidParameter),
        };
        // Every CU on by default.
        let cus = props.num_fcompute_cores.checked_div(props.num_simd_per_cu).unwrap_or(0);
        let mut cu_mask = vec![0u32; cus.div_ceil(32) as usize];
        for i in 0..cus {
            cu_mask[(i / 32) as usize] |= 1 << (i % 32);
        }
        let pointers = if queue_type == QueueType::COMPUTE_AQL {
            None
        } else {
            let page = self.queue_pointer_page(node)?;
            res.write_ptr = page + WPTR_OFFSET;
            res.read_ptr = page + RPTR_OFFSET;
            Some(page)
        };
        let free_pointers = || {
            if let Some(page) = pointers {
                let _ = self.unmap_memory_to_gpu(page);
                let _ = self.free_memory(page, PAGE_SIZE);
            }
        };
        let mut a = CreateQueueArgs {
            ring_base_address: ring,
            write_pointer_address: res.write_ptr,
            read_pointer_address: res.read_ptr,
            ring_size: ring_size as u32,
            gpu_id,
            queue_type: kfd_type,
            queue_percentage: percentage,
            queue_priority: kfd_priority,
            ..Default::default()
        };
        // SAFETY: CREATE_QUEUE's addresses are GPU addresses (ring, read and write pointers),
        // reached through the device's VM.
        if let Err(e) = unsafe { self.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a) } {
            log::warn!("CREATE_QUEUE on node {node}: {e}");
            free_pointers();
            return Err(Status::Error);
        }
        let (slice_size, doorbell_size) =
            if gfxv >= GFX_VERSION_SOC15 { (DOORBELLS_PER_SLICE * 8, 8) } else { (DOORBELLS_PER_SLICE * 4, 4) };
        let (slice_offset, byte) = if gfxv >= GFX_VERSION_SOC15 {
            (a.doorbell_offset & !(slice_size - 1), a.doorbell_offset & (slice_size - 1))
        } else {
            (a.doorbell_offset, u64::from(a.queue_id) * doorbell_size)
        };
        let mut st = self.queues.state.lock();
        let slice = match st.doorbells.get(&node) {
            Some(d) => Ok(d.addr()),
            None => self.map_doorbells(gpu_id, node, slice_size, slice_offset).map(|d| {
                let addr = d.addr();
                st.doorbells.insert(node, d);
                addr
            }),
        };
        let slice = match slice {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: DESTROY_QUEUE's argument holds no pointer.
                let _ = unsafe {
                    self.ioctl(AMDKFD_IOC_DESTROY_QUEUE, &mut DestroyQueueArgs { queue_id: a.queue_id, pad: 0 })
                };
                drop(st);
                free_pointers();
                return Err(e);
            }
        };
        st.next_id += 1;
        let id = st.next_id;
        st.queues.insert(id, Queue { kfd_id: a.queue_id, pointers, cu_mask });
        res.queue_id = QueueId(id);
        res.doorbell = slice + byte;
        log::debug!("hsakmt: queue {id} (KFD queue {}) on node {node}, doorbell {:#x}", a.queue_id, res.doorbell);
        Ok(())
    }

    /// A page of system memory registered to and mapped on `node`, for a queue's pointers.
    fn queue_pointer_page(&self, node: u32) -> Result<u64> {
        let flags = MemFlags(0).with_host_access(1).with_execute_access(1).with_uncached(1);
        let page = self.alloc_memory(0, PAGE_SIZE, flags, None)?;
        // SAFETY: memory this thunk just allocated: registering it records its node and makes no
        // USERPTR registration of caller memory.
        let mapped = unsafe { self.register_memory_to_nodes(page, PAGE_SIZE, &[node]) }
            .and_then(|()| self.map_memory_to_gpu(page, PAGE_SIZE));
        if let Err(e) = mapped {
            let _ = self.free_memory(page, PAGE_SIZE);
            return Err(e);
        }
        Ok(page)
    }

    /// Maps the doorbell slice at mmap offset `offset` of GPU `gpu_id` (map_doorbell).
    fn map_doorbells(&self, gpu_id: u32, node: u32, size: u64, offset: u64) -> Result<Doorbells> {
        if let Some(va) = self.fmm.allocate_doorbell(&self.kfd, gpu_id, node, size, offset) {
            return Ok(Doorbells::Gpuvm(va));
        }
        log::debug!("no GPUVM doorbell mapping for gpu {gpu_id:#x}; mapping the slice for the CPU only");
        let file = open_backing(&self.kfd, Space::Kfd, offset).map_err(|_| Status::Error)?;
        HostMapping::map(&file, size as usize).map(Doorbells::Host).map_err(|_| Status::Error)
    }

    fn kfd_queue_id(&self, id: QueueId) -> Result<u32> {
        self.queues.state.lock().queues.get(&id.0).map(|q| q.kfd_id).ok_or(Status::InvalidParameter)
    }

    /// `hsaKmtUpdateQueue`: new percentage, priority and ring.
    pub fn update_queue(
        &self,
        id: QueueId,
        percentage: u32,
        priority: QueuePriority,
        ring: u64,
        ring_size: u64,
        _event: Option<&Event>,
    ) -> Result<()> {
        let queue_priority = check_priority(priority)?;
        let queue_id = self.kfd_queue_id(id)?;
        let mut a = UpdateQueueArgs {
            ring_base_address: ring,
            queue_id,
            ring_size: ring_size as u32,
            queue_percentage: percentage,
            queue_priority,
        };
        // SAFETY: the ring base is a GPU address, reached through the device's VM.
        unsafe { self.ioctl(AMDKFD_IOC_UPDATE_QUEUE, &mut a) }.map_err(|e| {
            log::warn!("UPDATE_QUEUE {queue_id}: {e}");
            Status::Error
        })
    }

    /// `hsaKmtDestroyQueue`.
    pub fn destroy_queue(&self, id: QueueId) -> Result<()> {
        let queue_id = self.kfd_queue_id(id)?;
        // SAFETY: DESTROY_QUEUE's argument holds no pointer.
        if let Err(e) = unsafe { self.ioctl(AMDKFD_IOC_DESTROY_QUEUE, &mut DestroyQueueArgs { queue_id, pad: 0 }) } {
            log::error!("failed to destroy queue {queue_id}: {e}");
            return Err(Status::Error);
        }
        let q = self.queues.state.lock().queues.remove(&id.0);
        if let Some(page) = q.and_then(|q| q.pointers) {
            let _ = self.unmap_memory_to_gpu(page);
            let _ = self.free_memory(page, PAGE_SIZE);
        }
        Ok(())
    }

    /// `hsaKmtSetQueueCUMask`: `mask` holds 32 CUs per word (at least one word).
    pub fn set_queue_cu_mask(&self, id: QueueId, mask: &[u32]) -> Result<()> {
        if mask.is_empty() {
            return Err(Status::InvalidParameter);
        }
        let queue_id = self.kfd_queue_id(id)?;
        let mut a =
            SetCuMaskArgs { queue_id, num_cu_mask: (mask.len() * 32) as u32, cu_mask_ptr: mask.as_ptr() as u64 };
        // SAFETY: the device reads `num_cu_mask / 32` words from `mask`, borrowed for the call.
        unsafe { self.ioctl(AMDKFD_IOC_SET_CU_MASK, &mut a) }.map_err(|_| Status::Error)?;
        if let Some(q) = self.queues.state.lock().queues.get_mut(&id.0) {
            q.cu_mask = mask.to_vec();
        }
        Ok(())
    }

    /// `hsaKmtGetQueueInfo`. libhsakmt (ROCT-Thunk-Interface rocm-5.2.3 src/queues.c) reads a
    /// queue's wave state (control stack, save area) from the context save area it gave the
    /// queue, and answers `Error` for a queue without one. This thunk gives none (the device has no compute wave
    /// save/restore; see the module), so a known queue is `Error`, an unknown one
    /// `InvalidParameter`: it never succeeds here, hence `Infallible`.
    pub fn queue_info(&self, id: QueueId) -> Result<std::convert::Infallible> {
        self.kfd_queue_id(id)?;
        Err(Status::Error)
    }

    /// The CU mask of a queue.
    pub fn queue_cu_mask(&self, id: QueueId) -> Result<Vec<u32>> {
        self.queues.state.lock().queues.get(&id.0).map(|q| q.cu_mask.clone()).ok_or(Status::InvalidParameter)
    }

    /// `hsaKmtAllocQueueGWS`: `n` global wave sync entries for a queue; returns the first.
    /// One queue per process and GPU holds them (EBUSY: `OutOfResources`); a GPU without GWS
    /// answers ENODEV: `NotSupported`.
    pub fn alloc_queue_gws(&self, id: QueueId, n: u32) -> Result<u32> {
        let queue_id = self.kfd_queue_id(id)?;
        let mut a = AllocQueueGwsArgs { queue_id, num_gws: n, ..Default::default() };
        // SAFETY: ALLOC_QUEUE_GWS's argument holds no pointer.
        match unsafe { self.ioctl(AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut a) } {
            Ok(()) => Ok(a.first_gws),
            Err(Errno::EINVAL) => Err(Status::InvalidParameter),
            Err(Errno::EBUSY) => Err(Status::OutOfResources),
            Err(Errno::ENODEV) => Err(Status::NotSupported),
            Err(_) => Err(Status::Error),
        }
    }
}
