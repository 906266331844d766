//! Links libhsakmt.so as libhsakmt.so.1 exporting exactly the hsaKmt* symbols, versioned
//! HSAKMT_1 (ROCr's libhsa-runtime64 imports them with that version, BIND_NOW).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhsakmt.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/hsakmt.ver");
    println!("cargo:rerun-if-changed=hsakmt.ver");
}
