//! Bytes → events: lines, a validating JSON scanner, the event model, a reference parser and a
//! single-pass parser that gives the same events faster, the three dialects (native, aif-loop,
//! Avenor), timestamps, and the salvage of damaged JSON objects such as `run.json`.
//!
//! Dependencies run one way: `event` (the model) ← `reference_parser`, `single_pass` ←
//! `parse_line` here, which tries the single pass and falls back to the reference.

pub mod agent_usage;
pub mod event;
pub mod json_scanner;
pub mod lines;
pub mod reference_parser;
pub mod salvage;
pub(crate) mod single_pass;
pub mod subset;
pub mod timestamp;

use event::{Event, LineError};

/// Parses one line (no newline, no BOM, no CR) into an event, detecting its dialect:
/// a `v` field means native; an event name with a dot (`avenor.*`, `session.*`, ...) means
/// Avenor; anything else is aif-loop.
///
/// Most lines take the one-pass path (`single_pass`); the rest, and every damaged line (for
/// the exact error), go through `reference_parser`. Both give the same event.
pub fn parse_line(line: &str) -> Result<Event<'_>, LineError> {
    match single_pass::parse_line_fast(line) {
        Some(ev) => Ok(ev),
        None => reference_parser::parse_line_reference(line),
    }
}
