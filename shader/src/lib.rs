//! The soft shader core: runs AMD GPU machine code on the CPU.
//!
//! Today it decodes: [`isa::decode`] turns the bytes of a code object's `.text` into typed
//! [`isa::Instruction`]s for gfx90a. Wave state, execution and memory will sit beside `isa`.
#![forbid(unsafe_code)]

pub mod isa;
