use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Args as ClapArgs;
use indicatif::{ProgressBar, ProgressStyle};
use loopctl_core::RunState;
use loopctl_store::discover::{self, RunRef};
use loopctl_store::read::{ReadOptions, replay_file, rows_file};
use loopctl_store::snapshot::folder_run;
use serde::Serialize;

use super::Ctx;
use crate::output;

/// List the runs under a root with their state rebuilt from each log (run.json is not trusted).
///
/// ROOT may also be one log holding many runs (a merged stream, `.jsonl`/`.ndjson`): then each
/// run in it is a row. The log is read in chunks on all threads and only what a row shows is
/// rebuilt (the same values a full `replay` gives).
#[derive(ClapArgs)]
pub struct Args {
    /// Root folder to scan (default: the root), or a log file holding several runs.
    root: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Row {
    alias: String,
    run_id: String,
    status: &'static str,
    stop_reason: String,
    iteration: u64,
    max_iterations: Option<u64>,
    phase: String,
    last_score: f64,
    updated_at: Option<String>,
    events: u64,
    findings: usize,
    path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn row(run: &RunRef, opts: &ReadOptions) -> Row {
    let opts = ReadOptions {
        default_run: run.name.clone(),
        threads: 1,
        ..opts.clone()
    };
    let (state, findings, error) = match replay_file(&run.log, &opts, None) {
        Ok(o) => {
            let n = o.findings.len();
            let s = folder_run(&o, &run.name).cloned();
            (s, n, None)
        }
        Err(e) => (None, 0, Some(e.to_string())),
    };
    let s = state.unwrap_or_else(|| RunState::new(&run.name));
    Row::of(
        run.name.clone(),
        &s,
        findings,
        run.dir.clone().unwrap_or_default(),
        error,
    )
}

impl Row {
    fn of(
        alias: String,
        s: &RunState,
        findings: usize,
        path: PathBuf,
        error: Option<String>,
    ) -> Row {
        Row {
            alias,
            run_id: s.run_id.clone(),
            status: if error.is_some() {
                "unreadable"
            } else {
                s.status.as_str()
            },
            stop_reason: s.stop.reason.clone(),
            iteration: s.iteration,
            max_iterations: s.max_iterations,
            phase: s.phase.clone(),
            last_score: s.last_score,
            updated_at: s.updated_at.map(|t| t.to_string()),
            events: s.events,
            findings,
            path,
            error,
        }
    }
}

/// The rows of one log's runs, in run id order (each row's `findings` counts those naming
/// it), and how many findings name no run (damaged lines).
fn file_rows(log: &Path, opts: &ReadOptions) -> anyhow::Result<(Vec<Row>, usize)> {
    let outcome = rows_file(log, opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut per_run: HashMap<&str, usize> = HashMap::new();
    let mut damaged = 0;
    for f in &outcome.findings {
        match &f.run_id {
            Some(r) => *per_run.entry(r.as_str()).or_default() += 1,
            None => damaged += 1,
        }
    }
    let rows = outcome
        .runs
        .values()
        .map(|s| {
            let findings = per_run.get(s.run_id.as_str()).copied().unwrap_or(0);
            Row::of(s.task_alias.clone(), s, findings, log.to_path_buf(), None)
        })
        .collect();
    super::free_at_exit(outcome);
    Ok((rows, damaged))
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let root = a.root.unwrap_or_else(|| ctx.root.clone());
    if root.is_file() {
        let (rows, damaged) = file_rows(&root, &ctx.read)?;
        if damaged > 0 && !a.json {
            let log = root.display();
            output::note(&format!(
                "{damaged} damaged line(s) in {log}; `loopctl check {log}` says where"
            ));
        }
        let code = print_rows(&rows, &root, a.json, true, ctx.read.threads);
        super::free_at_exit(rows);
        return code;
    }
    let runs = discover::list_runs(&root)
        .map_err(|e| anyhow::anyhow!("{e} (is it a loopctl or aif-loop root?)"))?;
    let bar = if runs.len() > 200 && !a.json {
        ProgressBar::new(runs.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let next = AtomicUsize::new(0);
    let threads = ctx.read.threads.min(runs.len()).max(1);
    let mut rows: Vec<(usize, Row)> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                sc.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(r) = runs.get(i) else { break };
                        out.push((i, row(r, &ctx.read)));
                        bar.inc(1);
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    bar.finish_and_clear();
    rows.sort_by_key(|(i, _)| *i);
    let rows: Vec<Row> = rows.into_iter().map(|(_, r)| r).collect();
    print_rows(&rows, &root, a.json, false, ctx.read.threads)
}

/// Prints the rows; `by_run` heads the table with run ids (the runs of one log, whose aliases
/// repeat) rather than folder aliases.
fn print_rows(
    rows: &[Row],
    root: &Path,
    json: bool,
    by_run: bool,
    threads: usize,
) -> anyhow::Result<u8> {
    if json {
        // A row has string keys only: serializing it cannot fail.
        output::json_array(rows, threads, |r, out| {
            let _ = serde_json::to_writer(out, r);
        });
        return Ok(crate::exit::OK);
    }
    if rows.is_empty() {
        output::print(&format!("no runs under {}\n", root.display()));
        return Ok(crate::exit::OK);
    }
    let first = if by_run { "RUN" } else { "ALIAS" };
    let mut t = output::table(&[first, "STATUS", "ITERATION", "LAST SCORE", "UPDATED"]);
    for r in rows {
        let iter = r
            .max_iterations
            .map_or(r.iteration.to_string(), |m| format!("{}/{m}", r.iteration));
        let status = if r.stop_reason.is_empty() {
            r.status.to_string()
        } else {
            format!("{} ({})", r.status, r.stop_reason)
        };
        t.add_row(vec![
            if by_run { &r.run_id } else { &r.alias }.clone(),
            status,
            iter,
            output::score(r.last_score),
            r.updated_at.clone().unwrap_or_default(),
        ]);
    }
    output::print(&format!("{t}\n"));
    let damaged = rows.iter().filter(|r| r.findings > 0).count();
    if damaged > 0 {
        output::note(&format!(
            "{damaged} run(s) have findings in their log; `loopctl check RUN` says which"
        ));
    }
    Ok(crate::exit::OK)
}
