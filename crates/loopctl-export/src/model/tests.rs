//! Merged logs whose runs end, resume (some under a new alias) and end again: the same series
//! folded in one pass or in shards merged; no counter or histogram goes down while they are
//! followed; a dropped log takes back its gauges only.

use proptest::prelude::*;

use super::*;
use std::collections::HashMap;

const RUNS: &[&str] = &[
    "billing-20260101-000001",
    "billing-20260101-000002",
    "9f8e7d",
    "search-20260102-000003",
];

/// One event of a generated log: (run, kind, variant, seq repeated).
type Step = (usize, u8, u8, bool);

fn lines(steps: &[Step]) -> Vec<String> {
    let mut seqs = [0u64; 4];
    steps
        .iter()
        .enumerate()
        .map(|(i, &(run, kind, variant, repeat))| {
            if !repeat {
                seqs[run] += 1;
            }
            let step = ["build", "test"][usize::from(variant % 2)];
            let (event, payload) = match kind {
                0 if variant % 3 == 0 => ("run_started", r#"{"task":"t"}"#.to_string()),
                0 => (
                    "run_started",
                    format!(r#"{{"task_alias":"{}"}}"#, ["billing", "ops"][usize::from(variant % 2)]),
                ),
                1 => ("run_resumed", "{}".to_string()),
                2 => ("phase_started", "{}".to_string()),
                3 => ("phase_finished", r#"{"stop_reason":"end_turn"}"#.to_string()),
                4 => (
                    "evaluation_done",
                    format!(r#"{{"score":0.{variant},"passed":{}}}"#, variant > 5),
                ),
                5 => ("stopped", r#"{"reason":"user_stop"}"#.to_string()),
                6 => ("failed", r#"{"error":"boom"}"#.to_string()),
                _ => (
                    "usage",
                    format!(
                        r#"{{"usage":{{"input_tokens":{variant},"output_tokens":3,"cache_read_input_tokens":{variant},"cache_creation_input_tokens":2}},"cost_usd":0.25}}"#
                    ),
                ),
            };
            format!(
                r#"{{"v":1,"seq":{},"ts":"2026-01-01T00:{:02}:{:02}.000Z","run_id":"{}","event":"{event}","step":"{step}","iteration":1,"payload":{payload}}}"#,
                seqs[run],
                i / 60 % 60,
                i % 60,
                RUNS[run],
            )
        })
        .collect()
}

fn fold(m: &mut MetricState, source: SourceId, lines: &[String]) {
    for l in lines {
        if let Ok(ev) = loopctl_core::parse_line(l) {
            m.apply(source, &ev);
        }
    }
}

fn series(m: &MetricState) -> Vec<(SeriesKey, Val)> {
    m.series()
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Counters and histograms (not gauges) by series: what must never go down.
fn counted(m: &MetricState) -> Vec<(SeriesKey, Val)> {
    series(m)
        .into_iter()
        .filter(|(k, _)| k.0.kind() != super::Type::Gauge)
        .collect()
}

/// Whether every series of `before` is still there in `after`, none lower.
fn none_went_down(before: &[(SeriesKey, Val)], after: &[(SeriesKey, Val)]) -> bool {
    let now: HashMap<&SeriesKey, &Val> = after.iter().map(|(k, v)| (k, v)).collect();
    before.iter().all(|(k, v)| match (v, now.get(k)) {
        (Val::Count(a), Some(Val::Count(b))) => b >= a,
        (Val::Hist(a), Some(Val::Hist(b))) => {
            b.count >= a.count && a.buckets.iter().zip(&b.buckets).all(|(x, y)| y >= x)
        }
        _ => false,
    })
}

fn check(steps: &[Step]) {
    let lines = lines(steps);
    // Followed line by line, as `serve` does once started.
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("merged");
    let mut before = Vec::new();
    for l in &lines {
        fold(&mut m, s, std::slice::from_ref(l));
        let now = counted(&m);
        assert!(none_went_down(&before, &now), "after {l}");
        before = now;
    }

    // In two shards by run, folded alone and merged, as the start-up folds a large log; the
    // shards settled (their runs' tallies summed on their threads) as the driver does, or not.
    let mut merged = MetricState::new(Options::default());
    let mut s2 = 0;
    for settle in [true, false] {
        let mut shards = [0, 1].map(|_| MetricState::alone(&Options::default(), "merged"));
        for l in &lines {
            if let Ok(ev) = loopctl_core::parse_line(l) {
                let run = ev.run_id.as_deref().unwrap_or("");
                shards[usize::from(run.len() % 2 == 0)].apply(0, &ev);
            }
        }
        if settle {
            shards.iter_mut().for_each(MetricState::settle);
        }
        let [mut a, b] = shards;
        a.join(b);
        merged = MetricState::new(Options::default());
        s2 = merged.add_source("merged");
        assert!(merged.absorb(s2, a).is_ok());
        assert_eq!(series(&merged), series(&m), "settled {settle}");
    }

    // A forgotten log takes back its gauges only.
    let counted = counted(&m);
    m.drop_source(s);
    merged.drop_source(s2);
    assert_eq!(series(&m), counted);
    assert_eq!(series(&merged), counted);
}

#[test]
fn a_run_resumed_under_a_new_alias_counts_on_under_it_and_leaves_its_old_counts() {
    // The bare id runs and stops (under the folder's label), is resumed naming its alias,
    // runs a phase and fails.
    let steps = [
        (2, 2, 0, false),
        (2, 3, 0, false),
        (2, 4, 3, false),
        (2, 7, 4, false),
        (2, 5, 0, false),
        (0, 0, 3, false),
        (2, 0, 4, false),
        (2, 2, 1, false),
        (2, 3, 1, false),
        (2, 4, 8, false),
        (2, 6, 0, false),
        (2, 7, 2, false),
    ];
    check(&steps);
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("merged");
    fold(&mut m, s, &lines(&steps[..5]));
    let key = |m: Metric, l: &str, v: &str| (m, vec![l.to_string(), v.to_string()]);
    let fail = |l: &str| key(Metric::Evaluations, l, "fail");
    let runs = |l: &str, status: &str| (Metric::Runs, vec![l.to_string(), status.to_string()]);
    assert_eq!(m.get(&fail("merged")), Some(&Val::Count(1)));
    assert_eq!(m.get(&runs("merged", "stopped")), Some(&Val::Count(1)));
    fold(&mut m, s, &lines(&steps)[5..]);
    // Its first evaluation stays counted where it was; its second counts under `billing`.
    assert_eq!(m.get(&fail("merged")), Some(&Val::Count(1)));
    assert_eq!(
        m.get(&key(Metric::Evaluations, "billing", "pass")),
        Some(&Val::Count(1))
    );
    // Its gauge moved: the run is one `failed` run of `billing`, and no run of `merged`.
    assert_eq!(m.get(&runs("merged", "stopped")), None);
    assert_eq!(m.get(&runs("billing", "failed")), Some(&Val::Count(1)));
    assert!(m.loops().contains("billing"));
}

#[test]
fn a_run_whose_first_event_names_its_alias_counts_under_it_from_its_start() {
    // A run id and a folder that are not its alias, its first event naming the alias.
    let line = |seq: u64, event: &str, payload: &str| {
        format!(
            r#"{{"v":1,"seq":{seq},"ts":"2026-01-01T00:00:0{seq}.000Z","run_id":"rid","event":"{event}","payload":{payload}}}"#
        )
    };
    let lines = [
        line(0, "run_started", r#"{"task_alias":"plain"}"#),
        line(1, "evaluation_done", r#"{"score":0.5,"passed":false}"#),
        line(2, "stopped", r#"{"reason":"user_stop"}"#),
    ];
    // One loop at most: the alias must be the one kept, no place taken by the folder's name.
    let options = Options {
        max_loops: 1,
        ..Options::default()
    };
    for alone in [false, true] {
        let mut m = if alone {
            MetricState::alone(&options, "fold")
        } else {
            MetricState::new(options.clone())
        };
        let s = if alone { 0 } else { m.add_source("fold") };
        fold(&mut m, s, &lines);
        if alone {
            let mut shared = MetricState::new(options.clone());
            let source = shared.add_source("fold");
            assert!(shared.absorb(source, m).is_ok(), "the caps do not bind");
            m = shared;
        }
        let one = |metric: Metric| (metric, vec!["plain".to_string()]);
        assert_eq!(
            m.get(&one(Metric::RunsStarted)),
            Some(&Val::Count(1)),
            "alone: {alone}"
        );
        assert_eq!(
            m.get(&(Metric::Runs, vec!["plain".into(), "stopped".into()])),
            Some(&Val::Count(1))
        );
        assert_eq!(m.loops(), BTreeSet::from(["plain"]), "alone: {alone}");
        assert!(m.take_notices().is_empty(), "nothing folded into other");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn shards_merged_equal_one_fold_and_no_counter_goes_down(
        steps in prop::collection::vec((0usize..4, 0u8..8, 0u8..10, prop::bool::weighted(0.05)), 0..120)
    ) {
        check(&steps);
    }
}

#[test]
fn stamped_run_ids_hash_apart_and_ids_alike_but_for_their_middle_stay_apart() {
    use std::hash::BuildHasher;
    let h = std::hash::BuildHasherDefault::<IdHasher>::default();
    let ids: Vec<String> = (0..1000)
        .map(|i| format!("auth-gateway-20260218-1303{:02}-{i:06}", i % 60))
        .collect();
    let hashes: std::collections::HashSet<u64> = ids.iter().map(|id| h.hash_one(id)).collect();
    assert_eq!(hashes.len(), ids.len());
    // Same length, same first and last eight bytes: one hash, and still two runs.
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("merged");
    let (a, b) = ("billing-x-20260101-000001", "billing-y-20260101-000001");
    assert_eq!(h.hash_one(a), h.hash_one(b));
    for id in [a, b] {
        let line = format!(
            r#"{{"v":1,"seq":1,"ts":"2026-01-01T00:00:00.000Z","run_id":"{id}","event":"run_started","payload":{{}}}}"#
        );
        fold(&mut m, s, &[line]);
    }
    assert_eq!(m.runs().count(), 2);
}

#[test]
fn cost_is_read_at_the_top_of_a_payload_else_in_its_usage_object() {
    // The runner puts an agent's cost in `usage` (docs/runner.md); Claude's result events at
    // the top. Both at once: the top's, not the sum.
    let run = r#""run_id":"costly-20260101-000000""#;
    let lines = [
        format!(r#"{{"v":1,"seq":1,{run},"event":"run_started"}}"#),
        format!(
            r#"{{"v":1,"seq":2,{run},"event":"phase_finished","step":"work","payload":{{"usage":{{"input_tokens":10,"cost_usd":0.0579}}}}}}"#
        ),
        format!(
            r#"{{"v":1,"seq":3,{run},"event":"note","payload":{{"cost_usd":0.25,"usage":{{"cost_usd":9}}}}}}"#
        ),
    ];
    let mut m = MetricState::new(Options::default());
    let source = m.add_source("costly");
    fold(&mut m, source, &lines);
    let text = crate::textfile::render(m).unwrap();
    assert!(
        text.contains("loopctl_cost_usd_total{loop=\"costly\"} 0.3079\n"),
        "{text}"
    );
}

/// Token counts past i64 (a damaged or hostile log) saturate: the counter never reads negative,
/// folded line by line or alone and merged.
#[test]
fn token_totals_past_i64_saturate_instead_of_going_negative() {
    let run = r#""run_id":"huge-20260101-000000""#;
    let lines: Vec<String> = (1..=3)
        .map(|seq| {
            format!(
                r#"{{"v":1,"seq":{seq},{run},"event":"note","payload":{{"tokens_in":18446744073709551615,"tokens_out":9223372036854775807}}}}"#
            )
        })
        .collect();
    let mut m = MetricState::new(Options::default());
    let source = m.add_source("huge");
    fold(&mut m, source, &lines);
    let mut alone = MetricState::alone(&Options::default(), "huge");
    fold(&mut alone, 0, &lines);
    let mut merged = MetricState::new(Options::default());
    let s2 = merged.add_source("huge");
    assert!(merged.absorb(s2, alone).is_ok());
    for model in [m, merged] {
        let tokens: Vec<i64> = model
            .series()
            .iter()
            .filter(|(k, _)| k.0 == super::Metric::Tokens)
            .map(|(_, v)| match v {
                Val::Count(n) => *n,
                Val::Hist(_) => panic!("a counter"),
            })
            .collect();
        assert_eq!(tokens, [i64::MAX, i64::MAX], "{tokens:?}");
    }
}

/// A known loop's `runs_finished_total` pairs are exported at 0 before any run ends that way,
/// so that `increase()` sees the first failure; the pairs a run ended with keep their value.
#[test]
fn runs_finished_is_exported_at_zero_for_every_pair_of_a_known_loop() {
    let run = r#""run_id":"zero-20260101-000000""#;
    let lines = [
        format!(r#"{{"v":1,"seq":1,{run},"event":"run_started"}}"#),
        format!(
            r#"{{"v":1,"seq":2,{run},"event":"stopped","payload":{{"reason":"threshold_reached"}}}}"#
        ),
    ];
    let mut m = MetricState::new(Options::default());
    let source = m.add_source("zero");
    fold(&mut m, source, &lines);
    let text = crate::textfile::render(m).unwrap();
    let finished: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("loopctl_runs_finished_total{"))
        .collect();
    assert!(finished.contains(&r#"loopctl_runs_finished_total{loop="zero",status="completed",exit_reason="threshold_reached"} 1"#), "{finished:#?}");
    assert!(finished.contains(&r#"loopctl_runs_finished_total{loop="zero",status="failed",exit_reason="phase_error"} 0"#), "{finished:#?}");
    let pairs: usize = super::FINISHED_REASONS.iter().map(|(_, r)| r.len()).sum();
    assert_eq!(finished.len(), pairs, "{finished:#?}");
    let mut sorted = finished.clone();
    sorted.sort();
    assert_eq!(finished, sorted, "in series order");
}

/// A loop whose logs are all deleted stays known (its counters stay): its closed-set series
/// are still exported, at 0, so that its next run's end is seen by `increase()`.
#[test]
fn a_loop_whose_logs_are_deleted_keeps_its_zero_series() {
    let run = r#""run_id":"gone-20260101-000000""#;
    let lines = [
        format!(r#"{{"v":1,"seq":1,{run},"event":"run_started"}}"#),
        format!(r#"{{"v":1,"seq":2,{run},"event":"failed","payload":{{"reason":"timeout"}}}}"#),
    ];
    let mut m = MetricState::new(Options::default());
    let source = m.add_source("gone");
    fold(&mut m, source, &lines);
    let before = crate::textfile::render(m.clone()).unwrap();
    m.drop_source(source);
    let after = crate::textfile::render(m).unwrap();
    let of = |text: &str, prefix: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .map(String::from)
            .collect()
    };
    let finished = "loopctl_runs_finished_total{";
    assert_eq!(of(&after, finished), of(&before, finished), "{after}");
    let runs = of(&after, "loopctl_runs{");
    assert_eq!(runs.len(), 5, "{after}");
    assert!(runs.iter().all(|l| l.ends_with(" 0")), "{runs:#?}");
    assert!(
        of(&before, "loopctl_runs{")
            .iter()
            .any(|l| l.ends_with(" 1"))
    );
}

#[test]
fn observations_are_placed_in_whole_units_as_in_exported_units() {
    for m in Metric::ALL {
        let Some(units) = m.bounds_in_units() else {
            continue;
        };
        assert_eq!(units.len(), m.buckets().len(), "{m:?}");
        let mut xs = vec![i64::MIN, -1, 0, 1, i64::MAX, 1 << 53, (1 << 53) + 1];
        for b in units {
            xs.extend([b - 1, *b, b + 1]);
        }
        for x in xs {
            let exported = x as f64 / m.scale();
            let by_division = m
                .buckets()
                .iter()
                .position(|b| exported <= *b)
                .unwrap_or(m.buckets().len());
            assert_eq!(bucket_of(m, x), by_division, "{m:?} {x}");
        }
    }
}

/// aif-loop runs of `loops` loops, two each, every run through `phases` steps and a stop.
fn many_loops(loops: usize, phases: usize) -> Vec<String> {
    let mut out = Vec::new();
    for l in 0..loops {
        for r in 0..2 {
            let run = format!("loop{l}-20260101-00000{r}");
            for p in 0..=phases {
                let (event, step) = match p {
                    p if p == phases => ("stopped", "STOP".to_string()),
                    p => ("artifact_created", format!("STEP{p}")),
                };
                out.push(format!(
                    r#"{{"ts":"2026-01-01T00:00:{p:02}.000Z","run_id":"{run}","seq":{p},"iteration":1,"phase":"A","step":"{step}","event":"{event}","status":"ok","payload":{{}}}}"#
                ));
            }
        }
    }
    out
}

#[test]
fn a_long_list_of_kept_phases_is_looked_up_by_hash_as_by_scan() {
    // 6 loops of 5 steps and a stop: 36 phases kept, past the length scanned.
    let lines = many_loops(6, 5);
    let mut alone = MetricState::alone(&Options::default(), "merged");
    fold(&mut alone, 0, &lines);
    // Each loop's second run finds its phases kept: none kept twice.
    assert_eq!(alone.caps.take_kept_alone().len(), 36);

    let mut alone = MetricState::alone(&Options::default(), "merged");
    fold(&mut alone, 0, &lines);
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("merged");
    fold(&mut m, s, &lines);
    let mut merged = MetricState::new(Options::default());
    let s2 = merged.add_source("merged");
    assert!(merged.absorb(s2, alone).is_ok());
    assert_eq!(series(&merged), series(&m));
}
