//! One phase attempt: a process in its own process group, its stdout and stderr kept in files
//! (hashed as they stream), its stdout scanned line by line for loop markers and for the
//! agent's token and cost records (`decode::agent_usage`).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use loopctl_core::decode::agent_usage::{AgentUsage, UsageScanner};
use loopctl_core::rules::markers::{Marker, MarkerScanner};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use sha2::{Digest, Sha256};

use crate::control::Control;

/// Longest stderr line kept whole; only a line's start is reported (the last error line).
const MAX_STDERR_LINE: usize = 64 << 10;
/// Longest stdout line kept whole for the marker and usage scanners: Claude's `result` line
/// carries the agent's whole final answer.
const MAX_STDOUT_LINE: usize = 16 << 20;

pub enum Program {
    /// An argv run directly, no shell.
    Argv(Vec<String>),
    /// A command line for `sh -c`.
    Shell(String),
}

/// A sink for a phase's output as it streams (the CLI's terminal, with `--echo`).
pub type Echo = Arc<dyn Fn(&[u8]) + Send + Sync>;

pub struct Attempt<'a> {
    pub program: Program,
    pub stdin: Option<String>,
    pub env: Vec<(&'static str, String)>,
    pub cwd: &'a Path,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// Where to copy the phase's output as it streams, if anywhere.
    pub echo: Option<Echo>,
    /// End the attempt when it writes nothing (stdout or stderr) for this long.
    pub stall_after: Option<Duration>,
}

#[derive(Debug, Default)]
pub struct Finished {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    pub markers: Vec<Marker>,
    pub stdout_sha256: String,
    pub stderr_sha256: String,
    /// Last non-empty stdout line (a phase's result string), capped.
    pub last_line: Option<String>,
    /// Last non-empty stderr line, for error reports.
    pub last_error_line: Option<String>,
    /// The last `<|score: x|>`, `<|result: ...|>` and JSON evaluation line on stdout.
    pub score: Option<f64>,
    pub result: Option<String>,
    pub evaluation: Option<String>,
    /// Ended by the stall watchdog: no output for `stall_after`.
    pub stalled: bool,
    /// The agent's token and cost records on stdout, summed; `None` when it printed none.
    pub usage: Option<AgentUsage>,
}

struct Captured {
    sha256: String,
    scanner: MarkerScanner,
    usage: UsageScanner,
    last_line: Option<String>,
}

fn hex(d: impl AsRef<[u8]>) -> String {
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Milliseconds since the attempt started at which it last wrote something.
type Activity = Option<(Arc<AtomicU64>, Instant)>;

/// Copies a stream to its file, hashing it and, with `scan`, feeding complete lines to the
/// marker and usage scanners.
fn capture(
    mut from: impl Read,
    to: &Path,
    echo: Option<Echo>,
    scan: bool,
    activity: Activity,
) -> std::io::Result<Captured> {
    // Created here, not before the spawn: on some disks a file creation costs as much as a
    // short phase, and here it overlaps with the phase running. The pipe holds the output.
    let mut to = match create_new(to) {
        Ok(f) => f,
        Err(e) => {
            // Still drain the pipe, or the phase would block on a full one.
            let _ = std::io::copy(&mut from, &mut std::io::sink());
            return Err(e);
        }
    };
    let mut hash = Sha256::new();
    let mut scanner = MarkerScanner::default();
    let mut usage = UsageScanner::default();
    let mut partial: Vec<u8> = Vec::new();
    let mut last_line = None;
    let mut buf = vec![0u8; 64 << 10];
    // A line longer than the cap keeps only its start and its end: enough for markers and the
    // last line, but such a usage record may have lost its counts, so it is not read.
    let max_line = if scan {
        MAX_STDOUT_LINE
    } else {
        MAX_STDERR_LINE
    };
    let mut cut = false;
    let mut feed =
        |line: &[u8], whole: bool, scanner: &mut MarkerScanner, last: &mut Option<String>| {
            if scan && whole {
                usage.line(line);
            }
            let text = String::from_utf8_lossy(line);
            let t = text.trim();
            if !t.is_empty() {
                *last = Some(t.chars().take(1000).collect());
            }
            if scan {
                scanner.line(&text);
            }
        };
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        if let Some((at, t0)) = &activity {
            at.store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
        to.write_all(chunk)?;
        hash.update(chunk);
        if let Some(echo) = &echo {
            echo(chunk);
        }
        let mut rest = chunk;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            if partial.is_empty() {
                feed(&rest[..i], true, &mut scanner, &mut last_line);
            } else {
                partial.extend_from_slice(&rest[..i]);
                feed(&partial, !cut, &mut scanner, &mut last_line);
                partial.clear();
                cut = false;
            }
            rest = &rest[i + 1..];
        }
        let room = max_line.saturating_sub(partial.len());
        cut |= rest.len() > room;
        partial.extend_from_slice(&rest[..rest.len().min(room)]);
    }
    if !partial.is_empty() {
        feed(&partial, !cut, &mut scanner, &mut last_line);
    }
    // No fsync here: the phase_finished event that names this file is fsynced, and an output
    // file only matters as long as the page cache holds it or the disk does.
    Ok(Captured {
        sha256: hex(hash.finalize()),
        scanner,
        usage,
        last_line,
    })
}

/// Finds a bare program name on PATH once, instead of letting exec try every PATH entry.
fn resolve(program: &str) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from(program))
}

fn create_new(path: &Path) -> std::io::Result<File> {
    File::options().write(true).create_new(true).open(path)
}

/// Ends a phase group that wrote nothing for `limit`: SIGTERM, then SIGKILL after a grace.
fn watch_stall(
    pgid: i32,
    limit: Duration,
    started: Instant,
    last_output: &AtomicU64,
    done: &AtomicBool,
    stalled: &AtomicBool,
) {
    let tick = (limit / 4).clamp(Duration::from_millis(10), Duration::from_millis(500));
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(tick);
        let quiet = started
            .elapsed()
            .saturating_sub(Duration::from_millis(last_output.load(Ordering::Relaxed)));
        if quiet >= limit && !done.load(Ordering::Relaxed) {
            stalled.store(true, Ordering::Relaxed);
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGTERM);
            let grace = Instant::now() + Duration::from_secs(5);
            while !done.load(Ordering::Relaxed) && Instant::now() < grace {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !done.load(Ordering::Relaxed) {
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
            }
            return;
        }
    }
}

/// Runs one attempt to its end. The caller has already logged `phase_started`.
pub fn run(a: Attempt<'_>, control: &Control) -> std::io::Result<Finished> {
    let (out_file, err_file) = (a.stdout.clone(), a.stderr.clone());
    let mut cmd = match &a.program {
        Program::Argv(argv) => {
            let mut c = Command::new(resolve(&argv[0]));
            c.args(&argv[1..]);
            c
        }
        Program::Shell(line) => {
            let mut c = Command::new("/bin/sh");
            c.arg("-c").arg(line);
            c
        }
    };
    cmd.current_dir(a.cwd)
        .envs(a.env.iter().map(|(k, v)| (*k, v)))
        .stdin(if a.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let pgid = child.id() as i32;
    control.set_group(pgid);
    let last_output = Arc::new(AtomicU64::new(0));
    let activity: Activity = a.stall_after.map(|_| (last_output.clone(), started));
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().map(|s| {
        let (tx, echo, act) = (tx.clone(), a.echo.clone(), activity.clone());
        std::thread::spawn(move || {
            let r = capture(s, &out_file, echo, true, act);
            let _ = tx.send(());
            r
        })
    });
    let stderr = child.stderr.take().map(|s| {
        let (tx, echo, act) = (tx.clone(), a.echo.clone(), activity.clone());
        std::thread::spawn(move || {
            let r = capture(s, &err_file, echo, false, act);
            let _ = tx.send(());
            r
        })
    });
    let done = Arc::new(AtomicBool::new(false));
    let stalled = Arc::new(AtomicBool::new(false));
    if let Some(limit) = a.stall_after {
        let (done, stalled) = (done.clone(), stalled.clone());
        std::thread::spawn(move || {
            watch_stall(pgid, limit, started, &last_output, &done, &stalled)
        });
    }
    drop(tx);
    if let (Some(mut pipe), Some(text)) = (child.stdin.take(), a.stdin) {
        // A phase that does not read its stdin must not block the runner.
        std::thread::spawn(move || {
            let _ = pipe.write_all(text.as_bytes());
        });
    }
    let status = child.wait();
    done.store(true, Ordering::Relaxed);
    // The phase is over when its leader exits; whatever it left holding the pipes gets a
    // moment to finish, then its group is killed so the capture can end.
    let readers = usize::from(stdout.is_some()) + usize::from(stderr.is_some());
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut done = 0;
    while done < readers {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(()) => done += 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    control.clear_group();
    let status = status?;
    let join = |h: Option<std::thread::JoinHandle<std::io::Result<Captured>>>| match h {
        Some(h) => h
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("output capture thread panicked"))),
        None => Err(std::io::Error::other("no pipe")),
    };
    let out = join(stdout)?;
    let err = join(stderr)?;
    Ok(Finished {
        exit_code: status.code(),
        signal: status.signal(),
        duration_ms: started.elapsed().as_millis() as u64,
        markers: out.scanner.seen,
        score: out.scanner.score,
        result: out.scanner.result,
        evaluation: out.scanner.evaluation,
        stalled: stalled.load(Ordering::Relaxed),
        stdout_sha256: out.sha256,
        stderr_sha256: err.sha256,
        last_line: out.last_line,
        last_error_line: err.last_line,
        usage: out.usage.usage(),
    })
}

#[cfg(test)]
mod tests;
