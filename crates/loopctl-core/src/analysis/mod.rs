//! Judging a run after the fact: stagnation detectors and the postmortem model.

pub mod postmortem;
pub mod stagnation;
