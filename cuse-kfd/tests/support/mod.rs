//! What the cuse-kfd integration tests share; each test file takes it with `mod support;`.
//!
//! * [`raw`]: a device (embedded, or a `cuse-kfd serve` node through the kernel) driven with raw
//!   ioctl bytes, typed wrappers for the ioctls tests repeat, and the backing files a client maps;
//! * [`client`]: an embedded device with the thunk as its client (GPU memory, AQL queues, soft
//!   kernels) and bounded waits;
//! * [`code_object`]: gfx90a code objects built at test time with LLVM 15 and loaded into GPU
//!   memory.
//!
//! A test binary uses part of this, so the rest is dead code there.
#![allow(dead_code)]

pub mod client;
pub mod code_object;
pub mod raw;
