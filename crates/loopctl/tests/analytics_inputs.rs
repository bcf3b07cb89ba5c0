#![cfg(feature = "analytics")]
//! What `aggregate`, `query` and `export parquet` take and refuse, as the other read commands
//! do: their inputs (a missing path, a log holding no event, a run id), `--where` columns and
//! values, and a reader of stdout that went away.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

mod common;
use common::{json_of, loopctl, run_to};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// `query ... | head -1`: a reader of stdout that went away ends the command quietly with 0,
/// as every read command does. The reader is closed before the command writes, so every
/// write meets EPIPE (no race with `head`).
#[test]
fn a_closed_stdout_ends_the_analytics_commands_quietly_with_0() {
    let clean = fixtures().join("native-clean");
    let clean = clean.to_str().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let lake = lake.path().to_str().unwrap();
    for args in [
        &["query", "SELECT * FROM runs", clean][..],
        &["query", "SELECT * FROM events", "--format", "ndjson", clean],
        &["aggregate", clean],
        &[
            "aggregate",
            "--report",
            "success-rate",
            "--format",
            "csv",
            clean,
        ],
        &["export", "parquet", "--out", lake, clean],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = run_to(args, writer);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("error"), "{args:?}: {err}");
    }
}

/// `--where` on a column the output does not read filters nothing it shows: an error naming
/// the column and listing the usable ones, before any log is read.
#[test]
fn a_where_column_the_output_does_not_read_is_an_error_listing_the_usable_ones() {
    let out = loopctl()
        .args([
            "aggregate",
            "--where",
            "phase=NOPE",
            "--report",
            "success-rate",
        ])
        .arg(fixtures())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"phase\""), "{err}");
    assert!(err.contains("run_id, loop, status"), "{err}");
    assert!(!err.contains("warning"), "logs were read: {err}");
    // The summary reads no events: an events column is refused too.
    let out = loopctl()
        .args(["aggregate", "--where", "event=stopped"])
        .arg(fixtures())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A phases column where phases are what is grouped is a filter.
    let rows = json_of(
        &[
            "aggregate",
            "--by",
            "phase",
            "--where",
            "phase=build",
            "--json",
        ],
        &[&fixtures()],
    );
    let phases: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["build"]);
}

/// A number column is compared as a number: 0.50 is 0.5, 3.0 is 3.
#[test]
fn a_where_compares_as_the_column_s_type() {
    let loops = |w: &str| -> Vec<String> {
        let rows = json_of(
            &["aggregate", "--by", "loop", "--where", w, "--json"],
            &[&fixtures()],
        );
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r["loop"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(loops("last_score=0.50"), ["tu"]);
    assert_eq!(loops("last_score=0.5"), ["tu"]);
    assert_eq!(loops("iterations=3.0"), ["healthy", "stag-a", "stuck"]);
    let out = loopctl()
        .args(["aggregate", "--where", "iterations=three"])
        .arg(fixtures())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("iterations"));
    // A time as the tables print it; a flag as true or false.
    assert_eq!(loops("started=2026-03-01T09:00:00.125Z"), ["native-clean"]);
    assert_eq!(
        loops("started=2026-03-01T09:00:00.125Z").len(),
        loops("started=2026-03-01T10:00:00.125+01:00").len()
    );
    assert!(loops("passed=TRUE").contains(&"native-clean".to_string()));
    assert!(!loops("passed=false").contains(&"native-clean".to_string()));
    for bad in [
        "passed=1",
        "passed=abc",
        "started=xyz",
        "started=2026-03-01",
    ] {
        let out = loopctl()
            .args(["aggregate", "--where", bad])
            .arg(fixtures())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(&format!("--where {bad}")), "{bad}: {err}");
    }
}

/// Inputs as every read command takes them: a log named as FILE that holds no event is said
/// and exit 1 (the output printed first), a path that is no file, folder or run is exit 2,
/// and a run id names its run.
#[test]
fn an_empty_log_is_exit_1_and_a_missing_path_exit_2_for_every_analytics_command() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty.jsonl");
    std::fs::write(&empty, "\n{damaged\n").unwrap();
    let lake = tmp.path().join("lake");
    let lake = lake.to_str().unwrap();
    let commands: [&[&str]; 3] = [
        &["query", "SELECT count(*) AS n FROM runs", "--json"],
        &["aggregate", "--report", "success-rate", "--json"],
        &["export", "parquet", "--json", "--out", lake],
    ];
    for args in commands {
        let out = loopctl().args(args).arg(&empty).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{}: the log holds no event", empty.display())),
            "{args:?}: {err}"
        );
        assert!(
            serde_json::from_slice::<Value>(&out.stdout).is_ok(),
            "{args:?}: the output is printed still"
        );
        for missing in ["/nonexist", "no-such-run"] {
            let out = loopctl()
                .args(args)
                .arg(missing)
                .current_dir(tmp.path())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?} {missing}: {err}");
            assert!(err.contains(missing), "{args:?}: {err}");
        }
    }
    // Over a root, a run folder's empty log is no row, not an error; a run id is its run.
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("blank")).unwrap();
    std::fs::write(root.join("blank/history.jsonl"), "").unwrap();
    let clean = fixtures().join("native-clean");
    std::fs::create_dir_all(root.join("clean")).unwrap();
    std::fs::copy(
        clean.join("history.jsonl"),
        root.join("clean/history.jsonl"),
    )
    .unwrap();
    let n = json_of(
        &["query", "SELECT count(*) AS n FROM runs", "--json"],
        &[&root],
    );
    assert_eq!(n[0]["n"], json!(1));
    let out = loopctl()
        .args(["--root"])
        .arg(&root)
        .args(["query", "SELECT run_id FROM runs", "--json", "clean"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows, json!([{"run_id": "native-clean-20260301-090000"}]));
}

/// A log named twice (a root and a run folder or log in it, the root twice) is read once:
/// its runs are not counted twice, by `query` and `aggregate` alike.
#[test]
fn a_log_named_twice_is_read_once() {
    let root_buf = fixtures();
    let merged_buf = root_buf.join("merged-runs");
    let log_buf = merged_buf.join("history.jsonl");
    let (root, merged, log) = (root_buf.as_path(), merged_buf.as_path(), log_buf.as_path());
    let sql = "SELECT count(*) AS runs, count(DISTINCT run_id) AS ids FROM runs";
    let once = json_of(&["query", sql, "--json"], &[root]);
    assert!(once[0]["runs"].as_u64().unwrap() > 2, "{once}");
    for twice in [
        &[root, merged][..],
        &[root, log],
        &[root, root],
        &[log, root],
    ] {
        let again = json_of(&["query", sql, "--json"], twice);
        assert_eq!(again, once, "{twice:?}");
    }
    let report =
        |paths: &[&Path]| json_of(&["aggregate", "--report", "success-rate", "--json"], paths);
    assert_eq!(report(&[root, merged]), report(&[root]));

    // A log named as FILE that holds no event is said so, also when its root is named first
    // (and spelt otherwise).
    let t = tempfile::tempdir().unwrap();
    let empty = t.path().join("e");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("history.jsonl"), "").unwrap();
    let out = loopctl()
        .current_dir(t.path())
        .args(["query", sql, "--json", ".", "e/history.jsonl"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("holds no event"), "{err}");
}

/// `aggregate` with every report in a format that holds one table is refused before any log is
/// read: no finding of the logs is said first.
#[test]
fn a_one_table_format_for_every_report_is_refused_before_reading() {
    let damaged = fixtures().join("bad-middle");
    for format in ["csv", "parquet"] {
        let out = loopctl()
            .args(["aggregate", "--format", format])
            .arg(&damaged)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("hold one table"), "{err}");
        assert!(!err.contains("bad_line"), "read before refusing: {err}");
    }
}
