//! Logs → rows: every log named (a file, a run folder, a root of run folders) folded once
//! through replay, the trace and `Extras` (dialect, agent usage, event rows) by the store's fold
//! driver, then turned into the rows of `runs`, `phases` and `events`.

use std::path::PathBuf;
use std::sync::Arc;

use loopctl_core::analysis::liveness::Liveness;
use loopctl_core::analysis::stagnation::{Config, assess};
use loopctl_core::fold::replay::SeqState;
use loopctl_core::fold::trace::{Attempt, Trace, Traces};
use loopctl_core::fold::{Damage, Line, Projection, Split};
use loopctl_core::{Dialect, Event, Finding, Replay, RunState};
use loopctl_store::discover::{self, RunRef};
use loopctl_store::fold::fold_runs;
use loopctl_store::read::ReadOptions;
use loopctl_store::snapshot::salvage_max_iterations;
use rustc_hash::FxHashMap;

use polars::prelude::{DataFrame, PolarsResult};

use crate::columns::{self, Phase};
use crate::lean::{Facts, Lean, LeanRun};
use crate::needs::{Columns, Needs};
use crate::rows::{EventRow, RunRow, Usage, day_of};
use crate::tables;

/// What to read and how.
#[derive(Clone)]
pub struct Options {
    pub read: ReadOptions,
    /// The tables and columns to build (`Needs::of_sql`): the `events` table only when read
    /// (one row per event: memory grows with the logs), `phases` only when read, and the
    /// costly columns (`stagnation` of runs, `score` and `passed` of phases) only when read:
    /// a column not read is null.
    pub needs: Needs,
    pub stagnation: Config,
}

impl Options {
    fn events(&self) -> bool {
        self.needs.events.is_some()
    }
}

/// A finding of replay in one of the logs read (a damaged line, a torn tail, a seq problem).
#[derive(Debug, Clone, PartialEq)]
pub struct LogFinding {
    pub file: PathBuf,
    pub finding: Finding,
}

/// The rows of every run read, and what could not be read.
#[derive(Debug, Default)]
pub struct Collected {
    /// The logs read, in order (the `events` table streamed reads them again: `events`).
    pub logs: Vec<RunRef>,
    pub runs: Vec<RunRow>,
    /// The `phases` and `events` tables in parts, one per batch of logs: rows are held only
    /// until their batch is read (a frame holds them in far less memory).
    pub phases: Vec<DataFrame>,
    pub events: Vec<DataFrame>,
    /// Replay's findings, log by log in file order (`--strict` turns them into exit 1).
    pub findings: Vec<LogFinding>,
    /// Files (or roots) that could not be read, with why.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Logs read that hold no event (empty, or only blank or damaged lines): no row.
    pub no_event: Vec<PathBuf>,
    pub files: u64,
    pub bytes: u64,
}

/// The logs the inputs name: a log file, a run folder (its `history.jsonl`), or a root (every
/// run folder under it). A path that is none of these is listed as unreadable. A log named
/// twice (a root and a run folder in it, a root given twice or through a link) is read once,
/// where it is first named: its runs would count twice.
pub fn logs_of(inputs: &[PathBuf]) -> (Vec<RunRef>, Vec<(PathBuf, String)>) {
    let (runs, bad) = named_logs(inputs);
    if inputs.len() < 2 {
        return (runs.into_iter().map(|(r, _)| r).collect(), bad);
    }
    // The copy named as a log or a run folder stands for it (a log named as FILE that holds no
    // event is said so by that name), else the first.
    use std::os::unix::fs::MetadataExt;
    let id = |r: &RunRef| std::fs::metadata(&r.log).ok().map(|m| (m.dev(), m.ino()));
    let mut keep: std::collections::HashMap<(u64, u64), usize> = Default::default();
    for (i, (r, named)) in runs.iter().enumerate() {
        if let Some(k) = id(r) {
            let first = *keep.entry(k).or_insert(i);
            if *named && !runs[first].1 {
                keep.insert(k, i);
            }
        }
    }
    let runs = runs
        .into_iter()
        .enumerate()
        .filter(|(i, (r, _))| id(r).is_none_or(|k| keep.get(&k) == Some(i)))
        .map(|(_, (r, _))| r)
        .collect();
    (runs, bad)
}

/// Inputs that could not be read, with why.
type Unreadable = Vec<(PathBuf, String)>;

/// Each log the inputs name, with whether it was named itself (a log or a run folder) rather
/// than found under a root.
fn named_logs(inputs: &[PathBuf]) -> (Vec<(RunRef, bool)>, Unreadable) {
    let mut runs = Vec::new();
    let mut bad = Vec::new();
    for p in inputs {
        if p.is_file() {
            runs.push((RunRef::file(p), true));
        } else if let Some(log) = discover::folder_log(p) {
            runs.push((RunRef::file(&log), true));
        } else if p.is_dir() {
            match discover::runs_under(p, true) {
                Ok(r) => runs.extend(r.into_iter().map(|r| (r, false))),
                Err(e) => bad.push((p.clone(), e.to_string())),
            }
        } else {
            bad.push((p.clone(), "no such file or folder".into()));
        }
    }
    (runs, bad)
}

/// Rows of a batch of logs, before they become frames.
struct Batch {
    phases: columns::Phases,
    events: Vec<EventRow>,
}

impl Batch {
    fn new(opts: &Options) -> Batch {
        Batch {
            phases: Batch::phases(opts),
            events: Vec::new(),
        }
    }

    fn phases(opts: &Options) -> columns::Phases {
        columns::Phases::new(opts.needs.phases.as_ref().unwrap_or(&Columns::all()))
    }

    /// The phase rows so far, as a frame (when the table is read).
    fn flush_phases(&mut self, out: &mut Collected, opts: &Options) -> PolarsResult<()> {
        let rows = std::mem::replace(&mut self.phases, Batch::phases(opts));
        if opts.needs.phases.is_some() && !rows.is_empty() {
            out.phases.push(rows.finish()?);
        }
        Ok(())
    }
}

/// Phase rows a batch holds before they become a frame: a large log gives several.
const PHASES_PER_FRAME: usize = 1 << 18;

/// One run folded: the full trace (stagnation and scores need it) or the lean fold.
enum RunFold {
    Full(Box<Trace>),
    Lean(Box<LeanRun>),
}

/// Every run of a log, by id.
type Runs = FxHashMap<String, RunFold>;

/// Reads every log, calling `progress(files_done, bytes_done)` as batches of logs finish.
pub fn collect(
    logs: &[RunRef],
    opts: &Options,
    progress: impl FnMut(u64, u64),
) -> PolarsResult<Collected> {
    let n = &opts.needs;
    let full = n.runs_reads("stagnation") || n.phases_reads("score") || n.phases_reads("passed");
    if full {
        collect_with(logs, opts, progress, Traces::new, |t: Traces| {
            t.into_runs()
                .into_iter()
                .map(|(id, t)| (id, RunFold::Full(Box::new(t))))
                .collect()
        })
    } else {
        let phases = n.phases.is_some();
        let make = move |run: &str| Lean::new(run, phases);
        collect_with(logs, opts, progress, make, |l: Lean| {
            l.runs
                .into_iter()
                .map(|(id, r)| (id, RunFold::Lean(Box::new(r))))
                .collect()
        })
    }
}

fn collect_with<P: Split>(
    logs: &[RunRef],
    opts: &Options,
    mut progress: impl FnMut(u64, u64),
    make: impl Fn(&str) -> P + Sync + Send,
    runs_of: impl Fn(P) -> Runs,
) -> PolarsResult<Collected> {
    let mut out = Collected {
        logs: logs.to_vec(),
        ..Collected::default()
    };
    // Batches bound the memory held by folded logs not yet turned into rows.
    let batch = opts.read.threads.max(1) * 256;
    for group in logs.chunks(batch) {
        let folded = fold_runs(group, &opts.read, |r| {
            (
                Replay::new(&r.name),
                make(&r.name),
                Extras::new(&r.name, opts.events()),
            )
        });
        let mut batch = Batch::new(opts);
        for (run, res) in group.iter().zip(folded) {
            out.files += 1;
            let first = batch.events.len();
            match res {
                Ok((replay, p, extras)) => {
                    // Its size from its lines: a statx per log was a tenth of a large root.
                    out.bytes += extras.end;
                    let runs = runs_of(p);
                    let before = out.runs.len();
                    take_log(&mut out, &mut batch, run, (replay, runs, extras), opts)?;
                    if out.runs.len() == before {
                        out.no_event.push(run.log.clone());
                    }
                }
                Err(e) => out.unreadable.push((run.log.clone(), e.to_string())),
            }
            // A log's events in file order (its runs interleave in a merged log), as the
            // streamed `events` of `export parquet` are.
            batch.events[first..].sort_by_key(|e| e.line);
        }
        batch.flush_phases(&mut out, opts)?;
        if opts.events() {
            out.events.push(tables::events(&batch.events)?);
        }
        progress(out.files, out.bytes);
    }
    Ok(out)
}

fn take_log(
    out: &mut Collected,
    batch: &mut Batch,
    run: &RunRef,
    folded: (Replay, Runs, Extras),
    opts: &Options,
) -> PolarsResult<()> {
    let (replay, mut runs, mut extras) = folded;
    let mut outcome = replay.finish();
    out.findings
        .extend(outcome.findings.drain(..).map(|finding| LogFinding {
            file: run.log.clone(),
            finding,
        }));
    let mut states: Vec<&mut RunState> = outcome.runs.values_mut().collect();
    salvage_max_iterations(run, &mut states);
    let source = run.log.to_string_lossy().into_owned();
    let shared_source: Arc<str> = source.as_str().into();
    let scores = opts.needs.phases_reads("score") || opts.needs.phases_reads("passed");
    for (id, state) in &outcome.runs {
        if state.events == 0 {
            continue;
        }
        let fold = runs
            .remove(id)
            .unwrap_or_else(|| RunFold::Lean(Box::default()));
        let extra = extras.runs.remove(id).unwrap_or_default();
        let (facts, stagnation) = match &fold {
            RunFold::Full(t) => {
                let cfg = opts.needs.runs_reads("stagnation");
                (
                    Facts::of_trace(t),
                    cfg.then(|| stagnation(t, &opts.stagnation)),
                )
            }
            RunFold::Lean(l) => (l.facts(), None),
        };
        let r = run_row(
            state,
            &facts,
            stagnation.flatten(),
            &extra,
            &source,
            &run.name,
        );
        if opts.needs.phases.is_some() {
            match &fold {
                RunFold::Full(t) => phase_rows(&r, t, scores, &mut batch.phases),
                RunFold::Lean(l) => lean_phase_rows(&r, l, &mut batch.phases),
            }
            if batch.phases.len() >= PHASES_PER_FRAME {
                batch.flush_phases(out, opts)?;
            }
        }
        let mut events = extra.events;
        let loop_name: Arc<str> = r.loop_name.as_str().into();
        for e in &mut events {
            e.loop_name = loop_name.clone();
            e.source = shared_source.clone();
        }
        batch.events.extend(events);
        out.runs.push(r);
    }
    Ok(())
}

/// The detectors that find the run stagnating, comma-separated; `None` when none does.
fn stagnation(t: &Trace, cfg: &Config) -> Option<String> {
    let verdict = assess(t, cfg, None, Liveness::Unknown);
    let detectors: Vec<&str> = verdict.triggered().map(|f| f.detector.name()).collect();
    (!detectors.is_empty()).then(|| detectors.join(","))
}

fn run_row(
    s: &RunState,
    t: &Facts,
    stagnation: Option<String>,
    x: &RunExtra,
    source: &str,
    log_name: &str,
) -> RunRow {
    let started = s.created_at.or(t.first_ts).map(|ts| ts.millis());
    let ended = if s.is_terminal() {
        t.stop_ts.or(t.last_ts)
    } else {
        None
    }
    .map(|ts| ts.millis());
    let last = ended.or(t.last_ts.map(|ts| ts.millis()));
    let duration_ms = match (started, last) {
        (Some(a), Some(b)) if b >= a => Some((b - a) as u64),
        _ => None,
    };
    let first_pass = t.first_pass;
    let mut usage = t.usage.clone();
    // Every dialect's token counts (the reducer's), beyond the contract's `usage` objects.
    usage.input_tokens =
        Some(s.tokens.input).filter(|_| s.tokens.input > 0 || usage.input_tokens.is_some());
    usage.output_tokens =
        Some(s.tokens.output).filter(|_| s.tokens.output > 0 || usage.output_tokens.is_some());
    RunRow {
        run_id: s.run_id.clone(),
        loop_name: s.loop_label(log_name).to_string(),
        status: s.status.as_str(),
        exit_reason: s
            .exit_reason
            .clone()
            .or_else(|| Some(s.stop.reason.clone()).filter(|r| s.is_terminal() && !r.is_empty())),
        started,
        ended,
        duration_ms,
        iterations: s.iteration,
        max_iterations: s.max_iterations,
        last_score: s.score(),
        passed: s.is_terminal().then_some(s.stop.passed),
        retries: s.retries,
        phase_errors: s.phase_errors,
        usage,
        first_pass_iteration: first_pass.map(|e| e.0),
        first_pass_ms: match (started, first_pass.and_then(|e| e.1)) {
            (Some(a), Some(b)) if b.millis() >= a => Some((b.millis() - a) as u64),
            _ => None,
        },
        stagnation,
        dialect: x.dialect.map(Dialect::name),
        events: s.events,
        source: source.to_string(),
        day: started.map(day_of),
    }
}

/// The attempt each scored evaluation belongs to: the latest one of its iteration and step
/// (its phase's name) that started before it.
fn scores_by_attempt(t: &Trace, phases: &[Attempt]) -> FxHashMap<usize, (f64, Option<bool>)> {
    let mut by_key: FxHashMap<(Option<u64>, &str), Vec<usize>> = FxHashMap::default();
    let mut by_iteration: FxHashMap<Option<u64>, Vec<usize>> = FxHashMap::default();
    for (i, a) in phases.iter().enumerate() {
        by_key.entry((a.iteration, &*a.name)).or_default().push(i);
        by_iteration.entry(a.iteration).or_default().push(i);
    }
    let mut out = FxHashMap::default();
    for e in t.scored() {
        let cands = match e.at.phase.as_deref() {
            Some(step) => by_key.get(&(Some(e.iteration), step)),
            None => by_iteration.get(&Some(e.iteration)),
        };
        let Some(cands) = cands else { continue };
        // The last candidate begun by the evaluation (by seq, else by time), of its quality
        // phase where the attempt has one: aif-loop's EVALUATE (B) begins at the very event
        // that scored EVALUATE (A), and logs without seqs tell them apart only so.
        let before = |i: &&usize| {
            let a = &phases[**i];
            match (a.start_seq, e.at.seq, a.started, e.at.ts) {
                (Some(a), Some(b), ..) => a <= b,
                (.., Some(a), Some(b)) => a <= b,
                _ => true,
            }
        };
        let same_phase = |i: &&usize| {
            phases[**i]
                .phase
                .as_deref()
                .is_none_or(|p| *p == *e.quality_phase)
        };
        let found = cands.iter().rev().find(|i| before(i) && same_phase(i));
        if let Some(&i) = found.or_else(|| cands.iter().rev().find(before))
            && let Some(score) = e.score
        {
            out.insert(i, (score, e.passed));
        }
    }
    out
}

/// The rows of `t`'s phases; `scores`: match scored evaluations to them (else `score` and
/// `passed` are null).
fn phase_rows(r: &RunRow, t: &Trace, scores: bool, out: &mut columns::Phases) {
    let phases = t.phases();
    let scores = if scores {
        scores_by_attempt(t, phases)
    } else {
        FxHashMap::default()
    };
    for (i, a) in phases.iter().enumerate() {
        let open = r.status == "running" && i + 1 == phases.len();
        push_attempt(r, a, scores.get(&i), open, out);
    }
}

/// One phase attempt's row, with its score and whether that passed.
fn push_attempt(
    r: &RunRow,
    a: &Attempt,
    score: Option<&(f64, Option<bool>)>,
    open: bool,
    out: &mut columns::Phases,
) {
    let started = a.started.map(|ts| ts.millis());
    let x = a.explicit();
    let usage = x.usage.as_ref().map(Usage::from);
    out.push(Phase {
        run_id: &r.run_id,
        loop_name: &r.loop_name,
        iteration: a.iteration,
        phase: &a.name,
        kind: a.kind(),
        quality_phase: a.phase.as_deref(),
        attempt: a.attempt,
        started,
        ended: a.ended.map(|ts| ts.millis()),
        duration_ms: a.duration_ms,
        outcome: a.outcome_as(open),
        stop_reason: x.stop_reason.as_deref(),
        exit_code: x.exit_code,
        marker: x.marker.as_deref(),
        score: score.map(|s| s.0),
        passed: score.and_then(|s| s.1),
        usage: usage.as_ref(),
        derived: a.derived,
        source: &r.source,
        day: started.or(r.started).map(day_of),
    });
}

/// The rows of a lean fold's phases, as `phase_rows` gives them from the trace without
/// scores.
fn lean_phase_rows(r: &RunRow, l: &LeanRun, out: &mut columns::Phases) {
    if !l.attempts.is_empty() {
        for (i, a) in l.attempts.iter().enumerate() {
            let open = r.status == "running" && i + 1 == l.attempts.len();
            push_attempt(r, a, None, open, out);
        }
        return;
    }
    for st in &l.steps {
        let started = st.started().map(|ts| ts.millis());
        out.push(Phase {
            run_id: &r.run_id,
            loop_name: &r.loop_name,
            iteration: st.iteration(),
            phase: l.name(st.name),
            kind: None,
            quality_phase: Some(l.name(st.phase)),
            attempt: u64::from(st.attempt),
            started,
            ended: st.ended().map(|ts| ts.millis()),
            duration_ms: st.duration_ms(),
            outcome: if st.failed { "failed" } else { "ok" },
            stop_reason: None,
            exit_code: None,
            marker: None,
            score: None,
            passed: None,
            usage: None,
            derived: true,
            source: &r.source,
            day: started.or(r.started).map(day_of),
        });
    }
}

/// What replay and the trace do not keep: each run's dialect and (when asked) its events as
/// rows.
struct Extras {
    default_run: String,
    /// Filled in per run once it is folded.
    blank: Arc<str>,
    events: bool,
    runs: FxHashMap<String, RunExtra>,
    /// The end of the last line read: the bytes of the log (for the progress).
    end: u64,
}

#[derive(Default)]
struct RunExtra {
    /// The run's id, shared by its event rows.
    id: Option<Arc<str>>,
    dialect: Option<Dialect>,
    /// The run's seqs so far: an event repeating the last one is no row, as replay does not
    /// apply it (and `history --json` does not show it).
    seqs: SeqState,
    events: Vec<EventRow>,
}

impl Extras {
    fn new(default_run: &str, events: bool) -> Extras {
        Extras {
            default_run: default_run.to_string(),
            blank: Arc::from(""),
            events,
            runs: FxHashMap::default(),
            end: 0,
        }
    }
}

impl Projection for Extras {
    fn event(&mut self, line: Line, ev: &Event<'_>) {
        self.end = self.end.max(line.end());
        let id = ev.run_id.as_deref().unwrap_or(&self.default_run);
        let x = match self.runs.get_mut(id) {
            Some(x) => x,
            None => self.runs.entry(id.to_string()).or_default(),
        };
        x.dialect.get_or_insert(ev.dialect);
        if x.seqs.step(ev.seq).duplicate {
            return;
        }
        if self.events {
            let ts = ev.ts.map(|t| t.millis());
            let run_id = x.id.get_or_insert_with(|| id.into()).clone();
            x.events.push(EventRow {
                run_id,
                loop_name: self.blank.clone(),
                seq: ev.seq,
                ts,
                dialect: ev.dialect.name(),
                event: ev.name.to_string(),
                iteration: ev.iteration,
                phase: ev.phase.as_deref().map(str::to_string),
                step: ev.step.as_deref().map(str::to_string),
                status: ev.status.as_deref().map(str::to_string),
                payload: ev.payload.as_deref().map(str::to_string),
                line: line.pos.line,
                source: self.blank.clone(),
                day: ts.map(day_of),
            });
        }
    }

    fn damaged(&mut self, line: Line, _damage: &Damage) {
        self.end = self.end.max(line.end());
    }

    fn blank(&mut self, line: Line) {
        self.end = self.end.max(line.end());
    }
}

impl Split for Extras {
    fn fork(&self) -> Self {
        Extras::new(&self.default_run, self.events)
    }
    fn join(&mut self, other: Self) {
        self.end = self.end.max(other.end);
        self.runs.extend(other.runs);
    }
}
