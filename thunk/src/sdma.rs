//! SDMA packet builders for a [`crate::queue::RingQueue`] of kind SDMA (vega10_sdma_pkt_open.h
//! encoding, counts minus one), shared by the device's tests and kfd-bench.

fn lo(a: u64) -> u32 {
    a as u32
}

fn hi(a: u64) -> u32 {
    (a >> 32) as u32
}

pub fn nop(extra: u32) -> Vec<u32> {
    let mut p = vec![extra << 16];
    p.resize(1 + extra as usize, 0xDEAD_BEEF);
    p
}

pub fn copy_linear(dst: u64, src: u64, bytes: u32) -> Vec<u32> {
    vec![1, bytes - 1, 0, lo(src), hi(src), lo(dst), hi(dst)]
}

pub fn write(dst: u64, data: &[u32]) -> Vec<u32> {
    let mut p = vec![2, lo(dst), hi(dst), data.len() as u32 - 1];
    p.extend_from_slice(data);
    p
}

pub fn fence(addr: u64, data: u32) -> Vec<u32> {
    vec![5, lo(addr), hi(addr), data]
}

pub fn trap(context: u32) -> Vec<u32> {
    vec![6, context]
}

/// POLL_REGMEM on memory: `(*addr & mask) func reference`.
pub fn poll_regmem(addr: u64, func: u32, reference: u32, mask: u32) -> Vec<u32> {
    vec![8 | func << 28 | 1 << 31, lo(addr), hi(addr), reference, mask, 10 | 0xFFF << 16]
}

/// CONST_FILL of `bytes` bytes with FILLSIZE `size_log2` (0 byte, 2 dword).
pub fn const_fill(dst: u64, data: u32, bytes: u32, size_log2: u32) -> Vec<u32> {
    vec![11 | size_log2 << 30, lo(dst), hi(dst), data, bytes - 1]
}

/// ATOMIC ADD64 of `value` (what ROCr's BlitSdma decrements signals with).
pub fn atomic_add64(addr: u64, value: i64) -> Vec<u32> {
    vec![10 | 47 << 25, lo(addr), hi(addr), value as u32, (value >> 32) as u32, 0, 0, 0]
}

/// ROCr's HDP flush: a register POLL_REGMEM with function ALWAYS.
pub fn rocr_hdp_flush() -> Vec<u32> {
    vec![0x8, 0x0, 0x8000_0000, 0x0, 0x0, 0x0]
}

/// GCR (gfx10+ cache control), sub-op USER_GCR.
pub fn gcr() -> Vec<u32> {
    vec![17 | 1 << 8, 0, 1 << 16, 0, 0]
}

pub fn timestamp_global(addr: u64) -> Vec<u32> {
    vec![13 | 2 << 8, lo(addr), hi(addr)]
}
