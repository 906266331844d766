//! The happy path of every implemented ioctl, with the values amdkfd hands back.

mod support;

use cuse_kfd::memory::backing::{doorbell_slice_offset, MmapSpace};
use cuse_kfd::memory::vm::GpuVa;
use cuse_kfd::process::{GPUVM_BASE, GPUVM_LIMIT};
use nix::errno::Errno;
use std::os::fd::AsRawFd;
use support::raw::*;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::FromBytes;

fn gpu_of_mmap_offset(offset: u64) -> u32 {
    ((offset & KFD_MMAP_GPU_ID_MASK) >> KFD_MMAP_GPU_ID_SHIFT) as u32
}

#[test]
fn get_version_is_1_18() {
    let rig = Rig::new();
    let c = rig.open();
    let mut v = GetVersionArgs { major_version: 0xdead, minor_version: 0xbeef };
    c.call(AMDKFD_IOC_GET_VERSION, &mut v).unwrap();
    assert_eq!((v.major_version, v.minor_version), (1, 18));
}

#[test]
fn process_apertures_old_ioctl_lists_every_gpu() {
    let rig = Rig::with_gpus(2);
    let c = rig.open();
    let mut a = GetProcessAperturesArgs::default();
    c.call(AMDKFD_IOC_GET_PROCESS_APERTURES, &mut a).unwrap();
    assert_eq!(a.num_of_nodes, 2);
    for (ap, gpu) in a.process_apertures.iter().zip(rig.gpu_ids()) {
        assert_eq!(ap.gpu_id, gpu);
        assert_eq!((ap.gpuvm_base, ap.gpuvm_limit), (GPUVM_BASE, GPUVM_LIMIT));
        assert!(ap.lds_base < ap.lds_limit && ap.scratch_base < ap.scratch_limit);
        assert!(ap.lds_base > ap.gpuvm_limit && ap.scratch_base > ap.gpuvm_limit, "LDS and scratch lie above the VM");
    }
    assert_eq!(a.process_apertures[2], ProcessDeviceApertures::default(), "unused entries stay zero");
}

#[test]
fn process_apertures_new_counts_then_fills() {
    let rig = Rig::with_gpus(2);
    let c = rig.open();
    // The count query.
    let mut q = GetProcessAperturesNewArgs::default();
    c.call(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut q).unwrap();
    assert_eq!(q.num_of_nodes, 2);
    // The fill, into a caller array with a sentinel entry after it.
    let sentinel = ProcessDeviceApertures { gpu_id: 0x5a5a, ..Default::default() };
    let mut out = vec![sentinel; 3];
    let mut f = GetProcessAperturesNewArgs {
        kfd_process_device_apertures_ptr: out.as_mut_ptr() as u64,
        num_of_nodes: 2,
        pad: 0,
    };
    c.call(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut f).unwrap();
    let out = std::hint::black_box(out);
    assert_eq!(f.num_of_nodes, 2);
    assert_eq!(vec![out[0].gpu_id, out[1].gpu_id], rig.gpu_ids());
    assert_eq!((out[0].gpuvm_base, out[0].gpuvm_limit), (GPUVM_BASE, GPUVM_LIMIT));
    assert_eq!(out[2], sentinel, "nothing written past num_of_nodes");
    // Asking for fewer than there are fills only that many.
    let mut one = [sentinel; 2];
    let mut f = GetProcessAperturesNewArgs {
        kfd_process_device_apertures_ptr: one.as_mut_ptr() as u64,
        num_of_nodes: 1,
        pad: 0,
    };
    c.call(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut f).unwrap();
    let one = std::hint::black_box(one);
    assert_eq!(f.num_of_nodes, 1);
    assert_eq!(one[0].gpu_id, rig.gpu_ids()[0]);
    assert_eq!(one[1], sentinel);
}

#[test]
fn acquire_vm_binds_a_real_fd_once() {
    let rig = Rig::new();
    let c = rig.open();
    let null = std::fs::File::open("/dev/null").unwrap();
    let mut a = AcquireVmArgs { drm_fd: null.as_raw_fd() as u32, gpu_id: rig.gpu() };
    c.call(AMDKFD_IOC_ACQUIRE_VM, &mut a).unwrap();
    // The same file again is fine (amdkfd: pdd->drm_file == drm_file).
    let dup = null.try_clone().unwrap();
    let mut again = AcquireVmArgs { drm_fd: dup.as_raw_fd() as u32, gpu_id: rig.gpu() };
    c.call(AMDKFD_IOC_ACQUIRE_VM, &mut again).unwrap();
    // Another file is EBUSY.
    let tmp = rig.root.join("not-a-render-node");
    let other = std::fs::File::create(&tmp).unwrap();
    let mut busy = AcquireVmArgs { drm_fd: other.as_raw_fd() as u32, gpu_id: rig.gpu() };
    assert_eq!(c.call(AMDKFD_IOC_ACQUIRE_VM, &mut busy), Err(Errno::EBUSY));
}

#[test]
fn set_memory_policy_takes_both_policies() {
    let rig = Rig::new();
    let c = rig.open();
    for (default_policy, alternate_policy) in [
        (KFD_IOC_CACHE_POLICY_COHERENT, KFD_IOC_CACHE_POLICY_NONCOHERENT),
        (KFD_IOC_CACHE_POLICY_NONCOHERENT, KFD_IOC_CACHE_POLICY_COHERENT),
    ] {
        let mut a = SetMemoryPolicyArgs {
            alternate_aperture_base: 0x1_0000_0000,
            alternate_aperture_size: 0x1000_0000,
            gpu_id: rig.gpu(),
            default_policy,
            alternate_policy,
            pad: 0,
        };
        c.call(AMDKFD_IOC_SET_MEMORY_POLICY, &mut a).unwrap();
    }
    let p = rig.emb().device().process(c.pid()).unwrap();
    let inner = p.inner();
    let d = &inner.devices[&rig.gpu()];
    assert_eq!(
        (d.default_policy, d.alternate_policy),
        (KFD_IOC_CACHE_POLICY_NONCOHERENT, KFD_IOC_CACHE_POLICY_COHERENT)
    );
    assert_eq!(d.alternate_aperture, (0x1_0000_0000, 0x1000_0000));
}

#[test]
fn clock_counters_are_monotonic_and_non_zero() {
    let rig = Rig::new();
    let c = rig.open();
    let read = || {
        let mut a = GetClockCountersArgs { gpu_id: rig.gpu(), ..Default::default() };
        c.call(AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut a).unwrap();
        a
    };
    let first = read();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let second = read();
    for a in [first, second] {
        assert!(a.gpu_clock_counter > 0 && a.cpu_clock_counter > 0 && a.system_clock_counter > 0, "{a:?}");
        assert_eq!(a.system_clock_freq, 1_000_000_000);
    }
    assert!(second.gpu_clock_counter > first.gpu_clock_counter);
    assert!(second.cpu_clock_counter > first.cpu_clock_counter);
    assert!(second.system_clock_counter > first.system_clock_counter);
    // 5 ms at 1 GHz and at the 100 MHz GPU clock, with room for a slow machine.
    assert!(second.cpu_clock_counter - first.cpu_clock_counter >= 5_000_000);
    assert!(second.gpu_clock_counter - first.gpu_clock_counter >= 500_000);
    // A node without a GPU reports a zero GPU counter, not an error (amdkfd).
    let mut cpu_node = GetClockCountersArgs { gpu_id: 0, ..Default::default() };
    c.call(AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut cpu_node).unwrap();
    assert_eq!(cpu_node.gpu_clock_counter, 0);
    assert!(cpu_node.cpu_clock_counter >= second.cpu_clock_counter);
}

#[test]
fn xnack_mode_queries_sets_and_is_busy_with_queues() {
    let rig = Rig::new();
    let c = rig.open();
    let query = || {
        let mut a = SetXnackModeArgs { xnack_enabled: -1 };
        c.call(AMDKFD_IOC_SET_XNACK_MODE, &mut a).unwrap();
        a.xnack_enabled
    };
    assert_eq!(query(), 0);
    c.call(AMDKFD_IOC_SET_XNACK_MODE, &mut SetXnackModeArgs { xnack_enabled: 1 }).unwrap();
    assert_eq!(query(), 1);
    c.call(AMDKFD_IOC_SET_XNACK_MODE, &mut SetXnackModeArgs { xnack_enabled: 0 }).unwrap();
    assert_eq!(query(), 0);
    let q = c.create_queue();
    assert_eq!(c.call(AMDKFD_IOC_SET_XNACK_MODE, &mut SetXnackModeArgs { xnack_enabled: 1 }), Err(Errno::EBUSY));
    assert_eq!(c.call(AMDKFD_IOC_SET_XNACK_MODE, &mut SetXnackModeArgs { xnack_enabled: 0 }), Err(Errno::EBUSY));
    assert_eq!(query(), 0, "a query is allowed with queues");
    c.destroy_queue(q.id).unwrap();
    c.call(AMDKFD_IOC_SET_XNACK_MODE, &mut SetXnackModeArgs { xnack_enabled: 1 }).unwrap();
}

#[test]
fn runtime_enable_then_busy_then_disable() {
    let rig = Rig::new();
    let c = rig.open();
    let mut on = RuntimeEnableArgs {
        r_debug: 0x7000_0000,
        mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK,
        capabilities_mask: 0xffff_ffff,
    };
    c.call(AMDKFD_IOC_RUNTIME_ENABLE, &mut on).unwrap();
    assert_eq!(on.capabilities_mask, 0, "no debugger: no capabilities advertised");
    let mut again = RuntimeEnableArgs { mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK, ..Default::default() };
    assert_eq!(c.call(AMDKFD_IOC_RUNTIME_ENABLE, &mut again), Err(Errno::EBUSY));
    c.call(AMDKFD_IOC_RUNTIME_ENABLE, &mut RuntimeEnableArgs::default()).unwrap();
    // Disabled, it can be enabled again.
    let mut on = RuntimeEnableArgs { mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK, ..Default::default() };
    c.call(AMDKFD_IOC_RUNTIME_ENABLE, &mut on).unwrap();
}

#[test]
fn scratch_backing_va_and_trap_handler_are_recorded() {
    let rig = Rig::new();
    let c = rig.open();
    let mut s = SetScratchBackingVaArgs { va_addr: 0x7f00_0000_0000, gpu_id: rig.gpu(), pad: 0 };
    c.call(AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &mut s).unwrap();
    let mut t = SetTrapHandlerArgs { tba_addr: 0x1_2345_6000, tma_addr: 0x1_2345_7000, gpu_id: rig.gpu(), pad: 0 };
    c.call(AMDKFD_IOC_SET_TRAP_HANDLER, &mut t).unwrap();
    let p = rig.emb().device().process(c.pid()).unwrap();
    assert_eq!(p.inner().devices[&rig.gpu()].scratch_backing_va, 0x7f00_0000_0000);
    assert_eq!(p.trap_handler(rig.gpu()), Some((0x1_2345_6000, 0x1_2345_7000)));
    // A TBA of 0 takes the handler away.
    let mut t = SetTrapHandlerArgs { tba_addr: 0, tma_addr: 0x1_2345_7000, gpu_id: rig.gpu(), pad: 0 };
    c.call(AMDKFD_IOC_SET_TRAP_HANDLER, &mut t).unwrap();
    assert_eq!(p.trap_handler(rig.gpu()), None);
}

#[test]
fn tile_config_reports_the_profile_and_zeroes_the_arrays() {
    let rig = Rig::new();
    let c = rig.open();
    let profile = rig.emb().device().topology().gpus()[0].profile;
    let mut tiles = [0xaaaa_aaaau32; 40];
    let mut macros = [0xaaaa_aaaau32; 40];
    let mut a = GetTileConfigArgs {
        tile_config_ptr: tiles.as_mut_ptr() as u64,
        macro_tile_config_ptr: macros.as_mut_ptr() as u64,
        num_tile_configs: 40,
        num_macro_tile_configs: 40,
        gpu_id: rig.gpu(),
        ..Default::default()
    };
    c.call(AMDKFD_IOC_GET_TILE_CONFIG, &mut a).unwrap();
    let (tiles, macros) = std::hint::black_box((tiles, macros));
    assert_eq!(a.gb_addr_config, profile.gb_addr_config);
    assert_eq!(a.num_tile_configs, profile.num_tile_configs, "clamped to what the GPU has");
    assert_eq!(a.num_macro_tile_configs, profile.num_macro_tile_configs);
    assert!(a.num_banks.is_power_of_two() && a.num_ranks.is_power_of_two());
    let n = a.num_tile_configs as usize;
    assert!(tiles[..n].iter().all(|&t| t == 0) && tiles[n..].iter().all(|&t| t == 0xaaaa_aaaa));
    let m = a.num_macro_tile_configs as usize;
    assert!(macros[..m].iter().all(|&t| t == 0) && macros[m..].iter().all(|&t| t == 0xaaaa_aaaa));
}

#[test]
fn available_memory_drops_after_vram_alloc_and_returns_after_free() {
    let rig = Rig::new();
    let c = rig.open();
    let total = c.available();
    assert_eq!(total, rig.vram_size());
    let b = c.alloc(Mem::Vram, 3 << 20);
    assert_eq!(c.available(), total - (3 << 20));
    // Sizes round up to pages.
    let odd = c.alloc(Mem::Vram, 100);
    assert_eq!(c.available(), total - (3 << 20) - PAGE_SIZE);
    // GTT is not VRAM.
    let g = c.alloc(Mem::Gtt, 1 << 20);
    assert_eq!(c.available(), total - (3 << 20) - PAGE_SIZE);
    c.free(b.handle).unwrap();
    c.free(odd.handle).unwrap();
    c.free(g.handle).unwrap();
    assert_eq!(c.available(), total);
}

#[test]
fn vram_and_gtt_alloc_map_unmap_free_on_two_gpus() {
    let rig = Rig::with_gpus(2);
    let c = rig.open();
    let gpus = rig.gpu_ids();
    for mem in [Mem::Vram, Mem::Gtt] {
        let b = c.alloc(mem, 64 << 10);
        assert_eq!(b.handle >> 32, u64::from(rig.gpu()), "handle = gpu_id << 32 | index");
        assert_ne!(b.handle & 0xffff_ffff, 0);
        assert_eq!(c.map(b.handle, &gpus), Ok(2));
        let p = rig.emb().device().process(c.pid()).unwrap();
        for &g in &gpus {
            assert!(p.vm().is_mapped(g, GpuVa(b.va), b.size), "{mem:?} mapped on {g:#x}");
        }
        // Mapping again where it is mapped is harmless.
        assert_eq!(c.map(b.handle, &gpus[..1]), Ok(1));
        assert_eq!(c.unmap(b.handle, &gpus), Ok(2));
        for &g in &gpus {
            assert!(!p.vm().is_mapped(g, GpuVa(b.va), 1));
        }
        c.free(b.handle).unwrap();
        assert_eq!(c.free(b.handle), Err(Errno::EINVAL), "freed once");
    }
    assert_eq!(rig.stats().buffers, 0);
}

#[test]
fn userptr_buffer_is_the_callers_own_memory() {
    let rig = Rig::new();
    let c = rig.open();
    let mut pages = memmap2::MmapMut::map_anon(2 * PAGE_SIZE as usize).unwrap();
    let cpu = pages.as_mut_ptr() as u64;
    assert_eq!(cpu % PAGE_SIZE, 0);
    let va = c.next_va(2 * PAGE_SIZE);
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let b = c.try_alloc_at(rig.gpu(), va, 2 * PAGE_SIZE, flags, cpu).unwrap();
    assert_eq!(b.mmap_offset, cpu, "USERPTR keeps the CPU address");
    c.map(b.handle, &[rig.gpu()]).unwrap();
    pages[PAGE_SIZE as usize..PAGE_SIZE as usize + 4].copy_from_slice(b"kfd!");
    let p = rig.emb().device().process(c.pid()).unwrap();
    let mut seen = [0u8; 4];
    p.vm().read(rig.gpu(), GpuVa(va + PAGE_SIZE), &mut seen).unwrap();
    assert_eq!(&seen, b"kfd!");
    // And the GPU's writes land in the caller's pages.
    p.vm().write(rig.gpu(), GpuVa(va + 16), b"gpu").unwrap();
    assert_eq!(&std::hint::black_box(&pages)[16..19], b"gpu");
    c.unmap(b.handle, &[rig.gpu()]).unwrap();
    c.free(b.handle).unwrap();
}

#[test]
fn doorbell_and_mmio_remap_buffers() {
    let rig = Rig::new();
    let c = rig.open();
    let gpu = rig.gpu();
    let db = c
        .try_alloc_at(
            gpu,
            c.next_va(8192),
            8192,
            KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
            0,
        )
        .unwrap();
    assert_eq!(db.mmap_offset, KFD_MMAP_TYPE_DOORBELL | (u64::from(gpu) << KFD_MMAP_GPU_ID_SHIFT));
    c.map(db.handle, &[gpu]).unwrap();
    let mmio = c
        .try_alloc_at(
            gpu,
            c.next_va(PAGE_SIZE),
            PAGE_SIZE,
            KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
            0,
        )
        .unwrap();
    assert_eq!(mmio.mmap_offset, KFD_MMAP_TYPE_MMIO | (u64::from(gpu) << KFD_MMAP_GPU_ID_SHIFT));
    c.map(mmio.handle, &[gpu]).unwrap();
    let db_path = rig.backing(c.pid(), MmapSpace::Kfd, db.mmap_offset);
    let mmio_path = rig.backing(c.pid(), MmapSpace::Kfd, mmio.mmap_offset);
    assert_eq!(std::fs::metadata(&db_path).unwrap().len(), 8192);
    assert_eq!(std::fs::metadata(&mmio_path).unwrap().len(), PAGE_SIZE);
    // The doorbell buffer is the process doorbell slice queues ring: the queue's doorbells are
    // in its file. (An unused doorbell is written, so no command processor wakes.)
    let q = c.create_queue();
    let slice = doorbell_slice_offset(q.doorbell_offset, 8192);
    assert_eq!(slice, db.mmap_offset);
    let mut bell = map_file(&db_path);
    let at = 8 * 100;
    bell[at..at + 8].copy_from_slice(&5u64.to_ne_bytes());
    let p = rig.emb().device().process(c.pid()).unwrap();
    let mut seen = [0u8; 8];
    p.vm().read(gpu, GpuVa(db.va + at as u64), &mut seen).unwrap();
    assert_eq!(u64::from_ne_bytes(seen), 5);
}

#[test]
fn backing_files_follow_the_documented_path_and_share_data() {
    let rig = Rig::new();
    let c = rig.open();
    for mem in [Mem::Vram, Mem::Gtt] {
        let b = c.alloc_mapped(mem, 3 * PAGE_SIZE);
        let path = rig.backing(c.pid(), MmapSpace::Render, b.mmap_offset);
        assert_eq!(path, rig.root.join(c.pid().to_string()).join("render").join(format!("{:016x}", b.mmap_offset)));
        let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{mem:?} backing file {}: {e}", path.display()));
        assert_eq!(meta.len(), 3 * PAGE_SIZE);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // Written through one mapping, seen through another, and by the GPU.
        let mut a = map_file(&path);
        let b_map = map_file(&path);
        a[PAGE_SIZE as usize + 3..PAGE_SIZE as usize + 8].copy_from_slice(b"hello");
        assert_eq!(&b_map[PAGE_SIZE as usize + 3..PAGE_SIZE as usize + 8], b"hello");
        let p = rig.emb().device().process(c.pid()).unwrap();
        let mut seen = [0u8; 5];
        p.vm().read(rig.gpu(), GpuVa(b.va + PAGE_SIZE + 3), &mut seen).unwrap();
        assert_eq!(&seen, b"hello");
        // Freed, the file goes away.
        drop((a, b_map));
        c.unmap(b.handle, &[rig.gpu()]).unwrap();
        c.free(b.handle).unwrap();
        assert!(!path.exists(), "{mem:?} backing file removed on free");
    }
}

#[test]
fn aql_queue_create_update_destroy() {
    let rig = Rig::new();
    let c = rig.open();
    let before = rig.stats();
    let q = c.create_queue();
    assert_eq!(rig.stats().queues, before.queues + 1);
    let p = rig.emb().device().process(c.pid()).unwrap();
    {
        let inner = p.inner();
        let queue = &inner.queues[&q.id];
        assert_eq!(queue.gpu_id, rig.gpu());
        assert_eq!((queue.write_ptr.0, queue.read_ptr.0), (q.ptrs.va, q.ptrs.va + 8));
        let props = queue.props();
        assert_eq!((props.ring_base.0, props.ring_size), (q.ring.va, u64::from(RING_SIZE)));
        assert_eq!((props.percentage, props.priority), (100, 7));
    }
    // A live queue's buffers stay mapped (amdkfd: EBUSY while a queue uses them).
    assert_eq!(c.unmap(q.ring.handle, &[rig.gpu()]), Err(Errno::EBUSY));
    assert_eq!(c.unmap(q.ptrs.handle, &[rig.gpu()]), Err(Errno::EBUSY));
    // Update: another mapped ring, 0 % (inactive), another priority.
    let ring2 = c.alloc_mapped(Mem::Gtt, 8192);
    let mut u = UpdateQueueArgs {
        ring_base_address: ring2.va,
        queue_id: q.id,
        ring_size: 8192,
        queue_percentage: 0,
        queue_priority: 15,
    };
    c.call(AMDKFD_IOC_UPDATE_QUEUE, &mut u).unwrap();
    {
        let inner = p.inner();
        let props = inner.queues[&q.id].props();
        assert_eq!((props.ring_base.0, props.ring_size, props.percentage, props.priority), (ring2.va, 8192, 0, 15));
        assert!(!props.is_active());
    }
    // The old ring is no longer the queue's: it can go.
    c.unmap(q.ring.handle, &[rig.gpu()]).unwrap();
    assert_eq!(c.unmap(ring2.handle, &[rig.gpu()]), Err(Errno::EBUSY));
    // A null ring disables the queue too.
    let mut off = UpdateQueueArgs { queue_id: q.id, queue_percentage: 100, ..Default::default() };
    c.call(AMDKFD_IOC_UPDATE_QUEUE, &mut off).unwrap();
    assert!(!p.inner().queues[&q.id].props().is_active());
    c.destroy_queue(q.id).unwrap();
    assert_eq!(rig.stats().queues, before.queues);
    // Destroyed, its buffers are free to go.
    c.unmap(q.ptrs.handle, &[rig.gpu()]).unwrap();
    c.unmap(ring2.handle, &[rig.gpu()]).unwrap();
    assert_eq!(c.destroy_queue(q.id), Err(Errno::EINVAL));
}

#[test]
fn small_rings_are_clamped_to_1024_bytes() {
    let rig = Rig::new();
    let c = rig.open();
    let (ring, ptrs) = c.queue_buffers();
    let mut a = c.aql_args(&ring, &ptrs);
    a.ring_size = 256;
    c.call(AMDKFD_IOC_CREATE_QUEUE, &mut a).unwrap();
    assert_eq!(a.ring_size, KFD_MIN_QUEUE_RING_SIZE);
}

#[test]
fn doorbell_offset_encodes_type_gpu_and_index() {
    let rig = Rig::with_gpus(2);
    let c = rig.open();
    let (ring, ptrs) = c.queue_buffers();
    let q0 = c.try_create_queue_on(&ring, &ptrs).unwrap();
    let q1 = c.try_create_queue_on(&ring, &ptrs).unwrap();
    let q2 = c.try_create_queue_on(&ring, &ptrs).unwrap();
    for (i, q) in [q0, q1, q2].iter().enumerate() {
        assert_eq!(q.doorbell_offset >> 62, 3, "type DOORBELL in bits 63:62");
        assert_eq!(gpu_of_mmap_offset(q.doorbell_offset), rig.gpu(), "gpu_id in bits 61:46");
        assert_eq!(q.doorbell_offset & KFD_MMAP_OFFSET_VALUE_MASK, 8 * i as u64, "8 bytes per doorbell");
    }
    assert_eq!((q0.id, q1.id, q2.id), (0, 1, 2));
    // A freed doorbell is the next one handed out.
    c.destroy_queue(q1.id).unwrap();
    let again = c.try_create_queue_on(&ring, &ptrs).unwrap();
    assert_eq!(again.doorbell_offset & KFD_MMAP_OFFSET_VALUE_MASK, 8);
    // The slice file backs every doorbell of the process on that GPU.
    let slice = rig.backing(c.pid(), MmapSpace::Kfd, doorbell_slice_offset(q0.doorbell_offset, 8192));
    assert_eq!(std::fs::metadata(slice).unwrap().len(), 8192);
    // A queue on the second GPU gets that GPU's id and its own slice.
    let gpu1 = rig.gpu_ids()[1];
    let ring1 = c.alloc(Mem::Gtt, u64::from(RING_SIZE));
    let ptrs1 = c.alloc(Mem::Gtt, PAGE_SIZE);
    c.map(ring1.handle, &[gpu1]).unwrap();
    c.map(ptrs1.handle, &[gpu1]).unwrap();
    let mut a = c.aql_args(&ring1, &ptrs1);
    a.gpu_id = gpu1;
    c.call(AMDKFD_IOC_CREATE_QUEUE, &mut a).unwrap();
    assert_eq!(gpu_of_mmap_offset(a.doorbell_offset), gpu1);
    assert_eq!(a.doorbell_offset & KFD_MMAP_OFFSET_VALUE_MASK, 0);
}

#[test]
fn set_cu_mask_and_wave_state() {
    let rig = Rig::new();
    let c = rig.open();
    let q = c.create_queue();
    let mask = [0xffff_0000u32, 0x0000_ffff];
    let mut a = SetCuMaskArgs { queue_id: q.id, num_cu_mask: 64, cu_mask_ptr: mask.as_ptr() as u64 };
    c.call(AMDKFD_IOC_SET_CU_MASK, &mut a).unwrap();
    let p = rig.emb().device().process(c.pid()).unwrap();
    assert_eq!(p.inner().queues[&q.id].props().cu_mask, mask.to_vec());
    // No CWSR on this device: amdkfd answers EINVAL for an existing queue.
    let mut w = GetQueueWaveStateArgs { queue_id: q.id, ..Default::default() };
    assert_eq!(c.call(AMDKFD_IOC_GET_QUEUE_WAVE_STATE, &mut w), Err(Errno::EINVAL));
}

/// kfd_ioctl_alloc_queue_gws: all of the GPU's GWS go to one queue of the process (first_gws 0);
/// another request while a queue holds them is EBUSY; num_gws 0 gives them back (EINVAL from a
/// queue that holds none); destroying the holder gives them back too.
#[test]
fn alloc_queue_gws_grants_one_queue_at_a_time() {
    let rig = Rig::new();
    let c = rig.open();
    let (a, b) = (c.create_queue(), c.create_queue());
    let gws = |queue_id: u32, num_gws: u32| {
        let mut g = AllocQueueGwsArgs { queue_id, num_gws, first_gws: 0xdead, ..Default::default() };
        c.call(AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut g).map(|_| g.first_gws)
    };
    assert_eq!(gws(a.id, 1), Ok(0), "the first queue gets them, from GWS 0");
    assert_eq!(gws(b.id, 1), Err(Errno::EBUSY), "a second queue while the first holds them");
    assert_eq!(gws(a.id, 1), Err(Errno::EBUSY), "the holder again");
    assert_eq!(gws(b.id, 0), Err(Errno::EINVAL), "releasing from a queue that holds none");
    assert_eq!(gws(a.id, 0), Ok(0), "the holder gives them back");
    assert_eq!(gws(b.id, 1), Ok(0), "then the other queue gets them");
    c.destroy_queue(b.id).unwrap();
    assert_eq!(gws(a.id, 1), Ok(0), "destroying the holder gave them back");
    assert_eq!(gws(b.id, 1), Err(Errno::EINVAL), "a destroyed queue");
    c.destroy_queue(a.id).unwrap();
}

#[test]
fn old_88_byte_create_queue_is_accepted() {
    let rig = Rig::new();
    let c = rig.open();
    let (ring, ptrs) = c.queue_buffers();
    let args = c.aql_args(&ring, &ptrs);
    let old = with_size(AMDKFD_IOC_CREATE_QUEUE, CREATE_QUEUE_ARGS_SIZE_V1_16);
    let mut bytes = bytes_of(&args)[..CREATE_QUEUE_ARGS_SIZE_V1_16].to_vec();
    c.ioctl(old, &mut bytes).unwrap();
    assert_eq!(bytes.len(), 88);
    let mut full = bytes.clone();
    full.resize(96, 0);
    let back = CreateQueueArgs::read_from_bytes(&full).unwrap();
    assert_eq!(back.queue_id, 0);
    assert_eq!(back.doorbell_offset >> 62, 3);
    assert_eq!(gpu_of_mmap_offset(back.doorbell_offset), rig.gpu());
    assert_eq!(rig.stats().queues, 1);
    c.destroy_queue(back.queue_id).unwrap();
}

#[test]
fn larger_struct_than_the_kernels_is_accepted_and_tail_preserved() {
    // amdkfd copies in the caller's size and back the caller's size; bytes past its own
    // struct come back zeroed (kdata is zero-extended), as the kernel does.
    let rig = Rig::new();
    let c = rig.open();
    let cmd = with_size(AMDKFD_IOC_GET_VERSION, 16);
    let mut bytes = [0xffu8; 16];
    c.ioctl(cmd, &mut bytes).unwrap();
    assert_eq!(&bytes[..8], &[1, 0, 0, 0, 18, 0, 0, 0]);
    assert_eq!(&bytes[8..], &[0; 8]);
}

#[test]
fn events_of_every_type_can_be_created_and_destroyed() {
    let rig = Rig::new();
    let c = rig.open();
    let mut ids = Vec::new();
    for t in KFD_IOC_EVENT_SIGNAL..=KFD_IOC_EVENT_MEMORY {
        let e = c.try_create_event(t, false, 0).unwrap_or_else(|e| panic!("type {t}: {e}"));
        assert_eq!(e.event_trigger_data, e.event_id);
        if t == KFD_IOC_EVENT_SIGNAL || t == KFD_IOC_EVENT_DEBUG_EVENT {
            assert!(e.event_id < KFD_SIGNAL_EVENT_LIMIT);
            assert_eq!(e.event_page_offset, KFD_MMAP_TYPE_EVENTS);
            assert_eq!(e.event_slot_index, e.event_id);
        } else {
            assert!(e.event_id >= KFD_SIGNAL_EVENT_LIMIT, "non-signal ids come from their own range");
            assert_eq!(e.event_page_offset, 0);
        }
        ids.push(e.event_id);
    }
    assert_eq!(rig.stats().events, ids.len());
    for id in ids {
        c.destroy_event(id).unwrap();
    }
    assert_eq!(rig.stats().events, 0);
}
