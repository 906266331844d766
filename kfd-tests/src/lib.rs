//! Shared helpers of the cross-crate tests.

pub mod device;
pub mod hip_corpus;
pub mod launcher;
pub mod program;
pub mod shim_programs;
