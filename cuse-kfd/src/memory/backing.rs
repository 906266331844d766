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
//! `<pid>` is the directory of the pid's newest context: each context has a directory of its
//! own, so two contexts of one pid (an owner that exec'd and opened again while its old context
//! was being torn down, or a reused pid) never share a file name. When a newer context makes its
//! directory, an older one still there moves aside to `<pid>.<context>`, where its files stay
//! until they are dropped or the context's teardown removes the directory.
//!
//! An IPC-exported buffer (see `memory::ipc`) has one more name, `<runtime dir>/ipc/<share
//! handle as hex>-<flags>` (a directory of the daemon's alone, 0700), which keeps its memory
//! while any holder of the handle lives; an importer gets a hard link of it under its own
//! `render/` name. The embedded device is one per process, so a private store also finds a handle
//! in the `ipc/` of another private store of the same user ([`BackingStore::adopt_shared`]), and
//! holds the device's `peer.sock` (see `crate::peer`).
//!
//! The file is exactly as long as the object and is mapped at file offset 0: a client that
//! would mmap `len` bytes at `offset` maps `len` bytes of the file instead. A doorbell offset
//! carries the queue's byte offset in its low bits; the slice's file is named by the offset with
//! those bits cleared ([`doorbell_slice_offset`]).
//!
//! # Named files, not sealed memfds
//!
//! A sealed memfd would give the client nothing to swap or squat, but a CUSE reply carries bytes
//! only: there is no way to pass a file descriptor to the client through the device node (no
//! SCM_RIGHTS, no pidfd_getfd on the client's behalf without ptrace rights over it). The client
//! would need a second channel to the daemon, which libhsakmt and the ROCm runtime do not have.
//! So memory stays in named files, and the store is built so that naming them gives a client no
//! hold on the daemon:
//!
//! - Every directory the daemon walks is the daemon's own: the runtime directory (0755 or, for
//!   a private one, 0700), `<pid>/`, `<pid>/kfd/` and `<pid>/render/` (0711: a client can reach
//!   a file it knows the name of, list nothing, and create, rename or remove nothing). Only the
//!   files belong to the client (its uid and gid, mode 0600).
//! - A client of another uid than the daemon's gets `<pid>/` at 0700 plus a POSIX access ACL
//!   `user:<its uid>:--x` (shown as 0710): its own uid reaches its files, every other uid cannot
//!   even stat them (EACCES). On a file system without ACLs the directory stays 0711.
//! - Every operation below the runtime directory goes through directory descriptors: `openat2`
//!   with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, `mkdirat`, `fchown`/`fchmod` on the new file's
//!   descriptor, `unlinkat` on the held descriptor of the directory a file was made in. A path
//!   is built only for messages and for the client.
//! - Space is reserved when a file is made (`fallocate`): a full file system answers ENOMEM at
//!   allocation instead of SIGBUS on a later store.
//! - The daemon keeps no descriptor per file: the mapping keeps the file alive, and the file's
//!   directory descriptor (two per context) is what removes it. A file is removed only through
//!   the descriptor of its own context's directory: a context never touches another's files.

use super::shm::SharedRegion;
use nix::errno::Errno;
use nix::fcntl::{FallocateFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use nix::unistd::UnlinkatFlags;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
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
    root.join(pid.to_string()).join(space.dir_name()).join(file_name(offset))
}

fn file_name(offset: u64) -> String {
    format!("{offset:016x}")
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

/// Mode of a shared runtime directory: clients of every uid reach their files through it.
const SHARED_ROOT_MODE: u32 = 0o755;
/// Mode of a client's directories: traversable, not listable, writable by the daemon only.
const CLIENT_DIR_MODE: u32 = 0o711;
/// Mode of a backing file (owned by the client).
const FILE_MODE: u32 = 0o600;
/// How deep `remove_beneath` descends: the store's own tree is two levels deep, and the
/// topology tree a device writes into its runtime directory (`topology/nodes/<n>/caches/<c>/`)
/// five.
const MAX_DEPTH: usize = 8;

/// One context of a client process, as the store knows it (from [`BackingStore::client`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientId {
    pid: u32,
    /// Unique in the store, in the order contexts were made.
    context: u64,
}

impl ClientId {
    pub fn pid(self) -> u32 {
        self.pid
    }
}

/// A context's two directories, held open for its life, and where its directory is now.
#[derive(Debug)]
struct ClientDirs {
    /// The name of the context's directory in the runtime directory: `<pid>`, or
    /// `<pid>.<context>` once a newer context of the pid took `<pid>`.
    name: String,
    kfd: Arc<OwnedFd>,
    render: Arc<OwnedFd>,
}

/// Creates and removes backing files under one runtime directory.
#[derive(Debug)]
pub struct BackingStore {
    root: PathBuf,
    root_fd: OwnedFd,
    /// Made by this store (a fresh private directory), and removed with it.
    private: bool,
    /// On tmpfs: its files are RAM (see [`ram_allows`]).
    in_ram: bool,
    /// Every context from [`client`](Self::client) until [`remove_client`](Self::remove_client),
    /// with its directories once it made them.
    clients: Mutex<HashMap<ClientId, Option<ClientDirs>>>,
    next_context: AtomicU64,
    /// `ipc/` (0700, the daemon's alone), made on first export: one link per shared buffer.
    ipc_dir: Mutex<Option<Arc<OwnedFd>>>,
}

impl BackingStore {
    /// Uses `root`, created (with its parents) if missing. It must be a directory, not a
    /// symlink, owned by this process's user; it is set to mode 0755 so clients can reach
    /// their files. What a previous daemon left of its clients there is removed.
    pub fn new(root: impl Into<PathBuf>) -> io::Result<BackingStore> {
        let root = root.into();
        if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        match std::fs::create_dir(&root) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            r => r?,
        }
        let root_fd = open_own_dir(None, &root)?;
        nix::sys::stat::fchmod(root_fd.as_raw_fd(), Mode::from_bits_truncate(SHARED_ROOT_MODE))?;
        let store = BackingStore::at(root, root_fd, false);
        store.remove_stale_clients();
        Ok(store)
    }

    /// A fresh directory of this process's own, mode 0700, with an unpredictable name in
    /// /dev/shm (or the temporary directory when there is none); it is removed with the store.
    /// Its name carries its process (see [`StoreOwner`]), so that the stores of processes that
    /// died without dropping theirs (killed by a timeout, say: tmpfs memory no one frees) are
    /// removed when a later process of the same user makes its own.
    pub fn private() -> io::Result<BackingStore> {
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let me = StoreOwner::this_process();
        if me.is_some() {
            remove_stores_of_dead_processes(&base);
        }
        let tag = me.map(|o| o.tag()).unwrap_or_default();
        // mkdtemp creates the directory exclusively with mode 0700: a name someone planted fails.
        let root = nix::unistd::mkdtemp(&base.join(format!("{PRIVATE_PREFIX}{tag}XXXXXX")))?;
        let root_fd = open_own_dir(None, &root)?;
        Ok(BackingStore::at(root, root_fd, true))
    }

    fn at(root: PathBuf, root_fd: OwnedFd, private: bool) -> BackingStore {
        let in_ram = in_ram(&root_fd);
        // GPU memory on a disk file system would be written back to disk: tmpfs keeps it in RAM.
        if !in_ram {
            log::warn!(
                "{} is not on tmpfs: backing files of GPU memory there may be written to disk (/run and /dev/shm are tmpfs)",
                root.display()
            );
        }
        BackingStore {
            root,
            root_fd,
            private,
            in_ram,
            clients: Mutex::new(HashMap::new()),
            next_context: AtomicU64::new(0),
            ipc_dir: Mutex::new(None),
        }
    }

    /// Removes every client directory (`<pid>` or `<pid>.<context>`) a previous instance left
    /// behind.
    fn remove_stale_clients(&self) {
        let names = match list(self.root_fd.as_raw_fd()) {
            Ok(names) => names,
            Err(e) => {
                log::warn!("cannot list {}: {e}", self.root.display());
                return;
            }
        };
        for name in names.iter().filter(|n| is_client_dir(n)) {
            log::info!("removing {} left by a previous instance", self.root.join(OsStr::from_bytes(name)).display());
            remove_beneath(self.root_fd.as_raw_fd(), OsStr::from_bytes(name), 0);
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A new context of process `pid`: its files go in a directory of its own, made with its
    /// first file. Until [`remove_client`](Self::remove_client).
    pub fn client(&self, pid: u32) -> ClientId {
        let id = ClientId { pid, context: self.next_context.fetch_add(1, Ordering::Relaxed) };
        self.clients.lock().insert(id, None);
        id
    }

    /// The directory of `space` of context `id`, made on first use. ENOENT for a context that
    /// was removed, or that has a newer context of its pid and made no directory yet.
    fn client_dir(&self, id: ClientId, owner: Owner, space: MmapSpace) -> io::Result<Arc<OwnedFd>> {
        let mut clients = self.clients.lock();
        match clients.get(&id) {
            None => return Err(Errno::ENOENT.into()),
            Some(None) => {
                let made = self.make_client_dirs(&mut clients, id, owner)?;
                clients.insert(id, Some(made));
            }
            Some(Some(_)) => {}
        }
        let dirs = clients[&id].as_ref().expect("made above");
        Ok(match space {
            MmapSpace::Kfd => dirs.kfd.clone(),
            MmapSpace::Render => dirs.render.clone(),
        })
    }

    /// Makes the directories of context `id` at `<pid>`. That name is the pid's newest
    /// context's: an older context there moves aside to `<pid>.<context>`. A context with a
    /// newer one of its pid is stale (a request of it still in flight) and gets ENOENT.
    fn make_client_dirs(
        &self,
        clients: &mut HashMap<ClientId, Option<ClientDirs>>,
        id: ClientId,
        owner: Owner,
    ) -> io::Result<ClientDirs> {
        if clients.keys().any(|k| k.pid == id.pid && k.context > id.context) {
            return Err(Errno::ENOENT.into());
        }
        let name = id.pid.to_string();
        let holder = clients.iter_mut().find(|(k, d)| k.pid == id.pid && d.as_ref().is_some_and(|d| d.name == name));
        if let Some((holder, Some(dirs))) = holder {
            let aside = format!("{}.{}", holder.pid, holder.context);
            let root = self.root_fd.as_raw_fd();
            let flags = nix::fcntl::RenameFlags::RENAME_NOREPLACE;
            nix::fcntl::renameat2(Some(root), name.as_str(), Some(root), aside.as_str(), flags)?;
            log::debug!("pid {}: the directory of an older context moves aside to {aside}", id.pid);
            dirs.name = aside;
        }
        let dir = make_dir(self.root_fd.as_raw_fd(), OsStr::new(&name), CLIENT_DIR_MODE)?;
        restrict_to(&dir, owner)?;
        let kfd = make_dir(dir.as_raw_fd(), OsStr::new(MmapSpace::Kfd.dir_name()), CLIENT_DIR_MODE)?;
        let render = make_dir(dir.as_raw_fd(), OsStr::new(MmapSpace::Render.dir_name()), CLIENT_DIR_MODE)?;
        Ok(ClientDirs { name, kfd: Arc::new(kfd), render: Arc::new(render) })
    }

    /// Creates a zero-filled file of `len` bytes for `offset`, with its space reserved, and
    /// maps it into the device. A full file system is `ENOSPC` (or `EFBIG` past the file size
    /// limit), and leaves nothing behind.
    pub fn create(
        &self,
        client: ClientId,
        owner: Owner,
        space: MmapSpace,
        offset: u64,
        len: usize,
    ) -> io::Result<Arc<BackingFile>> {
        self.make(client, owner, space, offset, len, Space::Reserved)
    }

    /// [`create`](Self::create), but sparse: pages are backed as they are first touched. For
    /// VRAM, whose bank (16 GiB and more per GPU) is accounted against the profile, not RAM: a
    /// file system that fills up under it is a VM fault of that client (the SIGBUS guard), never
    /// the daemon's end.
    pub fn create_sparse(
        &self,
        client: ClientId,
        owner: Owner,
        space: MmapSpace,
        offset: u64,
        len: usize,
    ) -> io::Result<Arc<BackingFile>> {
        self.make(client, owner, space, offset, len, Space::OnTouch)
    }

    fn make(
        &self,
        client: ClientId,
        owner: Owner,
        space: MmapSpace,
        offset: u64,
        len: usize,
        reserve: Space,
    ) -> io::Result<Arc<BackingFile>> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty backing file cannot be mapped"));
        }
        let size = libc::off_t::try_from(len).map_err(|_| io::Error::from(Errno::EFBIG))?;
        if reserve == Space::Reserved && self.in_ram && !ram_allows(len as u64) {
            log::warn!("refusing a backing file of {len} bytes: it would leave the machine short of memory");
            return Err(Errno::ENOSPC.into());
        }
        let dir = self.client_dir(client, owner, space)?;
        let name = file_name(offset);
        let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL;
        let fd = open_beneath(dir.as_raw_fd(), &name, flags, Mode::from_bits_truncate(FILE_MODE))?;
        let made = (|| {
            let reserved = match reserve {
                Space::Reserved => nix::fcntl::fallocate(fd.as_raw_fd(), FallocateFlags::empty(), 0, size),
                Space::OnTouch => nix::unistd::ftruncate(&fd, size),
            };
            match reserved {
                // A file system without fallocate (tmpfs has it): a sparse file, as before.
                Err(Errno::EOPNOTSUPP) => {
                    log::warn!("{} cannot reserve space: backing files there are sparse", self.root.display());
                    nix::unistd::ftruncate(&fd, size)?;
                }
                r => r?,
            }
            nix::sys::stat::fchmod(fd.as_raw_fd(), Mode::from_bits_truncate(FILE_MODE))?;
            chown_if_needed(&fd, owner)?;
            // The mapping keeps the file alive: the descriptor closes at the end of this scope.
            let region = SharedRegion::map(&File::from(fd), len)?;
            Ok::<_, io::Error>(region)
        })();
        match made {
            Ok(region) => {
                // Where the client finds it: the context is its pid's newest while it makes files.
                let path = backing_path(&self.root, client.pid, space, offset);
                Ok(Arc::new(BackingFile { path, dir, name, region }))
            }
            Err(e) => {
                let _ = nix::unistd::unlinkat(Some(dir.as_raw_fd()), name.as_str(), UnlinkatFlags::NoRemoveDir);
                Err(e)
            }
        }
    }

    /// A link to `file` in the store's `ipc/` directory, under a name of its own: what an IPC
    /// share handle keeps, so the memory outlives its exporter's buffer and context (amdkfd's
    /// kfd_ipc_obj holds the BO's dma-buf the same way). Removed when dropped.
    pub fn share(&self, file: &BackingFile, name: &str) -> io::Result<SharedFile> {
        let dir = self.ipc_dir()?;
        let (from, to) = (file.dir.as_raw_fd(), dir.as_raw_fd());
        nix::unistd::linkat(Some(from), file.name.as_str(), Some(to), name, nix::fcntl::AtFlags::empty())?;
        let len = file.region.len();
        Ok(SharedFile { dir, name: name.to_owned(), len, readers: Mutex::new(Default::default()) })
    }

    /// This store's `ipc/`, made on first use.
    fn ipc_dir(&self) -> io::Result<Arc<OwnedFd>> {
        let mut ipc = self.ipc_dir.lock();
        if ipc.is_none() {
            *ipc = Some(Arc::new(make_dir(self.root_fd.as_raw_fd(), OsStr::new(IPC_DIR), 0o700)?));
        }
        Ok(ipc.clone().expect("made above"))
    }

    /// The shared file whose name `wanted` accepts, found in the `ipc/` of another private store
    /// of this user and linked into this store's `ipc/` under the same name, so that it stays
    /// while this store holds it (the [`SharedFile`] returned removes that link when dropped).
    ///
    /// Embedded devices are one per process and their stores private, so IPC between the
    /// processes of a user goes through their stores: the handle in the name is the capability,
    /// as in the device's own table, and another user's stores are never looked in (they are
    /// 0700, and [`open_own_dir`] checks the owner). A daemon's store, which serves every user,
    /// never looks: its table holds every handle of its clients. `Ok(None)`: nowhere.
    pub fn adopt_shared(&self, wanted: impl Fn(&str) -> bool) -> io::Result<Option<SharedFile>> {
        for (_, _, store_fd) in self.other_private_stores()? {
            let Ok(ipc) = open_own_dir(Some(store_fd.as_raw_fd()), Path::new(IPC_DIR)) else { continue };
            let Ok(names) = list(ipc.as_raw_fd()) else { continue };
            let Some(name) = names.iter().filter_map(|n| std::str::from_utf8(n).ok()).find(|n| wanted(n)) else {
                continue;
            };
            let dir = self.ipc_dir()?;
            match nix::unistd::linkat(
                Some(ipc.as_raw_fd()),
                name,
                Some(dir.as_raw_fd()),
                name,
                nix::fcntl::AtFlags::empty(),
            ) {
                // Its last holder in that process let go between the listing and the link.
                Err(Errno::ENOENT) => continue,
                r => r?,
            }
            // From here the link goes again when `shared` drops, on any error.
            let mut shared = SharedFile { dir, name: name.to_owned(), len: 0, readers: Mutex::new(Default::default()) };
            // Opened as an import opens it: a symlink planted under the name is refused.
            let fd = open_beneath(shared.dir.as_raw_fd(), name, OFlag::O_RDONLY, Mode::empty())?;
            let st = nix::sys::stat::fstat(fd.as_raw_fd())?;
            let len = usize::try_from(st.st_size).map_err(|_| Errno::EFBIG)?;
            if st.st_mode & libc::S_IFMT != libc::S_IFREG
                || len == 0
                || !(len as u64).is_multiple_of(uapi::kfd::PAGE_SIZE)
            {
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{name} is not a shared buffer")));
            }
            shared.len = len;
            return Ok(Some(shared));
        }
        Ok(None)
    }

    /// Whether this is a fresh private store ([`BackingStore::private`]): an embedded device's.
    pub fn is_private(&self) -> bool {
        self.private
    }

    /// The peer socket (see [`crate::peer`]) of the embedded device living in process `pid` of
    /// this pid namespace and user, if it has one; a private store's question only (a daemon
    /// serves its clients itself).
    pub fn peer_socket_of(&self, pid: u32) -> Option<PathBuf> {
        let ns = pid_namespace()?;
        self.other_private_stores().ok()?.into_iter().find_map(|(owner, path, _)| {
            let socket = path.join(crate::peer::SOCKET_NAME);
            (owner.pid == pid && owner.pid_ns == ns && owner.is_alive() && socket.exists()).then_some(socket)
        })
    }

    /// The other private stores beside this one that this user owns: each one's owner (as its
    /// name says), path and directory. None for a daemon's store.
    fn other_private_stores(&self) -> io::Result<Vec<(StoreOwner, PathBuf, OwnedFd)>> {
        let (true, Some(base), Some(me)) = (self.private, self.root.parent(), self.root.file_name()) else {
            return Ok(Vec::new());
        };
        let base_fd = open_dir(None, base)?;
        Ok(list(base_fd.as_raw_fd())?
            .into_iter()
            .filter(|name| name.as_slice() != me.as_bytes())
            .filter_map(|name| {
                let owner = StoreOwner::parse(&name)?;
                let name = OsStr::from_bytes(&name);
                let fd = open_own_dir(Some(base_fd.as_raw_fd()), Path::new(name)).ok()?;
                Some((owner, base.join(name), fd))
            })
            .collect())
    }

    /// The shared memory of `shared` as a backing file of context `client` at `offset` in its
    /// render space: a hard link in the client's own directory, so that its path scheme reaches
    /// the same pages. A client of another uid than the file's is granted read and write on
    /// the file by a POSIX ACL entry (the share handle is the capability, as in amdkfd).
    pub fn import(
        &self,
        shared: &SharedFile,
        client: ClientId,
        owner: Owner,
        offset: u64,
    ) -> io::Result<Arc<BackingFile>> {
        let dir = self.client_dir(client, owner, MmapSpace::Render)?;
        let fd = open_beneath(shared.dir.as_raw_fd(), &shared.name, OFlag::O_RDWR, Mode::empty())?;
        grant(&fd, shared, owner.uid)?;
        let name = file_name(offset);
        let (from, to) = (shared.dir.as_raw_fd(), dir.as_raw_fd());
        nix::unistd::linkat(Some(from), shared.name.as_str(), Some(to), name.as_str(), nix::fcntl::AtFlags::empty())?;
        match SharedRegion::map(&File::from(fd), shared.len) {
            Ok(region) => {
                let path = backing_path(&self.root, client.pid, MmapSpace::Render, offset);
                Ok(Arc::new(BackingFile { path, dir, name, region }))
            }
            Err(e) => {
                let _ = nix::unistd::unlinkat(Some(dir.as_raw_fd()), name.as_str(), UnlinkatFlags::NoRemoveDir);
                Err(e)
            }
        }
    }

    /// Removes context `id` and its directory with whatever is left in it (its files normally
    /// went with their BackingFiles; one still held somewhere stays valid, as an unlinked file,
    /// and dropping it later removes nothing). Another context's directory is never touched.
    pub fn remove_client(&self, id: ClientId) {
        let mut clients = self.clients.lock();
        if let Some(Some(dirs)) = clients.remove(&id) {
            remove_beneath(self.root_fd.as_raw_fd(), OsStr::new(&dirs.name), 0);
        }
    }
}

impl Drop for BackingStore {
    fn drop(&mut self) {
        if !self.private {
            return;
        }
        let (Some(parent), Some(name)) = (self.root.parent(), self.root.file_name()) else { return };
        match open_dir(None, parent) {
            Ok(parent) => remove_beneath(parent.as_raw_fd(), name, 0),
            Err(e) => log::warn!("cannot remove {}: {e}", self.root.display()),
        }
    }
}

fn in_ram(dir: &OwnedFd) -> bool {
    nix::sys::statfs::fstatfs(dir).is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
}

/// Whether `len` more bytes of tmpfs leave the machine at least 1/16 of its memory available.
/// tmpfs takes its pages from RAM and its default size (half of RAM, /dev/shm often all of it)
/// does not bound what several devices reserve together: without this, allocations of two
/// programs (or two embedded devices) each within their own limits could bring in the OOM
/// killer, which takes whatever it likes. Counting MemAvailable makes every store on the machine
/// share one bound; an allocation it refuses is ENOMEM to its client, as on a full GPU.
/// /proc/meminfo is read with one pread of a file kept open rather than open, fstat, reads and
/// close each time: a read at offset 0 regenerates it (seq_file), so the figure is as fresh.
/// Its first lines are MemTotal, MemFree and MemAvailable (Linux 3.14 fs/proc/meminfo.c), well
/// within the buffer; only whole lines are parsed. (sysinfo(2) is one syscall too, but has no
/// MemAvailable: free plus buffer RAM leaves out the reclaimable page cache.)
fn ram_allows(len: u64) -> bool {
    static MEMINFO: std::sync::OnceLock<Option<File>> = std::sync::OnceLock::new();
    let Some(meminfo) = MEMINFO.get_or_init(|| File::open("/proc/meminfo").ok()) else { return true };
    let mut buf = [0u8; 512];
    let Ok(n) = std::os::unix::fs::FileExt::read_at(meminfo, &mut buf, 0) else { return true };
    let whole = buf[..n].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let Ok(text) = std::str::from_utf8(&buf[..whole]) else { return true };
    let kib = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    let (Some(total), Some(available)) = (kib("MemTotal:"), kib("MemAvailable:")) else { return true };
    available.saturating_mul(1024).saturating_sub(len) >= total.saturating_mul(1024) / 16
}

/// When a backing file's space is taken from the file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    /// At creation (`fallocate`): a full file system is ENOMEM then, not a fault later.
    Reserved,
    /// As pages are first touched (a sparse file).
    OnTouch,
}

/// Whether `name` is a client directory's: `<pid>` or `<pid>.<context>`, both decimal.
fn is_client_dir(name: &[u8]) -> bool {
    let number = |n: &[u8]| !n.is_empty() && n.iter().all(u8::is_ascii_digit);
    match name.iter().position(|&b| b == b'.') {
        None => number(name),
        Some(dot) => number(&name[..dot]) && number(&name[dot + 1..]),
    }
}

/// Hands the file to the client's uid and gid when the daemon runs as another user (root).
fn chown_if_needed(fd: &OwnedFd, owner: Owner) -> nix::Result<()> {
    let me = nix::unistd::geteuid().as_raw();
    if me != 0 || owner.uid == me {
        return Ok(());
    }
    nix::unistd::fchown(
        fd.as_raw_fd(),
        Some(nix::unistd::Uid::from_raw(owner.uid)),
        Some(nix::unistd::Gid::from_raw(owner.gid)),
    )
}

/// Lets only `owner`'s uid (besides the daemon) search a client's directory, when the client is
/// of another uid: mode 0700 and the POSIX access ACL `user::rwx user:<uid>:--x group::---
/// mask::--x other::---`, as the xattr `system.posix_acl_access` (its layout:
/// include/uapi/linux/posix_acl_xattr.h, v6.1: a version word 2, then entries of tag, perm and
/// id, sorted by tag). Where the file system has no ACLs (EOPNOTSUPP), the directory stays 0711.
fn restrict_to(dir: &OwnedFd, owner: Owner) -> io::Result<()> {
    let me = nix::unistd::geteuid().as_raw();
    if me != 0 || owner.uid == me {
        return Ok(());
    }
    let entries = [
        (ACL_USER_OBJ, 7u16, ACL_UNDEFINED_ID),
        (ACL_USER, 1, owner.uid),
        (ACL_GROUP_OBJ, 0, ACL_UNDEFINED_ID),
        (ACL_MASK, 1, ACL_UNDEFINED_ID),
        (ACL_OTHER, 0, ACL_UNDEFINED_ID),
    ];
    nix::sys::stat::fchmod(dir.as_raw_fd(), Mode::from_bits_truncate(0o700))?;
    match set_access_acl(dir, &entries) {
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            log::warn!(
                "the runtime directory's file system has no ACLs: client directories stay searchable by every uid"
            );
            nix::sys::stat::fchmod(dir.as_raw_fd(), Mode::from_bits_truncate(CLIENT_DIR_MODE))?;
            Ok(())
        }
        r => r,
    }
}

const ACL_USER_OBJ: u16 = 0x01;
const ACL_USER: u16 = 0x02;
const ACL_GROUP_OBJ: u16 = 0x04;
const ACL_MASK: u16 = 0x10;
const ACL_OTHER: u16 = 0x20;
const ACL_UNDEFINED_ID: u32 = u32::MAX;

/// Sets the POSIX access ACL of `fd` to `entries` (tag, perm, id), sorted by tag and, for
/// `ACL_USER`, by uid: the xattr `system.posix_acl_access` (its layout:
/// include/uapi/linux/posix_acl_xattr.h, v6.1: a version word 2, then the entries).
fn set_access_acl(fd: &OwnedFd, entries: &[(u16, u16, u32)]) -> io::Result<()> {
    let mut acl = 2u32.to_le_bytes().to_vec();
    for &(tag, perm, id) in entries {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
        acl.extend_from_slice(&id.to_le_bytes());
    }
    // SAFETY: `fd` is an open descriptor; the name is a NUL-terminated string and the value
    // a buffer of the length given, both alive for the call, which only reads them.
    let r = unsafe {
        libc::fsetxattr(fd.as_raw_fd(), c"system.posix_acl_access".as_ptr(), acl.as_ptr().cast(), acl.len(), 0)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Opens directory `name` beneath `parent` (or `name` itself, when `parent` is `None`),
/// following no symlink and never leaving `parent`.
fn open_dir(parent: Option<RawFd>, name: &Path) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = match parent {
        Some(parent) => nix::fcntl::openat2(
            parent,
            name,
            OpenHow::new().flags(flags).resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS),
        )?,
        // The runtime directory itself: an absolute path an administrator chose; only its last
        // component must not be a symlink.
        None => nix::fcntl::open(name, flags, Mode::empty())?,
    };
    // SAFETY: the descriptor was just returned by open/openat2 and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `open_dir`, and checks the directory belongs to this process's user.
fn open_own_dir(parent: Option<RawFd>, name: &Path) -> io::Result<OwnedFd> {
    let fd = open_dir(parent, name)?;
    let st = nix::sys::stat::fstat(fd.as_raw_fd())?;
    let me = nix::unistd::geteuid().as_raw();
    if st.st_uid != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} belongs to uid {}, not to uid {me}", name.display(), st.st_uid),
        ));
    }
    Ok(fd)
}

/// Opens `name` in `dir` with `flags` (and `mode`, if it creates): never through a symlink, and
/// never outside `dir`, whatever the name holds.
fn open_beneath(dir: RawFd, name: &str, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .mode(mode)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = nix::fcntl::openat2(dir, name, how)?;
    // SAFETY: openat2 just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes directory `name` in `parent` with `mode`, replacing whatever was there (a stale
/// directory, a file, a symlink: removed without being followed).
fn make_dir(parent: RawFd, name: &OsStr, mode: u32) -> io::Result<OwnedFd> {
    let mode = Mode::from_bits_truncate(mode);
    match nix::sys::stat::mkdirat(Some(parent), name, mode) {
        Err(Errno::EEXIST) => {
            remove_beneath(parent, name, 0);
            nix::sys::stat::mkdirat(Some(parent), name, mode)?;
        }
        r => r?,
    }
    let fd = open_own_dir(Some(parent), Path::new(name))?;
    // The umask may have narrowed the mode.
    nix::sys::stat::fchmod(fd.as_raw_fd(), mode)?;
    Ok(fd)
}

/// The names in directory `dir`, without "." and "..".
fn list(dir: RawFd) -> nix::Result<Vec<Vec<u8>>> {
    let fd =
        nix::fcntl::openat(Some(dir), ".", OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
    let mut d = nix::dir::Dir::from_fd(fd)?;
    let mut names = Vec::new();
    for entry in d.iter() {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(name);
        }
    }
    Ok(names)
}

/// Private stores are `<base>/cuse-kfd-<owner tag>XXXXXX`.
const PRIVATE_PREFIX: &str = "cuse-kfd-";

/// The process a private store belongs to, as its name says: `<pid namespace>.<pid>.<start
/// time>-`. The start time tells a reused pid from the owner; the namespace keeps a process from
/// judging pids of another pid namespace (a program `cuse-kfd run` started in its own), which it
/// cannot see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StoreOwner {
    pid_ns: u64,
    pid: u32,
    start: u64,
}

impl StoreOwner {
    fn this_process() -> Option<StoreOwner> {
        let pid = std::process::id();
        Some(StoreOwner { pid_ns: pid_namespace()?, pid, start: crate::owner::start_time(pid).ok()? })
    }

    fn tag(&self) -> String {
        format!("{}.{}.{}-", self.pid_ns, self.pid, self.start)
    }

    /// The owner a store's directory name gives, if it has one.
    fn parse(name: &[u8]) -> Option<StoreOwner> {
        let tag = std::str::from_utf8(name.strip_prefix(PRIVATE_PREFIX.as_bytes())?).ok()?;
        let (tag, _random) = tag.rsplit_once('-')?;
        let mut parts = tag.split('.');
        let owner = StoreOwner {
            pid_ns: parts.next()?.parse().ok()?,
            pid: parts.next()?.parse().ok()?,
            start: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(owner)
    }

    fn is_alive(&self) -> bool {
        crate::owner::start_time(self.pid).is_ok_and(|t| t == self.start)
    }
}

/// The inode of this process's pid namespace (`/proc/self/ns/pid` reads `pid:[N]`).
fn pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    link.to_str()?.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Removes the private stores in `base` of this user whose process, in this pid namespace, has
/// died. Only this user's directories are touched (`/dev/shm` is sticky: no one else can swap
/// them), and only through descriptors.
fn remove_stores_of_dead_processes(base: &Path) {
    let Some(ns) = pid_namespace() else { return };
    let Ok(base_fd) = open_dir(None, base) else { return };
    let Ok(names) = list(base_fd.as_raw_fd()) else { return };
    for name in names {
        let Some(owner) = StoreOwner::parse(&name) else { continue };
        let name = OsStr::from_bytes(&name);
        if owner.pid_ns != ns || owner.is_alive() || open_own_dir(Some(base_fd.as_raw_fd()), Path::new(name)).is_err() {
            continue;
        }
        log::info!(
            "removing {}: the private backing store of pid {}, which has died",
            base.join(name).display(),
            owner.pid
        );
        // Quietly: every store made after this one tries again what could not go now, and a
        // program's stderr is not the place for each attempt (a pipe nobody reads would fill).
        remove_beneath_logged(base_fd.as_raw_fd(), name, 0, log::Level::Debug);
    }
}

/// Removes entry `name` of `parent` and, if it is a directory, everything in it, through
/// descriptors: a symlink is removed itself, never followed.
fn remove_beneath(parent: RawFd, name: &OsStr, depth: usize) {
    remove_beneath_logged(parent, name, depth, log::Level::Warn)
}

/// [`remove_beneath`], reporting what it cannot remove at `level`.
fn remove_beneath_logged(parent: RawFd, name: &OsStr, depth: usize, level: log::Level) {
    let result = match open_dir(Some(parent), Path::new(name)) {
        Ok(dir) => {
            if depth >= MAX_DEPTH {
                log::log!(level, "not removing {name:?}: nested deeper than a backing store makes");
                return;
            }
            match list(dir.as_raw_fd()) {
                Ok(names) => {
                    for n in names {
                        remove_beneath_logged(dir.as_raw_fd(), OsStr::from_bytes(&n), depth + 1, level);
                    }
                }
                Err(e) => log::log!(level, "cannot list {name:?}: {e}"),
            }
            nix::unistd::unlinkat(Some(parent), name, UnlinkatFlags::RemoveDir)
        }
        // Not a directory (ENOTDIR), or a symlink (ELOOP): remove the entry itself.
        Err(Errno::ENOTDIR | Errno::ELOOP) => nix::unistd::unlinkat(Some(parent), name, UnlinkatFlags::NoRemoveDir),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) | Err(Errno::ENOENT) => {}
        Err(e) => log::log!(level, "cannot remove {name:?}: {e}"),
    }
}

/// The store's directory of shared (IPC-exported) memory.
const IPC_DIR: &str = "ipc";

/// A buffer's memory as an IPC share handle keeps it: a link in the store's `ipc/` directory,
/// which no client can reach. Removed when dropped.
#[derive(Debug)]
pub struct SharedFile {
    dir: Arc<OwnedFd>,
    name: String,
    len: usize,
    /// The uids besides the file's owner granted access by ACL (importers of other uids).
    readers: Mutex<std::collections::BTreeSet<u32>>,
}

impl SharedFile {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for SharedFile {
    fn drop(&mut self) {
        match nix::unistd::unlinkat(Some(self.dir.as_raw_fd()), self.name.as_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => log::warn!("cannot remove shared file {}: {e}", self.name),
        }
    }
}

/// Lets `uid` read and write the shared file `fd` when it is not the file's owner: the access ACL
/// `user::rw- user:<uid>:rw-... group::--- mask::rw- other::---` over every uid granted so far.
/// A daemon not running as root keeps every file its own and gives no other uid access (as for
/// its clients' own files, see [`chown_if_needed`]).
fn grant(fd: &OwnedFd, shared: &SharedFile, uid: u32) -> io::Result<()> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd())?;
    if nix::unistd::geteuid().as_raw() != 0 || st.st_uid == uid {
        return Ok(());
    }
    let mut readers = shared.readers.lock();
    if !readers.insert(uid) {
        return Ok(());
    }
    let mut entries = vec![(ACL_USER_OBJ, 6u16, ACL_UNDEFINED_ID)];
    entries.extend(readers.iter().map(|&u| (ACL_USER, 6, u)));
    entries.extend([
        (ACL_GROUP_OBJ, 0, ACL_UNDEFINED_ID),
        (ACL_MASK, 6, ACL_UNDEFINED_ID),
        (ACL_OTHER, 0, ACL_UNDEFINED_ID),
    ]);
    set_access_acl(fd, &entries).inspect_err(|e| {
        readers.remove(&uid);
        log::warn!("cannot grant uid {uid} access to a shared buffer (an ACL is needed across uids): {e}");
    })
}

/// One backing file, mapped into the device; the file is removed when the last user drops it.
#[derive(Debug)]
pub struct BackingFile {
    /// Where the client finds it (for messages; the daemon never opens by this path).
    path: PathBuf,
    /// The directory the file was made in, and its name there.
    dir: Arc<OwnedFd>,
    name: String,
    region: SharedRegion,
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
        match nix::unistd::unlinkat(Some(self.dir.as_raw_fd()), self.name.as_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => log::warn!("cannot remove backing file {}: {e}", self.path.display()),
        }
    }
}

#[cfg(test)]
mod tests;
