//! What happened to a run, in one report: why and when it stopped, the timeline, where the
//! time went, the score trajectory, how far it was from success, retries and errors, and the
//! stagnation verdict. Built from the replayed state, the run's `Trace` and a `Verdict`;
//! rendered as terminal text, Markdown or JSON.
//!
//! Pure and deterministic: no clock (every duration comes from the log), no I/O.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};

use crate::analysis::measures::score;
use crate::analysis::stagnation::Verdict;
use crate::analysis::usage::UsageReport;
use crate::decode::agent_usage::AgentUsage;
use crate::decode::timestamp::Ts;
use crate::fold::run_state::{RunState, Status, Tokens};
use crate::fold::trace::payload::gap;
use crate::fold::trace::{
    Attempt, ErrorRecord, Escalation, Evaluation, Name, Retry, Trace, Transition,
};

/// aif-loop's fallback thresholds when an evaluation states none.
pub const DEFAULT_THRESHOLD_A: f64 = 0.8;
pub const DEFAULT_THRESHOLD_B: f64 = 0.9;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub run_id: String,
    pub task_alias: String,
    pub stop: StopSummary,
    /// Written as run.json names them: `iteration`, `iterations_completed`, `max_iterations`.
    #[serde(flatten)]
    pub iterations: Iterations,
    pub timeline: Vec<IterationRow>,
    /// Iterations left out of `timeline` by `Report::build_ends` (its middle); 0 otherwise.
    #[serde(skip)]
    pub elided: usize,
    /// Chars of the longest phase name in the whole timeline, shown or not (column width).
    #[serde(skip)]
    pub name_width: Option<usize>,
    pub time_per_phase: Vec<PhaseTime>,
    pub scores: Scores,
    /// Present when the run ended without success and its last evaluation did not pass.
    pub distance_to_success: Option<Distance>,
    pub retries: Retries,
    pub errors: Errors,
    pub escalations: Vec<Escalation>,
    pub transitions: Vec<Transition>,
    pub stagnation: Verdict,
    /// Present when the log counted any token.
    pub tokens: Option<Tokens>,
    /// Present when any phase attempt recorded its agent's usage (`phase_finished` `usage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StopSummary {
    pub running: bool,
    /// `running`, `completed`, `stopped` or `failed`; the caller may make a running run
    /// `interrupted` (liveness::RunCondition) when it knows its runner is gone.
    pub status: String,
    pub passed: bool,
    /// Canonical stop reason; `""` while running, as in run.json (docs/json.md).
    pub reason: String,
    pub detail: Option<String>,
    pub exit_reason: Option<String>,
    pub exit_label: Option<String>,
    /// When the stopping event was written.
    pub at: Option<Ts>,
    /// The run's last error, when it failed.
    pub error: Option<String>,
    /// run.json's `created_at` and `updated_at`: the first and last event's time.
    #[serde(rename = "created_at")]
    pub started_at: Option<Ts>,
    #[serde(rename = "updated_at")]
    pub last_event_at: Option<Ts>,
    /// First to last event (file order); none when the last is stamped before the first.
    pub wall_ms: Option<u64>,
    pub events: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Iterations {
    #[serde(rename = "iteration")]
    pub reached: u64,
    #[serde(rename = "iterations_completed")]
    pub completed: u64,
    #[serde(rename = "max_iterations")]
    pub max: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterationRow {
    /// `None` for phases and evaluations that name no iteration.
    pub iteration: Option<u64>,
    /// Sum of the phases' durations.
    pub duration_ms: Option<u64>,
    pub phases: Vec<PhaseRow>,
    /// Scored evaluations, their failed rules sorted (`point`).
    pub evaluations: Vec<Evaluation>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseRow {
    /// Phase or step name; a derived aif-loop step outside quality phase A gets it appended,
    /// as in `EVALUATE (B)`.
    pub name: String,
    pub kind: Option<String>,
    pub attempt: u64,
    #[serde(rename = "started_at")]
    pub started: Option<Ts>,
    pub duration_ms: Option<u64>,
    /// `ok`, `failed` or `running`.
    pub outcome: String,
    /// The error of a failed attempt; else the marker and verdict, when any.
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<AgentUsage>,
}

/// Time per phase name, over the attempts whose duration is known.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseTime {
    pub name: String,
    pub total_ms: u64,
    pub count: u64,
    /// Share of the time of all phases, in percent, one decimal.
    pub share_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scores {
    /// Every scored evaluation, as in `IterationRow::evaluations`.
    pub points: Vec<Evaluation>,
    /// One of `▁▂▃▄▅▆▇█` per score (0..1 scale when every score is in it, else min..max).
    pub sparkline: String,
    pub first: Option<f64>,
    pub last: Option<f64>,
    pub best: Option<f64>,
}

/// aif-loop's distance-to-success block (its post-loop step).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Distance {
    /// The quality phase of the last evaluation; `None` for a run without phases.
    pub phase: Option<String>,
    pub threshold: f64,
    /// `evaluation` (stated by it) or `default` (A 0.8, B 0.9).
    pub threshold_source: String,
    pub score: f64,
    /// `max(threshold - score, 0)`.
    pub gap: f64,
    /// Failed fail-severity rules in the last evaluation.
    pub blocking: u64,
    pub blocking_rules: Vec<String>,
    pub rules_passed: Option<u64>,
    pub rules_total: Option<u64>,
    /// The run stopped at its iteration limit: aif-loop makes this block mandatory then.
    pub iteration_limit: bool,
    pub iteration: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retries {
    pub count: u64,
    pub items: Vec<Retry>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Errors {
    pub count: u64,
    pub items: Vec<ErrorRecord>,
    /// The last error of a phase (phase_error, failed attempt), or the run's last error.
    pub last_phase_error: Option<String>,
}

/// Iterations shown at each end of a longer timeline in text and Markdown (the middle is
/// elided, and said so) unless the whole is asked for (`Report::render_full`); JSON always
/// holds every iteration.
pub const TIMELINE_EDGE: usize = 20;

/// The rows a timeline shows: all of them, or when there are more than `2 * TIMELINE_EDGE`
/// and `full` is false, the first and last `TIMELINE_EDGE` and how many were left out. A
/// report built without its middle (`elided` > 0) can only show its ends.
pub(crate) fn timeline_parts(
    rows: &[IterationRow],
    elided: usize,
    full: bool,
) -> (&[IterationRow], usize, &[IterationRow]) {
    if elided > 0 {
        let head = rows.len().min(TIMELINE_EDGE);
        return (&rows[..head], elided, &rows[head..]);
    }
    if full || rows.len() <= 2 * TIMELINE_EDGE {
        return (rows, 0, &[]);
    }
    let tail = rows.len() - TIMELINE_EDGE;
    (&rows[..TIMELINE_EDGE], tail - TIMELINE_EDGE, &rows[tail..])
}

/// Chars of the name `phase_row` gives an attempt of `name` in quality phase `phase`, without
/// building it.
fn row_name_len(name: &str, phase: Option<&str>, derived: bool) -> usize {
    let n = name.chars().count();
    match phase {
        Some(p) if derived && p != "A" => n + p.chars().count() + 3,
        _ => n,
    }
}

/// Output format of `render`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

/// One bar per value.
pub fn sparkline(values: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let (mut lo, mut hi) = (0.0, 1.0);
    if finite.iter().any(|v| !(0.0..=1.0).contains(v)) {
        lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
        hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    }
    values
        .iter()
        .map(|v| {
            if !v.is_finite() {
                return ' ';
            }
            if hi - lo <= f64::EPSILON {
                return BARS[3];
            }
            let i = ((v - lo) / (hi - lo) * 7.0).round().clamp(0.0, 7.0) as usize;
            BARS[i]
        })
        .collect()
}

/// A scored evaluation as the report shows it: its failed rules sorted, once each.
/// An evaluation as the report shows it; `phased`: whether the run has quality phases (else
/// the trace's default `A` is no phase of the run's, and none is shown).
fn point(e: &Evaluation, phased: bool) -> Evaluation {
    let mut p = e.clone();
    if !phased {
        p.quality_phase = Name::from("");
    }
    if let Some(failed) = &mut p.failed {
        failed.sort();
        failed.dedup();
    }
    p
}

fn phase_row(a: &Attempt, open: bool) -> PhaseRow {
    let mut notes = Vec::new();
    if let Some(e) = a.error_text() {
        notes.push(e);
    }
    let x = a.explicit();
    if let Some(m) = &x.marker {
        notes.push(format!("marker {m}"));
    }
    if let Some(v) = &x.verdict {
        notes.push(format!("verdict {v}"));
    }
    PhaseRow {
        name: match a.phase.as_deref() {
            Some(p) if a.derived && p != "A" => format!("{} ({p})", a.name),
            _ => a.name.to_string(),
        },
        kind: x.kind.clone(),
        attempt: a.attempt,
        started: a.started,
        duration_ms: a.duration_ms,
        outcome: a.outcome_as(open).to_string(),
        detail: (!notes.is_empty()).then(|| notes.join("; ")),
        usage: x.usage.clone(),
    }
}

impl Report {
    /// The report of one run: `state` is its replayed `RunState`, `trace` its events folded,
    /// `verdict` what `stagnation::assess` says about it.
    pub fn build(state: &RunState, trace: &Trace, verdict: &Verdict) -> Report {
        Self::assemble(state, trace, verdict, true)
    }

    /// `build` without the rows of the timeline's middle, which text and Markdown elide
    /// unless `--full-timeline`: a run of 26k iterations builds 40 rows, not 26k.
    pub fn build_ends(state: &RunState, trace: &Trace, verdict: &Verdict) -> Report {
        Self::assemble(state, trace, verdict, false)
    }

    fn assemble(state: &RunState, trace: &Trace, verdict: &Verdict, whole: bool) -> Report {
        let running = state.status == Status::Running;
        let stop_rec = trace.stop.as_ref().filter(|_| !running);
        let stop = StopSummary {
            running,
            status: state.status.as_str().to_string(),
            passed: state.stop.passed,
            reason: if running {
                String::new()
            } else {
                state.stop.reason.clone()
            },
            detail: state.stop.detail.clone().filter(|_| !running),
            exit_reason: state.exit_reason.clone(),
            exit_label: state.exit_label.clone(),
            at: stop_rec.and_then(|s| s.at.ts),
            error: state
                .last_error
                .clone()
                .filter(|_| state.status == Status::Failed),
            // run.json's: first and last event in file order (the trace's `last_ts` is the
            // latest stamp, another thing when the clock went backwards).
            started_at: state.created_at.or(trace.first_ts),
            last_event_at: state.updated_at.or(trace.last_ts),
            // None, not 0, when the clock went backwards.
            wall_ms: gap(
                state.created_at.or(trace.first_ts),
                state.updated_at.or(trace.last_ts),
            ),
            events: state.events,
        };

        let mut rows: BTreeMap<Option<u64>, IterationRow> = BTreeMap::new();
        let new_row = |it: Option<u64>| IterationRow {
            iteration: it,
            duration_ms: None,
            phases: Vec::new(),
            evaluations: Vec::new(),
        };
        // A trace that kept only the ends of its derived steps (`Trace::ends`) gives those and
        // the sums of all; else every phase is at hand.
        let ends = trace.step_ends().filter(|_| trace.attempts.is_empty());
        debug_assert!(
            ends.is_none() || !whole,
            "a whole timeline needs a full trace"
        );
        // The rows shown when the middle is left out: keys up to `head_last`, from `tail_first`.
        let mut keys: Vec<Option<u64>> = match ends {
            Some(e) => e.iterations.clone(),
            None => trace.phases().iter().map(|a| a.iteration).collect(),
        };
        keys.extend(trace.scored().map(|e| Some(e.iteration)));
        keys.dedup(); // runs of one iteration first: far fewer to sort
        keys.sort_unstable();
        keys.dedup();
        let (elided, head_last, tail_first) = if whole || keys.len() <= 2 * TIMELINE_EDGE {
            (0, None, None)
        } else {
            (
                keys.len() - 2 * TIMELINE_EDGE,
                Some(keys[TIMELINE_EDGE - 1]),
                Some(keys[keys.len() - TIMELINE_EDGE]),
            )
        };
        drop(keys);
        let shown = |it: Option<u64>| match (head_last, tail_first) {
            (Some(h), Some(t)) => it <= h || it >= t,
            _ => true,
        };
        let name_width = match ends {
            Some(e) => e
                .names
                .iter()
                .map(|(n, p)| row_name_len(n, p.as_deref(), true))
                .max(),
            None => trace
                .phases()
                .iter()
                .map(|a| row_name_len(&a.name, a.phase.as_deref(), a.derived))
                .max(),
        };
        let last = trace.phases().last();
        let mut add_row = |a: &Attempt| {
            if !shown(a.iteration) {
                return;
            }
            let open = running && last.is_some_and(|l| l.same_attempt(a));
            let r = rows
                .entry(a.iteration)
                .or_insert_with(|| new_row(a.iteration));
            if let Some(d) = a.duration_ms {
                r.duration_ms = Some(r.duration_ms.unwrap_or(0).saturating_add(d));
            }
            r.phases.push(phase_row(a, open));
        };
        match ends {
            Some(e) => e.kept().flat_map(|(_, steps)| steps).for_each(&mut add_row),
            None => trace.phases().iter().for_each(&mut add_row),
        }
        for e in trace.scored() {
            let it = Some(e.iteration);
            if !shown(it) {
                continue;
            }
            rows.entry(it)
                .or_insert_with(|| new_row(it))
                .evaluations
                .push(point(e, trace.phased));
        }

        let mut times: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        match ends {
            Some(e) => times.extend(
                e.time
                    .iter()
                    .map(|(n, total, count)| (&**n, (*total, *count))),
            ),
            None => {
                for a in trace.phases() {
                    if let Some(d) = a.duration_ms {
                        let t = times.entry(&a.name).or_default();
                        t.0 = t.0.saturating_add(d);
                        t.1 += 1;
                    }
                }
            }
        }
        let all: u64 = times.values().map(|t| t.0).fold(0, u64::saturating_add);
        let mut time_per_phase: Vec<PhaseTime> = times
            .into_iter()
            .map(|(name, (total, count))| PhaseTime {
                name: name.to_string(),
                total_ms: total,
                count,
                share_pct: if all == 0 {
                    0.0
                } else {
                    (total as f64 * 1000.0 / all as f64).round() / 10.0
                },
            })
            .collect();
        time_per_phase.sort_by(|a, b| b.total_ms.cmp(&a.total_ms).then(a.name.cmp(&b.name)));

        let points: Vec<Evaluation> = trace.scored().map(|e| point(e, trace.phased)).collect();
        let values: Vec<f64> = points.iter().map(|p| p.score.unwrap_or(0.0)).collect();
        let scores = Scores {
            sparkline: sparkline(&values),
            first: values.first().copied(),
            last: values.last().copied(),
            best: values.iter().copied().reduce(f64::max),
            points,
        };

        let distance = distance(state, trace);

        let retries = Retries {
            count: state.retries.max(trace.retries.len() as u64),
            items: trace.retries.clone(),
        };
        let items = trace.errors.clone();
        let last_phase_error = trace
            .errors
            .iter()
            .rev()
            .find(|e| e.source == "phase_error" || e.source == "phase_finished")
            .map(|e| e.text.clone())
            .or_else(|| state.last_error.clone());
        let errors = Errors {
            count: items.len() as u64,
            items,
            last_phase_error,
        };
        let tokens = (state.tokens.input > 0 || state.tokens.output > 0).then_some(state.tokens);
        Report {
            run_id: state.run_id.clone(),
            task_alias: state.task_alias.clone(),
            stop,
            iterations: Iterations {
                reached: state.iteration,
                completed: state.iterations_completed,
                max: state.max_iterations,
            },
            timeline: rows.into_values().collect(),
            elided,
            name_width,
            time_per_phase,
            scores,
            distance_to_success: distance,
            retries,
            errors,
            escalations: trace.escalations.clone(),
            transitions: trace.transitions.clone(),
            stagnation: verdict.clone(),
            tokens,
            usage: UsageReport::of(trace),
        }
    }
}

fn distance(state: &RunState, trace: &Trace) -> Option<Distance> {
    if state.status == Status::Running || state.status == Status::Completed {
        return None;
    }
    let e = trace.scored().last()?;
    let sc = e.score?;
    let (threshold, source) = match e.threshold {
        Some(t) => (t, "evaluation"),
        None if &*e.quality_phase == "B" => (DEFAULT_THRESHOLD_B, "default"),
        None => (DEFAULT_THRESHOLD_A, "default"),
    };
    if e.passed.unwrap_or(sc >= threshold) {
        return None;
    }
    let mut rules = e.failed.clone().unwrap_or_default();
    rules.sort();
    rules.dedup();
    Some(Distance {
        phase: (trace.phased && !e.quality_phase.is_empty()).then(|| e.quality_phase.to_string()),
        threshold,
        threshold_source: source.into(),
        score: sc,
        gap: ((threshold - sc).max(0.0) * 1e6).round() / 1e6,
        blocking: e.blocking(),
        blocking_rules: rules,
        rules_passed: e.passed_rules,
        rules_total: e.active_rules,
        iteration_limit: state.stop.reason == "iteration_limit",
        iteration: e.iteration,
    })
}

/// The evidence of a finding on one line.
pub fn evidence(f: &crate::analysis::stagnation::Finding) -> String {
    let mut parts = Vec::new();
    if !f.iterations.is_empty() {
        parts.push(format!(
            "iterations {}",
            f.iterations
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !f.scores.is_empty() {
        parts.push(format!(
            "scores {}",
            f.scores
                .iter()
                .map(|s| score(*s))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !f.rule_ids.is_empty() {
        parts.push(format!("rules {}", f.rule_ids.join(", ")));
    }
    if !f.seqs.is_empty() {
        parts.push(format!(
            "seqs {}",
            f.seqs
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    parts.join("; ")
}

// The trace's records as the report's JSON writes them (docs/json.md): each with the fields
// and in the order its rows always had, whatever the trace keeps.

impl Serialize for Evaluation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("ScorePoint", 6)?;
        o.serialize_field("iteration", &self.iteration)?;
        // `null` for a run without phases (docs/json.md: nothing is shown as nothing).
        let phase = (!self.quality_phase.is_empty()).then_some(&*self.quality_phase);
        o.serialize_field("phase", &phase)?;
        o.serialize_field("score", &self.score.unwrap_or(0.0))?;
        o.serialize_field("passed", &self.passed)?;
        o.serialize_field("seq", &self.at.seq)?;
        o.serialize_field("failed", self.failed_rules())?;
        o.end()
    }
}

impl Serialize for Retry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Retry", 7)?;
        o.serialize_field("phase", &self.at.phase)?;
        o.serialize_field("iteration", &self.at.iteration)?;
        o.serialize_field("attempt", &self.attempt)?;
        o.serialize_field("next_attempt", &self.next_attempt)?;
        o.serialize_field("delay_ms", &self.delay_ms)?;
        o.serialize_field("exit_code", &self.exit_code)?;
        o.serialize_field("ts", &self.at.ts)?;
        o.end()
    }
}

impl Serialize for ErrorRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Error", 6)?;
        o.serialize_field("phase", &self.at.phase)?;
        o.serialize_field("iteration", &self.at.iteration)?;
        o.serialize_field("source", &self.source)?;
        o.serialize_field("text", &self.text)?;
        o.serialize_field("ts", &self.at.ts)?;
        o.serialize_field("seq", &self.at.seq)?;
        o.end()
    }
}

impl Serialize for Transition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Transition", 10)?;
        o.serialize_field("seq", &self.at.seq)?;
        o.serialize_field("ts", &self.at.ts)?;
        o.serialize_field("iteration", &self.at.iteration)?;
        o.serialize_field("from", &self.from)?;
        o.serialize_field("source", &self.source)?;
        o.serialize_field("rule", &self.rule)?;
        o.serialize_field("condition", &self.condition)?;
        o.serialize_field("goto", &self.goto)?;
        o.serialize_field("end_reason", &self.end_reason)?;
        o.serialize_field("end_warning", &self.end_warning)?;
        o.end()
    }
}

#[cfg(test)]
mod tests;
