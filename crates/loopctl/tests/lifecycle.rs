//! A run's lifecycle from outside its runner: `stop` of logs other tools write, of interrupted
//! runs and of live ones; which run a bare word or no RUN at all selects; `resume` of a live
//! run; the `--on-event` stream; the loop file's validation.

use std::path::Path;
use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin;
use loopctl_tests::repo;
use serde_json::Value;

fn loopctl(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(cargo_bin("loopctl"));
    c.current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("LOOPCTL_ROOT")
        .args(args)
        .stdin(Stdio::null());
    c
}

/// (exit code, stdout, stderr) of `loopctl ARGS` in `dir`.
fn out(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = loopctl(dir, args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn fixture_lines(name: &str, n: usize) -> String {
    let text =
        std::fs::read_to_string(repo().join("fixtures").join(name).join("history.jsonl")).unwrap();
    text.lines().take(n).map(|l| format!("{l}\n")).collect()
}

/// The files of folder `dir`, by name.
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn read_events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn stop_writes_nothing_into_a_log_another_tool_writes() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, lines, dialect) in [("aif-drift", 4, "aif-loop"), ("avenor-loop", 3, "avenor")] {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let text = fixture_lines(name, lines);
        std::fs::write(dir.join("history.jsonl"), &text).unwrap();
        let (code, _, err) = out(tmp.path(), &["stop", name, "--json"]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(
            err.contains(dialect) && err.contains("not by a loopctl runner"),
            "{name}: {err}"
        );
        assert!(err.contains("the tool that writes it"), "{name}: {err}");
        assert_eq!(
            std::fs::read_to_string(dir.join("history.jsonl")).unwrap(),
            text
        );
        assert_eq!(
            files(&dir),
            ["history.jsonl"],
            "{name}: nothing else written"
        );
    }
}

#[test]
fn stop_of_a_bare_native_log_leaves_a_run_json_check_accepts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nat");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("history.jsonl"),
        fixture_lines("healthy-native", 5),
    )
    .unwrap();
    let (code, stdout, err) = out(tmp.path(), &["stop", "nat"]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("marked"), "{stdout}");
    let last = read_events(&dir.join("history.jsonl")).pop().unwrap();
    assert_eq!(last["event"], "stopped");
    let (code, stdout, err) = out(tmp.path(), &["check", "nat"]);
    assert_eq!(code, 0, "{stdout}{err}");
}
