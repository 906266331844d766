//! The hsaKmt API against an embedded device: every call ROCr imports, what it fills in and
//! what it refuses.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use thunk::hsakmt::*;
use thunk::Kfd;
use uapi::aql::*;
use uapi::queue::{AMD_QUEUE_READ_DISPATCH_ID_OFFSET, AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET};
use uapi::signal::*;

fn thunk() -> Thunk {
    Thunk::open(Kfd::embedded(&cuse_kfd::DeviceConfig::default()).expect("embedded device")).expect("hsaKmtOpenKFD")
}

fn thunk_with(profile: &str, gpus: usize) -> Thunk {
    let config = cuse_kfd::DeviceConfig { profile: profile.to_string(), gpus, ..Default::default() };
    Thunk::open(Kfd::embedded(&config).expect("embedded device")).expect("hsaKmtOpenKFD")
}

/// A u64 of thunk-mapped memory.
fn u64_at(addr: u64) -> &'static AtomicU64 {
    assert_eq!(addr % 8, 0);
    // SAFETY: the tests only pass addresses of live host-mapped allocations of the thunk, which
    // outlive the use; the device may write them concurrently, hence atomics.
    unsafe { AtomicU64::from_ptr(addr as *mut u64) }
}

fn i64_at(addr: u64) -> &'static AtomicI64 {
    assert_eq!(addr % 8, 0);
    // SAFETY: as in `u64_at`.
    unsafe { AtomicI64::from_ptr(addr as *mut i64) }
}

fn host_flags() -> MemFlags {
    MemFlags(0).with_host_access(1).with_non_paged(1)
}

#[test]
fn version_and_topology_come_from_the_device_tree() {
    let t = thunk();
    assert_eq!(t.version(), VersionInfo { major: 1, minor: 18 });
    // Node properties need a snapshot.
    assert_eq!(t.node_properties(0), Err(Status::InvalidNodeUnit));
    let sys = t.acquire_system_properties().unwrap();
    assert_eq!(sys.num_nodes, 2);
    assert_eq!(sys.platform_oem, u64::from_le_bytes(*b"CUSE-KFD") as u32);

    let cpu = t.node_properties(0).unwrap();
    assert!(cpu.num_cpu_cores > 0);
    assert_eq!(cpu.num_fcompute_cores, 0);
    assert_eq!(cpu.num_memory_banks, 1);
    let caches = t.node_cache_properties(0, cpu.ccompute_id_lo, cpu.num_caches).unwrap();
    assert_eq!(caches.len(), cpu.num_caches as usize);
    assert!(caches.iter().all(|c| c.cache_type.cpu() == 1));
    assert_eq!(caches[0].sibling_map[0], 1);
    assert_eq!(t.node_cache_properties(0, 0, cpu.num_caches + 1), Err(Status::InvalidParameter));
    let mem = t.node_memory_properties(0, 1).unwrap();
    assert_eq!(mem[0].heap_type, HeapType::SYSTEM);
    assert!(mem[0].size_in_bytes > 0);

    let gpu = t.node_properties(1).unwrap();
    assert_eq!(gpu.num_fcompute_cores, 416);
    assert_eq!(gpu.num_simd_per_cu, 4);
    assert_eq!(gpu.wave_front_size, 64);
    assert_eq!(gpu.device_id, 0x740F);
    assert_eq!((gpu.engine_id.major(), gpu.engine_id.minor(), gpu.engine_id.stepping()), (9, 0, 10));
    assert_eq!(gpu.engine_id.ucode(), 96);
    assert_eq!(gpu.amd_name, "Aldebaran");
    assert_eq!(gpu.drm_render_minor, 128);
    assert_eq!(gpu.vgpr_size_per_cu, 0x80000);
    assert_eq!(gpu.capability.svm_api_supported(), 1);
    if std::path::Path::new("/usr/share/libdrm/amdgpu.ids").exists() {
        assert_eq!(gpu.marketing_name, "AMD Instinct MI210");
    }
    // One VRAM bank from sysfs, then LDS, scratch, SVM and the MMIO page.
    assert_eq!(gpu.num_memory_banks, 5);
    let banks = t.node_memory_properties(1, gpu.num_memory_banks + 1).unwrap();
    assert_eq!(t.node_memory_properties(1, 2).unwrap().len(), 2);
    let types: Vec<HeapType> = banks.iter().map(|b| b.heap_type).collect();
    assert_eq!(
        types,
        [
            HeapType::FRAME_BUFFER_PUBLIC,
            HeapType::GPU_LDS,
            HeapType::GPU_SCRATCH,
            HeapType::DEVICE_SVM,
            HeapType::MMIO_REMAP,
        ]
    );
    assert_eq!(banks[0].size_in_bytes, 16 << 30);
    assert_eq!(banks[1].size_in_bytes, 64 * 1024);
    assert_eq!(banks[2].size_in_bytes, 1 << 32);
    let gcaches = t.node_cache_properties(1, gpu.fcompute_id_lo, gpu.num_caches).unwrap();
    assert_eq!(gcaches[0].cache_type.0, 9, "data | HSACU");
    let links = t.node_io_link_properties(1, gpu.num_io_links).unwrap();
    assert_eq!((links[0].io_link_type, links[0].node_from, links[0].node_to), (IoLinkType::PCIEXPRESS, 1, 0));
    assert_eq!(t.node_properties(2), Err(Status::InvalidNodeUnit));

    t.release_system_properties().unwrap();
    assert_eq!(t.node_properties(1), Err(Status::InvalidNodeUnit));
}

#[test]
fn two_gpus_are_linked_through_the_cpu() {
    let t = thunk_with("gfx1030", 2);
    assert_eq!(t.acquire_system_properties().unwrap().num_nodes, 3);
    let g1 = t.node_properties(1).unwrap();
    assert_eq!((g1.engine_id.major(), g1.engine_id.minor()), (10, 3));
    let links = t.node_io_link_properties(1, g1.num_io_links).unwrap();
    assert!(links.iter().any(|l| l.node_to == 2 && l.weight > 20), "{links:?}");
}

#[test]
fn clocks_xnack_tile_config_and_the_absent_debugger() {
    let t = thunk();
    let a = t.clock_counters(1).unwrap();
    let b = t.clock_counters(1).unwrap();
    assert!(b.gpu_clock_counter >= a.gpu_clock_counter && a.gpu_clock_counter > 0);
    assert!(a.system_clock_frequency_hz > 0);
    assert_eq!(t.clock_counters(0).unwrap().gpu_clock_counter, 0, "the CPU node has no GPU clock");
    assert_eq!(t.clock_counters(9), Err(Status::InvalidNodeUnit));

    assert_eq!(t.xnack_mode(), Ok(0));
    t.set_xnack_mode(true).unwrap();
    assert_eq!(t.xnack_mode(), Ok(1));
    t.set_xnack_mode(false).unwrap();

    let tc = t.tile_config(1, 4, 4).unwrap();
    assert_ne!(tc.gb_addr_config, 0);
    assert!(tc.num_banks > 0);

    // ROCr 5.2.3 accepts NOT_SUPPORTED: no ROCm debugger on this device.
    assert_eq!(t.runtime_enable(0, false), Err(Status::NotSupported));
    assert_eq!(t.runtime_disable(), Err(Status::NotSupported));
    t.set_trap_handler(1, 0x1000, 0x100, 0x2000, 0x100).unwrap();
    assert_eq!(t.set_trap_handler(7, 0, 0, 0, 0), Err(Status::InvalidNodeUnit));
    assert_eq!(t.set_memory_policy(1, 0, 0, 0, 0), Err(Status::NotImplemented), "Kaveri only");
}

#[test]
fn svm_attributes_go_through_node_ids() {
    let t = thunk();
    let layout = std::alloc::Layout::from_size_align(0x4000, 0x1000).unwrap();
    // SAFETY: a non-zero size; freed below with the same layout, once no range names it.
    let mem = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!mem.is_null());
    let va = mem as u64;
    let set = [
        SvmAttribute { attr_type: SvmAttrType::ACCESS, value: 1 },
        SvmAttribute { attr_type: SvmAttrType::PREFERRED_LOC, value: 1 },
        SvmAttribute { attr_type: SvmAttrType::PREFETCH_LOC, value: 0 },
        SvmAttribute { attr_type: SvmAttrType::SET_FLAGS, value: 0x10 },
    ];
    // SAFETY: the memory stays allocated while the range keeps GPU access (NO_ACCESS below), and
    // no queue runs to reach it.
    unsafe { t.svm_set_attr(va, 0x4000, &set).unwrap() };
    let mut get = set;
    get[0].value = 1;
    t.svm_get_attr(va, 0x4000, &mut get).unwrap();
    assert_eq!((get[0].attr_type, get[0].value), (SvmAttrType::ACCESS, 1), "ACCESS, for node 1");
    assert_eq!(get[1].value, 1, "the preferred location, as a node id");
    assert_eq!(get[2].value, 0, "the prefetch location: system memory, node 0");
    assert_eq!(get[3].value, 0x1 | 0x2 | 0x10, "HOST_ACCESS | COHERENT | GPU_EXEC");
    let off = [SvmAttribute { attr_type: SvmAttrType::NO_ACCESS, value: 1 }];
    // SAFETY: takes access away.
    unsafe { t.svm_set_attr(va, 0x4000, &off).unwrap() };
    let mut g = [SvmAttribute { attr_type: SvmAttrType::ACCESS, value: 1 }];
    t.svm_get_attr(va, 0x4000, &mut g).unwrap();
    assert_eq!(g[0].attr_type, SvmAttrType::NO_ACCESS);
    // SAFETY: as above; the calls are refused before the device sees them.
    unsafe {
        assert_eq!(t.svm_set_attr(va + 1, 0x1000, &set), Err(Status::InvalidParameter));
        assert_eq!(
            t.svm_set_attr(va, 0x1000, &[SvmAttribute { attr_type: SvmAttrType::ACCESS, value: 0 }]),
            Err(Status::InvalidNodeUnit),
            "CPU node"
        );
        // Page 1 is never mapped: the device refuses it.
        assert_eq!(t.svm_set_attr(0x1000, 0x1000, &set), Err(Status::Error));
    }
    // SAFETY: allocated above with this layout; no range gives a GPU access to it.
    unsafe { std::alloc::dealloc(mem, layout) };
}

#[test]
fn memory_allocations_follow_their_flags() {
    let t = thunk();
    // VRAM, host-visible: the CPU reads and writes it at its GPU address.
    let vram = t.alloc_memory(1, 1 << 20, host_flags(), None).unwrap();
    assert_eq!(vram % (1 << 20), 0, "aligned like libhsakmt");
    u64_at(vram + 8).store(0xABCD, Ordering::Relaxed);
    assert_eq!(u64_at(vram + 8).load(Ordering::Relaxed), 0xABCD);
    let info = t.query_pointer_info(vram + 100).unwrap();
    assert_eq!(info.pointer_type, PointerType::ALLOCATED);
    assert_eq!((info.node, info.cpu_address, info.gpu_address, info.size_in_bytes), (1, vram, vram, 1 << 20));
    assert_eq!(info.mem_flags, host_flags());
    assert!(info.mapped_nodes.is_empty());
    assert_eq!(t.map_memory_to_gpu(vram, 1 << 20), Ok(0));
    assert_eq!(&*t.query_pointer_info(vram).unwrap().mapped_nodes, &[1]);
    t.set_memory_user_data(vram, 0x5555).unwrap();
    assert_eq!(t.query_pointer_info(vram).unwrap().user_data, 0x5555);
    assert_eq!(t.free_memory(vram, 1 << 20), Err(Status::Error), "amdkfd refuses to free a mapped buffer");
    t.unmap_memory_to_gpu(vram).unwrap();
    t.unmap_memory_to_gpu(vram).unwrap();
    t.free_memory(vram, 1 << 20).unwrap();
    assert_eq!(t.free_memory(vram, 1 << 20), Err(Status::MemoryNotRegistered));
    assert_eq!(t.query_pointer_info(vram), Err(Status::Error));

    // System memory, paged and not; mapped on the nodes asked for.
    for flags in [host_flags(), MemFlags(0).with_host_access(1), MemFlags(0).with_host_access(1).with_coarse_grain(1)] {
        let m = t.alloc_memory(0, 8192, flags, None).unwrap();
        u64_at(m).store(7, Ordering::Relaxed);
        assert_eq!(t.map_memory_to_gpu_nodes(m, 8192, MemMapFlags(0), &[1]), Ok(0));
        assert_eq!(&*t.query_pointer_info(m).unwrap().mapped_nodes, &[1]);
        assert_eq!(t.query_pointer_info(m).unwrap().node, 0);
        assert_eq!(t.map_memory_to_gpu_nodes(m, 8192, MemMapFlags(0), &[0]), Err(Status::Error), "the CPU is no GPU");
        assert_eq!(t.map_memory_to_gpu_nodes(m, 8192, MemMapFlags(0), &[5]), Err(Status::InvalidNodeUnit));
        assert_eq!(t.map_memory_to_gpu_nodes(m, 8192, MemMapFlags(0), &[]), Err(Status::InvalidParameter));
        t.unmap_memory_to_gpu(m).unwrap();
        t.free_memory(m, 8192).unwrap();
    }

    // Device memory without host access is not mapped for the CPU but is mapped for the GPU.
    let private = t.alloc_memory(1, 4096, MemFlags(0).with_non_paged(1), None).unwrap();
    t.map_memory_to_gpu(private, 4096).unwrap();
    t.unmap_memory_to_gpu(private).unwrap();
    t.free_memory(private, 4096).unwrap();

    assert_eq!(t.alloc_memory(1, 0, host_flags(), None), Err(Status::InvalidParameter));
    assert_eq!(t.alloc_memory(1, 100, host_flags(), None), Err(Status::InvalidParameter));
    assert_eq!(t.alloc_memory(1, 4096, host_flags().with_page_size(2), None), Err(Status::InvalidParameter));
    assert_eq!(t.alloc_memory(3, 4096, host_flags(), None), Err(Status::InvalidNodeUnit));
    assert_eq!(t.alloc_memory(1, 4096, host_flags().with_fixed_address(1), None), Err(Status::InvalidParameter));
    assert_eq!(t.alloc_memory(1, 4096, host_flags().with_fixed_address(1), Some(1 << 40)), Err(Status::NoMemory));
    assert_eq!(t.alloc_memory(1, 32 << 30, host_flags(), None), Err(Status::NoMemory), "more than the VRAM");
    assert_eq!(t.map_memory_to_gpu(0, 4096), Err(Status::Error));
    assert_eq!(t.map_memory_to_gpu(0x1000, 4096), Err(Status::Error));
    assert_eq!(t.unmap_memory_to_gpu(0), Ok(()));
    assert_eq!(t.free_memory(0, 4096), Err(Status::Error));
}

#[test]
fn scratch_is_a_reservation_backed_when_mapped() {
    let t = thunk();
    let flags = MemFlags(0).with_scratch(1).with_host_access(1);
    let base = t.alloc_memory(1, 4 << 30, flags, None).unwrap();
    assert_eq!(base % 0x10000, 0);
    assert_eq!(t.alloc_memory(1, 1 << 20, flags, None), Err(Status::NoMemory), "one scratch backing per GPU");
    assert_eq!(t.alloc_memory(0, 1 << 20, flags, None), Err(Status::NoMemory), "not on the CPU");
    assert_eq!(t.map_memory_to_gpu(base + (1 << 20), 1 << 20), Ok(0));
    assert_eq!(t.map_memory_to_gpu(base + (1 << 20), 1 << 20), Err(Status::Error), "already backed");
    t.unmap_memory_to_gpu(base + (1 << 20)).unwrap();
    t.map_memory_to_gpu(base, 1 << 16).unwrap();
    t.free_memory(base, 4 << 30).unwrap();
    let again = t.alloc_memory(1, 1 << 20, flags, None).unwrap();
    t.free_memory(again, 1 << 20).unwrap();
}

#[test]
fn registered_host_memory_is_a_user_pointer() {
    /// Three whole pages of the test's own.
    #[repr(C, align(4096))]
    struct Pages([u8; 3 * 4096]);
    let t = thunk();
    let buf = Box::new(Pages([0x5A; 3 * 4096]));
    let addr = buf.0.as_ptr() as u64 + 100;
    let len = 2 * 4096;
    let flags = MemFlags(0).with_host_access(1);
    // SAFETY: here and for every registration of `buf` below, the pages the range touches lie inside
    // `buf`, which lives until after the last deregistration and is not borrowed meanwhile.
    unsafe {
        assert_eq!(t.register_memory_with_flags(addr, len, flags.with_non_paged(1)), Err(Status::NotSupported));
        assert_eq!(t.register_memory_with_flags(addr, len, MemFlags(0)), Err(Status::NotSupported));
        t.register_memory_with_flags(addr, len, flags).unwrap();
    }
    let info = t.query_pointer_info(addr + 10).unwrap();
    assert_eq!(info.pointer_type, PointerType::REGISTERED_USER);
    assert_eq!((info.cpu_address, info.size_in_bytes), (addr, len));
    assert_eq!(info.gpu_address & 4095, addr & 4095);
    assert_ne!(info.gpu_address, addr, "a user pointer has a GPU address of its own");
    let alt = t.map_memory_to_gpu(addr, len).unwrap();
    assert_eq!(alt, info.gpu_address);
    t.unmap_memory_to_gpu(addr).unwrap();
    // Registering twice counts.
    // SAFETY: as above.
    unsafe { t.register_memory_with_flags(addr, len, flags).unwrap() };
    t.deregister_memory(addr).unwrap();
    assert!(t.query_pointer_info(addr).is_ok());
    t.deregister_memory(addr).unwrap();
    assert_eq!(t.query_pointer_info(addr), Err(Status::Error));
    assert_eq!(t.deregister_memory(addr), Err(Status::MemoryNotRegistered));
    drop(buf);

    // IPC (tests/ipc.rs has more): system memory is shared as made, on the first GPU; only the
    // start of an object can be. Graphics interop is a feature the device lacks.
    let m = t.alloc_memory(0, 4096, host_flags(), None).unwrap();
    let shared = t.share_memory(m, 4096).unwrap();
    assert_eq!((shared.0[6], shared.0[7] != 0), (1, true), "one page, exported by a GPU");
    assert_eq!(t.share_memory(m + 8, 4096), Err(Status::InvalidParameter));
    assert_eq!(t.register_shared_handle(&SharedMemoryHandle([0, 0, 0, 0, 1, 0, 1, 0]), &[]), Err(Status::Error));
    // libhsakmt's status when the driver's GET_DMABUF_INFO fails (the device has no dma-bufs).
    assert_eq!(t.register_graphics_handle_to_nodes(3, &[1]), Err(Status::Error));
    assert_eq!(t.register_graphics_handle_to_nodes(3, &[]), Err(Status::InvalidParameter));
    // An allocation registered to nodes may be mapped only there.
    // SAFETY: memory the thunk allocated: registering it makes no USERPTR registration.
    unsafe { t.register_memory_to_nodes(m, 4096, &[1]).unwrap() };
    assert_eq!(&*t.query_pointer_info(m).unwrap().registered_nodes, &[1]);
    // SAFETY: as above.
    assert_eq!(unsafe { t.register_memory_to_nodes(m, 4096, &[0]) }, Err(Status::MemoryAlreadyRegistered));
    t.deregister_memory(m).unwrap();
    assert_eq!(t.deregister_memory(m), Err(Status::MemoryNotRegistered));
    t.free_memory(m, 4096).unwrap();
}

/// Threads registering the same memory at once (kfdtest's MultiThreadRegisterUserptrTest): every
/// registration counts on one USERPTR object, so all get one GPU address, and as many
/// deregistrations release it.
#[test]
fn threads_registering_one_range_share_one_user_pointer() {
    const THREADS: usize = 32;
    const LEN: u64 = 1 << 27;
    let t = thunk();
    let flags = MemFlags(0).with_host_access(1);
    for round in 0..10 {
        let buf = vec![0u8; LEN as usize + 4096];
        let addr = (buf.as_ptr() as u64).next_multiple_of(4096);
        let barrier = std::sync::Barrier::new(THREADS);
        let alts: Vec<u64> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        // SAFETY: the range lies inside `buf`, which outlives every registration
                        // (all released below) and is not borrowed meanwhile.
                        unsafe { t.register_memory_with_flags(addr, LEN, flags).unwrap() };
                        t.map_memory_to_gpu(addr, LEN).unwrap()
                    })
                })
                .collect();
            threads.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(alts.iter().all(|a| *a == alts[0]), "round {round}: GPU addresses {alts:x?}");
        for _ in 0..THREADS {
            t.unmap_memory_to_gpu(addr).unwrap();
            t.deregister_memory(addr).unwrap();
        }
        assert_eq!(t.query_pointer_info(addr), Err(Status::Error));
        drop(buf);
    }
}

#[test]
fn events_wait_time_out_and_wake() {
    let t = thunk();
    let desc = EventDescriptor { event_type: EventType::SIGNAL, node_id: 1, ..Default::default() };
    let mut e = t.create_event(&desc, false, false).unwrap();
    assert_ne!(e.hw_data2, 0, "signal events have a mailbox");
    assert_eq!(u64_at(e.hw_data2).load(Ordering::Relaxed), u64::MAX, "an unsignaled slot holds all ones");
    assert_eq!(e.hw_data3, e.event_id);
    let start = Instant::now();
    assert_eq!(t.wait_on_event(&mut e, 50), Err(Status::WaitTimeout));
    assert!(start.elapsed() >= Duration::from_millis(45));
    assert_eq!(t.wait_on_event(&mut e, 0), Err(Status::WaitTimeout));
    t.set_event(&e).unwrap();
    t.wait_on_event(&mut e, 1000).unwrap();
    assert_eq!(t.wait_on_event(&mut e, 0), Err(Status::WaitTimeout), "auto reset");

    // Created signaled, manual reset: stays set until reset.
    let mut m = t.create_event(&desc, true, true).unwrap();
    t.wait_on_event(&mut m, 0).unwrap();
    t.wait_on_event(&mut m, 0).unwrap();
    t.reset_event(&m).unwrap();
    assert_eq!(t.wait_on_event(&mut m, 0), Err(Status::WaitTimeout));

    // A waiter blocked in the device wakes when another thread sets the event.
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut e2 = e.clone();
            let mut m2 = m.clone();
            t.wait_on_multiple_events(&mut [&mut e2, &mut m2], false, EVENT_TIMEOUT_INFINITE)
        });
        std::thread::sleep(Duration::from_millis(50));
        t.set_event(&m).unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
    t.reset_event(&m).unwrap();
    assert_eq!(t.wait_on_multiple_events(&mut [&mut e, &mut m], true, 10), Err(Status::WaitTimeout));

    // Memory events are system events: ROCr waits on them, nobody may set them.
    let mdesc = EventDescriptor { event_type: EventType::MEMORY, node_id: 1, ..Default::default() };
    let mut mem = t.create_event(&mdesc, true, true).unwrap();
    assert_eq!(mem.hw_data2, 0);
    assert_eq!(t.set_event(&mem), Err(Status::Error));
    assert_eq!(t.wait_on_event(&mut mem, 0), Err(Status::WaitTimeout));
    assert_eq!(mem.memory_fault, None);
    let bad = EventDescriptor { event_type: EventType(9), ..Default::default() };
    assert_eq!(t.create_event(&bad, false, false), Err(Status::InvalidParameter));

    for ev in [&e, &m, &mem] {
        t.destroy_event(ev).unwrap();
    }
    assert_eq!(t.destroy_event(&e), Err(Status::Error));
    assert_eq!(t.wait_on_event(&mut e, 0), Err(Status::Error), "an unknown event");
}

/// The calls ROCr does not import. RegisterMemory registers user memory as
/// RegisterMemoryWithFlags does; the features the device lacks answer libhsakmt 5.2.3's status
/// for a driver (or host) without them.
#[test]
fn the_rest_of_the_api_works_or_answers_as_libhsakmt_without_the_feature() {
    #[repr(C, align(4096))]
    struct Page([u8; 4096]);
    let t = thunk();
    let page = Box::new(Page([0; 4096]));
    let addr = page.0.as_ptr() as u64;
    // SAFETY: the page is the test's own, lives until after the deregistration and is not
    // borrowed meanwhile.
    unsafe { t.register_memory(addr, 4096).unwrap() };
    let info = t.query_pointer_info(addr).unwrap();
    assert_eq!(info.pointer_type, PointerType::REGISTERED_USER);
    assert_eq!(t.map_memory_to_gpu(addr, 4096).unwrap(), info.gpu_address);
    t.unmap_memory_to_gpu(addr).unwrap();
    t.deregister_memory(addr).unwrap();
    drop(page);

    let desc = EventDescriptor { event_type: EventType::SIGNAL, node_id: 1, ..Default::default() };
    let e = t.create_event(&desc, true, false).unwrap();
    assert_eq!(t.query_event_state(&e), Ok(()));
    t.destroy_event(&e).unwrap();
    assert_eq!(t.queue_info(QueueId(42)).err(), Some(Status::InvalidParameter));

    // The deprecated debugger (EPERM from the device) and the ROCm 5.2 one (unknown request).
    assert_eq!(t.dbg_register(1), Err(Status::Error));
    assert_eq!(t.dbg_register(9), Err(Status::InvalidNodeUnit));
    assert_eq!(t.dbg_unregister(1), Err(Status::Error));
    assert_eq!(t.dbg_wavefront_control(1, 1, 0, 0, 0, 0), Err(Status::Error));
    let point = WatchPoint { mode: 3, address: 0x1000 };
    assert_eq!(t.dbg_address_watch(1, &[point], &[0], &[]), Err(Status::Error));
    assert_eq!(t.dbg_address_watch(1, &[point; MAX_WATCH_POINTS + 1], &[0], &[]), Err(Status::InvalidParameter));
    assert_eq!(t.kernel_debug_trap_version(), Err(Status::Error));

    // Performance counters: libhsakmt 5.2.3's gfx9 table (src/pmc_table.c, vega_blocks), 20
    // non-privileged blocks; no IOMMU block on this topology. Node 0 is the CPU (GFX version 0,
    // which get_block_properties refuses).
    let p = t.pmc_counter_properties(1).unwrap();
    assert_eq!((p.blocks.len(), p.num_concurrent), (20, 158));
    assert_eq!(p.blocks.iter().map(|b| b.counters.len()).sum::<usize>(), 3289);
    assert!(p.blocks.iter().flat_map(|b| &b.counters).all(|c| c.profile_type == 2 && c.flags == 1));
    assert_eq!(t.pmc_counter_properties(0), Err(Status::InvalidParameter));
    assert_eq!(t.pmc_counter_properties(9), Err(Status::InvalidNodeUnit));
    // perfctr.c: only privileged counters (types 0, 1) register, on a listed block, at most its
    // slots each; the non-privileged ones are skipped.
    let cb = Counter { profile_type: 0, counter_id: 3, size_in_bits: 64, mask: !0, flags: 1, block_index: 0 };
    let listed = p.blocks[0].counters[0];
    assert_eq!(t.pmc_register_trace(1, &[listed]), Err(Status::InvalidParameter));
    assert_eq!(t.pmc_register_trace(1, &[Counter { block_index: 24, ..cb }]), Err(Status::InvalidParameter));
    assert_eq!(t.pmc_register_trace(1, &[Counter { block_index: 1, ..cb }]), Err(Status::InvalidParameter));
    assert_eq!(t.pmc_register_trace(1, &[cb; 8]), Err(Status::InvalidParameter), "CB has 7 slots");
    assert_eq!(t.pmc_register_trace(0, &[cb]), Err(Status::InvalidParameter), "a CPU node lists no block");
    assert_eq!(t.pmc_register_trace(1, &[]), Err(Status::InvalidParameter));
    assert_eq!(t.pmc_register_trace(9, &[cb]), Err(Status::InvalidNodeUnit));
    assert_eq!(t.pmc_register_trace(1, &[cb; MAX_TRACE_COUNTERS + 1]), Err(Status::NoMemory));
    assert_eq!(t.pmc_register_trace(1, &[cb, Counter { block_index: 25, ..cb }]), Err(Status::InvalidParameter));
    let root = t.pmc_register_trace(1, &[cb, listed, Counter { profile_type: 1, block_index: 14, ..cb }]).unwrap();
    assert_eq!((root.buffer_min_size, root.number_of_passes), (4096, 1));
    assert_ne!(root.trace_id, 0);
    // The trace can never be acquired (only the IOMMU block has slots), so never started.
    let id = root.trace_id;
    assert_eq!(t.pmc_acquire_trace_access(1, id), Err(Status::Unavailable));
    assert_eq!(t.pmc_acquire_trace_access(9, id), Err(Status::InvalidNodeUnit));
    assert_eq!(t.pmc_release_trace_access(9, id), Ok(()));
    assert_eq!(t.pmc_start_trace(id, 0x2000, 64), Err(Status::Error));
    assert_eq!(t.pmc_start_trace(id, 0x2000, 0), Err(Status::InvalidParameter));
    assert_eq!(t.pmc_query_trace(id), Err(Status::NoMemory));
    assert_eq!(t.pmc_stop_trace(id), Err(Status::Error));
    assert_eq!(t.pmc_unregister_trace(0, id), Err(Status::InvalidNodeUnit), "node 0 is not its GPU");
    assert_eq!(t.pmc_unregister_trace(1, id), Ok(()));
    assert_eq!(t.pmc_unregister_trace(1, id), Err(Status::InvalidHandle));
    // Unknown ids.
    assert_eq!(t.pmc_acquire_trace_access(1, 0), Err(Status::InvalidParameter));
    assert_eq!(t.pmc_acquire_trace_access(1, 0x1000), Err(Status::InvalidHandle));
    assert_eq!(t.pmc_start_trace(0x1000, 0x2000, 64), Err(Status::InvalidHandle));
    assert_eq!(t.pmc_start_trace(0x1000, 0, 64), Err(Status::InvalidParameter));
    assert_eq!(t.pmc_query_trace(0x1000), Err(Status::InvalidHandle));
    assert_eq!(t.pmc_stop_trace(0x1000), Err(Status::InvalidHandle));
    assert_eq!(t.pmc_release_trace_access(1, 0x1000), Err(Status::InvalidHandle));
    assert_eq!(t.pmc_unregister_trace(9, 0x1000), Err(Status::InvalidNodeUnit));
    assert_eq!(t.pmc_unregister_trace(1, 0x1000), Err(Status::InvalidHandle));

    // SPM: the request's -1, libhsakmt's status.
    assert_eq!(Status::IoctlFailed.code(), u32::MAX);
    assert_eq!(t.spm_acquire(1), Err(Status::IoctlFailed));
    assert_eq!(t.spm_acquire(9), Err(Status::InvalidNodeUnit));
    assert_eq!(t.spm_release(1), Err(Status::IoctlFailed));
    // SAFETY: a null destination: nothing is written.
    let (r, copy) = unsafe { t.spm_set_dest_buffer(1, 0, 7, 0) };
    assert_eq!((r, copy), (Err(Status::IoctlFailed), SpmCopy { timeout: 7, bytes_copied: 0, data_loss: false }));

    // Copies within this process (kfdtest CMABasicTest's getpid() case): mapped memory only,
    // empty lists refused before the request, a range past its buffer ERROR with nothing copied.
    let m = t.alloc_memory(0, 4096, host_flags(), None).unwrap();
    let range = [MemoryRange { address: m, size: 4096 }];
    for write in [false, true] {
        // SAFETY: `m` is the thunk's live allocation.
        let r = unsafe { t.process_vm_copy(std::process::id(), &range, &range, write) };
        assert_eq!(r, (Err(Status::Error), 0), "an unmapped buffer is out of the device's reach");
        // SAFETY: as above.
        assert_eq!(unsafe { t.process_vm_copy(std::process::id(), &[], &range, write) }, (Err(Status::Error), 0));
    }
    t.map_memory_to_gpu(m, 4096).unwrap();
    u64_at(m).store(0x0123_4567_89ab_cdef, Ordering::SeqCst);
    let (src, dst) = ([MemoryRange { address: m, size: 8 }], [MemoryRange { address: m + 2048, size: 8 }]);
    // SAFETY: `m` is the thunk's live, mapped allocation.
    assert_eq!(unsafe { t.process_vm_copy(std::process::id(), &dst, &src, false) }, (Ok(()), 8));
    assert_eq!(u64_at(m + 2048).load(Ordering::SeqCst), 0x0123_4567_89ab_cdef);
    let past = [MemoryRange { address: m + 4, size: 4096 }];
    // SAFETY: as above.
    assert_eq!(unsafe { t.process_vm_copy(std::process::id(), &past, &range, false) }, (Err(Status::Error), 0));
    // SAFETY: as above; no process has this pid.
    assert_eq!(unsafe { t.process_vm_copy(0x7fff_fff0, &range, &range, true) }, (Err(Status::Error), 0));
    t.unmap_memory_to_gpu(m).unwrap();
    t.free_memory(m, 4096).unwrap();
    assert_eq!(map_graphic_handle(1, 0, 0, 0, 4096), Err(Status::NotImplemented));
}

/// ROCr's way: an AQL ring and an amd_queue_t in system memory, a barrier packet whose
/// completion signal has the event mailbox of a signal event; the doorbell from CreateQueue.
#[test]
fn an_aql_queue_runs_a_barrier_and_raises_the_signal_event() {
    aql_barrier(&thunk());
}

/// The same with paged system memory as user pointers over anonymous memory, as libhsakmt
/// makes it by default.
#[test]
fn paged_memory_as_user_pointers_reaches_the_device_too() {
    let kfd = Kfd::embedded(&cuse_kfd::DeviceConfig::default()).unwrap();
    let t = Thunk::open_with(kfd, Options { userptr_for_paged_mem: true, ..Options::default() }).unwrap();
    let m = t.alloc_memory(0, 8192, MemFlags(0).with_host_access(1), None).unwrap();
    u64_at(m).store(5, Ordering::Relaxed);
    let info = t.query_pointer_info(m).unwrap();
    assert_eq!((info.pointer_type, info.cpu_address, info.gpu_address), (PointerType::ALLOCATED, m, m));
    t.free_memory(m, 8192).unwrap();
    aql_barrier(&t);
}

fn aql_barrier(t: &Thunk) {
    let sys = MemFlags(0).with_host_access(1);
    let ring = t.alloc_memory(0, 64 * 64, sys.with_execute_access(1), None).unwrap();
    let desc = t.alloc_memory(0, 4096, sys, None).unwrap();
    let sig = t.alloc_memory(0, 4096, sys, None).unwrap();
    for m in [ring, desc, sig] {
        t.map_memory_to_gpu_nodes(m, 4096, MemMapFlags(0), &[1]).unwrap();
    }
    for i in 0..64 {
        u64_at(ring + i * 64).store(u64::from(HSA_PACKET_TYPE_INVALID), Ordering::Relaxed);
    }
    let event = t
        .create_event(
            &EventDescriptor { event_type: EventType::SIGNAL, node_id: 1, ..Default::default() },
            false,
            false,
        )
        .unwrap();
    i64_at(sig + AMD_SIGNAL_VALUE_OFFSET as u64).store(1, Ordering::Relaxed);
    u64_at(sig + AMD_SIGNAL_EVENT_ID_OFFSET as u64).store(u64::from(event.event_id), Ordering::Relaxed);
    u64_at(sig + AMD_SIGNAL_EVENT_MAILBOX_PTR_OFFSET as u64).store(event.hw_data2, Ordering::Relaxed);

    let mut res = QueueResource {
        write_ptr: desc + AMD_QUEUE_WRITE_DISPATCH_ID_OFFSET as u64,
        read_ptr: desc + AMD_QUEUE_READ_DISPATCH_ID_OFFSET as u64,
        ..Default::default()
    };
    assert_eq!(
        t.create_queue(1, QueueType::COMPUTE_AQL, 100, QueuePriority(4), ring, 64 * 64, None, &mut res),
        Err(Status::InvalidParameter)
    );
    assert_eq!(
        t.create_queue(0, QueueType::COMPUTE_AQL, 100, QueuePriority::NORMAL, ring, 64 * 64, None, &mut res),
        Err(Status::Error),
        "no queues on the CPU"
    );
    t.create_queue(1, QueueType::COMPUTE_AQL, 100, QueuePriority::NORMAL, ring, 64 * 64, None, &mut res).unwrap();
    assert_ne!(res.queue_id, QueueId(0));
    assert_ne!(res.doorbell, 0);
    assert_eq!(
        t.query_pointer_info(res.doorbell).map(|i| i.mem_flags.reserved()),
        Ok(0xBE1),
        "the doorbell slice is GPU-mapped"
    );

    // A barrier-AND packet with no dependencies completes at once.
    let header = u64::from(HSA_PACKET_TYPE_BARRIER_AND)
        | (u64::from(HSA_FENCE_SCOPE_SYSTEM) << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
    u64_at(ring + 56).store(sig, Ordering::Relaxed);
    u64_at(ring).store(header, Ordering::Release);
    u64_at(res.write_ptr).store(1, Ordering::Release);
    u64_at(res.doorbell).store(0, Ordering::Release);
    let mut ev = event.clone();
    t.wait_on_event(&mut ev, 5000).unwrap();
    assert_eq!(i64_at(sig + AMD_SIGNAL_VALUE_OFFSET as u64).load(Ordering::Acquire), 0);
    assert_eq!(u64_at(event.hw_data2).load(Ordering::Acquire), u64::MAX, "the device acknowledged the mailbox");
    assert_eq!(u64_at(res.read_ptr).load(Ordering::Acquire), 1);

    t.update_queue(res.queue_id, 50, QueuePriority::HIGH, ring, 64 * 64, None).unwrap();
    assert_eq!(
        t.update_queue(QueueId(999), 50, QueuePriority::HIGH, ring, 64 * 64, None),
        Err(Status::InvalidParameter)
    );
    t.set_queue_cu_mask(res.queue_id, &[0xFFFF, 0xFFFF, 0xFFFF, 0xFF]).unwrap();
    assert_eq!(t.queue_cu_mask(res.queue_id).unwrap(), [0xFFFF, 0xFFFF, 0xFFFF, 0xFF]);
    assert_eq!(t.set_queue_cu_mask(res.queue_id, &[]), Err(Status::InvalidParameter));
    assert_eq!(t.alloc_queue_gws(res.queue_id, 1), Ok(0), "the queue gets all of the GPU's GWS");

    // A PM4 compute queue gets its pointers from the thunk.
    let mut pm4 = QueueResource::default();
    t.create_queue(1, QueueType::COMPUTE, 100, QueuePriority::NORMAL, ring, 64 * 64, None, &mut pm4).unwrap();
    assert_ne!(pm4.read_ptr, 0);
    assert_eq!(pm4.doorbell & !8191, res.doorbell & !8191, "the same doorbell slice");
    assert_eq!(t.alloc_queue_gws(pm4.queue_id, 1), Err(Status::OutOfResources), "one GWS queue per process and GPU");
    assert_eq!(t.alloc_queue_gws(pm4.queue_id, 0), Err(Status::InvalidParameter), "it holds none to give back");
    assert_eq!(t.alloc_queue_gws(res.queue_id, 0), Ok(0));
    assert_eq!(t.alloc_queue_gws(pm4.queue_id, 1), Ok(0), "free again");
    assert_ne!(pm4.doorbell, res.doorbell, "a doorbell of its own");
    t.destroy_queue(pm4.queue_id).unwrap();
    t.destroy_queue(res.queue_id).unwrap();
    assert_eq!(t.destroy_queue(res.queue_id), Err(Status::InvalidParameter));
    assert_eq!(
        t.create_queue(1, QueueType::MULTIMEDIA_DECODE, 100, QueuePriority::NORMAL, ring, 4096, None, &mut pm4),
        Err(Status::InvalidParameter)
    );
    t.destroy_event(&event).unwrap();
}

#[test]
fn the_process_instance_is_reference_counted() {
    std::env::set_var("CUSE_KFD_EMBEDDED", "1");
    assert_eq!(current().err(), Some(Status::KernelIoChannelNotOpened));
    assert_eq!(close_kfd(), Err(Status::KernelIoChannelNotOpened));
    assert_eq!(open_kfd(), Ok(Opened::First));
    assert_eq!(open_kfd(), Ok(Opened::Again));
    let t = current().unwrap();
    assert_eq!(t.version().major, 1);
    drop(t);
    close_kfd().unwrap();
    assert!(current().is_ok());
    close_kfd().unwrap();
    assert_eq!(current().err(), Some(Status::KernelIoChannelNotOpened));
}
