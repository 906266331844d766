//! The KFD handle: typed ioctls over a transport.

use crate::memory::{open_backing, GpuMemory, Kind, Space};
use crate::secure_env;
use crate::transport::{EmbeddedTransport, Transport};
use crate::vm;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::{FromBytes, Immutable, IntoBytes};

pub(crate) struct Inner {
    transport: Box<dyn Transport>,
    /// The client-allocated event page (created with the first event).
    event_page: Mutex<Option<GpuMemory>>,
}

/// An open KFD device. Cheap to clone; the device closes with the last clone.
#[derive(Clone)]
pub struct Kfd {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Kfd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kfd").field("pid", &self.pid()).finish()
    }
}

/// What WAIT_EVENTS answered.
#[derive(Debug, Clone)]
pub struct WaitResult {
    pub result: Result<(), Errno>,
    pub wait_result: u32,
    pub data: Vec<EventData>,
}

impl Kfd {
    pub fn new(transport: Box<dyn Transport>) -> Kfd {
        Kfd { inner: Arc::new(Inner { transport, event_page: Mutex::new(None) }) }
    }

    /// The device node at `path` (a cuse-kfd daemon's /dev/kfd).
    pub fn open_node(path: &Path) -> Result<Kfd, Errno> {
        Ok(Kfd::new(Box::new(crate::node::NodeTransport::open(path)?)))
    }

    /// The transport the environment asks for: `CUSE_KFD_EMBEDDED=1` an embedded device (of
    /// profile `CUSE_KFD_PROFILE` with `CUSE_KFD_GPUS` GPUs, `CUSE_KFD_SHADER_WORKERS`
    /// shader-core threads and `CUSE_KFD_ENGINE_THREADS` engine threads (1 to
    /// [`cuse_kfd::engine::MAX_THREADS`]), defaults
    /// otherwise), else the node
    /// `CUSE_KFD_DEVICE` (default /dev/kfd).
    pub fn open_default() -> Result<Kfd, Errno> {
        if secure_env::var_os("CUSE_KFD_EMBEDDED").is_some_and(|v| v == "1") {
            let mut config = cuse_kfd::DeviceConfig::default();
            if let Some(profile) = secure_env::var("CUSE_KFD_PROFILE") {
                config.profile = profile;
            }
            if let Some(gpus) = secure_env::var("CUSE_KFD_GPUS").and_then(|g| g.parse().ok()) {
                config.gpus = gpus;
            }
            if let Some(n) = secure_env::var("CUSE_KFD_SHADER_WORKERS").and_then(|n| n.parse().ok()) {
                config.engine.shader_workers = n;
            }
            if let Some(v) = secure_env::var("CUSE_KFD_ENGINE_THREADS") {
                let max = cuse_kfd::engine::MAX_THREADS;
                match v.parse::<usize>() {
                    Ok(n) if (1..=max).contains(&n) => config.engine.threads = n,
                    _ => {
                        log::error!("CUSE_KFD_ENGINE_THREADS={v}: 1 to {max} engine threads");
                        return Err(Errno::EINVAL);
                    }
                }
            }
            return Kfd::embedded(&config).map_err(|e| {
                log::error!("cannot create the embedded device: {e}");
                Errno::ENODEV
            });
        }
        let path = secure_env::var_os("CUSE_KFD_DEVICE").map_or_else(|| PathBuf::from("/dev/kfd"), PathBuf::from);
        Kfd::open_node(&path)
    }

    /// A device embedded in this process.
    pub fn embedded(config: &cuse_kfd::DeviceConfig) -> Result<Kfd, cuse_kfd::device::DeviceError> {
        Ok(Kfd::new(Box::new(EmbeddedTransport::new(config)?)))
    }

    /// A handle that does not keep the device open (buffers hold one: the event page buffer
    /// lives inside the handle itself).
    pub(crate) fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    pub(crate) fn upgrade(w: &Weak<Inner>) -> Option<Kfd> {
        w.upgrade().map(|inner| Kfd { inner })
    }

    pub fn transport(&self) -> &dyn Transport {
        &*self.inner.transport
    }

    pub fn runtime_dir(&self) -> &Path {
        self.inner.transport.runtime_dir()
    }

    pub fn pid(&self) -> u32 {
        self.inner.transport.pid()
    }

    pub fn kick(&self) {
        self.inner.transport.kick();
    }

    /// A raw ioctl. The typed methods below are the safe way to the requests they cover.
    ///
    /// # Safety
    ///
    /// ioctl(2)'s contract, as [`Transport::ioctl`]: every pointer in `arg` is valid for what the
    /// request reads and writes, for as long as the request (or, for registered memory, the
    /// registration) lasts, and no Rust reference aliases memory the device writes.
    pub unsafe fn ioctl(&self, cmd: u32, arg: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: this function's contract.
        unsafe { self.inner.transport.ioctl(cmd, arg) }
    }

    /// A typed ioctl.
    ///
    /// # Safety
    ///
    /// As for [`Kfd::ioctl`], for the pointers inside `args`.
    pub unsafe fn call<T: FromBytes + IntoBytes + Immutable>(&self, cmd: u32, args: &mut T) -> Result<(), Errno> {
        // SAFETY: this function's contract.
        unsafe { self.ioctl(cmd, args.as_mut_bytes()) }
    }

    pub fn version(&self) -> Result<(u32, u32), Errno> {
        let mut a = GetVersionArgs::default();
        // SAFETY: GET_VERSION's argument holds no pointer.
        unsafe { self.call(AMDKFD_IOC_GET_VERSION, &mut a)? };
        Ok((a.major_version, a.minor_version))
    }

    /// The apertures of every GPU node.
    pub fn apertures(&self) -> Result<Vec<ProcessDeviceApertures>, Errno> {
        let mut a = GetProcessAperturesNewArgs::default();
        // SAFETY: a null array pointer: the device only counts the nodes.
        unsafe { self.call(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut a)? };
        let mut v = vec![ProcessDeviceApertures::default(); a.num_of_nodes as usize];
        a.kfd_process_device_apertures_ptr = v.as_mut_ptr() as u64;
        // SAFETY: the pointer is `v`'s, `num_of_nodes` entries long, owned here and not borrowed
        // during the call.
        unsafe { self.call(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut a)? };
        v.truncate(a.num_of_nodes as usize);
        Ok(v)
    }

    /// GET_CLOCK_COUNTERS of `gpu_id`: the GPU, CPU and system clocks read together.
    pub fn clock_counters(&self, gpu_id: u32) -> Result<GetClockCountersArgs, Errno> {
        let mut a = GetClockCountersArgs { gpu_id, ..Default::default() };
        // SAFETY: GET_CLOCK_COUNTERS' argument holds no pointer.
        unsafe { self.call(AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut a)? };
        Ok(a)
    }

    pub fn gpu_ids(&self) -> Result<Vec<u32>, Errno> {
        Ok(self.apertures()?.iter().map(|a| a.gpu_id).collect())
    }

    /// Allocates `size` bytes of `kind` memory on `gpu_id`, maps it to that GPU and into this
    /// process at the same address.
    pub fn alloc(&self, gpu_id: u32, size: u64, kind: Kind) -> Result<GpuMemory, Errno> {
        let size = size.max(1).next_multiple_of(PAGE_SIZE);
        let va = vm::reserve(size as usize)?;
        let domain = match kind {
            Kind::Vram => KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
            Kind::Gtt => KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT,
        };
        let mut a = AllocMemoryOfGpuArgs {
            va_addr: va,
            size,
            gpu_id,
            flags: domain | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE,
            ..Default::default()
        };
        // SAFETY: a VRAM or GTT allocation (no USERPTR): the argument holds no CPU pointer.
        if let Err(e) = unsafe { self.call(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a) } {
            // SAFETY: the reservation made above, not handed to anything yet.
            unsafe { vm::release(va, size as usize) };
            return Err(e);
        }
        // From here `mem` owns the allocation: any failure below frees it on drop.
        // SAFETY: the reservation made above passes to `mem`, which maps it below before it
        // leaves this function.
        let mem = unsafe { GpuMemory::new(self.downgrade(), va, size, a.handle, gpu_id) };
        let file = open_backing(self, Space::Render, a.mmap_offset)?;
        // SAFETY: `mem`'s own reservation; no reference into it exists yet.
        unsafe { vm::map_file_at(va, size as usize, &file)? };
        self.map_to_gpu(a.handle, &[gpu_id])?;
        Ok(mem)
    }

    pub fn map_to_gpu(&self, handle: u64, gpus: &[u32]) -> Result<(), Errno> {
        let mut a = MapMemoryToGpuArgs {
            handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: gpus.len() as u32,
            n_success: 0,
        };
        // SAFETY: the device reads `n_devices` ids from `gpus`, borrowed for the call.
        unsafe { self.call(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut a) }
    }

    pub fn unmap_from_gpu(&self, handle: u64, gpus: &[u32]) -> Result<(), Errno> {
        let mut a = UnmapMemoryFromGpuArgs {
            handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: gpus.len() as u32,
            n_success: 0,
        };
        // SAFETY: the device reads `n_devices` ids from `gpus`, borrowed for the call.
        unsafe { self.call(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &mut a) }
    }

    pub fn free_memory(&self, handle: u64) -> Result<(), Errno> {
        // SAFETY: FREE_MEMORY_OF_GPU's argument holds no pointer.
        unsafe { self.call(AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut FreeMemoryOfGpuArgs { handle }) }
    }

    /// Creates an event. The first signal event brings the event page: a GTT buffer of this
    /// client, mapped to `gpu_id`, handed to the device (the dGPU path of libhsakmt).
    pub fn create_event(&self, gpu_id: u32, event_type: u32, auto_reset: bool) -> Result<CreateEventArgs, Errno> {
        let mut page = self.inner.event_page.lock();
        let mut a = CreateEventArgs { event_type, auto_reset: u32::from(auto_reset), node_id: 0, ..Default::default() };
        let mut new_page = None;
        if page.is_none() {
            let p = self.alloc(gpu_id, u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8, Kind::Gtt)?;
            a.event_page_offset = p.handle();
            new_page = Some(p);
        }
        // SAFETY: CREATE_EVENT's argument holds no CPU pointer (the event page is a handle).
        unsafe { self.call(AMDKFD_IOC_CREATE_EVENT, &mut a)? };
        if let Some(p) = new_page {
            *page = Some(p);
        }
        Ok(a)
    }

    /// The GPU address of event slot `slot` (a signal's event mailbox).
    pub fn mailbox(&self, slot: u32) -> Option<u64> {
        let page = self.inner.event_page.lock();
        page.as_ref().map(|p| p.addr(u64::from(slot) * 8))
    }

    pub fn destroy_event(&self, event_id: u32) -> Result<(), Errno> {
        // SAFETY: DESTROY_EVENT's argument holds no pointer.
        unsafe { self.call(AMDKFD_IOC_DESTROY_EVENT, &mut DestroyEventArgs { event_id, pad: 0 }) }
    }

    pub fn set_event(&self, event_id: u32) -> Result<(), Errno> {
        // SAFETY: SET_EVENT's argument holds no pointer.
        unsafe { self.call(AMDKFD_IOC_SET_EVENT, &mut SetEventArgs { event_id, pad: 0 }) }
    }

    pub fn reset_event(&self, event_id: u32) -> Result<(), Errno> {
        // SAFETY: RESET_EVENT's argument holds no pointer.
        unsafe { self.call(AMDKFD_IOC_RESET_EVENT, &mut ResetEventArgs { event_id, pad: 0 }) }
    }

    /// WAIT_EVENTS on `ids`; `timeout_ms` u32::MAX waits forever.
    pub fn wait_events(&self, ids: &[u32], all: bool, timeout_ms: u32) -> WaitResult {
        let mut data: Vec<EventData> =
            ids.iter().map(|&event_id| EventData { event_id, ..Default::default() }).collect();
        let mut a = WaitEventsArgs {
            events_ptr: data.as_mut_ptr() as u64,
            num_events: ids.len() as u32,
            wait_for_all: u32::from(all),
            timeout: timeout_ms,
            wait_result: 0,
        };
        // SAFETY: the device reads and writes `num_events` entries of `data`, owned here and
        // not borrowed during the call.
        let result = unsafe { self.call(AMDKFD_IOC_WAIT_EVENTS, &mut a) };
        WaitResult { result, wait_result: a.wait_result, data }
    }
}
