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
        if ev.kind == Kind::RunStarted {
            m.started = Some(ev.payload_value());
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
