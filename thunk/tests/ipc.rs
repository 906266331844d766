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

#[test]
fn process_vm_read_and_write_copy_between_the_two_processes() {
    let (a, b) = two_processes();
    let node = gpu_node(&a);
    let flags = MemFlags(0).with_host_access(1).with_non_paged(1);
    let mine = a.alloc_memory(node, 2 * 4096, flags, None).unwrap();
    let theirs = b.alloc_memory(node, 2 * 4096, flags, None).unwrap();
    a.map_memory_to_gpu(mine, 2 * 4096).unwrap();
    b.map_memory_to_gpu(theirs, 2 * 4096).unwrap();
    word(theirs, 3).store(0xb0b, Ordering::SeqCst);
    word(mine, 600).store(0xa11ce, Ordering::SeqCst);
    let local = [MemoryRange { address: mine, size: 4096 }];
    let remote = [MemoryRange { address: theirs, size: 4096 }];
    // SAFETY: `mine` is a's live, mapped allocation.
    let r = unsafe { a.process_vm_copy(5_000_100, &local, &remote, false) };
    assert_eq!(r, (Ok(()), 4096));
    assert_eq!(word(mine, 3).load(Ordering::SeqCst), 0xb0b, "a read b's memory");
    // A write of the second page into a shorter remote range: cut to its length.
    let local = [MemoryRange { address: mine + 4096, size: 4096 }];
    let remote = [MemoryRange { address: theirs + 4096, size: 1000 }];
    // SAFETY: as above.
    let r = unsafe { a.process_vm_copy(5_000_100, &local, &remote, true) };
    assert_eq!(r, (Ok(()), 1000));
    assert_eq!(word(theirs, 600).load(Ordering::SeqCst), 0xa11ce, "a wrote b's memory");
    // A remote range past b's buffer: ERROR, with the bytes before it reported.
    let remote = [MemoryRange { address: theirs, size: 16 }, MemoryRange { address: theirs + 8190, size: 16 }];
    let local = [MemoryRange { address: mine, size: 64 }];
    // SAFETY: as above.
    let r = unsafe { a.process_vm_copy(5_000_100, &local, &remote, false) };
    assert_eq!(r, (Err(Status::Error), 16));
}
