//! Replays of the cases kfd-fuzz found failing (tools/kfd-fuzz/regressions/*.json), each of
//! which must now pass, and a few generated cases as a smoke test of the fuzzer itself.

use kfd_fuzz::exec::Config;
use kfd_fuzz::ReplayFile;
use std::path::Path;

#[test]
fn every_saved_failure_now_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the regressions directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut failed = Vec::new();
    for path in &files {
        let file = ReplayFile::load(path).unwrap_or_else(|e| panic!("{e}"));
        // Timing-dependent failures get a few runs to show.
        if let Some(f) = kfd_fuzz::replay(&file, 3) {
            failed.push(format!("{}: {f}", path.display()));
        }
    }
    assert!(failed.is_empty(), "regressions fail again:\n{}", failed.join("\n"));
}

#[test]
fn generated_cases_pass_and_replay_the_same() {
    let config = Config::default();
    for case in 0..3 {
        let r = kfd_fuzz::fuzz_case(&config, 0x5EED, case, 250);
        assert!(r.failure.is_none(), "case {case}: {}", r.failure.unwrap());
        assert_eq!(r.ops.len(), 250);
        // The saved form runs the same operations.
        let file = ReplayFile {
            version: ReplayFile::VERSION,
            seed: 0x5EED,
            case,
            profile: config.profile.clone(),
            gpus: config.gpus,
            procs: config.procs,
            failure: None,
            ops: r.ops.clone(),
        };
        let text = serde_json::to_string(&file).unwrap();
        let back: ReplayFile = serde_json::from_str(&text).unwrap();
        assert_eq!(back.ops, r.ops);
        assert!(kfd_fuzz::replay(&back, 1).is_none(), "case {case} fails when replayed");
    }
}
