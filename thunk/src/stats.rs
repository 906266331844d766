//! The percentile the developer tools report (kfd-bench, kfd-demo). It lives here because the
//! thunk is the lowest crate both depend on; it belongs in a shared tools crate once there is one.

use std::time::Duration;

/// The `pct`-th percentile (0..=100) of `samples` by nearest rank (the smallest sample that at
/// least `pct` percent of the samples do not exceed), sorting them in place; zero for no samples.
pub fn percentile(samples: &mut [Duration], pct: u32) -> Duration {
    samples.sort_unstable();
    let rank = (samples.len() * pct.min(100) as usize).div_ceil(100).max(1);
    samples.get(rank - 1).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<Duration> = [5, 1, 4, 2, 3].map(Duration::from_micros).to_vec();
        assert_eq!(percentile(&mut v, 50), Duration::from_micros(3));
        assert_eq!(percentile(&mut v, 90), Duration::from_micros(5));
        assert_eq!(percentile(&mut v, 0), Duration::from_micros(1));
        assert_eq!(percentile(&mut v, 100), Duration::from_micros(5));
        let mut four: Vec<Duration> = [4, 3, 2, 1].map(Duration::from_micros).to_vec();
        assert_eq!(percentile(&mut four, 50), Duration::from_micros(2));
        assert_eq!(percentile(&mut four, 99), Duration::from_micros(4));
        assert_eq!(percentile(&mut [], 50), Duration::ZERO);
    }
}
