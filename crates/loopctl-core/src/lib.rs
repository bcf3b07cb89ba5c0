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

// Transitional: the flat paths of the earlier layout, kept while branches written against it
// are merged.
pub use analysis::{postmortem, stagnation};
pub(crate) use decode::single_pass as fast;
pub use decode::{json_scanner as json, lines, salvage, timestamp as ts};
/// The earlier `event` module held the model and the parsers; they are now
/// `decode::{event, reference_parser, parse_line}`.
pub mod event {
    pub use crate::decode::event::{Dialect, Event, Facts, Kind, LineError, NATIVE_VERSION};
    pub use crate::decode::parse_line;
    pub use crate::decode::reference_parser::{parse_line_reference, run_key};
}
pub(crate) use fold::list_rows as rows;
pub use fold::{counts as tally, replay, run_state as state, trace};
pub use render::avenor_events as avenor;
pub(crate) use render::run_json as state_json;
pub use rules::{
    criteria, escalation, loop_file as loopfile, markers, next_step as plan,
    transitions as transition,
};

pub use decode::event::{Dialect, Event, Facts, Kind, LineError};
pub use decode::parse_line;
pub use replay::{Finding, FindingKind, Outcome, Replay, Stats, replay_bytes};
pub use state::{RunState, Status, apply, apply_mut};
pub use state_json::Writer as JsonWriter;
pub use ts::Ts;
