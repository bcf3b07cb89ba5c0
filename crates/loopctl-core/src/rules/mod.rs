//! Loop rules, the decisions a loop takes: loop files, workflow markers, the next step and the
//! sentinel, the exit code a run's end gives, `when` transition rules and task-chain branches,
//! evaluation criteria, escalation.

pub mod criteria;
pub mod escalation;
pub mod loop_file;
pub mod markers;
pub mod next_step;
pub mod run_exit;
pub mod transitions;
