//! The one way the thunk, libhsakmt.so.1 and the runtime shim read their environment variables
//! (CUSE_KFD_*, HSA_*, HSAKMT_*): as glibc's `secure_getenv`, nothing in a process the kernel
//! marked AT_SECURE (setuid or setgid, file capabilities, an LSM transition). Such a process
//! runs with its invoker's environment but more privilege than its invoker: the device it opens,
//! the embedded device's configuration and the log filter must not be the invoker's to choose.

use std::ffi::OsString;

/// The variable `name`, or `None` when it is unset or this process is AT_SECURE.
pub fn var_os(name: &str) -> Option<OsString> {
    read(name, at_secure(), |n| std::env::var_os(n))
}

/// [`var_os`] as UTF-8 (`None` if it is not).
pub fn var(name: &str) -> Option<String> {
    var_os(name).and_then(|v| v.into_string().ok())
}

/// Whether the kernel started this process AT_SECURE (the auxiliary vector's AT_SECURE entry).
fn at_secure() -> bool {
    // SAFETY: getauxval reads the auxiliary vector the kernel placed at process start; it takes
    // a plain integer, touches no memory of ours, and answers 0 for an entry that is absent.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// `name` through `get`, unless `secure` (the seam the tests use to play a setuid process).
fn read(name: &str, secure: bool, get: impl FnOnce(&str) -> Option<OsString>) -> Option<OsString> {
    if secure {
        None
    } else {
        get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment where every variable is set.
    fn everything_set(name: &str) -> Option<OsString> {
        Some(OsString::from(format!("{name}-value")))
    }

    #[test]
    fn l6_secure_getenv_ignores_the_environment_of_an_at_secure_process() {
        for name in ["CUSE_KFD_DEVICE", "CUSE_KFD_EMBEDDED", "HSA_OVERRIDE_GFX_VERSION", "HSAKMT_LOG"] {
            assert_eq!(read(name, true, everything_set), None, "{name} read in an AT_SECURE process");
            assert_eq!(read(name, false, everything_set), Some(OsString::from(format!("{name}-value"))));
        }
    }

    /// As root: a setgid copy of this test binary starts AT_SECURE and reads none of the
    /// variables its invoker set (as non-root there is no group to give it: nothing to run).
    #[test]
    fn l6_a_setgid_process_ignores_the_thunks_variables() {
        use std::os::unix::fs::PermissionsExt;
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("setgid-test");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        std::os::unix::fs::chown(&exe, None, Some(65534)).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o2755)).unwrap();
        let report = |exe: &std::path::Path| {
            let out = std::process::Command::new(exe)
                .args(["--exact", "secure_env::tests::child_reports_what_it_reads", "--include-ignored", "--nocapture"])
                .env("CUSE_KFD_DEVICE", "/planted/kfd")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
            stdout.lines().find(|l| l.starts_with("AT_SECURE=")).expect("the child's report").to_string()
        };
        assert_eq!(report(&exe), "AT_SECURE=true CUSE_KFD_DEVICE=None");
        // The same binary without the setgid bit reads it.
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(report(&exe), "AT_SECURE=false CUSE_KFD_DEVICE=Some(\"/planted/kfd\")");
    }

    #[test]
    #[ignore = "run by l6_a_setgid_process_ignores_the_thunks_variables in a setgid child"]
    fn child_reports_what_it_reads() {
        println!("AT_SECURE={} CUSE_KFD_DEVICE={:?}", at_secure(), var("CUSE_KFD_DEVICE"));
    }

    #[test]
    fn a_test_process_is_not_at_secure_and_reads_its_environment() {
        assert!(!at_secure());
        // PATH is set wherever cargo runs tests.
        assert_eq!(var_os("PATH"), std::env::var_os("PATH"));
        assert_eq!(var("CUSE_KFD_SURELY_UNSET_VARIABLE"), None);
    }
}
