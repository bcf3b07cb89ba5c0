use clap::Args as ClapArgs;
use loopctl_core::RunState;

use super::Ctx;
use crate::output;

/// Print the state rebuilt from the log: exactly the run.json `recover` would write.
///
/// A log holding several runs (a merged stream) prints one state per run as NDJSON with
/// --json, or a summary table without it; --run picks one.
#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    /// Machine-readable output (NDJSON, one state per run, for multi-run logs).
    #[arg(long)]
    json: bool,
    /// Ignore a valid run.json snapshot and replay the whole log.
    #[arg(long)]
    no_snapshot: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let run = ctx.target(&a.target)?;
    let rebuilt = ctx.rebuild(&run, !a.no_snapshot)?;
    let code = ctx.report_findings(&run, &rebuilt);
    let runs = &rebuilt.outcome.runs;
    if runs.len() > 1 && run.run_id.is_none() {
        if a.json {
            let states: Vec<&RunState> = runs.values().collect();
            output::json_lines(&states, ctx.read.threads, |s, out| s.write_json(out));
        } else {
            let mut t = output::table(&[
                "RUN", "STATUS", "ITER", "PHASE", "SCORE", "EVENTS", "UPDATED",
            ]);
            for s in runs.values() {
                t.add_row(vec![
                    s.run_id.clone(),
                    s.status.as_str().into(),
                    s.iteration.to_string(),
                    s.phase.clone(),
                    output::score(s.last_score),
                    s.events.to_string(),
                    s.updated_at.map(|t| t.to_string()).unwrap_or_default(),
                ]);
            }
            output::print(&format!("{t}\n"));
            output::note(&format!(
                "{} runs in {}; --run-id ID prints one run.json",
                runs.len(),
                run.log.display()
            ));
        }
        super::free_at_exit(rebuilt);
        return Ok(code);
    }
    match rebuilt.run_json() {
        Some(text) => output::print(&text),
        None => return Ok(super::no_event(&run.log)),
    }
    super::free_at_exit(rebuilt);
    Ok(code)
}
