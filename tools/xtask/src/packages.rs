//! The Debian packages the tests need: checked with dpkg-query, installed with apt-get as root.

use std::process::Command;

/// A Debian package and what needs it.
pub struct Package {
    pub name: &'static str,
    pub why: &'static str,
}

/// Every package the tests need.
pub const REQUIRED: [Package; 14] = [
    // /usr/include/linux/kfd_ioctl.h (KFD 1.11 on bookworm) and linux/fuse.h.
    Package { name: "linux-libc-dev", why: "linux/kfd_ioctl.h for the uapi ABI test" },
    // /usr/include/libdrm/drm.h: kfd_ioctl.h includes <drm/drm.h>.
    Package { name: "libdrm-dev", why: "drm/drm.h, which kfd_ioctl.h includes" },
    // /usr/include/hsa/*.h of ROCr 5.2.3: AQL packets, amd_queue_t, amd_signal_t.
    Package { name: "libhsa-runtime-dev", why: "hsa/*.h for the uapi ABI test" },
    // /usr/include/hsakmt/*.h: the hsaKmt* API the thunk implements.
    Package { name: "libhsakmt-dev", why: "hsakmt.h for the thunk's C ABI checks" },
    // /usr/lib/x86_64-linux-gnu/libhsakmt.so.1 (5.2.3): the real thunk, for
    // `cuse-kfd run --thunk system` in the device tier.
    Package { name: "libhsakmt1", why: "the real libhsakmt for `cuse-kfd run --thunk system`" },
    // /usr/bin/rocminfo, with libhsa-runtime64-1: an unmodified ROCm client.
    Package { name: "rocminfo", why: "a real ROCm client for the real-client tests" },
    // libfuse3 and its headers, fusermount3: FUSE mounts (the sysfs-shaped topology tree).
    Package { name: "libfuse3-dev", why: "libfuse3 and fusermount3 for FUSE mounts" },
    // cc: compiles the ABI test's C program and the C clients.
    Package { name: "gcc", why: "the C compiler for the ABI test and C clients" },
    // /usr/bin/hipcc (5.2.3) over clang-15; pulls clang-tools-15 (clang-offload-bundler, which
    // unbundles the corpus's code objects) and llvm-15 (llvm-objdump-15).
    Package { name: "hipcc", why: "hipcc builds the HIP corpus (kfd-tests/hip)" },
    // /usr/include/hip and libamdhip64.so.5: the HIP runtime the corpus programs link.
    Package { name: "libamdhip64-dev", why: "HIP headers and runtime for the HIP corpus" },
    // /usr/lib/x86_64-linux-gnu/amdgcn/bitcode: ocml/ockl, which every device compile links.
    Package { name: "rocm-device-libs", why: "the device libraries hipcc links into GPU code" },
    // clang-15 (amdgcn OpenCL C) and llvm-15 (llvm-mc-15, llvm-objdump-15, llvm-objcopy-15):
    // the shader decoder's differential test and tools/isa-gen.
    Package { name: "clang-15", why: "compiles the shader decoder's gfx90a test kernels" },
    Package { name: "llvm-15", why: "llvm-mc-15/llvm-objdump-15/llc-15/opt-15: the shader core's oracles" },
    // ld.lld-15 links the gfx90a code objects the engine's GFX dispatch tests load.
    Package { name: "lld-15", why: "links the code objects of the GFX dispatch tests" },
];

/// The packages the device tier needs when it boots a VM (the running kernel has no CUSE).
/// Installed by the device tier itself, and only when it takes the VM path.
pub const DEVICE_VM: [Package; 4] = [
    // /usr/bin/qemu-system-x86_64; the VM runs under TCG where nested KVM does not work.
    Package { name: "qemu-system-x86", why: "the device tier's VM (qemu-system-x86_64)" },
    // /boot/vmlinuz-* and /lib/modules/*/kernel/fs/fuse/cuse.ko: CONFIG_CUSE=m. It pulls
    // initramfs-tools, kmod (modprobe in the guest) and udev.
    Package { name: "linux-image-amd64", why: "a stock Debian kernel with CUSE (cuse.ko) for the VM" },
    // virtme-ng packs busybox into the initramfs it builds for the guest.
    Package { name: "busybox-static", why: "busybox for virtme-ng's initramfs" },
    // Debian's python3 -m venv: virtme-ng (PyPI) lives in a venv of its own.
    Package { name: "python3-venv", why: "the venv that holds virtme-ng (PyPI)" },
];

/// A package from PyPI, installed with pip into a venv of its own.
pub struct PipPackage {
    pub name: &'static str,
    /// The exact version: virtme-ng's flags and guest init change between releases.
    pub version: &'static str,
    pub why: &'static str,
}

/// virtme-ng (`vng`): boots a kernel in QEMU on a copy-on-write view of the host's root file
/// system. Installed by the device tier into `vm::VENV`.
pub const VIRTME_NG: PipPackage = PipPackage {
    name: "virtme-ng",
    version: "1.42",
    why: "vng boots the device tier's VM on the host's root file system",
};

/// Checks every package of the test gate; as root installs the missing ones, otherwise says
/// which were skipped. Returns one line for the summary: all present, installed, or what is
/// missing and why.
pub fn ensure() -> String {
    println!("==> system packages");
    ensure_set(&REQUIRED, true).line
}

/// What [`ensure_set`] found and did.
pub struct Ensured {
    /// One line for the summary.
    pub line: String,
    /// The packages still missing afterwards (empty when all are installed; unknown when
    /// dpkg-query could not run, which also leaves this empty: see `line`).
    pub missing: Vec<&'static str>,
}

/// Checks `packages`; when `install` and root, installs the missing ones with apt-get.
pub fn ensure_set(packages: &[Package], install: bool) -> Ensured {
    let mut missing = Vec::new();
    for p in packages {
        match installed(p) {
            Ok(true) => {}
            Ok(false) => missing.push(p),
            Err(why) => {
                let line = format!("not checked: {why}; tests that need them may fail");
                println!("{line}");
                return Ensured { line, missing: Vec::new() };
            }
        }
    }
    if missing.is_empty() {
        let line = format!("all {} present", packages.len());
        println!("{line}");
        return Ensured { line, missing: Vec::new() };
    }
    for p in &missing {
        println!("missing: {} ({})", p.name, p.why);
    }
    let names: Vec<&'static str> = missing.iter().map(|p| p.name).collect();
    let list = names.join(" ");
    if !install {
        let line = format!("not installing {list} (--no-install)");
        println!("{line}");
        return Ensured { line, missing: names };
    }
    match nix::unistd::geteuid().as_raw() {
        0 => install_missing(&missing),
        uid => {
            let line = format!(
                "skipped installing {list} (not root: uid {uid}); install them with \
                 `sudo apt-get install --no-install-recommends {list}`; tests that need them fail"
            );
            println!("{line}");
            Ensured { line, missing: names }
        }
    }
}

/// `dpkg-query -W -f='${Status}' PKG`: installed when the status ends in "ok installed".
fn installed(p: &Package) -> Result<bool, String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", p.name])
        .output()
        .map_err(|e| format!("cannot run dpkg-query ({e}): not a Debian system?"))?;
    Ok(out.status.success() && String::from_utf8_lossy(&out.stdout).trim_end().ends_with("ok installed"))
}

/// `apt-get update` once, then one `apt-get install` of every missing package.
fn install_missing(missing: &[&Package]) -> Ensured {
    let apt = |args: &[&str]| -> Result<(), String> {
        println!("$ apt-get {}", args.join(" "));
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| format!("cannot run apt-get: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("apt-get {}: {status}", args[0]))
        }
    };
    let mut args = vec!["install", "-y", "--no-install-recommends"];
    args.extend(missing.iter().map(|p| p.name));
    let result = apt(&["update"]).and_then(|()| apt(&args));
    let still: Vec<&'static str> =
        missing.iter().filter(|p| !matches!(installed(p), Ok(true))).map(|p| p.name).collect();
    let line = match (result, still.is_empty()) {
        (Ok(()), true) => format!("installed {}", args[3..].join(" ")),
        (Ok(()), false) => format!("apt-get succeeded but still missing: {}", still.join(" ")),
        (Err(e), _) => format!("{e}; still missing: {}", still.join(" ")),
    };
    println!("{line}");
    Ensured { line, missing: still }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_are_unique() {
        let all: Vec<&Package> = REQUIRED.iter().chain(&DEVICE_VM).collect();
        for (i, p) in all.iter().enumerate() {
            assert!(all[..i].iter().all(|q| q.name != p.name), "{} twice", p.name);
        }
    }
}
