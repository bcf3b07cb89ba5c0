//! The read commands agree with each other: `--strict` and findings, how a damaged line or a
//! repeated seq is said and shown, a missing default root, and numbers on the command line.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use loopctl_tests::repo;

fn loopctl() -> Command {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    c.env_remove("LOOPCTL_ROOT").env("NO_COLOR", "1");
    c
}

fn fixture(name: &str) -> PathBuf {
    repo().join("fixtures").join(name)
}

/// (exit code, stdout, stderr) of `loopctl args`.
fn run(args: &[&str]) -> (i32, String, String) {
    let out = loopctl().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The read commands over several logs, and `tail`, honour `--strict` as the others do: the
/// output printed, each finding said as `file:line: byte N: kind: reason`, then exit 1.
#[test]
fn strict_makes_every_read_command_exit_1_after_its_output() {
    let tmp = tempfile::tempdir().unwrap();
    // One finding each fixture has, as `check` names it.
    let cases = [
        ("bad-middle", ":2: byte 167: bad_line: not valid JSON"),
        (
            "seq-problems",
            ":5: byte 503: seq_duplicate: seq 5 repeats the previous event's",
        ),
    ];
    for (name, finding) in cases {
        let dir = fixture(name);
        let log = dir.join("history.jsonl");
        let want = format!("{}{finding}", log.display());
        let lake = tmp.path().join(name);
        let mut commands: Vec<Vec<&str>> = vec![vec!["tail", s(&dir), "--no-follow"]];
        if cfg!(feature = "analytics") {
            commands.extend([
                vec!["aggregate", s(&dir)],
                vec!["query", "select count(*) as n from runs", s(&dir)],
                vec!["export", "parquet", s(&dir), "--out", s(&lake)],
            ]);
        }
        for args in commands {
            let (code, out, err) = run(&args);
            assert_eq!(code, 0, "{args:?}: {err}");
            assert!(err.contains(&want), "{args:?}: {err}");
            let strict: Vec<&str> = ["--strict"].into_iter().chain(args.clone()).collect();
            let (code, strict_out, err) = run(&strict);
            assert_eq!(code, 1, "{strict:?}: {err}");
            assert!(err.contains(&want), "{strict:?}: {err}");
            assert!(err.contains("(--strict)"), "{strict:?}: {err}");
            assert!(!strict_out.is_empty(), "{strict:?}: nothing printed");
            // The same output, findings or not (export names what it wrote the first time).
            if args[0] != "export" {
                assert_eq!(strict_out, out, "{args:?}");
            }
        }
    }
}

/// A copy of healthy-native whose line 12 is written twice (`sed -i 12p`): its folder, the
/// lines of the original, and the finding every reader reports for line 13.
fn repeated_seq() -> (tempfile::TempDir, PathBuf, Vec<String>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    let log = dir.join("history.jsonl");
    let text = std::fs::read_to_string(fixture("healthy-native/history.jsonl")).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut copy: String = lines[..12].iter().map(|l| format!("{l}\n")).collect();
    let offset = copy.len();
    copy += &format!("{}\n", lines[11]);
    copy += &lines[12..]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    std::fs::write(&log, &copy).unwrap();
    let dup = format!(
        "{}:13: byte {offset}: seq_duplicate: seq 12 repeats the previous event's",
        log.display()
    );
    (tmp, dir, lines, dup)
}

/// `tail -n N` from the end prints the last N events `history` prints and says their findings
/// as history says them (with line numbers): a repeated seq is not counted, a reorder is
/// judged against the run's seqs from the start of the log.
#[test]
fn tail_n_prints_the_last_n_events_of_history_with_its_findings() {
    let tmp = tempfile::tempdir().unwrap();
    let ev = |seq: u64| {
        format!(
            r#"{{"v":1,"seq":{seq},"ts":"2026-03-01T09:00:{seq:02}.000Z","run_id":"h-20260301-090000","event":"note"}}"#
        )
    };
    let logs = [
        vec![ev(1), ev(2), ev(3), ev(3)],
        vec![ev(1), ev(2), ev(3), ev(10), ev(4), ev(5), ev(5), ev(1)],
    ];
    for (i, lines) in logs.iter().enumerate() {
        let log = tmp.path().join(format!("{i}.jsonl"));
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
        let (_, history, history_err) = run(&["history", s(&log), "--json"]);
        let history: Vec<&str> = history.lines().collect();
        for n in 0..=history.len() + 1 {
            let (code, out, err) = run(&[
                "tail",
                s(&log),
                "--no-follow",
                "--json",
                "-n",
                &n.to_string(),
            ]);
            assert_eq!(code, 0, "{err}");
            let want = &history[history.len().saturating_sub(n)..];
            assert_eq!(out.lines().collect::<Vec<_>>(), want, "{i}: -n {n}");
            for finding in err.lines() {
                assert!(
                    history_err.contains(finding),
                    "{i}: -n {n}: {finding}\n{history_err}"
                );
            }
        }
    }
}

/// The seqs of NDJSON events.
fn seqs(ndjson: &str) -> Vec<u64> {
    ndjson
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// `tail --no-follow` checks seqs as replay does: a line repeating its run's last seq is
/// reported and not printed (replay does not apply it), in every format; a torn last line is
/// reported as a torn tail. Started mid-file (`-n`), a run's first event seen is no gap.
#[test]
fn tail_reports_a_repeated_seq_and_a_torn_tail_and_skips_the_repeat() {
    let (_tmp, dir, lines, dup) = repeated_seq();
    for format in [&["--json"][..], &["--raw"], &[]] {
        let mut args = vec!["tail", s(&dir), "--no-follow", "-n", "100"];
        args.extend(format);
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(err.contains(&dup), "{args:?}: {err}");
        if !format.is_empty() {
            // One line per event (the human format adds iteration headers).
            assert_eq!(out.lines().count(), lines.len(), "{args:?}: {out}");
        }
        if format == ["--json"] {
            assert_eq!(seqs(&out), (1..=lines.len() as u64).collect::<Vec<_>>());
        }
        let strict: Vec<&str> = ["--strict"].into_iter().chain(args.clone()).collect();
        assert_eq!(run(&strict).0, 1, "{strict:?}");
    }
    // Mid-file: the part before the window is read for the seqs, not reported.
    let (code, _, err) = run(&[
        "--strict",
        "tail",
        s(&dir),
        "--no-follow",
        "-n",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    // A torn last line, said as `check` says it.
    let torn = fixture("torn-tail");
    let (code, _, err) = run(&["tail", s(&torn), "--no-follow", "--json"]);
    assert_eq!(code, 0, "{err}");
    let want = format!(
        "{}:5: byte 738: torn_tail: not valid JSON",
        torn.join("history.jsonl").display()
    );
    assert!(err.contains(&want), "{err}");
    assert_eq!(run(&["--strict", "tail", s(&torn), "--no-follow"]).0, 1);
    // A complete last line without its newline is an event, as replay takes it.
    let (code, out, err) = run(&[
        "--strict",
        "tail",
        s(&fixture("unterminated-valid")),
        "--no-follow",
        "--json",
        "-n",
        "100",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines = std::fs::read_to_string(fixture("unterminated-valid/history.jsonl")).unwrap();
    assert_eq!(out.lines().count(), lines.lines().count(), "{out}");
}

/// `history` shows a repeated seq as `tail` does: reported, not printed, in every format, so
/// an NDJSON consumer does not count the event twice.
#[test]
fn history_skips_a_repeated_seq_as_replay_does() {
    let (_tmp, dir, lines, dup) = repeated_seq();
    for format in [&["--json"][..], &["--raw"], &[]] {
        let mut args = vec!["history", s(&dir)];
        args.extend(format);
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(err.contains(&dup), "{args:?}: {err}");
        if !format.is_empty() {
            assert_eq!(out.lines().count(), lines.len(), "{args:?}: {out}");
        }
        if format == ["--json"] {
            assert_eq!(seqs(&out), (1..=lines.len() as u64).collect::<Vec<_>>());
        }
    }
}

/// `aggregate --by` over runs: columns (and so --json's keys) in the order
/// docs/analytics.md lists them, `success_rate` right after `passed`.
#[cfg(feature = "analytics")]
#[test]
fn aggregate_by_loop_columns_follow_the_documented_order() {
    let (code, out, err) = run(&[
        "aggregate",
        "--by",
        "loop",
        "--json",
        s(&fixture("healthy-native")),
    ]);
    assert_eq!(code, 0, "{err}");
    let keys = [
        "loop",
        "runs",
        "ended",
        "passed",
        "success_rate",
        "iterations_mean",
        "duration_p50_ms",
        "duration_p95_ms",
        "input_tokens",
        "output_tokens",
        "cost_usd",
    ];
    let at: Vec<usize> = keys
        .iter()
        .map(|k| {
            out.find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k}: {out}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{out}");
    let (_, csv, _) = run(&[
        "aggregate",
        "--by",
        "loop",
        "--format",
        "csv",
        s(&fixture("healthy-native")),
    ]);
    assert_eq!(csv.lines().next(), Some(keys.join(",").as_str()), "{csv}");
}

/// A line holding a NUL byte gets one reason from every reader (docs/events.md §6).
#[test]
fn every_reader_names_a_nul_byte() {
    let dir = fixture("bad-middle");
    let want = format!(
        "{}:6: byte 691: bad_line: NUL byte at byte 97 of the line (not valid JSON: control character in string at byte 97)",
        dir.join("history.jsonl").display()
    );
    for args in [
        vec!["check", s(&dir)],
        vec!["history", s(&dir)],
        vec!["tail", s(&dir), "--no-follow"],
        vec!["status", s(&dir)],
    ] {
        let (_, out, err) = run(&args);
        assert!(
            out.contains(&want) || err.contains(&want),
            "{args:?}: {out}{err}"
        );
    }
}

/// In a folder where nothing was run, every command over the root answers as over an empty
/// root: `no runs under .loopctl`, nothing shown, exit 0 (`--strict` too). A root the user
/// names must exist: exit 2, naming it.
#[test]
fn a_missing_default_root_holds_no_run_for_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let lake = tmp.path().join("lake");
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["list"],
        vec!["status"],
        vec!["stagnation"],
        vec!["export", "prometheus"],
        // Nothing to send: no connection is tried.
        vec!["export", "otel", "--endpoint", "http://127.0.0.1:9"],
    ];
    if cfg!(feature = "analytics") {
        commands.extend([
            vec!["aggregate"],
            vec!["query", "select count(*) as n from runs"],
            vec!["export", "parquet", "--out", s(&lake)],
        ]);
    }
    for args in &commands {
        for strict in [false, true] {
            let out = loopctl()
                .current_dir(tmp.path())
                .args(strict.then_some("--strict"))
                .args(args)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
            assert!(text.contains("no runs under .loopctl"), "{args:?}: {text}");
            assert!(!text.contains("cannot read"), "{args:?}: {text}");
        }
        let out = loopctl()
            .current_dir(tmp.path())
            .args(["--root", "nope"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} --root nope: {err}");
        assert!(err.contains("no root folder nope"), "{args:?}: {err}");
    }
    assert!(!tmp.path().join(".loopctl").exists());
}

/// A newline, a carriage return or a terminal escape in a run id, a phase, a step, a rule or a
/// stop reason is shown escaped in human output (`\n`, `\u001b`), so each row stays one line;
/// `--json` keeps the text exact.
#[test]
fn control_characters_in_names_are_escaped_in_human_output() {
    let tmp = tempfile::tempdir().unwrap();
    let (run_id, shown) = ("evil\nrun\u{1b}[31mX", r"evil\nrun\u001b[31mX");
    let id = serde_json::to_string(run_id).unwrap();
    let log = [
        r#"{"v":1,"seq":1,"ts":"2026-03-01T09:00:01.000Z","run_id":ID,"event":"run_started","payload":{"max_iterations":3}}"#,
        r#"{"v":1,"seq":2,"ts":"2026-03-01T09:00:02.000Z","run_id":ID,"event":"phase_started","iteration":1,"phase":"ph\nase","step":"st\rep"}"#,
        r#"{"v":1,"seq":3,"ts":"2026-03-01T09:00:03.000Z","run_id":ID,"event":"evaluation_done","iteration":1,"phase":"ph\nase","step":"st\rep","payload":{"score":0.5,"passed":false,"failed":["r\n1"]}}"#,
        r#"{"v":1,"seq":4,"ts":"2026-03-01T09:00:04.000Z","run_id":ID,"event":"custom\nevent","iteration":1}"#,
        r#"{"v":1,"seq":5,"ts":"2026-03-01T09:00:05.000Z","run_id":ID,"event":"stopped","payload":{"reason":"user\nstop"}}"#,
        r#"{"v":1,"seq":1,"ts":"2026-03-01T09:00:01.000Z","run_id":"other","event":"run_started"}"#,
    ]
    .map(|l| l.replace("ID", &id) + "\n")
    .concat();
    let dir = tmp.path().join("r");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("history.jsonl"), log).unwrap();
    let one = ["--run-id", run_id];
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["list", s(&dir)],
        [vec!["status", s(&dir)], one.to_vec()].concat(),
        vec!["replay", s(&dir)],
        vec!["history", s(&dir)],
        vec!["tail", s(&dir), "--no-follow"],
        [vec!["postmortem", s(&dir)], one.to_vec()].concat(),
        [
            vec!["postmortem", s(&dir), "--format", "markdown"],
            one.to_vec(),
        ]
        .concat(),
        vec!["stagnation", s(&dir)],
        vec!["check", s(&dir)],
    ];
    if cfg!(feature = "analytics") {
        commands.push(vec!["query", "select run_id, phase from phases", s(&dir)]);
    }
    for args in commands {
        let (code, out, err) = run(&args);
        assert!(code < 2, "{args:?}: {err}");
        for bad in [
            "evil\n", "\r", "\u{1b}", "ph\nase", "r\n1", "custom\n", "user\n",
        ] {
            assert!(!out.contains(bad), "{args:?} shows {bad:?}:\n{out}");
            assert!(!err.contains(bad), "{args:?} says {bad:?}:\n{err}");
        }
        // Markdown keeps its rule: a line break in a cell is a space.
        let shown = if args.contains(&"markdown") {
            r"evil run\u001b[31mX"
        } else {
            shown
        };
        if args[0] != "check" {
            assert!(out.contains(shown), "{args:?}:\n{out}");
        }
    }
    // JSON is exact.
    let (_, out, _) = run(&[["status", s(&dir), "--json"].as_slice(), &one].concat());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["run_id"], run_id);
}

/// Two logs written on Windows (each starting with a byte order mark) joined with `cat`: the
/// mark before the second log's first line is dropped as the first one is, and that line is
/// read (no finding; its run keeps what it started with), by every reader.
#[test]
fn a_byte_order_mark_before_any_line_is_dropped() {
    let t = tempfile::tempdir().unwrap();
    let bom = "\u{feff}";
    let a = r#"{"ts":"2026-03-02T10:00:00Z","run_id":"a-1","event":"run_started","payload":{"max_iterations":3}}"#;
    let b = r#"{"ts":"2026-03-02T11:00:00Z","run_id":"b-1","event":"run_started","payload":{"max_iterations":4}}"#;
    let b_end = r#"{"ts":"2026-03-02T11:05:00Z","run_id":"b-1","event":"stopped","payload":{"reason":"threshold_reached"}}"#;
    let log = t.path().join("merged.jsonl");
    std::fs::write(&log, format!("{bom}{a}\n{bom}{b}\r\n{b_end}\n")).unwrap();
    let log = log.to_str().unwrap();

    let (code, out, err) = run(&["check", log]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run(&["list", log, "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let b = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "b-1")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        (&b["max_iterations"], &b["status"]),
        (&4.into(), &"completed".into()),
        "{b}"
    );
    let (code, out, _) = run(&["replay", log, "--run-id", "b-1", "--json"]);
    assert_eq!(code, 0);
    let state: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(state["max_iterations"], 4, "{state}");
}

/// A log under a root that cannot be read (a link to itself) is said and skipped by
/// `export prometheus` and `stagnation` over the root, as `list` and `serve` go on past it: the
/// other runs' output stays. Named itself, or under --strict, it is an error (exit 2), and
/// `export prometheus --strict` writes nothing.
#[test]
fn an_unreadable_log_under_a_root_is_skipped_with_a_warning() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir_all(root.join("good")).unwrap();
    std::fs::create_dir_all(root.join("loop")).unwrap();
    std::fs::copy(
        fixture("native-clean").join("history.jsonl"),
        root.join("good/history.jsonl"),
    )
    .unwrap();
    std::os::unix::fs::symlink("../loop/history.jsonl", root.join("loop/history.jsonl")).unwrap();
    let root = root.to_str().unwrap();
    let folder = format!("{root}/loop");

    let (code, out, err) = run(&["export", "prometheus", root]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("loop/history.jsonl") && err.contains("skipped"),
        "{err}"
    );
    assert!(
        out.contains("loopctl_runs_started_total{loop=\"native-clean\"} 1"),
        "{out}"
    );
    let (code, out, err) = run(&["--strict", "export", "prometheus", root]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");

    let (code, out, err) = run(&["stagnation", root]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("skipped"), "{err}");
    assert!(
        out.contains("native-clean-20260301-090000 healthy"),
        "{out}"
    );
    assert_eq!(run(&["--strict", "stagnation", root]).0, 2);

    for args in [
        &["export", "prometheus", &folder][..],
        &["stagnation", &folder],
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("symbolic link loop"), "{args:?}: {err}");
    }
}
