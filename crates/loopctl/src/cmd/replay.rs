use clap::Args as ClapArgs;
use loopctl_core::RunState;

use super::Ctx;
use crate::output;

/// Print the state rebuilt from the log: exactly the run.json `recover` would write.
///
/// --json prints NDJSON, one state per line, whatever the number of runs. Without it, one run
/// prints its run.json, byte for byte; a log holding several runs (a merged stream) prints a
/// summary table, and --run-id picks one.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl replay                            # the newest run under the root, as run.json\n  loopctl --root examples replay checkout-api --json  # a run by alias or id (examples/damaged-run)\n  loopctl replay runs/merged.jsonl --run-id r-20261120-093000"
)]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    /// NDJSON: one run.json per line, one line per run (always, even for one run).
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
    if a.json {
        // NDJSON, one run.json per line, however many runs the log holds.
        let states: Vec<&RunState> = match (&rebuilt.state, run.run_id.is_some() || runs.len() <= 1)
        {
            (Some(s), true) => vec![s],
            _ => runs.values().collect(),
        };
        if states.is_empty() {
            // No line at all: the empty-log rule.
            return Ok(super::no_event(&run.log));
        }
        output::json_lines(&states, ctx.read.threads, |s, out| s.write_json(out));
        super::free_at_exit(rebuilt);
        return Ok(code);
    }
    if runs.len() > 1 && run.run_id.is_none() {
        let mut t = output::table(&[
            "RUN",
            "STATUS",
            "ITERATION",
            "PHASE",
            "LAST SCORE",
            "EVENTS",
            "UPDATED",
        ]);
        for s in runs.values() {
            t.add_row(output::row([
                s.run_id.clone(),
                s.status.as_str().into(),
                s.iteration.to_string(),
                s.quality_phase().unwrap_or_default().to_string(),
                s.score().map(output::score).unwrap_or_default(),
                s.events.to_string(),
                s.updated_at.map(|t| t.to_string()).unwrap_or_default(),
            ]));
        }
        output::print(&format!("{t}\n"));
        output::note(&format!(
            "{} runs in {}; --run-id ID prints one run.json",
            runs.len(),
            run.log.display()
        ));
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
