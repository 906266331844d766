//! Replies: every request is answered exactly once, now or later.

use nix::errno::Errno;
use std::fmt;

/// Bytes the caller's memory must receive at `addr` (WAIT_EVENTS event data, apertures,
/// tile configs). The front end delivers them: process_vm_writev when embedded, RETRY out
/// iovecs over CUSE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserWrite {
    pub addr: u64,
    pub data: Vec<u8>,
}

/// The answer to one ioctl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// 0 or a negative errno, what ioctl(2) returns in the kernel.
    pub result: i32,
    /// The argument struct copied back (the caller's size), empty if the ioctl has no IOC_OUT.
    /// Copied back also on error, as amdkfd does (WAIT_EVENTS' wait_result with EIO).
    pub data: Vec<u8>,
    pub user_writes: Vec<UserWrite>,
}

impl Reply {
    pub fn error(e: Errno) -> Reply {
        Reply { result: -(e as i32), data: Vec::new(), user_writes: Vec::new() }
    }

    pub fn errno(&self) -> Option<Errno> {
        (self.result < 0).then(|| Errno::from_raw(-self.result))
    }
}

type SendFn = Box<dyn FnOnce(Reply) + Send>;

/// The one-shot channel back to the front end. Dropping it unanswered answers EIO and logs:
/// a caller is never left waiting by a lost reply.
pub struct Responder {
    tag: u64,
    send: Option<SendFn>,
}

impl Responder {
    /// `tag` identifies the request to its front end (the FUSE unique) for interrupts.
    pub fn new(tag: u64, send: impl FnOnce(Reply) + Send + 'static) -> Responder {
        Responder { tag, send: Some(Box::new(send)) }
    }

    pub fn tag(&self) -> u64 {
        self.tag
    }

    pub fn send(mut self, reply: Reply) {
        if let Some(f) = self.send.take() {
            f(reply);
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if let Some(f) = self.send.take() {
            log::error!("request {} dropped without a reply; answering EIO", self.tag);
            f(Reply::error(Errno::EIO));
        }
    }
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder").field("tag", &self.tag).field("answered", &self.send.is_none()).finish()
    }
}

/// A reply owed for an ioctl that parked: knows how much of the argument struct to copy back.
#[derive(Debug)]
pub struct Pending {
    responder: Responder,
    caller_size: usize,
    copy_out: bool,
}

impl Pending {
    pub(crate) fn new(responder: Responder, caller_size: usize, copy_out: bool) -> Pending {
        Pending { responder, caller_size, copy_out }
    }

    pub fn tag(&self) -> u64 {
        self.responder.tag()
    }

    /// Answers with `args` (the kernel-size struct) cut or zero-extended to the caller's size.
    pub fn complete(self, result: Result<(), Errno>, args: &[u8], user_writes: Vec<UserWrite>) {
        let data = if self.copy_out {
            let mut d = vec![0u8; self.caller_size];
            let n = self.caller_size.min(args.len());
            d[..n].copy_from_slice(&args[..n]);
            d
        } else {
            Vec::new()
        };
        let result = match result {
            Ok(()) => 0,
            Err(e) => -(e as i32),
        };
        self.responder.send(Reply { result, data, user_writes });
    }
}
