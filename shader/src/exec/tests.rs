//! Tests of the execution skeleton: control flow, faults, the workgroup barrier.

use crate::testing::{run, run_fault, DATA};
use crate::wave::LANES;

#[test]
fn a_store_of_every_lane_lands_at_its_address() {
    let src = "
        v_mov_b32 v1, 7
        v_add_u32 v1, v1, v0
        global_store_dword v[2:3], v1, off offset:4
    ";
    let Some((_, ram)) = run(src, |w, _| {
        for l in 0..LANES {
            w.v[0][l] = l as u32;
            let a = DATA + 8 * l as u64;
            w.v[2][l] = a as u32;
            w.v[3][l] = (a >> 32) as u32;
        }
    }) else {
        return;
    };
    for l in 0..LANES {
        assert_eq!(ram.u32_at(DATA + 8 * l as u64 + 4), 7 + l as u32);
    }
}

#[test]
fn exec_masked_lanes_do_not_store() {
    let src = "global_store_dword v[2:3], v1, off";
    let Some((_, ram)) = run(src, |w, _| {
        w.set_exec(0b1010);
        for l in 0..4 {
            w.v[1][l] = 100 + l as u32;
            let a = DATA + 4 * l as u64;
            w.v[2][l] = a as u32;
            w.v[3][l] = (a >> 32) as u32;
        }
    }) else {
        return;
    };
    let got: Vec<u32> = (0..4).map(|l| ram.u32_at(DATA + 4 * l)).collect();
    assert_eq!(got, [0, 101, 0, 103]);
}

#[test]
fn branches_follow_scc_and_exec() {
    // s_cbranch_execz skips the store when EXEC is zero.
    let src = "
        s_cbranch_execz skip
        global_store_dword v[2:3], v1, off
    skip:
    ";
    let Some((_, ram)) = run(src, |w, _| {
        w.set_exec(0);
        w.v[1][0] = 5;
        w.v[2][0] = DATA as u32;
    }) else {
        return;
    };
    assert_eq!(ram.u32_at(DATA), 0);
}

#[test]
fn an_unimplemented_instruction_is_a_fault_naming_it() {
    // v_mfma needs a matrix core; the skeleton refuses it with its name and PC.
    let Some(f) = run_fault("s_nop 0\nv_mfma_f32_4x4x1f32 a[0:3], v0, v1, a[0:3]", |_, _| {}) else {
        return;
    };
    let text = f.to_string();
    assert!(text.contains("v_mfma_f32_4x4x1f32"), "{text}");
    assert!(text.contains("VOP3P"), "{text}");
    assert_eq!(f.pc(), crate::testing::CODE + 4, "{text}");
}

#[test]
fn a_store_to_unmapped_memory_is_a_memory_fault() {
    let Some(f) = run_fault("global_store_dword v[2:3], v1, off", |w, _| {
        w.v[2][0] = 0x10; // below the test memory
    }) else {
        return;
    };
    assert!(matches!(f, crate::exec::Fault::Memory { .. }), "{f}");
}
