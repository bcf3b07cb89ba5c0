//! Writing projections out: `run.json` bytes, and native events as Avenor lifecycle events.

pub mod avenor_events;
pub(crate) mod run_json;
