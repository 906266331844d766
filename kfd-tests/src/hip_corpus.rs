//! The HIP corpus: the programs in kfd-tests/hip/*.hip, built with Debian's hipcc (5.2.3, over
//! clang-15) once per GPU target, with their device code objects extracted beside them, all under
//! `target/hip-corpus/<target>/`:
//! - `<name>`: the program (host code and a fat binary holding the one target's code object);
//! - `<name>.co`: that code object (an AMDGPU ELF), for tests that read GFX code (the decoder's
//!   differential test against llvm-objdump-15);
//! - `<name>.stamp`: the fingerprint of what built them (source, shared header, flags, target,
//!   hipcc); a program is rebuilt only when its fingerprint changes.
//!
//! A program is compiled with `-O2` unless its first line says otherwise (`// build: -O0`).
//! hipcc 5.2.3 embeds the device code in the `.hip_fatbin` section as a clang offload bundle;
//! `objcopy` dumps the section and `clang-offload-bundler` (clang-tools-15, which hipcc pulls in)
//! unbundles the target's code object.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The GPU targets every program is built for (the device's gfx90a and gfx1030 profiles).
pub const TARGETS: [&str; 2] = ["gfx90a", "gfx1030"];

/// clang-tools-15's bundler (not on PATH on Debian).
const BUNDLER: &str = "/usr/lib/llvm-15/bin/clang-offload-bundler";
/// The header every program includes.
const SHARED_HEADER: &str = "check.h";
/// ELF `e_machine` of AMDGPU code objects.
const EM_AMDGPU: u16 = 224;

/// A program of the corpus.
#[derive(Debug, Clone)]
pub struct Program {
    pub name: String,
    pub source: PathBuf,
    /// hipcc flags from its `// build:` line, else `-O2`.
    pub flags: Vec<String>,
}

/// A program built for one target.
#[derive(Debug, Clone)]
pub struct Built {
    pub name: String,
    pub target: &'static str,
    pub exe: PathBuf,
    pub code_object: PathBuf,
    /// Whether this call compiled it (false: the cached build was current).
    pub compiled: bool,
    pub took: Duration,
}

/// Why a build failed.
#[derive(Debug)]
pub enum Error {
    Io {
        what: String,
        error: std::io::Error,
    },
    /// A tool ran and failed: its command line and output.
    Tool {
        command: String,
        output: String,
    },
    /// What a tool produced is not what it should be.
    Output {
        what: String,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io { what, error } => write!(f, "{what}: {error}"),
            Error::Tool { command, output } => write!(f, "`{command}` failed:\n{output}"),
            Error::Output { what } => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |error| Error::Io { what, error }
}

/// kfd-tests/hip.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hip")
}

/// `target/hip-corpus` of the workspace this test binary was built in (its profile directory's
/// parent, so `CARGO_TARGET_DIR` is honoured).
pub fn out_dir() -> PathBuf {
    let profile = cuse_kfd_run::stage::profile_dir().expect("the test binary's target/<profile>");
    profile.parent().unwrap_or(&profile).join("hip-corpus")
}

/// The programs of the corpus, sorted by name.
pub fn programs() -> Result<Vec<Program>> {
    let dir = source_dir();
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(io(dir.display().to_string()))? {
        let path = entry.map_err(io(dir.display().to_string()))?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("hip") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(io(path.display().to_string()))?;
        let flags = match text.lines().next().and_then(|l| l.strip_prefix("// build:")) {
            Some(f) => f.split_whitespace().map(String::from).collect(),
            None => vec!["-O2".to_string()],
        };
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        out.push(Program { name, source: path, flags });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// FNV-1a, 64 bits: a fingerprint that stays the same across Rust releases.
fn fnv1a(hash: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *hash ^= u64::from(*b);
        *hash = hash.wrapping_mul(0x100_0000_01B3);
    }
}

/// What a build of `p` for `target` depends on.
fn fingerprint(p: &Program, target: &str) -> Result<String> {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for file in [p.source.clone(), source_dir().join(SHARED_HEADER)] {
        fnv1a(&mut h, &std::fs::read(&file).map_err(io(file.display().to_string()))?);
        fnv1a(&mut h, &[0]);
    }
    let hipcc = std::fs::canonicalize(which("hipcc")?).map_err(io("hipcc"))?;
    let mut s = String::new();
    let _ = write!(s, "{h:016x} {target} {} {}", p.flags.join(" "), hipcc.display());
    Ok(s)
}

fn which(tool: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|p| p.is_file()).ok_or_else(|| Error::Output {
        what: format!("{tool} is not installed (Debian packages hipcc, libamdhip64-dev, rocm-device-libs; cargo xtask test installs them)"),
    })
}

fn run(cmd: &mut Command) -> Result<()> {
    let command = format!("{cmd:?}");
    let out = cmd.output().map_err(io(command.clone()))?;
    if out.status.success() {
        return Ok(());
    }
    let output = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Err(Error::Tool { command, output })
}

/// Builds `p` for `target` under `out/<target>/`, unless the build there is current.
pub fn build(p: &Program, target: &'static str, out: &Path) -> Result<Built> {
    let t0 = Instant::now();
    let dir = out.join(target);
    std::fs::create_dir_all(&dir).map_err(io(dir.display().to_string()))?;
    let exe = dir.join(&p.name);
    let code_object = dir.join(format!("{}.co", p.name));
    let stamp = dir.join(format!("{}.stamp", p.name));
    let print = fingerprint(p, target)?;
    let current = std::fs::read_to_string(&stamp).is_ok_and(|s| s == print) && exe.is_file() && code_object.is_file();
    if !current {
        let _ = std::fs::remove_file(&stamp);
        // hipcc 5.2.3 (its clang) leaves two empty `<name>-XXXXXX` directories in TMPDIR on
        // every build: it gets a TMPDIR of its own, removed after it.
        let tmp = dir.join(format!("{}.tmp", p.name));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(io(tmp.display().to_string()))?;
        let built = run(Command::new("hipcc")
            .env("TMPDIR", &tmp)
            .arg(format!("--offload-arch={target}"))
            .args(&p.flags)
            .arg("-o")
            .arg(&exe)
            .arg(&p.source));
        let _ = std::fs::remove_dir_all(&tmp);
        built?;
        let bundle = dir.join(format!("{}.hipfb", p.name));
        let _ = std::fs::remove_file(&bundle);
        run(Command::new("objcopy").arg(format!("--dump-section=.hip_fatbin={}", bundle.display())).arg(&exe))?;
        if !bundle.is_file() {
            return Err(Error::Output {
                what: format!("{} has no .hip_fatbin section: {} defines no kernel", exe.display(), p.name),
            });
        }
        run(Command::new(BUNDLER)
            .args(["--type=o", "--unbundle"])
            .arg(format!("--targets=hipv4-amdgcn-amd-amdhsa--{target}"))
            .arg(format!("--input={}", bundle.display()))
            .arg(format!("--output={}", code_object.display())))?;
        let _ = std::fs::remove_file(&bundle);
        check_code_object(&code_object, target)?;
        std::fs::write(&stamp, &print).map_err(io(stamp.display().to_string()))?;
    }
    Ok(Built { name: p.name.clone(), target, exe, code_object, compiled: !current, took: t0.elapsed() })
}

/// The build of `p` for `target` under `out/<target>/`, which must be current: for a machine
/// that only runs the corpus (the device tier's VM sees the target directory read-only and has
/// no time to compile), after the host built it.
pub fn prebuilt(p: &Program, target: &'static str, out: &Path) -> Result<Built> {
    let dir = out.join(target);
    let (exe, code_object) = (dir.join(&p.name), dir.join(format!("{}.co", p.name)));
    let stamp = std::fs::read_to_string(dir.join(format!("{}.stamp", p.name))).unwrap_or_default();
    if stamp != fingerprint(p, target)? || !exe.is_file() || !code_object.is_file() {
        return Err(Error::Output {
            what: format!("{} for {target} is not built, or older than its source, under {}", p.name, dir.display()),
        });
    }
    Ok(Built { name: p.name.clone(), target, exe, code_object, compiled: false, took: Duration::ZERO })
}

/// `EF_AMDGPU_MACH` of `target` (LLVM AMDGPUUsage, "AMDGPU ELF Header").
pub fn elf_mach(target: &str) -> Option<u32> {
    match target {
        "gfx90a" => Some(0x3F),
        "gfx1030" => Some(0x36),
        _ => None,
    }
}

/// The code object is a 64-bit little-endian AMDGPU ELF for `target`.
pub fn check_code_object(path: &Path, target: &str) -> Result<()> {
    let elf = std::fs::read(path).map_err(io(path.display().to_string()))?;
    let bad = |why: String| Error::Output { what: format!("{}: {why}", path.display()) };
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return Err(bad("not a 64-bit little-endian ELF".into()));
    }
    let machine = u16::from_le_bytes([elf[18], elf[19]]);
    let flags = u32::from_le_bytes(elf[48..52].try_into().expect("4 bytes"));
    if machine != EM_AMDGPU {
        return Err(bad(format!("e_machine {machine}, not AMDGPU ({EM_AMDGPU})")));
    }
    if Some(flags & 0xFF) != elf_mach(target) {
        return Err(bad(format!("e_flags {flags:#x} name another processor than {target}")));
    }
    Ok(())
}

/// Builds every program for every target with up to `jobs` hipcc processes at once.
pub fn build_all(out: &Path, jobs: usize) -> Result<Vec<Built>> {
    let work: Vec<(Program, &'static str, PathBuf)> =
        programs()?.into_iter().flat_map(|p| TARGETS.iter().map(move |t| (p.clone(), *t, out.to_path_buf()))).collect();
    build_many(&work, jobs)
}

/// The optimisation levels the coverage table compiles the corpus at (issue 14: what clang-15
/// emits at -O0, -O2 and -O3).
pub const LEVELS: [&str; 3] = ["-O0", "-O2", "-O3"];

/// `p` built at `level` instead of its own optimisation level, with its other flags.
pub fn at_level(p: &Program, level: &str) -> Program {
    let mut flags: Vec<String> = p.flags.iter().filter(|f| !f.starts_with("-O")).cloned().collect();
    flags.insert(0, level.to_string());
    Program { flags, ..p.clone() }
}

/// Where the build of `p` at `level` lives: the program's own build (`out/<target>/`) when that is
/// its level, else `out/<level>/<target>/` (so the default builds are not compiled twice).
pub fn level_dir(p: &Program, level: &str, out: &Path) -> PathBuf {
    if at_level(p, level).flags == p.flags {
        out.to_path_buf()
    } else {
        out.join(level.trim_start_matches('-'))
    }
}

/// Builds every program for every target at every level of [`LEVELS`], with up to `jobs` hipcc
/// processes at once; each result with its level.
pub fn build_levels(out: &Path, jobs: usize) -> Result<Vec<(&'static str, Built)>> {
    let mut work = Vec::new();
    let mut levels = Vec::new();
    for p in programs()? {
        for level in LEVELS {
            for t in TARGETS {
                work.push((at_level(&p, level), t, level_dir(&p, level, out)));
                levels.push(level);
            }
        }
    }
    Ok(levels.into_iter().zip(build_many(&work, jobs)?).collect())
}

/// Builds each (program, target, output directory) with up to `jobs` hipcc processes at once, in
/// order.
fn build_many(work: &[(Program, &'static str, PathBuf)], jobs: usize) -> Result<Vec<Built>> {
    let next = AtomicUsize::new(0);
    let mut results: Vec<(usize, Result<Built>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..jobs.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((p, t, out)) = work.get(i) else { break mine };
                        mine.push((i, build(p, t, out)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a build job panicked")).collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}
