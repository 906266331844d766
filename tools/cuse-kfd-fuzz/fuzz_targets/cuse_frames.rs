//! The CUSE frame decoder and a session fed arbitrary frames after a valid INIT.
#![no_main]

use cuse_kfd_fuzz::{decode, run_frames, FrameOp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    run_frames(&decode::<FrameOp>(data));
});
