//! CUSE wire frames: decoding requests the kernel sends and encoding replies, without I/O.

use nix::errno::Errno;
use uapi::fuse::*;
use uapi::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A request as the kernel sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op<'a> {
    Init(CuseInitIn),
    Open(FuseOpenIn),
    Release(FuseReleaseIn),
    Read(FuseReadIn),
    Write(FuseWriteIn, &'a [u8]),
    Ioctl(FuseIoctlIn, &'a [u8]),
    Interrupt(FuseInterruptIn),
    Poll(FusePollIn),
    Flush,
    Unknown(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub header: FuseInHeader,
    pub op: Op<'a>,
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes is shorter than the request header")]
    NoHeader(usize),
    #[error("header says {said} bytes, the frame has {got}")]
    LengthMismatch { said: u32, got: usize },
    #[error("opcode {opcode} body of {got} bytes is shorter than {need}")]
    Truncated { opcode: u32, got: usize, need: usize },
    #[error("opcode {opcode} says {said} bytes of data, the body has {got}")]
    DataMismatch { opcode: u32, said: u32, got: usize },
}

impl FrameError {
    /// The unique of the request, if its header was readable (so it can be answered).
    pub fn answerable(frame: &[u8]) -> Option<u64> {
        FuseInHeader::read_from_prefix(frame).ok().map(|(h, _)| h.unique)
    }
}

/// Which user's share of the readers a frame counts against (see `channel`): its caller's uid.
/// None for an interrupt, which must reach its request at once (the kernel names no caller in
/// it), and for a frame without a header (answered at once as malformed).
pub fn share_key(frame: &[u8]) -> Option<u32> {
    let (h, _) = FuseInHeader::read_from_prefix(frame).ok()?;
    (h.opcode != FUSE_INTERRUPT).then_some(h.uid)
}

fn body<T: FromBytes>(opcode: u32, b: &[u8]) -> Result<(T, &[u8]), FrameError> {
    T::read_from_prefix(b).map_err(|_| FrameError::Truncated { opcode, got: b.len(), need: std::mem::size_of::<T>() })
}

/// Decodes one frame, exactly as long as its header says.
pub fn decode(frame: &[u8]) -> Result<Request<'_>, FrameError> {
    let (header, rest) = FuseInHeader::read_from_prefix(frame).map_err(|_| FrameError::NoHeader(frame.len()))?;
    if header.len as usize != frame.len() {
        return Err(FrameError::LengthMismatch { said: header.len, got: frame.len() });
    }
    let opc = header.opcode;
    let op = match opc {
        CUSE_INIT => Op::Init(body(opc, rest)?.0),
        FUSE_OPEN => Op::Open(body(opc, rest)?.0),
        FUSE_RELEASE => Op::Release(body(opc, rest)?.0),
        FUSE_READ => Op::Read(body(opc, rest)?.0),
        FUSE_FLUSH => Op::Flush,
        FUSE_WRITE => {
            let (w, data): (FuseWriteIn, _) = body(opc, rest)?;
            if data.len() != w.size as usize {
                return Err(FrameError::DataMismatch { opcode: opc, said: w.size, got: data.len() });
            }
            Op::Write(w, data)
        }
        FUSE_IOCTL => {
            let (i, data): (FuseIoctlIn, _) = body(opc, rest)?;
            if data.len() != i.in_size as usize {
                return Err(FrameError::DataMismatch { opcode: opc, said: i.in_size, got: data.len() });
            }
            Op::Ioctl(i, data)
        }
        FUSE_INTERRUPT => Op::Interrupt(body(opc, rest)?.0),
        FUSE_POLL => Op::Poll(body(opc, rest)?.0),
        other => Op::Unknown(other),
    };
    Ok(Request { header, op })
}

/// A reply frame: out header with `error` (0 or -errno) and the given body parts.
pub fn reply(unique: u64, error: i32, parts: &[&[u8]]) -> Vec<u8> {
    let len = std::mem::size_of::<FuseOutHeader>() + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(FuseOutHeader { len: len as u32, error, unique }.as_bytes());
    for p in parts {
        v.extend_from_slice(p);
    }
    v
}

pub fn reply_err(unique: u64, e: Errno) -> Vec<u8> {
    reply(unique, -(e as i32), &[])
}

pub fn reply_struct<T: IntoBytes + Immutable + KnownLayout>(unique: u64, body: &T) -> Vec<u8> {
    reply(unique, 0, &[body.as_bytes()])
}

/// The CUSE_INIT reply naming the device node.
pub fn reply_init(unique: u64, out: &CuseInitOut, devname: &str) -> Vec<u8> {
    let info = format!("DEVNAME={devname}\0");
    reply(unique, 0, &[out.as_bytes(), info.as_bytes()])
}

/// An ioctl RETRY reply: the kernel fetches `ins` from the caller, reserves `outs`, and asks
/// again.
pub fn reply_ioctl_retry(unique: u64, ins: &[FuseIoctlIovec], outs: &[FuseIoctlIovec]) -> Vec<u8> {
    let head =
        FuseIoctlOut { result: 0, flags: FUSE_IOCTL_RETRY, in_iovs: ins.len() as u32, out_iovs: outs.len() as u32 };
    reply(unique, 0, &[head.as_bytes(), ins.as_bytes(), outs.as_bytes()])
}

/// The final ioctl reply: the ioctl's return value and the out data, scattered by the kernel
/// over the out iovecs in order.
pub fn reply_ioctl(unique: u64, result: i32, data: &[u8]) -> Vec<u8> {
    let head = FuseIoctlOut { result, flags: 0, in_iovs: 0, out_iovs: 0 };
    reply(unique, 0, &[head.as_bytes(), data])
}

/// A poll wake-up notification for poll handle `kh`.
pub fn notify_poll(kh: u64) -> Vec<u8> {
    reply(0, FUSE_NOTIFY_POLL, &[FuseNotifyPollWakeupOut { kh }.as_bytes()])
}
