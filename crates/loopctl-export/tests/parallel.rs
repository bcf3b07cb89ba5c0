//! The start-up replay folds every log alone on the fold driver's threads (a large log split
//! by run) and merges the folds: it must print exactly what one sequential pass prints, label
//! caps included.

use std::io::Write;
use std::path::{Path, PathBuf};

use loopctl_export::Options;
use loopctl_export::textfile::{LogRef, logs, maybe_logs, render, replay_sequential, replay_with};
use loopctl_store::read::ReadOptions;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Every fixture run folder (not `agents/`, which holds no run).
fn fixture_logs() -> Vec<LogRef> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("history.jsonl").is_file())
        .collect();
    paths.sort();
    logs(&paths).unwrap()
}

fn read(threads: usize) -> ReadOptions {
    ReadOptions {
        max_line: 1 << 20,
        threads,
        ..ReadOptions::default()
    }
}

/// (text, notices, damaged lines as "log:offset:reason") of a replay.
type Printed = (String, Vec<String>, Vec<String>);

fn parallel(logs: &[LogRef], options: &Options, threads: usize) -> Printed {
    let mut damaged = Vec::new();
    let mut m = replay_with(logs, options.clone(), &read(threads), &mut |l, d| {
        damaged.push(format!("{}:{}:{}", l.log.display(), d.offset, d.reason))
    })
    .unwrap();
    let notices = m.take_notices();
    (render(m).unwrap(), notices, damaged)
}

fn sequential(logs: &[LogRef], options: &Options) -> Printed {
    let mut damaged = Vec::new();
    let mut m = replay_sequential(logs, options.clone(), 1 << 20, &mut |l, d| {
        damaged.push(format!("{}:{}:{}", l.log.display(), d.offset, d.reason))
    })
    .unwrap();
    let notices = m.take_notices();
    (render(m).unwrap(), notices, damaged)
}

#[test]
fn folding_the_fixtures_on_threads_prints_what_one_sequential_pass_prints() {
    let logs = fixture_logs();
    let options = Options::default();
    let one = sequential(&logs, &options);
    assert!(one.0.contains("loopctl_runs_started_total"), "{}", one.0);
    assert!(!one.2.is_empty(), "the fixtures have damaged lines");
    for threads in [1, 2, 4] {
        assert_eq!(parallel(&logs, &options, threads), one, "{threads} threads");
    }
}

#[test]
fn where_the_label_caps_bind_the_merge_still_agrees_with_a_sequential_pass() {
    let logs = fixture_logs();
    for (max_loops, max_phases) in [(1, 50), (3, 1), (200, 1), (2, 2)] {
        let options = Options {
            max_loops,
            max_phases,
            ..Options::default()
        };
        let one = sequential(&logs, &options);
        assert!(!one.1.is_empty(), "caps {max_loops}/{max_phases} bind");
        assert_eq!(
            parallel(&logs, &options, 2),
            one,
            "caps {max_loops}/{max_phases}"
        );
    }
}

/// A merged log large enough for the driver to split by run (8 MiB and more): the fixture
/// runs copied many times over under new run ids, interleaved, with a damaged line and a torn
/// tail.
#[test]
fn a_large_merged_log_split_by_run_prints_what_one_sequential_pass_prints() {
    let mut sources: Vec<Vec<Value>> = Vec::new();
    for name in [
        "healthy-native",
        "stagnating-native",
        "merged-runs",
        "failed-run",
    ] {
        let text = std::fs::read_to_string(fixtures().join(name).join("history.jsonl")).unwrap();
        sources.push(
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("merged.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut written = 0usize;
    let mut copy = 0usize;
    while written < (9 << 20) {
        // Eight copies interleaved line by line.
        let batch: Vec<Vec<String>> = (0..8)
            .map(|k| {
                let src = &sources[(copy + k) % sources.len()];
                src.iter()
                    .map(|ev| {
                        let mut ev = ev.clone();
                        if let Some(id) = ev.get("run_id").and_then(Value::as_str) {
                            ev["run_id"] = Value::from(format!("{id}-{}", copy + k));
                        }
                        ev.to_string()
                    })
                    .collect()
            })
            .collect();
        copy += 8;
        let longest = batch.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            for lines in &batch {
                if let Some(l) = lines.get(i) {
                    writeln!(out, "{l}").unwrap();
                    written += l.len() + 1;
                }
            }
        }
        if copy == 64 {
            writeln!(out, "not json at all").unwrap();
        }
    }
    write!(out, r#"{{"v":1,"seq":9,"run_id":"torn","event":"phase_sta"#).unwrap();
    drop(out);
    let logs = logs(&[path]).unwrap();
    let options = Options::default();
    let one = sequential(&logs, &options);
    assert_eq!(one.2.len(), 2, "{:?}", one.2);
    assert_eq!(parallel(&logs, &options, 2), one);
}

/// `maybe_logs` takes a root's subfolders without looking inside: those that hold no log (none,
/// a folder, a fifo) fold to nothing, a dangling link to what `logs` makes of it, without
/// blocking on the fifo, and the replay prints what `logs`' (looked-at) list prints, on one
/// thread or two.
#[test]
fn subfolders_taken_unlooked_at_print_what_the_run_folders_print() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for log in fixture_logs().iter().take(6) {
        let dir = root.join(&log.name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&log.log, dir.join("history.jsonl")).unwrap();
    }
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::create_dir_all(root.join("folder/history.jsonl")).unwrap();
    std::fs::create_dir_all(root.join("fifo")).unwrap();
    std::fs::create_dir_all(root.join("dangling")).unwrap();
    std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling/history.jsonl")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("fifo/history.jsonl"))
        .status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    std::fs::write(root.join("notes.txt"), "not a run\n").unwrap();

    // Names whose byte order is not their order as text and paths (`a-b` < `a/…`), and one
    // that is not UTF-8: both lists must come in the logs' path order.
    use std::os::unix::ffi::OsStrExt;
    let odd = [
        std::ffi::OsStr::new("a-b"),
        std::ffi::OsStr::new("a"),
        std::ffi::OsStr::new("a.b"),
        std::ffi::OsStr::from_bytes(b"a\xff"),
        std::ffi::OsStr::new("a\u{ffff}"),
    ];
    let some_log = &fixture_logs()[0].log;
    for name in odd {
        std::fs::create_dir_all(root.join(name)).unwrap();
        std::fs::copy(some_log, root.join(name).join("history.jsonl")).unwrap();
    }
    let roots = [root.to_path_buf()];
    let checked = logs(&roots).unwrap();
    let unchecked = maybe_logs(&roots).unwrap();
    // The dangling link is a log that cannot be read (listed, as `list` lists it).
    assert_eq!(checked.len(), 12);
    assert_eq!(unchecked.len(), 15, "{unchecked:?}");
    let real: Vec<LogRef> = unchecked
        .iter()
        .filter(|l| l.log.is_file() || l.log.is_symlink())
        .cloned()
        .collect();
    assert_eq!(real, checked, "the same logs in the same order");
    let options = Options::default();
    for threads in [1, 2] {
        let (tx, rx) = std::sync::mpsc::channel();
        let (o, u) = (options.clone(), unchecked.clone());
        std::thread::spawn(move || tx.send(parallel(&u, &o, threads)));
        let printed = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the replay finished (a fifo did not block it)");
        assert_eq!(
            printed,
            parallel(&checked, &options, threads),
            "{threads} threads"
        );
    }
}
