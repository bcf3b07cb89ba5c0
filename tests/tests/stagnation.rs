//! `stagnation::assess` with the default config agrees with the reducer's `stagnation_count` on
//! every run of every fixture and of the real-world corpus, and the postmortem of every run
//! renders without panicking and deterministically.

use std::path::Path;

use loopctl_core::analysis::liveness::Liveness;
use loopctl_core::analysis::postmortem::{Format, Report};
use loopctl_core::analysis::stagnation::{Config, Detector, assess, score_streak};
use loopctl_core::fold::trace::traces_from_bytes;
use loopctl_core::replay_bytes;
use loopctl_tests::{files_below, repo, shared};

/// Checks every run of one log; returns how many runs it checked.
fn check_log(log: &Path) -> usize {
    let bytes = std::fs::read(log).unwrap();
    let out = replay_bytes("default", &bytes);
    let traces = traces_from_bytes("default", &bytes);
    assert_eq!(
        out.runs.keys().collect::<Vec<_>>(),
        traces.keys().collect::<Vec<_>>(),
        "{}: the same runs",
        log.display()
    );
    let cfg = Config::default();
    for (id, state) in &out.runs {
        let trace = &traces[id];
        let streak = score_streak(trace, &cfg);
        assert_eq!(
            streak.len() as u64,
            state.stagnation_count,
            "{} run {id}: assess's score count vs the reducer's stagnation_count",
            log.display()
        );
        let v = assess(trace, &cfg, None, Liveness::Alive);
        let score = v.finding(Detector::Score).unwrap();
        assert_eq!(score.triggered, state.stagnation_count >= cfg.limit);
        assert_eq!(score.iterations.len() as u64, state.stagnation_count);
        let a = Report::build(state, trace, &v);
        let b = Report::build(state, trace, &v);
        for f in [Format::Text, Format::Markdown, Format::Json] {
            assert_eq!(a.render(f), b.render(f));
        }
        let json: serde_json::Value = serde_json::from_str(&a.render(Format::Json)).unwrap();
        assert_eq!(json["run_id"], id.as_str());
        assert_eq!(
            json["scores"]["points"].as_array().unwrap().len(),
            state.score_history.len(),
            "{} run {id}: one score point per scored evaluation",
            log.display()
        );
    }
    out.runs.len()
}

fn logs_below(dir: &Path) -> Vec<std::path::PathBuf> {
    files_below(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl" || e == "ndjson"))
        .collect()
}

#[test]
fn score_detector_agrees_with_the_reducer_on_every_fixture() {
    let runs: usize = logs_below(&repo().join("fixtures"))
        .iter()
        .map(|l| check_log(l))
        .sum();
    assert!(runs >= 20, "fixture runs checked: {runs}");
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn score_detector_agrees_with_the_reducer_on_the_corpus() {
    let Some(shared) = shared("stagnation over the real-world corpus") else {
        return;
    };
    let logs = logs_below(&shared.join("corpus"));
    assert!(logs.len() >= 5, "corpus logs: {logs:?}");
    let runs: usize = logs.iter().map(|l| check_log(l)).sum();
    assert!(runs >= 5);
}

#[test]
fn the_stagnation_fixture_counts_like_its_expectation() {
    let bytes = std::fs::read(repo().join("fixtures/stagnation/history.jsonl")).unwrap();
    let traces = traces_from_bytes("stagnation", &bytes);
    let cfg = Config::default();
    let a = assess(
        &traces["stag-a-20260311-090000"],
        &cfg,
        None,
        Liveness::Alive,
    );
    let f = a.finding(Detector::Score).unwrap();
    assert!(f.triggered);
    assert_eq!(
        (f.iterations.clone(), f.scores.clone()),
        (vec![2, 3], vec![0.51, 0.515])
    );
    let b = assess(
        &traces["stag-b-20260311-091500"],
        &cfg,
        None,
        Liveness::Alive,
    );
    let f = b.finding(Detector::Score).unwrap();
    assert!(!f.triggered);
    assert_eq!(
        f.iterations,
        vec![4],
        "blocked evaluations do not count; 0.52 does"
    );
}

mod props {
    use loopctl_core::analysis::liveness::Liveness;
    use loopctl_core::analysis::postmortem::{Format, Report};
    use loopctl_core::analysis::stagnation::{Config, Reset, assess};
    use loopctl_core::fold::trace::traces_from_bytes;
    use loopctl_core::{Ts, replay_bytes};
    use proptest::prelude::*;
    use serde_json::json;

    /// One line of any dialect, with odd but well-formed values (negative or huge timestamps,
    /// scores outside 0..1, missing fields, wrong types).
    fn line() -> impl Strategy<Value = String> {
        let events = prop::sample::select(vec![
            "run_started",
            "run_resumed",
            "evaluation_done",
            "phase_started",
            "phase_finished",
            "phase_retry",
            "phase_error",
            "phase_switched",
            "escalated",
            "transition",
            "stopped",
            "failed",
            "iteration_advanced",
            "avenor.phase.start",
            "avenor.phase.end",
            "avenor.loop.end",
            "session.end",
        ]);
        (
            events,
            prop::option::of(0u64..6),
            prop::option::of(prop::sample::select(vec!["A", "B", "A_B"])),
            prop::option::of(prop::sample::select(vec!["fix", "review", "EVALUATE", "PLAN"])),
            prop::option::of(prop_oneof![
                Just(i64::MIN / 2),
                Just(i64::MAX / 2),
                0i64..4_000_000_000_000
            ]),
            prop::option::of(1u64..40),
            prop::option::of(-2.0f64..3.0),
            prop::option::of(prop::collection::vec(
                prop::sample::select(vec!["R1", "R2", "W1"]),
                0..3,
            )),
            prop::option::of(prop_oneof![Just(json!("x")), Just(json!(-5)), (0u64..100_000).prop_map(|d| json!(d))]),
            any::<bool>(),
            prop::option::of(prop::sample::select(vec!["c1", "c2"])),
            prop::option::of(-1i64..3),
        )
            .prop_map(
                |(ev, it, phase, step, ts, seq, score, failed, dur, native, commit, code)| {
                    let mut o = serde_json::Map::new();
                    o.insert("event".into(), json!(ev));
                    o.insert("run_id".into(), json!("r"));
                    if native && !ev.contains('.') {
                        o.insert("v".into(), json!(1));
                    }
                    if let Some(s) = seq {
                        o.insert("seq".into(), json!(s));
                    }
                    if let Some(t) = ts {
                        o.insert("ts".into(), json!(t));
                    }
                    if let Some(i) = it {
                        o.insert("iteration".into(), json!(i));
                    }
                    if let Some(p) = phase {
                        o.insert("phase".into(), json!(p));
                    }
                    if let Some(s) = step {
                        o.insert("step".into(), json!(s));
                    }
                    let payload = json!({
                        "score": score, "failed": failed, "duration_ms": dur, "exit_code": code,
                        "stop_reason": if code == Some(0) { "end_turn" } else { "error" },
                        "commit": commit, "worktree": commit, "to_phase": "B", "error": "boom 42",
                        "goto": ["fix"], "end": {"reason": "stagnation"}, "reason": "iteration_limit",
                    });
                    if ev.contains('.') {
                        if let serde_json::Value::Object(p) = payload {
                            o.extend(p);
                        }
                    } else {
                        o.insert("payload".into(), payload);
                    }
                    serde_json::Value::Object(o).to_string()
                },
            )
    }

    proptest! {
        #[test]
        fn any_log_assesses_and_renders_deterministically(
            lines in prop::collection::vec(line(), 0..40),
            now in prop::option::of(prop_oneof![Just(i64::MIN), Just(i64::MAX), 0i64..4_000_000_000_000]),
            never in any::<bool>(),
            limit in 0u64..4,
        ) {
            let text = lines.join("\n") + "\n";
            let out = replay_bytes("d", text.as_bytes());
            let traces = traces_from_bytes("d", text.as_bytes());
            let cfg = Config {
                limit,
                repeat: limit,
                no_change: limit,
                reset: if never { Reset::Never } else { Reset::OnProgress },
                ..Config::default()
            };
            for (id, state) in &out.runs {
                let trace = &traces[id];
                let v = assess(trace, &cfg, now.map(Ts), Liveness::Alive);
                prop_assert_eq!(&v, &assess(trace, &cfg, now.map(Ts), Liveness::Alive));
                let r = Report::build(state, trace, &v);
                for f in [Format::Text, Format::Markdown, Format::Json] {
                    prop_assert_eq!(r.render(f), Report::build(state, trace, &v).render(f));
                }
            }
        }
    }
}
