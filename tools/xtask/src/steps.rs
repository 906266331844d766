//! Steps (test tiers, benches): a table of named functions, run in order, then a summary table.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the steps run, and with which cargo.
pub struct Ctx {
    /// The workspace root.
    pub root: PathBuf,
    /// The cargo that runs xtask (`$CARGO`), so that every step uses the same toolchain.
    cargo: OsString,
    /// `cargo xtask test --no-install`: steps install nothing either.
    pub no_install: bool,
}

impl Ctx {
    pub fn new() -> Ctx {
        // tools/xtask -> the workspace root.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = root.canonicalize().unwrap_or(root);
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        Ctx { root, cargo, no_install: false }
    }

    /// Cargo's target directory: `$CARGO_TARGET_DIR`, else `target` in the workspace root.
    pub fn target_dir(&self) -> PathBuf {
        match std::env::var_os("CARGO_TARGET_DIR") {
            Some(dir) => self.root.join(dir),
            None => self.root.join("target"),
        }
    }

    /// A `cargo <args>` command in the workspace root.
    pub fn cargo_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.cargo);
        cmd.args(args).current_dir(&self.root);
        cmd
    }

    /// Runs `cargo <args>` with its output streamed to the terminal.
    pub fn cargo(&self, args: &[&str]) -> Outcome {
        println!("$ cargo {}", args.join(" "));
        status_outcome(self.cargo_cmd(args).status(), "cargo")
    }

    /// Whether `cargo <args>` runs and succeeds; its output is discarded (for `--version` probes).
    pub fn cargo_works(&self, args: &[&str]) -> bool {
        self.cargo_cmd(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    }
}

/// Turns the result of running a program into an outcome.
pub fn status_outcome(status: std::io::Result<std::process::ExitStatus>, program: &str) -> Outcome {
    match status {
        Ok(s) if s.success() => Outcome::Passed,
        Ok(s) => Outcome::Failed(format!("{program}: {s}")),
        Err(e) => Outcome::Failed(format!("cannot run {program}: {e}")),
    }
}

/// How a step ended.
pub enum Outcome {
    Passed,
    /// Passed, with a line for the summary table (what ran, where).
    PassedWith(String),
    Failed(String),
    /// Not run, with the reason.
    Skipped(String),
}

/// One entry of a step table.
pub struct Step {
    pub name: &'static str,
    /// Other names `cargo xtask test NAME` accepts.
    pub aliases: &'static [&'static str],
    /// What the step needs to run, for `--help` and the banner.
    pub needs: &'static str,
    pub run: fn(&Ctx) -> Outcome,
}

impl Step {
    pub fn is_called(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }
}

/// The result of one step.
pub struct Record {
    pub name: &'static str,
    pub outcome: Outcome,
    pub elapsed: Duration,
}

/// Runs the steps in order; a failed step does not stop the later ones.
pub fn run_steps(ctx: &Ctx, kind: &str, steps: &[&Step]) -> Vec<Record> {
    steps
        .iter()
        .map(|step| {
            println!("\n==> {kind} {} (needs {})", step.name, step.needs);
            let start = Instant::now();
            let outcome = (step.run)(ctx);
            let elapsed = start.elapsed();
            Record { name: step.name, outcome, elapsed }
        })
        .collect()
}

/// Prints the summary: the preface lines, then the table; returns false if any step failed.
pub fn print_summary(kind: &str, preface: &[String], records: &[Record]) -> bool {
    println!("\n== summary");
    for line in preface {
        println!("{line}");
    }
    let width = records.iter().map(|r| r.name.len()).chain([kind.len()]).max().unwrap_or(0);
    println!("{:<width$}  {:<7}  {:>8}  detail", kind, "result", "seconds");
    for r in records {
        let (result, detail) = match &r.outcome {
            Outcome::Passed => ("passed", ""),
            Outcome::PassedWith(detail) => ("passed", detail.as_str()),
            Outcome::Failed(why) => ("FAILED", why.as_str()),
            Outcome::Skipped(why) => ("skipped", why.as_str()),
        };
        let secs = r.elapsed.as_secs_f64();
        println!("{:<width$}  {result:<7}  {secs:>8.1}  {detail}", r.name);
    }
    !records.iter().any(|r| matches!(r.outcome, Outcome::Failed(_)))
}
