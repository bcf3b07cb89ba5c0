//! `loopctl query SQL [ROOT|FILE ...]`: SQL over the runs, phases and events tables.

use std::path::PathBuf;

use clap::Args as ClapArgs;
use loopctl_analytics::{Needs, query};

use super::Ctx;
use super::tables::{OutArgs, ReadArgs, exit_code, print_frame, read_for, tables};

/// Run SQL over three tables rebuilt from the logs: `runs` (one row per run), `phases` (one
/// per phase attempt) and `events` (one per event), through polars' SQL engine.
/// docs/analytics.md lists every column and its type.
#[derive(ClapArgs)]
#[command(after_help = "\
Exit codes: 0 printed (findings in the logs are reported on stderr); 1 when a log named as
FILE holds no event, or under --strict when a log has findings (after the output); 2 error
(a bad query: polars' message names the offending part; a path that is no file, folder or
run; an unreadable input under --strict).

Examples:
  loopctl query \"SELECT loop, count(*) AS runs FROM runs WHERE status = 'failed' GROUP BY loop\"
  loopctl query \"SELECT phase, avg(duration_ms) FROM phases GROUP BY phase\" runs/ --format csv
  loopctl query \"SELECT event, count(*) FROM events GROUP BY event\" merged.jsonl --json")]
pub struct Args {
    /// The query; tables: runs, phases, events.
    sql: String,
    /// Roots (folders of run folders), run folders, log files or run ids (default: the root).
    #[arg(value_name = "ROOT|FILE")]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    read: ReadArgs,
    #[command(flatten)]
    out: OutArgs,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    // Only what the query reads is built; a query polars cannot plan fails before any log
    // is read.
    let needs = Needs::of_sql(&a.sql).map_err(|e| anyhow::anyhow!("query failed: {e}"))?;
    let collected = read_for(ctx, &a.paths, &a.read, needs)?;
    let t = tables(&collected)?;
    let mut df = query(&t, &a.sql).map_err(|e| anyhow::anyhow!("query failed: {e}"))?;
    print_frame(&mut df, &a.out)?;
    Ok(exit_code(ctx, &collected))
}
