//! FLAT, GLOBAL and SCRATCH: every width, d16 halves, misaligned accesses, EXEC masking,
//! atomics with and without glc, aperture routing, flat scratch interleave and faults.

use super::super::memtest::{bytes_at, put, run, run_ok, set_addr64, STORED, STORE_DATA};
use super::super::{Apertures, Fault};
use crate::testing::DATA;
use crate::wave::{FLAT_SCRATCH, LANES};

/// Memory at DATA: byte i = 0x80 + i (so bytes have their sign bit set), 64 lanes x 16 bytes.
fn pattern(ram: &mut crate::mem::Ram) {
    let p: Vec<u8> = (0..LANES * 16 + 16).map(|i| 0x80u8.wrapping_add(i as u8)).collect();
    put(ram, DATA, &p);
}

fn le(b: &[u8]) -> u32 {
    let mut x = [0u8; 4];
    x[..b.len()].copy_from_slice(b);
    u32::from_le_bytes(x)
}

#[test]
fn global_loads_of_every_width_extend_as_named() {
    // (instruction, destination registers, expected value of register k from the lane's bytes)
    type Expect = fn(&[u8], usize) -> u32;
    let cases: [(&str, usize, Expect); 8] = [
        ("global_load_ubyte v4, v[2:3], off", 1, |b, _| u32::from(b[0])),
        ("global_load_sbyte v4, v[2:3], off", 1, |b, _| b[0] as i8 as i32 as u32),
        ("global_load_ushort v4, v[2:3], off", 1, |b, _| le(&b[..2])),
        ("global_load_sshort v4, v[2:3], off", 1, |b, _| le(&b[..2]) as u16 as i16 as i32 as u32),
        ("global_load_dword v4, v[2:3], off", 1, |b, k| le(&b[4 * k..4 * k + 4])),
        ("global_load_dwordx2 v[4:5], v[2:3], off", 2, |b, k| le(&b[4 * k..4 * k + 4])),
        ("global_load_dwordx3 v[4:6], v[2:3], off", 3, |b, k| le(&b[4 * k..4 * k + 4])),
        ("global_load_dwordx4 v[4:7], v[2:3], off", 4, |b, k| le(&b[4 * k..4 * k + 4])),
    ];
    for (src, n, expect) in cases {
        let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
            pattern(ram);
            set_addr64(w, 2, |l| DATA + 16 * l as u64);
            for k in 4..8 {
                w.v[k] = [0xdead_beef; LANES];
            }
        }) else {
            return;
        };
        for l in [0, 1, 37, 63] {
            let b = bytes_at(&r.ram, DATA + 16 * l as u64, 16);
            for k in 0..4 {
                let want = if k < n { expect(&b, k) } else { 0xdead_beef };
                assert_eq!(r.wave.v[4 + k][l], want, "{src}: lane {l} v{}", 4 + k);
            }
        }
    }
}

/// v4 of a lane after `src` loads from DATA = 81 82 83 84 into v4 = 0x1234_5678 (`None` without
/// llvm-mc-15).
fn d16_load(src: &str, ap: Apertures) -> Option<u32> {
    let r = run_ok(src, ap, |w, ram, _| {
        put(ram, DATA, &[0x81, 0x82, 0x83, 0x84]);
        set_addr64(w, 2, |_| DATA);
        w.v[4] = [0x1234_5678; LANES];
    })?;
    Some(r.wave.v[4][5])
}

#[test]
fn d16_loads_write_one_half_and_keep_the_other() {
    let cases = [
        ("global_load_ubyte_d16 v4, v[2:3], off", 0x1234_0081u32),
        ("global_load_ubyte_d16_hi v4, v[2:3], off", 0x0081_5678),
        ("global_load_sbyte_d16 v4, v[2:3], off", 0x1234_ff81),
        ("global_load_sbyte_d16_hi v4, v[2:3], off", 0xff81_5678),
        ("global_load_short_d16 v4, v[2:3], off", 0x1234_8281),
        ("global_load_short_d16_hi v4, v[2:3], off", 0x8281_5678),
    ];
    for (src, want) in cases {
        let Some(v4) = d16_load(src, Apertures::default()) else {
            return;
        };
        assert_eq!(v4, want, "{src}: {v4:#x}");
    }
}

#[test]
fn under_sram_ecc_d16_loads_zero_the_other_half() {
    let cases = [
        ("global_load_ubyte_d16 v4, v[2:3], off", 0x0000_0081u32),
        ("global_load_sbyte_d16_hi v4, v[2:3], off", 0xff81_0000),
        ("global_load_short_d16_hi v4, v[2:3], off", 0x8281_0000),
    ];
    let ecc = Apertures { sramecc: true, ..Apertures::default() };
    for (src, want) in cases {
        let Some(v4) = d16_load(src, ecc) else {
            return;
        };
        assert_eq!(v4, want, "{src}: {v4:#x}");
    }
}

#[test]
fn stores_of_every_width_write_only_their_bytes() {
    let stores = [
        "global_store_byte v[2:3], v4, off",
        "global_store_byte_d16_hi v[2:3], v4, off",
        "global_store_short v[2:3], v4, off",
        "global_store_short_d16_hi v[2:3], v4, off",
        "global_store_dword v[2:3], v4, off",
        "global_store_dwordx2 v[2:3], v[4:5], off",
        "global_store_dwordx3 v[2:3], v[4:6], off",
        "global_store_dwordx4 v[2:3], v[4:7], off",
    ];
    for (src, want) in stores.into_iter().zip(STORED) {
        let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
            put(ram, DATA, &[0x5a; 24]);
            w.set_exec(1);
            set_addr64(w, 2, |_| DATA + 2);
            for (k, d) in STORE_DATA.into_iter().enumerate() {
                w.v[4 + k][0] = d;
            }
        }) else {
            return;
        };
        let got = bytes_at(&r.ram, DATA, 24);
        let mut expect = vec![0x5a; 24];
        expect[2..2 + want.len()].copy_from_slice(want);
        assert_eq!(got, expect, "{src}");
    }
}

#[test]
fn misaligned_dword_accesses_move_the_bytes_at_the_address() {
    let src = "
        global_load_dwordx2 v[4:5], v[2:3], off offset:3
        global_store_dword v[2:3], v4, off offset:65
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
        pattern(ram);
        w.set_exec(1);
        set_addr64(w, 2, |_| DATA);
    }) else {
        return;
    };
    assert_eq!(r.wave.v[4][0], 0x8685_8483);
    assert_eq!(r.wave.v[5][0], 0x8a89_8887);
    assert_eq!(bytes_at(&r.ram, DATA + 65, 4), [0x83, 0x84, 0x85, 0x86]);
}

#[test]
fn exec_masked_lanes_keep_their_registers_and_memory() {
    let src = "
        global_load_dword v4, v[2:3], off
        global_store_dword v[2:3], v5, off offset:2048
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
        pattern(ram);
        w.set_exec(0x8000_0000_0000_0005);
        set_addr64(w, 2, |l| DATA + 4 * l as u64);
        w.v[4] = [7; LANES];
        w.v[5] = [9; LANES];
    }) else {
        return;
    };
    for l in 0..LANES {
        let on = [0, 2, 63].contains(&l);
        let want = if on { r.ram.u32_at(DATA + 4 * l as u64) } else { 7 };
        assert_eq!(r.wave.v[4][l], want, "lane {l}");
        assert_eq!(r.ram.u32_at(DATA + 2048 + 4 * l as u64), if on { 9 } else { 0 }, "lane {l}");
    }
}

#[test]
fn global_saddr_adds_the_32_bit_offset_and_the_signed_immediate() {
    let src = "global_load_dword v4, v1, s[2:3] offset:-4";
    let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
        pattern(ram);
        w.set_sreg64(2, DATA);
        for l in 0..LANES {
            w.v[1][l] = 8 * l as u32 + 4;
        }
    }) else {
        return;
    };
    for l in 0..LANES {
        assert_eq!(r.wave.v[4][l], r.ram.u32_at(DATA + 8 * l as u64), "lane {l}");
    }
}

/// Runs one 32-bit atomic on a dword holding `old` with operand registers `data` (v4, v5) and
/// returns (the memory after, v0 after: the old value with glc, untouched without).
fn atomic32(src: &str, old: u32, data: [u32; 2]) -> Option<(u32, u32)> {
    let r = run_ok(src, Apertures::default(), |w, ram, _| {
        ram.set_u32(DATA, old);
        w.set_exec(1);
        set_addr64(w, 2, |_| DATA);
        w.v[0][0] = 0x5555_5555;
        w.v[4][0] = data[0];
        w.v[5][0] = data[1];
    })?;
    Some((r.ram.u32_at(DATA), r.wave.v[0][0]))
}

#[test]
fn atomics_apply_their_operation_and_return_the_old_value_only_with_glc() {
    let one_f32 = 1.0f32.to_bits();
    // (mnemonic, old, data, new)
    let cases: [(&str, u32, [u32; 2], u32); 16] = [
        ("global_atomic_swap", 1, [2, 0], 2),
        ("global_atomic_add", 0xffff_ffff, [2, 0], 1),
        ("global_atomic_sub", 1, [2, 0], 0xffff_ffff),
        ("global_atomic_smin", 5, [(-3i32) as u32, 0], (-3i32) as u32),
        ("global_atomic_umin", 5, [(-3i32) as u32, 0], 5),
        ("global_atomic_smax", 5, [(-3i32) as u32, 0], 5),
        ("global_atomic_umax", 5, [(-3i32) as u32, 0], (-3i32) as u32),
        ("global_atomic_and", 0b1100, [0b1010, 0], 0b1000),
        ("global_atomic_or", 0b1100, [0b1010, 0], 0b1110),
        ("global_atomic_xor", 0b1100, [0b1010, 0], 0b0110),
        ("global_atomic_inc", 7, [7, 0], 0),
        ("global_atomic_inc", 6, [7, 0], 7),
        ("global_atomic_dec", 0, [7, 0], 7),
        ("global_atomic_dec", 3, [7, 0], 2),
        ("global_atomic_add_f32", one_f32, [2.5f32.to_bits(), 0], 3.5f32.to_bits()),
        // 1.0 + 2.0 = 3.0 (0x4200), 0.5 + 0.25 = 0.75 (0x3a00)
        ("global_atomic_pk_add_f16", 0x3800_3c00, [0x3400_4000, 0], 0x3a00_4200),
    ];
    for (m, old, data, new) in cases {
        let Some((mem, v0)) = atomic32(&format!("{m} v[2:3], v4, off"), old, data) else {
            return;
        };
        assert_eq!((mem, v0), (new, 0x5555_5555), "{m} without glc");
        let Some((mem, v0)) = atomic32(&format!("{m} v0, v[2:3], v4, off glc"), old, data) else {
            return;
        };
        assert_eq!((mem, v0), (new, old), "{m} glc");
    }
}

#[test]
fn cmpswap_data_is_the_new_value_then_the_compare_value() {
    // Equal to the compare value (v5): stores v4.
    let Some((mem, v0)) = atomic32("global_atomic_cmpswap v0, v[2:3], v[4:5], off glc", 10, [99, 10]) else {
        return;
    };
    assert_eq!((mem, v0), (99, 10));
    // Different: memory keeps its value, the old value comes back.
    let Some((mem, v0)) = atomic32("global_atomic_cmpswap v0, v[2:3], v[4:5], off glc", 11, [99, 10]) else {
        return;
    };
    assert_eq!((mem, v0), (11, 11));
}

#[test]
fn sixty_four_bit_atomics_use_register_pairs() {
    let f = |x: f64| x.to_bits();
    // (instruction, old, data v[4:7], new)
    let cases: [(&str, u64, [u64; 2], u64); 10] = [
        ("global_atomic_add_x2 v[0:1], v[2:3], v[4:5], off glc", 0xffff_ffff, [1, 0], 0x1_0000_0000),
        // Signed and counting at 64 bits: the high word decides.
        ("global_atomic_smin_x2 v[0:1], v[2:3], v[4:5], off glc", 1 << 40, [u64::MAX, 0], u64::MAX),
        ("global_atomic_smax_x2 v[0:1], v[2:3], v[4:5], off glc", 1 << 63, [1 << 32, 0], 1 << 32),
        ("global_atomic_inc_x2 v[0:1], v[2:3], v[4:5], off glc", 1 << 40, [1 << 41, 0], (1 << 40) + 1),
        ("global_atomic_dec_x2 v[0:1], v[2:3], v[4:5], off glc", 1 << 40, [1 << 41, 0], (1 << 40) - 1),
        ("global_atomic_cmpswap_x2 v[0:1], v[2:3], v[4:7], off glc", 1 << 40, [5, 1 << 40], 5),
        ("global_atomic_cmpswap_x2 v[0:1], v[2:3], v[4:7], off glc", 1 << 41, [5, 1 << 40], 1 << 41),
        ("global_atomic_add_f64 v[0:1], v[2:3], v[4:5], off glc", f(1.5), [f(2.25), 0], f(3.75)),
        ("global_atomic_min_f64 v[0:1], v[2:3], v[4:5], off glc", f(1.5), [f(-2.0), 0], f(-2.0)),
        ("global_atomic_max_f64 v[0:1], v[2:3], v[4:5], off glc", f(1.5), [f(f64::NAN), 0], f(1.5)),
    ];
    for (src, old, data, new) in cases {
        let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
            put(ram, DATA, &old.to_le_bytes());
            w.set_exec(1);
            set_addr64(w, 2, |_| DATA);
            for (k, d) in data.iter().enumerate() {
                w.v[4 + 2 * k][0] = *d as u32;
                w.v[5 + 2 * k][0] = (*d >> 32) as u32;
            }
        }) else {
            return;
        };
        let mem = u64::from_le_bytes(bytes_at(&r.ram, DATA, 8).try_into().unwrap());
        let ret = u64::from(r.wave.v[0][0]) | u64::from(r.wave.v[1][0]) << 32;
        assert_eq!((mem, ret), (new, old), "{src}");
    }
}

#[test]
fn every_lane_of_an_atomic_applies_in_turn() {
    // 64 lanes add 1 to one counter; with glc each sees a distinct old value.
    let src = "global_atomic_add v0, v[2:3], v4, off glc";
    let Some(r) = run_ok(src, Apertures::default(), |w, _, _| {
        set_addr64(w, 2, |_| DATA);
        w.v[4] = [1; LANES];
    }) else {
        return;
    };
    assert_eq!(r.ram.u32_at(DATA), 64);
    let mut olds: Vec<u32> = r.wave.v[0].to_vec();
    olds.sort_unstable();
    assert_eq!(olds, (0..64).collect::<Vec<u32>>());
}

/// Apertures with LDS at 0x1000_0000_0000_0000 and private at 0x2000_0000_0000_0000 (4 GiB
/// each), where global test memory is not.
fn apertures() -> Apertures {
    Apertures {
        shared_base: 0x1000_0000_0000_0000,
        shared_limit: 0x1000_0000_ffff_ffff,
        private_base: 0x2000_0000_0000_0000,
        private_limit: 0x2000_0000_ffff_ffff,
        sramecc: false,
    }
}

#[test]
fn flat_addresses_route_to_lds_private_or_global() {
    // Lane 0: LDS offset 0x40; lane 1: private offset 8; lane 2: global.
    let scratch = DATA + 0x1_0000;
    let src = "
        flat_load_dword v4, v[2:3]
        flat_store_dword v[2:3], v5 offset:4
    ";
    let Some(r) = run_ok(src, apertures(), |w, ram, lds| {
        w.set_exec(0b111);
        w.set_sreg64(FLAT_SCRATCH, scratch);
        w.v[2][0] = 0x40;
        w.v[3][0] = 0x1000_0000;
        w.v[2][1] = 8;
        w.v[3][1] = 0x2000_0000;
        w.v[2][2] = DATA as u32;
        w.v[3][2] = (DATA >> 32) as u32;
        lds[0x40..0x44].copy_from_slice(&0x1111_1111u32.to_le_bytes());
        // Private offset 8 of lane 1: dword 2 of the interleave, lane 1's slot.
        ram.set_u32(scratch + 2 * 64 * 4 + 4, 0x2222_2222);
        ram.set_u32(DATA, 0x3333_3333);
        w.v[5] = [0xabcd; LANES];
    }) else {
        return;
    };
    assert_eq!(&r.wave.v[4][..3], &[0x1111_1111, 0x2222_2222, 0x3333_3333]);
    assert_eq!(&r.lds[0x44..0x48], &0xabcdu32.to_le_bytes());
    assert_eq!(r.ram.u32_at(scratch + 3 * 64 * 4 + 4), 0xabcd);
    assert_eq!(r.ram.u32_at(DATA + 4), 0xabcd);
}

#[test]
fn flat_lds_accesses_past_the_end_read_zero_and_drop_writes() {
    let src = "
        flat_load_dword v4, v[2:3]
        flat_store_dword v[2:3], v5
        flat_atomic_add v6, v[2:3], v5 glc
    ";
    let Some(r) = run_ok(src, apertures(), |w, _, _| {
        w.set_exec(1);
        w.v[2][0] = 65536; // the LDS is 64 KiB
        w.v[3][0] = 0x1000_0000;
        w.v[4][0] = 7;
        w.v[5][0] = 1;
        w.v[6][0] = 7;
    }) else {
        return;
    };
    assert_eq!((r.wave.v[4][0], r.wave.v[6][0]), (0, 0));
}

#[test]
fn flat_atomics_on_lds_apply_there() {
    let src = "flat_atomic_cmpswap v0, v[2:3], v[4:5] glc";
    let Some(r) = run_ok(src, apertures(), |w, _, lds| {
        w.set_exec(1);
        w.v[2][0] = 0x100;
        w.v[3][0] = 0x1000_0000;
        w.v[4][0] = 42;
        w.v[5][0] = 5;
        lds[0x100] = 5;
    }) else {
        return;
    };
    assert_eq!(r.wave.v[0][0], 5);
    assert_eq!(r.lds[0x100], 42);
}

#[test]
fn scratch_instructions_address_the_interleaved_private_segment() {
    // Each lane stores its id at private offset 12 (sgpr form) and reads back through a VGPR
    // offset; dwordx2 spans two interleave rows.
    let scratch = DATA + 0x2_0000;
    let src = "
        s_mov_b32 s4, 8
        scratch_store_dwordx2 off, v[6:7], s4 offset:4
        scratch_load_dword v8, v1, off offset:-4
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, _, _| {
        w.set_sreg64(FLAT_SCRATCH, scratch);
        for l in 0..LANES {
            w.v[6][l] = 100 + l as u32;
            w.v[7][l] = 200 + l as u32;
            w.v[1][l] = 20;
        }
    }) else {
        return;
    };
    for l in 0..LANES {
        let row = |pa: u64| scratch + (pa / 4) * 256 + 4 * l as u64;
        assert_eq!(r.ram.u32_at(row(12)), 100 + l as u32, "lane {l}");
        assert_eq!(r.ram.u32_at(row(16)), 200 + l as u32, "lane {l}");
        assert_eq!(r.wave.v[8][l], 200 + l as u32, "lane {l}");
    }
}

#[test]
fn a_misaligned_private_dword_spans_two_interleave_rows() {
    let scratch = DATA + 0x2_0000;
    let Some(r) = run_ok("scratch_store_dword v1, v6, off offset:2", Apertures::default(), |w, _, _| {
        w.set_exec(0b10);
        w.set_sreg64(FLAT_SCRATCH, scratch);
        w.v[6][1] = 0x4433_2211;
        w.v[1][1] = 0;
    }) else {
        return;
    };
    // Private bytes 2..6 of lane 1: bytes 2, 3 of row 0 and bytes 0, 1 of row 1.
    assert_eq!(bytes_at(&r.ram, scratch + 4 + 2, 2), [0x11, 0x22]);
    assert_eq!(bytes_at(&r.ram, scratch + 256 + 4, 2), [0x33, 0x44]);
}

#[test]
fn a_load_from_unmapped_memory_faults_naming_the_instruction() {
    let Some(r) = run("global_load_dwordx2 v[4:5], v[2:3], off", Apertures::default(), |w, _, _| {
        w.set_exec(1);
        set_addr64(w, 2, |_| 0x40);
        w.v[4][0] = 3;
    }) else {
        return;
    };
    let f = r.fault.expect("a fault");
    let text = f.to_string();
    assert!(matches!(f, Fault::Memory { .. }), "{text}");
    assert!(text.contains("global_load_dwordx2"), "{text}");
    assert!(text.contains("0x40"), "{text}");
    assert_eq!(r.wave.v[4][0], 3, "a faulting load writes no register");
}

#[test]
fn an_atomic_in_the_private_aperture_is_refused() {
    let Some(r) = run("flat_atomic_add v[2:3], v4", apertures(), |w, _, _| {
        w.set_exec(1);
        w.v[3][0] = 0x2000_0000;
    }) else {
        return;
    };
    assert!(matches!(r.fault, Some(Fault::Unimplemented { .. })), "{:?}", r.fault);
}

#[test]
fn a_misaligned_global_atomic_faults() {
    let Some(r) = run("global_atomic_add v[2:3], v4, off offset:2", Apertures::default(), |w, _, _| {
        w.set_exec(1);
        set_addr64(w, 2, |_| DATA);
    }) else {
        return;
    };
    let f = r.fault.expect("a fault");
    assert!(matches!(&f, Fault::Memory { fault, .. } if fault.va == DATA + 2), "{f}");
    assert_eq!(r.ram.u32_at(DATA), 0);
}
