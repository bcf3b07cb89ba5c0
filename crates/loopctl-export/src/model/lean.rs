//! The start-up fold's lean path for runs without explicit phase attempts (aif-loop's logs):
//! what `Trace::apply` and `observe_live` do for such a run, without keeping the trace. Each
//! derived step is observed as it ends, evaluations and stops are read from the parser's facts,
//! and the stagnation `Watch` reads a trace that holds only what it looks at: every evaluation,
//! and the steps from the first one that failed (the steps before it cannot start a failure
//! streak, and a step that ended well changes none). The last step is kept compact (`Step`).
//!
//! Used only by a log folded alone at start-up, whole or in shards by run
//! (`MetricState::observe_lean`), only for aif-loop's runs (`starts`), and only for runs that
//! end in the log: a run still running at its end, or an event this path does not fold
//! (explicit phases, retries, escalations, transitions, session ends), makes the log's fold
//! `needs_full`, and the log is folded again the full way. Tests hold the two paths to the same
//! series (`tests/tests/export_lean.rs`, `crates/loopctl-export/tests/parallel.rs`).

use std::collections::BTreeSet;
use std::sync::Arc;

use loopctl_core::analysis::stagnation::{Detector, watch::Watch};
use loopctl_core::fold::text::same_text;
use loopctl_core::fold::trace::payload::{gap, s, u};
use loopctl_core::fold::trace::{Attempt, Evaluation, Name, Names, STOP_KEYS, Trace};
use loopctl_core::{Dialect, Event, Kind, Ts};

use super::{MetricState, RunMetrics};

/// A running run folded the lean way.
#[derive(Debug, Clone, Default)]
pub(super) struct Lean {
    last_seq: Option<u64>,
    iteration: u64,
    /// The quality phase (in `names`): `A` until an event names one (an empty one is `A` again
    /// at the next event, as in `Trace`).
    phase: u32,
    prev_ts: Option<Ts>,
    last_score: f64,
    /// The text of the last error recorded (a stop restating it records no second one).
    last_error: Option<String>,
    /// The stop's stated iteration count, once the run stopped (`None` inside: none stated).
    stop: Option<Option<u64>>,
    /// Step and phase names, each once: steps refer to them by number (no reference count to
    /// change as a step is made, observed and dropped, several times per event).
    names: Names,
    /// The last step.
    cur: Option<Step>,
    /// The last step is open (the next event of its step extends it).
    open: bool,
    /// The last step has been observed (the run ended).
    last_observed: bool,
    /// Some step failed: from then on every step is kept in `seen.steps`, the last one as
    /// `cur` is.
    failed_once: bool,
    /// What `Watch` reads: evaluations, and steps from the first that failed (before it, the
    /// steps tell `Watch` nothing: see the module's comment).
    seen: Trace,
    watch: Option<Watch>,
    pub(super) detectors: BTreeSet<Detector>,
    /// As `Live::admitted`.
    pub(super) admitted: Vec<Name>,
}

/// A derived step, as `Trace` keeps it (`Attempt`), without what derived steps never have;
/// its name and phase by number (`Lean::names`).
#[derive(Debug, Clone)]
struct Step {
    name: u32,
    iteration: Option<u64>,
    phase: u32,
    duration_ms: Option<u64>,
    error: Option<String>,
}

impl Step {
    /// `attempt_obs` of the step's `Attempt`, its name by number.
    fn obs(&self) -> Obs {
        let stop = if self.error.is_some() {
            "error"
        } else {
            "end_turn"
        };
        let ms = self.duration_ms.and_then(|d| i64::try_from(d).ok());
        (self.name, "step", ms, stop)
    }
}

/// The name numbered `i` (numbers come from `Lean::intern`; the empty name for any other).
fn name_of(names: &Names, i: u32) -> &Name {
    static EMPTY: std::sync::LazyLock<Name> = std::sync::LazyLock::new(|| Arc::from(""));
    names.name(i).unwrap_or(&EMPTY)
}

/// A step's observation (`PhaseObs`, its name by number).
type Obs = (u32, &'static str, Option<i64>, &'static str);

/// Whether a run whose trace starts at `ev` is folded the lean way: aif-loop's runs, whose
/// steps are derived. Native and Avenor runs write explicit phases, which the lean way does not
/// fold: started the full way, their log is not read twice.
pub(super) fn starts(ev: &Event<'_>) -> bool {
    ev.dialect == Dialect::AifLoop && folds(ev.kind)
}

/// Whether the lean path folds events of this kind.
pub(super) fn folds(kind: Kind) -> bool {
    !matches!(
        kind,
        Kind::PhaseStarted
            | Kind::PhaseFinished
            | Kind::PhaseRetry
            | Kind::Escalated
            | Kind::Transition
            | Kind::SessionEnded
    )
}

impl Lean {
    pub(super) fn new() -> Box<Lean> {
        Box::default()
    }

    /// The iterations the run's stop stated, if it stopped and stated them.
    pub(super) fn stated(&self) -> Option<u64> {
        self.stop.flatten()
    }

    fn intern(&mut self, name: &str) -> u32 {
        self.names.id(name)
    }

    fn name(&self, i: u32) -> &Name {
        name_of(&self.names, i)
    }

    fn attempt(&self, st: &Step) -> Attempt {
        Attempt {
            phase: Some(self.name(st.phase).clone()),
            derived: true,
            duration_ms: st.duration_ms,
            finished: true,
            error: st.error.clone(),
            ..Attempt::new(self.name(st.name).clone(), st.iteration)
        }
    }

    /// Folds one event as `Trace::apply` does; the step that ended (a new one began) is handed
    /// to `over` to be observed. `ev.kind` must be one `folds` takes.
    fn apply(&mut self, ev: &Event<'_>, over: &mut impl FnMut(&Step)) {
        if let (Some(seq), Some(last)) = (ev.seq, self.last_seq)
            && seq == last
        {
            return;
        }
        if let Some(seq) = ev.seq {
            self.last_seq = Some(self.last_seq.map_or(seq, |l| l.max(seq)));
        }
        if let Some(it) = ev.iteration {
            self.iteration = self.iteration.max(it);
        }
        if self.name(self.phase).is_empty() {
            self.phase = self.intern("A");
        }
        if let Some(p) = ev.phase.as_deref()
            && ev.kind != Kind::PhaseSwitched
            && !same_text(self.name(self.phase), p)
        {
            self.phase = self.intern(p);
        }
        let f = &ev.facts;
        let mut error = None;
        match ev.kind {
            Kind::RunStarted | Kind::RunResumed => self.stop = None,
            Kind::EvaluationDone => {
                let e = Evaluation {
                    at: Default::default(),
                    iteration: ev.iteration.unwrap_or(self.iteration),
                    quality_phase: self.name(self.phase).clone(),
                    score: f.score,
                    passed: f.passed,
                    threshold: f.threshold,
                    failed: f
                        .failed
                        .as_ref()
                        .map(|v| v.iter().map(|s| s.to_string()).collect()),
                    fail_count: f.fail_count,
                    warnings: None,
                    active_rules: None,
                    passed_rules: None,
                    previous_score: self.last_score,
                    source: None,
                    decision: None,
                    feedback: None,
                };
                if let Some(sc) = f.score {
                    self.last_score = sc;
                }
                self.seen.evaluations.push(e);
            }
            Kind::PhaseSwitched => {
                if let Some(t) = s(&ev.payload_value(), "to_phase") {
                    self.phase = self.intern(&t);
                }
            }
            Kind::PhaseError => {
                let p = ev.payload_value();
                let text = ["error", "message", "reason"]
                    .iter()
                    .find_map(|k| s(&p, k))
                    .unwrap_or_else(|| ev.payload.as_deref().unwrap_or("").to_string());
                self.last_error = Some(text.clone());
                error = Some(text);
            }
            Kind::Stopped | Kind::Failed => {
                let p = ev.payload_subset(STOP_KEYS);
                let score = f
                    .score
                    .or_else(|| p.get("final_score").and_then(serde_json::Value::as_f64));
                if let Some(sc) = score {
                    self.last_score = sc;
                }
                if let Some(e) = s(&p, "error")
                    && (ev.kind == Kind::Failed || self.last_error.as_ref() != Some(&e))
                {
                    self.last_error = Some(e.clone());
                    error = Some(e);
                }
                let stated = ["iterations_completed", "iterations_used", "iterations"]
                    .iter()
                    .find_map(|k| u(&p, k));
                self.stop = Some(stated);
            }
            _ => {}
        }
        if let Some(name) = ev.step.as_deref() {
            self.step(ev, name, error, over);
        }
        if ev.ts.is_some() {
            self.prev_ts = ev.ts;
        }
    }

    /// `Trace::step`, keeping only the last step (and every step once one failed).
    fn step(
        &mut self,
        ev: &Event<'_>,
        name: &str,
        error: Option<String>,
        over: &mut impl FnMut(&Step),
    ) {
        let iteration = Some(ev.iteration.unwrap_or(self.iteration));
        let delta = gap(self.prev_ts, ev.ts);
        let failed_after_error = ev.kind == Kind::Failed
            && !self.open
            && self.cur.as_ref().is_some_and(|st| st.error.is_some());
        let extends = (self.open || failed_after_error)
            && self.cur.as_ref().is_some_and(|st| {
                same_text(self.name(st.name), name)
                    && st.iteration == iteration
                    && st.phase == self.phase
            });
        if extends {
            if let Some(st) = self.cur.as_mut() {
                st.duration_ms = match (st.duration_ms, delta) {
                    (Some(a), Some(b)) => Some(a.saturating_add(b)),
                    (a, b) => a.or(b),
                };
                if self.failed_once
                    && let Some(last) = self.seen.steps.last_mut()
                {
                    last.duration_ms = st.duration_ms;
                }
            }
        } else {
            if let Some(prev) = &self.cur {
                over(prev);
            }
            let step = Step {
                name: self.intern(name),
                iteration,
                phase: self.phase,
                duration_ms: delta,
                error: None,
            };
            if self.failed_once {
                let a = self.attempt(&step);
                self.seen.steps.push(a);
            }
            self.cur = Some(step);
        }
        self.open = true;
        if matches!(ev.kind, Kind::PhaseError | Kind::Failed) {
            let text = error
                .or_else(|| ev.facts.reason.clone())
                .unwrap_or_else(|| ev.name.to_string());
            let mut first_failure = false;
            if let Some(st) = self.cur.as_mut()
                && st.error.is_none()
            {
                st.error = Some(text);
                if self.failed_once {
                    if let Some(last) = self.seen.steps.last_mut() {
                        last.error = st.error.clone();
                    }
                } else {
                    self.failed_once = true;
                    first_failure = true;
                }
            }
            if first_failure && let Some(st) = &self.cur {
                let a = self.attempt(st);
                self.seen.steps.push(a);
            }
            self.open = false;
        }
    }
}

impl MetricState {
    /// `fold`'s trace and `observe_live` for a lean run: folds `ev` into `l` and adds what it
    /// makes (ended steps, evaluations, verdicts; with `ending`, the last step too).
    pub(super) fn observe_lean(
        &mut self,
        run: &mut RunMetrics,
        l: &mut Lean,
        ev: &Event<'_>,
        ending: bool,
    ) {
        let evaluations = l.seen.evaluations.len();
        let mut ended = None;
        l.apply(ev, &mut |st| ended = Some(st.obs()));
        if let Some((name, kind, ms, stop)) = ended {
            let name = name_of(&l.names, name);
            self.phase_obs(run, &mut l.admitted, &(name, kind, ms, stop), 1);
        }
        if ending && !l.last_observed {
            l.last_observed = true;
            if let Some((name, kind, ms, stop)) = l.cur.as_ref().map(Step::obs) {
                let name = name_of(&l.names, name);
                self.phase_obs(run, &mut l.admitted, &(name, kind, ms, stop), 1);
            }
        }
        for i in evaluations..l.seen.evaluations.len() {
            self.evaluation_obs(run, &l.seen.evaluations[i]);
        }
        self.assess(run, ev, &l.seen, &mut l.watch, &mut l.detectors);
    }
}
