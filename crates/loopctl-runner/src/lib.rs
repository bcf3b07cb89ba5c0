//! loopctl's loop runner: drives a loop file's phases as processes and writes every fact to the
//! run's `history.jsonl` before acting on it. `run.json`, the sentinel and the `--on-event`
//! stream are projections of what was written; `resume` continues from the log alone.

pub mod after_crash;
pub mod control;
pub mod manage;
pub mod phase;
pub mod run;
pub mod template;

pub use run::{Prepared, Refused, RunOptions, Runner, RunnerError, now, prepare};
