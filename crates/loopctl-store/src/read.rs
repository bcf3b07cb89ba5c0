//! Reading a log as it is, line by line, bounded in memory (`history`, the exporters); folds
//! of logs go through the fold driver (`fold`), which uses these.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use loopctl_core::decode::lines::{DEFAULT_MAX_LINE, LineText, Piece, Pos, Splitter, decode};
use loopctl_core::fold::replay::{FindingKind, damage_kind, oversize_reason};
use loopctl_core::{Event, parse_line};

use crate::{Result, StoreError, io_err};

const CHUNK: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Lines longer than this are reported and skipped.
    pub max_line: usize,
    /// Threads a fold may use (`fold`: a large log is split in chunks, a root's logs spread).
    pub threads: usize,
    /// Run id for events that name no run.
    pub default_run: String,
    /// False to count and check only (see `Replay::without_states`).
    pub states: bool,
    /// Open logs without blocking and take only regular files: a path that names none (missing,
    /// a folder, a fifo) is `StoreError::NotALog`. For paths nobody looked at before
    /// (`discover::maybe_runs`).
    pub regular_only: bool,
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
            regular_only: false,
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
    f: impl FnMut(Piece<'_>),
) -> Result<()> {
    let (file, size) = open_log(path, false)?;
    pieces_of(file, size, path, start, end, lines_before, max_line, f)
}

/// Opens a log and reads its size: one open, one fstat. With `regular_only`, the open does not
/// block (a fifo would, until a writer came) and what is not a regular file is
/// `StoreError::NotALog`, as is a path naming nothing.
pub(crate) fn open_log(path: &Path, regular_only: bool) -> Result<(File, u64)> {
    let not_a_log = || StoreError::NotALog(path.to_path_buf());
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    if regular_only {
        options.custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits());
    }
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) if regular_only && is_absent(&e) => return Err(not_a_log()),
        Err(e) => return Err(io_err(path)(e)),
    };
    let meta = file.metadata().map_err(io_err(path))?;
    if regular_only && !meta.is_file() {
        return Err(not_a_log());
    }
    Ok((file, meta.len()))
}

/// Why the log at `path` cannot be read, when it cannot (`list`'s `unreadable` rows): a path
/// that names nothing, or no regular file, is not said (no open that could block).
pub fn read_error(path: &Path) -> Option<String> {
    match open_log(path, true) {
        Err(StoreError::NotALog(_)) | Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// The path names nothing to open: missing, or under something that is not a folder.
fn is_absent(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{NotADirectory, NotFound};
    matches!(e.kind(), NotFound | NotADirectory)
}

/// `pieces_between` on `file`, opened from `path`, of `size` bytes (its metadata, read by the
/// caller: no second look).
#[allow(clippy::too_many_arguments)]
pub(crate) fn pieces_of(
    mut file: File,
    size: u64,
    path: &Path,
    start: u64,
    end: u64,
    lines_before: u64,
    max_line: usize,
    mut f: impl FnMut(Piece<'_>),
) -> Result<()> {
    if start > 0 {
        file.seek(SeekFrom::Start(start)).map_err(io_err(path))?;
    }
    let mut sp = Splitter::starting_at(max_line, start, lines_before);
    let len = size.min(end).saturating_sub(start);
    if len < SMALL {
        let buf = read_small(file, path, len)?;
        sp.push(&buf, &mut f);
        sp.finish(f);
        return Ok(());
    }
    let mut file = file.take(len);
    let mut buf = vec![0u8; CHUNK];
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

/// Logs with fewer bytes to read than this are read whole, in one buffer.
pub(crate) const SMALL: u64 = CHUNK as u64;

/// The next `len` bytes of `file` (fewer if it ends first), `len` under `SMALL`: a small log
/// (a run folder's) read whole into a buffer its size, not zeroed first (`export` and `serve`
/// read thousands of them).
pub(crate) fn read_small(file: File, path: &Path, len: u64) -> Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(len as usize + 1);
    file.take(len).read_to_end(&mut buf).map_err(io_err(path))?;
    Ok(buf)
}

/// Calls `f` with every event of the file in order, with its position and raw line.
/// Damaged lines are passed as `Err` with their kind (as replay names it) and the reason.
pub fn for_each_event(
    path: &Path,
    max_line: usize,
    mut f: impl FnMut(Pos, &[u8], std::result::Result<Event<'_>, (FindingKind, String)>),
) -> Result<()> {
    for_each_piece(path, 0, 0, max_line, |p| match p {
        Piece::Line(pos, raw) | Piece::Unterminated(pos, raw) => {
            let kind = damage_kind(matches!(p, Piece::Line(..)));
            match decode(raw) {
                LineText::Blank => {}
                LineText::Text(t) => f(pos, raw, parse_line(t).map_err(|e| (kind, e.to_string()))),
                LineText::NotUtf8(reason) => f(pos, raw, Err((kind, reason))),
            }
        }
        Piece::Oversize(pos, n) => f(pos, &[], Err((FindingKind::Oversize, oversize_reason(n)))),
    })
}
