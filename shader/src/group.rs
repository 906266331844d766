//! A workgroup: its waves, co-resident, and its LDS. Waves take turns on one thread; `s_barrier`
//! holds a wave until every wave of the group that has not ended arrives.

use crate::exec::{step, Apertures, Code, Cx, Fault, Flow};
use crate::mem::Memory;
use crate::wave::Wave;

/// Instructions a wave runs before the next wave gets a turn (waves that spin on memory written
/// by another wave of the group still make progress).
const QUANTUM: u32 = 512;

/// How far [`Workgroup::run`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Every wave ended.
    Finished,
    /// The instruction budget ran out: call again to go on.
    Paused,
}

/// The waves and LDS of one workgroup.
#[derive(Debug)]
pub struct Workgroup {
    pub waves: Vec<Wave>,
    pub lds: Vec<u8>,
    at_barrier: Vec<bool>,
    next: usize,
}

impl Workgroup {
    pub fn new(waves: Vec<Wave>, lds_bytes: usize) -> Workgroup {
        let n = waves.len();
        Workgroup { waves, lds: vec![0; lds_bytes], at_barrier: vec![false; n], next: 0 }
    }

    /// Runs the group's waves for at most `budget` instructions in all. MSG_INTERRUPT payloads
    /// are appended to `interrupts` in the order the waves send them.
    pub fn run(
        &mut self,
        code: &mut Code,
        mem: &mut dyn Memory,
        apertures: Apertures,
        mut budget: u64,
        interrupts: &mut Vec<u32>,
    ) -> Result<Progress, Fault> {
        let n = self.waves.len();
        let mut cx = Cx { mem, lds: &mut self.lds, apertures };
        loop {
            let live = self.waves.iter().filter(|w| !w.done).count();
            if live == 0 {
                return Ok(Progress::Finished);
            }
            let waiting = (0..n).filter(|&i| !self.waves[i].done && self.at_barrier[i]).count();
            if waiting == live {
                self.at_barrier.iter_mut().for_each(|b| *b = false);
            }
            if budget == 0 {
                return Ok(Progress::Paused);
            }
            // The next wave that can run, round robin.
            let i = (0..n)
                .map(|k| (self.next + k) % n)
                .find(|&i| !self.waves[i].done && !self.at_barrier[i])
                .expect("a live wave not at the barrier");
            self.next = (i + 1) % n;
            let w = &mut self.waves[i];
            let mut ran = 0;
            while ran < QUANTUM && budget > 0 {
                ran += 1;
                budget -= 1;
                match step(w, code, &mut cx)? {
                    Flow::Next => {}
                    Flow::Barrier => {
                        self.at_barrier[i] = true;
                        break;
                    }
                    Flow::End => break,
                    Flow::Sleep(_) => break,
                    Flow::Interrupt(payload) => interrupts.push(payload),
                }
            }
        }
    }
}
