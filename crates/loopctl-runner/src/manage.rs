//! Stopping runs and deleting them: the operations on a run from outside its runner.

use std::path::Path;
use std::time::{Duration, Instant};

use loopctl_core::Kind;
use loopctl_core::analysis::liveness::Liveness;
use loopctl_core::decode::event::Dialect;
use loopctl_core::decode::lines::DEFAULT_MAX_LINE;
use loopctl_core::fold::replay::Outcome;
use loopctl_core::{Event, RunState};
use loopctl_store::append::{Fsync, LogWriter, holder, liveness};
use loopctl_store::discover::{self, CURRENT, RunRef};
use loopctl_store::snapshot::{replay_run, run_json_of, state_file, write_atomic};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::run::{Runner, RunnerError, STOP_REQUEST, now};

type Result<T> = std::result::Result<T, RunnerError>;

#[derive(Debug, Clone, PartialEq)]
pub enum Stopped {
    /// A live runner was signalled and has let go of the run.
    Live { pid: String },
    /// The runner was signalled but still holds the run after the wait.
    StillRunning { pid: String },
    /// No runner: a `stopped` event was appended; `ended_group`, the phase's process group
    /// the dead runner left running, ended first.
    Idle { ended_group: Option<i32> },
    /// Nothing to do: the run had already ended.
    AlreadyOver(Box<RunState>),
}

fn state_of(run: &RunRef) -> Result<RunState> {
    replay_run(run, DEFAULT_MAX_LINE)?
        .1
        .ok_or_else(|| RunnerError::Invalid(format!("{} holds no event", run.log.display())))
}

/// Stops `run`: a live runner gets SIGTERM (it records `user_stop` and exits cleanly); an idle
/// run gets a `stopped` event with reason `user_stop`.
pub fn stop(root: &Path, run: &RunRef, reason: Option<&str>, wait: Duration) -> Result<Stopped> {
    if let Some(pid) = holder(&run.log) {
        let n: i32 = pid.parse().map_err(|_| {
            RunnerError::Invalid(format!(
                "{} is locked by an unknown process",
                run.log.display()
            ))
        })?;
        if let Some(dir) = &run.dir {
            let req = dir.join(STOP_REQUEST);
            std::fs::write(&req, reason.unwrap_or("")).map_err(|cause| RunnerError::Io {
                path: req.clone(),
                cause,
            })?;
        }
        kill(Pid::from_raw(n), Signal::SIGTERM)
            .map_err(|e| RunnerError::Invalid(format!("cannot signal runner pid {pid}: {e}")))?;
        let end = Instant::now() + wait;
        while Instant::now() < end {
            if holder(&run.log).is_none() {
                return Ok(Stopped::Live { pid });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        return Ok(Stopped::StillRunning { pid });
    }
    let (outcome, state) = replay_run(run, DEFAULT_MAX_LINE)?;
    let state = state
        .ok_or_else(|| RunnerError::Invalid(format!("{} holds no event", run.log.display())))?;
    if state.is_terminal() {
        return Ok(Stopped::AlreadyOver(Box::new(state)));
    }
    if let Some(why) = foreign(run, &outcome, "stop") {
        return Err(RunnerError::Invalid(format!(
            "{why} (its status stays `running` until that tool records the run's end)"
        )));
    }
    // A run `loopctl run` made ends as its runner would have ended it: with its sentinel and
    // its event stream's loop end, which whoever waits on them needs.
    match Runner::stop_interrupted(root, run, reason.filter(|r| !r.is_empty())) {
        Ok((_, ended_group)) => return Ok(Stopped::Idle { ended_group }),
        // Not one: the `stopped` event alone.
        Err(RunnerError::NotResumable(_)) => {}
        Err(e) => return Err(e),
    }
    let (mut w, _) = LogWriter::open(&run.log, state.last_seq.unwrap_or(0) + 1, Fsync::Always)?;
    let mut payload = json!({ "reason": "user_stop" });
    if let Some(r) = reason.filter(|r| !r.is_empty()) {
        payload["detail"] = json!(r);
    }
    w.append(
        &Event {
            ts: Some(now()),
            run_id: Some(state.run_id.clone().into()),
            ..Event::new(Kind::Stopped)
        }
        .with_payload(&payload),
    )?;
    drop(w);
    let (outcome, after) = replay_run(run, DEFAULT_MAX_LINE)?;
    let after = after
        .ok_or_else(|| RunnerError::Invalid(format!("{} holds no event", run.log.display())))?;
    if let Some(p) = &run.run_json {
        // The stopped run's own state file: never another run's of a shared log.
        let path = state_file(p, &after.run_id, &outcome, &run.name);
        write_atomic(&path, &run_json_of(&run.log, &after)?)?;
    }
    if discover::read_current(root)
        .is_some_and(|c| c.active_run_id.as_deref() == Some(after.run_id.as_str()))
    {
        let _ = std::fs::remove_file(root.join(CURRENT));
    }
    Ok(Stopped::Idle { ended_group: None })
}

/// Why `stop` must not write into `run`'s log, if it must not: a log with no runner lock whose
/// events are another tool's dialect (aif-loop's agent, an Avenor stream) is that tool's to
/// end; an event of ours in it would be a second writer nobody coordinates with.
/// An error when `run`'s log is another tool's (`foreign`), read only when it has no runner
/// lock: its run.json holds what only that tool writes, so loopctl must not `verb` it.
pub(crate) fn refuse_foreign(run: &RunRef, verb: &str) -> Result<()> {
    if liveness(&run.log) != Liveness::Unknown {
        return Ok(());
    }
    let (outcome, _) = replay_run(run, DEFAULT_MAX_LINE)?;
    match foreign(run, &outcome, verb) {
        Some(why) => Err(RunnerError::Invalid(format!(
            "cannot {verb} {}: {why}",
            run.run_id.as_deref().unwrap_or(&run.name)
        ))),
        None => Ok(()),
    }
}

/// Why loopctl may not `verb` (stop, resume) the run of `run`'s log, if it may not: a log with
/// no runner lock whose events are in another tool's dialect is that tool's to write.
pub(crate) fn foreign(run: &RunRef, outcome: &Outcome, verb: &str) -> Option<String> {
    if liveness(&run.log) != Liveness::Unknown {
        return None;
    }
    let others: Vec<&str> = outcome
        .stats
        .by_dialect
        .keys()
        .map(String::as_str)
        .filter(|d| *d != Dialect::Native.name())
        .collect();
    (!others.is_empty()).then(|| {
        format!(
            "{} was written by {} (its events are in that dialect), not by a loopctl runner: \
             loopctl does not write into another tool's log; {verb} the run with the tool that \
             writes it",
            run.log.display(),
            others.join(" and ")
        )
    })
}

/// Why a run may not be deleted, if it may not.
pub fn refuse_clean(run: &RunRef, force: bool) -> Option<String> {
    if let Some(pid) = holder(&run.log) {
        return Some(format!(
            "run {} is running (runner pid {pid}); stop it first with `loopctl stop {}`",
            run.name, run.name
        ));
    }
    // A run named inside a log holding others: deleting its folder would delete them too.
    if let Some(id) = &run.run_id
        && let Ok((outcome, _)) = replay_run(run, DEFAULT_MAX_LINE)
        && outcome.runs.keys().any(|k| k != id)
    {
        return Some(format!(
            "run {id} shares {} with {} other run(s); clean deletes whole run folders: name the folder ({}) to delete them all",
            run.log.display(),
            outcome.runs.len() - 1,
            run.dir.as_deref().unwrap_or(&run.log).display()
        ));
    }
    match state_of(run) {
        Ok(s) if !s.is_terminal() && !force => Some(format!(
            "run {} is still running according to its log (interrupted, resumable with `loopctl resume {}`); \
             stop it with `loopctl stop {}` or pass --force",
            run.name, run.name, run.name
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopctl_store::StoreError;

    #[test]
    fn an_io_error_names_its_cause_once() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        for e in [
            RunnerError::Io {
                path: "r/stop.request".into(),
                cause: denied,
            },
            RunnerError::from(StoreError::Io {
                path: "r/run.json".into(),
                cause: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            }),
        ] {
            assert!(std::error::Error::source(&e).is_none(), "{e}");
            assert_eq!(e.to_string().matches("ermission denied").count(), 1, "{e}");
        }
    }
}
