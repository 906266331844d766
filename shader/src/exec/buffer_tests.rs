//! MUBUF: raw and structured range checking, the swizzle formula, ROCr's private segment
//! buffer (and its agreement with flat scratch), atomics, d16, EXEC masking.

use super::super::memtest::{bytes_at, put, run, run_ok};
use super::super::Apertures;
use super::Resource;
use crate::testing::DATA;
use crate::wave::{Wave, FLAT_SCRATCH, LANES};

/// A raw buffer V# (stride 0, no swizzle) at `base` with `num_records` bytes.
fn raw(base: u64, num_records: u32) -> [u32; 4] {
    [base as u32, (base >> 32) as u32 & 0xffff, num_records, 0]
}

/// ROCr's private segment buffer V# for gfx9 (amd_aql_queue.cpp, InitScratchSRD): stride 0,
/// swizzle enable, num_records = the queue's scratch size, dst_sel XYZW, UINT, data format
/// 32, element size 4 (field 1), index stride 64 (field 3), add_tid_enable.
fn rocr_scratch(base: u64, size: u32) -> [u32; 4] {
    let word3 = 4 | 5 << 3 | 6 << 6 | 7 << 9 | 4 << 12 | 4 << 15 | 1 << 19 | 3 << 21 | 1 << 23;
    [base as u32, (base >> 32) as u32 & 0xffff | 1 << 31, size, word3]
}

fn set_rsrc(w: &mut Wave, s: u8, words: [u32; 4]) {
    for (k, v) in words.iter().enumerate() {
        w.set_sreg(s + k as u8, *v);
    }
}

#[test]
fn the_resource_fields_decode_from_their_bits() {
    let r = Resource::from_words(rocr_scratch(0x1234_5678_9abc, 0x10_0000));
    assert_eq!(r.base, 0x1234_5678_9abc);
    assert!(r.swizzle && r.add_tid);
    assert_eq!((r.element_size, r.index_stride, r.num_records), (4, 64, 0x10_0000));
    // add_tid_enable extends the stride with the data format (4) as bits 17:14.
    assert_eq!(r.stride, 4 << 14);
    let r = Resource::from_words([0, 0x3fff_0000, 0, 3 << 19 | 4 << 15]);
    assert_eq!((r.stride, r.element_size, r.swizzle, r.add_tid), (0x3fff, 16, false, false));
}

#[test]
fn raw_buffers_check_offset_against_num_records_less_soffset() {
    // num_records 32, soffset 8: buffer offsets 0..24 are in range. Lane l loads at 4 * l.
    let src = "buffer_load_dword v4, v1, s[0:3], s5 offen offset:4";
    let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
        let p: Vec<u8> = (0..64).collect();
        put(ram, DATA, &p);
        set_rsrc(w, 0, raw(DATA, 32));
        w.set_sreg(5, 8);
        w.set_exec(0xff);
        for l in 0..LANES {
            w.v[1][l] = 4 * l as u32;
            w.v[4][l] = 0xdead;
        }
    }) else {
        return;
    };
    for l in 0..8 {
        let bo = 4 * l as u64 + 4;
        let want = if bo < 24 { r.ram.u32_at(DATA + 8 + bo) } else { 0 };
        assert_eq!(r.wave.v[4][l], want, "lane {l}");
    }
    assert_eq!(r.wave.v[4][8], 0xdead, "an inactive lane keeps its register");
}

#[test]
fn wide_accesses_range_check_each_dword() {
    // num_records 8: of a dwordx4 at 4, only dword 0 (bytes 4..8) is in range.
    let src = "
        buffer_load_dwordx4 v[4:7], off, s[0:3], 0 offset:4
        buffer_store_dwordx4 v[8:11], off, s[0:3], 0 offset:32
        buffer_store_dwordx2 v[8:9], off, s[4:7], 0 offset:4
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
        put(ram, DATA, &[0x11; 64]);
        set_rsrc(w, 0, raw(DATA, 8));
        set_rsrc(w, 4, raw(DATA + 64, 8));
        w.set_exec(1);
        for k in 4..12 {
            w.v[k][0] = 0x100 + k as u32;
        }
    }) else {
        return;
    };
    assert_eq!(&[r.wave.v[4][0], r.wave.v[5][0], r.wave.v[6][0], r.wave.v[7][0]], &[0x1111_1111, 0, 0, 0]);
    assert_eq!(bytes_at(&r.ram, DATA + 32, 16), [0x11; 16], "a store past num_records is dropped");
    assert_eq!(r.ram.u32_at(DATA + 64 + 4), 0x108);
    assert_eq!(r.ram.u32_at(DATA + 64 + 8), 0, "the second dword is out of range");
}

#[test]
fn structured_linear_buffers_check_index_and_offset() {
    // stride 16, 4 records: (index 3, offset 12) is byte 60; index 4, or offset 16, is out.
    let words = [DATA as u32, (DATA >> 32) as u32 | 16 << 16, 4, 0];
    let src = "buffer_store_dword v8, v[2:3], s[0:3], 0 idxen offen";
    let Some(r) = run_ok(src, Apertures::default(), |w, _, _| {
        set_rsrc(w, 0, words);
        w.set_exec(0b111);
        for (l, (i, o)) in [(3, 12), (4, 0), (0, 16)].into_iter().enumerate() {
            w.v[2][l] = i;
            w.v[3][l] = o;
            w.v[8][l] = 0xa0 + l as u32;
        }
    }) else {
        return;
    };
    let written: Vec<(usize, u32)> =
        (0..128).step_by(4).map(|a| (a, r.ram.u32_at(DATA + a as u64))).filter(|&(_, v)| v != 0).collect();
    assert_eq!(written, [(60, 0xa0)]);
}

#[test]
fn structured_swizzled_buffers_follow_the_manual_formula() {
    // stride 32, element size 8 (field 2), index stride 16 (field 1), num_records 32 records.
    // Lane 0: index 19, offset 12 -> (1*32 + 1*8)*16 + 3*8 + 4 = 668.
    // Lane 1: index 2, offset 0 -> 2*8 = 16. Lane 2: index 32 (out of range). Lane 3: offset
    // 32 (>= stride, out of range).
    let words = [DATA as u32, (DATA >> 32) as u32 | 32 << 16 | 1 << 31, 32, 2 << 19 | 1 << 21];
    let src = "buffer_store_dword v8, v[2:3], s[0:3], 0 idxen offen";
    let Some(r) = run_ok(src, Apertures::default(), |w, _, _| {
        set_rsrc(w, 0, words);
        w.set_exec(0b1111);
        for (l, (i, o)) in [(19, 12), (2, 0), (32, 0), (0, 32)].into_iter().enumerate() {
            w.v[2][l] = i;
            w.v[3][l] = o;
            w.v[8][l] = 0xa0 + l as u32;
        }
    }) else {
        return;
    };
    assert_eq!(r.ram.u32_at(DATA + 668), 0xa0);
    assert_eq!(r.ram.u32_at(DATA + 16), 0xa1);
    let written: Vec<usize> = (0..2048).step_by(4).filter(|&a| r.ram.u32_at(DATA + a as u64) != 0).collect();
    assert_eq!(written, [16, 668], "the out-of-range lanes wrote nothing");
}

#[test]
fn rocr_private_segment_buffer_interleaves_lanes_by_dword() {
    // -O0 spill code: buffer_store_dword v1, off, s[0:3], s5 offset:N with s5 the wave's
    // scratch offset. Lane l's private dword at 8 lands at base + s5 + 2 * 256 + 4 * l, which is
    // where scratch_load_dword finds it through FLAT_SCRATCH = base + s5.
    let base = DATA + 0x1_0000;
    let src = "
        buffer_store_dword v1, off, s[0:3], s5 offset:8
        buffer_load_dword v2, off, s[0:3], s5 offset:8
        scratch_load_dword v3, off, s6 offset:8
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, _, _| {
        set_rsrc(w, 0, rocr_scratch(base, 0x10_0000));
        w.set_sreg(5, 0x400);
        w.set_sreg(6, 0);
        w.set_sreg64(FLAT_SCRATCH, base + 0x400);
        for l in 0..LANES {
            w.v[1][l] = 500 + l as u32;
        }
    }) else {
        return;
    };
    for l in 0..LANES {
        assert_eq!(r.ram.u32_at(base + 0x400 + 2 * 256 + 4 * l as u64), 500 + l as u32, "lane {l}");
        assert_eq!((r.wave.v[2][l], r.wave.v[3][l]), (500 + l as u32, 500 + l as u32), "lane {l}");
    }
}

#[test]
fn a_swizzled_dwordx2_splits_into_elements() {
    // With element size 4 the second dword of lane l is one index-stride row further on.
    let base = DATA + 0x1_0000;
    let Some(r) = run_ok("buffer_store_dwordx2 v[2:3], v1, s[0:3], 0 offen", Apertures::default(), |w, _, _| {
        set_rsrc(w, 0, rocr_scratch(base, 0x10_0000));
        w.set_exec(0b110);
        for l in 0..LANES {
            w.v[1][l] = 4;
            w.v[2][l] = 10 + l as u32;
            w.v[3][l] = 20 + l as u32;
        }
    }) else {
        return;
    };
    for l in 1..3u64 {
        assert_eq!(r.ram.u32_at(base + 256 + 4 * l), 10 + l as u32);
        assert_eq!(r.ram.u32_at(base + 512 + 4 * l), 20 + l as u32);
    }
    assert_eq!(r.ram.u32_at(base + 256), 0, "lane 0 is inactive");
}

#[test]
fn sub_dword_and_d16_buffer_accesses() {
    let src = "
        buffer_load_sbyte v4, off, s[0:3], 0 offset:1
        buffer_load_ushort v5, off, s[0:3], 0 offset:2
        buffer_load_short_d16_hi v6, off, s[0:3], 0
        buffer_store_byte_d16_hi v7, off, s[0:3], 0 offset:9
        buffer_store_short v7, off, s[0:3], 0 offset:10
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
        put(ram, DATA, &[0x81, 0x82, 0x83, 0x84]);
        set_rsrc(w, 0, raw(DATA, 16));
        w.set_exec(1);
        w.v[6][0] = 0x1234_5678;
        w.v[7][0] = 0xaabb_ccdd;
    }) else {
        return;
    };
    assert_eq!(r.wave.v[4][0], 0xffff_ff82);
    assert_eq!(r.wave.v[5][0], 0x8483);
    assert_eq!(r.wave.v[6][0], 0x8281_5678);
    assert_eq!(bytes_at(&r.ram, DATA + 8, 4), [0, 0xbb, 0xdd, 0xcc]);
}

#[test]
fn buffer_atomics_return_the_old_value_in_vdata_with_glc() {
    let src = "
        buffer_atomic_add v4, off, s[0:3], 0 offset:4 glc
        buffer_atomic_cmpswap v[6:7], off, s[0:3], 0 offset:8 glc
        buffer_atomic_add v8, off, s[0:3], 0 offset:12
        buffer_atomic_add v9, off, s[0:3], 0 offset:16 glc
        buffer_atomic_add_x2 v[10:11], off, s[0:3], 0 glc
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
        for (k, v) in [7u32, 7, 10, 100, 1].iter().enumerate() {
            ram.set_u32(DATA + 4 * k as u64, *v);
        }
        set_rsrc(w, 0, raw(DATA, 16));
        w.set_exec(1);
        w.v[4][0] = 5;
        w.v[6][0] = 99; // new value
        w.v[7][0] = 10; // compare value
        w.v[8][0] = 1;
        w.v[9][0] = 1; // offset 16 is out of range: returns 0, writes nothing
        w.v[10][0] = 1;
        w.v[11][0] = 1;
    }) else {
        return;
    };
    // Dword 1: 7 + 5, then + 1 as the high half of the add_x2 below.
    assert_eq!((r.ram.u32_at(DATA + 4), r.wave.v[4][0]), (13, 7));
    assert_eq!((r.ram.u32_at(DATA + 8), r.wave.v[6][0], r.wave.v[7][0]), (99, 10, 10));
    assert_eq!((r.ram.u32_at(DATA + 12), r.wave.v[8][0]), (101, 1));
    assert_eq!((r.ram.u32_at(DATA + 16), r.wave.v[9][0]), (1, 0));
    // qword 0 was 7 | 12 << 32; + (1 | 1 << 32)
    assert_eq!(r.ram.u32_at(DATA), 8);
    assert_eq!((r.wave.v[10][0], r.wave.v[11][0]), (7, 12));
}

#[test]
fn format_accesses_of_32_bit_formats_follow_dst_sel() {
    // data format 32_32 (11), FLOAT (7); dst_sel X, Y, 0, 1. num_records 8: lane 1 (offset 8)
    // is out of range and reads 0, 0, 0, 1.0.
    let words = |sel: u32| [DATA as u32, (DATA >> 32) as u32, 8, sel | 7 << 12 | 11 << 15];
    let src = "
        buffer_load_format_xyzw v[4:7], v1, s[0:3], 0 offen
        buffer_store_format_xyz v[8:10], v1, s[4:7], 0 offen offset:32
    ";
    let Some(r) = run_ok(src, Apertures::default(), |w, ram, _| {
        ram.set_u32(DATA, 0x11);
        ram.set_u32(DATA + 4, 0x22);
        set_rsrc(w, 0, words(4 | 5 << 3 | 1 << 9));
        set_rsrc(
            w,
            4,
            [(DATA + 32) as u32, (DATA >> 32) as u32, 64, 4 | 5 << 3 | 6 << 6 | 7 << 9 | 4 << 12 | 11 << 15],
        );
        w.set_exec(0b11);
        w.v[1][1] = 8;
        for l in 0..2 {
            w.v[8][l] = 0xa0 + l as u32;
            w.v[9][l] = 0xb0 + l as u32;
            w.v[10][l] = 0xc0 + l as u32;
        }
    }) else {
        return;
    };
    let one = 1.0f32.to_bits();
    let lane = |l: usize| [r.wave.v[4][l], r.wave.v[5][l], r.wave.v[6][l], r.wave.v[7][l]];
    assert_eq!(lane(0), [0x11, 0x22, 0, one]);
    assert_eq!(lane(1), [0, 0, 0, one]);
    // A 32_32 element takes two of the three components: lane 1 writes 0xa1, 0xb1 after
    // lane 0's pair, and nothing after them.
    let got: Vec<u32> = (0..5).map(|k| r.ram.u32_at(DATA + 64 + 4 * k)).collect();
    assert_eq!(got, [0xa0, 0xb0, 0xa1, 0xb1, 0]);
}

#[test]
fn cache_maintenance_is_a_no_op_and_format_loads_are_refused() {
    // run_ok fails on any fault, an unimplemented instruction included.
    if run_ok("buffer_wbinvl1\nbuffer_wbinvl1_vol\nbuffer_wbl2\nbuffer_invl2", Apertures::default(), |_, _, _| {})
        .is_none()
    {
        return;
    }
    let Some(r) = run("buffer_load_format_x v1, off, s[0:3], 0", Apertures::default(), |_, _, _| {}) else {
        return;
    };
    assert!(matches!(r.fault, Some(super::super::Fault::Unimplemented { .. })), "{:?}", r.fault);
}

#[test]
fn a_store_to_unmapped_memory_faults_naming_the_instruction() {
    let Some(r) = run("buffer_store_dword v1, off, s[0:3], 0", Apertures::default(), |w, _, _| {
        set_rsrc(w, 0, raw(0x40, 64));
    }) else {
        return;
    };
    let text = r.fault.expect("a fault").to_string();
    assert!(text.contains("buffer_store_dword") && text.contains("0x40"), "{text}");
}
