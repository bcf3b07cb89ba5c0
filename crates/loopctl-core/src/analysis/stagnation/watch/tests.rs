//! `Watch` against its oracle, `triggered`, after every event of generated logs rich in what the
//! detectors read, with their settings varied, on traces of every mode. The fixtures and the
//! corpus are checked the same way in `tests/tests/stagnation_watch.rs`.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::super::{Config, Reset, triggered};
use super::Watch;
use crate::analysis::liveness::Liveness;
use crate::decode::parse_line;
use crate::decode::timestamp::Ts;
use crate::fold::trace::Trace;

/// Folds `lines` into a trace of each mode, asking each trace's watches after every event
/// (one watch) and where `ask` says (another, so that it reads many events at once), and
/// compares them with `triggered`. Gives how many assessments triggered something.
fn check(lines: &[String], cfg: &Config, ask: &[bool], now: Option<Ts>, runner: Liveness) -> usize {
    let mut hits = 0;
    for mut trace in [Trace::new(), Trace::lean(), Trace::ends(1)] {
        let (mut every, mut some) = (Watch::new(cfg), Watch::new(cfg));
        for (n, line) in lines.iter().enumerate() {
            let Ok(ev) = parse_line(line) else {
                continue;
            };
            trace.apply(&ev);
            let want = triggered(&trace, cfg, now, runner);
            let got = every.triggered(&trace, now, runner);
            assert_eq!(
                got, want,
                "after event {n} ({line}), asked after each, {cfg:?}"
            );
            if ask.get(n).copied().unwrap_or(true) {
                let got = some.triggered(&trace, now, runner);
                assert_eq!(got, want, "after event {n} ({line}), asked now and then");
            }
            hits += usize::from(!want.is_empty());
        }
    }
    hits
}

/// A native event; null fields are left out.
fn event(kind: &str, fields: Value, payload: Value) -> String {
    let mut o = json!({"v": 1, "run_id": "r", "event": kind});
    if let (Value::Object(o), Value::Object(f)) = (&mut o, fields) {
        o.extend(f);
        o.insert("payload".into(), payload);
    }
    without_nulls(o).to_string()
}

fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        v => v,
    }
}

/// One event: evaluations (scores near each other, blockers, failed rule sets, quality phases),
/// phase attempts (names, iterations, kinds told at the start or only at the end, errors that
/// differ only in numbers, git fingerprints), aif-loop steps and errors, switches, stops and
/// restarts; most with a timestamp.
/// `aif`: only aif-loop events (no explicit phase events, so the detectors read derived steps).
fn line(aif: bool) -> impl Strategy<Value = String> {
    let kinds = if aif {
        aif_kinds().boxed()
    } else {
        kinds().boxed()
    };
    (kinds, prop::option::of(0i64..4_000_000_000_000)).prop_map(|(line, ts)| match ts {
        Some(ts) => line.replacen('{', &format!("{{\"ts\":{ts},"), 1),
        None => line,
    })
}

fn kinds() -> impl Strategy<Value = String> {
    let score = prop_oneof![
        Just(0.5),
        Just(0.51),
        Just(0.52),
        Just(0.6),
        Just(0.8),
        Just(0.82),
        0.0f64..1.0
    ];
    let rules = prop::collection::vec(prop::sample::select(vec!["R1", "R2", "R3"]), 0..3);
    let it = prop::option::of(0u64..5);
    let q = prop::option::of(prop::sample::select(vec!["A", "B"]));
    let name = prop::sample::select(vec!["plan", "code", "review"]);
    let kind = prop::option::of(prop::sample::select(vec!["pre", "loop", "post"]));
    let commit = prop::option::of(prop::sample::select(vec!["c1", "c2"]));
    let error = prop::option::of(prop::sample::select(vec![
        "boom 1",
        "boom 2",
        "crash at /a/b",
    ]));
    prop_oneof![
        4 => (score.clone(), prop::option::of(any::<bool>()), prop::option::of(rules.clone()), prop::option::of(0u64..2), it.clone(), q.clone())
            .prop_map(|(score, passed, failed, fails, it, q)| {
                event("evaluation_done", json!({"iteration": it, "phase": q}),
                    json!({"score": score, "passed": passed, "failed": failed, "fail_count": fails}))
            }),
        // Long lists of rules, most naming every rule of 18 (the same set), some one short.
        1 => (prop::collection::vec(0u8..18, 25..40), it.clone()).prop_map(|(ids, it)| {
                let failed: Vec<String> = ids.iter().map(|i| format!("L{i}")).collect();
                event("evaluation_done", json!({"iteration": it}), json!({"passed": false, "failed": failed}))
            }),
        1 => (prop::option::of(rules), it.clone()).prop_map(|(failed, it)| {
                event("evaluation_done", json!({"iteration": it}), json!({"passed": false, "failed": failed}))
            }),
        3 => (name.clone(), it.clone(), kind.clone(), commit.clone()).prop_map(|(n, it, kind, c)| {
                event("phase_started", json!({"iteration": it}), json!({"phase": n, "kind": kind, "commit": c, "worktree": c}))
            }),
        4 => (name, it.clone(), kind, commit, error, prop::option::of(-1i64..2), any::<bool>())
            .prop_map(|(n, it, kind, c, error, code, ok)| {
                event("phase_finished", json!({"iteration": it}), json!({
                    "phase": n, "kind": kind, "commit": c, "worktree": if ok { c } else { None },
                    "error": error, "exit_code": code,
                    "stop_reason": if ok { "end_turn" } else { "error" },
                }))
            }),
        3 => aif_kinds(),
        1 => q.prop_map(|q| event("phase_switched", json!({}), json!({"to_phase": q}))),
        1 => prop::sample::select(vec!["stopped", "failed", "run_resumed", "run_started"])
            .prop_map(|k| event(k, json!({}), json!({"final_score": 0.5, "error": "died 7"}))),
    ]
}

/// An aif-loop event: a step's event, an error that ends the step as failed (errors that differ
/// only in numbers), or an evaluation (scores, failed rules, quality phases).
fn aif_kinds() -> impl Strategy<Value = String> {
    let step = prop::sample::select(vec!["PLAN", "IMPLEMENT", "EVALUATE"]);
    let score = prop_oneof![Just(0.5), Just(0.51), Just(0.6), 0.0f64..1.0];
    let rules = prop::collection::vec(prop::sample::select(vec!["R1", "R2"]), 0..2);
    let error = prop::option::of(prop::sample::select(vec!["oops 1", "oops 22", "other"]));
    (
        step,
        prop::option::of(0u64..4),
        prop::option::of(prop::sample::select(vec!["A", "B"])),
        prop::option::of(score),
        prop::option::of(rules),
        any::<bool>(),
        error,
    )
        .prop_map(|(step, it, q, score, failed, eval, err)| {
            let mut o = json!({"run_id": "r", "step": step, "iteration": it, "phase": q});
            match (err, eval) {
                (Some(e), _) => {
                    o["event"] = json!("phase_error");
                    o["payload"] = json!({"error": e});
                }
                (None, true) => {
                    o["event"] = json!("evaluation_done");
                    o["payload"] = json!({"score": score, "passed": false, "failed": failed});
                }
                (None, false) => o["event"] = json!("iteration_advanced"),
            }
            without_nulls(o).to_string()
        })
}

fn config() -> impl Strategy<Value = Config> {
    (
        0u64..4,
        prop::sample::select(vec![0.0, 0.01, 0.02, 0.1]),
        any::<bool>(),
        0u64..4,
        0u64..3,
        0usize..8,
        0usize..4,
    )
        .prop_map(
            |(limit, min_delta, never, repeat, no_change, window, turns)| Config {
                limit,
                min_delta,
                reset: if never {
                    Reset::Never
                } else {
                    Reset::OnProgress
                },
                repeat,
                no_change,
                oscillation_window: window,
                oscillation_turns: turns,
                stalled_after_ms: 1000,
                ..Config::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_watch_triggers_what_triggered_does_after_every_event(
        lines in any::<bool>().prop_flat_map(|aif| prop::collection::vec(line(aif), 0..80)),
        cfg in config(),
        ask in prop::collection::vec(prop::bool::weighted(0.3), 80),
        now in prop::option::of(0i64..4_000_000_000_000),
        alive in any::<bool>(),
    ) {
        let runner = if alive { Liveness::Alive } else { Liveness::Unknown };
        check(&lines, &cfg, &ask, now.map(Ts), runner);
    }
}

/// The generator reaches every detector: a watch that agreed with an oracle that never
/// triggers would prove nothing.
#[test]
fn generated_logs_trigger_every_detector() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..300 {
        let lines = prop::collection::vec(line(i % 2 == 0), 40..80)
            .new_tree(&mut runner)
            .map(|t| t.current())
            .unwrap_or_default();
        let cfg = Config {
            stalled_after_ms: 0,
            ..Config::default()
        };
        let mut trace = Trace::new();
        for l in &lines {
            if let Ok(ev) = parse_line(l) {
                trace.apply(&ev);
                seen.extend(triggered(&trace, &cfg, Some(Ts(i64::MAX)), Liveness::Alive));
            }
        }
        check(&lines, &cfg, &[], None, Liveness::Unknown);
    }
    assert_eq!(seen.len(), 5, "detectors reached: {seen:?}");
}

fn fixed(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|l| l.to_string()).collect()
}

#[test]
fn an_attempt_finishing_after_a_later_one_of_its_phase_is_read_in_order() {
    // Two attempts of `fix` open; the later one fails first, then the earlier one succeeds: in
    // index order (as `triggered` reads them) the success comes first and three failures in a
    // row follow; in finishing order it would break the run.
    let lines = fixed(&[
        r#"{"v":1,"run_id":"r","event":"phase_started","iteration":1,"payload":{"phase":"fix"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_started","iteration":2,"payload":{"phase":"fix"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_finished","iteration":2,"payload":{"phase":"fix","error":"x 1"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_finished","iteration":1,"payload":{"phase":"fix"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_started","iteration":3,"payload":{"phase":"fix"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_finished","iteration":3,"payload":{"phase":"fix","error":"x 3"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_started","iteration":4,"payload":{"phase":"fix"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_finished","iteration":4,"payload":{"phase":"fix","error":"x 4"}}"#,
    ]);
    assert!(check(&lines, &Config::default(), &[], None, Liveness::Unknown) > 0);
}

#[test]
fn a_kind_told_only_at_the_end_and_an_iteration_reopened_are_read_as_triggered_reads_them() {
    let lines = fixed(&[
        r#"{"v":1,"run_id":"r","event":"phase_started","iteration":1,"payload":{"phase":"a","commit":"c1"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_finished","iteration":1,"payload":{"phase":"a","commit":"c1"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_started","iteration":2,"payload":{"phase":"a","commit":"c1"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_finished","iteration":2,"payload":{"phase":"a","commit":"c1"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_started","iteration":1,"payload":{"phase":"b","commit":"c1"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_finished","iteration":1,"payload":{"phase":"b","commit":"c2"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_started","iteration":3,"payload":{"phase":"c","commit":"c2"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_finished","iteration":3,"payload":{"phase":"c","kind":"post","commit":"c2"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_started","iteration":3,"payload":{"phase":"a","commit":"c2"}}"#,
        r#"{"v":1,"run_id":"r","event":"phase_finished","iteration":3,"payload":{"phase":"a","commit":"c2"}}"#,
    ]);
    let cfg = Config {
        no_change: 2,
        ..Config::default()
    };
    assert!(check(&lines, &cfg, &[], None, Liveness::Unknown) > 0);
}

#[test]
fn long_rule_lists_in_another_order_are_the_same_rules() {
    let ids: Vec<String> = (0..20).map(|i| format!("L{i}")).collect();
    let mut other = ids.clone();
    other.reverse();
    other.push("L3".into());
    let eval = |failed: &[String]| {
        event(
            "evaluation_done",
            json!({}),
            json!({"passed": false, "failed": failed}),
        )
    };
    let lines = vec![eval(&ids), eval(&other), eval(&ids[1..]), eval(&ids[1..])];
    let cfg = Config {
        repeat: 2,
        ..Config::default()
    };
    let mut trace = Trace::new();
    let mut watch = Watch::new(&cfg);
    let mut seen = Vec::new();
    for l in &lines {
        trace.apply(&parse_line(l).unwrap());
        let got = watch.triggered(&trace, None, Liveness::Unknown);
        assert_eq!(got, triggered(&trace, &cfg, None, Liveness::Unknown));
        seen.push(!got.is_empty());
    }
    assert_eq!(seen, [false, true, false, true]);
}
