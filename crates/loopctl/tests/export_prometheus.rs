//! `loopctl export prometheus` as a read command: its exit codes, its paths, its errors.
//! (serve.rs has what it shares with `serve`: the series.)

use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use serde_json::json;

mod common;
use common::logs::{append, event, root_with_alpha, value};

/// `export prometheus`'s exit codes follow the other read commands': a seq gap is a finding
/// (1 under --strict, the metrics written all the same), a FILE with no event is 1, a name
/// that is no path is looked up as a run id under --root, and an unknown one is 2. Errors
/// (a textfile that cannot be written, a port in use) say their cause once.
#[test]
fn export_exit_codes_count_every_finding_and_a_log_with_no_event_and_runs_go_by_id() {
    let tmp = tempfile::tempdir().unwrap();
    let run = "alpha-20260101-000000";
    let (root, alpha) = root_with_alpha(tmp.path(), run);
    append(
        &alpha.join("history.jsonl"),
        &event(3, run, "evaluation_done", json!({"score": 0.5})),
    );
    let empty = tmp.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let export = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(cargo_bin("loopctl"))
            .env("NO_COLOR", "1")
            .arg("--root")
            .arg(&root)
            .args(args)
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let started = r#"loopctl_runs_started_total{loop="alpha"}"#;
    let log = alpha.join("history.jsonl");
    let (code, out, _) = export(&["export".as_ref(), "prometheus".as_ref(), log.as_os_str()]);
    assert_eq!(code, Some(0));
    assert_eq!(value(&out, started), Some(1.0), "{out}");
    assert!(
        out.contains(r#"loopctl_log_findings_total{kind="seq_gap"} 1"#),
        "{out}"
    );

    let strict = [
        "--strict".as_ref(),
        "export".as_ref(),
        "prometheus".as_ref(),
    ];
    let (code, out, err) = export(&[&strict[..], &[log.as_os_str()]].concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("1 finding(s)"), "{err}");
    assert_eq!(
        value(&out, started),
        Some(1.0),
        "written all the same: {out}"
    );

    let (code, _, err) = export(&["export".as_ref(), "prometheus".as_ref(), empty.as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("the log holds no event"), "{err}");

    let (code, out, err) = export(&["export".as_ref(), "prometheus".as_ref(), run.as_ref()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(value(&out, started), Some(1.0), "{out}");
    let (code, _, err) = export(&["export".as_ref(), "prometheus".as_ref(), "nosuch".as_ref()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nosuch"), "{err}");

    // Seq findings are reported with their line, as `check` reports them.
    let seq = loopctl_tests::repo().join("fixtures/seq-problems");
    let (code, _, err) = export(&["export".as_ref(), "prometheus".as_ref(), seq.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("history.jsonl:6: byte 676: seq_reorder: seq 4 after seq 5"),
        "{err}"
    );

    // An error says its cause once.
    let nowhere = tmp.path().join("no/such/folder/loopctl.prom");
    let args = ["export", "prometheus", "--textfile"].map(std::ffi::OsStr::new);
    let (code, _, err) = export(&[&args[..], &[nowhere.as_os_str(), log.as_os_str()]].concat());
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.matches("no such folder").count(), 1, "{err}");
    assert!(
        err.contains("no/such/folder/loopctl.prom: no such folder"),
        "{err}"
    );
    // A folder in the textfile's way: refused, and no temporary file left beside it.
    let folder = tmp.path().join("in-the-way.prom");
    std::fs::create_dir(&folder).unwrap();
    let (code, _, err) = export(&[&args[..], &[folder.as_os_str(), log.as_os_str()]].concat());
    assert_eq!(code, Some(2), "{err}");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with(".in-the-way.prom."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A fifo (or a device) is not replaced by a file: refused, left as it is.
    let fifo = tmp.path().join("fifo.prom");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let (code, _, err) = export(&[&args[..], &[fifo.as_os_str(), log.as_os_str()]].concat());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    // Through a symbolic link, relative or dangling, the file it names is written; the link stays.
    let real = tmp.path().join("real.prom");
    std::fs::write(&real, "old\n").unwrap();
    let link = tmp.path().join("link.prom");
    std::os::unix::fs::symlink("real.prom", &link).unwrap();
    let (code, _, err) = export(&[&args[..], &[link.as_os_str(), log.as_os_str()]].concat());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&real)
            .unwrap()
            .contains("loopctl_runs")
    );
    let dangling = tmp.path().join("dangling.prom");
    std::os::unix::fs::symlink("made.prom", &dangling).unwrap();
    let (code, _, err) = export(&[&args[..], &[dangling.as_os_str(), log.as_os_str()]].concat());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        std::fs::read_to_string(tmp.path().join("made.prom"))
            .unwrap()
            .contains("loopctl_runs")
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let args = ["serve", "--listen", &addr].map(std::ffi::OsStr::new);
    let (code, _, err) = export(&[&args[..], &[log.as_os_str()]].concat());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert_eq!(err.matches("in use").count(), 1, "{err}");
}

/// Folded label values are named once each on stderr up to a bound, then a note says later ones
/// are not; docs/metrics.md and --help give that bound.
#[test]
fn folded_loops_are_named_up_to_the_bound_the_docs_give() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("many.jsonl");
    let text: String = (0..150)
        .map(|i| {
            event(
                1,
                &format!("loop{i}-20260101-000000"),
                "run_started",
                json!({}),
            )
        })
        .collect();
    std::fs::write(&log, text).unwrap();
    let out = Command::new(cargo_bin("loopctl"))
        .env("NO_COLOR", "1")
        .args(["export", "prometheus", "--max-loops", "1"])
        .arg(&log)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let named = err.matches("folded into \"other\":").count();
    assert!(named > 1 && named < 149, "{err}");
    assert!(err.contains("are not named"), "{err}");
    let doc = std::fs::read_to_string(loopctl_tests::repo().join("docs/metrics.md")).unwrap();
    let row = doc.lines().find(|l| l.starts_with("| `loop` |")).unwrap();
    assert!(row.contains(&format!("the first {named} ")), "{row}");
    let help = Command::new(cargo_bin("loopctl"))
        .args(["export", "prometheus", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).replace('\n', " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains(&format!("the first {named} ")), "{help}");
}

/// What a path that is no log is, said plainly: a fifo is there but is not a regular file,
/// and an empty name is named as such (not a blank between two spaces). Exit 2 each.
#[test]
fn a_fifo_and_an_empty_name_are_refused_saying_what_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("pipe.jsonl");
    let made = Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let run = |arg: &std::ffi::OsStr| {
        let out = Command::new(cargo_bin("loopctl"))
            .env("NO_COLOR", "1")
            .arg("--root")
            .arg(tmp.path())
            .args(["export", "prometheus"])
            .arg(arg)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(fifo.as_os_str());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("pipe.jsonl: not a regular file"), "{err}");
    let (code, err) = run("".as_ref());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(r#"no file or folder "" either"#), "{err}");
    assert!(!err.contains("  "), "{err}");
}

/// One log named twice, spelt otherwise (a relative and an absolute path, a root and a link to
/// it), is one log: its run counted once.
#[test]
fn a_log_named_twice_under_other_spellings_is_counted_once() {
    let tmp = tempfile::tempdir().unwrap();
    let run = "alpha-20260101-000000";
    let (root, alpha) = root_with_alpha(tmp.path(), run);
    let link = tmp.path().join("link-to-root");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    let rel = alpha.strip_prefix(tmp.path()).unwrap();
    for paths in [
        vec![rel.to_path_buf(), alpha.clone()],
        vec![Path::new(".").join(rel), rel.to_path_buf()],
        vec![root.clone(), link.clone()],
    ] {
        let out = Command::new(cargo_bin("loopctl"))
            .env("NO_COLOR", "1")
            .current_dir(tmp.path())
            .args(["export", "prometheus"])
            .args(&paths)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{paths:?}");
        let started = text
            .lines()
            .find(|l| l.starts_with("loopctl_runs_started_total{"))
            .unwrap_or_default();
        assert!(started.ends_with(" 1"), "{paths:?}: {started}");
    }
}
