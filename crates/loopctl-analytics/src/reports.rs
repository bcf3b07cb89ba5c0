//! The built-in reports (docs/analytics.md, "Reports") and `--by` grouping, over the tables.

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::needs::{Columns, Needs};
use crate::tables::Tables;

/// Every report, in the order the summary shows them: (name, what it answers).
pub const REPORTS: &[(&str, &str)] = &[
    ("success-rate", "success rate by loop"),
    (
        "iterations",
        "iterations to finish (p50/p90/max) by outcome",
    ),
    ("phase-durations", "phase duration p50/p95/max by phase"),
    (
        "flaky-phases",
        "retries and failures by phase, flakiest first",
    ),
    ("reasons", "exit reasons of runs and stop reasons of phases"),
    (
        "scores",
        "score per iteration number across runs (mean, p50, spread)",
    ),
    (
        "first-pass",
        "time and iterations to the first passing evaluation, by loop",
    ),
    ("stagnation", "stagnation verdicts by detector and loop"),
    ("cost", "tokens and cost by loop and day"),
    ("slowest", "the ten slowest runs"),
];

fn q(c: &str, p: f64) -> Expr {
    col(c).quantile(lit(p), QuantileMethod::Linear)
}

fn count_true(e: Expr) -> Expr {
    e.cast(DataType::UInt64).sum()
}

fn desc(cols: &[&str], descending: &[bool]) -> (Vec<PlSmallStr>, SortMultipleOptions) {
    (
        cols.iter().map(|c| (*c).into()).collect(),
        SortMultipleOptions::default()
            .with_order_descending_multi(descending.to_vec())
            .with_nulls_last(true)
            .with_maintain_order(true),
    )
}

fn sorted(lf: LazyFrame, cols: &[&str], descending: &[bool]) -> LazyFrame {
    let (c, o) = desc(cols, descending);
    lf.sort(c, o)
}

/// What `aggregate` reads for one report (`Some(name)`), a `--by` grouping, or the summary
/// (neither): the phases table only for the reports over phases, the stagnation verdicts and
/// the phases' scores only for the reports on them; a column `wheres` filters on is read.
pub fn needs(report: Option<&str>, by: &[String], wheres: &[(String, String)]) -> Needs {
    let mut n = match (report, table_for(by)) {
        (None, "runs") if !by.is_empty() => Needs {
            runs: Some(Columns::all()),
            phases: None,
            events: None,
        },
        (None, "events") => Needs::all(),
        (None, _) => Needs::runs_and_phases(),
        (Some(r), _) => {
            let Ok(empty) = Tables::empty() else {
                return Needs::runs_and_phases();
            };
            let runs = match r {
                "stagnation" => Columns::all(),
                _ => Columns::all_but(&empty.runs, &["stagnation"]),
            };
            let phases = match r {
                "scores" => Some(Columns::all()),
                "phase-durations" | "flaky-phases" | "reasons" => {
                    Some(Columns::all_but(&empty.phases, &["score", "passed"]))
                }
                _ => None,
            };
            Needs {
                runs: Some(runs),
                phases,
                events: None,
            }
        }
    };
    for (k, _) in wheres {
        n.runs = n.runs.map(|c| c.with(k));
        n.phases = n.phases.map(|c| c.with(k));
    }
    n
}

/// Report `name` over the tables; `None` for a name that is not a report.
pub fn report(t: &Tables, name: &str) -> Option<PolarsResult<DataFrame>> {
    let runs = || t.runs.clone().lazy();
    let phases = || t.phases.clone().lazy();
    let lf = match name {
        "success-rate" => {
            let lf = runs().group_by([col("loop")]).agg([
                len().cast(DataType::UInt64).alias("runs"),
                count_true(col("status").neq(lit("running"))).alias("ended"),
                count_true(col("passed")).alias("passed"),
            ]);
            let rate = (col("passed").cast(DataType::Float64)
                / col("ended").cast(DataType::Float64))
            .alias("success_rate");
            sorted(lf.with_column(rate), &["loop"], &[false])
        }
        "iterations" => sorted(
            runs().group_by([col("status")]).agg([
                len().cast(DataType::UInt64).alias("runs"),
                q("iterations", 0.5).alias("p50"),
                q("iterations", 0.9).alias("p90"),
                col("iterations").max().alias("max"),
            ]),
            &["status"],
            &[false],
        ),
        "phase-durations" => sorted(
            phases()
                .filter(col("duration_ms").is_not_null())
                .group_by([col("phase")])
                .agg([
                    len().cast(DataType::UInt64).alias("attempts"),
                    q("duration_ms", 0.5).alias("p50_ms"),
                    q("duration_ms", 0.95).alias("p95_ms"),
                    col("duration_ms").max().alias("max_ms"),
                ]),
            &["phase"],
            &[false],
        ),
        "flaky-phases" => {
            let lf = phases().group_by([col("phase")]).agg([
                len().cast(DataType::UInt64).alias("attempts"),
                count_true(col("attempt").gt(lit(1u64))).alias("retries"),
                count_true(col("outcome").eq(lit("failed"))).alias("failures"),
            ]);
            let rate = (col("failures").cast(DataType::Float64)
                / col("attempts").cast(DataType::Float64))
            .alias("failure_rate");
            sorted(
                lf.with_column(rate),
                &["failures", "retries", "phase"],
                &[true, true, false],
            )
        }
        "reasons" => {
            let of = |lf: LazyFrame, c: &str, kind: &str| {
                lf.filter(col(c).is_not_null())
                    .group_by([col(c).alias("reason")])
                    .agg([len().cast(DataType::UInt64).alias("count")])
                    .select([lit(kind).alias("kind"), col("reason"), col("count")])
            };
            let both = concat(
                [
                    of(runs(), "exit_reason", "exit"),
                    of(phases(), "stop_reason", "stop"),
                ],
                UnionArgs::default(),
            );
            match both {
                Ok(lf) => sorted(lf, &["kind", "count", "reason"], &[false, true, false]),
                Err(e) => return Some(Err(e)),
            }
        }
        "scores" => sorted(
            phases()
                .filter(col("score").is_not_null())
                .group_by_stable([col("source"), col("run_id"), col("iteration")])
                .agg([col("score").last()])
                .group_by([col("iteration")])
                .agg([
                    len().cast(DataType::UInt64).alias("runs"),
                    col("score").mean().alias("mean"),
                    q("score", 0.5).alias("p50"),
                    col("score").std(1).alias("std"),
                    col("score").min().alias("min"),
                    col("score").max().alias("max"),
                ]),
            &["iteration"],
            &[false],
        ),
        "first-pass" => sorted(
            runs()
                .filter(col("first_pass_iteration").is_not_null())
                .group_by([col("loop")])
                .agg([
                    len().cast(DataType::UInt64).alias("runs"),
                    q("first_pass_iteration", 0.5).alias("iterations_p50"),
                    q("first_pass_iteration", 0.9).alias("iterations_p90"),
                    col("first_pass_iteration").max().alias("iterations_max"),
                    q("first_pass_ms", 0.5).alias("ms_p50"),
                    q("first_pass_ms", 0.9).alias("ms_p90"),
                    col("first_pass_ms").max().alias("ms_max"),
                ]),
            &["loop"],
            &[false],
        ),
        "stagnation" => return Some(stagnation(&t.runs)),
        "cost" => sorted(
            runs().group_by([col("loop"), col("day")]).agg([
                len().cast(DataType::UInt64).alias("runs"),
                known_token_sum("input_tokens"),
                known_token_sum("output_tokens"),
                known_token_sum("cache_read_tokens"),
                known_token_sum("cache_creation_tokens"),
                known_sum("cost_usd"),
            ]),
            &["loop", "day"],
            &[false, false],
        ),
        "slowest" => sorted(runs(), &["duration_ms", "run_id"], &[true, false])
            .limit(10)
            .select([
                col("run_id"),
                col("loop"),
                col("status"),
                col("started"),
                col("duration_ms"),
                col("iterations"),
                col("source"),
            ]),
        _ => return None,
    };
    Some(lf.collect())
}

/// Runs per triggered detector and loop (a run can trigger several).
fn stagnation(runs: &DataFrame) -> PolarsResult<DataFrame> {
    let detectors = runs.column("stagnation")?.str()?;
    let loops = runs.column("loop")?.str()?;
    let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (d, l) in detectors.iter().zip(loops.iter()) {
        let (Some(d), Some(l)) = (d, l) else { continue };
        for one in d.split(',') {
            *counts.entry((one.to_string(), l.to_string())).or_default() += 1;
        }
    }
    let (keys, n): (Vec<_>, Vec<u64>) = counts.into_iter().unzip();
    let (det, lp): (Vec<String>, Vec<String>) = keys.into_iter().unzip();
    DataFrame::new(
        n.len(),
        vec![
            Column::new("detector".into(), det),
            Column::new("loop".into(), lp),
            Column::new("runs".into(), n),
        ],
    )
}

/// The keys `--by` groups on.
pub const KEYS: &[&str] = &[
    "loop",
    "phase",
    "status",
    "exit_reason",
    "day",
    "week",
    "model",
    "event",
];

/// The table `--by` keys group: `events` when one is `event`, `phases` when one is `phase`,
/// else `runs`.
pub fn table_for(by: &[String]) -> &'static str {
    if by.iter().any(|k| k == "event") {
        "events"
    } else if by.iter().any(|k| k == "phase") {
        "phases"
    } else {
        "runs"
    }
}

/// `week` as ISO year and week (`2026-W47`), from the `day` column.
fn with_week(lf: LazyFrame, by: &[String]) -> LazyFrame {
    if !by.iter().any(|k| k == "week") {
        return lf;
    }
    let week = col("day").map(
        |c| {
            let days = c.cast(&DataType::Int32)?;
            let out: StringChunked = days.i32()?.iter().map(|d| d.map(iso_week)).collect();
            Ok(out.with_name("week".into()).into_column())
        },
        |_, f| Ok(Field::new(f.name().clone(), DataType::String)),
    );
    lf.with_column(week.alias("week"))
}

/// ISO 8601 week of a day since 1970-01-01, as `YYYY-Www`.
pub fn iso_week(days: i32) -> String {
    // 1970-01-01 was a Thursday; weekday 1 = Monday.
    let weekday = (days + 3).rem_euclid(7) + 1;
    let thursday = days - weekday + 4;
    let (year, _, _) = civil(thursday);
    let jan1 = days_from_civil(year, 1, 1);
    let week = (thursday - jan1) / 7 + 1;
    format!("{year}-W{week:02}")
}

/// (year, month, day) of a day since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil(days: i32) -> (i32, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    ((if m <= 2 { y + 1 } else { y }) as i32, m, d)
}

pub fn days_from_civil(y: i32, m: u32, d: u32) -> i32 {
    let y = if m <= 2 { y - 1 } else { y } as i64;
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe - 719_468) as i32
}

/// Groups the table the keys name (`table_for`) by them, with its measures.
pub fn aggregate(t: &Tables, by: &[String]) -> PolarsResult<DataFrame> {
    let table = table_for(by);
    let df = t.get(table).cloned().unwrap_or_default();
    for k in by {
        if k != "week" && df.column(k).is_err() {
            polars_bail!(ColumnNotFound: "--by {k}: the {table} table has no such column (it has: {})",
                df.get_column_names().iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", "));
        }
    }
    let keys: Vec<Expr> = by.iter().map(|k| col(k.as_str())).collect();
    let measures = match table {
        "runs" => vec![
            len().cast(DataType::UInt64).alias("runs"),
            count_true(col("status").neq(lit("running"))).alias("ended"),
            count_true(col("passed")).alias("passed"),
            // Here, not added afterwards: the columns (and --json's keys) follow this order.
            (count_true(col("passed")).cast(DataType::Float64)
                / count_true(col("status").neq(lit("running"))).cast(DataType::Float64))
            .alias("success_rate"),
            col("iterations").mean().alias("iterations_mean"),
            q("duration_ms", 0.5).alias("duration_p50_ms"),
            q("duration_ms", 0.95).alias("duration_p95_ms"),
            known_token_sum("input_tokens"),
            known_token_sum("output_tokens"),
            known_sum("cost_usd"),
        ],
        "phases" => vec![
            len().cast(DataType::UInt64).alias("attempts"),
            count_true(col("attempt").gt(lit(1u64))).alias("retries"),
            count_true(col("outcome").eq(lit("failed"))).alias("failures"),
            q("duration_ms", 0.5).alias("duration_p50_ms"),
            q("duration_ms", 0.95).alias("duration_p95_ms"),
            col("duration_ms").max().alias("duration_max_ms"),
            known_token_sum("input_tokens"),
            known_token_sum("output_tokens"),
            known_sum("cost_usd"),
        ],
        _ => vec![
            len().cast(DataType::UInt64).alias("events"),
            col("run_id")
                .n_unique()
                .cast(DataType::UInt64)
                .alias("runs"),
        ],
    };
    let lf = with_week(df.lazy(), by).group_by(keys).agg(measures);
    let names: Vec<&str> = by.iter().map(String::as_str).collect();
    sorted(lf, &names, &vec![false; names.len()]).collect()
}

/// `known_sum` of a count, saturating at u64::MAX as replay's totals do. Summed as floats:
/// polars' integer sum wraps (and panics in a debug build), and every branch of a `when` is
/// evaluated. Exact below 2^53 (nine quadrillion tokens), and saturating above u64::MAX.
fn known_token_sum(name: &str) -> Expr {
    let max = u64::MAX;
    let sum = col(name).cast(DataType::Float64).sum();
    when(col(name).count().eq(lit(0u32)))
        .then(lit(Null {}).cast(DataType::UInt64))
        .when(sum.clone().gt_eq(lit(max as f64)))
        .then(lit(max))
        .otherwise(sum.cast(DataType::UInt64))
        .alias(name)
}

/// The sum of `name`, null (not 0) where no row of the group knows it: logs without usage
/// records say nothing about tokens or cost.
fn known_sum(name: &str) -> Expr {
    when(col(name).count().gt(lit(0u32)))
        .then(col(name).sum())
        .otherwise(lit(Null {}))
        .alias(name)
}
