//! Tests of the kernel object formats, the dispatch geometry and the initial wave state.

use super::*;
use crate::exec::Code;
use crate::group::Progress;
use crate::mem::Ram;
use crate::testing::{self, CODE, DATA};
use crate::wave::{EXEC, M0};
use std::process::Command;

/// A kernel descriptor as the tests write it (offsets of AMDGPUUsage "Kernel Descriptor").
struct Kd {
    group: u32,
    private: u32,
    kernarg: u32,
    entry: i64,
    rsrc3: u32,
    rsrc1: u32,
    rsrc2: u32,
    props: u16,
}

impl Default for Kd {
    /// Nothing enabled, the code 256 bytes past the descriptor (where LLVM puts it).
    fn default() -> Kd {
        Kd { group: 0, private: 0, kernarg: 0, entry: 0x100, rsrc3: 0, rsrc1: 0, rsrc2: 0, props: 0 }
    }
}

impl Kd {
    fn bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..4].copy_from_slice(&self.group.to_le_bytes());
        b[4..8].copy_from_slice(&self.private.to_le_bytes());
        b[8..12].copy_from_slice(&self.kernarg.to_le_bytes());
        b[16..24].copy_from_slice(&self.entry.to_le_bytes());
        b[44..48].copy_from_slice(&self.rsrc3.to_le_bytes());
        b[48..52].copy_from_slice(&self.rsrc1.to_le_bytes());
        b[52..56].copy_from_slice(&self.rsrc2.to_le_bytes());
        b[56..58].copy_from_slice(&self.props.to_le_bytes());
        b
    }
}

/// rsrc2 with USER_SGPR_COUNT `n` and the given enable bits.
fn rsrc2(n: u32, bits: u32) -> u32 {
    n << 1 | bits
}

/// ROCr's blit kernel header for gfx90a as AssembleShader writes it: amd_kernel_code_t 1.1,
/// machine 9.0.10, code at +256, one kernarg pointer, work-group id X, and RSRC3's accum offset
/// in the high half of max_scratch_backing_memory_byte_size.
fn blit_header(gran_vgprs: u32) -> [u8; 256] {
    let mut b = [0u8; 256];
    b[0..4].copy_from_slice(&1u32.to_le_bytes());
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    b[8..10].copy_from_slice(&1u16.to_le_bytes());
    b[10..12].copy_from_slice(&9u16.to_le_bytes());
    b[14..16].copy_from_slice(&10u16.to_le_bytes());
    b[16..24].copy_from_slice(&256i64.to_le_bytes());
    let accum = ((gran_vgprs + 1) * 8) / 4 - 1;
    b[40..48].copy_from_slice(&(u64::from(accum) << 32).to_le_bytes());
    let rsrc1 = gran_vgprs | 3 << 16 | 3 << 18 | 1 << 21 | 1 << 23;
    b[48..52].copy_from_slice(&rsrc1.to_le_bytes());
    b[52..56].copy_from_slice(&rsrc2(2, RSRC2_WORKGROUP_ID_X).to_le_bytes());
    b[56..60].copy_from_slice(&(KERNARG_SEGMENT_PTR | 1 << 19).to_le_bytes());
    b[60..64].copy_from_slice(&8u32.to_le_bytes());
    b[64..68].copy_from_slice(&512u32.to_le_bytes());
    b[72..80].copy_from_slice(&32u64.to_le_bytes());
    b[103] = 6;
    b
}

fn dispatch(code: KernelCode) -> Dispatch {
    Dispatch {
        code,
        kernel_object: CODE - 0x100,
        grid: [64, 1, 1],
        workgroup_size: [64, 1, 1],
        kernarg: 0xAAAA_0000_1000,
        packet: 0xBBBB_0000_2000,
        queue: 0xCCCC_0000_3000,
        dispatch_id: 0x1_0000_0007,
        group_segment_size: 0,
        private_segment_size: 0,
        scratch_resource: [0x1111, 0x2222, 0x3333, 0x4444],
        scratch_base: 0xDDDD_0000_0000,
        scratch_size: 1 << 20,
        apertures: Apertures::default(),
        user_data: None,
        trap_handler: None,
        gws: None,
    }
}

#[test]
fn a_kernel_descriptor_gives_its_sizes_registers_and_entry() {
    let kd = Kd {
        group: 256,
        private: 20,
        kernarg: 24,
        entry: 0x1000 - 0x40,
        rsrc3: 2,
        rsrc1: 0x00ac_0041,
        rsrc2: rsrc2(4, RSRC2_WORKGROUP_ID_X),
        props: (DISPATCH_PTR | KERNARG_SEGMENT_PTR) as u16,
    };
    let k = KernelCode::parse(Target::Gfx90a, &kd.bytes()).unwrap();
    assert_eq!(k.format, Format::Descriptor);
    assert_eq!((k.group_segment_fixed_size, k.private_segment_fixed_size, k.kernarg_size), (256, 20, 24));
    // 2 granules of 8, AGPRs from (2 + 1) * 4 = 12.
    assert_eq!((k.vgprs, k.agprs), (12, 4));
    assert_eq!(k.user_sgprs_enabled(), 4);
    assert_eq!(k.entry(0x40).unwrap(), 0x1000);
    // A negative offset: code before the descriptor.
    let k = KernelCode::parse(Target::Gfx90a, &Kd { entry: -0x140, ..kd }.bytes()).unwrap();
    assert_eq!(k.entry(0x2040).unwrap(), 0x1f00);
}

#[test]
fn bits_reserved_in_the_descriptor_are_not_the_legacy_grid_counts() {
    let kd = Kd {
        entry: 0,
        rsrc2: rsrc2(2, 0),
        props: (KERNARG_SEGMENT_PTR | GRID_WORKGROUP_COUNT_X) as u16,
        ..Kd::default()
    };
    let k = KernelCode::from_descriptor(Target::Gfx90a, &kd.bytes()).unwrap();
    assert_eq!(k.user_sgprs_enabled(), 2);
}

#[test]
fn rocr_blit_kernel_header_parses_as_amd_kernel_code() {
    let h = blit_header(3);
    let k = KernelCode::parse(Target::Gfx90a, &h).unwrap();
    assert_eq!(k.format, Format::AmdKernelCode);
    assert_eq!(k.entry_offset, 256);
    assert_eq!((k.group_segment_fixed_size, k.private_segment_fixed_size, k.kernarg_size), (512, 8, 32));
    // accum offset = all 32 registers: no AGPRs.
    assert_eq!((k.vgprs, k.agprs), (32, 0));
    assert_eq!(k.user_sgprs_enabled(), 2);
    assert_eq!(k.wave_size, 64);
    // Denormals kept, DX10_CLAMP, IEEE.
    assert_eq!(k.mode(), 0xf0 | 1 << 8 | 1 << 9);
}

#[test]
fn legacy_grid_workgroup_counts_are_user_sgprs() {
    let mut h = blit_header(0);
    let props = KERNARG_SEGMENT_PTR | GRID_WORKGROUP_COUNT_X | GRID_WORKGROUP_COUNT_X << 2;
    h[56..60].copy_from_slice(&props.to_le_bytes());
    h[52..56].copy_from_slice(&rsrc2(4, RSRC2_WORKGROUP_ID_X).to_le_bytes());
    let k = KernelCode::parse(Target::Gfx90a, &h).unwrap();
    let mut d = dispatch(k);
    d.kernel_object = CODE - 256;
    d.grid = [200, 1, 7];
    d.workgroup_size = [64, 1, 2];
    let g = d.workgroup([3, 0, 2]).unwrap();
    let w = &g.waves[0];
    // kernarg, count X = ceil(200 / 64) = 4, count Z = ceil(7 / 2) = 4, then work-group id X.
    assert_eq!(&w.s[..5], &[0x1000, 0xAAAA, 4, 4, 3]);
}

#[test]
fn malformed_kernel_objects_are_errors() {
    let base = Kd { entry: 256, rsrc2: rsrc2(2, 0), props: KERNARG_SEGMENT_PTR as u16, ..Kd::default() };
    let parse = |kd: Kd| KernelCode::parse(Target::Gfx90a, &kd.bytes());
    assert_eq!(parse(Kd { rsrc2: rsrc2(1, 0), ..base }), Err(LaunchError::UserSgprs { rsrc2: 1, enabled: 2 }));
    assert_eq!(parse(Kd { props: WAVEFRONT_SIZE32 as u16, ..base }), Err(LaunchError::Wave32(Target::Gfx90a)));
    // 8 registers, AGPRs said to start at 64.
    assert_eq!(parse(Kd { rsrc3: 15, ..base }), Err(LaunchError::AccumOffset { total: 8, accum_offset: 64 }));
    let k = parse(Kd { entry: 100, ..base }).unwrap();
    assert_eq!(k.entry(0x1000), Err(LaunchError::Entry { kernel_object: 0x1000, offset: 100 }));
    // A zeroed descriptor's entry is the descriptor itself.
    let k = parse(Kd { entry: 0, ..base }).unwrap();
    assert_eq!(
        k.entry(0x1000),
        Err(LaunchError::EntryInObject { kernel_object: 0x1000, offset: 0, size: 64, what: "kernel descriptor" })
    );
    let mut legacy = blit_header(0);
    legacy[16..24].copy_from_slice(&0i64.to_le_bytes());
    let k = KernelCode::parse(Target::Gfx90a, &legacy).unwrap();
    assert!(matches!(k.entry(0x1000), Err(LaunchError::EntryInObject { size: 256, .. })));
    let k = parse(Kd { entry: i64::MIN, ..base }).unwrap();
    assert!(matches!(k.entry(0x1000), Err(LaunchError::Entry { .. })));
    assert!(matches!(KernelCode::parse(Target::Gfx90a, &[0u8; 63]), Err(LaunchError::Short { .. })));
    // An amd_kernel_code_t cut short.
    assert!(matches!(KernelCode::parse(Target::Gfx90a, &blit_header(0)[..64]), Err(LaunchError::Short { .. })));
}

#[test]
fn every_user_and_system_sgpr_lands_in_order() {
    let all = PRIVATE_SEGMENT_BUFFER
        | DISPATCH_PTR
        | QUEUE_PTR
        | KERNARG_SEGMENT_PTR
        | DISPATCH_ID
        | FLAT_SCRATCH_INIT
        | PRIVATE_SEGMENT_SIZE;
    let r2 = rsrc2(15, RSRC2_PRIVATE_SEGMENT_WAVE_OFFSET | 0x7 << 7 | RSRC2_WORKGROUP_INFO);
    let kd = Kd { private: 6, rsrc2: r2, props: all as u16, ..Kd::default() };
    let mut d = dispatch(KernelCode::parse(Target::Gfx90a, &kd.bytes()).unwrap());
    d.grid = [128, 6, 4];
    d.workgroup_size = [64, 2, 1];
    let g = d.workgroup([1, 2, 3]).unwrap();
    assert_eq!(g.waves.len(), 2);
    let w = &g.waves[1];
    let want = [
        0x1111, 0x2222, 0x3333, 0x4444, // private segment buffer V#
        0x2000, 0xBBBB, // dispatch ptr
        0x3000, 0xCCCC, // queue ptr
        0x1000, 0xAAAA, // kernarg
        7, 1, // dispatch id
        0, 0xDDDD, // flat scratch init: the queue's scratch base
        8,      // private segment size, rounded to a dword
        1, 2, 3,    // work-group id X, Y, Z
        2,    // work-group info: 2 waves, not the first
        1024, // private segment wave offset: wave 1, 64 lanes * 8 bytes in 1 KiB granules
    ];
    assert_eq!(&w.s[..want.len()], &want);
    assert_eq!(w.s[want.len()], 0);
    assert_eq!(g.waves[0].s[18], 1 << 31 | 2);
    assert_eq!(g.waves[0].s[19], 0);
    assert_eq!(w.sreg64(FLAT_SCRATCH), 0xDDDD_0000_0000 + 1024);
    assert_eq!(w.sreg(M0), 0);
}

#[test]
fn system_sgprs_start_at_user_sgpr_count_even_past_the_enabled() {
    // `.amdhsa_user_sgpr_count` may reserve more user SGPRs than the enables fill.
    let kd = Kd { rsrc2: rsrc2(6, 1 << 8), props: KERNARG_SEGMENT_PTR as u16, ..Kd::default() };
    let mut d = dispatch(KernelCode::parse(Target::Gfx90a, &kd.bytes()).unwrap());
    d.grid = [64, 5, 1];
    d.workgroup_size = [64, 1, 1];
    let g = d.workgroup([0, 4, 0]).unwrap();
    assert_eq!(&g.waves[0].s[..7], &[0x1000, 0xAAAA, 0, 0, 0, 0, 4]);
}

#[test]
fn work_item_ids_are_packed_and_partial_waves_have_fewer_lanes() {
    let kd = Kd { rsrc2: rsrc2(0, 2 << 11), ..Kd::default() };
    let mut d = dispatch(KernelCode::parse(Target::Gfx90a, &kd.bytes()).unwrap());
    // The last work-group in X has 10 - 8 = 2 columns: 2 * 3 * 4 = 24 work-items.
    d.grid = [10, 3, 4];
    d.workgroup_size = [8, 3, 4];
    let full = d.workgroup([0, 0, 0]).unwrap();
    assert_eq!(full.waves.len(), 2);
    assert_eq!(full.waves[0].exec(), u64::MAX);
    // 96 work-items: the second wave has 32.
    assert_eq!(full.waves[1].exec(), (1 << 32) - 1);
    // Lane 75 of the group is work-item 75 = x 3, y 0, z 3 (8 * 3 per z).
    assert_eq!(full.waves[1].v[0][11], 3 | 3 << 20);
    assert_eq!(full.waves[0].v[0][13], 5 | 1 << 10);
    let part = d.workgroup([1, 0, 0]).unwrap();
    assert_eq!(part.waves.len(), 1);
    assert_eq!(part.waves[0].exec(), (1 << 24) - 1);
    // Work-item 7 of a 2 x 3 x 4 group: x 1, y 0, z 1.
    assert_eq!(part.waves[0].v[0][7], 1 | 1 << 20);
    assert_eq!(part.waves[0].v[0][24], 0);
    // Only X asked for: Y and Z stay out of v0.
    let kd = Kd { rsrc2: rsrc2(0, 0), ..kd };
    d.code = KernelCode::parse(Target::Gfx90a, &kd.bytes()).unwrap();
    assert_eq!(d.workgroup([0, 0, 0]).unwrap().waves[1].v[0][11], 3);
    assert!(matches!(d.workgroup([2, 0, 0]), Err(LaunchError::Geometry(_))));
}

#[test]
fn mode_takes_rsrc1_float_mode_clamp_and_ieee() {
    let kd = Kd {
        // round 32 = 1, round 16/64 = 2, denorm 32 = 0, denorm 16/64 = 3, IEEE, FP16_OVFL.
        rsrc1: 1 << 12 | 2 << 14 | 3 << 18 | 1 << 23 | 1 << 26,
        ..Kd::default()
    };
    let d = dispatch(KernelCode::parse(Target::Gfx90a, &kd.bytes()).unwrap());
    let g = d.workgroup([0, 0, 0]).unwrap();
    assert_eq!(g.waves[0].mode, 1 | 2 << 2 | 3 << 6 | 1 << 9 | 1 << 23);
    assert_eq!(g.waves[0].pc, CODE);
    assert_eq!(g.lds.len(), 0);
}

#[test]
fn dispatch_limits_are_errors() {
    let kd = Kd { group: 1024, private: 16, rsrc2: rsrc2(4, 0), props: PRIVATE_SEGMENT_BUFFER as u16, ..Kd::default() };
    let mut d = dispatch(KernelCode::parse(Target::Gfx90a, &kd.bytes()).unwrap());
    d.workgroup_size = [256, 1, 1];
    d.grid = [256, 1, 1];
    // The packet's size counts the fixed size; the larger one is allocated.
    d.group_segment_size = 4096;
    assert_eq!(d.workgroup([0, 0, 0]).unwrap().lds.len(), 4096);
    d.group_segment_size = 100;
    assert_eq!(d.workgroup([0, 0, 0]).unwrap().lds.len(), 1024);
    // 4 waves of 16 * 64 bytes.
    d.scratch_size = 4095;
    assert_eq!(d.check(), Err(LaunchError::Scratch { need: 4096, waves: 4, have: 4095 }));
    d.scratch_size = 4096;
    d.check().unwrap();
    d.group_segment_size = 65537;
    assert_eq!(d.check(), Err(LaunchError::Lds { need: 65537 }));
    d.group_segment_size = 0;
    d.workgroup_size = [1025, 1, 1];
    assert!(matches!(d.check(), Err(LaunchError::Geometry(_))));
    d.workgroup_size = [0, 1, 1];
    assert!(matches!(d.check(), Err(LaunchError::Geometry(_))));
}

#[test]
fn work_groups_are_numbered_x_fastest() {
    let mut d = dispatch(blit_code());
    d.grid = [130, 3, 2];
    d.workgroup_size = [64, 2, 1];
    assert_eq!(d.workgroup_count(), [3, 2, 2]);
    assert_eq!(d.workgroups(), 12);
    assert_eq!(d.workgroup_id(0), [0, 0, 0]);
    assert_eq!(d.workgroup_id(4), [1, 1, 0]);
    assert_eq!(d.workgroup_id(11), [2, 1, 1]);
}

fn blit_code() -> KernelCode {
    KernelCode::parse(Target::Gfx90a, &blit_header(0)).unwrap()
}

/// The `.rodata` (the kernel descriptor) of `src` assembled by llvm-mc-15 for
/// amdgcn-amd-amdhsa, or `None` when it is missing. The entry offset is a relocation an
/// unlinked object leaves 0.
fn llvm_descriptor(src: &str) -> Option<Vec<u8>> {
    testing::assemble("s_endpgm")?;
    let dir =
        std::env::temp_dir().join(format!("shader-launch-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (s, o, bin) = (dir.join("k.s"), dir.join("k.o"), dir.join("kd.bin"));
    std::fs::write(&s, src).unwrap();
    let run = |cmd: &mut Command| {
        let out = cmd.output().expect("run LLVM tool");
        assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(Command::new("llvm-mc-15")
        .args(["-triple=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-filetype=obj", "-o"])
        .arg(&o)
        .arg(&s));
    run(Command::new("llvm-objcopy-15").args(["-O", "binary", "--only-section=.rodata"]).arg(&o).arg(&bin));
    let kd = std::fs::read(&bin).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some(kd)
}

const LLVM_KERNEL: &str = r#"
.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"
.text
.globl k
.p2align 8
.type k,@function
k:
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_private_segment_buffer 1
  .amdhsa_user_sgpr_dispatch_ptr 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr 13
  .amdhsa_next_free_sgpr 8
  .amdhsa_accum_offset 12
  .amdhsa_group_segment_fixed_size 256
  .amdhsa_private_segment_fixed_size 20
  .amdhsa_kernarg_size 24
  .amdhsa_system_sgpr_private_segment_wavefront_offset 1
  .amdhsa_system_sgpr_workgroup_id_y 1
  .amdhsa_system_vgpr_workitem_id 1
  .amdhsa_float_denorm_mode_32 0
.end_amdhsa_kernel
"#;

#[test]
fn llvm_mc_descriptors_read_as_llvm_wrote_them() {
    let Some(kd) = llvm_descriptor(LLVM_KERNEL) else { return };
    let k = KernelCode::parse(Target::Gfx90a, &kd).unwrap();
    assert_eq!(k.format, Format::Descriptor);
    assert_eq!((k.group_segment_fixed_size, k.private_segment_fixed_size, k.kernarg_size), (256, 20, 24));
    // 13 VGPRs aligned to 4 = 16 (no AGPRs): two granules; AGPRs from 12.
    assert_eq!((k.vgprs, k.agprs), (12, 4));
    assert_eq!(k.properties, PRIVATE_SEGMENT_BUFFER | DISPATCH_PTR | KERNARG_SEGMENT_PTR);
    assert_eq!(k.user_sgpr_count(), 8);
    assert_eq!(k.workitem_id_dims(), 1);
    // Denormals: 32-bit flushed, 16/64 kept; DX10_CLAMP and IEEE are LLVM's defaults.
    assert_eq!(k.mode(), 0xc0 | 1 << 8 | 1 << 9);
    let mut d = dispatch(k);
    d.code.entry_offset = 0x100;
    d.grid = [64, 2, 1];
    d.workgroup_size = [64, 1, 1];
    d.private_segment_size = 20;
    let w = &d.workgroup([0, 1, 0]).unwrap().waves[0];
    // V#, dispatch ptr, kernarg; work-group id X (always on in LLVM's descriptors) and Y; the
    // wave offset (wave 0).
    assert_eq!(&w.s[4..11], &[0x2000, 0xBBBB, 0x1000, 0xAAAA, 0, 1, 0]);
}

/// Runs work-group 2 of a grid of three 100-item groups, kernarg at DATA, to its end: the
/// kernels here store each work-item's id at kernarg + 4 * id and its work-group id at +1024.
/// Checks those stores and that item 100's slot (a masked lane of the last wave) kept its
/// 0xdead; returns the work-group.
fn run_group_two(code: &[u8], kc: KernelCode) -> Workgroup {
    let mut d = dispatch(kc);
    d.kernarg = DATA;
    d.grid = [300, 1, 1];
    d.workgroup_size = [100, 1, 1];
    let mut ram = testing::ram(code);
    for i in 0..256 {
        ram.set_u32(DATA + 4 * i, 0xdead);
        ram.set_u32(DATA + 1024 + 4 * i, 0xdead);
    }
    let mut g = d.workgroup([2, 0, 0]).unwrap();
    let target = d.code.target;
    let mut cache = Code::new(target);
    let mut irq = Vec::new();
    let r = g.run(&mut cache, &mut ram as &mut Ram, d.apertures, 10_000, &mut irq).unwrap();
    assert_eq!(r, Progress::Finished);
    for i in 0..100 {
        assert_eq!(ram.u32_at(DATA + 4 * i), i as u32, "{target:?} item {i}");
        assert_eq!(ram.u32_at(DATA + 1024 + 4 * i), 2, "{target:?} item {i}");
    }
    assert_eq!(ram.u32_at(DATA + 400), 0xdead, "{target:?}: masked lanes stored nothing");
    g
}

#[test]
fn a_workgroup_runs_its_waves_from_the_entry() {
    // Each work-item stores its packed id at kernarg + 4 * id: s[4:5] is the kernarg pointer
    // after the V#, s6 the work-group id.
    let src = "
        v_add_u32 v1, v0, v0
        v_add_u32 v1, v1, v1
        global_store_dword v1, v0, s[4:5]
        v_mov_b32 v2, s6
        global_store_dword v1, v2, s[4:5] offset:1024
    ";
    let Some(code) = testing::assemble(&format!("{src}\ns_endpgm\n")) else { return };
    let kd = Kd {
        kernarg: 8,
        rsrc2: rsrc2(6, RSRC2_WORKGROUP_ID_X),
        props: (PRIVATE_SEGMENT_BUFFER | KERNARG_SEGMENT_PTR) as u16,
        ..Kd::default()
    };
    let g = run_group_two(&code, KernelCode::parse(Target::Gfx90a, &kd.bytes()).unwrap());
    // The second wave's lanes past item 99 are masked.
    assert_eq!(g.waves[1].sreg64(EXEC), (1 << 36) - 1);
}

#[test]
fn a_pm4_dispatch_takes_its_user_sgprs_from_user_data_and_its_code_from_pgm() {
    // kfdtest's shaders: 4 user SGPRs (two pointers), workgroup id X, one work-item per group.
    let rsrc1 = 0x00c0_0084; // FLOAT_MODE 0xc0, 2 SGPR granules, 4 VGPR granules
    let code = KernelCode::from_registers(Target::Gfx90a, rsrc1, rsrc2(4, RSRC2_WORKGROUP_ID_X), 9).unwrap();
    assert_eq!(code.format, Format::Registers);
    let mut d = dispatch(code);
    d.kernel_object = CODE;
    d.grid = [3, 1, 1];
    d.workgroup_size = [1, 1, 1];
    let mut data = [0u32; 16];
    data[..6].copy_from_slice(&[0xA0, 0xA1, 0xB0, 0xB1, 0xC0, 0xC1]);
    d.user_data = Some(data);
    assert_eq!(d.code.entry(d.kernel_object), Ok(CODE), "the PGM address is the entry");
    let g = d.workgroup([2, 0, 0]).unwrap();
    let w = &g.waves[0];
    assert_eq!(w.pc, CODE);
    assert_eq!(&w.s[..5], &[0xA0, 0xA1, 0xB0, 0xB1, 2], "USER_SGPR_COUNT of USER_DATA, then the workgroup id");
    assert_eq!(w.exec(), 1, "one work-item");
}

fn gfx10_kd(rsrc1: u32, props: u32) -> Kd {
    Kd {
        kernarg: 8,
        rsrc1,
        rsrc2: rsrc2(6, RSRC2_WORKGROUP_ID_X | 2 << 11),
        props: (PRIVATE_SEGMENT_BUFFER | KERNARG_SEGMENT_PTR | props) as u16,
        ..Kd::default()
    }
}

#[test]
fn gfx10_wave_size_and_vgprs_come_from_the_kernel_object() {
    // Either gfx10 target in: the kernel object's ENABLE_WAVEFRONT_SIZE32 decides.
    for t in [Target::Gfx1030, Target::Gfx1030W64] {
        let k = KernelCode::parse(t, &gfx10_kd(3, WAVEFRONT_SIZE32).bytes()).unwrap();
        assert_eq!((k.target, k.wave_size), (Target::Gfx1030, 32));
        // Granules of 8 in wave32, no AGPRs.
        assert_eq!((k.vgprs, k.agprs), (32, 0));
        let k = KernelCode::parse(t, &gfx10_kd(3, 0).bytes()).unwrap();
        assert_eq!((k.target, k.wave_size), (Target::Gfx1030W64, 64));
        // Granules of 4 in wave64.
        assert_eq!((k.vgprs, k.agprs), (16, 0));
        // ROCr's blit kernels are wave64 amd_kernel_code_t.
        let k = KernelCode::parse(t, &blit_header(1)).unwrap();
        assert_eq!((k.format, k.target, k.vgprs), (Format::AmdKernelCode, Target::Gfx1030W64, 8));
    }
    // The command processor fills in the scratch V#'s INDEX_STRIDE by wave size on gfx10.
    let rsrc = |props| {
        let mut d = dispatch(KernelCode::parse(Target::Gfx1030, &gfx10_kd(0, props).bytes()).unwrap());
        d.scratch_resource = [1, 2, 3, 0xffff_ffff];
        d.private_segment_buffer()
    };
    assert_eq!(rsrc(WAVEFRONT_SIZE32), [1, 2, 3, !(1 << 21)]);
    assert_eq!(rsrc(0), [1, 2, 3, 0xffff_ffff]);
    let mut d = dispatch(blit_code());
    d.scratch_resource = [1, 2, 3, 0];
    assert_eq!(d.private_segment_buffer(), [1, 2, 3, 0], "gfx90a's V# is the queue's");
    // A PM4 dispatch's target is the caller's (CS_W32_EN).
    let k = KernelCode::from_registers(Target::Gfx1030, 1, 0, 0).unwrap();
    assert_eq!((k.target, k.wave_size, k.vgprs), (Target::Gfx1030, 32, 16));
}

#[test]
fn gfx10_work_item_ids_are_in_v0_v1_v2() {
    let k = KernelCode::parse(Target::Gfx1030, &gfx10_kd(0, WAVEFRONT_SIZE32).bytes()).unwrap();
    let mut d = dispatch(k);
    d.grid = [10, 3, 4];
    d.workgroup_size = [8, 3, 4];
    let g = d.workgroup([0, 0, 0]).unwrap();
    // 96 work-items: three waves of 32.
    assert_eq!(g.waves.len(), 3);
    assert!(g.waves.iter().all(|w| w.exec() == 0xffff_ffff && w.sreg(EXEC + 1) == 0));
    // Work-item 75 (lane 11 of wave 2): x 3, y 0, z 3.
    let w = &g.waves[2];
    assert_eq!((w.v[0][11], w.v[1][11], w.v[2][11]), (3, 0, 3));
    // Work-item 13: x 5, y 1, z 0.
    let w = &g.waves[0];
    assert_eq!((w.v[0][13], w.v[1][13], w.v[2][13]), (5, 1, 0));
    // The partial group: 2 x 3 x 4 = 24 work-items in one wave.
    let part = d.workgroup([1, 0, 0]).unwrap();
    assert_eq!(part.waves[0].exec(), (1 << 24) - 1);
    let w = &part.waves[0];
    assert_eq!((w.v[0][7], w.v[1][7], w.v[2][7]), (1, 0, 1));
}

#[test]
fn gfx10_workgroups_run_in_wave32_and_wave64() {
    // Each work-item stores its id at kernarg + 4 * id and its work-group id at +1024.
    let src = "
        v_lshlrev_b32 v1, 2, v0
        global_store_dword v1, v0, s[4:5]
        v_mov_b32 v2, s6
        global_store_dword v1, v2, s[4:5] offset:1024
        s_endpgm
    ";
    for (target, props) in [(Target::Gfx1030, WAVEFRONT_SIZE32), (Target::Gfx1030W64, 0)] {
        let Some(code) = testing::assemble_for(target, src) else { return };
        let g = run_group_two(&code, KernelCode::parse(Target::Gfx1030, &gfx10_kd(0, props).bytes()).unwrap());
        assert_eq!(g.waves.len(), 100usize.div_ceil(target.wave_size() as usize));
    }
}

#[test]
fn workgroups_running_at_once_get_scratch_slots_of_their_own() {
    // 16 bytes per lane, 128 work-items per group (two waves), room for three groups.
    let kd = Kd {
        private: 16,
        rsrc2: rsrc2(6, RSRC2_WORKGROUP_ID_X | RSRC2_PRIVATE_SEGMENT_WAVE_OFFSET),
        props: (PRIVATE_SEGMENT_BUFFER | KERNARG_SEGMENT_PTR) as u16,
        ..Kd::default()
    };
    let mut d = dispatch(KernelCode::parse(Target::Gfx90a, &kd.bytes()).unwrap());
    d.grid = [1024, 1, 1];
    d.workgroup_size = [128, 1, 1];
    let wave_bytes = d.scratch_wave_bytes();
    d.scratch_size = 3 * 2 * wave_bytes;
    assert_eq!((d.waves_per_group(), d.scratch_group_slots()), (2, 3));
    let g = d.workgroup_in_slot([5, 0, 0], 2).unwrap();
    // The wave offset follows the workgroup id (s6) after the six user SGPRs.
    let offsets: Vec<u64> = g.waves.iter().map(|w| u64::from(w.s[7])).collect();
    assert_eq!(offsets, [4 * wave_bytes, 5 * wave_bytes], "slot 2 holds wave slots 4 and 5");
    assert!(d.workgroup_in_slot([0, 0, 0], 3).is_err(), "no fourth slot");
}
