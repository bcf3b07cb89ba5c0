//! The fold driver: a log file, a run folder or a root folded through any set of projections
//! (`loopctl_core::fold`), each log read once. Every reader of logs goes through here:
//! `replay`, `status`, `check`, `recover`, `list`, `stagnation`, `postmortem`, `tail`'s
//! start-up and the runner's `resume`.
//!
//! The driver chooses how to read: one thread for a small log; for a large one, chunks on
//! every thread, split by run (`Split`) or folded a chunk at a time and merged in file order
//! (`Chunked`); logs spread over the threads for a root. The threads and chunks live in
//! `chunks`, the only parallel machinery of loopctl (on rayon).

mod chunks;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use loopctl_core::decode::lines::Pos;
use loopctl_core::fold::counts::{Rows, Tally};
use loopctl_core::fold::damaged::{DamagedLine, DamagedLines};
use loopctl_core::fold::projection::fold_bytes_from;
use loopctl_core::fold::{Chunked, Projection, Split, feed_piece};
use loopctl_core::{Outcome, Replay, RunState};
use rayon::prelude::*;

use crate::discover::{self, RunRef};
use crate::read::ReadOptions;
use crate::{Result, io_err};
use chunks::{ORDER_CHUNK, PARALLEL_MIN, RUN_CHUNK, on_threads, plan_chunks};

/// Where a fold starts: at the top of the log, or after the line a snapshot's log mark names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Start {
    /// Byte offset of the first line to fold (a line start).
    pub offset: u64,
    /// Lines before it.
    pub line: u64,
}

impl Start {
    /// Just after the last line `state` reflects.
    pub fn after(state: &RunState) -> Start {
        Start {
            offset: state.log.offset,
            line: state.log.line,
        }
    }
}

/// Folds the log at `path` through `p` (read sequentially, or in chunks on `opts.threads`
/// threads when it is large) and gives it back.
pub fn fold_file<P: Split>(path: &Path, opts: &ReadOptions, p: P) -> Result<P> {
    fold_file_from(path, Start::default(), opts, p)
}

/// `fold_file` from `start`.
pub fn fold_file_from<P: Split>(path: &Path, start: Start, opts: &ReadOptions, p: P) -> Result<P> {
    let mut p = p;
    // One thread and any file needs no look at the size: `list` folds thousands of small logs.
    if opts.threads > 1 || opts.regular_only {
        // Opened and looked at once (not a stat by path, then an open and a stat again).
        let (file, size) = crate::read::open_log(path, opts.regular_only)?;
        if opts.threads > 1 && size.saturating_sub(start.offset) >= PARALLEL_MIN {
            p.splitting(&|| tail_ends_its_runs(path, &opts.default_run, opts.max_line));
            return fold_parallel(path, start, opts, p, opts.threads, RUN_CHUNK);
        }
        fold_open(file, size, path, start, u64::MAX, opts.max_line, &mut p)?;
        return Ok(p);
    }
    fold_between(path, start, u64::MAX, opts.max_line, &mut p)?;
    Ok(p)
}

/// Folds the bytes of `file` (opened from `path`, `size` bytes long) from `start` to `end` (a
/// line start) through `p`, in order: a small log read whole and folded in memory, a larger one
/// a buffer at a time.
fn fold_open<P: Projection + ?Sized>(
    mut file: File,
    size: u64,
    path: &Path,
    start: Start,
    end: u64,
    max_line: usize,
    p: &mut P,
) -> Result<()> {
    let len = size.min(end).saturating_sub(start.offset);
    if len < crate::read::SMALL {
        if start.offset > 0 {
            use std::io::{Seek, SeekFrom};
            file.seek(SeekFrom::Start(start.offset))
                .map_err(io_err(path))?;
        }
        let bytes = crate::read::read_small(file, path, len)?;
        let from = Pos {
            line: start.line + 1,
            offset: start.offset,
        };
        fold_bytes_from(p, &bytes, from, max_line);
        return Ok(());
    }
    crate::read::pieces_of(
        file,
        size,
        path,
        start.offset,
        end,
        start.line,
        max_line,
        |piece| feed_piece(p, piece),
    )
}

/// Folds the bytes of `path` before offset `end` (a line start) through `p`, in order.
pub fn fold_prefix<P: Projection + ?Sized>(
    path: &Path,
    end: u64,
    max_line: usize,
    p: &mut P,
) -> Result<()> {
    fold_between(path, Start::default(), end, max_line, p)
}

fn fold_between<P: Projection + ?Sized>(
    path: &Path,
    start: Start,
    end: u64,
    max_line: usize,
    p: &mut P,
) -> Result<()> {
    let (file, size) = crate::read::open_log(path, false)?;
    fold_open(file, size, path, start, end, max_line, p)
}

/// `fold_file_from` in chunks of about `chunk` bytes on `threads` threads (at least two):
/// every chunk is split into lines once and each line handed to the shard of its run.
fn fold_parallel<P: Split>(
    path: &Path,
    start: Start,
    opts: &ReadOptions,
    p: P,
    threads: usize,
    chunk: u64,
) -> Result<P> {
    let size = std::fs::metadata(path).map_err(io_err(path))?.len();
    let Some(chunks) = plan_chunks(path, start.offset, size, opts.max_line, chunk)? else {
        // A line longer than the cap sits across a chunk boundary: not worth splitting.
        let mut p = p;
        fold_between(path, start, u64::MAX, opts.max_line, &mut p)?;
        return Ok(p);
    };
    match on_threads(threads, || {
        chunks::by_run(path, &chunks, start.line, opts, threads, p)
    })? {
        Ok(p) => Ok(p),
        // An event was sent to a shard not its run's (a line naming `run_id` twice): one pass.
        Err(mut p) => {
            fold_between(path, start, u64::MAX, opts.max_line, &mut p)?;
            Ok(p)
        }
    }
}

/// Folds the log at `path` through `p` a chunk at a time (`Chunked`), the chunks read on
/// `opts.threads` threads and merged in file order. `None` when `p` could not fold it exactly
/// (it said so while merging, or a line longer than the cap sits across a chunk boundary):
/// fold it as a `Split` instead.
pub fn fold_chunks<P: Chunked>(path: &Path, opts: &ReadOptions, p: P) -> Result<Option<P>> {
    fold_chunks_of(path, opts, p, ORDER_CHUNK)
}

fn fold_chunks_of<P: Chunked>(
    path: &Path,
    opts: &ReadOptions,
    mut p: P,
    chunk: u64,
) -> Result<Option<P>> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let size = file.metadata().map_err(io_err(path))?.len();
    if size <= chunk {
        // One chunk (a run folder's log, say): read here, no threads. `list ROOT` reads
        // thousands of these.
        let mut bytes = Vec::with_capacity(size as usize + 1);
        file.read_to_end(&mut bytes).map_err(io_err(path))?;
        let c = P::read_chunk(&p.reader(), &bytes, 0);
        return Ok(p.merge(c).then_some(p));
    }
    let Some(chunks) = plan_chunks(path, 0, size, opts.max_line, chunk)? else {
        return Ok(None);
    };
    let threads = opts.threads.clamp(1, chunks.len());
    on_threads(threads, || chunks::in_order(path, &chunks, p))
}

/// Replays the log at `path`: one state per run, every finding, the statistics. With `resume`,
/// continues from that snapshot (the caller has checked that its log mark agrees with the
/// file). With `opts.states` false, only counts and checks (`Replay::without_states`), a large
/// log a chunk at a time.
pub fn replay(path: &Path, opts: &ReadOptions, resume: Option<&RunState>) -> Result<Outcome> {
    if !opts.states && resume.is_none() && opts.threads > 1 {
        let size = std::fs::metadata(path).map_err(io_err(path))?.len();
        if size >= PARALLEL_MIN {
            let tally = Tally::new(0).reading(&opts.default_run, opts.max_line);
            if let Some(t) = fold_chunks(path, opts, tally)? {
                return Ok(t.finish());
            }
        }
    }
    let mut r = Replay::new(&opts.default_run);
    if !opts.states {
        r = r.without_states();
    }
    let start = match resume {
        Some(s) => {
            r.resume(s.clone());
            Start::after(s)
        }
        None => Start::default(),
    };
    Ok(fold_file_from(path, start, opts, r)?.finish())
}

/// What `list` needs of a log: `replay`'s outcome, its run states exact only in what a row
/// shows (`Tally::finish_rows`), read a chunk at a time; when the chunks cannot give the rows
/// exactly (a `seq` repeated across a chunk end, say) the log is replayed instead.
pub fn rows(path: &Path, opts: &ReadOptions) -> Result<Rows> {
    rows_of(path, opts, ORDER_CHUNK)
}

fn rows_of(path: &Path, opts: &ReadOptions, chunk: u64) -> Result<Rows> {
    let tally = Tally::with_rows(0).reading(&opts.default_run, opts.max_line);
    if let Some(rows) = fold_chunks_of(path, opts, tally, chunk)?.and_then(Tally::finish_rows) {
        return Ok(rows);
    }
    let opts = ReadOptions {
        states: true,
        ..opts.clone()
    };
    replay(path, &opts, None).map(Rows::from)
}

/// `f` for every run, the runs spread over `threads` threads; the results in the order of
/// `runs`.
pub fn each_run<R: Send>(
    runs: &[RunRef],
    threads: usize,
    f: impl Fn(&RunRef) -> R + Sync + Send,
) -> Vec<R> {
    let threads = threads.clamp(1, runs.len().max(1));
    if threads == 1 {
        return runs.iter().map(f).collect();
    }
    on_threads(threads, || runs.par_iter().map(&f).collect())
}

/// Folds the log of every run through a projection of its own (`make`), the logs spread over
/// `opts.threads` threads (a large one is split in chunks as `fold_file` does), each settled
/// (`Split::settle`) on its thread once read. The results come in the order of `runs`.
pub fn fold_runs<P: Split>(
    runs: &[RunRef],
    opts: &ReadOptions,
    make: impl Fn(&RunRef) -> P + Sync + Send,
) -> Vec<Result<P>> {
    each_run(runs, opts.threads, |r| {
        let opts = ReadOptions {
            default_run: r.name.clone(),
            ..opts.clone()
        };
        // Settled here, on the thread that folded it, not by whoever takes the results.
        fold_file(&r.log, &opts, make(r)).map(|mut p| {
            p.settle();
            p
        })
    })
}

/// How much of a large log's end `tail_ends_its_runs` reads.
const TAIL: u64 = 1 << 20;

/// Whether every run with an event in the last mebibyte of the log at `path` has ended there: a
/// run started before that tail counts as running until its end is seen, a line naming no run
/// is `default_run`'s. A guess, for a fold that has to fold a log again when some run is still
/// running at its end (the metrics' lean start-up fold), at what the whole log will say, before
/// folding it: true for a log too small to be split by run (`PARALLEL_MIN`) or that is no
/// regular file, false for one that cannot be read.
pub(crate) fn tail_ends_its_runs(path: &Path, default_run: &str, max_line: usize) -> bool {
    use std::io::{Seek, SeekFrom};
    struct Ends(loopctl_core::fold::live_runs::LiveRuns, String);
    impl Projection for Ends {
        fn event(&mut self, _: loopctl_core::fold::Line, ev: &loopctl_core::Event<'_>) {
            self.0.apply(ev.run_id.as_deref().unwrap_or(&self.1), ev);
        }
    }
    // Looked at before it is opened: a fifo would block the open (the fold reports it).
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() >= PARALLEL_MIN => {}
        _ => return true,
    }
    let Ok(mut file) = File::open(path) else {
        return false;
    };
    let Ok(size) = file.metadata().map(|m| m.len()) else {
        return false;
    };
    let from = size.saturating_sub(TAIL);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.take(TAIL).read_to_end(&mut bytes).is_err()
    {
        return false;
    }
    // From the first line that starts in the tail.
    let start = memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1);
    let mut ends = Ends(Default::default(), default_run.to_string());
    loopctl_core::fold::projection::fold_bytes(&mut ends, &bytes[start..], max_line);
    ends.0.all_ended()
}

/// `fold_runs` over `runs` a batch at a time, on one set of threads: while `take` is handed
/// the folds of one batch on this thread (with the index of its first run; batches in order,
/// each taken before the next), the next batch is folded. Bounds the folds held at once to two
/// batches. `take` returns false to stop.
pub fn fold_runs_batched<P: Split>(
    runs: &[RunRef],
    batch: usize,
    opts: &ReadOptions,
    make: impl Fn(&RunRef) -> P + Sync + Send,
    mut take: impl FnMut(usize, Vec<Result<P>>) -> bool,
) {
    let batches: Vec<&[RunRef]> = runs.chunks(batch.max(1)).collect();
    let threads = opts.threads.max(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
    // In the pool, `fold_runs` spreads a batch over its threads (no pool built per batch).
    let fold = |b: &[RunRef]| match &pool {
        Ok(pool) if threads > 1 => pool.install(|| fold_runs(b, opts, &make)),
        _ => fold_runs(b, opts, &make),
    };
    std::thread::scope(|sc| {
        let mut next = batches.first().map(|b| fold(b));
        let mut start = 0;
        for (i, b) in batches.iter().enumerate() {
            let Some(folded) = next.take() else { break };
            let ahead = batches.get(i + 1).map(|b| sc.spawn(|| fold(b)));
            let go = take(start, folded);
            next = match ahead.map(|h| h.join()) {
                Some(Ok(f)) => Some(f),
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                None => None,
            };
            if !go {
                return;
            }
            start += b.len();
        }
    });
}

/// One log folded by `fold_paths`.
pub struct Folded<P> {
    pub run: RunRef,
    /// The projections, and the log's damaged lines in file order; or why the log could not
    /// be read.
    pub result: Result<(P, Vec<DamagedLine>)>,
}

/// Folds every log `paths` name through projections of its own (`make`): a path is a log
/// file, a run folder, or a root whose run folders are all folded. The logs are spread over
/// `opts.threads` threads; the results come in the order of the paths, a root's runs in name
/// order. An error is a root that cannot be listed; a log that cannot be read is its own
/// result's error.
pub fn fold_paths<P: Split>(
    paths: &[PathBuf],
    opts: &ReadOptions,
    make: impl Fn(&RunRef) -> P + Sync + Send,
) -> Result<Vec<Folded<P>>> {
    let mut runs = Vec::new();
    for path in paths {
        if path.is_file() {
            runs.push(RunRef::file(path));
        } else if let Some(log) = discover::folder_log(path) {
            runs.push(RunRef::file(&log));
        } else {
            runs.extend(discover::runs_under(path, true)?);
        }
    }
    let folded = fold_runs(&runs, opts, |r| (make(r), DamagedLines::default()));
    Ok(runs
        .into_iter()
        .zip(folded)
        .map(|(run, f)| Folded {
            run,
            result: f.map(|(p, damaged)| (p, damaged.into_sorted())),
        })
        .collect())
}

#[cfg(test)]
mod tests;
