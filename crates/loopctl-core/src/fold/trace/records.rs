//! What a `Trace` holds: the records of one run's events (evaluations, phase attempts, retries,
//! errors, escalations, transitions, switches, the stop), each placed in the run by one `At`.

use std::sync::Arc;

use serde::Serialize;

use crate::decode::agent_usage::AgentUsage;
use crate::decode::event::Event;
use crate::decode::timestamp::Ts;

/// A name a trace holds many times over (phase, step, quality phase): one shared copy per run,
/// not one allocation per record.
pub type Name = Arc<str>;

/// Where an event sits in its run: the fields every record of a trace shares.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct At {
    pub seq: Option<u64>,
    pub ts: Option<Ts>,
    /// The event's own iteration, when it states one.
    pub iteration: Option<u64>,
    /// The phase (runner, Avenor) or step (aif-loop) the event names (its `step`).
    pub phase: Option<String>,
}

impl At {
    pub fn of(ev: &Event<'_>) -> At {
        At {
            seq: ev.seq,
            ts: ev.ts,
            iteration: ev.iteration,
            phase: ev.step.as_deref().map(str::to_string),
        }
    }
}

/// One `evaluation_done`, whatever its payload shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// `at.phase` is the step or observing phase's name.
    pub at: At,
    /// The event's iteration, else the highest seen so far.
    pub iteration: u64,
    /// Quality phase (`A`, `B`): the event's, else the run's current one.
    pub quality_phase: Name,
    pub score: Option<f64>,
    pub passed: Option<bool>,
    pub threshold: Option<f64>,
    /// Failed fail-severity rule ids, when the log names them (`failed` / `failed_rules`).
    pub failed: Option<Vec<String>>,
    /// `fail_count`, when given (the counts shape).
    pub fail_count: Option<u64>,
    /// Failed warn-severity rule ids, when named (`warnings` / `warn_rules`).
    pub warnings: Option<Vec<String>>,
    /// Rules active in this evaluation, when known (`active_rule_count`, the counts shape's
    /// `fail_count + warn_count + pass_count`, or the length of `rule_results`).
    pub active_rules: Option<u64>,
    /// Rules that passed, when known (`passed_rule_count`, `pass_count`, `rule_results`).
    pub passed_rules: Option<u64>,
    /// The last score the log stated before this evaluation (an earlier evaluation's, or a stop's
    /// final score); 0 at first. What aif-loop's stagnation delta is taken against.
    pub previous_score: f64,
    /// Native evaluations: `checks`, `marker` or `report`.
    pub source: Option<String>,
    /// Native evaluations: `proceed`, `retry` or `escalate`.
    pub decision: Option<String>,
    pub feedback: Option<String>,
}

impl Evaluation {
    /// Number of blocking (fail-severity) rules: the named ids, or `fail_count`.
    pub fn blocking(&self) -> u64 {
        let named = self.failed.as_ref().map_or(0, |v| v.len() as u64);
        named.max(self.fail_count.unwrap_or(0))
    }

    /// The failed fail-severity rule ids named, if any.
    pub fn failed_rules(&self) -> &[String] {
        self.failed.as_deref().unwrap_or(&[])
    }

    /// aif-loop's blocker test: a non-empty `failed` list or `fail_count > 0`.
    pub fn has_blockers(&self) -> bool {
        self.blocking() > 0
    }
}

/// One run of a phase (native, Avenor) or one step of an aif-loop iteration. A long run has
/// hundreds of thousands, so what only explicit attempts carry is boxed (`Explicit`) and names
/// are shared.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// Phase name (runner, Avenor) or step (aif-loop: PLAN, EVALUATE, ...).
    pub name: Name,
    pub iteration: Option<u64>,
    /// Quality phase, for derived aif-loop steps.
    pub phase: Option<Name>,
    /// 1-based attempt number: the log's, else counted per phase name and iteration.
    pub attempt: u64,
    /// True for a step derived from aif-loop events (no phase_started/phase_finished).
    pub derived: bool,
    /// The attempt has ended (a `phase_finished`, or for a derived step, its last event).
    pub finished: bool,
    pub start_seq: Option<u64>,
    pub end_seq: Option<u64>,
    pub started: Option<Ts>,
    pub ended: Option<Ts>,
    pub duration_ms: Option<u64>,
    pub error: Option<String>,
    /// What `phase_started` / `phase_finished` tell; `None` for derived steps.
    pub explicit: Option<Box<Explicit>>,
}

/// The fields of an explicit attempt (runner, Avenor) that derived steps never have.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Explicit {
    /// `pre`, `loop` or `post`.
    pub kind: Option<String>,
    pub exit_code: Option<i64>,
    pub stop_reason: Option<String>,
    /// The winning marker, `directive` or `directive: label`.
    pub marker: Option<String>,
    /// `pass` / `fail`, when the runner judged the phase.
    pub verdict: Option<String>,
    pub commit_start: Option<String>,
    pub commit_end: Option<String>,
    pub worktree_start: Option<String>,
    pub worktree_end: Option<String>,
    /// Its agent's tokens and cost, when `phase_finished` recorded them.
    pub usage: Option<AgentUsage>,
}

static NOT_EXPLICIT: Explicit = Explicit {
    kind: None,
    exit_code: None,
    stop_reason: None,
    marker: None,
    verdict: None,
    commit_start: None,
    commit_end: None,
    worktree_start: None,
    worktree_end: None,
    usage: None,
};

impl Attempt {
    /// An attempt of `name` in `iteration` that has not started yet: every other field empty.
    pub fn new(name: Name, iteration: Option<u64>) -> Attempt {
        Attempt {
            name,
            iteration,
            phase: None,
            attempt: 0,
            derived: false,
            finished: false,
            start_seq: None,
            end_seq: None,
            started: None,
            ended: None,
            duration_ms: None,
            error: None,
            explicit: None,
        }
    }

    /// What the phase events told (all `None` for a derived step).
    pub fn explicit(&self) -> &Explicit {
        self.explicit.as_deref().unwrap_or(&NOT_EXPLICIT)
    }

    /// `pre`, `loop` or `post` (runner, Avenor).
    pub fn kind(&self) -> Option<&str> {
        self.explicit().kind.as_deref()
    }

    /// Ended badly: an error, a stop reason other than `end_turn`, or a non-zero exit code.
    pub fn failed(&self) -> bool {
        let x = self.explicit();
        self.finished
            && (self.error.is_some()
                || x.stop_reason.as_deref().is_some_and(|r| r != "end_turn")
                || x.exit_code.is_some_and(|c| c != 0))
    }

    /// `running`, `failed`, `ok`, or `timeout` / `cancelled` for an attempt the run itself cut
    /// off (its `--timeout`, a stop or Ctrl-C): no failure of the phase's own.
    pub fn outcome(&self) -> &'static str {
        match self.explicit().stop_reason.as_deref() {
            _ if !self.finished => "running",
            Some("timeout") => "timeout",
            Some("cancelled") => "cancelled",
            _ if self.failed() => "failed",
            _ => "ok",
        }
    }

    /// `outcome`, but an attempt that never finished is `abandoned` unless it is `open`, the
    /// last attempt of a run still running: a killed runner's attempt that a resumed runner
    /// started again, or one left unfinished by a run that has ended since.
    pub fn outcome_as(&self, open: bool) -> &'static str {
        if self.finished || open {
            self.outcome()
        } else {
            "abandoned"
        }
    }

    /// Whether `other` is this attempt (the same phase, iteration, number and first event): a
    /// report may hold a copy of a trace's attempt.
    pub fn same_attempt(&self, other: &Attempt) -> bool {
        (self.start_seq, self.iteration, self.attempt, self.started)
            == (
                other.start_seq,
                other.iteration,
                other.attempt,
                other.started,
            )
            && self.name == other.name
    }

    /// The error text of a failed attempt: its `error`, else what its stop says.
    pub fn error_text(&self) -> Option<String> {
        if !self.failed() {
            return None;
        }
        self.error.clone().or_else(|| {
            let x = self.explicit();
            let mut parts = Vec::new();
            if let Some(r) = &x.stop_reason {
                parts.push(format!("stop reason {r}"));
            }
            if let Some(c) = x.exit_code {
                parts.push(format!("exit code {c}"));
            }
            Some(parts.join(", "))
        })
    }
}

/// A `phase_retry` (its JSON form, in postmortem reports, is `analysis::postmortem`'s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Retry {
    pub at: At,
    pub attempt: Option<u64>,
    pub next_attempt: Option<u64>,
    pub delay_ms: Option<u64>,
    pub exit_code: Option<i64>,
}

/// An error of the run (its JSON form, in postmortem reports, is `analysis::postmortem`'s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorRecord {
    /// `at.phase`: the phase or step name.
    pub at: At,
    /// The event it came from: `phase_error`, `phase_finished`, `failed` or `stopped`.
    pub source: String,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Escalation {
    #[serde(flatten)]
    pub at: At,
    pub question: Option<String>,
    pub pattern: Option<String>,
    pub feedback: Option<String>,
    /// Number of attempts summarised (`attempts_summary` as a list), when given.
    pub attempts: Option<u64>,
}

/// A `transition` (its JSON form, in postmortem reports, is `analysis::postmortem`'s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transition {
    pub at: At,
    /// The payload's `from`, else the event's step.
    pub from: Option<String>,
    /// `when`, `branch`, `on_failure`, `criteria`, `stagnation` or `none`.
    pub source: Option<String>,
    pub rule: Option<String>,
    pub condition: Option<String>,
    pub goto: Vec<String>,
    pub end_reason: Option<String>,
    pub end_warning: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Switch {
    pub at: At,
    pub from_phase: Option<String>,
    pub to_phase: Option<String>,
}

/// The event that ended the run, as written (`RunState.stop` has the canonical reason).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StopRecord {
    pub at: At,
    /// `stopped`, `failed` or `session_ended`.
    pub event: String,
    /// `reason` as written (aif-loop, may carry free text), else `exit_reason`, else `stop_reason`.
    pub reason: Option<String>,
    pub exit_reason: Option<String>,
    pub exit_label: Option<String>,
    /// The envelope `status`.
    pub status: Option<String>,
    pub detail: Option<String>,
    pub error: Option<String>,
    pub score: Option<f64>,
    pub iterations_completed: Option<u64>,
}
