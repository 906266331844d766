//! The topology tree as a read-only FUSE filesystem, to bind-mount over
//! /sys/devices/virtual/kfd/kfd in a mount namespace (`cuse-kfd serve --sysfs-mount DIR`).
//!
//! The filesystem's root is the kfd sysfs directory ([`KFD_SYSFS_DIR`]): it holds `topology/`,
//! and every path of [`Topology::files`] and [`Topology::dirs`] appears under it, so
//! `DIR/topology/nodes/1/properties` reads exactly what `files()` gives for
//! "topology/nodes/1/properties".
//!
//! "Live" means the tree is served by the daemon that owns the device, not copied to disk. The
//! topology is immutable once the device is built (amdkfd's only changes at GPU hot-plug), so
//! the tree is a snapshot taken at mount time: inode numbers, contents and times never change
//! while it is mounted.
//!
//! Attributes are sysfs-like: directories 0555 and files 0444, owned by root, all stamped with
//! the mount time. A file's size is its real length, where sysfs reports 4096 for every
//! attribute: libhsakmt reads with fopen/fread/fgets until EOF, which works either way, and the
//! real length lets `cat`, `read_to_string` and the page cache stop at the end.
//!
//! Everything that would modify the tree fails with EROFS (the mount is also `ro`, so the VFS
//! refuses most of it before we see it); execute access fails with EACCES.
//!
//! [`KFD_SYSFS_DIR`]: crate::topology::KFD_SYSFS_DIR

use crate::topology::Topology;
use fuser::{
    AccessFlags, BackgroundSession, BsdFileFlags, Config, CopyFileRangeFlags, Errno, FileAttr, FileHandle, FileType,
    FopenFlags, Generation, INodeNo, LockOwner, MountOption, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, SessionACL, TimeOrNow, WriteFlags,
};
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The mount's source (fsname), as /proc/self/mountinfo shows it.
pub const FSNAME: &str = "cuse-kfd-sysfs";

/// The root directory's inode number (FUSE's FUSE_ROOT_ID).
pub const ROOT_INO: u64 = 1;

/// Mode bits of every regular file.
pub const FILE_MODE: u16 = 0o444;

/// Mode bits of every directory.
pub const DIR_MODE: u16 = 0o555;

/// How long the kernel may cache entries and attributes: the tree never changes.
const TTL: Duration = Duration::from_secs(3600);

/// The block size reported by stat and statfs: a page.
const BLOCK_SIZE: u32 = uapi::kfd::PAGE_SIZE as u32;

/// How long `unmount` waits for the kernel to end the connection once the mount is gone.
const END_GRACE: Duration = Duration::from_secs(1);

/// Errors in the paths a tree is built from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("{0:?} is not a relative path of plain names")]
    BadPath(String),
    #[error("the file {0:?} is given twice")]
    Duplicate(String),
    #[error("{0:?} is a file, so {1:?} cannot be under it or be a directory")]
    NotADirectory(String, String),
}

#[derive(Debug, Clone)]
enum Content {
    /// Children's inode numbers, in the order they were added.
    Dir(Vec<u64>),
    File(Box<[u8]>),
}

#[derive(Debug, Clone)]
struct Inode {
    name: String,
    parent: u64,
    /// Relative to the root, "" for the root.
    path: String,
    content: Content,
}

/// The inode model: a snapshot of the tree, with stable inode numbers.
///
/// Inode `ROOT_INO` is the root; the others follow in the order the paths were given (for
/// [`SysfsTree::from_topology`]: `dirs()` then `files()`), so the same topology always gets
/// the same numbers. It is also the [`fuser::Filesystem`] that serves the tree.
#[derive(Debug, Clone)]
pub struct SysfsTree {
    /// Inode `n` is `inodes[n - 1]`.
    inodes: Vec<Inode>,
    /// Every inode's atime, mtime and ctime.
    time: SystemTime,
}

impl SysfsTree {
    /// The tree of `topology`'s `dirs()` and `files()`.
    pub fn from_topology(topology: &Topology) -> Result<SysfsTree, TreeError> {
        SysfsTree::new(&topology.dirs(), &topology.files())
    }

    /// A tree of relative paths ("a/b"): `dirs` (created as by `mkdir -p`), then `files` with
    /// their contents (missing parent directories are created).
    pub fn new(dirs: &[String], files: &[(String, String)]) -> Result<SysfsTree, TreeError> {
        let root = Inode { name: String::new(), parent: ROOT_INO, path: String::new(), content: Content::Dir(vec![]) };
        let mut tree = SysfsTree { inodes: vec![root], time: SystemTime::now() };
        for dir in dirs {
            tree.insert(dir, None)?;
        }
        for (path, text) in files {
            tree.insert(path, Some(text.as_bytes()))?;
        }
        Ok(tree)
    }

    /// Adds `path`, a file when `data` is given, else a directory; creates missing parents.
    fn insert(&mut self, path: &str, data: Option<&[u8]>) -> Result<u64, TreeError> {
        let names: Vec<&str> = path.split('/').collect();
        if names.iter().any(|n| n.is_empty() || *n == "." || *n == ".." || n.contains('\0')) {
            return Err(TreeError::BadPath(path.to_string()));
        }
        let mut ino = ROOT_INO;
        for (depth, name) in names.iter().enumerate() {
            let last = depth + 1 == names.len();
            match self.child(ino, name) {
                Some(child) => {
                    let is_dir = matches!(self.inode(child).map(|i| &i.content), Some(Content::Dir(_)));
                    if last && data.is_some() {
                        return Err(if is_dir {
                            TreeError::NotADirectory(path.to_string(), path.to_string())
                        } else {
                            TreeError::Duplicate(path.to_string())
                        });
                    }
                    if !is_dir {
                        return Err(TreeError::NotADirectory(names[..=depth].join("/"), path.to_string()));
                    }
                    ino = child;
                }
                None => {
                    let content = match data {
                        Some(bytes) if last => Content::File(bytes.into()),
                        _ => Content::Dir(vec![]),
                    };
                    let child_path = names[..=depth].join("/");
                    let new = self.inodes.len() as u64 + 1;
                    self.inodes.push(Inode { name: (*name).to_string(), parent: ino, path: child_path, content });
                    if let Content::Dir(children) = &mut self.inodes[(ino - 1) as usize].content {
                        children.push(new);
                    }
                    ino = new;
                }
            }
        }
        Ok(ino)
    }

    fn inode(&self, ino: u64) -> Option<&Inode> {
        self.inodes.get(usize::try_from(ino.checked_sub(1)?).ok()?)
    }

    fn child(&self, parent: u64, name: &str) -> Option<u64> {
        match &self.inode(parent)?.content {
            Content::Dir(children) => children.iter().copied().find(|&c| self.inodes[(c - 1) as usize].name == name),
            Content::File(_) => None,
        }
    }

    /// The number of inodes, the root included.
    pub fn len(&self) -> usize {
        self.inodes.len()
    }

    /// Never: the root is always there.
    pub fn is_empty(&self) -> bool {
        self.inodes.is_empty()
    }

    /// The inode of a relative path ("" is the root).
    pub fn ino(&self, path: &str) -> Option<u64> {
        if path.is_empty() {
            return Some(ROOT_INO);
        }
        path.split('/').try_fold(ROOT_INO, |ino, name| self.child(ino, name))
    }

    /// The relative path of an inode ("" for the root).
    pub fn path(&self, ino: u64) -> Option<&str> {
        self.inode(ino).map(|i| i.path.as_str())
    }

    /// The entry `name` of directory `parent`: ENOENT if absent, ENOTDIR if `parent` is a file.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<u64, Errno> {
        let inode = self.inode(parent).ok_or(Errno::ENOENT)?;
        let Content::Dir(children) = &inode.content else {
            return Err(Errno::ENOTDIR);
        };
        match name.as_bytes() {
            b"." => Ok(parent),
            b".." => Ok(inode.parent),
            bytes => children
                .iter()
                .copied()
                .find(|&c| self.inodes[(c - 1) as usize].name.as_bytes() == bytes)
                .ok_or(Errno::ENOENT),
        }
    }

    /// The attributes of an inode.
    pub fn attr(&self, ino: u64) -> Option<FileAttr> {
        let inode = self.inode(ino)?;
        let (kind, perm, size, nlink) = match &inode.content {
            Content::Dir(children) => {
                let subdirs =
                    children.iter().filter(|&&c| matches!(self.inodes[(c - 1) as usize].content, Content::Dir(_)));
                (FileType::Directory, DIR_MODE, 0, 2 + subdirs.count() as u32)
            }
            Content::File(data) => (FileType::RegularFile, FILE_MODE, data.len() as u64, 1),
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: self.time,
            mtime: self.time,
            ctime: self.time,
            crtime: self.time,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: BLOCK_SIZE,
            flags: 0,
        })
    }

    /// A file's whole contents: ENOENT if absent, EISDIR for a directory.
    pub fn contents(&self, ino: u64) -> Result<&[u8], Errno> {
        match &self.inode(ino).ok_or(Errno::ENOENT)?.content {
            Content::File(data) => Ok(data),
            Content::Dir(_) => Err(Errno::EISDIR),
        }
    }

    /// At most `size` bytes of a file from `offset` (empty at or past the end).
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<&[u8], Errno> {
        let data = self.contents(ino)?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(data.len());
        let end = start.saturating_add(size as usize).min(data.len());
        Ok(&data[start..end])
    }

    /// A directory's listing as readdir gives it: ".", "..", then the children in order, each
    /// with its inode and type. ENOTDIR for a file.
    pub fn entries(&self, ino: u64) -> Result<Vec<(u64, FileType, &str)>, Errno> {
        let inode = self.inode(ino).ok_or(Errno::ENOENT)?;
        let Content::Dir(children) = &inode.content else {
            return Err(Errno::ENOTDIR);
        };
        let mut out = vec![(ino, FileType::Directory, "."), (inode.parent, FileType::Directory, "..")];
        for &c in children {
            let child = &self.inodes[(c - 1) as usize];
            let kind = match child.content {
                Content::Dir(_) => FileType::Directory,
                Content::File(_) => FileType::RegularFile,
            };
            out.push((c, kind, child.name.as_str()));
        }
        Ok(out)
    }

    /// Mounts this tree at `dir` (created if missing); see [`mount`].
    pub fn mount(self, dir: &Path) -> io::Result<SysfsMount> {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
        }
        let dir = dir.canonicalize()?;
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::RO,
            MountOption::DefaultPermissions,
            MountOption::FSName(FSNAME.to_string()),
            MountOption::NoDev,
            MountOption::NoSuid,
            MountOption::NoExec,
        ];
        // allow_other: every user may read the tree, as everyone may read sysfs.
        config.acl = SessionACL::All;
        let session = fuser::spawn_mount(self, &dir, &config)?;
        log::info!("the topology is mounted at {} ({FSNAME}, read-only)", dir.display());
        Ok(SysfsMount { session: Some(session), dir })
    }
}

/// Mounts a snapshot of `topology` at `dir` (created if missing) and serves it on a background
/// thread until the returned handle is unmounted or dropped.
///
/// Options: `ro`, `allow_other`, `default_permissions`, `nodev`, `nosuid`, `noexec`, fsname
/// [`FSNAME`]. As root, fuser mounts through the mount(2) syscall and needs neither libfuse nor
/// fusermount3; without CAP_SYS_ADMIN it runs `fusermount3` (package fuse3), which also needs
/// `user_allow_other` in /etc/fuse.conf for `allow_other`.
pub fn mount(topology: &Topology, dir: &Path) -> io::Result<SysfsMount> {
    SysfsTree::from_topology(topology).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?.mount(dir)
}

/// A mounted tree; unmounts on drop.
///
/// Mounts copied into other mount namespaces (`unshare -m` after the mount, or bind mounts
/// made there) outlive the unmount of this one: the kernel keeps the connection while any of
/// them exists, and the background thread then keeps serving them until the process exits,
/// when closing /dev/fuse ends the connection (readers there then get ENOTCONN).
#[derive(Debug)]
pub struct SysfsMount {
    session: Option<BackgroundSession>,
    dir: PathBuf,
}

impl SysfsMount {
    /// Where the tree is mounted (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Unmounts the tree (lazily if it is busy) and waits for the FUSE thread to end.
    pub fn unmount(mut self) -> io::Result<()> {
        self.end()
    }

    fn end(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let unmounted = match umount(&self.dir, 0) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                log::warn!("{} is busy: detaching it lazily", self.dir.display());
                umount(&self.dir, libc::MNT_DETACH)
            }
            // Not a mount point any more: someone unmounted it already.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
            r => r,
        };
        // The kernel ends the connection when the last mount of it goes; the thread then sees
        // ENODEV and returns.
        let t0 = Instant::now();
        while !session.guard.is_finished() && t0.elapsed() < END_GRACE {
            std::thread::sleep(Duration::from_millis(5));
        }
        if session.guard.is_finished() {
            let ended = session.join();
            unmounted?;
            return ended;
        }
        log::info!(
            "{FSNAME} is still mounted elsewhere (another mount namespace?): serving it until this process exits"
        );
        // Dropping the session would unmount its path again, which may now name another mount.
        std::mem::forget(session);
        unmounted
    }
}

impl Drop for SysfsMount {
    fn drop(&mut self) {
        if let Err(e) = self.end() {
            log::warn!("unmounting {}: {e}", self.dir.display());
        }
    }
}

fn umount(dir: &Path, flags: libc::c_int) -> io::Result<()> {
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `path` is a valid NUL-terminated string that outlives the call.
    if unsafe { libc::umount2(path.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl fuser::Filesystem for SysfsTree {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.lookup(parent.0, name).map(|ino| self.attr(ino)) {
            Ok(Some(attr)) => reply.entry(&TTL, &attr, Generation(0)),
            Ok(None) => reply.error(Errno::ENOENT),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        reply.error(Errno::EROFS);
    }

    fn readlink(&self, _req: &Request, _ino: INodeNo, reply: ReplyData) {
        reply.error(Errno::EINVAL);
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EROFS);
    }

    fn mkdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, _mode: u32, _umask: u32, reply: ReplyEntry) {
        reply.error(Errno::EROFS);
    }

    fn unlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EROFS);
    }

    fn rmdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EROFS);
    }

    fn symlink(&self, _req: &Request, _parent: INodeNo, _link_name: &OsStr, _target: &Path, reply: ReplyEntry) {
        reply.error(Errno::EROFS);
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EROFS);
    }

    fn link(&self, _req: &Request, _ino: INodeNo, _newparent: INodeNo, _newname: &OsStr, reply: ReplyEntry) {
        reply.error(Errno::EROFS);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.contents(ino.0) {
            Err(e) => reply.error(e),
            Ok(_) if flags.acc_mode() != OpenAccMode::O_RDONLY || flags.0 & libc::O_TRUNC != 0 => {
                reply.error(Errno::EROFS)
            }
            // The contents never change: the page cache may keep them across opens.
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.read(ino.0, offset, size) {
            Ok(data) => reply.data(data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        reply.error(Errno::EROFS);
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.entries(ino.0) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let entries = match self.entries(ino.0) {
            Ok(entries) => entries,
            Err(e) => return reply.error(e),
        };
        // An entry's offset is the position of the next one.
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(skip) {
            if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(0, 0, 0, self.inodes.len() as u64, 0, BLOCK_SIZE, 255, BLOCK_SIZE);
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EROFS);
    }

    fn getxattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::NO_XATTR);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, size: u32, reply: ReplyXattr) {
        if size == 0 {
            reply.size(0);
        } else {
            reply.data(&[]);
        }
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EROFS);
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        match self.inode(ino.0).map(|i| &i.content) {
            None => reply.error(Errno::ENOENT),
            Some(_) if mask.contains(AccessFlags::W_OK) => reply.error(Errno::EROFS),
            Some(Content::File(_)) if mask.contains(AccessFlags::X_OK) => reply.error(Errno::EACCES),
            Some(_) => reply.ok(),
        }
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        reply.error(Errno::EROFS);
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EROFS);
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        _ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        reply.error(Errno::EROFS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{HostInfo, Profile, DEFAULT_PROFILE};

    fn topology(gpus: usize) -> Topology {
        let host = HostInfo { cpu_cores: 8, mem_total: 16 << 30, max_clock_mhz: 3000 };
        Topology::with_host(Profile::by_name(DEFAULT_PROFILE).unwrap(), gpus, host).unwrap()
    }

    fn names(tree: &SysfsTree, path: &str) -> Vec<String> {
        let ino = tree.ino(path).unwrap();
        tree.entries(ino).unwrap().into_iter().map(|(_, _, n)| n.to_string()).collect()
    }

    #[test]
    fn every_file_and_dir_of_the_topology_is_there() {
        let t = topology(2);
        let tree = SysfsTree::from_topology(&t).unwrap();
        assert_eq!(tree.len(), 1 + t.dirs().len() + t.files().len());
        for dir in t.dirs() {
            let ino = tree.ino(&dir).unwrap_or_else(|| panic!("{dir} is missing"));
            let attr = tree.attr(ino).unwrap();
            assert_eq!((attr.kind, attr.perm, attr.uid, attr.gid), (FileType::Directory, DIR_MODE, 0, 0), "{dir}");
            assert_eq!(tree.path(ino), Some(dir.as_str()));
            assert_eq!(tree.contents(ino), Err(Errno::EISDIR));
        }
        for (path, text) in t.files() {
            let ino = tree.ino(&path).unwrap_or_else(|| panic!("{path} is missing"));
            let attr = tree.attr(ino).unwrap();
            assert_eq!((attr.kind, attr.perm, attr.uid, attr.nlink), (FileType::RegularFile, FILE_MODE, 0, 1));
            assert_eq!(attr.size, text.len() as u64, "{path}");
            assert_eq!(tree.contents(ino).unwrap(), text.as_bytes());
            assert_eq!(tree.entries(ino).unwrap_err(), Errno::ENOTDIR);
        }
    }

    #[test]
    fn inode_numbers_are_stable_and_ordered() {
        let t = topology(2);
        let (a, b) = (SysfsTree::from_topology(&t).unwrap(), SysfsTree::from_topology(&t).unwrap());
        let paths: Vec<String> = t.dirs().into_iter().chain(t.files().into_iter().map(|(p, _)| p)).collect();
        for (i, path) in paths.iter().enumerate() {
            // The root is 1; the rest follow dirs() then files().
            assert_eq!(a.ino(path), Some(i as u64 + 2), "{path}");
            assert_eq!(a.ino(path), b.ino(path));
        }
        assert_eq!(a.ino(""), Some(ROOT_INO));
        assert_eq!(a.path(ROOT_INO), Some(""));
        assert_eq!(a.attr(0), None);
        assert_eq!(a.attr(a.len() as u64 + 1), None);
    }

    #[test]
    fn lookup_walks_names_dot_and_dotdot() {
        let tree = SysfsTree::from_topology(&topology(1)).unwrap();
        let topo = tree.lookup(ROOT_INO, OsStr::new("topology")).unwrap();
        let nodes = tree.lookup(topo, OsStr::new("nodes")).unwrap();
        let node1 = tree.lookup(nodes, OsStr::new("1")).unwrap();
        let props = tree.lookup(node1, OsStr::new("properties")).unwrap();
        assert_eq!(tree.path(props), Some("topology/nodes/1/properties"));
        assert_eq!(tree.lookup(node1, OsStr::new("..")), Ok(nodes));
        assert_eq!(tree.lookup(node1, OsStr::new(".")), Ok(node1));
        assert_eq!(tree.lookup(ROOT_INO, OsStr::new("..")), Ok(ROOT_INO));
        assert_eq!(tree.lookup(nodes, OsStr::new("2")), Err(Errno::ENOENT));
        assert_eq!(tree.lookup(props, OsStr::new("x")), Err(Errno::ENOTDIR));
        assert_eq!(tree.lookup(9999, OsStr::new("x")), Err(Errno::ENOENT));
    }

    #[test]
    fn listings_have_dot_dotdot_then_children_in_order() {
        let t = topology(2);
        let tree = SysfsTree::from_topology(&t).unwrap();
        assert_eq!(names(&tree, ""), [".", "..", "topology"]);
        assert_eq!(names(&tree, "topology"), [".", "..", "nodes", "generation_id", "system_properties"]);
        assert_eq!(names(&tree, "topology/nodes"), [".", "..", "0", "1", "2"]);
        assert_eq!(
            names(&tree, "topology/nodes/1"),
            [".", "..", "mem_banks", "caches", "io_links", "p2p_links", "perf", "gpu_id", "name", "properties"]
        );
        assert_eq!(names(&tree, "topology/nodes/1/perf"), [".", ".."]);
        // Every listed child is a dir of dirs() or a file of files() right under it.
        let files: Vec<String> = t.files().into_iter().map(|(p, _)| p).collect();
        for dir in t.dirs() {
            let entries = tree.entries(tree.ino(&dir).unwrap()).unwrap();
            assert_eq!(entries[0].0, tree.ino(&dir).unwrap());
            assert_eq!(Some(entries[1].0), tree.ino(dir.rsplit_once('/').map_or("", |(p, _)| p)));
            let mut want: Vec<String> = t
                .dirs()
                .into_iter()
                .chain(files.iter().cloned())
                .filter(|p| p.rsplit_once('/').is_some_and(|(parent, _)| parent == dir))
                .map(|p| p.rsplit_once('/').unwrap().1.to_string())
                .collect();
            let mut got: Vec<String> = entries[2..].iter().map(|e| e.2.to_string()).collect();
            want.sort();
            got.sort();
            assert_eq!(got, want, "{dir}");
        }
        let nodes = tree.entries(tree.ino("topology/nodes").unwrap()).unwrap();
        assert!(nodes.iter().all(|e| e.1 == FileType::Directory));
        // nlink: 2 + subdirectories.
        assert_eq!(tree.attr(tree.ino("topology/nodes").unwrap()).unwrap().nlink, 2 + 3);
        assert_eq!(tree.attr(ROOT_INO).unwrap().nlink, 3);
    }

    #[test]
    fn reads_honour_offset_and_size() {
        let tree =
            SysfsTree::new(&["a".into()], &[("a/f".into(), "0123456789".into()), ("g".into(), String::new())]).unwrap();
        let f = tree.ino("a/f").unwrap();
        assert_eq!(tree.read(f, 0, 4096).unwrap(), b"0123456789");
        assert_eq!(tree.read(f, 3, 4).unwrap(), b"3456");
        assert_eq!(tree.read(f, 8, 100).unwrap(), b"89");
        assert_eq!(tree.read(f, 10, 1).unwrap(), b"");
        assert_eq!(tree.read(f, u64::MAX, u32::MAX).unwrap(), b"");
        assert_eq!(tree.read(f, 0, 0).unwrap(), b"");
        assert_eq!(tree.read(tree.ino("g").unwrap(), 0, 10).unwrap(), b"");
        assert_eq!(tree.read(tree.ino("a").unwrap(), 0, 10), Err(Errno::EISDIR));
        assert_eq!(tree.read(99, 0, 10), Err(Errno::ENOENT));
        assert_eq!(tree.attr(f).unwrap().blocks, 1);
    }

    #[test]
    fn missing_parents_are_created_and_bad_paths_refused() {
        let tree = SysfsTree::new(&[], &[("x/y/z".into(), "1\n".into())]).unwrap();
        assert_eq!(tree.ino("x"), Some(2));
        assert_eq!(tree.ino("x/y"), Some(3));
        assert_eq!(tree.ino("x/y/z"), Some(4));
        // Listing a directory twice is harmless (mkdir -p).
        assert!(SysfsTree::new(&["d".into(), "d".into(), "d/e".into()], &[]).is_ok());
        for bad in ["", "/abs", "a//b", "a/", "a/../b", ".", "a/./b"] {
            assert_eq!(SysfsTree::new(&[bad.into()], &[]).unwrap_err(), TreeError::BadPath(bad.into()));
        }
        let dup = [("f".to_string(), "1".to_string()), ("f".to_string(), "2".to_string())];
        assert_eq!(SysfsTree::new(&[], &dup).unwrap_err(), TreeError::Duplicate("f".into()));
        assert_eq!(
            SysfsTree::new(&[], &[("f".into(), "1".into()), ("f/g".into(), "2".into())]).unwrap_err(),
            TreeError::NotADirectory("f".into(), "f/g".into())
        );
        assert_eq!(
            SysfsTree::new(&["d".into()], &[("d".into(), "1".into())]).unwrap_err(),
            TreeError::NotADirectory("d".into(), "d".into())
        );
        assert_eq!(
            SysfsTree::new(&[], &[("f".into(), "1".into())]).and_then(|mut t| t.insert("f", None)).unwrap_err(),
            TreeError::NotADirectory("f".into(), "f".into())
        );
    }

    #[test]
    fn a_cpu_only_topology_still_has_the_tree() {
        let t = topology(0);
        let tree = SysfsTree::from_topology(&t).unwrap();
        assert_eq!(names(&tree, "topology/nodes"), [".", "..", "0"]);
        let gen = tree.ino("topology/generation_id").unwrap();
        assert_eq!(tree.contents(gen).unwrap(), format!("{}\n", t.generation_id()).as_bytes());
    }
}
