//! `loopctl clean`: delete run folders, never a running one, and only after asking.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args as ClapArgs;
use loopctl_runner::manage;
use loopctl_store::discover;

use super::Ctx;
use crate::output;

/// Delete run folders (log, run.json, phase output). Runs still going (a live runner, or a log
/// that says running) are refused. Asks before deleting unless --yes.
#[derive(ClapArgs)]
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
    let mut refused = 0;
    let mut doomed = vec![];
    for r in runs {
        match manage::refuse_clean(&r, a.force) {
            Some(why) => {
                output::warn(&why);
                refused += 1;
            }
            None => doomed.push(r),
        }
    }
    if doomed.is_empty() {
        output::print("nothing to delete\n");
        return Ok(if refused > 0 {
            crate::exit::FINDINGS
        } else {
            crate::exit::OK
        });
    }
    if !a.yes {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "refusing to delete {} run(s) without --yes: stdin is not a terminal to ask on",
                doomed.len()
            );
        }
        let mut err = std::io::stderr();
        for r in &doomed {
            let _ = writeln!(
                err,
                "  {}",
                r.dir.as_ref().map_or(r.log.display(), |d| d.display())
            );
        }
        let _ = write!(err, "Delete these {} run folder(s)? [y/N] ", doomed.len());
        let _ = err.flush();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            output::print("nothing deleted\n");
            return Ok(crate::exit::OK);
        }
    }
    for r in &doomed {
        manage::delete(r)?;
        output::print(&format!("deleted {}\n", r.name));
    }
    Ok(if refused > 0 {
        crate::exit::FINDINGS
    } else {
        crate::exit::OK
    })
}
