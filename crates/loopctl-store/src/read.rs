//! Reading logs: streaming, bounded in memory, optionally split across threads by run.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use loopctl_core::lines::{DEFAULT_MAX_LINE, LineText, Piece, Pos, Splitter, decode};
use loopctl_core::{Event, Outcome, Replay, RunState, parse_line};

use crate::{Result, io_err};

const CHUNK: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Lines longer than this are reported and skipped.
    pub max_line: usize,
    /// Worker threads for replay; runs are split between them.
    pub threads: usize,
    /// Run id for events that name no run.
    pub default_run: String,
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
        }
    }
}

/// Feeds every piece of the file from `start` (line `lines_before + 1`) to `f`.
pub fn for_each_piece(
    path: &Path,
    start: u64,
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
        .saturating_sub(start);
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
    let size = std::fs::metadata(path).map_err(io_err(path))?.len();
    // Threads pay off only on large files; each re-reads the file and skips other runs' lines.
    let threads = if size - start.min(size) < (8 << 20) {
        1
    } else {
        opts.threads.max(1)
    };
    let shard = |i: usize| -> Result<Outcome> {
        let mut r = Replay::shard(&opts.default_run, i as u64, threads as u64);
        if let Some(s) = resume {
            r.resume(s.clone());
        }
        for_each_piece(path, start, lines_before, opts.max_line, |p| r.piece(p))?;
        Ok(r.finish())
    };
    if threads == 1 {
        return shard(0);
    }
    let parts = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads).map(|i| sc.spawn(move || shard(i))).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("replay worker panicked"))
            .collect::<Result<Vec<_>>>()
    })?;
    Ok(Replay::merge(parts))
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
