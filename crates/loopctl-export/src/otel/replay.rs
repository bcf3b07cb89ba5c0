//! `export otel`: logs folded through the span model by the store's fold driver, their spans
//! sent in batches.

use std::path::PathBuf;

use loopctl_core::fold::{Damage, Line};
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
    pub runs: usize,
    pub spans: usize,
    /// (log, run id) of runs with no timestamp, which give no span.
    pub untimed: Vec<(PathBuf, String)>,
}

/// Folds every log and sends its spans; `damaged` hears of each line that is no event. Stops
/// at the first failed request (the collector's answer or its absence is the error).
pub fn export(
    logs: &[RunRef],
    opts: &ReadOptions,
    sender: &Sender,
    damaged: &mut impl FnMut(&PathBuf, &Line, &Damage),
) -> Result<Exported, ExportError> {
    let mut done = Exported::default();
    for chunk in logs.chunks(LOGS_AT_ONCE) {
        let folded = fold_runs(chunk, opts, |r| OtelRuns::new(&r.name));
        for (r, f) in chunk.iter().zip(folded) {
            let runs = f?;
            for (line, d) in runs.damaged() {
                damaged(&r.log, line, d);
            }
            let spans = runs.spans();
            for batch in spans.chunks(BATCH) {
                sender.send(batch)?;
            }
            done.logs += 1;
            done.runs += runs.run_count();
            done.spans += spans.len();
            let untimed = runs.untimed().into_iter();
            done.untimed
                .extend(untimed.map(|id| (r.log.clone(), id.to_string())));
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
