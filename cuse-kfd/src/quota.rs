//! What each process and each uid may hold at once, and what the device holds in all: one
//! ledger, so a charge is checked against its process, its uid and the device under one lock,
//! and either recorded everywhere or nowhere.
//!
//! Every object a client makes is charged to the account of its context when it is made and
//! released when it goes; a context's teardown closes its account, giving back whatever it
//! still held, so the uid totals follow the live objects exactly. Releases on a closed account
//! are no-ops (its objects were given back by the close).
//!
//! A refusal answers the errno amdkfd gives for the same shortage (all pinned to v6.1):
//! * buffers, VRAM and GTT: ENOMEM, as `amdgpu_amdkfd_reserve_mem_limit` refuses memory
//!   (<https://github.com/torvalds/linux/blob/v6.1/drivers/gpu/drm/amd/amdgpu/amdgpu_amdkfd_gpuvm.c>);
//! * queues: ENOSPC, as `pqm_create_queue` refuses a process past its queue count
//!   (<https://github.com/torvalds/linux/blob/v6.1/drivers/gpu/drm/amd/amdkfd/kfd_process_queue_manager.c>);
//! * events: ENOSPC, as `create_signal_event` refuses once the event page is full;
//! * parked waits: ENOMEM, as `kfd_wait_on_events` when it cannot allocate its waiters
//!   (both <https://github.com/torvalds/linux/blob/v6.1/drivers/gpu/drm/amd/amdkfd/kfd_events.c>).

use crate::memory::BufferKind;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// What a quota counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Buffers,
    /// VRAM bytes, over all GPUs.
    Vram,
    /// GTT (system memory) bytes.
    Gtt,
    Queues,
    Events,
    /// WAIT_EVENTS calls parked in the device.
    Waits,
}

impl Resource {
    pub const ALL: [Resource; 6] =
        [Resource::Buffers, Resource::Vram, Resource::Gtt, Resource::Queues, Resource::Events, Resource::Waits];

    /// The name used by the command line and `status`.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Buffers => "buffers",
            Resource::Vram => "vram",
            Resource::Gtt => "gtt",
            Resource::Queues => "queues",
            Resource::Events => "events",
            Resource::Waits => "waits",
        }
    }

    pub fn by_name(name: &str) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The errno a refusal answers (see the module docs for amdkfd's).
    pub fn refusal(self) -> Errno {
        match self {
            Resource::Buffers | Resource::Vram | Resource::Gtt | Resource::Waits => Errno::ENOMEM,
            Resource::Queues | Resource::Events => Errno::ENOSPC,
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn is_bytes(self) -> bool {
        matches!(self, Resource::Vram | Resource::Gtt)
    }
}

/// An amount of each resource: a usage, a limit or a charge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts([u64; 6]);

impl Amounts {
    pub fn get(&self, r: Resource) -> u64 {
        self.0[r.index()]
    }

    pub fn set(&mut self, r: Resource, n: u64) {
        self.0[r.index()] = n;
    }

    pub fn with(mut self, r: Resource, n: u64) -> Amounts {
        self.set(r, n);
        self
    }

    /// The first resource of `self + add` above `limit`, if any.
    fn exceeds(&self, add: &Amounts, limit: &Amounts) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| self.get(*r).checked_add(add.get(*r)).is_none_or(|n| n > limit.get(*r)))
    }

    fn add(&mut self, other: &Amounts) {
        for r in Resource::ALL {
            self.0[r.index()] += other.get(r);
        }
    }

    /// Takes `other` away, at most down to zero (a release is never more than was charged;
    /// saturating keeps a bug from wrapping into a huge usage).
    fn sub(&mut self, other: &Amounts) {
        for r in Resource::ALL {
            debug_assert!(self.get(r) >= other.get(r), "releasing more {} than was charged", r.name());
            self.0[r.index()] = self.get(r).saturating_sub(other.get(r));
        }
    }
}

impl fmt::Display for Amounts {
    /// `buffers=1 vram=4096 ...` (the form `status` prints and the command line reads).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in Resource::ALL.into_iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            match self.get(r) {
                u64::MAX => write!(f, "{sep}{}=unlimited", r.name())?,
                n => write!(f, "{sep}{}={n}", r.name())?,
            }
        }
        Ok(())
    }
}

/// Limits set by the operator; `None` takes the default (see [`QuotaConfig::resolve`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides([Option<u64>; 6]);

impl Overrides {
    pub fn set(&mut self, r: Resource, n: u64) {
        self.0[r.index()] = Some(n);
    }

    pub fn with(mut self, r: Resource, n: u64) -> Overrides {
        self.set(r, n);
        self
    }

    /// Reads `RES=N[,RES=N...]` (the `--process-limit`/`--uid-limit` syntax): RES one of
    /// buffers, vram, gtt, queues, events, waits; sizes take a K, M, G or T suffix (powers of
    /// 1024); N may be `unlimited`.
    pub fn parse(spec: &str) -> Result<Overrides, String> {
        let mut o = Overrides::default();
        for item in spec.split(',').filter(|s| !s.is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| format!("{item:?} is not RESOURCE=N"))?;
            let r = Resource::by_name(name.trim()).ok_or_else(|| {
                let known: Vec<&str> = Resource::ALL.iter().map(|r| r.name()).collect();
                format!("unknown resource {name:?} (known: {})", known.join(", "))
            })?;
            o.set(r, parse_amount(value.trim(), r.is_bytes())?);
        }
        Ok(o)
    }

    /// Each limit set here, or else the one in `defaults`.
    pub fn or(&self, defaults: Amounts) -> Amounts {
        let mut a = defaults;
        for r in Resource::ALL {
            if let Some(n) = self.0[r.index()] {
                a.set(r, n);
            }
        }
        a
    }
}

fn parse_amount(s: &str, bytes: bool) -> Result<u64, String> {
    if s == "unlimited" {
        return Ok(u64::MAX);
    }
    let (digits, shift) = match s.char_indices().last() {
        Some((i, c)) if bytes && "KMGT".contains(c.to_ascii_uppercase()) => {
            (&s[..i], 10 * (1 + "KMGT".find(c.to_ascii_uppercase()).expect("one of KMGT") as u32))
        }
        _ => (s, 0),
    };
    let n: u64 = digits.parse().map_err(|e| format!("{s:?} is not a count: {e}"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s:?} is too large"))
}

/// Per-process and per-uid limits, as configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuotaConfig {
    pub process: Overrides,
    pub uid: Overrides,
    /// Buffers the whole device may hold; `None` for [`device_buffer_budget`].
    pub device_buffers: Option<u64>,
}

/// Linux's default `vm.max_map_count` (include/linux/mm.h at v6.1, DEFAULT_MAX_MAP_COUNT), for a
/// machine whose /proc/sys/vm/max_map_count cannot be read.
const DEFAULT_MAX_MAP_COUNT: u64 = 65530;

/// Buffers the device may hold in all, by default: three quarters of the process's
/// `vm.max_map_count`. The device maps each buffer's backing file in its own process (a
/// daemon's, or the embedded device's client's), one mapping each; past the kernel's count
/// every mmap of that process fails, its thread stacks' too, so the rest is kept for them.
/// Without this bound one uid's default quota (4 x 32768 buffers) could take every mapping
/// of a daemon that serves all users.
pub fn device_buffer_budget() -> u64 {
    let count = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_MAX_MAP_COUNT);
    count - count / 4
}

/// Default buffers of one process: far above what a ROCm process allocates (ROCr
/// suballocates; hundreds to a few thousand), while bounding the daemon's own memory and
/// backing files per process.
pub const DEFAULT_PROCESS_BUFFERS: u64 = 32 * 1024;
/// Default queues of one process: amdkfd's own per-process cap (KFD_MAX_NUM_OF_QUEUES_PER_PROCESS).
pub const DEFAULT_PROCESS_QUEUES: u64 = uapi::kfd::KFD_MAX_NUM_OF_QUEUES_PER_PROCESS as u64;
/// Default events of one process: what its event ids can name (signal events, then as many
/// other events).
pub const DEFAULT_PROCESS_EVENTS: u64 = 2 * uapi::kfd::KFD_SIGNAL_EVENT_LIMIT as u64;
/// Default parked waits of one process: a WAIT_EVENTS blocks its calling thread, so this is
/// one per thread for a process of 4096 threads.
pub const DEFAULT_PROCESS_WAITS: u64 = 4096;
/// How many processes' worth of counted objects one uid may hold by default.
pub const DEFAULT_UID_PROCESSES: u64 = 4;

impl QuotaConfig {
    /// The limits in force on a device of `vram` bytes of VRAM (all GPUs) and a GTT limit of
    /// `gtt` bytes. By default a process and a uid may each use all of the device's memory
    /// (a single ROCm process legitimately takes most of VRAM, and the device's own limits
    /// answer ENOMEM beyond it); counted objects have the caps above per process and
    /// [`DEFAULT_UID_PROCESSES`] times as many per uid.
    pub fn resolve(&self, vram: u64, gtt: u64) -> QuotaLimits {
        let process = Amounts::default()
            .with(Resource::Buffers, DEFAULT_PROCESS_BUFFERS)
            .with(Resource::Vram, vram)
            .with(Resource::Gtt, gtt)
            .with(Resource::Queues, DEFAULT_PROCESS_QUEUES)
            .with(Resource::Events, DEFAULT_PROCESS_EVENTS)
            .with(Resource::Waits, DEFAULT_PROCESS_WAITS);
        let mut uid = process;
        for r in [Resource::Buffers, Resource::Queues, Resource::Events, Resource::Waits] {
            uid.set(r, process.get(r).saturating_mul(DEFAULT_UID_PROCESSES));
        }
        QuotaLimits { process: self.process.or(process), uid: self.uid.or(uid) }
    }
}

/// The limits in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaLimits {
    pub process: Amounts,
    pub uid: Amounts,
}

/// One context's account in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccountId(u64);

/// What one request takes: amounts, and the GPU its VRAM is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    amounts: Amounts,
    gpu: u32,
}

impl Charge {
    /// `n` of `r` (not VRAM, which needs its GPU: see [`Charge::buffer`]).
    pub fn of(r: Resource, n: u64) -> Charge {
        debug_assert_ne!(r, Resource::Vram);
        Charge { amounts: Amounts::default().with(r, n), gpu: 0 }
    }

    /// A buffer of `kind` and `size` bytes on `gpu`: VRAM and GTT count their bytes too.
    pub fn buffer(kind: BufferKind, gpu: u32, size: u64) -> Charge {
        let mut amounts = Amounts::default().with(Resource::Buffers, 1);
        match kind {
            BufferKind::Vram => amounts.set(Resource::Vram, size),
            BufferKind::Gtt => amounts.set(Resource::Gtt, size),
            _ => {}
        }
        Charge { amounts, gpu }
    }
}

#[derive(Debug)]
struct Account {
    pid: u32,
    uid: u32,
    used: Amounts,
    /// Its VRAM by GPU, to give back to the device's per-GPU totals on close.
    vram: BTreeMap<u32, u64>,
}

#[derive(Debug, Default)]
struct State {
    accounts: HashMap<AccountId, Account>,
    uids: BTreeMap<u32, Amounts>,
    vram_used: BTreeMap<u32, u64>,
    gtt_used: u64,
    buffers_used: u64,
    next: u64,
}

/// A process's or a uid's usage, for `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageReport {
    pub limits: QuotaLimits,
    /// (pid, uid, usage) of each open account, by pid.
    pub processes: Vec<(u32, u32, Amounts)>,
    /// (uid, usage) of each uid holding something, by uid.
    pub uids: Vec<(u32, Amounts)>,
}

/// The ledger: the device's memory limits, the quotas, and what every account holds.
#[derive(Debug)]
pub struct Ledger {
    limits: QuotaLimits,
    /// VRAM of each GPU by gpu_id.
    vram_total: BTreeMap<u32, u64>,
    gtt_limit: u64,
    /// Buffers of every account together (see [`device_buffer_budget`]).
    buffer_limit: u64,
    state: Mutex<State>,
}

impl Ledger {
    pub fn new(config: &QuotaConfig, vram_total: BTreeMap<u32, u64>, gtt_limit: u64) -> Ledger {
        let vram = vram_total.values().fold(0u64, |a, v| a.saturating_add(*v));
        let buffer_limit = config.device_buffers.unwrap_or_else(device_buffer_budget);
        Ledger { limits: config.resolve(vram, gtt_limit), vram_total, gtt_limit, buffer_limit, state: Mutex::default() }
    }

    pub fn limits(&self) -> QuotaLimits {
        self.limits
    }

    /// The buffers the whole device may hold.
    pub fn buffer_limit(&self) -> u64 {
        self.buffer_limit
    }

    /// Opens the account of a new context of process `pid`, owned by `uid`.
    pub fn open(&self, pid: u32, uid: u32) -> AccountId {
        let mut st = self.state.lock();
        st.next += 1;
        let id = AccountId(st.next);
        st.accounts.insert(id, Account { pid, uid, used: Amounts::default(), vram: BTreeMap::new() });
        id
    }

    /// Records `charge` against `id`, its uid and the device, or refuses with the errno of the
    /// first limit it would pass (the device's memory and buffers, then the process's, then
    /// the uid's), recording nothing. A closed account (a context being torn down) is refused
    /// with EBADF, as amdkfd answers an fd whose process has gone.
    pub fn charge(&self, id: AccountId, charge: &Charge) -> Result<(), Errno> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let a = st.accounts.get(&id).ok_or(Errno::EBADF)?;
        let vram = charge.amounts.get(Resource::Vram);
        if vram != 0 {
            let total = *self.vram_total.get(&charge.gpu).ok_or(Errno::EINVAL)?;
            let used = st.vram_used.get(&charge.gpu).copied().unwrap_or(0);
            if used.checked_add(vram).is_none_or(|n| n > total) {
                return Err(Errno::ENOMEM);
            }
        }
        if st.gtt_used.checked_add(charge.amounts.get(Resource::Gtt)).is_none_or(|n| n > self.gtt_limit) {
            return Err(Errno::ENOMEM);
        }
        let buffers = charge.amounts.get(Resource::Buffers);
        if buffers != 0 && st.buffers_used.checked_add(buffers).is_none_or(|n| n > self.buffer_limit) {
            log::debug!("pid {}: the device holds its {} buffers", a.pid, self.buffer_limit);
            return Err(Errno::ENOMEM);
        }
        if let Some(r) = a.used.exceeds(&charge.amounts, &self.limits.process) {
            log::debug!("pid {}: over its {} quota", a.pid, r.name());
            return Err(r.refusal());
        }
        let uid_used = st.uids.get(&a.uid).copied().unwrap_or_default();
        if let Some(r) = uid_used.exceeds(&charge.amounts, &self.limits.uid) {
            log::debug!("pid {}: uid {} is over its {} quota", a.pid, a.uid, r.name());
            return Err(r.refusal());
        }
        let a = st.accounts.get_mut(&id).expect("looked up above");
        a.used.add(&charge.amounts);
        if vram != 0 {
            *a.vram.entry(charge.gpu).or_default() += vram;
            *st.vram_used.entry(charge.gpu).or_default() += vram;
        }
        st.gtt_used += charge.amounts.get(Resource::Gtt);
        st.buffers_used += buffers;
        st.uids.entry(a.uid).or_default().add(&charge.amounts);
        Ok(())
    }

    /// Gives back `charge` (what an earlier [`Ledger::charge`] of `id` took); nothing if the
    /// account is closed.
    pub fn release(&self, id: AccountId, charge: &Charge) {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(a) = st.accounts.get_mut(&id) else { return };
        a.used.sub(&charge.amounts);
        let vram = charge.amounts.get(Resource::Vram);
        if vram != 0 {
            if let Some(v) = a.vram.get_mut(&charge.gpu) {
                *v = v.saturating_sub(vram);
            }
            if let Some(v) = st.vram_used.get_mut(&charge.gpu) {
                *v = v.saturating_sub(vram);
            }
        }
        st.gtt_used = st.gtt_used.saturating_sub(charge.amounts.get(Resource::Gtt));
        st.buffers_used = st.buffers_used.saturating_sub(charge.amounts.get(Resource::Buffers));
        let uid = a.uid;
        Self::release_uid(st, uid, &charge.amounts);
    }

    /// Closes `id`, giving back everything it still holds (a context's teardown).
    pub fn close(&self, id: AccountId) {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(a) = st.accounts.remove(&id) else { return };
        for (gpu, v) in &a.vram {
            if let Some(used) = st.vram_used.get_mut(gpu) {
                *used = used.saturating_sub(*v);
            }
        }
        st.gtt_used = st.gtt_used.saturating_sub(a.used.get(Resource::Gtt));
        st.buffers_used = st.buffers_used.saturating_sub(a.used.get(Resource::Buffers));
        Self::release_uid(st, a.uid, &a.used);
    }

    fn release_uid(st: &mut State, uid: u32, amounts: &Amounts) {
        if let Some(u) = st.uids.get_mut(&uid) {
            u.sub(amounts);
            if *u == Amounts::default() {
                st.uids.remove(&uid);
            }
        }
    }

    /// VRAM of `gpu_id` an allocation by `id` could still get: the device's free VRAM, bounded
    /// by the account's and its uid's VRAM quotas (what AVAILABLE_MEMORY reports).
    pub fn vram_available(&self, id: Option<AccountId>, gpu_id: u32) -> Option<u64> {
        let total = *self.vram_total.get(&gpu_id)?;
        let st = self.state.lock();
        let mut free = total.saturating_sub(st.vram_used.get(&gpu_id).copied().unwrap_or(0));
        if let Some(a) = id.and_then(|id| st.accounts.get(&id)) {
            let v = Resource::Vram;
            free = free.min(self.limits.process.get(v).saturating_sub(a.used.get(v)));
            let uid_used = st.uids.get(&a.uid).map_or(0, |u| u.get(v));
            free = free.min(self.limits.uid.get(v).saturating_sub(uid_used));
        }
        Some(free)
    }

    /// What `uid` holds now.
    pub fn uid_usage(&self, uid: u32) -> Amounts {
        self.state.lock().uids.get(&uid).copied().unwrap_or_default()
    }

    /// What account `id` holds now (zero once closed).
    pub fn usage(&self, id: AccountId) -> Amounts {
        self.state.lock().accounts.get(&id).map(|a| a.used).unwrap_or_default()
    }

    /// The limits and every account's and uid's usage.
    pub fn report(&self) -> UsageReport {
        let st = self.state.lock();
        let mut processes: Vec<(u32, u32, Amounts)> = st.accounts.values().map(|a| (a.pid, a.uid, a.used)).collect();
        processes.sort_by_key(|(pid, uid, _)| (*pid, *uid));
        UsageReport { limits: self.limits, processes, uids: st.uids.iter().map(|(u, a)| (*u, *a)).collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: u32 = 0x1000;

    fn ledger(config: QuotaConfig) -> Ledger {
        Ledger::new(&config, BTreeMap::from([(GPU, 1 << 30)]), 1 << 30)
    }

    #[test]
    fn quota_limits_parse_sizes_and_default_the_rest() {
        let o = Overrides::parse("vram=2G,queues=8,gtt=512M,waits=unlimited").unwrap();
        let l = QuotaConfig { process: o, ..QuotaConfig::default() }.resolve(16 << 30, 4 << 30);
        assert_eq!(l.process.get(Resource::Vram), 2 << 30);
        assert_eq!(l.process.get(Resource::Gtt), 512 << 20);
        assert_eq!(l.process.get(Resource::Queues), 8);
        assert_eq!(l.process.get(Resource::Waits), u64::MAX);
        assert_eq!(l.process.get(Resource::Buffers), DEFAULT_PROCESS_BUFFERS);
        assert_eq!(l.uid.get(Resource::Vram), 16 << 30, "memory defaults to the device's");
        assert_eq!(l.uid.get(Resource::Queues), DEFAULT_PROCESS_QUEUES * DEFAULT_UID_PROCESSES);
        for bad in ["vram", "bogus=1", "queues=1K", "vram=1X", "gtt=99999999999T"] {
            assert!(Overrides::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn quota_refusals_record_nothing_and_answer_amdkfds_errno() {
        let l = ledger(QuotaConfig {
            process: Overrides::default().with(Resource::Queues, 1).with(Resource::Gtt, 8192),
            uid: Overrides::default().with(Resource::Waits, 1),
            ..QuotaConfig::default()
        });
        let a = l.open(1, 1000);
        l.charge(a, &Charge::of(Resource::Queues, 1)).unwrap();
        assert_eq!(l.charge(a, &Charge::of(Resource::Queues, 1)), Err(Errno::ENOSPC));
        l.charge(a, &Charge::buffer(BufferKind::Gtt, GPU, 4096)).unwrap();
        let before = l.usage(a);
        assert_eq!(l.charge(a, &Charge::buffer(BufferKind::Gtt, GPU, 8192)), Err(Errno::ENOMEM));
        assert_eq!(l.usage(a), before, "a refused buffer counts neither its bytes nor itself");
        assert_eq!(l.uid_usage(1000), before);
        l.charge(a, &Charge::of(Resource::Waits, 1)).unwrap();
        let b = l.open(2, 1000);
        assert_eq!(l.charge(b, &Charge::of(Resource::Waits, 1)), Err(Errno::ENOMEM), "the uid's limit");
        assert_eq!(l.charge(b, &Charge::buffer(BufferKind::Vram, GPU, 2 << 30)), Err(Errno::ENOMEM), "the device's");
        assert_eq!(l.usage(b), Amounts::default());
    }

    /// Every uid's buffers together stop at the device's budget, whatever their quotas allow,
    /// and what is released or closed makes room again.
    #[test]
    fn the_device_holds_at_most_its_buffer_budget_across_uids() {
        let l = ledger(QuotaConfig { device_buffers: Some(3), ..QuotaConfig::default() });
        assert_eq!(l.buffer_limit(), 3);
        let (a, b) = (l.open(1, 1000), l.open(2, 2000));
        let buf = Charge::buffer(BufferKind::Gtt, GPU, 4096);
        l.charge(a, &buf).unwrap();
        l.charge(a, &buf).unwrap();
        l.charge(b, &buf).unwrap();
        assert_eq!(l.charge(b, &buf), Err(Errno::ENOMEM), "another uid, under its own quota");
        assert_eq!(l.usage(b).get(Resource::Buffers), 1, "the refusal recorded nothing");
        l.charge(b, &Charge::of(Resource::Queues, 1)).unwrap();
        l.release(a, &buf);
        l.charge(b, &buf).unwrap();
        l.close(a);
        l.charge(b, &buf).unwrap();
        assert_eq!(l.charge(b, &buf), Err(Errno::ENOMEM));
    }

    #[test]
    fn the_default_buffer_budget_leaves_a_quarter_of_the_mappings() {
        let count: u64 = std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap().trim().parse().unwrap();
        assert_eq!(device_buffer_budget(), count - count / 4);
        assert_eq!(ledger(QuotaConfig::default()).buffer_limit(), device_buffer_budget());
    }

    #[test]
    fn quota_uid_totals_follow_releases_and_closes_exactly() {
        let l = ledger(QuotaConfig {
            process: Overrides::default(),
            uid: Overrides::default().with(Resource::Vram, 1 << 20),
            ..QuotaConfig::default()
        });
        let (a, b, other) = (l.open(1, 1000), l.open(2, 1000), l.open(3, 2000));
        let buf = Charge::buffer(BufferKind::Vram, GPU, 1 << 19);
        l.charge(a, &buf).unwrap();
        l.charge(b, &buf).unwrap();
        assert_eq!(l.charge(a, &buf), Err(Errno::ENOMEM), "uid 1000 is at its limit");
        l.charge(other, &buf).unwrap();
        l.charge(other, &buf).unwrap();
        l.release(b, &buf);
        l.charge(a, &buf).unwrap();
        l.charge(a, &Charge::of(Resource::Events, 3)).unwrap();
        l.close(a);
        l.release(a, &buf);
        assert_eq!(l.uid_usage(1000), Amounts::default(), "a close gives back all; later releases nothing");
        assert_eq!(l.vram_available(None, GPU), Some((1 << 30) - (1 << 20)));
        assert_eq!(l.vram_available(Some(b), GPU), Some(1 << 20), "bounded by the uid's quota");
        assert_eq!(l.charge(a, &buf), Err(Errno::EBADF));
        l.close(other);
        let r = l.report();
        assert_eq!(r.processes, vec![(2, 1000, Amounts::default())]);
        assert!(r.uids.is_empty(), "{r:?}");
        assert_eq!(l.vram_available(None, GPU), Some(1 << 30));
    }
}
