//! The tables' schema against docs/analytics.md, agent usage read from `phase_finished`, and
//! the Parquet export read back (by polars, and by DuckDB where it is installed).

use std::path::{Path, PathBuf};

use loopctl_analytics::{Collected, ExportOptions, Options, Tables, collect, export, logs_of};
use polars::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn options() -> Options {
    Options {
        read: Default::default(),
        needs: loopctl_analytics::Needs::all(),
        stagnation: Default::default(),
    }
}

fn read(paths: &[PathBuf]) -> Collected {
    let (logs, bad) = logs_of(paths);
    assert!(bad.is_empty(), "{bad:?}");
    collect(&logs, &options(), |_, _| {}).unwrap()
}

/// The `| column | type | meaning |` rows under `### NAME` in docs/analytics.md.
fn documented(doc: &str, table: &str) -> Vec<(String, String)> {
    let start = doc
        .find(&format!("### {table}\n"))
        .unwrap_or_else(|| panic!("docs/analytics.md has no section ### {table}"));
    let rest = &doc[start..];
    let rest = &rest[..rest[4..].find("\n#").map_or(rest.len(), |i| i + 4)];
    rest.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| column") && !l.starts_with("| ---"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].to_string(), cells[2].to_string())
        })
        .collect()
}

#[test]
fn every_table_has_the_columns_and_types_the_doc_lists() {
    let doc = std::fs::read_to_string(repo().join("docs/analytics.md")).unwrap();
    let c = read(&[repo().join("fixtures/healthy-native")]);
    let t = Tables::of(&c).unwrap();
    for name in ["runs", "phases", "events"] {
        let df = t.get(name).unwrap();
        let actual: Vec<(String, String)> = df
            .schema()
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_string()))
            .collect();
        assert_eq!(actual, documented(&doc, name), "table {name}");
    }
}

const USAGE_LOG: &str = r#"{"v":1,"seq":1,"ts":"2026-11-21T10:00:00.000Z","run_id":"fix-20261121-100000","event":"run_started","payload":{"max_iterations":2}}
{"v":1,"seq":2,"ts":"2026-11-21T10:00:01.000Z","run_id":"fix-20261121-100000","event":"phase_started","iteration":1,"step":"build","payload":{"attempt":1,"kind":"loop"}}
{"v":1,"seq":3,"ts":"2026-11-21T10:01:01.000Z","run_id":"fix-20261121-100000","event":"phase_finished","iteration":1,"step":"build","payload":{"attempt":1,"kind":"loop","duration_ms":60000,"exit_code":0,"stop_reason":"end_turn","usage":{"input_tokens":1234,"output_tokens":567,"cache_read_tokens":89,"cache_creation_tokens":0,"cost_usd":0.0123,"turns":3,"model":"claude-sonnet-4-5"}}}
{"v":1,"seq":4,"ts":"2026-11-21T10:01:02.000Z","run_id":"fix-20261121-100000","event":"phase_started","iteration":1,"step":"review","payload":{"attempt":1,"kind":"loop"}}
{"v":1,"seq":5,"ts":"2026-11-21T10:01:12.000Z","run_id":"fix-20261121-100000","event":"phase_finished","iteration":1,"step":"review","payload":{"attempt":1,"kind":"loop","duration_ms":10000,"exit_code":0,"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5,"cached_input_tokens":7,"turns":2,"model":"gpt-5-codex"}}}
{"v":1,"seq":6,"ts":"2026-11-21T10:01:13.000Z","run_id":"fix-20261121-100000","event":"stopped","payload":{"exit_reason":"marker"}}
"#;

fn u64s(df: &DataFrame, c: &str) -> Vec<Option<u64>> {
    df.column(c).unwrap().u64().unwrap().iter().collect()
}

fn f64s(df: &DataFrame, c: &str) -> Vec<Option<f64>> {
    df.column(c).unwrap().f64().unwrap().iter().collect()
}

fn strs(df: &DataFrame, c: &str) -> Vec<Option<String>> {
    df.column(c)
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|s| s.map(str::to_string))
        .collect()
}

#[test]
fn runs_and_phases_carry_the_usage_of_phase_finished() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    std::fs::write(&log, USAGE_LOG).unwrap();
    let t = Tables::of(&read(&[log])).unwrap();
    let p = &t.phases;
    assert_eq!(u64s(p, "input_tokens"), [Some(1234), Some(10)]);
    assert_eq!(u64s(p, "output_tokens"), [Some(567), Some(5)]);
    // Only the contract's names count (`cached_input_tokens` is Codex's own, not the log's).
    assert_eq!(u64s(p, "cache_read_tokens"), [Some(89), None]);
    assert_eq!(u64s(p, "cache_creation_tokens"), [Some(0), None]);
    assert_eq!(f64s(p, "cost_usd"), [Some(0.0123), None]);
    assert_eq!(u64s(p, "turns"), [Some(3), Some(2)]);
    assert_eq!(
        strs(p, "model"),
        [Some("claude-sonnet-4-5".into()), Some("gpt-5-codex".into())]
    );
    let r = &t.runs;
    assert_eq!(u64s(r, "input_tokens"), [Some(1244)]);
    assert_eq!(u64s(r, "output_tokens"), [Some(572)]);
    assert_eq!(u64s(r, "cache_read_tokens"), [Some(89)]);
    assert_eq!(u64s(r, "turns"), [Some(5)]);
    assert_eq!(f64s(r, "cost_usd"), [Some(0.0123)]);
    assert_eq!(strs(r, "model"), [Some("gpt-5-codex".into())]);
    assert_eq!(u64s(r, "duration_ms"), [Some(73_000)]);
    assert_eq!(strs(r, "status"), [Some("completed".into())]);
}

/// Every partition of `table` under `out`, read back with its `day` from the folder name.
fn read_back(out: &Path, table: &str) -> DataFrame {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out.join(table))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    let mut all: Option<DataFrame> = None;
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        let day = name.strip_prefix("day=").unwrap().to_string();
        let file = std::fs::File::open(d.join("part-0.parquet")).unwrap();
        let mut df = ParquetReader::new(file).finish().unwrap();
        let n = df.height();
        let days = Series::new("day".into(), vec![day.as_str(); n])
            .cast(&DataType::Date)
            .unwrap();
        df.with_column(days.into_column()).unwrap();
        all = Some(match all {
            None => df,
            Some(mut a) => {
                a.vstack_mut(&df).unwrap();
                a
            }
        });
    }
    all.unwrap()
}

fn by_day(df: &DataFrame) -> DataFrame {
    df.sort(
        ["day"],
        SortMultipleOptions::default().with_maintain_order(true),
    )
    .unwrap()
}

fn parquet_files(out: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut v = Vec::new();
    for table in ["runs", "phases", "events"] {
        for d in std::fs::read_dir(out.join(table)).unwrap() {
            let f = d.unwrap().path().join("part-0.parquet");
            let m = std::fs::metadata(&f).unwrap().modified().unwrap();
            v.push((f, m));
        }
    }
    v.sort();
    v
}

#[test]
fn the_export_reads_back_as_the_tables_and_a_rerun_rewrites_changed_days_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    for (i, day) in ["21", "22"].iter().enumerate() {
        let dir = root.join(format!("run{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let text = USAGE_LOG
            .replace("2026-11-21", &format!("2026-11-{day}"))
            .replace("fix-20261121", &format!("fix-202611{day}"));
        std::fs::write(dir.join("history.jsonl"), text).unwrap();
    }
    let inputs = vec![
        root.clone(),
        repo().join("fixtures/healthy-native"),
        repo().join("fixtures/aif-drift"),
        repo().join("fixtures/avenor-loop"),
    ];
    let c = read(&inputs);
    let t = Tables::of(&c).unwrap();
    let out = tmp.path().join("lake");
    let first = export(&c, &out, &ExportOptions::default(), |_, _| {}).unwrap();
    assert!(first.unchanged.is_empty());
    for name in ["runs", "phases", "events"] {
        let want = by_day(t.get(name).unwrap());
        let got = read_back(&out, name);
        assert!(
            got.equals_missing(&want),
            "{name} read back differs:\n{got:?}\n{want:?}"
        );
    }
    assert!(out.join("runs/day=2026-11-21/part-0.parquet").is_file());
    assert!(out.join("runs/day=2026-11-22/part-0.parquet").is_file());

    // Same logs again: nothing is written.
    let before = parquet_files(&out);
    let again = export(&read(&inputs), &out, &ExportOptions::default(), |_, _| {}).unwrap();
    assert!(again.written.is_empty(), "{:?}", again.written);
    assert_eq!(parquet_files(&out), before);

    // One run of 2026-11-22 grows: only that day's partitions are rewritten.
    let log = root.join("run1/history.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(r#"{"v":1,"seq":7,"ts":"2026-11-22T10:02:00.000Z","run_id":"fix-20261122-100000","event":"run_resumed","payload":{}}"#);
    text.push('\n');
    std::fs::write(&log, text).unwrap();
    let third = export(&read(&inputs), &out, &ExportOptions::default(), |_, _| {}).unwrap();
    assert!(!third.written.is_empty());
    for f in &third.written {
        assert!(
            f.to_string_lossy().contains("day=2026-11-22"),
            "{} rewritten",
            f.display()
        );
    }
    assert!(
        third
            .unchanged
            .iter()
            .any(|f| f.to_string_lossy().contains("runs/day=2026-11-21"))
    );
    // No temporary file is left beside a partition.
    for (f, _) in parquet_files(&out) {
        let dir = f.parent().unwrap();
        let names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["part-0.parquet"], "{}", dir.display());
    }
}

/// DuckDB reads the export with Hive partitioning: its row counts and totals agree.
#[test]
fn duckdb_reads_the_export_where_installed() {
    let has_duckdb = std::process::Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_duckdb {
        eprintln!(
            "notice: skipping the DuckDB read-back: python3 -c 'import duckdb' fails (pip install duckdb)"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let inputs = [
        repo().join("fixtures/healthy-native"),
        repo().join("fixtures/aif-drift"),
        repo().join("fixtures/merged-runs"),
    ];
    let c = read(&inputs);
    let t = Tables::of(&c).unwrap();
    let out = tmp.path().join("lake");
    export(&c, &out, &ExportOptions::default(), |_, _| {}).unwrap();
    let script = r#"
import duckdb, json, sys
out = sys.argv[1]
res = {}
for t in ["runs", "phases", "events"]:
    q = f"SELECT count(*), count(DISTINCT day) FROM read_parquet('{out}/{t}/*/*.parquet', hive_partitioning=true)"
    res[t] = list(duckdb.sql(q).fetchall()[0])
res["iterations"] = duckdb.sql(f"SELECT sum(iterations) FROM read_parquet('{out}/runs/*/*.parquet', hive_partitioning=true)").fetchall()[0][0]
print(json.dumps(res))
"#;
    let o = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for name in ["runs", "phases", "events"] {
        let df = t.get(name).unwrap();
        let days: std::collections::BTreeSet<_> = df
            .column("day")
            .unwrap()
            .cast(&DataType::Int32)
            .unwrap()
            .i32()
            .unwrap()
            .iter()
            .collect();
        assert_eq!(v[name][0], df.height(), "{name} rows");
        assert_eq!(
            v[name][1].as_u64().unwrap() as usize,
            days.len(),
            "{name} days"
        );
    }
    let its: u64 = u64s(&t.runs, "iterations").iter().flatten().sum();
    assert_eq!(v["iterations"], its);
}

#[test]
fn the_bytes_read_are_the_logs_sizes() {
    let dirs: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("history.jsonl").is_file())
        .collect();
    let c = read(&dirs);
    let sizes: u64 = dirs
        .iter()
        .map(|d| std::fs::metadata(d.join("history.jsonl")).unwrap().len())
        .sum();
    assert!(c.files > 10);
    assert_eq!(c.bytes, sizes);
}

#[test]
fn the_events_table_leaves_out_repeated_seqs_as_replay_and_history_do() {
    // seq-problems repeats seq 5 of its run: replay does not apply it, history does not show it.
    let t = Tables::of(&read(&[repo().join("fixtures/seq-problems")])).unwrap();
    let applied: u64 = u64s(&t.runs, "events").iter().flatten().sum();
    assert_eq!(applied, 9);
    assert_eq!(t.events.height() as u64, applied);
    let seqs = u64s(&t.events, "seq");
    assert_eq!(
        seqs.iter().filter(|s| **s == Some(5)).count(),
        1,
        "{seqs:?}"
    );
}

#[test]
fn token_totals_saturate_in_the_runs_and_the_cost_report() {
    let tmp = tempfile::tempdir().unwrap();
    let usage = |run: &str, seq: u64, n: &str| {
        format!(
            r#"{{"v":1,"seq":{seq},"ts":"2026-03-01T09:00:0{seq}.000Z","run_id":"{run}","event":"usage","payload":{{"input_tokens":{n}}}}}"#
        )
    };
    // A run over u64::MAX by itself (loop a), and two runs of loop b over it together.
    let log = tmp.path().join("tokens.jsonl");
    let lines = [
        usage("a-20260301-090000", 1, "10000000000000000000"),
        usage("a-20260301-090000", 2, "9000000000000000000"),
        usage("b-20260301-090000", 1, "10000000000000000000"),
        usage("b-20260301-100000", 1, "10000000000000000000"),
    ];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let t = Tables::of(&read(&[log])).unwrap();
    let runs = u64s(&t.runs, "input_tokens");
    assert_eq!(
        runs.iter().filter(|n| **n == Some(u64::MAX)).count(),
        1,
        "{runs:?}"
    );
    let cost = loopctl_analytics::report(&t, "cost").unwrap().unwrap();
    let totals = u64s(&cost, "input_tokens");
    assert_eq!(totals, [Some(u64::MAX), Some(u64::MAX)], "{cost:?}");
}
