//! `loopctl export parquet [ROOT|FILE ...] --out DIR`: the analytics tables as Parquet.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args as ClapArgs;
use loopctl_analytics::{ExportOptions, export};

use super::Ctx;
use super::tables::{ReadArgs, exit_code, progress_bar, read};
use crate::output;

/// Write the runs, phases and events tables as Parquet (zstd), partitioned by day in Hive
/// style (DIR/runs/day=2026-11-21/part-0.parquet), for DuckDB, Spark, Trino or polars.
///
/// Re-running over more logs writes new days and replaces the partitions whose content
/// changed, each atomically (a temporary file, then a rename): a reader never sees a
/// half-written file, and an unchanged partition is not touched. Rows without a time go to
/// day=__HIVE_DEFAULT_PARTITION__. The events are streamed from the logs (read a second time,
/// in file order, a few batches in memory at a time), so memory grows with the runs and phase
/// attempts, not with the logs' size; within a partition rows are in file order. The same logs
/// give the same bytes. docs/analytics.md lists the columns.
#[derive(ClapArgs)]
#[command(after_help = "\
Exit codes: 0 written (findings in the logs are reported on stderr); 1 when a log named as
FILE holds no event, or under --strict when a log has findings (after writing); 2 error
(cannot write, a path that is no file, folder or run, unreadable input under --strict).

Examples:
  loopctl export parquet .loopctl --out lake/
  duckdb -c \"SELECT loop, avg(passed::int) FROM read_parquet('lake/runs/*/*.parquet', hive_partitioning=true) GROUP BY loop\"")]
pub struct Args {
    /// Roots (folders of run folders), run folders, log files or run ids (default: the root).
    #[arg(value_name = "ROOT|FILE")]
    paths: Vec<PathBuf>,
    /// The folder to write the tables under (created when missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Print what was written as JSON: {"written": [...], "unchanged": [...]}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    read: ReadArgs,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    // The events are not gathered here: the export streams them from the logs.
    let collected = read(ctx, &a.paths, &a.read, false)?;
    let opts = ExportOptions {
        read: ctx.read.clone(),
        ..ExportOptions::default()
    };
    // The events are read again: a second bar.
    let bar = progress_bar(collected.bytes, a.read.quiet || collected.logs.is_empty());
    let n = collected.logs.len();
    let done = export(&collected, &a.out, &opts, |files, bytes| {
        bar.set_position(bytes);
        bar.set_message(format!("{files}/{n} files, events"));
    });
    bar.finish_and_clear();
    let done = done.with_context(|| format!("exporting to {}", a.out.display()))?;
    if a.json {
        let list = |v: &[PathBuf]| {
            v.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        output::json_pretty(&serde_json::json!({
            "written": list(&done.written),
            "unchanged": list(&done.unchanged),
        }));
    } else {
        output::print(&format!(
            "{} partition file(s) written, {} unchanged, under {} ({} runs, {} phase attempts, {} events)\n",
            done.written.len(),
            done.unchanged.len(),
            a.out.display(),
            done.runs,
            done.phases,
            done.events
        ));
    }
    Ok(exit_code(ctx, &collected))
}
