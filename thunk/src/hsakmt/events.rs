//! Events (libhsakmt events.c): the event page, CREATE/DESTROY/SET/RESET_EVENT, WAIT_EVENTS.
//!
//! The first event brings the event page: 4096 eight-byte slots of GTT that the thunk allocates
//! (host-mapped, mapped on every GPU) and hands to the device as the dGPU path of libhsakmt
//! does. A signal event's slot address is its mailbox (`HsaEvent.EventData.HWData2`): ROCr
//! stores it in `amd_signal_t::event_mailbox_ptr`, and whoever writes the slot and raises the
//! event id wakes the waiters.

use super::types::*;
use super::{Result, Status, Thunk, PAGE_SIZE};
use crate::memory::{open_backing, HostMapping, Space};
use parking_lot::Mutex;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::{FromBytes, IntoBytes};

/// Where the event page is mapped.
#[derive(Debug)]
enum Page {
    /// A GTT buffer of this thunk at this address (given to the device).
    Client(u64),
    /// The device's own page, mapped from its backing file (no GPU to make a buffer on).
    Device(HostMapping),
}

impl Page {
    fn addr(&self) -> u64 {
        match self {
            Page::Client(va) => *va,
            Page::Device(m) => m.addr(),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Events {
    page: Mutex<Option<Page>>,
}

const EVENT_PAGE_SIZE: u64 = KFD_SIGNAL_EVENT_LIMIT as u64 * 8;

impl Thunk {
    /// The flags of the event page (allocate_exec_aligned_memory_gpu: non-paged, host-visible,
    /// executable, uncached system memory).
    fn event_page_flags() -> MemFlags {
        MemFlags(0).with_host_access(1).with_execute_access(1).with_non_paged(1).with_uncached(1)
    }

    /// Allocates the event page on the CPU node and maps it on every GPU; returns its address.
    fn alloc_event_page(&self) -> Result<u64> {
        let va = self.alloc_memory(0, EVENT_PAGE_SIZE.next_multiple_of(PAGE_SIZE), Thunk::event_page_flags(), None)?;
        if let Err(e) = self.map_memory_to_gpu(va, EVENT_PAGE_SIZE) {
            let _ = self.free_memory(va, EVENT_PAGE_SIZE);
            return Err(e);
        }
        Ok(va)
    }

    /// `hsaKmtCreateEvent`. A signal (or debug) event gets a slot of the event page: its
    /// address in `hw_data2`, the trigger value in `hw_data3`. `is_signaled` sets a
    /// non-system event at once.
    pub fn create_event(&self, desc: &EventDescriptor, manual_reset: bool, is_signaled: bool) -> Result<Event> {
        if desc.event_type.0 >= EventType::MAXID {
            return Err(Status::InvalidParameter);
        }
        let mut a = CreateEventArgs {
            event_type: desc.event_type.0,
            node_id: desc.node_id,
            auto_reset: u32::from(!manual_reset),
            ..Default::default()
        };
        let mut page = self.events.page.lock();
        let mut fresh = None;
        if page.is_none() && self.nodes.gpus().next().is_some() {
            let va = self.alloc_event_page()?;
            a.event_page_offset = self.fmm.handle(va).ok_or(Status::Error)?;
            fresh = Some(va);
        }
        // SAFETY: CREATE_EVENT's argument holds no CPU pointer (the event page is a buffer handle).
        if let Err(e) = unsafe { self.ioctl(AMDKFD_IOC_CREATE_EVENT, &mut a) } {
            log::warn!("CREATE_EVENT of type {}: {e}", desc.event_type.0);
            if let Some(va) = fresh {
                let _ = self.unmap_memory_to_gpu(va);
                let _ = self.free_memory(va, EVENT_PAGE_SIZE);
            }
            return Err(Status::Error);
        }
        if let Some(va) = fresh {
            *page = Some(Page::Client(va));
        } else if page.is_none() && a.event_page_offset != 0 {
            // No GPU to make the page on: the device made it (libhsakmt's APU path).
            let mapped = open_backing(&self.kfd, Space::Kfd, a.event_page_offset)
                .and_then(|f| HostMapping::map(&f, EVENT_PAGE_SIZE as usize));
            match mapped {
                Ok(m) => *page = Some(Page::Device(m)),
                Err(e) => {
                    log::error!("cannot map the device's event page: {e}");
                    // SAFETY: DESTROY_EVENT's argument holds no pointer.
                    let _ = unsafe {
                        self.ioctl(AMDKFD_IOC_DESTROY_EVENT, &mut DestroyEventArgs { event_id: a.event_id, pad: 0 })
                    };
                    return Err(Status::Error);
                }
            }
        }
        let mailbox = match page.as_ref() {
            Some(p)
                if !desc.event_type.is_system()
                    && a.event_page_offset != 0
                    && a.event_slot_index < KFD_SIGNAL_EVENT_LIMIT =>
            {
                p.addr() + u64::from(a.event_slot_index) * 8
            }
            _ => 0,
        };
        drop(page);
        let event = Event {
            event_id: a.event_id,
            event_type: desc.event_type,
            hw_data1: u64::from(a.event_id),
            hw_data2: mailbox,
            hw_data3: a.event_trigger_data,
            sync_var: desc.sync_var,
            sync_var_size: desc.sync_var_size,
            memory_fault: None,
        };
        if is_signaled && !desc.event_type.is_system() {
            // SAFETY: SET_EVENT's argument holds no pointer.
            let _ = unsafe { self.ioctl(AMDKFD_IOC_SET_EVENT, &mut SetEventArgs { event_id: a.event_id, pad: 0 }) };
        }
        Ok(event)
    }

    /// `hsaKmtDestroyEvent`.
    pub fn destroy_event(&self, event: &Event) -> Result<()> {
        // SAFETY: DESTROY_EVENT's argument holds no pointer.
        unsafe { self.ioctl(AMDKFD_IOC_DESTROY_EVENT, &mut DestroyEventArgs { event_id: event.event_id, pad: 0 }) }
            .map_err(|e| {
                log::warn!("DESTROY_EVENT {}: {e}", event.event_id);
                Status::Error
            })
    }

    /// `hsaKmtSetEvent`: system events cannot be set (`Error`).
    pub fn set_event(&self, event: &Event) -> Result<()> {
        if event.event_type.is_system() {
            return Err(Status::Error);
        }
        // SAFETY: SET_EVENT's argument holds no pointer.
        unsafe { self.ioctl(AMDKFD_IOC_SET_EVENT, &mut SetEventArgs { event_id: event.event_id, pad: 0 }) }
            .map_err(|_| Status::Error)
    }

    /// `hsaKmtResetEvent`: system events cannot be reset (`Error`).
    pub fn reset_event(&self, event: &Event) -> Result<()> {
        if event.event_type.is_system() {
            return Err(Status::Error);
        }
        // SAFETY: RESET_EVENT's argument holds no pointer.
        unsafe { self.ioctl(AMDKFD_IOC_RESET_EVENT, &mut ResetEventArgs { event_id: event.event_id, pad: 0 }) }
            .map_err(|_| Status::Error)
    }

    /// `hsaKmtQueryEventState`: libhsakmt (ROCT-Thunk-Interface rocm-5.2.3 src/events.c)
    /// answers success for any event without asking the driver, which has no such query; so
    /// does this thunk. Whether an event is signaled is what a wait with timeout 0 tells.
    pub fn query_event_state(&self, _event: &Event) -> Result<()> {
        Ok(())
    }

    /// `hsaKmtWaitOnEvent`.
    pub fn wait_on_event(&self, event: &mut Event, milliseconds: u32) -> Result<()> {
        self.wait_on_multiple_events(&mut [event], true, milliseconds)
    }

    /// `hsaKmtWaitOnMultipleEvents`: blocks until all (or any) of `events` are signaled, or
    /// `milliseconds` pass (`WaitTimeout`; 0 polls, [`EVENT_TIMEOUT_INFINITE`] waits forever).
    /// A MEMORY event that saw a GPU memory fault gets its `memory_fault` filled.
    pub fn wait_on_multiple_events(&self, events: &mut [&mut Event], wait_all: bool, milliseconds: u32) -> Result<()> {
        let mut data: Vec<EventData> =
            events.iter().map(|e| EventData { event_id: e.event_id, ..Default::default() }).collect();
        let mut a = WaitEventsArgs {
            events_ptr: data.as_mut_ptr() as u64,
            num_events: data.len() as u32,
            wait_for_all: u32::from(wait_all),
            timeout: milliseconds,
            wait_result: 0,
        };
        // SAFETY: the device reads and writes `num_events` entries of `data`, owned here and not
        // borrowed during the call.
        if let Err(e) = unsafe { self.ioctl(AMDKFD_IOC_WAIT_EVENTS, &mut a) } {
            log::debug!("WAIT_EVENTS on {} events: {e}", data.len());
            return Err(Status::Error);
        }
        if a.wait_result == KFD_IOC_WAIT_RESULT_TIMEOUT {
            return Err(Status::WaitTimeout);
        }
        for (event, d) in events.iter_mut().zip(&data) {
            if event.event_type != EventType::MEMORY {
                continue;
            }
            let Ok(m) = HsaMemoryExceptionData::read_from_bytes(d.payload.as_bytes()) else { continue };
            if m.gpu_id == 0 {
                continue;
            }
            let node_id = self.node_of(m.gpu_id)?;
            let failure = AccessFailure(0)
                .with_not_present(m.failure.not_present & 1)
                .with_read_only(m.failure.read_only & 1)
                .with_no_execute(m.failure.no_execute & 1)
                .with_imprecise(m.failure.imprecise & 1)
                .with_error_type(m.error_type)
                .with_ecc(u32::from(m.error_type == 1 || m.error_type == 2));
            log::error!("memory exception at {:#x} on node {node_id} ({:?})", m.va, m.failure);
            event.memory_fault = Some(MemoryAccessFault {
                node_id,
                virtual_address: m.va,
                failure,
                flags: MemoryFaultFlags::FATAL_PROCESS,
            });
        }
        Ok(())
    }
}
