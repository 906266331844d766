//! The device tier's VM: virtme-ng (`vng`) boots a stock Debian kernel that has CUSE under QEMU,
//! on a copy-on-write view of the host's root file system, and runs one guest script.
//!
//! Without KVM (TCG) the guest's boot is dominated by modules udev's coldplug loads and the tests
//! never use; [`MODPROBE_BLACKLIST`] keeps them out, roughly halving the time to the script.

use crate::packages::VIRTME_NG;
use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The venv that holds virtme-ng, made with Debian's python3 (python3-venv). Outside the
/// target directory so that `cargo clean` does not take it; on the root file system, which the
/// guest shares (vng boots the guest with an init from inside this venv).
pub const VENV: &str = "/opt/cuse-kfd/virtme-ng";

/// The Python that makes the venv: Debian's, not whichever `python3` is first on PATH (pyenv).
const PYTHON: &str = "/usr/bin/python3";

/// Guest size: the 2 cores of the machine, and memory for the daemon and its clients.
pub const CPUS: &str = "2";
pub const MEMORY: &str = "2G";

/// Modules udev's coldplug loads in the q35 guest that the tests never use: KVM (the emulated
/// CPU offers SVM/VMX), SATA/CD-ROM, watchdogs, SMBus, input, crypto accelerators. Each costs
/// seconds under TCG (kvm.ko alone about 20 s: signature check and init). libkmod, which udev loads modules through, honours `modprobe.blacklist=` on
/// the kernel command line; an explicit `modprobe cuse` is not affected.
pub const MODPROBE_BLACKLIST: &[&str] = &[
    "kvm",
    "kvm_amd",
    "kvm_intel",
    "ccp",
    "irqbypass",
    "ahci",
    "libahci",
    "libata",
    "scsi_mod",
    "sr_mod",
    "cdrom",
    "sg",
    "iTCO_wdt",
    "iTCO_vendor_support",
    "intel_pmc_bxt",
    "i6300esb",
    "lpc_ich",
    "i2c_i801",
    "evdev",
    "psmouse",
    "serio_raw",
    "pcspkr",
    "button",
    "qemu_fw_cfg",
    "aesni_intel",
    "ghash_clmulni_intel",
    "crc32_pclmul",
    "crc32c_intel",
    "crct10dif_pclmul",
    "sha1_ssse3",
    "sha256_ssse3",
    "sha512_ssse3",
];

/// A kernel to boot: its image and the version its modules are installed under.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub version: String,
    pub image: PathBuf,
}

/// The newest `/boot/vmlinuz-*` whose modules include CUSE (cuse.ko in modules.dep, or built in
/// per modules.builtin). Err says what was looked at and why nothing fits.
pub fn find_kernel(boot: &Path, modules: &Path) -> Result<Kernel, String> {
    let entries = std::fs::read_dir(boot).map_err(|e| format!("cannot read {}: {e}", boot.display()))?;
    let mut fits = Vec::new();
    let mut rejected = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(version) = name.strip_prefix("vmlinuz-") else { continue };
        let dir = modules.join(version);
        if has_cuse(&dir) {
            fits.push(Kernel { version: version.to_owned(), image: entry.path() });
        } else {
            rejected.push(format!("{name} (no cuse.ko under {})", dir.display()));
        }
    }
    fits.sort_by(|a, b| version_cmp(&a.version, &b.version));
    match fits.pop() {
        Some(k) => Ok(k),
        None if rejected.is_empty() => Err(format!(
            "no kernel image in {}: install linux-image-amd64 (a Debian kernel with CONFIG_CUSE=m)",
            boot.display()
        )),
        None => Err(format!(
            "no kernel in {} has CUSE: {}; install linux-image-amd64 (CONFIG_CUSE=m)",
            boot.display(),
            rejected.join(", ")
        )),
    }
}

/// Whether the modules directory of a kernel has CUSE, as a module or built in.
fn has_cuse(dir: &Path) -> bool {
    let lists_cuse = |file: &str| {
        std::fs::read_to_string(dir.join(file)).is_ok_and(|text| {
            text.lines().any(|l| {
                let path = l.split(':').next().unwrap_or("");
                path.rsplit('/').next().is_some_and(|f| f == "cuse.ko" || f.starts_with("cuse.ko."))
            })
        })
    };
    lists_cuse("modules.dep") || lists_cuse("modules.builtin")
}

/// Compares kernel versions piecewise: runs of digits as numbers, the rest as text
/// (6.1.0-9 < 6.1.0-57 < 6.10.0-1).
fn version_cmp(a: &str, b: &str) -> Ordering {
    fn pieces(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (pa, pb) = (pieces(a), pieces(b));
    for (x, y) in pa.iter().zip(&pb) {
        let ord = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then(x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    pa.len().cmp(&pb.len())
}

/// The `vng` to run and the directory to put first on PATH (vng runs `virtme-run` by name).
pub struct Vng {
    pub exe: PathBuf,
    pub bin_dir: PathBuf,
    pub version: String,
}

impl Vng {
    fn at(exe: PathBuf) -> Option<Vng> {
        let bin_dir = exe.parent()?.to_path_buf();
        let version = version_of(&exe, &bin_dir)?;
        Some(Vng { exe, bin_dir, version })
    }

    /// A `vng` command with this venv first on PATH.
    pub fn command(&self) -> Command {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.bin_dir.clone()];
        dirs.extend(std::env::split_paths(&path));
        let mut cmd = Command::new(&self.exe);
        if let Ok(joined) = std::env::join_paths(dirs) {
            cmd.env("PATH", joined);
        }
        cmd
    }
}

/// `vng --version`: "virtme-ng 1.42" gives "1.42".
fn version_of(exe: &Path, bin_dir: &Path) -> Option<String> {
    let out = Command::new(exe).arg("--version").env("PATH", bin_dir).stdin(Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.split_whitespace().last().map(str::to_owned)
}

/// virtme-ng, ready to run: `$CUSE_KFD_VNG` if set (used as is), else the pinned version in
/// [`VENV`], installed there first (as root, unless `install` is false) when it is missing or
/// another version.
pub fn ensure_vng(install: bool) -> Result<Vng, String> {
    if let Some(exe) = std::env::var_os("CUSE_KFD_VNG") {
        let exe = PathBuf::from(exe);
        return Vng::at(exe.clone()).ok_or_else(|| format!("CUSE_KFD_VNG={}: `vng --version` fails", exe.display()));
    }
    let venv = Path::new(VENV);
    let exe = venv.join("bin/vng");
    let want = VIRTME_NG.version;
    let found = Vng::at(exe.clone());
    match &found {
        Some(v) if v.version == want => {
            println!("virtme-ng {want}: {}", exe.display());
            return Ok(found.unwrap());
        }
        Some(v) => println!("{} is virtme-ng {}, want {want}", exe.display(), v.version),
        None => println!("virtme-ng: not in {VENV}"),
    }
    if !install {
        return Err(format!("virtme-ng {want} is not installed in {VENV} (--no-install)"));
    }
    if let uid @ 1.. = nix::unistd::geteuid().as_raw() {
        return Err(format!("virtme-ng {want} is not installed in {VENV}, and installing it needs root (uid {uid})"));
    }
    if !Path::new(PYTHON).is_file() {
        return Err(format!("{PYTHON} is missing: cannot make the venv for virtme-ng (apt-get install python3-venv)"));
    }
    let run = |program: &Path, args: &[&str]| -> Result<(), String> {
        println!("$ {} {}", program.display(), args.join(" "));
        let status = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{} {}: {status}", program.display(), args.join(" ")))
        }
    };
    let spec = format!("{}=={want}", VIRTME_NG.name);
    run(Path::new(PYTHON), &["-m", "venv", "--clear", VENV])?;
    run(&venv.join("bin/pip"), &["install", "--disable-pip-version-check", "--no-input", "--quiet", &spec])?;
    match Vng::at(exe.clone()) {
        Some(v) if v.version == want => {
            println!("installed virtme-ng {want} in {VENV}");
            Ok(v)
        }
        Some(v) => Err(format!("pip installed virtme-ng {} in {VENV}, want {want}", v.version)),
        None => Err(format!("pip installed {spec} but `{} --version` fails", exe.display())),
    }
}

/// Where the tests run inside the VM.
pub struct GuestTest {
    /// What the tier calls it, e.g. `kfd-tests/device`.
    pub label: String,
    pub exe: PathBuf,
    pub args: Vec<String>,
    /// The package directory: cargo runs tests there, so the guest does too.
    pub cwd: PathBuf,
    /// Its own time limit where it needs longer than the run's (see [`guest_script`]).
    pub limit: Option<Duration>,
    /// How many libtest tests it runs, each printing the device tier's RAN_MARKER; None for a
    /// plain program (the CUSE bench).
    pub tests: Option<u32>,
}

/// The guest script's lines that the host reads (see `device::Tally`).
pub const UP: &str = "CUSE_KFD_GUEST_UP";
pub const BEGIN: &str = "CUSE_KFD_TEST_BEGIN";
pub const END: &str = "CUSE_KFD_TEST_END";
pub const EXIT: &str = "CUSE_KFD_GUEST_EXIT=";

/// The guest's exit codes for failures before any test runs.
pub const EXIT_NO_MODPROBE: i32 = 90;
pub const EXIT_NO_CUSE_NODE: i32 = 91;

/// The POSIX shell script the guest runs: load cuse (loudly failing), then each test executable
/// in its package directory with `env`, under `timeout` (`limit` each unless the test has its
/// own: one hung binary does not take the whole VM budget); a BEGIN/END line around each, and
/// the exit line last. Shortly before a binary's limit a watchdog lists the guest's processes
/// with their kernel wait channels, to show where it hangs.
pub fn guest_script(tests: &[GuestTest], env: &[(&str, String)], limit: Duration) -> String {
    let mut s = String::from(
        "#!/bin/sh\n\
         # Written by `cargo xtask test device`; runs inside the virtme-ng guest.\n",
    );
    s += &format!("echo \"{UP} kernel $(uname -r), $(nproc) cpus, uptime $(cut -d' ' -f1 /proc/uptime) s\"\n");
    s += &format!(
        "if ! modprobe cuse; then\n\
         \x20   echo \"guest: modprobe cuse failed on kernel $(uname -r): the VM cannot run the device tier\" >&2\n\
         \x20   echo \"{EXIT}{EXIT_NO_MODPROBE}\"\n\
         \x20   exit {EXIT_NO_MODPROBE}\n\
         fi\n\
         if [ ! -c /dev/cuse ]; then\n\
         \x20   echo \"guest: modprobe cuse succeeded but /dev/cuse is not a character device\" >&2\n\
         \x20   echo \"{EXIT}{EXIT_NO_CUSE_NODE}\"\n\
         \x20   exit {EXIT_NO_CUSE_NODE}\n\
         fi\n\
         echo \"guest: cuse loaded: $(ls -l /dev/cuse)\"\n"
    );
    for (key, value) in env {
        s += &format!("export {key}={}\n", shell_quote(value));
    }
    // `watchdog LABEL LIMIT`: LIMIT is that binary's own.
    s += "status=0\n\
          watchdog() {\n\
          \x20   sleep $(($2 - 5))\n\
          \x20   echo \"guest: $1 is about to time out ($2 s); its processes and where they wait:\"\n\
          \x20   ps -eo pid,ppid,stat,wchan:32,etime,args | grep -v ' \\[' || true\n\
          }\n";
    for t in tests {
        let limit = t.limit.unwrap_or(limit).as_secs().max(10);
        let mut line = shell_quote(&t.exe.to_string_lossy());
        for a in &t.args {
            line += " ";
            line += &shell_quote(a);
        }
        s += &format!(
            "echo \"{BEGIN} {label}\"\n\
             watchdog {label} {limit} &\n\
             watch=$!\n\
             (cd {cwd} && exec timeout -k 5 {limit} {line})\n\
             rc=$?\n\
             kill $watch 2>/dev/null\n\
             [ \"$rc\" -ne 124 ] && [ \"$rc\" -ne 137 ] || echo \"guest: {label} timed out after {limit} s (exit $rc)\"\n\
             echo \"{END} {label} $rc\"\n\
             [ \"$rc\" -eq 0 ] || status=1\n",
            label = t.label,
            cwd = shell_quote(&t.cwd.to_string_lossy()),
        );
    }
    // The kernel log is not shown by default (vng sends the console to /dev/null): show its end
    // when something failed, for oopses and hung-task reports.
    s += "if [ \"$status\" -ne 0 ]; then\n    echo 'guest: the end of the kernel log:'\n    dmesg | tail -n 40\nfi\n";
    s += &format!("echo \"{EXIT}$status\"\nexit $status\n");
    s
}

/// `'text'`, with each `'` as `'\''`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The arguments of the `vng` run: boot `kernel` without KVM unless `kvm`, run `script`.
pub fn vng_args(kernel: &Kernel, script: &Path, kvm: bool) -> Vec<String> {
    let mut args = vec!["--run".to_owned(), kernel.image.to_string_lossy().into_owned()];
    if !kvm {
        args.push("--disable-kvm".into());
    }
    args.extend(["--cpus", CPUS, "--memory", MEMORY].map(String::from));
    args.push("--append".into());
    // Under TCG the kernel picks the HPET, each read an emulated MMIO access; the TSC is a
    // cheap instruction whose emulated value is one consistent clock: the boot takes half as
    // long, and the daemon's engine reads the clock constantly.
    let clock = if kvm { "" } else { "clocksource=tsc tsc=reliable " };
    args.push(format!("{clock}modprobe.blacklist={}", MODPROBE_BLACKLIST.join(",")));
    args.push("--exec".into());
    args.push(format!("sh {}", shell_quote(&script.to_string_lossy())));
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_compare_piecewise() {
        assert_eq!(version_cmp("6.1.0-9-amd64", "6.1.0-57-amd64"), Ordering::Less);
        assert_eq!(version_cmp("6.10.0-1-amd64", "6.1.0-57-amd64"), Ordering::Greater);
        assert_eq!(version_cmp("6.1.0-57-amd64", "6.1.0-57-amd64"), Ordering::Equal);
        assert_eq!(version_cmp("6.1.0-57-amd64", "6.1.0-57-cloud-amd64"), Ordering::Less);
    }

    #[test]
    fn finds_the_newest_kernel_with_cuse() {
        let dir = std::env::temp_dir().join(format!("xtask-vm-test-{}", std::process::id()));
        let (boot, modules) = (dir.join("boot"), dir.join("modules"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&boot).unwrap();
        assert!(find_kernel(&boot, &modules).unwrap_err().contains("no kernel image"));
        for v in ["6.1.0-9-amd64", "6.1.0-57-amd64", "6.18.44-fc"] {
            std::fs::write(boot.join(format!("vmlinuz-{v}")), "").unwrap();
            std::fs::create_dir_all(modules.join(v)).unwrap();
        }
        // 6.18.44-fc: no CUSE at all (the dev/CI kernel); 6.1.0-9: built in.
        std::fs::write(modules.join("6.18.44-fc/modules.dep"), "kernel/fs/fuse/virtiofs.ko: \n").unwrap();
        std::fs::write(modules.join("6.1.0-9-amd64/modules.builtin"), "kernel/fs/fuse/cuse.ko\n").unwrap();
        assert_eq!(find_kernel(&boot, &modules).unwrap().version, "6.1.0-9-amd64");
        std::fs::write(modules.join("6.1.0-57-amd64/modules.dep"), "kernel/fs/fuse/cuse.ko.xz: \n").unwrap();
        let k = find_kernel(&boot, &modules).unwrap();
        assert_eq!(k, Kernel { version: "6.1.0-57-amd64".into(), image: boot.join("vmlinuz-6.1.0-57-amd64") });
        std::fs::remove_file(boot.join("vmlinuz-6.1.0-57-amd64")).unwrap();
        std::fs::remove_file(boot.join("vmlinuz-6.1.0-9-amd64")).unwrap();
        let e = find_kernel(&boot, &modules).unwrap_err();
        assert!(e.contains("vmlinuz-6.18.44-fc (no cuse.ko"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_guest_script_quotes_and_brackets_each_test() {
        let tests = [
            GuestTest {
                label: "kfd-tests/device".into(),
                exe: "/w/target/debug/deps/device-1f".into(),
                args: vec!["--test-threads=1".into()],
                cwd: "/w/it's".into(),
                limit: None,
                tests: Some(1),
            },
            GuestTest {
                label: "kfd-tests/fuzz_node".into(),
                exe: "/w/target/debug/deps/fuzz_node-2e".into(),
                args: vec![],
                cwd: "/w/tests".into(),
                limit: Some(Duration::from_secs(1200)),
                tests: Some(1),
            },
        ];
        let s = guest_script(&tests, &[("CUSE_KFD_BIN", "/w/target/debug/cuse-kfd".into())], Duration::from_secs(300));
        assert!(s.contains("if ! modprobe cuse; then"));
        assert!(s.contains("export CUSE_KFD_BIN='/w/target/debug/cuse-kfd'\n"));
        assert!(s.contains(
            "(cd '/w/it'\\''s' && exec timeout -k 5 300 '/w/target/debug/deps/device-1f' '--test-threads=1')\n"
        ));
        assert!(s.contains("watchdog kfd-tests/device 300 &\n") && s.contains("    sleep $(($2 - 5))\n"));
        // A test with its own limit gets it, and its watchdog too.
        assert!(s.contains("(cd '/w/tests' && exec timeout -k 5 1200 '/w/target/debug/deps/fuzz_node-2e')\n"));
        assert!(s.contains("watchdog kfd-tests/fuzz_node 1200 &\n"));
        assert!(s.contains("echo \"CUSE_KFD_TEST_END kfd-tests/device $rc\"\n"));
        assert!(s.ends_with("echo \"CUSE_KFD_GUEST_EXIT=$status\"\nexit $status\n"));
    }

    #[test]
    fn vng_boots_the_kernel_under_tcg_and_runs_the_script() {
        let k = Kernel { version: "6.1.0-57-amd64".into(), image: "/boot/vmlinuz-6.1.0-57-amd64".into() };
        let args = vng_args(&k, Path::new("/w/target/xtask/device-guest.sh"), false);
        assert_eq!(args[..3], ["--run", "/boot/vmlinuz-6.1.0-57-amd64", "--disable-kvm"]);
        assert_eq!(args.last().unwrap(), "sh '/w/target/xtask/device-guest.sh'");
        // The kernel command line holds at most 2048 bytes; virtme's own part takes about 800.
        let append = &args[args.iter().position(|a| a == "--append").unwrap() + 1];
        assert!(append.len() < 600, "{append}");
        assert!(append.starts_with("clocksource=tsc tsc=reliable "), "{append}");
    }
}
