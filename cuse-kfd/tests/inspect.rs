//! Fault injection, the ioctl/packet trace and the status report, through the embedded device.

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use support::client::{submit, wait_for, Rig, TIMEOUT};
use thunk::memory::Kind;
use thunk::queue::packet;
use thunk::signal::Signals;
use uapi::kfd::*;
use uapi::soft::*;
use uapi::FromBytes;

/// One "X" event of the Chrome trace, the fields this test reads.
#[derive(Debug)]
struct Span {
    name: String,
    cat: String,
    pid: u64,
    tid: u64,
    index: Option<u64>,
}

fn spans(json: &str) -> Vec<Span> {
    let v: serde_json::Value = serde_json::from_str(json).expect("the trace is valid JSON");
    v["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| Span {
            name: e["name"].as_str().unwrap().to_string(),
            cat: e["cat"].as_str().unwrap().to_string(),
            pid: e["pid"].as_u64().unwrap(),
            tid: e["tid"].as_u64().unwrap(),
            index: e["args"]["index"].as_u64(),
        })
        .collect()
}

#[test]
fn the_trace_has_one_track_per_queue_with_the_packets_submitted() {
    let rig = Rig::new();
    rig.emb.device().trace().set_enabled(true);
    let (q0, q1) = (rig.queue(64), rig.queue(64));
    let sig = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
    sig.value(0).store(10, Ordering::Release);
    sig.value(1).store(5, Ordering::Release);
    for _ in 0..10 {
        submit(&q0, &packet::barrier_and([0; 5], sig.handle(0), false));
    }
    for _ in 0..5 {
        submit(&q1, &packet::dispatch(rig.kernel(SOFT_KERNEL_NOP), 0, [1, 1, 1], [1, 1, 1], sig.handle(1), false));
    }
    wait_for(TIMEOUT, "all packets", || {
        (sig.value(0).load(Ordering::Acquire) == 0 && sig.value(1).load(Ordering::Acquire) == 0).then_some(())
    });
    let json = rig.emb.device().trace().to_chrome_json();
    let all = spans(&json);
    let pid = u64::from(std::process::id());
    for (q, n, name) in [(&q0, 10, "barrier-AND"), (&q1, 5, "kernel dispatch")] {
        let track: Vec<&Span> = all.iter().filter(|s| s.tid == 1000 + u64::from(q.id)).collect();
        assert_eq!(track.len(), n, "queue {} track: {track:?}", q.id);
        for (i, s) in track.iter().enumerate() {
            assert_eq!((s.name.as_str(), s.cat.as_str(), s.pid, s.index), (name, "packet", pid, Some(i as u64)));
        }
    }
    let creates = all.iter().filter(|s| s.tid == 0 && s.name == "CREATE_QUEUE").count();
    assert_eq!(creates, 2, "the process track has the ioctls");
    assert!(json.contains("\"name\":\"thread_name\"") && json.contains("\"queue 0\""), "tracks are named");
}

#[test]
fn status_lists_processes_queues_events_and_memory() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let bad = rig.queue(64);
    let _vram = rig.alloc(1 << 20, Kind::Vram);
    let ev = rig.event(KFD_IOC_EVENT_SIGNAL, true);
    let sig = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    sig.value(0).store(1, Ordering::Release);
    submit(&q, &packet::barrier_and([0; 5], sig.handle(0), false));
    submit(&bad, &packet::dispatch(rig.gfx_kernel(), 0, [1, 1, 1], [1, 1, 1], 0, false));
    rig.wait_error(bad.id);
    wait_for(TIMEOUT, "the barrier", || (sig.value(0).load(Ordering::Acquire) == 0).then_some(()));
    let text = cuse_kfd::frontend::inspect::status(rig.emb.device());
    let pid = std::process::id();
    assert!(text.starts_with("device: gfx90a x1"), "{text}");
    assert!(text.contains(&format!("process {pid} uid ")), "{text}");
    let qline = text.lines().find(|l| l.trim_start().starts_with(&format!("queue {} compute-aql", q.id))).expect(&text);
    assert!(qline.contains("read 1 write 1") && qline.ends_with("active"), "{qline}");
    let bline = text.lines().find(|l| l.trim_start().starts_with(&format!("queue {} ", bad.id))).expect(&text);
    assert!(bline.contains(&format!("error {}:", cuse_kfd::engine::ERROR_ILLEGAL_INSTRUCTION)), "{bline}");
    assert!(text.lines().any(|l| l.trim_start().starts_with(&format!("event {ev} signal auto"))), "{text}");
    assert!(text.lines().any(|l| l.contains(" vram ") && l.contains("size 1048576")), "{text}");
}

#[test]
fn an_injected_vm_fault_is_reported_like_a_real_one() {
    let rig = Rig::new();
    let q = rig.queue(64);
    let dst = rig.alloc(8192, Kind::Gtt);
    let mem_ev = rig.event(KFD_IOC_EVENT_MEMORY, false);
    let at = dst.va() + 4096 + 64;
    rig.emb.device().faults().set_vm_fault(Some((at, at + 8)));
    let args = rig.args(&FillArgs { dst: dst.va(), value: 7, reserved: 0 });
    let sig = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    sig.value(0).store(1, Ordering::Release);
    submit(
        &q,
        &packet::dispatch(rig.kernel(SOFT_KERNEL_FILL_U32), args, [2048, 1, 1], [64, 1, 1], sig.handle(0), false),
    );
    let w = rig.assert_fires(mem_ev, "the MEMORY event");
    let data = HsaMemoryExceptionData::read_from_bytes(&uapi::IntoBytes::as_bytes(&w.data[0].payload)[..32]).unwrap();
    assert_eq!((data.va, data.gpu_id, data.failure.not_present), (at & !0xfff, rig.gpu, 1));
    assert_eq!(rig.wait_error(q.id).error.unwrap().fault_va, Some(at));
    assert_eq!(sig.value(0).load(Ordering::Acquire), 1, "no completion for a faulted dispatch");
    rig.emb.device().faults().set_vm_fault(None);
}

#[test]
fn a_hung_queue_times_its_waiters_out_and_can_still_be_destroyed() {
    let rig = Rig::new();
    let hung = rig.queue(64);
    let fine = rig.queue(64);
    rig.emb.device().faults().set_hang_queue(Some(hung.id));
    let sig = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
    let ev = sig.attach_event(&rig.kfd, 0).unwrap();
    sig.value(0).store(1, Ordering::Release);
    sig.value(1).store(1, Ordering::Release);
    submit(&hung, &packet::barrier_and([0; 5], sig.handle(0), false));
    submit(&fine, &packet::barrier_and([0; 5], sig.handle(1), false));
    wait_for(TIMEOUT, "the healthy queue", || (sig.value(1).load(Ordering::Acquire) == 0).then_some(()));
    let w = rig.wait(&[ev], 200);
    assert_eq!((w.result, w.wait_result), (Ok(()), KFD_IOC_WAIT_RESULT_TIMEOUT));
    assert_eq!(hung.read_index(), 0, "the hung queue consumed nothing");
    let t0 = Instant::now();
    drop(hung);
    assert!(t0.elapsed() < Duration::from_secs(1));
    rig.emb.device().faults().set_hang_queue(None);
}

#[test]
fn a_panic_in_the_command_processor_stops_only_its_queue() {
    let rig = Rig::new();
    let broken = rig.queue(64);
    let fine = rig.queue(64);
    let sig = Signals::new(&rig.kfd, rig.gpu, 2).unwrap();
    sig.value(0).store(1, Ordering::Release);
    sig.value(1).store(1, Ordering::Release);
    rig.emb.device().faults().set_panic_queue(Some(broken.id));
    submit(&broken, &packet::barrier_and([0; 5], sig.handle(0), false));
    // The queue reports the error as a hung queue would be reset: its state says why.
    wait_for(TIMEOUT, "the queue error", || {
        let status = cuse_kfd::frontend::inspect::status(rig.emb.device());
        status
            .lines()
            .any(|l| l.contains(&format!("queue {}", broken.id)) && l.contains("internal error"))
            .then_some(())
    });
    rig.emb.device().faults().set_panic_queue(None);
    // The engine thread lives on: another queue still runs, and the broken one can be destroyed.
    submit(&fine, &packet::barrier_and([0; 5], sig.handle(1), false));
    wait_for(TIMEOUT, "the healthy queue", || (sig.value(1).load(Ordering::Acquire) == 0).then_some(()));
    assert_eq!(sig.value(0).load(Ordering::Acquire), 1, "the broken queue's packet did not complete");
    let t0 = Instant::now();
    drop(broken);
    assert!(t0.elapsed() < Duration::from_secs(1));
}

#[test]
fn delayed_completions_arrive_late_and_in_full() {
    let rig = Rig::new();
    let q = rig.queue(64);
    rig.emb.device().faults().set_completion_delay(Duration::from_millis(150));
    let sig = Signals::new(&rig.kfd, rig.gpu, 1).unwrap();
    sig.value(0).store(1, Ordering::Release);
    let t0 = Instant::now();
    submit(&q, &packet::barrier_and([0; 5], sig.handle(0), false));
    wait_for(TIMEOUT, "the delayed completion", || (sig.value(0).load(Ordering::Acquire) == 0).then_some(()));
    assert!(t0.elapsed() >= Duration::from_millis(150), "completed after {:?}", t0.elapsed());
    assert_eq!(sig.value(0).load(Ordering::Acquire), 0);
}
