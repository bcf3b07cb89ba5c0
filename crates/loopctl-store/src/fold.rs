//! The fold driver: a log file, a run folder or a root folded through any set of projections
//! (`loopctl_core::fold`), each log read once. The driver chooses how: one thread for a small
//! log, chunks read on every thread and routed by run to shards for a large one, logs spread
//! over the threads for a root.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use loopctl_core::decode::lines::Pos;
use loopctl_core::fold::{Line, Projection, Split, feed, feed_oversize, feed_piece};

use crate::discover::RunRef;
use crate::read::{
    ItemKind, PAR_CHUNK, PARALLEL_MIN, ReadOptions, Routed, SHARDS_PER_THREAD, lock, plan_chunks,
    run_chunks,
};
use crate::{Result, io_err};

/// Folds the log at `path` through `p` (read sequentially, or in chunks on `opts.threads`
/// threads when it is large) and gives it back.
pub fn fold_file<P: Split>(path: &Path, opts: &ReadOptions, p: P) -> Result<P> {
    let size = std::fs::metadata(path).map_err(io_err(path))?.len();
    if opts.threads > 1 && size >= PARALLEL_MIN {
        fold_parallel(path, opts, p, opts.threads, PAR_CHUNK)
    } else {
        fold_sequential(path, opts, p)
    }
}

/// `fold_file` on one thread.
pub fn fold_sequential<P: Projection>(path: &Path, opts: &ReadOptions, mut p: P) -> Result<P> {
    fold_prefix(path, u64::MAX, opts.max_line, &mut p)?;
    Ok(p)
}

/// Folds the bytes of `path` before offset `end` (a line start) through `p`, in order.
pub fn fold_prefix<P: Projection + ?Sized>(
    path: &Path,
    end: u64,
    max_line: usize,
    p: &mut P,
) -> Result<()> {
    crate::read::pieces_between(path, 0, end, 0, max_line, |piece| feed_piece(p, piece))
}

/// `fold_file` in chunks of about `chunk` bytes on `threads` threads (at least two): every
/// chunk is split into lines once and each line handed to the shard of its run.
pub(crate) fn fold_parallel<P: Split>(
    path: &Path,
    opts: &ReadOptions,
    p: P,
    threads: usize,
    chunk: u64,
) -> Result<P> {
    let size = std::fs::metadata(path).map_err(io_err(path))?.len();
    let Some(chunks) = plan_chunks(path, 0, size, opts.max_line, chunk)? else {
        // A line longer than the cap sits across a chunk boundary: not worth splitting.
        return fold_sequential(path, opts, p);
    };
    let count = threads * SHARDS_PER_THREAD;
    let shards: Vec<Mutex<P>> = (0..count).map(|_| Mutex::new(p.fork())).collect();
    let apply = |shard: &mut P, s: usize, start: u64, base: u64, b: &[u8], r: &Routed| {
        apply_chunk(shard, s, start, base, b, r)
    };
    run_chunks(path, &chunks, 0, opts, threads, &shards, &apply)?;
    let mut p = p;
    for s in shards {
        p.join(lock(s.into_inner()));
    }
    Ok(p)
}

/// Feeds shard `s`'s lines of one chunk, whose first line is line `base + 1`.
fn apply_chunk<P: Projection>(p: &mut P, s: usize, start: u64, base: u64, b: &[u8], r: &Routed) {
    for it in &r.items[s] {
        let pos = Pos {
            line: base + 1 + it.line,
            offset: start + it.at as u64,
        };
        let line = Line {
            pos,
            len: it.len as u64,
            terminated: it.kind == ItemKind::Line,
        };
        let raw = &b[it.at..it.at + it.len];
        match it.kind {
            ItemKind::Oversize => feed_oversize(p, pos, it.len as u64, true),
            _ if r.utf8 => {
                // `route_chunk` checked that the whole chunk is UTF-8, and a line starts and
                // ends at a newline or an end of the chunk, both character boundaries.
                match simdutf8::basic::from_utf8(raw) {
                    Ok(text) => feed(p, line, raw, Some((text, it.cr))),
                    Err(_) => feed(p, line, raw, None),
                }
            }
            _ => feed(p, line, raw, None),
        }
    }
}

/// Folds the log of every run through a projection of its own (`make`), the logs spread over
/// `opts.threads` threads (a large one is split in chunks as `fold_file` does). The results
/// come in the order of `runs`.
pub fn fold_runs<P: Split>(
    runs: &[RunRef],
    opts: &ReadOptions,
    make: impl Fn(&RunRef) -> P + Sync,
) -> Vec<Result<P>> {
    let one = |r: &RunRef| {
        let opts = ReadOptions {
            default_run: r.name.clone(),
            ..opts.clone()
        };
        fold_file(&r.log, &opts, make(r))
    };
    let threads = opts.threads.clamp(1, runs.len().max(1));
    if threads == 1 {
        return runs.iter().map(one).collect();
    }
    let next = AtomicUsize::new(0);
    let done: Vec<Mutex<Option<Result<P>>>> = runs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(r) = runs.get(i) else { break };
                    let folded = one(r);
                    *lock(done[i].lock()) = Some(folded);
                }
            });
        }
    });
    done.into_iter()
        .zip(runs)
        .map(|(m, r)| {
            lock(m.into_inner()).unwrap_or_else(|| {
                Err(crate::StoreError::NotFound(format!(
                    "{}: not read",
                    r.log.display()
                )))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::tests::line;
    use loopctl_core::Replay;
    use loopctl_core::decode::lines::DEFAULT_MAX_LINE;
    use loopctl_core::fold::trace::Traces;
    use proptest::prelude::*;

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
                bytes.extend(line(k, r, u32::from(s)));
                bytes.push(b'\n');
            }
            if tail {
                bytes.extend_from_slice(br#"{"run_id":"r1-20260218-120000","event":"sto"#);
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("history.jsonl");
            std::fs::write(&path, &bytes).unwrap();
            let opts = ReadOptions { max_line, threads: 1, default_run: "folder".into(), states: true };
            let fresh = || (Replay::new("folder"), Traces::new("folder"));
            let one = folded(fold_sequential(&path, &opts, fresh()).unwrap());
            let many = folded(fold_parallel(&path, &opts, fresh(), threads, chunk).unwrap());
            prop_assert_eq!(&one.0, &many.0, "replay, chunk {} threads {}", chunk, threads);
            prop_assert_eq!(&one.1, &many.1, "traces, chunk {} threads {}", chunk, threads);
            // The fold's replay is `replay_file`'s, and its traces those of the events one by
            // one.
            let replayed = crate::read::replay_file(&path, &opts, None).unwrap();
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

    #[test]
    fn fold_runs_gives_each_log_its_own_fold_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = Vec::new();
        for r in 0..5u8 {
            let folder = dir.path().join(format!("run{r}"));
            std::fs::create_dir(&folder).unwrap();
            let mut bytes = Vec::new();
            for seq in 0..(10 + u32::from(r)) {
                bytes.extend(line(8, r, seq));
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
}
