//! loopctl's storage edge: every byte on disk goes through here.
//!
//! Reading and replaying logs (`read`), `run.json` snapshots and recovery (`snapshot`),
//! appending events safely (`append`), and finding runs under a root (`discover`).

pub mod append;
pub mod discover;
pub mod read;
pub mod snapshot;

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
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
    move |source| StoreError::Io { path, source }
}
