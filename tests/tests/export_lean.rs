//! The metrics' start-up fold takes runs of aif-loop-like logs the lean way (no trace kept:
//! `loopctl-export`'s `model/lean.rs`) and falls back to the full way when it cannot be exact.
//! Either way it must print exactly what one sequential pass (always the full way) prints:
//! generated logs (steps, evaluations, phase errors and switches, stops, restarts, repeated
//! and backward seqs, missing fields, runs left running, events the lean way does not fold)
//! and the real corpus.

use std::path::{Path, PathBuf};

use loopctl_export::Options;
use loopctl_export::textfile::{LogRef, logs, render, replay_sequential, replay_with};
use loopctl_store::read::ReadOptions;
use proptest::prelude::*;
use serde_json::{Value, json};

/// (text, notices, damaged lines) and the runs folded the lean way.
type Printed = (String, Vec<String>, Vec<String>);

fn lean_and_full(logs: &[LogRef], threads: usize) -> (Printed, u64, Printed) {
    let (lean, (lean_runs, _), full) = lean_and_full_counted(logs, threads);
    (lean, lean_runs, full)
}

/// `lean_and_full`, with the logs folded again the full way.
fn lean_and_full_counted(logs: &[LogRef], threads: usize) -> (Printed, (u64, u64), Printed) {
    let read = ReadOptions {
        max_line: 1 << 20,
        threads,
        ..ReadOptions::default()
    };
    let options = Options::default();
    let mut damaged = Vec::new();
    let mut m = replay_with(logs, options.clone(), &read, &mut |l, d| {
        damaged.push(format!("{}:{}:{}", l.log.display(), d.offset, d.reason))
    })
    .unwrap();
    let counts = (m.lean_runs(), m.folded_again());
    let notices = m.take_notices();
    let lean = (render(m).unwrap(), notices, damaged);

    let mut damaged = Vec::new();
    let mut m = replay_sequential(logs, options, 1 << 20, &mut |l, d| {
        damaged.push(format!("{}:{}:{}", l.log.display(), d.offset, d.reason))
    })
    .unwrap();
    assert_eq!(m.lean_runs(), 0, "a sequential pass folds the full way");
    let notices = m.take_notices();
    (lean, counts, (render(m).unwrap(), notices, damaged))
}

const ALL_KINDS: &[usize] = &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17];
const NARROW_KINDS: &[usize] = &[1, 4, 5, 11, 11, 11, 13, 14];
const KINDS: &[&str] = &[
    "run_started",
    "plan_created",
    "artifact_created",
    "checks_prepared",
    "evaluation_done",
    "evaluation_done",
    "evaluation_done",
    "critique_done",
    "refinement_done",
    "iteration_advanced",
    "phase_switched",
    "phase_error",
    "phase_error",
    "stopped",
    "failed",
    "run_resumed",
    "tool_call",
    "usage",
];
/// Kinds the lean way does not fold: a log with one is folded again the full way.
const FULL_ONLY: &[&str] = &[
    "phase_started",
    "phase_finished",
    "phase_retry",
    "escalated",
    "transition",
    "session_ended",
];
const STEPS: &[&str] = &["PLAN", "GENERATE", "EVALUATE", "CRITIQUE", "STOP", ""];
const PHASES: &[&str] = &["A", "B", "C", ""];
const ERRORS: &[&str] = &["boom", "timeout", "KeyError: 'score'"];

/// One generated line's choices; `line` turns them into JSON with its run's state.
#[derive(Debug, Clone)]
struct Gen {
    run: usize,
    /// Index into `KINDS`.
    kind: usize,
    full_only: Option<usize>,
    step: Option<usize>,
    phase: Option<usize>,
    iteration: Option<u64>,
    /// 0: next seq, 1: the same seq again, 2: a seq back, 3: no seq.
    seq: u8,
    /// Seconds after the run's last timestamp (negative: backwards); `None`: no `ts`.
    ts: Option<i64>,
    score: Option<u8>,
    passed: Option<bool>,
    failed: Vec<u8>,
    error: Option<(usize, u8)>,
    count: Option<(u8, u64)>,
    tokens: Option<(u64, u64)>,
    status: Option<bool>,
}

/// Narrow: one run, two step names, evaluations, errors and stops, one error text, few rules
/// and scores: what makes the stagnation detectors fire (repeated failures, score plateaus,
/// the same rules failing).
fn gen_line(narrow: bool) -> impl Strategy<Value = Gen> {
    let n = |wide: usize, narrow_n: usize| if narrow { narrow_n } else { wide };
    (
        (
            0..n(3, 1),
            prop::sample::select(if narrow { NARROW_KINDS } else { ALL_KINDS }),
            prop::option::weighted(if narrow { 0.001 } else { 0.03 }, 0..FULL_ONLY.len()),
            prop::option::weighted(0.9, 0..n(STEPS.len(), 2)),
            prop::option::weighted(0.8, 0..PHASES.len()),
            prop::option::weighted(0.8, 0..6u64),
            prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
            prop::option::weighted(0.9, -5..60i64),
        ),
        (
            prop::option::weighted(0.8, 40..=if narrow { 41u8 } else { 100 }),
            prop::option::of(any::<bool>()),
            prop::collection::vec(0..n(5, 2) as u8, 0..3),
            prop::option::weighted(0.5, (0..n(ERRORS.len(), 1), 0..3u8)),
            prop::option::weighted(0.5, (0..3u8, 0..20u64)),
            prop::option::weighted(0.2, (0..5000u64, 0..900u64)),
            prop::option::of(any::<bool>()),
        ),
    )
        .prop_map(
            |(
                (run, kind, full_only, step, phase, iteration, seq, ts),
                (score, passed, failed, error, count, tokens, status),
            )| Gen {
                run,
                kind,
                full_only,
                step,
                phase,
                iteration,
                seq,
                ts,
                score,
                passed,
                failed,
                error,
                count,
                tokens,
                status,
            },
        )
}

#[derive(Default, Clone)]
struct RunGen {
    seq: u64,
    ts: i64,
}

const T0: i64 = 1_780_000_000;

fn line(g: &Gen, runs: &mut [RunGen], ids: &[String]) -> String {
    let r = &mut runs[g.run];
    let kind = match g.full_only {
        Some(k) => FULL_ONLY[k],
        None => KINDS[g.kind],
    };
    let mut ev = json!({ "run_id": ids[g.run], "event": kind });
    match g.seq {
        0 => {
            r.seq += 1;
            ev["seq"] = json!(r.seq);
        }
        1 => ev["seq"] = json!(r.seq),
        2 => ev["seq"] = json!(r.seq.saturating_sub(2)),
        _ => {}
    }
    if let Some(dt) = g.ts {
        r.ts += dt;
        let secs = T0 + r.ts;
        ev["ts"] = json!(format!(
            "2026-06-0{}T{:02}:{:02}:{:02}Z",
            1 + (secs / 86_400) % 9,
            (secs / 3600) % 24,
            (secs / 60) % 60,
            secs % 60
        ));
    }
    if let Some(s) = g.step {
        ev["step"] = json!(STEPS[s]);
    }
    if let Some(p) = g.phase {
        ev["phase"] = json!(PHASES[p]);
    }
    if let Some(i) = g.iteration {
        ev["iteration"] = json!(i);
    }
    if let Some(ok) = g.status {
        ev["status"] = json!(if ok { "ok" } else { "error" });
    }
    let mut p = serde_json::Map::new();
    if let Some(s) = g.score {
        let key = if kind == "evaluation_done" {
            "score"
        } else {
            "final_score"
        };
        p.insert(key.into(), json!(f64::from(s) / 100.0));
    }
    if let Some(b) = g.passed {
        p.insert("passed".into(), json!(b));
        p.insert("threshold".into(), json!(0.8));
    }
    if !g.failed.is_empty() {
        let rules: Vec<String> = g.failed.iter().map(|r| format!("r{r}")).collect();
        p.insert("failed_rules".into(), json!(rules));
    }
    if let Some((e, key)) = g.error {
        let key = ["error", "message", "reason"][usize::from(key)];
        p.insert(key.into(), json!(ERRORS[e]));
    }
    if let Some((key, n)) = g.count {
        let key = ["iterations", "iterations_completed", "iterations_used"][usize::from(key)];
        p.insert(key.into(), json!(n));
    }
    if let Some((i, o)) = g.tokens {
        p.insert("tokens_in".into(), json!(i));
        p.insert("tokens_out".into(), json!(o));
    }
    if kind == "phase_switched" {
        let to = PHASES[g.step.unwrap_or(0) % PHASES.len()];
        p.insert("to_phase".into(), json!(to));
    }
    if !p.is_empty() {
        ev["payload"] = Value::Object(p);
    }
    ev.to_string()
}

/// Writes each generated log as a run folder under `root`; with `end`, every run of a log
/// gets a last `stopped` or `failed` event, so that the lean way can keep its fold.
fn write_logs(root: &Path, logs: &[Vec<Gen>], end: &[bool]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for (n, (lines, end)) in logs.iter().zip(end).enumerate() {
        let ids: Vec<String> = (0..3).map(|r| format!("log{n}-run{r}")).collect();
        let mut runs = vec![RunGen::default(); 3];
        let mut text: Vec<String> = lines.iter().map(|g| line(g, &mut runs, &ids)).collect();
        if *end {
            for (r, id) in ids.iter().enumerate() {
                if lines.iter().any(|g| g.run == r) {
                    let kind = if r == 1 { "failed" } else { "stopped" };
                    let seq = runs[r].seq + 1;
                    text.push(
                        json!({"run_id": id, "seq": seq, "event": kind, "step": "STOP"})
                            .to_string(),
                    );
                }
            }
        }
        let dir = root.join(format!("log{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("history.jsonl"), text.join("\n") + "\n").unwrap();
        dirs.push(dir);
    }
    dirs
}

fn same_printed(logs_gen: &[Vec<Gen>], end: &[bool]) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = write_logs(tmp.path(), logs_gen, end);
    let refs = logs(&dirs).unwrap();
    for threads in [1, 2] {
        let (lean, _, full) = lean_and_full(&refs, threads);
        prop_assert_eq!(&lean.1, &full.1);
        prop_assert_eq!(&lean.2, &full.2);
        if lean.0 != full.0 {
            let diff: Vec<String> = diff_lines(&lean.0, &full.0);
            return Err(TestCaseError::fail(format!(
                "{threads} threads, lean (-) vs full (+):\n{}",
                diff.join("\n")
            )));
        }
    }
    Ok(())
}

/// The lines only one of two texts has, marked - (first) or + (second).
fn diff_lines(a: &str, b: &str) -> Vec<String> {
    let (x, y): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out: Vec<String> = x
        .iter()
        .filter(|l| !y.contains(l))
        .map(|l| format!("- {l}"))
        .collect();
    out.extend(
        y.iter()
            .filter(|l| !x.contains(l))
            .map(|l| format!("+ {l}")),
    );
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn the_lean_start_up_fold_prints_what_a_sequential_pass_prints(
        logs_gen in prop::collection::vec(prop::collection::vec(gen_line(false), 1..40), 1..4),
        end in prop::collection::vec(prop::bool::weighted(0.8), 4),
    ) {
        same_printed(&logs_gen, &end)?;
    }

    #[test]
    fn stagnating_runs_print_the_same_the_lean_way(
        logs_gen in prop::collection::vec(prop::collection::vec(gen_line(true), 3..30), 1..3),
        end in prop::collection::vec(prop::bool::weighted(0.8), 4),
    ) {
        same_printed(&logs_gen, &end)?;
    }
}

/// The property above would hold if the lean way never ran: this log is one it takes (every
/// run ends, no event it does not fold), and its runs must be counted as folded lean; a run
/// left running, or an event the lean way does not fold, sends the log the full way.
#[test]
fn the_lean_way_takes_the_logs_it_can_and_only_those() {
    let tmp = tempfile::tempdir().unwrap();
    let log = |name: &str, lines: &[Value]| {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(dir.join("history.jsonl"), text.join("\n") + "\n").unwrap();
        dir
    };
    let ended = [
        json!({"run_id":"r1","seq":1,"event":"run_started","step":"INIT","ts":"2026-06-01T10:00:00Z"}),
        json!({"run_id":"r1","seq":2,"event":"plan_created","step":"PLAN","ts":"2026-06-01T10:00:05Z"}),
        json!({"run_id":"r1","seq":3,"event":"evaluation_done","step":"EVALUATE","ts":"2026-06-01T10:00:09Z","payload":{"score":0.4,"passed":false,"failed_rules":["r1"]}}),
        json!({"run_id":"r1","seq":4,"event":"phase_error","step":"REFINE","ts":"2026-06-01T10:00:12Z","payload":{"error":"boom"}}),
        json!({"run_id":"r1","seq":5,"event":"stopped","step":"STOP","ts":"2026-06-01T10:00:13Z","payload":{"final_score":0.4,"iterations":1}}),
    ];
    let mut running = ended.to_vec();
    running.pop();
    let mut phased = ended.to_vec();
    phased.insert(
        1,
        json!({"run_id":"r1","event":"phase_started","phase":"build","ts":"2026-06-01T10:00:01Z"}),
    );
    // The same step failing three times with the same error, the score flat.
    let mut stagnating = vec![ended[0].clone()];
    for it in 1..=4 {
        stagnating.push(json!({"run_id":"r1","seq":2 * it,"iteration":it,"event":"evaluation_done","step":"EVALUATE","payload":{"score":0.4,"passed":false,"failed_rules":["r1"]}}));
        stagnating.push(json!({"run_id":"r1","seq":2 * it + 1,"iteration":it,"event":"phase_error","step":"REFINE","payload":{"error":"boom"}}));
    }
    stagnating.push(json!({"run_id":"r1","seq":20,"event":"stopped","step":"STOP"}));
    let refs = logs(&[log("stagnating", &stagnating)]).unwrap();
    let (printed, lean_runs, full) = lean_and_full(&refs, 1);
    assert_eq!((lean_runs, &printed), (1, &full));
    assert!(
        printed.0.contains(r#"detector="repeated_failure"} 1"#),
        "{}",
        printed.0
    );

    let native: Vec<Value> = ended
        .iter()
        .map(|l| {
            let mut l = l.clone();
            l["v"] = json!(1);
            l
        })
        .collect();
    for (name, lines, lean) in [
        ("ended", &ended[..], 1),
        ("running", &running[..], 0),
        ("phased", &phased[..], 0),
        // Native runs write explicit phases: started the full way, not folded twice.
        ("native", &native[..], 0),
    ] {
        let refs = logs(&[log(name, lines)]).unwrap();
        let (printed, lean_runs, full) = lean_and_full(&refs, 1);
        assert_eq!(lean_runs, lean, "{name}");
        assert_eq!(printed, full, "{name}");
        assert_eq!(
            printed.0.contains("loopctl_phase_duration_seconds_count"),
            name != "phased",
            "{name}: derived steps are observed, unless the run has explicit phases\n{}",
            printed.0
        );
    }
}

/// Every log of the real corpus, alone and all together.
#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn the_corpus_prints_the_same_the_lean_way() {
    let Some(shared) = loopctl_tests::shared("the corpus under the lean start-up fold") else {
        return;
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut stack = vec![shared.join("corpus")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl" || x == "ndjson") {
                paths.push(p);
            }
        }
    }
    paths.sort();
    assert!(paths.len() >= 4, "{paths:?}");
    let all = logs(&paths).unwrap();
    let mut lean_total = 0;
    for one in &all {
        let (lean, lean_runs, full) = lean_and_full(std::slice::from_ref(one), 1);
        assert_eq!(lean, full, "{}", one.log.display());
        lean_total += lean_runs;
    }
    assert!(lean_total > 0, "some corpus run is folded the lean way");
    let (lean, _, full) = lean_and_full(&all, 2);
    assert_eq!(lean, full);
}

/// An aif-loop merged log of `runs` interleaved runs, about 60 events each, some stagnating
/// (the same rule failing at a flat score), some failing; each run ends but run `open`.
fn merged_aif_log(runs: usize, open: Option<usize>) -> Vec<String> {
    let steps = [
        "PLAN",
        "GENERATE",
        "PREPARE_CHECKS",
        "EVALUATE",
        "CRITIQUE",
        "REFINE",
    ];
    let run_lines = |r: usize| {
        let id = format!("svc{}-20260218-1200{:02}-{r:06}", r % 7, r % 60);
        let mut out = vec![
            json!({"run_id":&id,"seq":0,"iteration":0,"phase":"A","step":"INIT","event":"run_started","payload":{"goal":"g","config":{"max_iterations":12,"threshold":0.9}}}),
        ];
        let stagnating = r.is_multiple_of(5);
        for it in 1..=10u64 {
            for (k, step) in steps.iter().enumerate() {
                let seq = out.len();
                let phase = if it > 5 { "B" } else { "A" };
                let mut ev = json!({"run_id":&id,"seq":seq,"iteration":it,"phase":phase,"step":step,"event":"artifact_created","payload":{"duration_ms":1000 + k * 10,"tokens_in":100 + r,"tokens_out":20 + k}});
                if *step == "EVALUATE" {
                    let score = if stagnating {
                        0.4
                    } else {
                        0.3 + it as f64 * 0.05
                    };
                    ev["event"] = json!("evaluation_done");
                    let rule = if stagnating { 1 } else { it };
                    ev["payload"] = json!({"score":score,"passed":false,"failed_rules":[format!("r{rule}")],"tokens_in":50,"tokens_out":9});
                } else if *step == "REFINE" && (stagnating || (r + it as usize).is_multiple_of(9)) {
                    ev["event"] = json!("phase_error");
                    ev["payload"] = json!({"error":"cargo test failed"});
                }
                out.push(ev);
            }
        }
        let end = if r % 4 == 1 { "failed" } else { "stopped" };
        out.push(json!({"run_id":&id,"seq":out.len(),"iteration":10,"phase":"B","step":"STOP","event":end,"payload":{"final_score":0.5,"iterations":10}}));
        out
    };
    let mut per_run: Vec<Vec<Value>> = (0..runs).map(run_lines).collect();
    if let Some(run) = open.and_then(|r| per_run.get_mut(r)) {
        run.pop();
    }
    // A window of 16 runs open at a time, their events interleaved, with timestamps in order.
    let mut lines = Vec::new();
    for window in per_run.chunks(16) {
        let longest = window.iter().map(Vec::len).max().unwrap_or(0);
        for k in 0..longest {
            for ev in window.iter().filter_map(|r| r.get(k)) {
                let mut ev = ev.clone();
                let t = lines.len();
                ev["ts"] = json!(format!(
                    "2026-02-18T{:02}:{:02}:{:02}.{:03}Z",
                    t / 360_000 % 24,
                    t / 6000 % 60,
                    t / 100 % 60,
                    t % 100 * 10
                ));
                lines.push(ev.to_string());
            }
        }
    }
    lines
}

/// A merged log large enough for the fold driver to split by run (past 8 MiB): its shards fold
/// the lean way, and when one cannot be exact (a run left running, an event the lean way does
/// not fold) the log is folded again the full way; every way prints what a sequential pass
/// prints.
#[test]
fn a_large_merged_log_is_folded_the_lean_way_in_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = 700;
    let ended = merged_aif_log(runs, None);
    let mut phased = ended.clone();
    // An explicit phase in a run under way (the run of the middle line).
    let mid = ended.len() / 2;
    let run: Value = serde_json::from_str(&ended[mid]).unwrap();
    phased.insert(
        mid,
        json!({"run_id":run["run_id"],"event":"phase_started","phase":"build"}).to_string(),
    );
    for (name, lines, lean) in [
        // (lean runs, folds again)
        ("ended", ended, (runs as u64, 0)),
        // Its last run left running: the log's tail tells, and it is folded the full way at
        // once.
        ("open", merged_aif_log(runs, Some(runs - 1)), (0, 0)),
        // Its first run left running, far from its tail: folded the lean way, then again.
        ("open early", merged_aif_log(runs, Some(0)), (0, 1)),
        ("phased", phased, (0, 1)),
    ] {
        let path = tmp.path().join(format!("{}.jsonl", name.replace(' ', "-")));
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 9 << 20, "{name}");
        let refs = logs(&[path]).unwrap();
        let (printed, counts, full) = lean_and_full_counted(&refs, 2);
        assert_eq!(counts, lean, "{name}");
        if printed.0 != full.0 {
            panic!(
                "{name}: lean (-) vs full (+):\n{}",
                diff_lines(&printed.0, &full.0).join("\n")
            );
        }
        assert_eq!(printed, full, "{name}");
        if name == "ended" {
            // The stagnating fifth of the runs (140, 20 per loop) and only those.
            let verdicts = printed.0.lines().filter(|l| {
                l.starts_with("loopctl_stagnation_verdicts_total") && l.ends_with("} 20")
            });
            assert_eq!(verdicts.count(), 7, "{}", printed.0);
        }
    }
}
