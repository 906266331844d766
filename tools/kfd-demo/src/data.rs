//! Step 3: soft kernels move data. Two FILL_U32 dispatches write two patterns into VRAM, a
//! COPY_BYTES dispatch (barrier bit set) copies an odd-sized, odd-offset range of it to system
//! memory, and the runtime's own copy (hsa_memory_copy, COPY_BYTES on its internal queue) copies
//! that back into VRAM at another odd offset; the host checks every byte against its own model,
//! including the bytes around each destination range that must stay as they were.

use crate::report::{check, check_eq, note, Context, Result, Samples};
use crate::{Demo, WAIT_NS};
use rocr_shim::{Buffer, Builtin, Condition, Order, WaitHint};
use std::sync::atomic::Ordering;
use std::time::Instant;
use uapi::soft::{CopyArgs, FillArgs};
use uapi::IntoBytes;

const FILLED: usize = 256 << 10;
const PATTERNS: [u32; 2] = [0x5EED_CAFE, 0x0DDB_A110];
/// The COPY_BYTES dispatch: bytes and source offset (odd, so a word-sized bug shows).
const COPY_LEN: usize = 100_003;
const COPY_FROM: usize = FILLED / 2 - 5;
/// The runtime's copy writes at this offset of its destination.
const COPY_TO: usize = 3;
/// What the host wrote to the destinations first.
const SENTINEL: u8 = 0xA5;
const DISPATCHES: usize = 1000;

fn read_all(b: &Buffer) -> Vec<u8> {
    let mut v = vec![0u8; b.len() as usize];
    b.read(0, &mut v);
    v
}

/// Index of the first byte where `got` differs from `want`, for the failure message.
fn first_difference(got: &[u8], want: &[u8]) -> String {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        Some(i) => format!("first difference at byte {i}: {:#04x} instead of {:#04x}", got[i], want[i]),
        None => format!("lengths {} and {}", got.len(), want.len()),
    }
}

fn check_bytes(got: &[u8], want: &[u8], what: &str) -> Result {
    if got == want {
        check(true, what)
    } else {
        Err(format!("check failed: {what} ({})", first_difference(got, want)))
    }
}

pub fn run(d: &mut Demo) -> Result {
    let rt = &d.rt;
    let vram_pool = rt.vram_pool(d.gpu).context("VRAM pool")?;
    let system_pool = rt.system_pool().context("system pool")?;
    let alloc = |pool, size: usize, what: &str| rt.buffer(pool, size as u64).context(what);
    let a = alloc(vram_pool, FILLED, "allocating the fill buffer in VRAM")?;
    let b = alloc(system_pool, FILLED + 4096, "allocating the copy destination in system memory")?;
    let c = alloc(vram_pool, FILLED + 4096, "allocating the second copy destination in VRAM")?;
    b.write(0, &vec![SENTINEL; b.len() as usize]);
    c.write(0, &vec![SENTINEL; c.len() as usize]);
    note(format!(
        "VRAM A {:#x}, system B {:#x}, VRAM C {:#x} ({} KiB each)",
        a.addr(),
        b.addr(),
        c.addr(),
        FILLED >> 10
    ));

    // Kernel arguments live in the system pool, one buffer per dispatch.
    let half = FILLED / 2;
    let fills: Vec<Buffer> = (0..2)
        .map(|i| {
            let k = alloc(system_pool, 64, "kernel arguments")?;
            k.write(0, FillArgs { dst: a.addr() + (i * half) as u64, value: PATTERNS[i], reserved: 0 }.as_bytes());
            Ok(k)
        })
        .collect::<Result<_>>()?;
    let copy_args = alloc(system_pool, 64, "kernel arguments")?;
    copy_args.write(0, CopyArgs { dst: b.addr(), src: a.addr() + COPY_FROM as u64 }.as_bytes());

    // Both fills decrement one signal (value 2); the copy waits for them (barrier bit).
    let filled = rt.create_signal(2, &[]).context("hsa_signal_create")?;
    let copied = rt.create_signal(1, &[]).context("hsa_signal_create")?;
    let q = &d.queue;
    let t0 = Instant::now();
    for k in &fills {
        q.dispatch(Builtin::FillU32, k, (half / 4) as u32, 256, Some(&filled), false).context("FILL_U32")?;
    }
    q.dispatch(Builtin::CopyBytes, &copy_args, COPY_LEN as u32, 256, Some(&copied), true).context("COPY_BYTES")?;
    let v = copied.wait(Condition::Eq, 0, WAIT_NS, WaitHint::Blocked);
    let took = t0.elapsed();
    check_eq(v, 0, "FILL_U32 x2 then COPY_BYTES completed (completion signal 0)")?;
    check_eq(filled.load(Order::Acquire), 0, "each fill decremented the shared completion signal once (2 -> 0)")?;
    note(format!("2 fills of {} KiB and a copy of {COPY_LEN} bytes: {took:?}", half >> 10));

    let model: Vec<u8> = (0..FILLED / 4).flat_map(|w| PATTERNS[w * 4 / half].to_le_bytes()).collect();
    check_bytes(&read_all(&a), &model, "VRAM A holds both fill patterns, word for word (host read)")?;
    let mut want_b = vec![SENTINEL; b.len() as usize];
    want_b[..COPY_LEN].copy_from_slice(&model[COPY_FROM..COPY_FROM + COPY_LEN]);
    let what = format!("B = A[{COPY_FROM}..{}] byte for byte, the rest of B untouched", COPY_FROM + COPY_LEN);
    check_bytes(&read_all(&b), &want_b, &what)?;

    let t0 = Instant::now();
    rt.copy(c.addr() + COPY_TO as u64, b.addr(), COPY_LEN as u64).context("hsa_memory_copy")?;
    let took = t0.elapsed();
    let mut want_c = vec![SENTINEL; c.len() as usize];
    want_c[COPY_TO..COPY_TO + COPY_LEN].copy_from_slice(&want_b[..COPY_LEN]);
    check_bytes(
        &read_all(&c),
        &want_c,
        &format!("hsa_memory_copy (COPY_BYTES) put B into VRAM C at offset {COPY_TO}, nothing else"),
    )?;
    note(format!("hsa_memory_copy of {COPY_LEN} bytes: {took:?}"));
    let outside = rt.copy(c.addr(), 0x1000, 16).err().map(|e| e.status);
    check_eq(outside, Some(rocr_shim::Status::INVALID_ARGUMENT), "hsa_memory_copy refuses memory it did not allocate")?;

    // Round trips of the empty dispatch: submit, the device runs it, the host sees the signal.
    let done = rt.create_signal(1, &[]).context("hsa_signal_create")?;
    let first = q.state().read_index();
    for (what, hint) in [
        ("dispatch round trip (NOP, ACTIVE wait)", WaitHint::Active),
        ("dispatch round trip (NOP, BLOCKED wait)", WaitHint::Blocked),
    ] {
        let mut samples = Samples::new(what);
        for i in 0..DISPATCHES {
            done.store(1, Order::Relaxed);
            let t0 = Instant::now();
            q.dispatch(Builtin::Nop, &copy_args, 1, 1, Some(&done), false).context("NOP dispatch")?;
            if done.wait(Condition::Eq, 0, WAIT_NS, hint) != 0 {
                return Err(format!("{what}: NOP dispatch {i} did not complete"));
            }
            samples.push(t0.elapsed());
        }
        d.summary.add(samples);
    }
    let (read, write) = (q.state().read_index(), q.state().write_index().load(Ordering::Acquire));
    check(
        read - first == 2 * DISPATCHES as u64 && read == write,
        &format!("{} NOP dispatches, each consumed once (read index = write index = {write})", 2 * DISPATCHES),
    )?;
    Ok(())
}
