use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use indicatif::{ProgressBar, ProgressStyle};
use loopctl_core::analysis::liveness::{Standing, interrupted_note};
use loopctl_core::render::run_row::{EMPTY, RunRow as Row};
use loopctl_core::{RunState, Ts};
use loopctl_store::discover::{self, RunRef};
use loopctl_store::fold::{each_run, rows};
use loopctl_store::read::ReadOptions;
use loopctl_store::snapshot::{finding_counts, salvage_max_iterations};

use super::Ctx;
use crate::exit;
use crate::output;

/// List the runs under a root, each rebuilt from its log.
///
/// run.json is not trusted: only a field a log cannot supply (the max_iterations of a run
/// without run_started) is salvaged from it, as replay does.
///
/// Every run of every log is a row: a folder whose log holds several runs gives a row each,
/// named `folder/run_id`. A run folder named as ROOT lists its log's runs, as its log would.
///
/// ROOT may also be one log holding many runs (a merged stream, `.jsonl`/`.ndjson`): then each
/// run in it is a row. The log is read in chunks on all threads and only what a row shows is
/// rebuilt (the same values a full `replay` gives).
///
/// STATUS is running, interrupted (its runner is gone: `loopctl resume` continues it),
/// completed, stopped or failed (docs/runner.md, "Run states"); `empty (no event)` (JSON
/// `empty`) for a log with no event yet.
///
/// Exit codes: 0 listed (also when the root holds no run); 1 under --strict when a log has
/// findings (damaged lines, seq problems) or cannot be read, and for a FILE that holds no
/// event; 2 error (a named root that does not exist, unreadable file).
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl list                              # every run under the root\n  loopctl list runs/ --json                  # another root, for scripts\n  loopctl list merged.jsonl                  # the runs of one log"
)]
pub struct Args {
    /// Root folder to scan (default: the root), a run folder, or a log file holding several
    /// runs.
    #[arg(value_name = "ROOT|FILE")]
    path: Option<PathBuf>,
    /// Print the rows as one JSON array, an object per run: run_id, task_alias, status, stop,
    /// iteration, max_iterations, phase, last_score, updated_at, idle_ms, resume, events,
    /// finding_count, log_path, dir (docs/json.md).
    #[arg(long)]
    json: bool,
}

/// A run folder's runs rebuilt from its log (one row each; a log with no event gives one
/// empty row), or why the log could not be read.
struct Probe {
    /// The table's first column per run: the folder's name, or `folder/run_id` when its log
    /// holds several runs.
    names: Vec<String>,
    states: Vec<RunState>,
    findings: Vec<usize>,
    error: Option<String>,
    standings: Vec<(Standing, Option<String>)>,
}

fn probe(ctx: &Ctx, run: &RunRef, opts: &ReadOptions, now: Ts) -> Probe {
    let opts = ReadOptions {
        default_run: run.name.clone(),
        threads: 1,
        ..opts.clone()
    };
    // Only what a row shows is rebuilt (as for `list FILE`).
    let (mut states, findings, error) = match rows(&run.log, &opts) {
        // A log with no event (empty, or every line damaged): its findings are its row's.
        Ok(o) if o.runs.is_empty() => (Vec::new(), vec![o.findings.len()], None),
        Ok(o) => {
            let states: Vec<RunState> = o.runs.iter().map(|s| (**s).clone()).collect();
            let counts = finding_counts(states.iter(), &o.findings, &run.name);
            (states, counts, None)
        }
        Err(e) => (Vec::new(), vec![0], Some(e.to_string())),
    };
    let (states, findings) = if states.is_empty() {
        (vec![RunState::new(&run.name)], findings)
    } else {
        let mut refs: Vec<&mut RunState> = states.iter_mut().collect();
        salvage_max_iterations(run, &mut refs);
        (states, findings)
    };
    let names = if states.len() > 1 {
        states
            .iter()
            .map(|s| format!("{}/{}", run.name, s.run_id))
            .collect()
    } else {
        vec![run.name.clone()]
    };
    let standings = states
        .iter()
        .map(|s| ctx.standing(run, s, now, &Default::default()))
        .collect();
    Probe {
        names,
        states,
        findings,
        error,
        standings,
    }
}

/// The rows of one log's runs, in run id order (each row's `findings` counts those naming
/// it), with a note of the findings that name no run (damaged lines).
fn list_file(ctx: &Ctx, log: &Path, json: bool) -> anyhow::Result<u8> {
    // A run folder's log names its run's events that carry no run id by the folder, as
    // `replay` does.
    let run = RunRef::file(log);
    let opts = ctx.opts_for(&run);
    let mut outcome = rows(log, &opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    // A log with no event: one empty row, named as `list ROOT` names it (docs/json.md).
    let no_event = outcome.runs.is_empty();
    if no_event {
        outcome.runs.push(RunState::new(&run.name).into());
    }
    let mut states: Vec<&mut RunState> = outcome.runs.iter_mut().map(|s| &mut **s).collect();
    salvage_max_iterations(&run, &mut states);
    // Findings naming no run (damaged lines) are the folder's run's, as in `list ROOT`.
    let counts = finding_counts(
        outcome.runs.iter().map(|s| &**s),
        &outcome.findings,
        &run.name,
    );
    let damaged = outcome
        .findings
        .iter()
        .filter(|f| f.run_id.is_none())
        .count();
    let now = loopctl_store::clock::now();
    let runner = Default::default();
    let standings: Vec<(Standing, Option<String>)> = outcome
        .runs
        .iter()
        .map(|s| ctx.standing(&run, s, now, &runner))
        .collect();
    let rows: Vec<Row> = outcome
        .runs
        .iter()
        .zip(&standings)
        .zip(&counts)
        .map(|((s, (st, resume)), &findings)| {
            Row::of(
                &s.run_id,
                s,
                findings,
                (log, run.dir.as_deref()),
                None,
                (*st, resume.as_deref()),
            )
        })
        .collect();
    if damaged > 0 && !json && !no_event {
        let log = log.display();
        output::note(&format!(
            "{damaged} damaged line(s) in {log}; `loopctl check {log}` says where"
        ));
    }
    let mut code = print_rows(&rows, log, json, ctx.read.threads);
    if no_event {
        code = code.map(|_| super::no_event(log));
    }
    if ctx.strict && !outcome.findings.is_empty() && matches!(code, Ok(exit::OK)) {
        let n = outcome.findings.len();
        let log = log.display();
        output::error(&format!(
            "{n} finding(s) in {log} (--strict); `loopctl check {log}` lists them"
        ));
        code = Ok(exit::FINDINGS);
    }
    // About to exit: the process frees them at once.
    super::free_at_exit(rows);
    super::free_at_exit(standings);
    super::free_at_exit(counts);
    super::free_at_exit(outcome);
    code
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let named = a.path.is_some() || ctx.root_named;
    let root = a.path.unwrap_or_else(|| ctx.root.clone());
    if root.is_file() {
        return list_file(ctx, &root, a.json);
    }
    if let Some(log) = discover::folder_log(&root) {
        return list_file(ctx, &log, a.json);
    }
    if root.exists() && !root.is_dir() {
        // A fifo, a socket, a device: no log and no root.
        return Err(loopctl_store::StoreError::NotALog(root).into());
    }
    let runs = discover::runs_under(&root, named)?;
    let bar = if runs.len() > 200 && !a.json {
        ProgressBar::new(runs.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let now = loopctl_store::clock::now();
    let probes: Vec<Probe> = each_run(&runs, ctx.read.threads, |r| {
        let p = probe(ctx, r, &ctx.read, now);
        bar.inc(1);
        p
    });
    bar.finish_and_clear();
    let rows: Vec<Row> = probes
        .iter()
        .zip(&runs)
        .flat_map(|(p, run)| {
            let at = (run.log.as_path(), run.dir.as_deref());
            (0..p.states.len()).map(move |k| {
                let (standing, resume) = &p.standings[k];
                Row::of(
                    &p.names[k],
                    &p.states[k],
                    p.findings[k],
                    at,
                    p.error.as_deref(),
                    (*standing, resume.as_deref()),
                )
            })
        })
        .collect();
    let code = print_rows(&rows, &root, a.json, ctx.read.threads)?;
    let flawed = rows
        .iter()
        .filter(|r| r.finding_count > 0 || r.error.is_some())
        .count();
    if ctx.strict && flawed > 0 && code == exit::OK {
        output::error(&format!(
            "{flawed} run(s) with findings or an unreadable log (--strict)"
        ));
        return Ok(exit::FINDINGS);
    }
    Ok(code)
}

/// Prints the rows. RUN shows each row's `name`: the run id for the runs of one log, else the
/// folder's name (the run's id, for a folder the runner made).
fn print_rows(rows: &[Row], root: &Path, json: bool, threads: usize) -> anyhow::Result<u8> {
    if json {
        output::json_array(rows, threads, Row::write_json);
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        output::print(&super::no_runs(root));
        return Ok(exit::OK);
    }
    let mut t = output::table(&["RUN", "STATUS", "ITERATION", "LAST SCORE", "UPDATED"]);
    for r in rows {
        let iter = r
            .max_iterations
            .map_or(r.iteration.to_string(), |m| format!("{}/{m}", r.iteration));
        let status = if r.status == EMPTY {
            format!("{EMPTY} (no event)")
        } else if r.stop.reason.is_empty() {
            r.status.to_string()
        } else {
            format!("{} ({})", r.status, r.stop.reason)
        };
        t.add_row(output::row([
            r.name.to_string(),
            status,
            iter,
            r.last_score.map(output::score).unwrap_or_default(),
            r.updated_at.map(|t| t.to_string()).unwrap_or_default(),
        ]));
    }
    output::print(&format!("{t}\n"));
    const NOTED: usize = 5;
    let interrupted: Vec<&Row> = rows.iter().filter(|r| r.resume.is_some()).collect();
    for r in interrupted.iter().take(NOTED) {
        let name = loopctl_core::render::visible(r.name);
        output::note(&interrupted_note(
            &name,
            r.idle_ms,
            r.resume.unwrap_or_default(),
        ));
    }
    if interrupted.len() > NOTED {
        output::note(&format!(
            "{} more interrupted run(s); `loopctl list --json` gives each one's resume command",
            interrupted.len() - NOTED
        ));
    }
    let damaged = rows.iter().filter(|r| r.finding_count > 0).count();
    if damaged > 0 {
        output::note(&format!(
            "{damaged} run(s) have findings in their log; `loopctl check RUN` says which"
        ));
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_written_as_serde_json_writes_it() {
        let mut s = RunState::new("r\"1\n-20260218-120000");
        s.stop.reason = "user_stop - \u{7f}tired\t".into();
        s.last_score = 0.1 + 0.2;
        s.updated_at = Ts::parse_rfc3339("2026-02-18T12:00:41.905Z");
        s.max_iterations = Some(9);
        let path = Path::new("/tmp/a b/h\u{e9}.jsonl");
        let running = Standing::of(&s, loopctl_core::analysis::liveness::Liveness::Dead, Ts(0));
        for (error, standing) in [
            (None, (running, Some("loopctl resume 'a b'"))),
            (Some("no such file"), (running, None)),
        ] {
            let row = Row::of(
                "al\\ias",
                &s,
                3,
                (path, Some(Path::new("/tmp/a b"))),
                error,
                standing,
            );
            let mut out = Vec::new();
            row.write_json(&mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&row).unwrap()
            );
        }
    }
}
