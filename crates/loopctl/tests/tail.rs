//! End-to-end tests of `loopctl tail`: following, filters, output formats, --until-done.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use serde_json::{Value, json};

fn ev(seq: u64, run: &str, event: &str, iteration: u64, step: &str, payload: Value) -> String {
    json!({"v": 1, "seq": seq, "ts": format!("2026-01-01T00:00:{:02}.000Z", seq % 60), "run_id": run,
           "event": event, "iteration": iteration, "phase": "A", "step": step, "payload": payload})
    .to_string()
        + "\n"
}

/// A run of `n` iterations of test/fix phases, ending with `end` (a stopped payload).
fn run_log(run: &str, n: u64, end: Option<Value>) -> String {
    let mut s = ev(1, run, "run_started", 0, "", json!({"max_iterations": 5}));
    let mut seq = 1;
    for i in 1..=n {
        for step in ["test", "fix"] {
            seq += 1;
            s += &ev(
                seq,
                run,
                "phase_started",
                i,
                step,
                json!({"kind": "loop", "index": 0, "attempt": 1}),
            );
            seq += 1;
            s += &ev(
                seq,
                run,
                "phase_finished",
                i,
                step,
                json!({"kind": "loop", "index": 0, "attempt": 1, "stop_reason": "end_turn", "exit_code": 0}),
            );
        }
    }
    if let Some(p) = end {
        s += &ev(seq + 1, run, "stopped", n, "", p);
    }
    s
}

fn tail_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(cargo_bin("loopctl"));
    c.env("NO_COLOR", "1")
        .env_remove("LOOPCTL_ROOT")
        .args(["tail", "--poll-ms", "20"])
        .args(args);
    c
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Spawns a follower and streams its stdout lines.
fn follow(args: &[&str]) -> (Child, Receiver<String>) {
    let mut child = tail_cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

fn next(rx: &Receiver<String>) -> Value {
    let l = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("tail printed nothing in 10 s");
    serde_json::from_str(&l).unwrap_or_else(|e| panic!("{l:?}: {e}"))
}

fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn follows_appends_holding_partial_lines_and_prints_json_that_parses_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("history.jsonl");
    std::fs::write(&log, run_log("r", 1, None)).unwrap();
    let (mut child, rx) = follow(&["--json", "-n", "1", log.to_str().unwrap()]);
    assert_eq!(next(&rx)["seq"], json!(5));
    let line = ev(
        6,
        "r",
        "evaluation_done",
        2,
        "EVALUATE",
        json!({"score": 0.72, "passed": false}),
    );
    // Written in pieces, at several cut points: each event comes out once, whole.
    for (k, cut) in [1usize, 10, 40, line.len() - 1].into_iter().enumerate() {
        let l = line.replace("\"seq\":6", &format!("\"seq\":{}", 6 + k));
        let cut = cut.min(l.len() - 1);
        append(&log, &l.as_bytes()[..cut]);
        std::thread::sleep(Duration::from_millis(60));
        append(&log, &l.as_bytes()[cut..]);
        let got = next(&rx);
        assert_eq!(
            (got["seq"].as_u64(), &got["event"], &got["payload"]["score"]),
            (Some(6 + k as u64), &json!("evaluation_done"), &json!(0.72))
        );
    }
    // A damaged line is reported and skipped; the next one still comes.
    append(&log, b"{\"broken\n");
    append(
        &log,
        ev(10, "r", "usage", 2, "fix", json!({"input_tokens": 3})).as_bytes(),
    );
    assert_eq!(next(&rx)["event"], json!("usage"));
    // Replaced by rename (as `recover` or rotation does): followed from the new start.
    let new = dir.path().join("new.jsonl");
    std::fs::write(&new, ev(1, "r2", "run_started", 0, "", json!({}))).unwrap();
    std::fs::rename(&new, &log).unwrap();
    assert_eq!(next(&rx)["run_id"], json!("r2"));
    // Truncated: followed from its start.
    std::fs::write(&log, ev(1, "r3", "run_started", 0, "", json!({}))).unwrap();
    assert_eq!(next(&rx)["run_id"], json!("r3"));
    // A torn line cut by its writer (as `resume` repairs one) and the log written on: the
    // events after it come once, the ones before it are not given again.
    append(
        &log,
        &ev(2, "r3", "usage", 0, "fix", json!({})).as_bytes()[..20],
    );
    std::thread::sleep(Duration::from_millis(60));
    let whole = std::fs::read(&log).unwrap().len() - 20;
    let file = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    file.set_len(whole as u64).unwrap();
    append(&log, ev(2, "r3", "stopped", 0, "", json!({})).as_bytes());
    let got = next(&rx);
    assert_eq!((&got["seq"], &got["event"]), (&json!(2), &json!("stopped")));
    // Rewritten from its start with the same run: its seqs begin again, none taken for a
    // repeat of the old ones.
    std::fs::write(&log, ev(1, "r3", "run_started", 0, "", json!({}))).unwrap();
    assert_eq!(next(&rx)["event"], json!("run_started"));
    append(&log, ev(2, "r3", "stopped", 0, "", json!({})).as_bytes());
    assert_eq!(next(&rx)["event"], json!("stopped"));
    child.kill().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("bad_line"), "{err}");
    child.wait().unwrap();
}

#[test]
fn a_root_is_followed_and_runs_that_appear_later_are_picked_up() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for r in ["a", "b"] {
        std::fs::create_dir_all(root.join(r)).unwrap();
        std::fs::write(root.join(r).join("history.jsonl"), run_log(r, 1, None)).unwrap();
    }
    let (mut child, rx) = follow(&[
        "--json",
        "-n",
        "1",
        "--event",
        "phase_finished",
        root.to_str().unwrap(),
    ]);
    let mut seen: Vec<String> = (0..2)
        .map(|_| next(&rx)["run_id"].as_str().unwrap().to_string())
        .collect();
    seen.sort();
    assert_eq!(seen, ["a", "b"]);
    std::fs::create_dir_all(root.join("c")).unwrap();
    std::fs::write(root.join("c").join("history.jsonl"), run_log("c", 1, None)).unwrap();
    // A new run is read from its start: both of its phase_finished events.
    assert_eq!(
        (next(&rx)["run_id"].clone(), next(&rx)["run_id"].clone()),
        (json!("c"), json!("c"))
    );
    append(
        &root.join("a").join("history.jsonl"),
        ev(6, "a", "phase_finished", 2, "test", json!({})).as_bytes(),
    );
    assert_eq!(next(&rx)["run_id"], json!("a"));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn filters_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("h.jsonl");
    let mut text = run_log(
        "one-20260101-000000",
        2,
        Some(json!({"exit_reason": "marker"})),
    );
    text += &run_log("two", 1, None);
    std::fs::write(&log, &text).unwrap();
    let run = |args: &[&str]| -> Vec<Value> {
        let n: &[&str] = if args.contains(&"-n") {
            &[]
        } else {
            &["-n", "1000"]
        };
        let out = tail_cmd(&["--no-follow", "--json"])
            .args(n)
            .args(args)
            .arg(&log)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        json_lines(&out.stdout)
    };
    assert_eq!(run(&[]).len(), text.lines().count());
    assert!(
        run(&["--event", "phase_started"])
            .iter()
            .all(|e| e["event"] == "phase_started")
    );
    assert_eq!(
        run(&["--event", "phase_started", "--event", "stopped"]).len(),
        4 + 1 + 2
    );
    assert_eq!(run(&["--phase", "fix"]).len(), 2 * 2 + 2);
    assert_eq!(run(&["--iteration", "2"]).len(), 4 + 1);
    assert_eq!(run(&["--run", "one"]).len(), 1 + 8 + 1);
    assert_eq!(run(&["--run", "two"]).len(), 1 + 4);
    let ms = run(&["--level", "milestones"]);
    assert!(!ms.is_empty() && ms.len() == text.lines().count());
    let usage = format!("{text}{}", ev(20, "two", "usage", 1, "fix", json!({})));
    std::fs::write(&log, &usage).unwrap();
    assert_eq!(run(&["--level", "milestones"]).len(), text.lines().count());
    // -n counts events after the filters.
    let last = run(&["-n", "2", "--event", "phase_finished", "--run", "one"]);
    assert_eq!(
        last.iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [7, 9]
    );
    // --raw gives the lines as written; the human format names run, iteration and phase.
    let out = tail_cmd(&["--no-follow", "--raw", "-n", "1"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        usage.lines().last().unwrap().to_string() + "\n"
    );
    let out = tail_cmd(&["--no-follow", "-n", "3", "--run", "one"])
        .arg(&log)
        .output()
        .unwrap();
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(
        human.contains("2 fix")
            && human.contains("phase_finished")
            && human.contains("completed (marker)"),
        "{human}"
    );
    assert!(
        !human.contains('\u{1b}'),
        "no colours when not a terminal: {human}"
    );
    let out = tail_cmd(&["--no-follow", "-n", "5", "--run", "one"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("── one-20260101-000000 | Iteration 2/5 | Phase A ──")
    );
}

#[test]
fn n_starts_with_the_last_n_events_of_a_large_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("big.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
    for i in 1..=200_000u64 {
        f.write_all(ev(i, "r", "usage", 1, "x", json!({"i": i})).as_bytes())
            .unwrap();
    }
    drop(f);
    let out = tail_cmd(&["--no-follow", "--json", "-n", "3"])
        .arg(&log)
        .output()
        .unwrap();
    let got: Vec<u64> = json_lines(&out.stdout)
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [199_998, 199_999, 200_000]);
}

#[test]
fn until_done_exits_with_the_sentinels_code() {
    let dir = tempfile::tempdir().unwrap();
    for (payload, code) in [
        (json!({"exit_reason": "marker"}), 0),
        (json!({"exit_reason": "max_iterations"}), 0),
        (
            json!({"exit_reason": "max_iterations", "reason": "stagnation"}),
            3,
        ),
        (json!({"reason": "stagnation"}), 3),
        (json!({"exit_reason": "abort", "exit_label": "stuck"}), 5),
        (json!({"exit_reason": "phase_failure", "exit_code": 3}), 3),
        (json!({"exit_reason": "timeout"}), 124),
        (json!({"exit_reason": "cancelled"}), 130),
        (json!({"reason": "threshold_reached"}), 0),
        (json!({"reason": "user_stop"}), 130),
    ] {
        let log = dir.path().join("h.jsonl");
        std::fs::write(&log, run_log("r", 1, Some(payload.clone()))).unwrap();
        let out = tail_cmd(&["--until-done", "-n", "0"])
            .arg(&log)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{payload}");
    }
    // A live run: tail waits, then exits when the run ends.
    let log = dir.path().join("live.jsonl");
    std::fs::write(&log, run_log("r", 1, None)).unwrap();
    let mut child = tail_cmd(&["--until-done", "--json"])
        .arg(&log)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "exited before the run ended"
    );
    append(
        &log,
        ev(6, "r", "failed", 1, "", json!({"reason": "phase_error"})).as_bytes(),
    );
    let end = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert_eq!(st.code(), Some(1));
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "tail --until-done did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_deleted_run_ends_its_stream_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("h.jsonl");
    std::fs::write(&log, run_log("r", 1, None)).unwrap();
    let child = tail_cmd(&["--json"])
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    std::fs::remove_file(&log).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("was deleted") && err.contains("nothing left to follow"),
        "{err}"
    );
}

#[test]
fn since_and_the_default_target() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    for (r, when) in [("old", 0u64), ("new", 1)] {
        std::fs::create_dir_all(root.join(r)).unwrap();
        std::fs::write(root.join(r).join("history.jsonl"), run_log(r, 1, None)).unwrap();
        if when == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // No current.json: the newest run under the root.
    let out = tail_cmd(&["--no-follow", "--json", "-n", "1"])
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(json_lines(&out.stdout)[0]["run_id"], json!("new"));
    // With current.json: the run it names.
    std::fs::write(
        root.join("current.json"),
        r#"{"active_run_id":"old","task_alias":"old","status":"running"}"#,
    )
    .unwrap();
    let out = tail_cmd(&["--no-follow", "--json", "-n", "1"])
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(json_lines(&out.stdout)[0]["run_id"], json!("old"));
    // --since keeps events at or after the time.
    let out = tail_cmd(&["--no-follow", "--json", "--since", "2026-01-01T00:00:04Z"])
        .arg(root.join("old"))
        .output()
        .unwrap();
    let seqs: Vec<u64> = json_lines(&out.stdout)
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [4, 5]);
    tail_cmd(&["--no-follow", "--since", "yesterday-ish"])
        .arg(root.join("old"))
        .assert_failure();
}

trait AssertFailure {
    fn assert_failure(&mut self);
}

impl AssertFailure for Command {
    fn assert_failure(&mut self) {
        let out = self.output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("--since"));
    }
}

/// The bundled never-green example stops for stagnation (exit 3): `tail --until-done` on its
/// root exits with that code too, not one of its own.
#[test]
fn until_done_exits_3_for_a_run_that_stopped_for_stagnation() {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/never-green");
    for f in std::fs::read_dir(&example).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), dir.path().join(f.file_name())).unwrap();
    }
    let root = dir.path().join(".loopctl");
    let run = Command::new(cargo_bin("loopctl"))
        .current_dir(dir.path())
        .env_remove("LOOPCTL_ROOT")
        .args(["run", "--loop-file", "loop.json", "--dir", ".", "-q"])
        .args(["--run-id", "never-green", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(3), "{run:?}");
    let out = tail_cmd(&["--until-done", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

/// Waits up to 10 s (a hang guard, not a speed target) for `child` to exit.
fn exit_within_10s(child: &mut Child) -> Option<i32> {
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < end {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("tail still running 10 s after its stdout was closed");
}

/// `tail -f | head -1`: once the reader of its stdout is gone, tail ends with 0, whether it is
/// waiting for new lines or has more to write.
#[test]
fn a_closed_stdout_ends_tail_with_0() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("h.jsonl");
    for (args, more) in [
        (["--json", "-n", "1"], true),
        (["--json", "-n", "1"], false),
        (["-n", "1", "--raw"], false),
    ] {
        std::fs::write(&log, run_log("r", 1, None)).unwrap();
        let mut child = tail_cmd(&args)
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert!(first.contains("phase_finished"), "{first}");
        drop(out);
        if more {
            // Something to write after the reader left.
            for seq in 6..200 {
                append(
                    &log,
                    ev(seq, "r", "phase_started", 2, "test", json!({})).as_bytes(),
                );
            }
        }
        assert_eq!(
            exit_within_10s(&mut child),
            Some(0),
            "{args:?} more: {more}"
        );
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(!err.contains("error"), "{err}");
    }
}

#[test]
fn a_line_over_max_line_bytes_is_reported_and_skipped_as_by_every_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("big.jsonl");
    let mut text = ev(
        1,
        "r",
        "run_started",
        0,
        "",
        json!({"note": "x".repeat(5000)}),
    );
    text += &ev(2, "r", "stopped", 0, "", json!({"reason": "user_stop"}));
    std::fs::write(&log, text).unwrap();
    let out = tail_cmd(&["--no-follow", "--json", "--max-line-bytes", "1000"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let events: Vec<String> = json_lines(&out.stdout)
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(events, ["stopped"]);
    let err = String::from_utf8_lossy(&out.stderr);
    // Said as every reader says it: the log file, the line, the kind.
    let want = format!("{}:1: byte 0: oversize: line of ", log.display());
    assert!(err.contains(&want) && err.contains("exceeds"), "{err}");
}

/// `--until-done` on a run whose runner is gone (its lock free: killed, crashed) says so and
/// exits 1 instead of waiting forever; while a runner holds the lock it waits, and exits with
/// the run's code once it ends. With --no-follow, a run that has not ended is 1, not DONE's 0.
#[test]
fn until_done_gives_up_on_a_run_whose_runner_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("r");
    std::fs::create_dir_all(&folder).unwrap();
    let log = folder.join("history.jsonl");
    std::fs::write(&log, run_log("r", 1, None)).unwrap();
    let lock = folder.join(".history.jsonl.lock");
    std::fs::write(&lock, "4242").unwrap();

    let out = tail_cmd(&["--until-done", "--no-follow"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let mut child = tail_cmd(&["--until-done"])
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert_eq!(exit_within_10s(&mut child), Some(1));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("r will not end: its runner is gone"), "{err}");
    // The command that continues it works from anywhere, as `status` gives it: the folder's
    // path, as the run is under no root in use.
    let resume = format!("`loopctl resume {}` continues it", folder.display());
    assert!(err.contains(&resume), "{err}");

    // A runner holds the lock: tail waits, then takes the stop it writes before letting go.
    let held = std::fs::File::open(&lock).unwrap();
    held.lock().unwrap();
    let mut child = tail_cmd(&["--until-done"])
        .arg(&log)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "tail gave up on a live runner"
    );
    append(
        &log,
        ev(
            6,
            "r",
            "stopped",
            1,
            "",
            json!({"reason": "marker", "exit_reason": "marker"}),
        )
        .as_bytes(),
    );
    drop(held);
    assert_eq!(exit_within_10s(&mut child), Some(0));
}

/// Ctrl-C ends a following tail: 130, or under --strict 1 when it reported findings (as the
/// help says findings do once tail ends).
#[test]
fn ctrl_c_ends_a_following_tail_with_130_or_1_under_strict_with_findings() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("history.jsonl");
    let mut text = run_log("r", 1, None);
    text.push_str("garbage line\n");
    std::fs::write(&log, text).unwrap();
    for (strict, want) in [(false, 130), (true, 1)] {
        let mut args = vec!["--json"];
        if strict {
            args.push("--strict");
        }
        args.push(log.to_str().unwrap());
        let (mut child, rx) = follow(&args);
        next(&rx);
        // Past its first look (the warning is out): Ctrl-C.
        std::thread::sleep(Duration::from_millis(300));
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(want), "strict: {strict}");
    }
}

/// A run whose terminal event ends its log without a newline (ended, as `status` reads it):
/// `--until-done` takes that event as the log's last line and exits with its code, where it
/// waited for a newline before; `--no-follow -n N` counts it among the last N.
#[test]
fn a_terminal_event_without_its_newline_ends_the_run_for_tail() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("history.jsonl");
    let text = run_log("r", 2, Some(json!({"reason": "threshold_reached"})));
    std::fs::write(&log, text.trim_end_matches('\n')).unwrap();
    let log = log.to_str().unwrap();
    let mut child = tail_cmd(&["--until-done", "--json", log])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let code = exit_within_10s(&mut child);
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(code, Some(0));
    let events = json_lines(&out);
    assert_eq!(events.last().unwrap()["event"], "stopped", "{events:?}");

    let out = tail_cmd(&["--no-follow", "-n", "2", "--json", log])
        .output()
        .unwrap();
    let events = json_lines(&out.stdout);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1]["event"], "stopped");
}
