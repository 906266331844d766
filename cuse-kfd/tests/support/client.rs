//! Helpers of the charter tests: an embedded device built from a `DeviceConfig`, the thunk as
//! its client, soft-kernel descriptors and kernel-argument space in GPU memory, queue status
//! from the device model, and bounded waits (every wait has a deadline and panics past it, so a
//! broken device fails a test instead of hanging it).

use cuse_kfd::engine::EngineConfig;
use cuse_kfd::queue::QueueStatus;
use cuse_kfd::{DeviceConfig, DeviceStats, Embedded};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use thunk::kfd::WaitResult;
use thunk::memory::{GpuMemory, Kind};
use thunk::queue::AqlQueue;
use thunk::transport::EmbeddedTransport;
use thunk::Kfd;
use uapi::aql::AQL_PACKET_SIZE;
use uapi::soft::*;
use uapi::{Immutable, IntoBytes};

/// How long a condition that should come true may take before a test calls it a hang.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// How long a condition that must not come true is watched.
pub const QUIET: Duration = Duration::from_millis(40);
/// WAIT_EVENTS timeout (ms) for events that must fire.
pub const WAIT_MS: u32 = 10_000;

/// Soft kernels are descriptors at `KERNELS + 64 * builtin` in the code buffer.
const KERNELS: u64 = 0;
/// A GFX kernel descriptor (AMD code object v3+ `kernel_descriptor_t`) sits here; its code, at
/// [`GFX_CODE`], starts with an instruction the shader core does not run.
const GFX_DESCRIPTOR: u64 = 1024;
const GFX_CODE: u64 = 3072;
/// `s_sendmsg sendmsg(MSG_GS_DONE, GS_OP_NOP)` (a geometry-shader message, meaningless to compute
/// waves) and `s_endpgm`, as llvm-mc-15 encodes them for gfx90a.
pub const GFX_CODE_WORDS: [u32; 2] = [0xBF90_0003, 0xBF81_0000];
/// A well-formed soft descriptor naming a builtin the device does not have.
const UNKNOWN_BUILTIN_DESCRIPTOR: u64 = 2048;
pub const UNKNOWN_BUILTIN: u32 = 99;
const ARGS_SIZE: u64 = 1 << 20;

/// One device and one client process on it.
pub struct Rig {
    pub kfd: Kfd,
    pub emb: Embedded,
    pub gpu: u32,
    code: GpuMemory,
    args: GpuMemory,
    next_arg: AtomicU64,
}

impl Rig {
    /// A typed ioctl of the client. The tests put in its arguments only GPU addresses (which the
    /// device reaches through its VM) and pointers to memory they own and do not borrow during
    /// the call, as [`Kfd::call`] requires.
    pub fn call<T: uapi::FromBytes + IntoBytes + Immutable>(&self, cmd: u32, args: &mut T) -> Result<(), thunk::Errno> {
        // SAFETY: what the callers pass (above).
        unsafe { self.kfd.call(cmd, args) }
    }

    pub fn new() -> Rig {
        Rig::with_engine(EngineConfig::default())
    }

    /// A device whose command processor has `engine`'s tuning.
    pub fn with_engine(engine: EngineConfig) -> Rig {
        Rig::with_config(DeviceConfig { engine, ..DeviceConfig::default() })
    }

    /// A device of the topology profile `name` ("gfx1030", ...).
    pub fn with_profile(name: &str) -> Rig {
        Rig::with_config(DeviceConfig { profile: name.to_string(), ..DeviceConfig::default() })
    }

    /// A device of `config`.
    pub fn with_config(config: DeviceConfig) -> Rig {
        let transport = EmbeddedTransport::new(&config).expect("creating the embedded device");
        let emb = transport.embedded().clone();
        let kfd = Kfd::new(Box::new(transport));
        let gpu = kfd.gpu_ids().expect("GET_PROCESS_APERTURES_NEW")[0];
        let code = kfd.alloc(gpu, 4096, Kind::Gtt).expect("allocating the code buffer");
        let descriptor = |builtin: u32| {
            let mut name = [0u8; 32];
            let n = format!("builtin-{builtin}");
            name[..n.len()].copy_from_slice(n.as_bytes());
            SoftKernelDescriptor { name, ..SoftKernelDescriptor::new(builtin, 16) }
        };
        for builtin in SOFT_KERNEL_NOP..=SOFT_KERNEL_SIGNAL_STORE {
            code.write(KERNELS + 64 * u64::from(builtin), descriptor(builtin).as_bytes());
        }
        code.write(UNKNOWN_BUILTIN_DESCRIPTOR, descriptor(UNKNOWN_BUILTIN).as_bytes());
        code.write(GFX_DESCRIPTOR, &gfx_kernel_descriptor());
        code.write(GFX_CODE, GFX_CODE_WORDS.as_bytes());
        let args = kfd.alloc(gpu, ARGS_SIZE, Kind::Gtt).expect("allocating kernel argument space");
        Rig { kfd, emb, gpu, code, args, next_arg: AtomicU64::new(0) }
    }

    pub fn stats(&self) -> DeviceStats {
        self.emb.device().stats()
    }

    /// The `kernel_object` of soft kernel `builtin`.
    pub fn kernel(&self, builtin: u32) -> u64 {
        self.code.addr(KERNELS + 64 * u64::from(builtin))
    }

    /// The `kernel_object` of a GFX kernel descriptor (no soft magic).
    pub fn gfx_kernel(&self) -> u64 {
        self.code.addr(GFX_DESCRIPTOR)
    }

    /// The `kernel_object` of a soft descriptor naming [`UNKNOWN_BUILTIN`].
    pub fn unknown_builtin_kernel(&self) -> u64 {
        self.code.addr(UNKNOWN_BUILTIN_DESCRIPTOR)
    }

    /// Copies `args` into fresh kernel-argument space and returns its GPU address.
    pub fn args<T: IntoBytes + Immutable>(&self, args: &T) -> u64 {
        let bytes = args.as_bytes();
        let off = self.next_arg.fetch_add((bytes.len() as u64).next_multiple_of(64), Ordering::Relaxed);
        assert!(off + bytes.len() as u64 <= ARGS_SIZE, "kernel argument space exhausted");
        self.args.write(off, bytes);
        self.args.addr(off)
    }

    pub fn alloc(&self, size: u64, kind: Kind) -> GpuMemory {
        self.kfd.alloc(self.gpu, size, kind).expect("allocating GPU memory")
    }

    pub fn queue(&self, slots: u64) -> AqlQueue {
        AqlQueue::new(&self.kfd, self.gpu, slots).expect("creating an AQL queue")
    }

    /// The device model's view of queue `id` of this client.
    pub fn status(&self, id: u32) -> QueueStatus {
        let process = self.emb.device().process(self.kfd.pid()).expect("the client's process context");
        let queue = process.inner().queues.get(&id).cloned().unwrap_or_else(|| panic!("queue {id} does not exist"));
        let status = queue.status();
        status.clone()
    }

    /// Number of queues the device holds for this client.
    pub fn queue_count(&self) -> usize {
        self.emb.device().process(self.kfd.pid()).map_or(0, |p| p.inner().queues.len())
    }

    /// Waits until queue `id` reports an error and returns the status.
    pub fn wait_error(&self, id: u32) -> QueueStatus {
        wait_for(TIMEOUT, &format!("queue {id} to report an error"), || {
            let st = self.status(id);
            st.error.is_some().then_some(st)
        })
    }

    /// Creates a KFD event of `event_type` and returns its id.
    pub fn event(&self, event_type: u32, auto_reset: bool) -> u32 {
        self.kfd.create_event(self.gpu, event_type, auto_reset).expect("CREATE_EVENT").event_id
    }

    /// WAIT_EVENTS on `ids` (any), bounded.
    pub fn wait(&self, ids: &[u32], timeout_ms: u32) -> WaitResult {
        self.kfd.wait_events(ids, false, timeout_ms)
    }

    /// Asserts that WAIT_EVENTS on `id` completes (the event fired).
    pub fn assert_fires(&self, id: u32, what: &str) -> WaitResult {
        let r = self.wait(&[id], WAIT_MS);
        assert_eq!(r.result, Ok(()), "{what}: WAIT_EVENTS failed");
        assert_eq!(r.wait_result, uapi::kfd::KFD_IOC_WAIT_RESULT_COMPLETE, "{what}: event {id} did not fire");
        r
    }

    /// Asserts that event `id` has not fired (a poll: timeout 0).
    pub fn assert_quiet(&self, id: u32, what: &str) {
        let r = self.wait(&[id], 0);
        assert_eq!(r.result, Ok(()), "{what}: WAIT_EVENTS failed");
        assert_eq!(r.wait_result, uapi::kfd::KFD_IOC_WAIT_RESULT_TIMEOUT, "{what}: event {id} fired");
    }
}

/// Polls `f` until it yields a value; panics naming `what` after `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        spins += 1;
        if spins < 1000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Asserts that `f` holds throughout `d` (polled), for things that must not happen.
pub fn stays(d: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < d {
        assert!(f(), "{what} after {:?}", start.elapsed());
        std::thread::sleep(Duration::from_micros(500));
    }
    assert!(f(), "{what} after {d:?}");
}

/// Waits (bounded) until `q` has room for one more packet, then submits `p` and returns its
/// index; for single-producer queues, where reserve then never spins.
pub fn submit(q: &AqlQueue, p: &[u8; AQL_PACKET_SIZE]) -> u64 {
    wait_for(TIMEOUT, &format!("room in queue {}", q.id), || {
        (q.write_index().load(Ordering::Acquire) - q.read_index() < q.slots).then_some(())
    });
    q.submit(p)
}

/// Reserves a slot of a queue shared by several producers: the write index is taken at once
/// and the wait for room is bounded by progress (the read index must move within `stall`).
pub fn reserve_bounded(q: &AqlQueue, stall: Duration, diag: impl Fn() -> String) -> u64 {
    let index = q.write_index().fetch_add(1, Ordering::AcqRel);
    let mut last = q.read_index();
    let mut since = Instant::now();
    let mut spins = 0u32;
    while index - q.read_index() >= q.slots {
        let r = q.read_index();
        if r != last {
            last = r;
            since = Instant::now();
        } else {
            assert!(
                since.elapsed() < stall,
                "queue {}: read index stuck at {r} for {stall:?} (packet {index} waits for room): {}",
                q.id,
                diag()
            );
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

/// A u32 word of GPU memory.
pub fn word(m: &GpuMemory, index: u64) -> u32 {
    m.u32_at(index * 4).load(Ordering::Acquire)
}

/// All of a buffer.
pub fn bytes(m: &GpuMemory, off: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    m.read(off, &mut v);
    v
}

/// What a GFX kernel descriptor from a real code object looks like (`kernel_descriptor_t`,
/// 64 bytes): segment sizes, kernarg size, the code entry offset and the COMPUTE_PGM_RSRC
/// words. Its first eight bytes are not the soft magic.
pub fn gfx_kernel_descriptor() -> [u8; 64] {
    let mut d = [0u8; 64];
    d[0..4].copy_from_slice(&0u32.to_le_bytes()); // group_segment_fixed_size
    d[4..8].copy_from_slice(&0u32.to_le_bytes()); // private_segment_fixed_size
    d[8..12].copy_from_slice(&16u32.to_le_bytes()); // kernarg_size
    d[16..24].copy_from_slice(&((GFX_CODE - GFX_DESCRIPTOR) as i64).to_le_bytes()); // kernel_code_entry_byte_offset
    d[44..48].copy_from_slice(&0u32.to_le_bytes()); // compute_pgm_rsrc3
    d[48..52].copy_from_slice(&0x00AF_0081u32.to_le_bytes()); // compute_pgm_rsrc1
    d[52..56].copy_from_slice(&0x0000_0090u32.to_le_bytes()); // compute_pgm_rsrc2
    d[56..58].copy_from_slice(&0x0008u16.to_le_bytes()); // kernel_code_properties
    d
}

/// Runs `f` on another thread and returns a receiver for its result.
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::sync::mpsc::Receiver<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx
}
