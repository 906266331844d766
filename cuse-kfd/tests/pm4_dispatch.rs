//! PM4 compute dispatch on the embedded device, built as kfdtest builds its dispatches
//! (ROCT-Thunk-Interface tests/kfdtest/src/Dispatch.cpp): an indirect buffer with ACQUIRE_MEM,
//! SET_SH_REG of COMPUTE_START_X.., PGM_LO.., PGM_RSRC1/2, RSRC3, RESOURCE_LIMITS,
//! TMPRING_SIZE, RESTART_X.., USER_DATA_0..15, then DISPATCH_DIRECT; on the ring a RELEASE_MEM
//! whose interrupt fires the test's event. The shaders are gfx90a code assembled at test time
//! (one work-item per work-group, as kfdtest's are), their results checked on the host.
//! DISPATCH_INDIRECT takes its dimensions from memory, at an address (the MEC's layout) or at an
//! offset from a SET_BASE base (the ME's); its bad inputs are queue errors or VM faults. With
//! shader workers a dispatch's workgroups run on them, resident together.
//!
//! Without llvm-mc-15 / ld.lld-15 the tests say so and pass, except under CI.

mod support;

use cuse_kfd::engine::{EngineConfig, ERROR_ILLEGAL_INSTRUCTION, ERROR_INVALID_PACKET_FORMAT, ERROR_TRAP};
use cuse_kfd::memory::vm::GpuVa;
use std::sync::atomic::Ordering;
use support::client::{wait_for, Rig, TIMEOUT};
use support::code_object;
use thunk::memory::{GpuMemory, Kind};
use thunk::pm4;
use thunk::queue::{RingKind, RingQueue};
use uapi::ioctl::AMDKFD_IOC_SET_TRAP_HANDLER;
use uapi::kfd::*;

// Registers (Linux gc_9_0_offset.h; RSRC3 at 0x2e2d as kfdtest writes it for gfx90a).
const COMPUTE_START_X: u32 = 0x2E04;
const COMPUTE_PGM_LO: u32 = 0x2E0C;
const COMPUTE_PGM_RSRC1: u32 = 0x2E12;
const COMPUTE_RESOURCE_LIMITS: u32 = 0x2E15;
const COMPUTE_TMPRING_SIZE: u32 = 0x2E18;
const COMPUTE_RESTART_X: u32 = 0x2E1B;
const COMPUTE_PGM_RSRC3: u32 = 0x2E2D;
const COMPUTE_USER_DATA_0: u32 = 0x2E40;

/// kfdtest's RSRC1: FLOAT_MODE 0xc0, SGPRS 2, VGPRS 4 (32 registers).
const RSRC1: u32 = 0xc0 << 12 | 2 << 6 | 4;
/// kfdtest's RSRC2: USER_SGPR 4, TRAP_PRESENT, TGID_X_EN, TIDIG_COMP_CNT 1, EXCP_EN_MSB 1.
const RSRC2: u32 = 4 << 1 | 1 << 6 | 1 << 7 | 1 << 11 | 1 << 13;
/// COMPUTE_SHADER_EN | USE_THREAD_DIMENSIONS (kfdtest on a dGPU).
const INITIATOR: u32 = 0x21;

/// A raw gfx90a program at a 256-byte aligned label `shader`.
fn program(name: &str, body: &str) -> Option<code_object::CodeObject> {
    let src = format!(
        ".amdgcn_target \"amdgcn-amd-amdhsa--gfx90a\"\n.text\n.globl shader\n.p2align 8\nshader:\n{body}\n  s_endpgm\n"
    );
    code_object::assemble(name, &src)
}

/// The indirect buffer of one dispatch of the program at `pgm` over `groups` work-groups of one
/// work-item, with `arg1`/`arg2` in USER_DATA_0..3 (s[0:1], s[2:3]).
fn dispatch_ib(pgm: u64, groups: u32, arg1: u64, arg2: u64) -> Vec<u32> {
    dispatch_ib_with(pgm, groups, arg1, arg2, INITIATOR)
}

/// [`dispatch_ib`] with DISPATCH_INITIATOR `initiator`.
fn dispatch_ib_with(pgm: u64, groups: u32, arg1: u64, arg2: u64, initiator: u32) -> Vec<u32> {
    let mut ib = registers(pgm, arg1, arg2);
    ib.extend(pm4::dispatch_direct([groups, 1, 1], initiator));
    ib
}

/// kfdtest's register set-up of a dispatch of the program at `pgm` (work-groups of one
/// work-item), with `arg1`/`arg2` in USER_DATA_0..3 (s[0:1], s[2:3]).
fn registers(pgm: u64, arg1: u64, arg2: u64) -> Vec<u32> {
    let mut ib = pm4::acquire_mem();
    ib.extend(pm4::set_sh_reg(COMPUTE_START_X, &[0, 0, 0, 1, 1, 1, 0, 0]));
    let shifted = pgm >> 8;
    ib.extend(pm4::set_sh_reg(COMPUTE_PGM_LO, &[shifted as u32, (shifted >> 32) as u32, 0, 0, 0, 0]));
    ib.extend(pm4::set_sh_reg(COMPUTE_PGM_RSRC1, &[RSRC1, RSRC2]));
    ib.extend(pm4::set_sh_reg(COMPUTE_PGM_RSRC3, &[9]));
    ib.extend(pm4::set_sh_reg(COMPUTE_RESOURCE_LIMITS, &[0]));
    ib.extend(pm4::set_sh_reg(COMPUTE_TMPRING_SIZE, &[0]));
    ib.extend(pm4::set_sh_reg(COMPUTE_RESTART_X, &[0, 0, 0, 0]));
    let mut user = [0u32; 16];
    user[..4].copy_from_slice(&[arg1 as u32, (arg1 >> 32) as u32, arg2 as u32, (arg2 >> 32) as u32]);
    ib.extend(pm4::set_sh_reg(COMPUTE_USER_DATA_0, &user));
    ib
}

/// Runs `ib` from a PM4 queue followed by kfdtest's end-of-pipe event; returns the queue.
fn run(rig: &Rig, ib: &[u32]) -> (RingQueue, u32) {
    let q = RingQueue::new(&rig.kfd, rig.gpu, RingKind::Pm4, 4096).expect("creating a PM4 queue");
    let ev = run_on(rig, &q, ib);
    (q, ev)
}

/// Runs `ib` from `q` followed by an end-of-pipe event of its own; returns the event.
fn run_on(rig: &Rig, q: &RingQueue, ib: &[u32]) -> u32 {
    let ib_mem = rig.alloc(4096, Kind::Gtt);
    for (i, d) in ib.iter().enumerate() {
        ib_mem.u32_at(4 * i as u64).store(*d, Ordering::Release);
    }
    let e = rig.kfd.create_event(rig.gpu, KFD_IOC_EVENT_SIGNAL, false).expect("CREATE_EVENT");
    let mailbox = rig.kfd.mailbox(e.event_slot_index).expect("the event page");
    q.write(&pm4::indirect_buffer(ib_mem.addr(0), ib.len() as u32));
    q.submit(&pm4::release_mem(mailbox, u64::from(e.event_id), 2, 2, e.event_id));
    std::mem::forget(ib_mem); // the IB stays mapped while the queue may read it
    e.event_id
}

fn u32s(m: &GpuMemory, n: u64) -> Vec<u32> {
    (0..n).map(|i| m.u32_at(4 * i).load(Ordering::Acquire)).collect()
}

#[test]
fn a_kfdtest_style_dispatch_runs_every_workgroup_and_fires_the_end_of_pipe_event() {
    // dst[wg] = src[wg] * 2 + wg: s[0:1] src, s[2:3] dst (USER_DATA), s4 the work-group id.
    let Some(co) = program(
        "pm4-copy",
        "  s_lshl_b32 s5, s4, 2
  s_load_dword s6, s[0:1], s5
  s_waitcnt lgkmcnt(0)
  s_lshl_b32 s6, s6, 1
  s_add_u32 s6, s6, s4
  v_mov_b32 v0, s6
  v_mov_b32 v1, s5
  global_store_dword v1, v0, s[2:3]",
    ) else {
        return;
    };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let src = rig.alloc(4096, Kind::Gtt);
    let dst = rig.alloc(4096, Kind::Gtt);
    for i in 0..16u64 {
        src.u32_at(4 * i).store(100 + i as u32, Ordering::Release);
    }
    let (q, ev) = run(&rig, &dispatch_ib(code.mem.addr(co.symbol("shader")), 16, src.addr(0), dst.addr(0)));
    rig.assert_fires(ev, "the end-of-pipe event after the dispatch");
    let want: Vec<u32> = (0..16).map(|i| (100 + i) * 2 + i).collect();
    assert_eq!(u32s(&dst, 16), want);
    assert_eq!(rig.status(q.id).error, None);
}

#[test]
fn a_long_dispatch_is_sliced_and_the_packets_after_it_wait_for_it() {
    // Every work-group counts to 20000 (60,000 instructions: longer than a slice, 1 ms on the
    // engine thread or 50,000 instructions on a worker) before it adds 1 to the counter at
    // s[2:3]. Sixteen of them: the debug-build core on a loaded machine must end them well
    // within the event wait.
    let Some(co) = program(
        "pm4-long",
        "  s_mov_b32 s6, 0
loop:
  s_add_u32 s6, s6, 1
  s_cmp_lt_u32 s6, 20000
  s_cbranch_scc1 loop
  v_mov_b32 v0, 0
  v_mov_b32 v1, 1
  global_atomic_add v0, v1, s[2:3]",
    ) else {
        return;
    };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let counter = rig.alloc(4096, Kind::Gtt);
    let (q, ev) = run(&rig, &dispatch_ib(code.mem.addr(co.symbol("shader")), 16, 0, counter.addr(0)));
    rig.assert_fires(ev, "the end-of-pipe event");
    assert_eq!(counter.u32_at(0).load(Ordering::Acquire), 16, "every work-group ran once");
    wait_for(TIMEOUT, "the ring consumed", || q.idle().then_some(()));
}

#[test]
fn registers_outside_the_compute_pipe_are_refused_by_offset() {
    let rig = Rig::new();
    // mmSPI_SHADER_PGM_LO_PS (0x2C08) is a graphics register.
    let (q, _) = run(&rig, &pm4::set_sh_reg(0x2C08, &[0]));
    let st = rig.wait_error(q.id);
    let err = st.error.expect("a queue error");
    let reason = err.reason;
    assert_eq!(err.code, ERROR_INVALID_PACKET_FORMAT);
    assert!(reason.contains("0x2c08") && reason.contains("compute shader registers"), "{reason}");
}

#[test]
fn a_dispatch_of_an_instruction_the_core_lacks_is_a_queue_error_naming_it() {
    let Some(co) = program("pm4-mfma", "  v_mfma_f32_4x4x1f32 a[0:3], v0, v1, a[0:3]") else {
        return;
    };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let (q, _) = run(&rig, &dispatch_ib(code.mem.addr(co.symbol("shader")), 1, 0, 0));
    let reason = rig.wait_error(q.id).error.expect("a queue error").reason;
    assert!(reason.contains("v_mfma_f32_4x4x1f32"), "{reason}");
}

/// gfx10 DISPATCH_INITIATOR CS_W32_EN: wave32.
const CS_W32_EN: u32 = 1 << 15;

#[test]
fn cs_w32_en_runs_gfx1030_code_in_wave32_and_gfx90a_refuses_it() {
    // vcc_hi is a lane mask half in wave64 only: an e32 compare clears it there and leaves it in
    // wave32. dst[wg] = vcc_hi after the compare.
    let src = ".amdgcn_target \"amdgcn-amd-amdhsa--gfx1030\"\n.text\n.globl shader\n.p2align 8\nshader:
  s_mov_b32 vcc_hi, 5
  v_cmp_eq_u32_e32 vcc_lo, 0, v0
  s_lshl_b32 s5, s4, 2
  v_mov_b32 v0, vcc_hi
  v_mov_b32 v1, s5
  global_store_dword v1, v0, s[2:3]
  s_endpgm\n";
    let Some(co) = code_object::assemble_for("pm4-w32", src, "gfx1030") else { return };
    let rig = Rig::with_profile("gfx1030");
    let code = co.load(&rig.kfd, rig.gpu);
    let pgm = code.mem.addr(co.symbol("shader"));
    for (initiator, want) in [(INITIATOR | CS_W32_EN, 5), (INITIATOR, 0)] {
        let dst = rig.alloc(4096, Kind::Gtt);
        dst.fill(0, 4096, 0xEE);
        let (q, ev) = run(&rig, &dispatch_ib_with(pgm, 4, 0, dst.addr(0), initiator));
        rig.assert_fires(ev, "the end-of-pipe event after the dispatch");
        assert_eq!(u32s(&dst, 4), [want; 4], "initiator {initiator:#x}");
        assert_eq!(rig.status(q.id).error, None);
    }
    // gfx90a has no wave32.
    let rig = Rig::new();
    let (q, _) = run(&rig, &dispatch_ib_with(0x1000, 1, 0, 0, INITIATOR | CS_W32_EN));
    let reason = rig.wait_error(q.id).error.expect("a queue error").reason;
    assert!(reason.contains("CS_W32_EN"), "{reason}");
}

/// Each work-group adds 1 to the count at s[2:3] and to the mark of its X id, the dword after
/// it at 4 * (1 + id).
const MARK: &str = "  v_mov_b32 v0, 0
  v_mov_b32 v1, 1
  global_atomic_add v0, v1, s[2:3]
  s_add_u32 s5, s4, 1
  s_lshl_b32 s5, s5, 2
  v_mov_b32 v2, s5
  global_atomic_add v2, v1, s[2:3]";

/// A rig with the MARK program loaded; returns it, the program's address and the buffer
/// it counts in.
fn mark_rig(name: &str) -> Option<(Rig, code_object::Loaded, u64, GpuMemory)> {
    let co = program(name, MARK)?;
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let pgm = code.mem.addr(co.symbol("shader"));
    let out = rig.alloc(4096, Kind::Gtt);
    Some((rig, code, pgm, out))
}

fn store_dims(m: &GpuMemory, off: u64, dims: [u32; 3]) {
    for (i, d) in dims.iter().enumerate() {
        m.u32_at(off + 4 * i as u64).store(*d, Ordering::Release);
    }
}

/// The count and the marks of X ids 0..n.
fn marks(out: &GpuMemory, n: u64) -> (u32, Vec<u32>) {
    let all = u32s(out, n + 1);
    (all[0], all[1..].to_vec())
}

#[test]
fn an_indirect_dispatch_takes_its_dimensions_from_memory_in_both_layouts() {
    let Some((rig, _code, pgm, out)) = mark_rig("pm4-indirect") else { return };
    let args = rig.alloc(4096, Kind::Gtt);
    // The MEC's layout reads at an address; the ME's at an offset from the SET_BASE base.
    store_dims(&args, 0x40, [5, 2, 1]);
    store_dims(&args, 0x80, [3, 1, 2]);
    let mut ib = registers(pgm, 0, out.addr(0));
    ib.extend(pm4::dispatch_indirect(args.addr(0x40), INITIATOR));
    let (q, ev) = run(&rig, &ib);
    rig.assert_fires(ev, "the end-of-pipe event after the MEC-layout dispatch");
    assert_eq!(rig.status(q.id).error, None);
    assert_eq!(marks(&out, 6), (10, vec![2, 2, 2, 2, 2, 0]), "5 x 2 x 1 work-groups, each once");

    out.fill(0, 4096, 0);
    let mut ib = registers(pgm, 0, out.addr(0));
    ib.extend(pm4::set_base(1, args.addr(0)));
    ib.extend(pm4::dispatch_indirect_offset(0x80, INITIATOR));
    let (q, ev) = run(&rig, &ib);
    rig.assert_fires(ev, "the end-of-pipe event after the SET_BASE-layout dispatch");
    assert_eq!(rig.status(q.id).error, None);
    assert_eq!(marks(&out, 4), (6, vec![2, 2, 2, 0]), "3 x 1 x 2 work-groups, each once");
}

#[test]
fn dimensions_are_read_when_each_dispatch_starts_and_the_base_stays() {
    let Some((rig, _code, pgm, out)) = mark_rig("pm4-reread") else { return };
    let args = rig.alloc(4096, Kind::Gtt);
    store_dims(&args, 0, [2, 1, 1]);
    // The ring rewrites the dimensions between two dispatches of the same arguments.
    let mut ib = registers(pgm, 0, out.addr(0));
    ib.extend(pm4::set_base(1, args.addr(0)));
    ib.extend(pm4::dispatch_indirect_offset(0, INITIATOR));
    ib.extend(pm4::write_data(args.addr(0), &[3, 1, 1]));
    ib.extend(pm4::dispatch_indirect_offset(0, INITIATOR));
    let q = RingQueue::new(&rig.kfd, rig.gpu, RingKind::Pm4, 4096).expect("creating a PM4 queue");
    rig.assert_fires(run_on(&rig, &q, &ib), "the end-of-pipe event after two dispatches");
    assert_eq!(marks(&out, 4), (5, vec![2, 2, 1, 0]), "2 work-groups, then 3");

    // The host rewrites them; a later IB dispatches again from the queue's base and registers.
    store_dims(&args, 0, [4, 1, 1]);
    rig.assert_fires(
        run_on(&rig, &q, &pm4::dispatch_indirect_offset(0, INITIATOR)),
        "the end-of-pipe event after the third dispatch",
    );
    assert_eq!(marks(&out, 5), (9, vec![3, 3, 2, 1, 0]), "then 4");
    assert_eq!(rig.status(q.id).error, None);
}

#[test]
fn a_zero_dimension_launches_no_workgroups_and_the_queue_goes_on() {
    let Some((rig, _code, pgm, out)) = mark_rig("pm4-zero") else { return };
    let args = rig.alloc(4096, Kind::Gtt);
    let zeros = [[0, 4, 1], [4, 0, 1], [4, 1, 0], [0, 0, 0]];
    for (i, dims) in zeros.iter().enumerate() {
        store_dims(&args, 16 * i as u64, *dims);
    }
    store_dims(&args, 0x100, [1, 1, 1]);
    let mut ib = registers(pgm, 0, out.addr(0));
    for i in 0..zeros.len() {
        ib.extend(pm4::dispatch_indirect(args.addr(16 * i as u64), INITIATOR));
    }
    ib.extend(pm4::dispatch_direct([0, 1, 1], INITIATOR));
    // Then one work-group, so the queue is seen to go on after them.
    ib.extend(pm4::dispatch_indirect(args.addr(0x100), INITIATOR));
    let (q, ev) = run(&rig, &ib);
    rig.assert_fires(ev, "the end-of-pipe event after the empty dispatches");
    assert_eq!(rig.status(q.id).error, None);
    assert_eq!(marks(&out, 4), (1, vec![1, 0, 0, 0]), "only the last dispatch ran a work-group");
}

/// A GPU address no test maps.
const UNMAPPED: u64 = 0x7000_0000_0000;

#[test]
fn bad_set_base_and_dispatch_indirect_packets_are_queue_errors_naming_the_field() {
    let rig = Rig::new();
    let args = rig.alloc(4096, Kind::Gtt);
    store_dims(&args, 0, [1, 1, 1]);
    let a = args.addr(0);
    let cases: Vec<(&str, Vec<u32>, &str)> = vec![
        ("BASE_INDEX 0", pm4::set_base(0, a), "BASE_INDEX 0 (the DISPLAY_LIST_PATCH_TABLE_BASE) is not supported"),
        ("BASE_INDEX 3", pm4::set_base(3, a), "BASE_INDEX 3 (the CE_PARTITION_BASE)"),
        ("BASE_INDEX 9", pm4::set_base(9, a), "BASE_INDEX 9 (reserved)"),
        ("reserved bits", pm4::set_base(0x11, a), "bits 31:4 are reserved"),
        ("a base off 8 bytes", pm4::set_base(1, a + 4), "not 8-byte aligned"),
        ("a short SET_BASE", vec![pm4::header(0x11, 2), 1, a as u32], "SET_BASE with 2 body dwords, it needs 3"),
        ("no SET_BASE", pm4::dispatch_indirect_offset(0, INITIATOR), "without a SET_BASE of BASE_INDEX 1"),
        ("unaligned address", pm4::dispatch_indirect(a + 2, INITIATOR), "not dword aligned"),
        (
            "unaligned offset",
            [pm4::set_base(1, a), pm4::dispatch_indirect_offset(2, INITIATOR)].concat(),
            "not dword aligned",
        ),
        (
            "a wrapping offset",
            [pm4::set_base(1, u64::MAX - 7), pm4::dispatch_indirect_offset(0x10, INITIATOR)].concat(),
            "wraps around",
        ),
        ("1 body dword", vec![pm4::header(0x16, 1), 0], "DISPATCH_INDIRECT with 1 body dwords"),
        (
            "4 body dwords",
            vec![pm4::header(0x16, 4), a as u32, (a >> 32) as u32, INITIATOR, 0],
            "DISPATCH_INDIRECT with 4 body dwords",
        ),
        (
            "no COMPUTE_SHADER_EN",
            pm4::dispatch_indirect(a, 0x20),
            "DISPATCH_INDIRECT initiator 0x20 without COMPUTE_SHADER_EN",
        ),
    ];
    for (what, ib, want) in cases {
        let (q, ev) = run(&rig, &ib);
        let err = rig.wait_error(q.id).error.expect("a queue error");
        assert_eq!((err.code, err.fault_va), (ERROR_INVALID_PACKET_FORMAT, None), "{what}: {}", err.reason);
        assert!(err.reason.contains(want), "{what}: {}", err.reason);
        rig.assert_quiet(ev, what);
    }
}

/// A one-page buffer whose next page is mapped to no GPU.
fn before_a_hole(rig: &Rig) -> GpuMemory {
    let process = rig.emb.device().process(rig.kfd.pid()).expect("the client's process context");
    let mut kept = Vec::new();
    for _ in 0..16 {
        let m = rig.alloc(4096, Kind::Gtt);
        if process.vm().region(rig.gpu, GpuVa(m.addr(0) + m.size())).is_none() {
            return m;
        }
        kept.push(m);
    }
    panic!("16 buffers, each followed by mapped memory");
}

#[test]
fn unreadable_dimensions_are_a_vm_fault_at_their_address() {
    let rig = Rig::new();
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, true);
    let edge = before_a_hole(&rig);
    let end = edge.addr(0) + edge.size();
    let cases: [(&str, Vec<u32>, u64); 3] = [
        ("an unmapped address", pm4::dispatch_indirect(UNMAPPED + 0x40, INITIATOR), UNMAPPED + 0x40),
        (
            "an unmapped base",
            [pm4::set_base(1, UNMAPPED), pm4::dispatch_indirect_offset(0x80, INITIATOR)].concat(),
            UNMAPPED + 0x80,
        ),
        // DIM_X is the buffer's last dword: DIM_Y and DIM_Z are past its end.
        ("a short buffer", pm4::dispatch_indirect(end - 4, INITIATOR), end),
    ];
    for (what, ib, va) in cases {
        let (q, ev) = run(&rig, &ib);
        let w = rig.assert_fires(mem_ev, "the MEMORY event");
        let data = &uapi::IntoBytes::as_bytes(&w.data[0].payload)[..32];
        let fault = <HsaMemoryExceptionData as uapi::FromBytes>::read_from_bytes(data).unwrap();
        // The event names the page (amdkfd's kfd_signal_vm_fault_event); the queue's error the byte.
        assert_eq!((fault.va, fault.gpu_id), (va & !0xfff, rig.gpu), "{what}");
        assert_eq!(rig.wait_error(q.id).error.unwrap().fault_va, Some(va), "{what}");
        rig.assert_quiet(ev, what);
    }
}

/// Runs [`code_object::rendezvous`] (its count at USER_DATA_2..3, s[2:3]) over two work-groups
/// from a PM4 queue of an engine with `workers` shader workers; returns the count and the
/// timeouts.
fn rendezvous(workers: usize) -> Option<(u32, u32)> {
    let co = program(&format!("pm4-rendezvous{workers}"), &code_object::rendezvous("s[2:3]"))?;
    let rig = Rig::with_engine(EngineConfig { shader_workers: workers, ..EngineConfig::default() });
    let code = co.load(&rig.kfd, rig.gpu);
    let out = rig.alloc(4096, Kind::Gtt);
    let (q, ev) = run(&rig, &dispatch_ib(code.mem.addr(co.symbol("shader")), 2, 0, out.addr(0)));
    rig.assert_fires(ev, "the end-of-pipe event after the dispatch");
    assert_eq!(rig.status(q.id).error, None);
    let v = u32s(&out, 2);
    Some((v[0], v[1]))
}

#[test]
fn with_shader_workers_the_workgroups_of_a_pm4_dispatch_are_resident_together() {
    for workers in [1, 2] {
        let Some(got) = rendezvous(workers) else { return };
        assert_eq!(got, (2, 0), "{workers} workers: each work-group saw the other one running");
    }
    // On the engine thread they run one after the other: the first gives up waiting.
    let Some(got) = rendezvous(0) else { return };
    assert_eq!(got, (2, 1));
}

#[test]
fn a_fault_in_a_workgroup_on_the_workers_stops_the_queue_with_a_vm_fault() {
    // Every work-group stores to s[2:3].
    let Some(co) = program("pm4-store", "  v_mov_b32 v0, 0\n  global_store_dword v0, v0, s[2:3]") else {
        return;
    };
    let rig = Rig::with_engine(EngineConfig { shader_workers: 2, ..EngineConfig::default() });
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, true);
    let code = co.load(&rig.kfd, rig.gpu);
    let (q, ev) = run(&rig, &dispatch_ib(code.mem.addr(co.symbol("shader")), 8, 0, UNMAPPED));
    rig.assert_fires(mem_ev, "the MEMORY event");
    assert_eq!(rig.wait_error(q.id).error.unwrap().fault_va, Some(UNMAPPED));
    rig.assert_quiet(ev, "the end-of-pipe event of a faulted dispatch");
    // The queue goes away with its dispatch; the workers serve the next one.
    drop(q);
    let Some(got) = rendezvous(1) else { return };
    assert_eq!(got, (2, 0));
}

#[test]
fn a_pm4_dispatch_of_endless_workgroups_leaves_the_engine_to_other_queues_until_its_queue_goes() {
    let Some(co) = program("pm4-endless", "spin:\n  s_sleep 1\n  s_branch spin") else { return };
    let rig = Rig::with_engine(EngineConfig { shader_workers: 2, ..EngineConfig::default() });
    let code = co.load(&rig.kfd, rig.gpu);
    let (endless, ev) = run(&rig, &dispatch_ib(code.mem.addr(co.symbol("shader")), 64, 0, 0));
    let out = rig.alloc(4096, Kind::Gtt);
    let other = RingQueue::new(&rig.kfd, rig.gpu, RingKind::Pm4, 4096).expect("creating a PM4 queue");
    for i in 0..20u32 {
        let done = run_on(&rig, &other, &pm4::write_data(out.addr(0), &[i + 1]));
        rig.assert_fires(done, "a packet on another queue while 64 endless work-groups run");
        assert_eq!(out.u32_at(0).load(Ordering::Acquire), i + 1);
    }
    rig.assert_quiet(ev, "the endless dispatch's end-of-pipe event");
    let before = rig.stats().queues;
    drop(endless);
    assert_eq!(rig.stats().queues, before - 1, "DESTROY_QUEUE of the queue running the dispatch");
}

/// A trap handler: stores the saved PC (ttmp0, ttmp1[15:0]) and the trap id (ttmp1[23:16]) at
/// its TMA (ttmp14:15), then returns past the s_trap.
const HANDLER: &str = "
.globl handler
.p2align 8
handler:
  v_mov_b32 v6, ttmp0
  v_mov_b32 v7, ttmp1
  v_mov_b32 v5, 0
  global_store_dwordx2 v5, v[6:7], ttmp[14:15]
  s_waitcnt vmcnt(0)
  s_add_u32 ttmp0, ttmp0, 4
  s_addc_u32 ttmp1, ttmp1, 0
  s_rfe_b64 ttmp[0:1]
";

fn set_trap_handler(rig: &Rig, tba: u64, tma: u64) {
    let mut a = SetTrapHandlerArgs { tba_addr: tba, tma_addr: tma, gpu_id: rig.gpu, pad: 0 };
    rig.call(AMDKFD_IOC_SET_TRAP_HANDLER, &mut a).unwrap();
}

/// dst[wg] = wg + 1 after an s_trap 7 at the program's start.
fn trapping_program(name: &str) -> Option<code_object::CodeObject> {
    program(
        name,
        &format!(
            "  s_trap 7
  s_add_u32 s6, s4, 1
  s_lshl_b32 s5, s4, 2
  v_mov_b32 v0, s6
  v_mov_b32 v1, s5
  global_store_dword v1, v0, s[2:3]
  s_endpgm
{HANDLER}"
        ),
    )
}

/// kfdtest's RSRC2 sets TRAP_PRESENT: with a handler installed (SET_TRAP_HANDLER), s_trap
/// enters it with the saved PC and trap id, s_rfe_b64 returns, and every work-group goes on
/// (two of them: on the workers too).
#[test]
fn s_trap_runs_the_installed_handler_and_the_dispatch_goes_on() {
    let Some(co) = trapping_program("pm4-trap") else { return };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let tma = rig.alloc(4096, Kind::Gtt);
    let dst = rig.alloc(4096, Kind::Gtt);
    set_trap_handler(&rig, code.mem.addr(co.symbol("handler")), tma.addr(0));
    let pgm = code.mem.addr(co.symbol("shader"));
    let (q, ev) = run(&rig, &dispatch_ib(pgm, 2, 0, dst.addr(0)));
    rig.assert_fires(ev, "the end-of-pipe event after the trapping dispatch");
    assert_eq!(rig.status(q.id).error, None);
    assert_eq!(u32s(&dst, 2), [1, 2], "both work-groups ran past the s_trap");
    let t = u32s(&tma, 2);
    assert_eq!(u64::from(t[0]) | u64::from(t[1] & 0xffff) << 32, pgm, "ttmp0/ttmp1: the PC of the s_trap");
    assert_eq!(t[1] >> 16 & 0xff, 7, "ttmp1[23:16]: the trap id");
}

/// Without TRAP_PRESENT in RSRC2, or with no handler installed (a TBA of 0 removes it), s_trap
/// is the queue error; a handler at an unmapped TBA is a VM fault at the TBA.
#[test]
fn s_trap_without_a_handler_is_the_queue_error_and_an_unmapped_handler_a_vm_fault() {
    let Some(co) = trapping_program("pm4-trap-none") else { return };
    let rig = Rig::new();
    let code = co.load(&rig.kfd, rig.gpu);
    let dst = rig.alloc(4096, Kind::Gtt);
    let pgm = code.mem.addr(co.symbol("shader"));
    let trap_error = |ib: &[u32], what: &str| {
        let (q, _) = run(&rig, ib);
        let err = rig.wait_error(q.id).error.expect("a queue error");
        assert_eq!(err.code, ERROR_TRAP, "{what}: {}", err.reason);
        assert!(err.reason.contains("s_trap 7"), "{what}: {}", err.reason);
    };
    trap_error(&dispatch_ib(pgm, 1, 0, dst.addr(0)), "no handler installed");
    set_trap_handler(&rig, code.mem.addr(co.symbol("handler")), dst.addr(0));
    let mut no_trap_present = registers(pgm, 0, dst.addr(0));
    no_trap_present.extend(pm4::set_sh_reg(COMPUTE_PGM_RSRC1, &[RSRC1, RSRC2 & !(1 << 6)]));
    no_trap_present.extend(pm4::dispatch_direct([1, 1, 1], INITIATOR));
    trap_error(&no_trap_present, "RSRC2 without TRAP_PRESENT");
    set_trap_handler(&rig, 0, 0);
    trap_error(&dispatch_ib(pgm, 1, 0, dst.addr(0)), "a TBA of 0");

    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, false);
    let tba = 0x5_0000_0000u64;
    set_trap_handler(&rig, tba, 0);
    let (q, _) = run(&rig, &dispatch_ib(pgm, 1, 0, dst.addr(0)));
    let w = rig.assert_fires(mem_ev, "the MEMORY event");
    let data = &uapi::IntoBytes::as_bytes(&w.data[0].payload)[..32];
    let fault = <HsaMemoryExceptionData as uapi::FromBytes>::read_from_bytes(data).unwrap();
    assert_eq!((fault.va, fault.gpu_id, fault.failure.not_present), (tba, rig.gpu, 1));
    assert_eq!(rig.wait_error(q.id).error.unwrap().fault_va, Some(tba));
    assert_eq!(u32s(&dst, 1), [0], "the faulting dispatch wrote nothing");
}

/// Gives the PM4 queue `q` its GPU's GWS (ALLOC_QUEUE_GWS), as kfdtest's KFDGWSTest does.
fn give_gws(rig: &Rig, q: &RingQueue) {
    let mut g = AllocQueueGwsArgs { queue_id: q.id, num_gws: 64, ..Default::default() };
    rig.call(uapi::ioctl::AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut g).expect("ALLOC_QUEUE_GWS");
    assert_eq!(g.first_gws, 0);
}

/// kfdtest's GwsInitIsa: the GWS semaphore 0 starts at the dword at s[0:1].
const GWS_INIT: &str = "  s_mov_b32 m0, 0
  s_load_dword s16, s[0:1], 0x0 glc
  s_waitcnt 0
  v_mov_b32 v0, s16
  ds_gws_init v0 offset:0 gds
  s_waitcnt 0";

/// kfdtest's GwsAtomicIncreaseIsa (gfx9): add one to the dword at s[0:1] with scalar loads and
/// stores, inside semaphore 0.
const GWS_INCREASE: &str = "  s_mov_b32 m0, 0
  ds_gws_sema_p offset:0 gds
  s_waitcnt 0
  s_load_dword s16, s[0:1], 0x0 glc
  s_waitcnt 0
  s_add_u32 s16, s16, 1
  s_store_dword s16, s[0:1], 0x0 glc
  s_waitcnt lgkmcnt(0)
  ds_gws_sema_v offset:0 gds";

#[test]
fn a_queue_given_gws_keeps_a_semaphore_from_one_dispatch_to_the_next_across_the_workers() {
    let (Some(init_co), Some(inc_co)) = (program("gws-init", GWS_INIT), program("gws-inc", GWS_INCREASE)) else {
        return;
    };
    let rig = Rig::with_engine(EngineConfig { shader_workers: 2, ..EngineConfig::default() });
    let (init, inc) = (init_co.load(&rig.kfd, rig.gpu), inc_co.load(&rig.kfd, rig.gpu));
    let (init, inc) = (init.mem.addr(init_co.symbol("shader")), inc.mem.addr(inc_co.symbol("shader")));
    let buf = rig.alloc(4096, Kind::Gtt);
    buf.u32_at(0).store(1, Ordering::Release);
    let q = RingQueue::new(&rig.kfd, rig.gpu, RingKind::Pm4, 4096).expect("creating a PM4 queue");
    give_gws(&rig, &q);
    let ev = run_on(&rig, &q, &dispatch_ib(init, 1, buf.addr(0), 0));
    rig.assert_fires(ev, "the init dispatch");
    // 512 work-groups, resident by twos or more on two workers: without the semaphore the
    // scalar read-modify-writes would lose increments.
    let ev = run_on(&rig, &q, &dispatch_ib(inc, 512, buf.addr(0), 0));
    rig.assert_fires(ev, "the increasing dispatch");
    assert_eq!(rig.status(q.id).error, None);
    assert_eq!(buf.u32_at(0).load(Ordering::Acquire), 513, "kfdtest's 1 + one per work-group");
}

#[test]
fn a_gws_instruction_on_a_queue_without_gws_is_a_queue_error_naming_it() {
    let Some(co) = program("gws-inc-nogws", GWS_INCREASE) else {
        return;
    };
    let rig = Rig::new();
    let loaded = co.load(&rig.kfd, rig.gpu);
    let inc = loaded.mem.addr(co.symbol("shader"));
    let buf = rig.alloc(4096, Kind::Gtt);
    let (q, ev) = run(&rig, &dispatch_ib(inc, 4, buf.addr(0), 0));
    let e = rig.wait_error(q.id).error.expect("a queue error");
    assert_eq!(e.code, ERROR_ILLEGAL_INSTRUCTION, "{e:?}");
    assert!(e.reason.contains("ds_gws_sema_p") && e.reason.contains("holds no GWS"), "{}", e.reason);
    rig.assert_quiet(ev, "the end-of-pipe event");
    // Given the GWS and then taken back, another queue's dispatches have none either.
    let other = RingQueue::new(&rig.kfd, rig.gpu, RingKind::Pm4, 4096).expect("creating a PM4 queue");
    give_gws(&rig, &other);
    let mut g = AllocQueueGwsArgs { queue_id: other.id, num_gws: 0, ..Default::default() };
    rig.call(uapi::ioctl::AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut g).expect("giving the GWS back");
    run_on(&rig, &other, &dispatch_ib(inc, 1, buf.addr(0), 0));
    assert!(rig.wait_error(other.id).error.expect("a queue error").reason.contains("holds no GWS"));
}

/// Work-groups that loop until the word at s[0:1] is non-zero, each iteration counting in s6
/// and v2 and adding 1 to the counter at s[2:3]; at the end work-group `wg` stores s6 and v2 at
/// s[2:3] + 8 * (wg + 1).
const SPIN_UNTIL_STOPPED: &str = "  s_mov_b32 s6, 0
  v_mov_b32 v2, 0
  v_mov_b32 v0, 0
  v_mov_b32 v1, 1
loop:
  s_add_u32 s6, s6, 1
  v_add_u32 v2, 1, v2
  global_atomic_add v0, v1, s[2:3]
  s_load_dword s7, s[0:1], 0x0 glc
  s_waitcnt vmcnt(0) lgkmcnt(0)
  s_cmp_eq_u32 s7, 0
  s_cbranch_scc1 loop
  s_add_u32 s5, s4, 1
  s_lshl_b32 s5, s5, 3
  v_mov_b32 v3, s5
  v_mov_b32 v4, s6
  global_store_dword v3, v4, s[2:3]
  global_store_dword v3, v2, s[2:3] offset:4";

/// Preempts a PM4 queue (UPDATE_QUEUE to 0 percent) while `groups` work-groups of
/// [`SPIN_UNTIL_STOPPED`] run, on a device with `workers` shader workers, three times: while
/// preempted no wave runs (the counter stands still), once resumed they go on from where they
/// stopped, and at the end every work-group's scalar and vector counts agree and add up to the
/// counter (no wave lost, restarted or repeated an iteration).
fn preempt_and_resume(workers: usize, groups: u32) {
    let Some(co) = program("pm4-spin", SPIN_UNTIL_STOPPED) else {
        return;
    };
    let rig = Rig::with_engine(EngineConfig { shader_workers: workers, ..EngineConfig::default() });
    let code = co.load(&rig.kfd, rig.gpu);
    let stop = rig.alloc(4096, Kind::Gtt);
    let out = rig.alloc(4096, Kind::Gtt);
    let counter = || out.u32_at(0).load(Ordering::Acquire);
    let (q, ev) = run(&rig, &dispatch_ib(code.mem.addr(co.symbol("shader")), groups, stop.addr(0), out.addr(0)));
    for round in 0..3 {
        let before = counter();
        wait_for(TIMEOUT, "the waves making progress", || (counter() > before).then_some(()));
        q.update(0).expect("UPDATE_QUEUE to 0 percent");
        let held = counter();
        support::client::stays(std::time::Duration::from_millis(50), "no wave runs while preempted", || {
            counter() == held
        });
        q.update(100).expect("UPDATE_QUEUE to 100 percent");
        wait_for(TIMEOUT, "the waves resuming", || (counter() > held).then_some(()));
        assert_eq!(rig.status(q.id).error, None, "round {round}");
    }
    stop.u32_at(0).store(1, Ordering::Release);
    rig.assert_fires(ev, "the end-of-pipe event once the waves are told to stop");
    let mut total = 0u64;
    for wg in 0..u64::from(groups) {
        let (s, v) =
            (out.u32_at(8 * (wg + 1)).load(Ordering::Acquire), out.u32_at(8 * (wg + 1) + 4).load(Ordering::Acquire));
        assert!(s > 0 && s == v, "work-group {wg}: scalar count {s}, vector count {v}");
        total += u64::from(s);
    }
    assert_eq!(total, u64::from(counter()), "the counts add up to the counter");
    assert_eq!(rig.status(q.id).error, None);
}

#[test]
fn a_preempted_dispatch_on_the_workers_stops_and_resumes_where_it_was() {
    preempt_and_resume(2, 8);
}

#[test]
fn a_preempted_dispatch_on_the_engine_thread_stops_and_resumes_where_it_was() {
    preempt_and_resume(0, 3);
}

#[test]
fn preemption_is_per_queue_and_a_preempted_queue_destroyed_takes_its_waves_with_it() {
    let Some(co) = program("pm4-spin", SPIN_UNTIL_STOPPED) else {
        return;
    };
    let rig = Rig::with_engine(EngineConfig { shader_workers: 2, ..EngineConfig::default() });
    let code = co.load(&rig.kfd, rig.gpu);
    let pgm = code.mem.addr(co.symbol("shader"));
    let stop = rig.alloc(4096, Kind::Gtt);
    let (out1, out2) = (rig.alloc(4096, Kind::Gtt), rig.alloc(4096, Kind::Gtt));
    let (q1, _) = run(&rig, &dispatch_ib(pgm, 4, stop.addr(0), out1.addr(0)));
    let (q2, ev2) = run(&rig, &dispatch_ib(pgm, 4, stop.addr(0), out2.addr(0)));
    let c1 = || out1.u32_at(0).load(Ordering::Acquire);
    let c2 = || out2.u32_at(0).load(Ordering::Acquire);
    wait_for(TIMEOUT, "both dispatches running", || (c1() > 0 && c2() > 0).then_some(()));
    q1.update(0).expect("UPDATE_QUEUE to 0 percent");
    let held = c1();
    let before = c2();
    wait_for(TIMEOUT, "the other queue's waves going on", || (c2() > before + 100).then_some(()));
    assert_eq!(c1(), held, "the preempted queue's waves ran");
    drop(q1);
    support::client::stays(std::time::Duration::from_millis(20), "the destroyed queue's waves stay gone", || {
        c1() == held
    });
    stop.u32_at(0).store(1, Ordering::Release);
    rig.assert_fires(ev2, "the other queue's end-of-pipe event");
    assert_eq!(rig.status(q2.id).error, None);
}

/// Submits one dispatch of the program at `pgm` (one work-group) with `arg1`/`arg2` from a new
/// PM4 queue on `gpu`, its indirect buffer in memory mapped on that GPU alone; no end-of-pipe
/// event (the event page is mapped on the rig's GPU only).
fn dispatch_on(rig: &Rig, gpu: u32, pgm: u64, arg1: u64, arg2: u64) -> RingQueue {
    let ib = dispatch_ib(pgm, 1, arg1, arg2);
    let ib_mem = rig.kfd.alloc(gpu, 4096, Kind::Gtt).expect("allocating the indirect buffer");
    for (i, d) in ib.iter().enumerate() {
        ib_mem.u32_at(4 * i as u64).store(*d, Ordering::Release);
    }
    let q = RingQueue::new(&rig.kfd, gpu, RingKind::Pm4, 4096).expect("creating a PM4 queue");
    q.submit(&pm4::indirect_buffer(ib_mem.addr(0), ib.len() as u32));
    std::mem::forget(ib_mem); // the IB stays mapped while the queue may read it
    q
}

/// A buffer is reached by the GPUs it is mapped on and by no other: amdkfd maps a buffer into
/// each GPU's VM on its own (kfd_chardev.c, kfd_ioctl_map_memory_to_gpu, at v6.1). A dispatch
/// on one GPU into memory mapped on the other alone faults on its own GPU at that page, as
/// kfdtest's KFDQMTest.mGPUShareBO does on hardware (rocm-5.2.3's kfdtest.exclude keeps it out
/// on every ASIC, KFD-334). Once mapped on both, the buffer carries a value from one GPU's
/// dispatch to the other's.
#[test]
fn a_buffer_reaches_only_the_gpus_it_is_mapped_on_and_carries_data_between_them() {
    // *s[2:3] = *s[0:1]
    let Some(co) = program(
        "pm4-copy-dword",
        "  s_load_dword s6, s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v0, s6
  v_mov_b32 v1, 0
  global_store_dword v1, v0, s[2:3]",
    ) else {
        return;
    };
    let rig = Rig::with_config(cuse_kfd::DeviceConfig { gpus: 2, ..Default::default() });
    let gpus = rig.kfd.gpu_ids().expect("the GPUs");
    let (a, b) = (gpus[0], gpus[1]);
    assert_eq!(a, rig.gpu);
    let pgm = |gpu: u32| {
        let code = co.load(&rig.kfd, gpu);
        let at = code.mem.addr(co.symbol("shader"));
        std::mem::forget(code); // mapped while any queue may run it
        at
    };
    let (pgm_a, pgm_b) = (pgm(a), pgm(b));
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, true);
    let src = rig.kfd.alloc(b, 4096, Kind::Gtt).unwrap();
    let shared = rig.kfd.alloc(a, 4096, Kind::Gtt).unwrap();
    let dst = rig.kfd.alloc(a, 4096, Kind::Gtt).unwrap();
    src.u32_at(0).store(0x0505_0505, Ordering::Release);

    // B's dispatch into memory mapped on A only.
    let q = dispatch_on(&rig, b, pgm_b, src.addr(0), shared.addr(0));
    let w = rig.assert_fires(mem_ev, "the MEMORY event of B's fault");
    let data = &uapi::IntoBytes::as_bytes(&w.data[0].payload)[..32];
    let fault = <HsaMemoryExceptionData as uapi::FromBytes>::read_from_bytes(data).unwrap();
    assert_eq!((fault.va, fault.gpu_id, fault.failure.not_present), (shared.addr(0), b, 1));
    assert_eq!(rig.wait_error(q.id).error.unwrap().fault_va, Some(shared.addr(0)));
    assert_eq!(u32s(&shared, 1), [0], "the faulting dispatch wrote nothing");

    // Mapped on B as well: B writes it, then A reads it.
    rig.kfd.map_to_gpu(shared.handle(), &[a, b]).unwrap();
    let q_b = dispatch_on(&rig, b, pgm_b, src.addr(0), shared.addr(0));
    wait_for(TIMEOUT, "B's copy into the shared buffer", || (u32s(&shared, 1) == [0x0505_0505]).then_some(()));
    let q_a = dispatch_on(&rig, a, pgm_a, shared.addr(0), dst.addr(0));
    wait_for(TIMEOUT, "A's copy out of it", || (u32s(&dst, 1) == [0x0505_0505]).then_some(()));
    assert_eq!((rig.status(q_b.id).error, rig.status(q_a.id).error), (None, None));
    rig.assert_quiet(mem_ev, "a MEMORY event once the buffer is mapped on both");
}
