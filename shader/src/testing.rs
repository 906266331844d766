//! Test support: assemble gfx90a (or gfx1030) source with Debian's llvm-mc-15 and run it on one
//! wave.
//!
//! Without llvm-mc-15 the tests that need it say so and pass, except under CI, where they fail.

use crate::exec::{step, Apertures, Code, Cx, Fault, Flow};
use crate::isa::Target;
use crate::mem::Ram;
use crate::wave::Wave;
use std::process::Command;

/// Where test code is loaded.
pub const CODE: u64 = 0x10_0000;
/// The start of the test data area (1 MiB after the code).
pub const DATA: u64 = CODE + 0x10_0000;
/// The test memory's size: code and data.
pub const RAM_SIZE: usize = 0x20_0000;

fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// The machine code of `src` (gfx90a assembly), or `None` when llvm-mc-15 is missing.
pub fn assemble(src: &str) -> Option<Vec<u8>> {
    assemble_for(Target::Gfx90a, src)
}

/// The machine code of `src` assembled for `target` (its -mcpu and -mattr), or `None` when
/// llvm-mc-15 is missing.
pub fn assemble_for(target: Target, src: &str) -> Option<Vec<u8>> {
    let have = Command::new("llvm-mc-15").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have {
        assert!(!is_ci(), "llvm-mc-15 missing: CI must not skip the shader core's tests");
        eprintln!("SKIPPED: llvm-mc-15 missing (apt-get install llvm-15)");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("shader-asm-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let s = dir.join("t.s");
    let o = dir.join("t.o");
    let bin = dir.join("t.bin");
    std::fs::write(&s, src).expect("write source");
    let run = |cmd: &mut Command| {
        let out = cmd.output().expect("run LLVM tool");
        assert!(out.status.success(), "{cmd:?}: {}\n{src}", String::from_utf8_lossy(&out.stderr));
    };
    let mut mc = Command::new("llvm-mc-15");
    mc.args(["-arch=amdgcn", &format!("-mcpu={}", target.mcpu()), "-filetype=obj"]);
    if let Some(attr) = target.mattr() {
        mc.arg(format!("-mattr={attr}"));
    }
    run(mc.arg("-o").arg(&o).arg(&s));
    run(Command::new("llvm-objcopy-15").args(["-O", "binary", "--only-section=.text"]).arg(&o).arg(&bin));
    let code = std::fs::read(&bin).expect("read code");
    let _ = std::fs::remove_dir_all(&dir);
    Some(code)
}

/// A wave64 with every lane enabled and 256 VGPRs and AGPRs, at [`CODE`].
pub fn wave() -> Wave {
    wave_for(Target::Gfx90a)
}

/// A wave of `target`'s size with every lane enabled (exec_hi zero in wave32) and 256 VGPRs
/// (and 256 AGPRs on gfx90a; gfx10 has none), at [`CODE`].
pub fn wave_for(target: Target) -> Wave {
    let agprs = if target.is_gfx10() { 0 } else { 256 };
    let mut w = Wave::new(target.wave_size(), 256, agprs);
    w.set_exec(u64::MAX);
    w.pc = CODE;
    w
}

/// Memory with `code` at [`CODE`].
pub fn ram(code: &[u8]) -> Ram {
    let mut ram = Ram::new(CODE, RAM_SIZE);
    ram.bytes[..code.len()].copy_from_slice(code);
    ram
}

/// Runs `w` until s_endpgm (at most 1,000,000 instructions).
pub fn run_wave(w: &mut Wave, ram: &mut Ram, lds: &mut [u8]) -> Result<(), Fault> {
    run_wave_for(Target::Gfx90a, w, ram, lds)
}

/// Like [`run_wave`], decoding for `target`.
pub fn run_wave_for(target: Target, w: &mut Wave, ram: &mut Ram, lds: &mut [u8]) -> Result<(), Fault> {
    let mut code = Code::new(target);
    let mut cx = Cx { mem: ram, lds, apertures: Apertures::default(), gws: None };
    for _ in 0..1_000_000 {
        if step(w, &mut code, &mut cx)? == Flow::End {
            return Ok(());
        }
    }
    panic!("no s_endpgm within 1,000,000 instructions");
}

/// Assembles `src` (s_endpgm appended), runs it on [`wave`] after `setup`, and returns the wave
/// and memory; `None` when llvm-mc-15 is missing.
pub fn run(src: &str, setup: impl FnOnce(&mut Wave, &mut Ram)) -> Option<(Wave, Ram)> {
    run_on(Target::Gfx90a, src, setup)
}

/// Like [`run`], for `target` (assembled and decoded for it, on [`wave_for`]).
pub fn run_on(target: Target, src: &str, setup: impl FnOnce(&mut Wave, &mut Ram)) -> Option<(Wave, Ram)> {
    let code = assemble_for(target, &format!("{src}\ns_endpgm\n"))?;
    let mut w = wave_for(target);
    let mut ram = ram(&code);
    setup(&mut w, &mut ram);
    let mut lds = vec![0u8; 65536];
    if let Err(f) = run_wave_for(target, &mut w, &mut ram, &mut lds) {
        panic!("{f}\n{src}");
    }
    Some((w, ram))
}

/// Like [`run`], but returns the fault the program must stop with.
pub fn run_fault(src: &str, setup: impl FnOnce(&mut Wave, &mut Ram)) -> Option<Fault> {
    run_fault_on(Target::Gfx90a, src, setup)
}

/// Like [`run_fault`], for `target`.
pub fn run_fault_on(target: Target, src: &str, setup: impl FnOnce(&mut Wave, &mut Ram)) -> Option<Fault> {
    let code = assemble_for(target, &format!("{src}\ns_endpgm\n"))?;
    let mut w = wave_for(target);
    let mut ram = ram(&code);
    setup(&mut w, &mut ram);
    let mut lds = vec![0u8; 65536];
    Some(run_wave_for(target, &mut w, &mut ram, &mut lds).expect_err("the program must fault"))
}
