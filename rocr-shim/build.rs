//! The cdylib answers to the name C programs link and load: libhsa-runtime64.so.1.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhsa-runtime64.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
