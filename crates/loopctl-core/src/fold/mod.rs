//! Events → projections: the run state and its reducer, replay of a whole log (one state per
//! run, with findings), counts for `check`, `list` rows from chunks, and the per-run trace that
//! postmortem and stagnation read; `live_runs`, the states of followed runs fed a line at a
//! time (`tail`). `projection`: the trait they are folded through by the store's fold driver
//! (`Projection`, re-exported here), with how each can be read in parallel: split by run
//! (`Split`) or a chunk at a time merged in file order (`Chunked`).

pub mod counts;
pub mod damaged;
pub(crate) mod list_rows;
pub mod live_runs;
pub mod projection;
pub mod replay;
pub mod run_state;
pub mod text;
pub mod trace;

pub use projection::{
    Chunked, Damage, Line, Projection, Split, feed, feed_oversize, feed_piece, fold_bytes,
};
