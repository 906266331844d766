//! ROCr's PM4_IB vendor packet on AQL queues of the embedded device (engine/ring/pm4_ib.rs):
//! the code-cache invalidate ROCr sends after loading a code object runs and completes; every
//! field of the packet is checked; the IB runs through the PM4 subset of PM4 queues, and a
//! packet outside it stops the queue with an error naming it. Also a dispatch of GFX code that
//! stops at an instruction the shader core lacks: the error names it and the kernel object.

mod support;

use cuse_kfd::engine::{ERROR_ILLEGAL_INSTRUCTION, ERROR_INVALID_PACKET_FORMAT};
use std::sync::atomic::Ordering;
use support::client::*;
use thunk::memory::Kind;
use thunk::queue::packet::{self, header};
use thunk::signal::Signals;
use uapi::aql::*;

/// A PM4 type-3 header (soc15d.h; shader type compute) of a packet with `body` dwords.
fn pm4(op: u8, body: usize) -> u32 {
    3 << 30 | ((body as u32 - 1) & 0x3FFF) << 16 | u32::from(op) << 8 | 1 << 1
}

/// The ACQUIRE_MEM of ROCr's `GpuAgent::InvalidateCodeCaches` on gfx9 (7 dwords: COHER_CNTL
/// with the SH_ICACHE, SH_KCACHE, TC and TC_WB actions, COHER_SIZE all ones).
fn acquire_mem_gfx9() -> Vec<u32> {
    vec![3 << 30 | 5 << 16 | 0x58 << 8, 1 << 29 | 1 << 27 | 1 << 23 | 1 << 18, 0xFFFF_FFFF, 0xFF, 0, 0, 0]
}

/// The same on gfx10 (8 dwords: GCR_CNTL in dword 7 with GLI, GLK, GLV, GL1 and GL2 invalidates).
fn acquire_mem_gfx10() -> Vec<u32> {
    vec![3 << 30 | 6 << 16 | 0x58 << 8, 0, 0xFFFF_FFFF, 0xFF, 0, 0, 0, 1 | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 14]
}

fn write_data(addr: u64, value: u32) -> Vec<u32> {
    vec![pm4(0x37, 4), 5 << 8 | 1 << 20, addr as u32, (addr >> 32) as u32, value]
}

/// WAIT_REG_MEM on memory: `*addr == reference`.
fn wait_equal(addr: u64, reference: u32) -> Vec<u32> {
    vec![pm4(0x3C, 6), 3 | 1 << 4, addr as u32, (addr >> 32) as u32, reference, 0xFFFF_FFFF, 4]
}

/// The packet as ROCr's `AqlQueue::ExecutePM4` builds it for an IB of `dwords` at `ib`.
fn pm4_ib(ib: u64, dwords: u32, completion: u64) -> AmdAqlPm4IbPacket {
    AmdAqlPm4IbPacket {
        header: AmdVendorPacketHeader {
            header: header(HSA_PACKET_TYPE_VENDOR_SPECIFIC, false),
            amd_format: AMD_AQL_FORMAT_PM4_IB,
            reserved: 0,
        },
        ib_jump_cmd: [3 << 30 | 2 << 16 | 0x3F << 8, ib as u32, (ib >> 32) as u32, dwords | 1 << 23],
        dw_cnt_remain: AMD_AQL_PM4_IB_DW_CNT_REMAIN,
        reserved: [0; 8],
        completion_signal: completion,
    }
}

fn put(m: &thunk::memory::GpuMemory, dwords: &[u32]) -> u32 {
    for (i, d) in dwords.iter().enumerate() {
        m.u32_at(4 * i as u64).store(*d, Ordering::Release);
    }
    dwords.len() as u32
}

#[test]
fn rocr_code_cache_invalidates_run_and_complete_their_signals() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    let ib = rig.alloc(4096, Kind::Gtt);
    let out = rig.alloc(4096, Kind::Gtt);
    for (i, acquire) in [acquire_mem_gfx9(), acquire_mem_gfx10()].into_iter().enumerate() {
        // The invalidate, then a write that shows the IB ran to its end.
        let mut program = acquire;
        program.extend(write_data(out.addr(4 * i as u64), 0xC0DE_0000 + i as u32));
        let dwords = put(&ib, &program);
        s.value(0).store(1, Ordering::Release);
        let index = submit(&q, &packet::to_bytes(&pm4_ib(ib.va(), dwords, s.handle(0))));
        if let Err(v) = s.wait(0, TIMEOUT, |v| v == 0) {
            panic!("PM4_IB {i}: completion signal is {v}; queue status {:?}", rig.status(q.id));
        }
        assert_eq!(word(&out, i as u64), 0xC0DE_0000 + i as u32, "PM4_IB {i}: the IB's WRITE_DATA");
        assert_eq!(q.read_index(), index + 1);
        assert_eq!(q.header(index) as u8, HSA_PACKET_TYPE_INVALID, "the slot goes back to INVALID");
    }
    // ROCr 5.2.3 sends it with a null completion signal and spins on the read index.
    let dwords = put(&ib, &acquire_mem_gfx9());
    let index = submit(&q, &packet::to_bytes(&pm4_ib(ib.va(), dwords, 0)));
    wait_for(TIMEOUT, "the read index past a PM4_IB without a signal", || (q.read_index() > index).then_some(()));
    assert_eq!(rig.status(q.id).error, None);
}

#[test]
fn a_wait_in_the_ib_holds_the_queue_and_the_ib_resumes_where_it_waited() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
    let ib = rig.alloc(4096, Kind::Gtt);
    let out = rig.alloc(4096, Kind::Gtt);
    let mut program = write_data(out.addr(0), 1);
    program.extend(wait_equal(out.addr(8), 7));
    program.extend(write_data(out.addr(4), 2));
    let dwords = put(&ib, &program);
    s.value(0).store(1, Ordering::Release);
    s.value(1).store(1, Ordering::Release);
    submit(&q, &packet::to_bytes(&pm4_ib(ib.va(), dwords, s.handle(0))));
    submit(&q, &packet::barrier_and([0; 5], s.handle(1), false));
    wait_for(TIMEOUT, "the WRITE_DATA before the wait", || (word(&out, 0) == 1).then_some(()));
    // Cleared: a rerun of the IB from its start would write it again.
    out.u32_at(0).store(0, Ordering::Release);
    stays(QUIET, "the packets after the wait stay unrun", || {
        word(&out, 1) == 0 && s.value(0).load(Ordering::Acquire) == 1 && s.value(1).load(Ordering::Acquire) == 1
    });
    assert_eq!(q.read_index(), 0);
    out.u32_at(8).store(7, Ordering::Release);
    if let Err(v) = s.wait(1, TIMEOUT, |v| v == 0) {
        panic!("the barrier behind the PM4_IB: signal {v}; queue status {:?}", rig.status(q.id));
    }
    assert_eq!(s.value(0).load(Ordering::Acquire), 0);
    assert_eq!((word(&out, 0), word(&out, 1)), (0, 2), "the IB went on after its wait, not from its start");
    assert_eq!(rig.status(q.id).error, None);
}

/// Submits `p` to a fresh queue with an inactive signal, a completion signal at 1 and a barrier
/// behind it; returns the queue error, after checking that nothing completed and that ROCr's
/// queue_inactive_signal received the error code.
fn refused(rig: &Rig, what: &str, mut p: AmdAqlPm4IbPacket) -> String {
    let s = Signals::new(&rig.kfd, rig.gpu, 3).unwrap();
    let (done, after, inactive) = (0, 1, 2);
    let q = rig.queue(64);
    q.set_inactive_signal(s.handle(inactive));
    s.value(done).store(1, Ordering::Release);
    s.value(after).store(1, Ordering::Release);
    p.completion_signal = s.handle(done);
    submit(&q, &packet::to_bytes(&p));
    submit(&q, &packet::barrier_and([0; 5], s.handle(after), false));
    let err = rig.wait_error(q.id).error.unwrap();
    assert_eq!((err.code, err.fault_va), (ERROR_INVALID_PACKET_FORMAT, None), "{what}: {}", err.reason);
    assert_eq!(s.value(inactive).load(Ordering::Acquire), ERROR_INVALID_PACKET_FORMAT as i64, "{what}");
    assert_eq!(s.value(done).load(Ordering::Acquire), 1, "{what}: completion signal touched");
    keeps_value(&s, after, 1, what);
    assert_eq!(q.read_index(), 0, "{what}: the bad packet was consumed");
    err.reason
}

fn keeps_value(s: &Signals, i: u64, v: i64, what: &str) {
    stays(QUIET, &format!("{what}: the packet behind ran"), || s.value(i).load(Ordering::Acquire) == v);
}

#[test]
fn every_field_of_a_pm4_ib_packet_is_checked() {
    let rig = Rig::new();
    let ib = rig.alloc(4096, Kind::Gtt);
    let dwords = put(&ib, &acquire_mem_gfx9());
    let good = pm4_ib(ib.va(), dwords, 0);
    let with = |f: &dyn Fn(&mut AmdAqlPm4IbPacket)| {
        let mut p = good;
        f(&mut p);
        p
    };
    // (what, packet, words the reason must contain)
    let cases: Vec<(&str, AmdAqlPm4IbPacket, Vec<String>)> = vec![
        ("unmapped IB", pm4_ib(0x1000, dwords, 0), vec!["at 0x1000 is not readable".into(), "no mapping".into()]),
        (
            "IB running past its mapping",
            pm4_ib(ib.va(), 0xF_FFFF, 0),
            vec![format!("1048575 dwords at {:#x} is not readable", ib.va())],
        ),
        ("IB_SIZE 0", pm4_ib(ib.va(), 0, 0), vec!["IB_SIZE 0".into()]),
        ("no IB_VALID", with(&|p| p.ib_jump_cmd[3] &= !(1 << 23)), vec!["IB_VALID".into()]),
        ("chained", with(&|p| p.ib_jump_cmd[3] |= 1 << 20), vec!["0x00100000".into()]),
        ("misaligned", with(&|p| p.ib_jump_cmd[1] |= 2), vec!["not dword aligned".into()]),
        ("IB_BASE_HI of 17 bits", with(&|p| p.ib_jump_cmd[2] |= 1 << 16), vec!["wider than 16 bits".into()]),
        ("a NOP, not an IB", with(&|p| p.ib_jump_cmd[0] = pm4(0x10, 3)), vec!["not a 4-dword INDIRECT_BUFFER".into()]),
        ("IB of 5 dwords", with(&|p| p.ib_jump_cmd[0] += 1 << 16), vec!["not a 4-dword INDIRECT_BUFFER".into()]),
        ("dw_cnt_remain 9", with(&|p| p.dw_cnt_remain = 9), vec!["dw_cnt_remain is 9".into()]),
        ("reserved dword", with(&|p| p.reserved[5] = 1), vec!["reserved dword 5".into()]),
        ("vendor header byte", with(&|p| p.header.reserved = 1), vec!["vendor header byte 3".into()]),
    ];
    for (what, p, want) in cases {
        let reason = refused(&rig, what, p);
        assert!(reason.starts_with("PM4_IB packet: "), "{what}: {reason}");
        for w in want {
            assert!(reason.contains(&w), "{what}: {reason:?} does not say {w:?}");
        }
    }
}

#[test]
fn an_unsupported_opcode_in_the_ib_is_a_queue_error_naming_it() {
    let rig = Rig::new();
    let ib = rig.alloc(4096, Kind::Gtt);
    let out = rig.alloc(4096, Kind::Gtt);
    // A user-config register write (amdgpu's SET_UCONFIG_REG of GRBM_GFX_INDEX, say).
    let mut program = write_data(out.addr(0), 5);
    program.extend([pm4(0x79, 2), 0x200, 0]);
    program.extend(write_data(out.addr(4), 6));
    let dwords = put(&ib, &program);
    let reason = refused(&rig, "SET_UCONFIG_REG in the IB", pm4_ib(ib.va(), dwords, 0));
    assert_eq!(
        reason,
        format!(
            "in the indirect buffer of a PM4_IB packet at {:#x}: PM4 opcode 0x79 SET_UCONFIG_REG is not supported by this device",
            ib.va()
        )
    );
    assert_eq!((word(&out, 0), word(&out, 1)), (5, 0), "the IB ran up to the refused packet, and no further");

    let unknown = [pm4(0xEE, 1), 0];
    let dwords = put(&ib, &unknown);
    let reason = refused(&rig, "opcode 0xEE", pm4_ib(ib.va(), dwords, 0));
    assert!(reason.ends_with(&format!("unknown PM4 opcode 0xee (header {:#010x})", unknown[0])), "{reason}");
}

#[test]
fn a_dispatch_of_gfx_code_stops_at_an_instruction_the_shader_core_lacks_and_names_it() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let object = rig.gfx_kernel();
    submit(&q, &packet::dispatch(object, rig.args(&[0u64; 2]), [64, 1, 1], [64, 1, 1], 0, false));
    let err = rig.wait_error(q.id).error.unwrap();
    assert_eq!(err.code, ERROR_ILLEGAL_INSTRUCTION);
    let entry = object + 2048;
    assert_eq!(
        err.reason,
        format!(
            "kernel object at {object:#x} (entry {entry:#x}), workgroup [0, 0, 0]: `s_sendmsg sendmsg(MSG_GS_DONE, \
             GS_OP_NOP)` (SOPP) at pc {entry:#x} is not implemented by the shader core (message id 3)"
        )
    );
}
