//! gfx90a code objects built at bench time with Debian's LLVM 15 (llvm-mc-15 or clang-15, then
//! ld.lld-15, symbols by llvm-nm-15), laid out as ROCr's loader does: every PT_LOAD segment at
//! its virtual address from the start of one buffer, so the kernel descriptors' entry offsets
//! hold.

use std::path::{Path, PathBuf};
use std::process::Command;
use thunk::memory::{GpuMemory, Kind};
use thunk::Kfd;

/// Every tool the builds run.
pub const TOOLS: [&str; 4] = ["llvm-mc-15", "clang-15", "ld.lld-15", "llvm-nm-15"];

/// The tools of [`TOOLS`] that do not run here.
pub fn missing_tools() -> Vec<&'static str> {
    TOOLS
        .into_iter()
        .filter(|t| Command::new(t).arg("--version").output().map(|o| !o.status.success()).unwrap_or(true))
        .collect()
}

/// A linked code object: its loadable image (addresses from 0) and its symbols.
pub struct CodeObject {
    image: Vec<u8>,
    symbols: Vec<(String, u64)>,
}

/// A code object in GPU memory.
pub struct Loaded {
    mem: GpuMemory,
    symbols: Vec<(String, u64)>,
}

impl CodeObject {
    /// Copies the image into a fresh GTT buffer of `kfd`'s GPU.
    pub fn load(&self, kfd: &Kfd, gpu: u32) -> Result<Loaded, String> {
        let mem = kfd.alloc(gpu, self.image.len() as u64, Kind::Gtt).map_err(|e| format!("allocating code: {e}"))?;
        mem.write(0, &self.image);
        Ok(Loaded { mem, symbols: self.symbols.clone() })
    }
}

impl Loaded {
    /// The GPU address of kernel `name`'s descriptor (its `name.kd` symbol).
    pub fn kernel_object(&self, name: &str) -> Result<u64, String> {
        let kd = format!("{name}.kd");
        let (_, off) = self.symbols.iter().find(|(n, _)| *n == kd).ok_or(format!("no symbol {kd}"))?;
        Ok(self.mem.addr(*off))
    }
}

fn run(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(out.stdout)
}

/// A scratch directory that is removed when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new(name: &str) -> Result<WorkDir, String> {
        let dir = std::env::temp_dir().join(format!("kfd-bench-co-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        Ok(WorkDir(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Assembles gfx90a `src` (with its `.amdhsa_kernel` blocks) and links it.
pub fn assemble(name: &str, src: &str) -> Result<CodeObject, String> {
    let dir = WorkDir::new(name)?;
    let (s, o) = (dir.0.join("k.s"), dir.0.join("k.o"));
    std::fs::write(&s, src).map_err(|e| format!("writing {}: {e}", s.display()))?;
    run(Command::new("llvm-mc-15")
        .args(["-triple=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-filetype=obj", "-o"])
        .arg(&o)
        .arg(&s))?;
    link(&dir.0, &o)
}

/// Compiles OpenCL C `src` for gfx90a at -O2 (no device libraries) and links it.
pub fn opencl(name: &str, src: &str) -> Result<CodeObject, String> {
    let dir = WorkDir::new(name)?;
    let (c, o) = (dir.0.join("k.cl"), dir.0.join("k.o"));
    std::fs::write(&c, src).map_err(|e| format!("writing {}: {e}", c.display()))?;
    run(Command::new("clang-15")
        .args(["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib", "-O2"])
        .args(["-c", "-o"])
        .arg(&o)
        .arg(&c))?;
    link(&dir.0, &o)
}

fn link(dir: &Path, o: &Path) -> Result<CodeObject, String> {
    let so = dir.join("k.so");
    run(Command::new("ld.lld-15").args(["-shared", "-o"]).arg(&so).arg(o))?;
    let elf = std::fs::read(&so).map_err(|e| format!("reading {}: {e}", so.display()))?;
    let nm = run(Command::new("llvm-nm-15").arg("--defined-only").arg(&so))?;
    let symbols = String::from_utf8_lossy(&nm)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let _kind = f.next()?;
            Some((f.next()?.to_string(), addr))
        })
        .collect();
    Ok(CodeObject { image: load_image(&elf)?, symbols })
}

/// The PT_LOAD segments of an ELF64 file laid out at their virtual addresses (ELF64 header:
/// e_phoff at 0x20, e_phentsize at 0x36, e_phnum at 0x38; program header: p_type 0, p_offset 8,
/// p_vaddr 16, p_filesz 32, p_memsz 40).
fn load_image(elf: &[u8]) -> Result<Vec<u8>, String> {
    let bytes = |at: usize, n: usize| elf.get(at..at + n).ok_or(format!("ELF truncated at {at:#x}"));
    let u16_at = |at| Ok::<_, String>(u16::from_le_bytes(bytes(at, 2)?.try_into().expect("2 bytes")) as usize);
    let u32_at = |at| Ok::<_, String>(u32::from_le_bytes(bytes(at, 4)?.try_into().expect("4 bytes")));
    let u64_at = |at| Ok::<_, String>(u64::from_le_bytes(bytes(at, 8)?.try_into().expect("8 bytes")) as usize);
    if bytes(0, 4)? != b"\x7fELF" {
        return Err("the linker's output is not ELF".into());
    }
    let (phoff, phentsize, phnum) = (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?);
    let mut image = Vec::new();
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32_at(ph)? != 1 {
            continue;
        }
        let (offset, vaddr, filesz, memsz) = (u64_at(ph + 8)?, u64_at(ph + 16)?, u64_at(ph + 32)?, u64_at(ph + 40)?);
        if image.len() < vaddr + memsz {
            image.resize(vaddr + memsz, 0);
        }
        image[vaddr..vaddr + filesz].copy_from_slice(bytes(offset, filesz)?);
    }
    Ok(image)
}
