//! The keys a run's or a log's contribution is filed under, built without allocating: an event
//! touches several series, and at start-up every event of every log is folded. Label values
//! come from closed sets (`&'static str`) or are phase names the trace already holds
//! (`Arc<str>`, shared). The totals keep plain strings (`SeriesKey`), made once per series
//! when a contribution is added to them.

use std::hash::{Hash, Hasher};

use loopctl_core::fold::trace::Name;

use super::Metric;
use super::totals::SeriesRef;

/// A label value: compared and hashed by its text, whichever way it is held.
#[derive(Debug, Clone)]
pub(super) enum Label {
    Static(&'static str),
    Name(Name),
}

impl Label {
    pub(super) fn as_str(&self) -> &str {
        match self {
            Label::Static(s) => s,
            Label::Name(n) => n,
        }
    }
}

impl PartialEq for Label {
    fn eq(&self, other: &Label) -> bool {
        // Mostly the same text held twice (one constant, one phase name): no byte compare then.
        let (a, b) = (self.as_str(), other.as_str());
        a.len() == b.len() && (a.is_empty() || std::ptr::eq(a.as_ptr(), b.as_ptr()) || a == b)
    }
}

impl Eq for Label {}

impl Hash for Label {
    /// The length and the first and last 8 bytes (equal texts hash alike): label values are
    /// short, and one multiply-add per word beats hashing every byte.
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_text(self.as_str(), state);
    }
}

/// `Label`'s hash of a text however held (a key looked up by a borrowed text hashes alike).
fn hash_text<H: Hasher>(text: &str, state: &mut H) {
    let b = text.as_bytes();
    let n = b.len();
    // Fixed-size loads (overlapping when short), no copy of a variable length.
    let (first, last) = match n {
        8.. => (load8(b), load8(&b[n - 8..])),
        4..=7 => (u64::from(load4(b)), u64::from(load4(&b[n - 4..]))),
        1..=3 => {
            let w = u64::from(b[0]) | u64::from(b[n / 2]) << 8 | u64::from(b[n - 1]) << 16;
            (w, 0)
        }
        0 => (0, 0),
    };
    state.write_u64(first);
    state.write_u64(last ^ n as u64);
}

fn load8(b: &[u8]) -> u64 {
    b.first_chunk::<8>().map_or(0, |w| u64::from_le_bytes(*w))
}

fn load4(b: &[u8]) -> u32 {
    b.first_chunk::<4>().map_or(0, |w| u32::from_le_bytes(*w))
}

/// A name under a loop label number, hashed and compared by its text (`NameRef` finds it
/// without a clone).
#[derive(Debug, Clone)]
pub(super) struct NameKey(pub(super) u32, pub(super) Name);

pub(super) struct NameRef<'a>(pub(super) u32, pub(super) &'a str);

impl Hash for NameRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u32(self.0);
        hash_text(self.1, state);
    }
}

impl Hash for NameKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        NameRef(self.0, &self.1).hash(state);
    }
}

impl hashbrown::Equivalent<NameKey> for NameRef<'_> {
    fn equivalent(&self, k: &NameKey) -> bool {
        self.0 == k.0 && loopctl_core::fold::text::same_text(self.1, &k.1)
    }
}

impl PartialEq for NameKey {
    fn eq(&self, o: &NameKey) -> bool {
        hashbrown::Equivalent::equivalent(&NameRef(o.0, &o.1), self)
    }
}

impl Eq for NameKey {}

const NONE: Label = Label::Static("");

/// A series without its `loop` label: the metric and its other labels in `Metric::labels`
/// order (unused places empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) metric: Metric,
    labels: [Label; 2],
}

impl Key {
    pub(super) const fn one_static(metric: Metric, a: &'static str) -> Key {
        Key {
            metric,
            labels: [Label::Static(a), NONE],
        }
    }

    pub(super) const fn new(metric: Metric) -> Key {
        Key {
            metric,
            labels: [NONE, NONE],
        }
    }

    pub(super) fn one(metric: Metric, a: Label) -> Key {
        Key {
            metric,
            labels: [a, NONE],
        }
    }

    pub(super) fn two(metric: Metric, a: Label, b: Label) -> Key {
        Key {
            metric,
            labels: [a, b],
        }
    }

    /// The labels the metric has besides `loop`.
    fn own(&self) -> &[Label] {
        let n = self.metric.labels().len() - usize::from(self.metric.has_loop());
        &self.labels[..n.min(2)]
    }

    /// The full series, borrowed: `loop_label` first where the metric has a `loop` label.
    pub(super) fn series<'a>(&'a self, loop_label: &'a str) -> SeriesRef<'a> {
        SeriesRef {
            metric: self.metric,
            loop_label: self.metric.has_loop().then_some(loop_label),
            own: self.own(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use super::super::SeriesKey;
    use super::super::totals::Series;
    use super::*;

    fn full(k: &Key, loop_label: &str) -> SeriesKey {
        Series::from(&k.series(loop_label)).0
    }

    #[test]
    fn labels_held_either_way_are_one_key() {
        let a = Key::two(
            Metric::Phases,
            Label::Name(Arc::from("PLAN")),
            Label::Static("end_turn"),
        );
        let b = Key::two(
            Metric::Phases,
            Label::Static("PLAN"),
            Label::Name(Arc::from("end_turn")),
        );
        assert_eq!(a, b);
        let set: HashSet<Key> = [a, b].into_iter().collect();
        assert_eq!(set.len(), 1);
        let c = Key::two(
            Metric::Phases,
            Label::Static("PLAN"),
            Label::Static("error"),
        );
        assert_ne!(set.iter().next(), Some(&c));
    }

    #[test]
    fn equal_texts_of_any_length_hash_alike_however_held() {
        use std::hash::BuildHasher;
        let h = rustc_hash::FxBuildHasher;
        let texts: &[&'static str] = &[
            "",
            "a",
            "ab",
            "abc",
            "abcd",
            "abcde",
            "PLAN",
            "GENERATE",
            "end_turn",
            "REFINE_X",
            "PREPARE_CHECKS",
            "cache_creation",
            "a_much_longer_label_value",
        ];
        let mut seen = HashSet::new();
        for t in texts {
            let held = Label::Name(Arc::from(*t));
            assert_eq!(h.hash_one(Label::Static(t)), h.hash_one(&held), "{t:?}");
            seen.insert(h.hash_one(held));
        }
        assert_eq!(seen.len(), texts.len(), "distinct short texts hash apart");
    }

    #[test]
    fn full_keys_put_the_loop_first_and_only_where_the_metric_has_it() {
        let k = Key::two(
            Metric::Phases,
            Label::Static("PLAN"),
            Label::Static("end_turn"),
        );
        assert_eq!(
            full(&k, "aif"),
            (
                Metric::Phases,
                vec!["aif".into(), "PLAN".into(), "end_turn".into()]
            )
        );
        assert_eq!(
            full(&Key::new(Metric::RunsStarted), "aif"),
            (Metric::RunsStarted, vec!["aif".to_string()])
        );
        assert_eq!(
            full(
                &Key::two(
                    Metric::Events,
                    Label::Static("native"),
                    Label::Static("stopped")
                ),
                "aif"
            ),
            (Metric::Events, vec!["native".into(), "stopped".into()])
        );
        assert_eq!(
            full(
                &Key::one(Metric::LogFindings, Label::Static("bad_line")),
                ""
            ),
            (Metric::LogFindings, vec!["bad_line".to_string()])
        );
    }
}
