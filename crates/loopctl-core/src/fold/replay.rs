//! Replay: lines in, one `RunState` per run out, plus every finding about the log.
//!
//! Damaged lines are reported (line, byte offset, reason) and skipped; every readable line
//! before and after them is applied. Runs are independent, so a replay can be split into
//! shards by run (`fold::Split`: each shard is given its runs' lines, `route` says which) and
//! the shards joined: the result is the same as one sequential pass.

use std::collections::BTreeMap;
use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHasher};
use serde::Serialize;

use crate::decode::event::{Dialect, Event, Kind};
use crate::decode::lines::{LineText, Piece, Pos, decode};
use crate::decode::reference_parser::run_key;
use crate::fold::projection::{Damage, Line, Projection, Split, feed_piece};
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

/// Why a line over the cap is skipped: every reader says it so, naming the flag that moves it.
pub fn oversize_reason(len: u64) -> String {
    format!("line of {len} bytes exceeds the line size cap (--max-line-bytes)")
}

impl Damage {
    /// The finding a replay reports for it.
    pub fn finding(&self, line: &Line) -> (FindingKind, String) {
        match self {
            Damage::Oversize => (FindingKind::Oversize, oversize_reason(line.len)),
            Damage::Bad(reason) => (damage_kind(line.terminated), reason.clone()),
        }
    }
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

/// A run's place in its seqs as replay tracks it: the events applied and the last `seq` kept.
/// Every reader that shows or counts events one by one (history, tail, the analytics
/// `events` table) steps it, so each skips and reports what replay does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeqState {
    pub events: u64,
    pub last: Option<u64>,
}

impl SeqState {
    /// What the next event's `seq` means; moves past it unless it is a duplicate (not applied).
    pub fn step(&mut self, seq: Option<u64>) -> SeqStep {
        let step = seq_step(self.events, self.last, seq);
        if !step.duplicate {
            self.events += 1;
            self.last = step.keep.or(seq).or(self.last);
        }
        step
    }
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

    /// Decodes the last evaluation's payload into the state.
    fn settle(&mut self) {
        if let Some(text) = self.eval.take() {
            // What `Event::payload_value` gives for this payload.
            self.state.evaluation =
                Some(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null));
        }
    }

    fn into_state(mut self) -> RunState {
        self.settle();
        self.state
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
    /// A snapshot to continue from (`resume`): its run starts from it when first seen. Every
    /// shard of a fold holds a copy; only the one given the run's lines uses it.
    seed: Option<Box<RunState>>,
    /// False when only the statistics and findings are wanted: runs keep their event count and
    /// last `seq`, nothing else is reduced.
    states: bool,
}

/// The shard `route` sends an event's line to, from the event as parsed: the fold driver checks
/// each event against the shard it was sent to (`run_key_fast` takes a line's first `run_id`,
/// the parsed event its last).
pub fn shard_of_event(default_run: &str, run: Option<&str>, shards: u64) -> u64 {
    if shards <= 1 {
        return 0;
    }
    shard_of(run.unwrap_or(default_run), shards)
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
        Replay {
            default_run: default_run.to_string(),
            runs: FxHashMap::default(),
            findings: Vec::new(),
            counters: Counters::default(),
            seed: None,
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

    /// Continues from a snapshot: later lines of its run are applied on top of it (the caller
    /// feeds the lines after the snapshot's log mark).
    pub fn resume(&mut self, state: RunState) {
        self.seed = Some(Box::new(state));
    }

    /// One piece of the line splitter (tests, small inputs).
    pub fn piece(&mut self, piece: Piece<'_>) {
        feed_piece(self, piece);
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

    fn apply_event(&mut self, pos: Pos, end: u64, terminated: bool, ev: &Event<'_>) {
        self.counters.event(ev);
        let key = ev.run_id.as_deref().unwrap_or(&self.default_run);
        let slot = match self.runs.get_mut(key) {
            Some(s) => s,
            None => {
                let state = match self.seed.as_deref() {
                    Some(seed) if seed.run_id == key => seed.clone(),
                    _ => RunState::new(key),
                };
                self.runs
                    .entry(key.to_string())
                    .or_insert_with(|| Slot::new(state))
            }
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

    /// An empty replay of the same settings (another shard of a fold).
    fn empty_like(&self) -> Replay {
        Replay {
            seed: self.seed.clone(),
            states: self.states,
            ..Replay::new(&self.default_run)
        }
    }

    pub fn finish(mut self) -> Outcome {
        if let Some(seed) = self.seed.take()
            && !self.runs.contains_key(&seed.run_id)
        {
            // No line of its run after the snapshot: the run is the snapshot.
            self.runs.insert(seed.run_id.clone(), Slot::new(*seed));
        }
        let mut runs: Vec<(String, RunState)> = self
            .runs
            .into_iter()
            .map(|(k, slot)| (k, slot.into_state()))
            .collect();
        // A state is large: `sort_by_cached_key` sorts (key, index) pairs and then swaps each
        // state into place, far fewer bytes moved than sorting the states themselves.
        runs.sort_by_cached_key(|(k, _)| k.clone());
        let mut findings = self.findings;
        findings.sort();
        Outcome {
            // Sorted already: collecting checks that in one pass and builds the map in bulk.
            runs: runs.into_iter().collect(),
            findings,
            stats: self.counters.into_stats(),
        }
    }
}

impl Projection for Replay {
    fn wants_facts(&self) -> bool {
        self.states
    }
    fn event(&mut self, line: Line, ev: &Event<'_>) {
        self.counters.lines += 1;
        self.apply_event(line.pos, line.end(), line.terminated, ev);
    }
    fn damaged(&mut self, line: Line, damage: &Damage) {
        let (kind, reason) = damage.finding(&line);
        self.counters.lines += 1;
        self.counters.skipped += 1;
        self.finding(line.pos, kind, reason, None);
    }
    fn blank(&mut self, _line: Line) {
        self.counters.lines += 1;
        self.counters.blank += 1;
    }
}

impl Split for Replay {
    fn fork(&self) -> Self {
        self.empty_like()
    }
    fn settle(&mut self) {
        for slot in self.runs.values_mut() {
            slot.settle();
        }
    }
    /// Takes in another shard's replay: its runs are not this one's.
    fn join(&mut self, other: Self) {
        self.runs.extend(other.runs);
        self.findings.extend(other.findings);
        self.counters.add(other.counters);
    }
}

/// The shard (of `shards`) that is given this line in a fold split by run: every line of a run
/// goes to one shard. Lines that belong to no run (blank, not UTF-8, not an object) go to
/// shard 0, as oversize lines should. With it, the run id it was routed by when that is bytes
/// of `raw` (`run_key_fast`): an event whose run id is that very slice needs no second look
/// (`shard_of_event`).
pub fn route<'r>(default_run: &str, raw: &'r [u8], shards: u64) -> (u64, Option<&'r [u8]>) {
    if shards <= 1 {
        return (0, None);
    }
    if let Some(key) = crate::decode::single_pass::run_key_fast(raw) {
        return (
            shard_of_bytes(key.unwrap_or(default_run.as_bytes()), shards),
            key,
        );
    }
    let shard = match decode(raw) {
        LineText::Text(t) => match run_key(t) {
            Ok(key) => shard_of(key.as_deref().unwrap_or(default_run), shards),
            Err(_) => 0,
        },
        LineText::Blank | LineText::NotUtf8(_) => 0,
    };
    (shard, None)
}

/// Replays a whole in-memory log in one pass (tests, small inputs).
pub fn replay_bytes(default_run: &str, bytes: &[u8]) -> Outcome {
    let mut r = Replay::new(default_run);
    crate::fold::projection::fold_bytes(&mut r, bytes, crate::decode::lines::DEFAULT_MAX_LINE);
    r.finish()
}
