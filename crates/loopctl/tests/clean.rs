//! `loopctl clean`: only run folders under the root, and in them only what a run writes.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use loopctl_tests::repo;

fn loopctl(cwd: &Path) -> Command {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    c.env_remove("LOOPCTL_ROOT")
        .env("NO_COLOR", "1")
        .current_dir(cwd);
    c
}

/// A folder holding a finished run's log (and what else `files` names, with their text).
fn run_folder(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(
        repo().join("fixtures/native-clean/history.jsonl"),
        dir.join("history.jsonl"),
    )
    .unwrap();
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir.to_path_buf()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_folder_outside_the_root_is_refused_and_nothing_is_deleted() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("root")).unwrap();
    let victim = run_folder(&t.path().join("victim"), &[("important", "mine")]);
    let out = loopctl(t.path())
        .args(["--root", "root", "clean", "victim", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("not a run folder under the root"),
        "{}",
        text(&out)
    );
    assert!(victim.join("important").is_file());
    assert!(victim.join("history.jsonl").is_file());
}

#[test]
fn a_run_folder_keeps_what_the_run_did_not_write() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let dir = run_folder(
        &root.join("r1"),
        &[
            ("run.json", "{}"),
            ("run.json.damaged", "{"),
            (".history.jsonl.lock", "123"),
            (".history.jsonl.phase-group", "123 456"),
            ("history.jsonl.torn-812", "{\"ev"),
            ("artifact.md", "# artifact"),
            ("escalation.md", "# help"),
            ("logs/000002-build.stdout", "ok"),
            ("logs/000002-build.stderr", ""),
            ("logs/000002-build.prompt", "do it"),
            ("logs/000007-check-A-tests.2.stdout", "ok"),
            ("logs/notes.txt", "mine"),
            ("important", "mine"),
            ("src/main.rs", "fn main() {}"),
        ],
    );
    let out = loopctl(t.path())
        .args(["--root", "root", "clean", "r1", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let mut left: Vec<String> = walk(&dir);
    left.sort();
    assert_eq!(left, ["important", "logs/notes.txt", "src/main.rs"]);
    // The kept entries are listed, and the folder is said to be kept.
    let said = text(&out);
    for kept in ["important", "notes.txt", "src"] {
        assert!(said.contains(kept), "{said}");
    }
    assert!(said.contains("kept"), "{said}");

    // A folder holding only what a run writes goes entirely.
    let only = run_folder(
        &root.join("r2"),
        &[("run.json", "{}"), ("logs/000002-a.stdout", "")],
    );
    loopctl(t.path())
        .args(["--root", "root", "clean", "r2", "--yes"])
        .assert()
        .success();
    assert!(!only.exists());
}

/// Files under `dir`, relative, `/`-separated.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            out.extend(walk(&p).into_iter().map(|f| format!("{name}/{f}")));
        } else {
            out.push(name);
        }
    }
    out
}

#[test]
fn the_current_folder_and_its_parents_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let dir = run_folder(&root.join("r1"), &[("logs/000002-a.stdout", "")]);
    for cwd in [dir.clone(), dir.join("logs")] {
        let out = loopctl(&cwd)
            .args(["--root"])
            .arg(&root)
            .args(["clean", "r1", "--yes"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("current folder"), "{}", text(&out));
        assert!(dir.join("history.jsonl").is_file());
        assert!(dir.join("logs/000002-a.stdout").is_file());
    }
}

#[test]
fn a_symlink_does_not_lead_clean_out_of_the_root() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let victim = run_folder(
        &t.path().join("victim"),
        &[("important", "mine"), ("000001-a.stdout", "mine")],
    );
    // A run folder that is a link to a folder outside the root.
    std::os::unix::fs::symlink(&victim, root.join("link")).unwrap();
    // A real run folder whose logs/ is a link to that folder.
    let dir = run_folder(&root.join("r1"), &[]);
    std::os::unix::fs::symlink(&victim, dir.join("logs")).unwrap();
    for args in [
        &["clean", "link", "--yes"][..],
        &["clean", "--all", "--yes"],
    ] {
        loopctl(t.path())
            .args(["--root", "root"])
            .args(args)
            .output()
            .unwrap();
        assert!(victim.join("important").is_file());
        assert!(victim.join("history.jsonl").is_file());
        assert!(victim.join("000001-a.stdout").is_file());
    }
    // r1's own log went, its link was kept (not a folder a run writes), and so was r1.
    assert!(!dir.join("history.jsonl").exists());
    assert!(dir.join("logs").is_symlink());
}

#[test]
fn a_run_its_log_says_is_running_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let dir = root.join("r1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo().join("fixtures/torn-tail/history.jsonl"),
        dir.join("history.jsonl"),
    )
    .unwrap();
    let out = loopctl(t.path())
        .args(["--root", "root", "clean", "r1", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(dir.join("history.jsonl").is_file());
}

#[test]
fn the_state_files_of_every_run_of_a_shared_log_are_run_files() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("root/merged");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo().join("fixtures/merged-runs/history.jsonl"),
        dir.join("history.jsonl"),
    )
    .unwrap();
    for f in [
        "run.json",
        "beta-docs-20260304-080500.run.json",
        "beta-docs-20260304-080500.run.json.damaged",
    ] {
        std::fs::write(dir.join(f), "{}").unwrap();
    }
    std::fs::write(dir.join("gamma.run.json"), "mine").unwrap();
    let out = loopctl(t.path())
        .args(["--root", "root", "clean", "merged", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(walk(&dir), ["gamma.run.json"]);
}
