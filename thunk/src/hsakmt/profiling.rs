//! Performance counters: the PMC trace calls (libhsakmt perfctr.c and pmc_table.c at tag
//! rocm-5.2.3) and streaming performance monitoring (spm.c, same tag).
//!
//! libhsakmt lists two kinds of counter blocks. The GFX blocks (SQ, TA, TCC, ...) come from its
//! own per-generation tables (pmc_table.c), chosen by the node's GFX major version alone: every
//! gfx9 node, gfx90a included, gets the same table ([`GFX9_BLOCKS`]), whatever its device id.
//! They are non-privileged counters, which a profiler programs itself through its queues;
//! libhsakmt only lists them. The one privileged block is the host's AMD IOMMU PMU
//! (perf_event, `amd_iommu_0`), whose slot count libhsakmt reads from the CPU node's
//! `perf/iommu/max_concurrent` topology file: this device's topology has none and this thunk
//! does not use perf_event, so the IOMMU block is never listed, as by libhsakmt on such a
//! topology. A trace therefore registers only counters a caller marks privileged on a listed
//! GFX block; libhsakmt then refuses to acquire it (`Unavailable`: only the IOMMU block has
//! slots to take), and starting or stopping it fails on the perf_event files it never opened.
//!
//! SPM is AMD's out-of-tree AMDKFD_IOC_RLC_SPM (nr 0x84), which upstream amdkfd and this device
//! lack. libhsakmt 5.2.3 returns that request's raw result as the status: on failure -1, which
//! is [`Status::IoctlFailed`].

use super::{Result, Status, Thunk};
use uapi::ioctl::{ioc, AMDKFD_IOCTL_BASE, IOC_READ, IOC_WRITE};
use uapi::IntoBytes;

/// ROCm's `AMDKFD_IOC_RLC_SPM` (`struct kfd_ioctl_spm_args`: dest_buf u64, then buf_size, op,
/// timeout, gpu_id, bytes_copied, has_data_loss, u32 each).
const AMDKFD_IOC_RLC_SPM: u32 = ioc(IOC_READ | IOC_WRITE, AMDKFD_IOCTL_BASE, 0x84, 32);
const SPM_OP_ACQUIRE: u32 = 0;
const SPM_OP_RELEASE: u32 = 1;
const SPM_OP_SET_DEST_BUF: u32 = 2;

/// libhsakmt's block ids (`enum perf_block_id`, pmc_table.h at rocm-5.2.3) run 0 ..= 24, the
/// last the IOMMU; a counter naming another is invalid.
const PERFCOUNTER_BLOCKID_MAX: u32 = 25;
/// `HSA_PROFILE_TYPE_PRIVILEGED_STREAMING`: types up to it are the privileged ones, the only
/// ones a trace registers.
const PROFILE_TYPE_PRIVILEGED_STREAMING: u32 = 1;
/// `HSA_PROFILE_TYPE_NONPRIV_IMMEDIATE`, the type of every GFX block's counters.
const PROFILE_TYPE_NONPRIV_IMMEDIATE: u32 = 2;
/// `HsaCounterFlags` with only `Global` (bit 0) set, as libhsakmt sets every listed counter.
const COUNTER_FLAG_GLOBAL: u32 = 1;
/// Counters one RegisterTrace takes at most (more: `NoMemory`, as libhsakmt).
pub const MAX_TRACE_COUNTERS: usize = 512;
/// libhsakmt's page, to which a trace's minimum buffer size is rounded up.
const TRACE_PAGE: u64 = 4096;

/// An `HSA_UUID` ({Data1, Data2, Data3, Data4[8]}) as the 16 bytes it is in memory.
const fn uuid(d1: u32, d2: u16, d3: u16, d4: [u8; 8]) -> [u8; 16] {
    let a = d1.to_le_bytes();
    let b = d2.to_le_bytes();
    let c = d3.to_le_bytes();
    [a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d4[0], d4[1], d4[2], d4[3], d4[4], d4[5], d4[6], d4[7]]
}

/// One GFX counter block as libhsakmt lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockFacts {
    /// The block's `enum perf_block_id` value (each counter's `BlockIndex`).
    pub index: u32,
    pub name: &'static str,
    /// Its `HSA_PROFILEBLOCK_AMD_*` UUID (hsakmttypes.h at rocm-5.2.3).
    pub uuid: [u8; 16],
    /// Counter slots (`num_of_slots`): how many of its counters count at once.
    pub slots: u32,
    /// Its counter ids, as inclusive ranges in ascending order.
    pub ids: &'static [(u32, u32)],
}

impl BlockFacts {
    /// The counter ids, in libhsakmt's order.
    pub fn counter_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.ids.iter().flat_map(|&(a, b)| a..=b)
    }
}

const fn block(index: u32, name: &'static str, uuid: [u8; 16], slots: u32, ids: &'static [(u32, u32)]) -> BlockFacts {
    BlockFacts { index, name, uuid, slots, ids }
}

/// The `HSA_PROFILEBLOCK_AMD_*` UUIDs (include/hsakmttypes.h at rocm-5.2.3) of the blocks
/// libhsakmt's GFX tables list.
mod block_uuid {
    use super::uuid;
    pub const CB: [u8; 16] = uuid(0x9ba429c6, 0xaf2d, 0x4b38, [0xb3, 0x49, 0x15, 0x72, 0x71, 0xbe, 0xac, 0x6a]);
    pub const CPF: [u8; 16] = uuid(0x2b0ad2b5, 0x1c43, 0x4f46, [0xa7, 0xbc, 0xe1, 0x19, 0x41, 0x1e, 0xa6, 0xc9]);
    pub const CPG: [u8; 16] = uuid(0x590ec94d, 0x20f0, 0x448f, [0x8d, 0xff, 0x31, 0x6c, 0x67, 0x9d, 0xe7, 0xff]);
    pub const DB: [u8; 16] = uuid(0x3d1a47fc, 0x0013, 0x4ed4, [0x83, 0x06, 0x82, 0x2c, 0xa0, 0xb7, 0xa6, 0xc2]);
    pub const GDS: [u8; 16] = uuid(0xf59276ec, 0x2526, 0x4bf8, [0x8e, 0xc0, 0x11, 0x8f, 0x77, 0x70, 0x0d, 0xc9]);
    pub const GRBM: [u8; 16] = uuid(0x8f00933c, 0xc33d, 0x4801, [0x97, 0xb7, 0x70, 0x07, 0xf7, 0x85, 0x73, 0xad]);
    pub const GRBMSE: [u8; 16] = uuid(0x34ebd8d7, 0x7c8b, 0x4d15, [0x88, 0xfa, 0x0e, 0x4e, 0x4a, 0xf5, 0x9a, 0xc1]);
    pub const IA: [u8; 16] = uuid(0x34276944, 0x4264, 0x4fcd, [0x9d, 0x6e, 0xae, 0x26, 0x45, 0x82, 0xec, 0x51]);
    pub const PASC: [u8; 16] = uuid(0xb0e7fb5d, 0x0efc, 0x4744, [0xb5, 0x16, 0x5d, 0x23, 0xdc, 0x1f, 0xd5, 0x6c]);
    pub const PASU: [u8; 16] = uuid(0x9a152b6a, 0x1fad, 0x45f2, [0xa5, 0xbf, 0xf1, 0x63, 0x82, 0x6b, 0xd0, 0xcd]);
    pub const SPI: [u8; 16] = uuid(0xeda81044, 0xd62c, 0x47eb, [0xaf, 0x89, 0x4f, 0x6f, 0xbf, 0x3b, 0x38, 0xe0]);
    pub const SQ: [u8; 16] = uuid(0xb5c396b6, 0xd310, 0x47e4, [0x86, 0xfc, 0x5c, 0xc3, 0x04, 0x3a, 0xf5, 0x08]);
    pub const SX: [u8; 16] = uuid(0xbdb8d737, 0x43cc, 0x4162, [0xbe, 0x52, 0x51, 0xcf, 0xb8, 0x47, 0xbe, 0xaf]);
    pub const TA: [u8; 16] = uuid(0xc01ee43d, 0xad92, 0x44b1, [0x8a, 0xb9, 0xbe, 0x5e, 0x69, 0x6c, 0xee, 0xa7]);
    pub const TCA: [u8; 16] = uuid(0x333e393f, 0xe147, 0x4f49, [0xa6, 0xd1, 0x60, 0x91, 0x4c, 0x70, 0x86, 0xb0]);
    pub const TCC: [u8; 16] = uuid(0x848ce855, 0xd805, 0x4566, [0xa8, 0xab, 0x73, 0xe8, 0x84, 0xcc, 0x6b, 0xff]);
    pub const TCP: [u8; 16] = uuid(0xe10a013b, 0x17d4, 0x4bf5, [0xb0, 0x89, 0x42, 0x95, 0x91, 0x05, 0x9b, 0x60]);
    pub const TD: [u8; 16] = uuid(0x7d7c0fe4, 0xfe41, 0x4fea, [0x92, 0xc9, 0x45, 0x44, 0xd7, 0x70, 0x6d, 0xc6]);
    pub const VGT: [u8; 16] = uuid(0x0b6a8cb7, 0x7a01, 0x409f, [0xa2, 0x2c, 0x30, 0x14, 0x85, 0x4f, 0x13, 0x59]);
    pub const WD: [u8; 16] = uuid(0x0e176789, 0x46ed, 0x4b02, [0x97, 0x2a, 0x91, 0x6d, 0x2f, 0xac, 0x24, 0x4a]);
}

/// The counter blocks libhsakmt lists for a GFX major version 9 node (ROCT-Thunk-Interface
/// rocm-5.2.3, src/pmc_table.c, `vega_blocks`, picked by `get_block_properties` for any gfxv
/// whose major is 9; the device id only matters for gfx8). The ids are the contents of the
/// per-block counter id arrays that table names (some shared with gfx7/gfx8), which are runs of
/// consecutive numbers; every counter is 64 bits wide with an all-ones mask. Blocks the table
/// leaves empty (CPC 1, MC 9, SRBM 13, TCS 20) are not listed. In block-id order, which is
/// the order libhsakmt lays them out.
pub const GFX9_BLOCKS: &[BlockFacts] = &[
    block(0, "CB", block_uuid::CB, 7, &[(0, 437)]),
    block(2, "CPF", block_uuid::CPF, 5, &[(0, 31)]),
    block(3, "CPG", block_uuid::CPG, 5, &[(0, 58)]),
    block(4, "DB", block_uuid::DB, 12, &[(0, 327)]),
    block(5, "GDS", block_uuid::GDS, 4, &[(0, 120)]),
    block(6, "GRBM", block_uuid::GRBM, 2, &[(0, 37)]),
    block(7, "GRBMSE", block_uuid::GRBMSE, 1, &[(0, 15)]),
    block(8, "IA", block_uuid::IA, 7, &[(0, 31)]),
    block(10, "PASC", block_uuid::PASC, 11, &[(0, 490)]),
    block(11, "PASU", block_uuid::PASU, 10, &[(0, 291)]),
    block(12, "SPI", block_uuid::SPI, 18, &[(0, 195)]),
    block(14, "SQ", block_uuid::SQ, 16, &[(1, 183), (255, 372)]),
    block(15, "SX", block_uuid::SX, 4, &[(0, 207)]),
    block(16, "TA", block_uuid::TA, 6, &[(0, 118)]),
    block(17, "TCA", block_uuid::TCA, 10, &[(1, 34)]),
    block(18, "TCC", block_uuid::TCC, 10, &[(0, 107), (128, 255)]),
    block(19, "TCP", block_uuid::TCP, 10, &[(0, 84)]),
    block(21, "TD", block_uuid::TD, 6, &[(0, 56)]),
    block(22, "VGT", block_uuid::VGT, 10, &[(0, 147)]),
    block(23, "WD", block_uuid::WD, 4, &[(0, 57)]),
];

/// The counter blocks libhsakmt lists for a GFX major version 10 node (the same source,
/// `navi_blocks`, picked for any gfxv whose major is 10: gfx1030 included). gfx10 has no IA, MC,
/// SRBM, TCA, TCC, TCS, VGT or WD counters there; every id array is one run from 0.
pub const GFX10_BLOCKS: &[BlockFacts] = &[
    block(0, "CB", block_uuid::CB, 7, &[(0, 460)]),
    block(2, "CPF", block_uuid::CPF, 6, &[(0, 39)]),
    block(3, "CPG", block_uuid::CPG, 6, &[(0, 81)]),
    block(4, "DB", block_uuid::DB, 12, &[(0, 369)]),
    block(5, "GDS", block_uuid::GDS, 10, &[(0, 122)]),
    block(6, "GRBM", block_uuid::GRBM, 2, &[(0, 46)]),
    block(7, "GRBMSE", block_uuid::GRBMSE, 1, &[(0, 18)]),
    block(10, "PASC", block_uuid::PASC, 11, &[(0, 551)]),
    block(11, "PASU", block_uuid::PASU, 16, &[(0, 265)]),
    block(12, "SPI", block_uuid::SPI, 18, &[(0, 328)]),
    block(14, "SQ", block_uuid::SQ, 16, &[(0, 511)]),
    block(15, "SX", block_uuid::SX, 4, &[(0, 224)]),
    block(16, "TA", block_uuid::TA, 5, &[(0, 225)]),
    block(19, "TCP", block_uuid::TCP, 10, &[(0, 76)]),
    block(21, "TD", block_uuid::TD, 5, &[(0, 60)]),
];

/// The GFX blocks libhsakmt 5.2.3 lists for a node of GFX version `gfxv` (major << 16 |
/// minor << 8 | stepping): `InvalidParameter` for a major it has no table for (a CPU node's
/// is 0), as `get_block_properties`. Majors 7 and 8 have tables there (chosen by gfxv and
/// device id) that this thunk does not carry, since no gfx7 or gfx8 device is modelled:
/// `NotSupported` rather than a wrong list.
pub fn gfx_blocks(gfxv: u32) -> Result<&'static [BlockFacts]> {
    match gfxv >> 16 {
        9 => Ok(GFX9_BLOCKS),
        10 => Ok(GFX10_BLOCKS),
        7 | 8 => {
            log::debug!("PMC: no counter table for GFX {gfxv:06x} in this thunk");
            Err(Status::NotSupported)
        }
        _ => Err(Status::InvalidParameter),
    }
}

/// `HsaCounterProperties` of a node: its blocks and how many can be counted at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterProperties {
    /// Counter slots over every block.
    pub num_concurrent: u32,
    pub blocks: Vec<CounterBlock>,
}

/// One `HsaCounterBlockProperties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterBlock {
    /// The block's `HSA_UUID`, as 16 bytes.
    pub block_id: [u8; 16],
    pub num_concurrent: u32,
    pub counters: Vec<Counter>,
}

/// One `HsaCounter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// `HSA_PROFILE_TYPE`.
    pub profile_type: u32,
    pub counter_id: u64,
    pub size_in_bits: u32,
    pub mask: u64,
    /// `HsaCounterFlags`.
    pub flags: u32,
    pub block_index: u32,
}

impl CounterProperties {
    /// The properties libhsakmt builds from `blocks` (hsaKmtPmcGetCounterProperties).
    pub fn of(blocks: &[BlockFacts]) -> CounterProperties {
        let blocks: Vec<CounterBlock> = blocks
            .iter()
            .map(|b| CounterBlock {
                block_id: b.uuid,
                num_concurrent: b.slots,
                counters: b
                    .counter_ids()
                    .map(|id| Counter {
                        profile_type: PROFILE_TYPE_NONPRIV_IMMEDIATE,
                        counter_id: u64::from(id),
                        size_in_bits: 64,
                        mask: u64::MAX,
                        flags: COUNTER_FLAG_GLOBAL,
                        block_index: b.index,
                    })
                    .collect(),
            })
            .collect();
        CounterProperties { num_concurrent: blocks.iter().map(|b| b.num_concurrent).sum(), blocks }
    }
}

/// What `hsaKmtPmcRegisterTrace` fills in (`HsaPmcTraceRoot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRoot {
    pub buffer_min_size: u64,
    pub number_of_passes: u32,
    pub trace_id: u64,
}

/// A registered trace: the GPU it was registered on and the blocks its privileged counters
/// name (never empty). It is never started: acquiring its blocks always fails (see the module).
#[derive(Debug, Clone)]
struct Trace {
    gpu_id: u32,
    /// (block index, counter ids) in block order.
    blocks: Vec<(u32, Vec<u64>)>,
}

/// The traces registered and not yet unregistered, by id (never 0).
#[derive(Debug, Default)]
pub(super) struct Traces {
    next: u64,
    live: std::collections::HashMap<u64, Trace>,
}

/// What `hsaKmtSPMSetDestBuffer` reports back, whatever the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpmCopy {
    /// The time left of the caller's timeout, in ms.
    pub timeout: u32,
    pub bytes_copied: u32,
    pub data_loss: bool,
}

impl Thunk {
    /// The GFX blocks of `node` (see [`gfx_blocks`]); the node is already known to exist.
    fn pmc_blocks(&self, node: u32) -> Result<&'static [BlockFacts]> {
        gfx_blocks(self.nodes.node(node).map_or(0, |n| n.props.engine_id.gfx_version()))
    }

    /// `hsaKmtPmcGetCounterProperties`: the counter blocks of `node`. An unknown node is
    /// `InvalidNodeUnit`; a CPU node (GFX version 0) `InvalidParameter`.
    pub fn pmc_counter_properties(&self, node: u32) -> Result<CounterProperties> {
        self.gpu_id(node).map_err(|_| Status::InvalidNodeUnit)?;
        Ok(CounterProperties::of(self.pmc_blocks(node)?))
    }

    /// `hsaKmtPmcRegisterTrace`, with libhsakmt's checks in its order: no counters
    /// (`InvalidParameter`), an unknown node, more than [`MAX_TRACE_COUNTERS`] (`NoMemory`), a
    /// block index past the last block; then, over the privileged counters only (the others
    /// are skipped), per block in block order: a block the node does not list, or more
    /// counters than its slots (`InvalidParameter`); and no privileged counter at all
    /// (`InvalidParameter`). libhsakmt finds a block's slots in the properties
    /// GetCounterProperties built (it reads past them, or through a null pointer, when the
    /// block is not listed or that call was never made); this thunk looks at its table.
    pub fn pmc_register_trace(&self, node: u32, counters: &[Counter]) -> Result<TraceRoot> {
        if counters.is_empty() {
            return Err(Status::InvalidParameter);
        }
        let gpu_id = self.gpu_id(node).map_err(|_| Status::InvalidNodeUnit)?;
        if counters.len() > MAX_TRACE_COUNTERS {
            return Err(Status::NoMemory);
        }
        let mut per_block: Vec<Vec<u64>> = vec![Vec::new(); PERFCOUNTER_BLOCKID_MAX as usize];
        let mut min_size = 0u64;
        for c in counters {
            if c.block_index >= PERFCOUNTER_BLOCKID_MAX {
                return Err(Status::InvalidParameter);
            }
            if c.profile_type > PROFILE_TYPE_PRIVILEGED_STREAMING {
                continue;
            }
            min_size += u64::from(c.size_in_bits / 8);
            per_block[c.block_index as usize].push(c.counter_id);
        }
        let listed = if per_block.iter().any(|b| !b.is_empty()) { self.pmc_blocks(node).unwrap_or(&[]) } else { &[] };
        let mut blocks = Vec::new();
        for (index, ids) in per_block.into_iter().enumerate().filter(|(_, ids)| !ids.is_empty()) {
            let slots = listed.iter().find(|b| b.index as usize == index).map_or(0, |b| b.slots);
            if slots == 0 {
                log::debug!("PMC trace: block {index} is not listed on node {node}");
                return Err(Status::InvalidParameter);
            }
            if ids.len() > slots as usize {
                log::debug!("PMC trace: {} counters for {slots} slots of block {index}", ids.len());
                return Err(Status::InvalidParameter);
            }
            blocks.push((index as u32, ids));
        }
        if blocks.is_empty() {
            return Err(Status::InvalidParameter);
        }
        let mut t = self.traces.lock();
        t.next += 1;
        let trace_id = t.next;
        t.live.insert(trace_id, Trace { gpu_id, blocks });
        Ok(TraceRoot { buffer_min_size: min_size.div_ceil(TRACE_PAGE) * TRACE_PAGE, number_of_passes: 1, trace_id })
    }

    /// The trace `trace_id`: 0 is `InvalidParameter`, one not registered `InvalidHandle`
    /// (libhsakmt reads its magic number through the id).
    fn trace(&self, trace_id: u64) -> Result<Trace> {
        if trace_id == 0 {
            return Err(Status::InvalidParameter);
        }
        self.traces.lock().live.get(&trace_id).cloned().ok_or(Status::InvalidHandle)
    }

    /// `hsaKmtPmcUnregisterTrace`: 0 is `InvalidParameter`, then the node is checked, then the
    /// trace, which must be of the node's GPU (`InvalidNodeUnit`). It is never running.
    pub fn pmc_unregister_trace(&self, node: u32, trace_id: u64) -> Result<()> {
        if trace_id == 0 {
            return Err(Status::InvalidParameter);
        }
        let gpu_id = self.gpu_id(node).map_err(|_| Status::InvalidNodeUnit)?;
        if self.trace(trace_id)?.gpu_id != gpu_id {
            return Err(Status::InvalidNodeUnit);
        }
        self.traces.lock().live.remove(&trace_id);
        Ok(())
    }

    /// `hsaKmtPmcAcquireTraceAccess`: the trace is checked before the node; then libhsakmt
    /// takes slots block by block from its IOMMU slot count, the only one it keeps, and
    /// answers `Unavailable` for any other block (or without its shared slot table), which
    /// every trace here starts with.
    pub fn pmc_acquire_trace_access(&self, node: u32, trace_id: u64) -> Result<()> {
        let t = self.trace(trace_id)?;
        self.gpu_id(node).map_err(|_| Status::InvalidNodeUnit)?;
        log::debug!("PMC trace {trace_id}: block {} has no privileged slots", t.blocks[0].0);
        Err(Status::Unavailable)
    }

    /// `hsaKmtPmcReleaseTraceAccess`: success for any registered trace (libhsakmt ignores
    /// what giving back the slots answers); the node is not looked at.
    pub fn pmc_release_trace_access(&self, _node: u32, trace_id: u64) -> Result<()> {
        self.trace(trace_id).map(drop)
    }

    /// `hsaKmtPmcStartTrace`: a null or empty buffer is `InvalidParameter` before the trace
    /// is looked at. A registered trace was never acquired, so its perf_event files are not
    /// open: libhsakmt's enabling request on them fails, which is `Error`.
    pub fn pmc_start_trace(&self, trace_id: u64, buffer: u64, size: u64) -> Result<()> {
        if trace_id == 0 || buffer == 0 || size == 0 {
            return Err(Status::InvalidParameter);
        }
        self.trace(trace_id)?;
        Err(Status::Error)
    }

    /// `hsaKmtPmcQueryTrace`: a registered trace was never started, so it has no buffer for
    /// its first counter's value: `NoMemory`.
    pub fn pmc_query_trace(&self, trace_id: u64) -> Result<()> {
        self.trace(trace_id)?;
        Err(Status::NoMemory)
    }

    /// `hsaKmtPmcStopTrace`: as starting, the disabling request fails: `Error`.
    pub fn pmc_stop_trace(&self, trace_id: u64) -> Result<()> {
        self.trace(trace_id)?;
        Err(Status::Error)
    }

    /// One RLC_SPM request; its argument comes back whatever the result.
    fn spm(&self, op: u32, gpu_id: u32, dest: u64, size: u32, timeout: u32) -> (Result<()>, [u8; 32]) {
        let mut a = [0u8; 32];
        a[0..8].copy_from_slice(dest.as_bytes());
        for (i, w) in [size, op, timeout, gpu_id].iter().enumerate() {
            a[8 + 4 * i..12 + 4 * i].copy_from_slice(w.as_bytes());
        }
        let r = loop {
            // SAFETY: the device may write `size` bytes at `dest` only for SET_DEST_BUF, whose
            // caller vouches for it (see [`Thunk::spm_set_dest_buffer`]); the rest holds no pointer.
            match unsafe { self.kfd.ioctl(AMDKFD_IOC_RLC_SPM, &mut a) } {
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
                r => break r,
            }
        };
        let r = r.map_err(|e| {
            log::debug!("RLC_SPM op {op}: {e}");
            Status::IoctlFailed
        });
        (r, a)
    }

    /// `hsaKmtSPMAcquire`: `IoctlFailed` where the driver has no SPM (see the module).
    pub fn spm_acquire(&self, node: u32) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        self.spm(SPM_OP_ACQUIRE, gpu_id, 0, 0, 0).0
    }

    /// `hsaKmtSPMRelease`: as acquiring.
    pub fn spm_release(&self, node: u32) -> Result<()> {
        let gpu_id = self.gpu_id(node)?;
        self.spm(SPM_OP_RELEASE, gpu_id, 0, 0, 0).0
    }

    /// `hsaKmtSPMSetDestBuffer`: the status, and what the request reported (libhsakmt writes
    /// it back even when the request fails). An unknown node is not refused first: libhsakmt
    /// sends the request regardless, and it fails.
    ///
    /// # Safety
    ///
    /// `[dest, dest + size)` is valid for the device's writes until the next SetDestBuffer or
    /// release (a null `dest` stops the copying).
    pub unsafe fn spm_set_dest_buffer(&self, node: u32, size: u32, timeout: u32, dest: u64) -> (Result<()>, SpmCopy) {
        // libhsakmt ignores validate_nodeid's answer here and sends the request anyway (for no
        // GPU: gpu_id 0, which no driver knows).
        let gpu_id = self.gpu_id(node).unwrap_or(0);
        let (r, a) = self.spm(SPM_OP_SET_DEST_BUF, gpu_id, dest, size, timeout);
        let word = |off: usize| u32::from_le_bytes(a[off..off + 4].try_into().expect("4 bytes"));
        (r, SpmCopy { timeout: word(16), bytes_copied: word(24), data_loss: word(28) != 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks `table` against (name, block index, UUID text, slots, counter count) facts.
    fn check_table(table: &[BlockFacts], facts: &[(&str, u32, &str, u32, usize)]) {
        assert_eq!(table.len(), facts.len());
        for (b, &(name, index, id, slots, count)) in table.iter().zip(facts) {
            // The UUID as kfdtest prints it: Data1, Data2, Data3 as numbers, then Data4's bytes.
            let u = &b.uuid;
            let le = |r: std::ops::Range<usize>| u[r].iter().rev().map(|x| format!("{x:02x}")).collect::<String>();
            let be = |r: std::ops::Range<usize>| u[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
            let text = format!("{}-{}-{}-{}-{}", le(0..4), le(4..6), le(6..8), be(8..10), be(10..16));
            assert_eq!(
                (b.name, b.index, text.as_str(), b.slots, b.counter_ids().count()),
                (name, index, id, slots, count)
            );
            let ids: Vec<u32> = b.counter_ids().collect();
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "{name}: ids ascend");
        }
    }

    /// The gfx9 table against facts counted independently in ROCT-Thunk-Interface rocm-5.2.3:
    /// each block's counter count is the length of the id array `vega_blocks` names
    /// (src/pmc_table.c), its UUID the string form in the comment above its
    /// `HSA_PROFILEBLOCK_AMD_*` definition (include/hsakmttypes.h), and its index its place in
    /// `enum perf_block_id` (src/pmc_table.h).
    #[test]
    fn the_gfx9_table_is_libhsakmts() {
        let facts: [(&str, u32, &str, u32, usize); 20] = [
            ("CB", 0, "9ba429c6-af2d-4b38-b349-157271beac6a", 7, 438),
            ("CPF", 2, "2b0ad2b5-1c43-4f46-a7bc-e119411ea6c9", 5, 32),
            ("CPG", 3, "590ec94d-20f0-448f-8dff-316c679de7ff", 5, 59),
            ("DB", 4, "3d1a47fc-0013-4ed4-8306-822ca0b7a6c2", 12, 328),
            ("GDS", 5, "f59276ec-2526-4bf8-8ec0-118f77700dc9", 4, 121),
            ("GRBM", 6, "8f00933c-c33d-4801-97b7-7007f78573ad", 2, 38),
            ("GRBMSE", 7, "34ebd8d7-7c8b-4d15-88fa-0e4e4af59ac1", 1, 16),
            ("IA", 8, "34276944-4264-4fcd-9d6e-ae264582ec51", 7, 32),
            ("PASC", 10, "b0e7fb5d-0efc-4744-b516-5d23dc1fd56c", 11, 491),
            ("PASU", 11, "9a152b6a-1fad-45f2-a5bf-f163826bd0cd", 10, 292),
            ("SPI", 12, "eda81044-d62c-47eb-af89-4f6fbf3b38e0", 18, 196),
            ("SQ", 14, "b5c396b6-d310-47e4-86fc-5cc3043af508", 16, 301),
            ("SX", 15, "bdb8d737-43cc-4162-be52-51cfb847beaf", 4, 208),
            ("TA", 16, "c01ee43d-ad92-44b1-8ab9-be5e696ceea7", 6, 119),
            ("TCA", 17, "333e393f-e147-4f49-a6d1-60914c7086b0", 10, 34),
            ("TCC", 18, "848ce855-d805-4566-a8ab-73e884cc6bff", 10, 236),
            ("TCP", 19, "e10a013b-17d4-4bf5-b089-429591059b60", 10, 85),
            ("TD", 21, "7d7c0fe4-fe41-4fea-92c9-4544d7706dc6", 6, 57),
            ("VGT", 22, "0b6a8cb7-7a01-409f-a22c-3014854f1359", 10, 148),
            ("WD", 23, "0e176789-46ed-4b02-972a-916d2fac244a", 4, 58),
        ];
        check_table(GFX9_BLOCKS, &facts);
        // The two blocks whose ids skip: SQ 184..=254, TCC 108..=127.
        let ids = |i: usize| GFX9_BLOCKS[i].counter_ids().collect::<Vec<_>>();
        assert_eq!((ids(11)[182], ids(11)[183]), (183, 255));
        assert_eq!((ids(15)[107], ids(15)[108]), (107, 128));
    }

    /// The gfx10 table against the same sources' facts: `navi_blocks` in src/pmc_table.c.
    #[test]
    fn the_gfx10_table_is_libhsakmts() {
        let facts: [(&str, u32, &str, u32, usize); 15] = [
            ("CB", 0, "9ba429c6-af2d-4b38-b349-157271beac6a", 7, 461),
            ("CPF", 2, "2b0ad2b5-1c43-4f46-a7bc-e119411ea6c9", 6, 40),
            ("CPG", 3, "590ec94d-20f0-448f-8dff-316c679de7ff", 6, 82),
            ("DB", 4, "3d1a47fc-0013-4ed4-8306-822ca0b7a6c2", 12, 370),
            ("GDS", 5, "f59276ec-2526-4bf8-8ec0-118f77700dc9", 10, 123),
            ("GRBM", 6, "8f00933c-c33d-4801-97b7-7007f78573ad", 2, 47),
            ("GRBMSE", 7, "34ebd8d7-7c8b-4d15-88fa-0e4e4af59ac1", 1, 19),
            ("PASC", 10, "b0e7fb5d-0efc-4744-b516-5d23dc1fd56c", 11, 552),
            ("PASU", 11, "9a152b6a-1fad-45f2-a5bf-f163826bd0cd", 16, 266),
            ("SPI", 12, "eda81044-d62c-47eb-af89-4f6fbf3b38e0", 18, 329),
            ("SQ", 14, "b5c396b6-d310-47e4-86fc-5cc3043af508", 16, 512),
            ("SX", 15, "bdb8d737-43cc-4162-be52-51cfb847beaf", 4, 225),
            ("TA", 16, "c01ee43d-ad92-44b1-8ab9-be5e696ceea7", 5, 226),
            ("TCP", 19, "e10a013b-17d4-4bf5-b089-429591059b60", 10, 77),
            ("TD", 21, "7d7c0fe4-fe41-4fea-92c9-4544d7706dc6", 5, 61),
        ];
        check_table(GFX10_BLOCKS, &facts);
        let p = CounterProperties::of(GFX10_BLOCKS);
        assert_eq!(p.num_concurrent, 129);
        assert_eq!(p.blocks.iter().map(|b| b.counters.len()).sum::<usize>(), 3390);
    }

    /// get_block_properties picks the table by the GFX major version only.
    #[test]
    fn the_table_follows_the_gfx_major_version() {
        assert_eq!(gfx_blocks(0x09000A), Ok(GFX9_BLOCKS));
        assert_eq!(gfx_blocks(0x090400), Ok(GFX9_BLOCKS));
        assert_eq!(gfx_blocks(0), Err(Status::InvalidParameter));
        assert_eq!(gfx_blocks(0x0B0000), Err(Status::InvalidParameter));
        assert_eq!(gfx_blocks(0x0A0300), Ok(GFX10_BLOCKS));
        assert_eq!(gfx_blocks(0x0A0101), Ok(GFX10_BLOCKS));
        assert_eq!(gfx_blocks(0x080003), Err(Status::NotSupported));
    }

    #[test]
    fn properties_total_the_slots_and_mark_every_counter() {
        let p = CounterProperties::of(GFX9_BLOCKS);
        assert_eq!(p.num_concurrent, 158);
        let c = p.blocks[11].counters[0];
        assert_eq!(
            c,
            Counter { profile_type: 2, counter_id: 1, size_in_bits: 64, mask: u64::MAX, flags: 1, block_index: 14 }
        );
    }
}
