//! Finding the logs under the roots, replaying them into a `MetricState`, and the one-shot
//! textfile export (node_exporter's textfile collector format, written atomically).

use std::path::{Path, PathBuf};

use loopctl_store::StoreError;
use loopctl_store::discover::{self, RunRef};
use loopctl_store::fold::{fold_file, fold_runs_batched};
use loopctl_store::read::{ReadOptions, for_each_piece};

use crate::encode;
use crate::feed::{Damage, Feed, LogFold};
use crate::model::{MetricState, Options, SourceId};

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The cause in the message, not a `source`, as `StoreError::Io`.
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{0}")]
    Store(#[from] loopctl_store::StoreError),
    #[error("{0}: no such run folder, root or log file")]
    Missing(PathBuf),
    /// There, but neither a regular file nor a folder (a fifo, a device, a socket).
    #[error("{0}: not a regular file (a log), a run folder or a root")]
    NotALog(PathBuf),
    #[error(transparent)]
    Encode(#[from] encode::EncodeError),
    /// `--textfile` names something that is not a regular file: it would be replaced.
    #[error(
        "{0}: not a regular file (a folder, a fifo, a device or a socket); the textfile is \
         renamed into place over what is there, so name a file"
    )]
    NotATextfile(PathBuf),
}

/// One log to read: a run folder's `history.jsonl` or a bare log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRef {
    pub log: PathBuf,
    /// The folder's name or the file's stem: the run of events that name none.
    pub name: String,
    /// The run folder, when the log is one's.
    pub dir: Option<PathBuf>,
}

impl From<RunRef> for LogRef {
    fn from(r: RunRef) -> LogRef {
        LogRef {
            log: r.log,
            name: r.name,
            dir: r.dir,
        }
    }
}

/// Every log named by `specs`: a log file, a run folder (holding `history.jsonl`), or a root
/// whose run folders are its subfolders. A root is scanned again by `serve` for new runs.
pub fn logs(specs: &[PathBuf]) -> Result<Vec<LogRef>, ExportError> {
    logs_with(specs, discover::list_runs, false)
}

/// `logs`, but a root's subfolders are taken unlooked-at (`discover::maybe_runs`): for
/// `fold_logs_batched`, which opens every log anyway and skips what is no log (`absorb`). Spares a stat
/// of every log, on one thread, before any is read (`serve`'s start-up, `export`).
pub fn maybe_logs(specs: &[PathBuf]) -> Result<Vec<LogRef>, ExportError> {
    logs_with(specs, discover::maybe_runs, true)
}

/// `in_path_order`: `runs_of` gives a root's runs in the order of their logs' paths.
fn logs_with(
    specs: &[PathBuf],
    runs_of: fn(&Path) -> loopctl_store::Result<Vec<RunRef>>,
    in_path_order: bool,
) -> Result<Vec<LogRef>, ExportError> {
    let mut out = Vec::new();
    for s in specs {
        if s.is_file() {
            out.push(RunRef::file(s).into());
        } else if let Some(log) = discover::folder_log(s) {
            // A run folder, its log readable or not (a link to nowhere is said so when read).
            out.push(RunRef::file(&log).into());
        } else if s.is_dir() {
            out.extend(runs_of(s)?.into_iter().map(LogRef::from));
        } else if s.exists() {
            return Err(ExportError::NotALog(s.clone()));
        } else {
            return Err(ExportError::Missing(s.clone()));
        }
    }
    if specs.len() > 1 || !in_path_order {
        // One spec's logs are then in path order already, once each.
        out.sort_by(|a, b| a.log.cmp(&b.log));
        out.dedup_by(|a, b| a.log == b.log);
    }
    if specs.len() > 1 {
        // The same file named twice otherwise (`runs/a` and `./runs/a`, a root and a link to
        // it) is one log: the first name in path order stands for it.
        use std::os::unix::fs::MetadataExt;
        let mut seen = std::collections::HashSet::new();
        out.retain(|l| std::fs::metadata(&l.log).map_or(true, |m| seen.insert((m.dev(), m.ino()))));
    }
    Ok(out)
}

/// Reads one whole log into the model line by line, on this thread; returns its feed (where
/// it was read up to).
pub fn read_log(
    m: &mut MetricState,
    log: &LogRef,
    max_line: usize,
    report: &mut impl FnMut(Damage),
) -> Result<(SourceId, Feed), ExportError> {
    let source = m.add_source(&log.name);
    read_into(m, source, log, max_line, report).map(|feed| (source, feed))
}

fn read_into(
    m: &mut MetricState,
    source: SourceId,
    log: &LogRef,
    max_line: usize,
    report: &mut impl FnMut(Damage),
) -> Result<Feed, ExportError> {
    let mut feed = Feed::new(source, max_line);
    for_each_piece(&log.log, 0, 0, max_line, |p| feed.piece(m, p, report))?;
    Ok(feed)
}

/// Logs folded at once by `replay_with` and `serve`: bounds the folds held before they are
/// absorbed (memory), and paces the progress bar.
pub const BATCH: usize = 256;

/// The logs as the fold driver takes them, each named as the log is (its folder's name; the
/// driver's own `RunRef::file` would name it by its file stem).
fn log_runs(logs: &[LogRef]) -> Vec<RunRef> {
    logs.iter()
        .map(|l| RunRef {
            name: l.name.clone(),
            ..RunRef::file(&l.log)
        })
        .collect()
}

/// Folds every log alone (`LogFold`) through the store's fold driver: the logs spread over
/// `read.threads` threads, a large one split by run, a batch at a time (`BATCH`), the next
/// batch folded while `take` is handed one (with the index of its first log; results in the
/// order of `logs`). `take` returns false to stop.
pub fn fold_logs_batched(
    logs: &[LogRef],
    options: &Options,
    read: &ReadOptions,
    mut take: impl FnMut(usize, Vec<Result<LogFold, ExportError>>) -> bool,
) {
    let make = |r: &RunRef| LogFold::new(options, &r.name, read.max_line, read.threads);
    fold_runs_batched(
        &log_runs(logs),
        BATCH,
        &only_logs(read),
        make,
        |start, folded| {
            take(
                start,
                folded
                    .into_iter()
                    .map(|r| r.map_err(ExportError::from))
                    .collect(),
            )
        },
    );
}

/// `read` for `fold_logs_batched`: a path that names no regular file is `NotALog` (`maybe_logs`).
fn only_logs(read: &ReadOptions) -> ReadOptions {
    ReadOptions {
        regular_only: true,
        ..read.clone()
    }
}

/// Takes `log`, folded alone, into `m` as a new source; its damaged lines go to `report`. When
/// the label caps would bind (`MetricState::absorb`), the log is read again line by line into
/// `m`, as one sequential fold would have read it. Returns the source and its feed; `None` when
/// the path held no log (a subfolder `maybe_logs` took, or a log deleted since the scan): the
/// source stays registered, empty, so that source `i` is still the `i`-th log.
pub fn absorb(
    m: &mut MetricState,
    log: &LogRef,
    folded: Result<LogFold, ExportError>,
    report: &mut impl FnMut(Damage),
) -> Result<Option<(SourceId, Feed)>, ExportError> {
    // Registered first, as `read_log` does: source `i` is the `i`-th log, read or not.
    let source = m.add_source(&log.name);
    let mut f = match folded {
        Err(ExportError::Store(StoreError::NotALog(_))) => return Ok(None),
        f => f?,
    };
    let max_line = f.feed.max_line;
    if f.m.needs_full() {
        // Its lean fold could not be exact (an aif-loop run still running, an event it does not
        // fold): folded again the full way, here (on one thread, as the log is small
        // (`feed::LEAN_MAX`), or split by run as the first fold was).
        let full = LogFold::full(&f.m.options, &log.name, max_line, f.threads);
        let read = ReadOptions {
            max_line,
            threads: f.threads,
            regular_only: true,
            default_run: log.name.clone(),
            ..ReadOptions::default()
        };
        f = fold_file(&log.log, &read, full)?;
        m.folded_again += 1;
    }
    if m.absorb(source, f.m).is_err() {
        return read_into(m, source, log, max_line, report).map(|feed| Some((source, feed)));
    }
    for d in f.damages {
        report(Damage { source, ..d });
    }
    let mut feed = f.feed;
    feed.source = source;
    Ok(Some((source, feed)))
}

/// Replays every log into a new model, the logs folded on the default threads.
pub fn replay(
    logs: &[LogRef],
    options: Options,
    max_line: usize,
    report: &mut impl FnMut(&LogRef, Damage),
) -> Result<MetricState, ExportError> {
    let read = ReadOptions {
        max_line,
        ..ReadOptions::default()
    };
    replay_with(logs, options, &read, report)
}

/// Replays every log into a new model: folded in parallel (`fold_logs_batched`), absorbed in path
/// order; the same model as reading them one after another.
pub fn replay_with(
    logs: &[LogRef],
    options: Options,
    read: &ReadOptions,
    report: &mut impl FnMut(&LogRef, Damage),
) -> Result<MetricState, ExportError> {
    replay_skipping(logs, options, read, report, &mut |_, e| Err(e))
}

/// `replay_with`, a log that cannot be read handed to `unreadable`: `Ok` skips it (its source
/// stays, with no run), an error ends the replay with it.
pub fn replay_skipping(
    logs: &[LogRef],
    options: Options,
    read: &ReadOptions,
    report: &mut impl FnMut(&LogRef, Damage),
    unreadable: &mut impl FnMut(&LogRef, ExportError) -> Result<(), ExportError>,
) -> Result<MetricState, ExportError> {
    let mut m = MetricState::new(options.clone());
    let mut failed = None;
    fold_logs_batched(logs, &options, read, |start, folded| {
        for (log, f) in logs[start..].iter().zip(folded) {
            if let Err(e) = absorb(&mut m, log, f, &mut |d| report(log, d))
                .or_else(|e| unreadable(log, e).map(|()| None))
            {
                failed = Some(e);
                return false;
            }
        }
        true
    });
    match failed {
        Some(e) => Err(e),
        None => Ok(m),
    }
}

/// Replays every log into a new model one after another on this thread (`read_log`): the
/// reference `replay_with` agrees with.
pub fn replay_sequential(
    logs: &[LogRef],
    options: Options,
    max_line: usize,
    report: &mut impl FnMut(&LogRef, Damage),
) -> Result<MetricState, ExportError> {
    let mut m = MetricState::new(options);
    for log in logs {
        read_log(&mut m, log, max_line, &mut |d| report(log, d))?;
    }
    Ok(m)
}

/// The model in text format 0.0.4, without the server's own series; no run is probed for
/// its runner (see `render_probing`).
pub fn render(m: MetricState) -> Result<String, ExportError> {
    render_with(m, None)
}

/// As `render`, the running runs whose runner is gone (`logs[i]`, read as source `i` by
/// `replay`, has a free lock) exported as `interrupted`, as `serve` does.
pub fn render_probing(m: MetricState, logs: &[LogRef]) -> Result<String, ExportError> {
    let logs: Vec<PathBuf> = logs.iter().map(|l| l.log.clone()).collect();
    let gone: encode::RunnerGone =
        std::sync::Arc::new(move |s: SourceId| logs.get(s).is_some_and(|l| runner_gone(l)));
    render_with(m, Some(gone))
}

/// Whether `log` has a runner lock that no runner holds.
pub fn runner_gone(log: &Path) -> bool {
    loopctl_store::append::liveness(log) == loopctl_core::analysis::liveness::Liveness::Dead
}

/// Where `write_atomic` writes for `path`: `path`, or the file the symbolic links there lead to.
fn textfile_target(path: &Path) -> Result<PathBuf, ExportError> {
    let io = |p: &Path, cause| ExportError::Io {
        path: p.to_path_buf(),
        cause,
    };
    let mut at = path.to_path_buf();
    // As many links as the kernel follows before it says ELOOP.
    for _ in 0..40 {
        let meta = match std::fs::symlink_metadata(&at) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(at),
            Err(e) => return Err(io(&at, e)),
            Ok(m) => m,
        };
        if meta.is_file() {
            return Ok(at);
        }
        if !meta.file_type().is_symlink() {
            return Err(ExportError::NotATextfile(at));
        }
        let to = std::fs::read_link(&at).map_err(|e| io(&at, e))?;
        at = match at.parent() {
            Some(dir) if to.is_relative() => dir.join(to),
            _ => to,
        };
    }
    Err(io(
        path,
        std::io::Error::other("too many levels of symbolic links"),
    ))
}

fn render_with(
    m: MetricState,
    runner_gone: Option<encode::RunnerGone>,
) -> Result<String, ExportError> {
    let shared = encode::Shared {
        state: std::sync::Arc::new(std::sync::Mutex::new(m)),
        scrape_seconds: None,
        runner_gone,
    };
    let reg = encode::registry(shared)?;
    Ok(encode::text(&reg.gather()))
}

/// Writes `text` to `path` atomically: a temporary file in the same folder, then a rename, so
/// node_exporter never reads half a file. Through a symbolic link, the file it names is written
/// (the link stays); anything else already at `path` that is not a regular file (a folder, a
/// fifo, a device, a socket) is refused, not replaced.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), ExportError> {
    let path = &textfile_target(path)?;
    let io = |cause| ExportError::Io {
        path: path.to_path_buf(),
        cause,
    };
    loopctl_store::snapshot::write_atomic(path, text).map_err(|e| match e {
        loopctl_store::StoreError::Io { cause, .. } => io(cause),
        other => io(std::io::Error::other(other.to_string())),
    })
}
