//! State that cannot be read (a run.json at mode 000 or not a file, a log that is a broken or
//! looping symbolic link) never hides what the log says: warned about, said once, and the
//! log read (issue 16).

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

mod common;
use common::{fixture, loopctl, run, text};

/// A copy of a fixture run folder in a fresh temp dir: (guard, run folder).
fn run_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(fixture(name)).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    (tmp, dir)
}

/// status, check and recover over a run whose run.json is `blocked` (something that cannot be
/// read), run by `cmd`: each reads the log, names the file and the reason once, and goes on.
fn unreadable_state_is_only_a_warning(dir: &Path, why: &str, cmd: impl Fn() -> Command) {
    let out = cmd().arg("status").arg(dir).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "status: {err}");
    assert!(
        text(&out.stdout).contains("completed (threshold_reached)"),
        "{err}"
    );
    assert!(err.contains("run.json") && err.contains(why), "{err}");
    assert_eq!(err.matches(why).count(), 1, "the cause once: {err}");

    let out = cmd().args(["check"]).arg(dir).output().unwrap();
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "check: {}", text(&out.stderr));
    assert!(report.contains("7 events in 1 run(s)"), "{report}");
    assert!(
        report.contains(&format!("run.json: cannot be read: {why}")),
        "{report}"
    );
    let out = cmd().args(["check", "--json"]).arg(dir).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["run_json"]["prior"], "unreadable", "{v}");
    assert_eq!(v["stats"]["events"], 7);

    let out = cmd().args(["replay"]).arg(dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "replay: {}", text(&out.stderr));
}

#[test]
fn an_unreadable_run_json_does_not_stop_reading_the_log() {
    // A folder where run.json should be: not even root can read it, nor replace it.
    let (_g, dir) = run_copy("native-clean");
    std::fs::create_dir(dir.join("run.json")).unwrap();
    unreadable_state_is_only_a_warning(&dir, "Is a directory", loopctl);
    let out = loopctl().arg("recover").arg(&dir).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("run.json: Is a directory"), "{err}");
    assert_eq!(
        err.matches("Is a directory (os error 21)").count(),
        2,
        "a warning and the error, each naming it once: {err}"
    );
    assert!(!err.contains("(os error 21): Is a directory"), "{err}");

    // A symlink loop: unreadable for root too, but recover replaces it with the log's state.
    let (_g, dir) = run_copy("native-clean");
    std::os::unix::fs::symlink("run.json", dir.join("run.json")).unwrap();
    unreadable_state_is_only_a_warning(&dir, "Too many levels of symbolic links", loopctl);
    let out = loopctl().arg("recover").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("kept the previous file as"));
    assert!(dir.join("run.json.damaged").symlink_metadata().is_ok());
    let v: Value = serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(v["status"], "completed");
}

/// Mode 000 as a user who is not root (root reads anything): as `nobody` via setpriv when the
/// tests run as root.
#[test]
fn a_run_json_at_mode_000_is_warned_about_and_replaced_readable() {
    use std::os::unix::fs::{PermissionsExt, chown};
    let (tmp, dir) = run_copy("native-clean");
    loopctl().arg("recover").arg(&dir).assert().code(0);
    // A fresh folder belongs to the effective user.
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(tmp.path()).unwrap()) == 0;
    let bin = assert_cmd::cargo::cargo_bin("loopctl");
    let cmd = || {
        let mut c = if root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        c.env_remove("LOOPCTL_ROOT").env("NO_COLOR", "1");
        c
    };
    if root {
        let usable = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !usable {
            eprintln!(
                "notice: skipping: running as root and `setpriv` cannot run loopctl as nobody"
            );
            return;
        }
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for p in [dir.clone(), dir.join("history.jsonl"), dir.join("run.json")] {
            chown(&p, Some(65534), Some(65534)).unwrap();
        }
    }
    std::fs::set_permissions(dir.join("run.json"), std::fs::Permissions::from_mode(0o000)).unwrap();
    unreadable_state_is_only_a_warning(&dir, "Permission denied", cmd);
    let out = cmd().arg("recover").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The file nobody could read is kept aside (moved), never destroyed.
    assert!(text(&out.stdout).contains("kept the previous file as"));
    assert!(dir.join("run.json.damaged").exists());
    let mode = std::fs::metadata(dir.join("run.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o444,
        0o444,
        "the rewritten run.json is readable: {mode:o}"
    );
    let out = cmd().arg("check").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

/// A log that is a dangling symbolic link or a link loop is a log that cannot be read, as one
/// at mode 000: `list` shows it `unreadable` with why (exit 1 under --strict), the commands
/// reading it say what the path is, once, instead of "no history.jsonl" or "no such file".
#[cfg(unix)]
#[test]
fn a_log_that_is_a_broken_symlink_is_unreadable_not_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for d in ["good", "loop", "dangling"] {
        std::fs::create_dir(root.join(d)).unwrap();
    }
    std::fs::copy(
        fixture("native-clean/history.jsonl"),
        root.join("good/history.jsonl"),
    )
    .unwrap();
    std::os::unix::fs::symlink("history.jsonl", root.join("loop/history.jsonl")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/file", root.join("dangling/history.jsonl")).unwrap();
    let r = root.to_str().unwrap();
    let out = run(&["--strict", "list", r, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let status = |dir: &str| {
        let row = rows
            .iter()
            .find(|r| r["dir"].as_str().unwrap().ends_with(dir))
            .unwrap_or_else(|| panic!("no row for {dir}: {rows:?}"));
        (row["status"].clone(), row["error"].to_string())
    };
    assert_eq!(status("good").0, "completed");
    let (s, e) = status("loop");
    assert_eq!(
        (s.as_str(), e.contains("a symbolic link loop")),
        (Some("unreadable"), true),
        "{e}"
    );
    let (s, e) = status("dangling");
    assert_eq!(
        (s.as_str(), e.contains("a dangling symbolic link")),
        (Some("unreadable"), true),
        "{e}"
    );
    let folder = root.join("loop");
    let log = folder.join("history.jsonl");
    for args in [
        vec!["status", folder.to_str().unwrap()],
        vec!["check", log.to_str().unwrap()],
        vec!["--strict", "export", "prometheus", r],
    ] {
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.matches("a symbolic link loop").count(),
            1,
            "{args:?}: {err}"
        );
    }
}
