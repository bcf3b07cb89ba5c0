//! Counting and checking a log without run states, a chunk at a time: chunks are read in any
//! order (on several threads) and merged in file order. This is what `check` does to a large
//! log when there is no run.json to compare. It gives exactly the statistics, findings and
//! per-run `events`/`last_seq` of `Replay::without_states`, with no routing of lines to shards.
//!
//! The seq checks are the only part that needs earlier chunks (a run's last `seq`), so a chunk
//! keeps one small record per event and `Tally::push` runs the checks in order.

use std::borrow::Cow;
use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::decode::event::{Dialect, Event, Kind};
use crate::decode::lines::DEFAULT_MAX_LINE;
use crate::decode::lines::{LineText, Pos, decode, decode_str};
use crate::decode::single_pass::aif_brief;
use crate::fold::list_rows::{ChunkRun, Digest, RowEvent, TsRef, fold_facts};
use crate::fold::projection::{Chunked, read_event};
use crate::fold::replay::{
    Counters, Finding, FindingKind, Outcome, damage_kind, oversize_reason, seq_step,
};
use crate::fold::run_state::RunState;

/// Bytes read at a time within a chunk (a UTF-8 check, then the lines): small enough to stay
/// in cache in between.
const BLOCK: usize = 64 << 10;

/// One event of a chunk: what the seq checks need.
struct Seen {
    /// Index into the chunk's `runs`.
    run: u32,
    /// Newlines in the chunk before the event's line.
    line: u64,
    offset: u64,
    seq: Option<u64>,
}

/// One chunk's lines, counted and checked; the seq checks are left to `Tally::push`.
#[derive(Default)]
pub struct ChunkTally {
    counters: Counters,
    runs: Vec<String>,
    /// With `read_rows`: what each run's events in the chunk do to its row, by run index.
    rows: Vec<Digest>,
    seen: Vec<Seen>,
    /// Line numbers counted from the chunk's first line (1).
    findings: Vec<Finding>,
    newlines: u64,
}

impl ChunkTally {
    /// Reads `bytes`, which start at byte `start` of the log, at a line start. Bytes after the
    /// last newline are the log's unterminated tail (only the last chunk has any). Lines longer
    /// than `max_line` are reported and skipped, as the line splitter does.
    pub fn read(bytes: &[u8], start: u64, default_run: &str, max_line: usize) -> ChunkTally {
        ChunkTally::read_blocks(bytes, start, default_run, max_line, BLOCK, false)
    }

    /// `read`, and what each run's events do to its row (see `rows`), for `Tally::finish_rows`.
    pub fn read_rows(bytes: &[u8], start: u64, default_run: &str, max_line: usize) -> ChunkTally {
        ChunkTally::read_blocks(bytes, start, default_run, max_line, BLOCK, true)
    }

    /// `read`, `block` bytes at a time, with the rows or not.
    fn read_blocks<'a>(
        bytes: &'a [u8],
        start: u64,
        default_run: &'a str,
        max_line: usize,
        block: usize,
        rows: bool,
    ) -> ChunkTally {
        let mut t = ChunkTally {
            // About one event per 200 bytes: no regrowing on the way.
            seen: Vec::with_capacity(bytes.len() / 200 + 1),
            ..ChunkTally::default()
        };
        let mut runs: FxHashMap<Cow<'_, str>, u32> = FxHashMap::default();
        let mut row_runs: Vec<ChunkRun<'a>> = Vec::new();
        // `bytes[base..]` is `text` when that is known to be UTF-8.
        let mut line = |t: &mut ChunkTally,
                        text: Option<&'a str>,
                        base: usize,
                        at: usize,
                        end: usize,
                        terminated: bool| {
            let pos = Pos {
                line: t.newlines + 1,
                offset: start + at as u64,
            };
            let len = end - at;
            if len > max_line {
                t.counters.lines += 1;
                t.counters.skipped += 1;
                t.findings.push(finding(
                    pos,
                    FindingKind::Oversize,
                    oversize_reason(len as u64),
                ));
                return;
            }
            let decoded = match text {
                // `at` and `end` are at a newline or an end of the block: char boundaries.
                Some(s) => decode_str(&s[at - base..end - base]),
                None => decode(&bytes[at..end]),
            };
            let text = match decoded {
                LineText::Text(text) => text,
                LineText::Blank => {
                    t.counters.lines += 1;
                    t.counters.blank += 1;
                    return;
                }
                LineText::NotUtf8(reason) => {
                    t.bad(pos, terminated, reason);
                    return;
                }
            };
            let brief = aif_brief(text, |kind| rows && fold_facts(kind));
            let (key, seq, row) = match brief {
                Some(b) => {
                    t.counters.count(Dialect::AifLoop, b.kind, b.name);
                    let row = rows.then_some(RowEvent {
                        kind: b.kind,
                        seq: Some(b.seq),
                        ts: Some(TsRef::Text(b.ts)),
                        iteration: Some(b.iteration),
                        phase: Some(Cow::Borrowed(b.phase)),
                        score: b.facts.score,
                        new_iteration: b.facts.new_iteration,
                        text,
                    });
                    (Cow::Borrowed(b.run_id), Some(b.seq), row)
                }
                None => {
                    let mut ev = Event::new(Kind::Other);
                    if let Err(reason) = read_event(text, rows, &mut ev) {
                        t.bad(pos, terminated, reason);
                        return;
                    }
                    t.counters.event(&ev);
                    let key = ev.run_id.take().unwrap_or(Cow::Borrowed(default_run));
                    let row = rows.then(|| RowEvent {
                        kind: ev.kind,
                        seq: ev.seq,
                        ts: ev.ts.map(TsRef::At),
                        iteration: ev.iteration,
                        phase: ev.phase.take(),
                        score: ev.facts.score,
                        new_iteration: ev.facts.new_iteration,
                        text,
                    });
                    (key, ev.seq, row)
                }
            };
            t.counters.lines += 1;
            let next = runs.len() as u32;
            let run = match runs.get(&*key) {
                Some(&i) => i,
                None => {
                    runs.insert(key, next);
                    next
                }
            };
            if let Some(row) = row {
                if row_runs.len() <= run as usize {
                    row_runs.push(ChunkRun::default());
                }
                row_runs[run as usize].push(row);
            }
            t.seen.push(Seen {
                run,
                line: t.newlines,
                offset: pos.offset,
                seq,
            });
        };
        // Blocks of about `BLOCK` bytes ending at line ends: each is checked for UTF-8 at once
        // (lines are checked one by one only if that fails) and read while still in cache.
        let mut base = 0;
        while base < bytes.len() {
            let want = (base + block.max(1)).min(bytes.len());
            let end = if want == bytes.len() {
                want
            } else {
                match memchr::memrchr(b'\n', &bytes[base..want]) {
                    Some(i) => base + i + 1,
                    None => {
                        memchr::memchr(b'\n', &bytes[want..]).map_or(bytes.len(), |i| want + i + 1)
                    }
                }
            };
            let text = simdutf8::basic::from_utf8(&bytes[base..end]).ok();
            let mut at = base;
            for nl in memchr::memchr_iter(b'\n', &bytes[base..end]) {
                let nl = base + nl;
                line(&mut t, text, base, at, nl, true);
                t.newlines += 1;
                at = nl + 1;
            }
            if at < end {
                line(&mut t, text, base, at, end, false);
            }
            base = end;
        }
        let mut names = vec![String::new(); runs.len()];
        for (name, i) in runs {
            names[i as usize] = name.into_owned();
        }
        t.runs = names;
        t.rows = row_runs.into_iter().map(ChunkRun::finish).collect();
        t
    }

    fn bad(&mut self, pos: Pos, terminated: bool, reason: String) {
        self.counters.lines += 1;
        self.counters.skipped += 1;
        self.findings
            .push(finding(pos, damage_kind(terminated), reason));
    }
}

fn finding(pos: Pos, kind: FindingKind, reason: String) -> Finding {
    Finding {
        line: pos.line,
        offset: pos.offset,
        kind,
        reason,
        run_id: None,
    }
}

/// What `Tally::finish_rows` gives: a full replay's statistics and findings, and its run
/// states in run id order, each exact in what `list` shows of it.
pub struct Rows {
    pub runs: Vec<Box<RunState>>,
    pub findings: Vec<Finding>,
    pub stats: crate::fold::replay::Stats,
}

impl From<Outcome> for Rows {
    fn from(o: Outcome) -> Rows {
        Rows {
            runs: o.runs.into_values().map(Box::new).collect(),
            findings: o.findings,
            stats: o.stats,
        }
    }
}

/// The chunks of a log merged in file order.
pub struct Tally {
    counters: Counters,
    index: FxHashMap<String, u32>,
    /// Per run: its id, events applied and last `seq`.
    runs: Vec<(String, u64, Option<u64>)>,
    findings: Vec<Finding>,
    /// Lines before the next chunk.
    lines: u64,
    /// With rows (`with_rows`): each run's state, by run index, exact in its row's fields;
    /// `None` once a chunk could not be applied exactly. Boxed: states are large, and are
    /// moved only once, into the outcome.
    #[expect(
        clippy::vec_box,
        reason = "a state is moved at every regrowth otherwise"
    )]
    rows: Option<Vec<Box<RunState>>>,
    /// How its chunks are read (`Chunked::read_chunk`).
    reader: ChunkReader,
}

/// How a tally's chunks are read: the run of events that name none, the line cap, and whether
/// with the rows (`ChunkTally::read_rows`).
#[derive(Clone)]
pub struct ChunkReader {
    default_run: String,
    max_line: usize,
    rows: bool,
}

impl Tally {
    /// A tally of a log read from after line `lines_before`.
    pub fn new(lines_before: u64) -> Tally {
        Tally {
            counters: Counters::default(),
            index: FxHashMap::default(),
            runs: Vec::new(),
            findings: Vec::new(),
            lines: lines_before,
            rows: None,
            reader: ChunkReader {
                default_run: String::new(),
                max_line: DEFAULT_MAX_LINE,
                rows: false,
            },
        }
    }

    /// Sets how the fold driver reads its chunks: `default_run` names the run of events that
    /// name none; lines longer than `max_line` are reported and skipped.
    pub fn reading(mut self, default_run: &str, max_line: usize) -> Tally {
        self.reader.default_run = default_run.to_string();
        self.reader.max_line = max_line;
        self
    }

    /// Whether the rows are still exact (`with_rows`, and no chunk so far that could not be
    /// applied exactly): else `finish_rows` gives `None`.
    pub fn has_rows(&self) -> bool {
        self.rows.is_some()
    }

    /// `new`, for chunks read with `ChunkTally::read_rows`: `finish_rows` gives the rows.
    pub fn with_rows(lines_before: u64) -> Tally {
        let mut t = Tally::new(lines_before);
        t.rows = Some(Vec::new());
        t.reader.rows = true;
        t
    }

    /// Adds the next chunk of the log.
    pub fn push(&mut self, chunk: ChunkTally) {
        let ids: Vec<u32> = chunk
            .runs
            .into_iter()
            .map(|name| match self.index.get(&name) {
                Some(&i) => i,
                None => {
                    let i = self.runs.len() as u32;
                    self.index.insert(name.clone(), i);
                    if let Some(rows) = &mut self.rows {
                        rows.push(Box::new(RunState::new(&name)));
                    }
                    self.runs.push((name, 0, None));
                    i
                }
            })
            .collect();
        // Before the seq checks below: a digest needs each run's last `seq` before the chunk.
        if let Some(rows) = &mut self.rows {
            for (digest, &id) in chunk.rows.into_iter().zip(&ids) {
                let id = id as usize;
                if !digest.apply(&mut rows[id], self.runs[id].2) {
                    self.rows = None;
                    break;
                }
            }
        }
        for s in chunk.seen {
            let (name, events, last) = &mut self.runs[ids[s.run as usize] as usize];
            let step = seq_step(*events, *last, s.seq);
            if !step.duplicate {
                *events += 1;
                *last = step.keep.or(s.seq).or(*last);
            }
            if let Some((kind, reason)) = step.finding {
                self.findings.push(Finding {
                    line: self.lines + 1 + s.line,
                    offset: s.offset,
                    kind,
                    reason,
                    run_id: Some(name.clone()),
                });
            }
        }
        for mut f in chunk.findings {
            f.line += self.lines;
            self.findings.push(f);
        }
        self.lines += chunk.newlines;
        self.counters.add(chunk.counters);
    }

    /// The outcome of a full replay of the same lines, its run states exact in what `list`
    /// shows of a run (`rows`: status, stop, iteration, max iterations, phase, last score,
    /// last update, alias, events, last `seq`) and not beyond. `None` when a chunk could not
    /// be applied exactly (see `rows`): the caller replays instead. (No map of runs is built:
    /// 40,000 states moved into one cost more than the rest of the merge.)
    pub fn finish_rows(mut self) -> Option<Rows> {
        let mut states: Vec<Option<Box<RunState>>> =
            self.rows.take()?.into_iter().map(Some).collect();
        let mut order: Vec<usize> = (0..self.runs.len()).collect();
        order.sort_unstable_by(|&a, &b| self.runs[a].0.cmp(&self.runs[b].0));
        let runs = order
            .into_iter()
            .filter_map(|i| {
                let mut state = states.get_mut(i)?.take()?;
                // The seq checks here are the exact ones (the reducer, given only some of the
                // events, counted those).
                (state.events, state.last_seq) = (self.runs[i].1, self.runs[i].2);
                Some(state)
            })
            .collect();
        let mut findings = self.findings;
        findings.sort();
        Some(Rows {
            runs,
            findings,
            stats: self.counters.into_stats(),
        })
    }

    /// The outcome `Replay::without_states` gives for the same lines.
    pub fn finish(self) -> Outcome {
        let mut findings = self.findings;
        findings.sort();
        let mut runs = self.runs;
        runs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // Already in order: the map is bulk-built, each state moved once.
        let runs: BTreeMap<String, RunState> = runs
            .into_iter()
            .map(|(name, events, last_seq)| {
                let mut state = RunState::new(&name);
                state.events = events;
                state.last_seq = last_seq;
                (name, state)
            })
            .collect();
        Outcome {
            runs,
            findings,
            stats: self.counters.into_stats(),
        }
    }
}

impl Chunked for Tally {
    type Reader = ChunkReader;
    type Chunk = ChunkTally;
    fn reader(&self) -> ChunkReader {
        self.reader.clone()
    }
    fn read_chunk(r: &ChunkReader, bytes: &[u8], start: u64) -> ChunkTally {
        let read = if r.rows {
            ChunkTally::read_rows
        } else {
            ChunkTally::read
        };
        read(bytes, start, &r.default_run, r.max_line)
    }
    fn merge(&mut self, chunk: ChunkTally) -> bool {
        self.push(chunk);
        !self.reader.rows || self.has_rows()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::timestamp::Ts;
    use crate::fold::replay::Replay;
    use crate::fold::run_state::Status;
    use proptest::prelude::*;

    fn brief(o: &Outcome) -> Vec<(String, u64, Option<u64>)> {
        o.runs
            .iter()
            .map(|(k, s)| (k.clone(), s.events, s.last_seq))
            .collect()
    }

    proptest! {
        /// Cut anywhere at line starts, tallied chunk by chunk, a log gives what the counting
        /// replay gives: damaged lines, seq problems across chunk ends, a torn tail.
        #[test]
        fn chunks_merged_in_order_are_the_counting_replay(
            lines in prop::collection::vec((0u8..8, 0u8..4, 0u8..12), 0..120),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
            tail in any::<bool>(),
            max_line in prop::sample::select(vec![60usize, 1 << 20]),
            block in 1usize..300,
        ) {
            let mut log = Vec::new();
            for &(kind, run, seq) in &lines {
                let ev = format!(r#"{{"run_id":"r{run}","seq":{seq},"event":"x{}"}}"#, kind % 3);
                match kind {
                    0 => log.extend_from_slice(b"  \r"),
                    1 => log.extend_from_slice(&ev.as_bytes()[..ev.len() / 2]),
                    2 => log.extend_from_slice(b"{\"event\":\"y\",\"p\":\"\xff\"}"),
                    3 => log.extend_from_slice(br#"{"event":"run_started"}"#),
                    _ => log.extend_from_slice(ev.as_bytes()),
                }
                log.push(b'\n');
            }
            if tail {
                log.extend_from_slice(br#"{"run_id":"r1","se"#);
            }
            let starts: Vec<usize> = log
                .iter()
                .enumerate()
                .filter(|&(i, &b)| b == b'\n' && i + 1 < log.len())
                .map(|(i, _)| i + 1)
                .collect();
            let mut bounds: Vec<usize> = if starts.is_empty() {
                Vec::new()
            } else {
                cuts.iter().map(|c| starts[c.index(starts.len())]).collect()
            };
            bounds.push(0);
            bounds.push(log.len());
            bounds.sort();
            bounds.dedup();
            let mut tally = Tally::new(0);
            for w in bounds.windows(2) {
                tally.push(ChunkTally::read_blocks(&log[w[0]..w[1]], w[0] as u64, "dflt", max_line, block, false));
            }
            let got = tally.finish();
            let mut r = Replay::new("dflt").without_states();
            let mut sp = crate::decode::lines::Splitter::new(max_line);
            sp.push(&log, |p| r.piece(p));
            sp.finish(|p| r.piece(p));
            let want = r.finish();
            prop_assert_eq!(&got.stats, &want.stats);
            prop_assert_eq!(&got.findings, &want.findings);
            prop_assert_eq!(brief(&got), brief(&want));
        }
    }

    /// What `list` shows of a run.
    type Row = (
        String,
        Status,
        String,
        u64,
        Option<u64>,
        String,
        u64,
        Option<Ts>,
        u64,
        Option<u64>,
    );

    fn rows<'a>(states: impl IntoIterator<Item = &'a RunState>) -> Vec<(String, Row)> {
        states
            .into_iter()
            .map(|s| {
                let row = (
                    s.task_alias.clone(),
                    s.status,
                    s.stop.reason.clone(),
                    s.iteration,
                    s.max_iterations,
                    s.phase.clone(),
                    s.last_score.to_bits(),
                    s.updated_at,
                    s.events,
                    s.last_seq,
                );
                (s.run_id.clone(), row)
            })
            .collect()
    }

    /// Every line of the fixtures: all three dialects, damage, seq problems.
    const FIXTURES: &[&[u8]] = &[
        include_bytes!("../../../../fixtures/aif-drift/history.jsonl"),
        include_bytes!("../../../../fixtures/aif-loop-clean/history.jsonl"),
        include_bytes!("../../../../fixtures/avenor-abort/history.jsonl"),
        include_bytes!("../../../../fixtures/avenor-loop/history.jsonl"),
        include_bytes!("../../../../fixtures/avenor-session/history.jsonl"),
        include_bytes!("../../../../fixtures/bad-middle/history.jsonl"),
        include_bytes!("../../../../fixtures/failed-run/history.jsonl"),
        include_bytes!("../../../../fixtures/healthy-native/history.jsonl"),
        include_bytes!("../../../../fixtures/merged-runs/history.jsonl"),
        include_bytes!("../../../../fixtures/seq-problems/history.jsonl"),
        include_bytes!("../../../../fixtures/stagnating-native/history.jsonl"),
        include_bytes!("../../../../fixtures/unknown-events/history.jsonl"),
    ];

    fn fixture_lines() -> Vec<&'static [u8]> {
        FIXTURES
            .iter()
            .flat_map(|f| f.split(|&b| b == b'\n'))
            .collect()
    }

    const KINDS: &[(&str, &[&str])] = &[
        (
            "run_started",
            &[
                r#"{"goal":"g","task_alias":"al","config":{"max_iterations":7}}"#,
                r#"{"max_iterations":3}"#,
                "{}",
            ],
        ),
        (
            "stopped",
            &[
                r#"{"reason":"threshold_reached","final_score":0.9,"iterations":3}"#,
                r#"{"reason":"user_stop - tired"}"#,
                r#"{"exit_reason":"marker","exit_label":"done","max_iterations":9}"#,
                r#"{"score":0.5,"reason":"stagnation"}"#,
            ],
        ),
        (
            "failed",
            &[r#"{"reason":"evaluator_crash","error":"e"}"#, "{}"],
        ),
        ("run_resumed", &["{}"]),
        (
            "phase_switched",
            &[r#"{"to_phase":"B"}"#, r#"{"from_phase":"A"}"#],
        ),
        ("session_ended", &[r#"{"stop_reason":"cancelled"}"#, "{}"]),
        (
            "evaluation_done",
            &[
                r#"{"score":0.5,"passed":false,"failed_rules":["r1"]}"#,
                r#"{"score":0.75}"#,
                r#"{"usage":{"score":0.25}}"#,
                r#"{"passed":true}"#,
            ],
        ),
        (
            "iteration_advanced",
            &[r#"{"new_iteration":3}"#, r#"{"to":4}"#, "{}"],
        ),
        ("plan_created", &[r#"{"steps":3,"tokens_in":4}"#]),
        ("x_unknown", &["{}"]),
    ];

    /// An aif-loop line (`shape` 0: keys in another order, 1: native, else aif-loop's own
    /// shape); `ts` 0 is not a time.
    fn line(kind: usize, payload: usize, run: u8, seq: u8, ts: u8, phase: u8, shape: u8) -> String {
        let (name, payloads) = KINDS[kind % KINDS.len()];
        let payload = payloads[payload % payloads.len()];
        let ts = if ts == 0 {
            "not-a-time".to_string()
        } else {
            format!("2026-02-18T12:00:{:02}.000Z", ts % 60)
        };
        let phase = ["A", "B", "C"][phase as usize % 3];
        let it = seq / 2;
        match shape {
            0 => format!(
                r#"{{"event":"{name}","run_id":"r{run}","seq":{seq},"ts":"{ts}","phase":"{phase}","iteration":{it},"payload":{payload}}}"#
            ),
            1 => format!(
                r#"{{"v":1,"seq":{seq},"ts":"{ts}","run_id":"r{run}","event":"{name}","iteration":{it},"phase":"{phase}","payload":{payload}}}"#
            ),
            _ => format!(
                r#"{{"ts":"{ts}","run_id":"r{run}","seq":{seq},"iteration":{it},"phase":"{phase}","step":"S","event":"{name}","status":"ok","payload":{payload}}}"#
            ),
        }
    }

    /// The rows of `log` cut into chunks at `bounds`, or `None` where they could not be exact.
    fn chunked_rows(log: &[u8], bounds: &[usize]) -> Option<Rows> {
        let mut tally = Tally::with_rows(0);
        for w in bounds.windows(2) {
            tally.push(ChunkTally::read_blocks(
                &log[w[0]..w[1]],
                w[0] as u64,
                "dflt",
                1 << 20,
                97,
                true,
            ));
        }
        tally.finish_rows()
    }

    fn line_starts(log: &[u8]) -> Vec<usize> {
        log.iter()
            .enumerate()
            .filter(|&(i, &b)| b == b'\n' && i + 1 < log.len())
            .map(|(i, _)| i + 1)
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]
        /// Rows read chunk by chunk are a full replay's, in every field `list` shows, with its
        /// statistics and findings; and a log read as one chunk always gives them (only a
        /// timestamp that is not a time can leave the chunks unsure).
        #[test]
        fn rows_of_chunks_are_the_replays(
            picks in prop::collection::vec(
                (0u8..4, any::<prop::sample::Index>(), 0usize..10, 0usize..4, 0u8..3, 0u8..7, 0u8..12, 0u8..3, 0u8..4),
                0..60),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
            tail in any::<bool>(),
        ) {
            let pool = fixture_lines();
            let mut log = Vec::new();
            let mut bad_ts = false;
            for &(from, fixture, kind, payload, run, seq, ts, phase, shape) in &picks {
                if from == 0 {
                    log.extend_from_slice(pool[fixture.index(pool.len())]);
                } else {
                    bad_ts |= ts == 0;
                    log.extend_from_slice(line(kind, payload, run, seq, ts, phase, shape).as_bytes());
                }
                log.push(b'\n');
            }
            if tail {
                log.extend_from_slice(br#"{"run_id":"r1","se"#);
            }
            let starts = line_starts(&log);
            let mut bounds: Vec<usize> = if starts.is_empty() {
                Vec::new()
            } else {
                cuts.iter().map(|c| starts[c.index(starts.len())]).collect()
            };
            bounds.extend([0, log.len()]);
            bounds.sort();
            bounds.dedup();
            let want = crate::fold::replay::replay_bytes("dflt", &log);
            let one = chunked_rows(&log, &[0, log.len()]);
            prop_assert!(one.is_some() || bad_ts);
            for got in [one, chunked_rows(&log, &bounds)].into_iter().flatten() {
                prop_assert_eq!(&got.stats, &want.stats);
                prop_assert_eq!(&got.findings, &want.findings);
                prop_assert_eq!(rows(got.runs.iter().map(|s| &**s)), rows(want.runs.values()));
            }
        }
    }

    /// A run's `seq` repeated across a chunk end: the later chunk alone cannot tell that the
    /// event is not applied, so the rows are left to a replay. Within one chunk it can.
    #[test]
    fn a_seq_repeated_across_a_chunk_end_leaves_the_rows_to_a_replay() {
        let a = line(6, 1, 0, 3, 5, 0, 2);
        let b = line(6, 0, 0, 3, 6, 1, 2);
        let log = format!("{a}\n{b}\n");
        let cut = a.len() + 1;
        assert!(chunked_rows(log.as_bytes(), &[0, cut, log.len()]).is_none());
        let whole = chunked_rows(log.as_bytes(), &[0, log.len()]).expect("one chunk decides");
        let want = crate::fold::replay::replay_bytes("dflt", log.as_bytes());
        assert_eq!(
            rows(whole.runs.iter().map(|s| &**s)),
            rows(want.runs.values())
        );
        assert_eq!(whole.runs[0].last_score, 0.75, "the repeat is not applied");
    }
}
