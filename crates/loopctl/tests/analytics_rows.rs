//! The analytics' tables agree with the other readers of the same log: a phase's score, tokens
//! and cost as postmortem and the metrics find them.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn loopctl() -> Command {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    c.env_remove("LOOPCTL_ROOT").env("NO_COLOR", "1");
    c
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

fn query(sql: &str, path: &Path) -> Vec<Value> {
    let out = loopctl()
        .args(["query", sql, "--json"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// aif-loop's EVALUATE (B) begins at the very event that scored EVALUATE (A): each keeps its
/// own score.
#[test]
fn each_quality_phase_s_evaluate_step_keeps_its_own_score() {
    let rows = query(
        "select iteration, quality_phase, score from phases where phase = 'EVALUATE' order by iteration, quality_phase",
        &fixture("aif-loop-clean"),
    );
    let got: Vec<(u64, &str, Option<f64>)> = rows
        .iter()
        .map(|r| {
            (
                r["iteration"].as_u64().unwrap(),
                r["quality_phase"].as_str().unwrap(),
                r["score"].as_f64(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, "A", Some(0.444)),
            (2, "A", Some(0.85)),
            (2, "B", Some(0.93))
        ]
    );
}

/// Tokens at the top of a native phase_finished, cache tokens and cost under Claude's names:
/// the phases and runs tables, postmortem and the metrics read the same numbers.
#[test]
fn usage_reads_the_same_in_the_tables_postmortem_and_the_metrics() {
    let native = query(
        "select phase, input_tokens from phases order by started limit 1",
        &fixture("healthy-native"),
    );
    assert_eq!(native[0]["input_tokens"].as_u64(), Some(2000));

    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("history.jsonl");
    let lines = [
        r#"{"v":1,"seq":1,"ts":"2026-01-01T00:00:00Z","run_id":"u-20260101-000000","event":"run_started"}"#,
        r#"{"v":1,"seq":2,"ts":"2026-01-01T00:00:01Z","run_id":"u-20260101-000000","event":"phase_started","iteration":1,"step":"work"}"#,
        r#"{"v":1,"seq":3,"ts":"2026-01-01T00:00:09Z","run_id":"u-20260101-000000","event":"phase_finished","iteration":1,"step":"work","payload":{"stop_reason":"end_turn","total_cost_usd":0.3,"usage":{"input_tokens":1000,"output_tokens":200,"cache_read_input_tokens":4000,"cache_creation_input_tokens":600}}}"#,
        r#"{"v":1,"seq":4,"ts":"2026-01-01T00:00:10Z","run_id":"u-20260101-000000","event":"stopped","payload":{"exit_reason":"marker"}}"#,
    ];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let runs = query(
        "select cache_read_tokens, cache_creation_tokens, cost_usd from runs",
        &log,
    );
    let prom = loopctl()
        .args(["export", "prometheus"])
        .arg(&log)
        .output()
        .unwrap();
    let prom = String::from_utf8(prom.stdout).unwrap();
    let series = |ty: &str| format!("loopctl_tokens_total{{loop=\"u\",type=\"{ty}\"}}");
    assert_eq!(
        runs[0]["cache_read_tokens"].as_f64(),
        metric(&prom, &series("cache_read"))
    );
    assert_eq!(
        runs[0]["cache_creation_tokens"].as_f64(),
        metric(&prom, &series("cache_creation"))
    );
    assert_eq!(
        runs[0]["cost_usd"].as_f64(),
        metric(&prom, "loopctl_cost_usd_total{loop=\"u\"}")
    );
    assert_eq!(runs[0]["cost_usd"].as_f64(), Some(0.3));
    let pm = loopctl()
        .args(["postmortem", "--json"])
        .arg(&log)
        .output()
        .unwrap();
    let pm: Value = serde_json::from_slice(&pm.stdout).unwrap();
    assert_eq!(
        pm["usage"]["total"]["cache_read_tokens"].as_u64(),
        Some(4000)
    );
}

/// Every `loop` value a Prometheus export of `path` labels series with.
fn loop_labels(path: &Path) -> std::collections::BTreeSet<String> {
    let out = loopctl()
        .args(["export", "prometheus"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .split("loop=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next().map(str::to_string))
        .collect()
}

/// A run's loop is the metrics' `loop` label (docs/metrics.md): an Avenor run's bare id is
/// never a loop, the log's name is; stamped ids keep their alias.
#[test]
fn each_table_names_a_run_s_loop_as_the_metrics_label_it() {
    for name in [
        "avenor-loop",
        "avenor-abort",
        "avenor-session",
        "native-clean",
        "merged-runs",
    ] {
        let path = fixture(name);
        let want = loop_labels(&path);
        assert!(!want.is_empty(), "{name}: no loop label");
        for table in ["runs", "phases", "events"] {
            let rows = query(&format!("select distinct loop from {table}"), &path);
            let got: std::collections::BTreeSet<String> = rows
                .iter()
                .map(|r| r["loop"].as_str().unwrap().to_string())
                .collect();
            // avenor-session has no phase.
            if table == "runs" || !got.is_empty() {
                assert_eq!(got, want, "{name}: {table}");
            }
        }
    }
    let rows = query("select run_id, loop from runs", &fixture("avenor-loop"));
    assert_eq!(
        rows,
        [serde_json::json!({"run_id": "a3f9c2d1", "loop": "avenor-loop"})]
    );
}
