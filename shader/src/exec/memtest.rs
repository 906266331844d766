//! Test support shared by the memory families' tests: a runner with apertures and LDS, and
//! setters for per-lane addresses.

use super::{step, Apertures, Code, Cx, Fault, Flow};
use crate::isa::Target;
use crate::mem::Ram;
use crate::testing;
use crate::wave::{Wave, LANES};

/// The result of [`run`]: the wave, memory and LDS after s_endpgm, or the fault.
pub struct Ran {
    pub wave: Wave,
    pub ram: Ram,
    pub lds: Vec<u8>,
    pub fault: Option<Fault>,
}

/// Assembles `src` (s_endpgm appended) and runs it on [`testing::wave`] with `apertures` and
/// 64 KiB of LDS, after `setup`; `None` when llvm-mc-15 is missing.
pub fn run(src: &str, apertures: Apertures, setup: impl FnOnce(&mut Wave, &mut Ram, &mut [u8])) -> Option<Ran> {
    let code = testing::assemble(&format!("{src}\ns_endpgm\n"))?;
    let mut wave = testing::wave();
    let mut ram = testing::ram(&code);
    let mut lds = vec![0u8; 65536];
    setup(&mut wave, &mut ram, &mut lds);
    let mut fault = None;
    {
        let mut code = Code::new(Target::Gfx90a);
        let mut cx = Cx { mem: &mut ram, lds: &mut lds, apertures };
        for _ in 0..10_000 {
            match step(&mut wave, &mut code, &mut cx) {
                Ok(Flow::End) => break,
                Ok(_) => {}
                Err(f) => {
                    fault = Some(f);
                    break;
                }
            }
        }
    }
    Some(Ran { wave, ram, lds, fault })
}

/// Like [`run`], panicking on a fault.
pub fn run_ok(src: &str, apertures: Apertures, setup: impl FnOnce(&mut Wave, &mut Ram, &mut [u8])) -> Option<Ran> {
    let r = run(src, apertures, setup)?;
    if let Some(f) = &r.fault {
        panic!("{f}\n{src}");
    }
    Some(r)
}

/// Sets `v[r:r+1]` of every lane to `addr(lane)`.
pub fn set_addr64(w: &mut Wave, r: usize, addr: impl Fn(usize) -> u64) {
    for l in 0..LANES {
        let a = addr(l);
        w.v[r][l] = a as u32;
        w.v[r + 1][l] = (a >> 32) as u32;
    }
}

pub fn bytes_at(ram: &Ram, va: u64, len: usize) -> Vec<u8> {
    let off = (va - ram.base) as usize;
    ram.bytes[off..off + len].to_vec()
}

pub fn put(ram: &mut Ram, va: u64, data: &[u8]) {
    let off = (va - ram.base) as usize;
    ram.bytes[off..off + data.len()].copy_from_slice(data);
}
