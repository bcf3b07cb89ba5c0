//! Reopening a run whose runner died (`resume`, `stop`): its log's lock, and the phase it left
//! running. A phase's process group outlives a runner killed outright (SIGKILL, the OOM
//! killer, a lost session): the agent goes on editing the tree while a resumed runner starts
//! the phase again. So the runner notes the running phase's group in a file beside the log
//! (`group_note`), and whoever reopens the run ends a group still there.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loopctl_store::StoreError;
use loopctl_store::append::{Fsync, LogWriter, TailRepair};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Time the group gets to exit after SIGTERM before SIGKILL (the runner's own grace).
const GRACE: Duration = Duration::from_secs(5);

/// Opens a log for appending. When the lock's recorded holder is dead, the lock may still
/// be held for a moment by a child it forked that has not reached `exec` yet (which closes
/// the inherited descriptor): wait for that instead of refusing a resume right after a crash.
pub(crate) fn open_log(log: &Path) -> Result<(LogWriter, Option<TailRepair>), StoreError> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match LogWriter::open(log, 1, Fsync::Always) {
            Err(StoreError::Locked { pid, .. })
                if Instant::now() < deadline && !pid_alive(&pid) =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn pid_alive(pid: &str) -> bool {
    match pid.trim().parse::<i32>() {
        Ok(p) if p > 0 => nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None).is_ok(),
        _ => true,
    }
}

/// Where a log's runner notes its running phase's process group: `.<log name>.phase-group`.
pub fn group_note(log: &Path) -> PathBuf {
    let name = log.file_name().map_or_else(
        || "history.jsonl".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    log.with_file_name(format!(".{name}.phase-group"))
}

/// Notes `pgid` (just spawned, its leader's pid) and its leader's start time in `file`.
pub(crate) fn note(file: &Path, pgid: i32) {
    let start = start_time(pgid).unwrap_or(0);
    let _ = std::fs::write(file, format!("{pgid} {start}\n"));
}

pub(crate) fn forget(file: &Path) {
    let _ = std::fs::remove_file(file);
}

/// Ends the phase group a dead runner of `log` left running, if one is: SIGTERM, SIGKILL
/// after the grace. The caller holds the log's lock (no runner is live). Returns the group.
pub fn end_left_behind(log: &Path) -> Option<i32> {
    let file = group_note(log);
    let text = std::fs::read_to_string(&file).ok()?;
    let group = parse(&text).filter(|&(pgid, start)| is_noted_group(pgid, start));
    if let Some((pgid, _)) = group {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGTERM);
        if !wait_gone(pgid, GRACE) {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
            wait_gone(pgid, Duration::from_secs(1));
        }
    }
    forget(&file);
    group.map(|(pgid, _)| pgid)
}

fn parse(text: &str) -> Option<(i32, u64)> {
    let mut words = text.split_whitespace();
    let pgid: i32 = words.next()?.parse().ok()?;
    let start: u64 = words.next()?.parse().ok()?;
    // Never a whole session's or init's group, whatever the file says.
    (pgid > 1).then_some((pgid, start))
}

/// Whether `pgid` is still the group that was noted. Its leader, if still there, must have
/// started when the noted one did (not a new process given the pid); without its leader the
/// group is the noted one, as the kernel gives no new process a pid some group still uses.
fn is_noted_group(pgid: i32, start: u64) -> bool {
    alive(pgid) && start_time(pgid).is_none_or(|s| s == start)
}

fn wait_gone(pgid: i32, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while alive(pgid) {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Some process of group `pgid` still runs (zombies do not count: nothing may reap them).
fn alive(pgid: i32) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return killpg(Pid::from_raw(pgid), None).is_ok();
    };
    procs.flatten().any(|e| {
        let pid = e.file_name();
        pid.to_str()
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
            && stat_fields(&e.path().join("stat"))
                .is_some_and(|f| f.pgrp == pgid && !matches!(f.state, 'Z' | 'X'))
    })
}

fn start_time(pid: i32) -> Option<u64> {
    stat_fields(Path::new(&format!("/proc/{pid}/stat"))).map(|f| f.start)
}

struct Stat {
    state: char,
    pgrp: i32,
    start: u64,
}

/// proc(5)'s `stat`: fields 3 (state), 5 (pgrp) and 22 (starttime), counted past the command
/// name, which may hold spaces and parentheses.
fn stat_fields(path: &Path) -> Option<Stat> {
    let text = std::fs::read_to_string(path).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    fn sleeper() -> Child {
        Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn reaped(child: &mut Child) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn a_noted_group_still_running_is_ended_and_the_note_removed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("history.jsonl");
        let mut child = sleeper();
        let pgid = child.id() as i32;
        note(&group_note(&log), pgid);
        assert_eq!(end_left_behind(&log), Some(pgid));
        assert!(reaped(&mut child), "the group got SIGTERM");
        assert!(!group_note(&log).exists());
        // Nothing noted: nothing ended.
        assert_eq!(end_left_behind(&log), None);
    }

    #[test]
    fn a_pid_given_to_another_process_or_a_group_gone_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("history.jsonl");
        let mut child = sleeper();
        let pgid = child.id() as i32;
        let start = start_time(pgid).unwrap();
        // Noted with another start time: another process that was given the pid.
        std::fs::write(group_note(&log), format!("{pgid} {}\n", start + 1)).unwrap();
        assert_eq!(end_left_behind(&log), None);
        assert!(child.try_wait().unwrap().is_none(), "left running");
        assert!(!group_note(&log).exists());
        // A damaged note, or one naming init, ends nothing.
        for text in ["", "garbage", "1 0", &format!("{pgid}")] {
            std::fs::write(group_note(&log), text).unwrap();
            assert_eq!(end_left_behind(&log), None, "{text:?}");
        }
        assert!(child.try_wait().unwrap().is_none());
        child.kill().unwrap();
        child.wait().unwrap();
        // The group is gone now: nothing to end.
        std::fs::write(group_note(&log), format!("{pgid} {start}\n")).unwrap();
        assert_eq!(end_left_behind(&log), None);
    }
}
