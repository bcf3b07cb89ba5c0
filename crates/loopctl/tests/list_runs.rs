//! `list` shows every run: each run of a folder whose log holds several, a run folder named
//! directly, and a log with no event as empty rather than running.

use std::path::PathBuf;
use std::process::Output;

use assert_cmd::Command;
use loopctl_tests::repo;
use serde_json::Value;

fn run(args: &[&str]) -> Output {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    c.env_remove("LOOPCTL_ROOT").env("NO_COLOR", "1");
    c.args(args).output().unwrap()
}

fn fixtures() -> PathBuf {
    repo().join("fixtures")
}

fn json_rows(args: &[&str]) -> Vec<Value> {
    let out = run(args);
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
        .as_array()
        .cloned()
        .unwrap()
}

fn ids_of(rows: &[Value], log: &str) -> Vec<String> {
    rows.iter()
        .filter(|r| r["log_path"].as_str().unwrap().contains(log))
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_root_lists_every_run_of_a_folder_whose_log_holds_several() {
    let root = fixtures();
    let root = root.to_str().unwrap();
    let rows = json_rows(&["--root", root, "list", "--json"]);
    for folder in ["merged-runs", "stagnation"] {
        let log = fixtures().join(folder).join("history.jsonl");
        let of_file = json_rows(&["list", log.to_str().unwrap(), "--json"]);
        let want: Vec<String> = of_file
            .iter()
            .map(|r| r["run_id"].as_str().unwrap().to_string())
            .collect();
        assert!(want.len() > 1, "{folder} holds several runs");
        assert_eq!(ids_of(&rows, &format!("{folder}/history.jsonl")), want);
    }
    let out = run(&["--root", root, "list"]);
    let table = String::from_utf8_lossy(&out.stdout);
    for id in ids_of(&rows, "merged-runs/history.jsonl") {
        assert!(table.contains(&format!("merged-runs/{id}")), "{table}");
    }
    // A folder holding one run keeps its alias.
    assert!(
        table.lines().any(|l| l.starts_with(" native-clean ")),
        "{table}"
    );
}

#[test]
fn a_run_folder_lists_its_logs_runs() {
    let dir = fixtures().join("stagnation");
    let log = dir.join("history.jsonl");
    let dir = dir.to_str().unwrap();
    let log = log.to_str().unwrap();
    let (a, b) = (run(&["list", dir]), run(&["list", log]));
    assert_eq!(a.status.code(), Some(0));
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(
        run(&["list", dir, "--json"]).stdout,
        run(&["list", log, "--json"]).stdout
    );
}

#[test]
fn a_log_with_no_event_is_listed_as_empty() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("blank")).unwrap();
    std::fs::write(tmp.path().join("blank").join("history.jsonl"), "").unwrap();
    let root = tmp.path().to_str().unwrap();
    let rows = json_rows(&["--root", root, "list", "--json"]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "empty");
    assert_eq!(rows[0]["events"], 0);
    let out = run(&["--root", root, "list"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("empty (no event)"), "{table}");
    assert!(!table.contains("running"), "{table}");
}

/// A log whose every line is damaged holds no event, and its row says how many findings it
/// has: listed as an empty run with no finding, its damage would be hidden.
#[test]
fn a_log_of_damaged_lines_is_listed_empty_with_its_findings() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("garbled")).unwrap();
    let log = tmp.path().join("garbled").join("history.jsonl");
    std::fs::write(&log, "not json\n{\"event\": \n\u{1}\u{2}\n").unwrap();
    let root = tmp.path().to_str().unwrap();
    let rows = json_rows(&["--root", root, "list", "--json"]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "empty");
    assert_eq!(rows[0]["finding_count"], 3, "{:?}", rows[0]);
    let out = run(&["--root", root, "list"]);
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(notes.contains("1 run(s) have findings"), "{notes}");
}

/// A run's `finding_count` is one value whichever way it is reached: `list ROOT`, `list` of its
/// folder or of its log file, and `status --json` (its own findings, and for the folder's run
/// those naming no run: damaged lines, a torn tail).
#[test]
fn a_runs_finding_count_is_the_same_from_list_of_its_root_folder_or_log_and_from_status() {
    let root = fixtures();
    let root = root.to_str().unwrap();
    let of = |rows: &[Value], id: &str| -> i64 {
        let row = rows.iter().find(|r| r["run_id"] == id);
        row.and_then(|r| r["finding_count"].as_i64())
            .unwrap_or_else(|| panic!("no row {id}: {rows:?}"))
    };
    let everything = json_rows(&["list", root, "--json"]);
    // Damaged lines (one run), a torn tail, and a log of two runs with seq findings.
    for (folder, ids) in [
        ("bad-middle", &["bm-20260307-110000"][..]),
        ("torn-tail", &["tt-20260308-090000"]),
        ("seq-problems", &["late-joiner", "seq-problems"]),
    ] {
        let dir = format!("{root}/{folder}");
        let log = format!("{dir}/history.jsonl");
        for id in ids {
            let want = of(&everything, id);
            assert!(want > 0, "{folder}/{id} has findings");
            assert_eq!(
                of(&json_rows(&["list", &dir, "--json"]), id),
                want,
                "list {dir}"
            );
            assert_eq!(
                of(&json_rows(&["list", &log, "--json"]), id),
                want,
                "list {log}"
            );
            let out = run(&["status", &dir, "--run-id", id, "--json"]);
            let status: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(status["finding_count"], want, "status {dir} --run-id {id}");
        }
    }
}
