//! `Watch`: the detectors `triggered` finds, learnt from a growing trace at the cost of what the
//! trace added since the last look rather than of the whole trace. The metric fold asks after
//! every evaluation of every running run, and `triggered` rescans the run each time (quadratic
//! in a long run). `triggered` stays the oracle: tests compare the two after every event.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::{Config, Detector, EPS, Reset, normalise_error, rule_set, stalled, swings};
use crate::analysis::liveness::Liveness;
use crate::decode::timestamp::Ts;
use crate::fold::trace::{Attempt, Evaluation, Name, Trace};

/// What `triggered` reads of one run's trace, kept up to date as the trace grows.
///
/// Pass the same trace each time, as `Trace::apply` grows it (any mode): `Watch::triggered`
/// then equals `stagnation::triggered` on the trace as it is. A call costs the evaluations and
/// phase attempts added since the previous one, plus the attempts still open. A rare shape of
/// log costs one rescan of the attempts instead: an attempt that finishes after a later one of
/// its phase has, a `kind` first told by `phase_finished` that makes an attempt pre or post, an
/// attempt of an iteration after the next iteration's has started (that one rescans the
/// iterations, not the attempts).
#[derive(Debug, Clone)]
pub struct Watch {
    cfg: Config,
    /// Evaluations read.
    evaluations: usize,
    /// The score rule: evaluations counted, and the last scored one (its index).
    counted: u64,
    prev_scored: Option<usize>,
    /// The trailing run of evaluations failing the same non-empty rule set: the last of them
    /// (its index), and its length.
    rules_of: Option<usize>,
    rules_run: usize,
    /// The last `oscillation_window` scores, and whether they oscillate.
    window: VecDeque<f64>,
    oscillating: bool,
    phases: Phases,
}

impl Watch {
    pub fn new(cfg: &Config) -> Watch {
        Watch {
            cfg: cfg.clone(),
            evaluations: 0,
            counted: 0,
            prev_scored: None,
            rules_of: None,
            rules_run: 0,
            window: VecDeque::new(),
            oscillating: false,
            phases: Phases::default(),
        }
    }

    /// `stagnation::triggered(trace, cfg, now, runner)`, with `cfg` the watch's.
    pub fn triggered(&mut self, trace: &Trace, now: Option<Ts>, runner: Liveness) -> Vec<Detector> {
        if trace.evaluations.len() < self.evaluations {
            // Not the trace it read so far.
            *self = Watch::new(&self.cfg);
        }
        let mut scored = false;
        for i in self.evaluations..trace.evaluations.len() {
            scored |= self.evaluation(&trace.evaluations, i);
        }
        self.evaluations = trace.evaluations.len();
        if scored {
            self.oscillating =
                self.window.len() >= 4 && swings(self.window.make_contiguous(), &self.cfg).3;
        }
        let (repeated, unchanged) = self.phases.look(trace, &self.cfg);
        let mut out = Vec::new();
        if self.counted >= self.cfg.limit.max(1) {
            out.push(Detector::Score);
        }
        if self.rules_run >= self.cfg.repeat.max(1) as usize || repeated {
            out.push(Detector::RepeatedFailure);
        }
        if unchanged {
            out.push(Detector::NoChange);
        }
        if self.oscillating {
            out.push(Detector::Oscillation);
        }
        // `stalled` judges only a live runner, with a clock.
        if now.is_some()
            && runner == Liveness::Alive
            && stalled(trace, &self.cfg, now, runner).triggered
        {
            out.push(Detector::Stalled);
        }
        out
    }

    /// Reads one more evaluation, as `score_streak`, `failed_rules_streak` and the oscillation
    /// window do; whether it has a score.
    fn evaluation(&mut self, evs: &[Evaluation], i: usize) -> bool {
        let e = &evs[i];
        if e.failed_rules().is_empty() {
            self.rules_run = 0;
        } else if self.rules_run > 0 && self.rules_of.is_some_and(|j| same_rules(&evs[j], e)) {
            self.rules_run += 1;
        } else {
            self.rules_run = 1;
        }
        self.rules_of = Some(i);
        let Some(s) = e.score else {
            return false;
        };
        let progress = s - e.previous_score >= self.cfg.min_delta - EPS;
        let new_phase = self.prev_scored.is_some_and(|j| {
            let p = &evs[j].quality_phase;
            !Arc::ptr_eq(p, &e.quality_phase) && **p != *e.quality_phase
        });
        if progress {
            if self.cfg.reset == Reset::OnProgress {
                self.counted = 0;
            }
        } else if !e.has_blockers() && !new_phase {
            self.counted += 1;
        }
        self.prev_scored = Some(i);
        if self.cfg.oscillation_window > 0 {
            if self.window.len() >= self.cfg.oscillation_window {
                self.window.pop_front();
            }
            self.window.push_back(s);
        }
        true
    }
}

/// What the repeated-failure and no-change detectors read of `Trace::phases`.
#[derive(Debug, Clone, Default)]
struct Phases {
    /// Reading explicit attempts (else derived steps).
    explicit: bool,
    /// Steps were read while `Trace::step_ends` was `Some` (`steps` is rebuilt when it starts).
    ends: bool,
    /// Explicit attempts read; or derived steps settled: all but the last, which may grow.
    seen: usize,
    /// Explicit attempts read while unfinished, in index order, each with whether it was then a
    /// member of its iteration.
    open: Vec<(usize, bool)>,
    /// Per phase name, the trailing run of finished attempts with the same error.
    fails: Vec<FailRun>,
    /// Phase names whose run is at least `repeat` long.
    hits: usize,
    /// Phase names whose run is under way (at least one failure long).
    failing: usize,
    /// Some attempt carries a git fingerprint.
    git: bool,
    /// Loop iterations in order of first appearance, and where each is in `groups`.
    groups: Vec<Group>,
    group_at: FxHashMap<u64, usize>,
    /// The no-change streak after the first `folded.0` groups is `folded.1`.
    folded: (usize, usize),
    /// The lowest group changed since the last fold, if any.
    changed: Option<usize>,
}

#[derive(Debug, Clone)]
struct FailRun {
    name: Name,
    /// The normalised error, as `failure_streaks` keys it ("" after a success).
    key: String,
    len: usize,
    /// The highest index of a finished attempt read.
    last: usize,
}

/// A loop iteration's attempts (pre and post phases are not iterations).
#[derive(Debug, Clone)]
struct Group {
    first: usize,
    last: usize,
    /// Members not finished yet.
    open: usize,
}

/// What one iteration does to the no-change streak.
enum Change {
    /// Still under way: not judged yet.
    Skip,
    /// Left the commit and work tree as it found them.
    Same,
    /// Changed them, or nothing to compare.
    Reset,
}

impl Group {
    fn change(&self, attempts: &[Attempt]) -> Change {
        if self.open > 0 {
            return Change::Skip;
        }
        let (first, last) = (
            attempts[self.first].explicit(),
            attempts[self.last].explicit(),
        );
        let pairs = [
            (&first.commit_start, &last.commit_end),
            (&first.worktree_start, &last.worktree_end),
        ];
        let known = pairs.iter().filter(|(a, b)| a.is_some() && b.is_some());
        let (mut n, mut same) = (0, true);
        for (a, b) in known {
            n += 1;
            same &= a == b;
        }
        if n > 0 && same {
            Change::Same
        } else {
            Change::Reset
        }
    }
}

/// Whether two evaluations fail the same set of rules, as `rule_set` compares them, without
/// building the sets (short lists, the usual: each in the other).
fn same_rules(a: &Evaluation, b: &Evaluation) -> bool {
    let (x, y) = (a.failed_rules(), b.failed_rules());
    if x == y {
        return true;
    }
    if x.len() > 16 || y.len() > 16 {
        return rule_set(a) == rule_set(b);
    }
    x.iter().all(|r| y.contains(r)) && y.iter().all(|r| x.contains(r))
}

fn has_git(a: &Attempt) -> bool {
    let x = a.explicit();
    x.commit_start.is_some()
        || x.commit_end.is_some()
        || x.worktree_start.is_some()
        || x.worktree_end.is_some()
}

/// An attempt of a loop iteration, as `no_change_streak` groups them.
fn member(a: &Attempt) -> bool {
    a.iteration.is_some() && !matches!(a.kind(), Some("pre" | "post"))
}

impl Phases {
    /// Whether a phase failed `repeat` times in a row with the same error, and whether the
    /// no-change detector triggers.
    fn look(&mut self, trace: &Trace, cfg: &Config) -> (bool, bool) {
        let repeat = cfg.repeat.max(1) as usize;
        let attempts = &trace.attempts;
        if !attempts.is_empty() {
            if !self.explicit || attempts.len() < self.seen {
                self.restart(true, false);
            }
            if !self.attempts(attempts, repeat) {
                self.restart(true, false);
                self.attempts(attempts, repeat);
            }
            let streak = self.fold(attempts);
            return (
                self.hits > 0,
                self.git && streak >= cfg.no_change.max(1) as usize,
            );
        }
        // Derived steps carry no git fingerprint: the no-change detector does not apply.
        let steps = &trace.steps;
        let ends = trace.step_ends().is_some();
        if self.explicit || ends != self.ends || steps.len() < self.seen {
            self.restart(false, ends);
        }
        let settled = steps.len().saturating_sub(1);
        for (i, a) in steps.iter().enumerate().take(settled).skip(self.seen) {
            // A step that ended well only ends its name's run: with none under way it changes
            // nothing (a name first seen here would start at 0, as it does when it first fails).
            // Most steps, so most of the cost: their names are not even looked up.
            if a.finished && (self.failing > 0 || a.failed()) {
                self.fail(i, a, repeat);
            }
        }
        self.seen = self.seen.max(settled);
        let mut hits = self.hits;
        if let Some(a) = steps.last().filter(|a| a.finished) {
            // The last step may still grow: counted as it is now, not kept.
            let run = self.run_of(&a.name).map(|at| &self.fails[at]);
            let before = run.map_or(0, |f| f.len);
            let after = match a.error_text() {
                Some(t) if run.is_some_and(|f| f.key == normalise_error(&t)) => before + 1,
                Some(_) => 1,
                None => 0,
            };
            hits = hits + usize::from(after >= repeat) - usize::from(before >= repeat);
        }
        (hits > 0, false)
    }

    fn restart(&mut self, explicit: bool, ends: bool) {
        *self = Phases {
            explicit,
            ends,
            ..Phases::default()
        };
    }

    /// Reads the explicit attempts that finished or began since the last look, in index order.
    /// False when that order cannot be kept (see `Watch`): the caller starts again.
    fn attempts(&mut self, attempts: &[Attempt], repeat: usize) -> bool {
        let mut k = 0;
        while k < self.open.len() {
            let (i, was_member) = self.open[k];
            let a = &attempts[i];
            if !a.finished {
                k += 1;
                continue;
            }
            self.open.remove(k);
            self.git |= has_git(a);
            if !self.fail(i, a, repeat) || (was_member && !member(a)) {
                return false;
            }
            if was_member && let Some(&g) = a.iteration.and_then(|it| self.group_at.get(&it)) {
                self.groups[g].open -= 1;
                self.changed = Some(self.changed.map_or(g, |c| c.min(g)));
            }
        }
        for (i, a) in attempts.iter().enumerate().skip(self.seen) {
            self.git |= has_git(a);
            let is_member = member(a);
            if is_member && let Some(it) = a.iteration {
                let groups = &mut self.groups;
                let g = *self.group_at.entry(it).or_insert_with(|| {
                    groups.push(Group {
                        first: i,
                        last: i,
                        open: 0,
                    });
                    groups.len() - 1
                });
                groups[g].last = i;
                groups[g].open += usize::from(!a.finished);
                self.changed = Some(self.changed.map_or(g, |c| c.min(g)));
            }
            if !a.finished {
                self.open.push((i, is_member));
            } else if !self.fail(i, a, repeat) {
                return false;
            }
        }
        self.seen = attempts.len();
        true
    }

    /// A finished attempt extends or ends its phase's run, as `failure_streaks` reads them;
    /// false when a later attempt of the phase was read before it.
    fn fail(&mut self, i: usize, a: &Attempt, repeat: usize) -> bool {
        let at = match self.run_of(&a.name) {
            Some(at) if self.fails[at].last > i => return false,
            Some(at) => at,
            None => {
                self.fails.push(FailRun {
                    name: a.name.clone(),
                    key: String::new(),
                    len: 0,
                    last: i,
                });
                self.fails.len() - 1
            }
        };
        let f = &mut self.fails[at];
        let (was, was_failing) = (f.len >= repeat, f.len > 0);
        match a.error_text() {
            Some(text) => {
                let k = normalise_error(&text);
                if k == f.key {
                    f.len += 1;
                } else {
                    f.len = 1;
                    f.key = k;
                }
            }
            None => {
                f.len = 0;
                f.key.clear();
            }
        }
        f.last = i;
        self.hits = self.hits + usize::from(f.len >= repeat) - usize::from(was);
        self.failing = self.failing + usize::from(f.len > 0) - usize::from(was_failing);
        true
    }

    /// Where `name`'s run is: a run shares one `Name` per phase, so pointers are compared
    /// first (as `failure_streaks` does), text only when none is the same.
    fn run_of(&self, name: &Name) -> Option<usize> {
        let fails = &self.fails;
        fails
            .iter()
            .position(|f| Arc::ptr_eq(&f.name, name))
            .or_else(|| fails.iter().position(|f| *f.name == **name))
    }

    /// The no-change streak now: the iterations from the first changed one (or the last one,
    /// which may still change) on, folded onto the streak before them.
    fn fold(&mut self, attempts: &[Attempt]) -> usize {
        let (mut from, mut streak) = self.folded;
        if self.changed.is_some_and(|c| c < from) {
            (from, streak) = (0, 0);
        }
        self.changed = None;
        let n = self.groups.len();
        for (g, group) in self.groups.iter().enumerate().skip(from) {
            if g + 1 == n {
                self.folded = (g, streak);
            }
            streak = match group.change(attempts) {
                Change::Skip => streak,
                Change::Same => streak + 1,
                Change::Reset => 0,
            };
        }
        streak
    }
}

#[cfg(test)]
mod tests;
