//! Writes the seed corpus: `cargo run --example seed-corpus -- DIR` creates
//! DIR/<target>/seed-<name> for every seed of `cuse_kfd_fuzz::seeds` (the test scenarios,
//! encoded as the targets decode them).

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "corpus".into()));
    for (target, name, bytes) in cuse_kfd_fuzz::seeds() {
        let d = dir.join(target);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("cannot create {}: {e}", d.display()));
        let path = d.join(format!("seed-{name}"));
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        println!("{}", path.display());
    }
}
