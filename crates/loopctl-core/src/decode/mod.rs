//! Bytes → events: lines, a validating JSON scanner, the event model with its reference parser
//! and a single-pass parser that gives the same events faster, the three dialects (native,
//! aif-loop, Avenor), timestamps, and the salvage of damaged JSON objects such as `run.json`.

pub mod event;
pub mod json_scanner;
pub mod lines;
pub mod salvage;
pub(crate) mod single_pass;
pub mod timestamp;
