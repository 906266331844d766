//! Backing files: the memory a client and the device share without mmap on the device node.
//!
//! CUSE cannot mmap: mmap on a CUSE node fails with ENODEV, as `cuse_frontend_fops` has no
//! `.mmap` (<https://github.com/torvalds/linux/blob/v6.1/fs/fuse/cuse.c>). So every page the
//! client must map (GPU buffers, the process doorbell slice, the MMIO remap page, the event page) is a file the device creates
//! and maps itself. A client turns a KFD mmap offset into its file by a fixed path scheme:
//!
//! ```text
//! <runtime dir>/<client pid>/kfd/<offset as 16 hex digits>     mmap on the kfd fd
//!                                                             (doorbells, MMIO, event page)
//! <runtime dir>/<client pid>/render/<offset as 16 hex digits>  mmap on the render node
//!                                                             (VRAM and GTT buffers)
//! ```
//!
//! The file is exactly as long as the object and is mapped at file offset 0: a client that
//! would mmap `len` bytes at `offset` maps `len` bytes of the file instead. A doorbell offset
//! carries the queue's byte offset in its low bits; the slice's file is named by the offset with
//! those bits cleared ([`doorbell_slice_offset`]). Files are mode 0600, owned by the client's uid,
//! and removed when the object (or the whole client) goes away.

use super::shm::SharedRegion;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which mmap name space a backing file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmapSpace {
    /// Offsets a client mmaps on its /dev/kfd fd (doorbells, MMIO remap, event page).
    Kfd,
    /// Offsets a client mmaps on its DRM render node fd (VRAM and GTT buffers).
    Render,
}

impl MmapSpace {
    fn dir_name(self) -> &'static str {
        match self {
            MmapSpace::Kfd => "kfd",
            MmapSpace::Render => "render",
        }
    }
}

/// The path of the backing file for `offset` in `space` of client `pid` (the scheme above).
pub fn backing_path(root: &Path, pid: u32, space: MmapSpace, offset: u64) -> PathBuf {
    root.join(pid.to_string()).join(space.dir_name()).join(format!("{offset:016x}"))
}

/// The mmap offset of a process doorbell slice given a queue's `doorbell_offset`.
pub fn doorbell_slice_offset(doorbell_offset: u64, slice_size: u64) -> u64 {
    doorbell_offset & !(slice_size - 1)
}

/// Who owns a client's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// Creates and removes backing files under one runtime directory.
#[derive(Debug)]
pub struct BackingStore {
    root: PathBuf,
}

impl BackingStore {
    /// Uses `root` (created if missing, mode 0755 so clients can reach their own 0700 dirs).
    pub fn new(root: impl Into<PathBuf>) -> io::Result<BackingStore> {
        let root = root.into();
        fs::DirBuilder::new().recursive(true).mode(0o755).create(&root)?;
        // GPU memory on a disk file system would be written back to disk: tmpfs keeps it in RAM.
        match nix::sys::statfs::statfs(&root) {
            Ok(fs) if fs.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC => log::warn!(
                "{} is not on tmpfs: backing files of GPU memory there may be written to disk (/run and /dev/shm are tmpfs)",
                root.display()
            ),
            _ => {}
        }
        Ok(BackingStore { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates a zero-filled file of `len` bytes for `offset` and maps it into the device.
    pub fn create(
        &self,
        pid: u32,
        owner: Owner,
        space: MmapSpace,
        offset: u64,
        len: usize,
    ) -> io::Result<Arc<BackingFile>> {
        let client = self.root.join(pid.to_string());
        let dir = client.join(space.dir_name());
        fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        chown_if_needed(&client, owner)?;
        chown_if_needed(&dir, owner)?;
        let path = backing_path(&self.root, pid, space, offset);
        let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
        let made = (|| {
            chown_if_needed(&path, owner)?;
            file.set_len(len as u64)?;
            SharedRegion::map(&file, len)
        })();
        match made {
            Ok(region) => Ok(Arc::new(BackingFile { path, region, _file: file })),
            Err(e) => {
                let _ = fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Removes everything left of client `pid` (its files are normally gone already).
    pub fn remove_client(&self, pid: u32) {
        let dir = self.root.join(pid.to_string());
        if let Err(e) = fs::remove_dir_all(&dir) {
            if e.kind() != io::ErrorKind::NotFound {
                log::warn!("cannot remove {}: {e}", dir.display());
            }
        }
    }
}

fn chown_if_needed(path: &Path, owner: Owner) -> io::Result<()> {
    let me = nix::unistd::geteuid().as_raw();
    if me != 0 || owner.uid == me {
        return Ok(());
    }
    std::os::unix::fs::chown(path, Some(owner.uid), Some(owner.gid))
}

/// One backing file, mapped into the device; the file is removed when the last user drops it.
#[derive(Debug)]
pub struct BackingFile {
    path: PathBuf,
    region: SharedRegion,
    _file: File,
}

impl BackingFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn region(&self) -> &SharedRegion {
        &self.region
    }
}

impl Drop for BackingFile {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.path) {
            if e.kind() != io::ErrorKind::NotFound {
                log::warn!("cannot remove backing file {}: {e}", self.path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_follow_the_path_scheme_and_go_away() {
        let root = std::env::temp_dir().join(format!("backing-test-{}", std::process::id()));
        let store = BackingStore::new(&root).unwrap();
        let owner = Owner { uid: nix::unistd::getuid().as_raw(), gid: nix::unistd::getgid().as_raw() };
        let f = store.create(42, owner, MmapSpace::Kfd, 0xC000_4000_0000_0000, 8192).unwrap();
        let expected = root.join("42/kfd/c000400000000000");
        assert_eq!(f.path(), expected);
        assert_eq!(fs::metadata(&expected).unwrap().len(), 8192);
        // The client sees what the device writes.
        f.region().write(8, &[1, 2, 3]).unwrap();
        assert_eq!(&fs::read(&expected).unwrap()[8..11], &[1, 2, 3]);
        // Creating the same offset twice is refused rather than silently shared.
        assert!(store.create(42, owner, MmapSpace::Kfd, 0xC000_4000_0000_0000, 8192).is_err());
        drop(f);
        assert!(!expected.exists());
        store.remove_client(42);
        assert!(!root.join("42").exists());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn doorbell_offsets_name_their_slice() {
        assert_eq!(doorbell_slice_offset(0xC000_4000_0000_0018, 8192), 0xC000_4000_0000_0000);
    }
}
