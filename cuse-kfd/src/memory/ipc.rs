//! IPC share handles: AMD's out-of-tree IPC_EXPORT_HANDLE / IPC_IMPORT_HANDLE (ROCm's DKMS
//! amdkfd, kfd_ipc.c; sent by ROCT-Thunk-Interface rocm-5.2.3 fmm.c for hsaKmtShareMemory and
//! hsaKmtRegisterSharedHandle).
//!
//! An export gives a buffer a 128-bit handle, random so that it cannot be guessed: the handle is
//! the capability (amdkfd checks no uid or pid on import). The object behind it keeps the memory
//! (a [`SharedFile`]) and is held by the exporting buffer and by every buffer imported from it,
//! as amdkfd's `kfd_ipc_obj` is by reference count: the handle works while any of them lives.

use super::backing::SharedFile;
use super::BufferKind;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Weak};

/// What one share handle names.
#[derive(Debug)]
pub struct IpcObject {
    pub share_handle: [u32; 4],
    pub kind: BufferKind,
    /// Page-rounded size and KFD_IOC_ALLOC_MEM_FLAGS of the exported buffer (an import is made
    /// with the same).
    pub size: u64,
    pub alloc_flags: u32,
    /// The `flags` the exporter gave, which IMPORT hands back unread (amdkfd-dkms keeps them in
    /// `kfd_ipc_obj.flags`; libhsakmt passes the object's HsaMemFlags and takes the import's).
    pub flags: u32,
    pub file: SharedFile,
}

/// The device-wide table of share handles (amdkfd's `kfd_ipc_handles`). A leaf lock.
#[derive(Debug, Default)]
pub struct IpcTable {
    objects: Mutex<HashMap<[u32; 4], Weak<IpcObject>>>,
}

impl IpcTable {
    /// A fresh handle no live object has.
    pub fn new_handle(&self) -> std::io::Result<[u32; 4]> {
        let objects = self.objects.lock();
        loop {
            let mut bytes = [0u8; 16];
            std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
            let mut h = [0u32; 4];
            for (w, c) in h.iter_mut().zip(bytes.chunks_exact(4)) {
                *w = u32::from_le_bytes(c.try_into().expect("4 bytes"));
            }
            if objects.get(&h).is_none_or(|o| o.strong_count() == 0) {
                return Ok(h);
            }
        }
    }

    /// Enters `object` under its handle (and forgets handles whose objects are gone).
    pub fn insert(&self, object: &Arc<IpcObject>) {
        let mut objects = self.objects.lock();
        objects.retain(|_, o| o.strong_count() > 0);
        objects.insert(object.share_handle, Arc::downgrade(object));
    }

    /// The live object `handle` names.
    pub fn get(&self, handle: &[u32; 4]) -> Option<Arc<IpcObject>> {
        self.objects.lock().get(handle).and_then(Weak::upgrade)
    }

    /// How many handles name live objects.
    pub fn len(&self) -> usize {
        self.objects.lock().values().filter(|o| o.strong_count() > 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
