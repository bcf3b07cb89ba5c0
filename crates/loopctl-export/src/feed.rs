//! Lines of one log into the model: decoding, damaged lines, torn tails. Pure: the caller reads
//! the bytes (a whole file for the textfile, the follower's lines for `serve`).

use loopctl_core::decode::lines::{LineText, Piece, Pos, decode};
use loopctl_core::fold::replay::{FindingKind, damage_kind};
use loopctl_core::parse_line;

use crate::model::{MetricState, SourceId};

/// A damaged line, for the report on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub source: SourceId,
    /// 1-based; 0 when unknown (a log followed from the middle).
    pub line: u64,
    pub offset: u64,
    pub kind: FindingKind,
    pub reason: String,
}

/// Where one log has been read up to.
#[derive(Debug, Clone)]
pub struct Feed {
    pub source: SourceId,
    /// Offset just past the last line taken (a damaged unterminated tail is not taken: it is
    /// read again once its writer ends it).
    pub next_offset: u64,
    /// Offset of a damaged unterminated tail counted as `torn_tail`.
    pending_tail: Option<u64>,
    pub max_line: usize,
}

impl Feed {
    pub fn new(source: SourceId, max_line: usize) -> Feed {
        Feed {
            source,
            next_offset: 0,
            pending_tail: None,
            max_line,
        }
    }

    pub fn piece(&mut self, m: &mut MetricState, p: Piece<'_>, report: &mut impl FnMut(Damage)) {
        match p {
            Piece::Line(pos, raw) => self.line(m, pos, raw, true, report),
            Piece::Unterminated(pos, raw) => self.line(m, pos, raw, false, report),
            Piece::Oversize(pos, len) => {
                self.next_offset = pos.offset + len + 1;
                self.damage(
                    m,
                    pos,
                    FindingKind::Oversize,
                    format!("line of {len} bytes exceeds the cap"),
                    report,
                );
            }
        }
    }

    /// One line without its newline; `terminated` is false for bytes after the last newline.
    pub fn line(
        &mut self,
        m: &mut MetricState,
        pos: Pos,
        raw: &[u8],
        terminated: bool,
        report: &mut impl FnMut(Damage),
    ) {
        if self.pending_tail.take() == Some(pos.offset) {
            // The torn tail counted earlier has been read again, now whole or longer.
            m.finding(self.source, FindingKind::TornTail, -1);
        }
        let end = pos.offset + raw.len() as u64;
        if raw.len() > self.max_line {
            self.next_offset = end + u64::from(terminated);
            let reason = format!("line of {} bytes exceeds the cap", raw.len());
            return self.damage(m, pos, FindingKind::Oversize, reason, report);
        }
        let reason = match decode(pos, raw) {
            LineText::Blank => None,
            LineText::NotUtf8(reason) => Some(reason),
            LineText::Text(t) => match parse_line(t) {
                Ok(ev) => {
                    m.apply(self.source, &ev);
                    None
                }
                Err(e) => Some(e.to_string()),
            },
        };
        self.next_offset = end + u64::from(terminated);
        if let Some(reason) = reason {
            if !terminated {
                self.pending_tail = Some(pos.offset);
                self.next_offset = pos.offset;
            }
            self.damage(m, pos, damage_kind(terminated), reason, report);
        }
    }

    fn damage(
        &mut self,
        m: &mut MetricState,
        pos: Pos,
        kind: FindingKind,
        reason: String,
        report: &mut impl FnMut(Damage),
    ) {
        m.finding(self.source, kind, 1);
        report(Damage {
            source: self.source,
            line: pos.line,
            offset: pos.offset,
            kind,
            reason,
        });
    }
}
