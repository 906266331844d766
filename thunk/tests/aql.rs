//! The thunk's queue, memory and signal layer against the embedded device.

use std::sync::atomic::Ordering;
use std::time::Duration;
use thunk::memory::Kind;
use thunk::queue::{packet, AqlQueue};
use thunk::signal::Signals;
use thunk::Kfd;
use uapi::soft::*;
use uapi::IntoBytes;

fn kfd() -> Kfd {
    Kfd::embedded(&cuse_kfd::DeviceConfig::default()).expect("embedded device")
}

#[test]
fn a_barrier_completes_its_signal_and_a_fill_kernel_writes_memory() {
    let kfd = kfd();
    assert_eq!(kfd.version().unwrap(), (1, 18));
    let gpu = kfd.gpu_ids().unwrap()[0];
    let q = AqlQueue::new(&kfd, gpu, 64).unwrap();
    let sig = Signals::new(&kfd, gpu, 2).unwrap();
    sig.value(0).store(1, Ordering::Release);
    q.submit(&packet::barrier_and([0; 5], sig.handle(0), false));
    assert_eq!(sig.wait(0, Duration::from_secs(5), |v| v == 0), Ok(0));
    assert_eq!(q.read_index(), 1);

    let code = kfd.alloc(gpu, 4096, Kind::Gtt).unwrap();
    let desc = SoftKernelDescriptor::new(SOFT_KERNEL_FILL_U32, 16);
    code.write(0, desc.as_bytes());
    let dst = kfd.alloc(gpu, 4096, Kind::Vram).unwrap();
    let args = FillArgs { dst: dst.va(), value: 0xC0FFEE, reserved: 0 };
    code.write(64, args.as_bytes());
    sig.value(1).store(1, Ordering::Release);
    q.submit(&packet::dispatch(code.va(), code.addr(64), [100, 1, 1], [64, 1, 1], sig.handle(1), false));
    assert_eq!(sig.wait(1, Duration::from_secs(5), |v| v == 0), Ok(0));
    let mut out = [0u8; 404];
    dst.read(0, &mut out);
    for i in 0..100 {
        assert_eq!(u32::from_le_bytes(out[i * 4..i * 4 + 4].try_into().unwrap()), 0xC0FFEE, "word {i}");
    }
    assert_eq!(&out[400..], &[0; 4], "work-item 100 does not exist");
}
