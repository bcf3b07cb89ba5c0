use clap::Args as ClapArgs;
use loopctl_core::analysis::liveness::interrupted_note;
use loopctl_store::discover;
use serde_json::json;

use super::Ctx;
use crate::output;

/// Show a run's state, rebuilt from its log: alias, status, iteration, phase, step, last score,
/// last update. With no RUN, the active run named by current.json, checked against its log.
///
/// STATUS is running, interrupted (its runner is gone: `loopctl resume` continues it),
/// completed, stopped or failed; docs/runner.md, "Run states", says what each means.
#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    /// Print the status as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let current = discover::read_current(&ctx.root);
    if a.target.run.is_none() && current.is_none() {
        let none = ctx.runs()?.is_empty();
        if a.json {
            output::json_pretty(&json!({ "active": null }));
        } else if none {
            output::print(&super::no_runs(&ctx.root));
        } else {
            output::print(&format!(
                "no active loop ({} has no current.json)\n",
                ctx.root.display()
            ));
        }
        return Ok(crate::exit::OK);
    }
    let run = ctx.resolve(a.target.run.as_deref())?;
    let rebuilt = ctx.rebuild(&run, None, true)?;
    let code = ctx.report_findings(&run, &rebuilt);
    let Some(s) = rebuilt.state.as_ref() else {
        return Ok(super::no_event(&run.log));
    };
    // current.json is a hint: the log decides whether the run it names is still going.
    let stale_current = a.target.run.is_none() && s.is_terminal();
    let (standing, resume) = ctx.standing(&run, s, loopctl_runner::now(), &Default::default());
    let condition = standing.condition.as_str();
    if a.json {
        output::json_pretty(&json!({
            "alias": s.task_alias, "run_id": s.run_id, "status": condition, "iteration": s.iteration,
            "max_iterations": s.max_iterations, "phase": s.phase, "current_step": s.current_step,
            "last_score": s.last_score, "stop": s.stop, "updated_at": s.updated_at,
            "idle_ms": standing.idle_ms, "resume": resume,
            "exit_reason": s.exit_reason, "events": s.events, "log": run.log,
            "current_json_stale": stale_current, "findings": rebuilt.outcome.findings.len(),
        }));
    } else {
        let mut t = output::table(&[
            "ALIAS",
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
        t.add_row(vec![
            s.task_alias.clone(),
            status,
            iter,
            s.phase.clone(),
            s.current_step.clone().unwrap_or_default(),
            output::score(s.last_score),
            s.updated_at.map(|t| t.to_string()).unwrap_or_default(),
        ]);
        output::print(&format!("{t}\n"));
        if let Some(resume) = &resume {
            output::note(&interrupted_note(&s.run_id, standing.idle_ms, resume));
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
