//! Events → projections: the run state and its reducer, replay of a whole log (one state per
//! run, with findings), counts for `check`, `list` rows from chunks, and the per-run trace that
//! postmortem and stagnation read.

pub mod counts;
pub(crate) mod list_rows;
pub mod replay;
pub mod run_state;
pub mod trace;
