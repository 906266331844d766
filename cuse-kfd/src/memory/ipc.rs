//! IPC share handles: AMD's out-of-tree IPC_EXPORT_HANDLE / IPC_IMPORT_HANDLE (ROCm's DKMS
//! amdkfd, kfd_ipc.c; sent by ROCT-Thunk-Interface rocm-5.2.3 fmm.c for hsaKmtShareMemory and
//! hsaKmtRegisterSharedHandle).
//!
//! An export gives a buffer a 128-bit handle, random so that it cannot be guessed: the handle is
//! the capability (amdkfd checks no uid or pid on import). The object behind it keeps the memory
//! (a [`SharedFile`]) and is held by the exporting buffer and by every buffer imported from it,
//! as amdkfd's `kfd_ipc_obj` is by reference count: the handle works while any of them lives.
//!
//! The object's shared file is named by what an import needs ([`file_name`]), so that an
//! embedded device (one per process) can make the object of a handle another process of the
//! same user exported from that file alone ([`IpcTable::get_or_adopt`]).

use super::backing::{BackingStore, SharedFile};
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

/// The name of the shared file of `handle`: the handle as 32 hex digits, then the exported
/// buffer's allocation flags and the exporter's `flags`, 8 hex digits each (the size is the
/// file's).
pub fn file_name(handle: &[u32; 4], alloc_flags: u32, flags: u32) -> String {
    let hex: String = handle.iter().map(|w| format!("{w:08x}")).collect();
    format!("{hex}-{alloc_flags:08x}-{flags:08x}")
}

/// What [`file_name`] put in `name`: (handle, allocation flags, flags).
pub fn parse_file_name(name: &str) -> Option<([u32; 4], u32, u32)> {
    let mut parts = name.split('-');
    let (hex, alloc, flags) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || hex.len() != 32 || alloc.len() != 8 || flags.len() != 8 {
        return None;
    }
    let word = |s: &str| u32::from_str_radix(s, 16).ok().filter(|_| s.bytes().all(|b| b.is_ascii_hexdigit()));
    let mut handle = [0u32; 4];
    for (i, w) in handle.iter_mut().enumerate() {
        *w = word(&hex[8 * i..8 * i + 8])?;
    }
    Some((handle, word(alloc)?, word(flags)?))
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

    /// The live object `handle` names, in this table or, for an embedded device, adopted from
    /// another process's store of the same user (see [`BackingStore::adopt_shared`]) and entered
    /// here. None for a handle found nowhere, or whose file does not name a VRAM or GTT buffer.
    pub fn get_or_adopt(&self, handle: &[u32; 4], store: &BackingStore) -> Option<Arc<IpcObject>> {
        // Held across the search, so that two imports of one handle adopt it once.
        let mut objects = self.objects.lock();
        if let Some(obj) = objects.get(handle).and_then(Weak::upgrade) {
            return Some(obj);
        }
        let wanted = |name: &str| parse_file_name(name).is_some_and(|(h, ..)| h == *handle);
        let file = match store.adopt_shared(wanted) {
            Ok(file) => file?,
            Err(e) => {
                log::warn!("cannot look for a shared buffer in other processes' stores: {e}");
                return None;
            }
        };
        let (_, alloc_flags, flags) = parse_file_name(file.name())?;
        let kind = BufferKind::from_flags(alloc_flags).filter(|k| matches!(k, BufferKind::Vram | BufferKind::Gtt))?;
        let size = file.len() as u64;
        let obj = Arc::new(IpcObject { share_handle: *handle, kind, size, alloc_flags, flags, file });
        objects.retain(|_, o| o.strong_count() > 0);
        objects.insert(*handle, Arc::downgrade(&obj));
        Some(obj)
    }

    /// How many handles name live objects.
    pub fn len(&self) -> usize {
        self.objects.lock().values().filter(|o| o.strong_count() > 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_gives_back_what_it_was_made_of() {
        let h = [0xdead_beef, 0, 0x0123_4567, u32::MAX];
        let name = file_name(&h, 0x8000_0001, 0x5a);
        assert_eq!(name, "deadbeef0000000001234567ffffffff-80000001-0000005a");
        assert_eq!(parse_file_name(&name), Some((h, 0x8000_0001, 0x5a)));
    }

    #[test]
    fn names_not_made_by_file_name_are_not_read() {
        let good = "deadbeef0000000001234567ffffffff-80000001-0000005a";
        for bad in [
            "",
            "deadbeef0000000001234567ffffffff",
            "deadbeef0000000001234567ffffffff-80000001",
            "deadbeef0000000001234567fffffff-80000001-0000005a",
            "deadbeef0000000001234567ffffffff-80000001-0000005a-",
            "deadbeef0000000001234567fffffffg-80000001-0000005a",
            "deadbeef0000000001234567ffffffff-+8000001-0000005a",
            "deadbeef0000000001234567ffffffff-80000001-000005a",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad:?}");
        }
        assert!(parse_file_name(good).is_some());
    }
}
