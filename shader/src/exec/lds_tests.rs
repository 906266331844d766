//! DS: reads and writes of every width, read2/write2 (st64), atomics with and without return,
//! the cross-lane operations, append/consume, and out-of-range LDS addresses.

use super::super::memtest::{run, run_ok, STORED, STORE_DATA};
use super::super::{Apertures, Fault};
use crate::wave::{LANES, M0};

/// LDS byte i = 0x80 + i.
fn pattern(lds: &mut [u8]) {
    for (i, b) in lds.iter_mut().enumerate() {
        *b = 0x80u8.wrapping_add(i as u8);
    }
}

fn u32_at(lds: &[u8], a: usize) -> u32 {
    u32::from_le_bytes(lds[a..a + 4].try_into().unwrap())
}

fn u64_at(lds: &[u8], a: usize) -> u64 {
    u64::from_le_bytes(lds[a..a + 8].try_into().unwrap())
}

#[test]
fn reads_of_every_width_extend_as_named() {
    // Lane l reads at 16 * l + 3 (misaligned) with offset 5: bytes from 16 * l + 8.
    fn b(l: usize, i: usize) -> u8 {
        0x80u8.wrapping_add((16 * l + 8 + i) as u8)
    }
    fn dw(l: usize, k: usize) -> u32 {
        u32::from_le_bytes([b(l, 4 * k), b(l, 4 * k + 1), b(l, 4 * k + 2), b(l, 4 * k + 3)])
    }
    type Expect = Box<dyn Fn(usize, usize) -> u32>;
    let cases: Vec<(&str, usize, Expect)> = vec![
        ("ds_read_u8 v4, v1 offset:5", 1, Box::new(move |l, _| u32::from(b(l, 0)))),
        ("ds_read_i8 v4, v1 offset:5", 1, Box::new(move |l, _| b(l, 0) as i8 as i32 as u32)),
        ("ds_read_u16 v4, v1 offset:5", 1, Box::new(move |l, _| dw(l, 0) & 0xffff)),
        ("ds_read_i16 v4, v1 offset:5", 1, Box::new(move |l, _| dw(l, 0) as u16 as i16 as i32 as u32)),
        ("ds_read_b32 v4, v1 offset:5", 1, Box::new(dw)),
        ("ds_read_b64 v[4:5], v1 offset:5", 2, Box::new(dw)),
        ("ds_read_b96 v[4:6], v1 offset:5", 3, Box::new(dw)),
        ("ds_read_b128 v[4:7], v1 offset:5", 4, Box::new(dw)),
        ("ds_read_u8_d16 v4, v1 offset:5", 1, Box::new(move |l, _| 0x1234_0000 | u32::from(b(l, 0)))),
        ("ds_read_u8_d16_hi v4, v1 offset:5", 1, Box::new(move |l, _| 0x5678 | u32::from(b(l, 0)) << 16)),
        ("ds_read_i8_d16 v4, v1 offset:5", 1, Box::new(move |l, _| 0x1234_0000 | u32::from(b(l, 0) as i8 as u16))),
        ("ds_read_i8_d16_hi v4, v1 offset:5", 1, Box::new(move |l, _| 0x5678 | u32::from(b(l, 0) as i8 as u16) << 16)),
        ("ds_read_u16_d16 v4, v1 offset:5", 1, Box::new(move |l, _| 0x1234_0000 | dw(l, 0) & 0xffff)),
        ("ds_read_u16_d16_hi v4, v1 offset:5", 1, Box::new(move |l, _| 0x5678 | dw(l, 0) << 16)),
    ];
    for (src, n, expect) in cases {
        let Some(r) = run_ok(src, Apertures::default(), |w, _, lds| {
            pattern(lds);
            for l in 0..LANES {
                w.v[1][l] = 16 * l as u32 + 3;
            }
            for k in 4..8 {
                w.v[k] = [0x1234_5678; LANES];
            }
        }) else {
            return;
        };
        for l in [0, 9, 63] {
            for k in 0..4 {
                let want = if k < n { expect(l, k) } else { 0x1234_5678 };
                assert_eq!(r.wave.v[4 + k][l], want, "{src}: lane {l} v{}", 4 + k);
            }
        }
    }
}

#[test]
fn writes_of_every_width_write_only_their_bytes() {
    let writes = [
        "ds_write_b8 v1, v4 offset:2",
        "ds_write_b8_d16_hi v1, v4 offset:2",
        "ds_write_b16 v1, v4 offset:2",
        "ds_write_b16_d16_hi v1, v4 offset:2",
        "ds_write_b32 v1, v4 offset:2",
        "ds_write_b64 v1, v[4:5] offset:2",
        "ds_write_b96 v1, v[4:6] offset:2",
        "ds_write_b128 v1, v[4:7] offset:2",
    ];
    for (src, want) in writes.into_iter().zip(STORED) {
        let Some(r) = run_ok(src, Apertures::default(), |w, _, lds| {
            lds[..32].fill(0x5a);
            w.set_exec(1);
            w.v[1][0] = 1;
            for (k, d) in STORE_DATA.into_iter().enumerate() {
                w.v[4 + k][0] = d;
            }
        }) else {
            return;
        };
        let mut expect = [0x5a; 32];
        expect[3..3 + want.len()].copy_from_slice(want);
        assert_eq!(&r.lds[..32], &expect[..], "{src}");
    }
}

#[test]
fn exec_masked_lanes_neither_read_nor_write() {
    let src = "
        ds_read_b32 v4, v1
        ds_write_b32 v1, v5 offset:1024
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, _, lds| {
        pattern(lds);
        w.set_exec(0b1001);
        for l in 0..LANES {
            w.v[1][l] = 4 * l as u32;
        }
        w.v[4] = [7; LANES];
        w.v[5] = [9; LANES];
    }) else {
        return;
    };
    for l in 0..8 {
        let on = l == 0 || l == 3;
        let mut p = vec![0u8; 65536];
        pattern(&mut p);
        assert_eq!(r.wave.v[4][l], if on { u32_at(&p, 4 * l) } else { 7 }, "lane {l}");
        assert_eq!(u32_at(&r.lds, 1024 + 4 * l), if on { 9 } else { u32_at(&p, 1024 + 4 * l) }, "lane {l}");
    }
}

#[test]
fn read2_and_write2_scale_their_offsets_by_the_element_and_st64() {
    // (write, read, address of element 0, address of element 1) with offset0:3 offset1:7
    let cases = [
        ("ds_write2_b32 v1, v4, v5", "ds_read2_b32 v[8:9], v1", 1, 12, 28),
        ("ds_write2st64_b32 v1, v4, v5", "ds_read2st64_b32 v[8:9], v1", 1, 3 * 256, 7 * 256),
        ("ds_write2_b64 v1, v[4:5], v[6:7]", "ds_read2_b64 v[8:11], v1", 2, 24, 56),
        ("ds_write2st64_b64 v1, v[4:5], v[6:7]", "ds_read2st64_b64 v[8:11], v1", 2, 3 * 512, 7 * 512),
    ];
    for (write, read, n, e0, e1) in cases {
        let src = format!("{write} offset0:3 offset1:7\n{read} offset0:3 offset1:7");
        let Some(r) = run_ok(&src, Apertures::default(), |w, _, _| {
            w.set_exec(1);
            w.v[1][0] = 16;
            for k in 0..4 {
                w.v[4 + k][0] = 0x100 + k as u32;
            }
        }) else {
            return;
        };
        let data1 = 4 + n; // the second element's registers
        for k in 0..n {
            assert_eq!(u32_at(&r.lds, 16 + e0 + 4 * k), 0x100 + k as u32, "{src}");
            assert_eq!(u32_at(&r.lds, 16 + e1 + 4 * k), 0x100 + (data1 - 4 + k) as u32, "{src}");
            assert_eq!(r.wave.v[8 + k][0], 0x100 + k as u32, "{src}");
            assert_eq!(r.wave.v[8 + n + k][0], 0x100 + (data1 - 4 + k) as u32, "{src}");
        }
    }
}

#[test]
fn read2_may_overwrite_its_address_register() {
    let Some(r) = run_ok("ds_read2_b32 v[2:3], v2 offset1:1", Apertures::default(), |w, _, lds| {
        pattern(lds);
        w.set_exec(1);
        w.v[2][0] = 8;
    }) else {
        return;
    };
    let mut p = vec![0u8; 16];
    pattern(&mut p);
    assert_eq!((r.wave.v[2][0], r.wave.v[3][0]), (u32_at(&p, 8), u32_at(&p, 12)));
}

/// Runs a 32-bit DS atomic on LDS dword 64 holding `old` with DATA0 = v4, DATA1 = v5; returns
/// (the LDS dword after, v0 after).
fn atomic32(src: &str, old: u32, d0: u32, d1: u32) -> Option<(u32, u32)> {
    let r = run_ok(src, Apertures::default(), |w, _, lds| {
        lds[64..68].copy_from_slice(&old.to_le_bytes());
        w.set_exec(1);
        w.v[1][0] = 60;
        w.v[0][0] = 0x5555_5555;
        w.v[4][0] = d0;
        w.v[5][0] = d1;
    })?;
    Some((u32_at(&r.lds, 64), r.wave.v[0][0]))
}

#[test]
fn atomics_apply_and_the_rtn_forms_return_the_old_value() {
    let f = |x: f32| x.to_bits();
    // (name without _rtn, has DATA1, old, d0, d1, new)
    let cases: [(&str, &str, bool, u32, u32, u32, u32); 18] = [
        ("ds_add_u32", "ds_add_rtn_u32", false, u32::MAX, 2, 0, 1),
        ("ds_sub_u32", "ds_sub_rtn_u32", false, 1, 2, 0, u32::MAX),
        ("ds_rsub_u32", "ds_rsub_rtn_u32", false, 1, 5, 0, 4),
        ("ds_inc_u32", "ds_inc_rtn_u32", false, 7, 7, 0, 0),
        ("ds_dec_u32", "ds_dec_rtn_u32", false, 0, 7, 0, 7),
        ("ds_min_i32", "ds_min_rtn_i32", false, 5, -3i32 as u32, 0, -3i32 as u32),
        ("ds_max_u32", "ds_max_rtn_u32", false, 5, -3i32 as u32, 0, -3i32 as u32),
        ("ds_min_u32", "ds_min_rtn_u32", false, 5, -3i32 as u32, 0, 5),
        ("ds_max_i32", "ds_max_rtn_i32", false, 5, -3i32 as u32, 0, 5),
        ("ds_and_b32", "ds_and_rtn_b32", false, 0b1100, 0b1010, 0, 0b1000),
        ("ds_or_b32", "ds_or_rtn_b32", false, 0b1100, 0b1010, 0, 0b1110),
        ("ds_xor_b32", "ds_xor_rtn_b32", false, 0b1100, 0b1010, 0, 0b0110),
        // (old & ~DATA) | DATA2
        ("ds_mskor_b32", "ds_mskor_rtn_b32", true, 0xff00_ff00, 0x0ff0_0000, 0x0050_0001, 0xf050_ff01),
        // DS compares with DATA (first) and stores DATA2 (second).
        ("ds_cmpst_b32", "ds_cmpst_rtn_b32", true, 10, 10, 99, 99),
        ("ds_cmpst_b32", "ds_cmpst_rtn_b32", true, 11, 10, 99, 11),
        ("ds_cmpst_f32", "ds_cmpst_rtn_f32", true, f(-0.0), f(0.0), 99, 99),
        ("ds_min_f32", "ds_min_rtn_f32", false, f(1.5), f(f32::NAN), 0, f(1.5)),
        ("ds_add_f32", "ds_add_rtn_f32", false, f(1.5), f(2.25), 0, f(3.75)),
    ];
    for (plain, rtn, two, old, d0, d1, new) in cases {
        let operands = if two { "v1, v4, v5" } else { "v1, v4" };
        let Some(got) = atomic32(&format!("{plain} {operands} offset:4"), old, d0, d1) else {
            return;
        };
        assert_eq!(got, (new, 0x5555_5555), "{plain}");
        let Some(got) = atomic32(&format!("{rtn} v0, {operands} offset:4"), old, d0, d1) else {
            return;
        };
        assert_eq!(got, (new, old), "{rtn}");
    }
    // wrap: old >= DATA ? old - DATA : old + DATA2
    assert_eq!(atomic32("ds_wrap_rtn_b32 v0, v1, v4, v5 offset:4", 9, 4, 100), Some((5, 9)));
    assert_eq!(atomic32("ds_wrap_rtn_b32 v0, v1, v4, v5 offset:4", 3, 4, 100), Some((103, 3)));
}

#[test]
fn sixty_four_bit_atomics_and_wrxchg2() {
    let f = |x: f64| x.to_bits();
    // (instruction, old, DATA0, DATA1, new)
    let cases: [(&str, u64, u64, u64, u64); 10] = [
        ("ds_add_rtn_u64 v[0:1], v1, v[4:5]", 0xffff_ffff, 1, 0, 1 << 32),
        // Signed and counting at 64 bits: the high word decides.
        ("ds_min_rtn_i64 v[0:1], v1, v[4:5]", 1 << 40, u64::MAX, 0, u64::MAX),
        ("ds_max_rtn_i64 v[0:1], v1, v[4:5]", 1 << 63, 1 << 32, 0, 1 << 32),
        ("ds_inc_rtn_u64 v[0:1], v1, v[4:5]", 1 << 40, 1 << 40, 0, 0),
        ("ds_dec_rtn_u64 v[0:1], v1, v[4:5]", 1 << 40, 1 << 41, 0, (1 << 40) - 1),
        ("ds_min_rtn_f64 v[0:1], v1, v[4:5]", f(-0.0), f(0.0), 0, f(-0.0)),
        ("ds_cmpst_rtn_b64 v[0:1], v1, v[4:5], v[6:7]", 1 << 40, 1 << 40, 5, 5),
        ("ds_max_rtn_f64 v[0:1], v1, v[4:5]", f(1.5), f(2.0), 0, f(2.0)),
        ("ds_add_rtn_f64 v[0:1], v1, v[4:5]", f(1.5), f(0.25), 0, f(1.75)),
        ("ds_wrxchg_rtn_b64 v[0:1], v1, v[4:5]", 3, 1 << 63, 0, 1 << 63),
    ];
    for (src, old, d0, d1, new) in cases {
        let Some(r) = run_ok(src, Apertures::default(), |w, _, lds| {
            lds[64..72].copy_from_slice(&old.to_le_bytes());
            w.set_exec(1);
            w.v[1][0] = 64;
            w.v[4][0] = d0 as u32;
            w.v[5][0] = (d0 >> 32) as u32;
            w.v[6][0] = d1 as u32;
            w.v[7][0] = (d1 >> 32) as u32;
        }) else {
            return;
        };
        let ret = u64::from(r.wave.v[0][0]) | u64::from(r.wave.v[1][0]) << 32;
        assert_eq!((u64_at(&r.lds, 64), ret), (new, old), "{src}");
    }
    let Some(r) =
        run_ok("ds_wrxchg2st64_rtn_b32 v[8:9], v1, v4, v5 offset0:1 offset1:2", Apertures::default(), |w, _, lds| {
            pattern(lds);
            w.set_exec(1);
            w.v[1][0] = 4;
            w.v[4][0] = 0xaaaa;
            w.v[5][0] = 0xbbbb;
        })
    else {
        return;
    };
    let mut p = vec![0u8; 1024];
    pattern(&mut p);
    assert_eq!((r.wave.v[8][0], r.wave.v[9][0]), (u32_at(&p, 260), u32_at(&p, 516)));
    assert_eq!((u32_at(&r.lds, 260), u32_at(&r.lds, 516)), (0xaaaa, 0xbbbb));
}

#[test]
fn every_lane_of_an_atomic_applies_in_lane_order() {
    let Some(r) = run_ok("ds_add_rtn_u32 v0, v1, v4", Apertures::default(), |w, _, _| {
        w.v[4] = [1; LANES];
    }) else {
        return;
    };
    assert_eq!(u32_at(&r.lds, 0), 64);
    assert_eq!(r.wave.v[0].to_vec(), (0..64).collect::<Vec<u32>>());
}

#[test]
fn addresses_past_the_lds_read_zero_and_drop_writes() {
    // The LDS is 64 KiB: address 65534 + offset 4 is past it; a b32 at 65534 straddles the end.
    let src = "
        ds_write_b32 v1, v5 offset:4
        ds_read_b32 v4, v1 offset:4
        ds_read_b32 v6, v1
        ds_add_rtn_u32 v7, v1, v5 offset:4
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, _, lds| {
        lds.fill(0xee);
        w.set_exec(1);
        w.v[1][0] = 65534;
        w.v[4][0] = 1;
        w.v[5][0] = 5;
        w.v[6][0] = 1;
        w.v[7][0] = 1;
    }) else {
        return;
    };
    assert_eq!((r.wave.v[4][0], r.wave.v[6][0], r.wave.v[7][0]), (0, 0, 0));
    assert!(r.lds.iter().all(|&b| b == 0xee));
}

#[test]
fn swizzle_quad_perm_and_bitmask_modes() {
    let lanes = |v: &[u32]| v.to_vec();
    // quad_perm(1,0,3,2): swap neighbours within each quad.
    let Some(r) = run_ok("ds_swizzle_b32 v4, v1 offset:swizzle(QUAD_PERM,1,0,3,2)", Apertures::default(), |w, _, _| {
        w.v[1] = std::array::from_fn(|l| 100 + l as u32);
    }) else {
        return;
    };
    let want: Vec<u32> = (0..64).map(|l: u32| 100 + (l ^ 1)).collect();
    assert_eq!(lanes(&r.wave.v[4]), want);
    // Broadcast lane 2 of each group of 4 (and_mask 0x1c, or_mask 2); lane 34's source (34)
    // is inactive in the upper half, so that group reads 0.
    let Some(r) = run_ok("ds_swizzle_b32 v4, v1 offset:swizzle(BROADCAST,4,2)", Apertures::default(), |w, _, _| {
        w.v[1] = std::array::from_fn(|l| 100 + l as u32);
        w.set_exec(!(1u64 << 34));
    }) else {
        return;
    };
    for l in 0..64u32 {
        let src = (l & !3) | 2;
        // Lane 34 is inactive and keeps v4 (0); lanes 32..=35 read lane 34: 0.
        let want = if l == 34 || src == 34 { 0 } else { 100 + src };
        assert_eq!(r.wave.v[4][l as usize], want, "lane {l}");
    }
    // Reverse within each 32 lanes: xor_mask 0x1f.
    let Some(r) = run_ok("ds_swizzle_b32 v4, v1 offset:swizzle(REVERSE,32)", Apertures::default(), |w, _, _| {
        w.v[1] = std::array::from_fn(|l| 100 + l as u32);
    }) else {
        return;
    };
    let want: Vec<u32> = (0..64).map(|l: u32| 100 + (l ^ 31)).collect();
    assert_eq!(lanes(&r.wave.v[4]), want);
}

#[test]
fn bpermute_pulls_and_permute_pushes_by_byte_address() {
    // bpermute: lane l reads lane (63 - l), by byte address 4 * (63 - l) + 256 (mod 64 lanes)
    // with offset 4 subtracted back through the immediate; lane 5 is inactive, so lane 58
    // reads 0.
    let exec = !(1u64 << 5);
    let Some(r) = run_ok("ds_bpermute_b32 v4, v1, v2 offset:4", Apertures::default(), |w, _, _| {
        w.set_exec(exec);
        for l in 0..LANES {
            w.v[1][l] = 4 * (63 - l as u32) + 256 - 4;
            w.v[2][l] = 1000 + l as u32;
        }
    }) else {
        return;
    };
    for l in 0..64usize {
        let want = match l {
            5 => 0,  // inactive: not written
            58 => 0, // its source, lane 5, is inactive
            _ => 1000 + (63 - l as u32),
        };
        assert_eq!(r.wave.v[4][l], want, "bpermute lane {l}");
    }
    // permute: lane l sends to lane l + 1, but lanes 1..=3 all send to lane 0 (the highest
    // sender wins) and lane 63 to itself; lanes 2..=4 then receive from nobody and get 0.
    let Some(r) = run_ok("ds_permute_b32 v4, v1, v2", Apertures::default(), |w, _, _| {
        for l in 0..LANES {
            let to = match l {
                1..=3 => 0,
                63 => 63,
                _ => l as u32 + 1,
            };
            w.v[1][l] = 4 * to;
            w.v[2][l] = 1000 + l as u32;
        }
    }) else {
        return;
    };
    assert_eq!(r.wave.v[4][0], 1003);
    assert_eq!(r.wave.v[4][1], 1000);
    assert_eq!(r.wave.v[4][2], 0);
    assert_eq!(r.wave.v[4][3], 0);
    assert_eq!(r.wave.v[4][4], 0);
    assert_eq!(r.wave.v[4][5], 1004);
    assert_eq!(r.wave.v[4][63], 1063);
}

#[test]
fn append_and_consume_count_the_active_lanes_at_m0() {
    let src = "
        ds_append v4 offset:8
        ds_consume v5 offset:8
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, _, lds| {
        lds[0x108..0x10c].copy_from_slice(&100u32.to_le_bytes());
        w.set_sreg(M0, 0x100);
        w.set_exec(0xff);
    }) else {
        return;
    };
    assert_eq!(&r.wave.v[4][..8], &[100; 8]);
    assert_eq!(&r.wave.v[5][..8], &[108; 8]);
    assert_eq!(r.wave.v[4][8], 0);
    assert_eq!(u32_at(&r.lds, 0x108), 100);
}

#[test]
fn write2_with_equal_offsets_writes_the_first_data_once() {
    let Some(r) = run_ok("ds_write2_b32 v1, v4, v5 offset0:2 offset1:2", Apertures::default(), |w, _, _| {
        w.set_exec(1);
        w.v[4][0] = 0xaaaa;
        w.v[5][0] = 0xbbbb;
    }) else {
        return;
    };
    assert_eq!(u32_at(&r.lds, 8), 0xaaaa);
}

#[test]
fn addtid_forms_address_m0_plus_offset_plus_four_per_lane() {
    let src = "
        ds_write_addtid_b32 v4 offset:16
        ds_read_addtid_b32 v5 offset:12
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, _, _| {
        w.set_sreg(M0, 0xffff_0100); // only M0[15:0] counts
        w.set_exec(0b101);
        w.v[4] = std::array::from_fn(|l| 10 + l as u32);
    }) else {
        return;
    };
    assert_eq!((u32_at(&r.lds, 0x110), u32_at(&r.lds, 0x114), u32_at(&r.lds, 0x118)), (10, 0, 12));
    // The read starts a dword lower: lane 2 reads 0x114 (never written), lane 0 reads 0x10c.
    assert_eq!((r.wave.v[5][0], r.wave.v[5][2]), (0, 0));
    let Some(r) = run_ok("ds_read_addtid_b32 v5", Apertures::default(), |w, _, lds| {
        w.set_sreg(M0, 0x20);
        lds[0x24..0x28].copy_from_slice(&77u32.to_le_bytes());
    }) else {
        return;
    };
    assert_eq!(r.wave.v[5][1], 77);
}

#[test]
fn gds_is_refused() {
    let Some(r) = run("ds_add_u32 v1, v2 gds", Apertures::default(), |_, _, _| {}) else {
        return;
    };
    let f = r.fault.expect("a fault");
    assert!(matches!(&f, Fault::Unimplemented { what, .. } if what == "GDS"), "{f}");
}

#[test]
fn waves_of_a_workgroup_share_their_lds_across_a_barrier() {
    use crate::exec::Code;
    use crate::group::{Progress, Workgroup};
    use crate::isa::Target;
    use crate::testing;
    // Every wave writes its lanes' ids at 256 * wave + 4 * lane, waits at the barrier, then
    // reads the other wave's slot: v1 holds its own address, v2 the other's.
    let src = "
        ds_write_b32 v1, v0
        s_barrier
        ds_read_b32 v3, v2
        s_endpgm
    ";
    let Some(code) = testing::assemble(src) else {
        return;
    };
    let mut ram = testing::ram(&code);
    let waves = (0..2u32)
        .map(|id| {
            let mut w = testing::wave();
            w.id_in_group = id;
            for l in 0..LANES {
                w.v[0][l] = 1000 * (id + 1) + l as u32;
                w.v[1][l] = 256 * id + 4 * l as u32;
                w.v[2][l] = 256 * (1 - id) + 4 * l as u32;
            }
            w
        })
        .collect();
    let mut group = Workgroup::new(waves, 512);
    let mut code = Code::new(Target::Gfx90a);
    let mut interrupts = Vec::new();
    let progress = group.run(&mut code, &mut ram, Apertures::default(), 1000, &mut interrupts).expect("no fault");
    assert_eq!(progress, Progress::Finished);
    for (id, w) in group.waves.iter().enumerate() {
        let other = 1000 * (2 - id as u32);
        assert_eq!(w.v[3][7], other + 7, "wave {id}");
    }
}
