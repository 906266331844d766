//! The ioctl dispatcher fed arbitrary request numbers and argument bytes through
//! `Device::ioctl`, by several simulated processes, with caller memory serving fuzzer bytes.
#![no_main]

use cuse_kfd_fuzz::{decode, run_dispatch, DispatchOp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    run_dispatch(&decode::<DispatchOp>(data));
});
