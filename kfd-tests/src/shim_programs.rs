//! Which C programs of rocr-shim/tests/c kfd-tests/build.rs builds for
//! kfd-tests/tests/shim_programs.rs, in which mode. build.rs compiles this file too (`#[path]`), so
//! the lists are written once.

/// Every program, built for the shim: its extensions (cuse_kfd_shim.h) included.
pub const SHIM_PROGRAMS: [&str; 6] = ["info", "queue", "signals", "threads", "batch", "copy"];

/// The programs built with -DCUSE_KFD_REAL_ROCR and linked with Debian's real ROCr 5.2.3: the same
/// standard-HSA checks, the shim's extensions compiled out (check.h says how). batch.c is not here:
/// from end to end it is the batch signal API (ROCr interface 1.36, newer than 5.2.3) and the
/// shim's counters. copy.c keeps allocation and copies between host memory; its VRAM copies
/// (ROCr copies VRAM with blit kernels, GFX code the device cannot run) and soft kernels are the
/// shim's.
pub const REAL_ROCR_PROGRAMS: [&str; 5] = ["info", "queue", "signals", "threads", "copy"];
