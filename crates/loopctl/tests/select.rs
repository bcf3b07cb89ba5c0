//! Which run a command works on: run ids and aliases, runs inside merged logs, the run chosen
//! when none is named, state files of merged logs, history's lines, the run-id rule, and a
//! path that names no regular file.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use loopctl_tests::repo;
use serde_json::Value;

fn loopctl() -> Command {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    c.env_remove("LOOPCTL_ROOT").env("NO_COLOR", "1");
    c
}

fn fixtures() -> PathBuf {
    repo().join("fixtures")
}

/// (exit code, stdout, stderr) of `loopctl --root ROOT ARGS`.
fn at(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = loopctl()
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_at(root: &Path, args: &[&str]) -> Value {
    let (code, out, err) = at(root, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.path().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

const STAG_A: &str = "stag-a-20260311-090000";
const STAG_B: &str = "stag-b-20260311-091500";
const ALPHA: &str = "alpha-svc-20260304-080000";
const BETA: &str = "beta-docs-20260304-080500";

#[test]
fn a_run_id_or_alias_selects_exactly_that_run() {
    let root = fixtures();
    // A run id inside a folder whose log holds two runs.
    let s = json_at(&root, &["status", STAG_A, "--json"]);
    assert_eq!(s["run_id"], STAG_A);
    // A run id whose folder is named otherwise (merged-runs).
    let s = json_at(&root, &["status", BETA, "--json"]);
    assert_eq!(s["run_id"], BETA);
    // The alias status itself prints.
    let s = json_at(&root, &["status", "drift-check", "--json"]);
    assert_eq!(s["task_alias"], "drift-check");
    // --run-id on status and check, RUN being the folder.
    let s = json_at(
        &root,
        &["status", "stagnation", "--run-id", STAG_A, "--json"],
    );
    assert_eq!(s["run_id"], STAG_A);
    let (code, _, err) = at(&root, &["check", "stagnation", "--run-id", STAG_A]);
    assert!(code <= 1, "{err}");
    // A RUN naming one run and a --run-id naming another is an error.
    let (code, _, err) = at(&root, &["status", STAG_A, "--run-id", STAG_B]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn every_command_works_on_the_run_named() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(&fixtures(), &root);
    let (_, out, err) = at(&root, &["replay", STAG_A]);
    assert!(out.contains(STAG_A) && !out.contains(STAG_B), "{out}{err}");
    let (_, out, err) = at(&root, &["recover", STAG_A, "--dry-run", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(v["state"]["run_id"], STAG_A);
    let (_, out, err) = at(&root, &["history", STAG_A]);
    assert!(out.contains(STAG_A) && !out.contains(STAG_B), "{out}{err}");
    let v = json_at(&root, &["postmortem", STAG_A, "--json"]);
    assert!(v.to_string().contains(STAG_A) && !v.to_string().contains(STAG_B));
    let (code, out, err) = at(&root, &["stagnation", STAG_A, "--json"]);
    assert!(code == 0 || code == 3, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [STAG_A]);
    let (code, out, err) = at(&root, &["tail", STAG_A, "--no-follow", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().count() > 1);
    assert!(out.lines().all(|l| l.contains(STAG_A)), "{out}");
    // stag-a is over: stop says so and leaves the log alone; stag-b would be stopped.
    let log = std::fs::read(root.join("stagnation/history.jsonl")).unwrap();
    let v = json_at(&root, &["stop", STAG_A, "--json"]);
    assert_eq!(v["result"], "already_over", "{v}");
    assert_eq!(
        std::fs::read(root.join("stagnation/history.jsonl")).unwrap(),
        log
    );
    let (code, _, err) = at(&root, &["resume", STAG_A]);
    assert_eq!(code, 2);
    assert!(err.contains(STAG_A), "{err}");
}

#[test]
fn an_ambiguous_alias_is_an_error_listing_the_candidates() {
    let tmp = tempfile::tempdir().unwrap();
    for d in ["one", "two"] {
        std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        std::fs::copy(
            fixtures().join("aif-drift/history.jsonl"),
            tmp.path().join(d).join("history.jsonl"),
        )
        .unwrap();
    }
    let (code, out, err) = at(tmp.path(), &["status", "drift-check"]);
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("ambiguous"), "{err}");
    for d in ["one", "two"] {
        assert!(
            err.contains(&format!("{d}/history.jsonl")) && err.contains("drift-check-20260303"),
            "{err}"
        );
    }
}

#[test]
fn a_command_showing_one_run_of_several_says_so() {
    let (code, _, err) = at(&fixtures(), &["status", "stagnation"]);
    assert_eq!(code, 0);
    assert!(
        err.contains("holds 2 runs") && err.contains(STAG_B) && err.contains("--run-id"),
        "{err}"
    );
    // Naming the run: no note.
    let (_, _, err) = at(&fixtures(), &["status", STAG_B]);
    assert!(!err.contains("holds 2 runs"), "{err}");
}

#[test]
fn recover_gives_each_run_of_a_merged_log_its_own_state() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("merged.jsonl");
    std::fs::copy(fixtures().join("merged-runs/history.jsonl"), &log).unwrap();
    for id in [ALPHA, BETA, ALPHA] {
        loopctl()
            .arg("recover")
            .arg(&log)
            .args(["--run-id", id])
            .assert()
            .success();
    }
    let mut names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            format!("merged.{ALPHA}.run.json"),
            format!("merged.{BETA}.run.json"),
            "merged.jsonl".into()
        ]
    );
    for id in [ALPHA, BETA] {
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.path().join(format!("merged.{id}.run.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(v["run_id"], id);
    }
    // A state file written before (merged.run.json, naming alpha) stays alpha's.
    std::fs::rename(
        tmp.path().join(format!("merged.{ALPHA}.run.json")),
        tmp.path().join("merged.run.json"),
    )
    .unwrap();
    let before = std::fs::read(tmp.path().join("merged.run.json")).unwrap();
    std::fs::remove_file(tmp.path().join(format!("merged.{BETA}.run.json"))).unwrap();
    let out = loopctl()
        .arg("recover")
        .arg(&log)
        .args(["--run-id", BETA, "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["kept_aside"], Value::Null);
    assert_eq!(
        std::fs::read(tmp.path().join("merged.run.json")).unwrap(),
        before
    );
    assert!(tmp.path().join(format!("merged.{BETA}.run.json")).exists());
    let v = json_at(
        tmp.path(),
        &["status", log.to_str().unwrap(), "--run-id", ALPHA, "--json"],
    );
    assert_eq!(v["run_id"], ALPHA);
}

fn write_run(root: &Path, dir: &str, run: &str, ts: &str) {
    let d = root.join(dir);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("history.jsonl"),
        format!(
            "{{\"v\":1,\"seq\":1,\"ts\":\"{ts}\",\"run_id\":\"{run}\",\"event\":\"run_started\",\"payload\":{{}}}}\n\
             {{\"v\":1,\"seq\":2,\"ts\":\"{ts}\",\"run_id\":\"{run}\",\"event\":\"stopped\",\"payload\":{{\"reason\":\"marker\"}}}}\n"
        ),
    )
    .unwrap();
}

#[test]
fn with_no_run_the_newest_run_is_used_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // The newer run is written first: its log's file is older than the other's.
    write_run(root, "newer", "newer-1", "2026-05-02T10:00:00.000Z");
    write_run(root, "older", "older-1", "2026-05-01T10:00:00.000Z");
    let (code, out, err) = at(root, &["status", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["run_id"], "newer-1");
    assert!(err.contains("newest run") && err.contains("newer"), "{err}");
    let (code, out, err) = at(root, &["history"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("newer-1") && !out.contains("older-1"), "{out}");
    // current.json naming a run under the root wins, and is named as the reason.
    std::fs::write(
        root.join("current.json"),
        r#"{"active_run_id":"older-1","task_alias":"older"}"#,
    )
    .unwrap();
    let (_, out, err) = at(root, &["status", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["run_id"],
        "older-1"
    );
    assert!(err.contains("current.json"), "{err}");
    // current.json naming a run that is gone: the newest run, and why.
    std::fs::write(root.join("current.json"), r#"{"active_run_id":"gone-1"}"#).unwrap();
    let (_, out, err) = at(root, &["status", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["run_id"],
        "newer-1"
    );
    assert!(err.contains("gone-1"), "{err}");
}

#[test]
fn history_of_a_merged_log_names_each_line_s_run_and_shows_tail_s_fields() {
    let (code, out, err) = at(&fixtures(), &["history", "stagnation"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 10);
    assert!(
        lines
            .iter()
            .all(|l| l.contains(STAG_A) ^ l.contains(STAG_B)),
        "{out}"
    );
    let (_, out, _) = at(&fixtures(), &["history", "healthy-native"]);
    let finished = out
        .lines()
        .find(|l| l.contains("phase_finished"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        finished.contains("ok") && finished.contains("exit 0") && finished.contains("120.0s"),
        "{finished}"
    );
    let stop = out.lines().last().unwrap();
    assert!(stop.contains("completed (marker)"), "{stop}");
}

#[test]
fn run_ids_follow_one_rule_with_one_message() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    copy_tree(&repo().join("examples/fix-the-tests"), &work);
    let root = tmp.path().join("root");
    let run = |id: &str| {
        loopctl()
            .current_dir(&work)
            .args(["run", "--quiet", "--loop-file", "loop.json", "--root"])
            .arg(&root)
            .arg(format!("--run-id={id}"))
            .output()
            .unwrap()
    };
    for bad in ["run 🚀 ünï", "-rf", "..", ".hidden", "a/b", ""] {
        let out = run(bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(
            err.contains("ASCII letters, digits, '-', '_' or '.', starting with a letter or digit"),
            "{bad:?}: {err}"
        );
    }
    assert!(!root.exists() || std::fs::read_dir(&root).unwrap().next().is_none());
    let out = run("ok_run-1.2");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(root.join("ok_run-1.2/history.jsonl").is_file());
}

#[test]
fn clean_of_one_run_of_a_shared_log_deletes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(&fixtures().join("merged-runs"), &root.join("merged-runs"));
    let (code, _, err) = at(&root, &["clean", ALPHA, "--yes"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("1 other run"), "{err}");
    assert!(root.join("merged-runs/history.jsonl").is_file());
}

#[test]
fn stop_of_one_run_of_a_shared_log_writes_only_its_own_state() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(&fixtures().join("stagnation"), &root.join("stagnation"));
    // run.json is stag-a's (a finished run); stag-b is running with no runner.
    loopctl()
        .arg("--root")
        .arg(&root)
        .args(["recover", STAG_A])
        .assert()
        .success();
    std::fs::rename(
        root.join(format!("stagnation/{STAG_A}.run.json")),
        root.join("stagnation/run.json"),
    )
    .unwrap();
    let a_state = std::fs::read(root.join("stagnation/run.json")).unwrap();
    // A lock nobody holds: a loopctl runner's log whose runner is gone (stop writes into no
    // log of another tool's, and these events are aif-loop's).
    std::fs::write(root.join("stagnation/.history.jsonl.lock"), "").unwrap();
    let v = json_at(&root, &["stop", STAG_B, "--json"]);
    assert_eq!(v["result"], "idle", "{v}");
    assert!(
        std::fs::read(root.join("stagnation/run.json")).unwrap() == a_state,
        "stop of stag-b rewrote stag-a's run.json"
    );
    let b: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join(format!("stagnation/{STAG_B}.run.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (b["run_id"].as_str(), b["status"].as_str()),
        (Some(STAG_B), Some("stopped"))
    );
}

/// A RUN or path that is there but is no regular file or folder (a fifo), or a run folder whose
/// log is one, is said to be that, exit 2, by every read command: not "no run", not "Not a
/// directory". Nothing blocks on the fifo.
#[test]
fn a_fifo_named_as_a_log_or_a_run_folders_log_is_said_to_be_no_regular_file() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("pipe.jsonl");
    let folder = tmp.path().join("root/a");
    std::fs::create_dir_all(&folder).unwrap();
    for f in [&fifo, &folder.join("history.jsonl")] {
        nix::unistd::mkfifo(f, nix::sys::stat::Mode::S_IRWXU).unwrap();
    }
    let root = tmp.path().join("root");
    let (fifo, folder) = (fifo.to_str().unwrap(), folder.to_str().unwrap());
    let root = root.to_str().unwrap();
    for args in [
        vec!["status", fifo],
        vec!["history", fifo],
        vec!["check", fifo],
        vec!["postmortem", fifo],
        vec!["stagnation", fifo],
        vec!["list", fifo],
        vec!["check", folder],
        vec!["status", folder],
        vec!["--root", root, "status", "a"],
    ] {
        let out = loopctl().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
    }
}

/// In a log of several runs, `check` names the run it shows as `status` and `postmortem` do
/// (the folder's run: here the one updated last), or none when it compares no state file.
#[test]
fn check_names_the_run_status_and_postmortem_show_in_a_merged_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mr");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo().join("fixtures/merged-runs/history.jsonl"),
        dir.join("history.jsonl"),
    )
    .unwrap();
    let shown = |cmd: &str| {
        let out = loopctl().args([cmd]).arg(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        err.split("showing ")
            .nth(1)
            .map(|s| s.split(' ').next().unwrap_or_default().to_string())
    };
    let status = shown("status");
    assert_eq!(status.as_deref(), Some("alpha-svc-20260304-080000"));
    assert_eq!(shown("postmortem"), status);
    let check = shown("check");
    assert!(check.is_none() || check == status, "{check:?}");
    // With a state file to compare (one naming no run), it names the same run.
    std::fs::write(dir.join("run.json"), "{}\n").unwrap();
    assert_eq!(shown("check"), status);
}
