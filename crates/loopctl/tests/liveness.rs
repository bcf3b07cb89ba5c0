//! A run whose runner died (kill -9) is `interrupted`, with the time since its last event and
//! the command that continues it; `stalled` is kept for runs whose runner is alive.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use serde_json::{Value, json};

fn loopctl(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(cargo_bin("loopctl"));
    c.current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("LOOPCTL_ROOT")
        .args(["--root", "root"])
        .args(args)
        .stdin(Stdio::null());
    c
}

fn out(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o: Output = loopctl(dir, args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json_of(dir: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let (code, stdout, stderr) = out(dir, args);
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{stdout}{stderr}: {e}"));
    (code, v)
}

fn log_of(dir: &Path) -> PathBuf {
    dir.join("root/r1/history.jsonl")
}

/// Starts `loopctl run` of a loop whose one phase sleeps `secs`, and waits until that phase
/// has started (its `phase_started` is in the log).
fn start_runner(dir: &Path, secs: u32) -> Child {
    let config =
        json!({"max_iterations": 1, "loop": [{"name": "wait", "run": format!("sleep {secs}")}]});
    std::fs::write(dir.join("loop.json"), config.to_string()).unwrap();
    let child = loopctl(
        dir,
        &["run", "--loop-file", "loop.json", "--run-id", "r1", "-q"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(log_of(dir)).is_ok_and(|t| t.contains("\"phase_started\"")) {
        assert!(Instant::now() < end, "the phase never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn stalled(run: &Value) -> &Value {
    run["detectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["detector"] == "stalled")
        .unwrap()
}

#[test]
fn a_killed_runner_leaves_an_interrupted_run_not_a_stalled_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut runner = start_runner(dir, 2);
    runner.kill().unwrap(); // SIGKILL: no stop event, the lock file stays behind
    runner.wait().unwrap();
    std::thread::sleep(Duration::from_millis(50));

    let (code, text, err) = out(dir, &["status", "r1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(text.contains("interrupted"), "{text}");
    assert!(!text.contains("running"), "{text}");
    assert!(
        err.contains("interrupted")
            && err.contains("ago")
            && err.contains("`loopctl --root root resume r1` continues it"),
        "{err}"
    );
    let (_, v) = json_of(dir, &["status", "r1", "--json"]);
    assert_eq!(v["status"], "interrupted");
    assert_eq!(v["resume"], "loopctl --root root resume r1");
    assert!(v["idle_ms"].as_u64().is_some(), "{v}");

    let (code, text, err) = out(dir, &["list"]);
    assert_eq!(code, Some(0));
    assert!(text.contains("interrupted"), "{text}");
    assert!(err.contains("loopctl --root root resume r1"), "{err}");
    let (_, v) = json_of(dir, &["list", "--json"]);
    assert_eq!(v[0]["status"], "interrupted", "{v}");
    assert_eq!(v[0]["resume"], "loopctl --root root resume r1");
    assert!(v[0]["idle_ms"].as_u64().is_some(), "{v}");

    // However long it has been quiet, a run with no runner is not stalled.
    let (code, text, _) = out(dir, &["stagnation", "r1", "--stalled-after", "1ms"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("healthy") && text.contains("interrupted"),
        "{text}"
    );
    let (code, v) = json_of(
        dir,
        &["stagnation", "r1", "--stalled-after", "1ms", "--json"],
    );
    assert_eq!(code, Some(0));
    assert_eq!(v["runs"][0]["status"], "interrupted");
    assert_eq!(stalled(&v["runs"][0])["triggered"], false);

    let (_, text, _) = out(dir, &["postmortem", "r1"]);
    assert!(text.contains("interrupted"), "{text}");

    // `resume` continues it; the run is running again, then done.
    let (code, _, err) = out(dir, &["resume", "r1", "-q"]);
    assert_eq!(code, Some(0), "{err}");
    let (_, v) = json_of(dir, &["status", "r1", "--json"]);
    assert_eq!(v["status"], "stopped");
    assert_eq!(v["resume"], Value::Null);
}

#[test]
fn a_quiet_run_whose_runner_is_alive_is_running_and_stalled() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut runner = start_runner(dir, 30);
    std::thread::sleep(Duration::from_millis(50));
    let (_, v) = json_of(dir, &["status", "r1", "--json"]);
    let (_, rows) = json_of(dir, &["list", "--json"]);
    let (code, sv) = json_of(
        dir,
        &["stagnation", "r1", "--stalled-after", "1ms", "--json"],
    );
    // Ends the runner and its phase before asserting.
    let (stop, _, err) = out(dir, &["stop", "r1"]);
    let _ = runner.wait();
    assert_eq!(stop, Some(0), "{err}");
    assert_eq!(v["status"], "running", "{v}");
    assert_eq!(v["resume"], Value::Null);
    assert_eq!(rows[0]["status"], "running", "{rows}");
    assert_eq!(code, Some(3), "{sv}");
    assert_eq!(sv["runs"][0]["status"], "running");
    assert_eq!(stalled(&sv["runs"][0])["triggered"], true);
}
