//! Makes `target/<profile>/lib/libhsakmt.so.1` and prints that directory:
//! `LD_LIBRARY_PATH=$(cargo run -q -p hsakmt --bin hsakmt-lib-dir) rocminfo`.

use std::process::ExitCode;

fn main() -> ExitCode {
    match hsakmt::libdir::profile_dir().and_then(|d| hsakmt::libdir::install(&d)) {
        Ok(dir) => {
            println!("{}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hsakmt-lib-dir: {e}");
            ExitCode::FAILURE
        }
    }
}
