//! An AQL queue and its producer side, as ROCr drives one: the ring and an amd_queue_t in GPU
//! memory, KFD's read/write pointers inside the amd_queue_t, a doorbell in the mapped doorbell
//! slice. And PM4 / SDMA ring queues ([`RingQueue`]), as kfdtest drives them.

use crate::memory::{open_backing, GpuMemory, HostMapping, Kind, Space};
use crate::Kfd;
use nix::errno::Errno;
use std::sync::atomic::{AtomicU64, Ordering};
use uapi::aql::*;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::queue::*;

/// Bytes of the process doorbell slice (2 pages on SOC15).
const DOORBELL_SLICE: u64 = 8192;

/// What AQL and ring queues share: a queue KFD created and its doorbell, mapped. Dropping it
/// destroys the queue, so it must be dropped before the memory the queue uses.
struct KfdQueue {
    kfd: Kfd,
    id: u32,
    doorbell: HostMapping,
    doorbell_byte: u64,
    doorbell_offset: u64,
}

impl KfdQueue {
    /// CREATE_QUEUE with `a`, then the doorbell slice mapped; a queue whose doorbell cannot be
    /// mapped is destroyed again.
    fn create(kfd: &Kfd, a: &mut CreateQueueArgs) -> Result<KfdQueue, Errno> {
        // SAFETY: CREATE_QUEUE's addresses are GPU addresses, which the device reaches through
        // its own VM (mapped buffers), never as pointers into this process.
        unsafe { kfd.call(AMDKFD_IOC_CREATE_QUEUE, a)? };
        let queue_id = a.queue_id;
        let destroy = |e| {
            // SAFETY: DESTROY_QUEUE's argument holds no pointer.
            let _ = unsafe { kfd.call(AMDKFD_IOC_DESTROY_QUEUE, &mut DestroyQueueArgs { queue_id, pad: 0 }) };
            e
        };
        let slice = a.doorbell_offset & !(DOORBELL_SLICE - 1);
        let doorbell_byte = a.doorbell_offset & (DOORBELL_SLICE - 1);
        if !doorbell_byte.is_multiple_of(8) {
            // `ring_doorbell` stores a u64 there: it must be aligned (and so inside the slice).
            log::warn!("queue {queue_id}: misaligned doorbell offset {:#x}", a.doorbell_offset);
            return Err(destroy(Errno::EINVAL));
        }
        let file = open_backing(kfd, Space::Kfd, slice).map_err(destroy)?;
        let doorbell = HostMapping::map(&file, DOORBELL_SLICE as usize).map_err(destroy)?;
        Ok(KfdQueue { kfd: kfd.clone(), id: queue_id, doorbell, doorbell_byte, doorbell_offset: a.doorbell_offset })
    }

    /// Rings the doorbell with `value` (a plain 64-bit store, as ROCr and kfdtest do).
    fn ring_doorbell(&self, value: u64) {
        let addr = self.doorbell.addr() + self.doorbell_byte;
        // SAFETY: the doorbell slice mapping is live for `self`, and `create` checked that the
        // doorbell is an aligned 8-byte word inside it.
        unsafe { AtomicU64::from_ptr(addr as *mut u64) }.store(value, Ordering::Release);
    }
}

impl Drop for KfdQueue {
    fn drop(&mut self) {
        let mut a = DestroyQueueArgs { queue_id: self.id, pad: 0 };
        // SAFETY: DESTROY_QUEUE's argument holds no pointer.
        if let Err(e) = unsafe { self.kfd.call(AMDKFD_IOC_DESTROY_QUEUE, &mut a) } {
            log::warn!("destroying queue {}: {e}", self.id);
        }
    }
}

pub struct AqlQueue {
    /// First: the queue is destroyed before its ring and descriptor are freed.
    queue: KfdQueue,
    pub id: u32,
    pub gpu_id: u32,
    /// Packets in the ring.
    pub slots: u64,
    pub ring: GpuMemory,
    /// Holds the amd_queue_t at offset 0.
    pub desc: GpuMemory,
    pub doorbell_offset: u64,
    /// The last read index seen: the producer reloads it only when the ring looks full.
    cached_read: AtomicU64,
}

impl AqlQueue {
    /// Creates an AQL queue of `slots` packets (a power of two, at least 16).
    pub fn new(kfd: &Kfd, gpu_id: u32, slots: u64) -> Result<AqlQueue, Errno> {
        let ring = kfd.alloc(gpu_id, slots * AQL_PACKET_SIZE as u64, Kind::Gtt)?;
        for i in 0..slots {
            // Every slot starts INVALID: the packet processor stops there.
            ring.write(i * AQL_PACKET_SIZE as u64, &u16::from(HSA_PACKET_TYPE_INVALID).to_le_bytes());
        }
        let desc = kfd.alloc(gpu_id, 4096, Kind::Gtt)?;
        let q = AmdQueue {
            hsa_queue: HsaQueue {
                type_: HSA_QUEUE_TYPE_MULTI,
                features: HSA_QUEUE_FEATURE_KERNEL_DISPATCH,
                base_address: ring.va(),
                size: slots as u32,
                ..Default::default()
            },
            queue_properties: AMD_QUEUE_PROPERTIES_IS_PTR64,
            ..Default::default()
        };
        desc.write(0, uapi::IntoBytes::as_bytes(&q));
        let mut a = CreateQueueArgs {
            ring_base_address: ring.va(),
            write_pointer_address: desc.addr(AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET as u64),
            read_pointer_address: desc.addr(AMD_QUEUE_READ_DISPATCH_ID_OFFSET as u64),
            ring_size: (slots * AQL_PACKET_SIZE as u64) as u32,
            gpu_id,
            queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            queue_percentage: 100,
            queue_priority: 7,
            ..Default::default()
        };
        let queue = KfdQueue::create(kfd, &mut a)?;
        Ok(AqlQueue {
            id: queue.id,
            doorbell_offset: queue.doorbell_offset,
            queue,
            gpu_id,
            slots,
            ring,
            desc,
            cached_read: AtomicU64::new(0),
        })
    }

    pub fn write_index(&self) -> &AtomicU64 {
        self.desc.u64_at(AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET as u64)
    }

    pub fn read_index(&self) -> u64 {
        self.desc.u64_at(AMD_QUEUE_READ_DISPATCH_ID_OFFSET as u64).load(Ordering::Acquire)
    }

    /// The address of the `queue_inactive_signal` handle in the amd_queue_t.
    pub fn set_inactive_signal(&self, signal: u64) {
        self.desc.u64_at(AMD_QUEUE_INACTIVE_SIGNAL_OFFSET as u64).store(signal, Ordering::Release);
    }

    /// Rings the doorbell with `index` (a plain 64-bit store, as ROCr does).
    pub fn ring_doorbell(&self, index: u64) {
        self.queue.ring_doorbell(index);
    }

    /// Reserves a slot, waiting while the ring is full; returns its index.
    pub fn reserve(&self) -> u64 {
        let index = self.write_index().fetch_add(1, Ordering::AcqRel);
        if index.wrapping_sub(self.cached_read.load(Ordering::Relaxed)) < self.slots {
            return index;
        }
        let mut spins = 0u32;
        loop {
            let read = self.read_index();
            self.cached_read.fetch_max(read, Ordering::Relaxed);
            if index.wrapping_sub(read) < self.slots {
                break;
            }
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        index
    }

    /// Writes packet `p` into slot `index`: the body first, then header and setup with one
    /// release store, so the device never sees a half-written packet.
    pub fn publish(&self, index: u64, p: &[u8; AQL_PACKET_SIZE]) {
        let off = (index % self.slots) * AQL_PACKET_SIZE as u64;
        self.ring.write(off + 4, &p[4..]);
        let head = u32::from_le_bytes(p[..4].try_into().expect("4 bytes"));
        self.ring.u32_at(off).store(head, Ordering::Release);
    }

    /// reserve + publish + doorbell: submits one packet and returns its index.
    pub fn submit(&self, p: &[u8; AQL_PACKET_SIZE]) -> u64 {
        let index = self.reserve();
        self.publish(index, p);
        self.ring_doorbell(index);
        index
    }

    /// The header of slot `index` as it is now.
    pub fn header(&self, index: u64) -> u16 {
        (self.ring.u32_at((index % self.slots) * AQL_PACKET_SIZE as u64).load(Ordering::Acquire) & 0xFFFF) as u16
    }

    pub fn update(&self, percentage: u32, ring_base: u64, ring_size: u32) -> Result<(), Errno> {
        let mut a = UpdateQueueArgs {
            ring_base_address: ring_base,
            queue_id: self.id,
            ring_size,
            queue_percentage: percentage,
            queue_priority: 7,
        };
        // SAFETY: the ring base is a GPU address, reached through the device's VM.
        unsafe { self.queue.kfd.call(AMDKFD_IOC_UPDATE_QUEUE, &mut a) }
    }

    pub fn kfd(&self) -> &Kfd {
        &self.queue.kfd
    }
}

/// Which engine a [`RingQueue`] feeds, and so the units of its pointers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingKind {
    /// A PM4 compute queue: write pointer and doorbell in dwords (64-bit); the device writes
    /// the read pointer back as a 32-bit dword offset into the ring.
    Pm4,
    /// An SDMA queue: write pointer, doorbell and read pointer in bytes (64-bit).
    Sdma,
    /// An SDMA queue on an XGMI engine (same packets and units as [`RingKind::Sdma`]).
    SdmaXgmi,
}

impl RingKind {
    fn queue_type(self) -> u32 {
        match self {
            RingKind::Pm4 => KFD_IOC_QUEUE_TYPE_COMPUTE,
            RingKind::Sdma => KFD_IOC_QUEUE_TYPE_SDMA,
            RingKind::SdmaXgmi => KFD_IOC_QUEUE_TYPE_SDMA_XGMI,
        }
    }

    /// Bytes per pointer unit.
    fn unit(self) -> u64 {
        if self == RingKind::Pm4 {
            4
        } else {
            1
        }
    }
}

/// A PM4 or SDMA queue and its single producer: a byte ring of dwords, the read pointer at
/// offset 0 and the write pointer at offset 8 of a pointer page, a doorbell in the mapped
/// doorbell slice.
pub struct RingQueue {
    /// First: the queue is destroyed before its ring and pointers are freed.
    queue: KfdQueue,
    pub id: u32,
    pub gpu_id: u32,
    pub kind: RingKind,
    pub ring: GpuMemory,
    /// Bytes of the ring (the buffer may be larger: allocations are whole pages).
    pub ring_bytes: u64,
    /// Read pointer at 0, write pointer at 8.
    pub ptrs: GpuMemory,
    pub doorbell_offset: u64,
    /// Dwords written so far (does not wrap).
    written: AtomicU64,
}

impl RingQueue {
    /// Creates a queue of `kind` on a ring of `bytes` bytes (a power of two, at least 1024).
    pub fn new(kfd: &Kfd, gpu_id: u32, kind: RingKind, bytes: u64) -> Result<RingQueue, Errno> {
        let ring = kfd.alloc(gpu_id, bytes, Kind::Gtt)?;
        let ptrs = kfd.alloc(gpu_id, 4096, Kind::Gtt)?;
        let mut a = CreateQueueArgs {
            ring_base_address: ring.va(),
            write_pointer_address: ptrs.addr(8),
            read_pointer_address: ptrs.addr(0),
            ring_size: bytes as u32,
            gpu_id,
            queue_type: kind.queue_type(),
            queue_percentage: 100,
            queue_priority: 7,
            ..Default::default()
        };
        let queue = KfdQueue::create(kfd, &mut a)?;
        Ok(RingQueue {
            id: queue.id,
            doorbell_offset: queue.doorbell_offset,
            queue,
            gpu_id,
            kind,
            ring,
            ring_bytes: bytes,
            ptrs,
            written: AtomicU64::new(0),
        })
    }

    /// UPDATE_QUEUE with the queue's own ring and `percentage` (0 preempts the queue, 100
    /// resumes it).
    pub fn update(&self, percentage: u32) -> Result<(), Errno> {
        let mut a = UpdateQueueArgs {
            ring_base_address: self.ring.va(),
            queue_id: self.id,
            ring_size: self.ring_bytes as u32,
            queue_percentage: percentage,
            queue_priority: 7,
        };
        // SAFETY: the ring base is a GPU address, reached through the device's VM.
        unsafe { self.queue.kfd.call(AMDKFD_IOC_UPDATE_QUEUE, &mut a) }
    }

    /// Dwords the ring holds.
    pub fn ring_dwords(&self) -> u64 {
        self.ring_bytes / 4
    }

    /// Dwords written so far (the write pointer in dwords; it does not wrap).
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// The read pointer as the device wrote it back, in the queue's units (PM4: a dword offset
    /// into the ring; SDMA: bytes consumed).
    pub fn read_pointer(&self) -> u64 {
        match self.kind {
            RingKind::Pm4 => u64::from(self.ptrs.u32_at(0).load(Ordering::Acquire)),
            _ => self.ptrs.u64_at(0).load(Ordering::Acquire),
        }
    }

    /// Whether the device has consumed everything written.
    pub fn idle(&self) -> bool {
        let w = self.written();
        match self.kind {
            RingKind::Pm4 => self.read_pointer() == w % self.ring_dwords(),
            _ => self.read_pointer() == w * 4,
        }
    }

    /// Copies `packet` into the ring at the write pointer (wrapping at the ring end) without
    /// announcing it; returns the new write pointer in dwords. The caller keeps the packets
    /// in flight within the ring.
    pub fn write(&self, packet: &[u32]) -> u64 {
        let n = self.ring_dwords();
        let mut at = self.written();
        for d in packet {
            self.ring.u32_at((at % n) * 4).store(*d, Ordering::Relaxed);
            at += 1;
        }
        self.written.store(at, Ordering::Release);
        at
    }

    /// Stores the write pointer and rings the doorbell with it, in the queue's units (what
    /// kfdtest's PM4Queue / SDMAQueue SubmitPacket do on gfx9+).
    pub fn commit(&self) {
        let value = self.written() * 4 / self.kind.unit();
        self.ptrs.u64_at(8).store(value, Ordering::Release);
        self.ring_doorbell(value);
    }

    /// Rings the doorbell with a raw value (a plain 64-bit store).
    pub fn ring_doorbell(&self, value: u64) {
        self.queue.ring_doorbell(value);
    }

    /// write + commit.
    pub fn submit(&self, packet: &[u32]) -> u64 {
        let w = self.write(packet);
        self.commit();
        w
    }

    pub fn kfd(&self) -> &Kfd {
        &self.queue.kfd
    }
}

/// Packet builders.
pub mod packet {
    use uapi::aql::*;
    use uapi::IntoBytes;

    /// A header of `ptype` with system-scope acquire and release fences.
    pub fn header(ptype: u8, barrier: bool) -> u16 {
        u16::from(ptype)
            | u16::from(barrier) << HSA_PACKET_HEADER_BARRIER
            | HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE
            | HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE
    }

    pub fn to_bytes<T: IntoBytes + uapi::Immutable>(p: &T) -> [u8; AQL_PACKET_SIZE] {
        p.as_bytes().try_into().expect("AQL packets are 64 bytes")
    }

    pub fn barrier_and(deps: [u64; 5], completion: u64, barrier: bool) -> [u8; AQL_PACKET_SIZE] {
        to_bytes(&BarrierPacket {
            header: header(HSA_PACKET_TYPE_BARRIER_AND, barrier),
            dep_signal: deps,
            completion_signal: completion,
            ..Default::default()
        })
    }

    pub fn barrier_or(deps: [u64; 5], completion: u64, barrier: bool) -> [u8; AQL_PACKET_SIZE] {
        to_bytes(&BarrierPacket {
            header: header(HSA_PACKET_TYPE_BARRIER_OR, barrier),
            dep_signal: deps,
            completion_signal: completion,
            ..Default::default()
        })
    }

    pub fn barrier_value(signal: u64, cond: u32, value: i64, mask: i64, completion: u64) -> [u8; AQL_PACKET_SIZE] {
        to_bytes(&AmdBarrierValuePacket {
            header: AmdVendorPacketHeader {
                header: header(HSA_PACKET_TYPE_VENDOR_SPECIFIC, false),
                amd_format: HSA_AMD_PACKET_TYPE_BARRIER_VALUE,
                reserved: 0,
            },
            signal,
            value,
            mask,
            cond,
            completion_signal: completion,
            ..Default::default()
        })
    }

    /// A 1-dimensional dispatch of `grid` work-items in workgroups of `wg`.
    pub fn dispatch(
        kernel_object: u64,
        kernarg: u64,
        grid: [u32; 3],
        wg: [u16; 3],
        completion: u64,
        barrier: bool,
    ) -> [u8; AQL_PACKET_SIZE] {
        let dims = if grid[2] > 1 || wg[2] > 1 {
            3
        } else if grid[1] > 1 || wg[1] > 1 {
            2
        } else {
            1
        };
        to_bytes(&KernelDispatchPacket {
            header: header(HSA_PACKET_TYPE_KERNEL_DISPATCH, barrier),
            setup: dims,
            workgroup_size_x: wg[0],
            workgroup_size_y: wg[1],
            workgroup_size_z: wg[2],
            grid_size_x: grid[0],
            grid_size_y: grid[1],
            grid_size_z: grid[2],
            kernel_object,
            kernarg_address: kernarg,
            completion_signal: completion,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Transport;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use uapi::{FromBytes, IntoBytes};

    /// A device that allocates buffers (backing files it creates) and answers CREATE_QUEUE with
    /// the doorbell offset it is given; it records the queues destroyed.
    struct FakeDevice {
        dir: PathBuf,
        doorbell_offset: u64,
        next_offset: Mutex<u64>,
        destroyed: Mutex<Vec<u32>>,
    }

    impl FakeDevice {
        fn backing(&self, space: &str, offset: u64, len: u64) {
            let dir = self.dir.join(self.pid().to_string()).join(space);
            std::fs::create_dir_all(&dir).unwrap();
            let f = std::fs::File::create(dir.join(format!("{offset:016x}"))).unwrap();
            f.set_len(len).unwrap();
        }
    }

    impl Transport for FakeDevice {
        unsafe fn ioctl(&self, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
            if cmd == AMDKFD_IOC_ALLOC_MEMORY_OF_GPU {
                let mut a = AllocMemoryOfGpuArgs::read_from_bytes(arg).unwrap();
                let mut next = self.next_offset.lock().unwrap();
                a.handle = *next;
                a.mmap_offset = *next << 12;
                *next += 1;
                self.backing("render", a.mmap_offset, a.size);
                arg.copy_from_slice(a.as_bytes());
            } else if cmd == AMDKFD_IOC_CREATE_QUEUE {
                let mut a = CreateQueueArgs::read_from_bytes(arg).unwrap();
                a.queue_id = 3;
                a.doorbell_offset = self.doorbell_offset;
                self.backing("kfd", self.doorbell_offset & !(DOORBELL_SLICE - 1), DOORBELL_SLICE);
                arg.copy_from_slice(a.as_bytes());
            } else if cmd == AMDKFD_IOC_DESTROY_QUEUE {
                let a = DestroyQueueArgs::read_from_bytes(arg).unwrap();
                self.destroyed.lock().unwrap().push(a.queue_id);
            }
            Ok(())
        }

        fn runtime_dir(&self) -> &Path {
            &self.dir
        }

        fn pid(&self) -> u32 {
            std::process::id()
        }

        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    /// A queue on a fake device that answers `doorbell_offset`; what AqlQueue::new returned and
    /// the queues the device was asked to destroy.
    fn create(doorbell_offset: u64, tag: &str) -> (Result<(), Errno>, Vec<u32>) {
        let dir = std::env::temp_dir().join(format!("thunk-queue-{tag}-{}", std::process::id()));
        let kfd = Kfd::new(Box::new(FakeDevice {
            dir: dir.clone(),
            doorbell_offset,
            next_offset: Mutex::new(1),
            destroyed: Mutex::new(Vec::new()),
        }));
        let made = AqlQueue::new(&kfd, 1, 16).map(drop);
        let fake: &FakeDevice = kfd.transport().as_any().downcast_ref().unwrap();
        let destroyed = fake.destroyed.lock().unwrap().clone();
        std::fs::remove_dir_all(&dir).unwrap();
        (made, destroyed)
    }

    #[test]
    fn a_misaligned_doorbell_is_refused_and_its_queue_destroyed() {
        // Bytes 0x1FFC..0x2004 would straddle the slice's end.
        assert_eq!(create((3 << 62) | 0x1FFC, "misaligned"), (Err(Errno::EINVAL), vec![3]));
    }

    #[test]
    fn an_aligned_doorbell_maps() {
        // Created, then destroyed when dropped.
        assert_eq!(create((3 << 62) | 0x1FF8, "aligned"), (Ok(()), vec![3]));
    }
}
