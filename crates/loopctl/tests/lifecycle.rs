//! A run's lifecycle from outside its runner: `stop` of logs other tools write, of interrupted
//! runs and of live ones; which run a bare word or no RUN at all selects; `resume` of a live
//! run; the `--on-event` stream; the loop file's validation.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use loopctl_tests::repo;
use serde_json::{Value, json};

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

fn write_loop(dir: &Path, name: &str, config: Value) {
    std::fs::write(dir.join(name), config.to_string()).unwrap();
}

/// A loop of one phase that succeeds at once, as `dir/file`.
fn write_quick_loop(dir: &Path, file: &str) {
    write_loop(
        dir,
        file,
        json!({"max_iterations": 1, "loop": [{"name": "w", "run": "true"}]}),
    );
}

/// `loopctl --root ROOT run --loop-file FILE --run-id ID EXTRA...` in `dir`, to its end.
fn run_loop(dir: &Path, root: &str, file: &str, id: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["--root", root, "run", "--loop-file", file, "--run-id", id];
    args.extend_from_slice(extra);
    out(dir, &args)
}

/// Waits until `log` holds an event named `event`.
fn wait_for(log: &Path, event: &str) {
    let end = Instant::now() + Duration::from_secs(20);
    let needle = format!("\"event\":\"{event}\"");
    while !std::fs::read_to_string(log).is_ok_and(|t| t.contains(&needle)) {
        assert!(Instant::now() < end, "no {event} in {}", log.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `loopctl --root root run` of `loop_file` as `run_id`, in the background.
fn spawn_run(dir: &Path, loop_file: &str, run_id: &str) -> Child {
    loopctl(
        dir,
        &[
            "--root",
            "root",
            "run",
            "--loop-file",
            loop_file,
            "--run-id",
            run_id,
            "-q",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap()
}

fn sleeping_loop(secs: u32) -> Value {
    json!({"max_iterations": 1, "loop": [{"name": "wait", "run": format!("sleep {secs}")}]})
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

/// `resume` of a run another tool wrote (ended or running) is refused before anything is
/// locked, repaired or written: its run.json holds what only that tool writes.
#[test]
fn resume_writes_nothing_into_a_log_another_tool_writes() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, lines, dialect) in [
        ("aif-loop-clean", usize::MAX, "aif-loop"),
        ("aif-drift", 4, "aif-loop"),
        ("avenor-loop", 3, "avenor"),
    ] {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let text = fixture_lines(name, lines);
        std::fs::write(dir.join("history.jsonl"), &text).unwrap();
        let state = r#"{"run_id":"x","plan":["only the agent knows"],"status":"running"}"#;
        std::fs::write(dir.join("run.json"), state).unwrap();
        let (code, _, err) = out(tmp.path(), &["resume", name]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(
            err.contains(dialect) && err.contains("resume the run with the tool that writes it"),
            "{name}: {err}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("history.jsonl")).unwrap(),
            text
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("run.json")).unwrap(),
            state
        );
        assert_eq!(files(&dir), ["history.jsonl", "run.json"], "{name}");
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

#[test]
fn a_file_named_like_a_run_does_not_hide_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_quick_loop(dir, "loop.json");
    let (code, _, err) = run_loop(dir, "r", "loop.json", "myrun", &["-q"]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(dir.join("myrun"), "notes\n").unwrap();
    let (code, stdout, err) = out(dir, &["--root", "r", "status", "myrun"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("myrun") && stdout.contains("iteration_limit"),
        "{stdout}"
    );
    let (code, _, err) = out(dir, &["--root", "r", "resume", "myrun"]);
    assert!(!err.contains("bare log file"), "{err}");
    assert_ne!(code, 0);
    let (code, stdout, err) = out(dir, &["--root", "r", "stop", "myrun"]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("already ended"), "{stdout}");
    // A bare word no run answers to: the file is named, and how to read it as a log.
    let (code, _, err) = out(dir, &["--root", "r", "status", "notes"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no run folder") && err.contains("no file or folder notes"),
        "{err}"
    );
    std::fs::write(dir.join("notes"), "x\n").unwrap();
    let (code, _, err) = out(dir, &["--root", "r", "status", "notes"]);
    assert_eq!(code, 2);
    assert!(err.contains("write ./notes to read it as a log"), "{err}");
    // Written as a path, or with a log extension, a file is a log.
    let log = std::fs::read_to_string(dir.join("r/myrun/history.jsonl")).unwrap();
    std::fs::write(dir.join("copy"), &log).unwrap();
    std::fs::write(dir.join("copy.jsonl"), &log).unwrap();
    for spec in ["./copy", "copy.jsonl"] {
        let (code, stdout, err) = out(dir, &["--root", "r", "status", spec]);
        assert_eq!(code, 0, "{spec}: {err}");
        assert!(stdout.contains("myrun"), "{spec}: {stdout}");
    }
}

#[test]
fn with_no_run_named_a_running_run_is_chosen_before_one_that_ended() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_loop(dir, "long.json", sleeping_loop(30));
    write_quick_loop(dir, "short.json");
    let mut a = spawn_run(dir, "long.json", "A");
    wait_for(&dir.join("root/A/history.jsonl"), "phase_started");
    let (code, _, err) = run_loop(dir, "root", "short.json", "B", &["-q"]);
    assert_eq!(code, 0, "{err}");
    let (code, stdout, err) = out(dir, &["--root", "root", "status", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (v["run_id"].as_str(), v["status"].as_str()),
        (Some("A"), Some("running")),
        "{err}"
    );
    assert!(err.contains("runner is running"), "{err}");
    let (code, stdout, err) = out(dir, &["--root", "root", "stop", "--json", "--wait", "20"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (v["run_id"].as_str(), v["result"].as_str()),
        (Some("A"), Some("live"))
    );
    assert!(a.wait().unwrap().code().is_some());
}

#[test]
fn a_runner_leaves_current_json_alone_once_another_run_names_itself_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_loop(dir, "long.json", sleeping_loop(30));
    let mut a = spawn_run(dir, "long.json", "A");
    wait_for(&dir.join("root/A/history.jsonl"), "phase_started");
    let mut b = spawn_run(dir, "long.json", "B");
    wait_for(&dir.join("root/B/history.jsonl"), "phase_started");
    let current = || std::fs::read_to_string(dir.join("root/current.json")).unwrap_or_default();
    assert!(current().contains("\"B\""), "{}", current());
    let (code, _, err) = out(dir, &["--root", "root", "stop", "A", "--wait", "20"]);
    assert_eq!(code, 0, "{err}");
    a.wait().unwrap();
    assert!(current().contains("\"B\""), "A removed B's current.json");
    let (code, _, err) = out(dir, &["--root", "root", "stop", "B", "--wait", "20"]);
    assert_eq!(code, 0, "{err}");
    b.wait().unwrap();
    assert_eq!(current(), "", "B's current.json outlived it");
}

#[test]
fn a_damaged_current_json_is_said_to_be_damaged() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cj");
    std::fs::create_dir_all(root.join("nc")).unwrap();
    std::fs::write(
        root.join("nc/history.jsonl"),
        fixture_lines("native-clean", 1000),
    )
    .unwrap();
    std::fs::write(root.join("current.json"), "garbage\n").unwrap();
    let (code, _, err) = out(tmp.path(), &["--root", "cj", "status"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("current.json is damaged (not a current.json: expected value at line 1")
            && err.contains("so it was not used")
            && err.contains("using the newest run"),
        "{err}"
    );
}

/// The `stopped` payload of run `id` under `dir/root`, and the event before it.
fn stop_events(dir: &Path, id: &str) -> (Value, Value) {
    let events = read_events(&dir.join("root").join(id).join("history.jsonl"));
    let n = events.len();
    assert_eq!(events[n - 1]["event"], "stopped", "{events:?}");
    (events[n - 1]["payload"].clone(), events[n - 2].clone())
}

#[test]
fn stop_of_an_interrupted_run_records_what_stop_of_a_live_one_records() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A first phase that ends well, then one still running when the run is stopped.
    write_loop(
        dir,
        "loop.json",
        json!({"max_iterations": 1, "loop": [
            {"name": "quick", "run": "true"}, {"name": "slow", "run": "sleep 30"}]}),
    );
    let mut live = spawn_run(dir, "loop.json", "live");
    wait_for(
        &dir.join("root/live/history.jsonl"),
        "phase_started\",\"iteration\":1,\"step\":\"slow",
    );
    let (code, _, err) = out(
        dir,
        &[
            "--root", "root", "stop", "live", "--reason", "r", "--wait", "20",
        ],
    );
    assert_eq!(code, 0, "{err}");
    live.wait().unwrap();
    let mut dead = spawn_run(dir, "loop.json", "dead");
    wait_for(
        &dir.join("root/dead/history.jsonl"),
        "phase_started\",\"iteration\":1,\"step\":\"slow",
    );
    dead.kill().unwrap();
    dead.wait().unwrap();
    let (code, _, err) = out(dir, &["--root", "root", "stop", "dead", "--reason", "r"]);
    assert_eq!(code, 0, "{err}");
    let (live_stop, live_before) = stop_events(dir, "live");
    let (dead_stop, dead_before) = stop_events(dir, "dead");
    assert_eq!(live_stop, dead_stop);
    assert_eq!(dead_stop["exit_code"], 143, "{dead_stop}");
    assert_eq!(dead_stop["stop_reason"], "cancelled", "{dead_stop}");
    assert_eq!(live_before["event"], "phase_finished", "{live_before}");
    // The dead runner's attempt gets no invented end: it stays as the log has it, abandoned.
    assert_eq!(dead_before["event"], "phase_started", "{dead_before}");
    let (code, pm, err) = out(dir, &["--root", "root", "postmortem", "dead", "--json"]);
    assert_eq!(code, 0, "{err}");
    let pm: Value = serde_json::from_str(&pm).unwrap();
    let slow = pm["timeline"][0]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "slow")
        .cloned()
        .unwrap_or_default();
    assert_eq!(slow["outcome"], "abandoned", "{pm}");
    // Replayed, the stopped run's state is the one stop wrote.
    let (code, stdout, err) = out(dir, &["--root", "root", "check", "dead"]);
    assert_eq!(code, 0, "{stdout}{err}");
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// `loopctl run` of a one-phase loop as `run_id` with `--on-event fifo`, given at most 20 s.
fn run_to_fifo(dir: &Path, run_id: &str) -> (Option<i32>, String) {
    write_quick_loop(dir, "short.json");
    let mut child = loopctl(
        dir,
        &[
            "--root",
            "root",
            "run",
            "--loop-file",
            "short.json",
            "--run-id",
            run_id,
            "--on-event",
            "fifo",
            "-q",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("run {run_id} hangs on its --on-event FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn events_stream_to_a_fifo_with_a_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    mkfifo(&dir.join("fifo"));
    let fifo = dir.join("fifo");
    let reader = std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap());
    // The reader opens the FIFO first, as `cat fifo &` would.
    std::thread::sleep(Duration::from_millis(200));
    let (code, err) = run_to_fifo(&dir, "fifo1");
    assert_eq!(code, Some(0), "{err}");
    let got = reader.join().unwrap();
    assert!(
        got.contains("avenor.loop.start") && got.contains("avenor.loop.end"),
        "{got}"
    );
}

#[test]
fn a_fifo_with_no_reader_fails_fast_and_leaves_no_run_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    mkfifo(&dir.join("fifo"));
    let (code, err) = run_to_fifo(dir, "fifo2");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--on-event") && err.contains("fifo: a FIFO with no reader"),
        "{err}"
    );
    assert!(
        !dir.join("root/fifo2").exists(),
        "a run folder was left behind"
    );
}

#[test]
fn resume_of_a_running_run_says_it_runs_and_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_loop(dir, "long.json", sleeping_loop(30));
    let mut a = spawn_run(dir, "long.json", "A");
    wait_for(&dir.join("root/A/history.jsonl"), "phase_started");
    let (code, _, err) = out(dir, &["--root", "root", "resume", "A"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("run A is running (runner pid {})", a.id()))
            && err.contains("`loopctl --root root tail A`")
            && err.contains("`loopctl --root root stop A`"),
        "{err}"
    );
    let (code, _, err) = out(dir, &["--root", "root", "stop", "A", "--wait", "20"]);
    assert_eq!(code, 0, "{err}");
    a.wait().unwrap();
    // A lock taken whose holder has not written its pid yet (two resumes racing).
    let lock = std::fs::File::create(dir.join("root/A/.history.jsonl.lock")).unwrap();
    std::fs::write(
        dir.join("root/A/history.jsonl"),
        std::fs::read_to_string(dir.join("root/A/history.jsonl"))
            .unwrap()
            .lines()
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    lock.lock().unwrap();
    let (code, _, err) = out(dir, &["--root", "root", "resume", "A"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("run A is running (a runner is taking it up") && err.contains("stop A`"),
        "{err}"
    );
}

#[test]
fn the_runners_last_line_and_status_name_an_ending_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_quick_loop(dir, "loop.json");
    let (code, _, err) = run_loop(dir, "root", "loop.json", "v", &[]);
    assert_eq!(code, 0, "{err}");
    let last = err.lines().last().unwrap_or_default().to_string();
    let (_, status, _) = out(dir, &["--root", "root", "status", "v"]);
    assert!(status.contains("stopped (iteration_limit)"), "{status}");
    assert!(last.contains("stopped (iteration_limit)"), "{last}");
}

#[test]
fn the_run_help_example_runs_as_written() {
    let (code, help, err) = out(&repo(), &["run", "--help"]);
    assert_eq!(code, 0, "{err}");
    let example: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Example"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    assert!(!example.is_empty(), "{help}");
    let tmp = tempfile::tempdir().unwrap();
    let bin = cargo_bin("loopctl");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("sh")
        .args(["-ec", &example.join("\n")])
        .current_dir(repo())
        .env("PATH", path)
        .env("TMPDIR", tmp.path())
        .env_remove("LOOPCTL_ROOT")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n{}",
        example.join("\n"),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A runner that has not let go of its run within `--wait` (its phase ignores SIGTERM: the
/// runner kills it 5 s later) makes `stop` say so and exit 1, `result` `still_running`; the
/// runner then ends the run as stopped.
#[test]
fn a_runner_that_holds_on_past_the_wait_is_said_with_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let stubborn = "trap '' TERM; sleep 20";
    write_loop(
        dir,
        "stubborn.json",
        json!({"max_iterations": 1, "loop": [{"name": "s", "run": stubborn}]}),
    );
    let mut a = spawn_run(dir, "stubborn.json", "S");
    wait_for(&dir.join("root/S/history.jsonl"), "phase_started");
    let (code, stdout, err) = out(
        dir,
        &["--root", "root", "stop", "S", "--json", "--wait", "1"],
    );
    assert_eq!(code, 1, "{stdout}{err}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["result"], "still_running", "{v}");
    assert_eq!(a.wait().unwrap().code(), Some(130));
    let (code, stdout, _) = out(dir, &["--root", "root", "status", "S", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["stop"]["reason"], "user_stop", "{v}");
}
