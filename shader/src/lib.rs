//! The soft shader core: runs AMD GPU machine code on the CPU.
//!
//! - [`isa`] decodes the bytes of a code object's `.text` into typed [`isa::Instruction`]s for
//!   gfx90a (SOP1, SOP2, SOPK, SOPC, SOPP, SMEM, VOP1, VOP2, VOPC, VOP3a/b, VOP3P incl. MFMA, DS,
//!   FLAT/GLOBAL/SCRATCH, MUBUF; SDWA and DPP forms; literals and inline constants) and gfx1030
//!   in wave32 or wave64 (the same formats in their gfx10 layouts; VOP3 literals, DPP8), each
//!   carrying a dense [`isa::Op`] to dispatch on and printing itself in LLVM's syntax. MTBUF,
//!   MIMG, EXP and VINTRP words are exact `UnsupportedEncoding` errors.
//! - [`wave`] is the architectural state of a wave; [`exec`] runs one instruction of it
//!   ([`exec::step`]), by family; [`group`] runs the waves of a workgroup with their LDS and
//!   barriers.
//! - [`mem`] is the seam to global memory: the device implements [`mem::Memory`] over the
//!   process GPU VM; [`mem::Ram`] serves tests.
//!
//! An instruction the core does not implement is an [`exec::Fault`] naming it, its PC and
//! encoding: never a skipped instruction or a guessed result.
//!
//! The opcode tables (`src/isa/op.rs`, `src/isa/gfx90a.rs`, `src/isa/gfx1030.rs`) are generated
//! offline from LLVM 15.0.6's AMDGPU disassembler (Debian's llvm-15) and checked in; to
//! regenerate them, from the workspace root: `cargo run -p isa-gen` (it needs `llvm-mc-15`). The
//! tests in `tests/llvm_diff.rs` check the decoder against `llvm-objdump-15` and `llvm-mc-15`.
#![forbid(unsafe_code)]

pub mod exec;
pub mod fp;
pub mod group;
pub mod gws;
pub mod isa;
pub mod launch;
pub mod mem;
pub mod wave;

#[cfg(test)]
pub(crate) mod testing;
