//! How a run ended, and the one rule from that to the sentinel's status line and the exit code
//! of `run`, `resume` and `tail --until-done` (a read command's own codes are `exit_codes`).
//! The runner applies it to the ending it decided (`Sentinel::for_ending`); readers of a log
//! apply it to the state the log's terminal event leaves, so both give the same code for the
//! same run.

use crate::fold::run_state::{RunState, Status};
use crate::rules::ending::ExitReason;

/// A run's end as far as its exit code goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunExit {
    /// Ended as planned (marker, iteration limit, a met goal, no loop phases): 0.
    Done,
    /// Stopped because the loop stagnated: 3.
    Stagnated,
    /// An abort marker or a decision that asks a human: 5.
    Blocked,
    /// A phase failed; the code is the phase's (1..=255, 1 when it had none).
    Failed(i32),
    /// `--timeout` ran out: 124.
    TimedOut,
    /// Cancelled (signal, `loopctl stop`, aif-loop's `user_stop`): 130.
    Killed,
}

/// What the terminal event of a run records, as the rule reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EndFacts<'a> {
    /// Avenor's `exit_reason` (`marker`, `abort`, `phase_failure`, ...), when written.
    pub exit_reason: Option<&'a str>,
    /// The canonical stop reason (`stagnation`, `user_stop`, `threshold_reached`, ...).
    pub reason: &'a str,
    /// The failing (or cancelled) phase's exit code.
    pub exit_code: Option<i64>,
    /// The status the log gives the run: what decides when no `exit_reason` was written
    /// (aif-loop and hand-written logs).
    pub status: Status,
}

impl<'a> EndFacts<'a> {
    /// The facts a replayed terminal state holds; `exit_code` is the terminal event's
    /// `payload.exit_code` (the state keeps no phase exit code). `None` while the run goes on.
    pub fn of_state(s: &'a RunState, exit_code: Option<i64>) -> Option<EndFacts<'a>> {
        s.is_terminal().then(|| EndFacts {
            exit_reason: s.exit_reason.as_deref(),
            reason: &s.stop.reason,
            exit_code,
            status: s.status,
        })
    }
}

impl RunExit {
    /// The rule. An `exit_reason` that names a failure, timeout, cancellation or abort decides;
    /// otherwise a stop for `stagnation` gives 3; otherwise a known `exit_reason` is DONE; a log
    /// without one is judged by its status and reason.
    pub fn of(f: &EndFacts<'_>) -> RunExit {
        let failed = || {
            let c = f.exit_code.filter(|&c| c != 0).unwrap_or(1).clamp(1, 255);
            RunExit::Failed(c as i32)
        };
        let by = |r: ExitReason| f.exit_reason == Some(r.as_str());
        if by(ExitReason::Abort) {
            RunExit::Blocked
        } else if by(ExitReason::PhaseFailure) {
            failed()
        } else if by(ExitReason::Timeout) {
            RunExit::TimedOut
        } else if by(ExitReason::Cancelled) {
            RunExit::Killed
        } else if f.reason == "stagnation" {
            RunExit::Stagnated
        } else if by(ExitReason::Marker) || by(ExitReason::MaxIterations) || by(ExitReason::EndTurn)
        {
            RunExit::Done
        } else {
            match (f.status, f.reason) {
                (_, "user_stop") => RunExit::Killed,
                (_, "timeout") => RunExit::TimedOut,
                (Status::Failed, _) => failed(),
                _ => RunExit::Done,
            }
        }
    }

    /// loopctl's exit code (also `run`'s and `resume`'s).
    pub fn code(self) -> i32 {
        match self {
            RunExit::Done => 0,
            RunExit::Stagnated => 3,
            RunExit::Blocked => 5,
            RunExit::Failed(c) => c,
            RunExit::TimedOut => 124,
            RunExit::Killed => 130,
        }
    }

    /// The sentinel file's first line.
    pub fn sentinel_status(self) -> &'static str {
        match self {
            RunExit::Done | RunExit::Stagnated => "DONE",
            RunExit::Blocked => "BLOCKED",
            RunExit::Failed(_) => "FAILED",
            RunExit::TimedOut => "TIMEOUT",
            RunExit::Killed => "KILLED",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::event::{Event, Kind};
    use crate::fold::run_state::apply;
    use crate::rules::ending::{Decided, Ending};
    use crate::rules::sentinel::Sentinel;
    use serde_json::Value;

    fn facts(exit_reason: Option<&str>, reason: &str, code: Option<i64>, st: Status) -> RunExit {
        RunExit::of(&EndFacts {
            exit_reason,
            reason,
            exit_code: code,
            status: st,
        })
    }

    /// Every outcome, with its code and sentinel line.
    #[test]
    fn every_outcome_has_one_code() {
        use Status::*;
        type Row = (
            Option<&'static str>,
            &'static str,
            Option<i64>,
            Status,
            i32,
            &'static str,
        );
        let table: &[Row] = &[
            (Some("marker"), "marker", None, Completed, 0, "DONE"),
            (Some("end_turn"), "end_turn", None, Completed, 0, "DONE"),
            (
                Some("max_iterations"),
                "iteration_limit",
                None,
                Stopped,
                0,
                "DONE",
            ),
            (
                Some("marker"),
                "threshold_reached",
                None,
                Completed,
                0,
                "DONE",
            ),
            (
                Some("max_iterations"),
                "stagnation",
                None,
                Stopped,
                3,
                "DONE",
            ),
            (Some("abort"), "abort", None, Stopped, 5, "BLOCKED"),
            (Some("abort"), "stagnation", None, Stopped, 5, "BLOCKED"),
            (
                Some("phase_failure"),
                "phase_error",
                Some(7),
                Failed,
                7,
                "FAILED",
            ),
            (
                Some("phase_failure"),
                "phase_error",
                None,
                Failed,
                1,
                "FAILED",
            ),
            (
                Some("phase_failure"),
                "phase_error",
                Some(0),
                Failed,
                1,
                "FAILED",
            ),
            (
                Some("phase_failure"),
                "phase_error",
                Some(999),
                Failed,
                255,
                "FAILED",
            ),
            (
                Some("phase_failure"),
                "phase_error",
                Some(-4),
                Failed,
                1,
                "FAILED",
            ),
            (Some("timeout"), "timeout", None, Failed, 124, "TIMEOUT"),
            (
                Some("cancelled"),
                "user_stop",
                Some(130),
                Stopped,
                130,
                "KILLED",
            ),
            // No exit_reason: aif-loop's and hand-written logs.
            (None, "threshold_reached", None, Completed, 0, "DONE"),
            (None, "iteration_limit", None, Stopped, 0, "DONE"),
            (None, "stagnation", None, Stopped, 3, "DONE"),
            (None, "user_stop", None, Stopped, 130, "KILLED"),
            (None, "timeout", None, Failed, 124, "TIMEOUT"),
            (None, "phase_error", Some(2), Failed, 2, "FAILED"),
            (None, "phase_error", None, Failed, 1, "FAILED"),
            (Some("error"), "error", None, Failed, 1, "FAILED"),
            (
                Some("something_new"),
                "something_new",
                None,
                Stopped,
                0,
                "DONE",
            ),
        ];
        for &(er, reason, code, st, want, line) in table {
            let x = facts(er, reason, code, st);
            assert_eq!(
                (x.code(), x.sentinel_status()),
                (want, line),
                "{er:?} {reason} {code:?} {st:?}"
            );
        }
    }

    /// The runner's sentinel and a reader of the `stopped` event the runner writes for the same
    /// ending agree: the payload here is the one `Runner::finish` writes.
    #[test]
    fn the_sentinel_and_the_replayed_log_agree() {
        let end = |reason, exit_code, decided: Option<Decided>| Ending {
            reason,
            label: Some("why".into()),
            exit_code,
            stop_reason: "end_turn".into(),
            iterations_completed: 1,
            decided,
        };
        let decided = |reason: &str, blocked| Decided {
            reason: reason.into(),
            blocked,
            ..Decided::default()
        };
        let mut endings = vec![
            end(ExitReason::PhaseFailure, Some(9), None),
            end(ExitReason::PhaseFailure, None, None),
            end(ExitReason::Cancelled, Some(130), None),
        ];
        for r in [
            ExitReason::Marker,
            ExitReason::Abort,
            ExitReason::MaxIterations,
            ExitReason::Timeout,
            ExitReason::EndTurn,
        ] {
            endings.push(end(r, None, None));
        }
        for (reason, blocked) in [
            ("stagnation", false),
            ("threshold_reached", false),
            ("iteration_limit", false),
            ("escalated", true),
            ("stagnation", true),
        ] {
            let d = decided(reason, blocked);
            endings.push(end(d.exit_reason(), None, Some(d)));
        }
        for e in endings {
            let payload = e.stopped_payload();
            let stopped = Event::new(Kind::Stopped).with_payload(&payload);
            let s = apply(RunState::new("r"), &stopped);
            let code = payload.get("exit_code").and_then(Value::as_i64);
            let read = RunExit::of(&EndFacts::of_state(&s, code).unwrap());
            let sentinel = Sentinel::for_ending(&e, "s", "r");
            assert_eq!(
                (read.code(), read.sentinel_status()),
                (sentinel.code, sentinel.status),
                "{payload}"
            );
        }
    }

    #[test]
    fn a_running_run_has_no_exit() {
        assert_eq!(EndFacts::of_state(&RunState::new("r"), None), None);
    }
}
