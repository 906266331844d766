//! The real-device tier's probe: CUSE itself, with no project code in the way. Answers the
//! kernel's CUSE_INIT by hand (frames as in linux/fuse.h), checks that the node appears and
//! that closing /dev/cuse removes it. If this fails, CUSE does not work here, whatever the
//! daemon does.
//!
//! The probe is `#[ignore = "device tier"]`: it runs only when `cargo xtask test device` runs it,
//! with CUSE_KFD_DEVICE_TIER=1 (natively as root with /dev/cuse, or inside its VM).

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, Instant};

// linux/fuse.h
const FUSE_KERNEL_VERSION: u32 = 7;
const CUSE_INIT: u32 = 4096;
const CUSE_UNRESTRICTED_IOCTL: u32 = 1 << 0;
/// sizeof(struct fuse_in_header): len, opcode, unique, nodeid, uid, gid, pid, total_extlen, padding.
const IN_HEADER: usize = 40;
/// sizeof(struct cuse_init_in): major, minor, unused, flags.
const INIT_IN: usize = 16;
/// sizeof(struct fuse_out_header): len, error, unique.
const OUT_HEADER: usize = 16;
/// sizeof(struct cuse_init_out): major, minor, unused, flags, max_read, max_write, dev_major,
/// dev_minor, spare[10].
const INIT_OUT: usize = 72;
/// The kernel refuses reads into a smaller buffer than FUSE_MIN_READ_BUFFER (8192); a server's
/// buffer holds a whole WRITE of max_write bytes plus its headers.
const READ_BUFFER: usize = 128 * 1024 + 4096;
const MAX_IO: u32 = 128 * 1024;

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

/// The CUSE_INIT reply: fuse_out_header + cuse_init_out + "DEVNAME=<name>\0".
fn init_reply(unique: u64, minor: u32, devname: &str) -> Vec<u8> {
    let info = format!("DEVNAME={devname}\0");
    let len = OUT_HEADER + INIT_OUT + info.len();
    let mut r = Vec::with_capacity(len);
    r.extend_from_slice(&(len as u32).to_ne_bytes());
    r.extend_from_slice(&0i32.to_ne_bytes()); // error
    r.extend_from_slice(&unique.to_ne_bytes());
    for field in [FUSE_KERNEL_VERSION, minor, 0, CUSE_UNRESTRICTED_IOCTL, MAX_IO, MAX_IO, 0, 0] {
        // major, minor, unused, flags, max_read, max_write, dev_major (0: dynamic), dev_minor
        r.extend_from_slice(&field.to_ne_bytes());
    }
    r.extend_from_slice(&[0u8; 40]); // spare[10]
    r.extend_from_slice(info.as_bytes());
    assert_eq!(r.len(), len);
    r
}

/// Polls `cond` every 10 ms for up to `limit`; whether it became true.
fn within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_init_reply_has_the_layout_of_fuse_h() {
    let r = init_reply(0x1122, 38, "kfd-probe");
    assert_eq!(r.len(), 16 + 72 + "DEVNAME=kfd-probe\0".len());
    assert_eq!(u32_at(&r, 0) as usize, r.len());
    assert_eq!(u64_at(&r, 8), 0x1122);
    assert_eq!((u32_at(&r, 16), u32_at(&r, 20), u32_at(&r, 28)), (7, 38, CUSE_UNRESTRICTED_IOCTL));
    assert_eq!((u32_at(&r, 32), u32_at(&r, 36), u32_at(&r, 40)), (MAX_IO, MAX_IO, 0));
    assert!(r.ends_with(b"\0\0\0\0DEVNAME=kfd-probe\0"));
}

#[test]
#[ignore = "device tier"]
fn cuse_init_by_hand_makes_a_node_and_closing_dev_cuse_removes_it() {
    kfd_tests::device::tier_without_daemon("cuse_init_by_hand_makes_a_node_and_closing_dev_cuse_removes_it");
    const NAME: &str = "kfd-probe";
    let node = Path::new("/dev").join(NAME);
    let class = Path::new("/sys/class/cuse").join(NAME);
    assert!(!node.exists(), "{} exists before the test: another CUSE server uses the name", node.display());

    // Opening /dev/cuse queues CUSE_INIT; the first read returns it.
    let mut cuse = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/cuse")
        .expect("open /dev/cuse O_RDWR (needs root and the cuse module)");
    let mut buf = vec![0u8; READ_BUFFER];
    let n = cuse.read(&mut buf).expect("read CUSE_INIT from /dev/cuse");
    let req = &buf[..n];
    assert_eq!(n, IN_HEADER + INIT_IN, "CUSE_INIT is a fuse_in_header and a cuse_init_in");
    assert_eq!(u32_at(req, 0) as usize, n, "fuse_in_header.len");
    assert_eq!(u32_at(req, 4), CUSE_INIT, "fuse_in_header.opcode");
    let unique = u64_at(req, 8);
    assert_ne!(unique, 0, "fuse_in_header.unique");
    let (major, minor, flags) = (u32_at(req, IN_HEADER), u32_at(req, IN_HEADER + 4), u32_at(req, IN_HEADER + 12));
    eprintln!(
        "CUSE_INIT: unique {unique}, nodeid {}, uid {}, gid {}, pid {}; protocol {major}.{minor}, flags {flags:#x}",
        u64_at(req, 16),
        u32_at(req, 24),
        u32_at(req, 28),
        u32_at(req, 32)
    );
    assert_eq!(major, FUSE_KERNEL_VERSION, "cuse_init_in.major");
    assert!(minor >= 16, "cuse_init_in.minor {minor}: RETRY iovecs need 7.16 or later");
    assert_ne!(flags & CUSE_UNRESTRICTED_IOCTL, 0, "the kernel offers unrestricted ioctls");

    // The node is made while the kernel processes this write (devtmpfs, mode 0600).
    let reply = init_reply(unique, minor, NAME);
    let written = cuse.write(&reply).expect("write the CUSE_INIT reply");
    assert_eq!(written, reply.len(), "the whole reply in one write");
    assert!(within(Duration::from_secs(2), || node.exists()), "{} did not appear within 2 s", node.display());
    let meta = std::fs::metadata(&node).unwrap();
    assert!(meta.file_type().is_char_device(), "{} is not a character device", node.display());
    let (maj, min) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    assert_ne!(maj, 0, "a dynamic major was allocated");
    let dev = std::fs::read_to_string(class.join("dev")).expect("the cuse class device in sysfs");
    assert_eq!(dev.trim(), format!("{maj}:{min}"), "{} and {} agree", class.display(), node.display());

    // Closing the channel unregisters the device and devtmpfs removes the node.
    drop(cuse);
    assert!(
        within(Duration::from_secs(2), || !node.exists()),
        "{} still exists 2 s after closing /dev/cuse",
        node.display()
    );
    assert!(!class.exists(), "{} still exists", class.display());
}
