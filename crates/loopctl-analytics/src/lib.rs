//! loopctl's analytics: every run of any mix of logs, run folders and roots as three polars
//! tables (`runs`, `phases`, `events`; docs/analytics.md), the built-in reports and `--by`
//! grouping over them, SQL through polars' SQL context, and Parquet export partitioned by day.
//!
//! The logs are read by loopctl's own fold driver (every dialect, damaged lines reported and
//! skipped), never by polars' NDJSON reader. The only crate that depends on polars.

pub mod collect;
pub mod columns;
pub mod events;
pub mod export;
pub mod format;
pub mod lean;
pub mod needs;
pub mod reports;
pub mod rows;
pub mod tables;

use std::collections::HashSet;
use std::path::PathBuf;

use polars::prelude::*;

pub use collect::{Collected, LogFinding, Options, collect, logs_of};
pub use export::{ExportOptions, Exported, export};
pub use needs::{Columns, Needs};
pub use polars::prelude::DataFrame;
pub use reports::{REPORTS, aggregate, report};
pub use tables::Tables;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Polars(#[from] PolarsError),
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{0}")]
    Store(#[from] loopctl_store::StoreError),
    #[error("{0}")]
    Usage(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// A SQL context with the tables registered as `runs`, `phases` and `events`.
pub(crate) fn context(t: &Tables) -> polars::sql::SQLContext {
    let ctx = polars::sql::SQLContext::new();
    ctx.register("runs", t.runs.clone().lazy());
    ctx.register("phases", t.phases.clone().lazy());
    ctx.register("events", t.events.clone().lazy());
    ctx
}

/// Runs `sql` over the tables (`runs`, `phases`, `events`) with polars' SQL context.
pub fn query(t: &Tables, sql: &str) -> Result<DataFrame> {
    Ok(context(t).execute(sql)?.collect()?)
}

/// Which runs count: started in `[since, until)` (Unix ms) and matching every `column=value`
/// of `wheres`. Phases and events follow their runs; a `where` on a column of phases or
/// events only (`phase=review`) filters that table.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub wheres: Vec<(String, String)>,
}

/// Every `column=value` of `wheres` whose column `df` has, compared as the column's type: a
/// number as a number (`last_score=1` is 1.0, whose text is "1.0"), `true`/`false` for a flag,
/// a time as RFC 3339 (as the tables print it), any other as text. A value the column cannot
/// hold is a usage error, not a filter that silently matches nothing.
fn matches(df: &DataFrame, wheres: &[(String, String)]) -> Result<Option<Expr>> {
    let mut all: Option<Expr> = None;
    for (k, v) in wheres {
        let Ok(c) = df.column(k) else { continue };
        let not = |what: &str| {
            Error::Usage(format!(
                "--where {k}={v}: {k} holds {what}; {v:?} is not one"
            ))
        };
        let e = match c.dtype() {
            t if t.is_primitive_numeric() => {
                let x: f64 = v.trim().parse().map_err(|_| not("numbers"))?;
                col(k.as_str()).cast(DataType::Float64).eq(lit(x))
            }
            DataType::Boolean => {
                let b = match v.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(not("true or false")),
                };
                col(k.as_str()).eq(lit(b))
            }
            DataType::Datetime(..) => {
                let ts = loopctl_core::Ts::parse_rfc3339(v.trim())
                    .ok_or_else(|| not("times (RFC 3339, as 2026-03-01T09:00:00.125Z)"))?;
                col(k.as_str()).cast(DataType::Int64).eq(lit(ts.millis()))
            }
            _ => col(k.as_str()).cast(DataType::String).eq(lit(v.as_str())),
        };
        all = Some(all.map_or(e.clone(), |a| a.and(e)));
    }
    Ok(all)
}

fn keep(df: DataFrame, e: Option<Expr>) -> PolarsResult<DataFrame> {
    match e {
        Some(e) => df.lazy().filter(e.fill_null(lit(false))).collect(),
        None => Ok(df),
    }
}

/// The rows of `df` whose run (source, run_id) is in `runs`.
fn of_runs(df: DataFrame, runs: &HashSet<(String, String)>) -> PolarsResult<DataFrame> {
    let mask: BooleanChunked = {
        let src = df.column("source")?.str()?;
        let id = df.column("run_id")?.str()?;
        src.iter()
            .zip(id.iter())
            .map(|(s, i)| {
                Some(runs.contains(&(
                    s.unwrap_or_default().to_string(),
                    i.unwrap_or_default().to_string(),
                )))
            })
            .collect()
    };
    df.filter(&mask)
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.since.is_none() && self.until.is_none() && self.wheres.is_empty()
    }

    /// Refuses a `--where` column that none of the tables `needs` reads has: it would filter
    /// nothing the output shows (`phase=x` over a report of runs). The error lists the columns
    /// that can be used.
    pub fn check(&self, needs: &Needs) -> Result<()> {
        let empty = Tables::empty()?;
        let read: Vec<(&str, &DataFrame)> = [
            ("runs", needs.runs.is_some(), &empty.runs),
            ("phases", needs.phases.is_some(), &empty.phases),
            ("events", needs.events.is_some(), &empty.events),
        ]
        .into_iter()
        .filter_map(|(name, read, df)| read.then_some((name, df)))
        .collect();
        let mut usable: Vec<&str> = Vec::new();
        for (_, df) in &read {
            for c in df.get_column_names() {
                if !usable.contains(&c.as_str()) {
                    usable.push(c.as_str());
                }
            }
        }
        match self
            .wheres
            .iter()
            .find(|(k, _)| !usable.contains(&k.as_str()))
        {
            None => Ok(()),
            Some((k, _)) => {
                let tables: Vec<&str> = read.iter().map(|(name, _)| *name).collect();
                Err(Error::Usage(format!(
                    "--where {k}=...: no column {k:?} in what this output reads ({}); the columns: {}",
                    tables.join(", "),
                    usable.join(", ")
                )))
            }
        }
    }

    pub fn apply(&self, t: Tables) -> Result<Tables> {
        if self.is_empty() {
            return Ok(t);
        }
        self.check(&Needs::all())?;
        let started = || col("started").cast(DataType::Int64);
        let mut runs_cond = matches(&t.runs, &self.wheres)?;
        if let Some(s) = self.since {
            let c = started().gt_eq(lit(s));
            runs_cond = Some(runs_cond.map_or(c.clone(), |a| a.and(c)));
        }
        if let Some(u) = self.until {
            let c = started().lt(lit(u));
            runs_cond = Some(runs_cond.map_or(c.clone(), |a| a.and(c)));
        }
        let not_runs: Vec<(String, String)> = self
            .wheres
            .iter()
            .filter(|(k, _)| t.runs.column(k).is_err())
            .cloned()
            .collect();
        let runs = keep(t.runs, runs_cond)?;
        let ids: HashSet<(String, String)> = {
            let src = runs.column("source")?.str()?;
            let id = runs.column("run_id")?.str()?;
            src.iter()
                .zip(id.iter())
                .map(|(s, i)| {
                    (
                        s.unwrap_or_default().to_string(),
                        i.unwrap_or_default().to_string(),
                    )
                })
                .collect()
        };
        let phases_cond = matches(&t.phases, &not_runs)?;
        let events_cond = matches(&t.events, &not_runs)?;
        Ok(Tables {
            phases: keep(of_runs(t.phases, &ids)?, phases_cond)?,
            events: keep(of_runs(t.events, &ids)?, events_cond)?,
            runs,
        })
    }
}

/// A `--since`/`--until` bound in Unix ms: a day (`2026-11-21`, midnight UTC), an RFC 3339
/// time, or a span back from `now_ms` (`7d`, `12h`, `90m`).
pub fn parse_bound(text: &str, now_ms: i64) -> Result<i64> {
    let t = text.trim();
    if let Some(ts) = loopctl_core::Ts::parse_rfc3339(t) {
        return Ok(ts.millis());
    }
    let parts: Vec<&str> = t.split('-').collect();
    if let [y, m, d] = parts[..]
        && let (Ok(y), Ok(m), Ok(d)) = (y.parse::<i32>(), m.parse::<u32>(), d.parse::<u32>())
        && (1..=12).contains(&m)
        && (1..=31).contains(&d)
    {
        return Ok(i64::from(reports::days_from_civil(y, m, d)) * 86_400_000);
    }
    match humantime::parse_duration(t) {
        Ok(span) => Ok(now_ms - i64::try_from(span.as_millis()).unwrap_or(i64::MAX / 2)),
        Err(_) => Err(Error::Usage(format!(
            "{text:?} is not a day (2026-11-21), an RFC 3339 time or a span back from now (7d, 12h)"
        ))),
    }
}
