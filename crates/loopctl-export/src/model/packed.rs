//! An ended run's contribution, packed: a merged log interleaves tens of thousands of runs, and
//! a contribution as a hash map of some thirty series (a dozen of them histograms) costs about
//! 6 KB, against a few hundred bytes packed. It is still needed after the end: to take the run
//! back with its log, to move it to a new `loop` label, and for the events of a run resumed
//! later (it is unpacked then). Label values are interned per model.

use rustc_hash::FxHashMap as HashMap;

use super::key::{Key, Label};
use super::{Contribution, Hist, Metric, Val};

/// Label values by number.
#[derive(Debug, Clone, Default)]
pub(super) struct Interner {
    labels: Vec<Label>,
    ids: HashMap<Label, u32>,
}

impl Interner {
    fn id(&mut self, l: &Label) -> u32 {
        if let Some(id) = self.ids.get(l) {
            return *id;
        }
        let id = self.labels.len() as u32;
        self.labels.push(l.clone());
        self.ids.insert(l.clone(), id);
        id
    }

    fn label(&self, id: u64) -> Label {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.labels.get(i))
            .cloned()
            .unwrap_or(Label::Static(""))
    }
}

/// Series a run usually touches (some thirty).
const OPEN_SERIES: usize = 32;

/// Called on each series and value of a contribution.
pub(super) type Visit<'a> = dyn FnMut(&Key, &Val) + 'a;

/// A run's contribution: a map while the run runs, packed bytes once it has ended (one of the
/// two empty).
#[derive(Debug, Clone, Default)]
pub(super) struct RunContribution {
    open: Contribution,
    packed: Option<Box<[u8]>>,
}

impl RunContribution {
    #[cfg(test)]
    pub(super) fn is_packed(&self) -> bool {
        self.packed.is_some()
    }

    /// The map, unpacked first if need be.
    pub(super) fn open(&mut self, labels: &Interner) -> &mut Contribution {
        if self.open.0.capacity() == 0 {
            // Room for a run's usual series: no growing (rehashing) as they appear.
            self.open.0.reserve(OPEN_SERIES);
        }
        if let Some(bytes) = self.packed.take() {
            self.open.0.extend(Entries::new(&bytes, labels));
        }
        &mut self.open
    }

    pub(super) fn pack(&mut self, labels: &mut Interner) {
        if self.open.0.is_empty() {
            return; // packed already, or nothing to pack
        }
        self.open(labels);
        let open = std::mem::take(&mut self.open);
        self.packed = Some(pack(open.0.iter(), labels));
    }

    /// Each series and value.
    pub(super) fn for_each(&self, labels: &Interner, mut f: impl FnMut(&Key, &Val)) {
        self.open.0.iter().for_each(|(k, v)| f(k, v));
        if let Some(bytes) = &self.packed {
            Entries::new(bytes, labels).for_each(|(k, v)| f(&k, &v));
        }
    }

    /// Moves the contribution from a model numbering its labels by `from` to one numbering
    /// them by `to` (a model folded apart, merged), with `f` on each series and value.
    /// `renumbered` is `from`'s numbers in `to`, filled as they are met: the packed bytes are
    /// copied with new numbers, not unpacked and packed again.
    pub(super) fn renumber(
        &mut self,
        from: &Interner,
        to: &mut Interner,
        renumbered: &mut Vec<Option<u32>>,
        mut f: Option<&mut Visit<'_>>,
    ) {
        if let Some(f) = f.as_deref_mut() {
            self.open.0.iter().for_each(|(k, v)| f(k, v));
        }
        let Some(bytes) = &self.packed else {
            return;
        };
        let mut out = Vec::with_capacity(bytes.len());
        let mut scratch = Scratch::default();
        let mut entries = Entries::new(bytes, from);
        while let Some((metric, ids, value)) = entries.raw() {
            if let Some(f) = f.as_deref_mut()
                && let Some(val) = Entries::new(value, from).value_in(metric, &mut scratch)
            {
                f(
                    &Key::two(metric, from.label(ids[0]), from.label(ids[1])),
                    val,
                );
            }
            out.push(metric_byte(metric));
            for id in ids {
                let i = usize::try_from(id).unwrap_or(usize::MAX);
                if renumbered.len() <= i && i < from.labels.len() {
                    renumbered.resize(i + 1, None);
                }
                // A label is looked up (and cloned) once per number, not once per entry.
                let new = match renumbered.get_mut(i) {
                    Some(Some(n)) => *n,
                    Some(slot) => *slot.insert(to.id(&from.label(id))),
                    None => to.id(&from.label(id)),
                };
                put(&mut out, u128::from(new));
            }
            out.extend_from_slice(value);
        }
        self.packed = Some(out.into_boxed_slice());
    }
}

fn metric_byte(m: Metric) -> u8 {
    Metric::ALL.iter().position(|x| *x == m).unwrap_or(0) as u8
}

fn pack<'a>(entries: impl Iterator<Item = (&'a Key, &'a Val)>, labels: &mut Interner) -> Box<[u8]> {
    let mut out = Vec::new();
    for (key, val) in entries {
        let metric = Metric::ALL
            .iter()
            .position(|m| *m == key.metric)
            .unwrap_or(0);
        out.push(metric as u8);
        for l in key.labels() {
            put(&mut out, u128::from(labels.id(l)));
        }
        match val {
            Val::Count(n) => {
                out.push(0);
                put(&mut out, zigzag(i128::from(*n)));
            }
            Val::Hist(h) => {
                out.push(1);
                put(&mut out, zigzag(i128::from(h.count)));
                put(&mut out, zigzag(h.sum));
                let used = h.buckets.iter().filter(|b| **b != 0).count();
                put(&mut out, used as u128);
                for (i, b) in h.buckets.iter().enumerate().filter(|(_, b)| **b != 0) {
                    put(&mut out, i as u128);
                    put(&mut out, zigzag(i128::from(*b)));
                }
            }
        }
    }
    out.into_boxed_slice()
}

/// A value decoded in place, of either kind.
struct Scratch {
    count: Val,
    hist: Val,
}

impl Default for Scratch {
    fn default() -> Scratch {
        let hist = Hist {
            buckets: Vec::new(),
            count: 0,
            sum: 0,
        };
        Scratch {
            count: Val::Count(0),
            hist: Val::Hist(hist),
        }
    }
}

/// The entries of packed bytes.
struct Entries<'a> {
    bytes: &'a [u8],
    labels: &'a Interner,
}

impl<'a> Entries<'a> {
    fn new(bytes: &'a [u8], labels: &'a Interner) -> Self {
        Entries { bytes, labels }
    }

    fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(*b)
    }

    fn num(&mut self) -> Option<u128> {
        let mut n = 0u128;
        for shift in (0..128).step_by(7) {
            let b = self.byte()?;
            n |= u128::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    fn int(&mut self) -> Option<i64> {
        i64::try_from(unzigzag(self.num()?)).ok()
    }

    /// The next entry as stored: its metric, its label numbers and its value's bytes.
    fn raw(&mut self) -> Option<(Metric, [u64; 2], &'a [u8])> {
        let metric = *Metric::ALL.get(usize::from(self.byte()?))?;
        let ids = [self.num()? as u64, self.num()? as u64];
        let start = self.bytes;
        if self.byte()? == 0 {
            self.num()?;
        } else {
            self.num()?;
            self.num()?;
            for _ in 0..self.num()? {
                self.num()?;
                self.num()?;
            }
        }
        let len = start.len() - self.bytes.len();
        Some((metric, ids, &start[..len]))
    }

    fn entry(&mut self) -> Option<(Key, Val)> {
        let (metric, [a, b], value) = self.raw()?;
        let key = Key::two(metric, self.labels.label(a), self.labels.label(b));
        Some((key, Entries::new(value, self.labels).value(metric)?))
    }

    /// `value` into `scratch`'s values (no allocation per histogram).
    fn value_in<'s>(&mut self, metric: Metric, scratch: &'s mut Scratch) -> Option<&'s Val> {
        if self.byte()? == 0 {
            scratch.count = Val::Count(self.int()?);
            return Some(&scratch.count);
        }
        let (count, sum) = (self.int()?, unzigzag(self.num()?));
        let Val::Hist(h) = &mut scratch.hist else {
            return None;
        };
        h.buckets.clear();
        h.buckets.resize(metric.buckets().len() + 1, 0);
        for _ in 0..self.num()? {
            let i = usize::try_from(self.num()?).ok()?;
            *h.buckets.get_mut(i)? = self.int()?;
        }
        (h.count, h.sum) = (count, sum);
        Some(&scratch.hist)
    }

    fn value(&mut self, metric: Metric) -> Option<Val> {
        Some(match self.byte()? {
            0 => Val::Count(self.int()?),
            _ => {
                let count = self.int()?;
                let sum = unzigzag(self.num()?);
                let mut buckets = vec![0; metric.buckets().len() + 1];
                for _ in 0..self.num()? {
                    let i = usize::try_from(self.num()?).ok()?;
                    *buckets.get_mut(i)? = self.int()?;
                }
                Val::Hist(Hist {
                    buckets,
                    count,
                    sum,
                })
            }
        })
    }
}

impl Iterator for Entries<'_> {
    type Item = (Key, Val);

    fn next(&mut self) -> Option<(Key, Val)> {
        // Only `pack` writes these bytes: a short read is the end.
        self.entry()
    }
}

fn put(out: &mut Vec<u8>, mut n: u128) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn zigzag(n: i128) -> u128 {
    ((n << 1) ^ (n >> 127)) as u128
}

fn unzigzag(n: u128) -> i128 {
    ((n >> 1) as i128) ^ -((n & 1) as i128)
}
