//! `export parquet`: the three tables as Hive-style partitions by day
//! (`runs/day=2026-11-21/part-0.parquet`). `runs` and `phases` are frames in memory (they grow
//! with the runs and phase attempts); `events` is streamed (`events::stream`) a batch at a
//! time: each batch split by day, a day's rows gathered until they make a row group, row
//! groups encoded and compressed on worker threads and appended in order to their day's file.
//! Every partition is first written to a temporary file beside its target; once all are
//! written, each is dropped if its bytes equal the file already there, else renamed over it
//! (atomic: a reader or a crash never sees half a file). On an error, no temporary file is
//! left and no partition is replaced.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};

use loopctl_store::read::ReadOptions;
use polars::io::parquet::write::BatchedWriter;
use polars::prelude::*;
use polars_parquet::parquet::error::ParquetError;
use polars_parquet::write::{
    CompressedPage, Compressor, Encoding, ParquetType, StatisticsOptions, Version, WriteOptions,
    array_to_columns, to_parquet_schema,
};
use tempfile::{NamedTempFile, TempPath};

use crate::format::{date_text, parquet};
use crate::tables::Tables;
use crate::{Collected, Error, Result, events};

/// The partition of rows with no day (no timestamp), as Hive tools name it.
pub const NO_DAY: &str = "__HIVE_DEFAULT_PARTITION__";

const PART: &str = "part-0.parquet";

/// How to export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// `threads` encode the events' row groups.
    pub read: ReadOptions,
    /// Events read per batch, and rows of a row group (a day's events are gathered up to it).
    pub batch_rows: usize,
    /// Bytes of log a batch stands for, about: logs of long events (large payloads) get
    /// batches of fewer rows, so what is held stays bounded in bytes too (`rows_for`).
    pub batch_bytes: usize,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            read: ReadOptions::default(),
            batch_rows: 64 * 1024,
            batch_bytes: 32 << 20,
        }
    }
}

impl ExportOptions {
    /// `batch_rows`, or fewer when the events of `c`'s logs are long: a batch of about
    /// `batch_bytes` of log, never under `MIN_BATCH_ROWS` rows (row groups stay useful). The
    /// same logs give the same size, so the same bytes.
    pub fn rows_for(&self, c: &Collected) -> usize {
        let events: u64 = c.runs.iter().map(|r| r.events).sum();
        let per_event = usize::try_from(c.bytes / events.max(1)).unwrap_or(usize::MAX);
        let by_bytes = (self.batch_bytes / per_event.max(1)).max(MIN_BATCH_ROWS);
        self.batch_rows.min(by_bytes).max(1)
    }

    fn sized_for(&self, c: &Collected) -> ExportOptions {
        ExportOptions {
            batch_rows: self.rows_for(c),
            ..self.clone()
        }
    }

    fn workers(&self) -> usize {
        self.read.threads.clamp(1, 16)
    }

    /// Row groups on their way to the files at any time (queued, encoding, or waiting for an
    /// earlier one to be written): one per worker keeps them busy while the next is cut.
    fn in_flight(&self) -> usize {
        self.workers()
    }

    /// Events held in memory at most: the batch being read, the days' rows waiting to make a
    /// row group (`PENDING` batches, plus the batch just read before they are cut back), and
    /// the row groups in flight (a batch each at most).
    pub fn max_events_held(&self) -> usize {
        self.batch_rows * (1 + PENDING + 1 + self.in_flight())
    }
}

/// The fewest rows a batch is cut to for long events.
const MIN_BATCH_ROWS: usize = 1024;

/// Days' rows waiting for a row group, in batches: above it the largest days go first.
const PENDING: usize = 2;

/// What an export did.
#[derive(Debug, Default, PartialEq)]
pub struct Exported {
    /// Partition files written (new or changed).
    pub written: Vec<PathBuf>,
    /// Partition files left as they were (same bytes).
    pub unchanged: Vec<PathBuf>,
    pub runs: usize,
    pub phases: usize,
    pub events: u64,
    /// The most events held in memory at once (at most `ExportOptions::max_events_held`).
    pub max_events_held: usize,
}

/// Writes `runs`, `phases` and `events` of what the first pass read (`c`, read without its
/// `events` table) under `out`. `progress` gets the logs and bytes read again for the events.
pub fn export(
    c: &Collected,
    out: &Path,
    opts: &ExportOptions,
    progress: impl FnMut(u64, u64),
) -> Result<Exported> {
    let t = Tables::of(c)?;
    let opts = &opts.sized_for(c);
    // `runs` and `phases` are encoded beside the events, on a thread of their own.
    let (tables, events) = std::thread::scope(|s| {
        let tables = s.spawn(|| stage_tables(&t, out));
        let mut staged = Vec::new();
        let events = stream_events(c, out, opts, progress, &mut staged).map(|n| (n, staged));
        let tables = tables
            .join()
            .unwrap_or_else(|_| Err(Error::Usage("encoding runs and phases panicked".into())));
        (tables, events)
    });
    let mut staged = tables?;
    let ((events, max_events_held), events_staged) = events?;
    staged.extend(events_staged);
    let mut done = commit(staged)?;
    done.runs = t.runs.height();
    done.phases = t.phases.height();
    done.events = events;
    done.max_events_held = max_events_held;
    Ok(done)
}

fn stage_tables(t: &Tables, out: &Path) -> Result<Vec<Staged>> {
    let mut staged = Vec::new();
    for (name, df) in [("runs", &t.runs), ("phases", &t.phases)] {
        Days::of(df)?.each(|day, mut part| {
            let file = partition(out, name, &day_name(day));
            staged.push(stage_bytes(&file, &parquet(&mut part)?)?);
            Ok(())
        })?;
    }
    Ok(staged)
}

fn partition(out: &Path, table: &str, day: &str) -> PathBuf {
    out.join(table).join(format!("day={day}")).join(PART)
}

fn day_name(d: Option<i32>) -> String {
    d.map_or_else(|| NO_DAY.to_string(), date_text)
}

/// The frame's rows split by their `day`, in day order, without the `day` column (the
/// partition's folder carries it): each day's rows are copied out as `take` is called for it.
struct Days {
    rest: DataFrame,
    groups: BTreeMap<Option<i32>, Vec<IdxSize>>,
}

impl Days {
    fn of(df: &DataFrame) -> Result<Days> {
        let days = df.column("day")?.cast(&DataType::Int32)?;
        let mut groups: BTreeMap<Option<i32>, Vec<IdxSize>> = Default::default();
        for (i, d) in days.i32()?.iter().enumerate() {
            groups.entry(d).or_default().push(i as IdxSize);
        }
        Ok(Days {
            rest: df.drop("day")?,
            groups,
        })
    }

    /// Every day's rows, one day at a time, in day order.
    fn each(self, mut f: impl FnMut(Option<i32>, DataFrame) -> Result<()>) -> Result<()> {
        let Days { rest, groups } = self;
        // One day (a batch of a log written in time order, usually): no copy. A frame of
        // several chunks is copied into one: row groups must not follow how it was read.
        let whole = groups.len() == 1 && rest.max_n_chunks() == 1;
        for (d, idx) in groups {
            let part = if whole {
                rest.clone()
            } else {
                rest.take(&IdxCa::from_vec("idx".into(), idx))?
            };
            f(d, part)?;
        }
        Ok(())
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |cause| Error::Io {
        path: path.to_path_buf(),
        cause,
    }
}

/// A partition written to a temporary file beside its target (removed when dropped).
struct Staged {
    target: PathBuf,
    tmp: TempPath,
}

/// A temporary file in `target`'s folder (created when missing), named so that readers of
/// `*.parquet` skip it.
fn temp_beside(target: &Path) -> Result<NamedTempFile> {
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut b = tempfile::Builder::new();
    b.prefix(".part-0.").suffix(".tmp");
    // Readable as a file written the usual way (the umask applies), not owner-only.
    #[cfg(unix)]
    b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    b.tempfile_in(dir).map_err(io(dir))
}

fn stage_bytes(target: &Path, bytes: &[u8]) -> Result<Staged> {
    let mut tmp = temp_beside(target)?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(io(tmp.path()))?;
    Ok(Staged {
        target: target.to_path_buf(),
        tmp: tmp.into_temp_path(),
    })
}

/// Whether the two files hold the same bytes (false when `b` is missing).
fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    let (Ok(mb), Ok(ma)) = (std::fs::metadata(b), std::fs::metadata(a)) else {
        return Ok(false);
    };
    if ma.len() != mb.len() || !mb.is_file() {
        return Ok(false);
    }
    let mut fa = File::open(a).map_err(io(a))?;
    let mut fb = File::open(b).map_err(io(b))?;
    let (mut ba, mut bb) = (vec![0u8; 1 << 18], vec![0u8; 1 << 18]);
    loop {
        let n = fa.read(&mut ba).map_err(io(a))?;
        if n == 0 {
            return Ok(true);
        }
        fb.read_exact(&mut bb[..n]).map_err(io(b))?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// Each staged file dropped when its target holds the same bytes, else renamed over it.
fn commit(staged: Vec<Staged>) -> Result<Exported> {
    let mut done = Exported::default();
    let mut dirs = std::collections::BTreeSet::new();
    for s in staged {
        if same_bytes(&s.tmp, &s.target)? {
            done.unchanged.push(s.target);
            continue;
        }
        s.tmp.persist(&s.target).map_err(|e| Error::Io {
            path: s.target.clone(),
            cause: e.error,
        })?;
        if let Some(d) = s.target.parent() {
            dirs.insert(d.to_path_buf());
        }
        done.written.push(s.target);
    }
    // The renames themselves reach the disk.
    for d in dirs {
        File::open(&d).and_then(|f| f.sync_all()).map_err(io(&d))?;
    }
    Ok(done)
}

/// Encodes frames of the `events` schema (without `day`) into row groups: the work of the
/// worker threads, as polars' streaming Parquet sink does it.
struct Encoder {
    arrow: ArrowSchema,
    parquet: Vec<ParquetType>,
    encodings: Vec<Vec<Encoding>>,
    options: WriteOptions,
}

/// A row group ready to append: its rows and its columns' pages.
struct RowGroup {
    rows: usize,
    pages: Vec<Vec<CompressedPage>>,
}

impl Encoder {
    fn new(schema: &Schema) -> Result<Encoder> {
        let arrow = schema.to_arrow(CompatLevel::newest());
        let parquet = to_parquet_schema(&arrow)?.fields().to_vec();
        let encodings = polars::io::parquet::write::get_encodings(&arrow)
            .iter()
            .cloned()
            .collect();
        Ok(Encoder {
            arrow,
            parquet,
            encodings,
            options: WriteOptions {
                statistics: StatisticsOptions::default(),
                compression: ParquetCompression::Zstd(None).into(),
                version: Version::V1,
                data_page_size: None,
            },
        })
    }

    fn encode(&self, df: DataFrame) -> Result<RowGroup> {
        let rows = df.height();
        let mut pages = Vec::with_capacity(df.width());
        for (i, c) in df.into_columns().into_iter().enumerate() {
            let field = self.arrow.get_at_index(i).map(|(_, f)| f);
            let Some(field) = field else {
                return Err(Error::Usage(format!("column {i} is not in the schema")));
            };
            let array = c.as_materialized_series().rechunk().to_arrow_with_field(
                0,
                Cow::Borrowed(field),
                true,
            )?;
            for column in array_to_columns(
                array,
                self.parquet[i].clone(),
                self.options,
                &self.encodings[i],
            )? {
                let compressed = Compressor::new_from_vec(
                    column.map(|r| r.map_err(|e| ParquetError::FeatureNotSupported(e.to_string()))),
                    self.options.compression,
                    vec![],
                );
                let column: std::result::Result<Vec<_>, _> = compressed.collect();
                pages.push(column.map_err(PolarsError::from)?);
            }
        }
        Ok(RowGroup { rows, pages })
    }
}

/// A day's rows for one row group, numbered in the order they were cut.
struct Job {
    seq: u64,
    day: Option<i32>,
    rows: usize,
    df: DataFrame,
}

/// Cuts batches into per-day row groups of `batch_rows` rows: a day's rows wait until they
/// make one, or until the days waiting hold more than `PENDING` batches (then the largest
/// days go as they are).
struct Partitioner {
    batch_rows: usize,
    pending: BTreeMap<Option<i32>, (DataFrame, usize)>,
    held: usize,
    next_seq: u64,
}

impl Partitioner {
    fn add(&mut self, batch: &DataFrame, jobs: &mut Vec<Job>) -> Result<()> {
        Days::of(batch)?.each(|day, part| {
            let n = part.height();
            match self.pending.get_mut(&day) {
                Some((df, rows)) => {
                    df.vstack_mut(&part)?;
                    *rows += n;
                }
                None => {
                    self.pending.insert(day, (part, n));
                }
            }
            self.held += n;
            Ok(())
        })?;
        // Whole row groups of the days that have them; the rest waits.
        let days: Vec<Option<i32>> = self.pending.keys().copied().collect();
        for d in days {
            while let Some((df, rows)) = self.pending.get_mut(&d)
                && *rows > self.batch_rows
            {
                let (head, tail) = df.split_at(self.batch_rows as i64);
                *df = tail;
                *rows -= self.batch_rows;
                self.held -= self.batch_rows;
                self.push(d, head, jobs);
            }
            if self.pending.get(&d).is_some_and(|p| p.1 == self.batch_rows) {
                self.cut(d, jobs);
            }
        }
        while self.held > PENDING * self.batch_rows {
            // The largest day (the earliest of equals: the order must not depend on a hash).
            let Some(d) = self
                .pending
                .iter()
                .max_by(|a, b| a.1.1.cmp(&b.1.1).then(b.0.cmp(a.0)))
                .map(|(d, _)| *d)
            else {
                break;
            };
            self.cut(d, jobs);
        }
        Ok(())
    }

    fn cut(&mut self, day: Option<i32>, jobs: &mut Vec<Job>) {
        if let Some((df, rows)) = self.pending.remove(&day) {
            self.held -= rows;
            self.push(day, df, jobs);
        }
    }

    fn push(&mut self, day: Option<i32>, df: DataFrame, jobs: &mut Vec<Job>) {
        jobs.push(Job {
            seq: self.next_seq,
            day,
            rows: df.height(),
            df,
        });
        self.next_seq += 1;
    }

    fn rest(&mut self, jobs: &mut Vec<Job>) {
        let days: Vec<Option<i32>> = self.pending.keys().copied().collect();
        for d in days {
            self.cut(d, jobs);
        }
    }
}

/// A day's events file being written: a temporary file beside the partition.
struct DayFile {
    target: PathBuf,
    tmp: NamedTempFile,
    writer: BatchedWriter<File>,
}

/// Appends encoded row groups to their day's file in the order they were cut (workers finish
/// out of order), and gives back each file staged and the row groups written.
fn write_in_order(
    out: &Path,
    schema: &Schema,
    done: mpsc::Receiver<(Job, Result<RowGroup>)>,
    permits: mpsc::SyncSender<()>,
    held: &AtomicUsize,
) -> Result<(Vec<Staged>, u64)> {
    let mut files: BTreeMap<Option<i32>, DayFile> = BTreeMap::new();
    let mut waiting: BTreeMap<u64, (Option<i32>, usize, RowGroup)> = BTreeMap::new();
    let mut next = 0u64;
    for (job, encoded) in done {
        waiting.insert(job.seq, (job.day, job.rows, encoded?));
        while let Some((day, rows, rg)) = waiting.remove(&next) {
            let f = match files.entry(day) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let target = partition(out, "events", &day_name(day));
                    let tmp = temp_beside(&target)?;
                    let file = tmp.as_file().try_clone().map_err(io(tmp.path()))?;
                    let writer = ParquetWriter::new(file)
                        .with_compression(ParquetCompression::Zstd(None))
                        .batched(schema)?;
                    e.insert(DayFile {
                        target,
                        tmp,
                        writer,
                    })
                }
            };
            f.writer.write_row_group(rg.rows as u64, &rg.pages)?;
            held.fetch_sub(rows, Ordering::SeqCst);
            next += 1;
            // The main thread may cut another row group.
            let _ = permits.send(());
        }
    }
    if !waiting.is_empty() {
        return Err(Error::Usage(format!("Parquet row group {next} was lost")));
    }
    let mut staged = Vec::new();
    for f in files.into_values() {
        f.writer.finish()?;
        drop(f.writer);
        f.tmp.as_file().sync_all().map_err(io(f.tmp.path()))?;
        staged.push(Staged {
            target: f.target,
            tmp: f.tmp.into_temp_path(),
        });
    }
    Ok((staged, next))
}

/// Streams the events into day files (staged in `staged`): the events read on this thread,
/// row groups encoded on `workers` threads and written by one more. Gives the events read
/// and the most held in memory at once.
fn stream_events(
    c: &Collected,
    out: &Path,
    opts: &ExportOptions,
    progress: impl FnMut(u64, u64),
    staged: &mut Vec<Staged>,
) -> Result<(u64, usize)> {
    let schema = crate::tables::events(&[])?
        .drop("day")?
        .schema()
        .as_ref()
        .clone();
    let encoder = Encoder::new(&schema)?;
    let in_flight = opts.in_flight();
    let held = AtomicUsize::new(0);
    let max_held = AtomicUsize::new(0);
    let (job_tx, job_rx) = mpsc::sync_channel::<Job>(in_flight);
    let job_rx = Mutex::new(job_rx);
    let (done_tx, done_rx) = mpsc::channel::<(Job, Result<RowGroup>)>();
    let (permit_tx, permit_rx) = mpsc::sync_channel::<()>(in_flight);
    for _ in 0..in_flight {
        let _ = permit_tx.send(());
    }
    let mut parts = Partitioner {
        batch_rows: opts.batch_rows.max(1),
        pending: BTreeMap::new(),
        held: 0,
        next_seq: 0,
    };
    std::thread::scope(|s| {
        let (encoder, job_rx, held, schema) = (&encoder, &job_rx, &held, &schema);
        for _ in 0..opts.workers() {
            let done_tx = done_tx.clone();
            s.spawn(move || {
                loop {
                    let job = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(mut job) = job else { return };
                    let df = std::mem::take(&mut job.df);
                    // A panic in polars is an error of this export, not a lost row group that
                    // the writer would wait for.
                    let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        encoder.encode(df)
                    }))
                    .unwrap_or_else(|_| {
                        Err(Error::Usage("encoding a Parquet row group panicked".into()))
                    });
                    if done_tx.send((job, encoded)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let writer = s.spawn(move || write_in_order(out, schema, done_rx, permit_tx, held));
        let mut jobs = Vec::new();
        let send = |jobs: &mut Vec<Job>| -> Result<()> {
            for job in jobs.drain(..) {
                // A permit per row group in flight: the writer hands them back.
                permit_rx
                    .recv()
                    .map_err(|_| Error::Usage("the Parquet writer stopped".into()))?;
                job_tx
                    .send(job)
                    .map_err(|_| Error::Usage("the Parquet encoders stopped".into()))?;
            }
            Ok(())
        };
        let read = events::stream(
            c,
            &opts.read,
            parts.batch_rows,
            |batch| {
                let now = held.fetch_add(batch.height(), Ordering::SeqCst) + batch.height();
                max_held.fetch_max(now, Ordering::SeqCst);
                parts.add(&batch, &mut jobs)?;
                drop(batch);
                send(&mut jobs)
            },
            progress,
        )
        .and_then(|n| {
            parts.rest(&mut jobs);
            send(&mut jobs)?;
            Ok(n)
        });
        drop(job_tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(Error::Usage("the Parquet writer panicked".into())));
        // The writer's error is the cause when both failed (the reader only saw it stop).
        let (files, written) = written?;
        let n = read?;
        if written != parts.next_seq {
            return Err(Error::Usage(format!(
                "{written} of {} Parquet row groups written",
                parts.next_seq
            )));
        }
        staged.extend(files);
        Ok((n, max_held.load(Ordering::SeqCst)))
    })
}

/// The `events` table of `c` streamed and gathered (tests: what the export writes, as one
/// frame in file order).
pub fn events_streamed(c: &Collected, opts: &ExportOptions) -> Result<DataFrame> {
    let opts = &opts.sized_for(c);
    let mut all = crate::tables::events(&[])?;
    events::stream(
        c,
        &opts.read,
        opts.batch_rows,
        |df| {
            all.vstack_mut(&df)?;
            Ok(())
        },
        |_, _| {},
    )?;
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logs of `events` events in `bytes` bytes, as the first pass counts them.
    fn read(events: u64, bytes: u64) -> Collected {
        let mut c = Collected {
            bytes,
            ..Collected::default()
        };
        c.runs.push(crate::rows::RunRow {
            events,
            ..Default::default()
        });
        c
    }

    #[test]
    fn long_events_make_batches_of_fewer_rows() {
        let o = ExportOptions::default();
        // 300 bytes an event: 64k rows are ~19 MiB, under the byte bound.
        assert_eq!(o.rows_for(&read(1_000_000, 300_000_000)), 64 * 1024);
        // 2 KB an event: a batch of 32 MiB holds 16k rows.
        assert_eq!(o.rows_for(&read(1_000, 2_000_000)), (32 << 20) / 2_000);
        // Huge events: never under the floor; no events: the rows asked for.
        assert_eq!(o.rows_for(&read(10, 1 << 30)), MIN_BATCH_ROWS);
        assert_eq!(o.rows_for(&Collected::default()), 64 * 1024);
        // Fewer rows asked for than the bytes allow: those.
        let small = ExportOptions {
            batch_rows: 7,
            ..ExportOptions::default()
        };
        assert_eq!(small.rows_for(&read(1_000, 2_000_000)), 7);
    }

    /// A row group that never arrives (a worker died) fails the export instead of leaving a
    /// partition without it.
    #[test]
    fn a_lost_row_group_is_an_error() {
        let schema = crate::tables::events(&[])
            .unwrap()
            .drop("day")
            .unwrap()
            .schema()
            .as_ref()
            .clone();
        let encoder = Encoder::new(&schema).unwrap();
        let df = DataFrame::empty_with_schema(&schema);
        let (tx, rx) = mpsc::channel();
        let (permits, _keep) = mpsc::sync_channel(4);
        let job = |seq| Job {
            seq,
            day: None,
            rows: 0,
            df: DataFrame::empty(),
        };
        // Row group 1 arrives; row group 0 never does.
        tx.send((job(1), encoder.encode(df.clone()))).unwrap();
        drop(tx);
        let out = tempfile::tempdir().unwrap();
        let held = AtomicUsize::new(0);
        let err = write_in_order(out.path(), &schema, rx, permits, &held)
            .err()
            .expect("an error");
        assert!(err.to_string().contains("row group 0 was lost"), "{err}");
    }
}
