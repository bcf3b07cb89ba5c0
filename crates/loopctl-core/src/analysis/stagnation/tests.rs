use super::*;
use crate::fold::trace::traces_from_bytes;

/// A one-run trace from NDJSON lines (any dialect), through the real parser.
fn trace(lines: &[&str]) -> Trace {
    let text = lines.join("\n") + "\n";
    let mut runs = traces_from_bytes("t", text.as_bytes());
    assert_eq!(runs.len(), 1);
    runs.pop_first().map(|r| r.1).unwrap_or_default()
}

fn eval(i: u64, score: f64, extra: &str) -> String {
    format!(
        r#"{{"ts":"2026-01-01T00:0{i}:00Z","run_id":"r","iteration":{i},"phase":"A","step":"EVALUATE","event":"evaluation_done","payload":{{"score":{score},"passed":false{extra}}}}}"#
    )
}

fn evals(scores: &[f64], extra: &str) -> Trace {
    let lines: Vec<String> = scores
        .iter()
        .enumerate()
        .map(|(i, s)| eval(i as u64 + 1, *s, extra))
        .collect();
    trace(&lines.iter().map(String::as_str).collect::<Vec<_>>())
}

fn run(t: &Trace, cfg: &Config, d: Detector) -> Finding {
    assess(t, cfg, None, Liveness::Alive)
        .finding(d)
        .cloned()
        .unwrap_or_else(|| Finding::not_applicable(d, "missing".into()))
}

#[test]
fn score_rule_triggers_on_two_small_gains() {
    let t = evals(&[0.5, 0.51, 0.515], "");
    let f = run(&t, &Config::default(), Detector::Score);
    assert!(f.triggered, "{f:?}");
    assert_eq!(f.iterations, vec![2, 3]);
    assert_eq!(f.scores, vec![0.51, 0.515]);
    assert!(assess(&t, &Config::default(), None, Liveness::Alive).stagnating);
}

#[test]
fn score_rule_counts_a_gain_of_exactly_min_delta_as_progress() {
    let t = evals(&[0.8, 0.82, 0.84, 0.86], "");
    let f = run(&t, &Config::default(), Detector::Score);
    assert!(!f.triggered, "{f:?}");
    assert!(f.iterations.is_empty());
}

#[test]
fn fail_blockers_do_not_count() {
    let t = evals(&[0.5, 0.51, 0.515], r#","failed":["R1"]"#);
    assert!(!run(&t, &Config::default(), Detector::Score).triggered);
    let t = evals(&[0.5, 0.51, 0.515], r#","fail_count":1"#);
    assert!(!run(&t, &Config::default(), Detector::Score).triggered);
    let t = evals(&[0.5, 0.51, 0.515], r#","warnings":["W1"]"#);
    assert!(run(&t, &Config::default(), Detector::Score).triggered);
}

/// Flat scores the rule does not count (fail blockers) are not called progress.
#[test]
fn flat_scores_with_fail_blockers_are_not_called_progressing() {
    let t = evals(&[0.333, 0.333, 0.333], r#","failed":["R1"]"#);
    let f = run(&t, &Config::default(), Detector::Score);
    assert!(!f.triggered, "{f:?}");
    assert!(
        f.summary
            .starts_with("score not progressing (last 0.333) but not counted"),
        "{}",
        f.summary
    );
    let t = evals(&[0.5, 0.6, 0.7], r#","failed":["R1"]"#);
    let f = run(&t, &Config::default(), Detector::Score);
    assert!(
        f.summary.starts_with("score progressing (3 scored"),
        "{}",
        f.summary
    );
    // A run that passed at the top score is not "not progressing".
    let pass = |i| eval(i, 1.0, "").replace(r#""passed":false"#, r#""passed":true"#);
    let f = run(
        &trace(&[&pass(1), &pass(2)]),
        &Config::default(),
        Detector::Score,
    );
    assert!(!f.summary.contains("not progressing"), "{}", f.summary);
}

#[test]
fn reset_policies_differ_after_progress() {
    // 0.5 -> 0.51 (1) -> 0.6 (progress) -> 0.605 (1 or 2).
    let t = evals(&[0.5, 0.51, 0.6, 0.605], "");
    let on = run(&t, &Config::default(), Detector::Score);
    assert!(!on.triggered);
    assert_eq!(on.iterations, vec![4]);
    let never = Config {
        reset: Reset::Never,
        ..Config::default()
    };
    let f = run(&t, &never, Detector::Score);
    assert!(f.triggered);
    assert_eq!(f.iterations, vec![2, 4]);
    assert_eq!(f.scores, vec![0.51, 0.605]);
}

#[test]
fn first_evaluation_after_a_switch_is_a_baseline() {
    let t = trace(&[
        &eval(1, 0.9, ""),
        r#"{"run_id":"r","iteration":1,"phase":"A_B","step":"SWITCH","event":"phase_switched","payload":{"from_phase":"A","to_phase":"B"}}"#,
        r#"{"run_id":"r","iteration":1,"phase":"B","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.85,"passed":false}}"#,
        r#"{"run_id":"r","iteration":2,"phase":"B","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.86,"passed":false}}"#,
    ]);
    let f = run(&t, &Config::default(), Detector::Score);
    assert_eq!(f.iterations, vec![2], "the B baseline is not counted");
    assert!(!f.triggered);
    let state = crate::replay_bytes("t", {
        let l = [
            eval(1, 0.9, ""),
            r#"{"run_id":"r","iteration":1,"phase":"A_B","step":"SWITCH","event":"phase_switched","payload":{"from_phase":"A","to_phase":"B"}}"#.into(),
            r#"{"run_id":"r","iteration":1,"phase":"B","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.85,"passed":false}}"#.into(),
            r#"{"run_id":"r","iteration":2,"phase":"B","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.86,"passed":false}}"#.into(),
        ];
        (l.join("\n") + "\n").into_bytes()
    }.as_slice());
    assert_eq!(state.runs["r"].stagnation_count, 1);
}

#[test]
fn score_rule_without_scores_does_not_apply() {
    let t = trace(&[r#"{"event":"stopped","run_id":"r","payload":{"reason":"user_stop"}}"#]);
    let f = run(&t, &Config::default(), Detector::Score);
    assert!(!f.triggered && !f.applicable);
}

#[test]
fn repeated_failed_rules_trigger() {
    let t = evals(&[0.4, 0.6, 0.8], r#","failed":["R2","R1"]"#);
    let f = run(&t, &Config::default(), Detector::RepeatedFailure);
    assert!(f.triggered, "{f:?}");
    assert_eq!(f.rule_ids, vec!["R1", "R2"]);
    assert_eq!(f.iterations, vec![1, 2, 3]);
    // Rising scores: the score rule is quiet, the verdict is not.
    assert!(!run(&t, &Config::default(), Detector::Score).triggered);
    assert!(assess(&t, &Config::default(), None, Liveness::Alive).stagnating);
}

#[test]
fn changing_failed_rules_do_not_trigger() {
    let t = trace(&[
        &eval(1, 0.4, r#","failed":["R1"]"#),
        &eval(2, 0.6, r#","failed":["R1","R2"]"#),
        &eval(3, 0.8, r#","failed":["R1"]"#),
        &eval(4, 0.85, r#","failed":["R1"]"#),
    ]);
    let f = run(&t, &Config::default(), Detector::RepeatedFailure);
    assert!(!f.triggered, "{f:?}");
}

fn attempt(seq: u64, it: u64, err: Option<&str>) -> [String; 2] {
    let fin = match err {
        Some(e) => format!(
            r#""exit_code":1,"stop_reason":"error","error":{}"#,
            serde_json::Value::String(e.into())
        ),
        None => r#""exit_code":0,"stop_reason":"end_turn""#.into(),
    };
    [
        format!(
            r#"{{"v":1,"seq":{},"run_id":"n","event":"phase_started","iteration":{it},"step":"test","payload":{{"kind":"loop","attempt":1}}}}"#,
            seq * 2 - 1
        ),
        format!(
            r#"{{"v":1,"seq":{},"run_id":"n","event":"phase_finished","iteration":{it},"step":"test","payload":{{"kind":"loop","attempt":1,{fin}}}}}"#,
            seq * 2
        ),
    ]
}

fn attempts(errs: &[Option<&str>]) -> Trace {
    let lines: Vec<String> = errs
        .iter()
        .enumerate()
        .flat_map(|(i, e)| attempt(i as u64 + 1, i as u64 + 1, *e))
        .collect();
    trace(&lines.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn the_same_error_three_times_triggers() {
    let t = attempts(&[
        Some("cargo test failed at /tmp/a1/src/lib.rs:12 after 3.2s (pid 4411)"),
        Some("cargo test failed at /tmp/b7/src/lib.rs:40 after 9.0s (pid 12)"),
        Some("Cargo test  failed at /work/x/src/lib.rs:7 after 1s (pid 0xdeadbeef)"),
    ]);
    let f = run(&t, &Config::default(), Detector::RepeatedFailure);
    assert!(f.triggered, "{f:?}");
    assert_eq!(f.iterations, vec![1, 2, 3]);
    assert_eq!(f.seqs, vec![2, 4, 6]);
    assert!(f.summary.contains("\"test\" failed 3 times"));
}

#[test]
fn different_or_interrupted_errors_do_not_trigger() {
    let t = attempts(&[Some("timeout"), Some("timeout"), None, Some("timeout")]);
    assert!(!run(&t, &Config::default(), Detector::RepeatedFailure).triggered);
    let t = attempts(&[Some("timeout"), Some("panic"), Some("timeout")]);
    assert!(!run(&t, &Config::default(), Detector::RepeatedFailure).triggered);
}

#[test]
fn normalisation_ignores_numbers_hashes_paths_and_spacing() {
    assert_eq!(
        normalise_error("Error at 2026-01-01T10:00:00Z in  /tmp/x/y.rs: commit 3fa9c0d"),
        normalise_error("error at 2027-12-31T23:59:59Z in /home/u/z.rs: commit 8b01e2a")
    );
    assert_ne!(
        normalise_error("add failed"),
        normalise_error("bead failed")
    );
}

fn git_iteration(seq: u64, it: u64, before: (&str, &str), after: (&str, &str)) -> [String; 2] {
    [
        format!(
            r#"{{"v":1,"seq":{seq},"run_id":"g","event":"phase_started","iteration":{it},"step":"fix","payload":{{"kind":"loop","commit":"{}","worktree":"{}"}}}}"#,
            before.0, before.1
        ),
        format!(
            r#"{{"v":1,"seq":{},"run_id":"g","event":"phase_finished","iteration":{it},"step":"fix","payload":{{"kind":"loop","exit_code":0,"stop_reason":"end_turn","commit":"{}","worktree":"{}"}}}}"#,
            seq + 1,
            after.0,
            after.1
        ),
    ]
}

#[test]
fn an_iteration_that_changes_nothing_triggers_no_change() {
    let mut lines: Vec<String> = git_iteration(1, 1, ("c1", "w1"), ("c2", "w2")).into();
    lines.extend(git_iteration(3, 2, ("c2", "w2"), ("c2", "w2")));
    let t = trace(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let f = run(&t, &Config::default(), Detector::NoChange);
    assert!(f.triggered, "{f:?}");
    assert_eq!(
        (f.iterations.clone(), f.seqs.clone()),
        (vec![2], vec![3, 4])
    );
    let two = Config {
        no_change: 2,
        ..Config::default()
    };
    assert!(!run(&t, &two, Detector::NoChange).triggered);
}

#[test]
fn a_dirty_work_tree_is_a_change() {
    let lines: Vec<String> = git_iteration(1, 1, ("c1", "w1"), ("c1", "w9")).into();
    let t = trace(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let f = run(&t, &Config::default(), Detector::NoChange);
    assert!(!f.triggered && f.applicable, "{f:?}");
}

#[test]
fn no_change_does_not_apply_without_git_data() {
    let t = attempts(&[None, None]);
    let f = run(&t, &Config::default(), Detector::NoChange);
    assert!(!f.triggered && !f.applicable);
    assert!(f.summary.contains("does not apply"));
}

#[test]
fn oscillating_scores_trigger() {
    let t = evals(&[0.6, 0.7, 0.6, 0.7, 0.6, 0.61], r#","failed":["R"]"#);
    let f = run(&t, &Config::default(), Detector::Oscillation);
    assert!(f.triggered, "{f:?}");
    assert_eq!(f.scores.len(), 6);
}

#[test]
fn zigzag_with_net_progress_is_not_oscillation() {
    let t = evals(&[0.5, 0.7, 0.6, 0.8, 0.7, 0.9], "");
    assert!(!run(&t, &Config::default(), Detector::Oscillation).triggered);
    let short = evals(&[0.6, 0.7, 0.6], "");
    let f = run(&short, &Config::default(), Detector::Oscillation);
    assert!(!f.triggered && !f.applicable);
}

#[test]
fn a_quiet_running_run_is_stalled() {
    let t = evals(&[0.5], "");
    let later = t.last_ts.map(|t| Ts(t.0 + 31 * 60 * 1000));
    let f = assess(&t, &Config::default(), later, Liveness::Alive);
    assert!(f.finding(Detector::Stalled).is_some_and(|f| f.triggered));
    let soon = t.last_ts.map(|t| Ts(t.0 + 60 * 1000));
    let f = assess(&t, &Config::default(), soon, Liveness::Alive);
    assert!(
        f.finding(Detector::Stalled)
            .is_some_and(|f| !f.triggered && f.applicable)
    );
    let f = assess(&t, &Config::default(), None, Liveness::Alive);
    assert!(f.finding(Detector::Stalled).is_some_and(|f| !f.applicable));
}

/// Only a live runner can stall: quiet for a day, a run whose runner is gone (or cannot be
/// known) is not stalled, and the finding says why.
#[test]
fn a_quiet_run_without_a_live_runner_is_not_stalled() {
    let t = evals(&[0.5], "");
    let later = t.last_ts.map(|t| Ts(t.0 + 24 * 3_600_000));
    for (runner, why) in [
        (Liveness::Dead, "interrupted"),
        (Liveness::Unknown, "no runner lock"),
    ] {
        let v = assess(&t, &Config::default(), later, runner);
        let f = v.finding(Detector::Stalled).unwrap();
        assert!(!f.triggered && !f.applicable && !v.stagnating, "{f:?}");
        assert!(
            f.summary.contains(why) && f.summary.contains("1d 00h"),
            "{f:?}"
        );
    }
}

#[test]
fn a_stopped_run_is_not_stalled() {
    let t = trace(&[
        &eval(1, 0.5, ""),
        r#"{"ts":"2026-01-01T00:09:00Z","run_id":"r","event":"stopped","payload":{"reason":"user_stop"}}"#,
    ]);
    let f = assess(&t, &Config::default(), Some(Ts(i64::MAX)), Liveness::Alive);
    assert!(f.finding(Detector::Stalled).is_some_and(|f| !f.triggered));
    assert!(!f.stagnating);
}

#[test]
fn config_reads_the_loop_file_object() {
    let c: Config =
        serde_json::from_str(r#"{"limit":3,"reset":"never","stop_on":["score","no_change"]}"#)
            .unwrap_or_default();
    assert_eq!(c.limit, 3);
    assert_eq!(c.reset, Reset::Never);
    assert_eq!(c.stop_on, vec![Detector::Score, Detector::NoChange]);
    assert_eq!(c.min_delta, 0.02);
    assert!(serde_json::from_str::<Config>(r#"{"limt":3}"#).is_err());
    assert_eq!(
        serde_json::to_value(Reset::OnProgress).ok(),
        Some(serde_json::json!("on_progress"))
    );
}

/// One line of a random aif-loop or native run: steps, scores, failed rules, errors.
fn random_line(k: u8, step: u8, it: u8, x: u8, seq: usize) -> String {
    let step = ["PLAN", "EVALUATE", "REFINE"][usize::from(step % 3)];
    let err = ["timeout after 3s", "timeout after 9s", "panic"][usize::from(x % 3)];
    let head = format!(
        r#""ts":"2026-01-01T00:{:02}:{:02}Z","run_id":"r","iteration":{it},"phase":"{}","step":"{step}""#,
        seq / 60 % 60,
        seq % 60,
        if x.is_multiple_of(7) { "B" } else { "A" }
    );
    match k % 8 {
        0 | 1 => format!(
            r#"{{{head},"event":"evaluation_done","payload":{{"score":0.{:02},"failed_rules":{}}}}}"#,
            x % 20,
            if x.is_multiple_of(2) {
                r#"["R1"]"#
            } else {
                "[]"
            }
        ),
        2 => format!(r#"{{{head},"event":"phase_error","payload":{{"error":"{err}"}}}}"#),
        3 if x.is_multiple_of(5) => format!(
            r#"{{"v":1,"seq":{seq},"run_id":"r","event":"phase_finished","iteration":{it},"step":"{step}","payload":{{"exit_code":{},"error":"{err}","commit":"c{}"}}}}"#,
            x % 2,
            x % 3
        ),
        4 => format!(r#"{{{head},"event":"failed","payload":{{"reason":"{err}"}}}}"#),
        _ => format!(r#"{{{head},"event":"plan_created"}}"#),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    /// A lean trace (what `stagnation` folds) gets the verdict of the full trace.
    #[test]
    fn a_lean_trace_gets_the_full_traces_verdict(
        lines in proptest::collection::vec((0u8..8, 0u8..3, 0u8..6, 0u8..30), 1..120),
        repeat in 1u64..4,
    ) {
        let mut log = String::new();
        for (n, &(k, step, it, x)) in lines.iter().enumerate() {
            log += &random_line(k, step, it, x, n);
            log.push('\n');
        }
        let full = traces_from_bytes("t", log.as_bytes());
        let mut lean = crate::fold::trace::Traces::lean("t");
        crate::fold::fold_bytes(&mut lean, log.as_bytes(), crate::decode::lines::DEFAULT_MAX_LINE);
        let lean = lean.into_runs();
        proptest::prop_assert_eq!(full.len(), lean.len());
        let cfg = Config { repeat, ..Config::default() };
        for (id, t) in &full {
            let v = assess(t, &cfg, Some(Ts(0)), Liveness::Alive);
            let w = assess(&lean[id], &cfg, Some(Ts(0)), Liveness::Alive);
            proptest::prop_assert_eq!(&v, &w, "run {}", id);
        }
    }
}

/// `random_line`, plus native phases carrying git fingerprints (for `no_change`).
fn random_line_git(k: u8, step: u8, it: u8, x: u8, seq: usize) -> String {
    let phase = ["build", "test"][usize::from(step % 2)];
    let commit = format!("c{}", x % 2);
    match k {
        8 => format!(
            r#"{{"v":1,"seq":{seq},"run_id":"r","event":"phase_started","iteration":{it},"step":"{phase}","payload":{{"kind":"{}","commit":"{commit}","worktree":"w"}}}}"#,
            ["loop", "pre", "loop"][usize::from(x % 3)]
        ),
        9 => format!(
            r#"{{"v":1,"seq":{seq},"run_id":"r","event":"phase_finished","iteration":{it},"step":"{phase}","payload":{{"kind":"loop","exit_code":{},"stop_reason":"end_turn","commit":"{commit}","worktree":"w"}}}}"#,
            x % 2
        ),
        _ => random_line(k, step, it, x, seq),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
    /// `triggered` names the detectors `assess` finds triggered, after every line of a run
    /// (the metric fold asks after each evaluation), whatever the settings.
    #[test]
    fn triggered_names_what_assess_finds(
        lines in proptest::collection::vec((0u8..10, 0u8..3, 0u8..6, 0u8..30), 1..80),
        limit in 0u64..4,
        repeat in 0u64..4,
        no_change in 0u64..3,
        window in 0usize..8,
        turns in 0usize..4,
        never in proptest::bool::ANY,
        clock in proptest::option::of(0i64..4_000_000),
    ) {
        let cfg = Config {
            limit,
            repeat,
            no_change,
            oscillation_window: window,
            oscillation_turns: turns,
            reset: if never { Reset::Never } else { Reset::OnProgress },
            stalled_after_ms: 60_000,
            ..Config::default()
        };
        let mut log = String::new();
        for (n, &(k, step, it, x)) in lines.iter().enumerate() {
            log += &random_line_git(k, step, it, x, n);
            log.push('\n');
            for (id, t) in &traces_from_bytes("t", log.as_bytes()) {
                for runner in [Liveness::Alive, Liveness::Unknown] {
                    let now = clock.map(|c| Ts(1_767_225_600_000 + c));
                    let found: Vec<Detector> =
                        assess(t, &cfg, now, runner).triggered().map(|f| f.detector).collect();
                    proptest::prop_assert_eq!(
                        triggered(t, &cfg, now, runner),
                        found,
                        "run {} after line {}",
                        id,
                        n
                    );
                }
            }
        }
    }
}

fn one_evaluation() -> Evaluation {
    evals(&[0.5], "").evaluations.remove(0)
}

/// The failed-rules streak as first written: a forward pass over every evaluation.
fn failed_rules_streak_forward(evs: &[Evaluation]) -> (Vec<&Evaluation>, Vec<String>) {
    let mut streak: Vec<&Evaluation> = Vec::new();
    let mut set: Vec<String> = Vec::new();
    for e in evs {
        let mut ids = e.failed.clone().unwrap_or_default();
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            streak.clear();
            set.clear();
        } else if ids == set {
            streak.push(e);
        } else {
            streak = vec![e];
            set = ids;
        }
    }
    (streak, set)
}

proptest::proptest! {
    /// Read from the end, the streak is the forward pass's.
    #[test]
    fn the_failed_rules_streak_read_backwards_is_the_forward_one(
        sets in proptest::collection::vec(
            proptest::option::of(proptest::collection::vec(0u8..3, 0..4)),
            0..12,
        ),
    ) {
        let list: Vec<Evaluation> = sets
            .iter()
            .map(|s| {
                let mut e = one_evaluation();
                e.failed = s.as_ref().map(|ids| ids.iter().map(|i| format!("R{i}")).collect());
                e
            })
            .collect();
        let (a, sa) = failed_rules_streak(&list);
        let (b, sb) = failed_rules_streak_forward(&list);
        proptest::prop_assert_eq!(sa, sb);
        proptest::prop_assert_eq!(a.len(), b.len());
        proptest::prop_assert!(a.iter().zip(&b).all(|(x, y)| std::ptr::eq(*x, *y)));
    }
}

#[test]
fn zero_limits_do_not_panic() {
    let cfg = Config {
        limit: 0,
        repeat: 0,
        no_change: 0,
        oscillation_window: 0,
        oscillation_turns: 0,
        stalled_after_ms: 0,
        min_delta: f64::NAN,
        ..Config::default()
    };
    let t = evals(&[0.1, 0.2], "");
    let _ = assess(&t, &cfg, Some(Ts(i64::MIN)), Liveness::Alive);
    let _ = assess(&Trace::default(), &cfg, Some(Ts(i64::MAX)), Liveness::Alive);
}
