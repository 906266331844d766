//! The SIGBUS guard: a client that shrinks a file the device maps cannot kill the device.
//!
//! Every backing file is mapped `MAP_SHARED` by the device and by its client, and the client
//! owns the file: it may `ftruncate` it, or punch holes in it and fill the file system. The
//! device's next load or store through its mapping past the new end of file, or into a hole it
//! cannot fill, is a SIGBUS, whose default action ends the device for every client.
//!
//! So each such mapping is entered into a process-wide table, and a SIGBUS handler looks the
//! faulting address up there. When it lies inside a registered mapping, the handler maps
//! anonymous zero pages over the whole mapping (`mmap` with `MAP_FIXED`, a plain system call and
//! async-signal-safe), marks the entry lost and returns: the faulting instruction runs again on
//! the private pages and completes. The owner of the mapping ([`super::shm::SharedRegion`])
//! sees the mark after the access and reports it as a fault of that client; the mapping no
//! longer reaches the file, so every later access fails the same way. A SIGBUS anywhere else is
//! passed to the handler installed before this one, or gets the default action.
//!
//! The table is a fixed array of atomics, because the handler may take no lock and allocate
//! nothing. A slot goes FREE -> CLAIMED (its owner writes the range) -> ACTIVE (the handler may
//! use it) -> FREE (on unmap, before `munmap`). The handler only reads ACTIVE slots; the range of
//! an ACTIVE slot never changes. (Wayland compositors guard client shm pools the same way.)
//!
//! In the embedded device (libhsakmt loaded into a program) the handler is the program's: it is
//! installed once, on the first registration, and chains to whatever the program had installed.
//! A program that replaces it later only loses the guard for its own device.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Once;

/// How many mappings can be guarded at once; a mapping beyond that is refused (ENOMEM).
pub const SLOTS: usize = 65536;

const FREE: u8 = 0;
const CLAIMED: u8 = 1;
const ACTIVE: u8 = 2;

struct Slot {
    state: AtomicU8,
    start: AtomicUsize,
    len: AtomicUsize,
    /// Set by the handler once it replaced the mapping.
    lost: AtomicU8,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot =
    Slot { state: AtomicU8::new(FREE), start: AtomicUsize::new(0), len: AtomicUsize::new(0), lost: AtomicU8::new(0) };

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
/// Where the search for a free slot starts (the slot after the last one taken).
static HINT: AtomicUsize = AtomicUsize::new(0);
/// How many mappings the handler has replaced since the process started.
static LOSSES: AtomicU64 = AtomicU64::new(0);
/// The SIGBUS action installed before ours (null until installed).
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
static INSTALL: Once = Once::new();

/// A mapping under the guard; dropping it (before the `munmap`) takes it out.
#[derive(Debug)]
pub struct Guard {
    slot: usize,
}

/// The guard table is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("more than {SLOTS} shared mappings are in use")]
pub struct TableFull;

impl Guard {
    /// Guards `[start, start + len)`, a shared mapping of a file a client can shrink. Call it
    /// before the first access to the mapping; drop the guard before unmapping it.
    pub fn register(start: *mut u8, len: usize) -> Result<Guard, TableFull> {
        install();
        let first = HINT.load(Ordering::Relaxed);
        for i in (first..SLOTS).chain(0..first) {
            let slot = &TABLE[i];
            if slot.state.compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                slot.start.store(start as usize, Ordering::Relaxed);
                slot.len.store(len, Ordering::Relaxed);
                slot.lost.store(0, Ordering::Relaxed);
                // Release: the handler that sees ACTIVE sees the range.
                slot.state.store(ACTIVE, Ordering::Release);
                HINT.store((i + 1) % SLOTS, Ordering::Relaxed);
                return Ok(Guard { slot: i });
            }
        }
        Err(TableFull)
    }

    /// Whether the client shrank the file under this mapping (the mapping now holds zeros).
    pub fn is_lost(&self) -> bool {
        TABLE[self.slot].lost.load(Ordering::Acquire) != 0
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        TABLE[self.slot].state.store(FREE, Ordering::Release);
    }
}

/// How many guarded mappings have been lost so far: a cheap test of whether any owner needs to
/// look at its mappings.
pub fn losses() -> u64 {
    LOSSES.load(Ordering::Acquire)
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sigaction is plain data; all-zero is a valid value to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = on_sigbus;
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `action.sa_mask` is a valid sigset_t to initialize.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        let previous: &'static mut libc::sigaction = Box::leak(Box::new(
            // SAFETY: as above.
            unsafe { std::mem::zeroed() },
        ));
        // SAFETY: both pointers are valid sigaction structs; the handler below is
        // async-signal-safe. Until PREVIOUS is published, a foreign SIGBUS gets the default
        // action, which is what it had before in the common case.
        let r = unsafe { libc::sigaction(libc::SIGBUS, &action, previous) };
        if r != 0 {
            log::error!("cannot install the SIGBUS guard: {}", std::io::Error::last_os_error());
            return;
        }
        PREVIOUS.store(previous, Ordering::Release);
    });
}

/// The SIGBUS handler. Only atomics, `mmap`, `sigaction` and `raise` here: all async-signal-safe.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t.
    let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    // si_code > 0: the kernel raised it for a memory access (a kill() has code <= 0).
    if code > 0 && replace(addr) {
        return;
    }
    forward(sig, info, context);
}

/// Maps zero pages over the guarded mapping holding `addr`; false if none holds it.
fn replace(addr: usize) -> bool {
    for slot in TABLE.iter() {
        if slot.state.load(Ordering::Acquire) != ACTIVE {
            continue;
        }
        let (start, len) = (slot.start.load(Ordering::Relaxed), slot.len.load(Ordering::Relaxed));
        if addr < start || addr - start >= len {
            continue;
        }
        // SAFETY: `[start, start + len)` is a live mapping of this process (an ACTIVE slot is
        // freed before its munmap), which we own: replacing its pages with private zero pages
        // changes no Rust object's memory except the shared region, which is only ever
        // accessed through raw pointers and atomics. Other threads touching it concurrently
        // see zeros instead of the file, as after any client write.
        let p = unsafe {
            libc::mmap(
                start as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                // NORESERVE: a private writable mapping is charged against the commit limit,
                // and a buffer of several GiB may be over it; a failed MAP_FIXED mmap can leave
                // the range unmapped, turning the lost file into a segfault.
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return false;
        }
        slot.lost.store(1, Ordering::Release);
        LOSSES.fetch_add(1, Ordering::AcqRel);
        return true;
    }
    false
}

/// Hands a SIGBUS that is not ours to the previous handler, or to the default action.
fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let previous = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: PREVIOUS is null or a leaked, never-freed sigaction written before publication.
    let handler = if previous.is_null() { libc::SIG_DFL } else { unsafe { (*previous).sa_sigaction } };
    // SAFETY: as above.
    let flags = if previous.is_null() { 0 } else { unsafe { (*previous).sa_flags } };
    if handler == libc::SIG_IGN {
        // SAFETY: `info` is the kernel's siginfo_t.
        if unsafe { (*info).si_code } <= 0 {
            return; // a SIGBUS someone sent, which the program ignores
        }
        // A fault cannot be ignored: retrying the access would fault forever.
    } else if handler != libc::SIG_DFL {
        if flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the program installed this handler for SIGBUS with SA_SIGINFO: this is
            // the call the kernel would have made.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(handler) };
            f(sig, info, context);
        } else {
            // SAFETY: as above, for a plain sa_handler.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            f(sig);
        }
        return;
    }
    // The default action: restore it and raise again. SIGBUS is blocked while this handler
    // runs, so the signal is delivered (and the process dies with the right status and core)
    // as soon as the handler returns.
    // SAFETY: plain data, zero is valid.
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    // SAFETY: valid pointers; sigaction and raise are async-signal-safe.
    unsafe {
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        libc::raise(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> usize {
        uapi::kfd::PAGE_SIZE as usize
    }

    #[test]
    fn a_truncated_mapping_reads_zeros_and_is_marked_lost() {
        let file = tempfile::tempfile().unwrap();
        file.set_len(2 * page() as u64).unwrap();
        let map = memmap2::MmapOptions::new().len(2 * page()).map_raw(&file).unwrap();
        let guard = Guard::register(map.as_mut_ptr(), map.len()).unwrap();
        let before = losses();
        let word = map.as_mut_ptr().wrapping_add(page()) as *mut u64;
        // SAFETY: in bounds of the live mapping, aligned.
        unsafe { word.write_volatile(7) };
        assert!(!guard.is_lost());
        file.set_len(0).unwrap();
        // SAFETY: as above; the access faults and the guard replaces the mapping.
        let seen = unsafe { word.read_volatile() };
        assert_eq!(seen, 0);
        assert!(guard.is_lost());
        assert!(losses() > before);
        // SAFETY: as above: the private pages take stores now.
        unsafe { word.write_volatile(9) };
        drop(guard);
    }

    /// A lost buffer larger than RAM and swap together (a VRAM buffer on a small machine) is
    /// replaced too: Linux's heuristic overcommit refuses a private writable mapping that size
    /// unless it is MAP_NORESERVE, and the failed MAP_FIXED mmap left the range unmapped (the
    /// node fuzzer's engine then died of SIGSEGV in a 2 GiB guest).
    #[test]
    fn a_lost_mapping_larger_than_memory_is_replaced() {
        // Strict overcommit (mode 2) charges even NORESERVE mappings: there the replacement of
        // a lost buffer is bounded by the commit limit, which this test would exceed.
        if std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "2") {
            eprintln!("skipped: strict overcommit (vm.overcommit_memory = 2)");
            return;
        }
        // SAFETY: plain data, zero is valid, and sysinfo only writes it.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a sysinfo struct.
        assert_eq!(unsafe { libc::sysinfo(&mut info) }, 0);
        let memory = (info.totalram as u64 + info.totalswap as u64) * u64::from(info.mem_unit);
        let len = (2 * memory).next_multiple_of(page() as u64) as usize;
        let file = tempfile::tempfile().unwrap();
        // Sparse: no space is used, and a shared file mapping is not charged.
        file.set_len(len as u64).unwrap();
        let map = memmap2::MmapOptions::new().len(len).map_raw(&file).unwrap();
        let guard = Guard::register(map.as_mut_ptr(), len).unwrap();
        file.set_len(0).unwrap();
        let word = map.as_mut_ptr().wrapping_add(len - page()) as *mut u64;
        // SAFETY: in bounds of the live mapping, aligned; the access faults and the guard
        // replaces the whole mapping with zero pages.
        let seen = unsafe { word.read_volatile() };
        assert_eq!(seen, 0);
        assert!(guard.is_lost());
        drop(guard);
    }

    /// What a child process of [`foreign_sigbus_is_not_swallowed`] does: `chain` installs a
    /// handler of its own first (which exits 42), then the guard; both fault on an unguarded
    /// truncated mapping.
    fn child(chain: bool) {
        extern "C" fn exit_42(_: libc::c_int) {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(42) };
        }
        if chain {
            // SAFETY: plain data, zero is valid; the handler only calls _exit.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = exit_42 as extern "C" fn(libc::c_int) as usize;
            // SAFETY: valid pointers.
            unsafe { libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) };
        }
        let mut x = [0u8; 8];
        let _guard = Guard::register(x.as_mut_ptr(), x.len()).unwrap();
        let file = tempfile::tempfile().unwrap();
        file.set_len(page() as u64).unwrap();
        let map = memmap2::MmapOptions::new().len(page()).map_raw(&file).unwrap();
        file.set_len(0).unwrap();
        // SAFETY: in bounds of the live mapping; the access faults, which is the point.
        let v = unsafe { (map.as_ptr() as *const u64).read_volatile() };
        println!("survived an unguarded SIGBUS, read {v}");
        std::process::exit(0);
    }

    /// A SIGBUS outside every guarded mapping goes to the handler installed before the guard,
    /// and with none, kills the process as it would have without the guard.
    #[test]
    fn foreign_sigbus_is_not_swallowed() {
        use std::os::unix::process::ExitStatusExt;
        const MODE: &str = "CUSE_KFD_SIGBUS_TEST_CHILD";
        match std::env::var(MODE).as_deref() {
            Ok("default") => child(false),
            Ok("chain") => child(true),
            _ => {}
        }
        // A swallowed fault retries forever: the child is given 10 s.
        let run = |mode: &str| {
            let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "memory::sigbus::tests::foreign_sigbus_is_not_swallowed", "--test-threads=1"])
                .env(MODE, mode)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    return status;
                }
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("the {mode} child never got its SIGBUS delivered");
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        let status = run("default");
        assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
        let status = run("chain");
        assert_eq!(status.code(), Some(42), "{status:?}");
    }

    #[test]
    fn slots_are_reused() {
        let mut x = [0u8; 8];
        for _ in 0..2 * SLOTS {
            drop(Guard::register(x.as_mut_ptr(), x.len()).unwrap());
        }
    }
}
