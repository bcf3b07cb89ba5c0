//! `stagnation::watch::Watch` (what the metric fold asks after each evaluation) against its
//! oracle, `stagnation::triggered`, after every event of every run of every fixture and of the
//! real-world corpus, with the default settings and with touchier ones, on full and lean traces.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loopctl_core::analysis::liveness::Liveness;
use loopctl_core::analysis::stagnation::watch::Watch;
use loopctl_core::analysis::stagnation::{Config, Reset, triggered};
use loopctl_core::decode::lines::{DEFAULT_MAX_LINE, LineText, Piece, Splitter, decode};
use loopctl_core::decode::parse_line;
use loopctl_core::fold::trace::Trace;
use loopctl_tests::{files_below, repo, shared};

fn configs() -> Vec<Config> {
    vec![
        Config::default(),
        Config {
            limit: 1,
            repeat: 2,
            no_change: 2,
            min_delta: 0.05,
            reset: Reset::Never,
            oscillation_window: 4,
            oscillation_turns: 1,
            ..Config::default()
        },
        // As touchy as it gets: any evaluation without a big gain, any failure.
        Config {
            limit: 1,
            repeat: 1,
            no_change: 1,
            min_delta: 0.5,
            oscillation_window: 4,
            oscillation_turns: 1,
            ..Config::default()
        },
    ]
}

/// Folds each run of `log` event by event, comparing a watch with `triggered` after each one.
/// Gives (events checked, assessments where something triggered).
fn check_log(log: &Path) -> (usize, usize) {
    let bytes = std::fs::read(log).unwrap();
    let mut events = Vec::new();
    let mut sp = Splitter::new(DEFAULT_MAX_LINE);
    let mut take = |p: Piece<'_>| {
        if let Piece::Line(_, raw) | Piece::Unterminated(_, raw) = p
            && let LineText::Text(text) = decode(raw)
        {
            events.push(text.to_string());
        }
    };
    sp.push(&bytes, &mut take);
    sp.finish(&mut take);
    let (mut checked, mut hits) = (0, 0);
    for cfg in configs() {
        for lean in [false, true] {
            let mut runs: BTreeMap<String, (Trace, Watch)> = BTreeMap::new();
            for (n, line) in events.iter().enumerate() {
                let Ok(ev) = parse_line(line) else {
                    continue;
                };
                // Routed as `Traces` routes them.
                let id = ev.run_id.as_deref().unwrap_or("default").to_string();
                let (trace, watch) = runs.entry(id.clone()).or_insert_with(|| {
                    let t = if lean { Trace::lean() } else { Trace::new() };
                    (t, Watch::new(&cfg))
                });
                trace.apply(&ev);
                let want = triggered(trace, &cfg, None, Liveness::Unknown);
                let got = watch.triggered(trace, None, Liveness::Unknown);
                assert_eq!(
                    got,
                    want,
                    "{} line {} (run {id}, lean {lean}): {cfg:?}",
                    log.display(),
                    n + 1
                );
                checked += 1;
                hits += usize::from(!want.is_empty());
            }
        }
    }
    (checked, hits)
}

fn logs_below(dir: &Path) -> Vec<PathBuf> {
    files_below(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl" || e == "ndjson"))
        .collect()
}

#[test]
fn the_watch_agrees_with_triggered_after_every_event_of_every_fixture() {
    let (mut checked, mut hits) = (0, 0);
    for log in logs_below(&repo().join("fixtures")) {
        let (c, h) = check_log(&log);
        checked += c;
        hits += h;
    }
    assert!(checked > 500, "events checked: {checked}");
    assert!(hits > 20, "assessments that triggered: {hits}");
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn the_watch_agrees_with_triggered_after_every_event_of_the_corpus() {
    let Some(shared) = shared("the stagnation watch over the real-world corpus") else {
        return;
    };
    // Its few evaluations trigger nothing, even with the touchiest settings: what this checks is
    // that both read its dialects' events alike.
    let checked: usize = logs_below(&shared.join("corpus"))
        .iter()
        .map(|log| check_log(log).0)
        .sum();
    assert!(checked > 100, "events checked: {checked}");
}
