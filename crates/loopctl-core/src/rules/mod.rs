//! Loop rules, the decisions a loop takes: loop files, workflow markers, the next step and the
//! sentinel, the exit code a run's end gives, `when` transition rules and task-chain branches,
//! evaluation criteria, escalation, and the run ids a loop may be given.

pub mod criteria;
pub mod ending;
pub mod escalation;
pub mod loop_file;
pub mod markers;
pub mod next_step;
pub mod run_exit;
pub mod run_id;
pub mod sentinel;
pub mod transitions;
