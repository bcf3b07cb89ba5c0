//! The metric model: the event log folded into Prometheus-shaped series, with no Prometheus in
//! sight. Pure: events in, series out; the same logs give the same series whatever the order in
//! which runs are fed.
//!
//! Each run keeps the core's own folds (`RunState` via `apply_mut_lean`, `Trace`). What an event
//! adds goes straight to the totals, under the run's `loop` label at that event, so that reading
//! them (a scrape) costs O(series). What was counted stays counted: a run that names a new
//! alias counts on under it, and only its `loopctl_runs` gauge moves; a deleted log takes back
//! only its runs' gauges (a counter that went down would read as a reset). Values are integers
//! in fixed units (milliseconds, micro-scores, nano-dollars): sums are exact in any order.
//!
//! `apply(source, event)` folds one event into the state of its run (keyed by log and run id),
//! `finding` counts what is found about the lines, and nothing here does I/O. `feed` makes it a
//! projection of the core's fold (`feed::LogFold`): at start-up every log is folded alone by
//! the store's driver, on all threads, and absorbed into the shared model (`merge`). A log
//! folded alone sums its series by loop label number (`Local`), not by label text, and counts
//! in place what most events add (events by type; tokens, cost, evaluations and finished
//! phases by label number: `counts`), made into series once its lines are all read (`settle`).

use std::collections::BTreeSet;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hash};

use hashbrown::hash_map::EntryRef;
use rustc_hash::FxHashMap as HashMap;

use loopctl_core::analysis::stagnation::{self, Detector};
use loopctl_core::fold::replay::{FindingKind, seq_step};
use loopctl_core::fold::run_state::{RunState, Status, apply_mut_lean};
use loopctl_core::fold::trace::{Name, Trace};
use loopctl_core::{Event, Kind, Ts};

mod caps;
mod counts;
mod ids;
mod key;
mod labels;
mod lean;
mod merge;
mod metric;
mod observe;
mod totals;

use caps::Caps;
use counts::{EventCounts, LabelCounts, PhaseCache};
use ids::{IdHasher, IdRef, RunKey};
use key::{Key, Label};
use lean::Lean;
use totals::Totals;

pub use labels::{FINISHED_REASONS, finding_label};
use labels::{event_label, usage_extras};
pub use metric::{Metric, Type};

/// A histogram in stored units: per-bucket (not cumulative) counts, the last for `+Inf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hist {
    pub buckets: Vec<i64>,
    pub count: i64,
    pub sum: i128,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    Count(i64),
    Hist(Hist),
}

impl Val {
    /// A zero of the same shape.
    fn zero_like(&self) -> Val {
        match self {
            Val::Count(_) => Val::Count(0),
            Val::Hist(h) => Val::Hist(Hist {
                buckets: vec![0; h.buckets.len()],
                count: 0,
                sum: 0,
            }),
        }
    }

    fn is_zero(&self) -> bool {
        match self {
            Val::Count(n) => *n == 0,
            Val::Hist(h) => h.count == 0 && h.sum == 0,
        }
    }

    /// Adds `sign` times `other`.
    fn add(&mut self, other: &Val, sign: i64) {
        match (self, other) {
            (Val::Count(a), Val::Count(b)) => *a = a.saturating_add(sign.saturating_mul(*b)),
            (Val::Hist(a), Val::Hist(b)) => {
                for (x, y) in a.buckets.iter_mut().zip(&b.buckets) {
                    *x += sign * y;
                }
                a.count += sign * b.count;
                a.sum += i128::from(sign) * b.sum;
            }
            _ => {}
        }
    }
}

/// One series: its metric and label values, in `Metric::labels` order.
pub type SeriesKey = (Metric, Vec<String>);

/// What one log adds to the totals without its runs (events read, findings).
#[derive(Debug, Clone, Default)]
struct Contribution(HashMap<Key, Val>);

/// The series of a model folded alone, by the number of their `loop` label: an event's series
/// looked up without hashing the label's text, and the totals' strings made once per series
/// when the log is absorbed.
#[derive(Debug, Clone, Default)]
struct Local {
    labels: Vec<String>,
    numbers: HashMap<String, u32>,
    series: HashMap<(u32, Key), Val>,
    /// What runs add at most events, counted in place by label number (`LabelCounts`), made
    /// into `series` by `settle`.
    counts: LabelCounts,
}

impl Local {
    /// The label numbered `n` (empty for a number never given).
    fn label(&self, n: u32) -> &str {
        self.labels.get(n as usize).map_or("", String::as_str)
    }

    fn number(&mut self, label: &str) -> u32 {
        if let Some(n) = self.numbers.get(label) {
            return *n;
        }
        let n = self.labels.len() as u32;
        self.labels.push(label.to_string());
        self.numbers.insert(label.to_string(), n);
        n
    }
}

/// One change to a series, in stored units.
#[derive(Debug, Clone, Copy)]
enum Delta {
    Count(i64),
    /// An observation (`sign` -1 takes it back).
    Observe(i64, i64),
}

impl Delta {
    /// A zero of the shape `self` adds to.
    fn zero(&self, m: Metric) -> Val {
        match self {
            Delta::Count(_) => Val::Count(0),
            Delta::Observe(..) => Val::Hist(Hist {
                buckets: vec![0; m.buckets().len() + 1],
                count: 0,
                sum: 0,
            }),
        }
    }

    /// Adds the change to `v` (of metric `m`) in place.
    fn apply(&self, v: &mut Val, m: Metric) {
        match (*self, v) {
            (Delta::Count(n), Val::Count(a)) => *a = a.saturating_add(n),
            (Delta::Observe(x, sign), Val::Hist(h)) => {
                let i = bucket_of(m, x);
                if let Some(b) = h.buckets.get_mut(i) {
                    *b += sign;
                }
                h.count += sign;
                h.sum += i128::from(sign) * i128::from(x);
            }
            _ => {}
        }
    }
}

/// The bucket of metric `m` that an observation of `x` stored units falls in (the last for
/// `+Inf`).
#[inline]
fn bucket_of(m: Metric, x: i64) -> usize {
    if let Some(units) = m.bounds_in_units() {
        return units.iter().position(|b| x <= *b).unwrap_or(units.len());
    }
    let bounds = m.buckets();
    let exported = x as f64 / m.scale();
    bounds
        .iter()
        .position(|b| exported <= *b)
        .unwrap_or(bounds.len())
}

/// Adds `d` to a series of metric `m` (one hash, no value built); a series at zero is removed.
fn bump_delta<K: Hash + Eq>(map: &mut HashMap<K, Val>, key: K, d: Delta, m: Metric) {
    match map.entry(key) {
        Entry::Occupied(mut e) => {
            d.apply(e.get_mut(), m);
            if e.get().is_zero() {
                e.remove();
            }
        }
        Entry::Vacant(e) => {
            let mut v = d.zero(m);
            d.apply(&mut v, m);
            if !v.is_zero() {
                e.insert(v);
            }
        }
    }
}

/// Adds `val` to a series (moved in when the series is new); a series at zero is removed.
fn bump_owned<K: Hash + Eq>(map: &mut HashMap<K, Val>, key: K, val: Val) {
    match map.entry(key) {
        Entry::Occupied(mut e) => {
            e.get_mut().add(&val, 1);
            if e.get().is_zero() {
                e.remove();
            }
        }
        Entry::Vacant(e) => {
            if !val.is_zero() {
                e.insert(val);
            }
        }
    }
}

/// Options of the model.
#[derive(Debug, Clone)]
pub struct Options {
    /// Export the live-run gauges (with a `run` label), one set per running run.
    pub per_run_series: bool,
    /// The stagnation detectors' settings (`loopctl serve --min-delta ...`, as for
    /// `loopctl stagnation`).
    pub stagnation: stagnation::Config,
    /// Distinct `loop` values kept; later loops fold into `loop="other"`.
    pub max_loops: usize,
    /// Distinct `phase` values kept per loop; later phases fold into `phase="other"`.
    pub max_phases: usize,
}

/// The label value that capped labels fold into.
pub const OTHER: &str = "other";

impl Default for Options {
    fn default() -> Self {
        Options {
            per_run_series: true,
            stagnation: stagnation::Config::default(),
            max_loops: 200,
            max_phases: 50,
        }
    }
}

/// A log fed to the model (a file; its runs are dropped with it).
pub type SourceId = usize;

/// One run: its state and the `loop` label it counts under. While it runs it also keeps its
/// trace (`Live`); once it has ended that is dropped, and the state's bulky parts with it, so
/// that a root of 10,000 ended runs costs its series and one small state per run, not every
/// run's events (docs/metrics.md, "Memory").
#[derive(Debug, Clone)]
pub struct RunMetrics {
    pub state: RunState,
    /// The `loop` label the run counts under now.
    pub loop_label: String,
    /// The label before the `--max-loops` cap (`loop_label` is it, or `other`).
    raw_label: String,
    /// `loop_label`'s number in a model folded alone (`Local`).
    label_number: u32,
    /// Where its finished phases are counted (a model folded alone).
    phase_slots: PhaseCache,
    /// `None` once the run has ended; a fresh one if it starts again.
    live: Option<Box<Live>>,
    /// In place of `live`, for a run folded the lean way (`MetricState::lean`).
    lean: Option<Box<Lean>>,
    /// Seq findings about the run's events (`/api/runs`; damaged lines name no run).
    pub findings: u64,
}

/// What folding a running run needs: the core's trace, and how much of it has been observed.
#[derive(Debug, Clone, Default)]
struct Live {
    trace: Trace,
    /// Explicit attempts before this index have all been observed (finished).
    attempts_seen: usize,
    /// Observed attempts past `attempts_seen` (phases that finished out of order).
    finished_beyond: BTreeSet<usize>,
    /// Derived steps observed (while the log has no explicit attempts): the ones over.
    steps_seen: usize,
    evaluations_seen: usize,
    retries_seen: usize,
    detectors: BTreeSet<Detector>,
    /// What the stagnation detectors read of the trace, kept up to date (`observe.rs`).
    watch: Option<stagnation::watch::Watch>,
    /// Phases (the trace's names) admitted under the run's loop label: a kept phase stays
    /// kept, so they are not looked up in the caps again. Cleared when the label changes.
    admitted: Vec<Name>,
}

impl Live {
    /// Room for a run's derived steps made once (an aif-loop run has dozens; grown from 4 by
    /// doubling, each would be copied about once more): only running runs have one.
    fn new() -> Box<Live> {
        let mut l = Box::<Live>::default();
        l.trace.steps.reserve(LIVE_STEPS);
        l
    }
}

/// Derived steps a running run's trace has room for from its start (192 bytes each).
const LIVE_STEPS: usize = 128;

impl RunMetrics {
    /// Whether the run still keeps its trace (it is running).
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// The `ts` of the run's latest event, while it runs.
    pub fn last_event(&self) -> Option<Ts> {
        self.live.as_ref()?.trace.last_ts
    }

    /// The phase attempt now open and its start, while the run runs: the last explicit attempt
    /// if unfinished, else (aif-loop) the last derived step.
    pub fn open_phase(&self) -> Option<(&str, Ts)> {
        let t = &self.live.as_ref()?.trace;
        let a = match t.attempts.last() {
            Some(a) => (!a.finished).then_some(a)?,
            None => t.steps.last()?,
        };
        Some((&*a.name, a.started?))
    }

    /// Drops what only a running run needs.
    fn end(&mut self) {
        self.live = None;
        self.lean = None;
        self.phase_slots.clear();
        let s = &mut self.state;
        // run.json's parts: the metrics and `/api/runs` read none of them, and a restart's
        // `run_started` sets them again. The score history's last point is all the fold reads.
        (s.task, s.criteria, s.evaluation) = (None, None, None);
        let n = s.score_history.len();
        s.score_history.drain(..n.saturating_sub(1));
        s.score_history.shrink_to_fit();
    }
}

#[derive(Debug, Clone, Default)]
struct SourceState {
    name: String,
    /// The log's runs by id: hashed (a merged log holds tens of thousands, their ids alike
    /// for most of their length). Boxed: most logs have one run.
    runs: hashbrown::HashMap<RunKey, Box<RunMetrics>, BuildHasherDefault<IdHasher>>,
    contribution: Contribution,
    /// Events read, while the log is folded alone (`MetricState::alone`); its contribution
    /// takes them in when it is merged.
    events: EventCounts,
    /// Torn tails counted as findings that their writer has since completed: no longer
    /// findings of the log as it is (`/api/runs`), though still counted (a counter).
    completed_tails: u64,
}

/// Everything the metrics are made of.
#[derive(Debug, Clone, Default)]
pub struct MetricState {
    pub options: Options,
    sources: Vec<Option<SourceState>>,
    /// The (log, run id) of the runs whose log says running: a scrape reads these, not every
    /// run.
    running: BTreeSet<(SourceId, String)>,
    /// Full label values (with `loop`) to value.
    totals: Totals,
    caps: Caps,
    /// A log folded alone (`alone`): no totals kept, but `local`, which `absorb` adds to them.
    alone: bool,
    local: Local,
    /// Other shards of the log folded alone, joined (`join`), absorbed with it.
    joined: Vec<MetricState>,
    /// Runs of logs without explicit phases are folded the lean way (`lean.rs`): a log folded
    /// alone at start-up (`fold_lean`).
    lean: bool,
    /// The lean way could not fold this log exactly: it is to be folded again the full way.
    needs_full: bool,
    /// Runs folded the lean way and taken in (tests check the lean path ran).
    lean_runs: u64,
    /// Logs whose lean fold could not be exact, folded again the full way (`textfile::absorb`).
    pub(crate) folded_again: u64,
}

impl MetricState {
    pub fn new(options: Options) -> MetricState {
        MetricState {
            options,
            ..MetricState::default()
        }
    }

    /// Registers a log; `name` is its folder's name or its file stem (the `loop` label of runs
    /// whose id names no alias, and the run of events that name none).
    pub fn add_source(&mut self, name: &str) -> SourceId {
        self.sources.push(Some(SourceState {
            name: name.to_string(),
            ..SourceState::default()
        }));
        self.sources.len() - 1
    }

    /// Forgets a log (deleted, or about to be read again) and takes back its gauges: its runs
    /// leave `loopctl_runs`. What it counted stays counted: a counter (or histogram) that went
    /// down would read as a reset to Prometheus, and `increase()` (the bundled alerts) would
    /// count its whole value again. A log read again from its start is counted again.
    pub fn drop_source(&mut self, source: SourceId) {
        let Some(src) = self.sources.get_mut(source).and_then(Option::take) else {
            return;
        };
        let gauge = |key: &Key| key.metric.kind() == Type::Gauge;
        for (key, val) in src.contribution.0.iter().filter(|(k, _)| gauge(k)) {
            self.totals.add(&key.series(""), val, -1);
        }
        // A run's one gauge series: `loopctl_runs` of its status, under its label.
        for r in src.runs.into_values() {
            self.running.remove(&(source, r.state.run_id.clone()));
            let key = runs_key(r.state.status);
            self.totals
                .apply(&key.series(&r.loop_label), Delta::Count(-1));
        }
    }

    /// Drops a log's runs and contributions but keeps it registered (a log rewritten from its
    /// start).
    pub fn reset_source(&mut self, source: SourceId) {
        let name = match self.sources.get(source) {
            Some(Some(s)) => s.name.clone(),
            _ => return,
        };
        self.drop_source(source);
        self.sources[source] = Some(SourceState {
            name,
            ..SourceState::default()
        });
    }

    /// The series a log contributes without its runs (events read, findings), by metric.
    pub fn source_series(&self, source: SourceId) -> impl Iterator<Item = (Metric, &Val)> {
        self.sources
            .get(source)
            .and_then(Option::as_ref)
            .into_iter()
            .flat_map(|s| s.contribution.0.iter().map(|(k, v)| (k.metric, v)))
    }

    pub fn source_name(&self, source: SourceId) -> Option<&str> {
        self.sources.get(source)?.as_ref().map(|s| s.name.as_str())
    }

    fn bump_source(&mut self, source: SourceId, key: Key, d: Delta) {
        let Some(Some(src)) = self.sources.get_mut(source) else {
            return;
        };
        let m = key.metric;
        if !self.alone {
            self.totals.apply(&key.series(""), d);
        }
        bump_delta(&mut src.contribution.0, key, d, m);
    }

    /// Counts a finding about a log (a damaged line, a torn tail, ...); `sign` -1 takes it back
    /// (a torn tail that its writer completed).
    pub fn finding(&mut self, source: SourceId, kind: FindingKind, sign: i64) {
        let key = Key::one(Metric::LogFindings, Label::Static(finding_label(kind)));
        self.bump_source(source, key, Delta::Count(sign));
    }

    /// A torn tail counted earlier has been completed into an event by its writer.
    pub fn tail_completed(&mut self, source: SourceId) {
        if let Some(Some(src)) = self.sources.get_mut(source) {
            src.completed_tails += 1;
        }
    }

    /// Findings of the log that were torn tails since completed (`tail_completed`).
    pub fn completed_tails(&self, source: SourceId) -> u64 {
        match self.sources.get(source) {
            Some(Some(src)) => src.completed_tails,
            _ => 0,
        }
    }

    /// Folds one event of a log; returns the seq finding it makes (counted already), for the
    /// caller to report with the event's line.
    pub fn apply(&mut self, source: SourceId, ev: &Event<'_>) -> Option<(FindingKind, String)> {
        let Some(Some(src)) = self.sources.get_mut(source) else {
            return None;
        };
        // Out of `self` while it folds (no remove and insert per event); nothing below reads
        // the log's runs or name through `self`.
        let mut runs = std::mem::take(&mut src.runs);
        let name = std::mem::take(&mut src.name);
        let run_id = ev.run_id.as_deref().unwrap_or(&name);
        if self.alone {
            if let Some(Some(src)) = self.sources.get_mut(source) {
                src.events.count(ev);
            }
        } else {
            self.bump_source(
                source,
                Key::two(
                    Metric::Events,
                    Label::Static(ev.dialect.name()),
                    Label::Static(event_label(ev)),
                ),
                Delta::Count(1),
            );
        }
        let (run, was_running, fresh) = match runs.entry_ref(&IdRef(run_id)) {
            EntryRef::Occupied(e) => {
                let r = e.into_mut();
                let was = r.state.status == Status::Running;
                (r, was, false)
            }
            EntryRef::Vacant(e) => {
                let r = self.new_run(run_id, &name, ev);
                (e.insert(r), false, true)
            }
        };
        let step = seq_step(run.state.events, run.state.last_seq, ev.seq);
        if let Some((kind, _)) = &step.finding {
            self.finding(source, *kind, 1);
            run.findings += 1;
        }
        if !step.duplicate {
            if ev.kind == Kind::RunStarted && run.state.loop_started {
                // A restart (a run is counted once when it first appears, whatever its
                // first event; a later first `run_started` is that same start).
                self.add(run, Key::new(Metric::RunsStarted), Delta::Count(1));
            }
            self.fold(run, ev, step.keep, &name);
        }
        if fresh {
            // Counted once its first event is folded: under the label that event gives it.
            self.add(run, Key::new(Metric::RunsStarted), Delta::Count(1));
        }
        // `running` holds the runs whose status is running after their last event.
        let running = run.state.status == Status::Running;
        if running != was_running {
            let key = (source, run_id.to_string());
            if running {
                self.running.insert(key);
            } else {
                self.running.remove(&key);
            }
        }
        if let Some(Some(src)) = self.sources.get_mut(source) {
            src.name = name;
            src.runs = runs;
        }
        step.finding
    }

    /// A run seen for the first time, at `ev`, in the log named `name`: counted running
    /// under its label. Out of `apply`'s line (once per run, `apply` once per event).
    #[inline(never)]
    fn new_run(&mut self, run_id: &str, name: &str, ev: &Event<'_>) -> Box<RunMetrics> {
        let mut state = RunState::new(run_id);
        // A first `run_started` naming the run's alias: the run is labelled by it from its
        // start, not by a label it leaves at once (which would take a place under
        // `--max-loops`).
        if ev.kind == Kind::RunStarted
            && ev
                .payload
                .as_deref()
                .is_some_and(|p| p.contains("task_alias"))
        {
            let mut first = RunState::new(run_id);
            apply_mut_lean(&mut first, ev);
            state.task_alias = first.task_alias;
        }
        let raw = state.loop_label(name).to_string();
        let loop_label = self.admit_loop(raw.clone());
        let mut r = RunMetrics {
            label_number: self.label_number(&loop_label),
            loop_label,
            raw_label: raw,
            state,
            phase_slots: PhaseCache::default(),
            live: None,
            lean: None,
            findings: 0,
        };
        self.start_trace(&mut r, ev);
        self.add(&mut r, runs_key(Status::Running), Delta::Count(1));
        Box::new(r)
    }

    /// A running run's fresh trace: lean when this model folds the lean way and the event is
    /// the lean path's, else the core's.
    fn start_trace(&mut self, run: &mut RunMetrics, ev: &Event<'_>) {
        if self.lean && !self.needs_full && lean::starts(ev) {
            self.lean_runs += 1;
            run.lean = Some(Lean::new());
        } else {
            run.live = Some(Live::new());
        }
    }

    /// Folds this model's new runs the lean way, or not (a log folded alone at start-up).
    pub fn fold_lean(&mut self, on: bool) {
        self.lean = on;
    }

    /// How many runs of the logs taken in were folded the lean way.
    pub fn lean_runs(&self) -> u64 {
        self.lean_runs
    }

    /// How many logs taken in were folded again the full way (tests check the lean way gave
    /// up only when it had to).
    pub fn folded_again(&self) -> u64 {
        self.folded_again
    }

    pub fn is_lean(&self) -> bool {
        self.lean
    }

    /// The lean way has given up on this log (`needs_full`, without looking at the runs).
    pub fn gave_up(&self) -> bool {
        self.needs_full
    }

    /// Whether this log's fold must be done again the full way: the lean way met what it does
    /// not fold, or a run it folds is still running (its trace is needed to follow it).
    pub fn needs_full(&self) -> bool {
        self.needs_full
            || self
                .sources
                .iter()
                .flatten()
                .any(|s| s.runs.values().any(|r| r.lean.is_some()))
            || self.joined.iter().any(MetricState::needs_full)
    }

    /// Gives up the lean way: the log is to be folded again the full way (it grew too large
    /// for a second reading to be cheap).
    pub fn give_up_lean(&mut self) {
        self.needs_full |= self.lean && self.needs_full();
        self.lean = false;
    }

    fn add(&mut self, run: &mut RunMetrics, key: Key, d: Delta) {
        if self.alone {
            let m = key.metric;
            bump_delta(&mut self.local.series, (run.label_number, key), d, m);
        } else {
            self.totals.apply(&key.series(&run.loop_label), d);
        }
    }

    /// A label's number in `local` (folded alone; unused otherwise).
    fn label_number(&mut self, label: &str) -> u32 {
        if self.alone {
            self.local.number(label)
        } else {
            0
        }
    }

    fn fold(&mut self, run: &mut RunMetrics, ev: &Event<'_>, keep_seq: Option<u64>, source: &str) {
        let before = run.state.status;
        apply_mut_lean(&mut run.state, ev);
        if keep_seq.is_some() {
            run.state.last_seq = keep_seq;
        }
        let after = run.state.status;
        // An ended run has no trace: its later events count (events, tokens, cost, status) but
        // add no phase, evaluation or verdict, unless it starts again, with a fresh trace.
        if run.live.is_none() && run.lean.is_none() && after == Status::Running {
            self.start_trace(run, ev);
        }
        let mut live = run.live.take();
        if let Some(l) = live.as_deref_mut() {
            l.trace.apply(ev);
        }
        let mut lean = run.lean.take();
        if lean.is_some() && !lean::folds(ev.kind) {
            // Not this path's: the log is folded again the full way (`needs_full`).
            self.needs_full = true;
            lean = None;
            run.phase_slots.clear();
        }
        // Admitted again only when what the label is made of changed (admission is monotonic):
        // the alias, set by `run_started` alone (not compared at every event: its text is out
        // of cache by then, in a merged log).
        if ev.kind == Kind::RunStarted && run.state.loop_label(source) != run.raw_label {
            run.raw_label = run.state.loop_label(source).to_string();
            let label = self.admit_loop(run.raw_label.clone());
            if label != run.loop_label {
                if let Some(l) = live.as_deref_mut() {
                    l.admitted.clear();
                }
                if let Some(l) = lean.as_deref_mut() {
                    l.admitted.clear();
                }
                // What it counted stays under the old label (a counter never goes down); from
                // here on it counts under the new one, and its gauge moves there.
                self.add(run, runs_key(before), Delta::Count(-1));
                run.label_number = self.label_number(&label);
                run.loop_label = label;
                self.add(run, runs_key(before), Delta::Count(1));
            }
        }

        let f = &ev.facts;
        // Saturating: a count past i64 (damaged or hostile input) must not read as negative.
        let tokens = |n: Option<u64>| n.map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let (read, creation, cost) = match ev.payload.as_deref() {
            Some(p) if f.usage_extras => usage_extras(p),
            _ => (0, 0, None),
        };
        let amounts = [
            tokens(f.tokens_in),
            tokens(f.tokens_out),
            tokens(Some(read)),
            tokens(Some(creation)),
            cost.map_or(0, |c| (c * 1e9).round() as i64),
        ];
        if self.alone {
            self.local.counts.tally(run.label_number, amounts);
        } else {
            for (key, n) in TALLIED.iter().zip(amounts).filter(|(_, n)| *n != 0) {
                self.add(run, key.clone(), Delta::Count(n));
            }
        }
        if let Some(l) = live.as_deref_mut() {
            self.observe_live(run, l, ev, after != Status::Running);
        }
        if let Some(l) = lean.as_deref_mut() {
            self.observe_lean(run, l, ev, after != Status::Running);
        }
        if after != before {
            self.add(run, runs_key(before), Delta::Count(-1));
            self.add(run, runs_key(after), Delta::Count(1));
            if before == Status::Running {
                // The count the end states (Avenor's loop end, the runner's stop), if it does.
                let stated = match (live.as_deref(), lean.as_deref()) {
                    (Some(l), _) => l.trace.stop.as_ref().and_then(|s| s.iterations_completed),
                    (_, Some(l)) => l.stated(),
                    _ => None,
                };
                self.finished(run, stated);
            }
        }
        run.live = live;
        run.lean = lean;
        if after != Status::Running {
            run.end();
        }
    }

    /// The runs, by log and run id (for `/api/runs`).
    pub fn runs(&self) -> impl Iterator<Item = (SourceId, &RunMetrics)> {
        let sources = self.sources.iter().enumerate();
        sources
            .filter_map(|(i, s)| Some((i, s.as_ref()?)))
            .flat_map(|(i, s)| {
                let mut runs: Vec<_> = s.runs.values().collect();
                runs.sort_unstable_by(|a, b| a.state.run_id.cmp(&b.state.run_id));
                runs.into_iter().map(move |r| (i, &**r))
            })
    }

    /// Every series with a value, sorted by metric and labels (with `loop` first where the
    /// metric has it).
    pub fn series(&self) -> Vec<(&SeriesKey, &Val)> {
        let mut v: Vec<_> = self.totals.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// The value of one series (labels with `loop` first where the metric has it).
    pub fn get(&self, key: &SeriesKey) -> Option<&Val> {
        self.totals.get(key)
    }

    /// Logs with a run whose log says `running`: the ones whose runner may be gone.
    pub fn running_sources(&self) -> BTreeSet<SourceId> {
        self.running.iter().map(|(s, _)| *s).collect()
    }

    /// The runs whose log says running (O(running runs), for the live-run gauges).
    pub fn running_runs(&self) -> impl Iterator<Item = (SourceId, &RunMetrics)> {
        self.running.iter().filter_map(|k| {
            let src = self.sources.get(k.0)?.as_ref()?;
            src.runs.get(&IdRef(&k.1)).map(|r| (k.0, &**r))
        })
    }

    /// Whether a log had an event (every event belongs to a run: its own, or the log's).
    pub fn has_runs(&self, source: SourceId) -> bool {
        matches!(self.sources.get(source), Some(Some(s)) if !s.runs.is_empty())
    }

    /// Findings about the logs (`loopctl_log_findings_total`, all kinds): what `--strict`
    /// counts.
    pub fn findings(&self) -> u64 {
        self.totals
            .iter()
            .filter(|(k, _)| k.0 == Metric::LogFindings)
            .map(|(_, v)| match v {
                Val::Count(n) => (*n).max(0) as u64,
                Val::Hist(_) => 0,
            })
            .sum()
    }

    /// Loops that have had a run, for the closed-set zeros (`loopctl_runs`,
    /// `loopctl_runs_finished_total`): a loop whose logs were deleted stays known, as its
    /// counters stay.
    pub fn loops(&self) -> BTreeSet<&str> {
        // Every run adds 1 to `loopctl_runs_started_total` under its loop, and a counter never
        // goes down: read off the series, O(series). A run that moved to a new alias is in
        // `loopctl_runs` under it (and in `loopctl_runs_finished_total` once it ends).
        let known = [Metric::RunsStarted, Metric::Runs, Metric::RunsFinished];
        self.totals
            .keys()
            .filter(|k| known.contains(&k.0))
            .filter_map(|k| k.1.first().map(String::as_str))
            .collect()
    }
}

/// The series of the tokens and cost an event adds (`LabelCounts::tally`).
const TALLIED: [Key; 5] = [
    Key::one_static(Metric::Tokens, "input"),
    Key::one_static(Metric::Tokens, "output"),
    Key::one_static(Metric::Tokens, "cache_read"),
    Key::one_static(Metric::Tokens, "cache_creation"),
    Key::new(Metric::Cost),
];

fn runs_key(s: Status) -> Key {
    Key::one(Metric::Runs, Label::Static(s.as_str()))
}

#[cfg(test)]
mod tests;
