//! Percentiles and the output format.

use std::time::Duration;

/// The `p`-th percentile (0..=100) of `samples` (sorted in place).
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_unstable();
    let idx = ((samples.len() - 1) as f64 * p / 100.0).round() as usize;
    samples[idx]
}

pub fn bench(name: &str, value: f64, unit: &str) {
    println!("BENCH {name} {value:.3} {unit}");
}

pub fn ratio(name: &str, ours: f64, baseline: f64) {
    println!("RATIO {name} {:.3}", ours / baseline);
}

pub fn ns(d: Duration) -> f64 {
    d.as_nanos() as f64
}
