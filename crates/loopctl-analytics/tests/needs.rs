//! Building only what a query reads (`Needs`): every query gives the rows it gives over the
//! whole tables, and what it does not read is really skipped.

use std::path::{Path, PathBuf};

use loopctl_analytics::{Needs, Options, Tables, collect, logs_of, query};
use polars::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every fixture log, and the corpus when ../shared is there.
fn inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "agents"))
        .collect();
    v.sort();
    if let Some(shared) = loopctl_tests::shared("the corpus in the needs tests") {
        let corpus = shared.join("corpus");
        v.push(corpus.join("aif-loop/vedo-hub"));
        v.push(corpus.join("avenor/accumulate.ndjson"));
    }
    v
}

fn tables(needs: Needs) -> Tables {
    let (logs, _) = logs_of(&inputs());
    let opts = Options {
        read: Default::default(),
        needs,
        stagnation: Default::default(),
    };
    Tables::of(&collect(&logs, &opts, |_, _| {}).unwrap()).unwrap()
}

const QUERIES: &[&str] = &[
    // Job D/E of bench/compare.sh.
    "WITH r AS (SELECT loop, count(*) AS runs, avg(CAST(passed AS DOUBLE)) AS success_rate FROM runs GROUP BY loop), p AS (SELECT loop, quantile_cont(duration_ms, 0.95) AS p95_ms FROM phases GROUP BY loop) SELECT r.loop, r.runs, r.success_rate, p.p95_ms FROM r JOIN p ON r.loop = p.loop ORDER BY r.loop",
    "SELECT * FROM runs ORDER BY source, run_id",
    "SELECT * FROM phases ORDER BY source, run_id, started, phase, attempt, iteration",
    "SELECT loop, stagnation, count(*) AS n FROM runs GROUP BY loop, stagnation ORDER BY loop, stagnation",
    "SELECT run_id, phase, iteration, attempt, score, passed FROM phases ORDER BY run_id, phase, iteration, attempt, started",
    "SELECT p.phase, count(*) AS n FROM phases p JOIN runs r ON p.run_id = r.run_id WHERE r.stagnation IS NULL AND p.passed GROUP BY p.phase ORDER BY p.phase",
    "SELECT count(*) AS n FROM phases",
    "SELECT event, count(*) AS n FROM events GROUP BY event ORDER BY event",
    "SELECT loop, first_pass_iteration, first_pass_ms FROM runs ORDER BY source, run_id",
];

#[test]
fn every_query_gives_over_what_it_needs_what_it_gives_over_everything() {
    let all = tables(Needs::all());
    for q in QUERIES {
        let needs = Needs::of_sql(q).unwrap();
        let some = tables(needs.clone());
        let want = query(&all, q).unwrap();
        let got = query(&some, q).unwrap();
        assert!(want.height() > 0, "{q}: no rows, a weak test");
        assert!(
            got.equals_missing(&want),
            "{q} with {needs:?}:\n{got}\nwanted\n{want}"
        );
    }
}

/// Equal frames, floats to 1e-9 (polars' parallel group-by sums in any order).
fn same(a: &DataFrame, b: &DataFrame) -> bool {
    a.get_column_names() == b.get_column_names()
        && a.height() == b.height()
        && a.columns().iter().zip(b.columns()).all(|(x, y)| {
            if x.dtype() != &DataType::Float64 {
                return x
                    .as_materialized_series()
                    .equals_missing(y.as_materialized_series());
            }
            let (x, y) = (x.f64().unwrap(), y.f64().unwrap());
            x.iter().zip(y.iter()).all(|p| match p {
                (Some(x), Some(y)) => {
                    (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * x.abs().max(1.0)
                }
                (x, y) => x.is_none() && y.is_none(),
            })
        })
}

fn non_null(df: &DataFrame, column: &str) -> usize {
    let c = df.column(column).unwrap();
    c.len() - c.null_count()
}

#[test]
fn what_a_query_does_not_read_is_not_built() {
    let all = tables(Needs::all());
    // The fixtures hold stagnating runs, scored phases and events: the skips below skip work.
    assert!(non_null(&all.runs, "stagnation") > 0);
    assert!(non_null(&all.phases, "score") > 0);
    assert!(non_null(&all.phases, "passed") > 0);
    assert!(all.events.height() > 0 && all.phases.height() > 0);

    let de = tables(Needs::of_sql(QUERIES[0]).unwrap());
    assert_eq!(non_null(&de.runs, "stagnation"), 0, "stagnation assessed");
    assert_eq!(non_null(&de.phases, "score"), 0, "scores matched to phases");
    assert_eq!(
        non_null(&de.phases, "passed"),
        0,
        "scores matched to phases"
    );
    assert_eq!(de.events.height(), 0, "events built");
    assert_eq!(de.phases.height(), all.phases.height());
    assert_eq!(de.runs.height(), all.runs.height());

    let runs_only = tables(Needs::of_sql("SELECT loop, count(*) FROM runs GROUP BY loop").unwrap());
    assert_eq!(runs_only.phases.height(), 0, "phases built");
    assert_eq!(runs_only.runs.height(), all.runs.height());
}

#[test]
fn every_report_gives_over_what_it_needs_what_it_gives_over_everything() {
    let all = tables(Needs::all());
    for (name, _) in loopctl_analytics::REPORTS {
        let needs = loopctl_analytics::reports::needs(Some(name), &[], &[]);
        let some = tables(needs.clone());
        let want = loopctl_analytics::report(&all, name).unwrap().unwrap();
        let got = loopctl_analytics::report(&some, name).unwrap().unwrap();
        assert!(want.height() > 0, "{name}: no rows, a weak test");
        assert!(
            same(&got, &want),
            "{name} with {needs:?}:\n{}\nwanted\n{}",
            loopctl_analytics::format::csv(&got),
            loopctl_analytics::format::csv(&want)
        );
    }
    // A report reads only its tables and costly columns; a filter's column is read.
    let n = loopctl_analytics::reports::needs(Some("success-rate"), &[], &[]);
    assert!(n.phases.is_none() && n.events.is_none() && !n.runs_reads("stagnation"));
    let n = loopctl_analytics::reports::needs(Some("phase-durations"), &[], &[]);
    assert!(n.phases.is_some() && !n.phases_reads("score") && !n.runs_reads("stagnation"));
    let wheres = [("stagnation".to_string(), "plateau".to_string())];
    let n = loopctl_analytics::reports::needs(Some("success-rate"), &[], &wheres);
    assert!(n.runs_reads("stagnation"));
    let n = loopctl_analytics::reports::needs(None, &[], &[]);
    assert!(n.runs_reads("stagnation") && n.phases_reads("score") && n.events.is_none());
}
