//! The runs a follower (`tail`) has seen, folded one event at a time as lines arrive: each
//! run's state, and the exit code the sentinel's rule (`rules::run_exit`) gives a run that ended,
//! so `tail --until-done` exits as `run` would.

use std::collections::HashMap;

use crate::decode::event::Event;
use crate::fold::run_state::{RunState, apply_mut};
use crate::rules::run_exit::{EndFacts, RunExit};

#[derive(Default)]
pub struct LiveRuns {
    states: HashMap<String, RunState>,
    /// The code of the run that ended last, in the order events arrived.
    last_end: Option<i32>,
}

impl LiveRuns {
    /// Folds `ev` into run `run`'s state; whether it began a new iteration of that run.
    pub fn apply(&mut self, run: &str, ev: &Event<'_>) -> bool {
        let state = self
            .states
            .entry(run.to_string())
            .or_insert_with(|| RunState::new(run));
        let before = state.iteration;
        apply_mut(state, ev);
        if ev.kind.is_terminal() {
            self.last_end = Some(end_code(ev, state));
        }
        state.iteration > before && state.iteration > 0
    }

    /// Whether every run seen has ended (none is running after its last event).
    pub fn all_ended(&self) -> bool {
        self.states
            .values()
            .all(|s| s.status != crate::fold::run_state::Status::Running)
    }

    pub fn state(&self, run: &str) -> Option<&RunState> {
        self.states.get(run)
    }

    /// Whether folding `ev` into run `run` would leave every run seen ended (`done_code`).
    pub fn ended_by(&self, run: &str, ev: &Event<'_>) -> bool {
        if !ev.kind.is_terminal() {
            return false;
        }
        let mut s = self
            .states
            .get(run)
            .cloned()
            .unwrap_or_else(|| RunState::new(run));
        apply_mut(&mut s, ev);
        s.is_terminal() && self.states.iter().all(|(k, o)| k == run || o.is_terminal())
    }

    /// Once every run seen has ended: the exit code of the one that ended last.
    pub fn done_code(&self) -> Option<i32> {
        if self.states.is_empty() || self.states.values().any(|s| !s.is_terminal()) {
            return None;
        }
        Some(self.last_end.unwrap_or(0))
    }
}

/// The exit code a run's sentinel gives, from its terminal event.
fn end_code(ev: &Event<'_>, state: &RunState) -> i32 {
    let exit_code = ev.payload_value().get("exit_code").and_then(|v| v.as_i64());
    EndFacts::of_state(state, exit_code).map_or(0, |f| RunExit::of(&f).code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_line;

    fn feed(runs: &mut LiveRuns, run: &str, line: &str) -> bool {
        runs.apply(run, &parse_line(line).unwrap())
    }

    #[test]
    fn a_run_that_ended_gives_its_sentinels_code_once_every_run_has_ended() {
        let mut runs = LiveRuns::default();
        assert_eq!(runs.done_code(), None);
        feed(
            &mut runs,
            "a",
            r#"{"run_id":"a","event":"run_started","payload":{}}"#,
        );
        assert!(feed(
            &mut runs,
            "a",
            r#"{"run_id":"a","iteration":1,"event":"iteration_started"}"#
        ));
        assert!(!feed(
            &mut runs,
            "a",
            r#"{"run_id":"a","iteration":1,"phase":"A","event":"phase_started"}"#
        ));
        feed(
            &mut runs,
            "b",
            r#"{"run_id":"b","event":"run_started","payload":{}}"#,
        );
        feed(
            &mut runs,
            "a",
            r#"{"run_id":"a","event":"failed","payload":{"exit_reason":"phase_failure","exit_code":7}}"#,
        );
        assert_eq!(runs.state("a").map(|s| s.iteration), Some(1));
        assert_eq!(runs.done_code(), None, "b has not ended");
        feed(
            &mut runs,
            "b",
            r#"{"run_id":"b","event":"stopped","payload":{"reason":"user_stop"}}"#,
        );
        assert_eq!(runs.done_code(), Some(130), "b ended last: its code");
        feed(
            &mut runs,
            "a",
            r#"{"run_id":"a","event":"run_resumed","payload":{}}"#,
        );
        assert_eq!(runs.done_code(), None, "a runs again");
        feed(
            &mut runs,
            "a",
            r#"{"run_id":"a","event":"stopped","payload":{"exit_reason":"marker"}}"#,
        );
        assert_eq!(runs.done_code(), Some(0));
    }
}
