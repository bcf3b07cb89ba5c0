//! `loopctl aggregate [ROOT|FILE ...]`: the built-in reports, or any grouping, across runs.

use std::path::PathBuf;

use clap::Args as ClapArgs;
use loopctl_analytics::{Filter, REPORTS, aggregate, parse_bound, report, reports, reports::KEYS};

use super::Ctx;
use super::tables::{OutArgs, ReadArgs, exit_code, print_frame, print_frames, read_for, tables};

/// Compare runs: success rates, iterations, phase durations, flaky phases, reasons, scores,
/// stagnation, tokens and cost, across every run of any mix of roots, run folders and logs
/// (all three dialects), read in parallel.
///
/// With no --report and no --by, prints every report (the summary). docs/analytics.md gives
/// each table's columns and each report's meaning.
#[derive(ClapArgs)]
#[command(after_help = "\
Reports (--report NAME):
  success-rate     success rate by loop (passed / ended runs)
  iterations       iterations to finish (p50/p90/max) by outcome
  phase-durations  phase duration p50/p95/max by phase
  flaky-phases     retries and failures by phase, flakiest first
  reasons          exit reasons of runs and stop reasons of phases
  scores           score per iteration number across runs (mean, p50, spread)
  first-pass       time and iterations to the first passing evaluation, by loop
  stagnation       stagnation verdicts by detector and loop
  cost             tokens and cost by loop and day
  slowest          the ten slowest runs

Filters: --since/--until select runs by start time; their phases and events follow. --where
KEY=VALUE keeps rows whose column KEY equals VALUE, as the column's type (a number: 1 = 1.0;
a flag: true or false; a time: RFC 3339, as printed): a column of runs, or of the phases or
events the output reads; any other column is an error that lists the usable ones.

Exit codes: 0 printed (findings, such as damaged lines and seq problems, are reported on
stderr as file:line: byte N: kind: reason; damaged lines are skipped); 1 when a log named as
FILE holds no event, or under --strict when a log has findings (after the output); 2 error
(bad option, a path that is no file, folder or run, unreadable input under --strict).

Examples:
  loopctl aggregate .loopctl
  loopctl aggregate runs/ merged.jsonl --report flaky-phases --format csv
  loopctl aggregate --by loop --by week --since 30d
  loopctl aggregate --by phase --where loop=fix-tests --json")]
pub struct Args {
    /// Roots (folders of run folders), run folders, log files or run ids (default: the root).
    #[arg(value_name = "ROOT|FILE")]
    paths: Vec<PathBuf>,
    /// Group by these keys (repeat, or comma-separate): `phase` groups phase attempts,
    /// `event` events, the others runs.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(KEYS), conflicts_with = "report")]
    by: Vec<String>,
    /// One built-in report (see below).
    #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(REPORTS.iter().map(|r| r.0)))]
    report: Option<String>,
    /// Runs started at or after: a day (2026-11-21), an RFC 3339 time, or a span back (7d).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// Runs started before (same forms as --since).
    #[arg(long, value_name = "WHEN")]
    until: Option<String>,
    /// Keep rows whose COLUMN equals VALUE (repeatable: all must hold).
    #[arg(long = "where", value_name = "COLUMN=VALUE", value_parser = key_value)]
    wheres: Vec<(String, String)>,
    #[command(flatten)]
    read: ReadArgs,
    #[command(flatten)]
    out: OutArgs,
}

/// `COLUMN=VALUE`; spaces around either and quotes around the value are dropped, as a user
/// used to SQL writes it (`status = 'failed'` matched nothing: the value was ` 'failed'`).
fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => {
            let v = v.trim();
            let unquoted = ['\'', '"']
                .iter()
                .find_map(|q| v.strip_prefix(*q)?.strip_suffix(*q))
                .unwrap_or(v);
            Ok((k.trim().to_string(), unquoted.to_string()))
        }
        _ => Err(format!("{s:?} is not COLUMN=VALUE (e.g. status=failed)")),
    }
}

/// The filter the options describe, times relative to now.
pub fn filter(
    since: Option<&str>,
    until: Option<&str>,
    wheres: &[(String, String)],
) -> anyhow::Result<Filter> {
    let now = loopctl_store::clock::now().millis();
    let bound = |s: Option<&str>| s.map(|s| parse_bound(s, now)).transpose();
    Ok(Filter {
        since: bound(since)?,
        until: bound(until)?,
        wheres: wheres.to_vec(),
    })
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let filter = filter(a.since.as_deref(), a.until.as_deref(), &a.wheres)?;
    // Only what the report (or grouping) reads is built.
    let needs = reports::needs(a.report.as_deref(), &a.by, &a.wheres);
    // A filter on a column the output does not read is refused before any log is read.
    filter.check(&needs)?;
    if a.by.is_empty() && a.report.is_none() {
        a.out.check_many()?;
    }
    let collected = read_for(ctx, &a.paths, &a.read, needs)?;
    let t = filter.apply(tables(&collected)?)?;
    if !a.by.is_empty() {
        print_frame(&mut aggregate(&t, &a.by)?, &a.out)?;
    } else if let Some(name) = &a.report {
        let df = report(&t, name).ok_or_else(|| anyhow::anyhow!("no report {name:?}"))?;
        print_frame(&mut df?, &a.out)?;
    } else {
        let mut frames = Vec::new();
        for (name, about) in REPORTS {
            if let Some(df) = report(&t, name) {
                frames.push((*name, *about, df?));
            }
        }
        print_frames(&frames, &a.out)?;
    }
    Ok(exit_code(ctx, &collected))
}

#[cfg(test)]
mod tests {
    #[test]
    fn where_values_lose_spaces_and_quotes() {
        for s in ["status=failed", "status = 'failed'", " status= \"failed\" "] {
            assert_eq!(
                super::key_value(s),
                Ok(("status".into(), "failed".into())),
                "{s}"
            );
        }
        assert_eq!(
            super::key_value("loop='a b'"),
            Ok(("loop".into(), "a b".into()))
        );
        assert_eq!(super::key_value("x='"), Ok(("x".into(), "'".into())));
        assert!(super::key_value("=x").is_err());
    }
}
