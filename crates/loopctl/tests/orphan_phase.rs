//! A runner killed outright leaves its phase's process group running; `resume` and `stop` end
//! it before they go on, so that no two copies of an agent work on the same tree.

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::*;

/// A phase that, the first time only, notes its shell's pid (its group's leader) and sleeps.
const FIRST_TIME_SLEEPS: &str =
    "if [ ! -f leader ]; then echo $$ > leader.tmp; mv leader.tmp leader; sleep 60; fi";

fn spawn_run(s: &Sandbox, config: Value) -> Child {
    spawn_run_with(s, config, &[])
}

/// Kills the runner once its phase is sleeping; returns the phase group's id.
fn kill_runner_mid_phase(s: &Sandbox, mut runner: Child) -> i32 {
    let end = Instant::now() + Duration::from_secs(20);
    let leader = s.dir.join("leader");
    while !leader.exists() {
        assert!(Instant::now() < end, "the phase never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pgid: i32 = std::fs::read_to_string(&leader)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    runner.kill().unwrap(); // SIGKILL: no chance to end its phase
    runner.wait().unwrap();
    assert!(group_alive(pgid), "the phase outlives its runner");
    pgid
}

fn group_alive(pgid: i32) -> bool {
    // Zombies do not count: nothing in a test container may reap them.
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read_to_string(e.path().join("stat")).is_ok_and(|t| {
            let f: Vec<&str> = t[t.rfind(')').unwrap() + 1..].split_whitespace().collect();
            f[2] == pgid.to_string() && f[0] != "Z"
        })
    })
}

fn note_of(s: &Sandbox) -> PathBuf {
    s.run_dir().join(".history.jsonl.phase-group")
}

fn wait_gone(pgid: i32) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while group_alive(pgid) {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn resume_ends_the_phase_a_killed_runner_left_running() {
    let s = Sandbox::new();
    let cfg = json!({"max_iterations": 1, "loop": [{"name": "work", "run": FIRST_TIME_SLEEPS}]});
    let pgid = kill_runner_mid_phase(&s, spawn_run(&s, cfg));
    assert!(note_of(&s).exists(), "the runner noted its phase's group");

    let out = s.cmd().args(["resume", "r1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "ended the phase the interrupted runner left running (process group {pgid})"
        )),
        "{err}"
    );
    assert!(wait_gone(pgid), "the old phase group was ended");
    assert!(!note_of(&s).exists(), "no note once the phases are over");
    let ev = s.events();
    assert_eq!(
        named(&ev, "run_resumed")[0]["payload"]["ended_phase_group"],
        json!(pgid)
    );
    // The phase ran again, once, under the new runner, and the run went on to its end.
    assert_eq!(named(&ev, "phase_started").len(), 2);
    assert_eq!(named(&ev, "phase_finished").len(), 1);
    assert_ne!(s.state()["status"], json!("running"));
}

#[test]
fn stop_of_an_interrupted_run_ends_the_phase_its_runner_left_running() {
    let s = Sandbox::new();
    let cfg = json!({"loop": [{"name": "work", "run": FIRST_TIME_SLEEPS}]});
    let pgid = kill_runner_mid_phase(&s, spawn_run(&s, cfg));

    let out = s.cmd().args(["stop", "r1", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&v["result"], &v["ended_phase_group"]),
        (&json!("idle"), &json!(pgid))
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .ends_with(&format!("(process group {pgid})")),
        "{v}"
    );
    assert!(wait_gone(pgid));
    assert!(!note_of(&s).exists());
    assert_eq!(s.state()["status"], json!("stopped"));
    // A run stopped cleanly leaves nothing to end.
    let again = s.cmd().args(["stop", "r1", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v["ended_phase_group"], Value::Null);
}
