//! `export otel`: logs folded through the span model by the store's fold driver, their spans
//! sent in batches.

use std::path::PathBuf;

use loopctl_core::{Finding, Replay};
use loopctl_store::discover::RunRef;
use loopctl_store::fold::fold_runs;
use loopctl_store::read::ReadOptions;

use super::model::OtelRuns;
use super::send::{SendError, Sender};

/// Spans per OTLP request.
pub const BATCH: usize = 512;
/// Logs folded at once (spread over the read threads), then sent.
const LOGS_AT_ONCE: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{0}")]
    Store(#[from] loopctl_store::StoreError),
    #[error(transparent)]
    Send(#[from] SendError),
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Exported {
    pub logs: usize,
    /// Runs whose spans were sent.
    pub runs: usize,
    pub spans: usize,
    /// (log, run id) of runs with no timestamp, which give no span.
    pub untimed: Vec<(PathBuf, String)>,
    /// Logs with no event.
    pub empty: Vec<PathBuf>,
}

/// Folds every log and sends its spans; `finding` hears of each finding about a log, as
/// `replay` finds them (damaged lines, torn tails, seq problems). Stops at the first failed
/// request (the collector's answer or its absence is the error).
pub fn export(
    logs: &[RunRef],
    opts: &ReadOptions,
    sender: &Sender,
    finding: &mut impl FnMut(&PathBuf, &Finding),
) -> Result<Exported, ExportError> {
    let mut done = Exported::default();
    for chunk in logs.chunks(LOGS_AT_ONCE) {
        let folded = fold_runs(chunk, opts, |r| {
            (OtelRuns::new(&r.name, &r.name), Replay::new(&r.name))
        });
        for (r, f) in chunk.iter().zip(folded) {
            let (runs, replay) = f?;
            if runs.run_count() == 0 {
                done.empty.push(r.log.clone());
            }
            for f in &replay.finish().findings {
                finding(&r.log, f);
            }
            let untimed: Vec<String> = runs.untimed().into_iter().map(str::to_string).collect();
            // Runs sent: a run with no timestamp gives no span (listed in `untimed`).
            done.runs += match &r.run_id {
                Some(id) => usize::from(!untimed.contains(id)),
                None => runs.run_count() - untimed.len(),
            };
            done.untimed
                .extend(untimed.into_iter().map(|id| (r.log.clone(), id)));
            // Run by run, a batch at a time: a large log's spans are never all in memory.
            let mut batch = Vec::with_capacity(BATCH);
            // A RUN naming one run of a log holding several: that run only.
            let chosen = |id: &String| r.run_id.as_ref().is_none_or(|want| want == id);
            for (_, run) in runs.into_runs().into_iter().filter(|(id, _)| chosen(id)) {
                batch.extend(run.spans());
                if batch.len() >= BATCH {
                    done.spans += batch.len();
                    sender.send(&batch)?;
                    batch.clear();
                }
            }
            done.spans += batch.len();
            sender.send(&batch)?;
            done.logs += 1;
        }
    }
    Ok(done)
}

/// The logs `specs` name, as the fold driver takes them: a path goes through
/// `textfile::logs` (a log file, a run folder, a root of run folders); anything else is a
/// run id or alias that `resolve` looks up.
pub fn runs<E: From<crate::textfile::ExportError>>(
    specs: &[String],
    mut resolve: impl FnMut(&str) -> Result<RunRef, E>,
) -> Result<Vec<RunRef>, E> {
    let mut out = Vec::new();
    for s in specs {
        let p = PathBuf::from(s);
        if p.exists() {
            for l in crate::textfile::logs(&[p])? {
                out.push(RunRef::file(&l.log));
            }
        } else {
            out.push(resolve(s)?);
        }
    }
    out.sort_by(|a, b| a.log.cmp(&b.log));
    out.dedup_by(|a, b| a.log == b.log);
    Ok(out)
}
