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

use crate::event::{Dialect, Event, Kind};
use crate::fast::aif_brief;
use crate::lines::{LineText, Pos, decode, decode_str};
use crate::replay::{
    Counters, Finding, FindingKind, Outcome, damage_kind, oversize_reason, read_event, seq_step,
};
use crate::state::RunState;

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
        ChunkTally::read_blocks(bytes, start, default_run, max_line, BLOCK)
    }

    /// `read`, `block` bytes at a time.
    fn read_blocks<'a>(
        bytes: &'a [u8],
        start: u64,
        default_run: &'a str,
        max_line: usize,
        block: usize,
    ) -> ChunkTally {
        let mut t = ChunkTally {
            // About one event per 200 bytes: no regrowing on the way.
            seen: Vec::with_capacity(bytes.len() / 200 + 1),
            ..ChunkTally::default()
        };
        let mut runs: FxHashMap<Cow<'_, str>, u32> = FxHashMap::default();
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
                Some(s) => decode_str(pos, &s[at - base..end - base]),
                None => decode(pos, &bytes[at..end]),
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
            let (key, seq) = match aif_brief(text) {
                Some(b) => {
                    let kind = Kind::from_name(b.name);
                    t.counters.count(Dialect::AifLoop, kind, b.name);
                    (Cow::Borrowed(b.run_id), Some(b.seq))
                }
                None => {
                    let mut ev = Event::new(Kind::Other);
                    if let Err(reason) = read_event(text, false, &mut ev) {
                        t.bad(pos, terminated, reason);
                        return;
                    }
                    t.counters.event(&ev);
                    let key = ev.run_id.take().unwrap_or(Cow::Borrowed(default_run));
                    (key, ev.seq)
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

/// The chunks of a log merged in file order.
pub struct Tally {
    counters: Counters,
    index: FxHashMap<String, u32>,
    /// Per run: its id, events applied and last `seq`.
    runs: Vec<(String, u64, Option<u64>)>,
    findings: Vec<Finding>,
    /// Lines before the next chunk.
    lines: u64,
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
        }
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
                    self.runs.push((name, 0, None));
                    i
                }
            })
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::Replay;
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
                tally.push(ChunkTally::read_blocks(&log[w[0]..w[1]], w[0] as u64, "dflt", max_line, block));
            }
            let got = tally.finish();
            let mut r = Replay::new("dflt").without_states();
            let mut sp = crate::lines::Splitter::new(max_line);
            sp.push(&log, |p| r.piece(p));
            sp.finish(|p| r.piece(p));
            let want = r.finish();
            prop_assert_eq!(&got.stats, &want.stats);
            prop_assert_eq!(&got.findings, &want.findings);
            prop_assert_eq!(brief(&got), brief(&want));
        }
    }
}
