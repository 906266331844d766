//! Who is calling and through which open file: the identities every front end hands the
//! device with each request. A leaf: it knows nothing of the device.

/// Who is calling: the thread group (KFD's process), the thread, and its credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub pid: u32,
    pub tid: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Caller {
    /// The calling process itself (the embedded front end).
    pub fn current() -> Caller {
        Caller {
            pid: std::process::id(),
            tid: nix::unistd::gettid().as_raw() as u32,
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
        }
    }
}

/// An open file of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u64);
