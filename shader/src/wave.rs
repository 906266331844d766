//! The architectural state of one wavefront: scalar and vector register files, PC, SCC, MODE.
//!
//! Register numbers are the hardware's (the [`crate::isa::Operand`] encoding): the scalar file
//! holds s0-s101, flat_scratch (102-103), xnack_mask (104-105), vcc (106-107), ttmp0-15
//! (108-123), m0 (124), null (125) and exec (126-127) in one array, so an operand naming any of
//! them is one index.

/// Lanes of the widest wave (wave64).
pub const LANES: usize = 64;

/// Hardware numbers of the named scalar registers.
pub const FLAT_SCRATCH: u8 = 102;
pub const XNACK_MASK: u8 = 104;
pub const VCC: u8 = 106;
pub const TTMP0: u8 = 108;
pub const M0: u8 = 124;
pub const NULL: u8 = 125;
pub const EXEC: u8 = 126;

/// The trap handler a wave enters on s_trap: what the process installed with
/// AMDKFD_IOC_SET_TRAP_HANDLER for its GPU (amdkfd kfd_chardev.c kfd_ioctl_set_trap_handler).
/// On gfx9 and gfx10 amdkfd binds its own first-level (CWSR) handler in the hardware's TBA and
/// keeps these in that handler's TMA; the first level jumps to this TBA with s_setpc_b64 (linux
/// v6.1 kfd_process.c kfd_process_set_trap_handler, cwsr_trap_handler_gfx9.asm), so it is
/// entered at the address as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrapHandler {
    /// The trap base address: where the handler starts.
    pub tba: u64,
    /// The trap memory address: the handler's own data, passed to it in ttmp14:15.
    pub tma: u64,
}

/// One vector register: a dword per lane.
pub type VReg = [u32; LANES];

/// The state of one wave.
#[derive(Clone)]
pub struct Wave {
    /// The scalar file by hardware number.
    pub s: [u32; 128],
    /// The VGPRs this wave was launched with (`v0..v(len-1)`).
    pub v: Vec<VReg>,
    /// The accumulation registers (gfx90a's AGPRs), `a0..a(len-1)`.
    pub a: Vec<VReg>,
    /// Byte address of the next instruction.
    pub pc: u64,
    pub scc: bool,
    /// The MODE register (rounding, denormals, DX10_CLAMP, IEEE), as s_getreg reads it.
    pub mode: u32,
    /// 32 or 64.
    pub wave_size: u32,
    /// The index of this wave within its workgroup.
    pub id_in_group: u32,
    /// Ended by s_endpgm.
    pub done: bool,
    /// The installed trap handler (STATUS.TRAP_EN; COMPUTE_PGM_RSRC2.TRAP_PRESENT as the CP
    /// sets it), if any.
    pub trap: Option<TrapHandler>,
    /// Running the trap handler (STATUS.PRIV), from trap entry until s_rfe_b64.
    pub in_trap: bool,
    /// Waiting at ds_gws_barrier: the barrier round it waits past.
    pub gws_round: Option<u64>,
}

impl Wave {
    /// A wave with `vgprs` VGPRs and `agprs` AGPRs, every register zero.
    pub fn new(wave_size: u32, vgprs: usize, agprs: usize) -> Wave {
        Wave {
            s: [0; 128],
            v: vec![[0; LANES]; vgprs],
            a: vec![[0; LANES]; agprs],
            pc: 0,
            scc: false,
            mode: 0,
            wave_size,
            id_in_group: 0,
            done: false,
            trap: None,
            in_trap: false,
            gws_round: None,
        }
    }

    /// The mask of lanes this wave has.
    pub fn lane_mask(&self) -> u64 {
        if self.wave_size == 64 {
            u64::MAX
        } else {
            (1u64 << self.wave_size) - 1
        }
    }

    /// Reads scalar register `i` (null reads 0).
    pub fn sreg(&self, i: u8) -> u32 {
        if i == NULL {
            0
        } else {
            self.s[usize::from(i & 127)]
        }
    }

    /// Writes scalar register `i` (writes to null are discarded).
    pub fn set_sreg(&mut self, i: u8, v: u32) {
        if i != NULL {
            self.s[usize::from(i & 127)] = v;
        }
    }

    /// Reads the pair at `i` (little-endian: `i` is the low half).
    pub fn sreg64(&self, i: u8) -> u64 {
        u64::from(self.sreg(i)) | u64::from(self.sreg(i.wrapping_add(1) & 127)) << 32
    }

    pub fn set_sreg64(&mut self, i: u8, v: u64) {
        self.set_sreg(i, v as u32);
        if i != NULL {
            self.set_sreg(i.wrapping_add(1) & 127, (v >> 32) as u32);
        }
    }

    /// EXEC, limited to the wave's lanes (wave32 ignores exec_hi).
    pub fn exec(&self) -> u64 {
        self.sreg64(EXEC) & self.lane_mask()
    }

    pub fn set_exec(&mut self, v: u64) {
        if self.wave_size == 64 {
            self.set_sreg64(EXEC, v);
        } else {
            self.set_sreg(EXEC, v as u32);
        }
    }

    /// VCC, limited to the wave's lanes.
    pub fn vcc(&self) -> u64 {
        self.sreg64(VCC) & self.lane_mask()
    }

    pub fn set_vcc(&mut self, v: u64) {
        self.set_lane_mask_reg(VCC, v);
    }

    /// Writes a lane mask to the scalar register(s) at `i`: a pair in wave64, one register in
    /// wave32.
    pub fn set_lane_mask_reg(&mut self, i: u8, v: u64) {
        if self.wave_size == 64 {
            self.set_sreg64(i, v);
        } else {
            self.set_sreg(i, v as u32);
        }
    }

    /// Reads a lane mask from the scalar register(s) at `i`.
    pub fn lane_mask_reg(&self, i: u8) -> u64 {
        if self.wave_size == 64 {
            self.sreg64(i)
        } else {
            u64::from(self.sreg(i))
        }
    }

    /// The lanes of `mask` in order (the lanes EXEC enables, for example).
    pub fn lanes(mask: u64) -> impl Iterator<Item = usize> {
        let mut m = mask;
        std::iter::from_fn(move || {
            if m == 0 {
                return None;
            }
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(l)
        })
    }
}

impl std::fmt::Debug for Wave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wave")
            .field("pc", &format_args!("{:#x}", self.pc))
            .field("exec", &format_args!("{:#x}", self.exec()))
            .field("scc", &self.scc)
            .field("vgprs", &self.v.len())
            .field("agprs", &self.a.len())
            .field("done", &self.done)
            .finish()
    }
}
