//! AQL dispatches of real gfx90a machine code on the embedded device: kernels assembled (or
//! compiled from OpenCL C) at test time with LLVM 15, loaded into GPU memory through the thunk,
//! dispatched with AQL packets and checked on the host. A kernel that touches an unmapped
//! address stops its queue with a VM fault (a MEMORY event with the address) and the device
//! lives on; an instruction the shader core lacks, or s_trap, is a queue error naming it (AQL
//! dispatches get no trap handler; PM4 ones do: pm4_dispatch.rs).
//!
//! Without llvm-mc-15 / clang-15 / ld.lld-15 the tests say so and pass, except under CI.

mod support;

use cuse_kfd::engine::{ERROR_ILLEGAL_INSTRUCTION, ERROR_TRAP};
use std::mem::offset_of;
use std::sync::atomic::Ordering;
use support::client::*;
use support::code_object::{self, kernel, kernel_with, CodeObject};
use thunk::memory::Kind;
use thunk::queue::packet;
use thunk::signal::Signals;
use uapi::ioctl::AMDKFD_IOC_SET_TRAP_HANDLER;
use uapi::kfd::*;
use uapi::queue::{AmdQueue, AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE};
use uapi::soft::SOFT_KERNEL_NOP;
use uapi::FromBytes;
use uapi::IntoBytes;

/// Each work-item of 64-wide work-groups stores its global id at kernarg + 4 * id: the
/// address and id come from v0 (work-item id) and s6 (work-group id) by doubling.
const GLOBAL_IDS: &str = "
  v_add_u32 v1, v0, v0
  v_add_u32 v1, v1, v1
  v_mov_b32 v3, s6
  v_add_u32 v3, v3, v3
  v_add_u32 v3, v3, v3
  v_add_u32 v3, v3, v3
  v_add_u32 v3, v3, v3
  v_add_u32 v3, v3, v3
  v_add_u32 v3, v3, v3
  v_add_u32 v4, v3, v0
  v_add_u32 v3, v3, v3
  v_add_u32 v3, v3, v3
  v_add_u32 v1, v1, v3
  global_store_dword v1, v4, s[4:5]
";

/// Loads `co` and dispatches its kernel `k` over `grid` (1-D, work-groups of `wg`) with
/// `kernarg`; returns the queue, the signals (0: completion) and the loaded code.
struct Run {
    q: thunk::queue::AqlQueue,
    s: Signals,
    kernel_object: u64,
    _code: code_object::Loaded,
}

fn dispatch(rig: &Rig, co: &CodeObject, kernarg: u64, grid: u32, wg: u16) -> Run {
    let code = co.load(&rig.kfd, rig.gpu);
    let kernel_object = code.mem.addr(co.symbol("k.kd"));
    assert_eq!(code.mem.addr(co.symbol("k")) % 256, 0);
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
    s.value(0).store(1, Ordering::Release);
    submit(&q, &packet::dispatch(kernel_object, kernarg, [grid, 1, 1], [wg, 1, 1], s.handle(0), false));
    Run { q, s, kernel_object, _code: code }
}

fn wait_done(run: &Run, what: &str) {
    if let Err(v) = run.s.wait(0, TIMEOUT, |v| v == 0) {
        panic!("{what}: completion signal is {v}");
    }
}

#[test]
fn every_work_item_of_a_partial_grid_stores_its_global_id() {
    let Some(co) = code_object::assemble("ids", &kernel(GLOBAL_IDS)) else { return };
    let rig = Rig::new();
    let out = rig.alloc(4096, Kind::Gtt);
    out.fill(0, 4096, 0xEE);
    // 5 work-groups, the last with 54 of its 64 work-items.
    let run = dispatch(&rig, &co, out.va(), 310, 64);
    wait_done(&run, "the dispatch");
    for i in 0..310 {
        assert_eq!(word(&out, i), i as u32, "work-item {i}");
    }
    for i in 310..320 {
        assert_eq!(word(&out, i), 0xEEEE_EEEE, "past the grid, word {i}");
    }
    assert!(rig.status(run.q.id).error.is_none());
}

#[test]
fn a_store_to_an_unmapped_address_is_a_vm_fault_and_the_device_lives_on() {
    let Some(co) = code_object::assemble("fault", &kernel(GLOBAL_IDS)) else { return };
    let rig = Rig::new();
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, false);
    let unmapped = 0x5_0000_0080u64;
    let run = dispatch(&rig, &co, unmapped, 64, 64);
    let r = rig.assert_fires(mem_ev, "the memory exception event");
    let m = HsaMemoryExceptionData::read_from_bytes(r.data[0].payload.as_bytes()).unwrap();
    // Lane 0 stores first.
    assert_eq!((m.va, m.gpu_id, m.failure.not_present), (unmapped & !0xfff, rig.gpu, 1));
    let st = rig.wait_error(run.q.id);
    assert_eq!(st.error.as_ref().unwrap().fault_va, Some(unmapped), "{:?}", st.error);
    assert_eq!(run.s.value(0).load(Ordering::Acquire), 1, "the faulting dispatch completed");
    // Another queue of the process still runs packets, GFX code included.
    let out = rig.alloc(4096, Kind::Gtt);
    let again = dispatch(&rig, &co, out.va(), 64, 64);
    wait_done(&again, "a dispatch after the fault");
    assert_eq!(word(&out, 63), 63);
    let q = rig.queue(64);
    run.s.value(1).store(1, Ordering::Release);
    submit(&q, &packet::dispatch(rig.kernel(SOFT_KERNEL_NOP), 0, [1, 1, 1], [1, 1, 1], run.s.handle(1), false));
    if let Err(v) = run.s.wait(1, TIMEOUT, |v| v == 0) {
        panic!("a soft kernel after the fault: signal {v}");
    }
}

#[test]
fn an_instruction_the_core_lacks_is_a_queue_error_naming_it_and_its_kernel() {
    let Some(co) =
        code_object::assemble("unimpl", &kernel("  v_mov_b32 v1, 0\n  s_sendmsg sendmsg(MSG_GS_DONE, GS_OP_NOP)"))
    else {
        return;
    };
    let rig = Rig::new();
    let run = dispatch(&rig, &co, 0, 1, 1);
    let err = rig.wait_error(run.q.id).error.unwrap();
    assert_eq!(err.code, ERROR_ILLEGAL_INSTRUCTION);
    let entry = run._code.mem.addr(co.symbol("k"));
    let ko = run.kernel_object;
    assert_eq!(
        err.reason,
        format!(
            "kernel object at {ko:#x} (entry {entry:#x}), workgroup [0, 0, 0]: `s_sendmsg sendmsg(MSG_GS_DONE, \
             GS_OP_NOP)` (SOPP) at pc {:#x} is not implemented by the shader core (message id 3)",
            entry + 4
        )
    );
}

#[test]
fn s_trap_is_a_queue_error_with_its_trap_id() {
    let Some(co) = code_object::assemble("trap", &kernel("  s_trap 2")) else { return };
    let rig = Rig::new();
    let run = dispatch(&rig, &co, 0, 64, 64);
    let err = rig.wait_error(run.q.id).error.unwrap();
    assert_eq!(err.code, ERROR_TRAP);
    let entry = run._code.mem.addr(co.symbol("k"));
    let want = format!("s_trap 2 at pc {entry:#x} with no trap handler in the dispatch");
    assert!(err.reason.ends_with(&want), "{}", err.reason);
}

/// An AQL dispatch gets no trap handler (see engine/gfx.rs: the CP would set TRAP_PRESENT,
/// and ROCr's own handler needs what the core lacks), whatever SET_TRAP_HANDLER installed: its
/// s_trap stays the queue error ROCr reports as an exception.
#[test]
fn an_aql_dispatch_s_trap_is_the_queue_error_even_with_a_handler_installed() {
    let Some(co) = code_object::assemble("trap-aql", &kernel("  s_trap 2")) else { return };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let mut a = SetTrapHandlerArgs { tba_addr: code.mem.addr(0), tma_addr: 0, gpu_id: rig.gpu, pad: 0 };
    rig.call(AMDKFD_IOC_SET_TRAP_HANDLER, &mut a).unwrap();
    let run = dispatch(&rig, &co, 0, 64, 64);
    let err = rig.wait_error(run.q.id).error.unwrap();
    assert_eq!(err.code, ERROR_TRAP, "{}", err.reason);
    drop(code);
}

#[test]
fn msg_interrupt_raises_the_event_whose_id_it_carries() {
    let rig = Rig::new();
    let ev = rig.kfd.create_event(rig.gpu, KFD_IOC_EVENT_SIGNAL, false).expect("CREATE_EVENT");
    let mailbox = rig.kfd.mailbox(ev.event_slot_index).expect("the event's mailbox");
    // As ROCm's device library does for a signal with an event: the id into the mailbox (the
    // event page slot, at kernarg), then MSG_INTERRUPT with the id in M0.
    let id = ev.event_id;
    let body = format!(
        "  v_mov_b32 v1, 0\n  v_mov_b32 v2, {id}\n  global_store_dword v1, v2, s[4:5]\n  \
         global_store_dword v1, v1, s[4:5] offset:4\n  s_mov_b32 m0, {id}\n  s_sendmsg sendmsg(MSG_INTERRUPT)"
    );
    let Some(co) = code_object::assemble("irq", &kernel(&body)) else { return };
    rig.assert_quiet(id, "the event before the dispatch");
    let run = dispatch(&rig, &co, mailbox, 1, 1);
    wait_done(&run, "the dispatch");
    rig.assert_fires(id, "the event the kernel's MSG_INTERRUPT names");
}

#[test]
fn an_endless_kernel_is_sliced_other_queues_go_on_and_destroying_its_queue_ends_it() {
    let Some(co) = code_object::assemble("endless", &kernel("loop:\n  s_sleep 1\n  s_branch loop")) else { return };
    let rig = Rig::new();
    let run = dispatch(&rig, &co, 0, 256, 64);
    let s = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    let q = rig.queue(64);
    for _ in 0..20 {
        s.value(0).store(1, Ordering::Release);
        submit(&q, &packet::dispatch(rig.kernel(SOFT_KERNEL_NOP), 0, [1, 1, 1], [1, 1, 1], s.handle(0), false));
        if let Err(v) = s.wait(0, TIMEOUT, |v| v == 0) {
            panic!("a packet on another queue while the endless kernel runs: signal {v}");
        }
    }
    assert_eq!(run.s.value(0).load(Ordering::Acquire), 1, "the endless kernel completed");
    assert!(rig.status(run.q.id).error.is_none());
    let before = rig.stats().queues;
    let Run { q: endless, .. } = run;
    drop(endless);
    assert_eq!(rig.stats().queues, before - 1, "DESTROY_QUEUE of the queue running the kernel");
}

/// An OpenCL C kernel with divergent control flow (a data-dependent loop, a select, a guard),
/// so the compiler's wave-wide EXEC masking and lane-mask carries are in the code.
const DIVERGENT_CL: &str = r#"
__kernel void k(__global const int *a, __global int *out, int n, int wg) {
    int i = __builtin_amdgcn_workgroup_id_x() * wg + __builtin_amdgcn_workitem_id_x();
    if (i < n) {
        int v = a[i];
        int acc = 0;
        for (int j = 0; j < (v & 7); j++)
            acc += v ^ j;
        out[i] = acc + (i % 5 == 0 ? -i : i);
    }
}
"#;

/// The host's result of [`DIVERGENT_CL`] for work-item `i` with input `v`.
fn divergent(i: i32, v: i32) -> i32 {
    let acc = (0..(v & 7)).fold(0i32, |acc, j| acc.wrapping_add(v ^ j));
    acc.wrapping_add(if i % 5 == 0 { -i } else { i })
}

#[test]
fn an_opencl_kernel_for_gfx1030_runs_in_wave32_and_wave64() {
    for wave64 in [false, true] {
        let name = if wave64 { "cl1030w64" } else { "cl1030" };
        let Some(co) = code_object::opencl_for(name, DIVERGENT_CL, "gfx1030", wave64) else { return };
        let rig = Rig::with_profile("gfx1030");
        let n = 300;
        let input = rig.alloc(4096, Kind::Gtt);
        let out = rig.alloc(4096, Kind::Gtt);
        out.fill(0, 4096, 0xEE);
        let v = |i: i32| i.wrapping_mul(0x9E37_79B9u32 as i32) >> 7;
        for i in 0..n {
            input.write(4 * i as u64, &v(i).to_le_bytes());
        }
        let args: [u64; 3] = [input.va(), out.va(), n as u64 | 64 << 32];
        let run = dispatch(&rig, &co, rig.args(&args), 320, 64);
        wait_done(&run, name);
        for i in 0..n {
            assert_eq!(word(&out, i as u64) as i32, divergent(i, v(i)), "{name}: work-item {i}");
        }
        assert_eq!(word(&out, n as u64), 0xEEEE_EEEE, "{name}: past n");
        assert!(rig.status(run.q.id).error.is_none());
    }
}

/// A kernel with 16 bytes of scratch per work-item that stores its private segment buffer V#
/// (s[0:3]) and its scratch wave offset (s7, after the kernarg pointer and work-group id) at
/// kernarg + its wave offset.
fn scratch_kernel() -> String {
    let body = "  v_mov_b32 v1, s7
  v_mov_b32 v2, s0
  global_store_dword v1, v2, s[4:5]
  v_mov_b32 v2, s1
  global_store_dword v1, v2, s[4:5] offset:4
  v_mov_b32 v2, s2
  global_store_dword v1, v2, s[4:5] offset:8
  v_mov_b32 v2, s3
  global_store_dword v1, v2, s[4:5] offset:12
  global_store_dword v1, v1, s[4:5] offset:16";
    kernel_with(
        body,
        "  .amdhsa_system_sgpr_private_segment_wavefront_offset 1\n  .amdhsa_private_segment_fixed_size 16",
    )
}

/// A dispatch of the scratch kernel at `kd`: one work-group of `items` work-items, each with 16
/// bytes of private segment.
fn scratch_dispatch(kd: u64, kernarg: u64, items: u16, signal: u64) -> [u8; 64] {
    let mut p = packet::dispatch(kd, kernarg, [items.into(), 1, 1], [items, 1, 1], signal, false);
    p[24..28].copy_from_slice(&16u32.to_le_bytes());
    p
}

/// Byte offsets in amd_queue_t of the scratch ROCr gives a queue and of its properties.
const SCRATCH_VSHARP: u64 = offset_of!(AmdQueue, scratch_resource_descriptor) as u64;
const SCRATCH_SIZE: u64 = offset_of!(AmdQueue, scratch_backing_memory_byte_size) as u64;
const QUEUE_PROPERTIES: u64 = offset_of!(AmdQueue, queue_properties) as u64;

/// The signals of a [`ScratchQueue`].
const DONE: u64 = 0;
const INACTIVE: u64 = 1;

/// A queue set up as ROCr sets one up for [`scratch_kernel`]: a queue_inactive_signal (with an
/// event) through which the device asks for scratch, a completion signal at 1, memory for the
/// kernel's output and scratch to give the queue.
struct ScratchQueue {
    ev: u32,
    s: Signals,
    q: thunk::queue::AqlQueue,
    scratch: thunk::memory::GpuMemory,
    out: thunk::memory::GpuMemory,
    kd: u64,
    _code: code_object::Loaded,
    rig: Rig,
}

impl ScratchQueue {
    fn new(name: &str) -> Option<ScratchQueue> {
        let co = code_object::assemble(name, &scratch_kernel())?;
        let rig = Rig::new();
        let code = co.load(&rig.kfd, rig.gpu);
        let kd = code.mem.addr(co.symbol("k.kd"));
        let out = rig.alloc(4096, Kind::Gtt);
        let scratch = rig.alloc(1 << 16, Kind::Vram);
        let q = rig.queue(64);
        let s = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
        s.value(DONE).store(1, Ordering::Release);
        s.value(INACTIVE).store(0, Ordering::Release);
        q.set_inactive_signal(s.handle(INACTIVE));
        let ev = s.attach_event(&rig.kfd, INACTIVE).unwrap();
        Some(ScratchQueue { ev, s, q, scratch, out, kd, _code: code, rig })
    }

    /// Gives the queue its scratch as ROCr does (a V# over it and its size); returns the V#.
    fn give_scratch(&self) -> [u32; 4] {
        let base = self.scratch.va();
        let vsharp = [base as u32, (base >> 32) as u32 & 0xffff, 1 << 16, 0x0002_7fac];
        self.set_scratch(vsharp, 1 << 16);
        vsharp
    }

    fn set_scratch(&self, vsharp: [u32; 4], size: u64) {
        for (i, w) in (0..).zip(vsharp) {
            self.q.desc.u32_at(SCRATCH_VSHARP + 4 * i).store(w, Ordering::Relaxed);
        }
        self.q.desc.u64_at(SCRATCH_SIZE).store(size, Ordering::Relaxed);
    }

    /// Submits the kernel over two waves (16 bytes per work-item) storing to `out`.
    fn dispatch(&self) {
        submit(&self.q, &scratch_dispatch(self.kd, self.out.va(), 128, self.s.handle(DONE)));
    }

    fn wait_done(&self, what: &str) {
        if let Err(v) = self.s.wait(DONE, TIMEOUT, |v| v == 0) {
            panic!("{what}: signal {v}");
        }
    }

    fn value(&self, i: u64) -> i64 {
        self.s.value(i).load(Ordering::Acquire)
    }
}

#[test]
fn a_dispatch_short_of_scratch_asks_the_runtime_and_runs_once_it_answers() {
    let Some(t) = ScratchQueue::new("scratch") else { return };
    t.dispatch();
    // The queue has no scratch: the device asks for it, as the CP asks ROCr.
    t.rig.assert_fires(t.ev, "the queue_inactive_signal's event");
    assert_eq!(t.value(INACTIVE), 1, "insufficient scratch (wave64)");
    stays(QUIET, "the dispatch waits for scratch", || t.value(DONE) == 1);
    // ROCr's answer: a V# over the new scratch, its size, then 0 to restart the queue.
    let vsharp = t.give_scratch();
    t.s.value(INACTIVE).store(0, Ordering::Release);
    t.wait_done("the dispatch after the scratch answer");
    for wave in 0..2u64 {
        let at = wave * 1024 / 4;
        let got: Vec<u32> = (at..at + 5).map(|i| word(&t.out, i)).collect();
        assert_eq!(&got[..4], &vsharp, "wave {wave}'s private segment buffer");
        // 64 lanes of 16 bytes: 1 KiB per wave.
        assert_eq!(got[4], wave as u32 * 1024, "wave {wave}'s scratch offset");
    }
    assert_eq!(t.value(INACTIVE), 0, "scratch that is not single use stays");
    assert!(t.rig.status(t.q.id).error.is_none());
}

/// ROCr marks a large scratch allocation single use (AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE):
/// after the dispatch the device raises 512 through the queue_inactive_signal and completes the
/// dispatch only once the runtime has released the scratch and stored 0.
#[test]
fn single_use_scratch_is_given_back_before_the_dispatch_completes() {
    let Some(t) = ScratchQueue::new("scratch_once") else { return };
    // The runtime has already given this queue single-use scratch.
    t.give_scratch();
    let properties = t.q.desc.u32_at(QUEUE_PROPERTIES).load(Ordering::Relaxed);
    t.q.desc.u32_at(QUEUE_PROPERTIES).store(properties | AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE, Ordering::Release);
    t.dispatch();
    t.rig.assert_fires(t.ev, "the queue_inactive_signal's event");
    assert_eq!(t.value(INACTIVE), 512, "large scratch reclaim");
    assert_eq!(got_offsets(&t.out), [0, 1024], "the workgroup ran before the scratch went back");
    stays(QUIET, "the dispatch waits for the runtime", || t.value(DONE) == 1);
    // ROCr's answer: the scratch fields zeroed, 0 to the signal, the property cleared.
    t.set_scratch([0; 4], 0);
    t.s.value(INACTIVE).store(0, Ordering::Release);
    t.q.desc.u32_at(QUEUE_PROPERTIES).store(properties, Ordering::Release);
    t.wait_done("the dispatch after the runtime took its scratch back");
    assert!(t.rig.status(t.q.id).error.is_none());
}

/// The scratch wave offsets the two waves of [`scratch_kernel`] stored.
fn got_offsets(out: &thunk::memory::GpuMemory) -> [u32; 2] {
    [word(out, 4), word(out, 1024 / 4 + 4)]
}

#[test]
fn a_dispatch_short_of_scratch_on_a_queue_without_an_inactive_signal_is_an_error() {
    let Some(co) = code_object::assemble("noscratch", &scratch_kernel()) else { return };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let q = rig.queue(64);
    submit(&q, &scratch_dispatch(code.mem.addr(co.symbol("k.kd")), 0, 64, 0));
    let err = rig.wait_error(q.id).error.unwrap();
    assert_eq!(err.code, cuse_kfd::engine::ERROR_INVALID_ARGUMENT);
    assert!(
        err.reason.ends_with("a workgroup needs 1024 bytes of scratch (1 waves), the queue has 0"),
        "{}",
        err.reason
    );
}

/// OpenCL C kernels compiled with clang-15 for gfx90a without device libraries: the global id
/// comes from the work-group id, the dispatch packet's work-group size and the work-item id,
/// as ROCm's device library computes it.
const OPENCL: &str = r#"
static inline uint gid(void) {
    __constant ushort *p = (__constant ushort *)__builtin_amdgcn_dispatch_ptr();
    return __builtin_amdgcn_workgroup_id_x() * p[2] + __builtin_amdgcn_workitem_id_x();
}
kernel void vadd(global const int *a, global const int *b, global int *c, uint n) {
    uint i = gid();
    if (i < n) c[i] = a[i] + 3 * b[i];
}
kernel void count(global uint *counter, global uint *seen) {
    uint old = __opencl_atomic_fetch_add((volatile global atomic_uint *)counter, 1u, memory_order_relaxed,
                                         memory_scope_device);
    seen[gid()] = old;
}
"#;

/// Dispatches kernel `name` of `co` (loaded) over a 1-D grid with `args` as its kernarg segment
/// (with room for the hidden arguments) and waits for it.
fn run_opencl(rig: &Rig, co: &CodeObject, code: &code_object::Loaded, name: &str, args: &[u64], grid: u32, wg: u16) {
    let mut bytes = vec![0u8; 256];
    for (i, a) in args.iter().enumerate() {
        bytes[8 * i..8 * i + 8].copy_from_slice(&a.to_le_bytes());
    }
    let kernarg = rig.alloc(4096, Kind::Gtt);
    kernarg.write(0, &bytes);
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    s.value(0).store(1, Ordering::Release);
    let object = code.mem.addr(co.symbol(&format!("{name}.kd")));
    submit(&q, &packet::dispatch(object, kernarg.va(), [grid, 1, 1], [wg, 1, 1], s.handle(0), false));
    if let Err(v) = s.wait(0, TIMEOUT, |v| v == 0) {
        panic!("{name}: completion signal {v}, queue {:?}", rig.status(q.id).error);
    }
}

#[test]
fn an_opencl_vector_add_compiled_by_clang_runs() {
    let Some(co) = code_object::opencl("vadd", OPENCL) else { return };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let n = 1000u32;
    let (a, b, c) = (rig.alloc(4096, Kind::Gtt), rig.alloc(4096, Kind::Vram), rig.alloc(8192, Kind::Gtt));
    for i in 0..u64::from(n) {
        a.u32_at(4 * i).store((i as u32).wrapping_mul(7).wrapping_sub(300), Ordering::Relaxed);
        b.u32_at(4 * i).store((i as u32) ^ 0x55, Ordering::Relaxed);
    }
    c.fill(0, 8192, 0xEE);
    // 1024 work-items in work-groups of 256: the last 24 are past n.
    run_opencl(&rig, &co, &code, "vadd", &[a.va(), b.va(), c.va(), u64::from(n)], 1024, 256);
    for i in 0..u64::from(n) {
        let want = (i as u32).wrapping_mul(7).wrapping_sub(300).wrapping_add(3 * ((i as u32) ^ 0x55));
        assert_eq!(word(&c, i), want, "c[{i}]");
    }
    assert_eq!(word(&c, u64::from(n)), 0xEEEE_EEEE, "past n");
}

#[test]
fn global_atomics_are_atomic_against_the_host() {
    let Some(co) = code_object::opencl("count", OPENCL) else { return };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let items = 4096u32;
    let (counter, seen) = (rig.alloc(4096, Kind::Gtt), rig.alloc(4 * u64::from(items), Kind::Gtt));
    // The host adds 1 << 20 a number of times while the kernel counts.
    let host_adds = 20_000u32;
    let w = counter.u32_at(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for _ in 0..host_adds {
                w.fetch_add(1 << 20, Ordering::Relaxed);
            }
        });
        run_opencl(&rig, &co, &code, "count", &[counter.va(), seen.va()], items, 256);
    });
    let total = word(&counter, 0);
    assert_eq!(total, host_adds << 20 | items, "host and kernel increments both counted");
    // Every kernel increment saw a distinct count of kernel increments before it.
    let mut olds: Vec<u32> = (0..u64::from(items)).map(|i| word(&seen, i) & 0xFFFFF).collect();
    olds.sort_unstable();
    assert!(olds.iter().enumerate().all(|(i, o)| *o == i as u32), "each work-item got a distinct old value");
}

/// Page-aligned host memory registered as USERPTR memory at its own address (as ROCr registers
/// host allocations), so kernels reach it through the device's USERPTR path.
struct Userptr {
    ptr: *mut u32,
    layout: std::alloc::Layout,
}

impl Userptr {
    fn new(rig: &Rig, bytes: usize) -> Userptr {
        let layout = std::alloc::Layout::from_size_align(bytes, 4096).unwrap();
        // SAFETY: a non-zero size; freed in drop with the same layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut u32;
        assert!(!ptr.is_null());
        let addr = ptr as u64;
        let flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
        let mut a = AllocMemoryOfGpuArgs {
            va_addr: addr,
            size: bytes as u64,
            handle: 0,
            mmap_offset: addr,
            gpu_id: rig.gpu,
            flags,
        };
        rig.call(uapi::ioctl::AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a).expect("USERPTR ALLOC");
        let gpus = [rig.gpu];
        let mut m = MapMemoryToGpuArgs {
            handle: a.handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: 1,
            n_success: 0,
        };
        rig.call(uapi::ioctl::AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut m).expect("USERPTR MAP");
        Userptr { ptr, layout }
    }

    fn va(&self) -> u64 {
        self.ptr as u64
    }

    fn word(&self, i: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(4 * i < self.layout.size());
        // SAFETY: in bounds and aligned; the device writes it too, so only atomically.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(self.ptr.add(i)) }
    }
}

impl Drop for Userptr {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout. The rig (and its device mapping) is
        // dropped after the test's last dispatch completed.
        unsafe { std::alloc::dealloc(self.ptr as *mut u8, self.layout) };
    }
}

#[test]
fn kernels_read_write_and_update_userptr_memory() {
    let Some(co) = code_object::opencl("userptr", OPENCL) else { return };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let n = 300usize;
    let (a, c) = (Userptr::new(&rig, 4096), Userptr::new(&rig, 4096));
    let b = rig.alloc(4096, Kind::Gtt);
    for i in 0..n {
        a.word(i).store(1000 + i as u32, Ordering::Relaxed);
        b.u32_at(4 * i as u64).store(i as u32, Ordering::Relaxed);
    }
    run_opencl(&rig, &co, &code, "vadd", &[a.va(), b.va(), c.va(), n as u64], 320, 64);
    for i in 0..n {
        assert_eq!(c.word(i).load(Ordering::Acquire), 1000 + 4 * i as u32, "c[{i}] in USERPTR memory");
    }
    assert_eq!(c.word(n).load(Ordering::Acquire), 0, "past n");
    // Atomics on a USERPTR counter (not atomic against the host: nothing else touches it here).
    let (counter, seen) = (Userptr::new(&rig, 4096), rig.alloc(4096, Kind::Gtt));
    run_opencl(&rig, &co, &code, "count", &[counter.va(), seen.va()], 512, 128);
    assert_eq!(counter.word(0).load(Ordering::Acquire), 512);
    let mut olds: Vec<u32> = (0..512).map(|i| word(&seen, i)).collect();
    olds.sort_unstable();
    assert!(olds.iter().enumerate().all(|(i, o)| *o == i as u32));
    drop(rig);
}

/// The legacy `amd_kernel_code_t` ROCr's blit kernels sit behind (ROCR-Runtime rocm-5.2.3
/// amd_hsa_kernel_code.h; AssembleShader): version 1.1, machine 9.0.10, code at +256, two user
/// SGPRs (the kernarg pointer), work-group id X, 8 VGPRs with RSRC3's accum offset in the high
/// half of max_scratch_backing_memory_byte_size.
fn legacy_header() -> [u8; 256] {
    let mut h = [0u8; 256];
    h[0..4].copy_from_slice(&1u32.to_le_bytes());
    h[4..8].copy_from_slice(&1u32.to_le_bytes());
    h[8..10].copy_from_slice(&1u16.to_le_bytes());
    h[10..12].copy_from_slice(&9u16.to_le_bytes());
    h[14..16].copy_from_slice(&10u16.to_le_bytes());
    h[16..24].copy_from_slice(&256i64.to_le_bytes());
    h[40..48].copy_from_slice(&(1u64 << 32).to_le_bytes()); // accum offset 8: no AGPRs
    h[48..52].copy_from_slice(&0x00AF_0000u32.to_le_bytes()); // 8 VGPRs, IEEE, DX10_CLAMP
    h[52..56].copy_from_slice(&(2u32 << 1 | 1 << 7).to_le_bytes()); // 2 user SGPRs, wg id X
    h[56..60].copy_from_slice(&(1u32 << 3).to_le_bytes()); // kernarg segment ptr
    h[72..80].copy_from_slice(&8u64.to_le_bytes());
    h[103] = 6; // wave64
    h
}

#[test]
fn a_legacy_amd_kernel_code_t_kernel_runs_like_rocr_blits() {
    let src = r#"
.text
.globl k
.p2align 8
k:
  s_load_dwordx2 s[0:1], s[0:1], 0x0
  v_lshlrev_b32 v1, 2, v0
  s_lshl_b32 s3, s2, 6
  v_add_u32 v4, s3, v0
  s_lshl_b32 s3, s2, 8
  v_add_u32 v1, s3, v1
  s_waitcnt lgkmcnt(0)
  global_store_dword v1, v4, s[0:1]
  s_endpgm
"#;
    let Some(co) = code_object::assemble("legacy", src) else { return };
    let rig = Rig::new();
    let k = co.symbol("k") as usize;
    let object = rig.alloc(4096, Kind::Gtt);
    object.write(0, &legacy_header());
    object.write(256, &co.image[k..k + 64]);
    let out = rig.alloc(4096, Kind::Gtt);
    out.fill(0, 4096, 0xEE);
    let kernarg = rig.args(&out.va());
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    s.value(0).store(1, Ordering::Release);
    submit(&q, &packet::dispatch(object.va(), kernarg, [200, 1, 1], [64, 1, 1], s.handle(0), false));
    if let Err(v) = s.wait(0, TIMEOUT, |v| v == 0) {
        panic!("the legacy kernel: signal {v}, queue {:?}", rig.status(q.id).error);
    }
    for i in 0..200 {
        assert_eq!(word(&out, i), i as u32, "work-item {i}");
    }
    assert_eq!(word(&out, 200), 0xEEEE_EEEE);
}
