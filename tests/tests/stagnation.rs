//! `stagnation::assess` with the default config agrees with the reducer's `stagnation_count` on
//! every run of every fixture and of the real-world corpus, and the postmortem of every run
//! renders without panicking and deterministically.

use std::path::Path;

use loopctl_core::postmortem::{Format, Report};
use loopctl_core::replay_bytes;
use loopctl_core::stagnation::{Config, Detector, assess, score_streak};
use loopctl_core::trace::traces_from_bytes;
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
        let v = assess(trace, &cfg, None);
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
    let a = assess(&traces["stag-a-20260311-090000"], &cfg, None);
    let f = a.finding(Detector::Score).unwrap();
    assert!(f.triggered);
    assert_eq!(
        (f.iterations.clone(), f.scores.clone()),
        (vec![2, 3], vec![0.51, 0.515])
    );
    let b = assess(&traces["stag-b-20260311-091500"], &cfg, None);
    let f = b.finding(Detector::Score).unwrap();
    assert!(!f.triggered);
    assert_eq!(
        f.iterations,
        vec![4],
        "blocked evaluations do not count; 0.52 does"
    );
}
