//! `loopctl stagnation RUN...`: is a loop stuck, and on what evidence.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args as ClapArgs;
use loopctl_core::analysis::stagnation::{Config, Reset, Verdict, assess};
use loopctl_core::fold::trace::{Trace, Traces};
use loopctl_core::render::visible;
use loopctl_core::{Outcome, Replay, RunState};
use loopctl_store::discover::{self, RunRef, list_runs};
use loopctl_store::fold::{fold_file, fold_runs};
use owo_colors::OwoColorize;
use serde_json::json;

use super::{Ctx, values};
use crate::{exit, output};

#[derive(Clone, Copy, clap::ValueEnum)]
enum ResetArg {
    OnProgress,
    Never,
}

/// The loop file's "stagnation" settings as flags; each defaults to the loop file default.
#[derive(ClapArgs)]
pub struct ConfigArgs {
    /// A score gain under this is no progress, from 0 to 1 [default: 0.02].
    #[arg(long, value_parser = values::score_delta, value_name = "X")]
    min_delta: Option<f64>,
    /// Evaluations without progress (and without fail blockers) that stagnate [default: 2].
    #[arg(long, value_parser = values::count_u64(), value_name = "N")]
    limit: Option<u64>,
    /// When the score count goes back to 0: on-progress (a gain of min-delta) or never
    /// [default: on-progress].
    #[arg(long, value_enum)]
    reset: Option<ResetArg>,
    /// Same failed rules in N evaluations, or same error in N failed attempts of a phase, in a
    /// row [default: 3].
    #[arg(long, value_parser = values::count_u64(), value_name = "N")]
    repeat: Option<u64>,
    /// Iterations in a row that leave the git commit and work tree unchanged [default: 1].
    #[arg(long, value_parser = values::count_u64(), value_name = "N")]
    no_change: Option<u64>,
    /// Scores looked at for oscillation, at least 4 [default: 6].
    #[arg(long, value_parser = values::usize_from(4), value_name = "N")]
    window: Option<usize>,
    /// Direction changes in the window that count as oscillation [default: 3].
    #[arg(long, value_parser = values::count_usize(), value_name = "N")]
    turns: Option<usize>,
    /// A run whose runner is alive and has written no event for this long is stalled (90s,
    /// 30m, 2h) [default: 30m].
    #[arg(long, value_parser = values::positive_duration, value_name = "DURATION")]
    stalled_after: Option<Duration>,
}

impl ConfigArgs {
    /// The settings, defaults filled in; an error when `--turns` cannot happen in `--window`.
    pub fn config(&self) -> anyhow::Result<Config> {
        let d = Config::default();
        let cfg = Config {
            min_delta: self.min_delta.unwrap_or(d.min_delta),
            limit: self.limit.unwrap_or(d.limit),
            reset: match self.reset {
                Some(ResetArg::Never) => Reset::Never,
                Some(ResetArg::OnProgress) => Reset::OnProgress,
                None => d.reset,
            },
            repeat: self.repeat.unwrap_or(d.repeat),
            no_change: self.no_change.unwrap_or(d.no_change),
            oscillation_window: self.window.unwrap_or(d.oscillation_window),
            oscillation_turns: self.turns.unwrap_or(d.oscillation_turns),
            stalled_after_ms: self.stalled_after.map_or(d.stalled_after_ms, |t| {
                t.as_millis().min(u128::from(u64::MAX)) as u64
            }),
            stop_on: d.stop_on,
        };
        // A window of N scores has at most N-2 direction changes.
        let (w, t) = (cfg.oscillation_window, cfg.oscillation_turns);
        if t + 2 > w {
            anyhow::bail!(
                "--turns {t} can never happen in a --window of {w} scores (at most {} direction changes): raise --window or lower --turns",
                w.saturating_sub(2)
            );
        }
        Ok(cfg)
    }
}

/// Is a loop stuck? Assesses every run in each RUN (a log holding several runs is assessed run
/// by run) with five detectors: score (aif-loop's rule), repeated failure, no change (git),
/// oscillation and stalled, and prints each verdict with its evidence: the iterations, scores,
/// rule ids and event seqs involved.
#[derive(ClapArgs)]
#[command(after_help = "\
Exit codes: 0 every run is healthy; 3 at least one run stagnates; 1 a log that holds no
event, or findings in a log under --strict (when no run stagnates); 2 error (usage, missing
run, unreadable file). A root with no run is no error: `no runs under ROOT`, exit 0.

Detectors (docs/postmortem.md):
  score             aif-loop's rule: gain < min-delta with no fail blockers, `limit` times
  repeated_failure  same failed rule ids, or same error of one phase, `repeat` times in a row
  no_change         `no-change` iterations that leave git HEAD and the work tree as they were
  oscillation       scores going up and down (`turns` changes in `window`) with no net gain
  stalled           a run whose runner is alive (it holds the run's lock) with no event for
                    `stalled-after`; an interrupted run (runner gone) or a log no runner locks
                    (aif-loop, Avenor) is never stalled (docs/runner.md, Run states)

Examples:
  loopctl stagnation .ai-factory/evolution/my-task
  loopctl stagnation .ai-factory/evolution      # every run under the root
  loopctl stagnation merged.jsonl --limit 3 --reset never --json")]
pub struct Args {
    /// Run folders, log files (each of their runs is assessed), root folders (every run under
    /// them), or run ids/aliases under the root (default: the active run).
    runs: Vec<String>,
    #[command(flatten)]
    config: ConfigArgs,
    /// Print the settings used and every run's verdicts, with their evidence, as one JSON
    /// object.
    #[arg(long)]
    json: bool,
}

/// A log's runs: replayed states, their traces, and what replay found wrong with the log.
pub struct Loaded {
    pub run: RunRef,
    pub outcome: Outcome,
    pub traces: BTreeMap<String, Trace>,
}

impl Loaded {
    /// The runs of the log with their traces, in run id order.
    pub fn runs(&self) -> impl Iterator<Item = (&RunState, &Trace)> {
        self.outcome
            .runs
            .iter()
            .filter_map(|(id, s)| self.traces.get(id).map(|t| (s, t)))
    }
}

/// What `stagnation` folds a log into: run states and lean traces (only what the detectors
/// read), in one read.
fn lean_projections(run: &RunRef) -> (Replay, Traces) {
    (Replay::new(&run.name), Traces::lean(&run.name))
}

/// `run`'s log replayed into states and traces, read once; damaged lines are reported on
/// stderr (file, line, byte offset, reason) and skipped.
fn loaded(run: RunRef, folded: loopctl_store::Result<(Replay, Traces)>) -> anyhow::Result<Loaded> {
    let (replay, traces) = folded?; // store errors name the file
    let outcome = replay.finish();
    output::findings(&run.log, &outcome.findings);
    Ok(Loaded {
        run,
        outcome,
        traces: traces.into_runs(),
    })
}

/// Replays `run`'s log into states and into `traces` (empty: `Traces::new`, or `Traces::ends`
/// for a report that shows a timeline's ends); see `loaded`.
pub fn load_with(ctx: &Ctx, run: RunRef, traces: Traces) -> anyhow::Result<Loaded> {
    let folded = fold_file(
        &run.log,
        &ctx.opts_for(&run),
        (Replay::new(&run.name), traces),
    );
    loaded(run, folded)
}

/// The runs a RUN argument names: every run under it when it is a root (a folder of run
/// folders), else the one run it resolves to; with no RUN, the active run. `Err(root)`: a root
/// that holds no run (no error, as for `list` and `status`).
/// The runs `spec` names, and whether they were found under a root; the root when it holds
/// none.
type Found = (Vec<RunRef>, bool);

fn runs_of(ctx: &Ctx, spec: Option<&str>) -> anyhow::Result<Result<Found, PathBuf>> {
    if let Some(dir) = spec.map(Path::new)
        && dir.is_dir()
        && discover::folder_log(dir).is_none()
    {
        let runs =
            list_runs(dir).with_context(|| format!("listing runs under {}", dir.display()))?;
        if runs.is_empty() {
            return Ok(Err(dir.to_path_buf()));
        }
        return Ok(Ok((runs, true)));
    }
    if spec.is_none() && ctx.runs()?.is_empty() {
        return Ok(Err(ctx.root.clone()));
    }
    Ok(Ok((vec![ctx.resolve(spec)?], false)))
}

pub use loopctl_store::clock::now;

/// Text for one run's verdict; `condition` is how the run stands (running, interrupted, ...).
pub fn verdict_text(
    state: &RunState,
    condition: &str,
    log: &std::path::Path,
    v: &Verdict,
) -> String {
    let head = if v.stagnating {
        "STAGNATING".red().bold().to_string()
    } else {
        "healthy".green().to_string()
    };
    let status = if state.stop.reason.is_empty() {
        condition.to_string()
    } else {
        format!("{condition}: {}", visible(&state.stop.reason))
    };
    let mut o = format!(
        "{} {head}  ({status}; {})\n",
        visible(&state.run_id).bold(),
        log.display()
    );
    for f in &v.findings {
        let mark = if f.triggered {
            "[x]".red().to_string()
        } else if f.applicable {
            "[ ]".to_string()
        } else {
            "[-]".dimmed().to_string()
        };
        o += &format!(
            "  {mark} {:<16} {}\n",
            f.detector.name(),
            visible(&f.summary)
        );
        let ev = loopctl_core::analysis::postmortem::evidence(f);
        if f.triggered && !ev.is_empty() {
            o += &format!("      {:<16} {}\n", "", visible(&ev).dimmed());
        }
    }
    o
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let cfg = a.config.config()?;
    let specs: Vec<Option<&str>> = if a.runs.is_empty() {
        vec![None]
    } else {
        a.runs.iter().map(|r| Some(r.as_str())).collect()
    };
    let now = now();
    let mut any = false;
    let mut empty = false;
    let mut findings = 0usize;
    let mut reports = Vec::new();
    let mut text = String::new();
    let mut runs = Vec::new();
    // Per run: found under a root (not named): a log of it that cannot be read is said and
    // skipped, as `list` and `serve` go on past it; a run named is an error.
    let mut found_under = Vec::new();
    for spec in specs {
        match runs_of(ctx, spec)? {
            Ok((found, scanned)) => {
                found_under.extend(std::iter::repeat_n(scanned, found.len()));
                runs.extend(found);
            }
            Err(root) if !a.json => text += &super::no_runs(&root),
            Err(_) => {}
        }
    }
    // Every log read once, the logs spread over the threads.
    let folded = fold_runs(&runs, &ctx.read, lean_projections);
    let mut skipped = 0;
    for ((run, folded), scanned) in runs.into_iter().zip(folded).zip(found_under) {
        let loaded = match (folded, scanned) {
            (Err(e), true) => {
                output::warn(&format!("{e}; skipped"));
                skipped += 1;
                continue;
            }
            (folded, _) => loaded(run, folded)?,
        };
        findings += loaded.outcome.findings.len();
        if loaded.outcome.runs.is_empty() {
            super::no_event(&loaded.run.log);
            empty = true;
        }
        let runner = Default::default();
        let only = loaded.run.run_id.clone();
        for (state, trace) in loaded
            .runs()
            .filter(|(s, _)| only.as_deref().is_none_or(|id| id == s.run_id))
        {
            let (standing, _) = ctx.standing(&loaded.run, state, now, &runner);
            let v = assess(trace, &cfg, Some(now), standing.runner);
            let condition = standing.condition.as_str();
            any |= v.stagnating;
            if a.json {
                reports.push(json!({
                    "run_id": state.run_id,
                    "task_alias": state.task_alias,
                    "status": condition,
                    "stop": state.stop,
                    "log_path": &loaded.run.log,
                    "dir": &loaded.run.dir,
                    "stagnating": v.stagnating,
                    "detectors": v.findings,
                }));
            } else {
                text += &verdict_text(state, condition, &loaded.run.log, &v);
            }
        }
        super::free_at_exit(loaded);
    }
    if a.json {
        output::json_pretty(&json!({ "stagnating": any, "config": cfg, "runs": reports }));
    } else {
        output::print(&text);
    }
    if ctx.strict && skipped > 0 {
        anyhow::bail!("{skipped} log(s) could not be read (--strict)");
    }
    let strict_findings = ctx.strict && findings > 0;
    if strict_findings && !any {
        output::error(&format!("{findings} finding(s) in the log(s) (--strict)"));
    }
    Ok(exit::of_reading(any, empty, strict_findings))
}
