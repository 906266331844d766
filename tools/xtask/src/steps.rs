//! Steps (test tiers, benches): a table of named functions, run in order, then a summary table.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
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

    /// A context whose steps run `cargo` as `cargo` (a stand-in, in tests).
    #[cfg(test)]
    pub fn with_cargo(cargo: impl Into<OsString>) -> Ctx {
        Ctx { cargo: cargo.into(), ..Ctx::new() }
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

    /// Runs `cargo <args>` with stdout streamed to the terminal and stderr copied to ours line by
    /// line; also returns the targets that cargo says failed (see [`failed_targets`]).
    pub fn cargo_reporting_failures(&self, args: &[&str]) -> std::io::Result<(ExitStatus, Vec<String>)> {
        println!("$ cargo {}", args.join(" "));
        let mut cmd = self.cargo_cmd(args);
        // Through a pipe cargo would drop its colours; keep them for a terminal.
        if std::io::stderr().is_terminal() && std::env::var_os("CARGO_TERM_COLOR").is_none() {
            cmd.env("CARGO_TERM_COLOR", "always");
        }
        let mut child = cmd.stderr(Stdio::piped()).spawn()?;
        let mut reader = BufReader::new(child.stderr.take().expect("piped stderr"));
        let (mut line, mut text) = (Vec::new(), String::new());
        while reader.read_until(b'\n', &mut line)? > 0 {
            echo_stderr(&line);
            text.push_str(&String::from_utf8_lossy(&line));
            line.clear();
        }
        Ok((child.wait()?, failed_targets(&text)))
    }

    /// Whether `cargo <args>` runs and succeeds; its output is discarded (for `--version` probes).
    pub fn cargo_works(&self, args: &[&str]) -> bool {
        self.cargo_cmd(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    }
}

/// Copies a line of a step's stderr to ours.
fn echo_stderr(line: &[u8]) {
    // In xtask's own tests, through the print macros, which libtest captures: written straight
    // to fd 2, a test's fake cargo lines reached the gate that runs those tests, whose parser
    // then named the fake's failed targets among the real ones.
    #[cfg(test)]
    eprint!("{}", String::from_utf8_lossy(line));
    #[cfg(not(test))]
    {
        use std::io::Write as _;
        let mut err = std::io::stderr().lock();
        // Our stderr gone (a closed terminal) is no reason to stop cargo.
        let _ = err.write_all(line).and_then(|()| err.flush());
    }
}

/// The targets a `cargo test --no-fail-fast` run reports as failed, from its stderr: one line
/// "error: test failed, to rerun pass `-p PACKAGE --lib`" per failed target (colours stripped).
pub fn failed_targets(stderr: &str) -> Vec<String> {
    const PREFIX: &str = "error: test failed, to rerun pass `";
    let mut failed: Vec<String> = Vec::new();
    for line in stderr.lines().map(strip_ansi) {
        let Some(rest) = line.trim().strip_prefix(PREFIX) else { continue };
        let Some((target, _)) = rest.split_once('`') else { continue };
        if !failed.iter().any(|f| f == target) {
            failed.push(target.to_owned());
        }
    }
    failed
}

/// `line` without ANSI escape sequences (ESC '[' ... final byte).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether the value of the environment variable CI (None: unset) marks a CI run: set, not
/// empty, and not "false" or "0" (CI systems set CI=true; CI=false or CI=0 turns it off).
pub fn is_ci(ci: Option<&str>) -> bool {
    ci.map(str::trim).is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// CI must never skip a tier (a missing clippy, rustfmt, root or CUSE would otherwise pass the
/// gate unseen), so under CI (`ci` is the variable's value) a skipped tier is a failure that
/// keeps its reason. A developer's run keeps the skip.
pub fn judge_skip(tier: &str, outcome: Outcome, ci: Option<&str>) -> Outcome {
    match outcome {
        Outcome::Skipped(why) if is_ci(ci) => {
            let ci = ci.unwrap_or_default();
            let msg = format!("CI={ci} and CI must never skip the {tier} tier, but it would be skipped: {why}");
            println!("{tier} tier FAILED: {msg}");
            Outcome::Failed(msg)
        }
        other => other,
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
#[derive(Debug)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_targets_come_from_cargos_rerun_lines() {
        let stderr =
            "\u{1b}[1m\u{1b}[91merror\u{1b}[0m\u{1b}[1m: test failed, to rerun pass `-p cuse-kfd --lib`\u{1b}[0m\n\
                      warning: unused variable\n\
                      error: test failed, to rerun pass `-p thunk --test abi`\n\
                      error: 2 targets failed:\n    `-p cuse-kfd --lib`\n    `-p thunk --test abi`\n";
        assert_eq!(failed_targets(stderr), ["-p cuse-kfd --lib", "-p thunk --test abi"]);
        assert!(failed_targets("error: could not compile `uapi`\n").is_empty());
    }
}
