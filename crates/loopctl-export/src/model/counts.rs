//! Counting in place what every event of a log folded alone adds: one hash-map series per
//! event would be a tenth of the fold.

use std::hash::Hash;

use hashbrown::{Equivalent, HashMap};
use rustc_hash::FxBuildHasher;

use loopctl_core::fold::trace::Name;
use loopctl_core::{Dialect, Event};

use super::key::{Key, Label, NameKey, NameRef};
use super::labels::event_label;
use super::{Delta, Metric, TALLIED, Val};

/// Events by dialect and type, counted in place: one hash-map series per event would be a
/// tenth of the fold.
#[derive(Debug, Clone, Default)]
pub(super) struct EventCounts(Vec<(Dialect, &'static str, i64)>);

impl EventCounts {
    /// Once per event: inlined into the model's `apply`.
    #[inline(always)]
    pub(super) fn count(&mut self, ev: &Event<'_>) {
        let i = ev.kind as usize * 3 + ev.dialect as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, (Dialect::Native, "", 0));
        }
        let slot = &mut self.0[i];
        if slot.2 == 0 {
            *slot = (ev.dialect, event_label(ev), 0);
        }
        slot.2 += 1;
    }

    /// Adds another log's shard's counts.
    pub(super) fn add(&mut self, other: EventCounts) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), (Dialect::Native, "", 0));
        }
        for (mine, (d, label, n)) in self.0.iter_mut().zip(other.0) {
            if n != 0 {
                *mine = (d, label, mine.2 + n);
            }
        }
    }

    pub(super) fn take(&mut self) -> impl Iterator<Item = (Key, i64)> {
        std::mem::take(&mut self.0)
            .into_iter()
            .filter(|c| c.2 != 0)
            .map(|(d, label, n)| {
                let key = Key::two(
                    Metric::Events,
                    Label::Static(d.name()),
                    Label::Static(label),
                );
                (key, n)
            })
    }
}

/// What the runs of a model folded alone add under each loop label number, counted in place
/// (no series hashed per event or per run): tokens and cost, evaluations and their scores, by
/// label number; finished phases by label number, phase, stop reason and kind. Made into
/// series once, on the shard's own thread (`MetricState::settle`). A run counts under the
/// label it has at each event: what it counted before a label change stays under the old one.
#[derive(Debug, Clone, Default)]
pub(super) struct LabelCounts {
    by_label: Vec<Counts>,
    /// Finished phases, each place once, and where each place is in `phases`.
    phases: Vec<PhaseCount>,
    slots: HashMap<PhaseSlot, u32, FxBuildHasher>,
}

/// A run's phase places in `LabelCounts::phases`, found by the addresses of its names (its
/// trace's, stable while it runs) without hashing: a run has a few. Emptied when the run's
/// trace is dropped (`RunMetrics::end`), as an address may then be another name's.
#[derive(Debug, Clone, Default)]
pub(super) struct PhaseCache(Vec<(usize, usize, usize, u32, u32)>);

impl PhaseCache {
    pub(super) fn clear(&mut self) {
        self.0 = Vec::new();
    }
}

#[derive(Debug, Clone, Default)]
struct Counts {
    /// `TALLIED`'s series.
    tally: [i64; 5],
    /// `loopctl_evaluations_total` by `EVALUATION_RESULTS`.
    evaluations: [i64; 3],
    /// `loopctl_evaluation_score`, once a score is seen.
    scores: Option<Val>,
}

/// `loopctl_evaluations_total`'s `result` values, in `Counts::evaluations` order.
pub(super) const EVALUATION_RESULTS: [&str; 3] = ["pass", "fail", "unknown"];

/// A finished phase's place: stop reason and kind (closed sets, by address: one text at two
/// addresses is two places, summed by text in `take`), then label number and phase.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PhaseSlot(usize, usize, NameKey);

/// `PhaseSlot` looked up without cloning its name (hashed alike: `NameRef` as `NameKey`).
#[derive(Hash)]
struct SlotRef<'a>(usize, usize, NameRef<'a>);

impl Equivalent<PhaseSlot> for SlotRef<'_> {
    fn equivalent(&self, k: &PhaseSlot) -> bool {
        self.0 == k.0 && self.1 == k.1 && self.2.equivalent(&k.2)
    }
}

#[derive(Debug, Clone)]
struct PhaseCount {
    label: u32,
    phase: Name,
    reason: &'static str,
    kind: &'static str,
    n: i64,
    /// `loopctl_phase_duration_seconds` observations.
    durations: Val,
}

impl LabelCounts {
    /// Room for `phases` finished-phase places (not grown a few times over for each log).
    pub(super) fn reserve(&mut self, phases: usize) {
        self.phases.reserve(phases);
        self.slots.reserve(phases);
    }

    fn counts(&mut self, label: u32) -> &mut Counts {
        let i = label as usize;
        if i >= self.by_label.len() {
            self.by_label.resize_with(i + 1, Counts::default);
        }
        &mut self.by_label[i]
    }

    /// Tokens and cost (`TALLIED` order) of one event.
    pub(super) fn tally(&mut self, label: u32, amounts: [i64; 5]) {
        // Not compared to zeros first: an array compare is a call to `memcmp`.
        for (t, n) in self.counts(label).tally.iter_mut().zip(amounts) {
            *t = t.saturating_add(n);
        }
    }

    /// One evaluation: its result (an index into `EVALUATION_RESULTS`) and its score in
    /// micro-units, when finite.
    pub(super) fn evaluation(&mut self, label: u32, result: usize, micro: Option<i64>) {
        let c = self.counts(label);
        c.evaluations[result] += 1;
        if let Some(x) = micro {
            let d = Delta::Observe(x, 1);
            let scores = c
                .scores
                .get_or_insert_with(|| d.zero(Metric::EvaluationScore));
            d.apply(scores, Metric::EvaluationScore);
        }
    }

    /// `sign` (1 or -1) times one finished phase, with its duration when known.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn phase(
        &mut self,
        cache: &mut PhaseCache,
        label: u32,
        phase: &Name,
        reason: &'static str,
        kind: &'static str,
        ms: Option<i64>,
        sign: i64,
    ) {
        let (p, r, k) = (
            phase.as_ptr() as usize,
            reason.as_ptr() as usize,
            kind.as_ptr() as usize,
        );
        let cached = cache
            .0
            .iter()
            .find(|c| (c.0, c.1, c.2, c.3) == (p, r, k, label));
        let i = match cached {
            Some(c) => c.4,
            None => {
                let i = self.slot(label, phase, reason, kind);
                cache.0.push((p, r, k, label, i));
                i
            }
        };
        let Some(c) = self.phases.get_mut(i as usize) else {
            return;
        };
        c.n += sign;
        if let Some(ms) = ms {
            Delta::Observe(ms, sign).apply(&mut c.durations, Metric::PhaseDuration);
        }
    }

    /// The place of a finished phase in `phases`, made if new.
    fn slot(&mut self, label: u32, phase: &Name, reason: &'static str, kind: &'static str) -> u32 {
        let (r, k) = (reason.as_ptr() as usize, kind.as_ptr() as usize);
        if let Some(i) = self.slots.get(&SlotRef(r, k, NameRef(label, phase))) {
            return *i;
        }
        let i = self.phases.len() as u32;
        let slot = PhaseSlot(r, k, NameKey(label, phase.clone()));
        self.slots.insert(slot, i);
        self.phases.push(PhaseCount {
            label,
            phase: phase.clone(),
            reason,
            kind,
            n: 0,
            durations: Delta::Observe(0, 0).zero(Metric::PhaseDuration),
        });
        i
    }

    /// The series counted, by label number, emptied.
    pub(super) fn take(&mut self) -> impl Iterator<Item = ((u32, Key), Val)> {
        let by_label = std::mem::take(&mut self.by_label);
        let phases = std::mem::take(&mut self.phases);
        self.slots.clear();
        let labelled = by_label.into_iter().enumerate().flat_map(|(n, c)| {
            let n = n as u32;
            let tally = TALLIED
                .into_iter()
                .zip(c.tally)
                .map(move |(k, t)| ((n, k), Val::Count(t)));
            let evaluations = EVALUATION_RESULTS
                .iter()
                .zip(c.evaluations)
                .map(move |(r, e)| {
                    let key = Key::one(Metric::Evaluations, Label::Static(r));
                    ((n, key), Val::Count(e))
                });
            let scores = c
                .scores
                .map(|v| ((n, Key::new(Metric::EvaluationScore)), v));
            tally.chain(evaluations).chain(scores)
        });
        let phases = phases.into_iter().flat_map(|c| {
            let (n, phase) = (c.label, c.phase);
            let phases = Key::two(
                Metric::Phases,
                Label::Name(phase.clone()),
                Label::Static(c.reason),
            );
            let durations = Key::two(
                Metric::PhaseDuration,
                Label::Name(phase),
                Label::Static(c.kind),
            );
            [
                ((n, phases), Val::Count(c.n)),
                ((n, durations), c.durations),
            ]
        });
        labelled.chain(phases)
    }
}
