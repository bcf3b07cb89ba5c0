//! The fold driver's parallel machinery, the only one in loopctl: a log cut into chunks at
//! line starts, chunks read into pooled buffers with positioned reads, and two schedules on a
//! rayon pool. Split by run (`by_run`): each chunk is cut into lines once and every line handed
//! to the shard of its run; shards apply their chunks in file order as they are routed, a few
//! chunks in flight (so the bytes are still in cache). In file order (`in_order`): each chunk
//! is folded alone, the chunk folds merged in file order by whoever reads the next one.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use loopctl_core::decode::lines::Pos;
use loopctl_core::fold::replay::{route, shard_of_event};
use loopctl_core::fold::{Chunked, Line, Projection, Split, feed, feed_oversize};
use rayon::prelude::*;

use crate::read::ReadOptions;
use crate::{Result, StoreError, io_err};

/// Files with fewer bytes to fold than this are read by one thread.
pub(crate) const PARALLEL_MIN: u64 = 8 << 20;
/// Nominal bytes per chunk of a fold split by run; chunks end at line ends.
pub(crate) const RUN_CHUNK: u64 = 1 << 20;
/// The same for a fold in file order: a chunk is read once, start to end, so larger chunks
/// cost nothing in cache and mean fewer hand-offs between threads.
pub(crate) const ORDER_CHUNK: u64 = 4 << 20;
/// Shards of a fold split by run, per thread: more shards than threads, so that a thread
/// slowed down by other work on the machine does not hold the others up.
const SHARDS_PER_THREAD: usize = 4;
/// How much is read at a time while looking for a line end.
const PROBE: usize = 64 << 10;

/// Runs `f` on a pool of `threads` threads (on the caller's pool when it is on one already:
/// `fold_runs` folding a large log among small ones).
pub(crate) fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return f();
    }
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(f),
        // No threads to be had: rayon's global pool.
        Err(_) => f(),
    }
}

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

/// A lock's value, poisoned or not (a panic in a worker is re-raised by rayon).
fn lock<T>(r: std::sync::LockResult<T>) -> T {
    r.unwrap_or_else(std::sync::PoisonError::into_inner)
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

/// One line of a chunk, as the line splitter would give it, sent to one shard.
#[derive(Clone, Copy)]
struct Item {
    /// Offset of the line in the chunk.
    at: usize,
    /// Its length without the newline.
    len: usize,
    /// Newlines in the chunk before it.
    line: u64,
    kind: ItemKind,
    /// Its last byte is a CR (read here, next to the newline, while it is in cache).
    cr: bool,
    /// The run id it was routed by, as offset and length in the line, when it was read in
    /// place (`route`); `NO_KEY` else.
    key: (u32, u32),
}

const NO_KEY: (u32, u32) = (u32::MAX, 0);

#[derive(Clone, Copy, PartialEq)]
enum ItemKind {
    Line,
    Unterminated,
    Oversize,
}

/// A chunk loaded, split into lines and routed: `items[s]` are shard `s`'s lines in file order.
struct Routed {
    start: u64,
    bytes: Bytes,
    items: Vec<Vec<Item>>,
    newlines: u64,
    /// The whole chunk is UTF-8 (checked once here rather than line by line).
    utf8: bool,
}

/// Splits a chunk into lines and routes them by run (the splitter's rules: a line longer than
/// `max_line` is oversize; bytes after the last newline are unterminated).
fn route_chunk(bytes: Bytes, start: u64, opts: &ReadOptions, shards: usize) -> Routed {
    let b: &[u8] = &bytes;
    let mut items: Vec<Vec<Item>> = (0..shards)
        .map(|_| Vec::with_capacity(b.len() / 200 / shards + 16))
        .collect();
    let mut line = 0u64;
    let mut at = 0usize;
    let mut push = |at: usize, len: usize, line: u64, kind: ItemKind| {
        let raw = &b[at..at + len];
        let (shard, key) = match kind {
            ItemKind::Oversize => (0, NO_KEY),
            _ => {
                let (shard, key) = route(&opts.default_run, raw, shards as u64);
                let key = key
                    .and_then(|k| {
                        let from = k.as_ptr() as usize - raw.as_ptr() as usize;
                        Some((u32::try_from(from).ok()?, u32::try_from(k.len()).ok()?))
                    })
                    .unwrap_or(NO_KEY);
                (shard as usize, key)
            }
        };
        items[shard].push(Item {
            at,
            len,
            line,
            kind,
            cr: len > 0 && raw[len - 1] == b'\r',
            key,
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
    let utf8 = simdutf8::basic::from_utf8(b).is_ok();
    Routed {
        start,
        bytes,
        items,
        newlines: line,
        utf8,
    }
}

/// A shard's projection, told each event after a look at whether its run is this shard's: a
/// line that names `run_id` twice is routed by its first (`run_key_fast`), its event is of its
/// last.
struct Checked<'a, P> {
    p: &'a mut P,
    shard: u64,
    shards: u64,
    default_run: &'a str,
    misrouted: &'a AtomicBool,
    /// Address and length of the run id the line being fed was routed by, when read in place.
    key: Option<(usize, usize)>,
}

impl<P: Projection> Projection for Checked<'_, P> {
    fn wants_facts(&self) -> bool {
        self.p.wants_facts()
    }
    fn event(&mut self, line: Line, ev: &loopctl_core::Event<'_>) {
        let run = ev.run_id.as_deref();
        // The very bytes it was routed by (the parser read the id in place): its shard.
        let routed_by_it = run.is_some_and(|r| Some((r.as_ptr() as usize, r.len())) == self.key);
        if !routed_by_it && shard_of_event(self.default_run, run, self.shards) != self.shard {
            self.misrouted.store(true, Ordering::Relaxed);
        }
        self.p.event(line, ev);
    }
    fn damaged(&mut self, line: Line, damage: &loopctl_core::fold::Damage) {
        self.p.damaged(line, damage);
    }
    fn blank(&mut self, line: Line) {
        self.p.blank(line);
    }
}

/// Feeds shard `s`'s lines of one chunk, whose first line is line `base + 1`; an event whose
/// run is another shard's sets `misrouted`.
fn apply_chunk<P: Projection>(
    p: &mut P,
    s: usize,
    base: u64,
    r: &Routed,
    opts: &ReadOptions,
    misrouted: &AtomicBool,
) {
    let p = &mut Checked {
        p,
        shard: s as u64,
        shards: r.items.len() as u64,
        default_run: &opts.default_run,
        misrouted,
        key: None,
    };
    let b: &[u8] = &r.bytes;
    let items = &r.items[s];
    for (k, it) in items.iter().enumerate() {
        if let Some(next) = items.get(k + PREFETCH_AHEAD) {
            prefetch(&b[next.at..next.at + next.len]);
        }
        let pos = Pos {
            line: base + 1 + it.line,
            offset: r.start + it.at as u64,
        };
        let line = Line {
            pos,
            len: it.len as u64,
            terminated: it.kind == ItemKind::Line,
        };
        let raw = &b[it.at..it.at + it.len];
        p.key = (it.key != NO_KEY).then(|| {
            let (from, len) = (it.key.0 as usize, it.key.1 as usize);
            (raw.as_ptr() as usize + from, len)
        });
        match it.kind {
            ItemKind::Oversize => feed_oversize(p, pos, it.len as u64, true),
            _ if r.utf8 => {
                // SAFETY: `route_chunk` checked that all of the chunk is UTF-8, and a line
                // starts and ends at a newline or an end of the chunk, both character
                // boundaries. The bytes cannot change in between: a chunk is a buffer of its
                // own, read once (`load`).
                let text = unsafe { std::str::from_utf8_unchecked(raw) };
                feed(p, line, raw, Some((text, it.cr)));
            }
            _ => feed(p, line, raw, None),
        }
    }
}

/// Lines ahead of the one a shard folds whose first bytes it asks the CPU to bring in.
const PREFETCH_AHEAD: usize = 2;

/// Asks the CPU to bring `b` (a line) into cache, a cache line at a time: a shard's lines are
/// one in every few of a chunk that another thread split, out of this core's cache by the time
/// it folds them (the misses on them were about a tenth of a merged log's fold).
#[inline(always)]
fn prefetch(b: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for at in (0..b.len()).step_by(64) {
        // SAFETY: a prefetch is a hint to the cache: it reads nothing the program sees and
        // cannot fault, and the address is inside `b` anyway.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(b.as_ptr().add(at).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = b;
}

/// Folds `chunks` through shards of `p` split by run, on the current rayon pool. Tasks, not
/// phases: routing a chunk hands it to every shard that waits for it, and a shard that has
/// applied a chunk goes on to its next one if it is routed; a chunk applied by every shard
/// frees its slot for the next chunk to route. No thread waits for a slow one, and at most
/// `window` chunks are in memory. `Err(p)`, `p` untouched, when an event reached a shard not
/// its run's (a line naming `run_id` twice, see `Checked`): the caller folds the log in one
/// pass instead.
pub(crate) fn by_run<P: Split>(
    path: &Path,
    chunks: &[(u64, u64)],
    lines_before: u64,
    opts: &ReadOptions,
    threads: usize,
    mut p: P,
) -> Result<std::result::Result<P, P>> {
    let count = threads.max(1) * SHARDS_PER_THREAD;
    let window = (WINDOW_PER_THREAD * threads.max(1))
        .min(chunks.len())
        .max(1);
    let run = ByRun {
        path,
        file: File::open(path).map_err(io_err(path))?,
        pool: Arc::new(Pool::default()),
        opts,
        chunks,
        shards: (0..count).map(|_| Mutex::new(p.fork())).collect(),
        misrouted: AtomicBool::new(false),
        sched: Mutex::new(Sched {
            slots: (0..window).map(|_| None).collect(),
            next_route: window,
            cursor: vec![0; count],
            busy: vec![false; count],
            next_base: (0, lines_before),
            failed: None,
        }),
    };
    rayon::scope_fifo(|sc| {
        for c in 0..window {
            let run = &run;
            sc.spawn_fifo(move |sc| run.route(sc, c));
        }
    });
    if let Some(e) = lock(run.sched.into_inner()).failed {
        return Err(e);
    }
    if run.misrouted.into_inner() {
        return Ok(Err(p));
    }
    let mut shards: Vec<P> = run
        .shards
        .into_iter()
        .map(|m| lock(m.into_inner()))
        .collect();
    shards.par_iter_mut().for_each(Split::settle);
    for s in shards {
        p.join(s);
    }
    Ok(Ok(p))
}

/// Chunks in flight per thread in a fold split by run: few, so that a chunk's bytes are still
/// in cache when the shards apply it.
const WINDOW_PER_THREAD: usize = 3;

/// A fold split by run under way (`by_run`).
struct ByRun<'a, P> {
    path: &'a Path,
    file: File,
    pool: Arc<Pool>,
    opts: &'a ReadOptions,
    chunks: &'a [(u64, u64)],
    shards: Vec<Mutex<P>>,
    /// Some event reached a shard not its run's (`Checked`).
    misrouted: AtomicBool,
    sched: Mutex<Sched>,
}

/// Which chunks are routed and which shard is where.
struct Sched {
    /// Chunk `c` routed, in slot `c % window`.
    slots: Vec<Option<Slot>>,
    next_route: usize,
    /// Per shard: the next chunk it applies, and whether it is applying one.
    cursor: Vec<usize>,
    busy: Vec<bool>,
    /// The first chunk whose line base is unknown, and that base.
    next_base: (usize, u64),
    failed: Option<StoreError>,
}

struct Slot {
    index: usize,
    data: Arc<Routed>,
    /// Lines before the chunk, once every earlier chunk is routed.
    base: Option<u64>,
    /// Shards that have not applied it yet.
    left: usize,
}

impl Sched {
    fn routed(&mut self, c: usize, r: Routed) {
        let n = self.slots.len();
        let left = self.cursor.len();
        self.slots[c % n] = Some(Slot {
            index: c,
            data: Arc::new(r),
            base: None,
            left,
        });
        while let Some(slot) = self.slots[self.next_base.0 % n]
            .as_mut()
            .filter(|s| s.index == self.next_base.0)
        {
            slot.base = Some(self.next_base.1);
            self.next_base = (self.next_base.0 + 1, self.next_base.1 + slot.data.newlines);
        }
    }

    /// Shard `s`'s next chunk, if it is routed and its base known.
    fn ready_for(&self, s: usize) -> Option<(usize, u64, Arc<Routed>)> {
        let c = self.cursor[s];
        let slot = self.slots[c % self.slots.len()].as_ref()?;
        (slot.index == c).then_some(())?;
        Some((c, slot.base?, Arc::clone(&slot.data)))
    }

    /// Shard `s` applied chunk `c`: whether every shard now has (its slot is free).
    fn applied(&mut self, s: usize, c: usize) -> bool {
        self.cursor[s] += 1;
        self.busy[s] = false;
        let n = self.slots.len();
        let slot = &mut self.slots[c % n];
        match slot {
            Some(r) if r.index == c => {
                r.left -= 1;
                if r.left == 0 {
                    *slot = None;
                    return true;
                }
                false
            }
            _ => false,
        }
    }
}

impl<'a, P: Split> ByRun<'a, P> {
    fn route<'s>(&'s self, sc: &rayon::ScopeFifo<'s>, c: usize) {
        let ch = self.chunks[c];
        let routed = load(&self.file, self.path, ch, &self.pool)
            .map(|b| route_chunk(b, ch.0, self.opts, self.shards.len()));
        let mut g = lock(self.sched.lock());
        match routed {
            Ok(r) => g.routed(c, r),
            Err(e) => {
                g.failed.get_or_insert(e);
                return;
            }
        }
        self.dispatch(sc, &mut g);
    }

    fn apply<'s>(
        &'s self,
        sc: &rayon::ScopeFifo<'s>,
        s: usize,
        c: usize,
        base: u64,
        r: Arc<Routed>,
    ) {
        let shard = &mut *lock(self.shards[s].lock());
        apply_chunk(shard, s, base, &r, self.opts, &self.misrouted);
        drop(r);
        let mut g = lock(self.sched.lock());
        if g.applied(s, c) && g.failed.is_none() && g.next_route < self.chunks.len() {
            let next = g.next_route;
            g.next_route += 1;
            sc.spawn_fifo(move |sc| self.route(sc, next));
        }
        self.dispatch(sc, &mut g);
    }

    /// Hands every idle shard its next chunk, if routed.
    fn dispatch<'s>(&'s self, sc: &rayon::ScopeFifo<'s>, g: &mut Sched) {
        if g.failed.is_some() {
            return;
        }
        for s in 0..self.shards.len() {
            if g.busy[s] {
                continue;
            }
            if let Some((c, base, r)) = g.ready_for(s) {
                g.busy[s] = true;
                sc.spawn_fifo(move |sc| self.apply(sc, s, c, base, r));
            }
        }
    }
}

/// Folds `chunks` through `p` a chunk at a time, on the current rayon pool: chunks are read
/// in file order as threads come free (no thread waits for another), and whoever reads the
/// next chunk to merge merges it, and the ones after it that are ready, while the others read
/// on. `None` when `p` can no longer merge exactly (`Chunked::merge`): reading stops.
pub(crate) fn in_order<P: Chunked>(path: &Path, chunks: &[(u64, u64)], p: P) -> Result<Option<P>> {
    struct Waiting<C> {
        /// Chunks read and not merged yet, by index.
        read: BTreeMap<usize, C>,
        next: usize,
        /// A thread is merging: it takes the chunks in order as they are ready.
        merging: bool,
        failed: Option<StoreError>,
    }
    let file = File::open(path).map_err(io_err(path))?;
    let pool = Arc::new(Pool::default());
    let reader = p.reader();
    let folded = Mutex::new(p);
    let lost = AtomicBool::new(false);
    let waiting = Mutex::new(Waiting {
        read: BTreeMap::new(),
        next: 0,
        merging: false,
        failed: None,
    });
    let task = |i: usize, ch: (u64, u64)| {
        if lost.load(Ordering::Relaxed) {
            return;
        }
        let chunk = load(&file, path, ch, &pool).map(|b| P::read_chunk(&reader, &b, ch.0));
        let mut w = lock(waiting.lock());
        match chunk {
            Err(e) => {
                w.failed.get_or_insert(e);
                lost.store(true, Ordering::Relaxed);
                return;
            }
            Ok(c) => {
                w.read.insert(i, c);
            }
        }
        if w.merging {
            return;
        }
        w.merging = true;
        loop {
            let next = w.next;
            let ready = w
                .read
                .remove(&next)
                .filter(|_| !lost.load(Ordering::Relaxed));
            let Some(c) = ready else {
                w.merging = false;
                return;
            };
            w.next += 1;
            drop(w);
            if !lock(folded.lock()).merge(c) {
                lost.store(true, Ordering::Relaxed);
            }
            w = lock(waiting.lock());
        }
    };
    rayon::scope_fifo(|s| {
        for (i, &ch) in chunks.iter().enumerate() {
            let task = &task;
            s.spawn_fifo(move |_| task(i, ch));
        }
    });
    let w = lock(waiting.into_inner());
    if let Some(e) = w.failed {
        return Err(e);
    }
    let p = lock(folded.into_inner());
    Ok((!lost.load(Ordering::Relaxed) && w.next == chunks.len()).then_some(p))
}
