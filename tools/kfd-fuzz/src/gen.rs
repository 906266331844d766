//! The generator: the next operation of a case, from the PRNG and what the model knows.
//!
//! Requests come in four grades: valid (well-formed, naming live objects), almost valid (one
//! field set to a boundary value), mutated (bytes flipped, the size or direction in the request
//! number changed, the buffer cut short) and random (any number, any bytes). Host pointers are
//! always symbolic and safe ([`crate::arena`]).

use crate::exec::{Harness, Proc, MAX_AQL_QUEUES, MAX_FILES, MAX_SIGNAL_SETS};
use crate::model::Model;
use crate::ops::{self, Call, Expect, FileTarget, Op, Packet, Ptr};
use crate::rng::Rng;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::vendor::{CUSE_KFD_IOC_GET_RUNTIME_INFO, CUSE_KFD_IOC_KICK};
use uapi::IntoBytes;

/// Request numbers weighted towards those that create, use and destroy objects.
const HOT: [u32; 16] = [0x02, 0x03, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x16, 0x16, 0x17, 0x18, 0x18, 0x19, 0x1A, 0x08];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grade {
    Valid,
    Almost,
    Mutated,
    Random,
}

pub struct Gen {
    pub rng: Rng,
    requests: Vec<(&'static str, u32)>,
}

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen { rng: Rng::new(seed), requests: ops::all_requests() }
    }

    /// The next operation for the case running in `h`.
    pub fn next(&mut self, h: &Harness) -> Op {
        let n = h.procs.len();
        let p = self.rng.below(n as u64) as usize;
        let proc = &h.procs[p];
        let pi = p as u8;
        if !proc.alive() {
            return if self.rng.chance(1, 20) {
                Op::Sleep { us: self.rng.range(0, 2000) as u32 }
            } else {
                Op::Open { p: pi }
            };
        }
        if proc.thunk_mode {
            self.thunk_op(h, proc)
        } else {
            self.raw_op(h, proc)
        }
    }

    fn raw_op(&mut self, h: &Harness, proc: &Proc) -> Op {
        let p = proc.index;
        let f = self.rng.below(MAX_FILES as u64) as u8;
        let weights = [40, 20, 12, 4, 8, 1, 4, 1, 1, 1, 1, 1, 1, 6];
        match self.rng.weighted(&weights) {
            13 => self.file_write(proc).unwrap_or(Op::Sleep { us: 10 }),
            0 => Op::Ioctl { p, f, call: self.call(&h.gpus, &proc.model, Grade::Valid) },
            1 => Op::Ioctl { p, f, call: self.call(&h.gpus, &proc.model, Grade::Almost) },
            2 => Op::Ioctl { p, f, call: self.call(&h.gpus, &proc.model, Grade::Mutated) },
            3 => Op::Ioctl { p, f, call: self.call(&h.gpus, &proc.model, Grade::Random) },
            4 => self.steal(h, proc).unwrap_or(Op::Ioctl { p, f, call: self.call(&h.gpus, &proc.model, Grade::Valid) }),
            5 => Op::ForeignFile { p, owner: self.rng.below(h.procs.len() as u64) as u8 },
            6 => self.park(proc),
            7 => {
                let (events, all, _) = self.wait_events(&proc.model);
                Op::ThreadWait { p, events, all, timeout_ms: self.rng.range(0, 30) as u32 }
            }
            8 => Op::Interrupt { p, w: self.rng.u32() },
            9 if proc.files.len() < MAX_FILES => Op::Open { p },
            10 => Op::Close { p, f },
            11 => Op::Kill { p },
            _ => Op::Sleep { us: self.rng.range(0, 3000) as u32 },
        }
    }

    fn thunk_op(&mut self, _h: &Harness, proc: &Proc) -> Op {
        let p = proc.index;
        let t = proc.thunk.as_ref().expect("alive thunk process");
        let queues = t.queues.len();
        let weights = [8, 2, 25, 5, 3, 4, 4, 5, 1, 1, 6, 1, 1];
        let q = self.rng.u32();
        match self.rng.weighted(&weights) {
            0 if queues < MAX_AQL_QUEUES => Op::AqlCreate { p, slots: 1 << self.rng.range(4, 8) },
            1 => Op::AqlDestroy { p, q },
            2 | 0 => Op::AqlSubmit { p, q, packet: self.packet() },
            3 => {
                let mut bytes = self.rng.bytes(64);
                if self.rng.chance(1, 2) {
                    // A plausible header: a real packet type, so the body is parsed.
                    bytes[0] = self.rng.range(0, 6) as u8;
                }
                let doorbell = self.rng.chance(3, 4).then(|| self.rng.interesting_u64());
                Op::AqlGarbage { p, q, slot: self.rng.u32(), bytes, doorbell }
            }
            4 => Op::Doorbell { p, q, value: self.rng.interesting_u64() },
            5 if t.signals.len() < MAX_SIGNAL_SETS => Op::Signals { p, count: self.rng.range(1, 16) as u32 },
            6 => Op::AttachEvent { p, s: self.rng.u32(), i: self.rng.u32() },
            7 => self.park(proc),
            8 => {
                let (events, all, _) = self.wait_events(&proc.model);
                Op::ThreadWait { p, events, all, timeout_ms: self.rng.range(0, 30) as u32 }
            }
            9 => Op::Interrupt { p, w: self.rng.u32() },
            10 => {
                // SET / RESET / DESTROY of its own events through raw requests.
                let id = self.pick_event(&proc.model).unwrap_or(1);
                let cmd = *self.rng.pick(&[AMDKFD_IOC_SET_EVENT, AMDKFD_IOC_SET_EVENT, AMDKFD_IOC_RESET_EVENT]);
                let data = SetEventArgs { event_id: id, pad: 0 }.as_bytes().to_vec();
                Op::Ioctl { p, f: 0, call: Call { cmd, data, ptrs: Vec::new(), short: None, expect: Expect::Any } }
            }
            11 => Op::Kill { p },
            _ => Op::Sleep { us: self.rng.range(0, 3000) as u32 },
        }
    }

    /// A store into one of a raw process's rings, pointers or doorbells: a packet (plausible
    /// or garbage) into a slot, a read/write index, or a doorbell value.
    fn file_write(&mut self, proc: &Proc) -> Option<Op> {
        let m = &proc.model;
        let p = proc.index;
        if !m.queues.is_empty() && self.rng.chance(1, 2) {
            let q = self.pick_queue(m)?;
            let value = if self.rng.chance(3, 4) { self.rng.below(64) } else { self.rng.interesting_u64() };
            return Some(Op::FileWrite {
                p,
                target: FileTarget::Doorbell(q),
                off: 0,
                bytes: value.to_le_bytes().to_vec(),
            });
        }
        let h = self.pick_buffer(m)?;
        let size = m.buffers[&h].size;
        let off = self.rng.below(size / 8) * 8;
        let bytes = match self.rng.below(4) {
            0 => self.rng.below(64).to_le_bytes().to_vec(),
            1 => {
                let mut b = self.rng.bytes(64);
                b[0] = self.rng.range(0, 6) as u8;
                b
            }
            2 => {
                use uapi::aql::*;
                let header = u16::from(HSA_PACKET_TYPE_BARRIER_AND)
                    | u16::from(self.rng.chance(1, 2)) << HSA_PACKET_HEADER_BARRIER;
                let pk = BarrierPacket { header, ..Default::default() };
                pk.as_bytes().to_vec()
            }
            _ => {
                let n = self.rng.range(1, 256) as usize;
                self.rng.bytes(n)
            }
        };
        let off = if self.rng.chance(1, 2) { off & !63 } else { off };
        Some(Op::FileWrite { p, target: FileTarget::Buffer(h), off, bytes })
    }

    fn packet(&mut self) -> Packet {
        let sig = |r: &mut Rng| (r.u32(), r.u32());
        match self.rng.weighted(&[50, 3, 8, 20, 10]) {
            0 => Packet::BarrierAnd { signal: self.rng.chance(2, 3).then(|| sig(&mut self.rng)) },
            1 => Packet::BarrierOr,
            2 => Packet::BarrierValue {
                signal: sig(&mut self.rng),
                cond: self.rng.range(0, 5) as u32,
                value: self.rng.range(0, 2) as i64,
                mask: -1,
            },
            3 => Packet::Dispatch {
                builtin: self.rng.range(0, 7) as u32,
                args: [self.rng.interesting_u64(), self.rng.below(1000)],
                grid: self.rng.range(1, 256) as u32,
                wg: self.rng.range(1, 64) as u16,
                signal: self.rng.chance(1, 2).then(|| sig(&mut self.rng)),
            },
            _ => Packet::Bogus {
                object: self.rng.interesting_u64(),
                kernarg: self.rng.interesting_u64(),
                grid: [self.rng.range(0, 64) as u32, self.rng.range(0, 2) as u32, 1],
                wg: [self.rng.range(0, 64) as u16, 1, self.rng.range(0, 2) as u16],
                setup: self.rng.range(0, 4) as u16,
            },
        }
    }

    fn pick_event(&mut self, m: &Model) -> Option<u32> {
        let ids: Vec<u32> = m.events.keys().copied().collect();
        (!ids.is_empty()).then(|| *self.rng.pick(&ids))
    }

    fn pick_buffer(&mut self, m: &Model) -> Option<u64> {
        let ids: Vec<u64> = m.buffers.keys().copied().collect();
        (!ids.is_empty()).then(|| *self.rng.pick(&ids))
    }

    fn pick_queue(&mut self, m: &Model) -> Option<u32> {
        let ids: Vec<u32> = m.queues.keys().copied().collect();
        (!ids.is_empty()).then(|| *self.rng.pick(&ids))
    }

    /// Events to wait on: mostly live ones with age 0 or 1, sometimes unknown ids; any/all;
    /// the timeout.
    fn wait_events(&mut self, m: &Model) -> (Vec<(u32, u64)>, bool, u32) {
        let n = self.rng.range(0, 4) as usize;
        let mut events = Vec::with_capacity(n);
        for _ in 0..n {
            let id = match self.pick_event(m) {
                Some(id) if self.rng.chance(7, 8) => id,
                _ => self.rng.interesting_u32(),
            };
            events.push((id, self.rng.below(3)));
        }
        let timeout = match self.rng.below(6) {
            0 => 0,
            1 => KFD_EVENT_TIMEOUT_INFINITE,
            2 => self.rng.range(20, 200) as u32,
            _ => self.rng.range(1, 20) as u32,
        };
        (events, self.rng.chance(1, 2), timeout)
    }

    fn park(&mut self, proc: &Proc) -> Op {
        let (events, all, timeout_ms) = self.wait_events(&proc.model);
        Op::Park { p: proc.index, events, all, timeout_ms }
    }

    /// A random safe pointer.
    pub fn ptr(&mut self) -> Ptr {
        match self.rng.below(7) {
            0 => Ptr::Null,
            1 => Ptr::Low(self.rng.below(0x1_0000)),
            2 => Ptr::Arena(self.rng.below(crate::arena::ARENA_SIZE) as u32),
            // Runs off the end of the arena into the hole.
            3 => Ptr::Arena((crate::arena::ARENA_SIZE - self.rng.range(1, 64)) as u32),
            4 => Ptr::Hole(self.rng.below(crate::arena::HOLE_SIZE)),
            5 => Ptr::High(self.rng.interesting_u64()),
            _ => {
                let n = self.rng.range(0, 256) as usize;
                Ptr::Data(self.rng.bytes(n))
            }
        }
    }

    fn gpu(&mut self, gpus: &[u32]) -> u32 {
        *self.rng.pick(gpus)
    }

    /// A request of the given grade for a raw process whose model is `m`.
    pub fn call(&mut self, gpus: &[u32], m: &Model, grade: Grade) -> Call {
        if grade == Grade::Random {
            let cmd = match self.rng.below(4) {
                0 => self.rng.u32(),
                1 => ioc(
                    self.rng.below(4) as u32,
                    AMDKFD_IOCTL_BASE,
                    self.rng.below(256) as u32,
                    self.rng.below(512) as usize,
                ),
                _ => self.rng.pick(&self.requests.clone()).1,
            };
            let n = ioc_size(cmd).min(512);
            let ptrs = (0..self.rng.below(3)).map(|_| ((self.rng.below(64) as u16) & !7, self.ptr())).collect();
            return Call { cmd, data: self.rng.bytes(n), ptrs, short: None, expect: Expect::Any };
        }
        let nr =
            if self.rng.chance(1, 2) { *self.rng.pick(&HOT) } else { ioc_nr(self.rng.pick(&self.requests.clone()).1) };
        let mut call = self.valid(gpus, m, nr);
        // Every host pointer field gets a pointer, whatever the grade.
        for off in ops::host_ptrs(nr).iter().chain(ops::extra_host_ptrs(nr)) {
            if !call.ptrs.iter().any(|(o, _)| o == off) {
                let p = if grade == Grade::Valid {
                    Ptr::Arena(self.rng.below(crate::arena::DATA_SIZE) as u32)
                } else {
                    self.ptr()
                };
                call.ptrs.push((*off, p));
            }
        }
        match grade {
            Grade::Almost => self.almost(&mut call, nr),
            Grade::Mutated => self.mutate(&mut call),
            _ => {}
        }
        if grade != Grade::Valid {
            call.expect = Expect::Any;
        }
        call
    }

    /// One field set to a boundary value, or one pointer to a bad one.
    fn almost(&mut self, call: &mut Call, nr: u32) {
        let fields = ops::fields(nr);
        if fields.is_empty() {
            return;
        }
        let i = self.rng.below(fields.len() as u64) as usize;
        let off: usize = fields[..i].iter().map(|w| usize::from(*w)).sum();
        let w = usize::from(fields[i]);
        if let Some(slot) = call.ptrs.iter_mut().find(|(o, _)| usize::from(*o) == off) {
            slot.1 = self.ptr();
            return;
        }
        let v = if w == 8 { self.rng.interesting_u64() } else { u64::from(self.rng.interesting_u32()) };
        if off + w <= call.data.len() {
            call.data[off..off + w].copy_from_slice(&v.to_le_bytes()[..w]);
        }
        if self.rng.chance(1, 10) {
            // The other struct size of the same request (an older or newer header).
            let size = if nr == 0x02 { CREATE_QUEUE_ARGS_SIZE_V1_16 } else { ioc_size(call.cmd) + 8 };
            call.cmd = ioc(ioc_dir(call.cmd), ioc_type(call.cmd), ioc_nr(call.cmd), size);
        }
    }

    /// Bytes flipped; sometimes the request number's size, direction, type or number changed,
    /// or the buffer cut short.
    fn mutate(&mut self, call: &mut Call) {
        for _ in 0..self.rng.range(1, 4) {
            if call.data.is_empty() {
                break;
            }
            let i = self.rng.below(call.data.len() as u64) as usize;
            match self.rng.below(3) {
                0 => call.data[i] ^= 1 << self.rng.below(8),
                1 => call.data[i] = self.rng.next_u64() as u8,
                _ => {
                    let at = i & !3;
                    if at + 4 <= call.data.len() {
                        let v = self.rng.interesting_u32();
                        call.data[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
        }
        let (dir, ty, nr, size) = (ioc_dir(call.cmd), ioc_type(call.cmd), ioc_nr(call.cmd), ioc_size(call.cmd));
        match self.rng.below(12) {
            0 => call.cmd = ioc(dir, ty, nr, self.rng.below(size as u64 + 33) as usize),
            1 => call.cmd = ioc(self.rng.below(4) as u32, ty, nr, size),
            2 => call.cmd = ioc(dir, self.rng.below(256) as u32, nr, size),
            3 => call.cmd = ioc(dir, ty, *self.rng.pick(&[0, 0x27, 0x28, 0x7F, 0x80, 0x81, 0x82, 0xFF]), size),
            4 if size > 0 => call.short = Some(self.rng.below(size as u64) as u16),
            _ => {}
        }
        call.data.resize(ioc_size(call.cmd).min(512), 0);
    }

    /// A request for a process whose model is `m` that it could have sent with every argument
    /// right (which may still fail: limits, state).
    fn valid(&mut self, gpus: &[u32], m: &Model, nr: u32) -> Call {
        let gpu = self.gpu(gpus);
        let mut expect = Expect::Any;
        let mut ptrs: Vec<(u16, Ptr)> = Vec::new();
        let (cmd, data): (u32, Vec<u8>) = match nr {
            0x01 => {
                expect = Expect::Ok;
                (AMDKFD_IOC_GET_VERSION, GetVersionArgs::default().as_bytes().to_vec())
            }
            0x02 => (AMDKFD_IOC_CREATE_QUEUE, self.create_queue(m, gpu).as_bytes().to_vec()),
            0x03 => {
                let q = self.pick_queue(m);
                expect = if q.is_some() { Expect::Ok } else { Expect::Any };
                (AMDKFD_IOC_DESTROY_QUEUE, DestroyQueueArgs { queue_id: q.unwrap_or(0), pad: 0 }.as_bytes().to_vec())
            }
            0x04 => {
                let a = SetMemoryPolicyArgs {
                    alternate_aperture_base: self.rng.below(1 << 40) & !0xFFFF,
                    alternate_aperture_size: self.rng.below(1 << 30) & !0xFFFF,
                    gpu_id: gpu,
                    default_policy: self.rng.below(2) as u32,
                    alternate_policy: self.rng.below(2) as u32,
                    pad: 0,
                };
                (AMDKFD_IOC_SET_MEMORY_POLICY, a.as_bytes().to_vec())
            }
            0x05 => {
                expect = Expect::Ok;
                (
                    AMDKFD_IOC_GET_CLOCK_COUNTERS,
                    GetClockCountersArgs { gpu_id: gpu, ..Default::default() }.as_bytes().to_vec(),
                )
            }
            0x06 => {
                expect = Expect::Ok;
                (AMDKFD_IOC_GET_PROCESS_APERTURES, GetProcessAperturesArgs::default().as_bytes().to_vec())
            }
            0x07 => {
                let (ring, size) = self.ring(m);
                let a = UpdateQueueArgs {
                    ring_base_address: if self.rng.chance(1, 5) { 0 } else { ring },
                    queue_id: self.pick_queue(m).unwrap_or(0),
                    ring_size: size,
                    queue_percentage: *self.rng.pick(&[0, 50, 100, 100]),
                    queue_priority: self.rng.range(0, 15) as u32,
                };
                (AMDKFD_IOC_UPDATE_QUEUE, a.as_bytes().to_vec())
            }
            0x08 => {
                let event_type = if self.rng.chance(3, 4) { KFD_IOC_EVENT_SIGNAL } else { self.rng.range(0, 8) as u32 };
                let mut a = CreateEventArgs { event_type, auto_reset: self.rng.below(2) as u32, ..Default::default() };
                if m.event_page.is_none() && !m.device_page && self.rng.chance(1, 3) {
                    // A GTT buffer of its own as the event page (the dGPU path).
                    let gtt: Vec<u64> = m
                        .buffers
                        .iter()
                        .filter(|(_, b)| b.flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT != 0)
                        .map(|(h, _)| *h)
                        .collect();
                    if !gtt.is_empty() {
                        a.event_page_offset = *self.rng.pick(&gtt);
                    }
                }
                (AMDKFD_IOC_CREATE_EVENT, a.as_bytes().to_vec())
            }
            0x09..=0x0B => {
                let e = self.pick_event(m);
                let signal =
                    e.is_some_and(|id| m.events.get(&id).is_some_and(|ev| ev.event_type == KFD_IOC_EVENT_SIGNAL));
                if nr == 0x09 && e.is_some() || signal {
                    expect = Expect::Ok;
                }
                let cmd =
                    [AMDKFD_IOC_DESTROY_EVENT, AMDKFD_IOC_SET_EVENT, AMDKFD_IOC_RESET_EVENT][(nr - 0x09) as usize];
                (cmd, DestroyEventArgs { event_id: e.unwrap_or(1), pad: 0 }.as_bytes().to_vec())
            }
            0x0C => {
                let (events, all, _) = self.wait_events(m);
                let data: Vec<EventData> = events
                    .iter()
                    .map(|&(event_id, age)| EventData { payload: [age, 0, 0, 0], event_id, ..Default::default() })
                    .collect();
                ptrs.push((0, Ptr::Data(data.as_bytes().to_vec())));
                let timeout = if self.rng.chance(3, 4) { 0 } else { self.rng.range(1, 20) as u32 };
                let a = WaitEventsArgs {
                    events_ptr: 0,
                    num_events: events.len() as u32,
                    wait_for_all: u32::from(all),
                    timeout,
                    wait_result: 0,
                };
                (AMDKFD_IOC_WAIT_EVENTS, a.as_bytes().to_vec())
            }
            0x0D..=0x10 => {
                let cmd = [
                    AMDKFD_IOC_DBG_REGISTER_DEPRECATED,
                    AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED,
                    AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED,
                    AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED,
                ][(nr - 0x0D) as usize];
                let mut d = vec![0u8; ioc_size(cmd)];
                let at = if nr >= 0x0F { 8 } else { 0 };
                d[at..at + 4].copy_from_slice(&gpu.to_le_bytes());
                (cmd, d)
            }
            0x11 => {
                let a = SetScratchBackingVaArgs { va_addr: self.rng.below(1 << 47), gpu_id: gpu, pad: 0 };
                (AMDKFD_IOC_SET_SCRATCH_BACKING_VA, a.as_bytes().to_vec())
            }
            0x12 => {
                let a = GetTileConfigArgs {
                    num_tile_configs: self.rng.below(70) as u32,
                    num_macro_tile_configs: self.rng.below(70) as u32,
                    gpu_id: gpu,
                    ..Default::default()
                };
                ptrs.push((0, Ptr::Arena(self.rng.below(crate::arena::DATA_SIZE) as u32)));
                ptrs.push((8, Ptr::Arena(self.rng.below(crate::arena::DATA_SIZE) as u32)));
                (AMDKFD_IOC_GET_TILE_CONFIG, a.as_bytes().to_vec())
            }
            0x13 => {
                let a = SetTrapHandlerArgs {
                    tba_addr: self.rng.below(1 << 47),
                    tma_addr: self.rng.below(1 << 47),
                    gpu_id: gpu,
                    pad: 0,
                };
                (AMDKFD_IOC_SET_TRAP_HANDLER, a.as_bytes().to_vec())
            }
            0x14 => {
                let a = GetProcessAperturesNewArgs {
                    kfd_process_device_apertures_ptr: 0,
                    num_of_nodes: self.rng.below(4) as u32,
                    pad: 0,
                };
                ptrs.push((0, Ptr::Arena(self.rng.below(crate::arena::DATA_SIZE) as u32)));
                (AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, a.as_bytes().to_vec())
            }
            0x15 => (
                AMDKFD_IOC_ACQUIRE_VM,
                AcquireVmArgs { drm_fd: self.rng.below(8) as u32, gpu_id: gpu }.as_bytes().to_vec(),
            ),
            0x16 => return self.alloc(m, gpu),
            0x17 => {
                let b = self.pick_buffer(m);
                (AMDKFD_IOC_FREE_MEMORY_OF_GPU, FreeMemoryOfGpuArgs { handle: b.unwrap_or(1) }.as_bytes().to_vec())
            }
            0x18 | 0x19 => {
                let b = self.pick_buffer(m).unwrap_or(u64::from(gpu) << 32 | 1);
                let mut ids = vec![(b >> 32) as u32];
                if self.rng.chance(1, 8) {
                    ids = gpus.to_vec();
                }
                ptrs.push((8, Ptr::Data(ids.as_bytes().to_vec())));
                let a = MapMemoryToGpuArgs {
                    handle: b,
                    device_ids_array_ptr: 0,
                    n_devices: ids.len() as u32,
                    n_success: 0,
                };
                (
                    if nr == 0x18 { AMDKFD_IOC_MAP_MEMORY_TO_GPU } else { AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU },
                    a.as_bytes().to_vec(),
                )
            }
            0x1A => {
                let words = self.rng.range(1, 3) as usize;
                let mask: Vec<u32> = (0..words).map(|_| self.rng.u32()).collect();
                ptrs.push((8, Ptr::Data(mask.as_bytes().to_vec())));
                let a = SetCuMaskArgs {
                    queue_id: self.pick_queue(m).unwrap_or(0),
                    num_cu_mask: 32 * words as u32,
                    cu_mask_ptr: 0,
                };
                (AMDKFD_IOC_SET_CU_MASK, a.as_bytes().to_vec())
            }
            0x1B => {
                let a = GetQueueWaveStateArgs { queue_id: self.pick_queue(m).unwrap_or(0), ..Default::default() };
                (AMDKFD_IOC_GET_QUEUE_WAVE_STATE, a.as_bytes().to_vec())
            }
            0x1C => (
                AMDKFD_IOC_GET_DMABUF_INFO,
                GetDmabufInfoArgs { dmabuf_fd: self.rng.below(8) as u32, ..Default::default() }.as_bytes().to_vec(),
            ),
            0x1D => {
                let a = ImportDmabufArgs {
                    va_addr: 0x20_0000_0000,
                    handle: 0,
                    gpu_id: gpu,
                    dmabuf_fd: self.rng.below(8) as u32,
                };
                (AMDKFD_IOC_IMPORT_DMABUF, a.as_bytes().to_vec())
            }
            0x1E => {
                let a = AllocQueueGwsArgs {
                    queue_id: self.pick_queue(m).unwrap_or(0),
                    num_gws: self.rng.below(4) as u32,
                    ..Default::default()
                };
                (AMDKFD_IOC_ALLOC_QUEUE_GWS, a.as_bytes().to_vec())
            }
            0x1F => (AMDKFD_IOC_SMI_EVENTS, SmiEventsArgs { gpuid: gpu, anon_fd: 0 }.as_bytes().to_vec()),
            0x20 => {
                // An address this process never maps: SET_ATTR never registers fuzzer memory the
                // GPU could then reach (it is EFAULT after the attributes are checked).
                let sent = self.rng.below(4) as u32;
                let nattr = sent + u32::from(self.rng.chance(1, 8));
                let a = SvmArgs { start_addr: 0x30_0000_0000, size: PAGE_SIZE, op: self.rng.below(3) as u32, nattr };
                let mut b = a.as_bytes().to_vec();
                for _ in 0..sent {
                    let value = if self.rng.chance(1, 2) { gpu } else { self.rng.u32() };
                    b.extend_from_slice(SvmAttribute { type_: self.rng.below(9) as u32, value }.as_bytes());
                }
                let cmd = ioc(ioc_dir(AMDKFD_IOC_SVM), ioc_type(AMDKFD_IOC_SVM), ioc_nr(AMDKFD_IOC_SVM), b.len());
                (cmd, b)
            }
            // Query (-1) or off (0), never on: with XNACK on the GPU reaches all of this
            // process's memory (map-on-fault), and its garbage packets would write the fuzzer's
            // own stack and heap, as on real hardware (see the SVM case above).
            0x21 => (
                AMDKFD_IOC_SET_XNACK_MODE,
                SetXnackModeArgs { xnack_enabled: self.rng.range(0, 1) as i32 - 1 }.as_bytes().to_vec(),
            ),
            0x22 => (
                AMDKFD_IOC_CRIU_OP,
                CriuArgs { op: self.rng.range(0, 5) as u32, ..Default::default() }.as_bytes().to_vec(),
            ),
            0x23 => {
                expect = Expect::Ok;
                (
                    AMDKFD_IOC_AVAILABLE_MEMORY,
                    GetAvailableMemoryArgs { gpu_id: gpu, ..Default::default() }.as_bytes().to_vec(),
                )
            }
            0x24 => {
                let a = ExportDmabufArgs { handle: self.pick_buffer(m).unwrap_or(1), flags: 0, dmabuf_fd: 0 };
                (AMDKFD_IOC_EXPORT_DMABUF, a.as_bytes().to_vec())
            }
            0x25 => (
                AMDKFD_IOC_RUNTIME_ENABLE,
                RuntimeEnableArgs { r_debug: 0, mode_mask: self.rng.below(4) as u32, capabilities_mask: 0 }
                    .as_bytes()
                    .to_vec(),
            ),
            0x26 => (
                AMDKFD_IOC_DBG_TRAP,
                DbgTrapArgs { pid: 0, op: self.rng.below(16) as u32, op_args: [0; 3] }.as_bytes().to_vec(),
            ),
            0x80 => {
                expect = Expect::Ok;
                (CUSE_KFD_IOC_GET_RUNTIME_INFO, vec![0u8; ioc_size(CUSE_KFD_IOC_GET_RUNTIME_INFO)])
            }
            0x81 => {
                expect = Expect::Ok;
                (CUSE_KFD_IOC_KICK, Vec::new())
            }
            _ => (AMDKFD_IOC_GET_VERSION, vec![0u8; 8]),
        };
        Call { cmd, data, ptrs, short: None, expect }
    }

    /// A ring inside one of the process's buffers, mapped ones first: (base, size).
    fn ring(&mut self, m: &Model) -> (u64, u32) {
        let mapped: Vec<_> = m.buffers.values().filter(|b| b.size >= 1024 && !b.mapped.is_empty()).collect();
        let bufs: Vec<_> = if mapped.is_empty() || self.rng.chance(1, 8) {
            m.buffers.values().filter(|b| b.size >= 1024).collect()
        } else {
            mapped
        };
        if bufs.is_empty() {
            return (0x40_0000_0000, 4096);
        }
        let b = *self.rng.pick(&bufs);
        let max_log = 63 - b.size.leading_zeros() as u64;
        let size = 1u64 << self.rng.range(10, max_log.clamp(10, 16));
        (b.va, size.min(b.size) as u32)
    }

    fn create_queue(&mut self, m: &Model, gpu: u32) -> CreateQueueArgs {
        let (ring, size) = self.ring(m);
        let ring_gpu = m.buffers.values().find(|b| b.va == ring).map_or(gpu, |b| b.gpu);
        // Read and write pointers: in a mapped buffer (past the ring if it is the same one).
        let mapped: Vec<_> = m.buffers.values().filter(|b| !b.mapped.is_empty()).collect();
        let (rptr, wptr) = match mapped.get(self.rng.below(mapped.len().max(1) as u64) as usize) {
            Some(b) => {
                let start = if b.va == ring { u64::from(size) } else { 0 };
                let room = b.size.saturating_sub(start) / 16;
                let off = start + self.rng.below(room.max(1)) * 16;
                (b.va + off + 8, b.va + off)
            }
            None => (0x40_0000_1008, 0x40_0000_1000),
        };
        let queue_type =
            if self.rng.chance(7, 8) { KFD_IOC_QUEUE_TYPE_COMPUTE_AQL } else { self.rng.range(0, 4) as u32 };
        CreateQueueArgs {
            ring_base_address: ring,
            write_pointer_address: wptr,
            read_pointer_address: rptr,
            ring_size: size,
            gpu_id: ring_gpu,
            queue_type,
            queue_percentage: 100,
            queue_priority: self.rng.range(0, 15) as u32,
            sdma_engine_id: self.rng.below(4) as u32,
            ..Default::default()
        }
    }

    fn alloc(&mut self, m: &Model, gpu: u32) -> Call {
        let (flags, size) = match self.rng.weighted(&[10, 10, 1, 1, 1]) {
            0 => (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, PAGE_SIZE << self.rng.below(9)),
            1 => (
                KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT,
                PAGE_SIZE << self.rng.below(6),
            ),
            2 => (KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, 2 * PAGE_SIZE),
            3 => (KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, PAGE_SIZE),
            _ => (KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, PAGE_SIZE),
        };
        // VAs are handed out by the model, which does not know about this call yet: derive one
        // from the model's next VA and the PRNG so that most do not overlap.
        let va = m.next_va + self.rng.below(1 << 20) * 0x1_0000;
        let a = AllocMemoryOfGpuArgs { va_addr: va, size, handle: 0, mmap_offset: 0, gpu_id: gpu, flags };
        let ptr = if flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR != 0 { Ptr::Arena(0) } else { Ptr::Null };
        Call {
            cmd: AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
            data: a.as_bytes().to_vec(),
            ptrs: vec![(24, ptr)],
            short: None,
            expect: Expect::Any,
        }
    }

    /// A request by `proc` naming another process's object (which must fail).
    fn steal(&mut self, h: &Harness, proc: &Proc) -> Option<Op> {
        let victims: Vec<&Proc> = h.procs.iter().filter(|v| v.index != proc.index && v.alive()).collect();
        if victims.is_empty() {
            return None;
        }
        let v = *self.rng.pick(&victims);
        let m = &proc.model;
        let mut buffers: Vec<u64> = v.model.buffers.keys().copied().collect();
        if let Some(t) = &v.thunk {
            buffers.extend(t.queues.iter().flat_map(|q| [q.q.ring.handle(), q.q.desc.handle()]));
            buffers.extend(t.signals.iter().map(|s| s.mem.handle()));
        }
        buffers.retain(|b| !m.buffers.contains_key(b));
        let mut queues: Vec<u32> = v.model.queues.keys().copied().collect();
        if let Some(t) = &v.thunk {
            queues.extend(t.queues.iter().map(|q| q.q.id));
        }
        queues.retain(|q| !m.queues.contains_key(q));
        let events: Vec<u32> = v.model.events.keys().copied().filter(|e| !m.events.contains_key(e)).collect();
        let gpu = self.gpu(&h.gpus);
        let mut ptrs = Vec::new();
        let (cmd, data): (u32, Vec<u8>) = match self.rng.below(3) {
            0 if !buffers.is_empty() => {
                let b = *self.rng.pick(&buffers);
                match self.rng.below(5) {
                    0 => (AMDKFD_IOC_FREE_MEMORY_OF_GPU, FreeMemoryOfGpuArgs { handle: b }.as_bytes().to_vec()),
                    1 | 2 => {
                        ptrs.push((8, Ptr::Data(gpu.as_bytes().to_vec())));
                        let a = MapMemoryToGpuArgs { handle: b, device_ids_array_ptr: 0, n_devices: 1, n_success: 0 };
                        let cmd = if self.rng.chance(1, 2) {
                            AMDKFD_IOC_MAP_MEMORY_TO_GPU
                        } else {
                            AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU
                        };
                        (cmd, a.as_bytes().to_vec())
                    }
                    3 => (
                        AMDKFD_IOC_EXPORT_DMABUF,
                        ExportDmabufArgs { handle: b, flags: 0, dmabuf_fd: 0 }.as_bytes().to_vec(),
                    ),
                    _ => {
                        let a = CreateEventArgs {
                            event_page_offset: b,
                            event_type: KFD_IOC_EVENT_SIGNAL,
                            ..Default::default()
                        };
                        (AMDKFD_IOC_CREATE_EVENT, a.as_bytes().to_vec())
                    }
                }
            }
            1 if !queues.is_empty() => {
                let q = *self.rng.pick(&queues);
                match self.rng.below(5) {
                    0 => (AMDKFD_IOC_DESTROY_QUEUE, DestroyQueueArgs { queue_id: q, pad: 0 }.as_bytes().to_vec()),
                    1 => {
                        let a = UpdateQueueArgs {
                            ring_base_address: 0,
                            queue_id: q,
                            ring_size: 0,
                            queue_percentage: 0,
                            queue_priority: 0,
                        };
                        (AMDKFD_IOC_UPDATE_QUEUE, a.as_bytes().to_vec())
                    }
                    2 => {
                        ptrs.push((8, Ptr::Data(u32::MAX.as_bytes().to_vec())));
                        (
                            AMDKFD_IOC_SET_CU_MASK,
                            SetCuMaskArgs { queue_id: q, num_cu_mask: 32, cu_mask_ptr: 0 }.as_bytes().to_vec(),
                        )
                    }
                    3 => (
                        AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
                        GetQueueWaveStateArgs { queue_id: q, ..Default::default() }.as_bytes().to_vec(),
                    ),
                    _ => (
                        AMDKFD_IOC_ALLOC_QUEUE_GWS,
                        AllocQueueGwsArgs { queue_id: q, num_gws: 1, ..Default::default() }.as_bytes().to_vec(),
                    ),
                }
            }
            _ if !events.is_empty() => {
                let e = *self.rng.pick(&events);
                let cmd = *self.rng.pick(&[AMDKFD_IOC_DESTROY_EVENT, AMDKFD_IOC_SET_EVENT, AMDKFD_IOC_RESET_EVENT]);
                (cmd, SetEventArgs { event_id: e, pad: 0 }.as_bytes().to_vec())
            }
            _ => return None,
        };
        let nr = ioc_nr(cmd);
        let expect = crate::errnos::foreign(nr).map_or(Expect::Any, |e| Expect::Foreign(e as i32));
        Some(Op::Ioctl { p: proc.index, f: 0, call: Call { cmd, data, ptrs, short: None, expect } })
    }
}
