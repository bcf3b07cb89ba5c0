//! Appending events: the writer the runner uses.
//!
//! One `write` per newline-terminated event, an exclusive lock per log so two writers cannot
//! interleave, a torn tail repaired before the first append (its bytes kept in a side file), and
//! an fsync policy.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use loopctl_core::analysis::liveness::Liveness;
use loopctl_core::{Event, parse_line};

use crate::{Result, StoreError, io_err};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    /// fsync after every event: nothing acknowledged is ever lost.
    #[default]
    Always,
    /// Only when `sync` is called (the runner calls it at every phase boundary).
    Explicit,
}

/// What was done to the end of the log when it was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailRepair {
    /// The last line was a whole event without its newline; the newline was added.
    Terminated,
    /// The bytes after the last newline were not an event: moved to `side_file`, log truncated.
    Truncated {
        offset: u64,
        bytes: u64,
        side_file: PathBuf,
    },
}

pub struct LogWriter {
    path: PathBuf,
    file: File,
    _lock: File,
    next_seq: u64,
    fsync: Fsync,
    end: u64,
}

/// An event as it now stands in the log.
#[derive(Debug, Clone)]
pub struct Appended {
    pub event: Event<'static>,
    /// The line written, without its newline.
    pub line: String,
    /// Byte offset just past the line's newline.
    pub end: u64,
}

fn lock_path(log: &Path) -> PathBuf {
    let name = log
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    log.with_file_name(format!(".{name}.lock"))
}

/// The pid of the writer holding `log`'s lock, if one does. Changes nothing on disk.
pub fn holder(log: &Path) -> Option<String> {
    let mut lock = OpenOptions::new().read(true).open(lock_path(log)).ok()?;
    match lock.try_lock_shared() {
        Ok(()) => None,
        Err(TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = lock.read_to_string(&mut pid);
            Some(match pid.trim() {
                "" => "unknown".to_string(),
                p => p.to_string(),
            })
        }
        Err(TryLockError::Error(_)) => None,
    }
}

/// Is a runner writing `log`? A probe of its lock, not a pid guess: the kernel drops a
/// `flock` when its holder dies, however it died. `Alive` while a process holds the lock;
/// `Dead` when the lock file is there (a loopctl runner wrote this log) and nobody holds it;
/// `Unknown` with no lock file (aif-loop's agent, Avenor streams and bare files take none).
/// Changes nothing on disk.
pub fn liveness(log: &Path) -> Liveness {
    let Ok(lock) = OpenOptions::new().read(true).open(lock_path(log)) else {
        return Liveness::Unknown;
    };
    match lock.try_lock_shared() {
        Ok(()) => Liveness::Dead,
        Err(TryLockError::WouldBlock) => Liveness::Alive,
        Err(TryLockError::Error(_)) => Liveness::Unknown,
    }
}

impl LogWriter {
    /// Opens `log` for appending, creating it if needed. `next_seq` is the seq the next event
    /// gets (last seq of the run + 1, from a replay). Fails with `Locked` naming the holder's
    /// pid when another writer has it.
    pub fn open(
        log: &Path,
        next_seq: u64,
        fsync: Fsync,
    ) -> Result<(LogWriter, Option<TailRepair>)> {
        let lp = lock_path(log);
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lp)
            .map_err(io_err(&lp))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = lock.read_to_string(&mut pid);
                let pid = pid.trim().to_string();
                return Err(StoreError::Locked {
                    path: log.to_path_buf(),
                    pid: if pid.is_empty() {
                        "unknown".into()
                    } else {
                        pid
                    },
                });
            }
            Err(TryLockError::Error(e)) => return Err(io_err(&lp)(e)),
        }
        lock.set_len(0).map_err(io_err(&lp))?;
        lock.write_all(format!("{}\n", std::process::id()).as_bytes())
            .map_err(io_err(&lp))?;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(log)
            .map_err(io_err(log))?;
        let repair = repair_tail(log, &mut file)?;
        let end = file.metadata().map_err(io_err(log))?.len();
        Ok((
            LogWriter {
                path: log.to_path_buf(),
                file,
                _lock: lock,
                next_seq,
                fsync,
                end,
            },
            repair,
        ))
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Sets the seq of the next event: a writer opened (locked, tail repaired) before the log
    /// was replayed learns it afterwards, without letting go of the lock in between.
    pub fn set_next_seq(&mut self, seq: u64) {
        self.next_seq = seq;
    }

    /// Byte size of the log: where the next line will start.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Appends one event with the next seq, in one `write`; returns it as written.
    pub fn append(&mut self, ev: &Event<'_>) -> Result<Appended> {
        let mut ev = ev.clone().into_owned();
        ev.seq = Some(self.next_seq);
        let mut line = ev.to_native_line();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(io_err(&self.path))?;
        if self.fsync == Fsync::Always {
            self.sync()?;
        }
        self.next_seq += 1;
        self.end += line.len() as u64;
        line.pop();
        Ok(Appended {
            event: ev,
            line,
            end: self.end,
        })
    }

    pub fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(io_err(&self.path))
    }
}

/// Makes the log end with a newline: completes a whole last event, or moves torn bytes aside.
fn repair_tail(log: &Path, file: &mut File) -> Result<Option<TailRepair>> {
    let size = file.metadata().map_err(io_err(log))?.len();
    if size == 0 {
        return Ok(None);
    }
    // Find the last newline, reading backwards in blocks.
    let mut end = size;
    let mut tail_start = 0;
    let mut buf = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start)).map_err(io_err(log))?;
        file.read_exact(&mut buf[..n]).map_err(io_err(log))?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            tail_start = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    if tail_start == size {
        return Ok(None);
    }
    let mut tail = vec![0u8; (size - tail_start) as usize];
    file.seek(SeekFrom::Start(tail_start))
        .map_err(io_err(log))?;
    file.read_exact(&mut tail).map_err(io_err(log))?;
    // As every reader reads a line (a byte order mark, a CR dropped).
    let text = loopctl_core::decode::lines::decode(&tail).text();
    if text.is_some_and(|t| parse_line(t).is_ok()) {
        file.write_all(b"\n").map_err(io_err(log))?;
        file.sync_data().map_err(io_err(log))?;
        return Ok(Some(TailRepair::Terminated));
    }
    let side = PathBuf::from(format!("{}.torn-{tail_start}", log.display()));
    let mut f = File::create(&side).map_err(io_err(&side))?;
    f.write_all(&tail)
        .and_then(|_| f.sync_all())
        .map_err(io_err(&side))?;
    file.set_len(tail_start).map_err(io_err(log))?;
    file.sync_all().map_err(io_err(log))?;
    Ok(Some(TailRepair::Truncated {
        offset: tail_start,
        bytes: tail.len() as u64,
        side_file: side,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopctl_core::Kind;

    #[test]
    fn torn_tail_is_moved_aside_and_whole_tail_terminated() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("history.jsonl");
        let first = "{\"v\":1,\"seq\":1,\"run_id\":\"r\",\"event\":\"run_started\"}\n";
        std::fs::write(&log, format!("{first}{{\"v\":1,\"seq\":2,\"ev")).unwrap();
        let (mut w, repair) = LogWriter::open(&log, 2, Fsync::Always).unwrap();
        let Some(TailRepair::Truncated {
            side_file,
            bytes,
            offset,
        }) = repair
        else {
            panic!("{repair:?}")
        };
        assert_eq!(
            (bytes, std::fs::read_to_string(&side_file).unwrap().as_str()),
            (18, "{\"v\":1,\"seq\":2,\"ev")
        );
        assert_eq!(offset, first.len() as u64);
        w.append(&Event {
            run_id: Some("r".into()),
            ..Event::new(Kind::Stopped)
        })
        .unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().nth(1).unwrap().contains("\"seq\":2"));
        drop(w);

        std::fs::write(&log, "{\"event\":\"x\"}").unwrap();
        let (_w, repair) = LogWriter::open(&log, 1, Fsync::Explicit).unwrap();
        assert_eq!(repair, Some(TailRepair::Terminated));
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "{\"event\":\"x\"}\n"
        );
        drop(_w);

        // An event after a byte order mark (two logs joined) is an event, as readers read it.
        let joined = "{\"event\":\"x\"}\n\u{feff}{\"event\":\"y\"}\r";
        std::fs::write(&log, joined).unwrap();
        let (_w, repair) = LogWriter::open(&log, 1, Fsync::Explicit).unwrap();
        assert_eq!(repair, Some(TailRepair::Terminated));
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            format!("{joined}\n")
        );
    }

    #[test]
    fn second_writer_is_refused_with_the_holders_pid() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("history.jsonl");
        let (_w, _) = LogWriter::open(&log, 1, Fsync::Always).unwrap();
        match LogWriter::open(&log, 1, Fsync::Always) {
            Err(StoreError::Locked { pid, .. }) => assert_eq!(pid, std::process::id().to_string()),
            other => panic!("expected Locked, got {:?}", other.err()),
        }
        assert_eq!(holder(&log), Some(std::process::id().to_string()));
        drop(_w);
        assert_eq!(holder(&log), None);
    }

    #[test]
    fn liveness_is_the_lock_held_let_go_or_never_taken() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("history.jsonl");
        std::fs::write(&log, "").unwrap();
        assert_eq!(liveness(&log), Liveness::Unknown);
        let (w, _) = LogWriter::open(&log, 1, Fsync::Always).unwrap();
        assert_eq!(liveness(&log), Liveness::Alive);
        drop(w);
        assert_eq!(liveness(&log), Liveness::Dead);
    }
}
