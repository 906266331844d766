//! Confinement of `cuse-kfd serve` (issue 13, M1, M2, L8): the node's default mode and group,
//! the running daemon's no_new_privs, seccomp mode and capabilities on every thread, what
//! execve and socket(AF_INET) return inside it, the directories it refuses, and the shipped
//! systemd unit's exposure score. The daemon tests run in the real-device tier (`cargo xtask
//! test device`, as root with /dev/cuse); the unit's score wherever systemd-analyze can score a
//! unit file offline.

use kfd_tests::device::tier;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// CapEff of the confined daemon without --sysfs-mount: CAP_CHOWN (0), CAP_DAC_OVERRIDE (1),
/// CAP_SYS_PTRACE (19). cuse-kfd/src/frontend/sandbox.rs says why each.
const CAP_EFF: &str = "0000000000080003";

/// A daemon whose stderr goes to a file the test reads.
struct Served {
    child: Child,
    node: PathBuf,
    log: PathBuf,
    runtime_dir: PathBuf,
}

impl Served {
    fn start(bin: &Path, name: &str, extra: &[&str]) -> Served {
        let log = std::env::temp_dir().join(format!("cuse-kfd-confine-{name}.log"));
        let runtime_dir = std::env::temp_dir().join(format!("cuse-kfd-confine-{name}"));
        let child = Command::new(bin)
            .args(["serve", "--name", name, "--runtime-dir"])
            .arg(&runtime_dir)
            .args(extra)
            .env("RUST_LOG", "info")
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .expect("start cuse-kfd serve");
        Served { child, node: Path::new("/dev").join(name), log, runtime_dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log has `line` (set-up is over when "serving" is logged).
    fn wait_for(&mut self, line: &str) {
        let t0 = Instant::now();
        while !self.log().contains(line) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("cuse-kfd serve exited with {status} before logging {line:?}:\n{}", self.log());
            }
            assert!(t0.elapsed() < Duration::from_secs(90), "no {line:?} within 90 s:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The `Name:\tvalue` fields of /proc/<pid>/task/<tid>/status, for every thread.
    fn thread_status(&self, field: &str) -> Vec<(String, String)> {
        let task = PathBuf::from(format!("/proc/{}/task", self.child.id()));
        let mut out = Vec::new();
        for t in std::fs::read_dir(&task).unwrap() {
            let t = t.unwrap().path();
            let status = std::fs::read_to_string(t.join("status")).unwrap_or_default();
            let comm = std::fs::read_to_string(t.join("comm")).unwrap_or_default().trim().to_owned();
            let value = status
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{field}:")))
                .unwrap_or_else(|| panic!("no {field} in {}", t.display()))
                .trim()
                .to_owned();
            out.push((comm, value));
        }
        assert!(out.len() >= 4, "the daemon's threads: {out:?}");
        out
    }

    fn stop(mut self) -> String {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let t0 = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the daemon did not exit within 10 s of SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = self.log();
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
        log
    }
}

/// Every thread's value of `field` is `want`.
fn all_threads(d: &Served, field: &str, want: &str) {
    let got = d.thread_status(field);
    assert!(got.iter().all(|(_, v)| v == want), "{field} of each thread, want {want}: {got:?}");
}

#[test]
#[ignore = "device tier"]
fn m2_the_running_daemon_has_no_new_privs_seccomp_and_few_capabilities() {
    let bin = tier();
    let mut d = Served::start(&bin, "kfd-t-confine", &["--mode", "0666", "--probe-sandbox"]);
    d.wait_for("serving /dev/kfd-t-confine");
    all_threads(&d, "NoNewPrivs", "1");
    all_threads(&d, "Seccomp", "2");
    all_threads(&d, "CapEff", CAP_EFF);
    all_threads(&d, "CapPrm", CAP_EFF);
    all_threads(&d, "CapBnd", CAP_EFF);
    all_threads(&d, "CapInh", "0000000000000000");
    all_threads(&d, "CapAmb", "0000000000000000");
    println!("daemon CapEff {CAP_EFF}, NoNewPrivs 1, Seccomp 2 on {} threads", d.thread_status("Seccomp").len());
    // The daemon tried both after its filter went on, and is still the daemon.
    let log = d.log();
    assert!(log.contains("sandbox probe: execve: EPERM"), "{log}");
    assert!(log.contains("sandbox probe: socket(AF_INET): EPERM"), "{log}");
    let exe = std::fs::read_link(format!("/proc/{}/exe", d.child.id())).unwrap();
    assert_eq!(exe.file_name().unwrap(), "cuse-kfd", "the daemon's image");
    // And it still serves: a client opens the node and asks the version.
    let kfd = thunk::Kfd::open_node(&d.node).expect("open the node of a confined daemon");
    assert_eq!(kfd.version().unwrap(), (1, 18));
    drop(kfd);
    // --mode 0666 is allowed, with a warning.
    assert!(log.contains("--mode 0666: every local user can open the node"), "{log}");
    let log = d.stop();
    assert!(!log.contains("ERROR"), "{log}");
}

#[test]
#[ignore = "device tier"]
fn m2_no_sandbox_leaves_the_daemon_unconfined() {
    let bin = tier();
    let mut d = Served::start(&bin, "kfd-t-noconfine", &["--no-sandbox"]);
    d.wait_for("serving /dev/kfd-t-noconfine");
    let seccomp = d.thread_status("Seccomp");
    assert!(seccomp.iter().all(|(_, v)| v == "0"), "{seccomp:?}");
    let caps = d.thread_status("CapEff");
    assert!(caps.iter().all(|(_, v)| v != CAP_EFF), "{caps:?}");
    d.stop();
}

/// Whether a process of uid and gid 65534 with `groups` can open `node` read-write.
fn opens_as_nobody(node: &Path, groups: &str) -> Result<(), String> {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534"]);
    if groups.is_empty() {
        c.arg("--clear-groups");
    } else {
        c.arg(format!("--groups={groups}"));
    }
    let out = c.args(["sh", "-c", &format!("exec 3<>{}", node.display())]).output().expect("run setpriv");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
#[ignore = "device tier"]
fn m1_the_node_is_0660_group_render_by_default() {
    let bin = tier();
    let render = nix::unistd::Group::from_name("render").unwrap().expect("a render group on the test system");
    let mut d = Served::start(&bin, "kfd-t-mode", &[]);
    d.wait_for("serving /dev/kfd-t-mode");
    let meta = std::fs::metadata(&d.node).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o660, "mode of {}", d.node.display());
    assert_eq!(meta.gid(), render.gid.as_raw(), "group of {}", d.node.display());
    let e = opens_as_nobody(&d.node, "").expect_err("nobody, not in render, opened the node");
    assert!(e.contains("Permission denied"), "{e}");
    opens_as_nobody(&d.node, &render.gid.to_string()).expect("a member of render opens the node");
    let log = d.stop();
    assert!(!log.contains("every local user"), "no warning for the default mode: {log}");
}

/// `serve` with `args` as root: it fails before serving, with `cuse-kfd: <option>: ...`.
fn refused(bin: &Path, name: &str, args: &[&str]) -> String {
    let out = Command::new(bin).args(["serve", "--name", name]).args(args).output().expect("run serve");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "serve accepted {args:?}: {stderr}");
    assert!(!Path::new("/dev").join(name).exists(), "the node was made");
    stderr
}

#[test]
#[ignore = "device tier"]
fn l8_serve_refuses_directories_others_can_change() {
    let bin = tier();
    let base = std::env::temp_dir().join("cuse-kfd-confine-l8");
    let _ = std::fs::remove_dir_all(&base);
    // A world-writable directory without the sticky bit: anyone can swap what is below.
    let open = base.join("open");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let rt = open.join("rt");
    let e = refused(&bin, "kfd-t-l8a", &["--runtime-dir", rt.to_str().unwrap()]);
    assert!(
        e.contains("--runtime-dir") && e.contains(&format!("{} is owned by uid 0 with mode 777", open.display())),
        "{e}"
    );
    assert!(!rt.exists(), "serve made its runtime directory in {}", open.display());
    // A runtime directory that someone else made first (as in a sticky /tmp).
    let theirs = base.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let e = refused(&bin, "kfd-t-l8b", &["--runtime-dir", theirs.to_str().unwrap()]);
    assert!(e.contains("--runtime-dir") && e.contains("uid 65534"), "{e}");
    // A symlink someone else planted, to a root directory.
    let link = base.join("link");
    std::os::unix::fs::symlink("/etc", &link).unwrap();
    nix::unistd::fchownat(
        None,
        &link,
        Some(nix::unistd::Uid::from_raw(65534)),
        None,
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .unwrap();
    let e = refused(&bin, "kfd-t-l8c", &["--runtime-dir", link.to_str().unwrap()]);
    assert!(e.contains("--runtime-dir") && e.contains("uid 65534"), "{e}");
    // A --sysfs-mount directory of another user.
    let e = refused(&bin, "kfd-t-l8d", &["--sysfs-mount", theirs.to_str().unwrap()]);
    assert!(e.contains("--sysfs-mount") && e.contains("uid 65534"), "{e}");
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn m2_the_systemd_unit_scores_3_or_lower() {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/cuse-kfd.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    for directive in [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/run/cuse-kfd",
        "RestrictAddressFamilies=AF_UNIX",
        "MemoryMax=",
        "TasksMax=",
        "LimitNOFILE=",
        "CapabilityBoundingSet=CAP_CHOWN CAP_DAC_OVERRIDE CAP_SYS_PTRACE\n",
        "--group render",
    ] {
        assert!(text.contains(directive), "{} has no {directive}", unit.display());
    }
    let out = match Command::new("systemd-analyze").args(["security", "--offline=true"]).arg(&unit).output() {
        Ok(out) => out,
        Err(e) => {
            println!("systemd-analyze: {e}: the unit's score is not checked here");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(score) = stdout.lines().find_map(|l| l.split_once("Overall exposure level for cuse-kfd.service: ")) else {
        // systemd before 250 cannot score a unit file offline.
        println!("systemd-analyze cannot score a unit file here: {}", String::from_utf8_lossy(&out.stderr).trim());
        return;
    };
    let score: f64 = score.1.split_whitespace().next().unwrap().parse().unwrap();
    println!("systemd-analyze security deploy/cuse-kfd.service: {score}");
    assert!(score <= 3.0, "exposure {score} above 3.0:\n{stdout}");
}
