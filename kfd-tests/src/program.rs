//! Running a test program (a C program, usually behind `cuse-kfd run` or `cargo run`) in a
//! process group of its own, bounded in time, with its output collected; a run that does not end
//! is reported with where each of its threads waits before the whole group is killed.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` (which starts program `exe`) for at most `limit`; returns whether it exited 0 and
/// its stdout then stderr, ending with why it failed. Past the limit, the report of
/// [`where_it_waits`] plus `on_hang()` (e.g. the daemon's status) goes to stderr first.
pub fn run_bounded(mut cmd: Command, exe: &Path, limit: Duration, on_hang: impl FnOnce() -> String) -> (bool, String) {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("starting {}: {e}", exe.display()));
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = read(Box::new(child.stderr.take().expect("piped stderr")));
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting for the program") {
            break Some(st);
        }
        if t0.elapsed() > limit {
            // Where it hangs, before the evidence is killed.
            eprintln!("{}{}", where_it_waits(child.id()), on_hang());
            // The whole group: cargo or `cuse-kfd run`, and the program.
            let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = stdout.join().unwrap_or_default() + &stderr.join().unwrap_or_default();
    match status {
        Some(st) if st.success() => (true, text),
        Some(st) => {
            text += &format!("\n[{} exited with {st}]", exe.display());
            (false, text)
        }
        None => {
            text += &format!("\n[{} killed after {} s]", exe.display(), limit.as_secs());
            (false, text)
        }
    }
}

/// Every thread of process group `pgid` with its state and kernel wait channel, then each
/// process's user stacks where gdb is installed (see [`backtraces`]).
pub fn where_it_waits(pgid: u32) -> String {
    let mut out = format!("--- the run did not end; the threads of process group {pgid}:\n");
    let members: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|d| d.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // Fields after the command (which may hold spaces): state ppid pgrp ...
            let stat = read_trimmed(&Path::new("/proc").join(pid.to_string()).join("stat"));
            stat.rsplit_once(") ").and_then(|(_, rest)| rest.split_whitespace().nth(2).map(str::to_owned))
                == Some(pgid.to_string())
        })
        .collect();
    for &pid in &members {
        out += &threads_of(pid);
    }
    for &pid in &members {
        out += &backtraces(pid);
    }
    out
}

fn read_trimmed(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default().trim().to_owned()
}

/// Process `pid`'s command line and each of its threads with its name, state and kernel wait
/// channel.
pub fn threads_of(pid: u32) -> String {
    let dir = Path::new("/proc").join(pid.to_string());
    let cmd = read_trimmed(&dir.join("cmdline")).replace('\0', " ");
    let mut out = format!("pid {pid}: {cmd}\n");
    for task in std::fs::read_dir(dir.join("task")).into_iter().flatten().flatten() {
        let comm = read_trimmed(&task.path().join("comm"));
        let wchan = read_trimmed(&task.path().join("wchan"));
        let state = read_trimmed(&task.path().join("stat")).rsplit_once(") ").map(|(_, r)| r[..1].to_owned());
        out += &format!(
            "  tid {} {comm:<16} state {} wchan {wchan}\n",
            task.file_name().to_string_lossy(),
            state.unwrap_or_default()
        );
    }
    out
}

/// How long gdb may take for one process's stacks (it reads the symbols of every library first;
/// under TCG that is slow).
const GDB_LIMIT: Duration = Duration::from_secs(60);

/// Every thread's user stack of process `pid`, by gdb in batch mode, if gdb is installed (it is a
/// diagnostic: without it the report says so and goes on).
pub fn backtraces(pid: u32) -> String {
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch", "-p", &pid.to_string(), "-ex", "set pagination off", "-ex", "thread apply all bt 24"]);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return format!("--- no stacks of pid {pid}: gdb: {e}\n"),
    };
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if t0.elapsed() > GDB_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = reader.join().unwrap_or_default();
    let stacks: String =
        text.lines().filter(|l| l.starts_with('#') || l.starts_with("Thread ")).map(|l| format!("  {l}\n")).collect();
    format!("--- the stacks of pid {pid} (gdb, {:.1} s):\n{stacks}", t0.elapsed().as_secs_f64())
}

/// Checks that `listed` names exactly the C programs in `dir` (<name>.c), so that none is left
/// out of its test and none listed is missing.
pub fn assert_lists_every_program<'a>(dir: &Path, listed: impl IntoIterator<Item = &'a str>) {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".c").map(str::to_owned))
        .collect();
    found.sort();
    let mut listed: Vec<String> = listed.into_iter().map(str::to_owned).collect();
    listed.sort();
    assert_eq!(found, listed, "the programs in {} and the list of the test that runs them", dir.display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_past_its_limit_is_killed_and_reported() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 30"]);
        let t0 = Instant::now();
        let (ok, text) = run_bounded(cmd, Path::new("sh"), Duration::from_millis(300), || "extra\n".into());
        assert!(!ok && t0.elapsed() < Duration::from_secs(10), "{text}");
        assert!(text.starts_with("started") && text.ends_with("[sh killed after 0 s]"), "{text}");
    }

    #[test]
    fn exit_status_and_output_come_back() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let (ok, text) = run_bounded(cmd, Path::new("sh"), Duration::from_secs(30), String::new);
        assert!(!ok, "{text}");
        assert!(text.starts_with("out\nerr\n") && text.contains("exited with exit status: 3"), "{text}");
        let (ok, text) = run_bounded(Command::new("true"), Path::new("true"), Duration::from_secs(30), String::new);
        assert!(ok && text.is_empty(), "{text}");
    }
}
