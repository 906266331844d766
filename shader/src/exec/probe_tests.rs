//! A per-instruction cost probe, not a test of behaviour: small loops of one kind of
//! instruction on one wave64 against [`crate::mem::Ram`], timed (min of 7 runs):
//! `cargo test --release -p shader --lib probe -- --ignored --nocapture`. The machine is shared
//! and noisy, so for before/after comparisons count instructions instead: with
//! `PROBE_ONLY=<name>` one probe runs at 1/50 of its iterations, e.g. under `valgrind
//! --tool=callgrind --collect-atstart=no --toggle-collect='*run_wave_for*'`.

use crate::testing::{assemble, ram, run_wave, wave, DATA};
use crate::wave::LANES;
use std::time::Instant;

fn measure(name: &str, body: &str, iters: u32, per_iter: u32) {
    if std::env::var("PROBE_ONLY").is_ok_and(|o| o != name) {
        return;
    }
    let iters = if std::env::var("PROBE_ONLY").is_ok() { iters / 50 } else { iters };
    let src = format!("s_mov_b32 s8, {iters}\nloop:\n{body}\ns_sub_u32 s8, s8, 1\ns_cmp_lg_u32 s8, 0\ns_cbranch_scc1 loop\ns_endpgm\n");
    let Some(code) = assemble(&src) else { return };
    let mut best = f64::MAX;
    for _ in 0..7 {
        let mut w = wave();
        let mut r = ram(&code);
        for l in 0..LANES {
            let a = DATA + 4 * l as u64;
            w.v[2][l] = a as u32;
            w.v[3][l] = (a >> 32) as u32;
            w.v[4][l] = (a + 0x1000) as u32;
            w.v[5][l] = ((a + 0x1000) >> 32) as u32;
        }
        w.s[0] = 0x3f80_0000;
        // MODE as HIP kernels start on gfx90a (f32 and f64/f16 denormals kept, DX10_CLAMP, IEEE).
        w.mode = 0x3f0;
        let mut lds = vec![0u8; 1024];
        let t = Instant::now();
        run_wave(&mut w, &mut r, &mut lds).expect("runs");
        best = best.min(t.elapsed().as_secs_f64());
    }
    let n = f64::from(iters) * f64::from(per_iter + 3);
    eprintln!("PROBE {name}: {:.1} ns per instruction (min of 7)", best * 1e9 / n);
}

#[test]
#[ignore = "a cost probe"]
fn probe() {
    measure("fma", &"v_fma_f32 v1, v1, v6, v7\n".repeat(8), 20000, 8);
    measure("fmac_s", &"v_fmac_f32 v1, s0, v6\n".repeat(8), 20000, 8);
    measure("add_f32", &"v_add_f32 v1, v1, v6\n".repeat(8), 20000, 8);
    measure("mul_f32", &"v_mul_f32 v1, v1, v6\n".repeat(8), 20000, 8);
    measure("fmac", &"v_fmac_f32 v1, v6, v7\n".repeat(8), 20000, 8);
    measure("mac", &"v_mac_f32 v1, v6, v7\n".repeat(8), 20000, 8);
    measure("add_u32", &"v_add_u32 v1, v1, v6\n".repeat(8), 20000, 8);
    measure("add_co", "v_add_co_u32 v8, vcc, s0, v2\nv_addc_co_u32 v9, vcc, v3, v1, vcc\n", 50000, 2);
    measure("load", "global_load_dword v6, v[2:3], off\n", 50000, 1);
    measure("store", "global_store_dword v[4:5], v6, off\n", 50000, 1);
    measure("mov", "v_mov_b32 v7, s1\n", 50000, 1);
    measure("salu", "s_add_u32 s9, s9, 1\n", 50000, 1);
}
