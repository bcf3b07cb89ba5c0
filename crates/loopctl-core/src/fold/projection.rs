//! Projections: what a reader folds a log into (run states, counts, rows, traces), and the one
//! way lines reach them.
//!
//! A `Projection` is told every line of a log in file order: events, damaged lines, blank
//! lines. A store driver decodes and parses each line once (`feed`) and hands the result to
//! every projection of a set (a tuple of projections is one). A `Split` projection can also be
//! folded in parallel: the driver gives each shard the lines of some runs only, in file order,
//! and `join`s the shards afterwards, so the result is that of one sequential pass.
//!
//! Pure: the bytes come from the caller.

use crate::decode::event::{Event, Kind};
use crate::decode::lines::{LineText, Pos, decode, decode_str_cr};
use crate::decode::parse_line_slow;
use crate::fold::trace::Traces;

/// Where a line sits in its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    pub pos: Pos,
    /// Its length in bytes, without the newline.
    pub len: u64,
    /// False for bytes after the last newline (a write that may have been cut short).
    pub terminated: bool,
}

impl Line {
    /// Offset just past the line (and its newline).
    pub fn end(&self) -> u64 {
        self.pos.offset + self.len + u64::from(self.terminated)
    }
}

/// Why a line is not an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// Longer than the line cap; its bytes were skipped.
    Oversize,
    /// Not UTF-8, not JSON, not an event: the reason.
    Bad(String),
}

/// A fold of a log's lines, in file order.
pub trait Projection {
    /// Whether events need their payload facts and timestamps read (`Replay` counting only
    /// does not; skipping them is faster).
    fn wants_facts(&self) -> bool {
        true
    }
    fn event(&mut self, line: Line, ev: &Event<'_>);
    fn damaged(&mut self, _line: Line, _damage: &Damage) {}
    fn blank(&mut self, _line: Line) {}
}

/// A projection that can be folded in shards, each given the lines of its runs only (and
/// lines of no run to one shard), then joined: the result equals one sequential fold.
pub trait Split: Projection + Send + Sized {
    /// An empty projection of the same settings, for another shard.
    fn fork(&self) -> Self;
    /// Work a shard can finish alone once it has all its lines, before the join (the driver
    /// runs it on the shard's thread, in parallel with the other shards; `fold_runs`, on a
    /// whole log's once it is read). May be called again after the join.
    fn settle(&mut self) {}
    /// Takes in another shard's fold (its runs are not this one's).
    fn join(&mut self, other: Self);
    /// Told, before any line, that its log is large enough to be split by run:
    /// `tail_ends_its_runs` reads the log's last mebibyte to tell whether every run with an
    /// event there ended (for a fold that would have to start again otherwise).
    fn splitting(&mut self, _tail_ends_its_runs: &dyn Fn() -> bool) {}
}

/// A projection folded a chunk at a time: the driver reads chunks of whole lines, each alone
/// (in any order, on any thread), and merges their folds in file order. Cheaper than `Split`
/// when a chunk can be folded without the chunks before it (`counts::Tally`).
pub trait Chunked: Send {
    /// What reading a chunk needs of the projection (its settings), shared by the threads
    /// while the projection merges.
    type Reader: Sync;
    type Chunk: Send;
    fn reader(&self) -> Self::Reader;
    /// Folds the lines of `bytes`, which start at byte `start` of the log, at a line start.
    fn read_chunk(reader: &Self::Reader, bytes: &[u8], start: u64) -> Self::Chunk;
    /// Takes in the next chunk in file order. False when the fold can no longer be exact: the
    /// driver stops, and the caller folds the log another way.
    fn merge(&mut self, chunk: Self::Chunk) -> bool;
}

/// `parse_line` into `ev` (a fresh `Event::new(Kind::Other)`, built in place: it is large),
/// reading payload facts and the timestamp only with `facts`. The error is the damage reason.
pub fn read_event<'a>(text: &'a str, facts: bool, ev: &mut Event<'a>) -> Result<(), String> {
    let fast = if facts {
        crate::decode::single_pass::parse_into::<true>(text, ev)
    } else {
        crate::decode::single_pass::parse_into::<false>(text, ev)
    };
    if fast.is_some() {
        return Ok(());
    }
    match parse_line_slow(text) {
        Ok(parsed) => {
            *ev = parsed;
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Decodes and parses one line and hands it to `p`. `utf8` is the line as text when the caller
/// has checked it, with whether its last byte is a CR.
pub fn feed<P: Projection + ?Sized>(p: &mut P, line: Line, raw: &[u8], utf8: Option<(&str, bool)>) {
    let decoded = match utf8 {
        Some((t, cr)) => decode_str_cr(t, cr),
        None => decode(raw),
    };
    let text = match decoded {
        LineText::Text(t) => t,
        LineText::Blank => return p.blank(line),
        LineText::NotUtf8(reason) => return p.damaged(line, &Damage::Bad(reason)),
    };
    let mut ev = Event::new(Kind::Other);
    match read_event(text, p.wants_facts(), &mut ev) {
        Ok(()) => p.event(line, &ev),
        Err(reason) => p.damaged(line, &Damage::Bad(reason)),
    }
}

/// An oversize line: reported to `p`, its bytes never read.
pub fn feed_oversize<P: Projection + ?Sized>(p: &mut P, pos: Pos, len: u64, terminated: bool) {
    let line = Line {
        pos,
        len,
        terminated,
    };
    p.damaged(line, &Damage::Oversize);
}

macro_rules! tuple_projection {
    ($($name:ident $i:tt),+) => {
        impl<$($name: Projection),+> Projection for ($($name,)+) {
            fn wants_facts(&self) -> bool {
                false $(|| self.$i.wants_facts())+
            }
            fn event(&mut self, line: Line, ev: &Event<'_>) {
                $(self.$i.event(line, ev);)+
            }
            fn damaged(&mut self, line: Line, damage: &Damage) {
                $(self.$i.damaged(line, damage);)+
            }
            fn blank(&mut self, line: Line) {
                $(self.$i.blank(line);)+
            }
        }
        impl<$($name: Split),+> Split for ($($name,)+) {
            fn fork(&self) -> Self {
                ($(self.$i.fork(),)+)
            }
            fn settle(&mut self) {
                $(self.$i.settle();)+
            }
            fn join(&mut self, other: Self) {
                $(self.$i.join(other.$i);)+
            }
        }
    };
}
tuple_projection!(A 0, B 1);
tuple_projection!(A 0, B 1, C 2);

impl Projection for Traces {
    fn event(&mut self, _line: Line, ev: &Event<'_>) {
        self.apply(ev);
    }
}

impl Split for Traces {
    fn fork(&self) -> Self {
        Traces::fork(self)
    }
    fn join(&mut self, other: Self) {
        Traces::join(self, other);
    }
}

/// Folds a whole in-memory log sequentially (tests, small inputs).
pub fn fold_bytes<P: Projection + ?Sized>(p: &mut P, bytes: &[u8], max_line: usize) {
    fold_bytes_from(p, bytes, Pos { line: 1, offset: 0 }, max_line);
}

/// `fold_bytes` for bytes of a log that start at `from` (a line start): the lines the splitter
/// would cut. The bytes are checked as UTF-8 at once, not line by line (on a run folder's short
/// lines, setting up each check cost more than the check); bytes that are not all UTF-8 go
/// through the splitter and `feed`, which name the line that is not.
pub fn fold_bytes_from<P: Projection + ?Sized>(
    p: &mut P,
    bytes: &[u8],
    from: Pos,
    max_line: usize,
) {
    let Ok(text) = simdutf8::basic::from_utf8(bytes) else {
        let lines_before = from.line.saturating_sub(1);
        let mut sp =
            crate::decode::lines::Splitter::starting_at(max_line, from.offset, lines_before);
        let mut take = |piece: crate::decode::lines::Piece<'_>| feed_piece(p, piece);
        sp.push(bytes, &mut take);
        sp.finish(&mut take);
        return;
    };
    let mut emit = |start: usize, end: usize, line: u64, terminated: bool| {
        let pos = Pos {
            line,
            offset: from.offset + start as u64,
        };
        let len = (end - start) as u64;
        if end - start > max_line {
            // As the splitter reports one, ended or not.
            return feed_oversize(p, pos, len, true);
        }
        // Cut at newlines (or the ends): character boundaries.
        let t = &text[start..end];
        let line = Line {
            pos,
            len,
            terminated,
        };
        feed(p, line, t.as_bytes(), Some((t, t.ends_with('\r'))));
    };
    let (mut start, mut line) = (0, from.line);
    for nl in memchr::memchr_iter(b'\n', bytes) {
        emit(start, nl, line, true);
        (start, line) = (nl + 1, line + 1);
    }
    if start < bytes.len() {
        emit(start, bytes.len(), line, false);
    }
}

/// `feed` for a piece of the line splitter.
pub fn feed_piece<P: Projection + ?Sized>(p: &mut P, piece: crate::decode::lines::Piece<'_>) {
    use crate::decode::lines::Piece;
    match piece {
        Piece::Line(pos, raw) => feed(p, at(pos, raw, true), raw, None),
        Piece::Unterminated(pos, raw) => feed(p, at(pos, raw, false), raw, None),
        // The splitter does not say whether an oversize line ended with a newline; replay
        // reports it the same either way.
        Piece::Oversize(pos, len) => feed_oversize(p, pos, len, true),
    }
}

fn at(pos: Pos, raw: &[u8], terminated: bool) -> Line {
    Line {
        pos,
        len: raw.len() as u64,
        terminated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::lines::{Piece, Splitter};
    use proptest::prelude::*;

    /// Every call a projection is told, in order.
    #[derive(Default)]
    struct Calls(Vec<String>);

    impl Projection for Calls {
        fn event(&mut self, line: Line, ev: &Event<'_>) {
            self.0
                .push(format!("{line:?} {:?} {:?}", ev.kind, ev.run_id));
        }
        fn damaged(&mut self, line: Line, damage: &Damage) {
            self.0.push(format!("{line:?} {damage:?}"));
        }
        fn blank(&mut self, line: Line) {
            self.0.push(format!("{line:?} blank"));
        }
    }

    /// What the splitter and `feed` make of the same bytes, line by line.
    fn split(bytes: &[u8], from: Pos, max_line: usize) -> Vec<String> {
        let mut c = Calls::default();
        let mut sp = Splitter::starting_at(max_line, from.offset, from.line - 1);
        let mut take = |piece: Piece<'_>| feed_piece(&mut c, piece);
        sp.push(bytes, &mut take);
        sp.finish(&mut take);
        c.0
    }

    fn line() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(br#"{"event":"run_started","run_id":"a","seq":0}"#.to_vec()),
            Just(br#"{"event":"stopped","run_id":"b"}"#.to_vec()),
            Just(b"\xEF\xBB\xBF{\"event\":\"x\"}".to_vec()),
            Just(b"  ".to_vec()),
            Just(b"{\"event\":\"caf\xC3\xA9\"}\r".to_vec()),
            Just(b"{\"event\":\"\xFF\"}".to_vec()),
            Just(b"not json".to_vec()),
            prop::collection::vec(any::<u8>(), 0..40),
        ]
    }

    proptest! {
        /// A log folded from memory is told what the splitter would tell it: the same lines,
        /// positions, events and damage, whether or not its bytes are all UTF-8.
        #[test]
        fn bytes_folded_at_once_are_the_lines_the_splitter_cuts(
            lines in prop::collection::vec(line(), 0..8),
            ended in any::<bool>(),
            max_line in 4usize..64,
            at_start in any::<bool>(),
        ) {
            let mut bytes = lines.join(&b'\n');
            if ended && !bytes.is_empty() {
                bytes.push(b'\n');
            }
            let from = if at_start { Pos { line: 1, offset: 0 } } else { Pos { line: 7, offset: 300 } };
            let mut c = Calls::default();
            fold_bytes_from(&mut c, &bytes, from, max_line);
            prop_assert_eq!(c.0, split(&bytes, from, max_line));
        }
    }
}
