//! `hsa_status_t`: the status codes of hsa.h and hsa_ext_amd.h, the shim's error type (a status
//! with the reason behind it) and the texts of `hsa_status_string`.

use std::ffi::CStr;

/// An `hsa_status_t` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Status(pub u32);

impl Status {
    pub const SUCCESS: Status = Status(0x0);
    pub const INFO_BREAK: Status = Status(0x1);
    pub const ERROR: Status = Status(0x1000);
    pub const INVALID_ARGUMENT: Status = Status(0x1001);
    pub const INVALID_QUEUE_CREATION: Status = Status(0x1002);
    pub const INVALID_ALLOCATION: Status = Status(0x1003);
    pub const INVALID_AGENT: Status = Status(0x1004);
    pub const INVALID_REGION: Status = Status(0x1005);
    pub const INVALID_SIGNAL: Status = Status(0x1006);
    pub const INVALID_QUEUE: Status = Status(0x1007);
    pub const OUT_OF_RESOURCES: Status = Status(0x1008);
    pub const INVALID_PACKET_FORMAT: Status = Status(0x1009);
    pub const RESOURCE_FREE: Status = Status(0x100A);
    pub const NOT_INITIALIZED: Status = Status(0x100B);
    pub const REFCOUNT_OVERFLOW: Status = Status(0x100C);
    pub const INCOMPATIBLE_ARGUMENTS: Status = Status(0x100D);
    pub const INVALID_INDEX: Status = Status(0x100E);
    pub const INVALID_ISA: Status = Status(0x100F);
    pub const INVALID_CODE_OBJECT: Status = Status(0x1010);
    pub const INVALID_EXECUTABLE: Status = Status(0x1011);
    pub const INVALID_ISA_NAME: Status = Status(0x1017);
    pub const EXCEPTION: Status = Status(0x1016);
    pub const INVALID_SIGNAL_GROUP: Status = Status(0x1024);
    pub const INVALID_RUNTIME_STATE: Status = Status(0x1025);
    pub const FATAL: Status = Status(0x1026);
    // hsa_ext_amd.h
    pub const INVALID_MEMORY_POOL: Status = Status(40);
    pub const MEMORY_APERTURE_VIOLATION: Status = Status(41);
    pub const ILLEGAL_INSTRUCTION: Status = Status(42);
    pub const MEMORY_FAULT: Status = Status(43);

    /// The `hsa_status_string` text, as ROCr words it; `None` for an unknown code.
    pub fn text(self) -> Option<&'static CStr> {
        Some(match self {
            Status::SUCCESS => c"HSA_STATUS_SUCCESS: The function has been executed successfully.",
            Status::INFO_BREAK => {
                c"HSA_STATUS_INFO_BREAK: A traversal over a list of elements has been interrupted by the application before completing."
            }
            Status::ERROR => c"HSA_STATUS_ERROR: A generic error has occurred.",
            Status::INVALID_ARGUMENT => c"HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments does not meet a precondition stated in the documentation of the corresponding formal argument.",
            Status::INVALID_QUEUE_CREATION => c"HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: The requested queue creation is not valid.",
            Status::INVALID_ALLOCATION => c"HSA_STATUS_ERROR_INVALID_ALLOCATION: The requested allocation is not valid.",
            Status::INVALID_AGENT => c"HSA_STATUS_ERROR_INVALID_AGENT: The agent is invalid.",
            Status::INVALID_REGION => c"HSA_STATUS_ERROR_INVALID_REGION: The memory region is invalid.",
            Status::INVALID_SIGNAL => c"HSA_STATUS_ERROR_INVALID_SIGNAL: The signal is invalid.",
            Status::INVALID_QUEUE => c"HSA_STATUS_ERROR_INVALID_QUEUE: The queue is invalid.",
            Status::OUT_OF_RESOURCES => c"HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources. This error may also occur when the core runtime library needs to spawn threads or create internal OS-specific events.",
            Status::INVALID_PACKET_FORMAT => c"HSA_STATUS_ERROR_INVALID_PACKET_FORMAT: The AQL packet is malformed.",
            Status::RESOURCE_FREE => c"HSA_STATUS_ERROR_RESOURCE_FREE: An error has been detected while releasing a resource.",
            Status::NOT_INITIALIZED => c"HSA_STATUS_ERROR_NOT_INITIALIZED: An API other than hsa_init has been invoked while the reference count of the HSA runtime is zero.",
            Status::REFCOUNT_OVERFLOW => c"HSA_STATUS_ERROR_REFCOUNT_OVERFLOW: The maximum reference count for the object has been reached.",
            Status::INCOMPATIBLE_ARGUMENTS => c"HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS: The arguments passed to a functions are not compatible.",
            Status::INVALID_INDEX => c"HSA_STATUS_ERROR_INVALID_INDEX: The index is invalid.",
            Status::INVALID_ISA => c"HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid.",
            Status::INVALID_CODE_OBJECT => c"HSA_STATUS_ERROR_INVALID_CODE_OBJECT: The code object is invalid.",
            Status::INVALID_EXECUTABLE => c"HSA_STATUS_ERROR_INVALID_EXECUTABLE: The executable is invalid.",
            Status::INVALID_ISA_NAME => c"HSA_STATUS_ERROR_INVALID_ISA_NAME: The instruction set architecture name is invalid.",
            Status::EXCEPTION => c"HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception.",
            Status::INVALID_SIGNAL_GROUP => c"HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP: The signal group is invalid.",
            Status::INVALID_RUNTIME_STATE => c"HSA_STATUS_ERROR_INVALID_RUNTIME_STATE: The operation is not valid in the current runtime state.",
            Status::FATAL => c"HSA_STATUS_ERROR_FATAL: Encountered a fatal error.",
            Status::INVALID_MEMORY_POOL => c"HSA_STATUS_ERROR_INVALID_MEMORY_POOL: The memory pool is invalid.",
            Status::MEMORY_APERTURE_VIOLATION => c"HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest legal address.",
            Status::ILLEGAL_INSTRUCTION => c"HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION: The agent executed an illegal shader instruction.",
            Status::MEMORY_FAULT => c"HSA_STATUS_ERROR_MEMORY_FAULT: The agent attempted to access an inaccessible address.",
            _ => return None,
        })
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.text().and_then(|t| t.to_str().ok()).and_then(|t| t.split(':').next()) {
            Some(name) => f.write_str(name),
            None => write!(f, "hsa_status {:#x}", self.0),
        }
    }
}

/// A failed request: the status the caller gets and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {reason}")]
pub struct Error {
    pub status: Status,
    pub reason: String,
}

impl Error {
    pub fn new(status: Status, reason: impl Into<String>) -> Error {
        Error { status, reason: reason.into() }
    }

    pub fn invalid_argument(reason: impl Into<String>) -> Error {
        Error::new(Status::INVALID_ARGUMENT, reason)
    }

    /// A device request that failed with `errno`: out of memory is OUT_OF_RESOURCES, anything
    /// else a generic error.
    pub fn from_errno(what: &str, errno: thunk::Errno) -> Error {
        let status = match errno {
            thunk::Errno::ENOMEM | thunk::Errno::ENOSPC => Status::OUT_OF_RESOURCES,
            _ => Status::ERROR,
        };
        Error::new(status, format!("{what}: {errno}"))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_name_their_status() {
        for s in [Status::SUCCESS, Status::INVALID_ARGUMENT, Status::OUT_OF_RESOURCES, Status::MEMORY_FAULT] {
            let t = s.text().expect("known status").to_str().expect("utf-8");
            assert!(t.starts_with("HSA_STATUS_"), "{t}");
        }
        assert!(Status(0x4242).text().is_none());
        assert_eq!(Status::INVALID_SIGNAL.to_string(), "HSA_STATUS_ERROR_INVALID_SIGNAL");
    }
}
