//! Code objects built at test time with Debian's LLVM 15 (llvm-mc-15 or clang-15, then
//! ld.lld-15) and loaded into GPU memory as ROCr's loader would: every PT_LOAD segment at its
//! virtual address from the start of one buffer, so the kernel descriptors' entry offsets hold.
//!
//! Without the tools the tests that need them say so and pass, except under CI (`CI` set to
//! anything but empty, `false` or `0`), where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use thunk::memory::{GpuMemory, Kind};
use thunk::Kfd;

fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Whether every tool in `tools` runs; otherwise skips (or fails under CI).
pub fn have(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| Command::new(t).arg("--version").output().map(|o| !o.status.success()).unwrap_or(true))
        .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!("{} missing (apt-get install clang-15 llvm-15 lld-15)", missing.join(", "));
    assert!(!is_ci(), "{msg}: CI must not skip the GFX dispatch tests");
    eprintln!("SKIPPED: {msg}");
    false
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// A linked code object: its loadable image (addresses from 0) and its symbols.
pub struct CodeObject {
    pub image: Vec<u8>,
    pub symbols: Vec<(String, u64)>,
}

impl CodeObject {
    pub fn symbol(&self, name: &str) -> u64 {
        self.symbols.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no symbol {name}")).1
    }

    /// Copies the image into a fresh GTT buffer of `kfd`'s GPU.
    pub fn load(&self, kfd: &Kfd, gpu: u32) -> Loaded {
        let size = (self.image.len() as u64).next_multiple_of(4096);
        let mem = kfd.alloc(gpu, size, Kind::Gtt).expect("allocating the code object");
        mem.write(0, &self.image);
        Loaded { mem }
    }
}

/// A code object in GPU memory.
pub struct Loaded {
    pub mem: GpuMemory,
}

/// One gfx90a kernel `k` with `body`, then s_endpgm: its kernarg pointer in s[4:5] (after the
/// private segment buffer), its work-group id X in s6, room for v0..v7 and s0..s9, and
/// `directives` (more `.amdhsa_` lines) in its descriptor.
pub fn kernel_with(body: &str, directives: &str) -> String {
    format!(
        r#"
.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"
.text
.globl k
.p2align 8
.type k,@function
k:
{body}
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_private_segment_buffer 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
{directives}
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 10
  .amdhsa_accum_offset 8
.end_amdhsa_kernel
"#
    )
}

/// [`kernel_with`] with no more directives.
pub fn kernel(body: &str) -> String {
    kernel_with(body, "")
}

/// The body of a kernel whose work-groups (one work-item each) meet: each adds 1 to the count
/// at the address in the SGPR pair `count`, then polls it until it reaches 2 (another
/// work-group runs at the same time) or 20,000 polls (160,000 instructions, more than a shader
/// worker's slice) have passed, in which case it adds 1 to the timeouts at `count` + 4.
pub fn rendezvous(count: &str) -> String {
    format!(
        "  v_mov_b32 v0, 0
  v_mov_b32 v1, 1
  global_atomic_add v0, v1, {count}
  s_mov_b32 s8, 0
poll:
  global_load_dword v2, v0, {count} glc
  s_waitcnt vmcnt(0)
  v_readfirstlane_b32 s9, v2
  s_cmp_ge_u32 s9, 2
  s_cbranch_scc1 met
  s_add_u32 s8, s8, 1
  s_cmp_lt_u32 s8, 20000
  s_cbranch_scc1 poll
  global_atomic_add v0, v1, {count} offset:4
met:"
    )
}

/// A directory of its own for one build of `name`: tests run in parallel threads, and two of
/// them may build programs of one name (the first to finish removed the other's files).
fn work_dir(name: &str) -> PathBuf {
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("cuse-kfd-co-{}-{n}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Assembles gfx90a `src` (with its `.amdhsa_kernel` blocks) and links it; `None` (skipped)
/// without llvm-mc-15 and ld.lld-15.
pub fn assemble(name: &str, src: &str) -> Option<CodeObject> {
    assemble_for(name, src, "gfx90a")
}

/// [`assemble`] for the processor `mcpu` ("gfx1030" assembles wave32 code).
pub fn assemble_for(name: &str, src: &str, mcpu: &str) -> Option<CodeObject> {
    if !have(&["llvm-mc-15", "ld.lld-15"]) {
        return None;
    }
    let dir = work_dir(name);
    let (s, o) = (dir.join("k.s"), dir.join("k.o"));
    std::fs::write(&s, src).unwrap();
    run(Command::new("llvm-mc-15")
        .args(["-triple=amdgcn-amd-amdhsa", &format!("-mcpu={mcpu}"), "-filetype=obj", "-o"])
        .arg(&o)
        .arg(&s));
    Some(link(&dir, &o))
}

/// Compiles OpenCL C `src` for gfx90a (no device libraries) and links it; `None` (skipped)
/// without clang-15 and ld.lld-15.
pub fn opencl(name: &str, src: &str) -> Option<CodeObject> {
    opencl_for(name, src, "gfx90a", false)
}

/// [`opencl`] for `mcpu` ("gfx1030" compiles wave32 code; `wave64` adds -mwavefrontsize64).
pub fn opencl_for(name: &str, src: &str, mcpu: &str, wave64: bool) -> Option<CodeObject> {
    if !have(&["clang-15", "ld.lld-15"]) {
        return None;
    }
    let dir = work_dir(name);
    let (c, o) = (dir.join("k.cl"), dir.join("k.o"));
    std::fs::write(&c, src).unwrap();
    run(Command::new("clang-15")
        .args([
            "-x",
            "cl",
            "-cl-std=CL2.0",
            "-target",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-nogpulib",
            "-O2",
            "-c",
        ])
        .args(wave64.then_some("-mwavefrontsize64"))
        .arg("-o")
        .arg(&o)
        .arg(&c));
    Some(link(&dir, &o))
}

fn link(dir: &Path, o: &Path) -> CodeObject {
    let so = dir.join("k.so");
    run(Command::new("ld.lld-15").args(["-shared", "-o"]).arg(&so).arg(o));
    let elf = std::fs::read(&so).unwrap();
    let nm = run(Command::new("llvm-nm-15").arg("--defined-only").arg(&so));
    let _ = std::fs::remove_dir_all(dir);
    let symbols = String::from_utf8(nm)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let _kind = f.next()?;
            Some((f.next()?.to_string(), addr))
        })
        .collect();
    CodeObject { image: load_image(&elf), symbols }
}

/// The PT_LOAD segments of an ELF64 file laid out at their virtual addresses (ELF64 header:
/// e_phoff at 0x20, e_phentsize at 0x36, e_phnum at 0x38; program header: p_type 0, p_offset 8,
/// p_vaddr 16, p_filesz 32, p_memsz 40).
fn load_image(elf: &[u8]) -> Vec<u8> {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize;
    assert_eq!(&elf[..4], b"\x7fELF");
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    let mut image = Vec::new();
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap()) != 1 {
            continue;
        }
        let (offset, vaddr, filesz, memsz) = (u64_at(ph + 8), u64_at(ph + 16), u64_at(ph + 32), u64_at(ph + 40));
        if image.len() < vaddr + memsz {
            image.resize(vaddr + memsz, 0);
        }
        image[vaddr..vaddr + filesz].copy_from_slice(&elf[offset..offset + filesz]);
    }
    image
}
