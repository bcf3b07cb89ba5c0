//! loopctl's pure core, laid out as the road an event takes:
//! [`decode`] (bytes → events) → [`fold`] (events → projections) → [`rules`] (what a loop does
//! next) and [`analysis`] (stagnation, postmortem) → [`render`] (run.json, Avenor events).
//!
//! Nothing here touches files, processes, the network, the clock or the environment: bytes go
//! in, events and states come out. That is what makes replay deterministic and what the
//! property tests and fuzzers exercise.

pub mod analysis;
pub mod decode;
pub mod exit_codes;
pub mod fold;
pub mod render;
pub mod rules;

pub use analysis::{postmortem, stagnation};
pub use decode::event::{Dialect, Event, Facts, Kind, LineError};
pub use decode::parse_line;
pub use decode::timestamp::Ts;
pub use fold::replay::{Finding, FindingKind, Outcome, Replay, Stats, replay_bytes};
pub use fold::run_state::{RunState, Status, apply, apply_mut};
pub use render::run_json::Writer as JsonWriter;
