//! `loopctl clean`: delete run folders, never a running one, and only after asking.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args as ClapArgs;
use loopctl_runner::manage;
use loopctl_store::{clean, discover};

use super::Ctx;
use crate::output;

/// Delete runs: in each run folder under the root, the files a run writes (history.jsonl and
/// its lock and torn tails, run.json and its damaged copies, logs/ phase and check output,
/// stop.request, escalation.md, aif-loop's artifact.md, a sentinel or event stream the run was
/// told to write there), then the folder if nothing else is left in it. Anything else is
/// listed and kept, with the folder.
///
/// Refused: folders not directly under the root (symlinks resolved), the current folder or
/// one of its parents, runs still going (a live runner, or a log that says running).
/// Asks before deleting unless --yes. Exit codes: 0 done, 1 some run refused, 2 error.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl clean old-run                     # asks before deleting its folder\n  loopctl clean --all --yes                 # every run under the root that may go, no question"
)]
pub struct Args {
    /// Runs to delete (folder, id or alias).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    runs: Vec<String>,
    /// Every run under the root that may be deleted.
    #[arg(long)]
    all: bool,
    /// Do not ask (for scripts).
    #[arg(short, long)]
    yes: bool,
    /// Also delete runs whose log says running but that no runner holds (interrupted runs).
    #[arg(long)]
    force: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let runs = if a.all {
        discover::list_runs(&ctx.root).unwrap_or_default()
    } else {
        a.runs
            .iter()
            .map(|r| ctx.resolve(Some(r)))
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    let cwd = std::env::current_dir()?;
    let mut refused = 0;
    let mut doomed = vec![];
    for r in runs {
        let planned = match &r.dir {
            Some(dir) => clean::plan(&ctx.root, dir, &cwd)?.map_err(|e| e.to_string()),
            None => Err(format!(
                "{} is a log file, not a run folder: clean deletes run folders only",
                r.log.display()
            )),
        };
        match planned.and_then(|p| manage::refuse_clean(&r, a.force).map_or(Ok(p), Err)) {
            Ok(p) => doomed.push((r, p)),
            Err(why) => {
                output::warn(&format!("{why}; not cleaned"));
                refused += 1;
            }
        }
    }
    let code = if refused > 0 {
        crate::exit::FINDINGS
    } else {
        crate::exit::OK
    };
    if doomed.is_empty() {
        output::print("nothing to delete\n");
        return Ok(code);
    }
    let mut plan_text = String::new();
    for (r, p) in &doomed {
        plan_text += &describe(&r.name, p);
    }
    if !a.yes {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "refusing to delete {} run(s) without --yes: stdin is not a terminal to ask on",
                doomed.len()
            );
        }
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "{plan_text}Delete the files of these {} run(s)? [y/N] ",
            doomed.len()
        );
        let _ = err.flush();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            output::print("nothing deleted\n");
            return Ok(crate::exit::OK);
        }
    }
    for (r, p) in &doomed {
        clean::execute(p)?;
        if p.removes_folder() {
            output::print(&format!("deleted {}\n", r.name));
        } else {
            output::print(&format!(
                "deleted {} run file(s) of {}; kept the folder and what no run writes:\n{}",
                p.remove.len(),
                r.name,
                kept_lines(p)
            ));
        }
    }
    Ok(code)
}

/// One run's plan, as asked about.
fn describe(name: &str, p: &clean::Plan) -> String {
    let mut s = format!(
        "  {name} ({}): {} run file(s)",
        p.dir.display(),
        p.remove.len()
    );
    if p.removes_folder() {
        s += " and the folder\n";
    } else {
        s += "; kept, with the folder (not written by a run):\n";
        s += &kept_lines(p);
    }
    s
}

fn kept_lines(p: &clean::Plan) -> String {
    p.keep
        .iter()
        .map(|k| {
            let rel = k.strip_prefix(&p.dir).unwrap_or(k);
            format!("    {}\n", rel.display())
        })
        .collect()
}
