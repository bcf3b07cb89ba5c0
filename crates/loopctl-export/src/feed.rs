//! Lines of one log into the model: decoding, damaged lines, torn tails. Pure: the caller reads
//! the bytes (the store's fold driver at start-up, the follower's lines for `serve`).
//!
//! One code path for both: a line reaches the model through the core's `fold::feed` and the
//! `Lines` projection, whether the driver reads it ([`LogFold`], a log folded alone on some
//! thread) or the follower hands it over ([`Feed::line`]).

use loopctl_core::Event;
use loopctl_core::decode::lines::{Piece, Pos};
use loopctl_core::fold::replay::{FindingKind, damage_kind, oversize_reason};
use loopctl_core::fold::{self, Line, Projection, Split};

use crate::model::{MetricState, Options, SourceId};

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
        fold::feed_piece(
            &mut Lines {
                feed: self,
                m,
                report,
            },
            p,
        );
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
        let len = raw.len() as u64;
        let oversize = raw.len() > self.max_line;
        let mut p = Lines {
            feed: self,
            m,
            report,
        };
        if oversize {
            fold::feed_oversize(&mut p, pos, len, terminated);
        } else {
            let line = Line {
                pos,
                len,
                terminated,
            };
            fold::feed(&mut p, line, raw, None);
        }
    }

    /// Before any line: the torn tail counted earlier is read again, whole or longer. It stays
    /// counted (a counter never goes down: see `MetricState::drop_source`).
    fn begin(&mut self, line: Line) -> bool {
        self.pending_tail.take() == Some(line.pos.offset)
    }
}

/// A log's lines into the model, as a projection of the core's fold.
struct Lines<'a, R: FnMut(Damage)> {
    feed: &'a mut Feed,
    m: &'a mut MetricState,
    report: R,
}

impl<R: FnMut(Damage)> Projection for Lines<'_, R> {
    fn event(&mut self, line: Line, ev: &Event<'_>) {
        if self.feed.begin(line) {
            // The torn tail counted earlier is now a whole event.
            self.m.tail_completed(self.feed.source);
        }
        if let Some((kind, reason)) = self.m.apply(self.feed.source, ev) {
            (self.report)(Damage {
                source: self.feed.source,
                line: line.pos.line,
                offset: line.pos.offset,
                kind,
                reason,
            });
        }
        self.feed.next_offset = line.end();
    }

    fn blank(&mut self, line: Line) {
        self.feed.begin(line);
        self.feed.next_offset = line.end();
    }

    fn damaged(&mut self, line: Line, damage: &fold::Damage) {
        let feed = &mut *self.feed;
        let seen = feed.begin(line);
        feed.next_offset = line.end();
        let (kind, reason) = match damage {
            fold::Damage::Oversize => (FindingKind::Oversize, oversize_reason(line.len)),
            fold::Damage::Bad(reason) => {
                if !line.terminated {
                    // Not taken: read again once its writer ends it.
                    feed.pending_tail = Some(line.pos.offset);
                    feed.next_offset = line.pos.offset;
                }
                (damage_kind(line.terminated), reason.clone())
            }
        };
        // A torn tail read again, still torn or ended damaged, is the line counted (and
        // reported) when first seen: one finding per line.
        if seen {
            return;
        }
        self.m.finding(feed.source, kind, 1);
        (self.report)(Damage {
            source: feed.source,
            line: line.pos.line,
            offset: line.pos.offset,
            kind,
            reason,
        });
    }
}

/// One log folded alone by the store's fold driver (`serve`'s start-up, `export`), in parallel
/// with the others and, when large, in shards by run: a model of its own
/// (`MetricState::alone`, source 0), where it was read up to, its damaged lines in file order.
/// `textfile::absorb` takes it into the shared model.
#[derive(Debug)]
pub struct LogFold {
    pub m: MetricState,
    pub feed: Feed,
    pub damages: Vec<Damage>,
    /// Bytes of lines folded, while the fold is lean (`lean_max`).
    lean_bytes: u64,
    /// Past this many bytes a log folded alone on one thread gives up the lean way (`LEAN_MAX`).
    lean_max: u64,
    /// Threads the log is folded on, and folded again on if need be.
    pub threads: usize,
}

/// A log folded the lean way (`model/lean.rs`) may have to be folded again the full way: past
/// this many bytes a log read by one thread is not folded the lean way, so that a second
/// reading costs little more than the first. A larger log is split by run on threads, and its
/// shards fold the lean way to its end: a large log is mostly a merged log of ended runs, and
/// folding one again costs what its first fold cost, on all threads.
const LEAN_MAX: u64 = 8 << 20;

impl LogFold {
    /// A log's fold, lean (`MetricState::fold_lean`): a log folded whole at start-up, on up
    /// to `threads` threads.
    pub fn new(options: &Options, name: &str, max_line: usize, threads: usize) -> LogFold {
        let mut f = LogFold::full(options, name, max_line, threads);
        f.m.fold_lean(true);
        f
    }

    /// A log's fold the full way (a log folded again).
    pub fn full(options: &Options, name: &str, max_line: usize, threads: usize) -> LogFold {
        LogFold {
            m: MetricState::alone(options, name),
            feed: Feed::new(0, max_line),
            damages: Vec::new(),
            lean_bytes: 0,
            lean_max: LEAN_MAX,
            threads,
        }
    }

    /// Whether a line needs folding: not once the lean way has given up (the log is folded
    /// again). Counts the bytes of a lean fold.
    fn wanted(&mut self, line: Line) -> bool {
        if self.m.gave_up() {
            return false;
        }
        if self.m.is_lean() {
            self.lean_bytes += line.len + 1;
            if self.lean_bytes > self.lean_max {
                self.m.give_up_lean();
                return !self.m.gave_up();
            }
        }
        true
    }

    fn lines(&mut self) -> Lines<'_, impl FnMut(Damage) + '_> {
        let damages = &mut self.damages;
        Lines {
            feed: &mut self.feed,
            m: &mut self.m,
            report: move |d| damages.push(d),
        }
    }
}

impl Projection for LogFold {
    fn event(&mut self, line: Line, ev: &Event<'_>) {
        if self.wanted(line) {
            self.lines().event(line, ev);
        }
    }
    fn damaged(&mut self, line: Line, damage: &fold::Damage) {
        if self.wanted(line) {
            self.lines().damaged(line, damage);
        }
    }
    fn blank(&mut self, line: Line) {
        if self.wanted(line) {
            self.lines().blank(line);
        }
    }
}

/// Shards hold the lines of distinct runs: their models add up (`MetricState::join`). A lean
/// fold's shards fold the lean way, with no byte limit (see `LEAN_MAX`).
impl Split for LogFold {
    fn fork(&self) -> Self {
        let name = self.m.source_name(0).unwrap_or_default();
        let mut f = LogFold::full(&self.m.options, name, self.feed.max_line, self.threads);
        if self.m.is_lean() {
            f.m.fold_lean(true);
            f.lean_max = u64::MAX;
        }
        f
    }

    fn settle(&mut self) {
        self.m.settle();
    }

    /// A large log whose last runs are still running would be folded twice (lean, then
    /// full): its tail tells, and it is folded the full way at once.
    fn splitting(&mut self, tail_ends_its_runs: &dyn Fn() -> bool) {
        if self.m.is_lean() && !tail_ends_its_runs() {
            self.m.fold_lean(false);
        }
    }

    fn join(&mut self, other: Self) {
        self.m.join(other.m);
        self.feed.next_offset = self.feed.next_offset.max(other.feed.next_offset);
        self.feed.pending_tail = self.feed.pending_tail.or(other.feed.pending_tail);
        self.damages.extend(other.damages);
        self.damages.sort_by_key(|d| d.offset);
    }
}
