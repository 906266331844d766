//! Events: CREATE/DESTROY/SET/RESET_EVENT and WAIT_EVENTS.

use super::{Ctx, Handled};
use crate::event::page::{EventPage, EVENT_PAGE_SIZE};
use crate::event::registry::WaitRegistry;
use crate::event::wait::{WaitSlot, Waiter};
use crate::memory::backing::MmapSpace;
use crate::memory::handle_gpu_id;
use crate::memory::vm::RegionBacking;
use crate::memory::BufferKind;
use crate::quota::{Charge, Resource};
use nix::errno::Errno;
use std::time::Duration;
use uapi::kfd::*;

/// Events one WAIT_EVENTS may name (every event a process can have).
pub const MAX_WAIT_EVENTS: u32 = 2 * KFD_SIGNAL_EVENT_LIMIT;

/// Installs the client's GTT buffer `handle` as the event page (the dGPU path).
fn set_client_page(ctx: &Ctx, handle: u64) -> Result<(), Errno> {
    // amdkfd kfd_kmap_event_page: a process has one event page; naming another is EINVAL,
    // checked before the handle.
    if ctx.process.events().page().is_some() || !ctx.gpu_exists(handle_gpu_id(handle)) {
        return Err(Errno::EINVAL);
    }
    let mut inner = ctx.process.inner();
    let b = inner.buffers.get(&handle).ok_or(Errno::EINVAL)?;
    let (RegionBacking::File { file, offset }, BufferKind::Gtt) = (&b.backing, b.kind) else {
        return Err(Errno::EINVAL);
    };
    let page = EventPage::new(file.clone(), *offset).ok_or(Errno::EINVAL)?;
    // set_page refuses (EINVAL) a page installed meanwhile.
    ctx.process.events().set_page(page)?;
    inner.event_page_handle = Some(handle);
    Ok(())
}

pub fn create(ctx: &Ctx, a: &mut CreateEventArgs) -> Result<(), Errno> {
    // Charged before anything is made (the event page included), given back on any failure.
    let charge = Charge::of(Resource::Events, 1);
    ctx.device.ledger().charge(ctx.process.account, &charge)?;
    let r = create_charged(ctx, a);
    if r.is_err() {
        ctx.device.ledger().release(ctx.process.account, &charge);
    }
    r
}

fn create_charged(ctx: &Ctx, a: &mut CreateEventArgs) -> Result<(), Errno> {
    if a.event_page_offset != 0 {
        set_client_page(ctx, a.event_page_offset)?;
    }
    let needs_page = a.event_type == KFD_IOC_EVENT_SIGNAL || a.event_type == KFD_IOC_EVENT_DEBUG_EVENT;
    if needs_page {
        // No page from the client: the device makes one (mmap offset KFD_MMAP_TYPE_EVENTS),
        // under the events lock so that racing first creates make it once.
        let mut events = ctx.process.events();
        if events.page().is_none() {
            let file = super::memory::create_file(ctx, MmapSpace::Kfd, KFD_MMAP_TYPE_EVENTS, EVENT_PAGE_SIZE as u64)?;
            events.set_page(EventPage::new(file, 0).ok_or(Errno::ENOMEM)?)?;
        }
    }
    let created = ctx.process.events().create(a.event_type, a.auto_reset != 0)?;
    a.event_id = created.event_id;
    a.event_trigger_data = created.event_id;
    if let Some(slot) = created.slot {
        a.event_page_offset = KFD_MMAP_TYPE_EVENTS;
        a.event_slot_index = slot;
    }
    Ok(())
}

pub fn destroy(ctx: &Ctx, a: &mut DestroyEventArgs) -> Result<(), Errno> {
    let mut done = Vec::new();
    let r = ctx.process.events().destroy(a.event_id, &mut done);
    if r.is_ok() {
        ctx.device.ledger().release(ctx.process.account, &Charge::of(Resource::Events, 1));
    }
    ctx.device.deliver(done);
    r
}

pub fn set(ctx: &Ctx, a: &mut SetEventArgs) -> Result<(), Errno> {
    let mut done = Vec::new();
    let r = ctx.process.events().set_from_host(a.event_id, ctx.queued, &mut done);
    ctx.device.deliver(done);
    r
}

pub fn reset(ctx: &Ctx, a: &mut ResetEventArgs) -> Result<(), Errno> {
    ctx.process.events().reset(a.event_id)
}

pub fn wait(ctx: &Ctx, a: &mut WaitEventsArgs) -> Handled {
    a.wait_result = KFD_IOC_WAIT_RESULT_FAIL;
    if a.num_events > MAX_WAIT_EVENTS {
        return Err(Errno::EINVAL).into();
    }
    let data = match ctx.read_user::<EventData>(a.events_ptr, a.num_events as usize) {
        Ok(d) => d,
        Err(e) => return Err(e).into(),
    };
    let mut events = ctx.process.events();
    if data.iter().any(|d| events.get(d.event_id).is_none()) {
        return Err(Errno::EINVAL).into();
    }
    // A parked wait holds daemon memory until it ends: charged here, given back when it ends
    // (by the registry, see `WaitRegistry::deliver`) or now if it does not park.
    let charge = WaitRegistry::charge();
    if let Err(e) = ctx.device.ledger().charge(ctx.process.account, &charge) {
        return Err(e).into();
    }
    let Some(reply) = ctx.take_pending() else {
        ctx.device.ledger().release(ctx.process.account, &charge);
        return Err(Errno::EIO).into();
    };
    let tag = reply.tag();
    let id = ctx.device.new_wait_id();
    let waiter = Waiter {
        id,
        slots: data
            .iter()
            .map(|d| WaitSlot { event_id: d.event_id, activated: false, last_age: d.payload[0] })
            .collect(),
        wait_for_all: a.wait_for_all != 0,
        timeout_ms: a.timeout,
        entered: ctx.entered,
        args: *a,
        data,
        reply,
    };
    let mut done = Vec::new();
    if let Some(parked) = events.begin_wait(waiter, &mut done) {
        let timeout = (a.timeout != KFD_EVENT_TIMEOUT_INFINITE).then(|| Duration::from_millis(u64::from(a.timeout)));
        // Registered before the lock drops, so no completion can race ahead of it.
        ctx.device.park_wait(ctx.process, parked, tag, timeout);
    } else {
        ctx.device.ledger().release(ctx.process.account, &charge);
    }
    drop(events);
    ctx.device.deliver(done);
    Handled::Parked
}
