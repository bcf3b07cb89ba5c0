//! Following growing log files, as `tail -F` does: filesystem notifications (notify) with a
//! polling fallback, partial lines held until their newline arrives, truncation and replacement
//! (rotation, `recover`) detected and followed from the new start, deleted files reported.
//!
//! Bytes in, complete lines out: what a line means is the caller's business.

use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};

/// What a followed file produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A complete line (without its newline), its 1-based number and byte offset.
    Line {
        source: usize,
        line: u64,
        offset: u64,
        text: Vec<u8>,
    },
    /// Something a person should know: truncation, replacement, deletion.
    Notice { source: usize, text: String },
    /// The file is gone; the source is dropped.
    Gone { source: usize },
    /// The file no longer holds what was read (truncated, rewritten, replaced): its lines come
    /// again from its start, and whatever was made of the lines read before is void (a log
    /// emptied gives no line to say so).
    Restarted { source: usize },
}

/// Where to start reading a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Beginning,
    End,
    /// Byte offset of a line start (from `tail_offset`); the lines after it are not numbered.
    At(u64),
    /// Byte offset of a line start, the lines before it counted (once, when the file first has
    /// bytes past it to read) so that the lines after it keep their numbers: for a caller that
    /// read the file up to there itself and reports lines by number (`serve`).
    Numbered(u64),
    /// Byte offset of a line start with the number of lines before it, known to the caller
    /// (`tail -n`): lines are numbered from there.
    Line {
        offset: u64,
        before: u64,
    },
}

struct Source {
    path: PathBuf,
    file: Option<File>,
    id: (u64, u64),
    offset: u64,
    line: u64,
    partial: Vec<u8>,
    /// Line numbers are unknown after starting mid-file (`Start::At`).
    numbered: bool,
    /// `Start::Numbered`: the lines before `offset` are still to be counted.
    count_before: bool,
    gone: bool,
    /// The last bytes read (up to `TAIL_MARK`) and the modification time at the last look: a
    /// file rewritten in place to the same or a larger size (truncated, then written again
    /// between two looks) no longer has them before `offset`. Checked when the time moves
    /// (file times are coarse: a same-size rewrite within one clock tick goes unseen).
    mark: Vec<u8>,
    /// The first bytes of the file (up to `TAIL_MARK`, none past the last whole line read): a
    /// rewrite of the same size that keeps the last bytes (a name changed on every line)
    /// changes them. Compared length for length.
    head: Vec<u8>,
    modified: Option<std::time::SystemTime>,
    /// The (up to `TAIL_MARK`) bytes before the end of the last whole line read: what a
    /// writer that cuts or rewrites only the unfinished line after it leaves in place.
    whole_mark: Vec<u8>,
}

/// Bytes kept to tell a file rewritten in place from one appended to.
const TAIL_MARK: usize = 64;

pub struct Follower {
    sources: Vec<Source>,
    /// `None` where notifications are unavailable: then polling alone.
    watcher: Option<RecommendedWatcher>,
    wake: Receiver<()>,
    /// Sends on `wake`: kept for `watch_stdout`'s thread.
    waker: Sender<()>,
    stdout_closed: Arc<AtomicBool>,
    /// Folders watched (recursively): a folder under one of them needs no watch of its own.
    watched: HashSet<PathBuf>,
    /// Folders of logs given as files, watched without their subfolders: a log in a home
    /// folder must not set a watch on every folder under it.
    flat: HashSet<PathBuf>,
    pub poll: Duration,
}

impl Default for Follower {
    fn default() -> Self {
        Follower::new(Duration::from_millis(250))
    }
}

fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

impl Follower {
    /// `poll` is how often files are checked when no notification arrives.
    pub fn new(poll: Duration) -> Follower {
        let (tx, rx) = channel();
        let waker = tx.clone();
        let watcher = notify::recommended_watcher(move |_res: notify::Result<notify::Event>| {
            let _ = tx.send(());
        })
        .ok();
        Follower {
            sources: Vec::new(),
            watcher,
            wake: rx,
            waker,
            stdout_closed: Arc::new(AtomicBool::new(false)),
            watched: HashSet::new(),
            flat: HashSet::new(),
            poll,
        }
    }

    /// A follower that reads what is there and watches nothing (for a single look: setting up
    /// notifications for thousands of folders costs more than reading them).
    pub fn without_notifications(poll: Duration) -> Follower {
        let (waker, rx) = channel();
        Follower {
            sources: Vec::new(),
            watcher: None,
            wake: rx,
            waker,
            stdout_closed: Arc::new(AtomicBool::new(false)),
            watched: HashSet::new(),
            flat: HashSet::new(),
            poll,
        }
    }

    /// Watches a folder (recursively) for changes, to wake up early.
    pub fn watch(&mut self, dir: &Path) {
        // A look-up per ancestor, not a scan of every watched folder: a root can hold
        // thousands of run folders.
        if dir.ancestors().any(|a| self.watched.contains(a)) {
            return;
        }
        if let Some(w) = self.watcher.as_mut()
            && w.watch(dir, RecursiveMode::Recursive).is_ok()
        {
            self.watched.insert(dir.to_path_buf());
        }
    }

    /// Adds a file and watches its folder; returns its source index.
    pub fn add(&mut self, path: &Path, start: Start) -> usize {
        let i = self.add_unwatched(path, start);
        self.watch_folder_of(path);
        i
    }

    /// Adds a file without watching its folder (`watch_folder_of` later): a caller adding
    /// thousands of files watches once they are open, so that opening and reading them raises
    /// no notifications for the watcher to handle. Returns its source index.
    pub fn add_unwatched(&mut self, path: &Path, start: Start) -> usize {
        let mut s = Source {
            path: path.to_path_buf(),
            file: None,
            id: (0, 0),
            offset: 0,
            line: 0,
            partial: Vec::new(),
            numbered: true,
            count_before: false,
            gone: false,
            mark: Vec::new(),
            head: Vec::new(),
            whole_mark: Vec::new(),
            modified: None,
        };
        if let Ok(f) = File::open(path)
            && let Ok(m) = f.metadata()
        {
            s.id = file_id(&m);
            s.offset = match start {
                Start::Beginning => 0,
                Start::End => m.len(),
                Start::At(o) | Start::Numbered(o) => o.min(m.len()),
                Start::Line { offset, .. } => offset.min(m.len()),
            };
            s.numbered = s.offset == 0;
            s.count_before = !s.numbered && matches!(start, Start::Numbered(_));
            if let Start::Line { offset, before } = start
                && offset == s.offset
            {
                s.line = before;
                s.numbered = true;
            }
            s.modified = m.modified().ok();
            s.file = Some(f);
            if let Some(f) = s.file.as_mut() {
                s.mark = mark_before(f, s.offset).unwrap_or_default();
                s.head = head_before(f, s.offset).unwrap_or_default();
            }
        }
        self.sources.push(s);
        self.sources.len() - 1
    }

    /// The (device, inode) of the file `source` last had open, if it had one.
    pub fn file_id(&self, source: usize) -> Option<(u64, u64)> {
        self.sources
            .get(source)
            .filter(|s| s.id != (0, 0))
            .map(|s| s.id)
    }

    /// The sources whose last open file is (device, inode) `id`.
    pub fn sources_of(&self, id: (u64, u64)) -> impl Iterator<Item = usize> + '_ {
        (0..self.sources.len()).filter(move |&i| !self.sources[i].gone && self.sources[i].id == id)
    }

    /// Whether the file at `path` holds what was read of `source`, as its first bytes and the
    /// bytes before its offset tell: `source`'s file moved there (an inode number alone may have
    /// been reused).
    pub fn holds_read(&self, source: usize, path: &Path) -> bool {
        let Some(s) = self.sources.get(source) else {
            return false;
        };
        let Ok(mut f) = File::open(path) else {
            return false;
        };
        f.metadata().is_ok_and(|m| m.len() >= s.offset) && holds_marks(&mut f, s) == Some(true)
    }

    /// Whether the file of `source` is open (it was there when added, or has appeared since).
    pub fn is_open(&self, source: usize) -> bool {
        self.sources.get(source).is_some_and(|s| s.file.is_some())
    }

    /// Stops following `source` for good (its caller takes it as gone): its file, if open, is
    /// closed, and a file appearing at its path later is not read for it.
    pub fn forget(&mut self, source: usize) {
        if let Some(s) = self.sources.get_mut(source) {
            s.file = None;
            s.partial = Vec::new();
            s.mark = Vec::new();
            s.head = Vec::new();
            s.whole_mark = Vec::new();
            s.gone = true;
        }
    }

    /// Watches the folder holding `path`, not its subfolders (nothing new when a folder
    /// watched recursively holds it).
    pub fn watch_folder_of(&mut self, path: &Path) {
        let Some(dir) = path.parent() else {
            return;
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if self.flat.contains(dir) || dir.ancestors().any(|a| self.watched.contains(a)) {
            return;
        }
        if let Some(w) = self.watcher.as_mut()
            && w.watch(dir, RecursiveMode::NonRecursive).is_ok()
        {
            self.flat.insert(dir.to_path_buf());
        }
    }

    pub fn live_sources(&self) -> usize {
        self.sources.iter().filter(|s| !s.gone).count()
    }

    /// Reads whatever is new in every file.
    pub fn poll(&mut self, out: &mut impl FnMut(Item)) {
        for i in 0..self.sources.len() {
            if !self.sources[i].gone {
                read_source(i, &mut self.sources[i], out);
            }
        }
    }

    /// The bytes after the last newline of each file, held until a newline ends them, as
    /// `Item::Line`s (though nothing ended them): for a single look (`tail --no-follow`),
    /// where they are the log's last line, complete or torn.
    pub fn unterminated(&self) -> Vec<Item> {
        self.sources
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.gone && !s.partial.is_empty())
            .map(|(i, s)| Item::Line {
                source: i,
                line: if s.numbered { s.line + 1 } else { 0 },
                offset: s.offset - s.partial.len() as u64,
                text: s.partial.clone(),
            })
            .collect()
    }

    /// Watches this process's stdout from a thread: when its reader goes away (the read end of
    /// a pipe closed, a socket or terminal hung up), `stdout_closed` turns true and `wait`
    /// returns at once, so a follower piped into `head -1` ends while it has nothing to write.
    /// `poll` with no requested events reports only POLLERR/POLLHUP/POLLNVAL, which Linux
    /// raises on a pipe's write end once no reader is left; on a regular file or /dev/null
    /// nothing ever arrives and the thread just sleeps.
    pub fn watch_stdout(&self) {
        let closed = Arc::clone(&self.stdout_closed);
        let waker = self.waker.clone();
        std::thread::spawn(move || {
            let stdout = std::io::stdout();
            let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
            loop {
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(n) if n > 0 && fds[0].revents().is_some_and(|r| !r.is_empty()) => break,
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(_) => return,
                }
            }
            closed.store(true, Ordering::SeqCst);
            let _ = waker.send(());
        });
    }

    /// Whether `watch_stdout` saw stdout's reader go away.
    pub fn stdout_closed(&self) -> bool {
        self.stdout_closed.load(Ordering::SeqCst)
    }

    /// Sleeps until a notification arrives or the poll interval passes.
    pub fn wait(&self) {
        match self.wake.recv_timeout(self.poll) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(self.poll),
        }
        // Drain a burst of notifications: one read serves them all.
        while self.wake.try_recv().is_ok() {}
    }
}

fn read_source(i: usize, s: &mut Source, out: &mut impl FnMut(Item)) {
    let meta = match std::fs::metadata(&s.path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if s.file.is_some() {
                // Closed now: a deleted or moved log kept open holds its disk space and a
                // descriptor for as long as the follower runs. A partial line of a deleted
                // file never completes: it goes with the file.
                // Its mark stays: `holds_read` asks whether a file found elsewhere is this one.
                s.file = None;
                s.partial = Vec::new();
                out(Item::Notice {
                    source: i,
                    text: format!("{} was deleted", s.path.display()),
                });
                out(Item::Gone { source: i });
                s.gone = true;
            }
            return;
        }
        Err(_) => return,
    };
    let id = file_id(&meta);
    if s.file.is_none() || id != s.id {
        let replaced = s.file.is_some();
        let Ok(mut f) = File::open(&s.path) else {
            return;
        };
        // Replaced by a file that holds what was read (an editor's save, `sed -i`, a copy
        // moved over it), as the bytes before the offset tell (the in-place test below):
        // followed on, as an append, rather than read again from its start.
        let holds_read = replaced
            && s.offset > 0
            && meta.len() >= s.offset
            && holds_marks(&mut f, s) == Some(true);
        if holds_read {
            out(Item::Notice {
                source: i,
                text: format!(
                    "{} was replaced by a file holding what was read; following it on from \
                     byte {}",
                    s.path.display(),
                    s.offset
                ),
            });
        } else {
            if replaced {
                out(Item::Notice {
                    source: i,
                    text: format!(
                        "{} was replaced; following the new file from its start",
                        s.path.display()
                    ),
                });
                out(Item::Restarted { source: i });
            }
            s.restart();
        }
        s.file = Some(f);
        s.id = id;
    } else if (meta.len() < s.offset || meta.modified().ok() != s.modified)
        && s.unfinished_line_rewritten()
    {
        out(Item::Notice {
            source: i,
            text: format!(
                "{}: its unfinished last line was cut or rewritten; following it on",
                s.path.display()
            ),
        });
    } else if meta.len() < s.offset {
        out(Item::Notice {
            source: i,
            text: format!(
                "{} was truncated ({} -> {} bytes); following it from its start",
                s.path.display(),
                s.offset,
                meta.len()
            ),
        });
        out(Item::Restarted { source: i });
        s.restart();
    } else if meta.modified().ok() != s.modified
        && let Some(f) = s.file.as_ref()
        && holds_marks(&mut &*f, s) == Some(false)
    {
        out(Item::Notice {
            source: i,
            text: format!(
                "{} was rewritten in place; following it from its start",
                s.path.display()
            ),
        });
        out(Item::Restarted { source: i });
        s.restart();
    }
    s.modified = meta.modified().ok();
    let Some(f) = s.file.as_mut() else { return };
    if meta.len() == s.offset {
        return;
    }
    if s.count_before {
        // Counted only now: most logs a server follows never grow again.
        s.count_before = false;
        if let Some(n) = lines_before(f, s.offset) {
            s.line = n;
            s.numbered = true;
        }
    }
    if f.seek(SeekFrom::Start(s.offset)).is_err() {
        return;
    }
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut rest = &buf[..n];
        // Start of `partial` in the file.
        let mut line_start = s.offset - s.partial.len() as u64;
        // What `whole_mark` is made of if a line ends in this read: its end, after the bytes
        // of the line begun before it (the last `TAIL_MARK` of them matter).
        let begun = &s.partial[s.partial.len().saturating_sub(TAIL_MARK)..];
        let whole_before = if s.partial.len() >= TAIL_MARK {
            begun.to_vec()
        } else {
            [&s.whole_mark[..], begun].concat()
        };
        s.offset += n as u64;
        while let Some(j) = memchr::memchr(b'\n', rest) {
            let text = if s.partial.is_empty() {
                rest[..j].to_vec()
            } else {
                let mut t = std::mem::take(&mut s.partial);
                t.extend_from_slice(&rest[..j]);
                t
            };
            s.line += 1;
            let len = text.len() as u64;
            out(Item::Line {
                source: i,
                line: if s.numbered { s.line } else { 0 },
                offset: line_start,
                text,
            });
            line_start += len + 1;
            rest = &rest[j + 1..];
        }
        let ended = n - rest.len();
        if ended > 0 {
            let mut w = whole_before;
            w.extend_from_slice(&buf[..ended]);
            w.drain(..w.len().saturating_sub(TAIL_MARK));
            s.whole_mark = w;
        }
        s.partial.extend_from_slice(rest);
        let keep = TAIL_MARK.saturating_sub(n).min(s.mark.len());
        s.mark.drain(..s.mark.len() - keep);
        s.mark
            .extend_from_slice(&buf[n.saturating_sub(TAIL_MARK)..n]);
    }
    // Until the file's first `TAIL_MARK` bytes are whole lines read: then the head is whole.
    let whole = s.offset - s.partial.len() as u64;
    if s.head.len() < TAIL_MARK
        && (s.head.len() as u64) < whole
        && let Some(f) = s.file.as_mut()
    {
        s.head = head_before(f, whole).unwrap_or_default();
    }
}

impl Source {
    /// Whether the file still holds, byte for byte, what was read up to the end of the last
    /// whole line, while the unfinished line read after it is no longer what was read (cut,
    /// or rewritten: a writer repairing a torn line, as `resume` does). Then the follower
    /// goes back to that line's start and reads it afresh: no whole line is given twice.
    fn unfinished_line_rewritten(&mut self) -> bool {
        if self.partial.is_empty() {
            return false;
        }
        let whole = self.offset - self.partial.len() as u64;
        let Some(f) = self.file.as_mut() else {
            return false;
        };
        // Whole lines were read before it, and the mark of them is complete (not a start
        // mid-file with none read since).
        let known = whole == 0 || self.whole_mark.len() == TAIL_MARK.min(whole as usize);
        if !known || mark_before(f, whole).is_none_or(|m| m != self.whole_mark) {
            return false;
        }
        if mark_before(f, self.offset).is_some_and(|m| m == self.mark) {
            // Still what was read: only appended to.
            return false;
        }
        if f.seek(SeekFrom::Start(whole)).is_err() {
            return false;
        }
        self.offset = whole;
        self.partial.clear();
        self.mark = self.whole_mark.clone();
        true
    }

    /// Follows the file again from its start.
    fn restart(&mut self) {
        self.offset = 0;
        self.line = 0;
        self.numbered = true;
        self.count_before = false;
        self.partial.clear();
        self.mark.clear();
        self.head.clear();
        self.whole_mark.clear();
    }
}

/// The newlines in the first `offset` bytes of `f`; `None` if they cannot be read.
fn lines_before(f: &mut File, offset: u64) -> Option<u64> {
    f.seek(SeekFrom::Start(0)).ok()?;
    let mut left = offset;
    let mut n = 0u64;
    let mut buf = vec![0u8; 256 << 10];
    while left > 0 {
        let want = buf.len().min(left as usize);
        let got = match f.read(&mut buf[..want]) {
            Ok(0) => return None,
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        n += memchr::memchr_iter(b'\n', &buf[..got]).count() as u64;
        left -= got as u64;
    }
    Some(n)
}

/// Whether `f` holds, at their places, the first and the last bytes read of `s` (`head`,
/// `mark`); `None` if they cannot be read.
fn holds_marks(f: &mut (impl Read + Seek), s: &Source) -> Option<bool> {
    let last = mark_before(f, s.offset)?;
    let first = head_before(f, s.head.len() as u64)?;
    Some(last == s.mark && first == s.head)
}

/// The file's first bytes, up to `TAIL_MARK` and not past `end`; `None` if they cannot be
/// read.
fn head_before(f: &mut (impl Read + Seek), end: u64) -> Option<Vec<u8>> {
    mark_before(f, end.min(TAIL_MARK as u64))
}

/// The (up to) `TAIL_MARK` bytes before `offset`; `None` if they cannot be read.
fn mark_before(f: &mut (impl Read + Seek), offset: u64) -> Option<Vec<u8>> {
    let start = offset.saturating_sub(TAIL_MARK as u64);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut mark = vec![0u8; (offset - start) as usize];
    f.read_exact(&mut mark).ok()?;
    Some(mark)
}

/// Byte offset where the last `n` lines accepted by `keep` begin, reading backwards from the end
/// in blocks, so the cost grows with `n`, not with the file.
pub fn tail_offset(path: &Path, n: usize, keep: impl Fn(&[u8]) -> bool) -> std::io::Result<u64> {
    let mut f = File::open(path)?;
    let size = f.metadata()?.len();
    if n == 0 {
        return Ok(size);
    }
    const BLOCK: u64 = 64 << 10;
    let mut end = size;
    // Bytes of the line currently being assembled, in file order.
    let mut carry: Vec<u8> = Vec::new();
    let mut found = 0;
    // An unterminated last line is not counted: it is a partial write.
    let mut line_end = size;
    let mut first = true;
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let mut buf = vec![0u8; (end - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut buf)?;
        let mut upto = buf.len();
        while let Some(j) = memchr::memrchr(b'\n', &buf[..upto]) {
            let pos = start + j as u64;
            if first {
                first = false;
                line_end = pos;
                upto = j;
                carry.clear();
                continue;
            }
            let mut line = buf[j + 1..upto].to_vec();
            line.extend_from_slice(&carry);
            carry.clear();
            if line_end > pos && keep(&line) {
                found += 1;
                if found == n {
                    return Ok(pos + 1);
                }
            }
            line_end = pos;
            upto = j;
        }
        let mut c = buf[..upto].to_vec();
        c.extend_from_slice(&carry);
        carry = c;
        if first && start == 0 {
            // No newline at all: nothing complete.
            return Ok(0);
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests;
