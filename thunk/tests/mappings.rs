//! How many mappings of this process buffers cost, alone in its test binary so that no other
//! test's mappings come and go meanwhile. libhsakmt carves buffers out of one reservation, so a
//! buffer without host access adds no mapping (kfdtest's KFDLocalMemoryTest.Fragmentation
//! allocates 65,536 of them); the embedded device, living in this process, maps each buffer's
//! backing file once.

use thunk::hsakmt::*;
use thunk::Kfd;

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
}

#[test]
fn buffers_without_host_access_add_only_the_devices_mapping_and_give_all_back() {
    let t = Thunk::open(Kfd::embedded(&cuse_kfd::DeviceConfig::default()).unwrap()).unwrap();
    const N: usize = 2000;
    let invisible = MemFlags(0).with_non_paged(1);
    let host = MemFlags(0).with_non_paged(1).with_host_access(1);
    // One of each first, so that whatever a first allocation sets up is counted before.
    let warm =
        [t.alloc_memory(1, 32 << 10, invisible, None).unwrap(), t.alloc_memory(1, 32 << 10, host, None).unwrap()];
    let before = mappings();
    let bufs: Vec<u64> = (0..N).map(|_| t.alloc_memory(1, 32 << 10, invisible, None).unwrap()).collect();
    let grown = mappings() - before;
    assert!(grown <= N + 16, "{N} VRAM buffers without host access added {grown} mappings (the device's {N} expected)");
    for b in &bufs {
        t.free_memory(*b, 32 << 10).unwrap();
    }
    // Host-visible ones add the thunk's mapping of the backing file too, and give it back.
    let bufs: Vec<u64> = (0..N).map(|_| t.alloc_memory(1, 32 << 10, host, None).unwrap()).collect();
    let grown = mappings() - before;
    assert!(grown <= 2 * N + 16, "{N} host-visible buffers added {grown} mappings");
    for b in &bufs {
        t.free_memory(*b, 32 << 10).unwrap();
    }
    let left = mappings().saturating_sub(before);
    assert!(left <= 16, "{left} mappings left after every buffer was freed");
    for b in warm {
        t.free_memory(b, 32 << 10).unwrap();
    }
}
