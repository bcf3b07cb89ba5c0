//! The damaged lines of a log as a projection of their own, to fold beside others (the fold
//! driver's `fold_paths` reports them for every log it reads).

use crate::decode::event::Event;
use crate::fold::projection::{Damage, Line, Projection, Split};
use crate::fold::replay::oversize_reason;

/// A line that is not an event: where it is and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DamagedLine {
    pub line: u64,
    pub offset: u64,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct DamagedLines(Vec<DamagedLine>);

impl DamagedLines {
    /// The lines in file order (shards of a fold give theirs in any order).
    pub fn into_sorted(self) -> Vec<DamagedLine> {
        let mut v = self.0;
        v.sort();
        v
    }
}

impl Projection for DamagedLines {
    fn wants_facts(&self) -> bool {
        false
    }
    fn event(&mut self, _line: Line, _ev: &Event<'_>) {}
    fn damaged(&mut self, line: Line, damage: &Damage) {
        let reason = match damage {
            Damage::Oversize => oversize_reason(line.len),
            Damage::Bad(reason) => reason.clone(),
        };
        self.0.push(DamagedLine {
            line: line.pos.line,
            offset: line.pos.offset,
            reason,
        });
    }
}

impl Split for DamagedLines {
    fn fork(&self) -> Self {
        DamagedLines::default()
    }
    fn join(&mut self, other: Self) {
        self.0.extend(other.0);
    }
}
