//! A run's row (what `list` shows: status, stop reason, iteration, max iterations, phase, last
//! score, last update, alias) from chunks of a log read in any order, without a full replay.
//!
//! Most events move a row only through their envelope (`ts`, `iteration`, `phase`) and, for
//! `evaluation_done` and `iteration_advanced`, one payload fact. A chunk folds each run's
//! stretch of such events into a `Fold`; the few events that do more (`run_started`,
//! `stopped`, ...) are kept as text and handed to the reducer itself when the chunk is merged
//! in file order, so the reducer alone decides what they do.
//!
//! Whether an event repeats its run's last `seq` (and is then not applied) can depend on earlier
//! chunks. A chunk decides it alone, and `Digest::apply` says when that may have been wrong
//! (the run's first `seq` in the chunk not above its last before it): the caller then
//! replays instead.

use std::borrow::Cow;

use crate::decode::event::{Event, Kind};
use crate::decode::timestamp::Ts;
use crate::fold::projection::read_event;
use crate::fold::run_state::{RunState, ScorePoint, apply_mut};

/// Kinds whose effect on a row goes beyond the envelope, the score of an evaluation and the
/// iteration an advance names (see `apply_mut`): the reducer applies these.
pub(crate) fn reduced_whole(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::RunStarted
            | Kind::RunResumed
            | Kind::PhaseSwitched
            | Kind::SessionEnded
            | Kind::Stopped
            | Kind::Failed
    )
}

/// Kinds whose payload facts a fold reads.
pub(crate) fn fold_facts(kind: Kind) -> bool {
    matches!(kind, Kind::EvaluationDone | Kind::IterationAdvanced)
}

/// A timestamp as read: the text of the aif-loop shape (parsed once, for the last event of a
/// fold), or parsed already.
pub(crate) enum TsRef<'a> {
    Text(&'a str),
    At(Ts),
}

/// One event as a row sees it.
pub(crate) struct RowEvent<'a> {
    pub kind: Kind,
    pub seq: Option<u64>,
    pub ts: Option<TsRef<'a>>,
    pub iteration: Option<u64>,
    pub phase: Option<Cow<'a, str>>,
    pub score: Option<f64>,
    pub new_iteration: Option<u64>,
    /// The line, for `reduced_whole` kinds.
    pub text: &'a str,
}

#[derive(Default)]
struct FoldRef<'a> {
    any: bool,
    ts: Option<TsRef<'a>>,
    iteration: Option<u64>,
    phase: Option<Cow<'a, str>>,
    score: Option<f64>,
}

enum StepRef<'a> {
    Fold(FoldRef<'a>),
    Line(&'a str),
}

/// A run's events in one chunk, while the chunk is read.
#[derive(Default)]
pub(crate) struct ChunkRun<'a> {
    steps: Vec<StepRef<'a>>,
    fold: FoldRef<'a>,
    /// The highest `seq` so far: what an applied event leaves as the run's last `seq`.
    last: Option<u64>,
    /// The first `seq`: whether each later event repeats the run's last `seq` is decided
    /// here exactly when this one is above the last before the chunk (every later one is
    /// then compared with the same highest `seq` as in a whole replay).
    first_seq: Option<u64>,
}

impl<'a> ChunkRun<'a> {
    #[inline]
    pub fn push(&mut self, e: RowEvent<'a>) {
        if let Some(s) = e.seq {
            match self.last {
                Some(l) if l == s => return,
                Some(l) if l > s => {}
                _ => {
                    if self.last.is_none() {
                        self.first_seq = Some(s);
                    }
                    self.last = Some(s);
                }
            }
        }
        if reduced_whole(e.kind) {
            if self.fold.any {
                self.steps
                    .push(StepRef::Fold(std::mem::take(&mut self.fold)));
            }
            self.steps.push(StepRef::Line(e.text));
            return;
        }
        let f = &mut self.fold;
        f.any = true;
        if e.ts.is_some() {
            f.ts = e.ts;
        }
        let advanced = e
            .new_iteration
            .filter(|_| e.kind == Kind::IterationAdvanced);
        if let Some(i) = e.iteration.into_iter().chain(advanced).max() {
            f.iteration = Some(f.iteration.map_or(i, |j| j.max(i)));
        }
        if e.phase.is_some() {
            f.phase = e.phase;
        }
        if e.kind == Kind::EvaluationDone && e.score.is_some() {
            f.score = e.score;
        }
    }

    pub fn finish(mut self) -> Digest {
        let mut uncertain = false;
        if self.fold.any {
            self.steps.push(StepRef::Fold(self.fold));
        }
        let steps = self
            .steps
            .into_iter()
            .map(|s| match s {
                StepRef::Line(t) => Step::Line(t.to_string()),
                StepRef::Fold(f) => Step::Fold(Fold {
                    ts: match f.ts {
                        Some(TsRef::Text(t)) => {
                            let ts = Ts::parse_rfc3339(t);
                            // The last readable one would count: not known here.
                            uncertain |= ts.is_none();
                            ts
                        }
                        Some(TsRef::At(ts)) => Some(ts),
                        None => None,
                    },
                    iteration: f.iteration,
                    phase: f.phase.map(Cow::into_owned),
                    score: f.score,
                }),
            })
            .collect();
        Digest {
            steps,
            first_seq: self.first_seq,
            uncertain,
        }
    }
}

struct Fold {
    ts: Option<Ts>,
    iteration: Option<u64>,
    phase: Option<String>,
    score: Option<f64>,
}

enum Step {
    Fold(Fold),
    Line(String),
}

/// A run's events in one chunk, read.
pub(crate) struct Digest {
    steps: Vec<Step>,
    first_seq: Option<u64>,
    uncertain: bool,
}

impl Digest {
    /// Applies the chunk's events to `state`, which reflects the earlier chunks, after which the
    /// run's last `seq` was `last`. False when that cannot be done exactly here (see the module
    /// notes); `state` is then of no use.
    pub fn apply(self, state: &mut RunState, last: Option<u64>) -> bool {
        if self.uncertain || matches!((self.first_seq, last), (Some(f), Some(l)) if f <= l) {
            return false;
        }
        for step in self.steps {
            match step {
                Step::Fold(f) => {
                    if f.ts.is_some() {
                        state.updated_at = f.ts;
                    }
                    if let Some(i) = f.iteration {
                        state.iteration = state.iteration.max(i);
                    }
                    if let Some(p) = f.phase {
                        state.phase = p;
                    }
                    if let Some(s) = f.score {
                        state.last_score = s;
                        // A row keeps no score history, only that there was a score
                        // (`RunState::score`): one point stands for them.
                        if state.score_history.is_empty() {
                            state.score_history.push(ScorePoint {
                                iteration: state.iteration,
                                phase: state.phase.clone(),
                                score: s,
                                passed: None,
                                seq: None,
                            });
                        }
                    }
                }
                Step::Line(text) => {
                    let mut ev = Event::new(Kind::Other);
                    if read_event(&text, true, &mut ev).is_err() {
                        return false;
                    }
                    apply_mut(state, &ev);
                }
            }
        }
        true
    }
}
