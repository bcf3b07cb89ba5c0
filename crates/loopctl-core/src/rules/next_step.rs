//! What a loop does next, as a pure function of its log.
//!
//! The runner folds the events it has written into a `Cursor` and asks `next_step` what to do;
//! `resume` folds the same events read back from the log and asks the same question. One code
//! path, so an interrupted run continues exactly where the log says it was.

use std::collections::VecDeque;

use serde_json::Value;

use crate::decode::event::{Event, Kind};
pub use crate::rules::ending::{Decided, Ending, ExitReason};
use crate::rules::loop_file::PhaseKind;
use crate::rules::markers::{Directive, Marker};

/// Where a phase sits in the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pos {
    pub kind: PhaseKind,
    pub index: usize,
    /// 0 for pre phases, 1-based for loop phases, the last loop iteration for post phases.
    pub iteration: u64,
}

/// How a phase attempt ended, as recorded in its `phase_finished` event.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseEnd {
    /// `end_turn` (exit 0), `error` (non-zero exit), `signal`, `cancelled`, `timeout`.
    pub stop_reason: String,
    pub exit_code: Option<i64>,
    pub marker: Option<Marker>,
    /// An observed phase's verdict: its exit status judged the work (0 passes), so a non-zero
    /// exit is a failed check, not a failed phase.
    pub verdict: Option<bool>,
}

impl PhaseEnd {
    pub fn clean(&self) -> bool {
        self.stop_reason == "end_turn"
    }

    /// Ended in a way the loop acts on rather than retries: cleanly or with a verdict.
    pub fn settled(&self) -> bool {
        self.clean() || self.verdict.is_some()
    }

    /// An end that a resume runs again rather than acts on.
    pub fn interrupted(&self) -> bool {
        matches!(self.stop_reason.as_str(), "cancelled" | "timeout")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Run {
        pos: Pos,
        attempt: u64,
    },
    /// Write `phase_retry`, wait `delay`, then run `attempt`.
    Retry {
        pos: Pos,
        attempt: u64,
        retry: u64,
    },
    /// Judge the finished phase at `pos` (evaluate, route) and write a `transition` event.
    Decide {
        pos: Pos,
    },
    Finish(Ending),
}

/// The shape of a loop: how many phases of each kind and the iteration limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub pre: usize,
    pub loop_: usize,
    pub post: usize,
    pub max_iterations: u64,
    pub max_retries: u64,
}

/// The runner's progress, folded from its own events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cursor {
    /// A phase started (or scheduled for a retry) and not yet finished.
    pub open: Option<Pos>,
    /// Highest attempt number started for the current position.
    pub attempt: u64,
    /// Retries taken for the current position.
    pub retries: u64,
    pub last: Option<(Pos, PhaseEnd)>,
    pub last_loop: Option<(Pos, PhaseEnd)>,
    /// `git rev-parse HEAD` after the last finished phase, when in a git work tree.
    pub commit: Option<String>,
    /// `git rev-parse HEAD` when the last finished phase started.
    pub commit_before: Option<String>,
    starting_commit: Option<String>,
    /// The session of the last phase attempt.
    pub session: Option<String>,
    pub ended: bool,
    /// A finished phase awaits its decision (its `phase_finished` said `decide`).
    pub undecided: Option<Pos>,
    /// Loop phases a decision queued (`reflect, then plan`), by index.
    pub route: VecDeque<usize>,
    /// An ending a decision chose.
    pub end: Option<Decided>,
    /// Observations decided so far (the `tries` of `after N tries`).
    pub tries: u64,
    /// Evaluations so far, for escalation reports.
    pub evaluations: Vec<EvalSeen>,
    /// The feedback of the last failed observation, for the next phase's prompt.
    pub last_failure: Option<String>,
    /// The payload of the last `phase_finished`: what a decision reads.
    pub last_finished: Option<Value>,
    /// `evaluation_done` payloads (with their quality phase) and the `escalated` payload
    /// written since the last phase ended and before its decision: a decision cut short by a
    /// crash reuses them instead of writing them twice.
    pub pending: Vec<(String, Value)>,
    pub pending_escalation: Option<Value>,
}

/// One evaluation as the runner saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalSeen {
    pub iteration: u64,
    pub phase: String,
    pub score: f64,
    pub passed: bool,
    pub failed: Vec<String>,
    pub feedback: Option<String>,
}

fn pos_of(ev: &Event<'_>, p: &Value) -> Option<Pos> {
    Some(Pos {
        kind: PhaseKind::parse(p.get("kind")?.as_str()?)?,
        index: p.get("index")?.as_u64()? as usize,
        iteration: ev.iteration.unwrap_or(0),
    })
}

pub fn phase_end(p: &Value) -> PhaseEnd {
    PhaseEnd {
        stop_reason: p
            .get("stop_reason")
            .and_then(Value::as_str)
            .unwrap_or("end_turn")
            .to_string(),
        exit_code: p.get("exit_code").and_then(Value::as_i64),
        marker: p
            .get("marker")
            .and_then(|m| serde_json::from_value(m.clone()).ok()),
        verdict: match p.get("verdict").and_then(Value::as_str) {
            Some("pass") => Some(true),
            Some("fail") => Some(false),
            _ => None,
        },
    }
}

impl Cursor {
    pub fn apply(&mut self, ev: &Event<'_>) {
        match ev.kind {
            Kind::PhaseStarted | Kind::PhaseFinished | Kind::PhaseRetry => {
                let p = ev.payload_value();
                let Some(pos) = pos_of(ev, &p) else { return };
                let attempt = p.get("attempt").and_then(Value::as_u64).unwrap_or(1);
                let same = self.open == Some(pos) || self.last.as_ref().is_some_and(|l| l.0 == pos);
                if !same {
                    self.attempt = 0;
                    self.retries = 0;
                }
                self.attempt = self.attempt.max(attempt);
                match ev.kind {
                    Kind::PhaseStarted => {
                        if pos.kind == PhaseKind::Loop && self.route.front() == Some(&pos.index) {
                            self.route.pop_front();
                        }
                        self.undecided = None;
                        self.open = Some(pos);
                        self.starting_commit =
                            p.get("commit").and_then(Value::as_str).map(Into::into);
                        self.session = p.get("session_id").and_then(Value::as_str).map(Into::into);
                    }
                    Kind::PhaseRetry => {
                        self.open = Some(pos);
                        self.retries += 1;
                    }
                    _ => {
                        self.open = None;
                        let end = phase_end(&p);
                        self.commit_before = self.starting_commit.take();
                        self.commit = p.get("commit").and_then(Value::as_str).map(Into::into);
                        if pos.kind == PhaseKind::Loop {
                            self.last_loop = Some((pos, end.clone()));
                        }
                        self.last = Some((pos, end));
                        self.last_finished = Some(p.clone());
                        self.pending.clear();
                        self.pending_escalation = None;
                        self.undecided = p
                            .get("decide")
                            .and_then(Value::as_bool)
                            .unwrap_or(false)
                            .then_some(pos);
                    }
                }
            }
            Kind::Transition => {
                let p = ev.payload_value();
                self.undecided = None;
                self.pending.clear();
                self.pending_escalation = None;
                let observed = p.get("observed").and_then(Value::as_bool).unwrap_or(false);
                if observed {
                    self.tries += 1;
                    self.last_failure = p.get("feedback").and_then(Value::as_str).map(Into::into);
                }
                // A decision that routes nowhere keeps what an earlier one queued.
                if let Some(route) = p.get("route").and_then(Value::as_array) {
                    self.route = route
                        .iter()
                        .filter_map(|x| x.as_u64())
                        .map(|x| x as usize)
                        .collect();
                }
                self.end = p.get("end").filter(|e| e.is_object()).map(|e| {
                    let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
                    Decided {
                        reason: s("reason").unwrap_or_default(),
                        warning: s("warning"),
                        detail: s("detail"),
                        blocked: e.get("blocked").and_then(Value::as_bool).unwrap_or(false),
                    }
                });
            }
            Kind::Escalated => self.pending_escalation = Some(ev.payload_value()),
            Kind::EvaluationDone => {
                let p = ev.payload_value();
                self.pending
                    .push((ev.phase.as_deref().unwrap_or("A").to_string(), p.clone()));
                let f = &ev.facts;
                self.evaluations.push(EvalSeen {
                    iteration: ev.iteration.unwrap_or(0),
                    phase: ev.phase.as_deref().unwrap_or("A").to_string(),
                    score: f.score.unwrap_or(0.0),
                    passed: f.passed.unwrap_or(false),
                    failed: f.failed.iter().flatten().map(|s| s.to_string()).collect(),
                    feedback: p
                        .pointer("/decision/feedback")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                });
            }
            Kind::Stopped | Kind::Failed => self.ended = true,
            Kind::RunResumed | Kind::RunStarted => self.ended = false,
            _ => {}
        }
    }

    /// Loop iterations that ran to their end (or to an exit or abort marker).
    pub fn iterations_completed(&self, shape: &Shape) -> u64 {
        match &self.last_loop {
            None => 0,
            Some((pos, end)) => {
                let ended_by_marker = end.settled()
                    && end
                        .marker
                        .as_ref()
                        .is_some_and(|m| m.directive != Directive::Continue);
                if (pos.index + 1 == shape.loop_ && end.settled()) || ended_by_marker {
                    pos.iteration
                } else {
                    pos.iteration.saturating_sub(1)
                }
            }
        }
    }
}

/// Exponential backoff before retry `n` (1-based): `base` doubling, capped at `cap`.
pub fn backoff_ms(base_ms: u64, cap_ms: u64, n: u64) -> u64 {
    let shift = n.saturating_sub(1).min(32) as u32;
    base_ms.saturating_mul(1u64 << shift).min(cap_ms)
}

/// The next thing the loop does, given its shape and what its log says happened.
pub fn next_step(shape: &Shape, c: &Cursor) -> Step {
    let finish = |reason, label: Option<String>, exit_code, stop_reason: &str| {
        Step::Finish(Ending {
            reason,
            label,
            exit_code,
            stop_reason: stop_reason.to_string(),
            iterations_completed: c.iterations_completed(shape),
            decided: None,
        })
    };
    let first_of = |kind: PhaseKind, iteration: u64| -> Option<Pos> {
        let n = match kind {
            PhaseKind::Pre => shape.pre,
            PhaseKind::Loop => shape.loop_,
            PhaseKind::Post => shape.post,
        };
        (n > 0).then_some(Pos {
            kind,
            index: 0,
            iteration,
        })
    };
    let run = |pos: Pos| Step::Run { pos, attempt: 1 };
    // After the loop: post phases, then the ending the loop phases decided.
    let after_loop = |iteration: u64, reason: ExitReason, label: Option<String>| match first_of(
        PhaseKind::Post,
        iteration,
    ) {
        Some(p) => run(p),
        None => finish(reason, label, None, "end_turn"),
    };
    let loop_ending = || -> (ExitReason, Option<String>) {
        match &c.last_loop {
            Some((_, end)) => match &end.marker {
                Some(m) if m.directive == Directive::Exit => (ExitReason::Marker, m.label.clone()),
                _ => (ExitReason::MaxIterations, None),
            },
            None => (ExitReason::EndTurn, None),
        }
    };

    if let Some(pos) = c.open {
        return Step::Run {
            pos,
            attempt: c.attempt + 1,
        };
    }
    let Some((pos, end)) = &c.last else {
        return match first_of(PhaseKind::Pre, 0).or(first_of(PhaseKind::Loop, 1)) {
            Some(p) => run(p),
            None => finish(ExitReason::EndTurn, None, None, "end_turn"),
        };
    };
    let pos = *pos;
    let decided = |d: &Decided| {
        Step::Finish(Ending {
            reason: d.exit_reason(),
            label: None,
            exit_code: None,
            stop_reason: if d.blocked {
                "blocked"
            } else {
                end.stop_reason.as_str()
            }
            .into(),
            iterations_completed: c.iterations_completed(shape),
            decided: Some(d.clone()),
        })
    };
    // A decision's jump: backwards (or to itself) starts the next iteration.
    let goto = |to: usize| {
        let iteration = if pos.kind != PhaseKind::Loop {
            pos.iteration.max(1)
        } else if to <= pos.index {
            pos.iteration + 1
        } else {
            pos.iteration
        };
        if iteration > shape.max_iterations {
            return after_loop(pos.iteration, ExitReason::MaxIterations, None);
        }
        run(Pos {
            kind: PhaseKind::Loop,
            index: to,
            iteration,
        })
    };
    if end.interrupted() {
        return Step::Run {
            pos,
            attempt: c.attempt + 1,
        };
    }
    if !end.settled() && end.exit_code == Some(1) && c.retries < shape.max_retries {
        return Step::Retry {
            pos,
            attempt: c.attempt + 1,
            retry: c.retries + 1,
        };
    }
    // A decision comes before anything else the phase's end would imply.
    if c.undecided == Some(pos) {
        return Step::Decide { pos };
    }
    if let Some(d) = &c.end {
        // A decided end runs the post phases first, as an exit marker or the limit does; not
        // one that blocks (as an abort does not). In the post phases the match below goes on
        // to the next one and ends as decided.
        if pos.kind != PhaseKind::Post {
            return match first_of(PhaseKind::Post, pos.iteration).filter(|_| !d.blocked) {
                Some(p) => run(p),
                None => decided(d),
            };
        }
    }
    if let Some(&to) = c.route.front() {
        return goto(to);
    }
    if !end.settled() {
        return finish(
            ExitReason::PhaseFailure,
            None,
            end.exit_code,
            &end.stop_reason,
        );
    }
    if let Some(m) = end
        .marker
        .as_ref()
        .filter(|m| m.directive == Directive::Abort)
    {
        return finish(ExitReason::Abort, m.label.clone(), None, "blocked");
    }
    let next_in = |kind: PhaseKind, n: usize| {
        (pos.index + 1 < n).then_some(Pos {
            kind,
            index: pos.index + 1,
            iteration: pos.iteration,
        })
    };
    match pos.kind {
        PhaseKind::Pre => {
            if let Some(p) = next_in(PhaseKind::Pre, shape.pre) {
                return run(p);
            }
            match first_of(PhaseKind::Loop, 1) {
                Some(p) => run(p),
                None => after_loop(0, ExitReason::EndTurn, None),
            }
        }
        PhaseKind::Loop => {
            if end
                .marker
                .as_ref()
                .is_some_and(|m| m.directive == Directive::Exit)
            {
                let (r, l) = loop_ending();
                return after_loop(pos.iteration, r, l);
            }
            if let Some(p) = next_in(PhaseKind::Loop, shape.loop_) {
                return run(p);
            }
            if pos.iteration < shape.max_iterations {
                return run(Pos {
                    kind: PhaseKind::Loop,
                    index: 0,
                    iteration: pos.iteration + 1,
                });
            }
            after_loop(pos.iteration, ExitReason::MaxIterations, None)
        }
        PhaseKind::Post => match (next_in(PhaseKind::Post, shape.post), &c.end) {
            (Some(p), _) => run(p),
            (None, Some(d)) => decided(d),
            (None, None) => {
                let (r, l) = loop_ending();
                finish(r, l, None, "end_turn")
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::event::Event;
    use crate::rules::sentinel::Sentinel;
    use serde_json::json;

    const SHAPE: Shape = Shape {
        pre: 1,
        loop_: 2,
        post: 1,
        max_iterations: 2,
        max_retries: 1,
    };

    fn ev(kind: Kind, it: u64, payload: Value) -> Event<'static> {
        Event {
            iteration: Some(it),
            ..Event::new(kind)
        }
        .with_payload(&payload)
    }

    fn pos(kind: PhaseKind, index: usize, iteration: u64) -> Pos {
        Pos {
            kind,
            index,
            iteration,
        }
    }

    /// Drives `next_step` as the runner would, with each phase ending as `end` says.
    fn drive(shape: &Shape, end: impl Fn(&Pos, u64) -> Value) -> (Vec<(Pos, u64)>, Ending) {
        drive_with(shape, end, |_, _| panic!("nothing asked for a decision"))
    }

    /// `drive`, with `decide` giving the payload of the `transition` event a decision writes.
    fn drive_with(
        shape: &Shape,
        end: impl Fn(&Pos, u64) -> Value,
        decide: impl Fn(&Pos, &Cursor) -> Value,
    ) -> (Vec<(Pos, u64)>, Ending) {
        let mut c = Cursor::default();
        let mut ran = vec![];
        for _ in 0..100 {
            match next_step(shape, &c) {
                step @ (Step::Run { pos, attempt } | Step::Retry { pos, attempt, .. }) => {
                    let base =
                        json!({"kind": pos.kind.as_str(), "index": pos.index, "attempt": attempt});
                    if matches!(step, Step::Retry { .. }) {
                        c.apply(&ev(Kind::PhaseRetry, pos.iteration, base.clone()));
                    }
                    c.apply(&ev(Kind::PhaseStarted, pos.iteration, base.clone()));
                    let mut fin = base;
                    fin.as_object_mut()
                        .unwrap()
                        .extend(end(&pos, attempt).as_object().unwrap().clone());
                    c.apply(&ev(Kind::PhaseFinished, pos.iteration, fin));
                    ran.push((pos, attempt));
                }
                Step::Decide { pos } => {
                    let t = decide(&pos, &c);
                    c.apply(&ev(Kind::Transition, pos.iteration, t));
                }
                Step::Finish(e) => return (ran, e),
            }
        }
        panic!("no end")
    }

    const PAOR: Shape = Shape {
        pre: 0,
        loop_: 4,
        post: 0,
        max_iterations: 3,
        max_retries: 1,
    };

    fn idx(ran: &[(Pos, u64)]) -> Vec<(usize, u64)> {
        ran.iter().map(|(p, _)| (p.index, p.iteration)).collect()
    }

    /// plan, act, observe, reflect: the check fails every time and `reflect, then plan`
    /// loops back until the iteration limit.
    #[test]
    fn a_route_runs_its_phases_then_jumps_back_into_a_new_iteration() {
        let (ran, e) = drive_with(
            &PAOR,
            |p, _| match p.index {
                2 => {
                    json!({"stop_reason": "error", "exit_code": 1, "verdict": "fail", "decide": true})
                }
                _ => json!({"stop_reason": "end_turn"}),
            },
            |_, _| json!({"observed": true, "route": [3, 0]}),
        );
        assert_eq!(
            idx(&ran),
            [
                (0, 1),
                (1, 1),
                (2, 1),
                (3, 1),
                (0, 2),
                (1, 2),
                (2, 2),
                (3, 2),
                (0, 3),
                (1, 3),
                (2, 3),
                (3, 3)
            ]
        );
        assert!(
            ran.iter().all(|r| r.1 == 1),
            "a failed verdict is not retried"
        );
        assert_eq!(e.reason, ExitReason::MaxIterations);
        assert_eq!(e.decided, None);
    }

    /// A decided end (the criteria at the limit, a goal met, a stagnation stop) runs the post
    /// phases before it ends, as an exit marker does; a blocking one (an escalation) does not.
    #[test]
    fn a_decided_end_runs_the_post_phases_first_unless_it_blocks() {
        let shape = Shape { post: 2, ..PAOR };
        for (end, blocked) in [
            ("iteration_limit", false),
            ("goal_met", false),
            ("escalated", true),
        ] {
            let (ran, e) = drive_with(
                &shape,
                |p, _| match (p.kind, p.index) {
                    (PhaseKind::Loop, 2) => json!({"verdict": "fail", "decide": true}),
                    _ => json!({"stop_reason": "end_turn"}),
                },
                |_, _| json!({"observed": true, "end": {"reason": end, "blocked": blocked}}),
            );
            let kinds: Vec<PhaseKind> = ran.iter().map(|r| r.0.kind).collect();
            let posts = kinds.iter().filter(|k| **k == PhaseKind::Post).count();
            assert_eq!(posts, if blocked { 0 } else { 2 }, "{end}: {ran:?}");
            assert_eq!(kinds.len(), 3 + posts, "{end}: {ran:?}");
            assert_eq!(e.decided.map(|d| d.reason), Some(end.to_string()), "{end}");
        }
    }

    #[test]
    fn a_decided_end_finishes_with_its_reason_and_sentinel() {
        let (ran, e) = drive_with(
            &PAOR,
            |p, _| match p.index {
                2 => json!({"stop_reason": "end_turn", "verdict": "pass", "decide": true}),
                _ => json!({"stop_reason": "end_turn"}),
            },
            |p, c| {
                if p.iteration < 2 {
                    json!({"observed": true})
                } else {
                    assert_eq!(c.tries, 1);
                    json!({"observed": true, "end": {"reason": "threshold_reached"}})
                }
            },
        );
        assert_eq!(
            idx(&ran),
            [(0, 1), (1, 1), (2, 1), (3, 1), (0, 2), (1, 2), (2, 2)]
        );
        let d = e.decided.clone().unwrap();
        assert_eq!(d.reason, "threshold_reached");
        assert_eq!(e.reason, ExitReason::Marker);
        let s = Sentinel::for_ending(&e, "s", "r");
        assert_eq!(
            (s.status, s.code, s.stop_reason.as_str()),
            ("DONE", 0, "threshold_reached")
        );
        let blocked = Ending {
            decided: Some(Decided {
                reason: "escalated".into(),
                detail: Some("which format?".into()),
                blocked: true,
                ..Decided::default()
            }),
            ..e.clone()
        };
        let s = Sentinel::for_ending(&blocked, "s", "r");
        assert_eq!((s.status, s.code), ("BLOCKED", 5));
        assert_eq!(s.reason.as_deref(), Some("which format?"));
        let stag = Ending {
            decided: Some(Decided {
                reason: "stagnation".into(),
                ..Decided::default()
            }),
            ..e
        };
        assert_eq!(Sentinel::for_ending(&stag, "s", "r").code, 3);
    }

    /// A failing phase with `on_failure` is retried first, then decided, then routed.
    #[test]
    fn on_failure_routes_after_retries_and_no_route_fails_the_run() {
        let (ran, e) = drive_with(
            &PAOR,
            |p, _| match (p.index, p.iteration) {
                (1, 1) => json!({"stop_reason": "error", "exit_code": 1, "decide": true}),
                (2, _) => json!({"stop_reason": "end_turn", "decide": true}),
                _ => json!({"stop_reason": "end_turn"}),
            },
            |p, _| match p.index {
                1 => json!({"route": [3]}),
                _ => json!({"end": {"reason": "goto_end"}}),
            },
        );
        assert_eq!(
            ran.iter()
                .map(|(p, a)| (p.index, p.iteration, *a))
                .collect::<Vec<_>>(),
            [
                (0, 1, 1),
                (1, 1, 1),
                (1, 1, 2),
                (3, 1, 1),
                (0, 2, 1),
                (1, 2, 1),
                (2, 2, 1)
            ]
        );
        assert_eq!(e.decided.map(|d| d.reason).as_deref(), Some("goto_end"));
        let (_, e) = drive_with(
            &PAOR,
            |p, _| match p.index {
                1 => json!({"stop_reason": "error", "exit_code": 2, "decide": true}),
                _ => json!({"stop_reason": "end_turn"}),
            },
            |_, _| json!({}),
        );
        assert_eq!((e.reason, e.exit_code), (ExitReason::PhaseFailure, Some(2)));
    }

    #[test]
    fn pre_loop_post_then_iteration_limit() {
        let (ran, e) = drive(&SHAPE, |_, _| json!({"stop_reason": "end_turn"}));
        let names: Vec<_> = ran
            .iter()
            .map(|(p, _)| (p.kind, p.index, p.iteration))
            .collect();
        use PhaseKind::*;
        assert_eq!(
            names,
            [
                (Pre, 0, 0),
                (Loop, 0, 1),
                (Loop, 1, 1),
                (Loop, 0, 2),
                (Loop, 1, 2),
                (Post, 0, 2)
            ]
        );
        assert_eq!(
            (e.reason, e.iterations_completed),
            (ExitReason::MaxIterations, 2)
        );
    }

    #[test]
    fn exit_marker_ends_the_iteration_and_runs_post() {
        let (ran, e) = drive(&SHAPE, |p, _| {
            if p.kind == PhaseKind::Loop && p.index == 0 {
                json!({"marker": {"directive": "exit", "label": "green"}})
            } else {
                json!({})
            }
        });
        assert_eq!(ran.len(), 3);
        assert_eq!(ran[2].0.kind, PhaseKind::Post);
        assert_eq!(
            (e.reason, e.label.as_deref(), e.iterations_completed),
            (ExitReason::Marker, Some("green"), 1)
        );
    }

    #[test]
    fn abort_skips_post_and_failure_retries_once() {
        let (ran, e) = drive(&SHAPE, |p, _| {
            if p.kind == PhaseKind::Loop && p.iteration == 2 && p.index == 1 {
                json!({"marker": {"directive": "abort"}})
            } else {
                json!({})
            }
        });
        assert_eq!(
            (ran.len(), e.reason, e.label.clone()),
            (5, ExitReason::Abort, None)
        );
        assert_eq!(e.iterations_completed, 2);
        let (ran, e) = drive(&SHAPE, |p, _| {
            if p.kind == PhaseKind::Loop {
                json!({"stop_reason": "error", "exit_code": 1})
            } else {
                json!({})
            }
        });
        assert_eq!(ran.iter().map(|r| r.1).collect::<Vec<_>>(), [1, 1, 2]);
        assert_eq!(
            (e.reason, e.exit_code, e.iterations_completed),
            (ExitReason::PhaseFailure, Some(1), 0)
        );
        // Exit codes other than 1 are not retried.
        let (ran, _) = drive(
            &SHAPE,
            |_, _| json!({"stop_reason": "error", "exit_code": 3}),
        );
        assert_eq!(ran.len(), 1);
    }

    #[test]
    fn an_open_or_interrupted_phase_is_run_again_as_a_new_attempt() {
        let mut c = Cursor::default();
        let p0 = json!({"kind": "loop", "index": 1, "attempt": 1});
        c.apply(&ev(Kind::PhaseStarted, 3, p0.clone()));
        assert_eq!(
            next_step(&SHAPE, &c),
            Step::Run {
                pos: pos(PhaseKind::Loop, 1, 3),
                attempt: 2
            }
        );
        let mut fin = p0;
        fin["stop_reason"] = "cancelled".into();
        c.apply(&ev(Kind::PhaseFinished, 3, fin));
        assert_eq!(
            next_step(&SHAPE, &c),
            Step::Run {
                pos: pos(PhaseKind::Loop, 1, 3),
                attempt: 2
            }
        );
        assert!(matches!(
            next_step(
                &Shape {
                    pre: 0,
                    loop_: 0,
                    post: 0,
                    ..SHAPE
                },
                &Cursor::default()
            ),
            Step::Finish(Ending {
                reason: ExitReason::EndTurn,
                ..
            })
        ));
    }

    #[test]
    fn backoff_doubles_to_its_cap() {
        let v: Vec<_> = (1..=6).map(|n| backoff_ms(2000, 30_000, n)).collect();
        assert_eq!(v, [2000, 4000, 8000, 16000, 30000, 30000]);
        assert_eq!(backoff_ms(u64::MAX, 30_000, 70), 30_000);
    }

    #[test]
    fn sentinels_as_avenor_writes_them() {
        let end = |reason, label: Option<&str>, code| Ending {
            reason,
            label: label.map(Into::into),
            exit_code: code,
            stop_reason: "end_turn".into(),
            iterations_completed: 1,
            decided: None,
        };
        let s = Sentinel::for_ending(
            &end(
                ExitReason::Abort,
                Some("architectural issue:\nlayering"),
                None,
            ),
            "ses_abc123",
            "a3f9",
        );
        assert_eq!(
            (s.code, s.render().as_str()),
            (
                5,
                "BLOCKED\nSESSION=ses_abc123\nSTOP_REASON=blocked\nREASON=architectural issue: layering\nRUN=a3f9\n"
            )
        );
        let s = Sentinel::for_ending(&end(ExitReason::Abort, None, None), "s", "r");
        assert!(!s.render().contains("REASON=") || s.render().contains("STOP_REASON=blocked\nRUN"));
        let f = Sentinel::for_ending(&end(ExitReason::PhaseFailure, None, Some(3)), "s", "r");
        assert_eq!((f.status, f.code), ("FAILED", 3));
        assert!(f.render().contains("EXIT_CODE=3\nRUN=r\n"));
        for (r, st, code) in [
            (ExitReason::Marker, "DONE", 0),
            (ExitReason::MaxIterations, "DONE", 0),
            (ExitReason::EndTurn, "DONE", 0),
            (ExitReason::Timeout, "TIMEOUT", 124),
            (ExitReason::Cancelled, "KILLED", 130),
        ] {
            let s = Sentinel::for_ending(&end(r, None, None), "s", "r");
            assert_eq!((s.status, s.code), (st, code), "{r:?}");
        }
        // Control characters in a value (a NUL from a template error) become spaces.
        let f = Sentinel {
            reason: Some("template: bad \0 char\r\nhere\t.".into()),
            ..Sentinel::config_error("x", "r")
        };
        assert!(
            f.render().contains("REASON=template: bad   char  here .\n"),
            "{:?}",
            f.render()
        );
        // A cancelled run's sentinel says loopctl's 130, whatever the phase's process died of.
        for phase_code in [None, Some(130), Some(143), Some(137), Some(1), Some(0)] {
            let s = Sentinel::for_ending(&end(ExitReason::Cancelled, None, phase_code), "s", "r");
            assert!(s.render().contains("EXIT_CODE=130\n"), "{phase_code:?}");
        }
    }
}
