//! The totals: every series' value with its full label values, kept up to date as runs' and
//! logs' contributions are added and taken back. A contribution's series are looked up by
//! borrowed label values (`SeriesRef`): adding one (10,000 runs at start-up, some thirty
//! series each) allocates only for a series not seen before.

use std::hash::{Hash, Hasher};

use hashbrown::hash_map::EntryRef;
use hashbrown::{Equivalent, HashMap};
use rustc_hash::FxBuildHasher;

use super::key::Label;
use super::{Delta, Metric, SeriesKey, Val};

/// A series as the totals hold it (`SeriesKey`), hashed as its borrowed forms are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Series(pub(super) SeriesKey);

/// The same bytes for a series however it is held: the metric, then each label value.
#[inline(always)]
fn hash_series<'a, H: Hasher>(h: &mut H, m: Metric, labels: impl Iterator<Item = &'a str>) {
    h.write_u8(m as u8);
    for l in labels {
        h.write(l.as_bytes());
        h.write_u8(0xff);
    }
}

impl Hash for Series {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_series(h, self.0.0, self.0.1.iter().map(String::as_str));
    }
}

/// A series by borrowed label values: a contribution's key and the run's `loop` label.
pub(super) struct SeriesRef<'a> {
    pub(super) metric: Metric,
    /// `None` for a metric without a `loop` label.
    pub(super) loop_label: Option<&'a str>,
    /// The other labels, in `Metric::labels` order.
    pub(super) own: &'a [Label],
}

impl SeriesRef<'_> {
    fn labels(&self) -> impl Iterator<Item = &str> {
        self.loop_label
            .into_iter()
            .chain(self.own.iter().map(Label::as_str))
    }
}

impl Hash for SeriesRef<'_> {
    #[inline(always)]
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_series(h, self.metric, self.labels());
    }
}

impl Equivalent<Series> for SeriesRef<'_> {
    fn equivalent(&self, s: &Series) -> bool {
        let (m, labels) = &s.0;
        *m == self.metric
            && labels.len() == usize::from(self.loop_label.is_some()) + self.own.len()
            && self.labels().zip(labels).all(|(a, b)| a == b)
    }
}

impl From<&SeriesRef<'_>> for Series {
    fn from(r: &SeriesRef<'_>) -> Series {
        Series((r.metric, r.labels().map(str::to_string).collect()))
    }
}

/// A `SeriesKey` looked up as it is.
struct Owned<'a>(&'a SeriesKey);

impl Hash for Owned<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_series(h, self.0.0, self.0.1.iter().map(String::as_str));
    }
}

impl Equivalent<Series> for Owned<'_> {
    fn equivalent(&self, s: &Series) -> bool {
        *self.0 == s.0
    }
}

/// Every series with a value (a series back at zero is removed).
#[derive(Debug, Clone, Default)]
pub(super) struct Totals(HashMap<Series, Val, FxBuildHasher>);

impl Totals {
    /// Adds `sign` times `val` to a series.
    pub(super) fn add(&mut self, key: &SeriesRef<'_>, val: &Val, sign: i64) {
        self.change(key, |v| v.add(val, sign), || val.zero_like());
    }

    /// Adds `d` to a series of metric `m`.
    pub(super) fn apply(&mut self, key: &SeriesRef<'_>, d: Delta) {
        self.change(key, |v| d.apply(v, key.metric), || d.zero(key.metric));
    }

    fn change(
        &mut self,
        key: &SeriesRef<'_>,
        f: impl FnOnce(&mut Val),
        zero: impl FnOnce() -> Val,
    ) {
        match self.0.entry_ref(key) {
            EntryRef::Occupied(mut e) => {
                f(e.get_mut());
                if e.get().is_zero() {
                    e.remove();
                }
            }
            EntryRef::Vacant(e) => {
                let mut v = zero();
                f(&mut v);
                if !v.is_zero() {
                    e.insert(v);
                }
            }
        }
    }

    pub(super) fn get(&self, key: &SeriesKey) -> Option<&Val> {
        self.0.get(&Owned(key))
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&SeriesKey, &Val)> {
        self.0.iter().map(|(s, v)| (&s.0, v))
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &SeriesKey> {
        self.0.keys().map(|s| &s.0)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn a_series_is_found_by_its_borrowed_form_and_only_by_it() {
        let own = [Label::Static("PLAN"), Label::Static("end_turn")];
        let r = SeriesRef {
            metric: Metric::Phases,
            loop_label: Some("aif"),
            own: &own,
        };
        let owned = Series::from(&r);
        assert_eq!(
            owned.0,
            (
                Metric::Phases,
                vec!["aif".into(), "PLAN".into(), "end_turn".into()]
            )
        );
        let h = FxBuildHasher;
        assert_eq!(h.hash_one(&r), h.hash_one(&owned));
        assert_eq!(h.hash_one(Owned(&owned.0)), h.hash_one(&owned));
        assert!(r.equivalent(&owned));
        // The same bytes split otherwise is another series.
        let moved = [Label::Static("aifPLAN"), Label::Static("end_turn")];
        let other = SeriesRef {
            loop_label: Some(""),
            own: &moved,
            ..r
        };
        assert!(!other.equivalent(&owned));
        assert_ne!(h.hash_one(&other), h.hash_one(&owned));

        let mut t = Totals::default();
        t.apply(&r, Delta::Count(2));
        t.add(&r, &Val::Count(3), 1);
        assert_eq!(t.get(&owned.0), Some(&Val::Count(5)));
        t.apply(&other, Delta::Count(1));
        assert_eq!(t.keys().count(), 2);
        t.add(&r, &Val::Count(5), -1);
        assert_eq!(t.get(&owned.0), None, "a series back at zero is removed");
    }
}
