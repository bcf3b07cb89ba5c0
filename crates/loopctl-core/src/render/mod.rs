//! Writing projections out: `run.json` bytes, a run's row (`list`, `status`, `/api/runs`), and
//! native events as Avenor lifecycle events, and log text made safe to show (`visible`).

pub mod avenor_events;
pub mod postmortem_text;
pub(crate) mod run_json;
pub mod run_row;
pub(crate) mod usage_text;
pub mod visible;

pub use visible::visible;
