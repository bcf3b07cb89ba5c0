use clap::Args as ClapArgs;
use loopctl_core::analysis::liveness::interrupted_note;
use loopctl_core::render::run_row::RunRow;
use loopctl_store::discover;
use loopctl_store::snapshot::finding_counts;
use serde_json::json;

use super::Ctx;
use crate::output;

/// Show a run's state, rebuilt from its log: run id, status, iteration, phase, step, last score,
/// last update. With no RUN, the run current.json names (checked against its log), else the
/// newest run under the root; stderr says which.
///
/// STATUS is running, interrupted (its runner is gone: `loopctl resume` continues it),
/// completed, stopped or failed; docs/runner.md, "Run states", says what each means.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl status                            # the newest run under the root\n  loopctl --root examples status checkout-api --json  # a run by alias or id (examples/damaged-run)"
)]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    /// Print the status as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `status --json`: a `list` row, then the fields only status shows.
#[derive(serde::Serialize)]
struct StatusJson<'a> {
    #[serde(flatten)]
    row: RunRow<'a>,
    current_step: Option<&'a str>,
    exit_reason: Option<&'a str>,
    current_json_stale: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let unnamed = a.target.run.is_none() && a.target.run_id.is_none();
    if unnamed && ctx.runs()?.is_empty() {
        if a.json {
            output::json_pretty(&json!({ "active": null }));
        } else {
            output::print(&super::no_runs(&ctx.root));
        }
        return Ok(crate::exit::OK);
    }
    let sel = discover::select(
        a.target.run.as_deref(),
        a.target.run_id.as_deref(),
        &ctx.root,
    )?;
    if let Some(why) = sel.explain() {
        output::note(&why);
    }
    let run = sel.run;
    let rebuilt = ctx.rebuild(&run, true)?;
    let code = ctx.report_findings(&run, &rebuilt);
    let Some(s) = rebuilt.state.as_ref() else {
        if a.json {
            // list's empty row (docs/json.md): JSON whatever the log holds.
            let empty = loopctl_core::RunState::new(&run.name);
            let standing = ctx.standing(
                &run,
                &empty,
                loopctl_store::clock::now(),
                &Default::default(),
            );
            output::json_pretty(&StatusJson {
                row: RunRow::of(
                    &run.name,
                    &empty,
                    rebuilt.outcome.findings.len(),
                    (&run.log, run.dir.as_deref()),
                    None,
                    (standing.0, None),
                ),
                current_step: None,
                exit_reason: None,
                current_json_stale: false,
            });
        }
        return Ok(super::no_event(&run.log));
    };
    ctx.note_one_of(&run, rebuilt.outcome.runs.len(), &s.run_id);
    // The run's findings as its `list` row counts them.
    let runs = rebuilt.outcome.runs.values();
    let findings = std::iter::zip(
        runs.clone(),
        finding_counts(runs, &rebuilt.outcome.findings, &run.name),
    )
    .find_map(|(r, n)| (r.run_id == s.run_id).then_some(n))
    .unwrap_or(0);
    // current.json is a hint: the log decides whether the run it names is still going.
    let stale_current = sel.why == discover::Why::Current && s.is_terminal();
    let (standing, resume) =
        ctx.standing(&run, s, loopctl_store::clock::now(), &Default::default());
    let condition = standing.condition.as_str();
    if a.json {
        // list's row (docs/json.md), in its order, then what only status shows.
        let row = RunRow::of(
            &run.name,
            s,
            findings,
            (&run.log, run.dir.as_deref()),
            None,
            (standing, resume.as_deref()),
        );
        output::json_pretty(&StatusJson {
            row,
            current_step: s.current_step.as_deref(),
            exit_reason: s.exit_reason.as_deref(),
            current_json_stale: stale_current,
        });
    } else {
        let mut t = output::table(&[
            "RUN",
            "STATUS",
            "ITERATION",
            "PHASE",
            "STEP",
            "LAST SCORE",
            "UPDATED",
        ]);
        let iter = match s.max_iterations {
            Some(m) => format!("{}/{m}", s.iteration),
            None => s.iteration.to_string(),
        };
        let status = if s.stop.reason.is_empty() {
            condition.to_string()
        } else {
            format!("{condition} ({})", s.stop.reason)
        };
        t.add_row(output::row([
            s.run_id.clone(),
            status,
            iter,
            s.quality_phase().unwrap_or_default().to_string(),
            s.current_step.clone().unwrap_or_default(),
            s.score().map(output::score).unwrap_or_default(),
            s.updated_at.map(|t| t.to_string()).unwrap_or_default(),
        ]));
        output::print(&format!("{t}\n"));
        if let Some(resume) = &resume {
            let run = loopctl_core::render::visible(&s.run_id);
            output::note(&interrupted_note(&run, standing.idle_ms, resume));
        }
        if stale_current {
            output::note(&format!(
                "current.json still names this run as active, but its log says it is {}; no loop is active",
                s.status.as_str()
            ));
        }
    }
    Ok(code)
}
