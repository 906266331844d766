//! Test support shared by the memory families' tests: a runner with apertures and LDS, and
//! setters for per-lane addresses.

use super::{step, Apertures, Code, Cx, Fault, Flow};
use crate::isa::Target;
use crate::mem::Ram;
use crate::testing;
use crate::wave::{Wave, LANES};

/// The store tests' v4..v7 (lane 0), and the bytes a store of each width writes from them, in
/// the order byte, byte d16_hi, short, short d16_hi, dword, x2, x3, x4.
pub const STORE_DATA: [u32; 4] = [0x1122_3344, 0x5566_7788, 0x99aa_bbcc, 0xddee_ff00];
pub const STORED: [&[u8]; 8] = [
    &[0x44],
    &[0x22],
    &[0x44, 0x33],
    &[0x22, 0x11],
    &[0x44, 0x33, 0x22, 0x11],
    &[0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55],
    &[0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55, 0xcc, 0xbb, 0xaa, 0x99],
    &[0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55, 0xcc, 0xbb, 0xaa, 0x99, 0x00, 0xff, 0xee, 0xdd],
];

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
        let mut cx = Cx { mem: &mut ram, lds: &mut lds, apertures, gws: None };
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
