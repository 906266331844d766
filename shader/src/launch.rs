//! Launching a kernel: its code description ([`KernelCode`], from the kernel object an AQL
//! packet names), one dispatch of it ([`Dispatch`]), and the state every wave of a workgroup
//! starts in ([`Dispatch::workgroup`]).
//!
//! Facts are from LLVM 15's AMDGPUUsage ("Kernel Descriptor", "compute_pgm_rsrc1/2/3",
//! "Initial Kernel Execution State"), ROCR-Runtime rocm-5.2.3 (`amd_kernel_code_t`,
//! `amd_queue_t`) and the AMD "Vega" / "MI200" ISA manuals (the MODE register).

use crate::exec::Apertures;
use crate::group::Workgroup;
use crate::isa::Target;
use crate::wave::{TrapHandler, Wave, FLAT_SCRATCH};

/// Size of a code object v3+ kernel descriptor.
pub const KERNEL_DESCRIPTOR_SIZE: usize = 64;
/// Size of the legacy `amd_kernel_code_t`.
pub const AMD_KERNEL_CODE_SIZE: usize = 256;
/// LDS a workgroup may have on gfx90a (AMDGPUUsage, "Memory Spaces": 64 KiB per workgroup).
pub const MAX_LDS_BYTES: u32 = 64 * 1024;
/// Work-items of a workgroup (AMDGPUUsage: the HSA limit, 1024).
pub const MAX_WORKGROUP_ITEMS: u32 = 1024;
/// The hardware's scratch wave size granule (COMPUTE_TMPRING_SIZE.WAVESIZE counts 1 KiB).
const SCRATCH_WAVE_GRANULE: u64 = 1024;

/// Why a kernel cannot be launched as described.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    #[error("the kernel object is {got} bytes, a {what} needs {need}")]
    Short { what: &'static str, got: usize, need: usize },
    #[error("amd_kernel_code_t version {major}.{minor}, machine kind {kind}: not an AMDGPU kernel code object")]
    NotAmdKernelCode { major: u32, minor: u32, kind: u16 },
    #[error("the kernel's entry (kernel object {kernel_object:#x} + {offset}) is not a 256-byte aligned address")]
    Entry { kernel_object: u64, offset: i64 },
    #[error("the kernel's entry (kernel object {kernel_object:#x} + {offset}) lies inside its {size}-byte {what}")]
    EntryInObject { kernel_object: u64, offset: i64, size: usize, what: &'static str },
    #[error("the kernel asks for wave32, which {} does not have", .0.mcpu())]
    Wave32(Target),
    #[error("compute_pgm_rsrc2 USER_SGPR_COUNT is {rsrc2}, but the enabled user SGPRs take {enabled}")]
    UserSgprs { rsrc2: u32, enabled: u32 },
    #[error("the kernel allocates {total} vector registers but puts its AGPRs at {accum_offset}")]
    AccumOffset { total: usize, accum_offset: usize },
    #[error("bad dispatch geometry: {0}")]
    Geometry(String),
    #[error("the dispatch needs {need} bytes of LDS per workgroup, the device has {MAX_LDS_BYTES}")]
    Lds { need: u64 },
    #[error("a workgroup needs {need} bytes of scratch ({waves} waves), the queue has {have}")]
    Scratch { need: u64, waves: u64, have: u64 },
}

/// Which of the two kernel object formats the code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The 64-byte kernel descriptor of code object v3+.
    Descriptor,
    /// The legacy 256-byte `amd_kernel_code_t` (code object v2, ROCr's blit kernels).
    AmdKernelCode,
    /// No kernel object: a PM4 dispatch's COMPUTE_PGM_LO/HI and COMPUTE_PGM_RSRC1/2/3
    /// registers (the code address is the "kernel object", entry offset 0).
    Registers,
}

/// A kernel's code and the state it asks its waves to start in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCode {
    pub format: Format,
    pub target: Target,
    /// Byte offset (signed) of the first instruction from the kernel object.
    pub entry_offset: i64,
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u64,
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub rsrc3: u32,
    /// kernel_code_properties: the user SGPR enables (bits 0-6 in both formats; bits 7-9 are the
    /// legacy grid work-group counts) and, bit 10, wave32.
    pub properties: u32,
    pub wave_size: u32,
    /// VGPRs and AGPRs each wave is allocated.
    pub vgprs: usize,
    pub agprs: usize,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// `(value >> shift) & mask` of a register field.
fn field(reg: u32, shift: u32, width: u32) -> u32 {
    (reg >> shift) & ((1 << width) - 1)
}

// kernel_code_properties bits, the same in both formats (AMDGPUUsage "Kernel Descriptor";
// ROCR-Runtime amd_hsa_kernel_code.h AMD_KERNEL_CODE_PROPERTIES_*).
const PRIVATE_SEGMENT_BUFFER: u32 = 1 << 0;
const DISPATCH_PTR: u32 = 1 << 1;
const QUEUE_PTR: u32 = 1 << 2;
const KERNARG_SEGMENT_PTR: u32 = 1 << 3;
const DISPATCH_ID: u32 = 1 << 4;
const FLAT_SCRATCH_INIT: u32 = 1 << 5;
const PRIVATE_SEGMENT_SIZE: u32 = 1 << 6;
/// Legacy only: ENABLE_SGPR_GRID_WORKGROUP_COUNT_X/Y/Z (bits 7-9; reserved in the v3 descriptor).
const GRID_WORKGROUP_COUNT_X: u32 = 1 << 7;
const WAVEFRONT_SIZE32: u32 = 1 << 10;

// compute_pgm_rsrc2 (AMDGPUUsage "compute_pgm_rsrc2 for GFX6-GFX11").
const RSRC2_PRIVATE_SEGMENT_WAVE_OFFSET: u32 = 1 << 0;
const RSRC2_WORKGROUP_ID_X: u32 = 1 << 7;
const RSRC2_WORKGROUP_INFO: u32 = 1 << 10;

impl KernelCode {
    /// Parses the kernel object at the start of `bytes`: a legacy `amd_kernel_code_t` when it
    /// says so (version 1, machine kind 1 = AMDGPU), otherwise a kernel descriptor.
    ///
    /// The command processor reads both formats with the same offsets for what it needs (entry
    /// offset at 16, COMPUTE_PGM_RSRC3/1/2 at 44/48/52, properties at 56: ROCr even stores
    /// gfx90a's RSRC3 in the high half of the legacy max_scratch_backing_memory_byte_size, as
    /// amd_gpu_agent.cpp AssembleShader does); the formats differ in the segment sizes.
    pub fn parse(target: Target, bytes: &[u8]) -> Result<KernelCode, LaunchError> {
        if Self::is_amd_kernel_code(bytes) {
            Self::from_amd_kernel_code(target, bytes)
        } else {
            Self::from_descriptor(target, bytes)
        }
    }

    /// Is `bytes` (at least the first 12 bytes of a kernel object) a legacy `amd_kernel_code_t`?
    pub fn is_amd_kernel_code(bytes: &[u8]) -> bool {
        bytes.len() >= 12 && u32_at(bytes, 0) == 1 && u16_at(bytes, 8) == 1
    }

    /// A code object v3+ kernel descriptor (AMDGPUUsage "Kernel Descriptor for GFX6-GFX11"):
    /// group_segment_fixed_size @0, private_segment_fixed_size @4, kernarg_size @8,
    /// kernel_code_entry_byte_offset @16 (i64), compute_pgm_rsrc3 @44, rsrc1 @48, rsrc2 @52,
    /// kernel_code_properties @56 (u16).
    pub fn from_descriptor(target: Target, bytes: &[u8]) -> Result<KernelCode, LaunchError> {
        if bytes.len() < KERNEL_DESCRIPTOR_SIZE {
            return Err(LaunchError::Short {
                what: "kernel descriptor",
                got: bytes.len(),
                need: KERNEL_DESCRIPTOR_SIZE,
            });
        }
        Self::new(
            Format::Descriptor,
            target,
            (u64_at(bytes, 16) as i64, [u32_at(bytes, 48), u32_at(bytes, 52), u32_at(bytes, 44)]),
            (u32_at(bytes, 0), u32_at(bytes, 4), u64::from(u32_at(bytes, 8))),
            u32::from(u16_at(bytes, 56)) & !(0x7 << 7),
        )
    }

    /// A legacy `amd_kernel_code_t` (ROCR-Runtime rocm-5.2.3 src/inc/amd_hsa_kernel_code.h):
    /// version major @0 (1), machine kind @8 (1 = AMDGPU), kernel_code_entry_byte_offset @16,
    /// compute_pgm_resource_registers @48 (rsrc1 low, rsrc2 high), code_properties @56,
    /// workitem_private_segment_byte_size @60, workgroup_group_segment_byte_size @64,
    /// kernarg_segment_byte_size @72 (u64).
    pub fn from_amd_kernel_code(target: Target, bytes: &[u8]) -> Result<KernelCode, LaunchError> {
        if bytes.len() < AMD_KERNEL_CODE_SIZE {
            return Err(LaunchError::Short { what: "amd_kernel_code_t", got: bytes.len(), need: AMD_KERNEL_CODE_SIZE });
        }
        let (major, minor, kind) = (u32_at(bytes, 0), u32_at(bytes, 4), u16_at(bytes, 8));
        if major != 1 || kind != 1 {
            return Err(LaunchError::NotAmdKernelCode { major, minor, kind });
        }
        Self::new(
            Format::AmdKernelCode,
            target,
            (u64_at(bytes, 16) as i64, [u32_at(bytes, 48), u32_at(bytes, 52), u32_at(bytes, 44)]),
            (u32_at(bytes, 64), u32_at(bytes, 60), u64_at(bytes, 72)),
            u32_at(bytes, 56),
        )
    }

    /// The code a PM4 dispatch describes in COMPUTE_PGM_RSRC1/2/3: no user SGPR enables (the
    /// user SGPRs are COMPUTE_USER_DATA_*, see [`Dispatch::user_data`]), no fixed segment sizes.
    pub fn from_registers(target: Target, rsrc1: u32, rsrc2: u32, rsrc3: u32) -> Result<KernelCode, LaunchError> {
        Self::new(Format::Registers, target, (0, [rsrc1, rsrc2, rsrc3]), (0, 0, 0), 0)
    }

    fn new(
        format: Format,
        target: Target,
        (entry_offset, [rsrc1, rsrc2, rsrc3]): (i64, [u32; 3]),
        (group, private, kernarg): (u32, u32, u64),
        properties: u32,
    ) -> Result<KernelCode, LaunchError> {
        // Wave32 exists from gfx10 on (AMDGPUUsage: ENABLE_WAVEFRONT_SIZE32, "GFX10-GFX11").
        if properties & WAVEFRONT_SIZE32 != 0 && !target.is_gfx10() {
            return Err(LaunchError::Wave32(target));
        }
        // A gfx10 kernel object says its wave size; a PM4 dispatch's is DISPATCH_INITIATOR's
        // CS_W32_EN, which the caller's target carries.
        let target = match (target.is_gfx10(), format) {
            (true, Format::Descriptor | Format::AmdKernelCode) if properties & WAVEFRONT_SIZE32 != 0 => Target::Gfx1030,
            (true, Format::Descriptor | Format::AmdKernelCode) => Target::Gfx1030W64,
            _ => target,
        };
        let (vgprs, agprs) = match target {
            // gfx90a: GRANULATED_WORKITEM_VGPR_COUNT counts the unified VGPR+AGPR file in
            // granules of 8 (rsrc1 bits 5:0, "(vgprs_used / 8) - 1"); rsrc3 ACCUM_OFFSET (bits
            // 5:0) puts the first AGPR at (ACCUM_OFFSET + 1) * 4.
            Target::Gfx90a => {
                let total = (field(rsrc1, 0, 6) as usize + 1) * 8;
                let accum_offset = (field(rsrc3, 0, 6) as usize + 1) * 4;
                if accum_offset > total {
                    // The hardware does not check it: kfdtest's PM4 dispatches write RSRC3 = 9
                    // (AGPRs from v40) for 32-register shaders that use no AGPRs. A compiler's
                    // kernel object never does, so there it is an error.
                    if format != Format::Registers {
                        return Err(LaunchError::AccumOffset { total, accum_offset });
                    }
                    (total, 0)
                } else {
                    (accum_offset, total - accum_offset)
                }
            }
            // gfx10 has no AGPRs; GRANULATED_WORKITEM_VGPR_COUNT counts granules of 8 VGPRs in
            // wave32 and 4 in wave64 (AMDGPUUsage compute_pgm_rsrc1, "GFX10-GFX11 (wavefront
            // size 32): ... ceil(vgprs_used / 8) - 1", "(wavefront size 64): ... / 4").
            Target::Gfx1030 => ((field(rsrc1, 0, 6) as usize + 1) * 8, 0),
            Target::Gfx1030W64 => ((field(rsrc1, 0, 6) as usize + 1) * 4, 0),
        };
        let k = KernelCode {
            format,
            target,
            entry_offset,
            group_segment_fixed_size: group,
            private_segment_fixed_size: private,
            kernarg_size: kernarg,
            rsrc1,
            rsrc2,
            rsrc3,
            properties,
            wave_size: target.wave_size(),
            vgprs,
            agprs,
        };
        let enabled = k.user_sgprs_enabled();
        let rsrc2_count = k.user_sgpr_count();
        // The system SGPRs follow USER_SGPR_COUNT; fewer than the enables need would overlap.
        if enabled > rsrc2_count {
            return Err(LaunchError::UserSgprs { rsrc2: rsrc2_count, enabled });
        }
        Ok(k)
    }

    /// rsrc2 USER_SGPR_COUNT (bits 5:1): where the system SGPRs start.
    pub fn user_sgpr_count(&self) -> u32 {
        field(self.rsrc2, 1, 5)
    }

    /// SGPRs the enabled user SGPRs take, in AMDGPUUsage's table order.
    pub fn user_sgprs_enabled(&self) -> u32 {
        let p = self.properties;
        let mut n = 0;
        for (bit, count) in USER_SGPRS {
            if p & bit != 0 {
                n += count;
            }
        }
        n
    }

    /// The address of the first instruction for the kernel object at `kernel_object`: the
    /// hardware takes it as COMPUTE_PGM_LO/HI, the address >> 8, so it must be 256-byte aligned
    /// (AMDGPUUsage: kernel_code_entry_byte_offset "must be 256 byte aligned").
    pub fn entry(&self, kernel_object: u64) -> Result<u64, LaunchError> {
        let bad = || LaunchError::Entry { kernel_object, offset: self.entry_offset };
        let pc = kernel_object.checked_add_signed(self.entry_offset).ok_or_else(bad)?;
        if pc % 256 != 0 {
            return Err(bad());
        }
        // Code that overlaps its own descriptor (a zeroed descriptor, for one) is no kernel.
        let (size, what) = match self.format {
            Format::Descriptor => (KERNEL_DESCRIPTOR_SIZE, "kernel descriptor"),
            Format::AmdKernelCode => (AMD_KERNEL_CODE_SIZE, "amd_kernel_code_t"),
            Format::Registers => return Ok(pc),
        };
        if self.entry_offset > -4 && self.entry_offset < size as i64 {
            return Err(LaunchError::EntryInObject { kernel_object, offset: self.entry_offset, size, what });
        }
        Ok(pc)
    }

    /// The MODE register a wave starts with, from rsrc1 (AMDGPUUsage "compute_pgm_rsrc1":
    /// FLOAT_ROUND_MODE_32 13:12, FLOAT_ROUND_MODE_16_64 15:14, FLOAT_DENORM_MODE_32 17:16,
    /// FLOAT_DENORM_MODE_16_64 19:18, ENABLE_DX10_CLAMP 21, ENABLE_IEEE_MODE 23, FP16_OVFL 26)
    /// in the layout of the Vega / MI200 ISA manuals' MODE register (FP_ROUND 3:0 with the
    /// 32-bit mode in 1:0, FP_DENORM 7:4 likewise, DX10_CLAMP 8, IEEE 9, FP16_OVFL 23). The
    /// exception enables (rsrc2 bits 30:24) are not modelled: the core enters the trap handler
    /// on s_trap only, never on an exception.
    pub fn mode(&self) -> u32 {
        let r = self.rsrc1;
        field(r, 12, 8) | field(r, 21, 1) << 8 | field(r, 23, 1) << 9 | field(r, 26, 1) << 23
    }

    /// rsrc2 ENABLE_VGPR_WORKITEM_ID (bits 12:11): 0 = X, 1 = X and Y, 2 = X, Y and Z.
    pub fn workitem_id_dims(&self) -> u32 {
        field(self.rsrc2, 11, 2)
    }
}

/// The user SGPRs by kernel_code_properties bit, in the order they are loaded, with their sizes
/// (AMDGPUUsage "Initial Kernel Execution State", SGPR register initial state; the legacy grid
/// work-group counts from amd_hsa_kernel_code.h).
const USER_SGPRS: [(u32, u32); 10] = [
    (PRIVATE_SEGMENT_BUFFER, 4),
    (DISPATCH_PTR, 2),
    (QUEUE_PTR, 2),
    (KERNARG_SEGMENT_PTR, 2),
    (DISPATCH_ID, 2),
    (FLAT_SCRATCH_INIT, 2),
    (PRIVATE_SEGMENT_SIZE, 1),
    (GRID_WORKGROUP_COUNT_X, 1),
    (GRID_WORKGROUP_COUNT_X << 1, 1),
    (GRID_WORKGROUP_COUNT_X << 2, 1),
];

/// One kernel dispatch: what the AQL packet and its queue say, and where the device's apertures
/// are.
#[derive(Debug, Clone)]
pub struct Dispatch {
    pub code: KernelCode,
    /// The packet's kernel_object.
    pub kernel_object: u64,
    pub grid: [u32; 3],
    pub workgroup_size: [u32; 3],
    pub kernarg: u64,
    /// The address of the AQL dispatch packet (the dispatch ptr).
    pub packet: u64,
    /// The address of the queue's amd_queue_t (the queue ptr).
    pub queue: u64,
    /// The packet's index in its queue (the dispatch id).
    pub dispatch_id: u64,
    /// The packet's group_segment_size (static and dynamic LDS, as ROCclr fills it).
    pub group_segment_size: u32,
    /// The packet's private_segment_size: scratch bytes per work-item.
    pub private_segment_size: u32,
    /// amd_queue_t.scratch_resource_descriptor: the private segment buffer V#.
    pub scratch_resource: [u32; 4],
    /// The 64-bit address of the queue's scratch backing memory (AMDGPUUsage "Flat Scratch":
    /// what flat scratch init holds on GFX9-GFX10; SH_HIDDEN_PRIVATE_BASE plus
    /// amd_queue_t.scratch_backing_memory_location, where ROCr also points the V#) and its size
    /// (amd_queue_t.scratch_backing_memory_byte_size). Wave `i` of a workgroup gets the `i`th
    /// [`Dispatch::scratch_wave_bytes`] of it.
    pub scratch_base: u64,
    pub scratch_size: u64,
    pub apertures: Apertures,
    /// A PM4 dispatch's COMPUTE_USER_DATA_0..15: the user SGPRs, USER_SGPR_COUNT of them,
    /// instead of those the kernel object's enables ask for.
    pub user_data: Option<[u32; 16]>,
    /// The process's trap handler for this GPU, if it installed one: the CP then sets
    /// COMPUTE_PGM_RSRC2.TRAP_PRESENT for the waves (AMDGPUUsage, compute_pgm_rsrc2
    /// ENABLE_TRAP_HANDLER: "Must be 0 ... set by the CP if the runtime has installed a trap
    /// handler"), and s_trap enters it.
    pub trap_handler: Option<TrapHandler>,
    /// The queue's GWS resources, if it holds them (AMDKFD_IOC_ALLOC_QUEUE_GWS).
    pub gws: Option<std::sync::Arc<crate::gws::Gws>>,
}

impl Dispatch {
    /// Work-groups in each dimension (the last one of a dimension may be partial).
    pub fn workgroup_count(&self) -> [u32; 3] {
        std::array::from_fn(|d| self.grid[d].div_ceil(self.workgroup_size[d].max(1)))
    }

    /// Work-groups in all.
    pub fn workgroups(&self) -> u64 {
        self.workgroup_count().iter().map(|&c| u64::from(c)).product()
    }

    /// The id of the `n`th work-group, X varying fastest.
    pub fn workgroup_id(&self, n: u64) -> [u32; 3] {
        let c = self.workgroup_count().map(|c| u64::from(c.max(1)));
        [(n % c[0]) as u32, (n / c[0] % c[1]) as u32, (n / (c[0] * c[1])) as u32]
    }

    /// LDS bytes per workgroup: the packet's size already counts the kernel's fixed size (ROCclr
    /// and ROCr fill it with both); a runtime that sends less still gets the fixed size.
    pub fn lds_bytes(&self) -> u32 {
        self.group_segment_size.max(self.code.group_segment_fixed_size)
    }

    /// Scratch bytes per work-item, rounded up to a dword as the CP does (amd_hsa_kernel_code.h,
    /// "Private Segment Size").
    pub fn private_bytes(&self) -> u32 {
        self.private_segment_size.max(self.code.private_segment_fixed_size).next_multiple_of(4)
    }

    /// Scratch bytes per wave: 64 lanes of private_bytes, in the 1 KiB granule of
    /// COMPUTE_TMPRING_SIZE.WAVESIZE.
    pub fn scratch_wave_bytes(&self) -> u64 {
        (u64::from(self.private_bytes()) * u64::from(self.code.wave_size)).next_multiple_of(SCRATCH_WAVE_GRANULE)
    }

    /// Checks what every workgroup shares: the geometry, LDS and scratch.
    pub fn check(&self) -> Result<(), LaunchError> {
        // The kernel object first: a packet pointing at bytes that are no kernel is an invalid
        // code object, whatever sizes those bytes would ask for (and no scratch is asked of the
        // runtime for it).
        self.code.entry(self.kernel_object)?;
        let geo = |why: String| LaunchError::Geometry(why);
        if self.grid.contains(&0) || self.workgroup_size.contains(&0) {
            return Err(geo(format!("grid {:?} workgroup {:?} has a zero size", self.grid, self.workgroup_size)));
        }
        let items: u64 = self.workgroup_size.iter().map(|&s| u64::from(s)).product();
        if items > u64::from(MAX_WORKGROUP_ITEMS) {
            return Err(geo(format!("workgroup {:?} exceeds {MAX_WORKGROUP_ITEMS} work-items", self.workgroup_size)));
        }
        // Packed work-item ids hold 10 bits per dimension.
        if self.workgroup_size.iter().any(|&s| s > 1024) {
            return Err(geo(format!("workgroup {:?} is wider than 1024", self.workgroup_size)));
        }
        if self.lds_bytes() > MAX_LDS_BYTES {
            return Err(LaunchError::Lds { need: u64::from(self.lds_bytes()) });
        }
        if self.private_bytes() > 0 {
            let waves = items.div_ceil(u64::from(self.code.wave_size));
            let need = waves * self.scratch_wave_bytes();
            if need > self.scratch_size {
                return Err(LaunchError::Scratch { need, waves, have: self.scratch_size });
            }
        }
        Ok(())
    }

    /// Waves of a full work-group.
    pub fn waves_per_group(&self) -> u64 {
        let items: u64 = self.workgroup_size.iter().map(|&s| u64::from(s)).product();
        items.div_ceil(u64::from(self.code.wave_size))
    }

    /// How many work-groups can run at once with scratch of their own: the queue's scratch
    /// backing memory holds that many groups of [`Dispatch::waves_per_group`] wave slots (as
    /// the CP limits the waves in flight to what TMPRING_SIZE covers). Unlimited without
    /// scratch.
    pub fn scratch_group_slots(&self) -> u64 {
        if self.private_bytes() == 0 {
            return u64::MAX;
        }
        self.scratch_size / (self.waves_per_group() * self.scratch_wave_bytes()).max(1)
    }

    /// Every wave of work-group `id`, in its initial state (AMDGPUUsage "Initial Kernel
    /// Execution State"), with its LDS; the group's waves get scratch slot 0 onwards.
    pub fn workgroup(&self, id: [u32; 3]) -> Result<Workgroup, LaunchError> {
        self.workgroup_in_slot(id, 0)
    }

    /// [`Dispatch::workgroup`] for a group running beside others: its waves get the scratch
    /// wave slots of group slot `slot` (below [`Dispatch::scratch_group_slots`]).
    pub fn workgroup_in_slot(&self, id: [u32; 3], slot: u64) -> Result<Workgroup, LaunchError> {
        self.check()?;
        if self.private_bytes() > 0 && slot >= self.scratch_group_slots() {
            return Err(LaunchError::Geometry(format!(
                "scratch slot {slot} of a queue with room for {} work-groups",
                self.scratch_group_slots()
            )));
        }
        let first_wave_slot = slot * self.waves_per_group();
        let count = self.workgroup_count();
        if (0..3).any(|d| id[d] >= count[d]) {
            return Err(LaunchError::Geometry(format!("work-group {id:?} is outside the grid's {count:?}")));
        }
        // The last work-group of a dimension holds what is left of the grid (HSA partial
        // work-groups).
        let size: [u32; 3] =
            std::array::from_fn(|d| self.workgroup_size[d].min(self.grid[d] - id[d] * self.workgroup_size[d]));
        let items = size[0] * size[1] * size[2];
        let wave_size = self.code.wave_size;
        let n_waves = items.div_ceil(wave_size);
        let pc = self.code.entry(self.kernel_object)?;
        let mut waves = Vec::with_capacity(n_waves as usize);
        for i in 0..n_waves {
            let mut w = Wave::new(wave_size, self.code.vgprs, self.code.agprs);
            w.pc = pc;
            w.id_in_group = i;
            w.mode = self.code.mode();
            w.trap = self.trap_handler;
            let first = i * wave_size;
            let lanes = (items - first).min(wave_size);
            w.set_exec(if lanes == 64 { u64::MAX } else { (1u64 << lanes) - 1 });
            self.load_sgprs(&mut w, id, n_waves, first_wave_slot);
            self.load_vgprs(&mut w, size, first, lanes);
            waves.push(w);
        }
        Ok(Workgroup::new(waves, self.lds_bytes() as usize).with_gws(self.gws.clone()))
    }

    /// The private segment buffer V# a wave gets: the queue's, with gfx10's INDEX_STRIDE set
    /// to the wave size by the command processor (ROCr leaves it 0, "filled in by CP",
    /// AqlQueue::FillBufRsrcWord3_Gfx10): 2 (32 lanes) or 3 (64), word 3 bits 22:21.
    pub fn private_segment_buffer(&self) -> [u32; 4] {
        let mut v = self.scratch_resource;
        if self.code.target.is_gfx10() {
            let stride = if self.code.wave_size == 32 { 2 } else { 3 };
            v[3] = (v[3] & !(3 << 21)) | stride << 21;
        }
        v
    }

    /// The user SGPRs from s0, then the system SGPRs from USER_SGPR_COUNT (AMDGPUUsage
    /// "Initial Kernel Execution State"; amd_hsa_kernel_code.h for the legacy grid counts and
    /// the work-group info layout).
    fn load_sgprs(&self, w: &mut Wave, id: [u32; 3], n_waves: u32, first_wave_slot: u64) {
        let p = self.code.properties;
        let wave_offset = (first_wave_slot + u64::from(w.id_in_group)) * self.scratch_wave_bytes();
        let count = self.workgroup_count();
        let mut s = 0u8;
        let mut put = |w: &mut Wave, v: u32| {
            w.s[usize::from(s)] = v;
            s += 1;
        };
        if let Some(data) = &self.user_data {
            for &v in data.iter().take(self.code.user_sgpr_count() as usize) {
                put(w, v);
            }
        }
        for (bit, _) in USER_SGPRS {
            if p & bit == 0 {
                continue;
            }
            let lo_hi = |v: u64| [v as u32, (v >> 32) as u32];
            let vals: Vec<u32> = match bit {
                PRIVATE_SEGMENT_BUFFER => self.private_segment_buffer().to_vec(),
                DISPATCH_PTR => lo_hi(self.packet).to_vec(),
                QUEUE_PTR => lo_hi(self.queue).to_vec(),
                KERNARG_SEGMENT_PTR => lo_hi(self.kernarg).to_vec(),
                DISPATCH_ID => lo_hi(self.dispatch_id).to_vec(),
                // GFX9-GFX10: the 64-bit base of the queue's scratch backing memory; the kernel
                // adds its wave offset and moves it to FLAT_SCRATCH (AMDGPUUsage "Flat Scratch").
                FLAT_SCRATCH_INIT => lo_hi(self.scratch_base).to_vec(),
                PRIVATE_SEGMENT_SIZE => vec![self.private_bytes()],
                b => vec![count[(b / GRID_WORKGROUP_COUNT_X).trailing_zeros() as usize]],
            };
            for v in vals {
                put(w, v);
            }
        }
        let mut s = self.code.user_sgpr_count() as u8;
        let mut put = |w: &mut Wave, v: u32| {
            w.s[usize::from(s)] = v;
            s += 1;
        };
        let r2 = self.code.rsrc2;
        for (d, &i) in id.iter().enumerate() {
            if r2 & (RSRC2_WORKGROUP_ID_X << d) != 0 {
                put(w, i);
            }
        }
        if r2 & RSRC2_WORKGROUP_INFO != 0 {
            // {first_wave, 14'b0, ordered_append_term[10:0], threadgroup_size_in_waves[5:0]}.
            put(w, u32::from(w.id_in_group == 0) << 31 | (n_waves & 0x3f));
        }
        if r2 & RSRC2_PRIVATE_SEGMENT_WAVE_OFFSET != 0 {
            put(w, wave_offset as u32);
        }
        // FLAT_SCRATCH is the kernel's to set from flat scratch init on gfx90a (no architected
        // flat scratch); starting it at this wave's scratch lets code that skips the prolog
        // (hand-written kernels) still reach its own.
        if p & FLAT_SCRATCH_INIT != 0 {
            w.set_sreg64(FLAT_SCRATCH, self.scratch_base + wave_offset);
        }
        // M0 and the other registers start at zero: AMDGPUUsage gives them no initial value and
        // LLVM writes M0 before every use it makes of it.
    }

    /// The work-item ids of each lane (AMDGPUUsage "Initial Kernel Execution State", VGPR
    /// register initial state): gfx90a packs X | Y << 10 | Z << 20 into v0 (LLVM's
    /// FeaturePackedTID, part of gfx90a), gfx10 puts them in v0, v1 and v2; Y and Z are there
    /// when rsrc2 ENABLE_VGPR_WORKITEM_ID asks for them.
    fn load_vgprs(&self, w: &mut Wave, size: [u32; 3], first: u32, lanes: u32) {
        let dims = self.code.workitem_id_dims();
        for l in 0..lanes as usize {
            let flat = first + l as u32;
            let x = flat % size[0];
            let y = flat / size[0] % size[1];
            let z = flat / (size[0] * size[1]);
            let y = if dims >= 1 { y } else { 0 };
            let z = if dims >= 2 { z } else { 0 };
            match self.code.target {
                Target::Gfx90a => w.v[0][l] = x | y << 10 | z << 20,
                Target::Gfx1030 | Target::Gfx1030W64 => {
                    for (r, id) in [x, y, z].into_iter().enumerate().take(dims as usize + 1) {
                        if let Some(v) = w.v.get_mut(r) {
                            v[l] = id;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
