//! What a resumed runner keeps of its run's events besides the state: where the loop stands
//! (`Cursor`), the run's trace, and the `run_started` payload (its stored options). A
//! projection, folded in the same read of the log as the replay.

use std::collections::HashMap;

use loopctl_core::Event;
use loopctl_core::decode::event::Kind;
use loopctl_core::fold::trace::Trace;
use loopctl_core::fold::{Line, Projection, Split};
use loopctl_core::rules::next_step::Cursor;
use serde_json::Value;

#[derive(Default)]
pub(super) struct Memory {
    pub(super) cursor: Cursor,
    pub(super) trace: Trace,
    pub(super) started: Option<Value>,
    /// An attempt started and not finished: the one a dead runner left running.
    pub(super) attempt_open: bool,
}

/// Each run's memory, by run id; only events that name their run count (a runner's always do).
#[derive(Default)]
pub(super) struct Memories(pub(super) HashMap<String, Memory>);

impl Projection for Memories {
    fn event(&mut self, _line: Line, ev: &Event<'_>) {
        let Some(id) = ev.run_id.as_deref() else {
            return;
        };
        let m = match self.0.get_mut(id) {
            Some(m) => m,
            None => self.0.entry(id.to_string()).or_default(),
        };
        match ev.kind {
            Kind::RunStarted => m.started = Some(ev.payload_value()),
            Kind::PhaseStarted => m.attempt_open = true,
            Kind::PhaseFinished | Kind::PhaseRetry | Kind::Stopped => m.attempt_open = false,
            _ => {}
        }
        m.cursor.apply(ev);
        m.trace.apply(ev);
    }
}

impl Split for Memories {
    fn fork(&self) -> Self {
        Memories::default()
    }
    fn join(&mut self, other: Self) {
        self.0.extend(other.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopctl_core::fold::fold_bytes;
    use loopctl_core::parse_line;

    /// What the runner kept before it folded its memory beside the replay: each event of its
    /// run, one by one.
    #[test]
    fn a_runs_memory_is_its_events_applied_one_by_one() {
        let log = [
            r#"{"v":1,"seq":1,"ts":"2026-02-18T12:00:00Z","run_id":"r1","event":"run_started","payload":{"config":{"max_iterations":3}}}"#,
            r#"{"v":1,"seq":1,"ts":"2026-02-18T12:00:00Z","run_id":"r2","event":"run_started","payload":{}}"#,
            r#"{"v":1,"seq":2,"ts":"2026-02-18T12:00:01Z","run_id":"r1","event":"phase_started","iteration":1,"phase":"work"}"#,
            r#"{"v":1,"seq":3,"ts":"2026-02-18T12:00:02Z","event":"phase_started","iteration":1,"phase":"x"}"#,
            "{damaged",
            r#"{"v":1,"seq":3,"ts":"2026-02-18T12:00:03Z","run_id":"r1","event":"evaluation_done","iteration":1,"payload":{"score":0.5}}"#,
        ];
        let mut m = Memories::default();
        fold_bytes(&mut m, log.join("\n").as_bytes(), 1 << 20);
        let mut want = Memory::default();
        for text in log {
            if let Ok(ev) = parse_line(text)
                && ev.run_id.as_deref() == Some("r1")
            {
                if ev.kind == Kind::RunStarted {
                    want.started = Some(ev.payload_value());
                }
                want.cursor.apply(&ev);
                want.trace.apply(&ev);
            }
        }
        let got = &m.0["r1"];
        assert_eq!(got.started, want.started);
        assert!(got.started.is_some());
        assert_eq!(format!("{:?}", got.cursor), format!("{:?}", want.cursor));
        assert_eq!(got.trace, want.trace);
        assert_eq!(m.0.len(), 2, "events that name no run are no run's");
    }
}
