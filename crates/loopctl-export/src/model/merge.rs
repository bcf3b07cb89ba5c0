//! Models folded apart, added up: each log folded alone on some thread at start-up (and a
//! large log's shards), then merged into the shared model. Every value is an integer sum and
//! every run belongs to one log, so the merge equals one sequential fold, as long as the label
//! caps do not bind (checked: `absorb`). A model folded alone keeps no totals: its series are
//! summed by loop label number (`Local`), added to the totals when it is absorbed.

use super::{MetricState, Options, SourceId, Val, bump_owned};

/// Series a log folded alone has room for from its start.
const LOCAL_SERIES: usize = 48;

impl MetricState {
    /// A model for one log folded alone: source 0 named `name`, no label caps (they are
    /// applied when it is absorbed).
    pub fn alone(options: &Options, name: &str) -> MetricState {
        let mut m = MetricState::new(Options {
            max_loops: usize::MAX,
            max_phases: usize::MAX,
            ..options.clone()
        });
        m.alone = true;
        // Room for a run folder's series (some thirty per loop): not grown (rehashed) a few
        // times over for each of 10,000 logs.
        m.local.series.reserve(LOCAL_SERIES);
        m.local.counts.reserve(LOCAL_SERIES / 2);
        m.add_source(name);
        m
    }

    /// Takes in `other`, a log folded alone (`alone`), as `source` (registered by `add_source`
    /// and fed nothing since). Gives `other` back untouched when a label cap would bind (which
    /// labels fold into `other` then depends on the order of the events, and the caller folds
    /// that log into this model line by line instead), and when its lean fold `needs_full`.
    pub fn absorb(
        &mut self,
        source: SourceId,
        mut other: MetricState,
    ) -> Result<(), Box<MetricState>> {
        if other.caps.has_phases() {
            // Joined shards' phases are in its caps: its own go there too (`admits`).
            other.settle_caps();
        }
        if other.needs_full() || !self.admits(&other) {
            return Err(Box::new(other));
        }
        let joined = std::mem::take(&mut other.joined);
        self.merge(source, other);
        for shard in joined {
            self.merge(source, shard);
        }
        Ok(())
    }

    /// A shard of a log folded alone, all its lines read (on its own thread, beside the other
    /// shards): what its runs counted in place (`LabelCounts`) is made into its series, so that
    /// absorbing it adds each series once, on one thread after the shards' fold.
    pub fn settle(&mut self) {
        let local = &mut self.local;
        for (key, val) in local.counts.take().filter(|(_, v)| !v.is_zero()) {
            bump_owned(&mut local.series, key, val);
        }
    }

    /// Takes in another shard of the same log (folded alone, its runs not this one's). Its
    /// series wait for `absorb`: added here, each would be looked up twice over (here, then in
    /// the shared model), on one thread after the shards' fold.
    pub fn join(&mut self, mut other: MetricState) {
        // The caps `absorb` checks are all the shards'.
        other.settle_caps();
        self.caps.take_in(std::mem::take(&mut other.caps));
        self.joined.append(&mut other.joined);
        self.joined.push(other);
    }

    fn merge(&mut self, source: SourceId, mut other: MetricState) {
        other.settle();
        let kept = other.caps.take_kept_alone();
        let MetricState {
            sources,
            running,
            caps,
            local,
            lean_runs,
            ..
        } = other;
        self.lean_runs += lean_runs;
        self.caps.take_in(caps);
        for (n, phase) in kept {
            self.caps.keep_phase(local.label(n), &phase);
        }
        for ((n, key), val) in local.series {
            let label = local.labels.get(n as usize).map_or("", String::as_str);
            if self.alone {
                let n = self.local.number(label);
                bump_owned(&mut self.local.series, (n, key), val);
            } else {
                self.totals.add(&key.series(label), &val, 1);
            }
        }
        let (Some(Some(mut src)), Some(Some(dst))) =
            (sources.into_iter().next(), self.sources.get_mut(source))
        else {
            return;
        };
        if self.alone {
            dst.events.add(std::mem::take(&mut src.events));
        }
        let counted = src.events.take().map(|(k, n)| (k, Val::Count(n)));
        for (key, val) in src.contribution.0.into_iter().chain(counted) {
            if !self.alone {
                self.totals.add(&key.series(""), &val, 1);
            }
            bump_owned(&mut dst.contribution.0, key, val);
        }
        dst.runs.reserve(src.runs.len());
        for (id, mut r) in src.runs {
            if self.alone {
                r.label_number = self.local.number(&r.loop_label);
            }
            dst.runs.insert(id, r);
        }
        self.running
            .extend(running.into_iter().map(|(_, id)| (source, id)));
    }
}
