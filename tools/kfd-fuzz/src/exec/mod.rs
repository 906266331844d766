//! Runs operations against an embedded device and checks the oracles after each one:
//!
//! * every reply comes within the timeout (a hang is a failure) and no thread panicked;
//! * every reply is a success or an errno amdkfd could give for that request
//!   ([`crate::errnos`]), with the argument struct copied back at the caller's size, and the
//!   handler touched caller memory only in the ranges its table row declares (what the CUSE
//!   front end fetches);
//! * a failed request changes no object of the process; a successful one changes exactly what it
//!   says (one new buffer, queue or event; the named one gone);
//! * no request names an object its process does not own and succeeds;
//! * per-process object counts equal the model's;
//! * when every client has gone: nothing is left (counts zero, no client directories, all VRAM
//!   back).

use crate::arena::Arena;
use crate::model::{BufferModel, Counts, EventModel, Model, QueueModel};
use crate::ops::{self, Call, Expect, Op, Ptr};
use crate::stats::Stats;
use cuse_kfd::engine::EngineConfig;
use cuse_kfd::quota::{Overrides, QuotaConfig, Resource};
use cuse_kfd::reply::Reply;
use cuse_kfd::{Caller, Device, DeviceConfig, Embedded, EmbeddedFile, FileId};
use nix::errno::Errno;
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thunk::signal::Signals;
use thunk::Kfd;
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::FromBytes;

mod check;
mod client;
mod waits;

use check::{check_reply, declared_ranges, fail, panics_since, parse, send, CheckedMemory, Sent, PANIC_COUNT};
pub use check::{install_panic_hook, last_panic, named_object, panic_count, sanitize, Named};
use client::{SharedFile, SimTransport, ThunkSide};
use waits::{check_parked, due, Parked};

/// Pids of simulated processes: above pid_max (2^22), so no real process has them.
pub const PID_BASE: u32 = 6_000_000;
/// Open files one simulated process may have.
pub const MAX_FILES: usize = 3;
pub const MAX_AQL_QUEUES: usize = 4;
pub const MAX_SIGNAL_SETS: usize = 3;
/// Bytes of a process doorbell slice.
const DOORBELL_SLICE: u64 = 8192;

/// How a case runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub profile: String,
    pub gpus: usize,
    /// Simulated processes per case.
    pub procs: u8,
    /// A request not answered within this is a hang.
    pub op_timeout: Duration,
    /// How long past its timeout a parked wait may take to be answered.
    pub wait_slack: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            profile: cuse_kfd::topology::DEFAULT_PROFILE.to_string(),
            gpus: 1,
            procs: 4,
            op_timeout: Duration::from_secs(5),
            wait_slack: Duration::from_secs(5),
        }
    }
}

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A panic in the device (or any thread).
    Crash,
    /// A request, wait or teardown not answered in time.
    Hang,
    /// An errno amdkfd does not give for the request, or a malformed reply.
    Errno,
    /// A request reached another process's object, or a file of another process.
    Isolation,
    /// Objects changed other than the reply says, or counts differ from the model.
    Model,
    /// Something left after every client went.
    Leak,
    /// A queue that was only ever given well-formed packets stopped.
    Queue,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Crash => "crash",
            Kind::Hang => "hang",
            Kind::Errno => "errno",
            Kind::Isolation => "isolation",
            Kind::Model => "model",
            Kind::Leak => "leak",
            Kind::Queue => "queue",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    pub kind: Kind,
    /// Index of the operation after which it was seen (the case length: at the final checks).
    pub at: usize,
    pub what: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at operation {}: {}", self.kind.name(), self.at, self.what)
    }
}

type Check = Result<(), (Kind, String)>;

pub struct Proc {
    pub index: u8,
    pub pid: u32,
    /// Driven through the thunk (AQL queues, signals) rather than raw requests.
    pub thunk_mode: bool,
    pub files: Vec<EmbeddedFile>,
    pub thunk: Option<ThunkSide>,
    pub model: Model,
    parked: Vec<Parked>,
}

impl Proc {
    pub fn alive(&self) -> bool {
        !self.files.is_empty() || self.thunk.is_some()
    }

    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// A file to issue raw requests on (thunk processes: the thunk's).
    fn file_id(&self, f: u8) -> Option<FileId> {
        if let Some(t) = &self.thunk {
            return t.file_id();
        }
        (!self.files.is_empty()).then(|| self.files[usize::from(f) % self.files.len()].file_id())
    }

    /// The counts the device must report for this process.
    fn expected(&self) -> Counts {
        let mut c = self.model.counts();
        if let Some(t) = &self.thunk {
            c.buffers += 2 * t.queues.len() + t.signals.len() + usize::from(t.scratch.is_some());
            c.buffers += usize::from(t.kfd.mailbox(0).is_some());
            c.queues += t.queues.len();
        }
        c
    }
}

/// Whether a simulated process of this index is driven through the thunk.
pub fn is_thunk_process(index: u8) -> bool {
    index % 3 == 1
}

/// One device and the simulated processes of one case.
pub struct Harness {
    pub config: Config,
    pub emb: Embedded,
    root: PathBuf,
    pub procs: Vec<Proc>,
    pub gpus: Vec<u32>,
    helpers: Vec<(JoinHandle<Result<(), String>>, Instant)>,
    panics_at_start: u64,
    bump: u64,
    pub stats: Stats,
    /// Operations run so far (the watchdog's heartbeat).
    pub heartbeat: Arc<AtomicU64>,
}

/// The device's object ids of one process.
#[derive(Debug, Default, PartialEq, Eq)]
struct Ids {
    buffers: BTreeSet<u64>,
    queues: BTreeSet<u32>,
    events: BTreeSet<u32>,
}

/// GTT and VRAM bytes each simulated process may hold.
const FUZZ_MEMORY: u64 = 256 << 20;

impl Harness {
    pub fn new(config: Config, heartbeat: Arc<AtomicU64>) -> Result<Harness, String> {
        install_panic_hook();
        let engine = EngineConfig { invalid_packet_grace: Duration::from_millis(2), ..EngineConfig::default() };
        // Memory bounded per process: a generated size of gigabytes is refused at once (ENOMEM,
        // the path under test) instead of filling tmpfs for seconds, which on a loaded machine
        // outlasted the hang watchdog with the device doing nothing wrong.
        let memory = Overrides::default().with(Resource::Gtt, FUZZ_MEMORY).with(Resource::Vram, FUZZ_MEMORY);
        let dc = DeviceConfig {
            profile: config.profile.clone(),
            gpus: config.gpus,
            runtime_dir: None,
            engine,
            quotas: QuotaConfig { process: memory, ..QuotaConfig::default() },
        };
        let emb = Embedded::new(&dc).map_err(|e| format!("cannot create the device: {e}"))?;
        let root = emb.device().backing().root().to_owned();
        let gpus: Vec<u32> = emb.device().topology().gpus().iter().map(|g| g.gpu_id).collect();
        let procs = (0..config.procs)
            .map(|i| Proc {
                index: i,
                pid: PID_BASE + u32::from(i),
                thunk_mode: is_thunk_process(i),
                files: Vec::new(),
                thunk: None,
                model: Model::new(),
                parked: Vec::new(),
            })
            .collect();
        Ok(Harness {
            config,
            emb,
            root,
            procs,
            gpus,
            helpers: Vec::new(),
            panics_at_start: PANIC_COUNT.load(Ordering::SeqCst),
            bump: 0,
            stats: Stats::default(),
            heartbeat,
        })
    }

    /// The device's runtime directory.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    pub fn device(&self) -> &Arc<Device> {
        self.emb.device()
    }

    fn caller(&self, p: usize) -> Caller {
        let me = Caller::current();
        let pid = self.procs[p].pid;
        Caller { pid, tid: pid, uid: me.uid, gid: me.gid }
    }

    /// Runs `ops` and the final checks; the first failure ends the case.
    pub fn run(mut self, ops: &[Op]) -> Result<Stats, Failure> {
        for (i, op) in ops.iter().enumerate() {
            self.step(op).map_err(|(kind, what)| Failure { kind, at: i, what: format!("{what} [after {op:?}]") })?;
        }
        self.finish().map_err(|(kind, what)| Failure { kind, at: ops.len(), what })?;
        Ok(std::mem::take(&mut self.stats))
    }

    /// Runs one operation and checks everything that must hold after it.
    pub fn step(&mut self, op: &Op) -> Check {
        self.heartbeat.fetch_add(1, Ordering::Relaxed);
        self.stats.ops += 1;
        *self.stats.kinds.entry(op.name()).or_insert(0) += 1;
        self.bump = 0;
        let r = self.exec(op);
        if let Some(p) = panics_since(self.panics_at_start) {
            return fail(Kind::Crash, p);
        }
        r?;
        self.poll_parked()?;
        self.check_counts()
    }

    fn exec(&mut self, op: &Op) -> Check {
        if let Some(p) = op.process() {
            if usize::from(p) >= self.procs.len() {
                return Ok(());
            }
        }
        match op {
            Op::Open { p } => self.open(usize::from(*p)),
            Op::Close { p, f } => {
                let proc = &mut self.procs[usize::from(*p)];
                if proc.thunk.is_some() {
                    return self.kill(usize::from(*p));
                }
                if !proc.files.is_empty() {
                    let i = usize::from(*f) % proc.files.len();
                    proc.files.remove(i);
                    if proc.files.is_empty() {
                        proc.model = Model::new();
                    }
                }
                Ok(())
            }
            Op::Kill { p } => self.kill(usize::from(*p)),
            Op::Ioctl { p, f, call } => self.ioctl(usize::from(*p), *f, call),
            Op::ForeignFile { p, owner } => self.foreign_file(usize::from(*p), usize::from(*owner)),
            Op::Park { p, events, all, timeout_ms } => self.park(usize::from(*p), events, *all, *timeout_ms),
            Op::ThreadWait { p, events, all, timeout_ms } => {
                self.thread_wait(usize::from(*p), events, *all, *timeout_ms)
            }
            Op::Interrupt { p, w } => {
                let proc = &mut self.procs[usize::from(*p)];
                if proc.parked.is_empty() {
                    return Ok(());
                }
                let i = *w as usize % proc.parked.len();
                if self.emb.device().interrupt(proc.parked[i].tag) {
                    proc.parked[i].interrupted = true;
                }
                Ok(())
            }
            Op::AqlCreate { p, slots } => self.aql_create(usize::from(*p), *slots),
            Op::AqlDestroy { p, q } => {
                if let Some(t) = self.procs[usize::from(*p)].thunk.as_mut() {
                    if !t.queues.is_empty() {
                        let i = *q as usize % t.queues.len();
                        t.queues.remove(i);
                    }
                }
                Ok(())
            }
            Op::AqlSubmit { p, q, packet } => self.aql_submit(usize::from(*p), *q, packet),
            Op::AqlGarbage { p, q, slot, bytes, doorbell } => {
                let Some(t) = self.procs[usize::from(*p)].thunk.as_mut() else { return Ok(()) };
                let Some(a) = t.queue(*q) else { return Ok(()) };
                a.clean = false;
                let off = (u64::from(*slot) % a.q.slots) * 64;
                let len = bytes.len().min(64);
                a.q.ring.write(off, &bytes[..len]);
                if let Some(v) = doorbell {
                    a.q.ring_doorbell(*v);
                    t.kfd.kick();
                }
                Ok(())
            }
            Op::Doorbell { p, q, value } => {
                let Some(t) = self.procs[usize::from(*p)].thunk.as_mut() else { return Ok(()) };
                let Some(a) = t.queue(*q) else { return Ok(()) };
                a.clean = false;
                a.q.ring_doorbell(*value);
                t.kfd.kick();
                Ok(())
            }
            Op::FileWrite { p, target, off, bytes } => self.file_write(usize::from(*p), *target, *off, bytes),
            Op::Signals { p, count } => {
                let Some(t) = self.procs[usize::from(*p)].thunk.as_mut() else { return Ok(()) };
                if t.signals.len() >= MAX_SIGNAL_SETS {
                    return Ok(());
                }
                let gpu = self.gpus[0];
                match Signals::new(&t.kfd, gpu, u64::from((*count).clamp(1, 64))) {
                    Ok(s) => t.signals.push(s),
                    Err(e) => return fail(Kind::Model, format!("the thunk could not create signals: {e}")),
                }
                Ok(())
            }
            Op::AttachEvent { p, s, i } => {
                let proc = &mut self.procs[usize::from(*p)];
                let Some(t) = proc.thunk.as_mut() else { return Ok(()) };
                if t.signals.is_empty() {
                    return Ok(());
                }
                let set = &t.signals[*s as usize % t.signals.len()];
                match set.attach_event(&t.kfd, u64::from(*i) % set.count) {
                    Ok(id) => {
                        if proc.model.events.insert(id, EventModel { event_type: KFD_IOC_EVENT_SIGNAL }).is_some() {
                            return fail(
                                Kind::Model,
                                format!("CREATE_EVENT handed out id {id}, which is live already"),
                            );
                        }
                    }
                    // The page full (ENOSPC) is legitimate; nothing else is, for a thunk event.
                    Err(Errno::ENOSPC) => {}
                    Err(e) => return fail(Kind::Errno, format!("the thunk's CREATE_EVENT failed: {e}")),
                }
                Ok(())
            }
            Op::Sleep { us } => {
                std::thread::sleep(Duration::from_micros(u64::from((*us).min(50_000))));
                Ok(())
            }
        }
    }

    fn open(&mut self, p: usize) -> Check {
        let caller = self.caller(p);
        let refused = |e| (Kind::Errno, format!("open as pid {} refused: {e}", caller.pid));
        let proc = &mut self.procs[p];
        if proc.thunk_mode {
            if proc.thunk.is_none() {
                let file: SharedFile = Arc::new(Mutex::new(Some(self.emb.open_as(caller).map_err(refused)?)));
                let transport = SimTransport {
                    file: file.clone(),
                    device: self.emb.device().clone(),
                    pid: proc.pid,
                    runtime_dir: self.root.clone(),
                };
                proc.model = Model::new();
                proc.thunk = Some(ThunkSide {
                    file,
                    kfd: Kfd::new(Box::new(transport)),
                    queues: Vec::new(),
                    signals: Vec::new(),
                    scratch: None,
                });
            }
        } else if proc.files.len() < MAX_FILES {
            if proc.files.is_empty() {
                proc.model = Model::new();
            }
            proc.files.push(self.emb.open_as(caller).map_err(refused)?);
        }
        Ok(())
    }

    /// Drops every file of process `p` at once, then (thunk processes) the client's objects,
    /// whose own requests now fail as on a closed fd.
    fn kill(&mut self, p: usize) -> Check {
        let proc = &mut self.procs[p];
        proc.files.clear();
        if let Some(t) = proc.thunk.take() {
            drop(t.file.lock().take());
            drop(t);
        }
        proc.model = Model::new();
        Ok(())
    }

    fn ids(&self, p: usize) -> Ids {
        let Some(process) = self.emb.device().process(self.procs[p].pid) else { return Ids::default() };
        let (buffers, queues) = {
            let inner = process.inner();
            (inner.buffers.keys().copied().collect(), inner.queues.keys().copied().collect())
        };
        let events = process.events().iter().map(|e| e.id).collect();
        Ids { buffers, queues, events }
    }

    /// Patches `call`'s pointers into its bytes and makes every host pointer field of the row
    /// the device will use safe; returns the bytes to send.
    fn materialise(&mut self, call: &Call) -> Vec<u8> {
        let size = ioc_size(call.cmd);
        let mut data = call.data.clone();
        data.resize(size, 0);
        let arena = Arena::get();
        for (off, ptr) in &call.ptrs {
            let off = usize::from(*off);
            if off + 8 <= data.len() {
                let v = arena.resolve(ptr, &mut self.bump);
                data[off..off + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        sanitize(call.cmd, &mut data);
        if let Some(n) = call.short {
            data.truncate(usize::from(n));
        }
        data
    }

    fn ioctl(&mut self, p: usize, f: u8, call: &Call) -> Check {
        let Some(file) = self.procs[p].file_id(f) else { return Ok(()) };
        let data = self.materialise(call);
        let declared = declared_ranges(call.cmd, &data);
        let caller = self.caller(p);
        let before = self.ids(p);
        let mem = CheckedMemory { declared: declared.clone(), undeclared: Mutex::new(Vec::new()) };
        let name = ops::name_of(call.cmd);
        let started = Instant::now();
        let reply = match send(self.emb.device(), file, caller, call.cmd, &data, &mem) {
            Sent::Replied(r) => r,
            Sent::Parked(tag, rx) => {
                if ioc_nr(call.cmd) != 0x0C || cuse_kfd::ioctl::lookup(call.cmd).is_none() {
                    // Only WAIT_EVENTS parks; anything else must still answer in time.
                    match rx.recv_timeout(self.config.op_timeout) {
                        Ok(r) => r,
                        Err(_) => {
                            return fail(Kind::Hang, format!("{name} not answered within {:?}", self.config.op_timeout))
                        }
                    }
                } else {
                    let timeout = WaitEventsArgs::read_from_prefix(&data).map(|(a, _)| a.timeout).unwrap_or(u32::MAX);
                    self.procs[p].parked.push(Parked {
                        tag,
                        rx,
                        cmd: call.cmd,
                        sent: data.len(),
                        declared,
                        due: due(timeout, self.config.wait_slack),
                        started,
                        timeout_ms: timeout,
                        interrupted: false,
                    });
                    return Ok(());
                }
            }
        };
        let result = reply.errno().map_or(Ok(()), Err);
        self.stats.record(name, result);
        if let Some((addr, len)) = mem.undeclared.lock().first() {
            return fail(Kind::Errno, format!("{name} read {len} bytes of caller memory at {addr:#x}, outside its declared ranges (CUSE would not have fetched them)"));
        }
        check_reply(call.cmd, data.len(), &reply, &declared)?;
        if ioc_nr(call.cmd) == 0x0C && cuse_kfd::ioctl::lookup(call.cmd).is_some() && data.len() >= 24 {
            let timeout = WaitEventsArgs::read_from_prefix(&data).map_or(0, |(a, _)| a.timeout);
            waits::check_not_early(&reply, timeout, started)?;
        }
        let after = self.ids(p);
        self.learn(p, call, &data, &reply, &before, &after)
    }

    /// Checks what a reply did to the process's objects against what it says, and updates the
    /// model.
    fn learn(&mut self, p: usize, call: &Call, data: &[u8], reply: &Reply, before: &Ids, after: &Ids) -> Check {
        let name = ops::name_of(call.cmd);
        let nr = cuse_kfd::ioctl::lookup(call.cmd).map_or(0, |d| ioc_nr(d.cmd));
        let named = named_object(nr, data);
        let model = &mut self.procs[p].model;
        let owned = named.as_ref().map(|o| o.owned_by(model));
        // A well-formed request on live objects must succeed (if, when it runs, the object it
        // names is still this process's, and for SET/RESET a signal event).
        let applies = match &named {
            None => true,
            Some(Named::Event(id)) if (0x0A..=0x0B).contains(&nr) => {
                model.events.get(id).is_some_and(|e| e.event_type == KFD_IOC_EVENT_SIGNAL)
            }
            Some(o) => o.owned_by(model),
        };
        match (call.expect, reply.errno(), owned) {
            (Expect::Ok, Some(e), _) if applies => {
                return fail(Kind::Model, format!("well-formed {name} on live objects failed with {e}"));
            }
            (Expect::Foreign(want), got, Some(false)) if got != Some(Errno::from_raw(want)) => {
                return fail(
                    Kind::Isolation,
                    format!(
                        "{name} naming another process's {:?} answered {got:?}, amdkfd gives {}",
                        named,
                        Errno::from_raw(want)
                    ),
                );
            }
            _ => {}
        }
        if reply.result != 0 {
            if before != after {
                return fail(
                    Kind::Model,
                    format!(
                        "{name} failed ({:?}) but changed the process's objects: {before:?} -> {after:?}",
                        reply.errno()
                    ),
                );
            }
            return Ok(());
        }
        if owned == Some(false) {
            return fail(Kind::Isolation, format!("{name} succeeded on {named:?}, which this process does not own"));
        }
        let new_b: Vec<u64> = after.buffers.difference(&before.buffers).copied().collect();
        let gone_b: Vec<u64> = before.buffers.difference(&after.buffers).copied().collect();
        let new_q: Vec<u32> = after.queues.difference(&before.queues).copied().collect();
        let gone_q: Vec<u32> = before.queues.difference(&after.queues).copied().collect();
        let new_e: Vec<u32> = after.events.difference(&before.events).copied().collect();
        let gone_e: Vec<u32> = before.events.difference(&after.events).copied().collect();
        let changes = (new_b.len(), gone_b.len(), new_q.len(), gone_q.len(), new_e.len(), gone_e.len());
        let want = match nr {
            0x16 => (1, 0, 0, 0, 0, 0),
            0x17 => (0, 1, 0, 0, 0, 0),
            0x02 => (0, 0, 1, 0, 0, 0),
            0x03 => (0, 0, 0, 1, 0, 0),
            0x08 => (0, 0, 0, 0, 1, 0),
            0x09 => (0, 0, 0, 0, 0, 1),
            _ => (0, 0, 0, 0, 0, 0),
        };
        if changes != want {
            return fail(
                Kind::Model,
                format!(
                    "{name} succeeded and changed (new, gone) buffers/queues/events {changes:?}, expected {want:?}"
                ),
            );
        }
        let out = |off: usize, len: usize| -> Option<u64> {
            let b = reply.data.get(off..off + len)?;
            Some(if len == 8 {
                u64::from_le_bytes(b.try_into().ok()?)
            } else {
                u64::from(u32::from_le_bytes(b.try_into().ok()?))
            })
        };
        // The object a reply names (at (offset, length)) must be the one the device made.
        let answered = |call: &str, what: &str, (off, len): (usize, usize), made: u64| -> Check {
            match out(off, len) {
                Some(got) if got != made => {
                    fail(Kind::Model, format!("{call} answered {what} {got:#x}, the device made {made:#x}"))
                }
                _ => Ok(()),
            }
        };
        match nr {
            0x16 => {
                let handle = new_b[0];
                answered("ALLOC", "handle", (16, 8), handle)?;
                let a: AllocMemoryOfGpuArgs = parse(data);
                let mmap_offset = out(24, 8).unwrap_or(0);
                let b = BufferModel {
                    va: a.va_addr,
                    size: a.size,
                    gpu: a.gpu_id,
                    flags: a.flags,
                    mmap_offset,
                    mapped: BTreeSet::new(),
                };
                model.buffers.insert(handle, b);
            }
            0x17 => {
                model.buffers.remove(&gone_b[0]);
            }
            0x02 => {
                let id = new_q[0];
                answered("CREATE_QUEUE", "id", (52, 4), id.into())?;
                let gpu = parse::<CreateQueueArgs>(data).gpu_id;
                model.queues.insert(id, QueueModel { gpu, doorbell_offset: out(24, 8).unwrap_or(0) });
            }
            0x03 => {
                model.queues.remove(&gone_q[0]);
            }
            0x08 => {
                let id = new_e[0];
                answered("CREATE_EVENT", "id", (24, 4), id.into())?;
                let a: CreateEventArgs = parse(data);
                if a.event_page_offset != 0 {
                    model.event_page = Some(a.event_page_offset);
                }
                if a.event_type == KFD_IOC_EVENT_SIGNAL || a.event_type == KFD_IOC_EVENT_DEBUG_EVENT {
                    model.device_page |= a.event_page_offset == 0;
                }
                model.events.insert(id, EventModel { event_type: a.event_type });
            }
            0x09 => {
                model.events.remove(&gone_e[0]);
            }
            0x18 | 0x19 => {
                if let (Some(Named::Buffer(h)), Some((_, Ptr::Data(ids)))) =
                    (named, call.ptrs.iter().find(|(o, _)| *o == 8))
                {
                    if let Some(b) = model.buffers.get_mut(&h) {
                        for id in ids.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))) {
                            if nr == 0x18 {
                                b.mapped.insert(id);
                            } else {
                                b.mapped.remove(&id);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn foreign_file(&mut self, p: usize, owner: usize) -> Check {
        if p == owner || owner >= self.procs.len() {
            return Ok(());
        }
        let Some(file) = self.procs[owner].file_id(0) else { return Ok(()) };
        let caller = self.caller(p);
        let mem = CheckedMemory { declared: Vec::new(), undeclared: Mutex::new(Vec::new()) };
        let r = match send(self.emb.device(), file, caller, AMDKFD_IOC_GET_VERSION, &[0; 8], &mem) {
            Sent::Replied(r) => r,
            Sent::Parked(..) => return fail(Kind::Hang, "GET_VERSION on another process's file parked"),
        };
        self.stats.record("GET_VERSION", r.errno().map_or(Ok(()), Err));
        if r.errno() != Some(Errno::EBADF) {
            return fail(
                Kind::Isolation,
                format!("a request on another process's file answered {:?}, amdkfd gives EBADF", r.errno()),
            );
        }
        Ok(())
    }

    fn check_counts(&self) -> Check {
        for (i, proc) in self.procs.iter().enumerate() {
            let dev = self.emb.device().process(proc.pid);
            match (proc.alive(), dev) {
                (false, None) => {}
                (false, Some(_)) => {
                    return fail(
                        Kind::Leak,
                        format!("process {i} closed all its files but the device still has its context"),
                    )
                }
                (true, None) => {
                    return fail(
                        Kind::Model,
                        format!("process {i} has open files but the device has no context for it"),
                    )
                }
                (true, Some(d)) => {
                    let s = d.stats();
                    let got = Counts { buffers: s.buffers, queues: s.queues, events: s.events };
                    let want = proc.expected();
                    if got != want {
                        return fail(
                            Kind::Model,
                            format!("process {i}: the device counts {got:?}, the model {want:?}"),
                        );
                    }
                    let _ = i;
                }
            }
        }
        Ok(())
    }

    /// The end of a case: clean queues drained, every client gone, every wait answered,
    /// nothing left behind.
    pub fn finish(&mut self) -> Check {
        let deadline = Instant::now() + self.config.wait_slack;
        for proc in &self.procs {
            let Some(t) = &proc.thunk else { continue };
            for a in t.queues.iter().filter(|a| a.clean) {
                let want = a.q.write_index().load(Ordering::Acquire);
                while a.q.read_index() < want {
                    if Instant::now() > deadline {
                        return fail(
                            Kind::Queue,
                            format!(
                                "a queue given only barrier-AND packets stopped at read index {} of {want}",
                                a.q.read_index()
                            ),
                        );
                    }
                    t.kfd.kick();
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
        for p in 0..self.procs.len() {
            self.kill(p)?;
        }
        let deadline = Instant::now() + self.config.wait_slack;
        for proc in &mut self.procs {
            for w in std::mem::take(&mut proc.parked) {
                let left = deadline.saturating_duration_since(Instant::now());
                match w.rx.recv_timeout(left) {
                    Ok(reply) => {
                        self.stats.record("WAIT_EVENTS", reply.errno().map_or(Ok(()), Err));
                        check_parked(&w, &reply)?;
                    }
                    Err(_) => {
                        return fail(Kind::Hang, "a parked WAIT_EVENTS was not answered after its process went away")
                    }
                }
            }
        }
        for (h, due) in std::mem::take(&mut self.helpers) {
            while !h.is_finished() {
                if Instant::now() > due {
                    return fail(Kind::Hang, "a waiter thread was not answered after its process went away");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(why)) => return fail(if why.contains("not answered") { Kind::Hang } else { Kind::Errno }, why),
                Err(_) => return fail(Kind::Crash, "a waiter thread panicked"),
            }
        }
        if let Some(p) = panics_since(self.panics_at_start) {
            return fail(Kind::Crash, p);
        }
        let s = self.emb.device().stats();
        if s != cuse_kfd::DeviceStats::default() {
            return fail(Kind::Leak, format!("every client has gone, the device still has {s:?}"));
        }
        let left: Vec<String> = std::fs::read_dir(&self.root)
            .map(|d| {
                // The device's own: its topology tree, and its peer socket (while it lives).
                let own = |n: &String| n == "topology" || n == cuse_kfd::peer::SOCKET_NAME;
                d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| !own(n)).collect()
            })
            .unwrap_or_default();
        if !left.is_empty() {
            return fail(Kind::Leak, format!("every client has gone, the runtime directory still has {left:?}"));
        }
        for g in self.emb.device().topology().gpus() {
            let avail = self.emb.device().vram_available(g.gpu_id).unwrap_or(0);
            if avail != g.profile.vram_size {
                return fail(
                    Kind::Leak,
                    format!(
                        "every client has gone, {} bytes of VRAM of gpu {:#x} are still reserved",
                        g.profile.vram_size - avail,
                        g.gpu_id
                    ),
                );
            }
        }
        Ok(())
    }
}
