//! `export parquet` with the events streamed: the streamed `events` equal the table built in
//! memory (the oracle), the export's bytes depend on the logs only, a failed export leaves no
//! temporary file and replaces nothing, and the events held in memory stay bounded.

use std::path::{Path, PathBuf};

use loopctl_analytics::export::events_streamed;
use loopctl_analytics::{
    Collected, ExportOptions, Needs, Options, Tables, collect, export, logs_of,
};
use loopctl_store::read::ReadOptions;
use polars::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(paths: &[PathBuf], events: bool) -> Collected {
    let (logs, bad) = logs_of(paths);
    assert!(bad.is_empty(), "{bad:?}");
    let opts = Options {
        read: Default::default(),
        needs: if events {
            Needs::all()
        } else {
            Needs::runs_and_phases()
        },
        stagnation: Default::default(),
    };
    collect(&logs, &opts, |_, _| {}).unwrap()
}

fn options(threads: usize, batch_rows: usize) -> ExportOptions {
    ExportOptions {
        read: ReadOptions {
            threads,
            ..ReadOptions::default()
        },
        batch_rows,
        ..ExportOptions::default()
    }
}

/// A merged log of `runs` runs interleaved line by line over three days, with a damaged line,
/// an event of no run (the log's default run) and a repeated seq.
fn merged_log(dir: &Path, runs: usize, events_per_run: usize) -> PathBuf {
    let mut lines = Vec::new();
    for i in 0..events_per_run {
        for r in 0..runs {
            let day = 21 + (r % 3);
            let (h, m, s) = (i / 3600 % 24, i / 60 % 60, i % 60);
            let id = format!("loop{}-202611{day}-0000{r:02}", r % 4);
            let (event, payload) = match i {
                0 => ("run_started", r#"{"max_iterations":9}"#.to_string()),
                _ if i == events_per_run - 1 => {
                    ("stopped", r#"{"exit_reason":"budget"}"#.to_string())
                }
                _ if i % 2 == 1 => (
                    "phase_started",
                    r#"{"attempt":1,"kind":"loop"}"#.to_string(),
                ),
                _ => (
                    "phase_finished",
                    format!(r#"{{"attempt":1,"kind":"loop","duration_ms":{i},"exit_code":0}}"#),
                ),
            };
            lines.push(format!(
                r#"{{"v":1,"seq":{i},"ts":"2026-11-{day}T{h:02}:{m:02}:{s:02}.000Z","run_id":"{id}","event":"{event}","iteration":{},"step":"build","payload":{payload}}}"#,
                i / 2 + 1
            ));
        }
        if i == 3 {
            lines.push("{not json".to_string());
            lines.push(r#"{"v":1,"seq":1,"ts":"2026-11-22T00:00:09.000Z","event":"note","payload":{"text":"no run id"}}"#.to_string());
            lines.push(lines[lines.len() - 3].clone());
        }
    }
    let log = dir.join("merged.jsonl");
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    log
}

fn inputs(tmp: &Path) -> Vec<PathBuf> {
    vec![
        merged_log(tmp, 7, 40),
        repo().join("fixtures/healthy-native"),
        repo().join("fixtures/aif-drift"),
        repo().join("fixtures/avenor-loop"),
        repo().join("fixtures/merged-runs"),
        repo().join("fixtures/bad-middle"),
        repo().join("fixtures/crlf-bom"),
        repo().join("fixtures/torn-tail"),
        repo().join("fixtures/unknown-events"),
        repo().join("fixtures/seq-problems"),
    ]
}

fn assert_streamed_equals_table(paths: &[PathBuf]) {
    let want = Tables::of(&read(paths, true)).unwrap().events;
    assert!(want.height() > 0);
    let first = read(paths, false);
    // One row per event replay applies: a repeated seq is none.
    let applied: u64 = first.runs.iter().map(|r| r.events).sum();
    assert_eq!(want.height() as u64, applied);
    for batch_rows in [1, 7, 64 * 1024] {
        let got = events_streamed(&first, &options(2, batch_rows)).unwrap();
        assert!(
            got.equals_missing(&want),
            "batch {batch_rows}: streamed events differ:\n{got:?}\n{want:?}"
        );
    }
}

#[test]
fn the_streamed_events_equal_the_events_table() {
    let tmp = tempfile::tempdir().unwrap();
    assert_streamed_equals_table(&inputs(tmp.path()));
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn the_streamed_events_of_the_corpus_equal_the_events_table() {
    let Some(shared) = loopctl_tests::shared("the streamed events over the corpus") else {
        return;
    };
    assert_streamed_equals_table(&[
        shared.join("corpus/aif-loop"),
        shared.join("corpus/avenor/accumulate.ndjson"),
    ]);
}

/// Every file under `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every file under `dir` (relative to it), with its bytes.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files(dir)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p.strip_prefix(dir).unwrap().to_path_buf(), bytes)
        })
        .collect()
}

#[test]
fn the_same_logs_give_the_same_bytes_whatever_the_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let c = read(&inputs(tmp.path()), false);
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    // Small row groups, so that many are encoded at once and finish out of order.
    export(&c, &a, &options(1, 16), |_, _| {}).unwrap();
    export(&c, &b, &options(4, 16), |_, _| {}).unwrap();
    let (ta, tb) = (tree(&a), tree(&b));
    assert!(
        ta.len() > 6,
        "{:?}",
        ta.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
    assert_eq!(ta.len(), tb.len());
    for ((pa, ba), (pb, bb)) in ta.iter().zip(&tb) {
        assert_eq!(pa, pb);
        assert!(ba == bb, "{} differs between 1 and 4 threads", pa.display());
    }
}

#[test]
fn events_partitions_hold_row_groups_of_a_batch_in_file_order() {
    let tmp = tempfile::tempdir().unwrap();
    let c = read(&inputs(tmp.path()), false);
    let out = tmp.path().join("lake");
    let done = export(&c, &out, &options(2, 16), |_, _| {}).unwrap();
    let f = out.join("events/day=2026-11-21/part-0.parquet");
    let df = ParquetReader::new(std::fs::File::open(&f).unwrap())
        .finish()
        .unwrap();
    // File order: by source, then line.
    let lines: Vec<u64> = df
        .column("line")
        .unwrap()
        .u64()
        .unwrap()
        .into_no_null_iter()
        .collect();
    let merged = lines.len().min(
        df.column("source")
            .unwrap()
            .str()
            .unwrap()
            .iter()
            .take_while(|s| s.is_some_and(|s| s.ends_with("merged.jsonl")))
            .count(),
    );
    assert!(merged > 32);
    assert!(lines[..merged].windows(2).all(|w| w[0] < w[1]));
    let meta = ParquetReader::new(std::fs::File::open(&f).unwrap())
        .get_metadata()
        .unwrap()
        .clone();
    assert!(meta.row_groups.len() > 1);
    // As readable as any file written there (the umask applies), not owner-only.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let plain = tmp.path().join("plain");
        std::fs::write(&plain, b"").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&f), mode(&plain));
        assert_eq!(
            mode(&out.join("runs/day=2026-11-21/part-0.parquet")),
            mode(&plain)
        );
    }
    assert!(meta.row_groups.iter().all(|g| g.num_rows() <= 16));
    assert!(meta.row_groups.iter().any(|g| g.num_rows() == 16));
    assert!(done.events > 0);
}

#[test]
fn the_events_held_in_memory_stay_within_a_few_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let log = merged_log(tmp.path(), 12, 400);
    let c = read(&[log], false);
    let opts = options(2, 32);
    let mut seen = Vec::new();
    let done = export(&c, &tmp.path().join("lake"), &opts, |files, bytes| {
        seen.push((files, bytes))
    })
    .unwrap();
    // Progress through the log as batches go, ending at all of it.
    assert!(seen.len() > 10, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].1 <= w[1].1), "{seen:?}");
    assert_eq!(seen.last(), Some(&(1, c.bytes)));
    let bound = opts.max_events_held();
    assert!(done.events > 10 * bound as u64, "{} events", done.events);
    assert!(
        done.max_events_held <= bound,
        "{} events held at once, more than {bound}",
        done.max_events_held
    );
}

/// Every temporary file (`.part-0.*.tmp`) under `dir`.
fn temps(dir: &Path) -> Vec<PathBuf> {
    let mut out = files(dir);
    out.retain(|p| p.to_string_lossy().ends_with(".tmp"));
    out
}

#[test]
fn a_failed_export_leaves_no_temporary_file_and_replaces_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = inputs(tmp.path());
    let out = tmp.path().join("lake");
    // A first export, then one over more logs that fails at the events: `events/day=...`
    // cannot be made (a file sits where a day's folder goes).
    export(&read(&paths[1..], false), &out, &options(2, 16), |_, _| {}).unwrap();
    let before = tree(&out);
    let blocked = out.join("events/day=2026-11-21");
    assert!(!blocked.exists());
    std::fs::write(&blocked, b"not a folder").unwrap();
    let err = export(&read(&paths, false), &out, &options(2, 16), |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("day=2026-11-21"), "{err}");
    assert_eq!(temps(&out), Vec::<PathBuf>::new());
    std::fs::remove_file(&blocked).unwrap();
    assert!(tree(&out) == before, "a partition changed");
}
