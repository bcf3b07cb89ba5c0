//! How a loop ends: Avenor's exit reasons, an ending chosen by a decision, and the ending the
//! `stopped` event, the sentinel and the exit code are written from.

/// Avenor's `exit_reason` vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    Marker,
    Abort,
    MaxIterations,
    PhaseFailure,
    Cancelled,
    Timeout,
    EndTurn,
}

/// An ending chosen by a decision (a `when` rule, a branch, a stop condition, a detector).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decided {
    /// The canonical reason the `stopped` event records (`threshold_reached`, `stagnation`, ...).
    pub reason: String,
    pub warning: Option<String>,
    pub detail: Option<String>,
    /// Ends BLOCKED (exit 5): a human must answer.
    pub blocked: bool,
}

impl Decided {
    /// The Avenor exit reason closest to a decided reason, for Avenor consumers.
    pub fn exit_reason(&self) -> ExitReason {
        if self.blocked {
            return ExitReason::Abort;
        }
        match crate::fold::run_state::classify_reason(&self.reason, None).1 {
            crate::fold::run_state::Status::Completed => ExitReason::Marker,
            _ => ExitReason::MaxIterations,
        }
    }
}

impl ExitReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ExitReason::Marker => "marker",
            ExitReason::Abort => "abort",
            ExitReason::MaxIterations => "max_iterations",
            ExitReason::PhaseFailure => "phase_failure",
            ExitReason::Cancelled => "cancelled",
            ExitReason::Timeout => "timeout",
            ExitReason::EndTurn => "end_turn",
        }
    }
}

/// How the loop ended: what the `stopped` event, the sentinel and the exit code say.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    pub reason: ExitReason,
    pub label: Option<String>,
    /// The failing (or cancelled) phase's exit code.
    pub exit_code: Option<i64>,
    /// The last phase's stop reason.
    pub stop_reason: String,
    pub iterations_completed: u64,
    pub decided: Option<Decided>,
}

impl Ending {
    /// What the `stopped` event records of this ending itself (the runner adds the error of a
    /// failed or timed-out run); `run_exit` reads exactly these fields back.
    pub fn stopped_payload(&self) -> serde_json::Value {
        let mut payload = serde_json::json!({
            "exit_reason": self.reason.as_str(),
            "iterations_completed": self.iterations_completed,
            "stop_reason": self.stop_reason,
        });
        if let Some(l) = &self.label {
            payload["exit_label"] = l.as_str().into();
        }
        if let Some(c) = self.exit_code {
            payload["exit_code"] = c.into();
        }
        if let Some(d) = &self.decided {
            payload["reason"] = d.reason.as_str().into();
            if let Some(w) = &d.warning {
                payload["warning"] = w.as_str().into();
            }
            if let Some(x) = &d.detail {
                payload["detail"] = x.as_str().into();
            }
        }
        payload
    }
}
