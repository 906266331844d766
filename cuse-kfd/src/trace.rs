//! A trace of ioctls and packets, exportable as Chrome trace JSON (opens in Perfetto and
//! chrome://tracing): one track per client process for its ioctls, one per queue for its packets.
//!
//! Off by default; when on, every record costs one short lock. Records are kept in a bounded
//! ring (the oldest go first).

use parking_lot::Mutex;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Records kept at most.
pub const DEFAULT_CAPACITY: usize = 1 << 20;

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// An ioctl of process `pid`, with its errno (0 for success).
    Ioctl { name: &'static str, errno: i32 },
    /// Packet `index` of queue `queue`, of AQL type `packet_type`, consumed by the engine.
    Packet { queue: u32, index: u64, packet_type: u8 },
    /// A queue error.
    QueueError { queue: u32, reason: String },
}

/// One record: a span of `dur_ns` starting `start_ns` after the trace began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub pid: u32,
    pub start_ns: u64,
    pub dur_ns: u64,
    pub kind: Kind,
}

pub struct Trace {
    enabled: AtomicBool,
    origin: Instant,
    capacity: usize,
    records: Mutex<VecDeque<Record>>,
}

impl Default for Trace {
    fn default() -> Trace {
        Trace::new(DEFAULT_CAPACITY)
    }
}

impl Trace {
    pub fn new(capacity: usize) -> Trace {
        Trace {
            enabled: AtomicBool::new(false),
            origin: Instant::now(),
            capacity,
            records: Mutex::new(VecDeque::new()),
        }
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Release);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Nanoseconds since the trace began (for `start_ns`).
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Records a span that started at `start_ns` and ends now.
    pub fn record(&self, pid: u32, start_ns: u64, kind: Kind) {
        if !self.enabled() {
            return;
        }
        let dur_ns = self.now_ns().saturating_sub(start_ns);
        let mut r = self.records.lock();
        if r.len() >= self.capacity {
            r.pop_front();
        }
        r.push_back(Record { pid, start_ns, dur_ns, kind });
    }

    pub fn records(&self) -> Vec<Record> {
        self.records.lock().iter().cloned().collect()
    }

    /// The Chrome trace event format: complete ("X") events in microseconds, a process per
    /// client, thread 0 for its ioctls and thread 1000 + queue id for each queue, named by
    /// metadata events.
    pub fn to_chrome_json(&self) -> String {
        let records = self.records();
        let mut events = Vec::with_capacity(records.len());
        let mut tracks = std::collections::BTreeSet::new();
        for r in &records {
            let (name, tid, cat, args) = match &r.kind {
                Kind::Ioctl { name, errno } => ((*name).to_owned(), 0, "ioctl", Args::Ioctl { errno: *errno }),
                Kind::Packet { queue, index, packet_type } => (
                    packet_name(*packet_type).to_owned(),
                    1000 + queue,
                    "packet",
                    Args::Packet { queue: *queue, index: *index },
                ),
                Kind::QueueError { queue, reason } => {
                    ("queue error".to_owned(), 1000 + queue, "error", Args::Error { reason: reason.clone() })
                }
            };
            tracks.insert((r.pid, tid));
            events.push(Event::Complete {
                name,
                cat,
                ts: r.start_ns as f64 / 1000.0,
                dur: r.dur_ns as f64 / 1000.0,
                pid: r.pid,
                tid,
                args,
            });
        }
        for (pid, tid) in tracks {
            let name = if tid == 0 { "ioctls".to_owned() } else { format!("queue {}", tid - 1000) };
            events.push(Event::Metadata { name: "thread_name", pid, tid: Some(tid), args: Name { name } });
            if tid == 0 {
                let name = format!("client {pid}");
                events.push(Event::Metadata { name: "process_name", pid, tid: None, args: Name { name } });
            }
        }
        let mut out = serde_json::to_string(&ChromeTrace { trace_events: events }).expect("a trace serializes");
        out.push('\n');
        out
    }
}

/// The top level of a Chrome trace file (JSON object format).
#[derive(Serialize)]
struct ChromeTrace {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<Event>,
}

/// A trace event, tagged by its phase.
#[derive(Serialize)]
#[serde(tag = "ph")]
enum Event {
    #[serde(rename = "X")]
    Complete { name: String, cat: &'static str, ts: f64, dur: f64, pid: u32, tid: u32, args: Args },
    #[serde(rename = "M")]
    Metadata {
        name: &'static str,
        pid: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        tid: Option<u32>,
        args: Name,
    },
}

/// The arguments shown with a complete event.
#[derive(Serialize)]
#[serde(untagged)]
enum Args {
    Ioctl { errno: i32 },
    Packet { queue: u32, index: u64 },
    Error { reason: String },
}

/// The argument of a `thread_name` or `process_name` metadata event.
#[derive(Serialize)]
struct Name {
    name: String,
}

fn packet_name(t: u8) -> &'static str {
    match t {
        0 => "vendor (barrier-value)",
        2 => "kernel dispatch",
        3 => "barrier-AND",
        5 => "barrier-OR",
        _ => "packet",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_records_nothing_and_the_ring_is_bounded() {
        let t = Trace::new(2);
        t.record(1, 0, Kind::Ioctl { name: "GET_VERSION", errno: 0 });
        assert!(t.records().is_empty());
        t.set_enabled(true);
        for i in 0..3 {
            t.record(1, i, Kind::Packet { queue: 0, index: i, packet_type: 3 });
        }
        let r = t.records();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].kind, Kind::Packet { queue: 0, index: 1, packet_type: 3 });
    }

    #[test]
    fn chrome_json_names_its_tracks() {
        let t = Trace::new(16);
        t.set_enabled(true);
        t.record(7, 0, Kind::Ioctl { name: "CREATE_QUEUE", errno: 0 });
        t.record(7, 10, Kind::QueueError { queue: 2, reason: "bad \"packet\"".into() });
        let j = t.to_chrome_json();
        assert!(j.contains("\"name\":\"CREATE_QUEUE\""));
        assert!(j.contains("\"tid\":1002"));
        assert!(j.contains("\"name\":\"queue 2\""));
        assert!(j.contains("bad \\\"packet\\\""));
        let v: serde_json::Value = serde_json::from_str(&j).expect("valid JSON");
        let events = v["traceEvents"].as_array().expect("traceEvents");
        assert_eq!(events.len(), 5, "two spans, two thread names, one process name: {j}");
        assert_eq!(events[0]["ph"], "X");
        assert_eq!(events[0]["args"]["errno"], 0);
        assert_eq!(events[1]["args"]["reason"], "bad \"packet\"");
        assert!(events.iter().any(|e| e["name"] == "process_name" && e["args"]["name"] == "client 7"));
    }
}
