//! `RunState` (what `run.json` holds) and the reducer `apply(state, event) -> state`.
//! Pure: no clock, no I/O; the same events always give the same state.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decode::event::{Event, Kind};
use crate::decode::subset::Keys;
use crate::decode::timestamp::Ts;
use crate::fold::text::same_text;

/// aif-loop's stagnation rule: a score gain under this counts as no progress.
pub const STAGNATION_MIN_DELTA: f64 = 0.02;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    #[default]
    Running,
    Completed,
    Stopped,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Stopped => "stopped",
            Status::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Stop {
    pub passed: bool,
    /// Canonical reason (`threshold_reached`, `user_stop`, ...), empty while running.
    pub reason: String,
    /// Free text that followed the reason in the log, if any (`user_stop - <detail>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScorePoint {
    pub iteration: u64,
    pub phase: String,
    pub score: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
}

/// Where the state was last brought up to: the log position after the last applied line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LogMark {
    /// Byte offset just past the last line applied to this run.
    pub offset: u64,
    /// 1-based line number of that line.
    pub line: u64,
    /// Length of that line in bytes, without its newline.
    pub len: u64,
    /// `fingerprint` of that line, filled in when the state is written out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// The projection written to `run.json`: aif-loop's fields first, then loopctl's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunState {
    pub run_id: String,
    pub task_alias: String,
    pub status: Status,
    pub iteration: u64,
    pub max_iterations: Option<u64>,
    pub phase: String,
    pub current_step: Option<String>,
    pub task: Option<Value>,
    pub criteria: Option<Value>,
    /// aif-loop's `plan`, `prepared_checks` and `critique`: its agent writes them to run.json,
    /// no event carries them. Never set from the log: kept from the run.json a rebuild finds
    /// (`recover`), and written only when present.
    /// Boxed: absent from every state the log alone builds (the metrics keep one per run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Box<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared_checks: Option<Box<Value>>,
    pub evaluation: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critique: Option<Box<Value>>,
    pub stop: Stop,
    pub last_score: f64,
    pub stagnation_count: u64,
    pub created_at: Option<Ts>,
    pub updated_at: Option<Ts>,
    // loopctl's own fields.
    pub last_seq: Option<u64>,
    pub events: u64,
    pub score_history: Vec<ScorePoint>,
    pub iterations_completed: u64,
    pub exit_reason: Option<String>,
    pub exit_label: Option<String>,
    pub tokens: Tokens,
    pub retries: u64,
    pub phase_errors: u64,
    pub last_error: Option<String>,
    pub unknown_events: u64,
    /// True once a loop start (`run_started`, `avenor.loop.start`) was seen.
    pub loop_started: bool,
    pub log: LogMark,
}

impl RunState {
    pub fn new(run_id: &str) -> RunState {
        RunState {
            run_id: run_id.to_string(),
            task_alias: alias_of(run_id).to_string(),
            ..RunState::default()
        }
    }

    /// The latest score, if the run has one: an evaluation scored it, or its stop named a
    /// score. `last_score` itself is 0 until then (aif-loop's run.json has it so).
    pub fn score(&self) -> Option<f64> {
        (!self.score_history.is_empty() || self.last_score != 0.0).then_some(self.last_score)
    }

    /// The run's loop, one rule for the metrics' `loop` label and the analytics' `loop` column
    /// (docs/metrics.md): its alias when the run id names one (a stamped id, `task_alias`),
    /// else `log`, the name of the log it is in (its folder, or a log file's stem), so that a
    /// bare id (Avenor's, a session id) never names a loop.
    pub fn loop_label<'a>(&'a self, log: &'a str) -> &'a str {
        if self.task_alias != self.run_id || log.is_empty() {
            &self.task_alias
        } else {
            log
        }
    }

    /// The quality phase (`A`, `B`), if the run has one: an event named it, or the run's
    /// criteria have phases. Avenor and runner loops without criteria have none.
    pub fn quality_phase(&self) -> Option<&str> {
        (!self.phase.is_empty()).then_some(self.phase.as_str())
    }

    pub fn is_terminal(&self) -> bool {
        self.status != Status::Running
    }

    /// Ends the run: a completed run is one that passed.
    fn end(&mut self, status: Status, reason: String, detail: Option<String>) {
        self.status = status;
        self.stop = Stop {
            passed: status == Status::Completed,
            reason,
            detail,
        };
    }
}

/// aif-loop run ids are `<alias>-<yyyyMMdd-HHmmss>`, optionally followed by more; the alias is
/// what comes before the stamp. Anything else is its own alias.
pub fn alias_of(run_id: &str) -> &str {
    let b = run_id.as_bytes();
    let stamp = |i: usize| {
        b.len() >= i + 16
            && b[i] == b'-'
            && b[i + 1..i + 9].iter().all(u8::is_ascii_digit)
            && b[i + 9] == b'-'
            && b[i + 10..i + 16].iter().all(u8::is_ascii_digit)
            && (b.len() == i + 16 || b[i + 16] == b'-')
    };
    (1..b.len())
        .find(|&i| stamp(i))
        .map_or(run_id, |i| &run_id[..i])
}

/// Maps a reason as written to (canonical reason, status, detail).
pub fn classify_reason(raw: &str, event_status: Option<&str>) -> (String, Status, Option<String>) {
    let raw = raw.trim();
    let end = raw
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(raw.len());
    let (word, rest) = raw.split_at(end);
    let mut detail = rest
        .trim_start_matches([' ', '-', ':', '\u{2014}', '\u{2013}'])
        .trim();
    if let Some(inner) = detail.strip_prefix('(').and_then(|d| d.strip_suffix(')')) {
        detail = inner.trim();
    }
    let word = match word {
        "max_iterations" => "iteration_limit",
        "budget_exhausted" => "budget_exceeded",
        w => w,
    };
    let status = match word {
        "threshold_reached" | "no_major_issues" | "goal_met" | "passed" | "goto_end" => {
            Status::Completed
        }
        "user_stop" | "iteration_limit" | "stagnation" | "budget_exceeded" => Status::Stopped,
        "phase_error" => Status::Failed,
        _ => match event_status {
            Some("completed") => Status::Completed,
            Some("failed" | "error") => Status::Failed,
            _ => Status::Stopped,
        },
    };
    if word.is_empty() {
        return (raw.to_string(), status, None);
    }
    (
        word.to_string(),
        status,
        (!detail.is_empty()).then(|| detail.to_string()),
    )
}

/// Avenor / native `exit_reason` to (status, canonical reason).
pub fn classify_exit(exit_reason: &str, label: Option<&str>) -> (Status, String) {
    match exit_reason {
        "marker" => (Status::Completed, "marker".into()),
        "end_turn" => (Status::Completed, "end_turn".into()),
        "max_iterations" => (Status::Stopped, "iteration_limit".into()),
        "abort" => (
            Status::Stopped,
            label.filter(|l| !l.is_empty()).unwrap_or("abort").into(),
        ),
        "cancelled" => (Status::Stopped, "user_stop".into()),
        "phase_failure" => (Status::Failed, "phase_error".into()),
        "timeout" => (Status::Failed, "timeout".into()),
        other => (Status::Stopped, other.into()),
    }
}

fn str_of(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

fn u64_of(v: &Value, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_u64))
}

/// The payload keys `reduce` reads of a `run_started` and of a stop: only these are decoded.
const RUN_STARTED_KEYS: Keys<'static> = Keys {
    keys: &["task_alias", "max_iterations", "task", "goal", "criteria"],
    nested: Some(("config", &["max_iterations"])),
};
const STOP_KEYS: Keys<'static> = Keys {
    keys: &[
        "exit_reason",
        "exit_label",
        "detail",
        "final_score",
        "iterations_completed",
        "iterations_used",
        "iterations",
        "max_iterations",
        "error",
    ],
    nested: None,
};

/// The reducer, by value.
pub fn apply(mut state: RunState, ev: &Event<'_>) -> RunState {
    apply_mut(&mut state, ev);
    state
}

/// The reducer, in place (what replay uses).
pub fn apply_mut(s: &mut RunState, ev: &Event<'_>) {
    reduce(s, ev, true);
}

/// `apply_mut` for a fold that never reads `RunState::evaluation` (the metrics): an
/// `evaluation_done`'s payload is not decoded, and `evaluation` holds `Some(Null)` after one
/// where `apply_mut` holds the payload. Every other field is `apply_mut`'s. Decoding that
/// payload was most of the reducer's cost over aif-loop logs.
pub fn apply_mut_lean(s: &mut RunState, ev: &Event<'_>) {
    reduce(s, ev, false);
}

/// `apply_mut`; with `evaluation` false an `evaluation_done`'s payload is not decoded
/// (`RunState::evaluation` is left `Null`: the caller keeps the payload and decodes it later).
pub(crate) fn reduce(s: &mut RunState, ev: &Event<'_>, evaluation: bool) {
    s.events += 1;
    if ev.seq.is_some() {
        s.last_seq = ev.seq;
    }
    if let Some(ts) = ev.ts {
        s.created_at.get_or_insert(ts);
        s.updated_at = Some(ts);
    }
    if let Some(i) = ev.iteration {
        s.iteration = s.iteration.max(i);
    }
    if let Some(p) = ev.phase.as_deref()
        && ev.kind != Kind::PhaseSwitched
        && !same_text(&s.phase, p)
    {
        s.phase = p.to_string();
    }
    if let Some(step) = ev.step.as_deref() {
        match &mut s.current_step {
            Some(cur) if same_text(cur, step) => {}
            Some(cur) => {
                cur.clear();
                cur.push_str(step);
            }
            none => *none = Some(step.to_string()),
        }
    }
    let f = &ev.facts;
    // Saturating: a total past u64::MAX stays there instead of wrapping to a small number.
    s.tokens.input = s.tokens.input.saturating_add(f.tokens_in.unwrap_or(0));
    s.tokens.output = s.tokens.output.saturating_add(f.tokens_out.unwrap_or(0));

    match ev.kind {
        Kind::RunStarted => {
            let p = ev.payload_subset(RUN_STARTED_KEYS);
            s.loop_started = true;
            s.status = Status::Running;
            s.stop = Stop::default();
            s.exit_reason = None;
            s.exit_label = None;
            if let Some(a) = str_of(&p, "task_alias") {
                s.task_alias = a;
            }
            let config = p.get("config").unwrap_or(&Value::Null);
            if let Some(m) =
                u64_of(&p, &["max_iterations"]).or_else(|| u64_of(config, &["max_iterations"]))
            {
                s.max_iterations = Some(m);
            }
            s.task = match (p.get("task"), p.get("goal")) {
                (Some(Value::String(t)), _) | (None, Some(Value::String(t))) => {
                    Some(serde_json::json!({ "prompt": t }))
                }
                (Some(t @ Value::Object(_)), _) => Some(t.clone()),
                _ => s.task.take(),
            };
            if let Some(c) = p.get("criteria").filter(|c| c.is_object()) {
                s.criteria = Some(c.clone());
                // Phased criteria start in phase A.
                if s.phase.is_empty() {
                    s.phase = "A".into();
                }
            }
        }
        Kind::RunResumed => {
            s.status = Status::Running;
            s.stop = Stop::default();
            s.exit_reason = None;
            s.exit_label = None;
        }
        Kind::EvaluationDone => {
            if let Some(score) = f.score {
                let blockers = f.failed.as_ref().is_some_and(|v| !v.is_empty())
                    || f.fail_count.unwrap_or(0) > 0;
                let phase = ev.phase.as_deref().unwrap_or(&s.phase);
                // The first evaluation in a new quality phase re-scores the same artifact against
                // more rules: a baseline, not a lack of progress.
                let new_phase = s.score_history.last().is_some_and(|p| p.phase != phase);
                // Scores are decimals written as binary floats: 0.80 -> 0.82 must count as 0.02.
                if score - s.last_score >= STAGNATION_MIN_DELTA - 1e-9 {
                    s.stagnation_count = 0;
                } else if !blockers && !new_phase {
                    s.stagnation_count += 1;
                }
                s.last_score = score;
                s.score_history.push(ScorePoint {
                    iteration: ev.iteration.unwrap_or(s.iteration),
                    phase: ev.phase.as_deref().unwrap_or(&s.phase).to_string(),
                    score,
                    passed: f.passed,
                    seq: ev.seq,
                });
            }
            s.evaluation = Some(if evaluation {
                ev.payload_value()
            } else {
                Value::Null
            });
        }
        Kind::IterationAdvanced => {
            if let Some(n) = f.new_iteration {
                s.iteration = s.iteration.max(n);
                s.iterations_completed = s.iterations_completed.max(n.saturating_sub(1));
            }
        }
        // A phase of iteration n began: the iterations before it are over (the runner's and
        // Avenor's loops move on only when one ends), as `iteration_advanced` says for aif-loop.
        Kind::PhaseStarted => {
            if let Some(n) = ev.iteration {
                s.iterations_completed = s.iterations_completed.max(n.saturating_sub(1));
            }
        }
        Kind::PhaseSwitched => {
            if let Some(to) = str_of(&ev.payload_value(), "to_phase") {
                s.phase = to;
            }
        }
        Kind::PhaseRetry => s.retries += 1,
        Kind::PhaseError => {
            s.phase_errors += 1;
            s.last_error = Some(error_text(ev));
        }
        Kind::SessionEnded if !s.loop_started => {
            let p = ev.payload_value();
            let stop_reason = str_of(&p, "stop_reason").unwrap_or_else(|| "end_turn".into());
            let (status, reason) = match stop_reason.as_str() {
                "end_turn" => (Status::Completed, "end_turn".to_string()),
                "cancelled" => (Status::Stopped, "user_stop".to_string()),
                other => (Status::Failed, other.to_string()),
            };
            s.end(status, reason, None);
            s.exit_reason = Some(stop_reason);
        }
        Kind::Stopped => {
            let p = ev.payload_subset(STOP_KEYS);
            // A decided stop carries both: the precise `reason` wins, `exit_reason` is kept.
            if let Some(exit) = str_of(&p, "exit_reason").filter(|_| f.reason.is_none()) {
                let label = str_of(&p, "exit_label");
                let (status, reason) = classify_exit(&exit, label.as_deref());
                s.end(status, reason, str_of(&p, "detail"));
                s.exit_reason = Some(exit);
                s.exit_label = label;
            } else {
                let raw = f.reason.clone().unwrap_or_else(|| "user_stop".into());
                let (reason, status, detail) = classify_reason(&raw, ev.status.as_deref());
                s.end(status, reason, detail.or_else(|| str_of(&p, "detail")));
                s.exit_reason = str_of(&p, "exit_reason");
                s.exit_label = str_of(&p, "exit_label");
            }
            if let Some(score) = f
                .score
                .or_else(|| p.get("final_score").and_then(Value::as_f64))
            {
                s.last_score = score;
            }
            if let Some(n) = u64_of(
                &p,
                &["iterations_completed", "iterations_used", "iterations"],
            ) {
                s.iterations_completed = n;
            }
            if s.max_iterations.is_none() {
                s.max_iterations = u64_of(&p, &["max_iterations"]);
            }
            if s.status == Status::Failed {
                s.last_error = str_of(&p, "error").or(s.last_error.take());
            }
        }
        Kind::Failed => {
            let p = ev.payload_subset(STOP_KEYS);
            let raw = f.reason.clone().unwrap_or_else(|| "phase_error".into());
            let (reason, _, detail) = classify_reason(&raw, Some("failed"));
            s.end(Status::Failed, reason, detail);
            s.last_error = str_of(&p, "error").or(s.last_error.take());
        }
        Kind::Other => s.unknown_events += 1,
        _ => {}
    }
}

fn error_text(ev: &Event<'_>) -> String {
    let p = ev.payload_value();
    ["error", "message", "reason"]
        .iter()
        .find_map(|k| str_of(&p, k))
        .unwrap_or_else(|| ev.payload.as_deref().unwrap_or("").to_string())
}

/// FNV-1a 64 of a log line, hex: `run.json` records the fingerprint of the last line it
/// reflects so a later reader can tell whether the log under it is still the same.
pub fn fingerprint(line: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in line {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_of_iteration_n_completes_the_iterations_before_it() {
        let mut s = RunState::new("r");
        let mut completed = Vec::new();
        for line in [
            r#"{"v":1,"seq":1,"run_id":"r","event":"run_started"}"#,
            r#"{"v":1,"seq":2,"run_id":"r","event":"phase_started","iteration":0,"step":"build"}"#,
            r#"{"v":1,"seq":3,"run_id":"r","event":"phase_started","iteration":1,"step":"test"}"#,
            r#"{"v":1,"seq":4,"run_id":"r","event":"phase_started","iteration":3,"step":"test"}"#,
            r#"{"v":1,"seq":5,"run_id":"r","event":"phase_started","iteration":2,"step":"late"}"#,
            r#"{"v":1,"seq":6,"run_id":"r","event":"stopped","payload":{"exit_reason":"marker","iterations_completed":3}}"#,
        ] {
            apply_mut(&mut s, &crate::parse_line(line).unwrap());
            completed.push(s.iterations_completed);
        }
        // Never back (a phase out of order), and the stop's count is the last word.
        assert_eq!(completed, [0, 0, 0, 2, 2, 3]);
    }

    #[test]
    fn aliases_strip_the_aif_stamp() {
        assert_eq!(
            alias_of("courses-api-ddd-20260218-120000"),
            "courses-api-ddd"
        );
        assert_eq!(
            alias_of("billing-svc-20260218-120000-000042"),
            "billing-svc"
        );
        assert_eq!(alias_of("plain"), "plain");
        assert_eq!(alias_of("x-2026021-120000"), "x-2026021-120000");
    }

    #[test]
    fn reasons_map_to_aif_loop_statuses() {
        let c = |r: &str| classify_reason(r, None);
        assert_eq!(c("threshold_reached").1, Status::Completed);
        assert_eq!(c("no_major_issues").1, Status::Completed);
        for r in [
            "user_stop",
            "iteration_limit",
            "stagnation",
            "budget_exceeded",
        ] {
            assert_eq!(c(r).1, Status::Stopped, "{r}");
        }
        assert_eq!(c("phase_error").1, Status::Failed);
        assert_eq!(
            c("user_stop - stopped to start new test-integration loop"),
            (
                "user_stop".into(),
                Status::Stopped,
                Some("stopped to start new test-integration loop".into())
            )
        );
        assert_eq!(c("max_iterations").0, "iteration_limit");
        assert_eq!(c("user_stop (lunch)").2.as_deref(), Some("lunch"));
        assert_eq!(c("?? odd"), ("?? odd".into(), Status::Stopped, None));
        assert_eq!(
            classify_reason("odd", Some("completed")).1,
            Status::Completed
        );
    }

    /// Every event of the fixtures' logs (all three dialects) folded both ways, run by run:
    /// the lean reducer leaves every field as `apply_mut` does but `evaluation`.
    #[test]
    fn the_lean_reducer_differs_only_in_the_evaluation_payload() {
        let logs: &[&str] = &[
            include_str!("../../../../fixtures/aif-drift/history.jsonl"),
            include_str!("../../../../fixtures/aif-loop-clean/history.jsonl"),
            include_str!("../../../../fixtures/avenor-abort/history.jsonl"),
            include_str!("../../../../fixtures/avenor-loop/history.jsonl"),
            include_str!("../../../../fixtures/failed-run/history.jsonl"),
            include_str!("../../../../fixtures/healthy-native/history.jsonl"),
            include_str!("../../../../fixtures/merged-runs/history.jsonl"),
            include_str!("../../../../fixtures/stagnating-native/history.jsonl"),
            include_str!("../../../../fixtures/unknown-events/history.jsonl"),
        ];
        let mut evaluations = 0;
        for log in logs {
            let mut runs: std::collections::BTreeMap<String, (RunState, RunState)> =
                Default::default();
            for line in log.lines() {
                let Ok(ev) = crate::decode::parse_line(line) else {
                    continue;
                };
                let id = ev.run_id.as_deref().unwrap_or("-").to_string();
                let (full, lean) = runs
                    .entry(id.clone())
                    .or_insert_with(|| (RunState::new(&id), RunState::new(&id)));
                apply_mut(full, &ev);
                apply_mut_lean(lean, &ev);
                if ev.kind == Kind::EvaluationDone {
                    evaluations += 1;
                    assert_eq!(lean.evaluation, Some(Value::Null), "{line}");
                    assert_ne!(full.evaluation, lean.evaluation, "{line}");
                }
                let mut expected = full.clone();
                expected.evaluation = expected.evaluation.as_ref().map(|_| Value::Null);
                assert_eq!(*lean, expected, "{line}");
            }
        }
        assert!(evaluations > 10, "the fixtures hold evaluations");
    }

    #[test]
    fn exit_reasons_map_like_the_runner_issue_says() {
        assert_eq!(classify_exit("marker", None).0, Status::Completed);
        assert_eq!(classify_exit("end_turn", None).0, Status::Completed);
        assert_eq!(
            classify_exit("max_iterations", None),
            (Status::Stopped, "iteration_limit".into())
        );
        assert_eq!(
            classify_exit("abort", Some("needs a human")),
            (Status::Stopped, "needs a human".into())
        );
        assert_eq!(
            classify_exit("cancelled", None),
            (Status::Stopped, "user_stop".into())
        );
        assert_eq!(classify_exit("phase_failure", None).0, Status::Failed);
        assert_eq!(classify_exit("timeout", None).0, Status::Failed);
    }

    #[test]
    fn token_totals_saturate_instead_of_wrapping() {
        let log = |a: &str, b: &str| {
            format!(
                "{{\"v\":1,\"seq\":1,\"run_id\":\"t\",\"event\":\"usage\",\"payload\":{{\"input_tokens\":{a},\"output_tokens\":{a}}}}}\n\
                 {{\"v\":1,\"seq\":2,\"run_id\":\"t\",\"event\":\"usage\",\"payload\":{{\"input_tokens\":{b},\"output_tokens\":{b}}}}}\n"
            )
        };
        let max = u64::MAX.to_string();
        for (a, b) in [
            ("10000000000000000000", "9000000000000000000"),
            (&*max, &*max),
        ] {
            let text = log(a, b);
            let run = &crate::fold::replay::replay_bytes("t", text.as_bytes()).runs["t"];
            assert_eq!(
                (run.tokens.input, run.tokens.output),
                (u64::MAX, u64::MAX),
                "{a} + {b}"
            );
            let traces = crate::fold::trace::traces_from_bytes("t", text.as_bytes());
            let tokens = &traces["t"].tokens;
            assert_eq!(
                (tokens.input, tokens.output),
                (u64::MAX, u64::MAX),
                "{a} + {b}"
            );
        }
    }
}
