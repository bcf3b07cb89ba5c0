//! `loopctl serve` while it follows its logs: torn tails, renamed run folders, and the
//! open-file limit (one file kept open per followed log).

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::logs::{append, event, root_with_alpha, value};
use common::server::{Server, limited};

/// A log whose last line was torn at start-up, ended later by its writer: the torn tail stays
/// counted (counters never go down) and the completed line's event counts.
#[test]
fn a_torn_tail_found_at_start_up_stays_counted_once_its_writer_ends_it() {
    let tmp = tempfile::tempdir().unwrap();
    let run = "omega-20260101-000000";
    let (root, a) = root_with_alpha(tmp.path(), run);
    let log = a.join("history.jsonl");
    let whole = event(
        2,
        run,
        "evaluation_done",
        json!({"score": 0.5, "passed": false}),
    );
    let (head, tail) = whole.split_at(20);
    append(&log, head);
    let s = Server::start(&[&root], &[]);
    let torn = r#"loopctl_log_findings_total{kind="torn_tail"}"#;
    let evals = r#"loopctl_evaluations_total{loop="omega",result="fail"}"#;
    assert_eq!(value(&s.metrics(), torn), Some(1.0));
    assert_eq!(value(&s.metrics(), evals), None);
    append(&log, tail);
    s.wait_until(
        |s| value(&s.metrics(), evals) == Some(1.0),
        "the completed line",
    );
    let m = s.metrics();
    assert_eq!(value(&m, torn), Some(1.0), "{m}");
    assert_eq!(
        value(&m, r#"loopctl_log_findings_total{kind="bad_line"}"#),
        Some(0.0)
    );
}

/// `serve` keeps one file open per followed log: beyond what the open-file limit leaves room
/// for (the hard limit: the soft one is raised to it), it refuses at start, naming the limit,
/// rather than a server that stops answering; logs that appear later past the room wait, said
/// once, and the server goes on answering.
#[test]
fn serve_stays_within_the_open_file_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let folder = |i: usize| {
        let run = format!("lim{i:02}-20260101-000000");
        let dir = root.join(format!("lim{i:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        append(
            &dir.join("history.jsonl"),
            &event(1, &run, "run_started", json!({})),
        );
    };
    // 150 files: 64 kept spare, 64 for connections, 22 for logs.
    (0..30).for_each(folder);
    let mut child = limited(150)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg(&root)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("serve started past the open-file limit instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("30 logs to follow")
            && err.contains("limit (150")
            && err.contains("room for 22"),
        "{err}"
    );

    std::fs::remove_dir_all(&root).unwrap();
    (0..10).for_each(folder);
    let s = Server::start_limited(150, &[&root], &[]);
    (10..30).for_each(folder);
    let started = |s: &Server| {
        s.metrics()
            .lines()
            .filter(|l| l.starts_with("loopctl_runs_started_total{"))
            .count()
    };
    s.wait_until(|s| started(s) == 22, "22 logs followed");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(started(&s), 22);
    assert_eq!(s.get("/healthz").0, 200);
    let notices = s.notices().join("\n");
    assert_eq!(notices.matches("not followed").count(), 1, "{notices}");
    assert!(notices.contains("room for 22"), "{notices}");
}

/// A run folder renamed while serving is the same log under a new name: followed on from
/// where it was read, not counted again (no counter moves, no alert fires); `/api/runs` names
/// the new folder. A folder deleted is dropped from the gauge at the next rescan.
#[test]
fn a_renamed_run_folder_is_followed_on_not_counted_again() {
    let tmp = tempfile::tempdir().unwrap();
    let run = "ren-20260101-000000";
    let (root, a) = root_with_alpha(tmp.path(), run);
    append(
        &a.join("history.jsonl"),
        &event(
            2,
            run,
            "evaluation_done",
            json!({"score": 0.5, "passed": false}),
        ),
    );
    let s = Server::start(&[&root], &[]);
    let evals = r#"loopctl_evaluations_total{loop="ren",result="fail"}"#;
    let started = r#"loopctl_runs_started_total{loop="ren"}"#;
    let events = r#"loopctl_events_total{dialect="native",event="run_started"}"#;
    assert_eq!(value(&s.metrics(), evals), Some(1.0));
    let b = root.join("renamed");
    std::fs::rename(&a, &b).unwrap();
    s.wait_until(
        |s| s.get("/api/runs").1.contains("renamed"),
        "the new folder in /api/runs",
    );
    let (_, rows) = s.get("/api/runs");
    let rows: Value = serde_json::from_str(&rows).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
    // Said to have moved, not to have been deleted.
    let notices = s.notices().join("\n");
    assert!(notices.contains("moved to"), "{notices}");
    assert!(!notices.contains("deleted"), "{notices}");
    let m = s.metrics();
    assert_eq!(value(&m, started), Some(1.0), "{m}");
    assert_eq!(value(&m, events), Some(1.0), "{m}");
    assert_eq!(value(&m, evals), Some(1.0), "{m}");
    // Followed on under its new name.
    append(
        &b.join("history.jsonl"),
        &event(
            3,
            run,
            "evaluation_done",
            json!({"score": 0.6, "passed": false}),
        ),
    );
    s.wait_until(
        |s| value(&s.metrics(), evals) == Some(2.0),
        "the appended event",
    );
    assert_eq!(value(&s.metrics(), started), Some(1.0));
    // Deleted: out of the gauge, its counts kept.
    std::fs::remove_dir_all(&b).unwrap();
    let running = r#"loopctl_runs{loop="ren",status="running"}"#;
    s.wait_until(
        |s| value(&s.metrics(), running).unwrap_or(0.0) == 0.0,
        "the deleted run to leave the gauge",
    );
    assert_eq!(value(&s.metrics(), evals), Some(2.0));
    assert_eq!(s.get("/api/runs").1.trim(), "[]");
    s.wait_until(
        |s| s.notices().join("\n").contains("was deleted"),
        "the deletion said",
    );
}
