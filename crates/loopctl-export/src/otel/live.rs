//! The runner's live export: each event the runner writes goes through the same span model
//! as `export otel` of the log, and a span is sent when it ends (a phase at its
//! `phase_finished`, the session's root when the run ends). Sending happens on a thread of
//! its own, so an unreachable or slow collector never holds up the loop; its first failure is
//! reported once.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use loopctl_core::Event;
use loopctl_store::fold::fold_file;
use loopctl_store::read::ReadOptions;

use super::config::Config;
use super::ids::SpanId;
use super::model::{OtelRuns, RunSpans, Span};
use super::send::{SendError, Sender};

/// How long a finished run waits for the collector to take its last spans.
pub const FLUSH_WAIT: Duration = Duration::from_secs(2);

pub struct Live {
    run: RunSpans,
    sent: HashSet<SpanId>,
    tx: mpsc::Sender<Vec<Span>>,
    done: mpsc::Receiver<()>,
    url: String,
    warn: Box<dyn Fn(&str) + Send + Sync>,
    /// One warning per run, whoever meets the trouble first.
    warned: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Send(#[from] SendError),
    #[error(transparent)]
    Store(#[from] loopctl_store::StoreError),
}

impl Live {
    /// Starts the live export of run `run_id`, whose log `log` holds what the runner wrote so
    /// far (its `run_started`, or the earlier sessions and this `run_resumed`): spans that
    /// ended before this session are taken as sent by the session that ended them.
    pub fn attach(
        cfg: &Config,
        log: &Path,
        run_id: &str,
        max_line: usize,
        warn: impl Fn(&str) + Send + Sync + Clone + 'static,
    ) -> Result<Live, LiveError> {
        let sender = Sender::new(cfg)?;
        let opts = ReadOptions {
            max_line,
            default_run: run_id.to_string(),
            threads: 1,
            ..ReadOptions::default()
        };
        let name = loopctl_store::discover::RunRef::file(log).name;
        let run = fold_file(log, &opts, OtelRuns::new(run_id, &name))?
            .into_runs()
            .remove(run_id)
            .unwrap_or_else(|| RunSpans::new(run_id, &name));
        let sent = run
            .current_session()
            .map(|i| run.ended_before(i))
            .unwrap_or_default()
            .into_iter()
            .collect();
        let (tx, rx) = mpsc::channel::<Vec<Span>>();
        let (done_tx, done) = mpsc::channel();
        let url = sender.url().to_string();
        let w = warn.clone();
        let warned = Arc::new(AtomicBool::new(false));
        let once = warned.clone();
        std::thread::Builder::new()
            .name("otel-live".into())
            .spawn(move || {
                for batch in rx {
                    if let Err(e) = sender.send(&batch)
                        && !once.swap(true, Ordering::Relaxed)
                    {
                        w(&format!("otel: {e}; the loop goes on without its trace"));
                    }
                }
                let _ = done_tx.send(());
            })
            .map_err(|e| SendError::Endpoint {
                url: url.clone(),
                reason: format!("cannot start the sending thread: {e}"),
            })?;
        let mut live = Live {
            run,
            sent,
            tx,
            done,
            url,
            warn: Box::new(warn),
            warned,
        };
        // Phases this session already ended (none, unless the log was written ahead).
        let spans = live.run.spans();
        live.queue(spans.into_iter().filter(|s| s.parent.is_some()).collect());
        Ok(live)
    }

    fn queue(&mut self, spans: Vec<Span>) {
        let fresh: Vec<Span> = spans
            .into_iter()
            .filter(|s| self.sent.insert(s.span_id))
            .collect();
        if !fresh.is_empty() {
            // The thread only ends after `tx` is dropped.
            let _ = self.tx.send(fresh);
        }
    }

    /// One event the runner wrote (as a replay reads it).
    pub fn event(&mut self, ev: &Event<'_>) {
        self.run.apply(ev);
        let ended = self.run.finished_phases();
        self.queue(ended);
    }

    /// Sends what is left (the session's root, phases still open) and waits up to `wait` for
    /// the collector; what it has not taken by then is dropped, with one warning.
    pub fn finish(mut self, wait: Duration) {
        let rest = self.run.spans();
        self.queue(rest);
        let Live {
            tx,
            done,
            url,
            warn,
            warned,
            ..
        } = self;
        drop(tx);
        if done.recv_timeout(wait).is_err() && !warned.swap(true, Ordering::Relaxed) {
            warn(&format!(
                "otel: {url} did not take the run's spans within {}; they are dropped",
                humantime_secs(wait)
            ));
        }
    }
}

fn humantime_secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}
