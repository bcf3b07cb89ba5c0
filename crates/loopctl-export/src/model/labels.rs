//! The label values the model files series under: closed sets, with anything else as `other`.

use loopctl_core::Event;
use loopctl_core::decode::agent_usage::AgentUsage;
use loopctl_core::fold::replay::FindingKind;
use loopctl_core::fold::run_state::RunState;
use loopctl_core::fold::trace::Attempt;
use serde_json::Value;

/// Canonical exit reasons exported as they are; anything else (free text, a marker's label)
/// is `other`.
const EXIT_REASONS: &[&str] = &[
    "threshold_reached",
    "no_major_issues",
    "goal_met",
    "passed",
    "goto_end",
    "user_stop",
    "iteration_limit",
    "stagnation",
    "budget_exceeded",
    "phase_error",
    "marker",
    "end_turn",
    "timeout",
    "abort",
    "escalated",
    "attempt_limit",
    "check_failed",
    "blocked",
];

/// A phase attempt's stop reasons exported as they are (the runner's, docs/runner.md).
const STOP_REASONS: &[&str] = &[
    "end_turn",
    "error",
    "signal",
    "cancelled",
    "timeout",
    "stalled",
];

/// The `exit_reason`s a run ends with under each status (docs/metrics.md's table), `other`
/// included: `loopctl_runs_finished_total` is exported at 0 for each of a known loop's pairs,
/// so that `increase()` (and the bundled alerts) see the first of them.
pub const FINISHED_REASONS: &[(&str, &[&str])] = &[
    (
        "completed",
        &[
            "threshold_reached",
            "no_major_issues",
            "goal_met",
            "passed",
            "goto_end",
            "marker",
            "end_turn",
            "other",
        ],
    ),
    (
        "stopped",
        &[
            "user_stop",
            "iteration_limit",
            "stagnation",
            "budget_exceeded",
            "escalated",
            "attempt_limit",
            "check_failed",
            "blocked",
            "abort",
            "other",
        ],
    ),
    ("failed", &["phase_error", "timeout", "other"]),
];

pub(super) fn exit_reason_label(s: &RunState) -> &'static str {
    if let Some(r) = EXIT_REASONS.iter().find(|r| **r == s.stop.reason) {
        return r;
    }
    if s.exit_reason.as_deref() == Some("abort") {
        return "abort";
    }
    "other"
}

pub(super) fn stop_reason_label(a: &Attempt) -> &'static str {
    match a.explicit().stop_reason.as_deref() {
        Some(r) => STOP_REASONS
            .iter()
            .find(|s| **s == r)
            .copied()
            .unwrap_or("other"),
        // aif-loop steps and runner attempts that name none: an error, else a normal end.
        None if a.failed() => "error",
        None => "end_turn",
    }
}

pub(super) fn kind_label(a: &Attempt) -> &'static str {
    match a.kind() {
        Some("pre") => "pre",
        Some("loop") => "loop",
        Some("post") => "post",
        _ if a.derived => "step",
        // An attempt whose log names no kind: the runner's default kind (a closed label set).
        _ => "loop",
    }
}

pub(super) fn event_label(ev: &Event<'_>) -> &'static str {
    ev.kind.name()
}

/// Cache tokens and cost from a payload, where a log carries them (no dialect does yet in the
/// corpus; Claude's usage objects and result events do).
pub(super) fn usage_extras(payload: &str) -> (u64, u64, Option<f64>) {
    // Read as every other reader reads a payload's usage (`AgentUsage::from_payload`).
    let Ok(v) = serde_json::from_str::<Value>(payload) else {
        return (0, 0, None);
    };
    let u = AgentUsage::from_payload(&v).unwrap_or_default();
    (
        u.cache_read_tokens.unwrap_or(0),
        u.cache_creation_tokens.unwrap_or(0),
        u.cost_usd,
    )
}

pub fn finding_label(kind: FindingKind) -> &'static str {
    match kind {
        FindingKind::BadLine => "bad_line",
        FindingKind::TornTail => "torn_tail",
        FindingKind::Oversize => "oversize",
        FindingKind::SeqGap => "seq_gap",
        FindingKind::SeqDuplicate => "seq_duplicate",
        FindingKind::SeqReorder => "seq_reorder",
    }
}

#[cfg(test)]
mod tests {
    use super::{EXIT_REASONS, FINISHED_REASONS};

    /// Every canonical exit reason is exported at 0 under the status it goes with, once.
    #[test]
    fn every_exit_reason_has_one_status() {
        for r in EXIT_REASONS {
            let under: Vec<&str> = FINISHED_REASONS
                .iter()
                .filter(|(_, rs)| rs.contains(r))
                .map(|(s, _)| *s)
                .collect();
            assert_eq!(under.len(), 1, "{r}: {under:?}");
        }
        let listed = FINISHED_REASONS
            .iter()
            .map(|(_, rs)| rs.len())
            .sum::<usize>();
        assert_eq!(
            listed,
            EXIT_REASONS.len() + FINISHED_REASONS.len(),
            "only `other` added"
        );
    }
}
