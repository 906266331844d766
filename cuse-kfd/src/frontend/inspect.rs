//! `cuse-kfd status`: what the device holds, per process, like /sys/class/kfd/kfd/proc.

use crate::device::Device;
use crate::event::timer::TimerState;
use std::fmt::Write as _;
use std::time::Instant;

fn event_type(t: u32) -> &'static str {
    match t {
        0 => "signal",
        1 => "node-change",
        2 => "device-state-change",
        3 => "hw-exception",
        4 => "system",
        5 => "debug",
        6 => "profile",
        7 => "queue",
        8 => "memory",
        _ => "?",
    }
}

/// A text report of every process's buffers, queues (read/write index, state, error) and
/// events, the quotas in force and what each process and uid holds against them. Stable line
/// formats, so tests and scripts can read it: a `process PID uid UID` line starts each
/// process's indented lines; `limits per process|per uid: RES=N ...`, `limit of the device:
/// buffers=N`, `  usage RES=N ...`
/// (a process's) and `uid UID usage RES=N ...` lines use the resource names of
/// `--process-limit` (bytes for vram and gtt).
/// The timer's line: how many deadlines, when the next is due (or how long overdue), and a fire
/// under way (both of the latter show a timer that is stuck if they last).
fn timer_summary(t: TimerState, now: Instant) -> String {
    let mut s = t.armed.to_string();
    if let Some(d) = t.earliest {
        if d >= now {
            let _ = write!(s, ", the next in {:.1} s", (d - now).as_secs_f64());
        } else {
            let _ = write!(s, ", the next overdue by {:.1} s", (now - d).as_secs_f64());
        }
    }
    if let Some(f) = t.firing_since {
        let _ = write!(s, ", firing one for {:.1} s", now.saturating_duration_since(f).as_secs_f64());
    }
    s
}

pub fn status(device: &Device) -> String {
    let mut out = String::new();
    let s = device.stats();
    let _ = writeln!(
        out,
        "device: {} x{} ({}), {} processes, {} buffers, {} queues, {} events, {} parked waits",
        device.topology().profile().name,
        device.topology().gpus().len(),
        device.topology().profile().marketing_name,
        s.processes,
        s.buffers,
        s.queues,
        s.events,
        s.waiters
    );
    let ledger = device.ledger();
    let limits = ledger.limits();
    let _ = writeln!(out, "limits per process: {}", limits.process);
    let _ = writeln!(out, "limits per uid: {}", limits.uid);
    let _ = writeln!(out, "limit of the device: buffers={}", ledger.buffer_limit());
    let _ = writeln!(out, "wait timeouts armed: {}", timer_summary(device.timer_state(), Instant::now()));
    let _ = writeln!(
        out,
        "engine threads: {}, queues on each {:?}",
        device.engine().threads(),
        device.engine().queues_per_thread()
    );
    if let Some((pid, ns)) = device.last_owner_end() {
        let _ = writeln!(out, "last context ended by its owner's exit: pid {pid} at monotonic {ns} ns");
    }
    let mut procs = device.processes();
    procs.sort_by_key(|p| p.pid);
    for p in procs {
        let _ = writeln!(out, "process {} uid {}", p.pid, p.owner.uid);
        let _ = writeln!(out, "  usage {}", ledger.usage(p.account));
        let inner = p.inner();
        for b in inner.buffers.values() {
            let gpus: Vec<String> = b.mapped_on.iter().map(|g| format!("{g:#x}")).collect();
            let _ = writeln!(
                out,
                "  buffer {:#x} {} va {:#x} size {} mapped [{}]",
                b.handle,
                b.kind.name(),
                b.va.0,
                b.size,
                gpus.join(",")
            );
        }
        for q in inner.queues.values() {
            let props = q.props().clone();
            let st = q.status();
            let state = match &st.error {
                Some(e) => format!("error {}: {}", e.code, e.reason),
                None if q.waves.is_held() => format!("preempted ({} times)", q.waves.preemptions()),
                None if !props.is_active() => "stalled".to_string(),
                None => "active".to_string(),
            };
            let _ = writeln!(
                out,
                "  queue {} {} gpu {:#x} ring {:#x}/{} read {} write {} doorbell {} {}",
                q.id,
                q.queue_type.name(),
                q.gpu_id,
                props.ring_base.0,
                props.ring_size,
                st.read_index,
                st.write_index,
                q.doorbell_index,
                state
            );
        }
        drop(inner);
        let events = p.events();
        for e in events.iter() {
            let _ = writeln!(
                out,
                "  event {} {} {} {} age {} waiters {}",
                e.id,
                event_type(e.event_type),
                if e.auto_reset { "auto" } else { "manual" },
                if e.signaled { "signaled" } else { "unsignaled" },
                e.age,
                e.waiters.len()
            );
        }
    }
    for (uid, usage) in ledger.report().uids {
        let _ = writeln!(out, "uid {uid} usage {usage}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_timer_line_shows_an_overdue_deadline_and_a_fire_under_way() {
        let now = Instant::now() + Duration::from_secs(100);
        let idle = TimerState { armed: 0, earliest: None, firing_since: None };
        assert_eq!(timer_summary(idle, now), "0");
        let ahead = TimerState { armed: 2, earliest: Some(now + Duration::from_millis(2500)), firing_since: None };
        assert_eq!(timer_summary(ahead, now), "2, the next in 2.5 s");
        let stuck = TimerState {
            armed: 1,
            earliest: Some(now - Duration::from_secs(80)),
            firing_since: Some(now - Duration::from_secs(85)),
        };
        assert_eq!(timer_summary(stuck, now), "1, the next overdue by 80.0 s, firing one for 85.0 s");
    }
}
