//! (Over ~900 lines because of its property tests; the chunk scheduler is shared with `fold`.)
//! Reading logs: streaming, bounded in memory, optionally split across threads by run.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use loopctl_core::decode::lines::{DEFAULT_MAX_LINE, LineText, Piece, Pos, Splitter, decode};
use loopctl_core::fold::counts::{ChunkTally, Rows, Tally};
use loopctl_core::fold::replay::{Part, route};
use loopctl_core::{Event, Outcome, Replay, RunState, parse_line};
use std::collections::BTreeMap;

use crate::{Result, StoreError, io_err};

const CHUNK: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Lines longer than this are reported and skipped.
    pub max_line: usize,
    /// Worker threads for replay; runs are split between them.
    pub threads: usize,
    /// Run id for events that name no run.
    pub default_run: String,
    /// False to count and check only (see `Replay::without_states`).
    pub states: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        ReadOptions {
            max_line: DEFAULT_MAX_LINE,
            threads,
            default_run: String::new(),
            states: true,
        }
    }
}

/// Feeds every piece of the file from `start` (line `lines_before + 1`) to `f`.
pub fn for_each_piece(
    path: &Path,
    start: u64,
    lines_before: u64,
    max_line: usize,
    f: impl FnMut(Piece<'_>),
) -> Result<()> {
    pieces_between(path, start, u64::MAX, lines_before, max_line, f)
}

/// Feeds every piece of the bytes from `start` (line `lines_before + 1`) to `end` to `f`.
pub(crate) fn pieces_between(
    path: &Path,
    start: u64,
    end: u64,
    lines_before: u64,
    max_line: usize,
    mut f: impl FnMut(Piece<'_>),
) -> Result<()> {
    let mut file = File::open(path).map_err(io_err(path))?;
    if start > 0 {
        file.seek(SeekFrom::Start(start)).map_err(io_err(path))?;
    }
    let mut sp = Splitter::starting_at(max_line, start, lines_before);
    // Small logs (a run folder's) get a buffer their size: `list` reads thousands of them.
    let len = file
        .metadata()
        .map_err(io_err(path))?
        .len()
        .min(end)
        .saturating_sub(start);
    let mut file = file.take(len);
    let mut buf = vec![0u8; (len as usize).saturating_add(1).min(CHUNK)];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(path)(e)),
        };
        sp.push(&buf[..n], &mut f);
    }
    sp.finish(f);
    Ok(())
}

/// Replays a log file. With `resume`, starts after the line its `log` mark names (the caller
/// has checked that the mark agrees with the file).
pub fn replay_file(path: &Path, opts: &ReadOptions, resume: Option<&RunState>) -> Result<Outcome> {
    let (start, lines_before) = resume.map_or((0, 0), |s| (s.log.offset, s.log.line));
    // Threads pay off only on large files (and one thread needs no look at the size: `list`
    // replays thousands of small logs).
    let threads = if opts.threads <= 1
        || std::fs::metadata(path)
            .map_err(io_err(path))?
            .len()
            .saturating_sub(start)
            < PARALLEL_MIN
    {
        1
    } else {
        opts.threads
    };
    let shard = |i: usize, n: usize| new_shard(opts, resume, i, n);
    if threads == 1 {
        let mut r = shard(0, 1);
        for_each_piece(path, start, lines_before, opts.max_line, |p| r.piece(p))?;
        return Ok(r.finish());
    }
    let chunk = if opts.states { PAR_CHUNK } else { TALLY_CHUNK };
    replay_parallel(path, opts, resume, threads, chunk)
}

/// Shard `i` of `n` of a replay with these options, continuing from `resume`.
fn new_shard(opts: &ReadOptions, resume: Option<&RunState>, i: usize, n: usize) -> Replay {
    let mut r = Replay::shard(&opts.default_run, i as u64, n as u64);
    if !opts.states {
        r = r.without_states();
    }
    if let Some(s) = resume {
        r.resume(s.clone());
    }
    r
}

/// `replay_file` on `threads` threads (at least two), in chunks of about `chunk` bytes.
fn replay_parallel(
    path: &Path,
    opts: &ReadOptions,
    resume: Option<&RunState>,
    threads: usize,
    chunk: u64,
) -> Result<Outcome> {
    let (start, lines_before) = resume.map_or((0, 0), |s| (s.log.offset, s.log.line));
    let size = std::fs::metadata(path).map_err(io_err(path))?.len();
    let shard = |i: usize, n: usize| new_shard(opts, resume, i, n);
    let parts = match plan_chunks(path, start, size, opts.max_line, chunk)? {
        Some(chunks) if !opts.states && resume.is_none() => {
            return Ok(tally_chunks(path, &chunks, lines_before, opts, threads, false)?.finish());
        }
        Some(chunks) => {
            // More shards than threads, handed out one at a time, so that a thread slowed
            // down by other work on the machine does not hold the others up.
            let count = threads * SHARDS_PER_THREAD;
            let shards: Vec<Mutex<Replay>> =
                (0..count).map(|i| Mutex::new(shard(i, count))).collect();
            replay_chunks(path, &chunks, lines_before, opts, threads, &shards)?;
            let shards = shards.into_iter().map(|m| lock(m.into_inner())).collect();
            finish_all(shards, threads)
        }
        None => {
            // A line longer than the cap sits across a chunk boundary: every shard reads the
            // whole file and keeps its own runs' lines.
            let mut shards: Vec<Replay> = (0..threads).map(|i| shard(i, threads)).collect();
            std::thread::scope(|sc| {
                let handles: Vec<_> = shards
                    .iter_mut()
                    .map(|r| {
                        sc.spawn(move || {
                            for_each_piece(path, start, lines_before, opts.max_line, |p| r.piece(p))
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .try_for_each(|h| h.join().expect("replay worker panicked"))
            })?;
            shards.into_iter().map(Replay::finish_part).collect()
        }
    };
    Ok(Replay::merge(parts))
}

/// `Replay::finish_part` of every shard, on `threads` threads.
fn finish_all(shards: Vec<Replay>, threads: usize) -> Vec<Part> {
    let per = shards.len().div_ceil(threads.max(1)).max(1);
    let mut groups: Vec<Vec<Replay>> = Vec::new();
    let mut rest = shards.into_iter();
    loop {
        let group: Vec<Replay> = rest.by_ref().take(per).collect();
        if group.is_empty() {
            break;
        }
        groups.push(group);
    }
    std::thread::scope(|sc| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|g| sc.spawn(move || g.into_iter().map(Replay::finish_part).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("replay worker panicked"))
            .collect()
    })
}

/// Shards of a parallel replay per thread.
pub(crate) const SHARDS_PER_THREAD: usize = 4;

/// A lock's value, poisoned or not (a panic in a worker is re-raised when the scope ends).
pub(crate) fn lock<T>(r: std::sync::LockResult<T>) -> T {
    r.unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Files with fewer bytes to replay than this are read by one thread.
pub(crate) const PARALLEL_MIN: u64 = 8 << 20;
/// Nominal bytes per chunk of a parallel replay; chunks end at line ends.
pub(crate) const PAR_CHUNK: u64 = 1 << 20;
/// The same when counting only (`tally_chunks`): a chunk is read once, start to end, so larger
/// chunks cost nothing in cache and mean fewer hand-offs between threads.
const TALLY_CHUNK: u64 = 4 << 20;
/// How much is read at a time while looking for a line end.
const PROBE: usize = 64 << 10;

/// `[start, end)` byte ranges that begin at line starts and cover `[from, size)`, or `None`
/// when a chunk boundary falls inside a line longer than `max_line` (not worth buffering).
pub(crate) fn plan_chunks(
    path: &Path,
    from: u64,
    size: u64,
    max_line: usize,
    chunk: u64,
) -> Result<Option<Vec<(u64, u64)>>> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let mut starts = vec![from];
    let mut probe = vec![0u8; PROBE];
    let mut nominal = from + chunk;
    while nominal < size {
        // The first line start at or after `nominal`: just past the first newline at or
        // after `nominal - 1`.
        let mut at = nominal - 1;
        let found = loop {
            if at >= size || at - (nominal - 1) > max_line as u64 + 1 {
                break None;
            }
            file.seek(SeekFrom::Start(at)).map_err(io_err(path))?;
            let want = PROBE.min((size - at) as usize);
            let n = read_full(&mut file, &mut probe[..want]).map_err(io_err(path))?;
            if n == 0 {
                break None;
            }
            if let Some(i) = memchr::memchr(b'\n', &probe[..n]) {
                break Some(at + i as u64 + 1);
            }
            at += n as u64;
        };
        match found {
            Some(s) if s >= size => break,
            Some(s) => {
                if s > *starts.last().unwrap_or(&from) {
                    starts.push(s);
                }
                nominal = s.max(nominal) + chunk;
            }
            None if at >= size => break,
            None => return Ok(None),
        }
    }
    let mut chunks: Vec<(u64, u64)> = starts.windows(2).map(|w| (w[0], w[1])).collect();
    chunks.push((*starts.last().unwrap_or(&from), size));
    Ok(Some(chunks))
}

/// Reads until `buf` is full or the file ends.
fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// One line of a chunk, as the splitter would give it, sent to one shard.
#[derive(Clone, Copy)]
pub(crate) struct Item {
    /// Offset of the line in the chunk.
    pub(crate) at: usize,
    /// Its length without the newline.
    pub(crate) len: usize,
    /// Newlines in the chunk before it.
    pub(crate) line: u64,
    pub(crate) kind: ItemKind,
    /// Its last byte is a CR (read here, next to the newline, while it is in cache).
    pub(crate) cr: bool,
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum ItemKind {
    Line,
    Unterminated,
    Oversize,
}

/// A chunk split into lines and routed: `items[s]` are shard `s`'s lines in file order.
pub(crate) struct Routed {
    pub(crate) items: Vec<Vec<Item>>,
    newlines: u64,
    /// The whole chunk is UTF-8 (checked once here rather than line by line).
    pub(crate) utf8: bool,
}

/// Read buffers, handed back when a chunk is dropped. Reading into warm memory that is already
/// faulted in costs less than mapping each chunk (a fault every few pages, and every unmapping
/// interrupts the other cores) or reading into fresh allocations (a fault per page).
#[derive(Default)]
struct Pool(Mutex<Vec<Vec<u8>>>);

/// Buffer sizes are rounded up to this.
const BUFFER_STEP: usize = 64 << 10;

/// The bytes of one chunk, in a buffer of the pool.
struct Bytes {
    buf: Vec<u8>,
    len: usize,
    pool: Arc<Pool>,
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Bytes {
    fn drop(&mut self) {
        lock(self.pool.0.lock()).push(std::mem::take(&mut self.buf));
    }
}

/// Reads `[start, end)` into a buffer of `pool`, with positioned reads (threads share the
/// file). A file cut short meanwhile (a concurrent tail repair) gives the bytes still there.
fn load(file: &File, path: &Path, (start, end): (u64, u64), pool: &Arc<Pool>) -> Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let want = usize::try_from(end - start).unwrap_or(usize::MAX);
    let mut buf = lock(pool.0.lock()).pop().unwrap_or_default();
    if buf.len() < want {
        // A fresh zeroed allocation rather than growing (which would copy and zero-fill), with
        // room for the next chunks, which end at line ends and so vary a little in size.
        buf = vec![0; want.next_multiple_of(BUFFER_STEP)];
    }
    let mut bytes = Bytes {
        buf,
        len: 0,
        pool: Arc::clone(pool),
    };
    while bytes.len < want {
        match file.read_at(&mut bytes.buf[bytes.len..want], start + bytes.len as u64) {
            Ok(0) => break,
            Ok(n) => bytes.len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(path)(e)),
        }
    }
    Ok(bytes)
}

/// Splits a chunk into lines and routes them (the splitter's rules: a line longer than
/// `max_line` is oversize; bytes after the last newline are unterminated).
fn route_chunk(b: &[u8], start: u64, opts: &ReadOptions, shards: usize) -> Routed {
    let mut items: Vec<Vec<Item>> = (0..shards)
        .map(|_| Vec::with_capacity(b.len() / 200 / shards + 16))
        .collect();
    let mut line = 0u64;
    let mut at = 0usize;
    let mut push = |at: usize, len: usize, line: u64, kind: ItemKind| {
        let shard = match kind {
            ItemKind::Oversize => 0,
            _ => {
                let pos = Pos {
                    line: 1 + line,
                    offset: start + at as u64,
                };
                route(&opts.default_run, pos, &b[at..at + len], shards as u64) as usize
            }
        };
        items[shard].push(Item {
            at,
            len,
            line,
            kind,
            cr: len > 0 && b[at + len - 1] == b'\r',
        });
    };
    for nl in memchr::memchr_iter(b'\n', b) {
        let len = nl - at;
        let kind = if len > opts.max_line {
            ItemKind::Oversize
        } else {
            ItemKind::Line
        };
        push(at, len, line, kind);
        line += 1;
        at = nl + 1;
    }
    if at < b.len() {
        let len = b.len() - at;
        let kind = if len > opts.max_line {
            ItemKind::Oversize
        } else {
            ItemKind::Unterminated
        };
        push(at, len, line, kind);
    }
    Routed {
        items,
        newlines: line,
        utf8: simdutf8::basic::from_utf8(b).is_ok(),
    }
}

/// Applies shard `s`'s lines of one chunk, whose first line is line `base + 1`.
fn apply_chunk(replay: &mut Replay, s: usize, start: u64, base: u64, b: &[u8], r: &Routed) {
    for it in &r.items[s] {
        let pos = Pos {
            line: base + 1 + it.line,
            offset: start + it.at as u64,
        };
        let raw = &b[it.at..it.at + it.len];
        let terminated = it.kind == ItemKind::Line;
        match it.kind {
            ItemKind::Line | ItemKind::Unterminated if r.utf8 => {
                // SAFETY: `route_chunk` checked that all of `b` is UTF-8, and a line starts
                // and ends at a newline or an end of `b`, both character boundaries. The bytes
                // cannot change in between: a chunk is a buffer of its own, read once (`load`).
                let text = unsafe { std::str::from_utf8_unchecked(raw) };
                replay.routed_text(pos, text, terminated, it.cr);
            }
            ItemKind::Line | ItemKind::Unterminated => replay.routed_line(pos, raw, terminated),
            ItemKind::Oversize => replay.piece(Piece::Oversize(pos, it.len as u64)),
        }
    }
}

/// A chunk loaded and routed, waiting for the shards to apply it.
struct Ready {
    index: usize,
    data: Arc<(Bytes, Routed)>,
    /// Line number before the chunk, once every earlier chunk is routed.
    base: Option<u64>,
    /// Shards that have not applied it yet.
    left: usize,
}

/// The work of a parallel replay: chunks to route (in any order, at most `WINDOW` ahead of the
/// slowest shard) and, per shard, the next chunk to apply (in file order).
struct Work {
    next_route: usize,
    slots: Vec<Option<Ready>>,
    cursor: Vec<usize>,
    busy: Vec<bool>,
    /// The first chunk whose line base is unknown, and that base.
    next_base: (usize, u64),
    failed: Option<StoreError>,
    panic: Option<Box<dyn std::any::Any + Send>>,
    /// Threads waiting for a task.
    waiting: usize,
}

enum Task {
    Route(usize),
    Apply(usize, usize, u64, Arc<(Bytes, Routed)>),
    Wait,
    Done,
}

/// Chunks in flight (loaded, not yet applied by every shard).
const WINDOW: usize = 8;
/// Chunks routed ahead of the slowest shard before applying takes precedence.
const ROUTE_AHEAD: usize = 2;

impl Work {
    fn pick(&mut self, chunks: usize, from: usize) -> Task {
        if self.failed.is_some() || self.panic.is_some() {
            return Task::Done;
        }
        let slowest = self.cursor.iter().copied().min().unwrap_or(chunks);
        if slowest >= chunks {
            return Task::Done;
        }
        // Keep a couple of chunks routed ahead of the slowest shard, so that shards do not wait
        // for the chunk they need to be routed (and not more: the bytes should still be in
        // cache when they are applied).
        let can_route = self.next_route < chunks && self.next_route < slowest + WINDOW;
        if can_route && self.next_route < slowest + ROUTE_AHEAD {
            self.next_route += 1;
            return Task::Route(self.next_route - 1);
        }
        let n = self.cursor.len();
        for k in 0..n {
            let s = (from + k) % n;
            let c = self.cursor[s];
            if self.busy[s] || c >= chunks {
                continue;
            }
            if let Some(r) = &self.slots[c % WINDOW]
                && r.index == c
                && let Some(base) = r.base
            {
                self.busy[s] = true;
                return Task::Apply(s, c, base, Arc::clone(&r.data));
            }
        }
        if can_route {
            self.next_route += 1;
            return Task::Route(self.next_route - 1);
        }
        Task::Wait
    }

    fn routed(&mut self, c: usize, data: (Bytes, Routed), shards: usize) {
        self.slots[c % WINDOW] = Some(Ready {
            index: c,
            data: Arc::new(data),
            base: None,
            left: shards,
        });
        while let Some(r) = self.slots[self.next_base.0 % WINDOW]
            .as_mut()
            .filter(|r| r.index == self.next_base.0)
        {
            r.base = Some(self.next_base.1);
            self.next_base = (self.next_base.0 + 1, self.next_base.1 + r.data.1.newlines);
        }
    }

    fn applied(&mut self, s: usize, c: usize) {
        self.cursor[s] += 1;
        self.busy[s] = false;
        let slot = &mut self.slots[c % WINDOW];
        if let Some(r) = slot {
            r.left -= 1;
            if r.left == 0 {
                *slot = None;
            }
        }
    }
}

/// Replays `chunks` on `threads` threads. Each thread takes the next task there is: apply the
/// next chunk of a shard that is free and whose next chunk is loaded, else load and route the
/// next chunk. A chunk is applied soon after it is loaded, while its bytes are still in cache,
/// and a thread slowed down by other work on the machine holds no one up.
fn replay_chunks(
    path: &Path,
    chunks: &[(u64, u64)],
    lines_before: u64,
    opts: &ReadOptions,
    threads: usize,
    shards: &[Mutex<Replay>],
) -> Result<()> {
    run_chunks(
        path,
        chunks,
        lines_before,
        opts,
        threads,
        shards,
        &apply_chunk,
    )
}

/// How a shard takes its lines of one chunk: `(shard, index, chunk start, line base, bytes,
/// routed lines)`.
pub(crate) type ApplyChunk<S> = dyn Fn(&mut S, usize, u64, u64, &[u8], &Routed) + Sync;

/// The scheduler of `replay_chunks`, for shards of any kind.
pub(crate) fn run_chunks<S: Send>(
    path: &Path,
    chunks: &[(u64, u64)],
    lines_before: u64,
    opts: &ReadOptions,
    threads: usize,
    shards: &[Mutex<S>],
    apply: &ApplyChunk<S>,
) -> Result<()> {
    let n = shards.len();
    let file = File::open(path).map_err(io_err(path))?;
    let pool = Arc::new(Pool::default());
    let work = Mutex::new(Work {
        next_route: 0,
        slots: (0..WINDOW).map(|_| None).collect(),
        cursor: vec![0; n],
        busy: vec![false; n],
        next_base: (0, lines_before),
        failed: None,
        panic: None,
        waiting: 0,
    });
    let wake = Condvar::new();
    let worker = |t: usize| {
        let from = t * n / threads.max(1);
        let mut guard = lock(work.lock());
        loop {
            let task = guard.pick(chunks.len(), from);
            match task {
                Task::Done => break,
                Task::Wait => {
                    guard.waiting += 1;
                    guard = lock(wake.wait(guard));
                    guard.waiting -= 1;
                    continue;
                }
                _ => {}
            }
            drop(guard);
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &task {
                Task::Route(c) => {
                    let ch = chunks[*c];
                    load(&file, path, ch, &pool).map(|b| {
                        let r = route_chunk(&b, ch.0, opts, n);
                        Some((b, r))
                    })
                }
                Task::Apply(s, c, base, data) => {
                    let mut shard = lock(shards[*s].lock());
                    apply(&mut shard, *s, chunks[*c].0, *base, &data.0, &data.1);
                    Ok(None)
                }
                Task::Wait | Task::Done => Ok(None),
            }));
            guard = lock(work.lock());
            match (task, done) {
                (_, Err(p)) => guard.panic = Some(p),
                (_, Ok(Err(e))) => guard.failed = Some(e),
                (Task::Route(c), Ok(Ok(Some(data)))) => guard.routed(c, data, n),
                (Task::Apply(s, c, ..), Ok(Ok(_))) => guard.applied(s, c),
                _ => {}
            }
            if guard.waiting > 0 {
                wake.notify_all();
            }
        }
    };
    std::thread::scope(|sc| {
        let worker = &worker;
        for t in 1..threads {
            sc.spawn(move || worker(t));
        }
        worker(0);
    });
    let mut work = lock(work.into_inner());
    if let Some(p) = work.panic.take() {
        std::panic::resume_unwind(p);
    }
    match work.failed.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The outcome `list` needs of a log that holds many runs: `replay_file`'s, its run states
/// exact only in what a row shows (`Tally::finish_rows`: no score history, token totals, ...).
/// The log is read in chunks on all threads, as `check` counts it; when the chunks cannot give
/// the rows exactly (a `seq` repeated across a chunk end, say) it is replayed instead.
pub fn rows_file(path: &Path, opts: &ReadOptions) -> Result<Rows> {
    rows_in_chunks(path, opts, TALLY_CHUNK)
}

/// `rows_file` in chunks of about `chunk` bytes.
fn rows_in_chunks(path: &Path, opts: &ReadOptions, chunk: u64) -> Result<Rows> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let size = file.metadata().map_err(io_err(path))?.len();
    if size <= chunk {
        // One chunk (a run folder's log, say): read here, no threads. `list ROOT` reads
        // thousands of these.
        let mut bytes = Vec::with_capacity(size as usize + 1);
        file.read_to_end(&mut bytes).map_err(io_err(path))?;
        let mut tally = Tally::with_rows(0);
        tally.push(ChunkTally::read_rows(
            &bytes,
            0,
            &opts.default_run,
            opts.max_line,
        ));
        if let Some(rows) = tally.finish_rows() {
            return Ok(rows);
        }
    } else if let Some(chunks) = plan_chunks(path, 0, size, opts.max_line, chunk)? {
        let threads = opts.threads.clamp(1, chunks.len());
        if let Some(o) = tally_chunks(path, &chunks, 0, opts, threads, true)?.finish_rows() {
            return Ok(o);
        }
    }
    let opts = ReadOptions {
        states: true,
        ..opts.clone()
    };
    replay_file(path, &opts, None).map(Rows::from)
}

/// Counts and checks `chunks` (`ReadOptions::states` false), with the rows or not (`rows`:
/// see `Tally::with_rows`) on `threads` threads: each thread reads whole chunks, taken in file
/// order, and whoever finishes the next chunk in order merges it, and the chunks after it that
/// are ready, while the others go on reading. At most `WINDOW` chunks wait to be merged, so
/// memory stays bounded.
fn tally_chunks(
    path: &Path,
    chunks: &[(u64, u64)],
    lines_before: u64,
    opts: &ReadOptions,
    threads: usize,
    rows: bool,
) -> Result<Tally> {
    struct Merge {
        /// Chunks read but not merged yet, by index.
        done: BTreeMap<usize, ChunkTally>,
        /// A thread is merging: it takes the chunks in order as they are ready.
        merging: bool,
        next_merge: usize,
        next_read: usize,
        failed: Option<StoreError>,
        panic: Option<Box<dyn std::any::Any + Send>>,
        /// The rows cannot be had from the chunks: reading on is of no use.
        rows_lost: bool,
    }
    let file = File::open(path).map_err(io_err(path))?;
    let pool = Arc::new(Pool::default());
    let tally = Mutex::new(if rows {
        Tally::with_rows(lines_before)
    } else {
        Tally::new(lines_before)
    });
    let merge = Mutex::new(Merge {
        done: BTreeMap::new(),
        merging: false,
        next_merge: 0,
        next_read: 0,
        failed: None,
        panic: None,
        rows_lost: false,
    });
    let wake = Condvar::new();
    let worker = || {
        let mut m = lock(merge.lock());
        loop {
            if m.failed.is_some() || m.panic.is_some() || m.rows_lost || m.next_read >= chunks.len()
            {
                break;
            }
            if m.next_read >= m.next_merge + WINDOW {
                m = lock(wake.wait(m));
                continue;
            }
            let c = m.next_read;
            m.next_read += 1;
            drop(m);
            let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let ch = chunks[c];
                let read = if rows {
                    ChunkTally::read_rows
                } else {
                    ChunkTally::read
                };
                load(&file, path, ch, &pool)
                    .map(|b| read(&b, ch.0, &opts.default_run, opts.max_line))
            }));
            m = lock(merge.lock());
            match read {
                Err(p) => m.panic = Some(p),
                Ok(Err(e)) => m.failed = Some(e),
                Ok(Ok(t)) => {
                    m.done.insert(c, t);
                    if !m.merging {
                        m.merging = true;
                        loop {
                            let next = m.next_merge;
                            let Some(t) = m.done.remove(&next) else { break };
                            drop(m);
                            let pushed =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                    let mut tally = lock(tally.lock());
                                    tally.push(t);
                                    rows && !tally.has_rows()
                                }));
                            m = lock(merge.lock());
                            m.next_merge += 1;
                            // The caller replays instead: stop here.
                            m.rows_lost |= matches!(pushed, Ok(true));
                            wake.notify_all();
                            if let Err(p) = pushed {
                                m.panic = Some(p);
                                break;
                            }
                        }
                        m.merging = false;
                    }
                }
            }
            wake.notify_all();
        }
    };
    std::thread::scope(|sc| {
        let worker = &worker;
        for _ in 1..threads {
            sc.spawn(worker);
        }
        worker();
    });
    let m = lock(merge.into_inner());
    if let Some(p) = m.panic {
        std::panic::resume_unwind(p);
    }
    match m.failed {
        Some(e) => Err(e),
        None => Ok(lock(tally.into_inner())),
    }
}

/// Calls `f` with every event of the file in order, with its position and raw line.
/// Damaged lines are passed as `Err` with the reason.
pub fn for_each_event(
    path: &Path,
    max_line: usize,
    mut f: impl FnMut(Pos, &[u8], std::result::Result<Event<'_>, String>),
) -> Result<()> {
    for_each_piece(path, 0, 0, max_line, |p| match p {
        Piece::Line(pos, raw) | Piece::Unterminated(pos, raw) => match decode(pos, raw) {
            LineText::Blank => {}
            LineText::Text(t) => f(pos, raw, parse_line(t).map_err(|e| e.to_string())),
            LineText::NotUtf8(reason) => f(pos, raw, Err(reason)),
        },
        Piece::Oversize(pos, n) => f(pos, &[], Err(format!("line of {n} bytes exceeds the cap"))),
    })
}

#[cfg(test)]
pub(crate) mod tests;
