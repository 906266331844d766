//! Table-driven tests of scalar memory: loads of every width and offset form, buffer range
//! checks, stores, atomics, the time counters and faults.

use crate::exec::Fault;
use crate::mem::Ram;
use crate::testing::{assemble, ram, run, run_fault, run_wave, wave, CODE, DATA};
use crate::wave::Wave;

/// The test data: dword `k` at DATA + 4k is 0x1000 + k.
fn fill(ram: &mut Ram) {
    for k in 0..64 {
        ram.set_u32(DATA + 4 * k, 0x1000 + k as u32);
    }
}

fn word(k: u32) -> u32 {
    0x1000 + k
}

/// s[0:1] = DATA; s[4:7] = a buffer at DATA with `stride` and `num_records`.
fn bases(w: &mut Wave, stride: u32, num_records: u32) {
    w.set_sreg64(0, DATA);
    w.set_sreg64(4, DATA | u64::from(stride) << 48);
    w.s[6] = num_records;
    w.s[7] = 0;
}

/// Runs each program on a fresh wave and memory (`setup(k, ..)` prepares case k), then
/// `check(k, ..)`. The programs are assembled in one llvm-mc run, each in a 256-byte slot.
fn each(srcs: &[&str], setup: impl Fn(usize, &mut Wave, &mut Ram), check: impl Fn(usize, &Wave, &Ram)) {
    const SLOT: usize = 256;
    let src: String = srcs.iter().map(|s| format!(".p2align 8\n{s}\ns_endpgm\n")).collect();
    let Some(code) = assemble(&src) else {
        return;
    };
    // Each slot starts at SLOT * k only if no program overflowed its slot.
    assert!(code.len() <= SLOT * srcs.len(), "a program is longer than {SLOT} bytes");
    for (k, src) in srcs.iter().enumerate() {
        let mut w = wave();
        w.pc = CODE + (SLOT * k) as u64;
        let mut mem = ram(&code);
        setup(k, &mut w, &mut mem);
        if let Err(f) = run_wave(&mut w, &mut mem, &mut []) {
            panic!("`{src}`: {f}");
        }
        check(k, &w, &mem);
    }
}

/// A load program, its setup (stride, num_records, s2, s3) and the registers it must fill.
struct Load {
    src: &'static str,
    stride: u32,
    records: u32,
    s2: u32,
    /// (first register, the data dwords it must hold: `None` reads 0)
    expect: (u8, &'static [Option<u32>]),
}

const fn ld(src: &'static str, s2: u32, expect: (u8, &'static [Option<u32>])) -> Load {
    Load { src, stride: 0, records: 0, s2, expect }
}

const fn buf(src: &'static str, stride: u32, records: u32, s2: u32, expect: (u8, &'static [Option<u32>])) -> Load {
    Load { src, stride, records, s2, expect }
}

const fn s(k: u32) -> Option<u32> {
    Some(k)
}

#[test]
fn loads_of_every_width_and_offset_form() {
    const X16: &[Option<u32>] =
        &[s(0), s(1), s(2), s(3), s(4), s(5), s(6), s(7), s(8), s(9), s(10), s(11), s(12), s(13), s(14), s(15)];
    const CASES: &[Load] = &[
        ld("s_load_dword s10, s[0:1], 0x8", 0, (10, &[s(2)])),
        ld("s_load_dwordx2 s[10:11], s[0:1], 0x4", 0, (10, &[s(1), s(2)])),
        ld("s_load_dwordx4 s[12:15], s[0:1], 0x10", 0, (12, &[s(4), s(5), s(6), s(7)])),
        ld("s_load_dwordx8 s[16:23], s[0:1], 0x0", 0, (16, &[s(0), s(1), s(2), s(3), s(4), s(5), s(6), s(7)])),
        ld("s_load_dwordx16 s[16:31], s[0:1], 0x0", 0, (16, X16)),
        // The SGPR offset, and both offsets together.
        ld("s_load_dwordx4 s[12:15], s[0:1], s2", 0x20, (12, &[s(8), s(9), s(10), s(11)])),
        ld("s_load_dword s10, s[0:1], s2 offset:0x4", 0x20, (10, &[s(9)])),
        // The two low bits of the address are ignored.
        ld("s_load_dword s10, s[0:1], 0x6", 0, (10, &[s(1)])),
        ld("s_load_dword s10, s[0:1], s2", 0xb, (10, &[s(2)])),
        // gfx9's immediate offset is signed.
        ld("s_add_u32 s0, s0, 8\ns_load_dword s10, s[0:1], -0x4", 0, (10, &[s(1)])),
        // Bits 63:48 of the base are not part of the address.
        ld("s_or_b32 s1, s1, 0xffff0000\ns_load_dword s10, s[0:1], 0xc", 0, (10, &[s(3)])),
        // Buffers: num_records bytes with stride 0, num_records * stride bytes otherwise; a
        // dword past the end reads 0.
        buf("s_buffer_load_dword s10, s[4:7], 0x8", 0, 16, 0, (10, &[s(2)])),
        buf("s_buffer_load_dword s10, s[4:7], s2", 0, 16, 4, (10, &[s(1)])),
        buf("s_buffer_load_dwordx4 s[12:15], s[4:7], 0x8", 0, 16, 0, (12, &[s(2), s(3), None, None])),
        buf("s_buffer_load_dwordx2 s[10:11], s[4:7], 0x8", 4, 3, 0, (10, &[s(2), None])),
        buf("s_buffer_load_dwordx2 s[10:11], s[4:7], 0x8", 8, 2, 0, (10, &[s(2), s(3)])),
        buf("s_buffer_load_dwordx8 s[16:23], s[4:7], 0x40", 0, 16, 0, (16, &[None; 8])),
        buf("s_buffer_load_dwordx16 s[16:31], s[4:7], 0x0", 0, 64, 0, (16, X16)),
        // A partial dword at the end is out of range.
        buf("s_buffer_load_dwordx2 s[10:11], s[4:7], 0x0", 0, 7, 0, (10, &[s(0), None])),
    ];
    let srcs: Vec<&str> = CASES.iter().map(|c| c.src).collect();
    each(
        &srcs,
        |k, w, ram| {
            let case = &CASES[k];
            fill(ram);
            bases(w, case.stride, case.records);
            w.s[2] = case.s2;
            w.s[10..32].fill(0xdead);
        },
        |k, w, _| {
            let case = &CASES[k];
            let (first, want) = case.expect;
            for (j, v) in want.iter().enumerate() {
                let r = usize::from(first) + j;
                assert_eq!(w.s[r], v.map_or(0, word), "`{}`: s{r}", case.src);
            }
        },
    );
}

#[test]
fn stores_write_their_dwords_and_buffers_drop_what_is_out_of_range() {
    // (program, stride, num_records, the data dwords 0..8 afterwards: `None` untouched)
    let cases: [(&str, u32, u32, [Option<u32>; 8]); 5] = [
        ("s_store_dword s10, s[0:1], 0x4", 0, 0, [None, s(10), None, None, None, None, None, None]),
        ("s_store_dwordx2 s[10:11], s[0:1], s2", 0, 0, [None, None, s(10), s(11), None, None, None, None]),
        ("s_store_dwordx4 s[12:15], s[0:1], 0x12", 0, 0, [None, None, None, None, s(12), s(13), s(14), s(15)]),
        ("s_buffer_store_dwordx4 s[12:15], s[4:7], 0x8", 0, 16, [None, None, s(12), s(13), None, None, None, None]),
        ("s_buffer_store_dwordx2 s[10:11], s[4:7], s2", 4, 4, [None, None, s(10), s(11), None, None, None, None]),
    ];
    for (src, stride, records, want) in cases {
        let Some((_, ram)) = run(src, |w, _| {
            bases(w, stride, records);
            w.s[2] = 8;
            for r in 10..16 {
                w.s[r] = 0x5000 + r as u32;
            }
        }) else {
            return;
        };
        for (k, v) in want.iter().enumerate() {
            let got = ram.u32_at(DATA + 4 * k as u64);
            assert_eq!(got, v.map_or(0, |r| 0x5000 + r), "`{src}`: dword {k}");
        }
    }
}

/// An atomic program, the memory qword at DATA before, the data registers s[10:13] before, and
/// both afterwards.
struct Atomic {
    src: &'static str,
    mem: u64,
    regs: [u32; 4],
    mem_after: u64,
    regs_after: [u32; 4],
}

const fn at(src: &'static str, mem: u64, regs: [u32; 4], mem_after: u64, regs_after: [u32; 4]) -> Atomic {
    Atomic { src, mem, regs, mem_after, regs_after }
}

#[test]
fn atomics_update_memory_and_return_the_old_value_with_glc() {
    const HI: u64 = 0x7_0000_0000;
    let cases = [
        at("s_atomic_add s10, s[0:1], 0x0 glc", HI | 5, [3, 0, 0, 0], HI | 8, [5, 0, 0, 0]),
        // Without glc the data register keeps the operand.
        at("s_atomic_add s10, s[0:1], 0x0", 5, [3, 0, 0, 0], 8, [3, 0, 0, 0]),
        at("s_atomic_sub s10, s[0:1], 0x0 glc", 5, [6, 0, 0, 0], 0xffff_ffff, [5, 0, 0, 0]),
        at("s_atomic_swap s10, s[0:1], 0x0 glc", 5, [9, 0, 0, 0], 9, [5, 0, 0, 0]),
        at("s_atomic_smin s10, s[0:1], 0x0 glc", 5, [0xffff_ffff, 0, 0, 0], 0xffff_ffff, [5, 0, 0, 0]),
        at("s_atomic_umin s10, s[0:1], 0x0 glc", 5, [0xffff_ffff, 0, 0, 0], 5, [5, 0, 0, 0]),
        at("s_atomic_smax s10, s[0:1], 0x0 glc", 5, [0xffff_ffff, 0, 0, 0], 5, [5, 0, 0, 0]),
        at("s_atomic_umax s10, s[0:1], 0x0 glc", 5, [0xffff_ffff, 0, 0, 0], 0xffff_ffff, [5, 0, 0, 0]),
        at("s_atomic_and s10, s[0:1], 0x0 glc", 6, [3, 0, 0, 0], 2, [6, 0, 0, 0]),
        at("s_atomic_or s10, s[0:1], 0x0 glc", 6, [3, 0, 0, 0], 7, [6, 0, 0, 0]),
        at("s_atomic_xor s10, s[0:1], 0x0 glc", 6, [3, 0, 0, 0], 5, [6, 0, 0, 0]),
        at("s_atomic_inc s10, s[0:1], 0x0 glc", 5, [5, 0, 0, 0], 0, [5, 0, 0, 0]),
        at("s_atomic_dec s10, s[0:1], 0x0 glc", 0, [5, 0, 0, 0], 5, [0, 0, 0, 0]),
        // cmpswap: DATA[0] is the new value, DATA[1] the compare value.
        at("s_atomic_cmpswap s[10:11], s[0:1], 0x0 glc", 5, [7, 5, 0, 0], 7, [5, 5, 0, 0]),
        at("s_atomic_cmpswap s[10:11], s[0:1], 0x0 glc", 5, [7, 4, 0, 0], 5, [5, 4, 0, 0]),
        at(
            "s_atomic_add_x2 s[10:11], s[0:1], 0x0 glc",
            0xffff_ffff,
            [1, 0, 0, 0],
            0x1_0000_0000,
            [0xffff_ffff, 0, 0, 0],
        ),
        at("s_atomic_umax_x2 s[10:11], s[0:1], 0x0", 5, [0, 1, 0, 0], 0x1_0000_0000, [0, 1, 0, 0]),
        at("s_atomic_cmpswap_x2 s[12:15], s[0:1], 0x0 glc", 0x5, [0, 0, 0, 0], 5, [0, 0, 5, 0]),
        // The buffer forms, with a 16-byte buffer: s2 moves the access.
        at("s_buffer_atomic_add s10, s[4:7], 0x0 glc", 5, [3, 0, 0, 0], 8, [5, 0, 0, 0]),
        at("s_buffer_atomic_add_x2 s[10:11], s[4:7], 0x0 glc", 5, [3, 1, 0, 0], 0x1_0000_0008, [5, 0, 0, 0]),
        at("s_buffer_atomic_cmpswap_x2 s[12:15], s[4:7], 0x0 glc", 9, [0, 0, 7, 8], 9, [0, 0, 9, 0]),
        // Out of range: memory is untouched and the returned value is 0.
        at("s_buffer_atomic_add s10, s[4:7], 0x10 glc", 5, [3, 0, 0, 0], 5, [0, 0, 0, 0]),
    ];
    let srcs: Vec<&str> = cases.iter().map(|c| c.src).collect();
    each(
        &srcs,
        |k, w, ram| {
            let case = &cases[k];
            bases(w, 0, 16);
            ram.set_u32(DATA, case.mem as u32);
            ram.set_u32(DATA + 4, (case.mem >> 32) as u32);
            w.s[10..14].copy_from_slice(&case.regs);
        },
        |k, w, ram| {
            let case = &cases[k];
            let mem = u64::from(ram.u32_at(DATA)) | u64::from(ram.u32_at(DATA + 4)) << 32;
            assert_eq!(mem, case.mem_after, "`{}`: memory", case.src);
            assert_eq!(w.s[10..14], case.regs_after, "`{}`: s[10:13]", case.src);
        },
    );
}

#[test]
fn time_counters_are_monotonic() {
    let src = "
        s_memtime s[10:11]
        s_memrealtime s[14:15]
        s_dcache_wb
        s_dcache_inv
        s_memtime s[12:13]
        s_memrealtime s[16:17]
    ";
    let Some((w, _)) = run(src, |w, _| w.s[10..18].fill(u32::MAX)) else {
        return;
    };
    let (t0, t1) = (w.sreg64(10), w.sreg64(12));
    let (r0, r1) = (w.sreg64(14), w.sreg64(16));
    assert!(t0 <= t1 && t1 != u64::MAX, "s_memtime {t0} then {t1}");
    assert!(r0 <= r1 && r1 != u64::MAX, "s_memrealtime {r0} then {r1}");
}

#[test]
fn cache_operations_change_nothing() {
    let src = "
        s_dcache_inv
        s_dcache_wb
        s_dcache_inv_vol
        s_dcache_wb_vol
        s_dcache_discard s[0:1], 0x0
        s_dcache_discard_x2 s[0:1], s2
        s_atc_probe 7, s[0:1], 0x0
    ";
    let Some((w, ram)) = run(src, |w, ram| {
        fill(ram);
        bases(w, 0, 0);
    }) else {
        return;
    };
    assert_eq!(w.sreg64(0), DATA);
    assert_eq!(ram.u32_at(DATA), word(0));
}

#[test]
fn faults() {
    // Unmapped memory is a memory fault, in loads, stores and atomics.
    for src in
        ["s_load_dwordx2 s[10:11], s[0:1], 0x0", "s_store_dword s10, s[0:1], 0x0", "s_atomic_add s10, s[0:1], 0x0"]
    {
        let Some(f) = run_fault(src, |w, _| w.set_sreg64(0, 0x10)) else {
            return;
        };
        assert!(matches!(f, Fault::Memory { .. }), "`{src}`: {f}");
    }
    // A 64-bit atomic needs an 8-byte aligned address.
    let Some(f) = run_fault("s_atomic_add_x2 s[10:11], s[0:1], 0x4", |w, _| w.set_sreg64(0, DATA)) else {
        return;
    };
    assert!(matches!(f, Fault::Invalid { .. }), "{f}");
    let Some(f) = run_fault("s_scratch_load_dword s10, s[0:1], 0x0", |w, _| w.set_sreg64(0, DATA)) else {
        return;
    };
    assert!(matches!(f, Fault::Unimplemented { .. }), "{f}");
}

#[test]
fn the_hipcc_prologue_computes_the_block_size_from_the_dispatch_packet() {
    // Every hipcc kernel starts so: blockDim.x = min(workgroup_size_x, grid_size_x - wg_id *
    // workgroup_size_x), with the sizes loaded from the AQL packet (workgroup_size_x is the
    // low half of dword 1, grid_size_x dword 3).
    let src = "
        s_load_dword s0, s[4:5], 0x4
        s_load_dword s1, s[4:5], 0xc
        s_waitcnt lgkmcnt(0)
        s_and_b32 s0, s0, 0xffff
        s_mul_i32 s2, s6, s0
        s_sub_i32 s1, s1, s2
        s_min_u32 s3, s1, s0
    ";
    // (grid_size_x, workgroup id, blockDim.x): the last group of 1000 in groups of 256 is short.
    for (grid, wg, want) in [(1000, 0, 256), (1000, 3, 1000 - 768), (1024, 3, 256)] {
        let Some((w, _)) = run(src, |w, ram| {
            ram.set_u32(DATA + 4, 0x0001_0100); // workgroup_size_x 256, workgroup_size_y 1
            ram.set_u32(DATA + 12, grid);
            w.set_sreg64(4, DATA);
            w.s[6] = wg;
        }) else {
            return;
        };
        assert_eq!(w.s[3], want, "grid {grid}, group {wg}");
    }
}
