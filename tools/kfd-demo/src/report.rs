//! Printing: step headers, `ok:` checks that end the demo when they fail, and the latency
//! samples behind the summary table.

use std::fmt::{Debug, Display};
use std::time::Duration;

/// A step's outcome; the error says why it failed.
pub type Result<T = ()> = std::result::Result<T, String>;

/// Adds what was being done to an error of the runtime (or anything else that displays).
pub trait Context<T> {
    fn context(self, what: &str) -> Result<T>;
}

impl<T, E: Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: &str) -> Result<T> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

pub fn note(text: impl AsRef<str>) {
    println!("   {}", text.as_ref());
}

/// Prints `ok: what`, or fails the step with it.
pub fn check(ok: bool, what: &str) -> Result {
    if ok {
        println!("   ok: {what}");
        Ok(())
    } else {
        Err(format!("check failed: {what}"))
    }
}

/// Like [`check`], saying what was seen instead when the values differ.
pub fn check_eq<T: PartialEq + Debug>(got: T, want: T, what: &str) -> Result {
    if got == want {
        println!("   ok: {what}");
        Ok(())
    } else {
        Err(format!("check failed: {what} (got {got:?}, expected {want:?})"))
    }
}

/// Durations of one measured operation.
pub struct Samples {
    pub what: &'static str,
    pub values: Vec<Duration>,
}

impl Samples {
    pub fn new(what: &'static str) -> Samples {
        Samples { what, values: Vec::new() }
    }

    pub fn push(&mut self, d: Duration) {
        self.values.push(d);
    }

    /// The value at `pct` percent of the sorted samples (nearest rank).
    pub fn percentile(&self, pct: u32) -> Duration {
        thunk::stats::percentile(&mut self.values.clone(), pct)
    }

    pub fn median(&self) -> Duration {
        self.percentile(50)
    }
}

/// The measurements of the whole run, in the order they were taken.
#[derive(Default)]
pub struct Summary {
    rows: Vec<Samples>,
}

impl Summary {
    pub fn add(&mut self, s: Samples) {
        note(format!("{}: median {} over {} samples", s.what, micros(s.median()), s.values.len()));
        self.rows.push(s);
    }

    pub fn print(&self) {
        let width = self.rows.iter().map(|r| r.what.len()).max().unwrap_or(0);
        println!("   {:<width$}  {:>10}  {:>10}  {:>7}", "latency", "median", "p90", "samples");
        for r in &self.rows {
            println!(
                "   {:<width$}  {:>10}  {:>10}  {:>7}",
                r.what,
                micros(r.median()),
                micros(r.percentile(90)),
                r.values.len()
            );
        }
    }
}

/// A duration in microseconds with one decimal.
pub fn micros(d: Duration) -> String {
    format!("{:.1} us", d.as_secs_f64() * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut s = Samples::new("x");
        for us in [5, 1, 4, 2, 3] {
            s.push(Duration::from_micros(us));
        }
        assert_eq!(s.median(), Duration::from_micros(3));
        assert_eq!(s.percentile(90), Duration::from_micros(5));
        assert_eq!(Samples::new("empty").median(), Duration::ZERO);
        assert_eq!(micros(Duration::from_nanos(12_345)), "12.3 us");
    }
}
