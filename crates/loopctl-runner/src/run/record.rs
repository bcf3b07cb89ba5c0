//! What the runner records, decided without I/O: a phase attempt's outcome (`phase_finished`),
//! a retry (`phase_retry`), the run's end (`stopped`, or the ending of an interrupted run),
//! and whether a log can be resumed. The runner gathers the facts (a process's end, the
//! interrupt, git's HEAD, the stop request); these functions turn them into the record.

use std::time::Duration;

use loopctl_core::rules::loop_file::{LoopFile, PhaseKind};
use loopctl_core::rules::next_step::{Cursor, Ending, ExitReason, Pos, Shape};
use loopctl_core::{RunState, Status};
use serde_json::{Value, json};

use super::{RunOptions, STALLED};

/// The signal `loopctl stop` sends a live runner, and a phase it cancels dies of.
pub(super) const SIGTERM: i32 = nix::libc::SIGTERM;
use crate::control::Interrupt;
use crate::phase;

/// The `stop_reason` of an attempt: an interrupt wins over how the process ended.
pub(super) fn stop_reason(f: &phase::Finished, interrupt: Option<Interrupt>) -> &'static str {
    match interrupt {
        Some(Interrupt::Cancelled(_)) => "cancelled",
        Some(Interrupt::Timeout) => "timeout",
        None if f.stalled => STALLED,
        None if f.exit_code == Some(0) => "end_turn",
        None if f.signal.is_some() => "signal",
        None => "error",
    }
}

/// What the runner knows of the phase an attempt ran, beyond the process's end.
pub(super) struct PhaseFacts<'a> {
    pub name: &'a str,
    pub pos: Pos,
    pub attempt: u64,
    /// A loop phase the loop file observes: its exit status is a verdict.
    pub observed: bool,
    /// The loop file decides after loop phases (criteria, `when` rules, branches...).
    pub loop_decides: bool,
    /// The phase has branches of its own (`transition`).
    pub branches: bool,
    pub stall_after: Option<Duration>,
    /// `git rev-parse HEAD` and the work-tree fingerprint after the attempt, when tracked.
    pub commit: Option<String>,
    pub worktree: Option<String>,
}

/// The `phase_finished` payload of an attempt that ran (`base` holds kind, index, attempt and
/// session), and the failure message the next prompt and the run's end report, if it failed.
pub(super) fn phase_finished(
    mut fin: Value,
    f: &phase::Finished,
    interrupt: Option<Interrupt>,
    at: &PhaseFacts<'_>,
    logs: (&str, &str),
) -> (Value, Option<String>) {
    let loop_phase = at.pos.kind == PhaseKind::Loop;
    let exit_code = f.exit_code.or(f.signal.map(|s| 128 + s)).map(i64::from);
    let reported = f.score.is_some() || f.evaluation.is_some();
    let decide =
        f.stalled || (loop_phase && at.loop_decides && (at.observed || reported || at.branches));
    let stop_reason = stop_reason(f, interrupt);
    let o = fin.as_object_mut().expect("object");
    o.insert("exit_code".into(), json!(exit_code));
    if let Some(s) = f.signal {
        o.insert("signal".into(), json!(s));
    }
    o.insert("stop_reason".into(), json!(stop_reason));
    o.insert("duration_ms".into(), json!(f.duration_ms));
    if let Some(m) = loopctl_core::rules::markers::winner(&f.markers) {
        o.insert(
            "marker".into(),
            json!({"directive": m.directive, "label": m.label}),
        );
    }
    if !f.markers.is_empty() {
        o.insert("markers".into(), json!(f.markers));
    }
    o.insert("output_log".into(), json!(logs.0));
    o.insert("output_sha256".into(), json!(f.stdout_sha256));
    o.insert("stderr_log".into(), json!(logs.1));
    o.insert("stderr_sha256".into(), json!(f.stderr_sha256));
    if let Some(l) = &f.last_line {
        o.insert("result".into(), json!(l));
    }
    if let Some(r) = &f.result {
        o.insert("result_marker".into(), json!(r));
    }
    if let Some(x) = f.score {
        o.insert("score".into(), json!(x));
    }
    if let Some(v) = f
        .evaluation
        .as_deref()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
    {
        o.insert("evaluation".into(), v);
    }
    // An observed phase's exit status is its verdict, unless something else ended it.
    let observed = loop_phase && at.observed;
    if observed && matches!(stop_reason, "end_turn" | "error") && f.exit_code.is_some() {
        o.insert(
            "verdict".into(),
            json!(if f.exit_code == Some(0) {
                "pass"
            } else {
                "fail"
            }),
        );
    }
    if decide && matches!(stop_reason, "end_turn" | "error" | STALLED) {
        o.insert("decide".into(), json!(true));
    }
    if let Some(u) = &f.usage {
        o.insert("usage".into(), json!(u));
    }
    if let Some(c) = &at.commit {
        o.insert("commit".into(), json!(c));
    }
    if let Some(w) = &at.worktree {
        o.insert("worktree".into(), json!(w));
    }
    if stop_reason == "end_turn" {
        return (fin, None);
    }
    let how = match (f.exit_code, f.signal) {
        _ if f.stalled => format!(
            "wrote no output for {} (stagnation.stalled_after_ms) and was stopped",
            humantime::format_duration(at.stall_after.unwrap_or_default())
        ),
        // The runner's own signal: said as why it was sent, not as a crash.
        _ if stop_reason == "timeout" => "was stopped at the run's --timeout".into(),
        _ if stop_reason == "cancelled" => "was stopped: the run was cancelled".into(),
        (Some(c), _) => format!("exited with code {c}"),
        (_, Some(s)) => format!("was killed by signal {s}"),
        _ => "ended".into(),
    };
    let err = format!(
        "phase {:?} (iteration {}, attempt {}) {how}{}",
        at.name,
        at.pos.iteration,
        at.attempt,
        f.last_error_line
            .as_deref()
            .map(|l| format!(": {l}"))
            .unwrap_or_default()
    );
    o.insert("error".into(), json!(err));
    (fin, Some(err))
}

/// The exit code recorded for a phase whose process could not start: 127, the shell's
/// "command not found", when the program does not exist.
pub(super) fn start_failure_code(e: &std::io::Error) -> Option<i64> {
    (e.kind() == std::io::ErrorKind::NotFound).then_some(127)
}

/// The `phase_finished` payload of a phase that never ran (template error, missing program),
/// recorded as a failed attempt, and its failure message.
pub(super) fn never_ran(
    mut fin: Value,
    name: &str,
    iteration: u64,
    msg: &str,
    code: Option<i64>,
) -> (Value, String) {
    let err = format!("phase {name:?} (iteration {iteration}): {msg}");
    fin["stop_reason"] = json!("error");
    fin["exit_code"] = json!(code);
    fin["error"] = json!(err);
    fin["duration_ms"] = json!(0);
    (fin, err)
}

/// The `phase_retry` payload: attempt `attempt - 1` failed, `attempt` follows after `delay_ms`.
pub(super) fn retry(
    pos: &Pos,
    attempt: u64,
    retry: u64,
    delay_ms: u64,
    exit_code: Option<i64>,
) -> Value {
    json!({"kind": pos.kind.as_str(), "index": pos.index, "attempt": attempt - 1,
           "next_attempt": attempt, "retry": retry, "delay_ms": delay_ms, "exit_code": exit_code})
}

/// An interrupted ending's facts when an attempt was running: what the attempt SIGTERM (the
/// signal a live stop sends) ends records, 143 and `cancelled`, not the previous attempt's.
pub(super) fn cancel_running(e: &mut Ending) {
    e.exit_code = Some(i64::from(128 + SIGTERM));
    e.stop_reason = "cancelled".into();
}

/// How a run ends when a signal or `--timeout` interrupted it.
pub(super) fn interrupted_ending(i: Interrupt, cursor: &Cursor, shape: &Shape) -> Ending {
    let last = cursor.last.as_ref();
    Ending {
        reason: match i {
            Interrupt::Cancelled(_) => ExitReason::Cancelled,
            Interrupt::Timeout => ExitReason::Timeout,
        },
        label: None,
        exit_code: last.and_then(|l| l.1.exit_code),
        stop_reason: last.map_or("cancelled".into(), |l| l.1.stop_reason.clone()),
        iterations_completed: cursor.iterations_completed(shape),
        decided: None,
    }
}

/// The `stopped` payload of an ending, and the warning a decision attached (to report).
/// `last_failure` is the runner's last failure message, `stop_request` the text `loopctl
/// stop` left for a cancelled run.
pub(super) fn stopped(
    e: &Ending,
    last_failure: Option<&str>,
    cursor: &Cursor,
    timeout_ms: Option<u64>,
    stop_request: Option<&str>,
) -> (Value, Option<String>) {
    let mut payload = e.stopped_payload();
    let warning = e.decided.as_ref().and_then(|d| d.warning.clone());
    match e.reason {
        ExitReason::PhaseFailure => {
            if let Some(err) = last_failure.map(str::to_string).or_else(|| {
                cursor
                    .last
                    .as_ref()
                    .map(|l| format!("phase ended with {}", l.1.stop_reason))
            }) {
                payload["error"] = json!(err);
            }
        }
        ExitReason::Timeout => {
            payload["error"] = json!(format!(
                "timed out after {} ms (--timeout)",
                timeout_ms.unwrap_or(0)
            ))
        }
        ExitReason::Cancelled => {
            if let Some(reason) = stop_request.map(str::trim).filter(|r| !r.is_empty()) {
                payload["detail"] = json!(reason);
            }
        }
        _ => {}
    }
    (payload, warning)
}

/// Why a run whose log says it is over cannot be resumed.
pub(super) fn over(state: &RunState) -> Option<String> {
    if !state.is_terminal() {
        return None;
    }
    let why = match state.status {
        Status::Failed => format!(
            "it failed ({}){}",
            state.stop.reason,
            state
                .last_error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ),
        s => format!("it is {} ({})", s.as_str(), state.stop.reason),
    };
    Some(format!(
        "run {} is over, so there is nothing to resume: {why}. Start a new run with `loopctl run`.",
        state.run_id
    ))
}

/// The loop file and options a run was started with, from its `run_started` payload; an
/// error message when the log was not written by `loopctl run`.
pub(super) fn stored_config(
    run_id: &str,
    started: Option<Value>,
) -> Result<(LoopFile, RunOptions), String> {
    let not_ours = || {
        format!(
            "run {run_id} was not started by `loopctl run` (its log has no loop configuration), so loopctl cannot continue it"
        )
    };
    let started = started.ok_or_else(not_ours)?;
    let cfg = serde_json::from_value(started["config"].clone()).map_err(|_| not_ours())?;
    let opts = serde_json::from_value(started["options"].clone()).map_err(|_| not_ours())?;
    Ok((cfg, opts))
}

#[cfg(test)]
mod tests;
