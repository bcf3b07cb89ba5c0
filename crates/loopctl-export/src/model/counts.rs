//! Counting in place what every event of a log folded alone adds: one hash-map series per
//! event would be a tenth of the fold.

use loopctl_core::{Dialect, Event};

use super::Metric;
use super::key::{Key, Label};
use super::labels::event_label;

/// Events by dialect and type, counted in place: one hash-map series per event would be a
/// tenth of the fold.
#[derive(Debug, Clone, Default)]
pub(super) struct EventCounts(Vec<(Dialect, &'static str, i64)>);

impl EventCounts {
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
