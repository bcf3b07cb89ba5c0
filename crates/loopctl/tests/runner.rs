//! End-to-end tests of `loopctl run`, `resume`, `stop` and `clean`, with phases that are
//! small shell commands.

use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::*;

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
}

#[test]
fn exit_marker_stops_the_loop_runs_post_and_writes_done() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"max_iterations": 5,
               "pre": [{"name": "build", "run": "true"}],
               "loop": [{"name": "test", "run": format!("test $LOOPCTL_ITERATION -ge 2 && {} || true", echo("<|workflow: exit | tests green|>"))},
                        {"name": "fix", "run": "true"}],
               "post": [{"name": "report", "run": "true"}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    assert_eq!(
        phases(&ev),
        ["build@0", "test@1", "fix@1", "test@2", "report@2"]
    );
    let stop = named(&ev, "stopped")[0];
    assert_eq!(
        (
            &stop["payload"]["exit_reason"],
            &stop["payload"]["exit_label"],
            &stop["payload"]["iterations_completed"]
        ),
        (&json!("marker"), &json!("tests green"), &json!(2))
    );
    let st = s.state();
    assert_eq!(
        (&st["status"], &st["stop"]["reason"]),
        (&json!("completed"), &json!("marker"))
    );
    let sentinel = s.sentinel();
    assert!(sentinel.starts_with("DONE\nSESSION=ses_"), "{sentinel}");
    assert!(
        sentinel.ends_with("STOP_REASON=end_turn\nRUN=r1\n"),
        "{sentinel}"
    );
    // The marker is recorded with its line in the phase's output.
    let fin = named(&ev, "phase_finished")[3];
    assert_eq!(
        fin["payload"]["marker"],
        json!({"directive": "exit", "label": "tests green"})
    );
    assert_eq!(fin["payload"]["markers"][0]["line"], json!(1));
}

#[test]
fn abort_is_blocked_exit_5_and_skips_post() {
    let s = Sandbox::new();
    let out = format!(
        "{}; {}; {}",
        echo("<|workflow: exit | done|>"),
        echo("<|workflow: abort | architectural issue:|> layering|>"),
        echo("<|workflow: continue|>")
    );
    let (code, err) = s.run(
        json!({"loop": [{"name": "review", "run": out}], "post": [{"name": "report", "run": "true"}]}),
        &[],
    );
    assert_eq!(code, 5, "{err}");
    assert_eq!(
        s.sentinel().lines().collect::<Vec<_>>()[2..],
        [
            "STOP_REASON=blocked",
            "REASON=architectural issue:|> layering",
            "RUN=r1"
        ]
    );
    assert_eq!(phases(&s.events()), ["review@1"]);
    let st = s.state();
    assert_eq!(
        (&st["status"], &st["stop"]["reason"]),
        (&json!("stopped"), &json!("architectural issue:|> layering"))
    );
    // The last line says the label once (it is the stop reason).
    assert!(
        err.contains("stopped (architectural issue:|> layering) after"),
        "{err}"
    );

    // Without a label there is no REASON= line.
    let s = Sandbox::new();
    let (code, _) = s.run(
        json!({"loop": [{"name": "a", "run": echo("<|WORKFLOW: Abort|>")}]}),
        &[],
    );
    assert_eq!(code, 5);
    assert!(!s.sentinel().contains("\nREASON="), "{}", s.sentinel());
}

#[test]
fn markers_in_fences_or_prose_do_not_count() {
    let s = Sandbox::new();
    let out = format!(
        "{}; {}; {}; {}",
        echo("```"),
        echo("<|workflow: exit|>"),
        echo("```"),
        echo("say <|workflow: exit|> when done")
    );
    let (code, _) = s.run(
        json!({"max_iterations": 2, "loop": [{"name": "a", "run": out}]}),
        &[],
    );
    assert_eq!(code, 0);
    let st = s.state();
    assert_eq!(
        (&st["status"], &st["stop"]["reason"]),
        (&json!("stopped"), &json!("iteration_limit"))
    );
    assert_eq!(phases(&s.events()), ["a@1", "a@2"]);
    assert_eq!(
        named(&s.events(), "stopped")[0]["payload"]["exit_reason"],
        json!("max_iterations")
    );
    assert!(s.sentinel().starts_with("DONE\n"), "{}", s.sentinel());
    assert!(
        named(&s.events(), "phase_finished")[0]["payload"]
            .get("marker")
            .is_none()
    );
}

#[test]
fn a_failing_phase_fails_the_run_with_its_exit_code() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"pre": [{"name": "build", "run": "echo compile error >&2; exit 3"}], "loop": [{"name": "t", "run": "true"}]}),
        &[],
    );
    assert_eq!(code, 3);
    assert!(err.contains("compile error"), "{err}");
    let sentinel = s.sentinel();
    assert!(
        sentinel.starts_with("FAILED\n")
            && sentinel.contains("STOP_REASON=error\nEXIT_CODE=3\nRUN=r1\n"),
        "{sentinel}"
    );
    // The pre phase failed: the loop never began.
    assert_eq!(phases(&s.events()), ["build@0"]);
    let st = s.state();
    assert_eq!(
        (&st["status"], &st["stop"]["reason"]),
        (&json!("failed"), &json!("phase_error"))
    );
    assert!(st["last_error"].as_str().unwrap().contains("compile error"));
    // A failed run is not resumed; the message says why, with its last error.
    let out = s.cmd().args(["resume", "r1"]).output().unwrap();
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        msg.contains("failed") && msg.contains("compile error"),
        "{msg}"
    );
}

#[test]
fn only_pre_phases_end_with_end_turn() {
    let s = Sandbox::new();
    let (code, _) = s.run(
        json!({"pre": [{"name": "a", "run": "true"}]}),
        &["--prompt", "hello", "--agent", "cat"],
    );
    assert_eq!(code, 0);
    assert_eq!(phases(&s.events()), ["(initial)@0", "a@0"]);
    assert_eq!(
        named(&s.events(), "stopped")[0]["payload"]["exit_reason"],
        json!("end_turn")
    );
    assert_eq!(s.state()["status"], json!("completed"));
    assert!(s.sentinel().starts_with("DONE\n"), "{}", s.sentinel());
}

#[test]
fn exit_1_is_retried_with_backoff_and_every_attempt_keeps_its_output() {
    let s = Sandbox::new();
    let flaky = "echo attempt $LOOPCTL_ATTEMPT; test $LOOPCTL_ATTEMPT -ge 3 || exit 1";
    let (code, err) = s.run(
        json!({"loop": [{"name": "flaky", "run": flaky}], "max_iterations": 1}),
        &["--max-retries", "2", "--retry-base", "20ms"],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    let retries = named(&ev, "phase_retry");
    assert_eq!(retries.len(), 2);
    assert_eq!(
        retries
            .iter()
            .map(|r| r["payload"]["delay_ms"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [20, 40]
    );
    assert_eq!(s.state()["retries"], json!(2));
    let fins = named(&ev, "phase_finished");
    assert_eq!(fins.len(), 3);
    for (i, f) in fins.iter().enumerate() {
        let p = &f["payload"];
        let path = s.run_dir().join(p["output_log"].as_str().unwrap());
        let text = std::fs::read(&path).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&text),
            format!("attempt {}\n", i + 1)
        );
        use sha2::Digest;
        let sha: String = sha2::Sha256::digest(&text)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(p["output_sha256"], json!(sha));
    }
    // Out of retries: FAILED with the phase's exit code 1.
    let s = Sandbox::new();
    let (code, _) = s.run(
        json!({"loop": [{"name": "f", "run": "exit 1"}]}),
        &["--max-retries", "1", "--retry-base", "1ms"],
    );
    assert_eq!(code, 1);
    assert_eq!(named(&s.events(), "phase_finished").len(), 2);
    assert!(s.sentinel().contains("EXIT_CODE=1"));
}

#[test]
fn timeout_kills_the_phase_group_and_writes_timeout_124() {
    let s = Sandbox::new();
    let started = Instant::now();
    // The grandchild `sleep` must die too: it is in the phase's process group.
    let (code, _) = s.run(
        json!({"loop": [{"name": "slow", "run": "sleep 30 & wait"}]}),
        &["--timeout", "300ms"],
    );
    assert_eq!(code, 124);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(s.sentinel().starts_with("TIMEOUT\n"));
    let st = s.state();
    assert_eq!(
        (&st["status"], &st["stop"]["reason"]),
        (&json!("failed"), &json!("timeout"))
    );
    let events = s.events();
    let fin = &named(&events, "phase_finished")[0]["payload"];
    assert_eq!(fin["stop_reason"], json!("timeout"));
    // Said as the run's own cut, not as a crash ("killed by signal 15").
    assert_eq!(
        fin["error"],
        json!("phase \"slow\" (iteration 1, attempt 1) was stopped at the run's --timeout")
    );
    let out = s
        .cmd()
        .args(["postmortem", "--format", "json"])
        .output()
        .unwrap();
    let pm: Value = serde_json::from_slice(&out.stdout).unwrap();
    let phases = &pm["timeline"][0]["phases"];
    assert_eq!(phases[0]["outcome"], json!("timeout"), "{pm}");
}

fn spawn_run(s: &Sandbox, config: Value) -> Child {
    spawn_run_with(s, config, &[])
}

/// Waits until the run's log has a `phase_started` event.
fn wait_for_phase(s: &Sandbox) {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if !named(&s.events_lossy(), "phase_started").is_empty() {
            std::thread::sleep(Duration::from_millis(50));
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the runner never started a phase");
}

impl Sandbox {
    fn events_lossy(&self) -> Vec<Value> {
        std::fs::read_to_string(self.run_dir().join("history.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// run.json follows the log while a phase runs: it shows the phase under way (it lagged one
/// event behind for the whole phase), and `check` finds it agreeing with the log.
#[test]
fn run_json_shows_the_phase_under_way() {
    let s = Sandbox::new();
    let mut child = spawn_run(
        &s,
        json!({"loop": [{"name": "quick", "run": "true"}, {"name": "long", "run": "sleep 30"}]}),
    );
    let end = Instant::now() + Duration::from_secs(20);
    let started_long = || {
        let ev = s.events_lossy();
        let seq = named(&ev, "phase_started")
            .iter()
            .find(|e| e["step"] == "long")
            .map(|e| e["seq"].clone());
        seq.filter(|_| s.run_dir().join("run.json").is_file())
    };
    let seq = loop {
        if let Some(seq) = started_long() {
            break seq;
        }
        assert!(Instant::now() < end, "the long phase never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The writer gathers a burst into one write per 100 ms.
    let state = loop {
        let state = s.state();
        if state["last_seq"] == seq || Instant::now() >= end {
            break state;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        (&state["last_seq"], &state["current_step"]),
        (&seq, &json!("long")),
        "{state}"
    );
    let check = s.cmd().args(["check", "r1"]).output().unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{said}");
    signal(&child, nix::sys::signal::Signal::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

#[test]
fn sigint_cancels_killed_130_and_the_run_is_stopped_user_stop() {
    let s = Sandbox::new();
    let mut child = spawn_run(&s, json!({"loop": [{"name": "slow", "run": "sleep 30"}]}));
    wait_for_phase(&s);
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let sentinel = s.sentinel();
    assert!(
        sentinel.starts_with("KILLED\n")
            && sentinel.contains("STOP_REASON=cancelled\nEXIT_CODE=130\n"),
        "{sentinel}"
    );
    let st = s.state();
    assert_eq!(
        (&st["status"], &st["stop"]["reason"]),
        (&json!("stopped"), &json!("user_stop"))
    );
    assert!(!s.root().join("current.json").exists());
}

#[test]
fn a_second_runner_is_refused_and_stop_ends_a_live_run() {
    let s = Sandbox::new();
    let mut child = spawn_run(&s, json!({"loop": [{"name": "slow", "run": "sleep 30"}]}));
    wait_for_phase(&s);
    // The active run is in current.json while it runs.
    let cur: Value =
        serde_json::from_str(&std::fs::read_to_string(s.root().join("current.json")).unwrap())
            .unwrap();
    assert_eq!(cur["active_run_id"], json!("r1"));
    let out = s.cmd().args(["resume", "r1"]).output().unwrap();
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(msg.contains(&format!("pid {}", child.id())), "{msg}");
    // clean refuses a running loop.
    let out = s.cmd().args(["clean", "r1", "--yes"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("is running"));
    assert!(s.run_dir().exists());
    s.cmd()
        .args(["stop", "r1", "--reason", "enough for today"])
        .assert()
        .success();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let st = s.state();
    assert_eq!(
        (&st["status"], &st["stop"]["reason"], &st["stop"]["detail"]),
        (
            &json!("stopped"),
            &json!("user_stop"),
            &json!("enough for today")
        )
    );
    // A stopped run is not resumed, and stop on it changes nothing.
    let out = s.cmd().args(["resume", "r1"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("is stopped"));
    let before = std::fs::read(s.run_dir().join("history.jsonl")).unwrap();
    s.cmd().args(["stop", "r1"]).assert().success();
    assert_eq!(
        before,
        std::fs::read(s.run_dir().join("history.jsonl")).unwrap()
    );
    // clean: no terminal to ask on, so --yes is required; with it the run is gone.
    s.cmd().args(["clean", "--all"]).assert().failure();
    s.cmd().args(["clean", "--all", "--yes"]).assert().success();
    assert!(!s.run_dir().exists());
}

#[test]
fn an_interrupted_run_resumes_and_an_idle_one_can_be_stopped() {
    let s = Sandbox::new();
    let cfg = json!({"max_iterations": 2, "loop": [{"name": "a", "run": "true"}, {"name": "b", "run": "test -f go || sleep 30"}]});
    let mut child = spawn_run(&s, cfg);
    // Wait until b is running, then kill the runner outright (no chance to record anything).
    let end = Instant::now() + Duration::from_secs(20);
    while !s
        .events_lossy()
        .iter()
        .any(|e| e["event"] == "phase_started" && e["step"] == "b")
    {
        assert!(Instant::now() < end);
        std::thread::sleep(Duration::from_millis(10));
    }
    signal(&child, nix::sys::signal::Signal::SIGKILL);
    child.wait().unwrap();
    // The orphaned phase group is still sleeping; it does not hold the run's lock.
    std::fs::write(s.dir.join("go"), "").unwrap();
    s.cmd()
        .args(["resume", "r1", "--sentinel-file", "sentinel"])
        .assert()
        .code(0);
    let ev = s.events();
    assert_eq!(phases(&ev), ["a@1", "b@1", "a@2", "b@2"]);
    let b_starts: Vec<_> = named(&ev, "phase_started")
        .into_iter()
        .filter(|e| e["step"] == "b" && e["iteration"] == 1)
        .collect();
    assert_eq!(
        b_starts
            .iter()
            .map(|e| e["payload"]["attempt"].clone())
            .collect::<Vec<_>>(),
        [json!(1), json!(2)]
    );
    assert_eq!(named(&ev, "run_resumed").len(), 1);
    let seqs: Vec<u64> = ev.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let replayed = s.cmd().args(["replay", "r1"]).output().unwrap().stdout;
    assert_eq!(
        replayed,
        std::fs::read(s.run_dir().join("run.json")).unwrap()
    );

    // An idle, unfinished run is marked stopped by `stop`.
    let s = Sandbox::new();
    let slow = json!({"loop": [{"name": "slow", "run": "sleep 30"}]});
    let mut child = spawn_run_with(&s, slow, &["--on-event", "events.ndjson"]);
    wait_for_phase(&s);
    signal(&child, nix::sys::signal::Signal::SIGKILL);
    child.wait().unwrap();
    s.cmd().args(["clean", "r1", "--yes"]).assert().code(1);
    assert_eq!(s.sentinel(), "", "no sentinel before the run ends");
    s.cmd()
        .args(["stop", "r1", "--reason", "gone home"])
        .assert()
        .success()
        .stdout(predicates::str::contains("no runner"));
    let st = s.state();
    assert_eq!(
        (&st["stop"]["reason"], &st["stop"]["detail"]),
        (&json!("user_stop"), &json!("gone home"))
    );
    // Ended as its runner ends a run `stop` cancels: the sentinel whoever waits needs.
    let sentinel = s.sentinel();
    assert!(sentinel.starts_with("KILLED\n"), "{sentinel}");
    assert!(sentinel.contains("EXIT_CODE=130\nRUN=r1\n"), "{sentinel}");
    let replayed = s.cmd().args(["replay", "r1"]).output().unwrap().stdout;
    assert_eq!(
        replayed,
        std::fs::read(s.run_dir().join("run.json")).unwrap()
    );
    let stream = read_events(&s.dir.join("events.ndjson"));
    let last = stream.last().unwrap();
    assert_eq!(
        (&last["event"], &last["exit_reason"]),
        (&json!("avenor.loop.end"), &json!("cancelled")),
        "{stream:?}"
    );
}

#[test]
fn a_bad_loop_file_runs_nothing_exits_1_and_writes_failed() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"max_iterations": -2, "loop": [{"name": "a", "prompt": "x", "prompt_file": "y"}, {"name": "a", "run": "true"}]}),
        &[],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains(
            "loop.json: max_iterations: max_iterations must be ≥ 1 when loop is non-empty"
        ),
        "{err}"
    );
    assert!(
        err.contains("exactly one of prompt or prompt_file"),
        "{err}"
    );
    assert!(err.contains("phase names must be unique"), "{err}");
    assert!(
        s.sentinel()
            .starts_with("FAILED\nSESSION=\nSTOP_REASON=config_error\nREASON="),
        "{}",
        s.sentinel()
    );
    assert!(!s.root().exists(), "nothing may run");
    let (code, err) = s.run(
        json!({"loop": [{"name": "a", "prompt": "{{if .Phase}}"}]}),
        &["--agent", "cat"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("prompt template"), "{err}");
    let (code, err) = s.run(json!({"loop": [{"name": "a", "prompt": "hi"}]}), &[]);
    assert_eq!(code, 1);
    assert!(err.contains("needs an agent"), "{err}");
}

#[test]
fn prompts_are_templates_passed_as_one_argv_element_or_on_stdin() {
    let s = Sandbox::new();
    // The agent writes its first argument to a file: the prompt arrives as one element, never
    // through a shell, whatever it holds.
    let agent = json!([
        "sh",
        "-c",
        "printf '%s' \"$1\" > \"$LOOPCTL_PHASE.argv\"; cat > \"$LOOPCTL_PHASE.stdin\"; cp \"$LOOPCTL_PROMPT_FILE\" \"$LOOPCTL_PHASE.file\"",
        "agent",
        "{prompt}"
    ]);
    let (code, err) = s.run(
        json!({"max_iterations": 3, "agent": agent,
               "loop": [{"name": "p", "prompt": "{{.Phase}} {{.Iteration}}/{{.MaxIterations}} in {{.WorkDir}} `$(touch pwned)` {{if .ChangedFiles}}changed{{else}}first{{end}}"},
                        {"name": "q", "prompt": "stdin {{.RunID}}", "agent": ["sh", "-c", "cat > q.stdin"]}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let argv = std::fs::read_to_string(s.dir.join("p.argv")).unwrap();
    let workdir = argv
        .strip_prefix("p 3/3 in ")
        .and_then(|r| r.strip_suffix(" `$(touch pwned)` first"));
    assert_eq!(
        workdir.map(|w| std::fs::canonicalize(w).unwrap()),
        Some(std::fs::canonicalize(&s.dir).unwrap()),
        "{argv}"
    );
    assert!(!s.dir.join("pwned").exists());
    assert_eq!(std::fs::read_to_string(s.dir.join("p.stdin")).unwrap(), "");
    assert_eq!(std::fs::read_to_string(s.dir.join("p.file")).unwrap(), argv);
    assert_eq!(
        std::fs::read_to_string(s.dir.join("q.stdin")).unwrap(),
        "stdin r1"
    );
}

#[test]
fn git_delta_variables_follow_the_previous_phase() {
    let s = Sandbox::new();
    git(&s.dir, &["init", "-q"]);
    std::fs::write(
        s.dir.join(".gitignore"),
        ".loopctl\nsentinel\n*.seen\nloop.json\n",
    )
    .unwrap();
    git(&s.dir, &["add", "."]);
    git(&s.dir, &["commit", "-qm", "start"]);
    let commit = "echo $LOOPCTL_ITERATION > f$LOOPCTL_ITERATION.txt && git add f$LOOPCTL_ITERATION.txt && git -c user.name=t -c user.email=t@t -c commit.gpgsign=false commit -qm it";
    let (code, err) = s.run(
        json!({"max_iterations": 2, "agent": ["sh", "-c", "cat > review$LOOPCTL_ITERATION.seen"],
               "loop": [{"name": "work", "run": commit},
                        {"name": "review", "prompt": "{{if .ChangedFiles}}[{{.ChangedFiles}}] since {{.PrevPhaseCommit}}{{else}}none{{end}}"}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    let work_commits: Vec<String> = named(&ev, "phase_finished")
        .iter()
        .filter(|e| e["step"] == "work")
        .map(|e| e["payload"]["commit"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(work_commits.len(), 2);
    // A review sees what the phase before it (work) changed, and the commit it left behind.
    for (i, c) in work_commits.iter().enumerate() {
        let seen = std::fs::read_to_string(s.dir.join(format!("review{}.seen", i + 1))).unwrap();
        assert_eq!(seen, format!("[f{}.txt] since {c}", i + 1));
    }

    // Outside git the variables are empty.
    let s = Sandbox::new();
    let (code, _) = s.run(
        json!({"agent": ["sh", "-c", "cat > seen.seen"], "loop": [{"name": "r", "prompt": "[{{.PrevPhaseCommit}}{{.DiffStat}}{{.ChangedFiles}}]"}], "max_iterations": 1}),
        &[],
    );
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read_to_string(s.dir.join("seen.seen")).unwrap(),
        "[]"
    );
}

#[test]
fn on_event_matches_avenors_lifecycle_events_field_by_field() {
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    let sorted = |mut k: Vec<&str>| {
        k.sort();
        k.into_iter().map(String::from).collect::<Vec<_>>()
    };
    // Avenor's lifecycle examples, field for field; a phase's session id is added (Avenor says loop
    // phases' session ids appear in these events).
    let s = Sandbox::new();
    let (code, _) = s.run(
        json!({"max_iterations": 5, "pre": [{"name": "build", "run": "true"}],
               "loop": [{"name": "test", "run": format!("test $LOOPCTL_ITERATION -ge 2 && {} || true", echo("<|workflow: abort | architectural issue: layering violation in pkg/db|>"))},
                        {"name": "fix", "run": "true"}, {"name": "a", "run": "true"}, {"name": "b", "run": "true"}]}),
        &["--on-event", "events.ndjson"],
    );
    assert_eq!(code, 5);
    let av = read_events(&s.dir.join("events.ndjson"));
    assert_eq!(
        keys(&av[0]),
        sorted(vec![
            "event",
            "run_id",
            "ts",
            "max_iterations",
            "pre_phase_count",
            "loop_phase_count"
        ])
    );
    assert_eq!(
        (
            &av[0]["event"],
            &av[0]["max_iterations"],
            &av[0]["pre_phase_count"],
            &av[0]["loop_phase_count"]
        ),
        (&json!("avenor.loop.start"), &json!(5), &json!(1), &json!(4))
    );
    let start = av
        .iter()
        .find(|e| e["event"] == "avenor.phase.start" && e["phase"] == "test" && e["iteration"] == 2)
        .unwrap();
    assert_eq!(
        keys(start),
        sorted(vec![
            "event",
            "run_id",
            "ts",
            "phase",
            "iteration",
            "kind",
            "session_id"
        ])
    );
    assert_eq!(start["kind"], json!("loop"));
    assert!(start["ts"].as_i64().unwrap() > 1_700_000_000_000);
    let pre = av
        .iter()
        .find(|e| e["event"] == "avenor.phase.start" && e["phase"] == "build")
        .unwrap();
    assert_eq!(
        (&pre["kind"], &pre["iteration"]),
        (&json!("pre"), &json!(0))
    );
    let aborted = &av[av.len() - 2];
    assert_eq!(
        keys(aborted),
        sorted(vec![
            "event",
            "run_id",
            "ts",
            "phase",
            "iteration",
            "stop_reason",
            "abort_marker",
            "abort_marker_label",
            "session_id"
        ])
    );
    assert_eq!(
        (&aborted["abort_marker"], &aborted["stop_reason"]),
        (&json!(true), &json!("end_turn"))
    );
    let end = av.last().unwrap();
    assert_eq!(
        keys(end),
        sorted(vec![
            "event",
            "run_id",
            "ts",
            "iterations_completed",
            "exit_reason",
            "exit_label"
        ])
    );
    assert_eq!(
        (
            &end["event"],
            &end["run_id"],
            &end["iterations_completed"],
            &end["exit_reason"],
            &end["exit_label"]
        ),
        (
            &json!("avenor.loop.end"),
            &json!("r1"),
            &json!(2),
            &json!("abort"),
            &json!("architectural issue: layering violation in pkg/db")
        )
    );
    // Every lifecycle event, in order; loopctl reads the stream back to the same outcome.
    assert_eq!(av.len(), 1 + 2 * (1 + 4 + 1) + 1);
    let out = s
        .cmd()
        .args(["replay", "--json"])
        .arg(s.dir.join("events.ndjson"))
        .output()
        .unwrap();
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&st["status"], &st["exit_reason"]),
        (&json!("stopped"), &json!("abort"))
    );

    // An exit marker: exit_marker fields, and `-` streams to stdout.
    let s = Sandbox::new();
    std::fs::write(
        s.dir.join("loop.json"),
        json!({"loop": [{"name": "test", "run": echo("<|workflow: exit | tests green|>")}]})
            .to_string(),
    )
    .unwrap();
    let out = s
        .cmd()
        .args(["run", "--loop-file", "loop.json", "--on-event", "-", "-q"])
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = lines
        .iter()
        .find(|e| e["event"] == "avenor.phase.end")
        .unwrap();
    assert_eq!(
        keys(end),
        sorted(vec![
            "event",
            "run_id",
            "ts",
            "phase",
            "iteration",
            "stop_reason",
            "exit_marker",
            "exit_marker_label",
            "session_id"
        ])
    );
    assert_eq!(
        (
            &end["phase"],
            &end["iteration"],
            &end["exit_marker"],
            &end["exit_marker_label"]
        ),
        (
            &json!("test"),
            &json!(1),
            &json!(true),
            &json!("tests green")
        )
    );
    assert_eq!(lines.last().unwrap()["exit_reason"], json!("marker"));
    assert!(lines.last().unwrap()["exit_label"] == json!("tests green"));
}

#[test]
fn phases_get_the_documented_environment() {
    let s = Sandbox::new();
    let (code, _) = s.run(
        json!({"max_iterations": 1, "loop": [{"name": "env", "run": "env | grep ^LOOPCTL_ | sort > env.seen"}]}),
        &[],
    );
    assert_eq!(code, 0);
    let env = std::fs::read_to_string(s.dir.join("env.seen")).unwrap();
    for k in [
        "LOOPCTL_RUN_ID=r1",
        "LOOPCTL_PHASE=env",
        "LOOPCTL_ITERATION=1",
        "LOOPCTL_MAX_ITERATIONS=1",
        "LOOPCTL_WORKDIR=",
        "LOOPCTL_ATTEMPT=1",
    ] {
        assert!(env.contains(k), "{k} missing from\n{env}");
    }
}

#[test]
fn the_bundled_example_fixes_its_test_on_the_second_try() {
    let s = Sandbox::new();
    let example = loopctl_tests::repo().join("examples/fix-the-tests");
    for f in ["loop.json", "calc.sh", "test.sh", "agent.sh"] {
        std::fs::copy(example.join(f), s.dir.join(f)).unwrap();
    }
    let out = s.cmd().args(RUN).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        phases(&s.events()),
        [
            "plan@0", "test@1", "fix@1", "test@2", "fix@2", "test@3", "report@3"
        ]
    );
    let st = s.state();
    assert_eq!(
        (
            &st["status"],
            &st["exit_label"],
            &st["iterations_completed"]
        ),
        (&json!("completed"), &json!("tests green"), &json!(3))
    );
    assert!(
        std::fs::read_to_string(s.dir.join("calc.sh"))
            .unwrap()
            .contains("$1 + $2")
    );
    assert!(s.sentinel().starts_with("DONE\n"));
}

#[test]
fn echo_copies_phase_and_check_output_to_stderr_only_when_asked() {
    let cfg = json!({"loop": [{"name": "say", "run": "echo out-$LOOPCTL_ITERATION; echo err-line >&2"}],
                     "criteria": {"rules": [{"id": "c", "check": "echo check-said"}]},
                     "max_iterations": 1});
    let s = Sandbox::new();
    let (code, err) = s.run(cfg.clone(), &["--echo"]);
    assert_eq!(code, 0, "{err}");
    for line in ["out-1\n", "err-line\n", "check-said\n"] {
        assert!(err.contains(line), "{line:?} not echoed:\n{err}");
    }
    let quiet = Sandbox::new();
    let (code, err) = quiet.run(cfg, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("out-1") && !err.contains("check-said"),
        "{err}"
    );
}
