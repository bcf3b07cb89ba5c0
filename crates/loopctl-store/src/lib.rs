//! loopctl's storage edge: every byte on disk goes through here.
//!
//! Reading and replaying logs (`read`), `run.json` snapshots and recovery (`snapshot`),
//! appending events safely (`append`), the wall clock (`clock`), finding runs under a root (`discover`), whether a root exists (`root`), and what
//! `clean` may delete (`clean`).

pub mod append;
pub mod clean;
pub mod clock;
pub mod discover;
pub mod fold;
pub mod read;
pub mod root;
pub mod snapshot;

use std::path::PathBuf;

/// Each message is whole: an I/O error's cause is part of the message and not also its
/// `source()`, which a `{:#}` chain would print a second time.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path} is locked by another writer (pid {pid})")]
    Locked { path: PathBuf, pid: String },
    #[error("{0}")]
    NotFound(String),
    /// A path taken for a log that names no regular file (`ReadOptions::regular_only`; a RUN
    /// written as a path that names a fifo, a socket or a device).
    #[error("{}: not a log file (not a regular file)", .0.display())]
    NotALog(PathBuf),
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
    /// A RUN argument several runs answer to.
    #[error("{}", ambiguous(spec, candidates))]
    Ambiguous {
        spec: String,
        candidates: Vec<discover::Candidate>,
    },
}

fn ambiguous(spec: &str, candidates: &[discover::Candidate]) -> String {
    let mut s = format!(
        "{spec:?} is ambiguous: {} runs answer to it; name one by its run id, or by its log (and --run-id, where the command takes it)",
        candidates.len()
    );
    const SHOWN: usize = 20;
    if candidates.len() > SHOWN {
        s += &format!(" (the first {SHOWN} below; `loopctl list` shows them all)");
    }
    for c in candidates.iter().take(SHOWN) {
        s += &format!("\n  {}  alias {}  {}", c.run_id, c.alias, c.log.display());
    }
    s
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A JSON file's bytes without a leading UTF-8 byte order mark (some Windows editors write
/// one; JSON parsers reject it as "expected value").
pub(crate) fn without_bom(b: &[u8]) -> &[u8] {
    b.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(b)
}

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.into();
    move |cause| {
        let cause = broken_link(&path, cause);
        StoreError::Io { path, cause }
    }
}

/// `cause`, said plainly when `path` is a symbolic link that leads nowhere: the system's
/// "No such file or directory" for a path that is there, or "Too many levels of symbolic
/// links", tell less than what the link is.
fn broken_link(path: &std::path::Path, cause: std::io::Error) -> std::io::Error {
    let Ok(target) = std::fs::read_link(path) else {
        return cause;
    };
    let what = if cause.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) {
        "a symbolic link loop"
    } else if cause.kind() == std::io::ErrorKind::NotFound {
        "a dangling symbolic link"
    } else {
        return cause;
    };
    std::io::Error::new(
        cause.kind(),
        format!("{what} (to {}): {cause}", target.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn an_io_error_names_its_cause_once() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = io_err("r/run.json")(denied);
        assert!(e.source().is_none());
        let msg = e.to_string();
        assert!(msg.starts_with("r/run.json: "), "{msg}");
        assert_eq!(msg.matches("ermission denied").count(), 1, "{msg}");
    }

    #[test]
    fn an_ambiguous_name_lists_at_most_twenty_candidates() {
        let candidates: Vec<discover::Candidate> = (0..25)
            .map(|i| discover::Candidate {
                run_id: format!("t-{i}"),
                alias: "t".into(),
                log: PathBuf::from(format!("r/t-{i}/history.jsonl")),
            })
            .collect();
        let text = StoreError::Ambiguous {
            spec: "t".into(),
            candidates,
        }
        .to_string();
        assert_eq!(text.lines().count(), 21, "{text}");
        assert!(
            text.contains("25 runs") && text.contains("loopctl list"),
            "{text}"
        );
    }
}
