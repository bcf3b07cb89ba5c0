//! Counting in place what every event of a log folded alone adds: one hash-map series per
//! event would be a tenth of the fold.

use std::sync::Arc;

use loopctl_core::fold::trace::Name;
use loopctl_core::{Dialect, Event};

use super::key::{Key, Label};
use super::labels::event_label;
use super::{Delta, Metric, Val};

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

/// A run's finished phases by phase, stop reason and kind, counted in place while it is folded
/// alone (a derived step is one per few events): a few entries, found by pointer.
#[derive(Debug, Clone, Default)]
pub(super) struct PhaseCounts(Vec<PhaseCount>);

#[derive(Debug, Clone)]
struct PhaseCount {
    phase: Name,
    reason: &'static str,
    kind: &'static str,
    n: i64,
    /// `loopctl_phase_duration_seconds` observations.
    durations: Val,
}

impl PhaseCounts {
    /// `sign` (1 or -1) times one finished phase, with its duration when known.
    pub(super) fn observe(
        &mut self,
        phase: &Name,
        reason: &'static str,
        kind: &'static str,
        ms: Option<i64>,
        sign: i64,
    ) {
        let same = |c: &&mut PhaseCount| {
            Arc::ptr_eq(&c.phase, phase)
                && std::ptr::eq(c.reason, reason)
                && std::ptr::eq(c.kind, kind)
        };
        let c = match self.0.iter_mut().find(same) {
            Some(c) => c,
            None => {
                self.0.push(PhaseCount {
                    phase: phase.clone(),
                    reason,
                    kind,
                    n: 0,
                    durations: Delta::Observe(0, 0).zero(Metric::PhaseDuration),
                });
                let last = self.0.len() - 1;
                &mut self.0[last]
            }
        };
        c.n += sign;
        if let Some(ms) = ms {
            Delta::Observe(ms, sign).apply(&mut c.durations, Metric::PhaseDuration);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The series and values counted, emptied.
    pub(super) fn take(&mut self) -> impl Iterator<Item = (Key, Val)> {
        std::mem::take(&mut self.0).into_iter().flat_map(|c| {
            let phases = Key::two(
                Metric::Phases,
                Label::Name(c.phase.clone()),
                Label::Static(c.reason),
            );
            let durations = Key::two(
                Metric::PhaseDuration,
                Label::Name(c.phase),
                Label::Static(c.kind),
            );
            [(phases, Val::Count(c.n)), (durations, c.durations)]
        })
    }
}
