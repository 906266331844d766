//! A workgroup: its waves, co-resident, and its LDS. Waves take turns on one thread; `s_barrier`
//! holds a wave until every wave of the group that has not ended arrives. A wave held by a GWS
//! semaphore or barrier waits for other workgroups: when every wave that could run is held so,
//! the group pauses early, so that its runner can give the others their turn.

use crate::exec::{step, Apertures, Code, Cx, Fault, Flow};
use crate::gws::Gws;
use crate::mem::Memory;
use crate::wave::Wave;
use std::sync::Arc;

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
    /// The queue's GWS resources, if it holds them.
    gws: Option<Arc<Gws>>,
}

impl Workgroup {
    pub fn new(waves: Vec<Wave>, lds_bytes: usize) -> Workgroup {
        let n = waves.len();
        Workgroup { waves, lds: vec![0; lds_bytes], at_barrier: vec![false; n], next: 0, gws: None }
    }

    /// The group's waves reach `gws` with the `ds_gws_*` instructions.
    pub fn with_gws(mut self, gws: Option<Arc<Gws>>) -> Workgroup {
        self.gws = gws;
        self
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
        let mut cx = Cx { mem, lds: &mut self.lds, apertures, gws: self.gws.as_deref() };
        // Turns in a row in which the wave, held by GWS, ran nothing: when every wave that can
        // run has had one, the group waits for other groups.
        let mut held = 0;
        loop {
            let live = self.waves.iter().filter(|w| !w.done).count();
            if live == 0 {
                return Ok(Progress::Finished);
            }
            let waiting = (0..n).filter(|&i| !self.waves[i].done && self.at_barrier[i]).count();
            let runnable = if waiting == live {
                self.at_barrier.iter_mut().for_each(|b| *b = false);
                live
            } else {
                live - waiting
            };
            if budget == 0 || held >= runnable {
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
            let mut progressed = false;
            while ran < QUANTUM && budget > 0 {
                ran += 1;
                budget -= 1;
                let flow = step(w, code, &mut cx)?;
                progressed |= flow != Flow::Wait;
                match flow {
                    Flow::Wait => break,
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
            held = if progressed { 0 } else { held + 1 };
        }
    }
}
