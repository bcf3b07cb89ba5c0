//! loopctl's storage edge: every byte on disk goes through here.
//!
//! Reading and replaying logs (`read`), `run.json` snapshots and recovery (`snapshot`),
//! appending events safely (`append`), and finding runs under a root (`discover`).

pub mod append;
pub mod discover;
pub mod fold;
pub mod read;
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
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

pub type Result<T> = std::result::Result<T, StoreError>;

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.into();
    move |cause| StoreError::Io { path, cause }
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
}
