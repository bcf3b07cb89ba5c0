//! `Trace`: one run's events folded into what postmortem and stagnation detection need —
//! evaluations, phase attempts, retries, errors, escalations, transitions, switches, the stop.
//!
//! Pure: no I/O, no clock. Works on the three dialects as `parse_line` gives them:
//! - native runner logs and Avenor logs (`avenor.phase.*` become `phase_started` /
//!   `phase_finished`) give explicit phase attempts;
//! - aif-loop logs have no phase events: each event's `step` is a step of the iteration, and a
//!   step lasts from the previous event of the run to its own (consecutive events of one step
//!   in one iteration and quality phase are one step; a `phase_error` ends the step as failed).
//!
//! `Trace::phases` gives the explicit attempts when the log has any, else the derived steps.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use memchr::memmem::Finder;
use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::decode::event::{Event, Kind};
use crate::decode::lines::{LineText, Piece, Splitter, decode};
use crate::decode::subset::Keys;
use crate::decode::timestamp::Ts;
use crate::fold::run_state::Tokens;
use crate::fold::text::same_text;

mod attempts;
mod names;
pub mod payload;
mod records;
pub use attempts::AttemptNumbers;
pub use names::Names;
use payload::{gap, i, s, u};
pub use records::{
    At, Attempt, ErrorRecord, Escalation, Evaluation, Explicit, Name, Retry, StopRecord, Switch,
    Transition,
};

/// One run's events, folded. Build with `Trace::default()` and `apply` each event of the run in
/// file order (or use `Traces` / `traces_from_bytes` for logs holding several runs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub run_id: Option<String>,
    /// Events applied (duplicates by `seq` are not applied, as in replay).
    pub events: u64,
    pub duplicates: u64,
    pub first_ts: Option<Ts>,
    /// The latest `ts` seen.
    pub last_ts: Option<Ts>,
    pub last_seq: Option<u64>,
    /// Highest iteration seen.
    pub iteration: u64,
    /// Current quality phase (starts at `A`; `phase_switched` moves it).
    pub phase: Name,
    /// Whether the run has quality phases: an event named one, or phased criteria in its
    /// `run_started` start it at A (as run.json's `phase`). Else `phase` is only the default,
    /// which a report shows as none.
    pub phased: bool,
    /// `phase`'s id in `names`.
    phase_id: u32,
    pub loop_started: bool,
    pub evaluations: Vec<Evaluation>,
    /// Explicit phase attempts (`phase_started` / `phase_finished`).
    pub attempts: Vec<Attempt>,
    /// Steps derived from events carrying a `step` (aif-loop's only timing).
    pub steps: Vec<Attempt>,
    pub retries: Vec<Retry>,
    pub errors: Vec<ErrorRecord>,
    pub escalations: Vec<Escalation>,
    pub transitions: Vec<Transition>,
    pub switches: Vec<Switch>,
    /// The stop, if the run has ended (cleared by `run_started` / `run_resumed`).
    pub stop: Option<StopRecord>,
    pub tokens: Tokens,
    /// The last score the log stated (evaluation or stop), as the reducer's `last_score`.
    pub last_score: f64,
    open_step: Option<usize>,
    prev_ts: Option<Ts>,
    /// Explicit attempts so far by (name, iteration).
    attempt_count: AttemptNumbers,
    /// Derived steps so far by (iteration, name id, quality phase id), once `step_number`
    /// needs it (always for `Trace::ends`).
    step_count: FxHashMap<(Option<u64>, u32, u32), u64>,
    /// What it keeps: everything, or less (`Trace::lean`, `Trace::ends`).
    mode: Mode,
    /// `Trace::ends`: the derived steps of the timeline's ends, and the sums of all of them.
    ends: Option<Box<StepEnds>>,
    /// `ends`: the last of `steps` has been added to it.
    last_retired: bool,
    /// `Trace::ends`: iterations kept at each end, and how often a step's iteration differed
    /// from the step's before (`ends` starts after `4 * edge`).
    edge: usize,
    iteration_changes: usize,
    /// Lean: per step name, whether its last kept step ended without an error.
    step_ok: Vec<(Name, bool)>,
    /// Every name this run uses, once.
    names: Names,
}

/// What a trace keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Mode {
    #[default]
    Full,
    Lean,
    Ends,
}

/// What `Trace::ends` keeps of a run's derived steps: every step of the `edge` lowest and
/// highest iterations (a text timeline's ends), and of the others only what a report sums.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepEnds {
    edge: usize,
    /// Steps by iteration, in log order, of the `edge` lowest iterations and the `edge`
    /// highest.
    pub kept: BTreeMap<Option<u64>, Vec<Attempt>>,
    /// Every step's iteration, in log order, without consecutive repeats.
    pub iterations: Vec<Option<u64>>,
    /// Per step name: total duration and the number of steps with a known duration.
    pub time: Vec<(Name, u64, u64)>,
    /// Every (step name, quality phase) seen, once each.
    pub names: Vec<(Name, Option<Name>)>,
}

impl StepEnds {
    /// Takes in a step that has ended.
    fn add(&mut self, a: &Attempt) {
        let k = a.iteration;
        if self.iterations.last() != Some(&k) {
            self.iterations.push(k);
        }
        if let Some(d) = a.duration_ms {
            match self.time.iter_mut().find(|t| Arc::ptr_eq(&t.0, &a.name)) {
                Some(t) => {
                    t.1 = t.1.saturating_add(d);
                    t.2 += 1;
                }
                None => self.time.push((a.name.clone(), d, 1)),
            }
        }
        let same_phase = |p: &Option<Name>| match (p, &a.phase) {
            (Some(p), Some(q)) => Arc::ptr_eq(p, q),
            (p, q) => p.is_none() && q.is_none(),
        };
        if !self
            .names
            .iter()
            .any(|(n, p)| Arc::ptr_eq(n, &a.name) && same_phase(p))
        {
            self.names.push((a.name.clone(), a.phase.clone()));
        }
        if let Some(steps) = self.kept.get_mut(&k) {
            steps.push(a.clone());
            return;
        }
        self.kept.insert(k, vec![a.clone()]);
        // Of `2 * edge + 1` iterations the middle one is neither among the lowest `edge` nor the
        // highest, and never will be, whatever comes next.
        if self.kept.len() > 2 * self.edge
            && let Some(m) = self.kept.keys().nth(self.edge).copied()
        {
            self.kept.remove(&m);
        }
    }

    /// The kept steps by iteration, lowest first.
    pub fn kept(&self) -> impl Iterator<Item = (&Option<u64>, &Vec<Attempt>)> {
        self.kept.iter()
    }
}

/// Rule ids as an evaluation keeps them.
fn owned(ids: &Option<Vec<std::borrow::Cow<'_, str>>>) -> Option<Vec<String>> {
    ids.as_ref()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// The payload keys a stop's record reads: only these are decoded (`Stopped`, `Failed`).
pub const STOP_KEYS: Keys<'static> = Keys {
    keys: &[
        "exit_reason",
        "stop_reason",
        "exit_label",
        "detail",
        "error",
        "final_score",
        "iterations_completed",
        "iterations_used",
        "iterations",
    ],
    nested: None,
};

/// Whether `ev` starts a run with phased criteria, which start in quality phase A (as
/// run.json's `phase`).
pub fn starts_phased(ev: &Event<'_>) -> bool {
    const CRITERIA: Keys<'static> = Keys {
        keys: &["criteria"],
        nested: None,
    };
    ev.kind == Kind::RunStarted
        && ev
            .payload_subset(CRITERIA)
            .get("criteria")
            .is_some_and(Value::is_object)
}

/// Whether `Trace::apply` reads the payload of an event of this kind (`lean`: only what the
/// stagnation detectors read).
fn needs_payload(ev: &Event<'_>, loop_started: bool, lean: bool) -> bool {
    match ev.kind {
        Kind::EvaluationDone => !lean && evaluation_reads_payload(ev.payload.as_deref()),
        Kind::PhaseRetry | Kind::Escalated | Kind::Transition => !lean,
        Kind::PhaseSwitched | Kind::PhaseStarted | Kind::PhaseFinished | Kind::PhaseError => true,
        Kind::SessionEnded => !loop_started,
        _ => false,
    }
}

/// Whether an evaluation's payload may hold a key `Trace::evaluation` reads beyond the parser's
/// facts (`*_count`, `rule_results`, `decision`, `source`); an escaped key could spell one
/// too. aif-loop's evaluations hold none: decoding them was a tenth of a postmortem.
///
/// The patterns' searchers are built once: a search per pattern is then a third cheaper than
/// `str::contains` (and a look at each quote was three times dearer).
fn evaluation_reads_payload(payload: Option<&str>) -> bool {
    static KEYS: LazyLock<[Finder<'static>; 4]> = LazyLock::new(|| {
        [
            b"_count\"".as_slice(),
            b"\"rule_results\"",
            b"\"decision\"",
            b"\"source\"",
        ]
        .map(Finder::new)
    });
    let Some(p) = payload.map(str::as_bytes) else {
        return false;
    };
    memchr::memchr(b'\\', p).is_some() || KEYS.iter().any(|k| k.find(p).is_some())
}

impl Trace {
    pub fn new() -> Trace {
        Trace::default()
    }

    /// A trace that folds only what `stagnation::assess` reads, for `stagnation` over long
    /// runs: `assess` gives it the verdict of a full trace, but it is no postmortem's input. It
    /// decodes no evaluation, retry, escalation or transition payload (evaluations keep what the
    /// parser's facts hold), numbers no derived step, and of consecutive derived steps of one
    /// name that end without an error keeps the first (the repeated-failure detector reads them
    /// as one).
    pub fn lean() -> Trace {
        Trace {
            mode: Mode::Lean,
            ..Trace::default()
        }
    }

    /// A trace for a timeline that shows only its ends (`Report::build_ends`): of derived steps
    /// it keeps those of the `edge` lowest and highest iterations and the sums of all of them
    /// (`StepEnds`), and in `steps`, as `lean` does, only what `stagnation::assess` reads. A
    /// run of 26k iterations then holds a few hundred steps, not 160k. Explicit attempts are
    /// all kept. A short run keeps every step as a full trace does (less bookkeeping) until
    /// its steps have changed iteration `4 * edge` times. Call `finish` after the last event
    /// (`Traces::into_runs` does).
    pub fn ends(edge: usize) -> Trace {
        Trace {
            mode: Mode::Ends,
            edge,
            ..Trace::default()
        }
    }

    /// `Trace::ends`, once the run is long: the steps so far go through `StepEnds` as if it
    /// had been there from the start.
    fn start_ends(&mut self) {
        self.ends = Some(Box::new(StepEnds {
            edge: self.edge,
            ..StepEnds::default()
        }));
        let open = self.open_step.is_some();
        for st in std::mem::take(&mut self.steps) {
            self.retire_last_step();
            self.steps.push(st);
        }
        self.open_step = open.then(|| self.steps.len() - 1);
    }

    /// `Trace::ends`: a new step begins, so the last one has ended: into `StepEnds`, and out
    /// of `steps` unless the detectors read it.
    fn retire_last_step(&mut self) {
        self.finish();
        self.drop_repeated_ok_step();
        self.last_retired = false;
    }

    /// The derived steps' ends and sums, for a long run's trace made by `Trace::ends` (complete
    /// once `finish`ed); `None` when every step is in `steps`.
    pub fn step_ends(&self) -> Option<&StepEnds> {
        self.ends.as_deref()
    }

    /// After the last event: the last derived step has ended too.
    pub fn finish(&mut self) {
        if let (Some(ends), Some(last)) = (self.ends.as_deref_mut(), self.steps.last())
            && !self.last_retired
        {
            ends.add(last);
            self.last_retired = true;
        }
    }

    /// The run's phase timeline: explicit attempts when the log has any, else derived steps.
    pub fn phases(&self) -> &[Attempt] {
        if self.attempts.is_empty() {
            &self.steps
        } else {
            &self.attempts
        }
    }

    /// Evaluations that carry a score.
    pub fn scored(&self) -> impl Iterator<Item = &Evaluation> {
        self.evaluations.iter().filter(|e| e.score.is_some())
    }

    pub fn is_running(&self) -> bool {
        self.stop.is_none()
    }

    /// Folds one event of this run.
    pub fn apply(&mut self, ev: &Event<'_>) {
        if let (Some(seq), Some(last)) = (ev.seq, self.last_seq) {
            // Replay does not apply an event that repeats the previous seq; neither does this.
            if seq == last {
                self.duplicates += 1;
                return;
            }
        }
        if let Some(seq) = ev.seq {
            self.last_seq = Some(self.last_seq.map_or(seq, |l| l.max(seq)));
        }
        self.events += 1;
        if self.run_id.is_none() {
            self.run_id = ev.run_id.as_deref().map(str::to_string);
        }
        if let Some(ts) = ev.ts {
            self.first_ts.get_or_insert(ts);
            self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
        }
        if let Some(it) = ev.iteration {
            self.iteration = self.iteration.max(it);
        }
        if self.phase.is_empty() {
            self.set_phase("A");
        }
        if let Some(p) = ev.phase.as_deref()
            && ev.kind != Kind::PhaseSwitched
            && !same_text(&self.phase, p)
        {
            self.set_phase(p);
        }
        self.phased = self.phased || ev.phase.is_some() || starts_phased(ev);
        let f = &ev.facts;
        // Saturating, as replay's totals.
        self.tokens.input = self.tokens.input.saturating_add(f.tokens_in.unwrap_or(0));
        self.tokens.output = self.tokens.output.saturating_add(f.tokens_out.unwrap_or(0));

        // Most events need nothing from their payload here (the facts have what they do):
        // decoding it is most of the cost of a trace.
        let p = if needs_payload(ev, self.loop_started, self.mode == Mode::Lean) {
            ev.payload_value()
        } else {
            Value::Null
        };
        let step = ev.step.as_deref();
        let errors_before = self.errors.len();
        match ev.kind {
            Kind::RunStarted | Kind::RunResumed => {
                self.loop_started |= ev.kind == Kind::RunStarted;
                self.stop = None;
            }
            Kind::EvaluationDone => self.evaluation(ev, &p),
            Kind::PhaseSwitched => {
                let to = s(&p, "to_phase");
                if let Some(t) = &to {
                    self.set_phase(t);
                    self.phased = true;
                }
                self.switches.push(Switch {
                    at: At::of(ev),
                    from_phase: s(&p, "from_phase"),
                    to_phase: to,
                });
            }
            Kind::PhaseStarted => self.phase_started(ev, &p),
            Kind::PhaseFinished => self.phase_finished(ev, &p),
            Kind::PhaseRetry | Kind::Escalated | Kind::Transition if self.mode == Mode::Lean => {}
            Kind::PhaseRetry => self.retries.push(Retry {
                at: At::of(ev),
                attempt: u(&p, "attempt"),
                next_attempt: u(&p, "next_attempt"),
                delay_ms: u(&p, "delay_ms").or_else(|| u(&p, "backoff_ms")),
                exit_code: i(&p, "exit_code"),
            }),
            Kind::PhaseError => {
                let text = ["error", "message", "reason"]
                    .iter()
                    .find_map(|k| s(&p, k))
                    .unwrap_or_else(|| ev.payload.as_deref().unwrap_or("").to_string());
                self.error(ev, "phase_error", text);
            }
            Kind::Escalated => self.escalations.push(Escalation {
                at: At::of(ev),
                question: s(&p, "question"),
                pattern: s(&p, "pattern"),
                feedback: s(&p, "feedback"),
                attempts: p
                    .get("attempts_summary")
                    .and_then(Value::as_array)
                    .map(|a| a.len() as u64),
            }),
            Kind::Transition => {
                let end = p.get("end");
                self.transitions.push(Transition {
                    at: At::of(ev),
                    from: s(&p, "from").or_else(|| step.map(str::to_string)),
                    source: s(&p, "source"),
                    rule: s(&p, "rule"),
                    condition: s(&p, "condition"),
                    goto: strings(p.get("goto")),
                    end_reason: end.and_then(|e| s(e, "reason")).or_else(|| match end {
                        Some(Value::String(t)) => Some(t.clone()),
                        _ => None,
                    }),
                    end_warning: end.and_then(|e| s(e, "warning")),
                });
            }
            Kind::Stopped | Kind::Failed => {
                let p = ev.payload_subset(STOP_KEYS);
                let rec = StopRecord {
                    at: At::of(ev),
                    event: ev.name.to_string(),
                    reason: f
                        .reason
                        .clone()
                        .or_else(|| s(&p, "exit_reason"))
                        .or_else(|| s(&p, "stop_reason")),
                    exit_reason: s(&p, "exit_reason"),
                    exit_label: s(&p, "exit_label"),
                    status: ev.status.as_deref().map(str::to_string),
                    detail: s(&p, "detail"),
                    error: s(&p, "error"),
                    score: f
                        .score
                        .or_else(|| p.get("final_score").and_then(Value::as_f64)),
                    iterations_completed: ["iterations_completed", "iterations_used", "iterations"]
                        .iter()
                        .find_map(|k| u(&p, k)),
                };
                if let Some(sc) = rec.score {
                    self.last_score = sc;
                }
                // A stop that restates the error it stops on (the runner's, after a failed
                // phase) is no second error. (aif-loop's `failed` makes a step of its own.)
                if let Some(e) = &rec.error
                    && (ev.kind == Kind::Failed
                        || self.errors.last().is_none_or(|last| last.text != *e))
                {
                    self.error(ev, ev.name.as_ref(), e.clone());
                }
                self.stop = Some(rec);
            }
            Kind::SessionEnded if !self.loop_started => {
                let reason = s(&p, "stop_reason").unwrap_or_else(|| "end_turn".into());
                self.stop = Some(StopRecord {
                    at: At::of(ev),
                    event: ev.name.to_string(),
                    reason: Some(reason),
                    status: ev.status.as_deref().map(str::to_string),
                    ..StopRecord::default()
                });
            }
            _ => {}
        }
        if !matches!(
            ev.kind,
            Kind::PhaseStarted | Kind::PhaseFinished | Kind::PhaseRetry
        ) && let Some(name) = step
        {
            let error = self.errors.get(errors_before).map(|e| e.text.clone());
            self.step(ev, name, error);
        }
        if ev.ts.is_some() {
            self.prev_ts = ev.ts;
        }
    }

    fn set_phase(&mut self, phase: &str) {
        (self.phase, self.phase_id) = self.names.intern(phase);
    }

    fn error(&mut self, ev: &Event<'_>, source: &str, text: String) {
        self.errors.push(ErrorRecord {
            at: At::of(ev),
            source: source.to_string(),
            text,
        });
    }

    fn evaluation(&mut self, ev: &Event<'_>, p: &Value) {
        let f = &ev.facts;
        let pass_count = u(p, "pass_count");
        let warn_count = u(p, "warn_count");
        let results = p.get("rule_results").and_then(Value::as_array);
        let active = u(p, "active_rule_count")
            .or_else(|| {
                (pass_count.is_some() || warn_count.is_some()).then(|| {
                    f.fail_count.unwrap_or(0) + warn_count.unwrap_or(0) + pass_count.unwrap_or(0)
                })
            })
            .or_else(|| results.map(|r| r.len() as u64));
        let passed_rules = u(p, "passed_rule_count").or(pass_count).or_else(|| {
            results.map(|r| {
                r.iter()
                    .filter(|x| x.get("passed").and_then(Value::as_bool) == Some(true))
                    .count() as u64
            })
        });
        let decision = p.get("decision");
        // The event's quality phase, else the run's: `apply` has made the run's the event's.
        let quality_phase = self.phase.clone();
        let e = Evaluation {
            at: At::of(ev),
            iteration: ev.iteration.unwrap_or(self.iteration),
            quality_phase,
            score: f.score,
            passed: f.passed,
            threshold: f.threshold,
            failed: owned(&f.failed),
            fail_count: f.fail_count,
            warnings: owned(&f.warnings),
            active_rules: active,
            passed_rules,
            previous_score: self.last_score,
            source: s(p, "source"),
            decision: decision.and_then(|d| s(d, "action")),
            feedback: decision.and_then(|d| s(d, "feedback")),
        };
        if let Some(sc) = f.score {
            self.last_score = sc;
        }
        self.evaluations.push(e);
    }

    fn phase_name(&mut self, ev: &Event<'_>, p: &Value) -> Name {
        let name = match ev.step.as_deref() {
            Some(n) => return self.names.intern(n).0,
            None => s(p, "phase").or_else(|| s(p, "name")),
        };
        self.names.intern(name.as_deref().unwrap_or("?")).0
    }

    fn phase_started(&mut self, ev: &Event<'_>, p: &Value) {
        let name = self.phase_name(ev, p);
        self.attempt_count.start(&mut self.attempts, name, ev, p);
    }

    fn phase_finished(&mut self, ev: &Event<'_>, p: &Value) {
        let name = self.phase_name(ev, p);
        let idx = self.attempt_count.finish(&mut self.attempts, name, ev, p);
        let a = &self.attempts[idx];
        if let Some(text) = a.error_text() {
            let rec = ErrorRecord {
                at: At {
                    phase: Some(a.name.to_string()),
                    ..At::of(ev)
                },
                source: "phase_finished".into(),
                text,
            };
            self.errors.push(rec);
        }
    }

    /// A derived step: consecutive events of one step (same iteration and quality phase) are one
    /// step; it lasts from the event before its first to its last.
    fn step(&mut self, ev: &Event<'_>, name: &str, error: Option<String>) {
        let iteration = Some(ev.iteration.unwrap_or(self.iteration));

        let delta = gap(self.prev_ts, ev.ts);
        // The run's `failed` right after an error of the same step ends that attempt: it is
        // no new one (aif-loop: "EVALUATE failed after one retry" is the second attempt's end).
        let failed_after_error = (ev.kind == Kind::Failed && self.open_step.is_none())
            .then(|| self.steps.len().checked_sub(1))
            .flatten()
            .filter(|&i| self.steps[i].error.is_some());
        let same = self
            .open_step
            .or(failed_after_error)
            .and_then(|i| self.steps.get_mut(i))
            .filter(|st| {
                same_text(&st.name, name)
                    && st.iteration == iteration
                    && st
                        .phase
                        .as_deref()
                        .is_some_and(|p| same_text(p, &self.phase))
            });
        let idx = match same {
            Some(st) => {
                st.ended = ev.ts.or(st.ended);
                st.end_seq = ev.seq.or(st.end_seq);
                st.duration_ms = match (st.duration_ms, delta) {
                    (Some(a), Some(b)) => Some(a.saturating_add(b)),
                    (a, b) => a.or(b),
                };
                self.open_step.or(failed_after_error).unwrap_or(0)
            }
            None if self.mode == Mode::Lean => {
                self.drop_repeated_ok_step();
                let name = self.names.intern(name).0;
                self.steps.push(Attempt {
                    phase: Some(self.phase.clone()),
                    derived: true,
                    start_seq: ev.seq,
                    end_seq: ev.seq,
                    finished: true,
                    ..Attempt::new(name, iteration)
                });
                self.steps.len() - 1
            }
            None => {
                if self.mode == Mode::Ends {
                    if self
                        .steps
                        .last()
                        .is_some_and(|st| st.iteration != iteration)
                    {
                        self.iteration_changes += 1;
                    }
                    if self.ends.is_some() {
                        self.retire_last_step();
                    } else if self.iteration_changes > 4 * self.edge {
                        self.start_ends();
                        self.retire_last_step();
                    }
                }
                let (name, id) = self.names.intern(name);
                let attempt = self.step_number(iteration, &name, id);
                self.steps.push(Attempt {
                    phase: Some(self.phase.clone()),
                    attempt,
                    derived: true,
                    start_seq: ev.seq,
                    end_seq: ev.seq,
                    started: self.prev_ts.or(ev.ts),
                    ended: ev.ts,
                    duration_ms: delta,
                    finished: true,
                    ..Attempt::new(name, iteration)
                });
                self.steps.len() - 1
            }
        };
        self.open_step = Some(idx);
        if matches!(ev.kind, Kind::PhaseError | Kind::Failed) {
            let text = error
                .or_else(|| ev.facts.reason.clone())
                .unwrap_or_else(|| ev.name.to_string());
            if let Some(st) = self.steps.get_mut(idx)
                && st.error.is_none()
            {
                st.error = Some(text);
            }
            // An error ends the step: the next event of the same step is a new attempt.
            self.open_step = None;
        }
    }

    /// The attempt number of a new derived step of `name` (id `id`) in `iteration` and the
    /// current quality phase: one more than the steps of the same three so far.
    ///
    /// A full trace keeps every step, and while their iterations never go down the steps of
    /// the newest iteration are the last ones: those are counted, no map kept. A trace whose
    /// iterations went down, or with a long iteration, counts them all once into
    /// `step_count` and uses it from then on (as `Trace::ends` does always).
    fn step_number(&mut self, iteration: Option<u64>, name: &Name, id: u32) -> u64 {
        /// Steps of one iteration counted by a scan at most.
        const SCAN: usize = 32;
        if self.mode == Mode::Full && self.step_count.is_empty() {
            let in_order = self.steps.last().is_none_or(|st| st.iteration <= iteration);
            let same = self
                .steps
                .iter()
                .rev()
                .take_while(|st| st.iteration == iteration)
                .take(SCAN + 1);
            let (mut seen, mut matching) = (0, 0);
            for st in same {
                seen += 1;
                let phase = st.phase.as_ref();
                if Arc::ptr_eq(&st.name, name) && phase.is_some_and(|p| Arc::ptr_eq(p, &self.phase))
                {
                    matching += 1;
                }
            }
            if in_order && seen <= SCAN {
                return matching + 1;
            }
            for i in 0..self.steps.len() {
                let st = &self.steps[i];
                let phase = st.phase.as_deref().unwrap_or_default();
                let key = (st.iteration, self.names.id(&st.name), self.names.id(phase));
                *self.step_count.entry(key).or_insert(0) += 1;
            }
        }
        let count = self
            .step_count
            .entry((iteration, id, self.phase_id))
            .or_insert(0);
        *count += 1;
        *count
    }

    /// Lean: the last derived step has ended (another begins). When it and the kept step of
    /// its name before it both ended without an error, it is dropped: a long run keeps a
    /// handful of steps, not one per event.
    fn drop_repeated_ok_step(&mut self) {
        let Some(last) = self.steps.last() else {
            return;
        };
        let ok = !last.failed();
        match self
            .step_ok
            .iter_mut()
            .find(|(n, _)| Arc::ptr_eq(n, &last.name))
        {
            Some((_, prev_ok)) if ok && *prev_ok => {
                self.steps.pop();
            }
            Some((_, prev_ok)) => *prev_ok = ok,
            None => self.step_ok.push((last.name.clone(), ok)),
        }
    }
}

/// Traces of every run in a log: events are routed by `run_id` (else `session_id`), and events
/// naming no run go to `default_run`, as in replay.
#[derive(Debug, Clone, Default)]
pub struct Traces {
    default_run: String,
    /// What every run's trace keeps.
    mode: Mode,
    /// `Mode::Ends`: iterations kept at each end.
    edge: usize,
    /// By run id; hashed while folding (a log can hold thousands of runs), sorted by
    /// `into_runs`.
    runs: FxHashMap<String, Trace>,
}

impl Traces {
    pub fn new(default_run: &str) -> Traces {
        Traces {
            default_run: default_run.to_string(),
            mode: Mode::Full,
            edge: 0,
            runs: FxHashMap::default(),
        }
    }

    /// Traces that are `Trace::lean`: what `stagnation` reads.
    pub fn lean(default_run: &str) -> Traces {
        Traces {
            mode: Mode::Lean,
            ..Traces::new(default_run)
        }
    }

    /// Traces that are `Trace::ends(edge)`: what a text or Markdown postmortem reads.
    pub fn ends(default_run: &str, edge: usize) -> Traces {
        Traces {
            mode: Mode::Ends,
            edge,
            ..Traces::new(default_run)
        }
    }

    /// An empty set of the same kind, for another shard of a fold.
    pub fn fork(&self) -> Traces {
        Traces {
            mode: self.mode,
            edge: self.edge,
            ..Traces::new(&self.default_run)
        }
    }

    pub fn apply(&mut self, ev: &Event<'_>) {
        let key = ev.run_id.as_deref().unwrap_or(&self.default_run);
        let t = match self.runs.get_mut(key) {
            Some(t) => t,
            None => self
                .runs
                .entry(key.to_string())
                .or_insert_with(|| match self.mode {
                    Mode::Full => Trace::default(),
                    Mode::Lean => Trace::lean(),
                    Mode::Ends => Trace::ends(self.edge),
                }),
        };
        if t.run_id.is_none() {
            t.run_id = Some(key.to_string());
        }
        t.apply(ev);
    }

    /// The run of events that name none.
    pub fn default_run(&self) -> &str {
        &self.default_run
    }

    /// Takes in the traces of other runs (another shard's).
    pub fn join(&mut self, other: Traces) {
        self.runs.extend(other.runs);
    }

    /// The runs' traces, each `finish`ed.
    pub fn into_runs(self) -> BTreeMap<String, Trace> {
        self.runs
            .into_iter()
            .map(|(id, mut t)| {
                t.finish();
                (id, t)
            })
            .collect()
    }
}

/// Every run's trace from an in-memory log (damaged lines are skipped: `replay_bytes` reports
/// them).
pub fn traces_from_bytes(default_run: &str, bytes: &[u8]) -> BTreeMap<String, Trace> {
    let mut t = Traces::new(default_run);
    let mut sp = Splitter::new(crate::decode::lines::DEFAULT_MAX_LINE);
    let mut take = |p: Piece<'_>| {
        if let Piece::Line(_, raw) | Piece::Unterminated(_, raw) = p
            && let LineText::Text(text) = decode(raw)
            && let Ok(ev) = crate::decode::parse_line(text)
        {
            t.apply(&ev);
        }
    };
    sp.push(bytes, &mut take);
    sp.finish(&mut take);
    t.into_runs()
}

#[cfg(test)]
mod tests;
