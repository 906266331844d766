//! Builds the C programs of c/rocr (tests/tests/rocr_programs.rs) against Debian's hsa.h, linked
//! with the real libhsa-runtime64, into $OUT_DIR/rocr. Building them here, on the host, means the
//! real-device tier's VM (whose view of the target directory is read-only, and where cc runs
//! ~50x slower under TCG) only runs them. A program that does not compile (no cc, no
//! libhsa-runtime-dev) is not a build failure: its compiler output goes to <name>.err, which
//! the test that runs it reports.

use std::path::Path;
use std::process::Command;

fn main() {
    let src = Path::new("c/rocr");
    let out = Path::new(&std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("rocr");
    std::fs::create_dir_all(&out).expect("create $OUT_DIR/rocr");
    println!("cargo:rerun-if-changed=c/rocr");
    println!("cargo:rerun-if-env-changed=CC");
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut sources: Vec<_> = std::fs::read_dir(src)
        .expect("c/rocr")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    for file in sources {
        let name = file.file_stem().expect("a file name").to_string_lossy().into_owned();
        let (exe, err) = (out.join(&name), out.join(format!("{name}.err")));
        let _ = std::fs::remove_file(&exe);
        let _ = std::fs::remove_file(&err);
        let result = Command::new(&cc)
            .args(["-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-I/usr/include/hsa"])
            .arg(&file)
            .arg("-o")
            .arg(&exe)
            .args(["-L/usr/lib/x86_64-linux-gnu", "-lhsa-runtime64", "-lpthread"])
            .output();
        let failure = match result {
            Ok(o) if o.status.success() => continue,
            Ok(o) => format!(
                "{} {} failed ({}):\n{}{}",
                cc.to_string_lossy(),
                file.display(),
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => format!("running {}: {e} (install gcc)", cc.to_string_lossy()),
        };
        println!("cargo:warning=the ROCr program {name} did not compile; its test will fail (see {})", err.display());
        std::fs::write(&err, failure).expect("write the compiler's output");
    }
}
