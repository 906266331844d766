//! hsaKmtOpenKFD without a device: the status libhsakmt gives when /dev/kfd cannot be used.

use hsakmt::api::system::{hsaKmtCloseKFD, hsaKmtOpenKFD};

#[test]
fn opening_a_missing_or_foreign_node_is_io_channel_not_opened() {
    std::env::remove_var("CUSE_KFD_EMBEDDED");
    std::env::set_var("CUSE_KFD_DEVICE", "/nonexistent/kfd");
    assert_eq!(hsaKmtOpenKFD(), 20, "HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED");
    // A file that is no cuse-kfd node does not answer the runtime-info request.
    let file = std::env::temp_dir().join(format!("not-kfd-{}", std::process::id()));
    std::fs::write(&file, b"").unwrap();
    std::env::set_var("CUSE_KFD_DEVICE", &file);
    assert_eq!(hsaKmtOpenKFD(), 20);
    std::fs::remove_file(&file).unwrap();
    assert_eq!(hsaKmtCloseKFD(), 20, "nothing to close");
}
