//! Execution: one instruction of one wave at a time ([`step`]), dispatched by encoding to the
//! family modules, which dispatch on [`Op`].
//!
//! Each family returns [`ExecError`] for what it cannot do; [`step`] turns it into a [`Fault`]
//! that names the instruction (as LLVM prints it), its PC and encoding: an opcode the core lacks
//! is an error, never a skipped instruction.

mod buffer;
mod flat;
mod gws;
mod lds;
mod memop;
#[cfg(test)]
mod memtest;
pub mod operand;
mod salu;
mod smem;
mod sopp;
mod trap;
mod valu;

pub use operand::Apertures;

use crate::isa::{self, DecodeError, Encoding, Instruction, Op, Target};
use crate::mem::{MemFault, Memory};
use crate::wave::Wave;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// What a wave does after an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on with the next instruction.
    Next,
    /// Arrived at s_barrier: waits until every live wave of its workgroup arrives.
    Barrier,
    /// s_endpgm.
    End,
    /// s_sleep (64 * n clocks on the hardware): a hint to let other waves run.
    Sleep(u32),
    /// A GWS semaphore or barrier holds the wave: it stays at the instruction, which runs
    /// again at its next turn.
    Wait,
    /// s_sendmsg MSG_INTERRUPT: raises an interrupt with M0's value as its payload (the event id
    /// of a signal, as ROCm's device library sends it for hostcall and signal stores).
    Interrupt(u32),
}

/// Why an instruction could not run, before [`step`] adds where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecError {
    /// The core does not implement this instruction (or this form of it: a modifier, an operand
    /// kind).
    Unimplemented(String),
    /// A memory access faulted.
    Memory(MemFault),
    /// The instruction is invalid in this state (a register past the wave's allocation, ...).
    Invalid(String),
    /// s_trap with this trap id, and no trap handler to enter.
    Trap(u8),
}

impl From<MemFault> for ExecError {
    fn from(f: MemFault) -> Self {
        ExecError::Memory(f)
    }
}

/// The result type of the family modules.
pub type ExecResult<T = Flow> = Result<T, ExecError>;

/// An instruction that did not run, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    #[error("cannot decode the instruction at pc {pc:#x}: {error}")]
    Decode { pc: u64, error: DecodeError },
    #[error("`{inst}` ({encoding}) at pc {pc:#x} is not implemented by the shader core{}", detail(.what))]
    Unimplemented { pc: u64, inst: String, encoding: Encoding, what: String },
    #[error("memory fault at pc {pc:#x} in `{inst}`: {fault}")]
    Memory { pc: u64, inst: String, fault: MemFault },
    #[error("invalid instruction `{inst}` at pc {pc:#x}: {why}")]
    Invalid { pc: u64, inst: String, why: String },
    #[error("s_trap {code} at pc {pc:#x} with no trap handler in the dispatch")]
    Trap { pc: u64, code: u8 },
}

fn detail(what: &str) -> String {
    if what.is_empty() {
        String::new()
    } else {
        format!(" ({what})")
    }
}

impl Fault {
    /// The PC of the instruction.
    pub fn pc(&self) -> u64 {
        match self {
            Fault::Decode { pc, .. }
            | Fault::Unimplemented { pc, .. }
            | Fault::Memory { pc, .. }
            | Fault::Invalid { pc, .. }
            | Fault::Trap { pc, .. } => *pc,
        }
    }

    fn new(e: ExecError, pc: u64, inst: &Instruction) -> Fault {
        let text = inst.to_string();
        match e {
            ExecError::Unimplemented(what) => Fault::Unimplemented { pc, inst: text, encoding: inst.encoding, what },
            ExecError::Memory(fault) => Fault::Memory { pc, inst: text, fault },
            ExecError::Invalid(why) => Fault::Invalid { pc, inst: text, why },
            ExecError::Trap(code) => Fault::Trap { pc, code },
        }
    }
}

/// Hashes a PC for [`Code`]'s cache: one lookup per instruction run, where SipHash's cost
/// shows. PCs are not chosen by an adversary of this process, so a multiplicative hash (the
/// golden-ratio constant of Fibonacci hashing) is enough.
#[derive(Debug, Default, Clone, Copy)]
pub struct PcHasher(u64);

impl Hasher for PcHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, pc: u64) {
        self.0 = (self.0 ^ pc).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The decoded instructions of one kernel, by PC: code is fetched through [`Memory`] once, and
/// a VALU instruction's handler is looked up then, not at every run.
#[derive(Debug)]
pub struct Code {
    pub target: Target,
    /// The index in `decoded` of the instruction at a PC (one hash lookup per step).
    index: HashMap<u64, usize, BuildHasherDefault<PcHasher>>,
    decoded: Vec<Decoded>,
}

/// An instruction and, for the VALU, its handler (`None`: another family, or not implemented).
#[derive(Debug)]
struct Decoded {
    inst: Instruction,
    valu: Option<valu::Handler>,
}

impl Code {
    pub fn new(target: Target) -> Code {
        Code { target, index: HashMap::default(), decoded: Vec::new() }
    }

    /// The instruction at `pc`.
    pub fn fetch(&mut self, pc: u64, mem: &mut dyn Memory) -> Result<&Instruction, Fault> {
        self.decoded(pc, mem).map(|d| &d.inst)
    }

    fn decoded(&mut self, pc: u64, mem: &mut dyn Memory) -> Result<&Decoded, Fault> {
        if let Some(&i) = self.index.get(&pc) {
            return Ok(&self.decoded[i]);
        }
        // The longest instruction is 12 bytes (gfx10 VOP3 with a literal); near the end of a
        // mapping, fewer bytes may be readable.
        let mut bytes = [0u8; 12];
        let mut len = 0;
        for n in [12, 8, 4] {
            if mem.read(pc, &mut bytes[..n]).is_ok() {
                len = n;
                break;
            }
        }
        if len == 0 {
            let mut b = [0u8; 4];
            let fault = mem.read(pc, &mut b).expect_err("unreadable a moment ago");
            return Err(Fault::Memory { pc, inst: "(instruction fetch)".into(), fault });
        }
        let inst = isa::decode(self.target, &bytes[..len], 0).map_err(|error| Fault::Decode { pc, error })?;
        let valu = if valu::encodes(inst.encoding) { valu::handler(inst.op) } else { None };
        self.index.insert(pc, self.decoded.len());
        self.decoded.push(Decoded { inst, valu });
        Ok(self.decoded.last().expect("just pushed"))
    }
}

/// Everything an instruction may touch besides its wave.
pub struct Cx<'a> {
    pub mem: &'a mut dyn Memory,
    /// The workgroup's LDS.
    pub lds: &'a mut [u8],
    pub apertures: Apertures,
    /// The queue's GWS resources, if it holds them.
    pub gws: Option<&'a crate::gws::Gws>,
}

/// Runs the instruction at the wave's PC.
pub fn step(w: &mut Wave, code: &mut Code, cx: &mut Cx) -> Result<Flow, Fault> {
    let pc = w.pc;
    let Decoded { inst, valu } = code.decoded(pc, cx.mem)?;
    w.pc = pc.wrapping_add(u64::from(inst.size));
    let r = match inst.encoding {
        Encoding::Sop1 | Encoding::Sop2 | Encoding::Sopk | Encoding::Sopc => salu::exec(w, inst, cx),
        Encoding::Sopp => sopp::exec(w, inst, pc),
        Encoding::Smem => smem::exec(w, inst, cx),
        Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc | Encoding::Vop3 | Encoding::Vop3p => match valu {
            Some(h) => h(w, inst, cx),
            None => Err(unimplemented()),
        },
        Encoding::Ds => gws::exec(w, inst, cx).unwrap_or_else(|| lds::exec(w, inst, cx)),
        Encoding::Flat | Encoding::Global | Encoding::Scratch => flat::exec(w, inst, cx),
        Encoding::Mubuf => buffer::exec(w, inst, cx),
        Encoding::Mtbuf | Encoding::Mimg | Encoding::Exp | Encoding::Vintrp => Err(unimplemented()),
    };
    match r {
        Ok(Flow::Wait) => {
            w.pc = pc;
            Ok(Flow::Wait)
        }
        Ok(flow) => Ok(flow),
        Err(e) => {
            // The wave stays at the faulting instruction.
            w.pc = pc;
            Err(Fault::new(e, pc, inst))
        }
    }
}

/// The error for an instruction a family does not implement.
pub fn unimplemented() -> ExecError {
    ExecError::Unimplemented(String::new())
}

/// Every [`Op`] the core implements, for the coverage table. Each family answers from the same
/// table its `exec` dispatches on.
pub fn implemented(op: Op) -> bool {
    salu::implements(op)
        || sopp::implements(op)
        || smem::implements(op)
        || valu::implements(op)
        || lds::implements(op)
        || gws::implements(op)
        || flat::implements(op)
        || buffer::implements(op)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod probe_tests;

#[cfg(test)]
mod gfx10_tests;

#[cfg(test)]
mod trap_tests;
