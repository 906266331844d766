//! Whether a client may reach another process's memory: the kernel's ptrace access rule for
//! PTRACE_MODE_ATTACH_REALCREDS, which ROCm's amdkfd applies to CROSS_MEMORY_COPY through
//! mm_access, decided here from /proc because the daemon is not the caller.
//!
//! The rule (Linux v6.1 kernel/ptrace.c `__ptrace_may_access`, security/yama/yama_lsm.c):
//! a thread group may always reach itself; otherwise the caller's real uid must equal the
//! target's real, effective and saved uids and its real gid the target's three gids, and the
//! target must be dumpable; CAP_SYS_PTRACE in the target's user namespace stands in for both.
//! Then Yama, if the kernel has it: scope 1 also wants the target to descend from the caller,
//! scope 2 the capability, scope 3 refuses everything.
//!
//! What /proc cannot show is decided the safe way: a PR_SET_PTRACER exception is never assumed,
//! the capability counts only when caller and target share a user namespace and the request's
//! uid is the caller's real uid, and other LSMs (AppArmor, SELinux) are not consulted, so a
//! copy they would forbid is allowed here only if the rule above allows it too.

use crate::owner::start_time;
use nix::errno::Errno;
use std::os::unix::fs::MetadataExt;

/// CAP_SYS_PTRACE (linux/capability.h).
const CAP_SYS_PTRACE: u32 = 19;
/// How far up the parent chain the Yama descendant walk looks.
const MAX_ANCESTRY: usize = 256;

/// What /proc/<pid>/status says of a process's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Creds {
    /// Real, effective, saved, filesystem.
    uids: [u32; 4],
    gids: [u32; 4],
    cap_eff: u64,
    ppid: u32,
    /// Whether it has an mm (a zombie or a kernel thread has none: mm_access finds nothing).
    has_mm: bool,
}

fn parse_status(s: &str) -> Option<Creds> {
    let field = |name: &str| s.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    let ids = |name: &str| -> Option<[u32; 4]> {
        let v: Vec<u32> = field(name)?.split_whitespace().map(|w| w.parse().ok()).collect::<Option<_>>()?;
        v.try_into().ok()
    };
    Some(Creds {
        uids: ids("Uid:")?,
        gids: ids("Gid:")?,
        cap_eff: u64::from_str_radix(field("CapEff:")?, 16).ok()?,
        ppid: field("PPid:")?.parse().ok()?,
        has_mm: field("VmSize:").is_some(),
    })
}

fn status(pid: u32) -> Result<Creds, Errno> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|_| Errno::ESRCH)?;
    parse_status(&s).ok_or(Errno::ESRCH)
}

fn namespace(pid: Option<u32>, kind: &str) -> Option<std::path::PathBuf> {
    let p = match pid {
        Some(pid) => format!("/proc/{pid}/ns/{kind}"),
        None => format!("/proc/self/ns/{kind}"),
    };
    std::fs::read_link(p).ok()
}

/// The Yama scope, 0 without Yama; an unreadable setting counts as the strictest.
fn yama_scope() -> u32 {
    match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        Ok(s) => s.trim().parse().unwrap_or(3),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(_) => 3,
    }
}

/// Whether `target` descends from `ancestor` (parent links, as Yama's task_is_descendant).
fn descends_from(target: &Creds, ancestor: u32) -> bool {
    let mut p = target.ppid;
    for _ in 0..MAX_ANCESTRY {
        if p == ancestor {
            return true;
        }
        if p <= 1 {
            return false;
        }
        match status(p) {
            Ok(c) => p = c.ppid,
            Err(_) => return false,
        }
    }
    false
}

/// Who asks: the process a context is bound to, and the uid and gid its request carried.
#[derive(Debug, Clone, Copy)]
pub struct Requester {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Whether `caller` may attach to process `target` (both pids in the daemon's namespace):
/// ESRCH if the target is gone or has no memory, or the caller's pids are of another pid
/// namespace; EPERM if the rule refuses. `target_start`, if given, is the start time the
/// target must still have once its credentials are read (so that they were its, not those of
/// a process that got the pid since).
pub fn may_attach(caller: Requester, target: u32, target_start: Option<u64>) -> Result<(), Errno> {
    if caller.pid == target {
        return Ok(());
    }
    // The request names the target in the caller's pid namespace; only the daemon's own
    // namespace numbers processes as the device knows them.
    let pid_ns = namespace(Some(caller.pid), "pid");
    if pid_ns.is_none() || pid_ns != namespace(None, "pid") {
        return Err(Errno::ESRCH);
    }
    if target == 0 || target > i32::MAX as u32 {
        return Err(Errno::ESRCH);
    }
    let t = status(target)?;
    let me = status(caller.pid).map_err(|_| Errno::EPERM)?;
    let dump_owner = std::fs::metadata(format!("/proc/{target}")).map_err(|_| Errno::ESRCH)?.uid();
    let user_ns = namespace(Some(target), "user");
    let same_ns = user_ns.is_some() && user_ns == namespace(Some(caller.pid), "user");
    if let Some(started) = target_start {
        if start_time(target).ok() != Some(started) {
            return Err(Errno::ESRCH);
        }
    }
    if !t.has_mm {
        return Err(Errno::ESRCH);
    }
    let real_uid = me.uids[0];
    let capable = same_ns && caller.uid == real_uid && me.cap_eff & (1 << CAP_SYS_PTRACE) != 0;
    let ids_match = caller.uid == real_uid
        && caller.gid == me.gids[0]
        && t.uids[..3].iter().all(|u| *u == real_uid)
        && t.gids[..3].iter().all(|g| *g == me.gids[0]);
    // A process that is not dumpable has its /proc directory owned by root (task_dump_owner).
    let dumpable = dump_owner == t.uids[1];
    let credentials_ok = capable || (ids_match && dumpable);
    if !credentials_ok {
        return Err(Errno::EPERM);
    }
    let yama_ok = match yama_scope() {
        0 => true,
        1 => capable || descends_from(&t, caller.pid),
        2 => capable,
        _ => false,
    };
    if yama_ok {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tsh\nState:\tS (sleeping)\nPPid:\t41\nUid:\t1000\t1001\t1002\t1003\n\
        Gid:\t10\t11\t12\t13\nVmSize:\t  2480 kB\nCapEff:\t0000000000080000\n";

    #[test]
    fn status_gives_ids_caps_and_the_mm() {
        let c = parse_status(STATUS).unwrap();
        assert_eq!(c.uids, [1000, 1001, 1002, 1003]);
        assert_eq!(c.gids, [10, 11, 12, 13]);
        assert_eq!(c.cap_eff, 1 << CAP_SYS_PTRACE);
        assert_eq!(c.ppid, 41);
        assert!(c.has_mm);
        let zombie = STATUS.replace("VmSize:\t  2480 kB\n", "");
        assert!(!parse_status(&zombie).unwrap().has_mm);
        assert!(parse_status("Name:\tx\n").is_none());
    }

    #[test]
    fn a_process_may_attach_to_itself_and_not_to_a_missing_pid() {
        let me = std::process::id();
        let r = Requester { pid: me, uid: nix::unistd::getuid().as_raw(), gid: nix::unistd::getgid().as_raw() };
        assert_eq!(may_attach(r, me, None), Ok(()));
        assert_eq!(may_attach(r, 0, None), Err(Errno::ESRCH));
        assert_eq!(may_attach(r, i32::MAX as u32, None), Err(Errno::ESRCH));
    }

    #[test]
    fn a_stale_start_time_is_no_such_process() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let me = std::process::id();
        let r = Requester { pid: me, uid: nix::unistd::getuid().as_raw(), gid: nix::unistd::getgid().as_raw() };
        let started = start_time(child.id()).unwrap();
        assert_eq!(may_attach(r, child.id(), Some(started + 1)), Err(Errno::ESRCH));
        // Our own child, of our uid: allowed (under Yama scope 1 too, as a descendant).
        if yama_scope() <= 1 {
            assert_eq!(may_attach(r, child.id(), Some(started)), Ok(()));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
