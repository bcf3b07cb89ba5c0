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
        None => parse_line_slow(line),
    }
}

/// `reference_parser::parse_line_reference`, its error naming a NUL byte when the line holds
/// one (docs/events.md §6): every reader (`parse_line`, the folds' `feed`) says it so.
pub(crate) fn parse_line_slow(line: &str) -> Result<Event<'_>, LineError> {
    reference_parser::parse_line_reference(line).map_err(|e| {
        match memchr::memchr(0, line.as_bytes()) {
            Some(i) => LineError::Unreadable(format!("NUL byte at byte {i} of the line ({e})")),
            None => e,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reason a damaged line gets is the same from `parse_line` (tail, history) and from
    /// the folds' `feed` (replay, check, serve).
    #[test]
    fn every_reader_gives_a_damaged_line_the_same_reason() {
        use crate::decode::lines::Pos;
        use crate::fold::{Damage, Line, Projection, feed};
        struct Reason(Option<String>);
        impl Projection for Reason {
            fn event(&mut self, _: Line, _: &Event<'_>) {}
            fn damaged(&mut self, _: Line, d: &Damage) {
                if let Damage::Bad(r) = d {
                    self.0 = Some(r.clone());
                }
            }
        }
        for line in [
            "{\"event\":\"x\",\"note\":\"a\u{0}b\"}",
            "{\"event\":\"x\",\u{0}}",
            "{not json",
            "[1]",
            "{\"no_event\":1}",
        ] {
            let by_parse = parse_line(line).unwrap_err().to_string();
            let pos = Pos { line: 1, offset: 0 };
            let l = Line {
                pos,
                len: line.len() as u64,
                terminated: true,
            };
            let mut by_feed = Reason(None);
            feed(&mut by_feed, l, line.as_bytes(), None);
            assert_eq!(by_feed.0.as_deref(), Some(by_parse.as_str()), "{line:?}");
            assert_eq!(
                line.contains('\u{0}'),
                by_parse.starts_with("NUL byte at byte"),
                "{by_parse}"
            );
        }
    }
}
