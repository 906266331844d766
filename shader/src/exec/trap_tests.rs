//! Trap entry and return on gfx90a and gfx1030: s_trap enters the installed handler with the
//! state the process's handler is written for, s_rfe_b64 returns; without a handler s_trap is
//! the queue error it always was.

use super::Fault;
use crate::isa::Target;
use crate::mem::Ram;
use crate::testing::{assemble_for, run_fault_on, run_on, CODE, DATA};
use crate::wave::TrapHandler;

/// Where the tests put their handler (TBA), away from the kernel at CODE.
const TBA: u64 = CODE + 0x1000;

/// A handler that stores ttmp0, ttmp1 (the saved PC and trap id), STATUS.PRIV/TRAP_EN as it
/// reads them and the STATUS saved in ttmp12 at its TMA (ttmp14:15), then returns to the
/// instruction after the s_trap.
const HANDLER: &str = "
    v_mov_b32 v10, ttmp0
    v_mov_b32 v11, ttmp1
    v_mov_b32 v12, 0
    global_store_dwordx2 v12, v[10:11], ttmp[14:15]
    s_getreg_b32 ttmp2, hwreg(HW_REG_STATUS, 5, 2)
    v_mov_b32 v10, ttmp2
    v_mov_b32 v11, ttmp12
    global_store_dwordx2 v12, v[10:11], ttmp[14:15] offset:8
    s_add_u32 ttmp0, ttmp0, 4
    s_addc_u32 ttmp1, ttmp1, 0
    s_rfe_b64 ttmp[0:1]
";

/// Puts `HANDLER`, assembled for `target`, at [`TBA`]; `None` without llvm-mc-15.
fn handler(target: Target) -> Option<Vec<u8>> {
    assemble_for(target, HANDLER)
}

fn install(ram: &mut Ram, code: &[u8]) {
    let at = (TBA - CODE) as usize;
    ram.bytes[at..at + code.len()].copy_from_slice(code);
}

#[test]
fn s_trap_enters_the_handler_which_returns_after_it() {
    for target in [Target::Gfx90a, Target::Gfx1030, Target::Gfx1030W64] {
        let Some(h) = handler(target) else { return };
        // s_mov_b32 with an inline constant is 4 bytes: the s_trap is at CODE + 4.
        let src = "
            s_mov_b32 s0, 1
            s_trap 5
            s_mov_b32 s1, 2
            s_getreg_b32 s2, hwreg(HW_REG_STATUS, 5, 2)
        ";
        let Some((w, ram)) = run_on(target, src, |w, ram| {
            install(ram, &h);
            w.trap = Some(TrapHandler { tba: TBA, tma: DATA });
        }) else {
            return;
        };
        let saved_pc = u64::from(ram.u32_at(DATA)) | u64::from(ram.u32_at(DATA + 4) & 0xffff) << 32;
        assert_eq!(saved_pc, CODE + 4, "{target:?}: ttmp0/ttmp1 hold the s_trap's own PC");
        assert_eq!(ram.u32_at(DATA + 4) >> 16 & 0xff, 5, "{target:?}: the trap id in ttmp1[23:16]");
        assert_eq!(ram.u32_at(DATA + 8), 0b11, "{target:?}: PRIV and TRAP_EN in the handler");
        assert_eq!(ram.u32_at(DATA + 12) & 0x61, 0x40, "{target:?}: ttmp12 is the STATUS at the trap");
        assert_eq!((w.s[0], w.s[1]), (1, 2), "{target:?}: the kernel went on after the s_trap");
        assert_eq!(w.s[2], 0b10, "{target:?}: after s_rfe_b64, TRAP_EN without PRIV");
        assert!(!w.in_trap);
    }
}

#[test]
fn the_handler_is_entered_at_tba_as_given() {
    // amdkfd's first-level handler jumps to the second-level TBA with s_setpc_b64: no 256-byte
    // alignment applies to it.
    let Some(h) = handler(Target::Gfx90a) else { return };
    let Some((w, ram)) = run_on(Target::Gfx90a, "s_trap 2\ns_mov_b32 s1, 7", |w, ram| {
        let at = (TBA + 0x84 - CODE) as usize;
        ram.bytes[at..at + h.len()].copy_from_slice(&h);
        w.trap = Some(TrapHandler { tba: TBA + 0x84, tma: DATA });
    }) else {
        return;
    };
    assert_eq!((ram.u32_at(DATA), w.s[1]), (CODE as u32, 7));
}

#[test]
fn without_a_handler_s_trap_is_a_fault_naming_its_id_and_pc() {
    for target in [Target::Gfx90a, Target::Gfx1030] {
        let Some(f) = run_fault_on(target, "s_nop 0\ns_trap 2", |_, _| {}) else { return };
        assert_eq!(f, Fault::Trap { pc: CODE + 4, code: 2 }, "{target:?}");
        assert!(f.to_string().contains("no trap handler in the dispatch"), "{f}");
    }
}

#[test]
fn a_handler_at_unmapped_memory_is_a_memory_fault_at_its_entry() {
    let tba = 0x7_0000_0000;
    let Some(f) = run_fault_on(Target::Gfx90a, "s_trap 2", |w, _| {
        w.trap = Some(TrapHandler { tba, tma: 0 });
    }) else {
        return;
    };
    assert!(matches!(f, Fault::Memory { pc, .. } if pc == tba), "{f}");
}

#[test]
fn s_rfe_b64_outside_the_handler_and_s_trap_inside_it_are_invalid() {
    let Some(f) = run_fault_on(Target::Gfx90a, "s_rfe_b64 s[0:1]", |_, _| {}) else { return };
    assert!(matches!(f, Fault::Invalid { pc: CODE, .. }), "{f}");
    let Some(nested) = assemble_for(Target::Gfx90a, "s_trap 3") else { return };
    let Some(f) = run_fault_on(Target::Gfx90a, "s_trap 2", |w, ram| {
        install(ram, &nested);
        w.trap = Some(TrapHandler { tba: TBA, tma: 0 });
    }) else {
        return;
    };
    assert!(matches!(f, Fault::Invalid { pc: TBA, .. }), "{f}");
}
