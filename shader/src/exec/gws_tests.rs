//! ds_gws_*: refused without GWS, and semaphores and barriers across workgroups that take turns
//! on one thread in small slices, so that a wave that does not wait where it must is caught.

use super::super::memtest::run;
use super::super::{Apertures, Code, Fault};
use crate::group::{Progress, Workgroup};
use crate::gws::Gws;
use crate::isa::Target;
use crate::testing::{self, DATA};
use std::sync::Arc;

#[test]
fn gws_instructions_need_a_queue_that_holds_gws() {
    for src in ["ds_gws_init v2 offset:16 gds", "ds_gws_barrier v2 gds", "ds_gws_sema_v gds", "ds_gws_sema_p gds"] {
        let Some(r) = run(src, Apertures::default(), |_, _, _| {}) else {
            return;
        };
        let f = r.fault.expect("a fault");
        assert!(matches!(&f, Fault::Invalid { why, inst, .. } if why.contains("holds no GWS") && inst == src), "{f}");
    }
    let Some(r) = run("ds_gws_sema_release_all gds", Apertures::default(), |_, _, _| {}) else {
        return;
    };
    let f = r.fault.expect("a fault");
    assert!(matches!(&f, Fault::Unimplemented { what, .. } if what.contains("release_all")), "{f}");
}

/// `groups` one-wave workgroups of `src`, wave `i` with s2 = i, s[0:1] = [`DATA`], all on one
/// `gws`, run in turns of `slice` instructions until every one has ended.
fn run_groups(src: &str, groups: u32, gws: &Arc<Gws>, slice: u64) -> Option<crate::mem::Ram> {
    let code = testing::assemble(src)?;
    let mut ram = testing::ram(&code);
    let mut all: Vec<Workgroup> = (0..groups)
        .map(|i| {
            let mut w = testing::wave();
            w.set_sreg64(0, DATA);
            w.s[2] = i;
            Workgroup::new(vec![w], 0).with_gws(Some(gws.clone()))
        })
        .collect();
    let mut code = Code::new(Target::Gfx90a);
    let mut interrupts = Vec::new();
    for _ in 0..100_000 {
        let mut left = 0;
        for g in &mut all {
            if g.waves[0].done {
                continue;
            }
            if g.run(&mut code, &mut ram, Apertures::default(), slice, &mut interrupts).expect("no fault")
                == Progress::Paused
            {
                left += 1;
            }
        }
        if left == 0 {
            return Some(ram);
        }
    }
    panic!("the workgroups did not finish");
}

fn dword(ram: &crate::mem::Ram, at: u64) -> u32 {
    let i = (at - testing::CODE) as usize;
    u32::from_le_bytes(ram.bytes[i..i + 4].try_into().unwrap())
}

#[test]
fn a_gws_semaphore_makes_a_read_modify_write_of_many_workgroups_atomic() {
    // The kfdtest KFDGWSTest shape: take the semaphore, add one to a dword with scalar loads
    // and stores (not atomic), give it back; 2-instruction slices interleave the groups.
    let src = "
        s_mov_b32 m0, 0
        ds_gws_sema_p offset:0 gds
        s_load_dword s4, s[0:1], 0x0 glc
        s_waitcnt lgkmcnt(0)
        s_add_u32 s4, s4, 1
        s_store_dword s4, s[0:1], 0x0 glc
        s_waitcnt lgkmcnt(0)
        ds_gws_sema_v offset:0 gds
        s_endpgm
    ";
    let gws = Arc::new(Gws::default());
    gws.init(0, 1);
    let Some(ram) = run_groups(src, 16, &gws, 2) else {
        return;
    };
    assert_eq!(dword(&ram, DATA), 16, "every increment kept");
    // Without the semaphore the same interleaving loses increments (the test can fail).
    let racy = src.replace("ds_gws_sema_p offset:0 gds", "s_nop 0").replace("ds_gws_sema_v offset:0 gds", "s_nop 0");
    let ram = run_groups(&racy, 16, &gws, 2).expect("assembled once already");
    assert!(dword(&ram, DATA) < 16, "the interleaving races without the semaphore");
}

#[test]
fn ds_gws_init_sets_the_count_a_semaphore_lets_through() {
    // Resource 5 through M0[21:16] = 4 and offset 1; three workgroups, two may pass at once:
    // the first sets the count, each counts itself in (atomically), stays a few turns, and
    // counts itself out; the most seen inside is the count init gave (3 if the semaphore let
    // all pass).
    let src = "
        s_mov_b32 m0, 0x40000
        v_mov_b32 v0, 2
        s_cmp_eq_u32 s2, 0
        s_cbranch_scc0 wait
        ds_gws_init v0 offset:1 gds
        s_branch go
    wait:
        s_sleep 1
    go:
        ds_gws_sema_p offset:1 gds
        s_mov_b64 exec, 1
        v_mov_b32 v2, 1
        v_mov_b32 v4, s0
        v_mov_b32 v5, s1
        global_atomic_add v1, v[4:5], v2, off glc
        s_waitcnt vmcnt(0)
        v_add_u32 v3, v1, 1
        global_atomic_umax v[4:5], v3, off offset:4
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
        global_atomic_sub v[4:5], v2, off
        s_waitcnt vmcnt(0)
        ds_gws_sema_v offset:1 gds
        s_endpgm
    ";
    let gws = Arc::new(Gws::default());
    let Some(ram) = run_groups(src, 3, &gws, 2) else {
        return;
    };
    assert_eq!((dword(&ram, DATA), dword(&ram, DATA + 4)), (0, 2), "(inside at the end, most inside at once)");
}

#[test]
fn a_gws_barrier_holds_every_workgroup_until_the_last_arrives() {
    // Each group stores 1 in its slot (all but the first a few turns late), meets the others at
    // the barrier (v0 = groups - 1), then copies its neighbour's slot to its result: a group
    // past the barrier early copies a 0.
    let src = "
        s_mov_b32 m0, 0
        v_mov_b32 v0, 7
        s_lshl_b32 s3, s2, 2
        s_mov_b32 s4, 1
        s_cmp_eq_u32 s2, 0
        s_cbranch_scc1 store
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
        s_sleep 1
    store:
        s_store_dword s4, s[0:1], s3 glc
        s_waitcnt lgkmcnt(0)
        ds_gws_barrier v0 offset:0 gds
        s_add_u32 s5, s2, 1
        s_and_b32 s5, s5, 7
        s_lshl_b32 s5, s5, 2
        s_load_dword s6, s[0:1], s5 glc
        s_waitcnt lgkmcnt(0)
        s_add_u32 s3, s3, 0x40
        s_store_dword s6, s[0:1], s3 glc
        s_waitcnt lgkmcnt(0)
        ds_gws_barrier v0 offset:0 gds
        s_endpgm
    ";
    let gws = Arc::new(Gws::default());
    let Some(ram) = run_groups(src, 8, &gws, 3) else {
        return;
    };
    let copied: Vec<u32> = (0..8).map(|i| dword(&ram, DATA + 0x40 + 4 * i)).collect();
    assert_eq!(copied, [1; 8], "each group saw its neighbour's store");
    // The barrier is used twice: its second round let everyone go too.
    let racy = src.replace("ds_gws_barrier v0 offset:0 gds", "s_nop 0");
    let ram = run_groups(&racy, 8, &Arc::new(Gws::default()), 3).expect("assembled once already");
    assert!((0..8).any(|i| dword(&ram, DATA + 0x40 + 4 * i) == 0), "without the barrier a group copies early");
}
