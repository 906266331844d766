//! `cuse-kfd run`: unmodified ROCm programs on cuse-kfd.
//!
//! * [`launch`]: sets up a program's environment (our libhsakmt.so.1 or the system's, the
//!   embedded device or a node, a private /dev/kfd and topology where needed) and execs it;
//! * [`stage`]: the shipped libraries, found where cargo builds them and staged under the names
//!   programs load them by (the launcher, xtask and the tests all use it);
//! * [`trust`]: what a launcher run as root may put on a program's search paths.

pub mod launch;
mod scratch;
pub mod stage;
pub mod trust;
