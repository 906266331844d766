//! hsaKmtShareMemory and hsaKmtRegisterSharedHandle between two processes of one device (two
//! contexts of an embedded device in this process, the second known to the device by another
//! pid): what one writes through its pointer, the other reads through its own.

use std::sync::atomic::{AtomicU64, Ordering};
use thunk::hsakmt::*;
use thunk::transport::EmbeddedTransport;
use thunk::Kfd;

/// Two thunks over one device: the first as this process, the second as simulated pid `pid`.
fn two_processes() -> (Thunk, Thunk) {
    let first = EmbeddedTransport::new(&cuse_kfd::DeviceConfig::default()).expect("embedded device");
    let caller = cuse_kfd::Caller { pid: 5_000_100, tid: 5_000_100, ..cuse_kfd::Caller::current() };
    let second = EmbeddedTransport::open_as(first.embedded(), caller).expect("a second client");
    let a = Thunk::open(Kfd::new(Box::new(first))).expect("hsaKmtOpenKFD");
    let b = Thunk::open(Kfd::new(Box::new(second))).expect("hsaKmtOpenKFD as the second process");
    (a, b)
}

fn word(addr: u64, i: u64) -> &'static AtomicU64 {
    // SAFETY: the tests pass host-mapped buffers of a live thunk, which outlive the use; the
    // other context's mapping of the same memory writes it concurrently, hence atomics.
    unsafe { AtomicU64::from_ptr((addr + 8 * i) as *mut u64) }
}

fn gpu_node(t: &Thunk) -> u32 {
    let sys = t.acquire_system_properties().unwrap();
    (0..sys.num_nodes).find(|n| t.node_properties(*n).unwrap().num_fcompute_cores != 0).expect("a GPU node")
}

#[test]
fn a_shared_buffer_is_the_same_memory_in_both_processes() {
    let (a, b) = two_processes();
    let node = gpu_node(&a);
    let size = 3 * 4096;
    let flags = MemFlags(0).with_host_access(1).with_non_paged(1);
    let mine = a.alloc_memory(node, size, flags, None).unwrap();
    word(mine, 1).store(0x1111, Ordering::SeqCst);
    let handle = a.share_memory(mine, size).unwrap();

    let (theirs, got) = b.register_shared_handle(&handle, &[]).unwrap();
    assert_eq!(got, size);
    assert_ne!(theirs, 0);
    assert_eq!(word(theirs, 1).load(Ordering::SeqCst), 0x1111, "the importer sees the exporter's bytes");
    word(theirs, 1000).store(0xfeed_beef, Ordering::SeqCst);
    assert_eq!(word(mine, 1000).load(Ordering::SeqCst), 0xfeed_beef, "the exporter sees the importer's writes");
    let info = b.query_pointer_info(theirs).unwrap();
    assert_eq!(info.size_in_bytes, size);

    // The exporter frees its buffer: the importer's view stays.
    a.free_memory(mine, size).unwrap();
    assert_eq!(word(theirs, 1000).load(Ordering::SeqCst), 0xfeed_beef);
    b.deregister_memory(theirs).unwrap();
    assert_eq!(b.deregister_memory(theirs), Err(Status::MemoryNotRegistered));
    // With both gone the handle names nothing.
    assert_eq!(b.register_shared_handle(&handle, &[]), Err(Status::Error));
}

#[test]
fn a_forged_handle_imports_nothing() {
    let (a, b) = two_processes();
    let node = gpu_node(&a);
    let mine = a.alloc_memory(node, 4096, MemFlags(0).with_host_access(1).with_non_paged(1), None).unwrap();
    let mut handle = a.share_memory(mine, 4096).unwrap();
    handle.0[2] ^= 0x8000;
    assert_eq!(b.register_shared_handle(&handle, &[]), Err(Status::Error));
}
