//! One consistent CLI (issue 16): global options anywhere, validated numbers, completions and
//! man pages, honest exit codes for empty roots and logs, findings in the report (state that
//! cannot be read: unreadable_state.rs).

use std::path::Path;

use loopctl_tests::repo;
use serde_json::Value;

mod common;
use common::{fixture, loopctl, run, run_to, text};

/// The subcommands `loopctl --help` lists.
fn subcommands() -> Vec<String> {
    let help = text(&run(&["--help"]).stdout);
    let mut in_list = false;
    let mut out = Vec::new();
    for line in help.lines() {
        if line.starts_with("Commands:") {
            in_list = true;
        } else if in_list && !line.starts_with("  ") {
            break;
        } else if in_list && !line.starts_with("   ") {
            let name = line.split_whitespace().next().unwrap().to_string();
            if name != "help" {
                out.push(name);
            }
        }
    }
    assert!(out.len() > 10, "{help}");
    out
}

#[test]
fn global_options_work_after_the_subcommand() {
    let fixtures = repo().join("fixtures");
    let fx = fixtures.to_str().unwrap();
    let out = run(&["list", "--root", fx, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(rows.as_array().unwrap().iter().any(|r| {
        r["dir"]
            .as_str()
            .is_some_and(|d| d.ends_with("native-clean"))
    }));
    // The same rows as with the option before the subcommand.
    assert_eq!(out.stdout, run(&["--root", fx, "list", "--json"]).stdout);

    let out = run(&["status", "native-clean", "--root", fx, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // --strict after the subcommand turns findings into exit 1.
    let bad = fixture("bad-middle");
    let bad = bad.to_str().unwrap();
    assert_eq!(run(&["replay", bad]).status.code(), Some(0));
    assert_eq!(run(&["replay", bad, "--strict"]).status.code(), Some(1));
    assert_eq!(run(&["history", bad, "--strict"]).status.code(), Some(1));
    // history names a damaged line as status does: file:line: byte N: kind: reason.
    let said = |cmd| {
        let err = text(&run(&[cmd, bad]).stderr);
        err.lines()
            .find(|l| l.contains("bad_line"))
            .map(str::to_string)
    };
    assert!(
        said("history").is_some(),
        "{:?}",
        text(&run(&["history", bad]).stderr)
    );
    assert_eq!(said("history"), said("status"));
    // --max-line-bytes after the subcommand: every line is longer than 10 bytes.
    let clean = fixture("native-clean");
    let clean = clean.to_str().unwrap();
    let out = run(&["check", clean, "--json", "--max-line-bytes", "10"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stats"]["events"], 0, "{v}");
    assert_eq!(out.status.code(), Some(1));
    // Each reader names the flag that moves the cap.
    for cmd in [&["status"][..], &["history"], &["export", "prometheus"]] {
        let out = run(&[cmd, &[clean, "--max-line-bytes", "10"]].concat());
        let err = text(&out.stderr);
        assert!(
            err.contains("exceeds the line size cap (--max-line-bytes)"),
            "{cmd:?}: {err}"
        );
    }
    // --threads after the subcommand.
    for cmd in ["replay", "stagnation", "postmortem", "check"] {
        let out = run(&[cmd, clean, "--threads", "2"]);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", text(&out.stderr));
    }
}

#[test]
fn numeric_flags_refuse_bad_values_with_a_usage_error() {
    let healthy = fixture("healthy-native");
    let healthy = healthy.to_str().unwrap();
    let loop_file = repo().join("examples/fix-the-tests/loop.json");
    let loop_file = loop_file.to_str().unwrap();
    // (command line before the flag, flag, bad values, a good value)
    let mut table: Vec<(Vec<&str>, &str, &[&str], &str)> = vec![
        (
            vec!["replay", healthy],
            "--threads",
            &["0", "-1", "x", "257", "99999"],
            "256",
        ),
        (
            vec!["replay", healthy],
            "--max-line-bytes",
            &["0", "-5", "1e3"],
            "4096",
        ),
        (vec!["list", healthy], "--threads", &["0"], "1"),
        (vec!["list", healthy], "--max-line-bytes", &["0"], "100000"),
        (
            vec!["tail", healthy, "--no-follow"],
            "--poll-ms",
            &["0"],
            "100",
        ),
        (
            vec!["tail", healthy, "--no-follow"],
            "--lines",
            &["-1", "x"],
            "0",
        ),
        (
            vec!["tail", healthy, "--no-follow"],
            "--iteration",
            &["-1", "x"],
            "2",
        ),
        (
            vec!["run", "--loop-file", loop_file],
            "--timeout",
            &["0", "0s", "x"],
            "",
        ),
        (
            vec!["run", "--loop-file", loop_file],
            "--retry-base",
            &["x", "-1s"],
            "",
        ),
        (
            vec!["run", "--loop-file", loop_file],
            "--max-retries",
            &["-1"],
            "",
        ),
        (vec!["resume", healthy], "--timeout", &["0"], ""),
        (vec!["stop", healthy], "--wait", &["-1", "x"], ""),
        // A zero interval made serve spin on the CPU; a bad value never starts the server.
        (vec!["serve", healthy], "--poll", &["0s", "0", "x"], ""),
        (vec!["serve", healthy], "--rescan", &["0s", "0", "x"], ""),
        (vec!["serve", healthy], "--max-loops", &["0", "-1", "x"], ""),
    ];
    // stagnation and postmortem share their detector settings.
    for cmd in ["stagnation", "postmortem"] {
        table.extend([
            (
                vec![cmd, healthy],
                "--min-delta",
                // A score delta: a gain above 1 can never happen on aif-loop's 0..1 scores.
                &["NaN", "nan", "inf", "-0.1", "x", "1.5", "2"][..],
                "0.05",
            ),
            (vec![cmd, healthy], "--limit", &["0", "-1"], "3"),
            (vec![cmd, healthy], "--repeat", &["0"], "2"),
            (vec![cmd, healthy], "--no-change", &["0"], "2"),
            (vec![cmd, healthy], "--window", &["0", "3"], "8"),
            (vec![cmd, healthy], "--turns", &["0"], "2"),
            (
                vec![cmd, healthy],
                "--stalled-after",
                &["0s", "0", "soon"],
                "5m",
            ),
        ]);
    }
    for (before, flag, bad, good) in &table {
        for v in *bad {
            let out = loopctl()
                .args(before)
                .arg(format!("{flag}={v}"))
                .output()
                .unwrap();
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{before:?} {flag} {v}: {err}");
            assert!(
                err.contains("invalid value") && err.contains(flag),
                "{before:?} {flag} {v}: {err}"
            );
            // Bounds said in words, not as Rust ranges.
            assert!(!err.contains(".."), "{before:?} {flag} {v}: {err}");
            assert!(out.stdout.is_empty(), "{before:?} {flag} {v}");
        }
        if !good.is_empty() {
            let out = loopctl()
                .args(before)
                .arg(format!("{flag}={good}"))
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{before:?} {flag} {good}: {}",
                text(&out.stderr)
            );
        }
    }
    for (args, says) in [
        (
            vec!["serve", healthy, "--max-loops", "0"],
            "0 is out of range: it must be at least 1",
        ),
        (
            vec!["replay", healthy, "--threads", "257"],
            "257 is out of range: it must be from 1 to 256",
        ),
        (
            vec!["stagnation", healthy, "--window", "3"],
            "3 is out of range: it must be at least 4",
        ),
        (
            vec!["replay", healthy, "--threads", "x"],
            "\"x\" is not a whole number (it must be from 1 to 256)",
        ),
        (
            vec!["tail", healthy, "-n", "-1"],
            "-1 is out of range: it must be at least 0",
        ),
        (
            vec!["serve", healthy, "--rescan", "-1s"],
            "-1s is out of range: a duration cannot be negative",
        ),
    ] {
        let err = text(&run(&args).stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // A window too short for the turns asked for is refused, naming both.
    let out = run(&["stagnation", healthy, "--window", "4", "--turns", "3"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--turns 3") && err.contains("--window of 4"),
        "{err}"
    );
}

#[test]
fn completions_name_every_subcommand_and_bash_accepts_them() {
    let subs = subcommands();
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = text(&out.stdout);
        for s in &subs {
            assert!(script.contains(s.as_str()), "{shell} completion lacks {s}");
        }
        for opt in ["--root", "--strict", "--json", "--min-delta"] {
            assert!(
                script.contains(opt.trim_start_matches('-')),
                "{shell}: {opt}"
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("loopctl.bash");
    std::fs::write(&script, run(&["completions", "bash"]).stdout).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(check.status.success(), "bash -n: {}", text(&check.stderr));
    // Sourced, it registers a completion for loopctl.
    let reg = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p loopctl",
            script.display()
        ))
        .output()
        .unwrap();
    assert!(
        text(&reg.stdout).contains("loopctl"),
        "{}",
        text(&reg.stderr)
    );
    let bad = run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}

fn has_man() -> bool {
    std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_man_page_renders_with_every_subcommand() {
    let out = run(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let page = text(&out.stdout);
    assert!(page.starts_with(".ie") || page.contains("\n.TH"), "{page}");
    assert!(page.contains(".TH loopctl 1"), "{page}");
    let subs = subcommands();
    for s in &subs {
        assert!(
            page.contains(&format!("loopctl\\-{s}")),
            "man page lacks {s}"
        );
    }
    assert!(page.contains("LOOPCTL_ROOT"));

    let dir = tempfile::tempdir().unwrap();
    let out = run(&["man", "--out", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let one = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert!(one(&dir.path().join("loopctl.1")).contains(".TH loopctl 1"));
    for s in &subs {
        let p = dir.path().join(format!("loopctl-{s}.1"));
        assert!(
            one(&p).contains(&format!(".TH loopctl-{s} 1")),
            "{}",
            p.display()
        );
    }
    if !has_man() {
        eprintln!("notice: man not installed; the pages are not rendered");
        return;
    }
    let rendered = std::process::Command::new("man")
        .env("MANWIDTH", "100")
        .args(["-E", "ascii", "-P", "cat", "-l"])
        .arg(dir.path().join("loopctl-stagnation.1"))
        .output()
        .unwrap();
    // Bold and underline come as overstrikes (c, backspace, c): keep the last of each.
    let mut r = String::new();
    for c in text(&rendered.stdout).chars() {
        if c == '\u{8}' {
            r.pop();
        } else {
            r.push(c);
        }
    }
    assert!(rendered.status.success(), "{}", text(&rendered.stderr));
    assert!(r.contains("--min-delta"), "{r}");
}

#[test]
fn check_keeps_its_findings_in_the_report_written_to_a_file() {
    for (name, n) in [("bad-middle", 5), ("seq-problems", 4)] {
        let tmp = tempfile::tempdir().unwrap();
        let report = tmp.path().join("report.txt");
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("loopctl"))
            .env("NO_COLOR", "1")
            .arg("check")
            .arg(fixture(name))
            .stdout(std::fs::File::create(&report).unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        let text = std::fs::read_to_string(&report).unwrap();
        assert!(!text.contains("see above"), "{text}");
        let lines: Vec<u64> = text
            .lines()
            .filter_map(|l| l.trim().split_once("history.jsonl:"))
            .filter_map(|(_, rest)| rest.split(':').next()?.parse().ok())
            .collect();
        assert_eq!(
            lines.len(),
            n,
            "{name}: every finding in the report: {text}"
        );
        assert!(lines.is_sorted(), "{name}: in log order: {lines:?}");
        // The verdict comes after them and counts them; nothing is left on stderr alone.
        let verdict = text.lines().last().unwrap();
        assert!(
            verdict.contains(&format!("not clean: {n} finding(s)")),
            "{text}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("byte"),
            "{name}"
        );
        // --json holds the same findings.
        let json = run(&["check", "--json", fixture(name).to_str().unwrap()]);
        let v: Value = serde_json::from_slice(&json.stdout).unwrap();
        let offsets: Vec<u64> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["line"].as_u64().unwrap())
            .collect();
        assert_eq!(offsets, lines, "{name}");
    }
}

#[test]
fn no_runs_is_said_the_same_way_by_list_and_status_with_exit_0() {
    let tmp = tempfile::tempdir().unwrap();
    let here = || {
        let mut c = loopctl();
        c.current_dir(tmp.path());
        c
    };
    // No .loopctl here at all: nothing was run here yet.
    for cmd in ["list", "status"] {
        let out = here().arg(cmd).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "no runs under .loopctl\n", "{cmd}");
    }
    assert_eq!(
        text(&here().args(["list", "--json"]).output().unwrap().stdout),
        "[]\n"
    );
    let v: Value =
        serde_json::from_slice(&here().args(["status", "--json"]).output().unwrap().stdout)
            .unwrap();
    assert_eq!(v["active"], Value::Null);
    // A named root that exists but holds no run.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for cmd in ["list", "status"] {
        let out = here().arg(cmd).arg("--root").arg(&empty).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{cmd}");
        assert!(text(&out.stdout).starts_with("no runs under "), "{cmd}");
    }
    // A named root that does not exist is an error naming it, however it is named.
    let missing = tmp.path().join("missing-root");
    for cmd in ["list", "status"] {
        let by_flag = here()
            .arg(cmd)
            .arg("--root")
            .arg(&missing)
            .output()
            .unwrap();
        let by_env = here()
            .arg(cmd)
            .env("LOOPCTL_ROOT", &missing)
            .output()
            .unwrap();
        for out in [by_flag, by_env] {
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
            assert!(
                err.contains("missing-root") && err.contains("does not exist"),
                "{cmd}: {err}"
            );
        }
    }
    let out = here().arg("list").arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_log_with_no_event_gets_the_same_answer_from_every_read_command() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = [
        ("empty", ""),
        ("blank", "\n\n  \n"),
        ("damaged", "not json\n{\"no_event\":1}\n"),
    ];
    for (name, content) in logs {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("history.jsonl"), content).unwrap();
        let log = dir.join("history.jsonl");
        let (d, l) = (dir.to_str().unwrap(), log.to_str().unwrap());
        let commands: &[&[&str]] = &[
            &["status", d],
            &["replay", d],
            &["replay", d, "--json"],
            &["history", d],
            &["history", d, "--json"],
            &["check", d],
            &["check", d, "--json"],
            &["recover", d],
            &["postmortem", d],
            &["postmortem", d, "--format", "md"],
            &["stagnation", d],
            &["stagnation", d, "--json"],
            &["list", l],
            &["list", l, "--json"],
        ];
        for args in commands {
            for strict in [false, true] {
                let mut c = loopctl();
                c.args(*args);
                if strict {
                    c.arg("--strict");
                }
                let out = c.output().unwrap();
                let all = text(&out.stdout) + &text(&out.stderr);
                assert_eq!(
                    out.status.code(),
                    Some(1),
                    "{name}: {args:?} strict={strict}: {all}"
                );
                assert!(
                    all.contains("the log holds no event"),
                    "{name}: {args:?}: {all}"
                );
            }
        }
        let v: Value = serde_json::from_slice(&run(&["check", d, "--json"]).stdout).unwrap();
        assert_eq!(
            (v["clean"].clone(), v["no_event"].clone()),
            (Value::Bool(false), Value::Bool(true))
        );
        assert!(
            !dir.join("run.json").exists(),
            "recover wrote nothing for {name}"
        );
    }
    // Over several logs, a stagnating run still decides the code.
    let empty = tmp.path().join("empty");
    let stuck = fixture("stagnating-native");
    let out = loopctl()
        .arg("stagnation")
        .arg(&empty)
        .arg(&stuck)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let out = loopctl()
        .arg("stagnation")
        .arg(&empty)
        .arg(fixture("healthy-native"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

/// A log with no event still gets JSON from every `--json` command (exit 1 and the note as
/// above): a document command prints its document (a `list` row and `status` say `empty`,
/// `recover` wrote nothing), a stream prints no line.
#[test]
fn every_json_command_prints_json_for_a_log_with_no_event() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, content, findings) in [
        ("empty", "", 0),
        ("blank", "\n\n  \n", 0),
        ("damaged", "not json\n{\"no_event\":1}\n", 2),
    ] {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let log = dir.join("history.jsonl");
        std::fs::write(&log, content).unwrap();
        let (d, l) = (dir.to_str().unwrap(), log.to_str().unwrap());
        let document = |args: &[&str]| -> Value {
            let out = run(args);
            assert_eq!(out.status.code(), Some(1), "{name}: {args:?}");
            serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{name}: {args:?}: {e}: {:?}", text(&out.stdout)))
        };
        for target in [d, l] {
            let rows = document(&["list", target, "--json"]);
            assert_eq!(rows.as_array().map(Vec::len), Some(1), "{name}: {rows}");
            let row = &rows[0];
            assert_eq!(
                (&row["run_id"], &row["status"], &row["events"]),
                (&Value::from(name), &Value::from("empty"), &Value::from(0)),
                "{name}: {row}"
            );
            assert_eq!(row["finding_count"], findings, "{name}: {row}");
            let table = text(&run(&["list", target]).stdout);
            assert!(table.contains("empty (no event)"), "{name}: {table}");
        }
        let status = document(&["status", d, "--json"]);
        assert_eq!(
            (&status["status"], &status["events"]),
            (&"empty".into(), &0.into())
        );
        let pm = document(&["postmortem", d, "--json"]);
        assert_eq!(pm["stop"]["status"], "empty", "{name}: {pm}");
        let pm = document(&["postmortem", d, "--format", "json"]);
        assert_eq!(pm["run_id"], name, "{name}: {pm}");
        let rec = document(&["recover", d, "--json"]);
        assert_eq!(
            (&rec["written"], &rec["state"]),
            (&false.into(), &Value::Null)
        );
        for args in [&["check", d, "--json"][..], &["stagnation", d, "--json"]] {
            document(args);
        }
        // Streams: one object a line, so none.
        for args in [&["replay", d, "--json"][..], &["history", d, "--json"]] {
            let out = run(args);
            assert_eq!(out.status.code(), Some(1), "{name}: {args:?}");
            assert_eq!(text(&out.stdout), "", "{name}: {args:?}");
        }
        assert!(!dir.join("run.json").exists(), "{name}: recover wrote");
    }
}

#[test]
fn an_error_names_the_log_once() {
    let log = "../../fixtures/merged-runs/history.jsonl";
    for cmd in [
        "check",
        "status",
        "replay",
        "postmortem",
        "history",
        "recover",
    ] {
        let out = loopctl()
            .args([cmd, log, "--run-id", "nosuch"])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert_eq!(
            err.matches("merged-runs/history.jsonl").count(),
            1,
            "{cmd}: {err}"
        );
        assert!(err.contains("no run \"nosuch\""), "{cmd}: {err}");
    }
}

/// Every command's help ends with examples (`--help` teaches), but the generators'.
#[test]
fn every_command_s_help_has_examples() {
    let no_examples = ["completions", "docs"];
    let mut cmds: Vec<Vec<String>> = subcommands()
        .into_iter()
        .filter(|c| !no_examples.contains(&c.as_str()) && c != "export")
        .map(|c| vec![c])
        .collect();
    for format in ["prometheus", "otel"] {
        cmds.push(vec!["export".into(), format.into()]);
    }
    for cmd in cmds {
        let args: Vec<&str> = cmd.iter().map(String::as_str).chain(["--help"]).collect();
        let help = text(&run(&args).stdout);
        assert!(
            help.contains("Example"),
            "{cmd:?} --help has no example:\n{help}"
        );
    }
}

/// Every command's help reads as prose: its description ends with a full stop, and no
/// sentence is broken mid-line (a short line going on in lower case on the next, as
/// "2 error (usage, missing⏎run, ..." did).
#[test]
fn every_command_s_help_has_whole_sentences() {
    let mut cmds: Vec<Vec<String>> = vec![vec![]];
    let mut slips = Vec::new();
    for c in subcommands() {
        if c == "export" {
            for format in ["prometheus", "otel", "parquet"] {
                cmds.push(vec![c.clone(), format.into()]);
            }
        }
        cmds.push(vec![c]);
    }
    for cmd in cmds {
        let args: Vec<&str> = cmd.iter().map(String::as_str).chain(["--help"]).collect();
        let out = run(&args);
        if !out.status.success() {
            continue; // A command built without (export parquet without analytics).
        }
        let help = text(&out.stdout);
        let about = help.split("\n\n").next().unwrap_or("").trim_end();
        if !about.ends_with('.') {
            slips.push(format!(
                "{cmd:?}: the description has no final full stop:\n{about}"
            ));
        }
        let lines: Vec<&str> = help.lines().collect();
        for w in lines.windows(2) {
            let (line, next) = (w[0], w[1]);
            let prose = |l: &str| !l.is_empty() && !l.starts_with(' ');
            let broken = prose(line)
                && prose(next)
                && line.len() < 50
                && !line.ends_with(['.', ':', ';'])
                && next.starts_with(|c: char| c.is_ascii_lowercase());
            if broken {
                slips.push(format!(
                    "{cmd:?}: a sentence broken mid-line:\n{line}\n{next}"
                ));
            }
        }
    }
    assert!(slips.is_empty(), "--help slips:\n{}", slips.join("\n\n"));
}

/// Output that cannot be written (a full disk: /dev/full) is an error, said after the
/// command (exit 2), never a silent exit 0 with the output lost; a reader that went away
/// (`| head -1`, a closed pipe) is not: the command ends quietly with its own code.
#[cfg(target_os = "linux")]
#[test]
fn a_failed_write_to_stdout_is_an_error_and_a_closed_pipe_is_not() {
    let clean = fixture("native-clean");
    let clean = clean.to_str().unwrap();
    for args in [
        &["list", clean][..],
        &["list", clean, "--json"],
        &["status", clean],
        &["history", clean, "--json"],
        &["replay", clean],
        &["check", clean],
        &["postmortem", clean],
        &["stagnation", clean],
        &["export", "prometheus", clean],
        &["completions", "bash"],
    ] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
        let out = run_to(args, full.unwrap());
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("writing to stdout: No space left on device"),
            "{args:?}: {err}"
        );
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = run_to(args, writer);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("error"), "{args:?}: {err}");
    }
}
