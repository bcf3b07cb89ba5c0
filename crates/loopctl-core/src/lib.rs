//! loopctl's pure core: the event model, the three dialect parsers, the reducer and replay.
//!
//! Nothing here touches files, processes, the network, the clock or the environment: bytes go
//! in, events and states come out. That is what makes replay deterministic and what the
//! property tests and fuzzers exercise.

pub mod avenor;
pub mod criteria;
pub mod escalation;
pub mod event;
mod fast;
pub mod json;
pub mod lines;
pub mod loopfile;
pub mod markers;
pub mod plan;
pub mod postmortem;
pub mod replay;
mod rows;
pub mod salvage;
pub mod stagnation;
pub mod state;
mod state_json;
pub mod tally;
pub mod trace;
pub mod transition;
pub mod ts;

pub use event::{Dialect, Event, Facts, Kind, LineError, parse_line};
pub use replay::{Finding, FindingKind, Outcome, Replay, Stats, replay_bytes};
pub use state::{RunState, Status, apply, apply_mut};
pub use state_json::Writer as JsonWriter;
pub use ts::Ts;
