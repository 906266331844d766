//! Counters for the progress line and the summary: requests per second, the errno histogram per
//! request, and which handlers answered success at least once.

use std::collections::BTreeMap;

#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub ops: u64,
    pub ioctls: u64,
    pub cases: u64,
    /// request name -> answer ("ok" or the errno's name) -> count.
    pub answers: BTreeMap<&'static str, BTreeMap<String, u64>>,
    /// operation name -> count.
    pub kinds: BTreeMap<&'static str, u64>,
    /// operation name -> time spent in it, in µs (the node target's children measure it).
    pub time_us: BTreeMap<&'static str, u64>,
    /// failure kind -> count.
    pub failures: BTreeMap<String, u64>,
}

impl Stats {
    pub fn record(&mut self, name: &'static str, result: Result<(), nix::errno::Errno>) {
        self.ioctls += 1;
        crate::IOCTLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = match result {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("{e:?}"),
        };
        *self.answers.entry(name).or_default().entry(key).or_insert(0) += 1;
    }

    /// An operation that is not an ioctl (a hostile operation of the node target) and what it
    /// gave ("ok", an errno's name, "skipped-...").
    pub fn record_outcome(&mut self, name: &'static str, outcome: String) {
        *self.answers.entry(name).or_default().entry(outcome).or_insert(0) += 1;
    }

    pub fn merge(&mut self, other: &Stats) {
        self.ops += other.ops;
        self.ioctls += other.ioctls;
        self.cases += other.cases;
        for (name, h) in &other.answers {
            let mine = self.answers.entry(name).or_default();
            for (k, v) in h {
                *mine.entry(k.clone()).or_insert(0) += v;
            }
        }
        for (k, v) in &other.kinds {
            *self.kinds.entry(k).or_insert(0) += v;
        }
        for (k, v) in &other.time_us {
            *self.time_us.entry(k).or_insert(0) += v;
        }
        for (k, v) in &other.failures {
            *self.failures.entry(k.clone()).or_insert(0) += v;
        }
    }

    pub fn failure_count(&self) -> u64 {
        self.failures.values().sum()
    }

    /// Names of the requests that succeeded at least once.
    pub fn reached(&self) -> Vec<&'static str> {
        self.answers.iter().filter(|(_, h)| h.contains_key("ok")).map(|(n, _)| *n).collect()
    }

    /// The summary printed at the end of a run.
    pub fn summary(&self, secs: f64, all: &[(&'static str, u32)]) -> String {
        let mut s = String::new();
        let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        s.push_str(&format!(
            "kfd-fuzz summary: {} operations in {} cases, {} ioctls in {secs:.1} s ({:.0} ioctls/s, {:.0} operations/s)\n",
            self.ops,
            self.cases,
            self.ioctls,
            rate(self.ioctls),
            rate(self.ops)
        ));
        let kinds: Vec<String> = self.kinds.iter().map(|(k, v)| format!("{k} {v}")).collect();
        s.push_str(&format!("operations: {}\n", kinds.join(", ")));
        if !self.time_us.is_empty() {
            let times: Vec<String> = self
                .time_us
                .iter()
                .map(|(k, v)| match self.kinds.get(k).or(self.kinds.get(k.trim_end_matches("(2)"))) {
                    Some(n) => format!("{k} {:.1} s ({:.2} ms each)", *v as f64 / 1e6, *v as f64 / 1e3 / *n as f64),
                    None => format!("{k} {:.1} s", *v as f64 / 1e6),
                })
                .collect();
            s.push_str(&format!("time by operation (summed over children): {}\n", times.join(", ")));
        }
        s.push_str("answers per request:\n");
        for (name, h) in &self.answers {
            let parts: Vec<String> = h.iter().map(|(k, v)| format!("{k} {v}")).collect();
            s.push_str(&format!("  {name:<30} {}\n", parts.join(", ")));
        }
        let reached: Vec<&str> = self.reached().into_iter().filter(|n| all.iter().any(|(a, _)| a == n)).collect();
        let missed: Vec<&str> = all.iter().map(|(n, _)| *n).filter(|n| !reached.contains(n)).collect();
        s.push_str(&format!("handlers reached (succeeded at least once): {} of {}\n", reached.len(), all.len()));
        if !missed.is_empty() {
            s.push_str(&format!("  never succeeded: {}\n", missed.join(", ")));
        }
        if self.failures.is_empty() {
            s.push_str("failures: none (0 crashes, 0 hangs, 0 leaks, 0 isolation breaks)\n");
        } else {
            let parts: Vec<String> = self.failures.iter().map(|(k, v)| format!("{k} {v}")).collect();
            s.push_str(&format!("failures: {}\n", parts.join(", ")));
        }
        s
    }
}
