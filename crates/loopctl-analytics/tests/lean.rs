//! The lean fold (`lean::Lean`, used when a query reads no stagnation verdict and no phase
//! score) against the full trace, its oracle: the `runs` and `phases` tables from both are
//! equal on the fixtures, the corpus and generated logs of every dialect.

use std::path::{Path, PathBuf};

use loopctl_analytics::{Columns, Needs, Options, Tables, collect, logs_of};
use polars::prelude::*;
use proptest::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tables(paths: &[PathBuf], needs: Needs) -> Tables {
    let (logs, _) = logs_of(paths);
    let opts = Options {
        read: Default::default(),
        needs,
        stagnation: Default::default(),
    };
    Tables::of(&collect(&logs, &opts, |_, _| {}).unwrap()).unwrap()
}

/// Every column but those only the full trace gives (`stagnation`, `score`, `passed`).
fn lean_needs() -> Needs {
    let empty = Tables::empty().unwrap();
    let but = |df: &DataFrame, skip: &[&str]| {
        let names: Vec<String> = df
            .get_column_names()
            .iter()
            .map(|n| n.to_string())
            .filter(|n| !skip.contains(&n.as_str()))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        Some(Columns::only(&names))
    };
    Needs {
        runs: but(&empty.runs, &["stagnation"]),
        phases: but(&empty.phases, &["score", "passed"]),
        events: None,
    }
}

/// The lean tables equal the full ones but for the columns the lean fold leaves null.
fn assert_lean_is_full(paths: &[PathBuf]) -> usize {
    let full = tables(paths, Needs::all());
    let lean = tables(paths, lean_needs());
    let runs = |t: &Tables| t.runs.drop("stagnation").unwrap();
    let phases = |t: &Tables| t.phases.drop_many(["score", "passed"]);
    assert!(
        runs(&lean).equals_missing(&runs(&full)),
        "runs of {paths:?}:\n{}\nwanted\n{}",
        runs(&lean),
        runs(&full)
    );
    assert!(
        phases(&lean).equals_missing(&phases(&full)),
        "phases of {paths:?}:\n{}\nwanted\n{}",
        phases(&lean),
        phases(&full)
    );
    // Without the phases table no step is derived; the runs are the same.
    let runs_only = tables(
        paths,
        Needs {
            phases: None,
            ..lean_needs()
        },
    );
    assert!(runs(&runs_only).equals_missing(&runs(&full)), "{paths:?}");
    assert_eq!(runs_only.phases.height(), 0);
    full.phases.height()
}

#[test]
fn lean_tables_equal_the_traces_on_the_fixtures() {
    let mut phases = 0;
    for e in std::fs::read_dir(repo().join("fixtures"))
        .unwrap()
        .flatten()
    {
        if e.path().is_dir() {
            phases += assert_lean_is_full(&[e.path()]);
        }
    }
    assert!(phases > 0);
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn lean_tables_equal_the_traces_on_the_corpus() {
    let Some(shared) = loopctl_tests::shared("the lean fold over the corpus") else {
        return;
    };
    let corpus = shared.join("corpus");
    let aif = corpus.join("aif-loop/vedo-hub");
    assert!(assert_lean_is_full(&[aif, corpus.join("avenor/accumulate.ndjson")]) > 0);
}

/// One generated line: events of the three dialects' shapes, of two runs and none, with
/// repeated `seq`, times going back or missing, and the payload keys the trace reads.
fn line() -> impl Strategy<Value = String> {
    let event = prop::sample::select(vec![
        "run_started",
        "run_resumed",
        "phase_started",
        "phase_finished",
        "phase_error",
        "phase_switched",
        "phase_retry",
        "evaluation_done",
        "stopped",
        "failed",
        "session_ended",
        "plan_created",
        "artifact_created",
        "avenor.phase.started",
        "avenor.phase.finished",
    ]);
    let opt = |v: Vec<&'static str>| prop::option::of(prop::sample::select(v));
    let payload = prop::collection::vec(
        prop::sample::select(vec![
            r#""attempt":2"#,
            r#""duration_ms":1500"#,
            r#""to_phase":"B""#,
            r#""to_phase":"""#,
            r#""exit_code":1"#,
            r#""exit_code":0"#,
            r#""stop_reason":"max_tokens""#,
            r#""stop_reason":"end_turn""#,
            r#""error":"boom""#,
            r#""kind":"loop""#,
            r#""phase":"review""#,
            r#""name":"build""#,
            r#""passed":true"#,
            r#""passed":false"#,
            r#""score":0.5"#,
            r#""marker":{"directive":"DONE","label":"all green"}"#,
            r#""usage":{"input_tokens":10,"output_tokens":5,"cost_usd":0.01,"model":"m"}"#,
            r#""tokens_in":7"#,
        ]),
        0..4,
    );
    (
        event,
        opt(vec!["r1", "r2"]),
        opt(vec!["PLAN", "EVALUATE", "build", "review"]),
        opt(vec!["A", "B", ""]),
        prop::option::of(0u64..4),
        prop::option::of(0u64..6),
        prop::option::of(0i64..50),
        payload,
        any::<bool>(),
    )
        .prop_map(|(ev, run, step, phase, it, seq, sec, payload, v)| {
            let mut f = Vec::new();
            if v {
                f.push(r#""v":1"#.to_string());
            }
            if let Some(s) = seq {
                f.push(format!(r#""seq":{s}"#));
            }
            if let Some(s) = sec {
                f.push(format!(r#""ts":"2026-11-21T10:00:{s:02}.000Z""#));
            }
            if let Some(r) = run {
                f.push(format!(r#""run_id":"{r}""#));
            }
            f.push(format!(r#""event":"{ev}""#));
            if let Some(i) = it {
                f.push(format!(r#""iteration":{i}"#));
            }
            if let Some(p) = phase {
                f.push(format!(r#""phase":"{p}""#));
            }
            if let Some(s) = step {
                f.push(format!(r#""step":"{s}""#));
            }
            let mut keys = std::collections::BTreeMap::new();
            for kv in payload {
                keys.insert(kv.split(':').next().unwrap_or_default(), kv);
            }
            let body: Vec<&str> = keys.values().copied().collect();
            f.push(format!(r#""payload":{{{}}}"#, body.join(",")));
            format!("{{{}}}", f.join(","))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn lean_tables_equal_the_traces_on_generated_logs(
        lines in prop::collection::vec(line(), 1..60)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("history.jsonl");
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
        assert_lean_is_full(&[log]);
    }
}
