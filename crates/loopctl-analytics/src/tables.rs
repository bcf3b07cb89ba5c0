//! The rows as polars frames: `runs`, `phases` and `events`, with the columns and types that
//! docs/analytics.md lists (a test holds the two together).

use polars::prelude::*;

use crate::rows::{EventRow, RunRow};

fn text<'a, R>(rows: &'a [R], name: &str, f: impl Fn(&'a R) -> Option<&'a str>) -> Column {
    Series::new(name.into(), rows.iter().map(f).collect::<Vec<_>>()).into_column()
}

fn uint<R>(rows: &[R], name: &str, f: impl Fn(&R) -> Option<u64>) -> Column {
    Series::new(name.into(), rows.iter().map(f).collect::<Vec<_>>()).into_column()
}

fn float<R>(rows: &[R], name: &str, f: impl Fn(&R) -> Option<f64>) -> Column {
    Series::new(name.into(), rows.iter().map(f).collect::<Vec<_>>()).into_column()
}

fn boolean<R>(rows: &[R], name: &str, f: impl Fn(&R) -> Option<bool>) -> Column {
    Series::new(name.into(), rows.iter().map(f).collect::<Vec<_>>()).into_column()
}

fn time<R>(rows: &[R], name: &str, f: impl Fn(&R) -> Option<i64>) -> PolarsResult<Column> {
    let s = Series::new(name.into(), rows.iter().map(f).collect::<Vec<_>>());
    Ok(s.cast(&DataType::Datetime(TimeUnit::Milliseconds, None))?
        .into_column())
}

fn day<R>(rows: &[R], f: impl Fn(&R) -> Option<i32>) -> PolarsResult<Column> {
    let s = Series::new("day".into(), rows.iter().map(f).collect::<Vec<_>>());
    Ok(s.cast(&DataType::Date)?.into_column())
}

pub fn runs(rows: &[RunRow]) -> PolarsResult<DataFrame> {
    let cols = vec![
        text(rows, "run_id", |r| Some(&r.run_id)),
        text(rows, "loop", |r| Some(&r.loop_name)),
        text(rows, "status", |r| Some(r.status)),
        text(rows, "exit_reason", |r| r.exit_reason.as_deref()),
        time(rows, "started", |r| r.started)?,
        time(rows, "ended", |r| r.ended)?,
        uint(rows, "duration_ms", |r| r.duration_ms),
        uint(rows, "iterations", |r| Some(r.iterations)),
        uint(rows, "max_iterations", |r| r.max_iterations),
        float(rows, "last_score", |r| r.last_score),
        boolean(rows, "passed", |r| r.passed),
        uint(rows, "retries", |r| Some(r.retries)),
        uint(rows, "phase_errors", |r| Some(r.phase_errors)),
        uint(rows, "input_tokens", |r| r.usage.input_tokens),
        uint(rows, "output_tokens", |r| r.usage.output_tokens),
        uint(rows, "cache_read_tokens", |r| r.usage.cache_read_tokens),
        uint(rows, "cache_creation_tokens", |r| {
            r.usage.cache_creation_tokens
        }),
        float(rows, "cost_usd", |r| r.usage.cost_usd),
        uint(rows, "turns", |r| r.usage.turns),
        text(rows, "model", |r| r.usage.model.as_deref()),
        uint(rows, "first_pass_iteration", |r| r.first_pass_iteration),
        uint(rows, "first_pass_ms", |r| r.first_pass_ms),
        text(rows, "stagnation", |r| r.stagnation.as_deref()),
        text(rows, "dialect", |r| r.dialect),
        uint(rows, "events", |r| Some(r.events)),
        text(rows, "source", |r| Some(&r.source)),
        day(rows, |r| r.day)?,
    ];
    DataFrame::new(rows.len(), cols)
}

/// `phases` with no rows (its rows are built by `columns::Phases`).
pub fn phases_empty() -> PolarsResult<DataFrame> {
    crate::columns::Phases::new(&crate::Columns::all()).finish()
}

pub fn events(rows: &[EventRow]) -> PolarsResult<DataFrame> {
    let cols = vec![
        text(rows, "run_id", |r| Some(&r.run_id)),
        text(rows, "loop", |r| Some(&r.loop_name)),
        uint(rows, "seq", |r| r.seq),
        time(rows, "ts", |r| r.ts)?,
        text(rows, "dialect", |r| Some(r.dialect)),
        text(rows, "event", |r| Some(&r.event)),
        uint(rows, "iteration", |r| r.iteration),
        text(rows, "phase", |r| r.phase.as_deref()),
        text(rows, "step", |r| r.step.as_deref()),
        text(rows, "status", |r| r.status.as_deref()),
        text(rows, "payload", |r| r.payload.as_deref()),
        uint(rows, "line", |r| Some(r.line)),
        text(rows, "source", |r| Some(&r.source)),
        day(rows, |r| r.day)?,
    ];
    DataFrame::new(rows.len(), cols)
}

/// The parts one after the other (`empty` when there are none), as chunks of one frame: no
/// copy (a copy into one chunk would double the peak memory).
fn stacked(parts: &[DataFrame], empty: DataFrame) -> PolarsResult<DataFrame> {
    let mut all = empty;
    for p in parts {
        all.vstack_mut(p)?;
    }
    Ok(all)
}

/// The three tables, by name.
pub struct Tables {
    pub runs: DataFrame,
    pub phases: DataFrame,
    pub events: DataFrame,
}

impl Tables {
    pub fn of(c: &crate::Collected) -> PolarsResult<Tables> {
        Ok(Tables {
            runs: runs(&c.runs)?,
            phases: stacked(&c.phases, phases_empty()?)?,
            events: stacked(&c.events, events(&[])?)?,
        })
    }

    pub fn get(&self, name: &str) -> Option<&DataFrame> {
        match name {
            "runs" => Some(&self.runs),
            "phases" => Some(&self.phases),
            "events" => Some(&self.events),
            _ => None,
        }
    }
}
