//! The operation sequences the fuzzer generates, runs, minimises and replays. Every value an
//! operation needs is in it (ids, handles, argument bytes), except host pointers, which differ
//! from run to run: those are symbolic ([`Ptr`]) and placed in the fuzzer's arena when run.

use serde::{Deserialize, Serialize};
use uapi::ioctl::*;
use uapi::vendor::{CUSE_KFD_IOC_GET_RUNTIME_INFO, CUSE_KFD_IOC_KICK};

/// A simulated process: its index in the case (pid = base + index).
pub type P = u8;

/// One step of a case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Opens one more file of process `p` (the first open creates the process).
    Open { p: P },
    /// Closes file `f` (modulo the open files) of `p`.
    Close { p: P, f: u8 },
    /// Drops every file of `p` at once: what the kernel does for a killed client.
    Kill { p: P },
    /// One ioctl by `p` on its file `f`.
    Ioctl { p: P, f: u8, call: Call },
    /// `p` issues GET_VERSION on a file of `owner`: amdkfd answers EBADF.
    ForeignFile { p: P, owner: P },
    /// WAIT_EVENTS that may park; its reply is checked whenever it comes.
    Park { p: P, events: Vec<(u32, u64)>, all: bool, timeout_ms: u32 },
    /// WAIT_EVENTS from a helper thread, concurrent with what follows.
    ThreadWait { p: P, events: Vec<(u32, u64)>, all: bool, timeout_ms: u32 },
    /// Interrupts parked wait `w` (modulo the parked waits) of `p`, as a signal would.
    Interrupt { p: P, w: u32 },
    /// A thunk AQL queue of `slots` packets (thunk processes).
    AqlCreate { p: P, slots: u32 },
    /// Destroys thunk queue `q` (modulo the queues).
    AqlDestroy { p: P, q: u32 },
    /// Submits a packet on thunk queue `q` the way ROCr does (reserve, publish, doorbell).
    AqlSubmit { p: P, q: u32, packet: Packet },
    /// Writes raw bytes over slot `slot` of queue `q`'s ring, then rings `doorbell` if given.
    AqlGarbage {
        p: P,
        q: u32,
        slot: u32,
        #[serde(with = "hex")]
        bytes: Vec<u8>,
        doorbell: Option<u64>,
    },
    /// Stores `value` into queue `q`'s doorbell.
    Doorbell { p: P, q: u32, value: u64 },
    /// Writes `bytes` at `off` into the backing file of a raw process's buffer or queue
    /// doorbell (what the client's mapping of it would store), then wakes the engine.
    FileWrite {
        p: P,
        target: FileTarget,
        off: u64,
        #[serde(with = "hex")]
        bytes: Vec<u8>,
    },
    /// `count` signals in one GPU buffer (thunk processes).
    Signals { p: P, count: u32 },
    /// Gives signal `i` of signal set `s` a KFD signal event (the thunk's event page path).
    AttachEvent { p: P, s: u32, i: u32 },
    /// Lets time pass (timeouts, the command processor).
    Sleep { us: u32 },
}

impl Op {
    /// The operation's name, as in replay files.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Open { .. } => "open",
            Op::Close { .. } => "close",
            Op::Kill { .. } => "kill",
            Op::Ioctl { .. } => "ioctl",
            Op::ForeignFile { .. } => "foreign_file",
            Op::Park { .. } => "park",
            Op::ThreadWait { .. } => "thread_wait",
            Op::Interrupt { .. } => "interrupt",
            Op::AqlCreate { .. } => "aql_create",
            Op::AqlDestroy { .. } => "aql_destroy",
            Op::AqlSubmit { .. } => "aql_submit",
            Op::AqlGarbage { .. } => "aql_garbage",
            Op::Doorbell { .. } => "doorbell",
            Op::FileWrite { .. } => "file_write",
            Op::Signals { .. } => "signals",
            Op::AttachEvent { .. } => "attach_event",
            Op::Sleep { .. } => "sleep",
        }
    }

    pub fn process(&self) -> Option<P> {
        match self {
            Op::Sleep { .. } => None,
            Op::Open { p }
            | Op::Close { p, .. }
            | Op::Kill { p }
            | Op::Ioctl { p, .. }
            | Op::ForeignFile { p, .. }
            | Op::Park { p, .. }
            | Op::ThreadWait { p, .. }
            | Op::Interrupt { p, .. }
            | Op::AqlCreate { p, .. }
            | Op::AqlDestroy { p, .. }
            | Op::AqlSubmit { p, .. }
            | Op::AqlGarbage { p, .. }
            | Op::Doorbell { p, .. }
            | Op::FileWrite { p, .. }
            | Op::Signals { p, .. }
            | Op::AttachEvent { p, .. } => Some(*p),
        }
    }
}

/// One ioctl: request number, argument bytes, and host pointers to patch into them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub cmd: u32,
    #[serde(with = "hex")]
    pub data: Vec<u8>,
    /// (byte offset in `data`, pointer) pairs, written over the bytes when the call runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ptrs: Vec<(u16, Ptr)>,
    /// Pass only this many argument bytes (a caller buffer shorter than the request says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<u16>,
    /// What the call must answer (checked against the model when it runs).
    #[serde(default, skip_serializing_if = "Expect::is_any")]
    pub expect: Expect,
}

/// What a call's reply must be, beyond the per-ioctl errno table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    #[default]
    Any,
    /// A well-formed request on live objects: success.
    Ok,
    /// An id of another process's object: exactly this errno, unless the caller owns the same
    /// id itself by the time the call runs.
    Foreign(i32),
}

impl Expect {
    pub fn is_any(&self) -> bool {
        *self == Expect::Any
    }
}

/// A host pointer, symbolic until the call runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ptr {
    Null,
    /// Below mmap_min_addr: never mapped.
    Low(u64),
    /// Byte `n` of the arena (readable and writable scratch memory; a range running past its
    /// end runs into the hole).
    Arena(u32),
    /// Byte `n` of the hole: reserved, never mapped.
    Hole(u64),
    /// At or above 2^47: not a user address.
    High(u64),
    /// These bytes, placed in the arena.
    Data(#[serde(with = "hex")] Vec<u8>),
}

/// Which backing file a [`Op::FileWrite`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileTarget {
    /// The buffer with this handle (its render-node file).
    Buffer(u64),
    /// The doorbell of the queue with this id (offset 0 is the doorbell itself).
    Doorbell(u32),
}

/// A packet the thunk producer submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Packet {
    /// Barrier-AND on no dependencies with completion signal (s, i): must complete.
    BarrierAnd { signal: Option<(u32, u32)> },
    /// Barrier-OR on no dependencies: never satisfied, the queue waits behind it.
    BarrierOr,
    /// AMD barrier-value on signal (s, i).
    BarrierValue { signal: (u32, u32), cond: u32, value: i64, mask: i64 },
    /// A dispatch of soft kernel `builtin` with a descriptor and arguments the fuzzer writes
    /// into a signal buffer (arguments may point anywhere).
    Dispatch { builtin: u32, args: [u64; 2], grid: u32, wg: u16, signal: Option<(u32, u32)> },
    /// A dispatch whose kernel object is `object` (garbage, or no descriptor at all).
    Bogus { object: u64, kernarg: u64, grid: [u32; 3], wg: [u16; 3], setup: u16 },
}

/// Bytes as a hex string in replay files.
pub mod hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn encode(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    pub fn decode(s: &str) -> Option<Vec<u8>> {
        if !s.len().is_multiple_of(2) {
            return None;
        }
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
    }

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        decode(&s).ok_or_else(|| serde::de::Error::custom("not a hex string"))
    }
}

/// Field widths of each request's argument struct, in order (for field-wise mutation).
pub fn fields(nr: u32) -> &'static [u8] {
    match nr {
        0x01 => &[4, 4],
        0x02 => &[8, 8, 8, 8, 4, 4, 4, 4, 4, 4, 8, 8, 8, 4, 4, 4, 4],
        0x03 | 0x09 | 0x0A | 0x0B | 0x0D | 0x0E => &[4, 4],
        0x04 => &[8, 8, 4, 4, 4, 4],
        0x05 => &[8, 8, 8, 8, 4, 4],
        0x07 => &[8, 4, 4, 4, 4],
        0x08 => &[8, 4, 4, 4, 4, 4, 4],
        0x0C => &[8, 4, 4, 4, 4],
        0x0F | 0x10 => &[8, 4, 4],
        0x11 => &[8, 4, 4],
        0x12 => &[8, 8, 4, 4, 4, 4, 4, 4],
        0x13 => &[8, 8, 4, 4],
        0x14 => &[8, 4, 4],
        0x15 => &[4, 4],
        0x16 => &[8, 8, 8, 8, 4, 4],
        0x17 => &[8],
        0x18 | 0x19 => &[8, 8, 4, 4],
        0x1A => &[4, 4, 8],
        0x1B => &[8, 4, 4, 4, 4],
        0x1C => &[8, 8, 4, 4, 4, 4],
        0x1D => &[8, 8, 4, 4],
        0x1E => &[4, 4, 4, 4],
        0x1F => &[4, 4],
        0x20 => &[8, 8, 4, 4],
        0x21 => &[4],
        0x22 => &[8, 8, 8, 8, 4, 4, 4, 4, 4, 4],
        0x23 => &[8, 4, 4],
        0x24 => &[8, 4, 4],
        0x25 => &[8, 4, 4],
        0x26 => &[4, 4, 8, 8, 8],
        _ => &[],
    }
}

/// Byte offsets of the host pointers in each request's argument struct: fields the device may
/// read or write through, so the fuzzer only ever puts safe pointers there. ALLOC's
/// mmap_offset is a CPU address for USERPTR.
pub fn host_ptrs(nr: u32) -> &'static [u16] {
    match nr {
        0x0C | 0x12 | 0x14 => &[0],
        0x0F | 0x10 => &[0],
        0x16 => &[24],
        0x18..=0x1A => &[8],
        0x1C => &[8],
        0x22 => &[0, 8, 16],
        0x25 => &[0],
        0x26 => &[8, 16, 24],
        _ => &[],
    }
}

/// Second pointer fields (GET_TILE_CONFIG has two).
pub fn extra_host_ptrs(nr: u32) -> &'static [u16] {
    match nr {
        0x12 => &[8],
        _ => &[],
    }
}

/// Every request the fuzzer sends as well-formed: 0x01-0x26 and the vendor requests.
pub fn all_requests() -> Vec<(&'static str, u32)> {
    let mut v: Vec<(&'static str, u32)> = ALL.iter().map(|d| (d.name, d.cmd)).collect();
    v.push(("CUSE_KFD_GET_RUNTIME_INFO", CUSE_KFD_IOC_GET_RUNTIME_INFO));
    v.push(("CUSE_KFD_KICK", CUSE_KFD_IOC_KICK));
    v
}

/// The name of a request number as the device's table knows it, or "UNKNOWN".
pub fn name_of(cmd: u32) -> &'static str {
    cuse_kfd::ioctl::lookup(cmd).map_or("UNKNOWN", |d| d.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_tables_cover_each_struct_exactly() {
        for Ioctl { name, cmd } in ALL {
            let nr = ioc_nr(cmd);
            let sum: usize = fields(nr).iter().map(|w| usize::from(*w)).sum();
            if nr == 0x06 {
                continue; // 400 bytes of output only
            }
            assert_eq!(sum, ioc_size(cmd), "{name}");
            for off in host_ptrs(nr).iter().chain(extra_host_ptrs(nr)) {
                assert!(usize::from(*off) + 8 <= ioc_size(cmd), "{name}");
            }
        }
    }

    #[test]
    fn ops_round_trip_through_json() {
        let op = Op::Ioctl {
            p: 1,
            f: 0,
            call: Call {
                cmd: AMDKFD_IOC_WAIT_EVENTS,
                data: vec![0; 24],
                ptrs: vec![(0, Ptr::Data(vec![1, 2, 3]))],
                short: None,
                expect: Expect::Foreign(22),
            },
        };
        let s = serde_json::to_string(&op).unwrap();
        assert_eq!(serde_json::from_str::<Op>(&s).unwrap(), op);
    }
}
