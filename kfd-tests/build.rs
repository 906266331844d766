//! Builds C programs on the host, so that the real-device tier's VM (whose view of the target
//! directory is read-only, and where cc runs ~50x slower under TCG) only runs them:
//!
//! - c/rocr/*.c (kfd-tests/tests/rocr_programs.rs) against Debian's hsa.h, linked with the real
//!   libhsa-runtime64, into $OUT_DIR/rocr;
//! - c/hsakmt/*.c (kfd-tests/tests/hsakmt_programs.rs) against Debian's hsakmt.h (/usr/include),
//!   linked with the real libhsakmt (5.2.3), into $OUT_DIR/hsakmt;
//! - the shim's programs, rocr-shim/tests/c (kfd-tests/tests/shim_programs.rs), in both modes
//!   of its check.h: for the shim into $OUT_DIR/shim-programs/shim, and with
//!   -DCUSE_KFD_REAL_ROCR, linked with the real ROCr, into $OUT_DIR/shim-programs/rocr.
//!
//! The shim's library is a cdylib this build script cannot wait for, so programs built for it
//! are linked against a stub with the same soname that defines each function they import (from
//! `nm -u`); at run time LD_LIBRARY_PATH names the staged shim. A program that does not build
//! (no cc, no libhsa-runtime-dev) is not a build failure: the output of the failing step goes to
//! <name>.err, which the test that runs it reports.

#[path = "src/shim_programs.rs"]
mod shim_programs;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

const CFLAGS: [&str; 7] = ["-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function"];

fn main() {
    println!("cargo:rerun-if-changed=c/rocr");
    println!("cargo:rerun-if-changed=c/hsakmt");
    println!("cargo:rerun-if-changed=src/shim_programs.rs");
    println!("cargo:rerun-if-changed=../rocr-shim/tests/c");
    println!("cargo:rerun-if-changed=../rocr-shim/include");
    println!("cargo:rerun-if-env-changed=CC");
    // The system's headers (their -dev packages bring the libraries): a build made before
    // `cargo xtask test` installed them is redone once they are there. Cargo reruns a build
    // script while a path it names is missing, so until then every build retries (a failed cc
    // per program).
    for header in ["/usr/include/hsa/hsa.h", "/usr/include/hsakmt.h"] {
        println!("cargo:rerun-if-changed={header}");
    }
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    rocr_programs(&cc, &out.join("rocr"));
    hsakmt_programs(&cc, &out.join("hsakmt"));
    shim_programs(&cc, &out.join("shim-programs"));
}

/// Runs `program args`; Err with what it printed when it fails.
fn run(program: &OsStr, args: &[OsString]) -> Result<String, String> {
    let shown = || format!("{} {}", program.to_string_lossy(), args.join(OsStr::new(" ")).to_string_lossy());
    match Command::new(program).args(args).output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => Err(format!(
            "{} failed ({}):\n{}{}",
            shown(),
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!("running {}: {e} (install gcc and binutils)", shown())),
    }
}

fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(items: I) -> Vec<OsString> {
    items.into_iter().map(Into::into).collect()
}

/// Removes what an earlier build left of program `name` in `dir`: a stale program must not run.
fn clean(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (exe, err) = (dir.join(name), dir.join(format!("{name}.err")));
    let _ = std::fs::remove_file(&exe);
    let _ = std::fs::remove_file(&err);
    (exe, err)
}

fn record(what: &str, name: &str, err: &Path, failure: String) {
    println!("cargo:warning={what} {name} did not build; its test will fail (see {})", err.display());
    std::fs::write(err, failure).expect("write the compiler's output");
}

/// Each c/rocr/<name>.c alone (with its common.h), against Debian's hsa.h, linked with the real ROCr.
fn rocr_programs(cc: &OsStr, out: &Path) {
    let mut flags = args(CFLAGS.iter().filter(|f| **f != "-Wno-unused-function"));
    flags.push("-I/usr/include/hsa".into());
    c_programs(cc, "c/rocr", out, "the ROCr program", &flags, &["-lhsa-runtime64", "-lpthread"]);
}

/// Each c/hsakmt/<name>.c alone (with its common.h), linked with the system's libhsakmt; hsakmt.h
/// is /usr/include/hsakmt.h in Debian's libhsakmt-dev 5.2.3.
fn hsakmt_programs(cc: &OsStr, out: &Path) {
    c_programs(cc, "c/hsakmt", out, "the libhsakmt program", &args(CFLAGS), &["-lhsakmt"]);
}

/// Compiles each `dir`/<name>.c into `out`/<name> with `flags`, linked with the system's `libs`;
/// one that fails leaves `out`/<name>.err.
fn c_programs(cc: &OsStr, dir: &str, out: &Path, what: &str, flags: &[OsString], libs: &[&str]) {
    std::fs::create_dir_all(out).unwrap_or_else(|e| panic!("create {}: {e}", out.display()));
    let mut sources: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    for file in sources {
        let name = file.file_stem().expect("a file name").to_string_lossy().into_owned();
        let (exe, err) = clean(out, &name);
        let mut a = flags.to_vec();
        a.extend(args([file.as_os_str(), "-o".as_ref(), exe.as_os_str()]));
        a.push("-L/usr/lib/x86_64-linux-gnu".into());
        a.extend(args(libs));
        if let Err(failure) = run(cc, &a) {
            record(what, &name, &err, failure);
        }
    }
}

fn shim_programs(cc: &OsStr, out: &Path) {
    let shim = Path::new("../rocr-shim");
    let src = shim.join("tests/c");
    let (shim_dir, rocr_dir, obj_dir, stub_dir) =
        (out.join("shim"), out.join("rocr"), out.join("obj"), out.join("stub"));
    for d in [&shim_dir, &rocr_dir, &obj_dir, &stub_dir] {
        std::fs::create_dir_all(d).expect("create a directory under $OUT_DIR/shim-programs");
    }
    let include = |dir: &Path| args([OsString::from("-I"), dir.as_os_str().to_owned()]);

    // For the shim: compile, collect the runtime functions each object imports, build the stub,
    // link against it.
    let mut objects = Vec::new();
    let mut imports = std::collections::BTreeSet::new();
    for name in shim_programs::SHIM_PROGRAMS {
        let (_, err) = clean(&shim_dir, name);
        let obj = obj_dir.join(format!("{name}.o"));
        let mut a = args(CFLAGS);
        a.extend(include(&shim.join("include")));
        a.extend(include(&src));
        a.extend(args([OsString::from("-c"), src.join(format!("{name}.c")).into(), "-o".into(), obj.clone().into()]));
        let symbols =
            run(cc, &a).and_then(|_| run(OsStr::new("nm"), &args(["-u".as_ref(), "-P".as_ref(), obj.as_os_str()])));
        match symbols {
            Ok(text) => {
                // `-P`: "name type [value size]" per line.
                let names = text.lines().filter_map(|l| l.split_whitespace().next());
                imports
                    .extend(names.filter(|n| n.starts_with("hsa_") || n.starts_with("cuse_kfd_")).map(str::to_owned));
                objects.push((name, obj, err));
            }
            Err(failure) => record("the shim program", name, &err, failure),
        }
    }
    // The signatures do not matter to the linker, which only needs the names and the soname.
    let stub_c = stub_dir.join("stub.c");
    let body: String = imports.iter().map(|n| format!("void {n}(void) {{}}\n")).collect();
    std::fs::write(&stub_c, body).expect("write the stub's source");
    let stub = stub_dir.join("libhsa-runtime64.so");
    let stub_args = args([
        OsString::from("-shared"),
        "-fPIC".into(),
        "-Wl,-soname,libhsa-runtime64.so.1".into(),
        stub_c.into(),
        "-o".into(),
        stub.into(),
    ]);
    let stub_built = run(cc, &stub_args);
    for (name, obj, err) in objects {
        let exe = shim_dir.join(name);
        let mut a = args([obj.into_os_string(), "-o".into(), exe.into(), "-L".into(), stub_dir.clone().into()]);
        a.extend(args(["-lhsa-runtime64", "-lpthread"]));
        if let Err(failure) = stub_built.clone().and_then(|_| run(cc, &a)) {
            record("the shim program", name, &err, failure);
        }
    }

    // For the real ROCr: without the shim's header, linked with the system's library.
    for name in shim_programs::REAL_ROCR_PROGRAMS {
        let (exe, err) = clean(&rocr_dir, name);
        let mut a = args(CFLAGS);
        a.push("-DCUSE_KFD_REAL_ROCR".into());
        a.extend(include(&src));
        a.extend(args([src.join(format!("{name}.c")).into_os_string(), "-o".into(), exe.into()]));
        a.extend(args(["-L/usr/lib/x86_64-linux-gnu", "-lhsa-runtime64", "-lpthread"]));
        if let Err(failure) = run(cc, &a) {
            record("the real-ROCr build of the shim program", name, &err, failure);
        }
    }
}
