//! `loopctl postmortem RUN`: what happened to a run, as text, Markdown or JSON.

use clap::Args as ClapArgs;
use loopctl_core::analysis::postmortem::{Format, Report, TIMELINE_EDGE};
use loopctl_core::analysis::stagnation::assess;
use loopctl_core::fold::trace::{Trace, Traces};
use loopctl_core::render::run_row::EMPTY;
use loopctl_store::snapshot::{folder_run, salvage_max_iterations};

use super::Ctx;
use super::stagnation::{ConfigArgs, load_with, now};
use crate::{exit, output};

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FormatArg {
    Text,
    #[value(alias = "markdown")]
    Md,
    Json,
}

/// What happened to a run: why and when it stopped (or that it is still running), the timeline
/// of iterations and phases with durations and outcomes, time per phase, the score trajectory
/// with a sparkline, the distance to success when it stopped short of its threshold (aif-loop's
/// post-loop block), retries and errors, the stagnation verdict with evidence, and tokens (per
/// phase, with cache and cost, when the runner recorded them from the agents' output).
/// Everything is rebuilt from the log; durations come from its timestamps.
#[derive(ClapArgs)]
#[command(after_help = "\
Formats: text (default), md (Markdown to paste into an issue), json (stable field names).

Exit codes: 0 report printed; 1 findings in the log under --strict, or a log that holds no
event; 2 error (usage, missing run, unreadable file, no such --run-id). Damaged lines are
reported on stderr and skipped.

Examples:
  loopctl postmortem .ai-factory/evolution/my-task
  loopctl postmortem run.jsonl --run-id billing-20260218-120000 --format md > postmortem.md")]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<FormatArg>,
    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// Show every iteration of the timeline in text and md (a timeline of more than 40
    /// iterations shows the first and last 20 and how many were elided; JSON has them all).
    #[arg(long)]
    full_timeline: bool,
    #[command(flatten)]
    config: ConfigArgs,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let format = match (a.json, a.format) {
        (true, _) | (_, Some(FormatArg::Json)) => Format::Json,
        (_, Some(FormatArg::Md)) => Format::Markdown,
        _ => Format::Text,
    };
    // Text and Markdown show a long timeline's ends: the traces keep no more of it.
    let whole = format == Format::Json || a.full_timeline;
    let run = ctx.target(&a.target)?;
    let traces = if whole {
        Traces::new(&run.name)
    } else {
        Traces::ends(&run.name, TIMELINE_EDGE)
    };
    let loaded = load_with(ctx, run, traces)?;
    let runs = &loaded.outcome.runs;
    if runs.is_empty() {
        if format == Format::Json {
            // JSON whatever the log holds: the report of a run with no event.
            let empty = loopctl_core::RunState::new(&loaded.run.name);
            let trace = Trace::default();
            let (standing, _) = ctx.standing(&loaded.run, &empty, now(), &Default::default());
            let verdict = assess(&trace, &a.config.config()?, Some(now()), standing.runner);
            let mut report = Report::build(&empty, &trace, &verdict);
            report.stop.running = false;
            report.stop.status = EMPTY.to_string();
            output::print(&report.render(format));
        }
        return Ok(super::no_event(&loaded.run.log));
    }
    let state = match &loaded.run.run_id {
        Some(id) => runs.get(id).ok_or_else(|| {
            anyhow::anyhow!(
                "{}: no run {id:?} in this log (it holds: {})",
                loaded.run.log.display(),
                runs.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })?,
        None => {
            let Some(s) = folder_run(&loaded.outcome, &loaded.run.name) else {
                return Ok(super::no_event(&loaded.run.log));
            };
            ctx.note_one_of(&loaded.run, runs.len(), &s.run_id);
            s
        }
    };
    // As `list` and `status` do: a `max_iterations` the log leaves unset (aif-loop without
    // run_started) is read from the run's state file.
    let mut salvaged;
    let state = if state.max_iterations.is_none() {
        salvaged = state.clone();
        salvage_max_iterations(&loaded.run, &mut [&mut salvaged]);
        &salvaged
    } else {
        state
    };
    // Borrowed: a long run's trace is tens of megabytes.
    let no_events = Trace::default();
    let trace = loaded.traces.get(&state.run_id).unwrap_or(&no_events);
    let now = now();
    let (standing, _) = ctx.standing(&loaded.run, state, now, &Default::default());
    let verdict = assess(trace, &a.config.config()?, Some(now), standing.runner);
    let mut report = if whole {
        Report::build(state, trace, &verdict)
    } else {
        Report::build_ends(state, trace, &verdict)
    };
    report.stop.status = standing.condition.as_str().to_string();
    output::print(&report.render_full(format, a.full_timeline));
    let code = if ctx.strict && !loaded.outcome.findings.is_empty() {
        output::error(&format!(
            "{} finding(s) in {} (--strict)",
            loaded.outcome.findings.len(),
            loaded.run.log.display()
        ));
        exit::FINDINGS
    } else {
        exit::OK
    };
    super::free_at_exit(loaded);
    Ok(code)
}
