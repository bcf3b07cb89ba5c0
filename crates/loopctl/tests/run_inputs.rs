//! What `loopctl run` refuses, or names, before anything runs or instead of running: a loop
//! file it cannot read, outputs it could not write, both writers on stdout, an agent it cannot
//! start.

use serde_json::json;

mod common;
use common::*;

/// A loop file that cannot be read is a bad loop file (exit 1, a FAILED sentinel naming it),
/// and `--json` with `--on-event -` (both on stdout) is refused before anything runs.
#[test]
fn a_missing_loop_file_fails_like_a_bad_one_and_stdout_has_one_writer() {
    let s = Sandbox::new();
    let out = s.cmd().args(RUN).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("loop.json: "), "{err}");
    let sentinel = s.sentinel();
    assert!(sentinel.starts_with("FAILED\n"), "{sentinel}");
    assert!(
        sentinel.contains("STOP_REASON=config_error\nREASON="),
        "{sentinel}"
    );
    assert!(sentinel.contains("loop.json: "), "{sentinel}");

    std::fs::write(
        s.dir.join("loop.json"),
        json!({"loop": [{"name": "a", "run": "touch ran"}]}).to_string(),
    )
    .unwrap();
    let out = s
        .cmd()
        .args(RUN)
        .args(["--json", "--on-event", "-"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("both write to stdout"), "{err}");
    assert!(!s.dir.join("ran").exists());
}

/// An agent that cannot be started is named in the error (the OS says only "No such file or
/// directory").
#[test]
fn an_agent_that_cannot_start_is_named() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"loop": [{"name": "ask", "prompt": "hi", "agent": ["no-such-agent-xyz", "-p"]}]}),
        &[],
    );
    assert_ne!(code, 0, "{err}");
    let st = s.state();
    let last = st["last_error"].as_str().unwrap_or_default();
    assert!(
        last.contains("cannot start phase: no-such-agent-xyz: "),
        "{st}"
    );
}

/// A sentinel or event stream that cannot be written is refused before anything runs: no
/// phase runs, no run folder is left behind (the sentinel's missing folder was found out only
/// after the whole run had completed).
#[test]
fn unwritable_outputs_are_refused_before_the_run_starts() {
    let s = Sandbox::new();
    std::fs::write(
        s.dir.join("loop.json"),
        json!({"loop": [{"name": "mark", "run": "touch ran"}]}).to_string(),
    )
    .unwrap();
    for (flag, path, says) in [
        (
            "--sentinel-file",
            "no/such/folder/sentinel",
            "no/such/folder does not exist",
        ),
        ("--on-event", "no/such/folder/events.ndjson", "--on-event"),
    ] {
        let out = s
            .cmd()
            .args(["run", "--loop-file", "loop.json", "--dir", ".", flag, path])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(says), "{flag}: {err}");
        assert!(!s.dir.join("ran").exists(), "{flag}: a phase ran");
        let left = std::fs::read_dir(s.root()).map_or(0, |d| d.count());
        assert_eq!(left, 0, "{flag}: a run folder was left behind");
    }
}

/// A prompt reading a variable no prompt has is a bad loop file, found before anything runs
/// (it failed only when its phase rendered, after the earlier phases had run).
#[test]
fn an_unknown_template_variable_is_refused_before_anything_runs() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"agent": ["cat"], "loop": [{"name": "a", "run": "touch ran"}, {"name": "b", "prompt": "go {{.Undefined}}"}]}),
        &[],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("loop[1] (\"b\"): prompt template: unknown variable .Undefined"),
        "{err}"
    );
    assert!(!s.dir.join("ran").exists());
}

/// A refused loop file's warnings are shown with its errors: the unknown key is often the
/// typo behind the error.
#[test]
fn a_refused_loop_file_shows_its_warnings_too() {
    let s = Sandbox::new();
    let (code, err) = s.run(json!({"loop": [{"name": "a", "promt": "hi"}]}), &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown key \"promt\" ignored"), "{err}");
    assert!(err.contains("error: "), "{err}");
}

/// A run id taken already is refused, and the commands the refusal suggests work as written,
/// from where it was said (with `--root` for a root that is not the default one).
#[test]
fn a_taken_run_id_suggests_commands_that_work() {
    let s = Sandbox::new();
    let config = json!({"max_iterations": 1, "loop": [{"name": "a", "run": "true"}]});
    std::fs::write(s.dir.join("loop.json"), config.to_string()).unwrap();
    let run = || {
        loopctl()
            .current_dir(&s.dir)
            .args(["--root", "runs"])
            .args(RUN)
            .output()
            .unwrap()
    };
    assert_eq!(run().status.code(), Some(0));
    let out = run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let suggested: Vec<&str> = err.split('`').skip(1).step_by(2).collect();
    assert_eq!(suggested.len(), 2, "{err}");
    assert!(suggested[1].contains(" resume r1"), "{err}");
    let status = shell_words::split(suggested[0]).unwrap();
    assert_eq!(status[0], "loopctl", "{err}");
    let out = loopctl()
        .current_dir(&s.dir)
        .args(&status[1..])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("r1"), "{said}");
}
