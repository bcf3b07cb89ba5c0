//! JSON output: one vocabulary across commands (docs/json.md), nothing shown where a run has
//! nothing (no score, no quality phase), and every documented example matching the binary.

use std::path::Path;

use assert_cmd::Command;
use loopctl_tests::repo;
use serde_json::{Value, json};

fn loopctl() -> Command {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    c.env_remove("LOOPCTL_ROOT")
        .env("NO_COLOR", "1")
        .current_dir(repo());
    c
}

/// Stdout of a command that did not fail (exit 2); findings (1) and stagnation (3) are fine.
fn stdout(args: &[&str]) -> String {
    let out = loopctl().args(args).output().unwrap();
    assert!(
        out.status.code().is_some_and(|c| c != 2),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_of(args: &[&str]) -> Value {
    serde_json::from_str(&stdout(args)).unwrap()
}

/// `list --json` rows by run folder name.
fn list_row(rows: &Value, folder: &str) -> Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["dir"]
                .as_str()
                .is_some_and(|d| Path::new(d).file_name().unwrap() == folder)
        })
        .unwrap_or_else(|| panic!("no row for {folder}"))
        .clone()
}

/// The cells of the table line that contains `needle`.
fn cells(table: &str, needle: &str) -> Vec<String> {
    table
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle} in\n{table}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn no_score_and_no_quality_phase_show_as_nothing() {
    let rows = json_of(&["--root", "fixtures", "list", "--json"]);
    let table = stdout(&["--root", "fixtures", "list"]);
    for (folder, score, phase) in [
        ("avenor-loop", json!(null), json!(null)),
        ("avenor-abort", json!(null), json!(null)),
        ("failed-run", json!(null), json!("A")),
        ("healthy-native", json!(0.92), json!("A")),
    ] {
        let row = list_row(&rows, folder);
        let status = json_of(&["--root", "fixtures", "status", folder, "--json"]);
        for (what, v) in [("list", &row), ("status", &status)] {
            assert_eq!(
                (&v["last_score"], &v["phase"]),
                (&score, &phase),
                "{what} {folder}"
            );
        }
        let status_table = stdout(&["--root", "fixtures", "status", folder]);
        let status_cells = cells(&status_table, status["task_alias"].as_str().unwrap());
        let list_cells = cells(&table, folder);
        for c in [&list_cells, &status_cells] {
            assert!(!c.contains(&"0".to_string()), "{folder}: {c:?}");
            assert_eq!(
                c.contains(&"A".to_string()),
                phase == json!("A") && std::ptr::eq(c, &status_cells),
                "{folder}: {c:?}"
            );
        }
        assert_eq!(
            list_cells.contains(&"0.92".to_string()),
            score == json!(0.92)
        );
    }
}

/// The fields every run object of `list` and `status` has, with one meaning each.
const RUN_FIELDS: [&str; 13] = [
    "run_id",
    "task_alias",
    "status",
    "stop",
    "iteration",
    "max_iterations",
    "phase",
    "last_score",
    "updated_at",
    "events",
    "finding_count",
    "log_path",
    "dir",
];

#[test]
fn list_and_status_name_the_same_things_alike_and_agree_on_them() {
    let rows = json_of(&["--root", "fixtures", "list", "--json"]);
    let mut compared = 0;
    for row in rows.as_array().unwrap() {
        let dir = row["dir"].as_str().unwrap();
        // Logs holding one run: list and status then show the same run.
        if stdout(&["replay", dir, "--json"]).lines().count() != 1 {
            continue;
        }
        let status = json_of(&["status", dir, "--json"]);
        for f in RUN_FIELDS {
            assert!(row.get(f).is_some(), "list lacks {f}: {row}");
            assert!(status.get(f).is_some(), "status lacks {f}: {status}");
        }
        let (r, s) = (row.as_object().unwrap(), status.as_object().unwrap());
        for (k, v) in r {
            if let Some(w) = s.get(k) {
                assert_eq!(v, w, "{dir}: {k}");
            }
        }
        for old in ["alias", "stop_reason", "path", "log", "findings"] {
            assert!(r.get(old).is_none() && s.get(old).is_none(), "{old}");
        }
        compared += 1;
    }
    assert!(compared >= 10, "{compared}");
}

#[test]
fn replay_json_is_ndjson_whatever_the_number_of_runs() {
    let one = stdout(&["replay", "fixtures/healthy-native", "--json"]);
    assert_eq!(one.matches('\n').count(), 1, "{one}");
    assert!(one.ends_with('\n'));
    let v: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(v["run_id"], "healthy-20260402-090000");
    let many = stdout(&["replay", "fixtures/merged-runs", "--json"]);
    let lines: Vec<Value> = many
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    // The same shape per line: run.json's.
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&lines[0]), keys(&v));
    // One picked run of a multi-run log: one line too.
    let picked = stdout(&[
        "replay",
        "fixtures/merged-runs",
        "--run-id",
        "beta-docs-20260304-080500",
        "--json",
    ]);
    assert_eq!(picked.lines().count(), 1, "{picked}");
}

#[test]
fn tail_headers_and_recover_name_no_phase_or_score_a_run_lacks() {
    let tail = stdout(&["tail", "fixtures/avenor-loop", "--no-follow"]);
    let headers: Vec<&str> = tail.lines().filter(|l| l.contains("Iteration")).collect();
    assert!(!headers.is_empty(), "{tail}");
    for h in headers {
        assert!(!h.contains("Phase"), "{h}");
    }
    let healthy = stdout(&["tail", "fixtures/healthy-native", "--no-follow"]);
    assert!(healthy.contains("| Phase A"), "{healthy}");
    let rec = stdout(&["recover", "fixtures/avenor-loop", "--dry-run"]);
    assert!(rec.contains("phase -, last score -,"), "{rec}");
}

/// Every key path of `v` (`.stop.reason`, `.runs[].detectors[].summary`), array elements
/// merged.
fn key_paths(v: &Value, at: &str, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}.{k}");
                out.insert(p.clone());
                key_paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                key_paths(x, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

fn shape(v: &Value) -> std::collections::BTreeSet<String> {
    let mut out = Default::default();
    key_paths(v, "", &mut out);
    out
}

#[test]
fn every_example_in_docs_json_has_the_keys_the_command_prints() {
    let doc = std::fs::read_to_string(repo().join("docs/json.md")).unwrap();
    let mut checked = vec![];
    let mut rest = doc.as_str();
    while let Some(i) = rest.find("<!-- example (") {
        rest = &rest[i + "<!-- example (".len()..];
        let (mode, after) = rest.split_once("): loopctl ").unwrap();
        let (args, after) = after.split_once(" -->\n```json\n").unwrap();
        let (block, after) = after.split_once("\n```").unwrap();
        rest = after;
        let args: Vec<&str> = args.split_whitespace().collect();
        let out = stdout(&args);
        match mode.strip_prefix("lines=") {
            None => {
                let want: Value = serde_json::from_str(block).unwrap();
                let got: Value = serde_json::from_str(&out)
                    .unwrap_or_else(|e| panic!("{args:?} prints one JSON value: {e}"));
                assert_eq!(shape(&want), shape(&got), "docs/json.md: loopctl {args:?}");
            }
            Some(n) => {
                let (want, got): (Vec<&str>, Vec<&str>) =
                    (block.lines().collect(), out.lines().collect());
                assert_eq!(want.len(), n.parse::<usize>().unwrap());
                assert!(got.len() >= want.len(), "{args:?}");
                for (w, g) in want.iter().zip(&got) {
                    let (w, g): (Value, Value) = (
                        serde_json::from_str(w).unwrap(),
                        serde_json::from_str(g).unwrap(),
                    );
                    assert_eq!(shape(&w), shape(&g), "docs/json.md: loopctl {args:?}");
                }
            }
        }
        checked.push(args.join(" "));
    }
    // Every command with --json has its example.
    for cmd in [
        "list",
        "status",
        "replay",
        "recover",
        "check",
        "history",
        "tail",
        "stagnation",
        "postmortem",
        "stop",
        "aggregate",
    ] {
        assert!(
            checked.iter().any(|c| c.split(' ').any(|w| w == cmd)),
            "docs/json.md has no example of {cmd}: {checked:?}"
        );
    }
}

#[test]
fn run_json_prints_the_run_json_replay_prints_a_line_of() {
    let t = tempfile::tempdir().unwrap();
    let lf = t.path().join("loop.json");
    std::fs::write(
        &lf,
        r#"{"max_iterations": 1, "loop": [{"name": "a", "run": "true"}]}"#,
    )
    .unwrap();
    let root = t.path().join("root");
    let out = loopctl()
        .args(["run", "--run-id", "r1", "--json", "--loop-file"])
        .arg(&lf)
        .arg("--dir")
        .arg(t.path())
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let ran: Value = serde_json::from_slice(&out.stdout).unwrap();
    let line = stdout(&["replay", root.join("r1").to_str().unwrap(), "--json"]);
    let replayed: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(shape(&ran), shape(&replayed));
    assert_eq!(
        (&ran["phase"], &ran["last_score"]),
        (&json!(""), &json!(0.0))
    );
}

/// The header cells of a table (two spaces or more between columns).
fn headers(table: &str) -> Vec<String> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split("  ")
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn list_status_and_replay_tables_head_a_field_with_one_name() {
    let list = stdout(&["--root", "fixtures", "list"]);
    let status = stdout(&["--root", "fixtures", "status", "avenor-loop"]);
    let replay = stdout(&["replay", "fixtures/merged-runs"]);
    for (what, table) in [("list", &list), ("status", &status), ("replay", &replay)] {
        let h = headers(table);
        assert_eq!(h[0], "RUN", "{what}: {h:?}");
        for field in ["STATUS", "ITERATION", "LAST SCORE", "UPDATED"] {
            assert!(h.iter().any(|c| c == field), "{what} lacks {field}: {h:?}");
        }
        for other in ["ALIAS", "ITER", "SCORE"] {
            assert!(!h.iter().any(|c| c == other), "{what} has {other}: {h:?}");
        }
    }
    // RUN shows the run, not the task's alias (avenor-loop's alias is its run id).
    let s = json_of(&["--root", "fixtures", "status", "healthy-native", "--json"]);
    let table = stdout(&["--root", "fixtures", "status", "healthy-native"]);
    let run_id = s["run_id"].as_str().unwrap();
    assert_ne!(run_id, s["task_alias"].as_str().unwrap());
    assert_eq!(cells(&table, run_id)[0], run_id);
}

#[test]
fn a_running_run_has_an_empty_stop_reason_in_postmortem_as_in_status() {
    let status = json_of(&["--root", "fixtures", "status", "stagnation", "--json"]);
    let pm = json_of(&[
        "--root",
        "fixtures",
        "postmortem",
        "stagnation",
        "--format",
        "json",
    ]);
    assert_eq!(pm["stop"]["running"], json!(true));
    assert_eq!(status["stop"]["reason"], json!(""));
    assert_eq!(pm["stop"]["reason"], status["stop"]["reason"]);
}

/// The keys of a JSON object, in the order printed.
fn keys_in_order(text: &str) -> Vec<String> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut m: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(k) = m.next_key::<String>()? {
                        m.next_value::<serde::de::IgnoredAny>()?;
                        keys.push(k);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(V)
        }
    }
    serde_json::from_str::<Keys>(text).unwrap().0
}

#[test]
fn status_json_is_lists_row_in_its_order_then_what_only_status_shows() {
    let rows: Vec<Box<serde_json::value::RawValue>> =
        serde_json::from_str(&stdout(&["--root", "fixtures", "list", "--json"])).unwrap();
    let row = rows
        .iter()
        .find(|r| r.get().contains("\"dir\":\"fixtures/healthy-native\""))
        .unwrap();
    let row_keys = keys_in_order(row.get());
    let status_keys = keys_in_order(&stdout(&[
        "--root",
        "fixtures",
        "status",
        "healthy-native",
        "--json",
    ]));
    assert_eq!(
        status_keys[..row_keys.len()],
        row_keys[..],
        "{status_keys:?}"
    );
    assert_eq!(
        status_keys[row_keys.len()..],
        ["current_step", "exit_reason", "current_json_stale"]
    );
}

#[test]
fn stop_names_the_run_and_the_folder_when_they_differ() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("s")).unwrap();
    std::fs::copy(
        repo().join("fixtures/stagnation/history.jsonl"),
        root.path().join("s/history.jsonl"),
    )
    .unwrap();
    // A loopctl runner's lock, nobody holding it: stop writes into no other tool's log.
    std::fs::write(root.path().join("s/.history.jsonl.lock"), "").unwrap();
    let out = loopctl()
        .args(["--root"])
        .arg(root.path())
        .args(["stop", "stag-b-20260311-091500"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("marked stag-b-20260311-091500 (folder s) stopped"),
        "{said}"
    );
}
