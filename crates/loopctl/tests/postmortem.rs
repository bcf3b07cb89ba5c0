//! End-to-end tests of `loopctl stagnation` and `loopctl postmortem`.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use loopctl_tests::{files_below, repo, shared};
use predicates::prelude::*;
use serde_json::Value;

fn loopctl() -> Command {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    c.env_remove("LOOPCTL_ROOT").env("NO_COLOR", "1");
    c
}

fn fixture(name: &str) -> PathBuf {
    repo().join("fixtures").join(name)
}

/// Stdout as JSON, asserting the exit code.
fn json_of(args: &[&str], path: &Path, code: i32) -> Value {
    serde_json::from_str(&text_of(args, path, code)).unwrap()
}

fn text_of(args: &[&str], path: &Path, code: i32) -> String {
    let out = loopctl()
        .args(args)
        .arg(path)
        .assert()
        .code(code)
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

fn finding<'a>(run: &'a Value, detector: &str) -> &'a Value {
    run["detectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["detector"] == detector)
        .unwrap()
}

fn corpus_logs(corpus: &Path) -> Vec<PathBuf> {
    files_below(corpus)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl" || e == "ndjson"))
        .collect()
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn every_corpus_log_goes_through_stagnation_and_postmortem() {
    let Some(shared) = shared("stagnation and postmortem over the corpus") else {
        return;
    };
    let logs = corpus_logs(&shared.join("corpus"));
    assert!(logs.len() >= 5, "{logs:?}");
    let mut dialects = std::collections::BTreeSet::new();
    for log in &logs {
        // Every corpus run ended (stopped, completed or a finished session) and none stagnates.
        let v = json_of(&["stagnation", "--json"], log, 0);
        assert_eq!(v["stagnating"], false, "{}", log.display());
        assert!(!v["runs"].as_array().unwrap().is_empty());
        for fmt in ["text", "md", "json"] {
            let out = text_of(&["postmortem", "--format", fmt], log, 0);
            assert!(!out.trim().is_empty(), "{fmt} {}", log.display());
        }
        let pm = json_of(&["postmortem", "--json"], log, 0);
        assert_eq!(pm["stop"]["running"], false, "{}", log.display());
        let events = text_of(&["history", "--json"], log, 0);
        for line in events.lines() {
            let ev: Value = serde_json::from_str(line).unwrap();
            dialects.insert(if ev["event"].as_str().is_some_and(|e| e.contains('.')) {
                "avenor session"
            } else if log.to_string_lossy().contains("aif-loop") {
                "aif-loop"
            } else {
                "avenor"
            });
        }
    }
    assert!(dialects.contains("aif-loop") && dialects.contains("avenor session"));
    // All of them at once: one verdict per run, exit 0.
    let out = loopctl()
        .arg("stagnation")
        .args(&logs)
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches(" healthy ").count(), logs.len(), "{text}");
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn acceptance_criteria_verification_stopped_by_the_user() {
    let Some(shared) = shared("the vedo-hub acceptance-criteria-verification run") else {
        return;
    };
    let run = shared.join("corpus/aif-loop/vedo-hub/acceptance-criteria-verification");
    let pm = json_of(&["postmortem", "--json"], &run, 0);
    assert_eq!(pm["stop"]["status"], "stopped");
    assert_eq!(pm["stop"]["reason"], "user_stop");
    assert_eq!(
        pm["stop"]["detail"],
        "stopped to start new test-integration loop"
    );
    assert_eq!(pm["stop"]["at"], "2026-07-29T12:00:00.000Z");
    assert!(
        pm["distance_to_success"].is_null(),
        "no evaluation to measure"
    );
    let text = text_of(&["postmortem"], &run, 0);
    assert!(
        text.contains("stopped: user_stop (stopped to start new test-integration loop)"),
        "{text}"
    );
    // run.json and current.json still say running; the log decides.
    assert!(!text.contains("still running"));
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn score_trajectory_is_the_history_s() {
    let Some(shared) = shared("the vedo-hub feature-multi-team-organization-model run") else {
        return;
    };
    let run = shared.join("corpus/aif-loop/vedo-hub/feature-multi-team-organization-model");
    // The scores, read from the history independently of loopctl's parser.
    let history = std::fs::read_to_string(run.join("history.jsonl")).unwrap();
    let want: Vec<f64> = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "evaluation_done")
        .filter_map(|v| v["payload"]["score"].as_f64())
        .collect();
    assert_eq!(want, vec![0.444, 1.0, 1.0]);
    let pm = json_of(&["postmortem", "--json"], &run, 0);
    let got: Vec<f64> = pm["scores"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["score"].as_f64().unwrap())
        .collect();
    assert_eq!(got, want);
    let phases: Vec<&str> = pm["scores"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, vec!["A", "A", "B"]);
    assert_eq!(pm["scores"]["sparkline"], "▄██");
    assert_eq!(pm["stop"]["reason"], "threshold_reached");
    // aif-loop steps last from the previous event: INIT at 16:50:14, PLAN at 16:50:30.
    let plan = pm["time_per_phase"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "PLAN")
        .unwrap();
    assert_eq!(plan["total_ms"], 16_000);
    let md = text_of(&["postmortem", "--format", "md"], &run, 0);
    assert!(md.contains("`▄██` 0.444 → 1 → 1 (best 1)"), "{md}");
    let v = json_of(&["stagnation", "--json"], &run, 0);
    assert_eq!(finding(&v["runs"][0], "score")["triggered"], false);
}

#[test]
fn a_stagnating_native_log_exits_3_with_its_evidence() {
    let v = json_of(&["stagnation", "--json"], &fixture("stagnating-native"), 3);
    assert_eq!(v["stagnating"], true);
    let run = &v["runs"][0];
    assert_eq!(run["run_id"], "stuck-20260401-100000");
    let score = finding(run, "score");
    assert_eq!(score["triggered"], true);
    assert_eq!(score["iterations"], serde_json::json!([2, 3]));
    assert_eq!(score["scores"], serde_json::json!([0.61, 0.615]));
    assert_eq!(score["seqs"], serde_json::json!([15, 21]));
    let nc = finding(run, "no_change");
    assert_eq!(nc["triggered"], true);
    assert_eq!(nc["iterations"], serde_json::json!([3]));
    assert_eq!(finding(run, "stalled")["applicable"], false);

    let text = text_of(&["stagnation"], &fixture("stagnating-native"), 3);
    assert!(text.contains("STAGNATING"), "{text}");
    assert!(
        text.contains("iterations 2, 3; scores 0.61, 0.615"),
        "{text}"
    );

    // Loosen the limits until it is healthy.
    loopctl()
        .args(["stagnation", "--limit", "3"])
        .arg(fixture("stagnating-native"))
        .assert()
        .code(3);
    loopctl()
        .args(["stagnation", "--limit", "3", "--no-change", "2"])
        .arg(fixture("stagnating-native"))
        .assert()
        .code(0);
    let v = json_of(
        &[
            "stagnation",
            "--json",
            "--reset",
            "never",
            "--min-delta",
            "0.001",
        ],
        &fixture("stagnating-native"),
        3,
    );
    assert_eq!(v["config"]["reset"], "never");
    assert_eq!(finding(&v["runs"][0], "score")["triggered"], false);
}

#[test]
fn a_healthy_native_log_exits_0() {
    let v = json_of(&["stagnation", "--json"], &fixture("healthy-native"), 0);
    assert_eq!(v["stagnating"], false);
    let run = &v["runs"][0];
    assert_eq!(run["status"], "completed");
    assert_eq!(finding(run, "no_change")["applicable"], true);
    assert_eq!(finding(run, "no_change")["triggered"], false);
    // One stagnating run among several RUNs makes the exit 3.
    loopctl()
        .arg("stagnation")
        .arg(fixture("healthy-native"))
        .arg(fixture("stagnating-native"))
        .assert()
        .code(3)
        .stdout(predicate::str::contains("healthy-20260402-090000 healthy"));
}

#[test]
fn interleaved_runs_are_assessed_one_by_one() {
    let v = json_of(
        &["stagnation", "--json", "--stalled-after", "100000h"],
        &fixture("stagnation").join("history.jsonl"),
        3,
    );
    let runs = v["runs"].as_array().unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        vec!["stag-a-20260311-090000", "stag-b-20260311-091500"]
    );
    assert_eq!(finding(&runs[0], "score")["triggered"], true);
    assert_eq!(runs[1]["stagnating"], false);
    assert_eq!(
        finding(&runs[1], "score")["iterations"],
        serde_json::json!([4])
    );
    // stag-b's log says running and its last event is long past, but no runner lock says a
    // process still writes it (aif-loop takes none): it is not judged stalled, and says why.
    let v = json_of(&["stagnation", "--json"], &fixture("stagnation"), 3);
    let stalled = finding(&v["runs"][1], "stalled");
    assert_eq!(stalled["triggered"], false);
    assert!(
        stalled["summary"]
            .as_str()
            .is_some_and(|s| s.contains("no runner lock")),
        "{stalled}"
    );
    assert_eq!(v["runs"][1]["status"], "running");
}

#[test]
fn markdown_has_the_distance_to_success_of_a_run_stopped_at_its_limit() {
    let md = text_of(
        &[
            "postmortem",
            "--run-id",
            "alpha-svc-20260304-080000",
            "--format",
            "md",
        ],
        &fixture("merged-runs"),
        0,
    );
    assert!(md.contains("### Distance to success"), "{md}");
    assert!(
        md.contains(
            "- phase A threshold 0.8 (from the evaluation), final score 0.78 at iteration 2"
        ),
        "{md}"
    );
    assert!(md.contains("- gap to threshold: 0.02"), "{md}");
    assert!(md.contains("- blocking fail-severity rules: 1"), "{md}");
    assert!(md.contains("stopped at the iteration limit short of the threshold"));
    assert!(md.contains("| Stop reason | `iteration_limit` |"), "{md}");
    // The other run of the file passed: no such block.
    let md = text_of(
        &[
            "postmortem",
            "--run-id",
            "beta-docs-20260304-080500",
            "--format",
            "markdown",
        ],
        &fixture("merged-runs"),
        0,
    );
    assert!(!md.contains("Distance to success"), "{md}");
    // Without --run-id, a note names the run chosen.
    loopctl()
        .arg("postmortem")
        .arg(fixture("merged-runs"))
        .assert()
        .success()
        .stderr(predicate::str::contains("holds 2 runs"));
}

#[test]
fn postmortem_of_the_stagnating_fixture() {
    let path = fixture("stagnating-native");
    let pm = json_of(&["postmortem", "--json"], &path, 0);
    assert_eq!(json_of(&["postmortem", "--format", "json"], &path, 0), pm);
    assert_eq!(pm["stop"]["reason"], "stagnation");
    assert_eq!(pm["iterations_completed"], 3);
    assert_eq!(pm["retries"]["count"], 1);
    assert_eq!(pm["errors"]["count"], 1);
    assert!(
        pm["errors"]["last_phase_error"]
            .as_str()
            .unwrap()
            .contains("cannot find value `tmp`")
    );
    let fix = &pm["time_per_phase"][0];
    assert_eq!(
        (
            fix["name"].as_str(),
            fix["total_ms"].as_u64(),
            fix["count"].as_u64()
        ),
        (
            Some("fix"),
            Some(95_000 + 12_000 + 80_000 + 60_000),
            Some(4)
        )
    );
    assert_eq!(pm["distance_to_success"]["gap"], 0.185);
    assert_eq!(pm["distance_to_success"]["rules_passed"], 3);
    assert_eq!(pm["distance_to_success"]["rules_total"], 5);
    assert_eq!(pm["tokens"]["input"], 6030);
    assert_eq!(pm["stagnation"]["stagnating"], true);
    assert_eq!(pm["transitions"].as_array().unwrap().len(), 3);
    let md = text_of(&["postmortem", "--format", "md"], &path, 0);
    assert!(md.contains("| `score` | **triggered** |"), "{md}");
    assert!(md.contains("| 2 | fix | 1 | 12s | failed |"), "{md}");
    // Deterministic: the same bytes twice.
    assert_eq!(md, text_of(&["postmortem", "--format", "md"], &path, 0));
}

#[test]
fn damaged_lines_are_reported_and_skipped() {
    loopctl()
        .arg("postmortem")
        .arg(fixture("bad-middle"))
        .assert()
        .success()
        .stderr(predicate::str::contains("history.jsonl:").and(predicate::str::contains("byte")));
    loopctl()
        .args(["--strict", "postmortem"])
        .arg(fixture("bad-middle"))
        .assert()
        .code(1);
    loopctl()
        .arg("stagnation")
        .arg(fixture("torn-tail"))
        .assert()
        .stderr(predicate::str::contains("torn_tail"));
}

#[test]
fn bad_input_exits_2_and_help_documents_the_codes() {
    loopctl()
        .args(["stagnation", "/nonexistent/run"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent/run"));
    loopctl()
        .args(["postmortem", "--run-id", "nope"])
        .arg(fixture("merged-runs"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no run \"nope\""));
    loopctl()
        .args(["stagnation", "--reset", "sometimes"])
        .arg(fixture("healthy-native"))
        .assert()
        .code(2);
    loopctl()
        .args(["stagnation", "--stalled-after", "soon"])
        .arg(fixture("healthy-native"))
        .assert()
        .code(2);
    loopctl()
        .args(["postmortem", "--json", "--format", "md"])
        .arg(fixture("healthy-native"))
        .assert()
        .code(2);
    loopctl()
        .args(["stagnation", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Exit codes: 0 every run is healthy; 3 at least one run stagnates",
        ));
}

/// A root: a folder of run folders, copied from the fixtures.
fn root_of(runs: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for r in runs {
        let to = dir.path().join(r);
        std::fs::create_dir(&to).unwrap();
        std::fs::copy(fixture(r).join("history.jsonl"), to.join("history.jsonl")).unwrap();
    }
    dir
}

#[test]
fn stagnation_over_a_root_with_no_runs_says_so_as_list_does() {
    // A root that holds no run is no error for the commands over many runs (list, status):
    // `no runs under ROOT` on stdout, exit 0; JSON has no run in it.
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("not-a-run")).unwrap();
    let said = format!("no runs under {}\n", root.path().display());
    let list = text_of(&["list"], root.path(), 0);
    assert_eq!(list, said);
    assert_eq!(text_of(&["stagnation"], root.path(), 0), said);
    // No RUN: the root's runs, as `status` looks at the root when given no RUN.
    let out = loopctl()
        .args(["stagnation", "--root"])
        .arg(root.path())
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    assert_eq!(String::from_utf8(out).unwrap(), said);
    let v = json_of(&["stagnation", "--json"], root.path(), 0);
    assert_eq!(
        (
            v["stagnating"].as_bool(),
            v["runs"].as_array().map(Vec::len)
        ),
        (Some(false), Some(0))
    );
}

#[test]
fn stagnation_over_a_root_assesses_every_run_under_it() {
    // One stagnating run among healthy ones: exit 3, every run listed, in the order of the
    // root's listing.
    let root = root_of(&["healthy-native", "stagnating-native", "aif-loop-clean"]);
    let v = json_of(&["stagnation", "--json"], root.path(), 3);
    assert_eq!(v["stagnating"], true);
    let runs = v["runs"].as_array().unwrap();
    let verdicts: Vec<(&str, bool)> = runs
        .iter()
        .map(|r| {
            (
                r["log_path"].as_str().unwrap(),
                r["stagnating"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(verdicts.len(), 3, "{verdicts:?}");
    for name in ["healthy-native", "stagnating-native", "aif-loop-clean"] {
        let (_, stuck) = verdicts
            .iter()
            .find(|(log, _)| log.contains(name))
            .unwrap_or_else(|| panic!("{name} missing from {verdicts:?}"));
        assert_eq!(*stuck, name == "stagnating-native", "{name}");
    }
    // The same verdicts as each run assessed alone.
    for name in ["healthy-native", "stagnating-native"] {
        let alone = json_of(
            &["stagnation", "--json"],
            &root.path().join(name),
            i32::from(name == "stagnating-native") * 3,
        );
        let under = runs
            .iter()
            .find(|r| r["log_path"].as_str().unwrap().contains(name))
            .unwrap();
        assert_eq!(alone["runs"][0]["detectors"], under["detectors"], "{name}");
    }
    // No stagnating run under the root: exit 0.
    let healthy = root_of(&["healthy-native", "aif-loop-clean"]);
    let v = json_of(&["stagnation", "--json"], healthy.path(), 0);
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    let text = text_of(&["stagnation"], healthy.path(), 0);
    assert!(text.contains("healthy"), "{text}");
}

/// An aif-loop run whose log has no `run_started` keeps its limit in run.json: postmortem
/// reads it there, as `list` and `status` do (it said the limit was unknown).
#[test]
fn the_limit_an_aif_loop_log_leaves_out_comes_from_run_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("task");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("history.jsonl"),
        r#"{"ts":"2026-01-01T00:00:00Z","run_id":"task-20260101-000000","iteration":1,"phase":"A","step":"PLAN","event":"plan_created","status":"ok","payload":{}}
{"ts":"2026-01-01T00:01:00Z","run_id":"task-20260101-000000","iteration":1,"phase":"A","step":"EVALUATE","event":"evaluation_done","status":"ok","payload":{"score":0.5,"passed":false}}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("run.json"),
        r#"{"run_id":"task-20260101-000000","status":"running","iteration":1,"max_iterations":7}"#,
    )
    .unwrap();
    let pm = json_of(&["postmortem", "--json"], &dir, 0);
    assert_eq!(pm["max_iterations"], 7, "{pm}");
    let listed = loopctl()
        .args(["list", "--json"])
        .arg(tmp.path())
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(rows[0]["max_iterations"], pm["max_iterations"]);
}

/// "1 event", not "1 events".
#[test]
fn a_one_event_run_says_one_event() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("one.jsonl");
    std::fs::write(
        &log,
        r#"{"v":1,"seq":1,"ts":"2026-01-01T00:00:00.000Z","run_id":"one","event":"stopped","payload":{"reason":"user_stop"}}
"#,
    )
    .unwrap();
    let text = text_of(&["postmortem"], &log, 0);
    assert!(text.contains("(1 event)"), "{text}");
    let md = text_of(&["postmortem", "--format", "md"], &log, 0);
    assert!(md.contains("(1 event) |"), "{md}");
}

/// An attempt its killed runner never finished is `abandoned` once a resumed runner started the
/// phase again or the run ended; only a running run's last attempt is `running`.
#[test]
fn an_attempt_a_killed_runner_left_is_abandoned_not_running() {
    let t = tempfile::tempdir().unwrap();
    let ev = |seq: u64, event: &str, attempt: u64, extra: &str| {
        format!(
            r#"{{"v":1,"seq":{seq},"ts":"2026-03-01T09:00:{seq:02}.000Z","run_id":"k-20260301-090000","event":"{event}","iteration":1,"phase":"A","step":"work","payload":{{"attempt":{attempt}{extra}}}}}"#
        )
    };
    let killed = [
        ev(1, "run_started", 0, ""),
        ev(2, "phase_started", 1, ""),
        ev(3, "run_resumed", 0, ""),
        ev(4, "phase_started", 2, ""),
    ];
    let outcomes = |lines: &[String]| -> Vec<String> {
        let log = t.path().join("history.jsonl");
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
        let report = json_of(&["postmortem", "--json"], &log, 0);
        let phases = report["timeline"][0]["phases"].as_array().unwrap();
        let outcomes: Vec<String> = phases
            .iter()
            .map(|p| p["outcome"].as_str().unwrap().to_string())
            .collect();
        // The analytics' phases table says the same.
        let sql = "select outcome from phases order by attempt";
        let table = json_of(&["query", sql, "--json"], &log, 0);
        let column: Vec<&str> = table
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["outcome"].as_str().unwrap())
            .collect();
        assert_eq!(column, outcomes);
        outcomes
    };
    assert_eq!(outcomes(&killed), ["abandoned", "running"]);
    let mut ended = killed.to_vec();
    ended.push(ev(5, "stopped", 0, r#","reason":"user_stop""#));
    assert_eq!(outcomes(&ended), ["abandoned", "abandoned"]);
}

/// A run whose events carry no quality phase (and whose run_started has no phased criteria)
/// has none in the postmortem either, as in `status`: no invented `A`. Phased criteria start
/// in A, as run.json says.
#[test]
fn a_run_without_phases_gets_no_invented_phase() {
    let tmp = tempfile::tempdir().unwrap();
    let log = |criteria: &str| {
        [
            format!(r#"{{"v":1,"seq":1,"ts":"2026-03-01T09:00:01.000Z","run_id":"np","event":"run_started","payload":{{"max_iterations":3{criteria}}}}}"#),
            r#"{"v":1,"seq":2,"ts":"2026-03-01T09:00:02.000Z","run_id":"np","event":"phase_started","iteration":1,"step":"build"}"#.into(),
            r#"{"v":1,"seq":3,"ts":"2026-03-01T09:00:03.000Z","run_id":"np","event":"phase_finished","iteration":1,"step":"build","payload":{"duration_ms":1000}}"#.into(),
            r#"{"v":1,"seq":4,"ts":"2026-03-01T09:00:04.000Z","run_id":"np","event":"evaluation_done","iteration":1,"payload":{"score":0.5,"passed":false}}"#.into(),
            r#"{"v":1,"seq":5,"ts":"2026-03-01T09:00:05.000Z","run_id":"np","event":"stopped","payload":{"reason":"user_stop"}}"#.into(),
        ]
        .join("\n")
            + "\n"
    };
    for (name, criteria, phase) in [
        ("plain", "", Value::Null),
        (
            "phased",
            r#","criteria":{"A":{"threshold":0.8}}"#,
            "A".into(),
        ),
    ] {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("history.jsonl"), log(criteria)).unwrap();
        let status = json_of(&["status", "--json"], &dir, 0);
        assert_eq!(status["phase"], phase, "{name}");
        let pm = json_of(&["postmortem", "--json"], &dir, 0);
        assert_eq!(pm["scores"]["points"][0]["phase"], phase, "{name}");
        assert_eq!(
            pm["timeline"][0]["evaluations"][0]["phase"], phase,
            "{name}"
        );
        assert_eq!(pm["distance_to_success"]["phase"], phase, "{name}");
        let text = text_of(&["postmortem"], &dir, 0);
        let md = text_of(&["postmortem", "--format", "md"], &dir, 0);
        for (shown, marks) in [
            (&text, ["score  0.5 (A)", "1/A 0.5", "phase A threshold"]),
            (&md, ["evaluation (A)", "| 1 | A |", "phase A threshold"]),
        ] {
            for mark in marks {
                assert_eq!(
                    shown.contains(mark),
                    !phase.is_null(),
                    "{name}: {mark}\n{shown}"
                );
            }
        }
    }
}
