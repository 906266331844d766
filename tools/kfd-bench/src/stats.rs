//! The output format (percentiles are thunk::stats's).

use std::time::Duration;

pub use thunk::stats::percentile;

pub fn bench(name: &str, value: f64, unit: &str) {
    println!("BENCH {name} {value:.3} {unit}");
}

pub fn ratio(name: &str, ours: f64, baseline: f64) {
    println!("RATIO {name} {:.3}", ours / baseline);
}

pub fn ns(d: Duration) -> f64 {
    d.as_nanos() as f64
}
