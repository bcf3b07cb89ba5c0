use super::*;
use loopctl_core::Replay;
use loopctl_core::decode::lines::DEFAULT_MAX_LINE;
use loopctl_core::fold::trace::Traces;
use proptest::prelude::*;

fn same(a: &Outcome, b: &Outcome) -> bool {
    a.runs == b.runs && a.findings == b.findings && a.stats == b.stats
}

/// Lines of every kind the reader must place exactly: events of several runs and dialects,
/// seq problems, damaged, blank, CRLF, non-UTF-8, long and unterminated lines.
pub(crate) fn line(kind: u8, run: u8, seq: u32) -> Vec<u8> {
    let ev = format!(
        r#"{{"ts":"2026-02-18T12:00:{:02}.000Z","run_id":"r{run}-20260218-120000","seq":{seq},"iteration":{},"event":"evaluation_done","payload":{{"score":0.{:02},"failed_rules":["r1"]}}}}"#,
        seq % 60,
        seq / 8,
        seq % 100
    );
    match kind % 12 {
        0 => b"".to_vec(),
        1 => b"   \r".to_vec(),
        2 => format!("{ev}\r").into_bytes(),
        3 => ev.as_bytes()[..ev.len() / 2].to_vec(),
        4 => b"{\"event\":\"x\",\"v\":1,\"pad\":\"\xff\"}".to_vec(),
        5 => format!(r#"{{"event":"tool.call","session_id":"s{run}","n":{seq}}}"#).into_bytes(),
        6 => format!(
            r#"{{"event":"run_started","pad":"{}","run_id":"r{run}"}}"#,
            "x".repeat(300)
        )
        .into_bytes(),
        7 => {
            format!(r#"{{"v":1,"event":"stopped","seq":{seq},"payload":{{"reason":"user_stop"}}}}"#)
                .into_bytes()
        }
        // `run_id` twice: the event is the last one's run, the fast run key reads the first.
        8 => format!(
            r#"{},"run_id":"r{}-20260218-120000"}}"#,
            &ev[..ev.len() - 1],
            (run + 1) % 5
        )
        .into_bytes(),
        _ => ev.into_bytes(),
    }
}

/// What the projections give, in a form to compare.
fn folded(p: (Replay, Traces)) -> (String, String) {
    let (replay, traces) = p;
    let o = replay.finish();
    let replay = format!("{:?}\n{:?}\n{:?}", o.runs, o.findings, o.stats);
    (replay, format!("{:?}", traces.into_runs()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn the_chunk_parallel_fold_is_the_sequential_fold(
        lines in prop::collection::vec((any::<u8>(), 0u8..5, 0u8..40), 1..400),
        tail in any::<bool>(),
        chunk in 1u64..3000,
        threads in 2usize..4,
        max_line in prop::sample::select(vec![100usize, 250, 400, DEFAULT_MAX_LINE]),
    ) {
        let mut bytes = Vec::new();
        for &(k, r, s) in &lines {
            // Now and then a byte order mark before a line (logs joined with `cat`).
            if k % 29 == 7 {
                bytes.extend_from_slice(b"\xEF\xBB\xBF");
            }
            bytes.extend(line(k, r, u32::from(s)));
            bytes.push(b'\n');
        }
        if tail {
            bytes.extend_from_slice(br#"{"run_id":"r1-20260218-120000","event":"sto"#);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        std::fs::write(&path, &bytes).unwrap();
        let opts = ReadOptions { max_line, threads: 1, default_run: "folder".into(), states: true, regular_only: false };
        let fresh = || (Replay::new("folder"), Traces::new("folder"));
        let one = folded(fold_file(&path, &opts, fresh()).unwrap());
        let many = folded(fold_parallel(&path, Start::default(), &opts, fresh(), threads, chunk).unwrap());
        prop_assert_eq!(&one.0, &many.0, "replay, chunk {} threads {}", chunk, threads);
        prop_assert_eq!(&one.1, &many.1, "traces, chunk {} threads {}", chunk, threads);
        // The fold's replay is the one-pass replay's, and its traces those of the events
        // one by one.
        let mut replayed = Replay::new("folder");
        loopctl_core::fold::fold_bytes(&mut replayed, &bytes, max_line);
        let replayed = replayed.finish();
        let o = (
            format!("{:?}\n{:?}\n{:?}", replayed.runs, replayed.findings, replayed.stats),
            format!("{:?}", loopctl_core::fold::trace::traces_from_bytes("folder", &bytes)),
        );
        prop_assert_eq!(&one.0, &o.0);
        if max_line == DEFAULT_MAX_LINE {
            prop_assert_eq!(&one.1, &o.1);
        }
    }
}

/// Five run folders of 10, 11, ... 14 events.
fn five_runs(dir: &Path) -> Vec<RunRef> {
    let mut runs = Vec::new();
    for r in 0..5u8 {
        let folder = dir.join(format!("run{r}"));
        std::fs::create_dir(&folder).unwrap();
        let mut bytes = Vec::new();
        for seq in 0..(10 + u32::from(r)) {
            bytes.extend(line(9, r, seq));
            bytes.push(b'\n');
        }
        std::fs::write(folder.join("history.jsonl"), &bytes).unwrap();
        runs.push(RunRef::file(&folder.join("history.jsonl")));
    }
    runs
}

#[test]
fn batched_folds_come_in_order_a_batch_at_a_time_and_stop_when_told() {
    let dir = tempfile::tempdir().unwrap();
    let runs = five_runs(dir.path());
    for threads in [1, 3] {
        let opts = ReadOptions {
            threads,
            ..ReadOptions::default()
        };
        let mut seen = Vec::new();
        fold_runs_batched(
            &runs,
            2,
            &opts,
            |r| Replay::new(&r.name),
            |start, folds| {
                let events: Vec<u64> = folds
                    .into_iter()
                    .flat_map(|f| f.unwrap().finish().runs.into_values().map(|s| s.events))
                    .collect();
                seen.push((start, events));
                true
            },
        );
        assert_eq!(
            seen,
            [(0, vec![10, 11]), (2, vec![12, 13]), (4, vec![14])],
            "{threads} threads"
        );
        let mut batches = 0;
        fold_runs_batched(
            &runs,
            2,
            &opts,
            |r| Replay::new(&r.name),
            |_, _| {
                batches += 1;
                false
            },
        );
        assert_eq!(batches, 1, "{threads} threads");
    }
}

#[test]
fn fold_runs_gives_each_log_its_own_fold_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for r in 0..5u8 {
        let folder = dir.path().join(format!("run{r}"));
        std::fs::create_dir(&folder).unwrap();
        let mut bytes = Vec::new();
        for seq in 0..(10 + u32::from(r)) {
            bytes.extend(line(9, r, seq));
            bytes.push(b'\n');
        }
        std::fs::write(folder.join("history.jsonl"), &bytes).unwrap();
        runs.push(RunRef::file(&folder.join("history.jsonl")));
    }
    let opts = ReadOptions {
        threads: 3,
        ..ReadOptions::default()
    };
    let folded = fold_runs(&runs, &opts, |r| Replay::new(&r.name));
    for (r, f) in folded.into_iter().enumerate() {
        let o = f.unwrap().finish();
        let events: Vec<u64> = o.runs.values().map(|s| s.events).collect();
        assert_eq!(events, vec![10 + r as u64], "run {r}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn chunked_parallel_replay_is_the_sequential_replay(
        lines in prop::collection::vec((any::<u8>(), 0u8..5, 0u8..40), 1..400),
        bom in any::<bool>(),
        tail in any::<bool>(),
        chunk in 1u64..3000,
        threads in 2usize..4,
        max_line in prop::sample::select(vec![100usize, 250, 400, DEFAULT_MAX_LINE]),
    ) {
        let mut bytes = Vec::new();
        if bom {
            bytes.extend_from_slice(b"\xEF\xBB\xBF");
        }
        for &(k, r, s) in &lines {
            // Now and then a byte order mark before a line (logs joined with `cat`).
            if k % 29 == 7 {
                bytes.extend_from_slice(b"\xEF\xBB\xBF");
            }
            bytes.extend(line(k, r, u32::from(s)));
            bytes.push(b'\n');
        }
        if tail {
            bytes.extend_from_slice(br#"{"run_id":"r1-20260218-120000","event":"sto"#);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        std::fs::write(&path, &bytes).unwrap();
        let opts = ReadOptions { max_line, threads: 1, default_run: "folder".into(), states: true, regular_only: false };
        let one = replay(&path, &opts, None).unwrap();
        let many = fold_parallel(&path, Start::default(), &opts, Replay::new("folder"), threads, chunk).unwrap().finish();
        prop_assert!(same(&one, &many), "chunk {} threads {}", chunk, threads);
        // Counting only (`check` without a run.json) finds and counts exactly the same.
        let count = ReadOptions { states: false, ..opts.clone() };
        let brief = |o: &Outcome| -> Vec<(String, u64, Option<u64>)> {
            o.runs.iter().map(|(k, s)| (k.clone(), s.events, s.last_seq)).collect()
        };
        let tally = Tally::new(0).reading("folder", max_line);
        let chunked = fold_chunks_of(&path, &ReadOptions { threads, ..count.clone() }, tally, chunk).unwrap();
        let chunked = match chunked {
            Some(t) => t.finish(),
            // A line over the cap across a chunk end.
            None => replay(&path, &count, None).unwrap(),
        };
        for counted in [replay(&path, &count, None).unwrap(), chunked] {
            prop_assert_eq!(&counted.stats, &one.stats);
            prop_assert_eq!(&counted.findings, &one.findings);
            prop_assert_eq!(brief(&counted), brief(&one));
        }
        // `list`'s rows: exact in what a row shows (replayed when the chunks cannot say).
        let row = |states: Vec<&RunState>| -> Vec<String> {
            states.into_iter().map(|s| format!("{} {} {:?} {} {} {:?} {} {} {:?} {} {:?}",
                s.run_id, s.task_alias, s.status, s.stop.reason, s.iteration, s.max_iterations,
                s.phase, s.last_score, s.updated_at, s.events, s.last_seq)).collect()
        };
        let rows = rows_of(&path, &ReadOptions { threads, ..opts.clone() }, chunk).unwrap();
        prop_assert_eq!(&rows.stats, &one.stats);
        prop_assert_eq!(&rows.findings, &one.findings);
        prop_assert_eq!(row(rows.runs.iter().map(|s| &**s).collect()), row(one.runs.values().collect()));
    }
}

#[test]
fn a_resumed_run_continues_in_the_shard_given_its_lines() {
    let mut bytes = Vec::new();
    for seq in 0..300 {
        bytes.extend(line(9, 1, seq));
        bytes.push(b'\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let half = bytes.len() / 2;
    let cut = half + bytes[half..].iter().position(|&b| b == b'\n').unwrap() + 1;
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let opts = ReadOptions {
        threads: 1,
        ..ReadOptions::default()
    };
    let first = replay(&path, &opts, None).unwrap();
    let snapshot = first.runs.values().next().unwrap().clone();
    std::fs::write(&path, &bytes).unwrap();
    let whole = replay(&path, &opts, None).unwrap();
    for threads in 2..5 {
        let mut r = Replay::new(&opts.default_run);
        r.resume(snapshot.clone());
        let resumed =
            fold_parallel(&path, Start::after(&snapshot), &opts, r, threads, 500).unwrap();
        assert_eq!(whole.runs, resumed.finish().runs, "{threads} threads");
    }
}

#[test]
fn fold_paths_folds_a_file_a_run_folder_and_a_root_with_their_damaged_lines() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let write = |folder: &Path, lines: &[u8]| {
        std::fs::create_dir_all(folder).unwrap();
        let log = folder.join("history.jsonl");
        std::fs::write(&log, lines).unwrap();
        log
    };
    let mut ok = Vec::new();
    for seq in 1..=3 {
        ok.extend(line(9, 1, seq));
        ok.push(b'\n');
    }
    let mut damaged = ok.clone();
    damaged.extend_from_slice(b"{not json\n");
    write(&root.join("a"), &ok);
    write(&root.join("b"), &damaged);
    let folder = dir.path().join("c");
    write(&folder, &ok);
    let file = dir.path().join("loose.jsonl");
    std::fs::write(&file, &damaged).unwrap();
    let paths = vec![
        file.clone(),
        folder.clone(),
        root.clone(),
        dir.path().join("gone"),
    ];
    let opts = ReadOptions {
        threads: 2,
        ..ReadOptions::default()
    };
    // A root that is not there is an error; the others are folded.
    assert!(fold_paths(&paths, &opts, |r| Replay::new(&r.name)).is_err());
    let folded = fold_paths(&paths[..3], &opts, |r| Replay::new(&r.name)).unwrap();
    let names: Vec<&str> = folded.iter().map(|f| f.run.name.as_str()).collect();
    assert_eq!(names, ["loose", "c", "a", "b"]);
    for f in folded {
        let (replay, damaged_lines) = f.result.unwrap();
        let o = replay.finish();
        assert_eq!(o.stats.events, 3, "{}", f.run.name);
        let damaged: Vec<(u64, u64)> = damaged_lines.iter().map(|d| (d.line, d.offset)).collect();
        let want: Vec<(u64, u64)> = o.findings.iter().map(|f| (f.line, f.offset)).collect();
        assert_eq!(damaged, want, "{}", f.run.name);
        assert_eq!(
            damaged.len(),
            usize::from(["loose", "b"].contains(&f.run.name.as_str()))
        );
    }
}

#[test]
fn a_large_log_s_tail_tells_whether_its_runs_end() {
    let dir = tempfile::tempdir().unwrap();
    let ev = |run: usize, event: &str| {
        format!(
            r#"{{"run_id":"r{run}-20260218-120000","seq":1,"event":"{event}","pad":"{}"}}"#,
            "x".repeat(200)
        )
    };
    let write = |name: &str, last: &str| {
        let mut text = String::new();
        let mut run = 0;
        while text.len() < PARALLEL_MIN as usize + (2 << 20) {
            for event in ["run_started", "plan_created", "stopped"] {
                text.push_str(&ev(run, event));
                text.push('\n');
            }
            run += 1;
        }
        text.push_str(&ev(run, "run_started"));
        text.push('\n');
        text.push_str(&ev(run, last));
        text.push('\n');
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ended = write("ended.jsonl", "failed");
    let open = write("open.jsonl", "plan_created");
    assert!(tail_ends_its_runs(&ended, "", DEFAULT_MAX_LINE));
    assert!(!tail_ends_its_runs(&open, "", DEFAULT_MAX_LINE));
    // Small logs, folders and fifos (never opened: the open would block) are not guessed at.
    let small = dir.path().join("small.jsonl");
    std::fs::write(&small, ev(0, "run_started") + "\n").unwrap();
    assert!(tail_ends_its_runs(&small, "", DEFAULT_MAX_LINE));
    assert!(tail_ends_its_runs(dir.path(), "", DEFAULT_MAX_LINE));
    let fifo = dir.path().join("fifo.jsonl");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert!(tail_ends_its_runs(&fifo, "", DEFAULT_MAX_LINE));
}
