//! Judging a run after the fact: whether it is still going (liveness), stagnation detectors and
//! the postmortem model.

pub mod liveness;
pub mod measures;
pub mod postmortem;
pub mod stagnation;
pub mod usage;
