//! AQL dispatches of real gfx90a machine code on the embedded device: kernels assembled (or
//! compiled from OpenCL C) at test time with LLVM 15, loaded into GPU memory through the thunk,
//! dispatched with AQL packets and checked on the host. A kernel that touches an unmapped
//! address stops its queue with a VM fault (a MEMORY event with the address) and the device
//! lives on; an instruction the shader core lacks, or s_trap, is a queue error naming it.
//!
//! Without llvm-mc-15 / clang-15 / ld.lld-15 the tests say so and pass, except under CI.

mod support;

use cuse_kfd::engine::{ERROR_ILLEGAL_INSTRUCTION, ERROR_TRAP};
use std::sync::atomic::Ordering;
use support::client::*;
use support::code_object::{self, CodeObject};
use thunk::memory::Kind;
use thunk::queue::packet;
use thunk::signal::Signals;
use uapi::kfd::*;
use uapi::soft::SOFT_KERNEL_NOP;
use uapi::FromBytes;
use uapi::IntoBytes;

/// One gfx90a kernel `k` with `body`, its kernarg pointer in s[4:5] (after the private segment
/// buffer) and its work-group id X in s6.
fn kernel(body: &str) -> String {
    format!(
        r#"
.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"
.text
.globl k
.p2align 8
.type k,@function
k:
{body}
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_private_segment_buffer 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 8
  .amdhsa_accum_offset 8
.end_amdhsa_kernel
"#
    )
}

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
    assert_eq!((m.va, m.gpu_id, m.failure.not_present), (unmapped, rig.gpu, 1));
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
    assert!(err.reason.ends_with(&format!("s_trap 2 at pc {entry:#x}")), "{}", err.reason);
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
        let Some(co) = code_object::opencl(name, DIVERGENT_CL, "gfx1030", wave64) else { return };
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
