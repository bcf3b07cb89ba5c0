//! `run.json` written off the loop's path, on a thread of its own.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use loopctl_store::snapshot::write_atomic;

/// How long a burst of states is gathered into one write.
const SNAPSHOT_INTERVAL: Duration = Duration::from_millis(100);

/// Writes `run.json` off the loop's path: the latest state wins, each write atomic and
/// fsynced. The log is already durable when a state is sent, so a lost write costs nothing a
/// replay cannot rebuild.
pub(super) struct SnapshotWriter {
    tx: Option<std::sync::mpsc::Sender<String>>,
    handle: Option<std::thread::JoinHandle<Option<String>>>,
}

impl SnapshotWriter {
    pub(super) fn new(path: PathBuf) -> SnapshotWriter {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let handle = std::thread::spawn(move || {
            let mut error = None;
            while let Ok(mut text) = rx.recv() {
                // Coalesce: a burst of short phases costs one write per interval.
                let until = Instant::now() + SNAPSHOT_INTERVAL;
                while let Ok(newer) =
                    rx.recv_timeout(until.saturating_duration_since(Instant::now()))
                {
                    text = newer;
                }
                if let Err(e) = write_atomic(&path, &text) {
                    error = Some(e.to_string());
                }
            }
            error
        });
        SnapshotWriter {
            tx: Some(tx),
            handle: Some(handle),
        }
    }

    pub(super) fn send(&self, text: String) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(text);
        }
    }

    /// Waits for the last write; returns the last error, if any write failed.
    pub(super) fn flush(&mut self) -> Option<String> {
        self.tx.take();
        self.handle.take().and_then(|h| h.join().ok().flatten())
    }
}
