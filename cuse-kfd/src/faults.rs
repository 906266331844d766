//! Fault injection: make the device misbehave on purpose, as hardware and drivers do, so that
//! the software above can be tested against it. Set at serve time (`--fault`) or per test
//! through [`crate::Device::faults`]; every setting can change while the device runs.
//!
//! * `vm-fault=ADDR[+LEN]`: any device access to `[ADDR, ADDR+LEN)` is a GPU VM fault
//!   (MEMORY event with the address, the queue stops), as if the page were unmapped;
//! * `hang-queue=ID`: queue `ID` (of any process) stops consuming packets, like a hung CP:
//!   its waiters time out, DESTROY still works;
//! * `delay-completions=MS`: every packet completes MS milliseconds after it starts;
//! * `panic-queue=ID`: the command processor panics while polling queue `ID`, as a bug in it
//!   would: that queue stops with an error its client sees, the other queues go on;
//! * `crash-at=POINT`: the daemon aborts when it reaches POINT (`ioctl:NAME`, e.g.
//!   `ioctl:CREATE_QUEUE`), so clients see what a dying driver gives them;
//! * `stall-ioctl=NAME:MS`: every NAME ioctl (e.g. `ALLOC_MEMORY_OF_GPU`) waits MS milliseconds
//!   before it is handled, as one waiting on a slow backing store does, so that what a stalled
//!   request holds up (and what it must not) can be tested.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const NONE: u64 = u64::MAX;
/// The longest stall-ioctl (ten minutes): a longer one is a typo, not a test.
const MAX_STALL_MS: u64 = 600_000;

#[derive(Debug)]
pub struct Faults {
    vm_start: AtomicU64,
    vm_end: AtomicU64,
    hang_queue: AtomicU64,
    panic_queue: AtomicU64,
    delay_ns: AtomicU64,
    crash_armed: AtomicBool,
    crash_at: Mutex<Option<String>>,
    stall_armed: AtomicBool,
    stall: Mutex<Option<(String, Duration)>>,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            vm_start: AtomicU64::new(NONE),
            vm_end: AtomicU64::new(NONE),
            hang_queue: AtomicU64::new(NONE),
            panic_queue: AtomicU64::new(NONE),
            delay_ns: AtomicU64::new(0),
            crash_armed: AtomicBool::new(false),
            crash_at: Mutex::new(None),
            stall_armed: AtomicBool::new(false),
            stall: Mutex::new(None),
        }
    }
}

/// A fault setting that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad fault {spec:?}: {why} (want vm-fault=ADDR[+LEN], hang-queue=ID, panic-queue=ID, delay-completions=MS, \
     crash-at=ioctl:NAME or stall-ioctl=NAME:MS)"
)]
pub struct FaultSpecError {
    pub spec: String,
    pub why: &'static str,
}

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl Faults {
    /// Applies one `NAME=VALUE` setting (the `--fault` syntax).
    pub fn apply(&self, spec: &str) -> Result<(), FaultSpecError> {
        let err = |why| FaultSpecError { spec: spec.to_string(), why };
        let (name, value) = spec.split_once('=').ok_or_else(|| err("no '='"))?;
        match name {
            "vm-fault" => {
                let (a, l) = value.split_once('+').unwrap_or((value, "1"));
                let addr = number(a).ok_or_else(|| err("address is not a number"))?;
                let len = number(l).filter(|l| *l > 0).ok_or_else(|| err("length is not a positive number"))?;
                self.set_vm_fault(Some((addr, addr.checked_add(len).ok_or_else(|| err("range wraps"))?)));
            }
            "hang-queue" => {
                self.set_hang_queue(Some(number(value).ok_or_else(|| err("queue id is not a number"))? as u32))
            }
            "panic-queue" => {
                self.set_panic_queue(Some(number(value).ok_or_else(|| err("queue id is not a number"))? as u32))
            }
            "delay-completions" => self
                .set_completion_delay(Duration::from_millis(number(value).ok_or_else(|| err("not a number of ms"))?)),
            "crash-at" => {
                if !value.starts_with("ioctl:") {
                    return Err(err("crash points are ioctl:NAME"));
                }
                self.set_crash_at(Some(value.to_string()));
            }
            "stall-ioctl" => {
                let (ioctl, ms) = value.split_once(':').ok_or_else(|| err("want NAME:MS"))?;
                if ioctl.is_empty() {
                    return Err(err("no ioctl name"));
                }
                let ms = number(ms)
                    .filter(|&ms| ms <= MAX_STALL_MS)
                    .ok_or_else(|| err("MS is not a number up to 600000"))?;
                self.set_stall(Some((ioctl.to_string(), Duration::from_millis(ms))));
            }
            _ => return Err(err("unknown fault")),
        }
        Ok(())
    }

    /// Device accesses to `[start, end)` fault; `None` clears.
    pub fn set_vm_fault(&self, range: Option<(u64, u64)>) {
        let (s, e) = range.unwrap_or((NONE, NONE));
        self.vm_end.store(e, Ordering::Release);
        self.vm_start.store(s, Ordering::Release);
    }

    /// The first injected-fault address in `[va, va + len)`, if any.
    pub fn vm_fault_in(&self, va: u64, len: u64) -> Option<u64> {
        let s = self.vm_start.load(Ordering::Relaxed);
        if s == NONE {
            return None;
        }
        let e = self.vm_end.load(Ordering::Relaxed);
        let end = va.saturating_add(len);
        (va < e && s < end).then(|| va.max(s))
    }

    pub fn set_hang_queue(&self, queue: Option<u32>) {
        self.hang_queue.store(queue.map_or(NONE, u64::from), Ordering::Release);
    }

    pub fn is_hung(&self, queue: u32) -> bool {
        self.hang_queue.load(Ordering::Relaxed) == u64::from(queue)
    }

    pub fn set_panic_queue(&self, queue: Option<u32>) {
        self.panic_queue.store(queue.map_or(NONE, u64::from), Ordering::Release);
    }

    pub fn panics(&self, queue: u32) -> bool {
        self.panic_queue.load(Ordering::Relaxed) == u64::from(queue)
    }

    pub fn set_completion_delay(&self, d: Duration) {
        self.delay_ns.store(d.as_nanos() as u64, Ordering::Release);
    }

    pub fn completion_delay(&self) -> Option<Duration> {
        let ns = self.delay_ns.load(Ordering::Relaxed);
        (ns > 0).then(|| Duration::from_nanos(ns))
    }

    pub fn set_crash_at(&self, point: Option<String>) {
        self.crash_armed.store(point.is_some(), Ordering::Release);
        *self.crash_at.lock() = point;
    }

    /// Whether a crash point is armed (a cheap check before naming the point).
    pub fn crash_armed(&self) -> bool {
        self.crash_armed.load(Ordering::Relaxed)
    }

    /// Every `ioctl` (its table name, e.g. `GET_VERSION`) waits this long before its handler;
    /// `None` clears.
    pub fn set_stall(&self, stall: Option<(String, Duration)>) {
        self.stall_armed.store(stall.is_some(), Ordering::Release);
        *self.stall.lock() = stall;
    }

    /// How long an `ioctl` is to stall, if it is the stalled one.
    pub fn stall_of(&self, ioctl: &str) -> Option<Duration> {
        if !self.stall_armed.load(Ordering::Relaxed) {
            return None;
        }
        self.stall.lock().as_ref().filter(|(name, _)| name == ioctl).map(|&(_, d)| d)
    }

    /// Aborts the process if `point` is the armed crash point.
    pub fn crash_point(&self, point: &str) {
        if self.crash_armed.load(Ordering::Relaxed) && self.crash_at.lock().as_deref() == Some(point) {
            log::error!("fault injection: crashing at {point}");
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_say_why() {
        let f = Faults::default();
        f.apply("vm-fault=0x1000+0x100").unwrap();
        assert_eq!(f.vm_fault_in(0x0ff8, 16), Some(0x1000));
        assert_eq!(f.vm_fault_in(0x1100, 8), None);
        f.apply("hang-queue=3").unwrap();
        assert!(f.is_hung(3) && !f.is_hung(2));
        f.apply("delay-completions=5").unwrap();
        assert_eq!(f.completion_delay(), Some(Duration::from_millis(5)));
        assert!(f.apply("crash-at=ioctl:CREATE_QUEUE").is_ok());
        assert_eq!(f.apply("vm-fault=zz").unwrap_err().why, "address is not a number");
        assert_eq!(f.apply("melt=1").unwrap_err().why, "unknown fault");
        assert_eq!(f.apply("crash-at=somewhere").unwrap_err().why, "crash points are ioctl:NAME");
        f.set_vm_fault(None);
        assert_eq!(f.vm_fault_in(0x1000, 8), None);
        assert_eq!(f.stall_of("GET_VERSION"), None);
        f.apply("stall-ioctl=GET_VERSION:250").unwrap();
        assert_eq!(f.stall_of("GET_VERSION"), Some(Duration::from_millis(250)));
        assert_eq!(f.stall_of("CREATE_QUEUE"), None);
        assert_eq!(f.apply("stall-ioctl=GET_VERSION").unwrap_err().why, "want NAME:MS");
        assert_eq!(f.apply("stall-ioctl=:5").unwrap_err().why, "no ioctl name");
        assert_eq!(f.apply("stall-ioctl=X:600001").unwrap_err().why, "MS is not a number up to 600000");
        f.set_stall(None);
        assert_eq!(f.stall_of("GET_VERSION"), None);
    }
}
