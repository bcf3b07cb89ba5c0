//! The caps on the labels that grow with the logs (`loop`, `phase`): the first values seen are
//! kept, later ones fold into `other` and are named once.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use loopctl_core::fold::text::same_text;
use loopctl_core::fold::trace::Name;

use super::key::{NameKey, NameRef};
use super::{Label, MetricState, OTHER};

/// Folded names reported (each once) before the model stops naming them.
const MAX_NAMED: usize = 100;

/// The labels that grow with the logs (`loop`, `phase`), capped: the first values seen are
/// kept, later ones fold into `other`. Kept values stay kept (a label a series was filed under
/// is the one it is taken back from).
#[derive(Debug, Clone, Default)]
pub(super) struct Caps {
    loops: HashSet<String>,
    phases: HashMap<String, HashSet<String>>,
    /// What was folded, each named once (up to `MAX_NAMED`).
    named: HashSet<String>,
    notices: Vec<String>,
    /// In a model folded alone (no cap binds), the phases kept, by loop label number
    /// (`Local`), in place of `phases`: a run folder's dozen phases, hashed and copied into
    /// maps for each of 10,000 logs, were a fiftieth of the fold. `absorb` reads the list; a
    /// shard's goes into `phases` before it is joined (`MetricState::settle_caps`).
    kept_alone: Vec<(u32, Name)>,
    /// `kept_alone` hashed, once it is long (a merged log's loops times their phases, looked
    /// up for each phase of each run).
    kept_index: hashbrown::HashSet<NameKey, rustc_hash::FxBuildHasher>,
}

/// `kept_alone` is looked up by hash past this length.
const KEPT_SCAN: usize = 16;

impl Caps {
    fn fold(&mut self, what: String, why: String) {
        if self.named.len() < MAX_NAMED && self.named.insert(what.clone()) {
            self.notices
                .push(format!("{what} folded into \"{OTHER}\": {why}"));
            if self.named.len() == MAX_NAMED {
                self.notices.push(format!(
                    "further values folded into \"{OTHER}\" are not named ({MAX_NAMED} were)"
                ));
            }
        }
    }
}

impl MetricState {
    /// `label` if it is a kept loop or there is room for it, else `other` (`max_loops`).
    pub(super) fn admit_loop(&mut self, label: String) -> String {
        let caps = &mut self.caps;
        if label == OTHER || caps.loops.contains(&label) {
            return label;
        }
        if caps.loops.len() < self.options.max_loops {
            caps.loops.insert(label.clone());
            return label;
        }
        let why = format!("more than {} loops (--max-loops)", self.options.max_loops);
        caps.fold(format!("loop {label:?}"), why);
        OTHER.to_string()
    }

    /// `phase` if it is a kept phase of `lp` or there is room for it, else `other`
    /// (`max_phases`).
    pub(super) fn admit_phase(&mut self, lp: &str, label_number: u32, phase: &Name) -> Label {
        if self.alone {
            let caps = &mut self.caps;
            let known = if caps.kept_alone.len() < KEPT_SCAN {
                let mut kept = caps.kept_alone.iter();
                kept.any(|(n, p)| *n == label_number && same_text(p, phase))
            } else {
                if caps.kept_index.is_empty() {
                    let kept = caps.kept_alone.iter().cloned();
                    caps.kept_index.extend(kept.map(|(n, p)| NameKey(n, p)));
                }
                caps.kept_index.contains(&NameRef(label_number, phase))
            };
            if !known {
                caps.kept_alone.push((label_number, phase.clone()));
                if !caps.kept_index.is_empty() {
                    caps.kept_index.insert(NameKey(label_number, phase.clone()));
                }
            }
            return Label::Name(phase.clone());
        }
        let max = self.options.max_phases;
        if !self.caps.phases.contains_key(lp) {
            self.caps.phases.insert(lp.to_string(), HashSet::default());
        }
        let Some(kept) = self.caps.phases.get_mut(lp) else {
            return Label::Static(OTHER);
        };
        if **phase == *OTHER || kept.contains(&**phase) {
            return Label::Name(phase.clone());
        }
        if kept.len() < max {
            kept.insert(phase.to_string());
            return Label::Name(phase.clone());
        }
        let why = format!("loop {lp:?} has more than {max} phases (--max-phases)");
        self.caps
            .fold(format!("phase {phase:?} of loop {lp:?}"), why);
        Label::Static(OTHER)
    }

    /// A model folded alone: the phases it kept into its caps, under their loop labels' text
    /// (a shard's, before it is joined to another shard with other label numbers).
    pub(super) fn settle_caps(&mut self) {
        self.caps.kept_index.clear();
        for (n, phase) in std::mem::take(&mut self.caps.kept_alone) {
            self.caps.keep_phase(self.local.label(n), &phase);
        }
    }

    /// Whether this model has room for all `other` kept (`Caps::admits`), `other` a model
    /// folded alone whose phases are all in its caps or all in its short list (`kept_alone`).
    pub(super) fn admits(&self, other: &MetricState) -> bool {
        let (loops, phases) = (self.options.max_loops, self.options.max_phases);
        if !self.caps.admits(&other.caps, loops, phases) {
            return false;
        }
        // Phases new here, by `other`'s label number (the list holds each phase once).
        let mut new: Vec<(u32, usize)> = Vec::new();
        for (n, phase) in &other.caps.kept_alone {
            let lp = other.local.label(*n);
            if self
                .caps
                .phases
                .get(lp)
                .is_some_and(|k| k.contains(&**phase))
            {
                continue;
            }
            match new.iter_mut().find(|(m, _)| m == n) {
                Some((_, count)) => *count += 1,
                None => new.push((*n, 1)),
            }
        }
        new.iter().all(|&(n, count)| {
            let kept = self.caps.phases.get(other.local.label(n));
            kept.map_or(0, HashSet::len) + count <= phases
        })
    }

    /// The `phase` label of `phase` in loop `lp` as it stands (for the live-run gauges).
    pub fn phase_label<'a>(&self, lp: &str, phase: &'a str) -> &'a str {
        match self.caps.phases.get(lp) {
            Some(k) if !k.contains(phase) && k.len() >= self.options.max_phases => OTHER,
            _ => phase,
        }
    }

    /// What was folded into `other` since the last call, to report once (stderr).
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.caps.notices)
    }
}

impl Caps {
    /// Whether every label `other` (a fold without caps) kept is kept here or has room: then
    /// folding its events here would have folded none into `other`. Admission is first come,
    /// first kept and never undone, so this is exact whatever the order of its events.
    pub(super) fn admits(&self, other: &Caps, max_loops: usize, max_phases: usize) -> bool {
        let new_loops = other.loops.iter().filter(|l| !self.loops.contains(*l));
        if self.loops.len() + new_loops.count() > max_loops {
            return false;
        }
        other.phases.iter().all(|(lp, phases)| {
            let kept = self.phases.get(lp);
            let new = phases
                .iter()
                .filter(|p| kept.is_none_or(|k| !k.contains(*p)));
            kept.map_or(0, HashSet::len) + new.count() <= max_phases
        })
    }

    /// Keeps `phase` under loop `lp` (a copy of each only when it is new).
    pub(super) fn keep_phase(&mut self, lp: &str, phase: &str) {
        let kept = match self.phases.get_mut(lp) {
            Some(k) => k,
            None => self.phases.entry(lp.to_string()).or_default(),
        };
        if !kept.contains(phase) {
            kept.insert(phase.to_string());
        }
    }

    /// Whether any phase is kept in the maps (not only in the short list).
    pub(super) fn has_phases(&self) -> bool {
        !self.phases.is_empty()
    }

    /// The short list of a model folded alone (`kept_alone`), emptied.
    pub(super) fn take_kept_alone(&mut self) -> Vec<(u32, Name)> {
        self.kept_index.clear();
        std::mem::take(&mut self.kept_alone)
    }

    /// Keeps `other`'s labels too.
    pub(super) fn take_in(&mut self, other: Caps) {
        self.loops.extend(other.loops);
        for (lp, phases) in other.phases {
            self.phases.entry(lp).or_default().extend(phases);
        }
    }
}
