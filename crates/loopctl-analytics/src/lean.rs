//! `Lean`: of each run, only what the `runs` and `phases` tables read from a trace (first and
//! last time, the stop's time, agent usage, the first passing evaluation, the phase attempts),
//! with derived steps held in a few bytes each. A query that reads no stagnation verdict and
//! no phase score needs no more; `core::fold::trace::Trace` stays the oracle (tests/lean.rs:
//! equal rows on the fixtures, the corpus and generated logs).
//!
//! Follows `Trace::apply` rule for rule: duplicates by `seq`, the quality phase, explicit
//! attempts (`phase_started` / `phase_finished`), and steps derived from events carrying a
//! `step`. Pure: no I/O.

use loopctl_core::fold::trace::payload::{gap, s};
use loopctl_core::fold::trace::{Attempt, AttemptNumbers, Name, Trace};
use loopctl_core::fold::{Line, Projection, Split};
use loopctl_core::{Event, Kind, Ts};
use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::rows::Usage;

/// What a run's row reads of its trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    pub first_ts: Option<Ts>,
    pub last_ts: Option<Ts>,
    /// The stop's time, when the run has stopped and its stop event has one.
    pub stop_ts: Option<Ts>,
    /// The summed agent usage of its explicit attempts.
    pub usage: Usage,
    /// The first passing evaluation: its iteration and time.
    pub first_pass: Option<(u64, Option<Ts>)>,
}

impl Facts {
    pub fn of_trace(t: &Trace) -> Facts {
        let mut usage = Usage::default();
        for a in t.phases() {
            if let Some(u) = &a.explicit().usage {
                usage.add(&Usage::from(u));
            }
        }
        Facts {
            first_ts: t.first_ts,
            last_ts: t.last_ts,
            stop_ts: t.stop.as_ref().and_then(|st| st.at.ts),
            usage,
            first_pass: t
                .evaluations
                .iter()
                .find(|e| e.passed == Some(true))
                .map(|e| (e.iteration, e.at.ts)),
        }
    }
}

/// A derived step in 48 bytes (a large log holds millions): names are indexes into the run's
/// names, and `has` says which of the optional values are there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    iteration: u64,
    started: i64,
    ended: i64,
    duration_ms: u64,
    pub name: u32,
    pub phase: u32,
    pub attempt: u32,
    has: u8,
    pub failed: bool,
}

const ITERATION: u8 = 1;
const STARTED: u8 = 2;
const ENDED: u8 = 4;
const DURATION: u8 = 8;

impl Step {
    fn get<T>(&self, bit: u8, v: T) -> Option<T> {
        (self.has & bit != 0).then_some(v)
    }

    fn set<T: Default>(&mut self, bit: u8, v: Option<T>) -> T {
        match v {
            Some(v) => {
                self.has |= bit;
                v
            }
            None => {
                self.has &= !bit;
                T::default()
            }
        }
    }

    pub fn iteration(&self) -> Option<u64> {
        self.get(ITERATION, self.iteration)
    }

    pub fn started(&self) -> Option<Ts> {
        self.get(STARTED, Ts(self.started))
    }

    pub fn ended(&self) -> Option<Ts> {
        self.get(ENDED, Ts(self.ended))
    }

    pub fn duration_ms(&self) -> Option<u64> {
        self.get(DURATION, self.duration_ms)
    }

    fn set_ended(&mut self, ts: Option<Ts>) {
        self.ended = self.set(ENDED, ts.map(|t| t.0));
    }

    fn set_duration(&mut self, d: Option<u64>) {
        self.duration_ms = self.set(DURATION, d);
    }
}

/// One run, folded lean.
#[derive(Debug, Clone, Default)]
pub struct LeanRun {
    pub facts: Facts,
    /// Explicit attempts (when there are any, they are the run's phases).
    pub attempts: Vec<Attempt>,
    /// Derived steps, kept only while the run has no explicit attempt (and the phases are
    /// read: `Lean::new`).
    pub steps: Vec<Step>,
    no_steps: bool,
    pub names: Vec<Name>,
    last_seq: Option<u64>,
    iteration: u64,
    /// The current quality phase (index into `names`), once an event came.
    phase: Option<u32>,
    loop_started: bool,
    open_step: Option<usize>,
    prev_ts: Option<Ts>,
    attempt_count: AttemptNumbers,
    /// Steps so far by iteration, then (name, quality phase).
    step_count: FxHashMap<Option<u64>, Vec<(u32, u32, u32)>>,
}

impl LeanRun {
    /// The index of `name` among the run's names (a run has a handful: a scan).
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(i) = self.names.iter().position(|n| **n == *name) {
            return i as u32;
        }
        self.names.push(name.into());
        (self.names.len() - 1) as u32
    }

    pub fn name(&self, i: u32) -> &str {
        &self.names[i as usize]
    }

    /// The run's facts, its attempts' usage summed.
    pub fn facts(&self) -> Facts {
        let mut f = self.facts.clone();
        for a in &self.attempts {
            if let Some(u) = &a.explicit().usage {
                f.usage.add(&Usage::from(u));
            }
        }
        f
    }

    pub fn apply(&mut self, ev: &Event<'_>) {
        if let (Some(seq), Some(last)) = (ev.seq, self.last_seq)
            && seq == last
        {
            return;
        }
        if let Some(seq) = ev.seq {
            self.last_seq = Some(self.last_seq.map_or(seq, |l| l.max(seq)));
        }
        let f = &mut self.facts;
        if let Some(ts) = ev.ts {
            f.first_ts.get_or_insert(ts);
            f.last_ts = Some(f.last_ts.map_or(ts, |l| l.max(ts)));
        }
        if let Some(it) = ev.iteration {
            self.iteration = self.iteration.max(it);
        }
        // An empty quality phase (a switch to "") is "A" again at the next event, as in `Trace`.
        let mut phase = match self.phase {
            Some(p) if !self.name(p).is_empty() => p,
            _ => self.intern("A"),
        };
        if let Some(p) = ev.phase.as_deref()
            && ev.kind != Kind::PhaseSwitched
            && self.name(phase) != p
        {
            phase = self.intern(p);
        }
        self.phase = Some(phase);
        match ev.kind {
            Kind::RunStarted | Kind::RunResumed => {
                self.loop_started |= ev.kind == Kind::RunStarted;
                self.facts.stop_ts = None;
            }
            Kind::EvaluationDone
                if ev.facts.passed == Some(true) && self.facts.first_pass.is_none() =>
            {
                let it = ev.iteration.unwrap_or(self.iteration);
                self.facts.first_pass = Some((it, ev.ts));
            }
            Kind::PhaseSwitched => {
                if let Some(to) = s(&ev.payload_value(), "to_phase") {
                    self.phase = Some(self.intern(&to));
                }
            }
            Kind::PhaseStarted => self.phase_started(ev, &ev.payload_value()),
            Kind::PhaseFinished => self.phase_finished(ev, &ev.payload_value()),
            Kind::Stopped | Kind::Failed => self.stopped(ev),
            Kind::SessionEnded if !self.loop_started => self.stopped(ev),
            _ => {}
        }
        // Once the run has an explicit attempt its derived steps are not its phases.
        if !matches!(
            ev.kind,
            Kind::PhaseStarted | Kind::PhaseFinished | Kind::PhaseRetry
        ) && self.attempts.is_empty()
            && !self.no_steps
            && let Some(name) = ev.step.as_deref()
        {
            self.step(ev, name);
        } else if !self.attempts.is_empty() && !self.steps.is_empty() {
            self.steps = Vec::new();
            self.step_count = FxHashMap::default();
        }
        if ev.ts.is_some() {
            self.prev_ts = ev.ts;
        }
    }

    fn stopped(&mut self, ev: &Event<'_>) {
        self.facts.stop_ts = ev.ts;
    }

    fn phase_name(&mut self, ev: &Event<'_>, p: &Value) -> Name {
        let name = match ev.step.as_deref() {
            Some(n) => n.to_string(),
            None => s(p, "phase")
                .or_else(|| s(p, "name"))
                .unwrap_or_else(|| "?".into()),
        };
        let i = self.intern(&name);
        self.names[i as usize].clone()
    }

    fn phase_started(&mut self, ev: &Event<'_>, p: &Value) {
        let name = self.phase_name(ev, p);
        self.attempt_count.start(&mut self.attempts, name, ev, p);
    }

    fn phase_finished(&mut self, ev: &Event<'_>, p: &Value) {
        let name = self.phase_name(ev, p);
        self.attempt_count.finish(&mut self.attempts, name, ev, p);
    }

    /// A derived step, as `Trace` derives it: consecutive events of one step (same iteration
    /// and quality phase) are one step, lasting from the event before its first to its last.
    fn step(&mut self, ev: &Event<'_>, name: &str) {
        let iteration = Some(ev.iteration.unwrap_or(self.iteration));
        let phase = self.phase.unwrap_or(0);
        let delta = gap(self.prev_ts, ev.ts);
        let name = self.intern(name);
        // As `Trace::step`: the run's `failed` right after an error of the same step ends that
        // attempt, it is no new one.
        let failed_after_error = (ev.kind == Kind::Failed && self.open_step.is_none())
            .then(|| self.steps.len().checked_sub(1))
            .flatten()
            .filter(|&i| self.steps[i].failed);
        let same = self
            .open_step
            .or(failed_after_error)
            .and_then(|i| self.steps.get_mut(i))
            .filter(|st| st.name == name && st.iteration() == iteration && st.phase == phase);
        let idx = match same {
            Some(st) => {
                st.set_ended(ev.ts.or(st.ended()));
                st.set_duration(match (st.duration_ms(), delta) {
                    (Some(a), Some(b)) => Some(a.saturating_add(b)),
                    (a, b) => a.or(b),
                });
                self.open_step.or(failed_after_error).unwrap_or(0)
            }
            None => {
                let seen = self.step_count.entry(iteration).or_default();
                let attempt = match seen.iter_mut().find(|(n, p, _)| *n == name && *p == phase) {
                    Some((_, _, count)) => {
                        *count += 1;
                        *count
                    }
                    None => {
                        seen.push((name, phase, 1));
                        1
                    }
                };
                let mut st = Step {
                    iteration: 0,
                    started: 0,
                    ended: 0,
                    duration_ms: 0,
                    name,
                    phase,
                    attempt,
                    has: 0,
                    failed: false,
                };
                st.iteration = st.set(ITERATION, iteration);
                st.started = st.set(STARTED, self.prev_ts.or(ev.ts).map(|t| t.0));
                st.set_ended(ev.ts);
                st.set_duration(delta);
                self.steps.push(st);
                self.steps.len() - 1
            }
        };
        self.open_step = Some(idx);
        if matches!(ev.kind, Kind::PhaseError | Kind::Failed) {
            if let Some(st) = self.steps.get_mut(idx) {
                st.failed = true;
            }
            // An error ends the step: the next event of the same step is a new attempt.
            self.open_step = None;
        }
    }
}

/// Every run of a log, lean, routed as `Traces` routes them (`run_id`, else `default_run`).
#[derive(Debug, Clone, Default)]
pub struct Lean {
    default_run: String,
    phases: bool,
    pub runs: FxHashMap<String, LeanRun>,
}

impl Lean {
    /// `phases`: derive the runs' steps (the `phases` table is read).
    pub fn new(default_run: &str, phases: bool) -> Lean {
        Lean {
            default_run: default_run.to_string(),
            phases,
            runs: FxHashMap::default(),
        }
    }
}

impl Projection for Lean {
    fn event(&mut self, _line: Line, ev: &Event<'_>) {
        let key = ev.run_id.as_deref().unwrap_or(&self.default_run);
        let r = match self.runs.get_mut(key) {
            Some(r) => r,
            None => self.runs.entry(key.to_string()).or_insert_with(|| LeanRun {
                no_steps: !self.phases,
                ..LeanRun::default()
            }),
        };
        r.apply(ev);
    }
}

impl Split for Lean {
    fn fork(&self) -> Self {
        Lean::new(&self.default_run, self.phases)
    }
    fn join(&mut self, other: Self) {
        self.runs.extend(other.runs);
    }
}
