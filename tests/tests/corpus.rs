//! The real-world corpus in `../shared/corpus`: every file is read without losing an event, and
//! every aif-loop run recovers into a valid run.json that agrees with its history.

use std::path::Path;

use loopctl_store::fold::replay;
use loopctl_store::read::ReadOptions;
use loopctl_store::snapshot::{Prior, keep_aside, rebuild, write_atomic};
use loopctl_tests::{files_below, shared};
use serde_json::Value;

fn opts(name: &str) -> ReadOptions {
    ReadOptions {
        default_run: name.into(),
        ..ReadOptions::default()
    }
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn every_corpus_log_is_read_without_losing_an_event() {
    let Some(shared) = shared("the real-world corpus") else {
        return;
    };
    let logs: Vec<_> = files_below(&shared.join("corpus"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl" || e == "ndjson"))
        .collect();
    assert!(logs.len() >= 5, "corpus has its logs: {logs:?}");
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap();
        let lines = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
        let out = replay(&log, &opts("corpus"), None).unwrap();
        assert!(
            out.findings.is_empty(),
            "{}: {:?}",
            log.display(),
            out.findings
        );
        assert_eq!(
            out.stats.events,
            lines,
            "{}: every line is an event",
            log.display()
        );
        let applied: u64 = out.runs.values().map(|s| s.events).sum();
        assert_eq!(
            applied,
            lines,
            "{}: every event is applied to a run",
            log.display()
        );
    }
}

/// What the history alone says, read independently of loopctl's parser.
struct Oracle {
    status: &'static str,
    reason: String,
    phase: String,
    iteration: u64,
    last_score: f64,
}

fn oracle(history: &Path) -> Oracle {
    let events: Vec<Value> = std::fs::read_to_string(history)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stop = events
        .iter()
        .rev()
        .find(|e| e["event"] == "stopped")
        .expect("each corpus run ends with stopped");
    let reason_text = stop["payload"]["reason"].as_str().unwrap();
    let reason: String = reason_text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let status = match reason.as_str() {
        "threshold_reached" | "no_major_issues" => "completed",
        "phase_error" => "failed",
        _ => "stopped",
    };
    let last_score = stop["payload"]["score"]
        .as_f64()
        .or(stop["payload"]["final_score"].as_f64())
        .or_else(|| {
            events
                .iter()
                .rev()
                .find_map(|e| e["payload"]["score"].as_f64())
        })
        .unwrap_or(0.0);
    Oracle {
        status,
        reason,
        phase: stop["phase"].as_str().unwrap().to_string(),
        iteration: events
            .iter()
            .filter_map(|e| e["iteration"].as_u64())
            .max()
            .unwrap_or(0),
        last_score,
    }
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn every_vedo_hub_run_recovers_into_a_run_json_that_agrees_with_its_history() {
    let Some(shared) = shared("recovery of the corpus runs") else {
        return;
    };
    let src = shared.join("corpus/aif-loop/vedo-hub");
    let tmp = tempfile::tempdir().unwrap();
    let mut runs = 0;
    let mut damaged = 0;
    for entry in std::fs::read_dir(&src).unwrap().flatten() {
        if !entry.path().join("history.jsonl").is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let dir = tmp.path().join(&name);
        std::fs::create_dir(&dir).unwrap();
        for f in ["history.jsonl", "run.json"] {
            std::fs::copy(entry.path().join(f), dir.join(f)).unwrap();
        }
        let (log, rj) = (dir.join("history.jsonl"), dir.join("run.json"));
        let before = std::fs::read(&rj).unwrap();

        let rebuilt = rebuild(&log, Some(&rj), &opts(&name), None, false).unwrap();
        if rebuilt.prior == Prior::Damaged {
            damaged += 1;
            assert!(!rebuilt.repairs.is_empty(), "{name}: says what it repaired");
        }
        let text = rebuilt.run_json().unwrap();
        if rebuilt.prior != Prior::Snapshot {
            let kept = keep_aside(&rj).unwrap();
            assert_eq!(
                std::fs::read(&kept).unwrap(),
                before,
                "{name}: the old file is kept as it was"
            );
        }
        write_atomic(&rj, &text).unwrap();

        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(&rj).unwrap()).expect("valid JSON");
        let want = oracle(&log);
        assert_eq!(v["status"], want.status, "{name}: status");
        assert_eq!(
            v["stop"]["reason"],
            want.reason.as_str(),
            "{name}: stop reason"
        );
        assert_eq!(v["phase"], want.phase.as_str(), "{name}: phase");
        assert_eq!(v["iteration"], want.iteration, "{name}: iteration");
        assert!(
            (v["last_score"].as_f64().unwrap() - want.last_score).abs() < 1e-9,
            "{name}: last score"
        );
        assert!(
            v["task"].is_object(),
            "{name}: task is salvaged from the old run.json when the log lacks it"
        );
        // aif-loop's agent's own fields, in no event, are kept from a readable old file.
        if let Ok(old) = serde_json::from_slice::<Value>(&before) {
            for field in ["plan", "prepared_checks", "critique"] {
                if !old[field].is_null() {
                    assert_eq!(v[field], old[field], "{name}: {field} kept");
                }
            }
        }
        if name == "acceptance-criteria-verification" {
            assert_eq!(
                v["status"], "stopped",
                "the stale running run.json is corrected"
            );
            assert_eq!(
                v["stop"]["detail"],
                "stopped to start new test-integration loop"
            );
            assert_eq!(
                v["max_iterations"], 4,
                "salvaged from run.json: the log has no run_started"
            );
        }

        // Replaying again (now from the snapshot just written) gives the same bytes.
        let again = rebuild(&log, Some(&rj), &opts(&name), None, true).unwrap();
        assert_eq!(
            again.prior,
            Prior::Snapshot,
            "{name}: the new run.json is a valid snapshot"
        );
        assert_eq!(again.run_json().unwrap(), text, "{name}: deterministic");
        runs += 1;
    }
    assert_eq!(
        (runs, damaged),
        (4, 2),
        "four runs, two with invalid run.json"
    );
}
