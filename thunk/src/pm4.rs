//! PM4 type-3 packet builders for a [`crate::queue::RingQueue`] of kind PM4 (Linux amdgpu
//! soc15d.h encoding; shader type compute), shared by the device's tests and kfd-bench.

/// A type-3 header: `body` dwords after it, shader type compute.
pub fn header(op: u8, body: usize) -> u32 {
    3 << 30 | ((body as u32 - 1) & 0x3FFF) << 16 | u32::from(op) << 8 | 1 << 1
}

fn lo(a: u64) -> u32 {
    a as u32
}

fn hi(a: u64) -> u32 {
    (a >> 32) as u32
}

pub fn nop(body: usize) -> Vec<u32> {
    let mut p = vec![header(0x10, body)];
    p.resize(body + 1, 0xDEAD_BEEF);
    p
}

/// amdgpu's one-dword ring filler.
pub fn filler() -> u32 {
    3 << 30 | 0x3FFF << 16 | 0x10 << 8
}

/// WRITE_DATA to memory (DST_SEL 5), incrementing address, write confirm.
pub fn write_data(addr: u64, data: &[u32]) -> Vec<u32> {
    let mut p = vec![header(0x37, 3 + data.len()), 5 << 8 | 1 << 20, lo(addr), hi(addr)];
    p.extend_from_slice(data);
    p
}

/// RELEASE_MEM at end of pipe: DATA_SEL `data_sel` of `data` to `addr`, INT_SEL `int_sel`
/// with context id `ctx`.
pub fn release_mem(addr: u64, data: u64, data_sel: u32, int_sel: u32, ctx: u32) -> Vec<u32> {
    vec![header(0x49, 7), 0x14 | 5 << 8, data_sel << 29 | int_sel << 24, lo(addr), hi(addr), lo(data), hi(data), ctx]
}

/// WAIT_REG_MEM on memory: `(*addr & mask) func reference`.
pub fn wait_reg_mem(addr: u64, func: u32, reference: u32, mask: u32) -> Vec<u32> {
    vec![header(0x3C, 6), func | 1 << 4, lo(addr), hi(addr), reference, mask, 4]
}

pub fn indirect_buffer(addr: u64, dwords: u32) -> Vec<u32> {
    vec![header(0x3F, 3), lo(addr), hi(addr), dwords | 1 << 23]
}

/// ACQUIRE_MEM as kfdtest builds it (gfx9 length).
pub fn acquire_mem() -> Vec<u32> {
    vec![header(0x58, 6), 0x28c0_0000, 0xFFFF_FFFF, 0, 0, 0, 4]
}

/// SET_SH_REG of `values` from register `reg` (its absolute offset, as gc_9_0_offset.h names it).
pub fn set_sh_reg(reg: u32, values: &[u32]) -> Vec<u32> {
    let mut p = vec![header(0x76, 1 + values.len()), reg - 0x2C00];
    p.extend_from_slice(values);
    p
}

/// DISPATCH_DIRECT of `dims` with DISPATCH_INITIATOR `initiator`.
pub fn dispatch_direct(dims: [u32; 3], initiator: u32) -> Vec<u32> {
    vec![header(0x15, 4), dims[0], dims[1], dims[2], initiator]
}

/// SET_BASE of base `index` to `addr`, compute shader type.
pub fn set_base(index: u32, addr: u64) -> Vec<u32> {
    vec![header(0x11, 3), index, lo(addr), hi(addr)]
}

/// DISPATCH_INDIRECT as the MEC takes it: its arguments (DIM_X/Y/Z) at `addr`.
pub fn dispatch_indirect(addr: u64, initiator: u32) -> Vec<u32> {
    vec![header(0x16, 3), lo(addr), hi(addr), initiator]
}

/// DISPATCH_INDIRECT as the ME takes it: its arguments at `offset` from the SET_BASE base.
pub fn dispatch_indirect_offset(offset: u32, initiator: u32) -> Vec<u32> {
    vec![header(0x16, 2), offset, initiator]
}
