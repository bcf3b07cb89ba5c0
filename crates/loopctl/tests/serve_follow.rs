//! `loopctl serve` while it follows its logs: torn tails, renamed run folders, emptied logs,
//! the open-file limit (one file kept open per followed log), the folders it watches, and
//! `/api/runs` as the logs change.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
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

/// `/api/runs` gives the rows `list --json` gives, a log with no event (an empty row), a log of
/// damaged lines (an empty row with its findings) and logs of several runs (each run its own
/// seq findings, the folder's run the damaged lines) included.
#[test]
fn api_runs_lists_the_rows_of_list_in_its_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, _) = root_with_alpha(tmp.path(), "alpha-20260101-000000");
    for (name, text) in [("blank", ""), ("garbled", "not json\n{\"event\":\n")] {
        std::fs::create_dir_all(root.join(name)).unwrap();
        std::fs::write(root.join(name).join("history.jsonl"), text).unwrap();
    }
    for fixture in ["seq-problems", "merged-runs", "bad-middle", "torn-tail"] {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(fixture);
        std::fs::create_dir_all(root.join(fixture)).unwrap();
        std::fs::copy(
            from.join("history.jsonl"),
            root.join(fixture).join("history.jsonl"),
        )
        .unwrap();
    }
    // A run whose runner is gone (its lock file held by no one): `resume` names the command
    // that continues it, as `list` names it.
    let gone = root.join("gone");
    std::fs::create_dir_all(&gone).unwrap();
    append(
        &gone.join("history.jsonl"),
        &event(1, "gone-20260101-000000", "run_started", json!({})),
    );
    std::fs::write(gone.join(".history.jsonl.lock"), "").unwrap();
    // A torn tail, completed by its writer once the server follows the log.
    let torn = root.join("torn-later");
    std::fs::create_dir_all(&torn).unwrap();
    let whole = event(2, "torn-later-20260101-000000", "run_resumed", json!({}));
    let mut text = event(1, "torn-later-20260101-000000", "run_started", json!({}));
    text.push_str(&whole[..whole.len() / 2]);
    std::fs::write(torn.join("history.jsonl"), &text).unwrap();
    let s = Server::start(&[&root], &[]);
    // A run folder that appears later, first in name order: listed where `list` lists it.
    let late = root.join("0-late");
    std::fs::create_dir_all(&late).unwrap();
    append(
        &late.join("history.jsonl"),
        &event(1, "0-late-20260101-000000", "run_started", json!({})),
    );
    append(&torn.join("history.jsonl"), &whole[whole.len() / 2..]);
    s.wait_until(
        |s| {
            let rows: Vec<Value> = serde_json::from_str(&s.get("/api/runs").1).unwrap_or_default();
            let events = |id: &str| {
                let row = rows.iter().find(|r| r["run_id"] == id);
                row.and_then(|r| r["events"].as_u64())
            };
            events("0-late-20260101-000000") == Some(1)
                && events("torn-later-20260101-000000") == Some(2)
        },
        "the late run and the completed line",
    );
    let (code, body) = s.get("/api/runs");
    assert_eq!(code, 200);
    let served: Vec<Value> = serde_json::from_str(&body).unwrap();
    let listed = Command::new(cargo_bin("loopctl"))
        .arg("list")
        .arg(&root)
        .arg("--json")
        .output()
        .unwrap();
    let mut listed: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let mut served = served;
    for rows in [&mut listed, &mut served] {
        for r in rows.iter_mut() {
            r.as_object_mut().unwrap().remove("idle_ms");
        }
    }
    assert_eq!(served, listed);
    let garbled = served.iter().find(|r| r["run_id"] == "garbled").unwrap();
    assert_eq!(
        (
            garbled["status"].as_str(),
            garbled["finding_count"].as_u64()
        ),
        (Some("empty"), Some(2))
    );
    let findings = |id: &str| {
        let r = served.iter().find(|r| r["run_id"] == id).unwrap();
        r["finding_count"].as_u64()
    };
    assert_eq!(
        (findings("late-joiner"), findings("seq-problems")),
        (Some(1), Some(3))
    );
    assert_eq!(findings("torn-later-20260101-000000"), Some(0));
    let gone = served
        .iter()
        .find(|r| r["run_id"] == "gone-20260101-000000");
    assert!(gone.unwrap()["resume"].is_string(), "{gone:?}");
}

/// A log emptied while served: no line comes to say so, yet its runs go at once, as a fresh
/// start on the empty log would show them.
#[test]
fn a_log_emptied_while_served_loses_its_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("gamma");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("history.jsonl");
    let id = "gamma-20260101-000000";
    append(
        &log,
        &(event(1, id, "run_started", json!({}))
            + &event(2, id, "stopped", json!({"reason": "threshold_reached"}))),
    );
    let s = Server::start(&[&dir], &[]);
    let gauge = r#"loopctl_runs{loop="gamma",status="completed"}"#;
    assert_eq!(value(&s.metrics(), gauge), Some(1.0));
    assert!(s.get("/api/runs").1.contains(id));
    std::fs::write(&log, "").unwrap();
    s.wait_until(
        |s| value(&s.metrics(), gauge).unwrap_or(0.0) == 0.0,
        "the emptied log's run to leave the gauge",
    );
    let (status, runs) = s.get("/api/runs");
    assert_eq!(status, 200);
    assert!(!runs.contains(id), "{runs}");
    // Written again: read from its start.
    append(&log, &event(1, id, "run_started", json!({})));
    let running = r#"loopctl_runs{loop="gamma",status="running"}"#;
    s.wait_until(
        |s| value(&s.metrics(), running) == Some(1.0),
        "the run written again",
    );
}

/// The inotify watches process `pid` holds (Linux: each is an `inotify wd:` line of its
/// descriptors' fdinfo).
#[cfg(target_os = "linux")]
fn inotify_watches(pid: u32) -> usize {
    let dir = format!("/proc/{pid}/fdinfo");
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|t| t.lines().filter(|l| l.starts_with("inotify wd:")).count())
        .sum()
}

/// A log named as a file, or a run folder, is watched in its own folder only: a folder with
/// thousands of folders under it (a home folder, a checkout) must not get a watch on each.
/// A root of run folders is watched with its subfolders (new runs appear there).
#[cfg(target_os = "linux")]
#[test]
fn a_log_or_run_folder_is_watched_without_the_folders_under_it() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("gamma");
    for i in 0..20 {
        std::fs::create_dir_all(run.join(format!("sub-{i}/deeper"))).unwrap();
    }
    let log = run.join("history.jsonl");
    append(&log, &event(1, "gamma-1", "run_started", json!({})));
    let root = tmp.path();
    for (target, want) in [(&log, 1), (&run, 1), (&root.to_path_buf(), 42)] {
        let s = Server::start(&[target], &[]);
        // The watches are set up once the replay is done: until then, fewer.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut seen = inotify_watches(s.child.id());
        while seen < want && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(50));
            seen = inotify_watches(s.child.id());
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(inotify_watches(s.child.id()), want, "{}", target.display());
        // Still followed: an append shows in the next scrapes.
        append(
            &log,
            &event(2, "gamma-1", "stopped", json!({"reason": "done"})),
        );
        let stopped = r#"loopctl_runs{loop="gamma",status="stopped"}"#;
        s.wait_until(|s| value(&s.metrics(), stopped) == Some(1.0), "the append");
        std::fs::write(&log, event(1, "gamma-1", "run_started", json!({}))).unwrap();
    }
}
