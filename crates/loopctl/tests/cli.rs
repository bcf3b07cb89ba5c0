//! End-to-end tests of the `loopctl` binary.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use loopctl_tests::{repo, shared};
use predicates::prelude::*;
use serde_json::Value;

fn loopctl() -> Command {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    c.env_remove("LOOPCTL_ROOT").env("NO_COLOR", "1");
    c
}

/// Stdout of a successful run.
fn stdout_of(args: &[&str], path: &Path) -> Vec<u8> {
    loopctl()
        .args(args)
        .arg(path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone()
}

/// A run.json's phase and score as `list` and `status` show them: none (null) for a run
/// that has no quality phase or no score.
fn shown(state: &Value) -> (&Value, &Value) {
    static NULL: Value = Value::Null;
    let phase = match &state["phase"] {
        Value::String(p) if p.is_empty() => &NULL,
        p => p,
    };
    let scored = state["score_history"]
        .as_array()
        .is_some_and(|h| !h.is_empty())
        || state["last_score"].as_f64() != Some(0.0);
    (phase, if scored { &state["last_score"] } else { &NULL })
}

fn fixture(name: &str) -> PathBuf {
    repo().join("fixtures").join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn check_exit_codes_follow_the_documented_contract() {
    loopctl()
        .args(["check"])
        .arg(fixture("native-clean"))
        .assert()
        .code(0)
        .stdout(predicate::str::contains("clean"));
    loopctl()
        .args(["check"])
        .arg(fixture("bad-middle"))
        .assert()
        .code(1)
        .stdout(predicate::str::contains("history.jsonl:").and(predicate::str::contains("byte")));
    loopctl()
        .args(["check", "/nonexistent/run"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent/run"));
}

#[test]
fn check_json_reports_counts_and_findings() {
    let out = loopctl()
        .args(["check", "--json"])
        .arg(fixture("bad-middle"))
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["clean"], false);
    assert_eq!(v["findings"].as_array().unwrap().len(), 5);
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] == "bad_line" && f["offset"].is_u64())
    );
    assert!(
        v["stats"]["by_event"]
            .as_object()
            .unwrap()
            .values()
            .all(Value::is_u64)
    );
}

#[test]
fn replay_prints_exactly_what_recover_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("demo");
    copy_dir(&repo().join("examples/damaged-run"), &run);
    let printed = loopctl()
        .arg("replay")
        .arg(&run)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    loopctl()
        .arg("recover")
        .arg(&run)
        .assert()
        .success()
        .stdout(predicate::str::contains("kept the previous file"));
    assert_eq!(std::fs::read(run.join("run.json")).unwrap(), printed);
    assert!(run.join("run.json.damaged").is_file());
    let v: Value = serde_json::from_slice(&printed).unwrap();
    assert_eq!(
        (
            v["status"].as_str(),
            v["phase"].as_str(),
            v["iteration"].as_u64()
        ),
        (Some("completed"), Some("B"), Some(2))
    );
    assert_eq!(
        v["criteria"]["name"], "checkout_v1",
        "criteria salvaged from the damaged run.json"
    );
    // A second recover finds the snapshot current and writes nothing.
    loopctl()
        .arg("recover")
        .arg(&run)
        .assert()
        .success()
        .stdout(predicate::str::contains("already up to date"));
    assert!(!run.join("run.json.damaged.2").exists());
    loopctl().arg("check").arg(&run).assert().code(0);
}

#[test]
fn strict_turns_findings_into_exit_1() {
    loopctl()
        .arg("replay")
        .arg(fixture("torn-tail"))
        .assert()
        .code(0)
        .stderr(predicate::str::contains("torn_tail"));
    loopctl()
        .args(["--strict", "replay"])
        .arg(fixture("torn-tail"))
        .assert()
        .code(1);
}

/// Seq problems are findings too, for every command that reads one log: each says so (on
/// stderr; `export prometheus` in loopctl_log_findings_total) and, under --strict, exits 1.
#[test]
fn strict_counts_seq_problems_in_every_command_that_reads_a_log() {
    let log = fixture("seq-problems");
    for cmd in [
        &["replay"][..],
        &["status"],
        &["history"],
        &["postmortem"],
        &["export", "prometheus"],
    ] {
        let out = loopctl().args(cmd).arg(&log).assert().code(0);
        let out = out.get_output();
        let said = [&out.stderr, &out.stdout].map(|b| String::from_utf8_lossy(b).into_owned());
        assert!(
            said[0].contains("seq_") || said[1].contains("kind=\"seq_"),
            "{cmd:?}: {said:?}"
        );
        loopctl()
            .arg("--strict")
            .args(cmd)
            .arg(&log)
            .assert()
            .code(1)
            .stderr(predicate::str::contains("finding(s)"));
    }
}

/// A `run.json` or `current.json` saved with a UTF-8 byte order mark (as some Windows editors
/// save) is read as the JSON it is, not called damaged.
#[test]
fn state_files_with_a_byte_order_mark_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let run = root.join("clean");
    copy_dir(&fixture("native-clean"), &run);
    loopctl().arg("recover").arg(&run).assert().success();
    let state = run.join("run.json");
    let text = std::fs::read(&state).unwrap();
    std::fs::write(&state, [b"\xEF\xBB\xBF".as_slice(), &text].concat()).unwrap();
    loopctl()
        .arg("check")
        .arg(&run)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("damaged").not());
    let id = serde_json::from_slice::<Value>(&text).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let current = format!("\u{feff}{{\"active_run_id\":\"{id}\",\"status\":\"completed\"}}");
    std::fs::write(root.join("current.json"), current).unwrap();
    loopctl()
        .arg("--root")
        .arg(root)
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(&id))
        .stderr(predicate::str::contains("damaged").not());
}

#[test]
fn status_uses_the_log_not_a_stale_current_json() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    copy_dir(
        &repo().join("examples/damaged-run"),
        &root.join("checkout-api"),
    );
    std::fs::write(
        root.join("current.json"),
        r#"{"active_run_id":"checkout-api-20261120-093000","task_alias":"checkout-api","status":"running"}"#,
    )
    .unwrap();
    loopctl()
        .arg("--root")
        .arg(root)
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("completed (threshold_reached)"))
        .stderr(predicate::str::contains(
            "current.json still names this run",
        ));
    let out = loopctl()
        .arg("--root")
        .arg(root)
        .args(["status", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (v["status"].as_str(), v["current_json_stale"].as_bool()),
        (Some("completed"), Some(true))
    );
    // The run is also found by its full id.
    loopctl()
        .arg("--root")
        .arg(root)
        .args(["status", "checkout-api-20261120-093000"])
        .assert()
        .success();
}

#[test]
fn list_and_history_json_parse_back() {
    let tmp = tempfile::tempdir().unwrap();
    for case in ["native-clean", "aif-loop-clean", "torn-tail"] {
        copy_dir(&fixture(case), &tmp.path().join(case));
    }
    let out = stdout_of(&["list", "--json"], tmp.path());
    let rows: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(rows.len(), 3);
    assert!(rows[2]["dir"].as_str().unwrap().ends_with("torn-tail"));
    assert_eq!(rows[2]["finding_count"], 1);

    let out = stdout_of(&["history", "--json"], &fixture("avenor-loop"));
    let text = String::from_utf8(out).unwrap();
    assert!(text.lines().count() > 3);
    for line in text.lines() {
        let ev = loopctl_core::parse_line(line).unwrap();
        assert_eq!(
            ev.dialect,
            loopctl_core::Dialect::Native,
            "normalised to native: {line}"
        );
    }
}

#[test]
fn multi_run_logs_replay_to_one_state_per_run() {
    let out = stdout_of(&["replay", "--json"], &fixture("merged-runs/history.jsonl"));
    let states: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(states.len(), 2);
    assert_ne!(states[0]["run_id"], states[1]["run_id"]);
}

#[test]
fn list_of_a_merged_log_has_a_row_per_run_agreeing_with_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("merged.jsonl");
    let mut text = std::fs::read_to_string(fixture("merged-runs/history.jsonl")).unwrap();
    // A damaged line (no run) and a repeated seq (a finding that names its run).
    text.push_str("{not json\n");
    let gamma = r#"{"ts":"2026-03-04T09:00:00Z","run_id":"gamma-ci-20260304-090000","seq":1,"iteration":0,"phase":"A","step":"INIT","event":"run_started","status":"ok","payload":{}}"#;
    text.push_str(&format!("{gamma}\n{gamma}\n"));
    std::fs::write(&log, &text).unwrap();

    let out = loopctl()
        .args(["list", "--json"])
        .arg(&log)
        .assert()
        .get_output()
        .clone();
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let states: Vec<Value> = String::from_utf8(stdout_of(&["replay", "--json"], &log))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(states.len(), 3);
    for (row, state) in rows.iter().zip(&states) {
        for key in [
            "run_id",
            "task_alias",
            "status",
            "stop",
            "iteration",
            "events",
        ] {
            assert_eq!(row[key], state[key], "{key}");
        }
        assert_eq!((&row["phase"], &row["last_score"]), shown(state));
        assert_eq!(row["log_path"], log.to_str().unwrap());
        assert_eq!(row["dir"], Value::Null);
    }
    assert_eq!(rows[0]["run_id"], "alpha-svc-20260304-080000");
    assert_eq!(rows[0]["finding_count"], 0);
    assert_eq!(rows[1]["finding_count"], 0);
    // The repeated seq names gamma; the damaged line names no run and counts for the run
    // standing for the log (none is named `merged`: the one updated last, gamma), as in
    // `list ROOT`, `status` and serve's /api/runs.
    assert_eq!(rows[2]["finding_count"], 2);

    let out = loopctl()
        .arg("list")
        .arg(&log)
        .assert()
        .success()
        .get_output()
        .clone();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.trim_start().starts_with("RUN"), "{table}");
    assert!(table.contains("beta-docs-20260304-080500"));
    let note = String::from_utf8(out.stderr).unwrap();
    assert!(note.contains("1 damaged line"), "{note}");

    // Under --strict the rows are printed and the findings give exit 1; a clean log gives 0.
    let out = loopctl()
        .args(["--strict", "list", "--json"])
        .arg(&log)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("2 finding(s)"))
        .get_output()
        .clone();
    let strict_rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(strict_rows, rows);
    loopctl()
        .args(["--strict", "list"])
        .arg(fixture("merged-runs/history.jsonl"))
        .assert()
        .code(0);
    let root = tmp.path().join("root");
    copy_dir(&fixture("torn-tail"), &root.join("torn"));
    copy_dir(&fixture("native-clean"), &root.join("clean"));
    loopctl().args(["list"]).arg(&root).assert().code(0);
    loopctl()
        .args(["--strict", "list"])
        .arg(&root)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("1 run(s) with findings"));
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn the_whole_corpus_goes_through_every_read_command() {
    let Some(shared) = shared("CLI over the corpus") else {
        return;
    };
    let corpus = shared.join("corpus");
    let logs = loopctl_tests::files_below(&corpus)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl" || e == "ndjson"));
    for log in logs {
        for cmd in [
            vec!["replay"],
            vec!["history"],
            vec!["history", "--json"],
            vec!["check", "--json"],
        ] {
            let out = loopctl().args(&cmd).arg(&log).assert().get_output().clone();
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "{cmd:?} {}: {}",
                log.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // `list FILE` rebuilds only what a row shows: it must agree with the full replay.
        let rows: Vec<Value> = serde_json::from_slice(&stdout_of(&["list", "--json"], &log))
            .unwrap_or_else(|e| panic!("list --json {}: {e}", log.display()));
        // A line per run.
        let states: Vec<Value> = String::from_utf8(stdout_of(&["replay", "--json"], &log))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), states.len(), "{}", log.display());
        for (row, state) in rows.iter().zip(&states) {
            let (phase, score) = shown(state);
            let want = [
                &state["run_id"],
                &state["task_alias"],
                &state["status"],
                &state["stop"],
                &state["iteration"],
                &state["max_iterations"],
                phase,
                score,
                &state["updated_at"],
                &state["events"],
            ];
            let got = [
                &row["run_id"],
                &row["task_alias"],
                &row["status"],
                &row["stop"],
                &row["iteration"],
                &row["max_iterations"],
                &row["phase"],
                &row["last_score"],
                &row["updated_at"],
                &row["events"],
            ];
            assert_eq!(got, want, "{}", log.display());
        }
    }
    loopctl()
        .arg("list")
        .arg(corpus.join("aif-loop/vedo-hub"))
        .assert()
        .success()
        .stdout(predicate::str::contains("acceptance-criteria-verification"));
    // Each row of a root agrees with `replay` of its folder, fields salvaged from a damaged
    // run.json included (a log without run_started has no max_iterations of its own).
    let rows: Vec<Value> = serde_json::from_slice(&stdout_of(
        &["list", "--json"],
        &corpus.join("aif-loop/vedo-hub"),
    ))
    .unwrap();
    assert_eq!(rows.len(), 4);
    for row in &rows {
        let dir = PathBuf::from(row["dir"].as_str().unwrap());
        let state: Value = serde_json::from_slice(&stdout_of(&["replay", "--json"], &dir)).unwrap();
        for key in ["run_id", "status", "iteration", "max_iterations"] {
            assert_eq!(row[key], state[key], "{key} of {}", dir.display());
        }
        assert_eq!(row["last_score"], *shown(&state).1, "{}", dir.display());
        assert!(row["max_iterations"].is_u64(), "{}", dir.display());
    }
}

/// `recover` keeps aside (as `.damaged`) only a run.json that does not parse or does not
/// agree with the log: one another tool wrote that agrees is left as it is.
#[test]
fn recover_leaves_a_run_json_that_agrees_with_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("agrees");
    copy_dir(&repo().join("examples/damaged-run"), &run);
    let state = stdout_of(&["replay"], &run);
    let mut v: Value = serde_json::from_slice(&state).unwrap();
    // No log mark: not loopctl's snapshot, another tool's file.
    v.as_object_mut().unwrap().remove("log");
    let theirs = serde_json::to_vec_pretty(&v).unwrap();
    std::fs::write(run.join("run.json"), &theirs).unwrap();
    let check: Value = serde_json::from_slice(&stdout_of(&["check", "--json"], &run)).unwrap();
    assert_eq!(
        (&check["run_json"]["prior"], &check["run_json"]["agrees"]),
        (&Value::from("foreign"), &Value::from(true))
    );
    let report: Value = serde_json::from_slice(&stdout_of(&["recover", "--json"], &run)).unwrap();
    assert_eq!(
        (&report["written"], &report["kept_aside_path"]),
        (&Value::from(false), &Value::Null),
        "{report}"
    );
    assert_eq!(std::fs::read(run.join("run.json")).unwrap(), theirs);
    assert!(!run.join("run.json.damaged").exists());
    let text = String::from_utf8(stdout_of(&["recover"], &run)).unwrap();
    assert!(text.starts_with("already up to date:"), "{text}");
}

/// aif-loop's `plan`, `prepared_checks` and `critique` (its agent writes them to run.json; no
/// event carries them) survive `recover`, said in the report, and stay through a second one
/// (the snapshot keeps them).
#[test]
fn recover_keeps_the_fields_only_aif_loops_agent_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("t");
    std::fs::create_dir(&run).unwrap();
    let log = [
        r#"{"ts":"2026-03-02T10:15:00Z","run_id":"t-20260302-101500","iteration":1,"phase":"A","step":"PLAN","event":"run_started","status":"ok","payload":{"max_iterations":4}}"#,
        r#"{"ts":"2026-03-02T10:15:20Z","run_id":"t-20260302-101500","iteration":1,"phase":"A","step":"PLAN","event":"plan_created","status":"ok","payload":{"plan":["read","fix"]}}"#,
    ];
    std::fs::write(run.join("history.jsonl"), log.join("\n") + "\n").unwrap();
    let agent = serde_json::json!({
        "plan": ["read the spec", "fix"], "prepared_checks": {"A": ["x"]}, "critique": {"notes": "n"}
    });
    let mut old = serde_json::json!({
        "run_id": "t-20260302-101500", "task_alias": "t", "status": "running", "iteration": 1,
        "max_iterations": 4, "phase": "A", "current_step": "INIT", "task": {"prompt": "p"},
        "criteria": null, "evaluation": null, "stop": {"passed": false, "reason": ""},
        "last_score": 0, "stagnation_count": 0
    });
    old.as_object_mut()
        .unwrap()
        .extend(agent.as_object().unwrap().clone());
    std::fs::write(run.join("run.json"), old.to_string()).unwrap();

    let report: Value = serde_json::from_slice(&stdout_of(&["recover", "--json"], &run)).unwrap();
    assert_eq!(report["written"], true, "{report}");
    let said: Vec<&str> = report["provenance"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"] == "run.json")
        .filter_map(|p| p["field"].as_str())
        .collect();
    assert_eq!(
        said,
        ["task", "plan", "prepared_checks", "critique"],
        "{report}"
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    for field in ["plan", "prepared_checks", "critique"] {
        assert_eq!(written[field], agent[field], "{field}");
    }
    assert_eq!(written["current_step"], "PLAN");

    let text = String::from_utf8(stdout_of(&["recover"], &run)).unwrap();
    assert!(text.starts_with("already up to date:"), "{text}");
    let again: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(again, written);
}

/// A log whose last line lost its newline after its run.json was written: `check` says that is
/// what happened (not "another log"), and shows the two marks where they differ.
#[test]
fn check_tells_a_log_that_lost_its_last_newline() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("r");
    copy_dir(&repo().join("fixtures/healthy-native"), &run);
    let _ = std::fs::remove_file(run.join("run.json"));
    stdout_of(&["recover"], &run);
    let log = run.join("history.jsonl");
    let text = std::fs::read(&log).unwrap();
    std::fs::write(&log, text.strip_suffix(b"\n").unwrap()).unwrap();
    let out = loopctl().arg("check").arg(&run).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("ends the log without its newline"), "{said}");
    let marks = said
        .lines()
        .find(|l| l.trim_start().starts_with("log: run.json has"))
        .unwrap_or_else(|| panic!("{said}"));
    let (theirs, ours) = marks
        .split_once("run.json has ")
        .and_then(|(_, rest)| rest.split_once(", the log says "))
        .unwrap_or_else(|| panic!("{marks}"));
    assert_ne!(theirs, ours, "{marks}");
    assert!(theirs.contains("offset"), "{marks}");

    // Recovered, the snapshot of a log that ends without a newline agrees with it.
    stdout_of(&["recover"], &run);
    let out = loopctl().arg("check").arg(&run).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("run.json: agrees with the log"), "{said}");
    let again = String::from_utf8(stdout_of(&["recover"], &run)).unwrap();
    assert!(again.starts_with("already up to date:"), "{again}");
}

/// Under `--strict`, `recover` refuses before writing when there is a finding (a damaged line,
/// a damaged run.json): it says what it would write, writes nothing, and exits 1.
#[test]
fn recover_under_strict_refuses_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let bad_line = tmp.path().join("bad-line");
    copy_dir(&fixture("bad-middle"), &bad_line);
    let bad_json = tmp.path().join("bad-json");
    copy_dir(&repo().join("examples/damaged-run"), &bad_json);
    for run in [&bad_line, &bad_json] {
        let before: Vec<_> = std::fs::read_dir(run)
            .unwrap()
            .flatten()
            .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
            .collect();
        for json in [false, true] {
            let mut c = loopctl();
            c.args(["--strict", "recover"]).arg(run);
            if json {
                c.arg("--json");
            }
            let out = c.assert().code(1).get_output().clone();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("--strict") && err.contains("nothing written"),
                "{err}"
            );
            if json {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(v["written"], false);
            }
            let after: Vec<_> = std::fs::read_dir(run)
                .unwrap()
                .flatten()
                .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
                .collect();
            assert_eq!(
                after.len(),
                before.len(),
                "{}: a file was written",
                run.display()
            );
            for file in &before {
                assert!(
                    after.contains(file),
                    "{}: {:?} changed",
                    run.display(),
                    file.0
                );
            }
        }
    }
    // Without --strict the damaged run.json is recovered.
    loopctl().arg("recover").arg(&bad_json).assert().success();
    assert!(bad_json.join("run.json.damaged").is_file());
}

/// The examples in `--help` that name a run by alias name the bundled example's, and run as
/// written from the repository's root.
#[test]
fn help_examples_naming_a_run_run_as_written() {
    let mut ran = 0;
    for cmd in [
        "replay",
        "status",
        "history",
        "postmortem",
        "check",
        "recover",
    ] {
        let help = loopctl().args([cmd, "--help"]).output().unwrap().stdout;
        for line in String::from_utf8(help).unwrap().lines() {
            let example = line.split(" #").next().unwrap().trim();
            if !example.starts_with("loopctl ") || !example.contains("checkout-api") {
                continue;
            }
            let args: Vec<&str> = example.split_whitespace().skip(1).collect();
            let out = loopctl().args(&args).current_dir(repo()).output().unwrap();
            assert!(
                out.status.code().is_some_and(|c| c < 2),
                "{example}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 3, "the examples naming checkout-api: {ran}");
}
