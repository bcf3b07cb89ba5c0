//! Replay: lines in, one `RunState` per run out, plus every finding about the log.
//!
//! Damaged lines are reported (line, byte offset, reason) and skipped; every readable line
//! before and after them is applied. Runs are independent, so a replay can be split into
//! shards by run (each shard sees every line but applies only its runs') and the shards merged:
//! the result is the same as one sequential pass.

use std::collections::BTreeMap;
use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHasher};
use serde::Serialize;

use crate::decode::event::{Dialect, Event, Kind};
use crate::decode::lines::{LineText, Piece, Pos, decode, decode_str_cr};
use crate::decode::reference_parser::{parse_line_reference, run_key};
use crate::fold::run_state::{LogMark, RunState, reduce};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A line in the middle of the log that is not an event.
    BadLine,
    /// Bytes after the last newline that are not a complete event (a write cut short).
    TornTail,
    /// A line longer than the configured cap.
    Oversize,
    SeqGap,
    SeqDuplicate,
    SeqReorder,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Finding {
    pub line: u64,
    pub offset: u64,
    pub kind: FindingKind,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    pub lines: u64,
    pub blank: u64,
    pub events: u64,
    pub skipped: u64,
    pub by_dialect: BTreeMap<String, u64>,
    pub by_event: BTreeMap<String, u64>,
    /// Events of types loopctl does not know (kept, counted, not fatal).
    pub unknown: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) lines: u64,
    pub(crate) blank: u64,
    pub(crate) skipped: u64,
    dialect: [u64; 3],
    /// By `Kind as usize`, for the known kinds.
    kind: Vec<u64>,
    other: FxHashMap<String, u64>,
}

impl Counters {
    /// Counts an event by dialect and type.
    pub(crate) fn event(&mut self, ev: &Event<'_>) {
        self.count(ev.dialect, ev.kind, &ev.name);
    }

    /// Counts an event of this dialect, kind and name.
    #[inline]
    pub(crate) fn count(&mut self, dialect: Dialect, kind: Kind, name: &str) {
        self.dialect[dialect as usize] += 1;
        if kind == Kind::Other {
            match self.other.get_mut(name) {
                Some(n) => *n += 1,
                None => {
                    self.other.insert(name.to_string(), 1);
                }
            }
        } else {
            let k = kind as usize;
            if self.kind.len() <= k {
                self.kind.resize(Kind::ALL.len(), 0);
            }
            self.kind[k] += 1;
        }
    }

    pub(crate) fn add(&mut self, o: Counters) {
        self.lines += o.lines;
        self.blank += o.blank;
        self.skipped += o.skipped;
        for (a, b) in self.dialect.iter_mut().zip(o.dialect) {
            *a += b;
        }
        if self.kind.len() < o.kind.len() {
            self.kind.resize(o.kind.len(), 0);
        }
        for (a, b) in self.kind.iter_mut().zip(o.kind) {
            *a += b;
        }
        for (name, n) in o.other {
            *self.other.entry(name).or_default() += n;
        }
    }

    pub(crate) fn into_stats(self) -> Stats {
        let mut stats = Stats {
            lines: self.lines,
            blank: self.blank,
            skipped: self.skipped,
            ..Stats::default()
        };
        for d in [Dialect::Native, Dialect::AifLoop, Dialect::Avenor] {
            if self.dialect[d as usize] > 0 {
                stats
                    .by_dialect
                    .insert(d.name().into(), self.dialect[d as usize]);
            }
        }
        for (&k, &n) in Kind::ALL.iter().zip(&self.kind) {
            if n > 0 {
                stats.by_event.insert(k.name().into(), n);
                stats.events += n;
            }
        }
        for (name, n) in self.other {
            stats.unknown += n;
            stats.events += n;
            *stats.by_event.entry(name).or_default() += n;
        }
        stats
    }
}

/// `parse_line` into `ev` (a fresh `Event::new(Kind::Other)`, built in place: it is large),
/// reading payload facts and the timestamp only with `facts`. The error is the finding's reason.
pub(crate) fn read_event<'a>(text: &'a str, facts: bool, ev: &mut Event<'a>) -> Result<(), String> {
    let fast = if facts {
        crate::decode::single_pass::parse_into::<true>(text, ev)
    } else {
        crate::decode::single_pass::parse_into::<false>(text, ev)
    };
    if fast.is_some() {
        return Ok(());
    }
    match parse_line_reference(text) {
        Ok(parsed) => {
            *ev = parsed;
            Ok(())
        }
        Err(e) => Err(match memchr::memchr(0, text.as_bytes()) {
            Some(i) => format!("NUL byte at byte {i} of the line ({e})"),
            None => e.to_string(),
        }),
    }
}

pub(crate) fn oversize_reason(len: u64) -> String {
    format!("line of {len} bytes exceeds the line size cap")
}

/// A damaged line's finding: mid-log, or the torn tail after the last newline.
pub fn damage_kind(terminated: bool) -> FindingKind {
    if terminated {
        FindingKind::BadLine
    } else {
        FindingKind::TornTail
    }
}

/// What an event's `seq` means after a run's `events` and `last_seq` (shared with the other
/// folds of a log, such as the metrics in `loopctl-export`).
pub struct SeqStep {
    pub finding: Option<(FindingKind, String)>,
    /// The event repeats the last `seq`: it is not applied.
    pub duplicate: bool,
    /// The run's `last_seq` stays this (the event came out of order).
    pub keep: Option<u64>,
}

pub fn seq_step(events: u64, last: Option<u64>, seq: Option<u64>) -> SeqStep {
    let mut step = SeqStep {
        finding: None,
        duplicate: false,
        keep: None,
    };
    if let (Some(seq), Some(last)) = (seq, last) {
        if seq == last {
            step.duplicate = true;
            step.finding = Some((
                FindingKind::SeqDuplicate,
                format!("seq {seq} repeats the previous event's; not applied"),
            ));
        } else if seq < last {
            step.finding = Some((
                FindingKind::SeqReorder,
                format!("seq {seq} after seq {last}"),
            ));
            step.keep = Some(last);
        } else if seq > last + 1 {
            step.finding = Some((
                FindingKind::SeqGap,
                format!("seq jumps from {last} to {seq}"),
            ));
        }
    } else if let (Some(seq), None, 0) = (seq, last, events)
        && seq > 1
    {
        step.finding = Some((FindingKind::SeqGap, format!("first event has seq {seq}")));
    }
    step
}

/// A run being replayed. The reducer decodes every `evaluation_done` payload into
/// `RunState::evaluation`, but only the last one survives: replay keeps that payload's text
/// and decodes it once, when the run is handed out.
struct Slot {
    state: RunState,
    /// Text of the payload of the last evaluation applied, when `state.evaluation` is stale.
    eval: Option<String>,
}

impl Slot {
    fn new(state: RunState) -> Slot {
        Slot { state, eval: None }
    }

    fn into_state(self) -> RunState {
        let mut state = self.state;
        if let Some(text) = self.eval {
            // What `Event::payload_value` gives for this payload.
            state.evaluation = Some(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null));
        }
        state
    }
}

pub struct Outcome {
    pub runs: BTreeMap<String, RunState>,
    pub findings: Vec<Finding>,
    pub stats: Stats,
}

pub struct Replay {
    default_run: String,
    runs: FxHashMap<String, Slot>,
    findings: Vec<Finding>,
    counters: Counters,
    shard: (u64, u64),
    /// False when only the statistics and findings are wanted: runs keep their event count and
    /// last `seq`, nothing else is reduced.
    states: bool,
}

fn shard_of(key: &str, shards: u64) -> u64 {
    shard_of_bytes(key.as_bytes(), shards)
}

fn shard_of_bytes(key: &[u8], shards: u64) -> u64 {
    let mut h = FxHasher::default();
    h.write(key);
    h.finish() % shards
}

impl Replay {
    /// `default_run` names the run of events that carry neither `run_id` nor `session_id`.
    pub fn new(default_run: &str) -> Replay {
        Replay::shard(default_run, 0, 1)
    }

    /// Shard `index` of `count`: applies only the runs that hash to it. Lines that belong to no
    /// run (blank, damaged) are counted and reported by shard 0.
    pub fn shard(default_run: &str, index: u64, count: u64) -> Replay {
        Replay {
            default_run: default_run.to_string(),
            runs: FxHashMap::default(),
            findings: Vec::new(),
            counters: Counters::default(),
            shard: (index, count.max(1)),
            states: true,
        }
    }

    /// Counts and checks only: the outcome's statistics and findings are those of a full
    /// replay, but its run states hold only `run_id`, `events` and `last_seq` (`check` with no
    /// run.json to compare needs no more, and skips reading payload facts and timestamps).
    pub fn without_states(mut self) -> Replay {
        self.states = false;
        self
    }

    /// Continues from a snapshot: later lines of its run are applied on top of it. Only the
    /// shard that owns the run keeps it (the merge must not see a stale copy from another).
    pub fn resume(&mut self, state: RunState) {
        if shard_of(&state.run_id, self.shard.1) == self.shard.0 {
            self.runs.insert(state.run_id.clone(), Slot::new(state));
        }
    }

    pub fn piece(&mut self, piece: Piece<'_>) {
        match piece {
            Piece::Line(pos, bytes) => self.line(pos, bytes, true),
            Piece::Unterminated(pos, bytes) => self.line(pos, bytes, false),
            Piece::Oversize(pos, len) => {
                if self.shard.0 == 0 {
                    self.counters.lines += 1;
                    self.counters.skipped += 1;
                    self.finding(pos, FindingKind::Oversize, oversize_reason(len), None);
                }
            }
        }
    }

    fn finding(&mut self, pos: Pos, kind: FindingKind, reason: String, run_id: Option<String>) {
        self.findings.push(Finding {
            line: pos.line,
            offset: pos.offset,
            kind,
            reason,
            run_id,
        });
    }

    /// One line without its `\n`; `terminated` is false for bytes after the last newline.
    pub fn line(&mut self, pos: Pos, raw: &[u8], terminated: bool) {
        self.line_in(pos, raw, None, terminated, true);
    }

    /// `line` for a caller that sends each line to one shard only, the one `route` names: the
    /// line is not filtered again.
    pub fn routed_line(&mut self, pos: Pos, raw: &[u8], terminated: bool) {
        self.line_in(pos, raw, None, terminated, false);
    }

    /// `routed_line` for a line the caller has already checked is UTF-8 and whose last byte it
    /// has looked at (`cr`: it is a CR).
    pub fn routed_text(&mut self, pos: Pos, text: &str, terminated: bool, cr: bool) {
        self.line_in(pos, text.as_bytes(), Some((text, cr)), terminated, false);
    }

    fn line_in(
        &mut self,
        pos: Pos,
        raw: &[u8],
        utf8: Option<(&str, bool)>,
        terminated: bool,
        filter: bool,
    ) {
        let end = pos.offset + raw.len() as u64 + u64::from(terminated);
        let primary = self.shard.0 == 0 || !filter;
        let decoded = match utf8 {
            Some((t, cr)) => decode_str_cr(pos, t, cr),
            None => decode(pos, raw),
        };
        let text = match decoded {
            LineText::Text(t) => t,
            LineText::Blank => {
                if primary {
                    self.counters.lines += 1;
                    self.counters.blank += 1;
                }
                return;
            }
            LineText::NotUtf8(reason) => {
                if primary {
                    self.bad(pos, terminated, reason);
                }
                return;
            }
        };
        if filter && self.shard.1 > 1 {
            let owner = match run_key(text) {
                Ok(key) => shard_of(key.as_deref().unwrap_or(&self.default_run), self.shard.1),
                Err(_) => 0,
            };
            if owner != self.shard.0 {
                return;
            }
        }
        let mut ev = Event::new(Kind::Other);
        match read_event(text, self.states, &mut ev) {
            Ok(()) => {
                self.counters.lines += 1;
                self.event(pos, end, terminated, &ev);
            }
            Err(reason) => self.bad(pos, terminated, reason),
        }
    }

    fn bad(&mut self, pos: Pos, terminated: bool, reason: String) {
        self.counters.lines += 1;
        self.counters.skipped += 1;
        self.finding(pos, damage_kind(terminated), reason, None);
    }

    fn event(&mut self, pos: Pos, end: u64, terminated: bool, ev: &Event<'_>) {
        self.counters.event(ev);
        let key = ev.run_id.as_deref().unwrap_or(&self.default_run);
        let slot = match self.runs.get_mut(key) {
            Some(s) => s,
            None => self
                .runs
                .entry(key.to_string())
                .or_insert_with(|| Slot::new(RunState::new(key))),
        };
        let state = &mut slot.state;
        let SeqStep {
            finding: seq_finding,
            duplicate,
            keep: keep_seq,
        } = seq_step(state.events, state.last_seq, ev.seq);
        if !duplicate && !self.states {
            // What `apply_mut` does to the two fields the seq checks read.
            state.events += 1;
            state.last_seq = keep_seq.or(ev.seq).or(state.last_seq);
        } else if !duplicate {
            if ev.kind == Kind::EvaluationDone {
                // Decoded once at the end (`Slot::into_state`); the reducer reads only the
                // facts.
                match ev.payload.as_deref() {
                    Some(p) => match &mut slot.eval {
                        Some(text) => {
                            text.clear();
                            text.push_str(p);
                        }
                        none => *none = Some(p.to_string()),
                    },
                    None => slot.eval = None,
                }
            }
            let state = &mut slot.state;
            reduce(state, ev, false);
            if keep_seq.is_some() {
                state.last_seq = keep_seq;
            }
            state.log = LogMark {
                offset: end,
                line: pos.line,
                len: end - pos.offset - u64::from(terminated),
                fingerprint: None,
            };
        }
        if let Some((kind, reason)) = seq_finding {
            let run = Some(key.to_string());
            self.finding(pos, kind, reason, run);
        }
    }

    pub(crate) fn states(&self) -> bool {
        self.states
    }

    /// An event handed in by a fold driver (`fold::Projection`).
    pub(crate) fn apply_event(&mut self, line: crate::fold::Line, ev: &Event<'_>) {
        self.counters.lines += 1;
        self.event(line.pos, line.end(), line.terminated, ev);
    }

    pub(crate) fn apply_damaged(&mut self, line: crate::fold::Line, damage: &crate::fold::Damage) {
        let (kind, reason) = damage.finding(&line);
        self.counters.lines += 1;
        self.counters.skipped += 1;
        self.finding(line.pos, kind, reason, None);
    }

    pub(crate) fn apply_blank(&mut self) {
        self.counters.lines += 1;
        self.counters.blank += 1;
    }

    /// An empty replay of the same settings (another shard of a fold).
    pub(crate) fn empty_like(&self) -> Replay {
        let mut r = Replay::new(&self.default_run);
        r.states = self.states;
        r
    }

    /// Takes in another shard's replay: its runs are not this one's.
    pub(crate) fn absorb(&mut self, other: Replay) {
        self.runs.extend(other.runs);
        self.findings.extend(other.findings);
        self.counters.add(other.counters);
    }

    pub fn finish(self) -> Outcome {
        Replay::merge(vec![self.finish_part()])
    }

    /// The shard's outcome, its runs not yet sorted: `merge` sorts the runs of all parts once.
    pub fn finish_part(self) -> Part {
        Part {
            runs: self
                .runs
                .into_iter()
                .map(|(k, slot)| (k, slot.into_state()))
                .collect(),
            findings: self.findings,
            stats: self.counters.into_stats(),
        }
    }

    /// Merges the parts of one replay (shards, or one whole replay).
    pub fn merge(parts: Vec<Part>) -> Outcome {
        let mut runs: Vec<(String, RunState)> = Vec::new();
        let mut findings = Vec::new();
        let mut stats = Stats::default();
        for p in parts {
            if runs.is_empty() {
                runs = p.runs;
            } else {
                runs.extend(p.runs);
            }
            findings.extend(p.findings);
            let s = &mut stats;
            s.lines += p.stats.lines;
            s.blank += p.stats.blank;
            s.events += p.stats.events;
            s.skipped += p.stats.skipped;
            s.unknown += p.stats.unknown;
            for (k, n) in p.stats.by_dialect {
                *s.by_dialect.entry(k).or_default() += n;
            }
            for (k, n) in p.stats.by_event {
                *s.by_event.entry(k).or_default() += n;
            }
        }
        // A state is large: `sort_by_cached_key` sorts (key, index) pairs and then swaps each
        // state into place, far fewer bytes moved than sorting the states themselves. It is
        // stable, and the map keeps the last of equal keys: a run in two parts keeps the later
        // part's state, as insertion would.
        runs.sort_by_cached_key(|(k, _)| k.clone());
        findings.sort();
        Outcome {
            // Sorted already: collecting checks that in one pass and builds the map in bulk.
            runs: runs.into_iter().collect(),
            findings,
            stats,
        }
    }
}

/// One shard's outcome before the merge (`Replay::finish_part`).
pub struct Part {
    runs: Vec<(String, RunState)>,
    findings: Vec<Finding>,
    stats: Stats,
}

/// The shard (of `shards`) whose `Replay` applies this line: the one `Replay::line` keeps it
/// in. Lines that belong to no run (blank, not UTF-8, not an object) go to shard 0, like
/// oversize lines, which the caller sends to shard 0's `piece`.
pub fn route(default_run: &str, pos: Pos, raw: &[u8], shards: u64) -> u64 {
    if shards <= 1 {
        return 0;
    }
    if let Some(key) = crate::decode::single_pass::run_key_fast(raw) {
        return shard_of_bytes(key.unwrap_or(default_run.as_bytes()), shards);
    }
    match decode(pos, raw) {
        LineText::Text(t) => match run_key(t) {
            Ok(key) => shard_of(key.as_deref().unwrap_or(default_run), shards),
            Err(_) => 0,
        },
        LineText::Blank | LineText::NotUtf8(_) => 0,
    }
}

/// Replays a whole in-memory log in one pass (tests, small inputs).
pub fn replay_bytes(default_run: &str, bytes: &[u8]) -> Outcome {
    let mut r = Replay::new(default_run);
    let mut sp = crate::decode::lines::Splitter::new(crate::decode::lines::DEFAULT_MAX_LINE);
    sp.push(bytes, |p| r.piece(p));
    sp.finish(|p| r.piece(p));
    r.finish()
}
