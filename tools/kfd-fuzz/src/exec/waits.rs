//! WAIT_EVENTS that park: their replies come later and are checked when they come; waits
//! from helper threads, concurrent with the operations that follow.

use super::check::{check_reply, covered, declared_ranges, fail, send, CheckedMemory, Sent};
use super::{Check, Harness, Kind};
use crate::errnos;
use crate::ops::{Call, Expect, Ptr};
use cuse_kfd::ioctl::UserRange;
use cuse_kfd::reply::Reply;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};
use uapi::ioctl::*;
use uapi::kfd::*;
use uapi::{FromBytes, IntoBytes};

/// A WAIT_EVENTS whose reply has not come yet.
pub(super) struct Parked {
    pub(super) tag: u64,
    pub(super) rx: Receiver<Reply>,
    pub(super) cmd: u32,
    pub(super) sent: usize,
    pub(super) declared: Vec<UserRange>,
    /// Answer due by then (finite timeouts).
    pub(super) due: Option<Instant>,
    /// When it was sent, and its timeout: a TIMEOUT answer must not come before.
    pub(super) started: Instant,
    pub(super) timeout_ms: u32,
    /// Interrupted: the answer must be EINTR.
    pub(super) interrupted: bool,
}

impl Harness {
    pub(super) fn wait_call(events: &[(u32, u64)], all: bool, timeout_ms: u32) -> Call {
        let data: Vec<EventData> = events
            .iter()
            .map(|&(event_id, age)| EventData { payload: [age, 0, 0, 0], event_id, ..Default::default() })
            .collect();
        let args = WaitEventsArgs {
            events_ptr: 0,
            num_events: events.len() as u32,
            wait_for_all: u32::from(all),
            timeout: timeout_ms,
            wait_result: 0,
        };
        Call {
            cmd: AMDKFD_IOC_WAIT_EVENTS,
            data: args.as_bytes().to_vec(),
            ptrs: vec![(0, Ptr::Data(data.as_bytes().to_vec()))],
            short: None,
            expect: Expect::Any,
        }
    }

    pub(super) fn park(&mut self, p: usize, events: &[(u32, u64)], all: bool, timeout_ms: u32) -> Check {
        let call = Self::wait_call(events, all, timeout_ms);
        self.ioctl(p, 0, &call)
    }

    /// A WAIT_EVENTS from another thread, blocking there as a client thread would.
    pub(super) fn thread_wait(&mut self, p: usize, events: &[(u32, u64)], all: bool, timeout_ms: u32) -> Check {
        let Some(file) = self.procs[p].file_id(0) else { return Ok(()) };
        let timeout_ms = timeout_ms.min(50);
        let device = self.emb.device().clone();
        let caller = self.caller(p);
        let events = events.to_vec();
        let limit = Duration::from_millis(u64::from(timeout_ms)) + self.config.wait_slack;
        let h = std::thread::Builder::new()
            .name("kfd-fuzz-waiter".into())
            .spawn(move || -> Result<(), String> {
                let mut data: Vec<EventData> = events
                    .iter()
                    .map(|&(event_id, age)| EventData { payload: [age, 0, 0, 0], event_id, ..Default::default() })
                    .collect();
                let args = WaitEventsArgs {
                    events_ptr: data.as_mut_ptr() as u64,
                    num_events: data.len() as u32,
                    wait_for_all: u32::from(all),
                    timeout: timeout_ms,
                    wait_result: 0,
                };
                let bytes = args.as_bytes().to_vec();
                let declared = declared_ranges(AMDKFD_IOC_WAIT_EVENTS, &bytes);
                let mem = CheckedMemory { declared: declared.clone(), undeclared: Mutex::new(Vec::new()) };
                let reply = match send(&device, file, caller, AMDKFD_IOC_WAIT_EVENTS, &bytes, &mem) {
                    Sent::Replied(r) => r,
                    Sent::Parked(_, rx) => rx.recv_timeout(limit).map_err(|_| {
                        format!("WAIT_EVENTS ({timeout_ms} ms) from a thread not answered within {limit:?}")
                    })?,
                };
                // The data array is this thread's own: the reply's writes are checked, not applied.
                for w in &reply.user_writes {
                    if !covered(&declared, w.addr, w.data.len() as u64, true) {
                        return Err(format!("WAIT_EVENTS wrote outside its declared ranges at {:#x}", w.addr));
                    }
                }
                std::hint::black_box(&mut data);
                if reply.errno() == Some(Errno::EBADF) {
                    // The process closed its files before this thread got its request in.
                    return Ok(());
                }
                check_wait(&reply, bytes.len(), false).map_err(|(_, w)| w)
            })
            .map_err(|e| (Kind::Crash, format!("cannot spawn a waiter thread: {e}")))?;
        self.helpers.push((h, Instant::now() + limit + self.config.op_timeout));
        Ok(())
    }

    /// Checks replies of parked waits that have come, and that none is overdue.
    pub(super) fn poll_parked(&mut self) -> Check {
        let now = Instant::now();
        for proc in &mut self.procs {
            let mut i = 0;
            while i < proc.parked.len() {
                let w = &proc.parked[i];
                match w.rx.try_recv() {
                    Ok(reply) => {
                        let w = proc.parked.remove(i);
                        self.stats.record("WAIT_EVENTS", reply.errno().map_or(Ok(()), Err));
                        check_parked(&w, &reply)?;
                    }
                    Err(TryRecvError::Empty) if w.due.is_some_and(|d| now > d) => {
                        return fail(
                            Kind::Hang,
                            "a parked WAIT_EVENTS with a finite timeout was not answered in time".to_string(),
                        );
                    }
                    Err(TryRecvError::Disconnected) => {
                        return fail(Kind::Hang, "a parked WAIT_EVENTS lost its reply channel".to_string());
                    }
                    Err(TryRecvError::Empty) => i += 1,
                }
            }
        }
        let mut i = 0;
        while i < self.helpers.len() {
            if self.helpers[i].0.is_finished() {
                let (h, _) = self.helpers.remove(i);
                match h.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(why)) => {
                        return fail(if why.contains("not answered") { Kind::Hang } else { Kind::Errno }, why)
                    }
                    Err(_) => return fail(Kind::Crash, "a waiter thread panicked"),
                }
            } else if now > self.helpers[i].1 {
                return fail(Kind::Hang, "a waiter thread's WAIT_EVENTS was not answered in time");
            } else {
                i += 1;
            }
        }
        Ok(())
    }
}

/// When a wait with `timeout` ms must have been answered (none for long or infinite ones).
pub(super) fn due(timeout: u32, slack: Duration) -> Option<Instant> {
    (timeout <= 10_000).then(|| Instant::now() + Duration::from_millis(u64::from(timeout)) + slack)
}

pub(super) fn check_parked(w: &Parked, reply: &Reply) -> Check {
    check_reply(w.cmd, w.sent, reply, &w.declared)?;
    check_wait(reply, w.sent, w.interrupted)?;
    check_not_early(reply, w.timeout_ms, w.started)
}

/// A wait answered TIMEOUT must have waited its timeout (the timer may be late, never early).
pub(super) fn check_not_early(reply: &Reply, timeout_ms: u32, started: Instant) -> Check {
    let Ok((a, _)) = WaitEventsArgs::read_from_prefix(&reply.data) else { return Ok(()) };
    let waited = started.elapsed();
    let want = Duration::from_millis(u64::from(timeout_ms));
    if reply.result == 0 && a.wait_result == KFD_IOC_WAIT_RESULT_TIMEOUT && waited + Duration::from_millis(1) < want {
        return fail(
            Kind::Errno,
            format!("WAIT_EVENTS answered TIMEOUT after {waited:?} of a {timeout_ms} ms timeout"),
        );
    }
    Ok(())
}

/// A WAIT_EVENTS answer: success with COMPLETE or TIMEOUT, or failure with FAIL; EINTR if it was
/// interrupted while parked.
pub(super) fn check_wait(reply: &Reply, sent: usize, interrupted: bool) -> Check {
    if let Some(e) = reply.errno() {
        errnos::is_allowed(AMDKFD_IOC_WAIT_EVENTS, sent, e).map_err(|w| (Kind::Errno, w))?;
    }
    if interrupted && reply.errno() != Some(Errno::EINTR) {
        return fail(Kind::Errno, format!("an interrupted parked WAIT_EVENTS answered {:?}, not EINTR", reply.errno()));
    }
    let Ok((a, _)) = WaitEventsArgs::read_from_prefix(&reply.data) else { return Ok(()) };
    let ok = match reply.errno() {
        None => a.wait_result == KFD_IOC_WAIT_RESULT_COMPLETE || a.wait_result == KFD_IOC_WAIT_RESULT_TIMEOUT,
        Some(_) => a.wait_result == KFD_IOC_WAIT_RESULT_FAIL,
    };
    if !ok {
        return fail(
            Kind::Errno,
            format!("WAIT_EVENTS answered {:?} with wait_result {}", reply.errno(), a.wait_result),
        );
    }
    Ok(())
}
