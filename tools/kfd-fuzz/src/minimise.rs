//! Shrinks a failing case: drops operations (halves, then quarters, down to single ones) as long
//! as the case still fails the same way.

use crate::exec::{Config, Failure};
use crate::ops::Op;
use std::time::{Duration, Instant};

/// The first line of a failure with every number blanked: what it is, not where.
pub fn signature(what: &str) -> String {
    let line = what.lines().next().unwrap_or("");
    line.split_whitespace()
        .map(|t| if t.chars().any(|c| c.is_ascii_digit()) { "#" } else { t })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `f` is the same failure as `orig` for minimising: same kind and the same message up
/// to numbers.
fn same(orig: &Failure, f: &Failure) -> bool {
    orig.kind == f.kind && signature(&orig.what) == signature(&f.what)
}

/// The smallest case found within `budget` that fails like `failure`, with its failure.
pub fn minimise(
    config: &Config,
    ops: &[Op],
    failure: &Failure,
    budget: Duration,
    log: &mut dyn FnMut(&str),
) -> (Vec<Op>, Failure) {
    let start = Instant::now();
    let mut best: Vec<Op> = ops.to_vec();
    // Nothing after the failing operation matters (unless it failed in the final checks).
    if failure.at < best.len() {
        best.truncate(failure.at + 1);
    }
    let tries = std::cell::Cell::new(0u32);
    let attempt = |cand: &[Op]| -> Option<Failure> {
        tries.set(tries.get() + 1);
        crate::run_ops(config, cand).failure.filter(|f| same(failure, f))
    };
    // Confirm that it reproduces at all.
    let mut best_failure = match attempt(&best) {
        Some(f) => f,
        None => {
            log("the failure does not reproduce on a rerun (timing?); saving the case unminimised");
            return (ops.to_vec(), failure.clone());
        }
    };
    let mut chunk = best.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        let mut shrunk = false;
        while i < best.len() {
            if start.elapsed() > budget {
                log(&format!(
                    "minimising stopped after {} runs ({:?} budget): {} operations",
                    tries.get(),
                    budget,
                    best.len()
                ));
                return (best, best_failure);
            }
            let end = (i + chunk).min(best.len());
            let mut cand = best[..i].to_vec();
            cand.extend_from_slice(&best[end..]);
            if let Some(f) = attempt(&cand) {
                best = cand;
                if f.at < best.len() {
                    best.truncate(f.at + 1);
                }
                best_failure = f;
                shrunk = true;
            } else {
                i = end;
            }
        }
        if chunk == 1 && !shrunk {
            break;
        }
        chunk = if shrunk { chunk } else { chunk.div_ceil(2) }.min(best.len().max(1));
        if chunk == 0 {
            break;
        }
    }
    log(&format!("minimised to {} operations in {} runs", best.len(), tries.get()));
    (best, best_failure)
}
