//! The device clock: a real monotonic counter, as GET_CLOCK_COUNTERS and packet timestamps need.

use nix::time::{clock_gettime, ClockId};

/// GPU counter frequency: 100 MHz, the gfx9 reference clock.
pub const GPU_CLOCK_HZ: u64 = 100_000_000;

fn ns(clock: ClockId) -> u64 {
    clock_gettime(clock).map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64).unwrap_or(0)
}

/// CPU counter: CLOCK_MONOTONIC_RAW in ns (amdkfd ktime_get_raw_ns).
pub fn cpu_clock_counter() -> u64 {
    ns(ClockId::CLOCK_MONOTONIC_RAW)
}

/// CLOCK_MONOTONIC in ns: the clock every process of the machine shares, for timing events
/// across processes (the owner watch's reaction to an exit).
pub fn monotonic_ns() -> u64 {
    ns(ClockId::CLOCK_MONOTONIC)
}

/// System counter: CLOCK_BOOTTIME in ns (amdkfd ktime_get_boottime_ns), frequency 1 GHz.
pub fn system_clock_counter() -> u64 {
    ns(ClockId::CLOCK_BOOTTIME)
}

pub const SYSTEM_CLOCK_HZ: u64 = 1_000_000_000;

/// GPU counter: CLOCK_MONOTONIC_RAW at 100 MHz, so it is monotonic and shares the CPU
/// counter's time base.
pub fn gpu_clock_counter() -> u64 {
    gpu_counter_at(cpu_clock_counter())
}

/// The GPU counter at CPU counter reading `cpu_ns` (a reading the caller already has).
pub fn gpu_counter_at(cpu_ns: u64) -> u64 {
    cpu_ns / (1_000_000_000 / GPU_CLOCK_HZ)
}
