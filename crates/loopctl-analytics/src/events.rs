//! The `events` table streamed: every log read again in file order by the store's line reader,
//! each event decoded by the fold driver's `feed` (every dialect; damaged lines skipped, as the
//! first pass reported them), its columns built directly, a frame handed on every `batch_rows`
//! events. Memory holds one batch, whatever the size of the logs.

use std::sync::Arc;

use loopctl_core::Event;
use loopctl_core::fold::replay::SeqState;
use loopctl_core::fold::{Line, Projection, feed_piece};
use loopctl_store::read::{ReadOptions, for_each_piece};
use polars::prelude::*;
use rustc_hash::FxHashMap;

use crate::rows::day_of;
use crate::{Collected, Error, Result};

/// One batch of the `events` table under construction, column by column.
struct Columns {
    run_id: StringChunkedBuilder,
    loop_name: StringChunkedBuilder,
    seq: Vec<Option<u64>>,
    ts: Vec<Option<i64>>,
    dialect: StringChunkedBuilder,
    event: StringChunkedBuilder,
    iteration: Vec<Option<u64>>,
    phase: StringChunkedBuilder,
    step: StringChunkedBuilder,
    status: StringChunkedBuilder,
    payload: StringChunkedBuilder,
    line: Vec<Option<u64>>,
    source: StringChunkedBuilder,
    day: Vec<Option<i32>>,
}

impl Columns {
    fn new(rows: usize) -> Columns {
        let s = |n: &str| StringChunkedBuilder::new(n.into(), rows);
        Columns {
            run_id: s("run_id"),
            loop_name: s("loop"),
            seq: Vec::with_capacity(rows),
            ts: Vec::with_capacity(rows),
            dialect: s("dialect"),
            event: s("event"),
            iteration: Vec::with_capacity(rows),
            phase: s("phase"),
            step: s("step"),
            status: s("status"),
            payload: s("payload"),
            line: Vec::with_capacity(rows),
            source: s("source"),
            day: Vec::with_capacity(rows),
        }
    }

    fn len(&self) -> usize {
        self.seq.len()
    }

    fn push(&mut self, run_id: &str, loop_name: &str, source: &str, line: Line, ev: &Event<'_>) {
        let ts = ev.ts.map(|t| t.millis());
        self.run_id.append_value(run_id);
        self.loop_name.append_value(loop_name);
        self.seq.push(ev.seq);
        self.ts.push(ts);
        self.dialect.append_value(ev.dialect.name());
        self.event.append_value(&*ev.name);
        self.iteration.push(ev.iteration);
        self.phase.append_option(ev.phase.as_deref());
        self.step.append_option(ev.step.as_deref());
        self.status.append_option(ev.status.as_deref());
        self.payload.append_option(ev.payload.as_deref());
        self.line.push(Some(line.pos.line));
        self.source.append_value(source);
        self.day.push(ts.map(day_of));
    }

    /// The batch as a frame with the columns of `tables::events`, in its order.
    fn finish(self) -> PolarsResult<DataFrame> {
        let n = self.len();
        let uint = |name: &str, v: Vec<Option<u64>>| Series::new(name.into(), v).into_column();
        let ts = Series::new("ts".into(), self.ts)
            .cast(&DataType::Datetime(TimeUnit::Milliseconds, None))?
            .into_column();
        let day = Series::new("day".into(), self.day)
            .cast(&DataType::Date)?
            .into_column();
        let cols = vec![
            self.run_id.finish().into_column(),
            self.loop_name.finish().into_column(),
            uint("seq", self.seq),
            ts,
            self.dialect.finish().into_column(),
            self.event.finish().into_column(),
            uint("iteration", self.iteration),
            self.phase.finish().into_column(),
            self.step.finish().into_column(),
            self.status.finish().into_column(),
            self.payload.finish().into_column(),
            uint("line", self.line),
            self.source.finish().into_column(),
            day,
        ];
        DataFrame::new(n, cols)
    }
}

/// Reads one log's events into `cols`: those of the runs in `loops` (run id → loop).
struct LogEvents<'a> {
    default_run: &'a str,
    source: &'a str,
    loops: &'a FxHashMap<&'a str, &'a str>,
    /// The last run seen and its loop: a log's events come in runs of the same run.
    last: Option<(&'a str, &'a str)>,
    /// Each run's seqs so far: an event repeating the last one is no row (as in replay).
    seqs: FxHashMap<String, SeqState>,
    /// Bytes of the log read so far (progress).
    read: u64,
    cols: Columns,
}

impl Projection for LogEvents<'_> {
    fn event(&mut self, line: Line, ev: &Event<'_>) {
        self.read = line.end();
        let id = ev.run_id.as_deref().unwrap_or(self.default_run);
        let loop_name = match self.last {
            Some((run, loop_name)) if run == id => loop_name,
            // Runs the `runs` table leaves out (no event applied) leave their events out too.
            _ => match self.loops.get_key_value(id) {
                Some((run, loop_name)) => {
                    self.last = Some((run, loop_name));
                    loop_name
                }
                None => return,
            },
        };
        let seqs = match self.seqs.get_mut(id) {
            Some(s) => s,
            None => self.seqs.entry(id.to_string()).or_default(),
        };
        if seqs.step(ev.seq).duplicate {
            return;
        }
        self.cols.push(id, loop_name, self.source, line, ev);
    }
}

/// Every event of the runs of `c` (the first pass: its logs and runs), in file order, the
/// logs in the order read: `emit` gets a frame of at most `batch_rows` events at a time (the
/// columns of the `events` table), `progress` the logs and bytes read so far. Gives the number
/// of events read; stops at `emit`'s first error. A log that cannot be read now was listed as unreadable by the first pass (or
/// changed since): it is an error here, as a partial export would be wrong.
pub fn stream(
    c: &Collected,
    read: &ReadOptions,
    batch_rows: usize,
    mut emit: impl FnMut(DataFrame) -> Result<()>,
    mut progress: impl FnMut(u64, u64),
) -> Result<u64> {
    let batch_rows = batch_rows.max(1);
    // The loop of each run, by source and run id: the events' `loop` column.
    let mut loops: FxHashMap<&str, FxHashMap<&str, &str>> = FxHashMap::default();
    for r in &c.runs {
        loops
            .entry(r.source.as_str())
            .or_default()
            .insert(r.run_id.as_str(), r.loop_name.as_str());
    }
    let mut total = 0u64;
    let mut cols = Columns::new(batch_rows);
    let mut failed: Option<Error> = None;
    let (mut files, mut bytes) = (0u64, 0u64);
    for log in &c.logs {
        files += 1;
        let source: Arc<str> = log.log.to_string_lossy().into();
        let Some(runs) = loops.get(&*source) else {
            bytes += std::fs::metadata(&log.log).map_or(0, |m| m.len());
            progress(files, bytes);
            continue;
        };
        let mut reader = LogEvents {
            default_run: &log.name,
            source: &source,
            loops: runs,
            last: None,
            seqs: FxHashMap::default(),
            read: 0,
            cols,
        };
        for_each_piece(&log.log, 0, 0, read.max_line, |piece| {
            if failed.is_some() {
                return;
            }
            feed_piece(&mut reader, piece);
            if reader.cols.len() >= batch_rows {
                let full = std::mem::replace(&mut reader.cols, Columns::new(batch_rows));
                total += full.len() as u64;
                if let Err(e) = full.finish().map_err(Error::from).and_then(&mut emit) {
                    failed = Some(e);
                }
                progress(files - 1, bytes + reader.read);
            }
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        bytes += std::fs::metadata(&log.log).map_or(reader.read, |m| m.len());
        progress(files, bytes);
        cols = reader.cols;
    }
    if cols.len() > 0 {
        total += cols.len() as u64;
        emit(cols.finish()?)?;
    }
    Ok(total)
}
