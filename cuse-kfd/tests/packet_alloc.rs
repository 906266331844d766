//! No packet makes the daemon allocate more than 1 MiB at once (issue 13 item 8, M5): the soft
//! kernels whose work grows with the grid move client data in bounded chunks. A counting
//! allocator records the largest single allocation while each such dispatch runs, for grids
//! whose per-packet buffers would be 16 MiB (WRITE_FLAT_ID: two of them).
//!
//! (`cuse_kfd::engine::kernels`' unit test `no_chunk_needs_more_than_a_mebibyte` bounds the
//! chunk of every kernel for any grid up to MAX_WORK_ITEMS; this test shows the engine uses
//! nothing bigger on the way.)

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use support::client::*;
use thunk::memory::Kind;
use thunk::queue::packet;
use thunk::signal::Signals;
use uapi::soft::*;

/// The system allocator, recording the largest request while `COUNTING` is set.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

impl Counting {
    fn note(size: usize) {
        if COUNTING.load(Ordering::Relaxed) {
            LARGEST.fetch_max(size, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call is passed to `System` unchanged; the bookkeeping only reads the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Counting::note(layout.size());
        // SAFETY: the caller's contract for `GlobalAlloc::alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Counting::note(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Counting::note(new_size);
        // SAFETY: the caller's contract for `GlobalAlloc::realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `GlobalAlloc::dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MIB: u64 = 1 << 20;
/// Work-items of each dispatch: 16 MiB of u32s.
const ITEMS: u32 = 4 << 20;

#[test]
fn quota_no_packet_allocates_more_than_a_mebibyte() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let s = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    let a = rig.alloc(16 * MIB, Kind::Vram);
    let b = rig.alloc(16 * MIB, Kind::Gtt);
    let kernels = [
        ("WRITE_FLAT_ID", SOFT_KERNEL_WRITE_FLAT_ID, rig.args(&FlatIdArgs { dst: a.va(), wg_dst: b.va() }), ITEMS),
        ("FILL_U32", SOFT_KERNEL_FILL_U32, rig.args(&FillArgs { dst: a.va(), value: 7, reserved: 0 }), ITEMS),
        ("COPY_BYTES", SOFT_KERNEL_COPY_BYTES, rig.args(&CopyArgs { dst: b.va(), src: a.va() }), 16 * MIB as u32),
    ];
    for (name, builtin, args, items) in kernels {
        s.value(0).store(1, Ordering::Release);
        LARGEST.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        submit(&q, &packet::dispatch(rig.kernel(builtin), args, [items, 1, 1], [1024, 1, 1], s.handle(0), false));
        let done = s.wait(0, TIMEOUT, |v| v == 0);
        COUNTING.store(false, Ordering::Relaxed);
        assert!(done.is_ok(), "{name} did not complete within {TIMEOUT:?}");
        let largest = LARGEST.load(Ordering::Relaxed);
        println!("{name} over {items} work-items: largest allocation {largest} bytes");
        assert!(largest <= MIB as usize, "{name}: one allocation of {largest} bytes");
    }
    assert_eq!(word(&b, (16 * MIB / 4) - 1), 7, "the copy ran to its end");
    assert_eq!(rig.status(q.id).error, None);
}
