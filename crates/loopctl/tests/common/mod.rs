//! What the end-to-end tests share: a sandbox with a root, a loop file and a run r1.
#![allow(dead_code)]

pub mod logs;
pub mod server;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use assert_cmd::Command;
use serde_json::Value;

/// loopctl, with no LOOPCTL_ROOT of the caller's and no colour.
pub fn loopctl() -> Command {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    c.env_remove("LOOPCTL_ROOT").env("NO_COLOR", "1");
    c
}

/// A fixture of the repository (`fixtures/NAME`).
pub fn fixture(name: &str) -> PathBuf {
    loopctl_tests::repo().join("fixtures").join(name)
}

/// `loopctl ARGS`, to its end.
pub fn run(args: &[&str]) -> Output {
    loopctl().args(args).output().unwrap()
}

/// `loopctl ARGS` writing its stdout to `out` (a pipe whose reader is gone, /dev/full).
pub fn run_to(args: &[&str], out: impl Into<Stdio>) -> Output {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("loopctl"))
        .env_remove("LOOPCTL_ROOT")
        .env("NO_COLOR", "1")
        .args(args)
        .stdout(out)
        .output()
        .unwrap()
}

/// The stdout, as JSON, of `loopctl ARGS PATHS`, which must succeed.
pub fn json_of(args: &[&str], paths: &[&Path]) -> Value {
    let out = loopctl().args(args).args(paths).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub struct Sandbox {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        Sandbox { _tmp: tmp, dir }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.join(".loopctl")
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("loopctl").unwrap();
        c.env_remove("LOOPCTL_ROOT")
            .env("NO_COLOR", "1")
            .current_dir(&self.dir)
            .arg("--root")
            .arg(self.root());
        c
    }

    /// Writes `loop.json` and runs it; returns (exit code, stderr).
    pub fn run(&self, config: Value, extra: &[&str]) -> (i32, String) {
        std::fs::write(self.dir.join("loop.json"), config.to_string()).unwrap();
        let out = self.cmd().args(RUN).args(extra).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub fn sentinel(&self) -> String {
        std::fs::read_to_string(self.dir.join("sentinel")).unwrap_or_default()
    }

    pub fn run_dir(&self) -> PathBuf {
        self.root().join("r1")
    }

    pub fn events(&self) -> Vec<Value> {
        read_events(&self.run_dir().join("history.jsonl"))
    }

    pub fn state(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.run_dir().join("run.json")).unwrap())
            .unwrap()
    }
}

/// `loopctl run` of the sandbox's loop.json as run r1, with a sentinel file, in the sandbox.
pub const RUN: &[&str] = &[
    "run",
    "--loop-file",
    "loop.json",
    "--run-id",
    "r1",
    "--sentinel-file",
    "sentinel",
    "--dir",
    ".",
];

pub fn read_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn named<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

pub fn phases(events: &[Value]) -> Vec<String> {
    named(events, "phase_finished")
        .iter()
        .map(|e| format!("{}@{}", e["step"].as_str().unwrap(), e["iteration"]))
        .collect()
}

pub fn echo(line: &str) -> String {
    format!("printf '%s\\n' '{line}'")
}

/// Runs git in `dir` with a throwaway identity; panics when it fails.
pub fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

/// `loopctl run` of `config` (written to the sandbox's loop.json) in the background, quiet.
pub fn spawn_run_with(s: &Sandbox, config: Value, extra: &[&str]) -> std::process::Child {
    std::fs::write(s.dir.join("loop.json"), config.to_string()).unwrap();
    std::process::Command::new(assert_cmd::cargo::cargo_bin("loopctl"))
        .current_dir(&s.dir)
        .env("NO_COLOR", "1")
        .arg("--root")
        .arg(s.root())
        .args(RUN)
        .args(extra)
        .arg("-q")
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap()
}
