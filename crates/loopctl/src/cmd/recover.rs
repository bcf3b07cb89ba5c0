use std::path::Path;

use clap::Args as ClapArgs;
use loopctl_store::discover::RunRef;
use loopctl_store::snapshot::{Prior, Rebuilt, keep_aside, write_atomic};
use serde_json::json;

use super::Ctx;
use crate::{exit, output};

/// Rewrite run.json from the log, keeping a damaged or disagreeing run.json beside it.
///
/// Where the state goes: a run folder's run.json, or NAME.run.json beside a bare log NAME.jsonl.
/// A state file belongs to one run. In a log holding several runs (pick one with a run id as
/// RUN, or --run-id), run.json stays the state of the run it names and each other run gets its
/// own file beside it: RUN_ID.run.json in a run folder, NAME.RUN_ID.run.json beside a bare
/// log. Recovering one run never touches another run's state file.
///
/// The whole log is replayed. Fields the log cannot supply (task, criteria, max_iterations of
/// an aif-loop run without run_started) are salvaged from the old run.json where it can be read,
/// and the report says where each came from. An old file that does not parse or does not agree
/// with the log is copied to run.json.damaged (.damaged.2, ...) before the new one replaces it
/// atomically; one another tool wrote that agrees with the log is left as it is.
///
/// Under --strict, a finding (a damaged line, a seq problem, a torn tail, a run.json that
/// cannot be read) makes recover write nothing: it says what it would write and exits 1.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl recover examples/damaged-run --dry-run   # what would change, nothing written\n  loopctl recover examples/damaged-run             # rebuild run.json from the log"
)]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    /// Say what would be written without writing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as one JSON object: findings, where each salvaged field came from,
    /// how run.json differed, and where the damaged file was kept.
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let run = ctx.target(&a.target)?;
    let rebuilt = ctx.rebuild(&run, false)?;
    let mut code = ctx.report_findings(&run, &rebuilt);
    let runs = rebuilt.outcome.runs.len();
    if runs > 1 && run.run_id.is_none() {
        anyhow::bail!(
            "{} holds {runs} runs; pass --run-id ID to recover one (see `loopctl replay {}`)",
            run.log.display(),
            run.log.display()
        );
    }
    let target = rebuilt
        .state_path
        .clone()
        .unwrap_or_else(|| run.log.with_extension("run.json"));
    let Some(text) = rebuilt.run_json() else {
        if a.json {
            // Nothing to write: the report says so (docs/json.md).
            output::json_pretty(&report(&run, &target, false, None, &rebuilt));
        }
        return Ok(super::no_event(&run.log));
    };
    let old = std::fs::read(&target).ok();
    let unchanged = old.as_deref() == Some(text.as_bytes()) || rebuilt.run_json_kept();
    // --strict refuses before writing: a finding in the log, or a run.json that cannot be read.
    let refused = ctx.strict
        && (code != exit::OK || matches!(rebuilt.prior, Prior::Damaged | Prior::Unreadable));
    let dry_run = a.dry_run || refused;
    let mut kept = None;
    if !dry_run && !unchanged {
        // A folder in its place is left for write_atomic to refuse, naming it.
        let unreadable = old.is_none() && rebuilt.prior == Prior::Unreadable && !target.is_dir();
        if (old.is_some() && rebuilt.keeps_aside()) || unreadable {
            kept = Some(keep_aside(&target)?);
        }
        write_atomic(&target, &text)?;
    }
    let state = rebuilt.state.as_ref();
    if a.json {
        let written = !dry_run && !unchanged;
        output::json_pretty(&report(&run, &target, written, kept.as_deref(), &rebuilt));
    } else if let Some(s) = state {
        let verb = if rebuilt.run_json_kept() {
            "already up to date:"
        } else if dry_run {
            "would write"
        } else if unchanged {
            "already up to date:"
        } else {
            "wrote"
        };
        output::print(&format!(
            "{verb} {}\n  status {} ({}), iteration {}, phase {}, last score {}, {} events\n",
            target.display(),
            s.status.as_str(),
            if s.stop.reason.is_empty() {
                "-"
            } else {
                &s.stop.reason
            },
            s.iteration,
            s.quality_phase().unwrap_or("-"),
            s.score().map_or("-".into(), output::score),
            s.events
        ));
        if let Some(d) = &rebuilt.prior_detail {
            output::print(&format!("  previous run.json: {d}\n"));
        }
        for d in &rebuilt.differences {
            output::print(&format!("  corrected {d}\n"));
        }
        for r in &rebuilt.repairs {
            output::print(&format!("  salvage: {r}\n"));
        }
        for p in rebuilt.provenance.iter().filter(|p| p.source != "log") {
            output::print(&format!("  {} from {}\n", p.field, p.source));
        }
        if let Some(k) = &kept {
            output::print(&format!("  kept the previous file as {}\n", k.display()));
        }
    }
    if refused && !unchanged {
        output::error(&format!(
            "nothing written (--strict): {}",
            match rebuilt.prior {
                Prior::Damaged | Prior::Unreadable if code == exit::OK => "run.json is damaged",
                _ => "the log has findings",
            }
        ));
    }
    if refused {
        code = exit::FINDINGS;
    }
    Ok(code)
}

/// `recover --json`: what was written where, and the state (`null` for a log with no event).
fn report(
    run: &RunRef,
    target: &Path,
    written: bool,
    kept: Option<&Path>,
    rebuilt: &Rebuilt,
) -> serde_json::Value {
    json!({
        "log_path": run.log,
        "run_json_path": target,
        "written": written,
        "kept_aside_path": kept,
        "prior": rebuilt.prior,
        "prior_detail": rebuilt.prior_detail,
        "differences": rebuilt.differences,
        "provenance": rebuilt.provenance,
        "repairs": rebuilt.repairs,
        "findings": rebuilt.outcome.findings,
        "state": rebuilt.state.as_ref(),
    })
}
